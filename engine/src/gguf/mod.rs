//! GGUF checkpoints (llama.cpp's format): the model config and diffusion settings from the
//! file's metadata, its tensors under `transformers` names (quantized ones kept in their blocks),
//! and the tokenizer from its own vocabulary and merges.
//!
//! Architectures: `qwen2` (an autoregressive checkpoint: causal attention and the logit shift
//! unless `redraft.json` says otherwise), `dream` (bidirectional, shifted) and `llada`
//! (bidirectional, unshifted, q/k/v biases only if the file has them), which share llama.cpp's
//! tensor names. llama.cpp runs `llada` with its `NORM` RoPE, so its converter stores the query
//! and key rows of each head in interleaved pair order; they are put back in `rotate_half` order
//! on load (`rope_pair_rows`), quantized blocks included. RoPE that the metadata scales or
//! limits to part of each head, as llama.cpp reads it, is refused (`check_default_rope`).
//! Settings the metadata does not state come from a `redraft.json` beside the file, as for a
//! safetensors directory; a `tokenizer.json` beside it replaces the file's vocabulary.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::checkpoint::{Weights, WeightsTally};
use crate::config::{AttentionPattern, ModelConfig, RedraftJson, SlidingWindow, TokenIds};
use crate::error::{Error, Result};
use crate::linear::{keeps_half, FileBytes, Mapped, Stored};
use crate::tokenizer::Tokenizer;

mod header;
mod names;
pub(crate) mod split;
mod type_names;
mod vocabulary;
mod write;

pub use names::{gguf_name, llada_name, rename, transformers_name, Naming};
pub(crate) use names::{is_query_or_key, rope_pair_rows};
pub use type_names::{file_type_name, type_name};
use vocabulary::vocabulary;
pub use write::GgufWriter;

/// What a GGUF file holds, read.
pub struct GgufCheckpoint {
    pub config: ModelConfig,
    /// Diffusion settings the metadata states (mask id, logit shift, attention), to be merged
    /// with `redraft.json` by [`crate::config::DiffusionSettings::resolve`].
    pub stated: RedraftJson,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
}

/// The alignment [`from_static`] needs of a compiled-in file's first byte: enough for every
/// tensor type (f32, f16, the blocks), whose offsets in a GGUF file are multiples of 32.
pub const STATIC_ALIGNMENT: usize = 8;

/// Whether `path` names a GGUF file (by its magic bytes).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}

/// What [`load`] reads of the tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tensors {
    /// Every tensor the model uses, onto the device.
    Read,
    /// Each tensor's extent checked against the file, none read: the weights come back empty
    /// (what a model's description needs, `engine::inspect`, without the memory of a load).
    Checked,
}

/// Reads `path` onto `device`. `tokenizer_json`, if given, replaces the file's vocabulary.
pub fn load(
    path: &Path,
    tokenizer_json: Option<&Path>,
    device: &Device,
    tensors: Tensors,
) -> Result<GgufCheckpoint> {
    let file = File::open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::MissingFile {
                path: path.to_path_buf(),
                what: "a GGUF model file",
            }
        } else {
            Error::io(path, source)
        }
    })?;
    let first = map_file(&file, path)?;
    let mut parts = vec![Part::new(first, path)?];
    for part in split::other_parts(path, &parts[0].content)? {
        let file = File::open(&part).map_err(|source| split::missing_part(&part, path, source))?;
        let map = map_file(&file, &part)?;
        parts.push(Part::new(map, &part)?);
    }
    let tokenizer = tokenizer_json.map(Tokenizer::load).transpose()?;
    read(parts, path, tokenizer, device, tensors)
}

fn map_file(file: &File, path: &Path) -> Result<Arc<FileBytes>> {
    // SAFETY: the map is read-only; a file truncated or rewritten underneath us while it
    // loads is the one hazard, as with every mmap-based loader (llama.cpp's included).
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Error::io(path, e))?;
    Ok(Arc::new(FileBytes::Map(map)))
}

