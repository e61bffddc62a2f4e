//! Loading a broken model directory fails with a typed error that names the file, tensor or
//! setting at fault, never a panic. Each test copies a parity fixture (plus a small trained
//! tokenizer) into a temporary directory, breaks one thing, and checks both the error variant and
//! what its message names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use redraft_engine::config::ModelConfig;
use redraft_engine::sampler::Controls;
use redraft_engine::tokenizer::Tokenizer;
use redraft_engine::ContextCache;
use redraft_engine::{Engine, Error, InfillRequest};
use serde_json::{json, Map, Value};
use tempfile::TempDir;

/// bf16, one `model.safetensors`, tied head, `model_type` qwen2 with `logit_shift` true in
/// redraft.json.
const DREAM: &str = "dream-tied";
/// f32, two shards behind `model.safetensors.index.json`, untied head, BOS 381.
const LLADA: &str = "llada-untied";

const CONFIG: &str = "config.json";
const REDRAFT: &str = "redraft.json";
const TOKENIZER: &str = "tokenizer.json";
const SINGLE: &str = "model.safetensors";
const INDEX: &str = "model.safetensors.index.json";
const SHARD_1: &str = "model-00001-of-00002.safetensors";
const SHARD_2: &str = "model-00002-of-00002.safetensors";

/// Both fixtures have a vocabulary of 384: EOS/pad 382, mask 383.
const MODEL_VOCAB: usize = 384;

/// Code-like text for training tokenizers: enough distinct words for a few hundred merges.
fn corpus() -> Vec<String> {
    const SYLLABLES: [&str; 10] = ["ka", "lo", "mi", "ne", "ru", "te", "po", "sa", "vi", "du"];
    (0..1000)
        .map(|i| {
            let name: String = [i % 10, i / 10 % 10, i / 100]
                .iter()
                .map(|&s| SYLLABLES[s])
                .collect();
            format!(
                "fn {name}(left: i32) -> i32 {{\n    let {name} = left * {i};\n    {name}\n}}\n"
            )
        })
        .collect()
}

/// A tokenizer smaller than the fixtures' vocabulary, as `tokenizer.json` text.
fn tokenizer_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| tokenizer_json_of_size(320))
}

fn tokenizer_json_of_size(vocab_size: usize) -> String {
    let tokenizer = Tokenizer::train_bpe(corpus().into_iter(), vocab_size, &["<|endoftext|>"])
        .expect("training a tokenizer on the test corpus");
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join(TOKENIZER);
    tokenizer.save(&path).unwrap();
    std::fs::read_to_string(&path).unwrap()
}

/// A writable copy of a parity fixture with a `tokenizer.json`.
struct ModelDir {
    tmp: TempDir,
}

impl ModelDir {
    fn copy(fixture: &str) -> ModelDir {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/parity")
            .join(fixture);
        let tmp = TempDir::new().unwrap();
        for entry in std::fs::read_dir(&source).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
        }
        std::fs::write(tmp.path().join(TOKENIZER), tokenizer_json()).unwrap();
        ModelDir { tmp }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) {
        std::fs::write(self.file(name), contents).unwrap();
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.file(name)).unwrap();
    }

    /// Rewrites the JSON object in `name`.
    fn edit_json(&self, name: &str, edit: impl FnOnce(&mut Map<String, Value>)) {
        let text = std::fs::read_to_string(self.file(name)).unwrap();
        let mut value: Value = serde_json::from_str(&text).unwrap();
        edit(value.as_object_mut().unwrap());
        self.write(name, serde_json::to_string_pretty(&value).unwrap());
    }

    /// Rewrites the safetensors file `name` (dtypes are kept as stored).
    fn edit_tensors(&self, name: &str, edit: impl FnOnce(&mut HashMap<String, Tensor>)) {
        let mut tensors = candle_core::safetensors::load(self.file(name), &Device::Cpu).unwrap();
        edit(&mut tensors);
        candle_core::safetensors::save(&tensors, self.file(name)).unwrap();
    }

    fn load(&self) -> redraft_engine::Result<Engine> {
        Engine::load(self.path())
    }

    fn load_err(&self) -> Error {
        load_err(self.path())
    }
}

fn load_err(dir: &Path) -> Error {
    match Engine::load(dir) {
        Ok(_) => panic!("{} loaded, expected an error", dir.display()),
        Err(err) => err,
    }
}

/// `err`'s message mentions every one of `needles`.
fn assert_names(err: &Error, needles: &[&str]) {
    let message = err.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "`{message}` does not mention `{needle}`"
        );
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

// --- config.json --------------------------------------------------------------------------

#[test]
fn directory_missing() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("no-such-model");
    let err = load_err(&dir);
    assert!(
        matches!(err, Error::NotFound { ref path } if *path == dir),
        "{err:?}"
    );
    assert_names(
        &err,
        &[&format!("no such file or directory: {}", shown(&dir))],
    );
    // A GGUF file that is not there is not described as a directory either.
    let file = tmp.path().join("m.gguf");
    let err = load_err(&file);
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert_names(
        &err,
        &[&format!("no such file or directory: {}", shown(&file))],
    );
}

