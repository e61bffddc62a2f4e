//! Writing GGUF files: a model (config, diffusion settings, tensors under `transformers` names,
//! `tokenizer.json`) as llama.cpp lays it out, its matrices in the block type asked for. What
//! `redraft convert` runs; [`super::load`] reads it back. A `llada` file is what llama.cpp's
//! `convert_hf_to_gguf.py` (`LLaDAModel`) writes: its keys, and the query and key rows in the
//! pair order of llama.cpp's `NORM` RoPE ([`super::names::rope_pair_rows`]).

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Tensor;

use super::names::{gguf_name, is_query_or_key, rope_pair_rows};
use super::type_names::file_type_of;
use super::vocabulary::QWEN2_SPLIT;
use crate::config::{AttentionPattern, DiffusionSettings, ModelConfig};
use crate::error::{Error, Result};

/// A GGUF file's metadata and tensors, before writing.
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, QTensor)>,
}

impl GgufWriter {
    /// `config`'s model under `arch` (`dream` for a diffusion model, `llada` for a LLaDA one,
    /// `qwen2` for an autoregressive one), with `settings`' ids, the vocabulary of `tokenizer_json` (a
    /// byte-level BPE `tokenizer.json`) and `tensors` (`transformers` names): matrices as
    /// `matrices`, vectors (norms, biases) in f32. A matrix whose width the block type does not
    /// divide stays f32.
    pub fn new(
        arch: &str,
        config: &ModelConfig,
        settings: &DiffusionSettings,
        tokenizer_json: &str,
        tensors: &HashMap<String, Tensor>,
        matrices: GgmlDType,
    ) -> Result<GgufWriter> {
        // Sizes from a config no model means (a vocabulary of 1e11) would size the vocabulary
        // table below; `redraft convert`'s configs are validated on reading, this one may not be.
        config.validate(Path::new("config.json"))?;
        if settings.attention != AttentionPattern::Bidirectional && arch == "dream" {
            return Err(Error::InvalidRequest(format!(
                "a `dream` GGUF is bidirectional; this model attends {:?}",
                settings.attention
            )));
        }
        if arch == "llada"
            && (settings.attention != AttentionPattern::Bidirectional || settings.logit_shift)
        {
            return Err(Error::InvalidRequest(format!(
                "a `llada` GGUF is bidirectional and unshifted; this model attends {:?}{}",
                settings.attention,
                if settings.logit_shift {
                    " with the logit shift"
                } else {
                    ""
                }
            )));
        }
        let key = |k: &str| format!("{arch}.{k}");
        let count = |n: usize| Value::U32(n as u32);
        let mut metadata = vec![
            (
                "general.architecture".to_string(),
                Value::String(arch.into()),
            ),
            ("general.name".to_string(), Value::String("redraft".into())),
            (key("block_count"), count(config.num_hidden_layers)),
            (key("context_length"), count(config.max_position_embeddings)),
            (key("embedding_length"), count(config.hidden_size)),
            (key("feed_forward_length"), count(config.intermediate_size)),
            (
                key("attention.head_count"),
                count(config.num_attention_heads),
            ),
            (key("attention.head_count_kv"), count(config.num_kv_heads())),
            (key("attention.key_length"), count(config.head_dim())),
            (key("attention.value_length"), count(config.head_dim())),
            (
                key("rope.freq_base"),
                Value::F32(config.rope_theta() as f32),
            ),
            (
                key("attention.layer_norm_rms_epsilon"),
                Value::F32(config.rms_norm_eps as f32),
            ),
            (
                "diffusion.shift_logits".to_string(),
                Value::Bool(settings.logit_shift),
            ),
            (
                key("attention.causal"),
                Value::Bool(settings.attention != AttentionPattern::Bidirectional),
            ),
            (
                "tokenizer.ggml.mask_token_id".to_string(),
                Value::U32(settings.mask_token_id),
            ),
            (
                "tokenizer.ggml.eos_token_id".to_string(),
                Value::U32(settings.eos_token_id),
            ),
            (
                "tokenizer.ggml.padding_token_id".to_string(),
                Value::U32(settings.pad_token_id),
            ),
            (
                "tokenizer.ggml.add_bos_token".to_string(),
                Value::Bool(settings.bos_token_id.is_some()),
            ),
        ];
        if let Some(bos) = settings.bos_token_id {
            metadata.push(("tokenizer.ggml.bos_token_id".into(), Value::U32(bos)));
        }
        let interleaved = arch == "llada";
        if interleaved {
            // The converter's two `llada` extras.
            metadata.push((key("vocab_size"), count(config.vocab_size)));
            metadata.push((key("rope.dimension_count"), count(config.head_dim())));
        }
        metadata.extend(vocabulary(tokenizer_json, config.vocab_size)?);
        let mut names: Vec<&String> = tensors.keys().collect();
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Some(file_name) = gguf_name(name) else {
                return Err(Error::InvalidRequest(format!(
                    "tensor `{name}` has no place in a Qwen2 GGUF"
                )));
            };
            let mut tensor = tensors[name].to_dtype(candle_core::DType::F32)?;
            if interleaved && is_query_or_key(name) {
                let rows = tensor.dims().first().copied().unwrap_or(0);
                let order = rope_pair_rows(rows, config.head_dim(), true);
                let order = Tensor::new(order.as_slice(), tensor.device())?;
                tensor = tensor.index_select(&order, 0)?;
            }
            let width = tensor.dims().last().copied().unwrap_or(0);
            let dtype = if tensor.rank() == 2 && width.is_multiple_of(matrices.block_size()) {
                matrices
            } else {
                GgmlDType::F32
            };
            out.push((file_name, QTensor::quantize(&tensor, dtype)?));
        }
        Ok(GgufWriter {
            metadata,
            tensors: out,
        })
    }

    /// Sets (or replaces) one metadata key.
    pub fn set(mut self, key: &str, value: Value) -> GgufWriter {
        self.metadata.retain(|(k, _)| k != key);
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Leaves out the tensor llama.cpp calls `name`.
    pub fn without(mut self, name: &str) -> GgufWriter {
        self.tensors.retain(|(n, _)| n != name);
        self
    }

    /// The tensors, by llama.cpp name (to change their block types).
    pub fn tensors_mut(&mut self) -> &mut [(String, QTensor)] {
        &mut self.tensors
    }

    /// Writes the file: into a fresh file of this call's own beside `path` (a name no one else
    /// holds, created anew: a link or a file already there is never written through or
    /// deleted, and two writers to one `path` never share one), then renamed over `path` (a
    /// link at `path` is replaced, not followed); on failure (a full disk) the partial file is
    /// removed. Unless set, `general.file_type` is stated from the type most of the matrices'
    /// elements are in (llama.cpp guesses from the type most tensors are in, norms included,
    /// which can say F32 for a quantized model), named as llama.cpp names that type's file:
    /// llama.cpp and Ollama print it as the model's quantization.
    pub fn write(&self, path: &Path) -> Result<()> {
        let file_type = Value::U32(self.file_type());
        let mut metadata: Vec<(&str, &Value)> =
            self.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        if !metadata.iter().any(|(k, _)| *k == FILE_TYPE) {
            metadata.push((FILE_TYPE, &file_type));
        }
        let tensors: Vec<(&str, &QTensor)> =
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let failed = |source| Error::Write {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".redraft-").suffix(".gguf.tmp");
        // A model file others may read, as `File::create` makes one (the umask still applies),
        // not the temporary file's owner-only mode, which the rename would keep.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let mut file = builder.tempfile_in(dir).map_err(failed)?;
        // A full disk is a write error naming the file, not "model computation failed".
        gguf_file::write(file.as_file_mut(), &metadata, &tensors).map_err(|e| match e {
            candle_core::Error::Io(source) => failed(source),
            other => other.into(),
        })?;
        file.persist(path).map_err(|e| failed(e.error))?;
        Ok(())
    }

    /// [`file_type_of`] the type that holds the most elements of the matrices (every tensor's
    /// when there is no matrix); all f32 (0) where that type is no file's.
    fn file_type(&self) -> u32 {
        let matrices = self.tensors.iter().any(|(_, t)| t.shape().rank() >= 2);
        let mut elements: Vec<(GgmlDType, usize)> = Vec::new();
        for (_, tensor) in &self.tensors {
            if matrices && tensor.shape().rank() < 2 {
                continue;
            }
            let count = tensor.shape().elem_count();
            match elements.iter_mut().find(|(d, _)| *d == tensor.dtype()) {
                Some((_, n)) => *n += count,
                None => elements.push((tensor.dtype(), count)),
            }
        }
        elements
            .into_iter()
            .max_by_key(|&(_, n)| n)
            .and_then(|(dtype, _)| file_type_of(dtype))
            .unwrap_or(0)
    }
}

