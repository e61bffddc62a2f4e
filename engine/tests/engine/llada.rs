//! LLaDA's checkpoint layout: its `config.json` (OLMo field names) and tensor names
//! (`model.transformer.blocks.N.*`, no q/k/v biases) run as the Qwen2 model without biases, and
//! its GGUF (llama.cpp's `llada`: the converter's keys, query/key rows in the pair order of
//! llama.cpp's `NORM` RoPE) round-trips. The same layout through llama.cpp is checked in
//! `lsp-server/tests/llama_parity.rs`.
//!
//! The LLaDA names and the row permutation below are written out from `modeling_llada.py` and
//! llama.cpp's `convert_hf_to_gguf.py` (`LLaDAModel.permute`), not taken from the engine, so a
//! wrong entry in the engine's table or a missing permutation fails here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{AttentionPattern, ModelConfig};
use redraft_engine::gguf::GgufWriter;
use redraft_engine::qwen2::init_weights;
use redraft_engine::sampler::Pass;
use redraft_engine::ContextCache;
use redraft_engine::{Engine, Error};
use serde_json::json;

use super::reference::max_diff;

fn small_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model")
}

const CODE: &str = "fn parse(line: &str) -> Option<(u32, String)> {\n    let (id, name) = line.split_once(',')?;\n    Some((id.trim().parse().ok()?, name.to_string()))\n}\n";

/// A tensor's LLaDA name from its `transformers` one (`modeling_llada.py`: `LLaDAModel`'s
/// `transformer` dict, `LLaDALlamaBlock`'s modules; the gate is `ff_proj`, the SiLU's input).
fn llada_name(ours: &str) -> String {
    match ours {
        "model.embed_tokens.weight" => return "model.transformer.wte.weight".into(),
        "model.norm.weight" => return "model.transformer.ln_f.weight".into(),
        "lm_head.weight" => return "model.transformer.ff_out.weight".into(),
        _ => {}
    }
    let rest = ours.strip_prefix("model.layers.").unwrap();
    let (layer, part) = rest.split_once('.').unwrap();
    let (part, kind) = part.rsplit_once('.').unwrap();
    let theirs = match part {
        "input_layernorm" => "attn_norm",
        "self_attn.q_proj" => "q_proj",
        "self_attn.k_proj" => "k_proj",
        "self_attn.v_proj" => "v_proj",
        "self_attn.o_proj" => "attn_out",
        "post_attention_layernorm" => "ff_norm",
        "mlp.gate_proj" => "ff_proj",
        "mlp.up_proj" => "up_proj",
        "mlp.down_proj" => "ff_out",
        other => panic!("no LLaDA name for {other}"),
    };
    format!("model.transformer.blocks.{layer}.{theirs}.{kind}")
}

/// LLaDA's `config.json` for the Qwen2-shaped `config` (as LLaDA-8B's, at this size).
fn llada_config(config: &ModelConfig, qkv_bias: bool, mask: u32, eos: u32) -> serde_json::Value {
    json!({
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "activation_type": "silu",
        "block_type": "llama",
        "layer_norm_type": "rms",
        "rope": true,
        "alibi": false,
        "include_bias": false,
        "include_qkv_bias": qkv_bias,
        "bias_for_layer_norm": false,
        "attention_layer_norm": false,
        "scale_logits": false,
        "input_emb_norm": false,
        "block_group_size": 1,
        "d_model": config.hidden_size,
        "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_kv_heads(),
        "n_layers": config.num_hidden_layers,
        "mlp_hidden_size": config.intermediate_size,
        "mlp_ratio": 4,
        "vocab_size": config.vocab_size,
        "embedding_size": config.vocab_size,
        "max_sequence_length": config.max_position_embeddings,
        "rope_theta": config.rope_theta(),
        "rms_norm_eps": config.rms_norm_eps,
        "weight_tying": config.tie_word_embeddings,
        "mask_token_id": mask,
        "eos_token_id": eos,
        "pad_token_id": eos,
    })
}