/// A file that is not a GGUF (a directory's `model.safetensors`, named instead of its
/// directory) was reported as "missing: a model directory needs to be a directory".
#[test]
fn a_file_that_is_no_model_says_what_is_accepted() {
    let dir = ModelDir::copy(DREAM);
    let err = load_err(&dir.file(SINGLE));
    assert!(
        matches!(err, Error::NotAModel { ref path } if *path == dir.file(SINGLE)),
        "{err:?}"
    );
    assert_names(
        &err,
        &[
            &shown(&dir.file(SINGLE)),
            "neither a GGUF file nor a model directory",
            "config.json",
        ],
    );
    assert!(!err.to_string().contains("is missing"), "{err}");
    let err = match redraft_engine::engine::inspect(&dir.file(SINGLE)) {
        Ok(_) => panic!("a safetensors file inspected as a model"),
        Err(err) => err,
    };
    assert!(matches!(err, Error::NotAModel { .. }), "{err:?}");
}

#[test]
fn config_missing() {
    let dir = ModelDir::copy(DREAM);
    dir.remove(CONFIG);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingFile { ref path, .. } if *path == dir.file(CONFIG)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(CONFIG)), "model config"]);
}

#[test]
fn config_invalid_json() {
    let dir = ModelDir::copy(DREAM);
    dir.write(CONFIG, r#"{ "model_type": "qwen2", "#);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::BadJson { ref path, .. } if *path == dir.file(CONFIG)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(CONFIG)), "not valid JSON"]);
}

#[test]
fn config_missing_required_field() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.remove("hidden_size");
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::BadJson { ref path, .. } if *path == dir.file(CONFIG)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(CONFIG)), "hidden_size"]);
}

/// Breaks `config.json` with `edit` and checks that it is rejected as unsupported, naming every
/// one of `needles`.
fn check_unsupported(edit: impl FnOnce(&mut Map<String, Value>), needles: &[&str]) {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, edit);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::UnsupportedConfig { ref path, .. } if *path == dir.file(CONFIG)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(CONFIG))]);
    assert_names(&err, needles);
}

#[test]
fn unsupported_model_type() {
    check_unsupported(
        |c| {
            c.insert("model_type".into(), json!("llama"));
        },
        &["model_type `llama`", "qwen2, Dream"],
    );
}

#[test]
fn unsupported_hidden_act() {
    check_unsupported(
        |c| {
            c.insert("hidden_act".into(), json!("gelu"));
        },
        &["hidden_act `gelu`", "silu"],
    );
}

#[test]
fn rope_scaling_transformers_4() {
    check_unsupported(
        |c| {
            c.insert(
                "rope_scaling".into(),
                json!({ "type": "linear", "factor": 2.0 }),
            );
        },
        &["rope_scaling", "linear", "default RoPE"],
    );
}

#[test]
fn rope_scaling_transformers_5() {
    check_unsupported(
        |c| {
            c.remove("rope_theta");
            c.insert(
                "rope_parameters".into(),
                json!({ "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0 }),
            );
        },
        &["rope_parameters.rope_type `yarn`", "default RoPE"],
    );
}

/// `rope_parameters` spelling its type `type`, as `rope_scaling` did: transformers reads it
/// where `rope_type` is absent (`standardize_rope_params`), so this config scales linearly. It
/// loaded as default RoPE.
#[test]
fn rope_scaling_transformers_5_older_type_key() {
    check_unsupported(
        |c| {
            c.remove("rope_theta");
            c.insert(
                "rope_parameters".into(),
                json!({ "type": "linear", "rope_theta": 10000.0, "factor": 2.0 }),
            );
        },
        &["rope_parameters.type `linear`", "default RoPE"],
    );
    // `rope_type` first, as transformers takes it.
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert(
            "rope_parameters".into(),
            json!({ "rope_type": "default", "type": "linear", "rope_theta": 10000.0 }),
        );
    });
    ModelConfig::load(&dir.file(CONFIG)).unwrap();
}

/// A Qwen2 config's positions, parsed with `extra` fields over a 2-layer, 32k-position base.
fn positions_with(extra: Value) -> Result<usize, Error> {
    let mut config = json!({
        "model_type": "qwen2", "vocab_size": MODEL_VOCAB, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "max_position_embeddings": 32768,
    });
    let fields = config.as_object_mut().unwrap();
    fields.extend(extra.as_object().unwrap().clone());
    ModelConfig::parse(&config.to_string(), Path::new(CONFIG)).map(|c| c.max_position_embeddings)
}

