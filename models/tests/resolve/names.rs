//! Paths and names that are neither `hf:` nor `ollama:`.

use redraft_models::{Error, ModelFormat};

use crate::World;

#[test]
fn bare_name_lists_the_accepted_forms() {
    let world = World::without_hub();
    let error = world.resolve("qwen2.5-coder").unwrap_err();
    assert!(matches!(error, Error::UnknownName { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with("`qwen2.5-coder` is neither an existing path nor a model name"),
        "{message}"
    );
    for form in [
        "a path to a GGUF file or a model directory",
        "hf:ORG/REPO[@REVISION]",
        "hf:ORG/REPO:QUANT",
        "hf:ORG/REPO/FILE.gguf",
        "ollama:NAME[:TAG]",
    ] {
        assert!(message.contains(form), "{form} missing from: {message}");
    }
}

#[test]
fn existing_paths_resolve_to_themselves() {
    let world = World::without_hub();
    let dir = world.dir.path().join("my-model");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    let file = world.dir.path().join("model.gguf");
    std::fs::write(&file, b"GGUF").unwrap();
    let gguf_dir = world.dir.path().join("gguf-dir");
    std::fs::create_dir_all(&gguf_dir).unwrap();
    std::fs::write(gguf_dir.join("m.gguf"), b"GGUF").unwrap();

    for (path, format) in [
        (&dir, ModelFormat::SafetensorsDir),
        (&file, ModelFormat::Gguf),
        (&gguf_dir, ModelFormat::Gguf),
    ] {
        let resolved = world.resolve(path.to_str().unwrap()).unwrap();
        assert_eq!(resolved.path, *path);
        assert_eq!(resolved.format, format, "{}", path.display());
    }
}