/// A model directory: `config.json`, `tensors` as `model.safetensors`, the default model's
/// tokenizer, and `redraft.json` if given.
fn model_dir(
    config: &serde_json::Value,
    tensors: &HashMap<String, Tensor>,
    redraft: Option<serde_json::Value>,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    if let Some(redraft) = redraft {
        std::fs::write(dir.path().join("redraft.json"), redraft.to_string()).unwrap();
    }
    std::fs::copy(
        small_model().join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    candle_core::safetensors::save(tensors, dir.path().join("model.safetensors")).unwrap();
    dir
}

/// The same tensors under LLaDA's names.
fn renamed(tensors: &HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    tensors
        .iter()
        .map(|(k, v)| (llada_name(k), v.clone()))
        .collect()
}

/// The random model: the default model's vocabulary (4096), d 64, 4 query heads over 2
/// key/value heads (so the key rows permute per key head), head 16, ffn 96, 2 layers, untied,
/// RoPE base 5e5. Every tensor random and non-trivial: matrices N(0, 0.08), norms 1 +- 0.3; no
/// q/k/v biases (LLaDA has none).
fn random_model() -> (ModelConfig, HashMap<String, Tensor>) {
    let config: ModelConfig = serde_json::from_value(json!({
        "model_type": "qwen2",
        "vocab_size": 4096,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": false,
    }))
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // In name order, so the seed gives the same model every run.
    let tensors: std::collections::BTreeMap<String, Tensor> =
        init_weights(&config, 7).unwrap().into_iter().collect();
    let tensors = tensors
        .into_iter()
        .filter(|(name, _)| !name.ends_with(".bias"))
        .map(|(name, t)| {
            let t = if name.ends_with("norm.weight") {
                let values: Vec<f32> = (0..t.elem_count())
                    .map(|_| 1.0 + 0.6 * (rng.random::<f32>() - 0.5))
                    .collect();
                Tensor::from_vec(values, t.dims(), &Device::Cpu).unwrap()
            } else {
                (t * 4.0).unwrap()
            };
            (name, t)
        })
        .collect();
    (config, tensors)
}

/// The default model's ids (mask 0, EOS/pad 1), stated in `redraft.json` for a Qwen2 layout.
fn qwen2_redraft() -> serde_json::Value {
    json!({"mask_token_id": 0, "eos_token_id": 1, "pad_token_id": 1, "logit_shift": false})
}

/// The Qwen2-layout `config.json` of `config`.
fn qwen2_config(config: &ModelConfig) -> serde_json::Value {
    serde_json::to_value(config).unwrap()
}

/// Logits `[positions, vocab]` of a full pass over `tokens`.
fn logits(engine: &Engine, tokens: &[u32]) -> Vec<Vec<f32>> {
    let t = engine
        .model()
        .forward(
            &[tokens.to_vec()],
            0..tokens.len(),
            &mut ContextCache::default(),
            Pass::Full { store: false },
        )
        .unwrap();
    t.squeeze(0).unwrap().to_vec2().unwrap()
}

/// `||b - a|| / ||a||` over all logits, and the share of rows with the same argmax.
fn closeness(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f64) {
    let argmax = |row: &[f32]| {
        row.iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .unwrap()
            .0
    };
    let (mut err, mut norm) = (0f64, 0f64);
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        err += ((x - y) as f64).powi(2);
        norm += (*x as f64).powi(2);
    }
    let same = a
        .iter()
        .zip(b)
        .filter(|(x, y)| argmax(x) == argmax(y))
        .count();
    ((err / norm).sqrt(), same as f64 / a.len() as f64)
}