/// One file of a checkpoint (the only one, or a part of a split one) and its header.
struct Part {
    map: Arc<FileBytes>,
    path: std::path::PathBuf,
    content: candle_core::quantized::gguf_file::Content,
    alignment: u64,
}

impl Part {
    fn new(map: Arc<FileBytes>, path: &Path) -> Result<Part> {
        let (content, alignment) = header::read_header(&map, path)?;
        Ok(Part {
            map,
            path: path.to_path_buf(),
            content,
            alignment,
        })
    }
}

/// A GGUF file compiled into the binary (the embedded default model) onto `device`, its
/// tensors read in place as from a map; `origin` names it in errors. `tokenizer`, if given,
/// replaces the file's vocabulary. The bytes must start at a multiple of
/// [`STATIC_ALIGNMENT`] (`include_bytes!` alone promises 1), as a map's start does, since the
/// tensors are read in place as f32s, f16s and blocks.
pub fn from_static(
    bytes: &'static [u8],
    origin: &Path,
    tokenizer: Option<Tokenizer>,
    device: &Device,
) -> Result<GgufCheckpoint> {
    if !(bytes.as_ptr() as usize).is_multiple_of(STATIC_ALIGNMENT) {
        return Err(Error::CorruptGguf {
            path: origin.to_path_buf(),
            message: format!(
                "the compiled-in file does not start at a multiple of {STATIC_ALIGNMENT} bytes, \
                 so its tensors cannot be read in place (embed it in a #[repr(align(32))] wrapper)"
            ),
        });
    }
    let part = Part::new(Arc::new(FileBytes::Static(bytes)), origin)?;
    read(vec![part], origin, tokenizer, device, Tensors::Read)
}

