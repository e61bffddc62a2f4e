//! Small GGUF checkpoints for tests, laid out as llama.cpp writes a Qwen2.5-Coder one: the
//! `qwen2` architecture's metadata, tensors under llama.cpp's names (matrices in the block type
//! asked for, vectors in f32), a byte-level BPE vocabulary with Qwen's special tokens (the FIM
//! markers, `<|fim_pad|>`, `<|endoftext|>` as padding and `<|im_end|>` as EOS, as the instruct
//! model states them), and an untied head with grouped-query attention. Shared by
//! `train/tests/init.rs` and `lab/tests/train_init.rs`.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use redraft_engine::config::ModelConfig;
use redraft_engine::tokenizer::Tokenizer;

/// Qwen2.5's special tokens the adaptation reads, first in the vocabulary here.
pub const SPECIALS: [&str; 7] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
];

/// Text the vocabulary is trained on (and a test may train on).
pub const TEXT: &str = include_str!("../../train/src/train/examples.rs");

/// A byte-level BPE of `vocab` tokens with [`SPECIALS`], as `tokenizer.json` text.
pub fn tokenizer_json(vocab: usize) -> String {
    let tokenizer = Tokenizer::train_bpe([TEXT].into_iter(), vocab, &SPECIALS).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    tokenizer.save(&path).unwrap();
    std::fs::read_to_string(&path).unwrap()
}

/// A Qwen2-layout config: 2 layers, hidden 64, 4 heads over 2 key/value heads, ffn 96, an
/// untied head, RoPE base 1e6, `positions` positions.
pub fn config(vocab: usize, positions: usize) -> ModelConfig {
    serde_json::from_value(serde_json::json!({
        "model_type": "qwen2",
        "vocab_size": vocab,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": positions,
        "rope_theta": 1_000_000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false,
    }))
    .unwrap()
}

/// Seeded random weights of `config` with every tensor non-trivial (norms around 1, biases
/// around 0).
pub fn weights(config: &ModelConfig, seed: u64) -> HashMap<String, Tensor> {
    let mut weights = redraft_engine::qwen2::init_weights(config, seed).unwrap();
    for (name, t) in weights.iter_mut() {
        let salt = name
            .bytes()
            .fold(seed, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
        let base = if name.ends_with("norm.weight") {
            1.0
        } else {
            0.0
        };
        *t = if name.ends_with("norm.weight") || name.ends_with(".bias") {
            let values: Vec<f32> = (0..t.elem_count())
                .map(|j| base + 0.6 * (uniform(salt, j as u64) - 0.5))
                .collect();
            Tensor::from_vec(values, t.dims(), &Device::Cpu).unwrap()
        } else {
            (&*t * 4.0).unwrap()
        };
    }
    weights
}

/// A uniform draw in [0, 1) for (`seed`, `index`) (splitmix64).
fn uniform(seed: u64, index: u64) -> f32 {
    let mut z = (seed ^ index.rotate_left(17)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
}

/// Writes `tensors` (transformers names) of `config` as a `qwen2` GGUF at `path`: matrices as
/// `matrices`, vectors in f32; `reshaped` replaces the stored shape of one tensor (a file of
/// another shape).
pub fn write(
    path: &Path,
    config: &ModelConfig,
    tensors: &HashMap<String, Tensor>,
    tokenizer_json: &str,
    matrices: GgmlDType,
    reshaped: Option<(&str, &[usize])>,
) {
    let json: serde_json::Value = serde_json::from_str(tokenizer_json).unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (token, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = token.clone();
    }
    let mut types = vec![1i32; tokens.len()];
    for added in json["added_tokens"].as_array().unwrap() {
        types[added["id"].as_u64().unwrap() as usize] = 3;
    }
    let merges: Vec<Value> = json["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            serde_json::Value::String(s) => Value::String(s.clone()),
            pair => Value::String(format!(
                "{} {}",
                pair[0].as_str().unwrap(),
                pair[1].as_str().unwrap()
            )),
        })
        .collect();
    let id = |t: &str| Value::U32(vocab[t].as_u64().unwrap() as u32);
    let count = |n: usize| Value::U32(n as u32);
    let metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("qwen2".into())),
        ("qwen2.block_count".into(), count(config.num_hidden_layers)),
        (
            "qwen2.context_length".into(),
            count(config.max_position_embeddings),
        ),
        ("qwen2.embedding_length".into(), count(config.hidden_size)),
        (
            "qwen2.feed_forward_length".into(),
            count(config.intermediate_size),
        ),
        (
            "qwen2.attention.head_count".into(),
            count(config.num_attention_heads),
        ),
        (
            "qwen2.attention.head_count_kv".into(),
            count(config.num_kv_heads()),
        ),
        (
            "qwen2.rope.freq_base".into(),
            Value::F32(config.rope_theta() as f32),
        ),
        (
            "qwen2.attention.layer_norm_rms_epsilon".into(),
            Value::F32(config.rms_norm_eps as f32),
        ),
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("gpt-2".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(merges)),
        ("tokenizer.ggml.eos_token_id".into(), id("<|im_end|>")),
        (
            "tokenizer.ggml.padding_token_id".into(),
            id("<|endoftext|>"),
        ),
        ("tokenizer.ggml.bos_token_id".into(), id("<|endoftext|>")),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
    ];
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let stored: Vec<(String, QTensor)> = names
        .into_iter()
        .map(|name| {
            let mut t = tensors[name].clone();
            if let Some((_, shape)) = reshaped.filter(|(n, _)| n == name) {
                let n: usize = shape.iter().product();
                let values = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                t = Tensor::from_vec(values[..n].to_vec(), shape, &Device::Cpu).unwrap();
            }
            let dtype = if t.rank() == 2 && t.dim(1).unwrap().is_multiple_of(matrices.block_size())
            {
                matrices
            } else {
                GgmlDType::F32
            };
            let q = QTensor::quantize(&t, dtype).unwrap();
            (redraft_engine::gguf::gguf_name(name).unwrap(), q)
        })
        .collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(
        &mut file,
        &metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect::<Vec<_>>(),
        &stored
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect::<Vec<_>>(),
    )
    .unwrap();
}
