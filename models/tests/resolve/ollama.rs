//! Ollama's store read in place: a manifest and its model blob, and the errors when either
//! is missing.

use std::path::{Path, PathBuf};

use redraft_models::{Error, ModelFormat};

use crate::{weights, World};
use redraft_tests::fake_hub::sha256_hex;

/// Writes a pulled model as Ollama stores it; returns the model blob's path.
pub fn pull(store: &Path, namespace: &str, model: &str, tag: &str, content: &[u8]) -> PathBuf {
    let digest = sha256_hex(content);
    let blobs = store.join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let blob = blobs.join(format!("sha256-{digest}"));
    std::fs::write(&blob, content).unwrap();
    let template = b"{{ .Prompt }}";
    std::fs::write(
        blobs.join(format!("sha256-{}", sha256_hex(template))),
        template,
    )
    .unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": { "mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:00", "size": 2 },
        "layers": [
            { "mediaType": "application/vnd.ollama.image.template", "digest": format!("sha256:{}", sha256_hex(template)), "size": template.len() },
            { "mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}"), "size": content.len() },
        ],
    });
    let path = store
        .join("manifests/registry.ollama.ai")
        .join(namespace)
        .join(model)
        .join(tag);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
    blob
}

#[test]
fn ollama_model_resolves_to_its_blob_in_place() {
    let world = World::without_hub();
    let store = world.settings.ollama_models.clone();
    let blob = pull(
        &store,
        "library",
        "qwen2.5-coder",
        "1.5b",
        &weights(100, 30),
    );
    let latest = pull(&store, "someone", "coder", "latest", &weights(100, 31));
    for name in [
        "ollama:qwen2.5-coder:1.5b",
        "ollama:library/qwen2.5-coder:1.5b",
    ] {
        let resolved = world.resolve(name).unwrap();
        assert_eq!(resolved.path, blob, "{name}");
        assert_eq!(resolved.format, ModelFormat::Gguf);
    }
    assert_eq!(world.resolve("ollama:someone/coder").unwrap().path, latest);
}

#[test]
fn ollama_model_not_pulled_says_how_to_pull() {
    let world = World::without_hub();
    pull(
        &world.settings.ollama_models,
        "library",
        "qwen2.5-coder",
        "1.5b",
        &weights(10, 32),
    );
    let error = world.resolve("ollama:qwen2.5-coder:7b").unwrap_err();
    assert!(matches!(error, Error::OllamaNotPulled { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("run `ollama pull qwen2.5-coder:7b` first"),
        "{message}"
    );
    let message = world.resolve("ollama:someone/x").unwrap_err().to_string();
    assert!(
        message.contains("`ollama pull someone/x:latest`"),
        "{message}"
    );
}

#[test]
fn ollama_manifest_without_model_layer_or_blob_is_an_error() {
    let world = World::without_hub();
    let store = world.settings.ollama_models.clone();
    let dir = store.join("manifests/registry.ollama.ai/library/embed");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("latest"),
        r#"{"layers":[{"mediaType":"application/vnd.ollama.image.license","digest":"sha256:00"}]}"#,
    )
    .unwrap();
    let message = world.resolve("ollama:embed").unwrap_err().to_string();
    assert!(
        message.contains("has no layer of type application/vnd.ollama.image.model"),
        "{message}"
    );

    let blob = pull(&store, "library", "gone", "latest", &weights(10, 33));
    std::fs::remove_file(&blob).unwrap();
    let message = world.resolve("ollama:gone").unwrap_err().to_string();
    assert!(
        message.contains("which is missing; run `ollama pull gone:latest` again"),
        "{message}"
    );
}

/// `OLLAMA_MODELS` naming a file is said as such (not as a manifest path that is "not a
/// directory"), and a manifest that is not JSON names the manifest.
#[test]
fn an_ollama_store_that_is_a_file_or_a_manifest_that_is_not_json_is_said() {
    let world = World::without_hub();
    let store = world.settings.ollama_models.clone();
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    std::fs::write(&store, "not a directory").unwrap();
    let error = world.resolve("ollama:x").unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, Error::OllamaStoreNotDir { .. })
            && message.contains("is not a directory; set OLLAMA_MODELS"),
        "{message}"
    );
    assert!(world.resolver().list_local().is_empty());

    std::fs::remove_file(&store).unwrap();
    let dir = store.join("manifests/registry.ollama.ai/library/x");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("latest"), "{bad").unwrap();
    let message = world.resolve("ollama:x").unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "ollama manifest {} is unreadable",
            dir.join("latest").display()
        )),
        "{message}"
    );
}