/// The checkpoint in `parts` (one file, or every part of a split one, first part first): the
/// config, settings and vocabulary from the first part's metadata, the tensors from whichever
/// part holds each. `path` (the first part) names the checkpoint in errors.
fn read(
    parts: Vec<Part>,
    path: &Path,
    tokenizer: Option<Tokenizer>,
    device: &Device,
    read_tensors: Tensors,
) -> Result<GgufCheckpoint> {
    let corrupt = |message: String| Error::CorruptGguf {
        path: path.to_path_buf(),
        message,
    };
    let content = &parts[0].content;
    let meta = Metadata {
        values: &content.metadata,
        path,
    };
    // Every part's tensors, by name: a name in two parts is a corrupt split.
    let mut tensor_infos = HashMap::new();
    for (index, part) in parts.iter().enumerate() {
        for (name, info) in &part.content.tensor_infos {
            if tensor_infos.insert(name.as_str(), (index, info)).is_some() {
                return Err(corrupt(format!(
                    "tensor `{name}` is in two parts of the split file (again in {})",
                    part.path.display()
                )));
            }
        }
    }
    let arch = meta.string("general.architecture")?;
    // Qwen2's layout, all three; the architecture decides the defaults below (and LLaDA's
    // family settings, through its model type).
    let model_type = match arch.as_str() {
        "qwen2" | "dream" => "qwen2",
        "llada" => "llada",
        other => {
            return Err(Error::UnsupportedConfig {
                path: path.to_path_buf(),
                message: format!("GGUF architecture `{other}` (supported: qwen2, dream, llada)"),
            })
        }
    };
    let key = |k: &str| format!("{arch}.{k}");
    let heads = meta.usize(&key("attention.head_count"))?;
    let hidden = tensor_infos
        .get("token_embd.weight")
        .map_or(0, |(_, info)| hidden_of(info));
    let head_dim = meta
        .optional_usize(&key("attention.key_length"))?
        .unwrap_or(hidden.checked_div(heads).unwrap_or(0));
    let interleaved = arch == "llada";
    // llama.cpp rotates the first `rope.dimension_count` values of each head, whatever the
    // architecture; redraft rotates whole heads.
    if let Some(rot) = meta.optional_usize(&key("rope.dimension_count"))? {
        if rot != head_dim {
            return Err(meta.bad(
                &key("rope.dimension_count"),
                &format!("{rot}, not the head size {head_dim} (partial RoPE is not supported)"),
            ));
        }
    }
    meta.check_default_rope(&key)?;

    // Every tensor's bytes, checked against the file (in bounds, aligned, whole blocks, over no
    // other tensor's) before anything reads them, those redraft does not use too: a file that
    // lies about one is corrupt. In name order, so a file with several bad tensors always names
    // the same one.
    let mut infos: Vec<_> = tensor_infos.iter().map(|(name, at)| (*name, *at)).collect();
    infos.sort_by_key(|(name, _)| *name);
    let mut params = 0usize;
    let mut mapped = HashMap::new();
    let mut extents = vec![Vec::new(); parts.len()];
    let mut tally = WeightsTally {
        file_type: stated_file_type(&content.metadata),
        bytes: parts.iter().map(|part| part.map.len() as u64).sum(),
        ..WeightsTally::default()
    };
    for (name, (index, info)) in infos {
        let Part {
            map,
            content,
            alignment,
            path: part_path,
        } = &parts[index];
        let alignment = *alignment;
        // A part after the first is named: its offsets are its own.
        let within = if index == 0 {
            String::new()
        } else {
            format!(" in {}", part_path.display())
        };
        let dims = info.shape.dims();
        let misplaced = |why: String| {
            corrupt(format!(
                "tensor `{name}`{within} ({:?}, {dims:?}) {why}",
                info.ggml_dtype
            ))
        };
        if !info.offset.is_multiple_of(alignment) {
            return Err(misplaced(format!(
                "starts at offset {}, not a multiple of the file's alignment {alignment}",
                info.offset
            )));
        }
        let start = content
            .tensor_data_offset
            .checked_add(info.offset)
            .and_then(|start| usize::try_from(start).ok())
            .ok_or_else(|| {
                misplaced(format!(
                    "starts at offset {}, past the end of the file's {} bytes",
                    info.offset,
                    map.len()
                ))
            })?;
        let tensor = Mapped::new(Arc::clone(map), start, info.ggml_dtype, dims)
            .map_err(|why| misplaced(why.to_string()))?;
        // Each tensor's elements are bounded by the file's bytes, so this cannot overflow;
        // saturating says so without a panic path.
        params = params.saturating_add(tensor.elem_count());
        extents[index].push((start, start + tensor.bytes().len(), name));
        let ours = transformers_name(name);
        tally.tensor(ours.as_deref(), type_name(info.ggml_dtype), dims);
        if let Some(ours) = ours {
            mapped.insert(name, (ours, tensor));
        }
    }
    for extents in extents {
        overlaps(extents).map_err(corrupt)?;
    }
    let (_, embed) = tensor_infos
        .get("token_embd.weight")
        .ok_or_else(|| Error::MissingTensor {
            name: "token_embd.weight".into(),
            searched: format!("searched {}", path.display()),
        })?;
    if !matches!(
        embed.ggml_dtype,
        GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16
    ) && !hidden_of(embed).is_multiple_of(embed.ggml_dtype.block_size())
    {
        return Err(corrupt(
            "token_embd.weight rows are not whole blocks".into(),
        ));
    }
    let (vocab_size, hidden_size) = embed.shape.dims2().map_err(|_| {
        corrupt(format!(
            "token_embd.weight has shape {:?}, expected [vocab, hidden]",
            embed.shape.dims()
        ))
    })?;
    let config_path = path.to_path_buf();
    let config = ModelConfig {
        model_type: model_type.to_string(),
        vocab_size,
        hidden_size,
        intermediate_size: meta.usize(&key("feed_forward_length"))?,
        num_hidden_layers: meta.usize(&key("block_count"))?,
        num_attention_heads: heads,
        num_key_value_heads: Some(
            meta.optional_usize(&key("attention.head_count_kv"))?
                .unwrap_or(heads),
        ),
        head_dim: meta.optional_usize(&key("attention.key_length"))?,
        max_position_embeddings: meta.usize(&key("context_length"))?,
        rope_theta: Some(
            meta.optional_f64(&key("rope.freq_base"))?
                .unwrap_or(10_000.0),
        ),
        rope_parameters: None,
        rope_scaling: None,
        rms_norm_eps: meta
            .optional_f64(&key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-6),
        tie_word_embeddings: !tensor_infos.contains_key("output.weight"),
        hidden_act: "silu".into(),
        mask_token_id: meta.optional_u32("tokenizer.ggml.mask_token_id")?,
        eos_token_id: meta
            .optional_u32("tokenizer.ggml.eos_token_id")?
            .map(TokenIds::One),
        pad_token_id: meta.optional_u32("tokenizer.ggml.padding_token_id")?,
        bos_token_id: match meta.optional_bool("tokenizer.ggml.add_bos_token")? {
            Some(true) => meta.optional_u32("tokenizer.ggml.bos_token_id")?,
            _ => None,
        },
        // q/k/v biases where the file has them, as llama.cpp's `llada` loads them: Qwen2's own
        // checkpoints carry them, redraft's GPU-trained models (train/gpu) have none.
        attention_bias: Some(tensor_infos.contains_key("blk.0.attn_q.bias")),
        sliding: SlidingWindow::default(),
    };
    config.validate(&config_path)?;

    if read_tensors == Tensors::Checked {
        mapped.clear();
    }
    let mut tensors = HashMap::new();
    for (name, (ours, mapped)) in mapped {
        let dims = mapped.dims().to_vec();
        let named = |e: Error| corrupt(format!("tensor `{name}`: {e}"));
        let half = keeps_half(params, &dims, device);
        let stored = match mapped.dtype() {
            // The head size is even and not 0 (`validate`), so the pairs are whole.
            _ if interleaved && is_query_or_key(&ours) => {
                let rows = dims.first().copied().unwrap_or(0);
                if rows == 0 || !rows.is_multiple_of(head_dim) || u32::try_from(rows).is_err() {
                    return Err(corrupt(format!(
                        "tensor `{name}` has {rows} rows, not whole heads of {head_dim}"
                    )));
                }
                let order = rope_pair_rows(rows, head_dim, false);
                let q = mapped
                    .qtensor(&Device::Cpu)
                    .and_then(|q| Ok(reorder_rows(&q, &order, device)?))
                    .map_err(named)?;
                let dense = |q: QTensor| -> Result<Tensor> {
                    // A half tensor straight from its bytes (no f32 copy on the way).
                    let raw = |dtype| {
                        Tensor::from_raw_buffer(&q.data()?, dtype, q.shape().dims(), device)
                    };
                    Ok(match q.dtype() {
                        GgmlDType::F16 if half => raw(DType::F16)?,
                        GgmlDType::BF16 if half => raw(DType::BF16)?,
                        _ => q.dequantize(device)?,
                    })
                };
                match mapped.dtype() {
                    GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 => {
                        Stored::Dense(dense(q).map_err(named)?)
                    }
                    _ => Stored::Quantized(Arc::new(q)),
                }
            }
            // Half matrices kept half, and blocks on the CPU, stay in the map until the model
            // packs them into its kernels' panels.
            GgmlDType::F16 | GgmlDType::BF16 if half => Stored::Mapped(Arc::new(mapped)),
            GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 => Stored::Dense(
                mapped
                    .tensor(device)
                    .and_then(|t| Ok(t.to_dtype(DType::F32)?))
                    .map_err(named)?,
            ),
            _ if device.is_cpu() => Stored::Mapped(Arc::new(mapped)),
            _ => Stored::Quantized(Arc::new(mapped.qtensor(device).map_err(named)?)),
        };
        tensors.insert(ours, stored);
    }

    let tokenizer = match tokenizer {
        Some(tokenizer) => tokenizer,
        None => vocabulary(&meta)?,
    };
    // An autoregressive checkpoint has no mask token. In causal decoding no prediction reads a
    // slot that is not yet committed, so any id that is never written serves: the FIM pad.
    let autoregressive = arch == "qwen2";
    let stated = RedraftJson {
        mask_token_id: (autoregressive && config.mask_token_id.is_none())
            .then(|| tokenizer.token_to_id(redraft_prompts::markers::FIM_PAD))
            .flatten(),
        // llama.cpp's default for both when the file does not say: Dream's head is shifted,
        // and so is every autoregressive one. LLaDA's is not, which its model type says.
        logit_shift: match meta.optional_bool("diffusion.shift_logits")? {
            None if arch == "llada" => None,
            stated => Some(stated.unwrap_or(true)),
        },
        attention: autoregressive.then_some(AttentionPattern::Causal),
        ..RedraftJson::default()
    };
    Ok(GgufCheckpoint {
        config,
        stated,
        weights: Weights::from_stored(tensors, path, gguf_name).tallied(tally),
        tokenizer,
    })
}