/// Layers that slide see only the last `sliding_window` positions: the engine attends in full,
/// the same up to the window, so the model's positions stop there (as transformers decides
/// which layers slide: `layer_types`, else `use_sliding_window` from `max_window_layers` on).
#[test]
fn sliding_window_layers_cap_the_positions_at_the_window() {
    let positions = |extra: Value| positions_with(extra).unwrap();
    // Qwen2.5's own configs: sliding off, or on for no layer.
    assert_eq!(
        positions(json!({ "use_sliding_window": false, "sliding_window": 4096 })),
        32768
    );
    assert_eq!(
        positions(
            json!({ "use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 2 })
        ),
        32768
    );
    assert_eq!(
        positions(
            json!({ "use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 1 })
        ),
        4096
    );
    // transformers' default `max_window_layers` (28) leaves a 2-layer model unslid.
    assert_eq!(
        positions(json!({ "use_sliding_window": true, "sliding_window": 4096 })),
        32768
    );
    assert_eq!(
        positions(json!({
            "sliding_window": 1024, "layer_types": ["full_attention", "sliding_attention"]
        })),
        1024
    );
    assert_eq!(
        positions(json!({
            "use_sliding_window": true, "sliding_window": 1024, "max_window_layers": 0,
            "layer_types": ["full_attention", "full_attention"]
        })),
        32768
    );
    // A window past the positions changes nothing.
    assert_eq!(
        positions(
            json!({ "sliding_window": 65536, "layer_types": ["sliding_attention", "sliding_attention"] })
        ),
        32768
    );
}

#[test]
fn sliding_layers_without_a_window_or_unknown_layer_types_are_refused() {
    for (extra, needles) in [
        (
            json!({ "layer_types": ["full_attention", "sliding_attention"] }),
            &["sliding_window is missing or 0"][..],
        ),
        (
            json!({ "use_sliding_window": true, "sliding_window": 0, "max_window_layers": 0 }),
            &["sliding_window is missing or 0"][..],
        ),
        (
            json!({ "layer_types": ["full_attention", "chunked_attention"] }),
            &["layer_types entry `chunked_attention`", "sliding_attention"][..],
        ),
    ] {
        let err = positions_with(extra).unwrap_err();
        assert!(matches!(err, Error::UnsupportedConfig { .. }), "{err:?}");
        assert_names(&err, needles);
    }
}

#[test]
fn heads_not_a_multiple_of_kv_heads() {
    check_unsupported(
        |c| {
            c.insert("num_key_value_heads".into(), json!(3));
        },
        &["num_attention_heads 4", "num_key_value_heads 3"],
    );
}

#[test]
fn zero_attention_heads_without_head_dim() {
    // Without `head_dim` the head size is hidden_size / num_attention_heads: a division by zero
    // unless the zero is caught first.
    check_unsupported(
        |c| {
            c.remove("head_dim");
            c.insert("num_attention_heads".into(), json!(0));
        },
        &["num_attention_heads is 0"],
    );
}

/// Sizes no model has were taken as they came: a layer count of 1e9 sized an allocation that
/// aborted the process, heads x head size wrapped in a release build.
#[test]
fn sizes_far_past_any_model_are_refused() {
    check_unsupported(
        |c| {
            c.insert("num_hidden_layers".into(), json!(1_000_000_000u64));
        },
        &["num_hidden_layers 1000000000 is more than 1024"],
    );
    check_unsupported(
        |c| {
            c.insert("vocab_size".into(), json!(100_000_000_000u64));
        },
        &["vocab_size 100000000000 is more than"],
    );
    check_unsupported(
        |c| {
            c.insert("head_dim".into(), json!(1u64 << 31));
            c.insert("num_attention_heads".into(), json!(1u64 << 33));
            c.insert("num_key_value_heads".into(), json!(1u64 << 33));
        },
        &["num_attention_heads 8589934592 is more than"],
    );
    check_unsupported(
        |c| {
            c.insert("head_dim".into(), json!(1u64 << 14));
            c.insert("num_attention_heads".into(), json!(1u64 << 14));
            c.insert("num_key_value_heads".into(), json!(1u64 << 14));
        },
        &["num_attention_heads 16384 x head_dim 16384 is more than"],
    );
}

/// A context of 0 positions, or a RoPE base or RMSNorm epsilon that is no positive number,
/// loaded and then failed every request.
#[test]
fn positions_rope_base_and_epsilon_must_make_sense() {
    check_unsupported(
        |c| {
            c.insert("max_position_embeddings".into(), json!(0));
        },
        &["max_position_embeddings is 0"],
    );
    check_unsupported(
        |c| {
            c.insert("rope_theta".into(), json!(-1.0));
        },
        &["rope_theta -1"],
    );
    check_unsupported(
        |c| {
            c.insert("rms_norm_eps".into(), json!(-1.0));
        },
        &["rms_norm_eps -1"],
    );
}

/// LLaDA's MLP width is `mlp_ratio` x `d_model` where it states none: a product that wrapped.
#[test]
fn a_llada_mlp_width_that_overflows_is_refused() {
    let config = json!({
        "model_type": "llada", "d_model": 64, "n_heads": 4, "n_layers": 2,
        "vocab_size": MODEL_VOCAB, "rope": true, "block_type": "llama",
        "layer_norm_type": "rms", "activation_type": "silu", "mlp_ratio": 1u64 << 62,
    });
    let err = ModelConfig::parse(&config.to_string(), Path::new(CONFIG)).unwrap_err();
    assert!(matches!(err, Error::UnsupportedConfig { .. }), "{err:?}");
    assert_names(
        &err,
        &["mlp_ratio 4611686018427387904 x d_model 64 overflows"],
    );
}

/// transformers 4 writes `rope_theta` at the top level, transformers 5 inside `rope_parameters`.
#[test]
fn rope_theta_from_either_config_style() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("rope_theta".into(), json!(250000.0));
    });
    let old = ModelConfig::load(&dir.file(CONFIG)).unwrap();
    dir.edit_json(CONFIG, |c| {
        c.remove("rope_theta");
        c.insert(
            "rope_parameters".into(),
            json!({ "rope_theta": 250000.0, "rope_type": "default" }),
        );
    });
    let new = ModelConfig::load(&dir.file(CONFIG)).unwrap();
    assert_eq!(old.rope_theta(), 250000.0);
    assert_eq!(new.rope_theta(), 250000.0);

    let llada = ModelDir::copy(LLADA);
    let stated = ModelConfig::load(&llada.file(CONFIG)).unwrap();
    assert_eq!(stated.rope_theta(), 500000.0);
}

// --- safetensors ------------------------------------------------------------------------------

#[test]
fn weights_missing() {
    let dir = ModelDir::copy(DREAM);
    dir.remove(SINGLE);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingFile { ref path, .. } if *path == dir.file(SINGLE)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(SINGLE)), INDEX]);
}

