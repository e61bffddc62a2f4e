//! GGUF files from the fake Hub: the quantization pick, split files, a named file.

use redraft_models::ModelFormat;

use crate::{commit, tree, weights, World};
use redraft_tests::fake_hub::FakeHub;

const REPO: &str = "org/coder-GGUF";

fn gguf_hub() -> FakeHub {
    let hub = FakeHub::start();
    hub.add_commit(
        REPO,
        &commit('1'),
        &[
            ("coder-IQ4_XS.gguf", weights(1000, 10)),
            ("coder-Q4_K_M.gguf", weights(2000, 11)),
            ("coder-Q4_K_S.gguf", weights(1500, 12)),
            ("coder-Q8_0.gguf", weights(3000, 13)),
            ("mmproj-coder-Q4_K_M.gguf", weights(500, 14)),
            ("big/coder-F16-00001-of-00003.gguf", weights(4000, 15)),
            ("big/coder-F16-00002-of-00003.gguf", weights(4000, 16)),
            ("big/coder-F16-00003-of-00003.gguf", weights(100, 17)),
            ("redraft.json", br#"{"mask_token_id":7}"#.to_vec()),
            ("README.md", b"# quants".to_vec()),
        ],
    );
    hub.set_ref(REPO, "main", &commit('1'));
    hub
}

fn snapshot_files(world: &World) -> Vec<String> {
    tree(&world.repo_dir(REPO).join("snapshots").join(commit('1')))
}

#[test]
fn quant_tag_picks_the_matching_gguf() {
    let hub = gguf_hub();
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/coder-GGUF:q4_k_m").unwrap();
    let snapshot = world.repo_dir(REPO).join("snapshots").join(commit('1'));
    assert_eq!(resolved.path, snapshot.join("coder-Q4_K_M.gguf"));
    assert_eq!(resolved.format, ModelFormat::Gguf);
    assert_eq!(std::fs::read(&resolved.path).unwrap(), weights(2000, 11));
    // Not the projector that sorts first, and the redraft.json beside it came along.
    assert_eq!(
        snapshot_files(&world),
        ["coder-Q4_K_M.gguf", "redraft.json"]
    );

    hub.clear_requests();
    assert_eq!(world.resolve("hf:org/coder-GGUF:Q4_K_M").unwrap(), resolved);
    assert!(hub.requests().is_empty(), "cached");

    let q8 = world.resolve("hf:org/coder-GGUF:Q8_0").unwrap();
    assert_eq!(q8.path, snapshot.join("coder-Q8_0.gguf"));
    let message = world
        .resolve("hf:org/coder-GGUF:Q5_K_M")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("has no GGUF file matching `Q5_K_M`"),
        "{message}"
    );
    assert!(
        message.contains("coder-Q4_K_S.gguf"),
        "lists what there is: {message}"
    );
}

#[test]
fn split_gguf_fetches_every_part() {
    let hub = gguf_hub();
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/coder-GGUF:F16").unwrap();
    let snapshot = world.repo_dir(REPO).join("snapshots").join(commit('1'));
    assert_eq!(
        resolved.path,
        snapshot.join("big/coder-F16-00001-of-00003.gguf")
    );
    for (part, seed, len) in [(1, 15, 4000), (2, 16, 4000), (3, 17, 100)] {
        let file = format!("big/coder-F16-0000{part}-of-00003.gguf");
        world.assert_cached(REPO, &commit('1'), &file, &weights(len, seed));
    }
    hub.clear_requests();
    // Naming the first part gives the same, from the cache.
    let named = world
        .resolve("hf:org/coder-GGUF/big/coder-F16-00001-of-00003.gguf")
        .unwrap();
    assert_eq!(named, resolved);
    assert!(hub.requests().is_empty());
}

#[test]
fn gguf_only_repository_without_a_tag_prefers_q4_k_m() {
    let hub = gguf_hub();
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/coder-GGUF").unwrap();
    assert_eq!(resolved.format, ModelFormat::Gguf);
    assert!(
        resolved.path.ends_with("coder-Q4_K_M.gguf"),
        "{}",
        resolved.path.display()
    );
}

#[test]
fn named_gguf_file_is_fetched_alone() {
    let hub = gguf_hub();
    let world = World::with_hub(&hub);
    let resolved = world
        .resolve("hf:org/coder-GGUF/coder-IQ4_XS.gguf")
        .unwrap();
    assert!(resolved.path.ends_with("coder-IQ4_XS.gguf"));
    assert_eq!(
        snapshot_files(&world),
        ["coder-IQ4_XS.gguf", "redraft.json"]
    );
    let message = world
        .resolve("hf:org/coder-GGUF/nope.gguf")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("has no GGUF file matching `nope.gguf`"),
        "{message}"
    );
}