/// `general.file_type` where the file states it as a non-negative integer ([`file_type_name`]).
/// Anything else there is no reason to refuse a model: only its description would use it.
fn stated_file_type(metadata: &HashMap<String, Value>) -> Option<u64> {
    match *metadata.get("general.file_type")? {
        Value::U8(v) => Some(v.into()),
        Value::U16(v) => Some(v.into()),
        Value::U32(v) => Some(v.into()),
        Value::U64(v) => Some(v),
        Value::I8(v) => u64::try_from(v).ok(),
        Value::I16(v) => u64::try_from(v).ok(),
        Value::I32(v) => u64::try_from(v).ok(),
        Value::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}

/// Whether any two of the tensors' byte ranges (`start..end`, and the name) overlap: two
/// tensors over the same bytes would each read the other's weights. llama.cpp goes further and
/// requires the tensors one after another in the table's order; redraft reads any order.
fn overlaps(mut extents: Vec<(usize, usize, &str)>) -> std::result::Result<(), String> {
    extents.sort_unstable();
    // The tensor whose bytes reach furthest so far.
    let mut furthest: Option<(usize, usize, &str)> = None;
    for (start, end, name) in extents {
        if let Some((under_start, under_end, under)) = furthest {
            if start < under_end {
                return Err(format!(
                    "tensor `{name}` (bytes {start}..{end} of the file) overlaps tensor \
                     `{under}` (bytes {under_start}..{under_end})"
                ));
            }
        }
        if furthest.is_none_or(|(_, reach, _)| end > reach) {
            furthest = Some((start, end, name));
        }
    }
    Ok(())
}

fn hidden_of(info: &candle_core::quantized::gguf_file::TensorInfo) -> usize {
    info.shape.dims().last().copied().unwrap_or(0)
}

/// `q`'s rows reordered (`order[d]` is the source of row `d`), block by block: a quantized
/// row is whole blocks, so the blocks move with it.
fn reorder_rows(q: &QTensor, order: &[u32], device: &Device) -> candle_core::Result<QTensor> {
    let data = q.data()?;
    if order.is_empty() {
        candle_core::bail!("no rows to reorder");
    }
    let row_bytes = data.len() / order.len();
    let mut out = Vec::with_capacity(data.len());
    for &source in order {
        let start = source as usize * row_bytes;
        out.extend_from_slice(&data[start..start + row_bytes]);
    }
    let storage = QStorage::from_data(Cow::Owned(out), device, q.dtype())?;
    QTensor::new(storage, q.shape().clone())
}

/// Typed reads of the metadata, with errors naming the key and the file.
struct Metadata<'a> {
    values: &'a HashMap<String, Value>,
    path: &'a Path,
}

