//! Model details of real models (the embedded default, the fixture directory, GGUF files
//! written here) and of headers as llama.cpp's quantizer leaves them.

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use redraft_engine::Engine;

use super::*;

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
    let (format, quantization, size) = weights_of(dir.path());
    assert_eq!(
        (format, quantization.as_deref()),
        ("safetensors", Some("F16"))
    );
    assert_eq!(size, fixture_bytes() + index.len() as u64);
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
    std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
    // The metadata is its config: a config.json beside it is not read, so not counted.
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let (_, _, size) = weights_of(&path);
    assert_eq!(size, std::fs::metadata(&path).unwrap().len() + 2);
}

/// `general.file_type` says what llama.cpp made of the file (a Q4_K_M file mixes Q4_K and
/// Q6_K matrices, which their count alone would call Q4_K).
#[test]
fn a_gguf_file_type_is_named_as_llama_cpp_names_it() {
    let tensor = QTensor::quantize(
        &Tensor::zeros((32, 256), candle_core::DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::Q4K,
    )
    .unwrap();
    let header = |file_type: Option<Value>| {
        let mut bytes = std::io::Cursor::new(Vec::new());
        let mut metadata = vec![("general.architecture", Value::String("qwen2".into()))];
        metadata.extend(file_type.map(|t| ("general.file_type", t)));
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        gguf_file::write(&mut bytes, &metadata, &[("blk.0.ffn_up.weight", &tensor)]).unwrap();
        bytes.set_position(0);
        gguf_quantization(&mut bytes)
    };
    assert_eq!(header(Some(Value::U32(15))).as_deref(), Some("Q4_K_M"));
    assert_eq!(header(Some(Value::U32(7))).as_deref(), Some("Q8_0"));
    assert_eq!(header(Some(Value::U32(32))).as_deref(), Some("BF16"));
    assert_eq!(header(Some(Value::I32(1))).as_deref(), Some("F16"));
    // Absent, or a number llama.cpp never gave: the tensors say.
    assert_eq!(header(None).as_deref(), Some("Q4_K"));
    assert_eq!(header(Some(Value::U32(999))).as_deref(), Some("Q4_K"));
    assert_eq!(
        gguf_quantization(&mut std::io::Cursor::new(b"GGUF".to_vec())),
        None
    );
}

fn tensor(name: &str, dtype: &str, shape: &[u64]) -> TensorEntry {
    (name.into(), dtype.into(), shape.to_vec())
}

#[test]
fn the_linear_weights_decide_over_the_embedding_and_the_norms() {
    let mixed = [
        tensor("model.embed_tokens.weight", "F32", &[151_936, 896]),
        tensor("model.layers.0.mlp.up_proj.weight", "BF16", &[4864, 896]),
        tensor("model.layers.0.self_attn.q_proj.weight", "F16", &[896, 896]),
        tensor("model.layers.0.input_layernorm.weight", "F32", &[896]),
    ];
    assert_eq!(dominant(&mixed), "BF16");
    let embedding_only = [
        tensor("token_embd.weight", "Q8_0", &[64, 32]),
        tensor("output_norm.weight", "F32", &[32]),
    ];
    assert_eq!(dominant(&embedding_only), "Q8_0");
    assert_eq!(dominant(&[tensor("norm", "F32", &[32])]), "F32");
    assert_eq!(dominant(&[]), "");
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

#[test]
fn a_safetensors_header_is_read_without_its_data() {
    let json = br#"{"__metadata__": {"format": "pt"}, "w": {"dtype": "bf16", "shape": [2, 3], "data_offsets": [0, 12]}}"#;
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(json);
    // No tensor data follows: only the header is read.
    let tensors = safetensors_header(&mut &bytes[..]).unwrap();
    assert_eq!(tensors, [tensor("w", "BF16", &[2, 3])]);
    let mut truncated = &bytes[..20];
    assert_eq!(safetensors_header(&mut truncated), None);
    let huge = u64::MAX.to_le_bytes();
    assert_eq!(safetensors_header(&mut &huge[..]), None);
}
