//! A Hub cache written by huggingface_hub, read with no server at all, and offline mode.

use redraft_models::{Error, ModelFormat};

use crate::{checkpoint_files, commit, weights, World};

#[test]
fn huggingface_hub_cache_is_used_without_a_server() {
    let world = World::without_hub();
    let files: Vec<_> = checkpoint_files()
        .into_iter()
        .filter(|(f, _)| f.ends_with(".json"))
        .collect();
    let mut files = files;
    files.push(("model.safetensors", weights(1000, 20)));
    world.write_hf_cache("org/coder", "main", &commit('a'), &files);
    world.write_hf_cache(
        "org/coder-GGUF",
        "main",
        &commit('b'),
        &[
            ("sub/coder-Q4_K_M.gguf", weights(100, 21)),
            ("coder-Q8_0.gguf", weights(100, 22)),
        ],
    );

    let checkpoint = world.resolve("hf:org/coder").unwrap();
    assert_eq!(
        checkpoint.path,
        world
            .repo_dir("org/coder")
            .join("snapshots")
            .join(commit('a'))
    );
    assert_eq!(checkpoint.format, ModelFormat::SafetensorsDir);
    let gguf = world.resolve("hf:org/coder-GGUF:Q4_K_M").unwrap();
    assert!(gguf.path.ends_with("sub/coder-Q4_K_M.gguf"));
    assert_eq!(std::fs::read(&gguf.path).unwrap(), weights(100, 21));
    let by_sha = world
        .resolve(&format!(
            "hf:org/coder-GGUF/coder-Q8_0.gguf@{}",
            commit('b')
        ))
        .unwrap();
    assert!(by_sha.path.ends_with("coder-Q8_0.gguf"));
}

#[test]
fn offline_mode_reads_the_cache_and_names_the_missing_file() {
    let world = World::without_hub().offline();
    let files: Vec<_> = checkpoint_files()
        .into_iter()
        .filter(|(f, _)| *f != "tokenizer.json")
        .collect();
    world.write_hf_cache("org/coder", "main", &commit('a'), &files);

    let error = world.resolve("hf:org/coder").unwrap_err();
    assert!(matches!(error, Error::Offline { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with("HF_HUB_OFFLINE is set and tokenizer.json of org/coder@main is not in the Hugging Face cache"),
        "{message}"
    );
    let message = world.resolve("hf:org/coder@v2").unwrap_err().to_string();
    assert!(
        message.contains("the commit of `v2` (refs/v2) of org/coder@v2"),
        "{message}"
    );
    let message = world
        .resolve("hf:org/other:Q4_K_M")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("of org/other@main is not in the Hugging Face cache"),
        "{message}"
    );

    world.write_hf_cache(
        "org/coder",
        "main",
        &commit('a'),
        &[("tokenizer.json", b"{}".to_vec())],
    );
    let resolved = world.resolve("hf:org/coder").unwrap();
    assert_eq!(
        resolved.path,
        world
            .repo_dir("org/coder")
            .join("snapshots")
            .join(commit('a'))
    );
}

/// A snapshot entry that is a symlink loop (or a dangling link) is a missing file, not a hang:
/// offline it is named as missing, and the listing passes over it.
#[test]
fn a_symlink_loop_in_a_snapshot_is_a_missing_file() {
    let world = World::without_hub().offline();
    world.write_hf_cache(
        "org/loop-GGUF",
        "main",
        &commit('c'),
        &[("ok-Q8_0.gguf", weights(100, 23))],
    );
    let snapshot = world
        .repo_dir("org/loop-GGUF")
        .join("snapshots")
        .join(commit('c'));
    std::os::unix::fs::symlink("loop-Q4_0.gguf", snapshot.join("loop-Q4_0.gguf")).unwrap();
    std::fs::create_dir(snapshot.join("d")).unwrap();
    std::os::unix::fs::symlink("..", snapshot.join("d/up")).unwrap();

    let message = world
        .resolve("hf:org/loop-GGUF/loop-Q4_0.gguf")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("loop-Q4_0.gguf of org/loop-GGUF@main is not in the Hugging Face cache"),
        "{message}"
    );
    assert!(world
        .resolve("hf:org/loop-GGUF:Q8_0")
        .unwrap()
        .path
        .ends_with("ok-Q8_0.gguf"));
    // A quantization not cached names what is, so that one can be picked without the Hub (the
    // loop is no file).
    let message = world
        .resolve("hf:org/loop-GGUF:Q4_K_M")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(
            "a GGUF file matching `Q4_K_M` (cached: ok-Q8_0.gguf) of org/loop-GGUF@main is \
             not in the Hugging Face cache"
        ),
        "{message}"
    );
    let names: Vec<String> = world
        .resolver()
        .list_local()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["hf:org/loop-GGUF/ok-Q8_0.gguf"]);
}