/// Replaces `model.safetensors` with `bytes` and checks it is reported as corrupt.
fn check_corrupt(bytes: impl FnOnce(Vec<u8>) -> Vec<u8>) {
    let dir = ModelDir::copy(DREAM);
    let original = std::fs::read(dir.file(SINGLE)).unwrap();
    dir.write(SINGLE, bytes(original));
    let err = dir.load_err();
    assert!(
        matches!(err, Error::CorruptWeights { ref path, .. } if *path == dir.file(SINGLE)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(SINGLE)), "truncated or corrupt"]);
}

#[test]
fn weights_truncated_in_half() {
    check_corrupt(|mut bytes| {
        bytes.truncate(bytes.len() / 2);
        bytes
    });
}

#[test]
fn weights_truncated_inside_the_header_length() {
    check_corrupt(|mut bytes| {
        bytes.truncate(5);
        bytes
    });
}

#[test]
fn weights_empty() {
    check_corrupt(|_| Vec::new());
}

#[test]
fn weights_garbage() {
    check_corrupt(|bytes| {
        bytes
            .iter()
            .map(|b| b.wrapping_mul(31).wrapping_add(7))
            .collect()
    });
}

/// A directory holding `model.safetensors` and a shard index (a leftover, or shards beside a
/// merged file) loads the single file, as `transformers` does: the index's shards are not read.
#[test]
fn single_file_is_preferred_to_a_shard_index() {
    let dir = ModelDir::copy(DREAM);
    dir.write(
        INDEX,
        json!({"weight_map": {"model.embed_tokens.weight": SHARD_1}}).to_string(),
    );
    assert!(!dir.file(SHARD_1).exists());
    dir.load().map(drop).unwrap();
}

/// A shard index names files beside it: one that leads elsewhere (up and back down, or an
/// absolute path) is refused before anything is opened, though here it is the very shard.
#[test]
fn a_shard_named_outside_the_directory_is_not_opened() {
    let dir = ModelDir::copy(LLADA);
    let own = dir
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    for elsewhere in [
        format!("../{own}/{SHARD_2}"),
        dir.file(SHARD_2).display().to_string(),
    ] {
        dir.edit_json(INDEX, |index| {
            for shard in index["weight_map"].as_object_mut().unwrap().values_mut() {
                if shard.as_str().unwrap().ends_with(SHARD_2) {
                    *shard = json!(elsewhere);
                }
            }
        });
        let err = dir.load_err();
        assert!(matches!(err, Error::CorruptWeights { .. }), "{err:?}");
        assert_names(
            &err,
            &[&elsewhere, "not a file name in the model's directory"],
        );
    }
}

#[test]
fn shard_missing() {
    let dir = ModelDir::copy(LLADA);
    dir.remove(SHARD_2);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingFile { ref path, .. } if *path == dir.file(SHARD_2)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(SHARD_2)), "shard index"]);
}

#[test]
fn index_names_a_tensor_no_shard_has() {
    let dir = ModelDir::copy(LLADA);
    let ghost = "model.layers.1.mlp.extra_proj.weight";
    dir.edit_json(INDEX, |index| {
        index["weight_map"]
            .as_object_mut()
            .unwrap()
            .insert(ghost.into(), json!(SHARD_2));
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingTensor { ref name, .. } if name == ghost),
        "{err:?}"
    );
    assert_names(&err, &[ghost, INDEX, SHARD_2]);
}

