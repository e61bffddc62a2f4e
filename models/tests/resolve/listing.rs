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