/// A tiny LLaDA checkpoint is the Qwen2 model with zero biases, exactly: the names map onto
/// the right projections (a gate swapped with the up projection, or the head with the
/// embedding, changes every logit) and the model runs without bias tensors in the file.
#[test]
fn llada_checkpoint_is_qwen2_with_zero_biases() {
    let (config, tensors) = random_model();
    let llada = model_dir(
        &llada_config(&config, false, 0, 1),
        &renamed(&tensors),
        None,
    );
    let mut biased = tensors.clone();
    let hd = config.head_dim();
    for i in 0..config.num_hidden_layers {
        for (part, heads) in [
            ("q_proj", config.num_attention_heads),
            ("k_proj", config.num_kv_heads()),
            ("v_proj", config.num_kv_heads()),
        ] {
            biased.insert(
                format!("model.layers.{i}.self_attn.{part}.bias"),
                Tensor::zeros(heads * hd, DType::F32, &Device::Cpu).unwrap(),
            );
        }
    }
    let qwen2 = model_dir(&qwen2_config(&config), &biased, Some(qwen2_redraft()));

    let a = Engine::load(llada.path()).unwrap();
    let b = Engine::load(qwen2.path()).unwrap();
    // LLaDA's family settings: bidirectional, no shift; the ids its config names.
    assert_eq!(a.settings(), b.settings());
    assert!(!a.settings().logit_shift);
    assert_eq!(a.settings().attention, AttentionPattern::Bidirectional);
    assert_eq!(a.model().config().model_type, "llada");
    assert!(!a.model().config().qkv_bias());
    assert_eq!(a.model().config().num_kv_heads(), 2);
    let ids = a.tokenizer().encode(CODE).unwrap();
    assert_eq!(max_diff(&logits(&a, &ids), &logits(&b, &ids)), 0.0);

    // The same checkpoint in two shards behind an index (LLaDA-8B's layout) loads the same.
    let sharded = tempfile::tempdir().unwrap();
    for file in ["config.json", "tokenizer.json"] {
        std::fs::copy(llada.path().join(file), sharded.path().join(file)).unwrap();
    }
    let llada_tensors = renamed(&tensors);
    let (mut first, mut second) = (HashMap::new(), HashMap::new());
    let mut map = serde_json::Map::new();
    for (name, t) in &llada_tensors {
        let shard = if name.contains(".blocks.1.") || name.contains("ln_f") {
            second.insert(name.clone(), t.clone());
            "model-00002-of-00002.safetensors"
        } else {
            first.insert(name.clone(), t.clone());
            "model-00001-of-00002.safetensors"
        };
        map.insert(name.clone(), json!(shard));
    }
    candle_core::safetensors::save(
        &first,
        sharded.path().join("model-00001-of-00002.safetensors"),
    )
    .unwrap();
    candle_core::safetensors::save(
        &second,
        sharded.path().join("model-00002-of-00002.safetensors"),
    )
    .unwrap();
    std::fs::write(
        sharded.path().join("model.safetensors.index.json"),
        json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();
    let c = Engine::load(sharded.path()).unwrap();
    assert_eq!(max_diff(&logits(&a, &ids), &logits(&c, &ids)), 0.0);
}

/// With `include_qkv_bias` the biases are read from the file: the trained default model in
/// LLaDA's layout gives its own logits exactly.
#[test]
fn llada_checkpoint_with_qkv_biases_reads_them() {
    let reference = Engine::load(&small_model()).unwrap();
    let config = reference.model().config().clone();
    let tensors: HashMap<String, Tensor> = Weights::load(&small_model(), DType::F32, &Device::Cpu)
        .unwrap()
        .dense_tensors()
        .unwrap();
    let dir = model_dir(&llada_config(&config, true, 0, 1), &renamed(&tensors), None);
    let llada = Engine::load(dir.path()).unwrap();
    assert!(llada.model().config().qkv_bias());
    assert_eq!(llada.settings(), reference.settings());
    let ids = reference.tokenizer().encode(CODE).unwrap();
    assert_eq!(
        max_diff(&logits(&reference, &ids), &logits(&llada, &ids)),
        0.0
    );
}

/// `t`'s rows as llama.cpp's converter stores a query or key projection for `NORM` RoPE:
/// `w.reshape(heads, 2, head_dim / 2, *rest).swapaxes(1, 2).reshape(w.shape)`.
fn converter_permute(t: &Tensor, head_dim: usize) -> Tensor {
    let dims = t.dims().to_vec();
    let heads = dims[0] / head_dim;
    let rest: usize = dims[1..].iter().product();
    t.reshape((heads, 2, head_dim / 2, rest))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape(dims)
        .unwrap()
}

/// A GGUF tensor dequantized, by llama.cpp name.
fn gguf_tensor(path: &Path, name: &str) -> Tensor {
    let mut file = std::fs::File::open(path).unwrap();
    let content = Content::read(&mut file).unwrap();
    content
        .tensor(&mut file, name, &Device::Cpu)
        .unwrap()
        .dequantize(&Device::Cpu)
        .unwrap()
}

fn write_gguf(engine_dir: &Path, arch: &str, matrices: GgmlDType) -> (tempfile::TempDir, PathBuf) {
    let engine = Engine::load(engine_dir).unwrap();
    let tensors = Weights::load(engine_dir, DType::F32, &Device::Cpu)
        .unwrap()
        .dense_tensors()
        .unwrap();
    let tokenizer = std::fs::read_to_string(engine_dir.join("tokenizer.json")).unwrap();
    let writer = GgufWriter::new(
        arch,
        engine.model().config(),
        engine.settings(),
        &tokenizer,
        &tensors,
        matrices,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("m-{matrices:?}.gguf"));
    writer.write(&path).unwrap();
    (dir, path)
}

/// redraft writes a `llada` GGUF as llama.cpp's converter does (its keys; q/k rows permuted
/// for `NORM` RoPE, biases included) and reads it back: f32 gives the safetensors logits
/// exactly, q8_0 stays within its rounding.
#[test]
fn llada_gguf_round_trips() {
    let (config, tensors) = random_model();
    let llada = model_dir(
        &llada_config(&config, false, 0, 1),
        &renamed(&tensors),
        None,
    );
    let reference = Engine::load(llada.path()).unwrap();
    let ids = reference.tokenizer().encode(CODE).unwrap();
    let want = logits(&reference, &ids);

    let (_d, f32_path) = write_gguf(llada.path(), "llada", GgmlDType::F32);
    let mut file = std::fs::File::open(&f32_path).unwrap();
    let content = Content::read(&mut file).unwrap();
    let meta = &content.metadata;
    assert_eq!(meta["general.architecture"].to_string().unwrap(), "llada");
    assert!(!meta["llada.attention.causal"].to_bool().unwrap());
    assert!(!meta["diffusion.shift_logits"].to_bool().unwrap());
    assert_eq!(meta["llada.rope.dimension_count"].to_u32().unwrap(), 16);
    assert_eq!(meta["llada.vocab_size"].to_u32().unwrap(), 4096);
    assert_eq!(meta["llada.attention.head_count_kv"].to_u32().unwrap(), 2);
    assert!(!content.tensor_infos.contains_key("blk.0.attn_q.bias"));
    // The file holds the converter's row order; v is not permuted.
    for (gguf, ours, permuted) in [
        (
            "blk.1.attn_q.weight",
            "model.layers.1.self_attn.q_proj.weight",
            true,
        ),
        (
            "blk.1.attn_k.weight",
            "model.layers.1.self_attn.k_proj.weight",
            true,
        ),
        (
            "blk.1.attn_v.weight",
            "model.layers.1.self_attn.v_proj.weight",
            false,
        ),
    ] {
        let want = if permuted {
            converter_permute(&tensors[ours], 16)
        } else {
            tensors[ours].clone()
        };
        let got = gguf_tensor(&f32_path, gguf);
        let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap();
        assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0, "{gguf}");
    }

    let gguf = Engine::load(&f32_path).unwrap();
    assert_eq!(gguf.settings(), reference.settings());
    assert_eq!(gguf.model().config().model_type, "llada");
    assert!(!gguf.model().config().qkv_bias());
    assert_eq!(gguf.tokenizer().encode(CODE).unwrap(), ids);
    assert_eq!(max_diff(&want, &logits(&gguf, &ids)), 0.0, "f32 GGUF");

    let (_d, q8_path) = write_gguf(llada.path(), "llada", GgmlDType::Q8_0);
    let q8 = Engine::load(&q8_path).unwrap();
    assert!(q8.model().is_quantized());
    let got = logits(&q8, &ids);
    // The same model with its matrices rounded to Q8_0 and back, as f32: what the file holds.
    let rounded: HashMap<String, Tensor> = tensors
        .iter()
        .map(|(name, t)| {
            let t = if t.rank() == 2 {
                QTensor::quantize(t, GgmlDType::Q8_0)
                    .unwrap()
                    .dequantize(&Device::Cpu)
                    .unwrap()
            } else {
                t.clone()
            };
            (name.clone(), t)
        })
        .collect();
    let rounded_dir = model_dir(
        &llada_config(&config, false, 0, 1),
        &renamed(&rounded),
        None,
    );
    let rounded = logits(&Engine::load(rounded_dir.path()).unwrap(), &ids);
    let (rel, top1) = closeness(&want, &got);
    let (rel_rounded, _) = closeness(&rounded, &got);
    // Measured (57 positions): against the f32 model, relative RMS 0.024 and top-1 0.965, of
    // which the weights' rounding alone is 0.020 (the rounded f32 model against the f32 one);
    // against the rounded model 0.016, the kernel's 8-bit activations. This random model has
    // near ties, so top-1 is loose.
    assert!(
        rel < 0.035 && top1 >= 0.85 && rel_rounded < 0.025,
        "q8_0: relative RMS {rel:.4}, top-1 {top1:.3}; against the rounded f32 model {rel_rounded:.4}"
    );
}