/// An index that puts a tensor in the wrong shard still loads, as in `transformers`: every shard
/// it names is read whole, so the tensor is found wherever it is.
#[test]
fn index_misplacing_a_tensor_still_loads() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_json(INDEX, |index| {
        index["weight_map"]["lm_head.weight"] = json!(SHARD_1);
    });
    dir.load().map(drop).unwrap();
}

#[test]
fn index_invalid_json() {
    let dir = ModelDir::copy(LLADA);
    dir.write(INDEX, "{\"weight_map\": [");
    let err = dir.load_err();
    assert!(
        matches!(err, Error::BadJson { ref path, .. } if *path == dir.file(INDEX)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(INDEX)), "shard index"]);
}

#[test]
fn tensor_renamed() {
    let dir = ModelDir::copy(DREAM);
    let name = "model.layers.1.self_attn.k_proj.bias";
    dir.edit_tensors(SINGLE, |t| {
        let tensor = t.remove(name).unwrap();
        t.insert("model.layers.1.self_attn.k_proj.b".into(), tensor);
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingTensor { ref name, .. } if name == "model.layers.1.self_attn.k_proj.bias"),
        "{err:?}"
    );
    assert_names(&err, &[name, &shown(&dir.file(SINGLE))]);
}

#[test]
fn tensor_renamed_in_a_shard() {
    let dir = ModelDir::copy(LLADA);
    let name = "model.layers.1.mlp.down_proj.weight";
    dir.edit_tensors(SHARD_2, |t| {
        let tensor = t.remove(name).unwrap();
        t.insert("model.layers.1.mlp.down.weight".into(), tensor);
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingTensor { ref name, .. } if name == "model.layers.1.mlp.down_proj.weight"),
        "{err:?}"
    );
    assert_names(&err, &[name, INDEX, SHARD_2]);
}

#[test]
fn tensor_wrong_shape() {
    let dir = ModelDir::copy(DREAM);
    let name = "model.layers.0.mlp.up_proj.weight";
    dir.edit_tensors(SINGLE, |t| {
        let reshaped = t[name].reshape((64, 176)).unwrap();
        t.insert(name.into(), reshaped);
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::TensorShape { ref name, ref path, ref expected, ref found }
            if name == "model.layers.0.mlp.up_proj.weight"
                && *path == dir.file(SINGLE)
                && expected == &[176, 64]
                && found == &[64, 176]),
        "{err:?}"
    );
    assert_names(
        &err,
        &[name, &shown(&dir.file(SINGLE)), "[64, 176]", "[176, 64]"],
    );
}

#[test]
fn tensor_wrong_shape_in_a_shard() {
    let dir = ModelDir::copy(LLADA);
    let name = "lm_head.weight";
    dir.edit_tensors(SHARD_2, |t| {
        let narrowed = t[name].narrow(0, 0, 380).unwrap();
        t.insert(name.into(), narrowed);
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::TensorShape { ref name, ref path, .. }
            if name == "lm_head.weight" && *path == dir.file(SHARD_2)),
        "{err:?}"
    );
    assert_names(&err, &[name, &shown(&dir.file(SHARD_2)), "[380, 64]"]);
}

#[test]
fn tensor_unsupported_dtype() {
    let dir = ModelDir::copy(DREAM);
    let name = "model.norm.weight";
    dir.edit_tensors(SINGLE, |t| {
        t.insert(
            name.into(),
            Tensor::zeros(64, DType::I64, &Device::Cpu).unwrap(),
        );
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::TensorDtype { ref name, ref path, ref dtype }
            if name == "model.norm.weight" && *path == dir.file(SINGLE) && dtype == "I64"),
        "{err:?}"
    );
    assert_names(
        &err,
        &[name, &shown(&dir.file(SINGLE)), "I64", "f32, f16 or bf16"],
    );
}

#[test]
fn untied_config_without_lm_head() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("tie_word_embeddings".into(), json!(false));
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingTensor { ref name, .. } if name == "lm_head.weight"),
        "{err:?}"
    );
    assert_names(&err, &["lm_head.weight", &shown(&dir.file(SINGLE))]);
}

#[test]
fn untied_shards_without_lm_head() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_tensors(SHARD_2, |t| {
        t.remove("lm_head.weight").unwrap();
    });
    dir.edit_json(INDEX, |index| {
        index["weight_map"]
            .as_object_mut()
            .unwrap()
            .remove("lm_head.weight");
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingTensor { ref name, .. } if name == "lm_head.weight"),
        "{err:?}"
    );
    assert_names(
        &err,
        &[
            "lm_head.weight",
            &shown(&dir.file(SHARD_1)),
            &shown(&dir.file(SHARD_2)),
        ],
    );
}

// --- diffusion settings ---------------------------------------------------------------------

fn check_missing_setting(dir: &ModelDir, setting: &str) {
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingSetting { setting: s, .. } if s == setting),
        "{err:?}"
    );
    assert_names(&err, &[&format!("`{setting}`"), REDRAFT]);
}