const FILE_TYPE: &str = "general.file_type";

/// A byte-level BPE `tokenizer.json` as llama.cpp's `tokenizer.ggml.*` metadata.
fn vocabulary(json: &str, vocab_size: usize) -> Result<Vec<(String, Value)>> {
    let bad = |message: String| Error::InvalidRequest(format!("tokenizer.json: {message}"));
    let json: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let model = &json["model"];
    if model["type"] != "BPE" {
        return Err(bad("only a BPE tokenizer can be written to GGUF".into()));
    }
    let pre = match &json["pre_tokenizer"] {
        // llama.cpp's name (it refuses `gpt2`).
        p if p["type"] == "ByteLevel" && p["use_regex"] == true => "gpt-2",
        p if p["type"] == "Sequence"
            && p["pretokenizers"][0]["pattern"]["Regex"] == QWEN2_SPLIT
            && p["pretokenizers"][1]["type"] == "ByteLevel" =>
        {
            "qwen2"
        }
        other => {
            return Err(bad(format!(
                "pre-tokenizer {other} has no llama.cpp name (GPT-2's and Qwen2's do)"
            )))
        }
    };
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("no model.vocab".into()))?;
    let size = vocab_size.max(vocab.len());
    let mut tokens = vec![None; size];
    let mut types = vec![1i32; size];
    let mut place = |token: &str, id: &serde_json::Value| -> Result<()> {
        let id = id
            .as_u64()
            .filter(|&id| (id as usize) < tokens.len())
            .ok_or_else(|| bad(format!("token `{token}` has id {id}")))?;
        tokens[id as usize] = Some(token.to_string());
        Ok(())
    };
    for (token, id) in vocab {
        place(token, id)?;
    }
    let mut added_types = Vec::new();
    for added in json["added_tokens"].as_array().into_iter().flatten() {
        let content = added["content"].as_str().unwrap_or_default();
        place(content, &added["id"])?;
        let id = added["id"].as_u64().unwrap_or_default() as usize;
        added_types.push((id, if added["special"] == true { 3 } else { 4 }));
    }
    for (id, kind) in added_types {
        types[id] = kind;
    }
    // Ids the vocabulary does not use (a model's padded embedding) get unused placeholders.
    let tokens: Vec<Value> = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            Value::String(t.unwrap_or_else(|| {
                types[id] = 5;
                format!("[PAD{id}]")
            }))
        })
        .collect();
    let merges: Vec<Value> = model["merges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| match m {
            serde_json::Value::String(s) => Ok(Value::String(s.clone())),
            serde_json::Value::Array(pair) if pair.len() == 2 => Ok(Value::String(format!(
                "{} {}",
                pair[0].as_str().unwrap_or_default(),
                pair[1].as_str().unwrap_or_default()
            ))),
            other => Err(bad(format!("merge {other}"))),
        })
        .collect::<Result<_>>()?;
    Ok(vec![
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String(pre.into())),
        ("tokenizer.ggml.tokens".into(), Value::Array(tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(merges)),
    ])
}
