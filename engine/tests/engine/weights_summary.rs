//! What the engine records of its weights as it loads them (`Engine::weights`): the format,
//! a GGUF's stated file type, the elements of each stored type of the matrices, and the bytes
//! of the files, from a directory, its shards, a GGUF file and files compiled in.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use redraft_engine::checkpoint::{WeightsFormat, WeightsSummary, INDEX_FILE};
use redraft_engine::engine::{ModelFiles, WeightsFile};
use redraft_engine::Engine;

use super::gguf::{default_tensors, leak, model_gguf, small_model, write};

fn bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// The fixture's config, settings and tokenizer: what is read beside its weights.
fn companion_bytes(dir: &Path) -> u64 {
    ["config.json", "redraft.json", "tokenizer.json"]
        .iter()
        .map(|f| bytes(&dir.join(f)))
        .sum()
}

/// The fixture's matrices, token embedding aside: 2 layers of q, k, v, o (192 x 192) and the
/// gate, up and down projections (192 x 768); its head is tied.
const MATRIX_ELEMENTS: u64 = 2 * (4 * 192 * 192 + 3 * 192 * 768);

fn check(engine: &Engine, expected: WeightsSummary, type_name: &str) {
    assert_eq!(engine.weights(), &expected);
    assert_eq!(engine.weights().type_name(), Some(type_name));
}

#[test]
fn a_safetensors_directory_is_its_stored_types_and_bytes() {
    let dir = small_model();
    let weights = bytes(&dir.join("model.safetensors"));
    check(
        &Engine::load(&dir).unwrap(),
        WeightsSummary {
            format: WeightsFormat::Safetensors,
            file_type: None,
            // Stored f16 (and run f32: the summary says what the files hold).
            matrix_elements: BTreeMap::from([("F16", MATRIX_ELEMENTS)]),
            weight_file_bytes: weights,
            model_file_bytes: weights + companion_bytes(&dir),
        },
        "F16",
    );
}

/// A sharded directory's weights are its shards and their index.
#[test]
fn a_sharded_directory_counts_its_index_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "redraft.json", "tokenizer.json"] {
        std::fs::copy(small_model().join(file), dir.path().join(file)).unwrap();
    }
    let shard = "model-00001-of-00001.safetensors";
    std::fs::copy(
        small_model().join("model.safetensors"),
        dir.path().join(shard),
    )
    .unwrap();
    let index = format!(r#"{{"weight_map": {{"model.norm.weight": "{shard}"}}}}"#);
    std::fs::write(dir.path().join(INDEX_FILE), &index).unwrap();
    let weights = bytes(&dir.path().join(shard)) + index.len() as u64;
    check(
        &Engine::load(dir.path()).unwrap(),
        WeightsSummary {
            format: WeightsFormat::Safetensors,
            file_type: None,
            matrix_elements: BTreeMap::from([("F16", MATRIX_ELEMENTS)]),
            weight_file_bytes: weights,
            model_file_bytes: weights + companion_bytes(dir.path()),
        },
        "F16",
    );
}

/// A GGUF's `general.file_type` says what llama.cpp made of it (a Q4_K_M file mixes Q4_K and
/// Q6_K matrices, which their count alone would call Q4_K); with a number or a value llama.cpp
/// never wrote, its matrices say (a file stating none is runtime's `model_details` test: the
/// `GgufWriter` states one unless told, Q8_0's 7 here). A `redraft.json` or `tokenizer.json`
/// beside it is read with it, so counted; a `config.json` is not.
#[test]
fn a_gguf_is_named_by_its_file_type_else_by_its_matrices() {
    let (config, tensors) = default_tensors();
    let gguf = || model_gguf("dream", &config, &tensors, GgmlDType::Q8_0);
    for (stated, file_type, name) in [
        (None, Some(7), "Q8_0"),
        (Some(Value::U32(15)), Some(15), "Q4_K_M"),
        (Some(Value::I32(1)), Some(1), "F16"),
        (Some(Value::U32(999)), Some(999), "Q8_0"),
        (Some(Value::String("Q4_K_M".into())), None, "Q8_0"),
    ] {
        let writer = match stated {
            Some(value) => gguf().set("general.file_type", value),
            None => gguf(),
        };
        let (_dir, path) = write(&writer, "coder.gguf");
        let file = bytes(&path);
        check(
            &Engine::load(&path).unwrap(),
            WeightsSummary {
                format: WeightsFormat::Gguf,
                file_type,
                matrix_elements: BTreeMap::from([("Q8_0", MATRIX_ELEMENTS)]),
                weight_file_bytes: file,
                // Nothing beside it: the file is the model.
                model_file_bytes: file,
            },
            name,
        );
    }

    let (dir, path) = write(&gguf(), "coder.gguf");
    for file in ["redraft.json", "tokenizer.json"] {
        std::fs::copy(small_model().join(file), dir.path().join(file)).unwrap();
    }
    // The file named, a config.json beside it is neither read nor counted.
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let summary = Engine::load(&path).unwrap().weights().clone();
    assert_eq!(summary.weight_file_bytes, bytes(&path));
    assert_eq!(
        summary.model_file_bytes,
        bytes(&path)
            + bytes(&dir.path().join("redraft.json"))
            + bytes(&dir.path().join("tokenizer.json"))
    );
}

/// The embedded default is what it was compiled from, its bytes all its files'.
#[test]
fn compiled_in_files_are_what_they_were_compiled_from() {
    let dir = small_model();
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let text = |name: &str| -> &'static str {
        Box::leak(String::from_utf8(read(name)).unwrap().into_boxed_str())
    };
    let safetensors = ModelFiles {
        origin: "<embedded>/model",
        weights: WeightsFile::Safetensors {
            config: text("config.json"),
            weights: leak(read("model.safetensors"), 0),
        },
        redraft: Some(text("redraft.json")),
        tokenizer: leak(read("tokenizer.json"), 0),
    };
    let engine = Engine::from_files(&safetensors).unwrap();
    assert_eq!(engine.weights().format, WeightsFormat::Safetensors);
    assert_eq!(engine.weights().format.name(), safetensors.format());
    assert_eq!(
        engine.weights().weight_file_bytes,
        bytes(&dir.join("model.safetensors"))
    );
    assert_eq!(engine.weights().model_file_bytes, safetensors.size() as u64);
    assert_eq!(engine.weights().type_name(), Some("F16"));

    let (config, tensors) = default_tensors();
    let (_dir, path) = write(
        &model_gguf("dream", &config, &tensors, GgmlDType::Q8_0),
        "model.gguf",
    );
    let gguf = ModelFiles {
        weights: WeightsFile::Gguf(leak(std::fs::read(&path).unwrap(), 0)),
        ..safetensors
    };
    let engine = Engine::from_files(&gguf).unwrap();
    assert_eq!(engine.weights().format, WeightsFormat::Gguf);
    assert_eq!(engine.weights().format.name(), gguf.format());
    assert_eq!(engine.weights().weight_file_bytes, bytes(&path));
    assert_eq!(engine.weights().model_file_bytes, gguf.size() as u64);
    assert_eq!(engine.weights().type_name(), Some("Q8_0"));
}