fn check_contradictory_setting(dir: &ModelDir, setting: &str, needles: &[&str]) {
    let err = dir.load_err();
    assert!(
        matches!(err, Error::ContradictorySetting { setting: s, .. } if s == setting),
        "{err:?}"
    );
    assert_names(&err, &[&format!("`{setting}`")]);
    assert_names(&err, needles);
}

/// `redraft.json`'s `efforts` replaces the presets it names for this model; the others stay
/// the built-in ones.
#[test]
fn efforts_tuned_in_redraft_json_replace_the_presets_they_name() {
    use redraft_engine::sampler::{Effort, Efforts, Schedule};
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert(
            "efforts".into(),
            json!({"medium": {"schedule": {"kind": "threshold", "tau": 0.8}, "max_steps": 6}}),
        );
    });
    let engine = Engine::load(dir.path()).unwrap();
    let medium = engine.effort(Effort::Medium);
    assert_eq!(medium.schedule, Schedule::Threshold { tau: 0.8 });
    assert_eq!(medium.max_steps, Some(6));
    for effort in [Effort::Low, Effort::High] {
        let built_in = Efforts::BUILT_IN.get(effort);
        let ours = engine.effort(effort);
        assert_eq!(
            (ours.schedule, ours.max_steps),
            (built_in.schedule, built_in.max_steps)
        );
    }
    // Without `efforts`, every preset is the built-in one.
    let plain = Engine::load(ModelDir::copy(DREAM).path()).unwrap();
    assert_eq!(plain.settings().efforts, Efforts::BUILT_IN);
}

/// `redraft.json`'s `edit_min_confidence` and `fim_min_confidence` are the model's next-edit
/// and inline-completion bars (0 without them), each its own; one that is not a probability is
/// refused at load, named.
#[test]
fn the_bars_tuned_in_redraft_json_are_the_models() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert("edit_min_confidence".into(), json!(0.35));
        r.insert("fim_min_confidence".into(), json!(0.2));
    });
    let engine = Engine::load(dir.path()).unwrap();
    assert_eq!(engine.settings().edit_min_confidence, 0.35);
    assert_eq!(engine.settings().fim_min_confidence, 0.2);
    let plain = Engine::load(ModelDir::copy(DREAM).path()).unwrap();
    assert_eq!(plain.settings().edit_min_confidence, 0.0);
    assert_eq!(plain.settings().fim_min_confidence, 0.0);
    for key in ["edit_min_confidence", "fim_min_confidence"] {
        for bad in [json!(1.5), json!(-0.2)] {
            let dir = ModelDir::copy(DREAM);
            dir.edit_json(REDRAFT, |r| {
                r.insert(key.into(), bad.clone());
            });
            check_contradictory_setting(&dir, key, &["not a probability"]);
        }
    }
}

/// A preset that cannot decode, or a misspelt key, is refused at load with the preset named.
#[test]
fn an_effort_preset_that_cannot_decode_is_refused() {
    for (preset, needles) in [
        (
            json!({"schedule": {"kind": "threshold", "tau": 1.5}}),
            ["`low`", "tau 1.5"],
        ),
        (
            json!({"schedule": {"kind": "top-k", "k": 0}}),
            ["`low`", "k is 0"],
        ),
        (
            json!({"schedule": {"kind": "top-k", "k": 1}, "max_steps": 0}),
            ["`low`", "max_steps is 0"],
        ),
    ] {
        let dir = ModelDir::copy(DREAM);
        dir.edit_json(REDRAFT, |r| {
            r.insert("efforts".into(), json!({ "low": preset }));
        });
        check_contradictory_setting(&dir, "efforts", &needles);
    }
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert(
            "efforts".into(),
            json!({"lowest": {"schedule": {"kind": "top-k", "k": 1}}}),
        );
    });
    let err = dir.load_err();
    assert_names(&err, &[REDRAFT, "lowest"]);
}

#[test]
fn logit_shift_missing_without_redraft_json() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("mask_token_id".into(), json!(383));
    });
    dir.remove(REDRAFT);
    check_missing_setting(&dir, "logit_shift");
}

#[test]
fn mask_token_id_missing() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.remove("mask_token_id");
    });
    check_missing_setting(&dir, "mask_token_id");
}

#[test]
fn eos_token_id_missing() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_json(CONFIG, |c| {
        c.remove("eos_token_id");
    });
    dir.edit_json(REDRAFT, |r| {
        r.remove("eos_token_id");
    });
    check_missing_setting(&dir, "eos_token_id");
}

#[test]
fn mask_token_id_contradicts_config() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("mask_token_id".into(), json!(383));
    });
    dir.edit_json(REDRAFT, |r| {
        r.insert("mask_token_id".into(), json!(380));
    });
    check_contradictory_setting(
        &dir,
        "mask_token_id",
        &["config.json says 383", "redraft.json says 380"],
    );
}