/// With q/k/v biases (the default model in LLaDA's layout) the key and query biases are
/// permuted with their rows: the f32 GGUF is still the model exactly.
#[test]
fn llada_gguf_with_biases_round_trips() {
    let config = ModelConfig::load(&small_model().join("config.json")).unwrap();
    let tensors = Weights::load(&small_model(), DType::F32, &Device::Cpu)
        .unwrap()
        .dense_tensors()
        .unwrap();
    let dir = model_dir(&llada_config(&config, true, 0, 1), &renamed(&tensors), None);
    let (_d, path) = write_gguf(dir.path(), "llada", GgmlDType::F32);
    let bias = gguf_tensor(&path, "blk.0.attn_k.bias");
    let want = converter_permute(
        &tensors["model.layers.0.self_attn.k_proj.bias"],
        config.head_dim(),
    );
    let diff = (bias - want).unwrap().abs().unwrap().max_all().unwrap();
    assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0);
    let reference = Engine::load(&small_model()).unwrap();
    let gguf = Engine::load(&path).unwrap();
    assert!(gguf.model().config().qkv_bias());
    let ids = reference.tokenizer().encode(CODE).unwrap();
    assert_eq!(
        max_diff(&logits(&reference, &ids), &logits(&gguf, &ids)),
        0.0
    );
}

