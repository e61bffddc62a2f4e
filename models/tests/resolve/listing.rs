//! `list_local` over a Hub cache and an Ollama store, and every listed name resolving back.

use redraft_models::{LocalModel, ModelFormat};

use crate::ollama::pull;
use crate::{checkpoint_files, commit, weights, World};

#[test]
fn list_local_sees_both_stores_and_each_name_resolves_back() {
    let world = World::without_hub();
    let checkpoint: Vec<_> = checkpoint_files()
        .into_iter()
        .filter(|(f, _)| !f.ends_with(".bin"))
        .collect();
    let checkpoint_size: u64 = checkpoint.iter().map(|(_, c)| c.len() as u64).sum();
    world.write_hf_cache("org/coder", "main", &commit('a'), &checkpoint);
    world.write_hf_cache(
        "org/coder-GGUF",
        "v1",
        &commit('b'),
        &[
            ("coder-Q4_K_M.gguf", weights(100, 40)),
            ("mmproj-coder.gguf", weights(10, 41)),
            ("s-00001-of-00002.gguf", weights(30, 42)),
            ("s-00002-of-00002.gguf", weights(20, 43)),
            ("t-00001-of-00002.gguf", weights(30, 44)),
        ],
    );
    // A folder of a name the Hub does not allow (an older redraft's `a/b--c`): not listed.
    world.write_hf_cache("org/other", "main", &commit('d'), &checkpoint);
    std::fs::rename(
        world.repo_dir("org/other"),
        world.settings.hub_cache.join("models--org--co--der"),
    )
    .unwrap();
    // A snapshot no ref names any more, and a datasets folder, which is not a model.
    world.write_hf_cache("org/coder", "old", &commit('c'), &checkpoint);
    std::fs::remove_file(world.repo_dir("org/coder").join("refs/old")).unwrap();
    std::fs::create_dir_all(
        world
            .settings
            .hub_cache
            .join("datasets--org--data/snapshots"),
    )
    .unwrap();
    let blob = pull(
        &world.settings.ollama_models,
        "library",
        "qwen2.5-coder",
        "1.5b",
        &weights(70, 45),
    );

    let listed = world.resolver().list_local();
    let shown: Vec<(String, ModelFormat, u64)> = listed
        .iter()
        .map(|m| (m.name.clone(), m.format, m.size))
        .collect();
    let gguf = ModelFormat::Gguf;
    assert_eq!(
        shown,
        [
            (
                "hf:org/coder".to_string(),
                ModelFormat::SafetensorsDir,
                checkpoint_size
            ),
            (
                format!("hf:org/coder@{}", commit('c')),
                ModelFormat::SafetensorsDir,
                checkpoint_size
            ),
            (
                "hf:org/coder-GGUF/coder-Q4_K_M.gguf@v1".to_string(),
                gguf,
                100
            ),
            (
                "hf:org/coder-GGUF/s-00001-of-00002.gguf@v1".to_string(),
                gguf,
                50
            ),
            ("ollama:qwen2.5-coder:1.5b".to_string(), gguf, 70),
        ]
    );
    assert_eq!(listed.last().map(|m| &m.path), Some(&blob));
    for LocalModel {
        name, path, format, ..
    } in &listed
    {
        let resolved = world
            .resolver()
            .resolve(name, &mut redraft_models::NoProgress)
            .unwrap();
        assert_eq!((&resolved.path, resolved.format), (path, *format), "{name}");
    }
}