#[test]
fn pad_token_id_contradicts_config() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_json(REDRAFT, |r| {
        r.insert("pad_token_id".into(), json!(380));
    });
    check_contradictory_setting(
        &dir,
        "pad_token_id",
        &["config.json says 382", "redraft.json says 380"],
    );
}

#[test]
fn dream_model_type_contradicts_logit_shift_false() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("model_type".into(), json!("Dream"));
    });
    dir.edit_json(REDRAFT, |r| {
        r.insert("logit_shift".into(), json!(false));
    });
    check_contradictory_setting(
        &dir,
        "logit_shift",
        &["model_type `Dream`", "redraft.json says false"],
    );
}

/// `model_type: "Dream"` is enough to know the logit shift; redraft.json need not repeat it.
#[test]
fn dream_model_type_implies_logit_shift() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(CONFIG, |c| {
        c.insert("model_type".into(), json!("Dream"));
        c.insert("mask_token_id".into(), json!(383));
    });
    dir.remove(REDRAFT);
    let engine = dir.load().unwrap_or_else(|err| panic!("{err}"));
    assert!(engine.settings().logit_shift);
    assert_eq!(engine.settings().mask_token_id, 383);
}

#[test]
fn mask_token_id_outside_vocabulary() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert("mask_token_id".into(), json!(MODEL_VOCAB));
    });
    check_contradictory_setting(&dir, "mask_token_id", &["id 384", "vocabulary of 384"]);
}

#[test]
fn mask_token_id_equals_eos() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert("mask_token_id".into(), json!(382));
    });
    check_contradictory_setting(&dir, "mask_token_id", &["EOS", "382"]);
}

#[test]
fn mask_token_id_equals_pad() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_json(CONFIG, |c| {
        c.insert("pad_token_id".into(), json!(383));
    });
    dir.edit_json(REDRAFT, |r| {
        r.remove("pad_token_id");
    });
    check_contradictory_setting(&dir, "mask_token_id", &["pad", "383"]);
}

#[test]
fn mask_token_id_equals_bos() {
    let dir = ModelDir::copy(LLADA);
    dir.edit_json(CONFIG, |c| {
        c.insert("bos_token_id".into(), json!(383));
    });
    dir.edit_json(REDRAFT, |r| {
        r.remove("bos_token_id");
    });
    check_contradictory_setting(&dir, "mask_token_id", &["BOS", "383"]);
}

#[test]
fn redraft_json_unknown_key() {
    let dir = ModelDir::copy(DREAM);
    dir.edit_json(REDRAFT, |r| {
        r.insert("mask_id".into(), json!(383));
    });
    let err = dir.load_err();
    assert!(
        matches!(err, Error::BadJson { ref path, .. } if *path == dir.file(REDRAFT)),
        "{err:?}"
    );
    assert_names(
        &err,
        &[&shown(&dir.file(REDRAFT)), "unknown field `mask_id`"],
    );
}

// --- tokenizer.json -------------------------------------------------------------------------

#[test]
fn tokenizer_missing() {
    let dir = ModelDir::copy(DREAM);
    dir.remove(TOKENIZER);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::MissingFile { ref path, .. } if *path == dir.file(TOKENIZER)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(TOKENIZER))]);
}

#[test]
fn tokenizer_corrupt() {
    let dir = ModelDir::copy(DREAM);
    let json = tokenizer_json();
    dir.write(TOKENIZER, &json[..json.len() / 2]);
    let err = dir.load_err();
    assert!(
        matches!(err, Error::Tokenizer { ref path, .. } if *path == dir.file(TOKENIZER)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(TOKENIZER))]);
}

#[test]
fn tokenizer_larger_than_model_vocabulary() {
    let dir = ModelDir::copy(DREAM);
    dir.write(TOKENIZER, tokenizer_json_of_size(MODEL_VOCAB + 40));
    let size = Tokenizer::load(&dir.file(TOKENIZER)).unwrap().vocab_size();
    assert!(
        size > MODEL_VOCAB,
        "the corpus is too small for the test: {size} tokens"
    );
    let err = dir.load_err();
    assert!(
        matches!(err, Error::Tokenizer { ref path, .. } if *path == dir.file(TOKENIZER)),
        "{err:?}"
    );
    assert_names(&err, &[&shown(&dir.file(TOKENIZER)), "vocab_size 384"]);
}