fn load_err(dir: &Path) -> (String, Error) {
    match Engine::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => (e.to_string(), e),
    }
}

/// Errors name what the LLaDA checkpoint itself calls the tensor or setting at fault.
#[test]
fn llada_errors_name_the_checkpoints_own_names() {
    let (config, tensors) = random_model();
    let mut missing = renamed(&tensors);
    missing.remove("model.transformer.blocks.1.up_proj.weight");
    let dir = model_dir(&llada_config(&config, false, 0, 1), &missing, None);
    let (msg, e) = load_err(dir.path());
    assert!(matches!(e, Error::MissingTensor { .. }), "{msg}");
    assert!(
        msg.contains("model.transformer.blocks.1.up_proj.weight"),
        "{msg}"
    );

    let mut wrong = renamed(&tensors);
    wrong.insert(
        "model.transformer.blocks.0.k_proj.weight".into(),
        Tensor::zeros((64, 64), DType::F32, &Device::Cpu).unwrap(),
    );
    let dir = model_dir(&llada_config(&config, false, 0, 1), &wrong, None);
    let (msg, e) = load_err(dir.path());
    assert!(matches!(e, Error::TensorShape { .. }), "{msg}");
    assert!(
        msg.contains("model.transformer.blocks.0.k_proj.weight"),
        "{msg}"
    );

    // include_qkv_bias says the file has biases, and it has none.
    let dir = model_dir(&llada_config(&config, true, 0, 1), &renamed(&tensors), None);
    let (msg, _) = load_err(dir.path());
    assert!(
        msg.contains("model.transformer.blocks.0.q_proj.bias"),
        "{msg}"
    );

    for (key, value, needle) in [
        ("block_type", json!("sequential"), "block_type `sequential`"),
        ("include_bias", json!(true), "include_bias"),
        (
            "activation_type",
            json!("swiglu"),
            "activation_type `swiglu`",
        ),
        ("attention_layer_norm", json!(true), "attention_layer_norm"),
        ("rope", json!(false), "rope = false"),
        (
            "layer_norm_type",
            json!("default"),
            "layer_norm_type `default`",
        ),
    ] {
        let mut cfg = llada_config(&config, false, 0, 1);
        cfg[key] = value;
        let dir = model_dir(&cfg, &renamed(&tensors), None);
        let (msg, e) = load_err(dir.path());
        assert!(matches!(e, Error::UnsupportedConfig { .. }), "{key}: {msg}");
        assert!(msg.contains(needle) && msg.contains("config.json"), "{msg}");
    }

    // LLaDA's ids when the config names none: its mask (126336) and EOS lie outside this
    // vocabulary, so the setting is asked for by name.
    let mut cfg = llada_config(&config, false, 0, 1);
    cfg.as_object_mut().unwrap().remove("mask_token_id");
    let dir = model_dir(&cfg, &renamed(&tensors), None);
    let (msg, e) = load_err(dir.path());
    assert!(matches!(e, Error::MissingSetting { .. }), "{msg}");
    assert!(msg.contains("mask_token_id"), "{msg}");
    // A stated shift contradicts the family.
    let dir = model_dir(
        &llada_config(&config, false, 0, 1),
        &renamed(&tensors),
        Some(json!({"logit_shift": true})),
    );
    let (msg, e) = load_err(dir.path());
    assert!(matches!(e, Error::ContradictorySetting { .. }), "{msg}");

    // A GGUF missing a tensor names llama.cpp's name for it.
    let ok = model_dir(
        &llada_config(&config, false, 0, 1),
        &renamed(&tensors),
        None,
    );
    let engine = Engine::load(ok.path()).unwrap();
    let weights = Weights::load(ok.path(), DType::F32, &Device::Cpu)
        .unwrap()
        .dense_tensors()
        .unwrap();
    let tokenizer = std::fs::read_to_string(ok.path().join("tokenizer.json")).unwrap();
    let writer = |arch: &str| {
        GgufWriter::new(
            arch,
            engine.model().config(),
            engine.settings(),
            &tokenizer,
            &weights,
            GgmlDType::Q8_0,
        )
    };
    let gguf_dir = tempfile::tempdir().unwrap();
    let path = gguf_dir.path().join("m.gguf");
    writer("llada")
        .unwrap()
        .without("blk.1.ffn_gate.weight")
        .write(&path)
        .unwrap();
    let (msg, e) = load_err(&path);
    assert!(matches!(e, Error::MissingTensor { .. }), "{msg}");
    assert!(msg.contains("blk.1.ffn_gate.weight"), "{msg}");
    // A pre-tokenizer redraft does not know asks for the tokenizer.json.
    writer("llada")
        .unwrap()
        .set("tokenizer.ggml.pre", Value::String("llada-moe".into()))
        .write(&path)
        .unwrap();
    let (msg, _) = load_err(&path);
    assert!(
        msg.contains("llada-moe") && msg.contains("tokenizer.json"),
        "{msg}"
    );
    // llama.cpp's `llada` rotates the whole head; a partial rotation is refused.
    writer("llada")
        .unwrap()
        .set("llada.rope.dimension_count", Value::U32(8))
        .write(&path)
        .unwrap();
    let (msg, _) = load_err(&path);
    assert!(msg.contains("llada.rope.dimension_count"), "{msg}");
    // The file says it is shifted: that contradicts LLaDA.
    writer("llada")
        .unwrap()
        .set("diffusion.shift_logits", Value::Bool(true))
        .write(&path)
        .unwrap();
    let (msg, e) = load_err(&path);
    assert!(matches!(e, Error::ContradictorySetting { .. }), "{msg}");
    // A shifted or causal model is no `llada` file.
    let mut shifted = *engine.settings();
    shifted.logit_shift = true;
    let refused = GgufWriter::new(
        "llada",
        engine.model().config(),
        &shifted,
        &tokenizer,
        &weights,
        GgmlDType::F32,
    );
    assert!(refused.is_err());
}