impl Metadata<'_> {
    fn bad(&self, key: &str, message: &str) -> Error {
        Error::UnsupportedConfig {
            path: self.path.to_path_buf(),
            message: format!("GGUF metadata `{key}`: {message}"),
        }
    }

    fn get(&self, key: &str) -> Result<&Value> {
        self.values.get(key).ok_or_else(|| self.bad(key, "missing"))
    }

    fn string(&self, key: &str) -> Result<String> {
        self.get(key)?
            .to_string()
            .cloned()
            .map_err(|_| self.bad(key, "not a string"))
    }

    fn optional_u64(&self, key: &str) -> Result<Option<u64>> {
        let Some(value) = self.values.get(key) else {
            return Ok(None);
        };
        let n = match value {
            Value::U8(v) => *v as u64,
            Value::U16(v) => *v as u64,
            Value::U32(v) => *v as u64,
            Value::U64(v) => *v,
            Value::I8(v) if *v >= 0 => *v as u64,
            Value::I16(v) if *v >= 0 => *v as u64,
            Value::I32(v) if *v >= 0 => *v as u64,
            Value::I64(v) if *v >= 0 => *v as u64,
            _ => return Err(self.bad(key, "not a non-negative integer")),
        };
        Ok(Some(n))
    }

    fn optional_usize(&self, key: &str) -> Result<Option<usize>> {
        self.optional_u64(key)?
            .map(|n| usize::try_from(n).map_err(|_| self.bad(key, "too large")))
            .transpose()
    }

    fn usize(&self, key: &str) -> Result<usize> {
        self.optional_usize(key)?
            .ok_or_else(|| self.bad(key, "missing"))
    }

    fn optional_u32(&self, key: &str) -> Result<Option<u32>> {
        self.optional_u64(key)?
            .map(|n| u32::try_from(n).map_err(|_| self.bad(key, "too large for a token id")))
            .transpose()
    }

    fn optional_f64(&self, key: &str) -> Result<Option<f64>> {
        Ok(match self.values.get(key) {
            None => None,
            Some(Value::F32(v)) => Some(*v as f64),
            Some(Value::F64(v)) => Some(*v),
            Some(_) => return Err(self.bad(key, "not a number")),
        })
    }

    fn optional_bool(&self, key: &str) -> Result<Option<bool>> {
        Ok(match self.values.get(key) {
            None => None,
            Some(Value::Bool(v)) => Some(*v),
            Some(_) => return Err(self.bad(key, "not a boolean")),
        })
    }

    /// An error unless the file's RoPE is unscaled as llama.cpp reads it: a scaling type of
    /// `none`, or a factor (`rope.scaling.factor`, else the older `rope.scale_linear`) that is
    /// absent, 0 or 1 (llama.cpp's "no scaling"; a factor with no type scales linearly, and
    /// YaRN by a factor of 1 is the default rotation). `key` names a key of the architecture.
    fn check_default_rope(&self, key: &dyn Fn(&str) -> String) -> Result<()> {
        let type_key = key("rope.scaling.type");
        let kind = match self.values.get(&type_key) {
            Some(_) => self.string(&type_key)?,
            None => "linear".to_string(),
        };
        if kind == "none" {
            return Ok(());
        }
        let factor_key = [key("rope.scaling.factor"), key("rope.scale_linear")]
            .into_iter()
            .find(|k| self.values.contains_key(k));
        let factor = match &factor_key {
            Some(k) => self.optional_f64(k)?,
            None => None,
        };
        let fix = "only default RoPE is supported: convert the checkpoint without its rope scaling";
        match (kind.as_str(), factor_key, factor) {
            ("linear" | "yarn", Some(k), Some(f)) if f != 0.0 && f != 1.0 => Err(self.bad(
                &k,
                &format!("{kind} RoPE scaling by a factor of {f} ({fix})"),
            )),
            ("linear" | "yarn", ..) => Ok(()),
            _ => Err(self.bad(&type_key, &format!("{kind} RoPE scaling ({fix})"))),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<&str>> {
        let values = self
            .get(key)?
            .to_vec()
            .map_err(|_| self.bad(key, "not an array"))?;
        values
            .iter()
            .map(|v| {
                v.to_string()
                    .map(String::as_str)
                    .map_err(|_| self.bad(key, "not an array of strings"))
            })
            .collect()
    }

    fn integers(&self, key: &str) -> Result<Vec<i64>> {
        let values = self
            .get(key)?
            .to_vec()
            .map_err(|_| self.bad(key, "not an array"))?;
        values
            .iter()
            .map(|v| match v {
                Value::I32(n) => Ok(*n as i64),
                Value::U32(n) => Ok(*n as i64),
                Value::I8(n) => Ok(*n as i64),
                Value::U8(n) => Ok(*n as i64),
                _ => Err(self.bad(key, "not an array of integers")),
            })
            .collect()
    }
}