/// A tokenizer with fewer tokens than the model but an id past its rows (sparse ids, or a
/// special token numbered after them) loaded, and its id indexed past the logits. The largest
/// id, added tokens included, is held to `vocab_size`.
#[test]
fn tokenizer_id_past_model_vocabulary() {
    let moved: Value = {
        let mut json: Value = serde_json::from_str(tokenizer_json()).unwrap();
        let vocab = json["model"]["vocab"].as_object_mut().unwrap();
        let (token, _) = vocab
            .iter()
            .max_by_key(|(_, id)| id.as_u64())
            .map(|(t, id)| (t.clone(), id.clone()))
            .unwrap();
        vocab.insert(token, json!(5000));
        json
    };
    // A special token numbered after the vocabulary, as a model's added tokens often are.
    let added: Value = {
        let mut json: Value = serde_json::from_str(tokenizer_json()).unwrap();
        json["model"]["vocab"]["<|endoftext|>"] = json!(MODEL_VOCAB + 16);
        json["added_tokens"][0]["id"] = json!(MODEL_VOCAB + 16);
        json
    };
    for (tokenizer, needles) in [
        (moved, vec!["has id 5000", "vocab_size 384"]),
        (
            added,
            vec!["token `<|endoftext|>` has id 400", "vocab_size 384"],
        ),
    ] {
        let dir = ModelDir::copy(DREAM);
        dir.write(TOKENIZER, tokenizer.to_string());
        let size = Tokenizer::load(&dir.file(TOKENIZER)).unwrap().vocab_size();
        assert!(size <= MODEL_VOCAB, "fewer tokens than the model: {size}");
        let err = dir.load_err();
        assert!(
            matches!(err, Error::Tokenizer { ref path, .. } if *path == dir.file(TOKENIZER)),
            "{err:?}"
        );
        assert_names(&err, &[&shown(&dir.file(TOKENIZER))]);
        assert_names(&err, &needles);
    }
}

// --- a good directory -----------------------------------------------------------------------

/// The fixtures' weights are random, so only the shape of the answer is checked.
#[test]
fn loads_and_completes() {
    for fixture in [DREAM, LLADA] {
        let dir = ModelDir::copy(fixture);
        let engine = dir.load().unwrap_or_else(|err| panic!("{fixture}: {err}"));
        let mut request =
            InfillRequest::new("fn add_3(left: i32, right: i32) -> i32 {\n    ", "\n}\n");
        request.max_tokens = 8;
        let completion = engine
            .complete(&request, &mut ContextCache::default(), Controls::default())
            .unwrap_or_else(|err| panic!("{fixture}: {err}"));
        assert!(
            completion.tokens.len() <= request.max_tokens,
            "{fixture}: {completion:?}"
        );
        assert!(completion.forwards >= 1, "{fixture}: {completion:?}");
        assert!(
            completion.prefix_tokens > 0 && completion.suffix_tokens > 0,
            "{fixture}: {completion:?}"
        );
        // Random weights write bytes that are not UTF-8 too: the middle stops before them.
        let text = engine.tokenizer().text(&completion.tokens).unwrap();
        assert_eq!(completion.middle, text.text, "{fixture}");
        assert_eq!(completion.invalid_text, !text.is_complete(), "{fixture}");
        assert!(!completion.middle.contains(char::REPLACEMENT_CHARACTER));
    }
}

/// The embedded default model goes through `Engine::from_files`: its errors name the origin.
#[test]
fn model_files_in_memory_load_and_report_errors_against_their_origin() {
    use redraft_engine::engine::{ModelFiles, WeightsFile};
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/parity")
        .join(DREAM);
    let read = |file: &str| -> &'static str {
        Box::leak(
            std::fs::read_to_string(dir.join(file))
                .unwrap()
                .into_boxed_str(),
        )
    };
    let (config, redraft) = (read("config.json"), read("redraft.json"));
    let weights: &'static [u8] = Box::leak(
        std::fs::read(dir.join("model.safetensors"))
            .unwrap()
            .into_boxed_slice(),
    );
    let files = ModelFiles {
        origin: "<embedded>/model",
        weights: WeightsFile::Safetensors { config, weights },
        redraft: Some(redraft),
        tokenizer: tokenizer_json().as_bytes(),
    };
    assert_eq!(files.format(), "safetensors");
    let engine = redraft_engine::Engine::from_files(&files).unwrap();
    assert_eq!(engine.dir(), std::path::Path::new("<embedded>/model"));
    let truncated = ModelFiles {
        weights: WeightsFile::Safetensors {
            config,
            weights: &weights[..weights.len() / 2],
        },
        ..files
    };
    let err = redraft_engine::Engine::from_files(&truncated)
        .err()
        .unwrap();
    assert!(matches!(err, Error::CorruptWeights { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("<embedded>/model/model.safetensors"),
        "{err}"
    );
}

/// `edit_canvas` says how the model was trained to see a next edit's canvas; a value it does
/// not know is an error naming the file, never a silent default.
#[test]
fn edit_canvas_is_read_from_redraft_json() {
    use redraft_engine::config::EditCanvas;
    let dir = ModelDir::copy(DREAM);
    let engine = dir.load().unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(engine.settings().edit_canvas, EditCanvas::Masked);
    dir.edit_json(REDRAFT, |r| {
        r.insert("edit_canvas".into(), json!("draft"));
    });
    let engine = dir.load().unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(engine.settings().edit_canvas, EditCanvas::Draft);
    dir.edit_json(REDRAFT, |r| {
        r.insert("edit_canvas".into(), json!("sideways"));
    });
    let err = dir.load_err();
    assert_names(&err, &[REDRAFT, "sideways"]);
}
