//! Model details of real models (the embedded default, the fixture directory, GGUF files
//! written here) and Ollama's way of writing a parameter count. What the engine records of the
//! files themselves is tested with it (`engine/tests/engine/weights_summary.rs`).

use std::path::Path;

use candle_core::quantized::GgmlDType;
use redraft_engine::Engine;

use super::*;
use crate::default_model;

const INDEX_FILE: &str = redraft_engine::checkpoint::INDEX_FILE;

fn small_model() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model")
}

/// The fixture's bytes: weights, config, settings and tokenizer (its README is no part of it).
fn fixture_bytes() -> u64 {
    [
        "model.safetensors",
        "config.json",
        "redraft.json",
        "tokenizer.json",
    ]
    .iter()
    .map(|f| std::fs::metadata(small_model().join(f)).unwrap().len())
    .sum()
}

#[test]
fn the_embedded_default_says_what_it_was_built_from() {
    let engine = default_model::load_or_default(None, redraft_engine::DeviceSpec::Cpu).unwrap();
    let details = ModelDetails::of(&engine);
    // scripts/ship-model writes a GPU-trained default as Q8_0 GGUF; the CPU-trained one shipped
    // now is f16 safetensors.
    let expected = if cfg!(embedded_gguf) {
        ("gguf", Some("Q8_0"))
    } else {
        ("safetensors", Some("F16"))
    };
    assert_eq!(
        (details.format, details.quantization.as_deref()),
        expected,
        "{details:?}"
    );
    assert_eq!(details.family, "qwen2");
    assert_eq!(details.size, default_model::FILES.size() as u64);
    assert_eq!(
        details.parameters,
        engine.model().config().num_parameters() as u64
    );
}

#[test]
fn a_safetensors_directory_is_f16_safetensors_of_its_files_bytes() {
    let engine = Engine::load(&small_model()).unwrap();
    let details = ModelDetails::of(&engine);
    assert_eq!(
        details,
        ModelDetails {
            format: "safetensors",
            quantization: Some("F16".into()),
            family: "qwen2".into(),
            // Every tensor of the file, counted from its header.
            parameters: 1_968_192,
            context_length: 256,
            size: fixture_bytes(),
        }
    );
    assert_eq!(details.parameter_size(), "1.97M");
}

#[test]
fn a_sharded_directory_counts_its_index_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "redraft.json", "tokenizer.json"] {
        std::fs::copy(small_model().join(file), dir.path().join(file)).unwrap();
    }
    std::fs::copy(
        small_model().join("model.safetensors"),
        dir.path().join("model-00001-of-00001.safetensors"),
    )
    .unwrap();
    let index = r#"{"weight_map": {"model.norm.weight": "model-00001-of-00001.safetensors",
        "model.embed_tokens.weight": "model-00001-of-00001.safetensors"}}"#;
    std::fs::write(dir.path().join(INDEX_FILE), index).unwrap();
    let details = ModelDetails::of(&Engine::load(dir.path()).unwrap());
    assert_eq!(
        (details.format, details.quantization.as_deref()),
        ("safetensors", Some("F16"))
    );
    assert_eq!(details.size, fixture_bytes() + index.len() as u64);
}

/// A GGUF as `redraft_tests::gguf` writes one (no `general.file_type`: the matrices' type).
fn written_gguf(matrices: GgmlDType) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coder.gguf");
    let config = redraft_tests::gguf::config(384, 64);
    let weights = redraft_tests::gguf::weights(&config, 3);
    let tokenizer = redraft_tests::gguf::tokenizer_json(384);
    redraft_tests::gguf::write(&path, &config, &weights, &tokenizer, matrices, None);
    (dir, path)
}

#[test]
fn a_gguf_without_a_file_type_is_named_by_its_matrices() {
    for (matrices, name) in [(GgmlDType::Q8_0, "Q8_0"), (GgmlDType::F16, "F16")] {
        let (_dir, path) = written_gguf(matrices);
        let engine = Engine::load(&path).unwrap();
        let details = ModelDetails::of(&engine);
        assert_eq!(details.format, "gguf");
        assert_eq!(details.quantization.as_deref(), Some(name));
        assert_eq!(details.family, "qwen2");
        assert_eq!(details.context_length, 64);
        // Nothing beside it: the file is the model.
        assert_eq!(details.size, std::fs::metadata(&path).unwrap().len());
    }
}

#[test]
fn a_gguf_beside_a_tokenizer_counts_it() {
    let (dir, path) = written_gguf(GgmlDType::Q8_0);
    let tokenizer = redraft_tests::gguf::tokenizer_json(384);
    std::fs::write(dir.path().join("tokenizer.json"), &tokenizer).unwrap();
    // The metadata is its config: a config.json beside it is not read, so not counted.
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let details = ModelDetails::of(&Engine::load(&path).unwrap());
    assert_eq!(
        details.size,
        std::fs::metadata(&path).unwrap().len() + tokenizer.len() as u64
    );
}

#[test]
fn parameter_counts_read_as_ollama_writes_them() {
    // ollama/ollama format/format.go `HumanNumber`, and what it shows of known models.
    for (count, text) in [
        (0, "0"),
        (999, "999"),
        (1_000, "1K"),
        (1_968_192, "1.97M"),
        (1_000_000, "1M"),
        (125_000_000, "125M"),
        (494_032_768, "494.03M"),
        (500_550_000, "500.55M"),
        (1_000_000_000, "1B"),
        (1_543_714_304, "1.5B"),
        (2_850_000_000, "2.9B"),
        (7_615_616_512, "7.6B"),
        (1_000_000_000_000, "1000B"),
    ] {
        assert_eq!(human_number(count), text, "{count}");
    }
}