/// Caches holding junk (an empty folder, a ref to a commit with no snapshot, a config-only
/// snapshot as transformers leaves one, a link to a deleted blob, a split GGUF missing a part,
/// weights without a tokenizer, a killed download, a folder whose name is not UTF-8, Ollama
/// manifests that are not JSON or name a missing blob) list what they can and say what they
/// passed over, each with what to do; nothing fails.
#[test]
fn junk_in_the_caches_is_passed_over_and_said() {
    use std::os::unix::ffi::OsStrExt;
    let world = World::without_hub();
    let cache = world.settings.hub_cache.clone();
    world.write_hf_cache(
        "org/good-GGUF",
        "main",
        &commit('a'),
        &[("good-Q8_0.gguf", weights(100, 50))],
    );
    std::fs::write(
        world
            .repo_dir("org/good-GGUF")
            .join("blobs/0123.incomplete"),
        weights(2048, 51),
    )
    .unwrap();
    std::fs::create_dir_all(cache.join("models--org--empty")).unwrap();
    std::fs::create_dir_all(world.repo_dir("org/noref").join("refs")).unwrap();
    std::fs::write(world.repo_dir("org/noref").join("refs/main"), commit('e')).unwrap();
    world.write_hf_cache(
        "org/config-only",
        "main",
        &commit('b'),
        &[("config.json", b"{}".to_vec())],
    );
    let gone = weights(100, 52);
    world.write_hf_cache(
        "org/gone-GGUF",
        "main",
        &commit('c'),
        &[("gone-Q4_0.gguf", gone.clone())],
    );
    std::fs::remove_file(
        world
            .repo_dir("org/gone-GGUF")
            .join("blobs")
            .join(redraft_tests::fake_hub::etag_of("gone-Q4_0.gguf", &gone)),
    )
    .unwrap();
    world.write_hf_cache(
        "org/split-GGUF",
        "main",
        &commit('d'),
        &[("s-00001-of-00002.gguf", weights(100, 53))],
    );
    world.write_hf_cache(
        "org/half",
        "v1",
        &commit('f'),
        &[
            ("config.json", b"{}".to_vec()),
            ("model.safetensors", weights(100, 54)),
        ],
    );
    let not_utf8 = cache.join(std::ffi::OsStr::from_bytes(b"models--x--\xff"));
    std::fs::create_dir_all(&not_utf8).unwrap();
    let store = &world.settings.ollama_models;
    pull(store, "library", "fine", "latest", &weights(70, 55));
    let manifests = store.join("manifests/registry.ollama.ai/library");
    std::fs::create_dir_all(manifests.join("notjson")).unwrap();
    std::fs::write(manifests.join("notjson/latest"), "nope").unwrap();
    let noblob = pull(store, "library", "noblob", "latest", &weights(70, 56));
    std::fs::remove_file(noblob).unwrap();

    let scan = world.resolver().scan_local();
    let names: Vec<&str> = scan.models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["hf:org/good-GGUF/good-Q8_0.gguf", "ollama:fine:latest"]
    );
    let root = world.dir.path();
    let skipped: Vec<String> = scan
        .skipped
        .iter()
        .map(|s| {
            let path = s.path.strip_prefix(root).unwrap().to_string_lossy();
            format!("{path}: {}", s.why.replace(&*root.to_string_lossy(), ""))
        })
        .collect();
    let snapshot = |repo: &str, digit| format!("hub/models--{repo}/snapshots/{}", commit(digit));
    assert_eq!(
        skipped,
        [
            format!(
                "{}/gone-Q4_0.gguf: a link to a blob that is gone (deleted, or never finished); \
                 `redraft pull hf:org/gone-GGUF/gone-Q4_0.gguf` fetches it again",
                snapshot("org--gone-GGUF", 'c')
            ),
            "hub/models--org--good-GGUF/blobs/0123.incomplete: a download of org/good-GGUF not \
             finished (2.0 KiB so far): under way, or stopped; pulling the same name again \
             resumes it"
                .to_string(),
            format!(
                "{}: safetensors weights without tokenizer.json; `redraft pull hf:org/half@v1` \
                 fetches what is missing",
                snapshot("org--half", 'f')
            ),
            format!(
                "{}/s-00001-of-00002.gguf: a split GGUF without its part s-00002-of-00002.gguf; \
                 `redraft pull hf:org/split-GGUF/s-00001-of-00002.gguf` fetches it",
                snapshot("org--split-GGUF", 'd')
            ),
            "hub/models--x--\u{FFFD}: not named models--ORG--REPO with a Hub organisation and \
             repository name, so no hf: name reaches it"
                .to_string(),
            format!(
                "ollama/manifests/registry.ollama.ai/library/noblob/latest: ollama model \
                 noblob:latest names blob /ollama/blobs/sha256-{}, which is missing; run \
                 `ollama pull noblob:latest` again",
                redraft_tests::fake_hub::sha256_hex(&weights(70, 56))
            ),
            "ollama/manifests/registry.ollama.ai/library/notjson/latest: ollama manifest \
             /ollama/manifests/registry.ollama.ai/library/notjson/latest is unreadable: \
             expected ident at line 1 column 2; run `ollama pull notjson:latest` again (or \
             `ollama rm notjson:latest`)"
                .to_string(),
        ]
    );
}
