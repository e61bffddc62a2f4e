//! What a loaded model is, as Ollama describes one (the `details` of its `/api/tags` and
//! `/api/show`): the form its weights came in, their quantization level, its architecture, its
//! parameter count and the bytes of its files. Worked out once, when the model is loaded, from
//! the engine and the headers of its weight files (no tensor is read).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::GgmlDType;
use redraft_engine::checkpoint::{INDEX_FILE, SINGLE_FILE};
use redraft_engine::engine::{WeightsFile, CONFIG_FILE, REDRAFT_FILE, TOKENIZER_FILE};
use redraft_engine::Engine;

use crate::default_model;

/// A model's description, fixed at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDetails {
    /// The form the weights were read from: `gguf` or `safetensors`.
    pub format: &'static str,
    /// The weights' type as Ollama names it: a GGUF's `general.file_type` (`Q8_0`, `Q4_K_M`),
    /// else the type of most of the matrices' elements, token embedding aside (`F16`, `BF16`,
    /// `F32`, `Q8_0`); `None` where the headers could not be read.
    pub quantization: Option<String>,
    /// The architecture (`config.json`'s `model_type`, a GGUF's `general.architecture`):
    /// `qwen2`, `dream`, `llada`.
    pub family: String,
    pub parameters: u64,
    /// The positions it reads at most.
    pub context_length: usize,
    /// Bytes of the files it was loaded from: weights, config, `redraft.json` and tokenizer.
    pub size: u64,
}

impl ModelDetails {
    /// The description of `engine`, from its configuration and the headers of the files it was
    /// loaded from (the embedded default's are in memory). A header that cannot be read (a file
    /// gone since) leaves the quantization unknown rather than failing a model that loaded.
    pub fn of(engine: &Engine) -> ModelDetails {
        let config = engine.model().config();
        let (format, quantization, size) = weights_of(engine.dir());
        ModelDetails {
            format,
            quantization,
            family: config.model_type.clone(),
            parameters: config.num_parameters() as u64,
            context_length: config.max_position_embeddings,
            size,
        }
    }

    /// The parameter count as Ollama writes it (`format.HumanNumber`): `494.03M`, `1.5B`, `7B`.
    pub fn parameter_size(&self) -> String {
        human_number(self.parameters)
    }
}

/// The format, quantization level and bytes of the model loaded from `dir`: the embedded
/// default's origin, a GGUF file (`Engine::dir` of a GGUF load) or a safetensors directory.
fn weights_of(dir: &Path) -> (&'static str, Option<String>, u64) {
    if dir == Path::new(default_model::ORIGIN) {
        let files = &default_model::FILES;
        let quantization = match files.weights {
            WeightsFile::Safetensors { weights, .. } => {
                safetensors_header(&mut &weights[..]).map(|t| dominant(&t))
            }
            WeightsFile::Gguf(bytes) => gguf_quantization(&mut std::io::Cursor::new(bytes)),
        };
        return (files.format(), quantization, files.size() as u64);
    }
    let beside = |base: &Path, names: &[&str]| {
        names
            .iter()
            .map(|name| file_size(&base.join(name)))
            .sum::<u64>()
    };
    if dir.is_file() {
        let quantization = File::open(dir)
            .ok()
            .and_then(|f| gguf_quantization(&mut BufReader::new(f)));
        // A GGUF's config is its metadata; a `redraft.json` or `tokenizer.json` beside it is
        // read with it.
        let parent = dir.parent().unwrap_or(Path::new("."));
        let size = file_size(dir) + beside(parent, &[REDRAFT_FILE, TOKENIZER_FILE]);
        return ("gguf", quantization, size);
    }
    let files = safetensors_files(dir);
    let mut tensors = Vec::new();
    let mut read_all = !files.is_empty();
    for file in &files {
        match File::open(file)
            .ok()
            .and_then(|f| safetensors_header(&mut BufReader::new(f)))
        {
            Some(more) => tensors.extend(more),
            None => read_all = false,
        }
    }
    let index = if dir.join(SINGLE_FILE).exists() {
        0
    } else {
        file_size(&dir.join(INDEX_FILE))
    };
    let size = files.iter().map(|f| file_size(f)).sum::<u64>()
        + index
        + beside(dir, &[CONFIG_FILE, REDRAFT_FILE, TOKENIZER_FILE]);
    let quantization = read_all.then(|| dominant(&tensors));
    ("safetensors", quantization, size)
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The weight files the engine reads from a safetensors directory: `model.safetensors`, else
/// the shards its index names.
fn safetensors_files(dir: &Path) -> Vec<PathBuf> {
    let single = dir.join(SINGLE_FILE);
    if single.exists() {
        return vec![single];
    }
    #[derive(serde::Deserialize)]
    struct ShardIndex {
        weight_map: HashMap<String, String>,
    }
    let Some(index) = std::fs::read(dir.join(INDEX_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<ShardIndex>(&bytes).ok())
    else {
        return Vec::new();
    };
    let mut shards: Vec<String> = index.weight_map.into_values().collect();
    shards.sort();
    shards.dedup();
    shards.into_iter().map(|s| dir.join(s)).collect()
}

/// One tensor of a header: its name, its type as Ollama names it, and its shape.
type TensorEntry = (String, String, Vec<u64>);

/// The tensors a safetensors header lists (8 bytes of length, then JSON), without their data.
fn safetensors_header(reader: &mut impl Read) -> Option<Vec<TensorEntry>> {
    let mut length = [0u8; 8];
    reader.read_exact(&mut length).ok()?;
    let length = u64::from_le_bytes(length);
    // The format's own bound on a header (safetensors' `MAX_HEADER_SIZE`).
    if length > 100_000_000 {
        return None;
    }
    let mut header = vec![0u8; length as usize];
    reader.read_exact(&mut header).ok()?;
    #[derive(serde::Deserialize)]
    struct Entry {
        dtype: String,
        shape: Vec<u64>,
    }
    let entries: HashMap<String, serde_json::Value> = serde_json::from_slice(&header).ok()?;
    Some(
        entries
            .into_iter()
            .filter(|(name, _)| name != "__metadata__")
            .filter_map(|(name, entry)| {
                let entry: Entry = serde_json::from_value(entry).ok()?;
                Some((name, entry.dtype.to_ascii_uppercase(), entry.shape))
            })
            .collect(),
    )
}

/// A GGUF's quantization level: its `general.file_type` as llama.cpp names it, else the
/// dominant type of its tensors.
fn gguf_quantization<R: std::io::Read + std::io::Seek>(reader: &mut R) -> Option<String> {
    let content = gguf_file::Content::read(reader).ok()?;
    let stated = content
        .metadata
        .get("general.file_type")
        .and_then(integer)
        .and_then(file_type_name);
    if let Some(name) = stated {
        return Some(name.to_string());
    }
    let tensors: Vec<TensorEntry> = content
        .tensor_infos
        .into_iter()
        .map(|(name, info)| {
            let shape = info.shape.dims().iter().map(|&d| d as u64).collect();
            (name, ggml_name(info.ggml_dtype).to_string(), shape)
        })
        .collect();
    Some(dominant(&tensors))
}

fn integer(value: &Value) -> Option<u64> {
    match *value {
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

/// llama.cpp's `llama_ftype` names (`LLAMA_FTYPE_MOSTLY_*`), as Ollama shows them.
fn file_type_name(file_type: u64) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4",
        _ => return None,
    })
}

/// A tensor type as ggml (and Ollama) names it.
fn ggml_name(dtype: GgmlDType) -> &'static str {
    match dtype {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}

/// The type holding the most elements of the linear weights: the matrices other than the
/// token embedding (whose type a quantizer often keeps apart), else every matrix, else every
/// tensor. Ties go to the name that sorts first, so the answer does not depend on map order.
fn dominant(tensors: &[TensorEntry]) -> String {
    let is_matrix = |(_, _, shape): &&TensorEntry| shape.len() >= 2;
    let is_embedding = |(name, _, _): &&TensorEntry| {
        name.contains("embed_tokens") || name.contains("token_embd") || name.contains("wte")
    };
    let linear: Vec<&TensorEntry> = tensors
        .iter()
        .filter(is_matrix)
        .filter(|t| !is_embedding(t))
        .collect();
    let chosen: Vec<&TensorEntry> = if !linear.is_empty() {
        linear
    } else if tensors.iter().any(|t| is_matrix(&t)) {
        tensors.iter().filter(is_matrix).collect()
    } else {
        tensors.iter().collect()
    };
    let mut elements: HashMap<&str, u64> = HashMap::new();
    for (_, dtype, shape) in chosen {
        *elements.entry(dtype).or_default() += shape.iter().product::<u64>();
    }
    let mut ranked: Vec<(&str, u64)> = elements.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    ranked
        .first()
        .map_or_else(String::new, |(dtype, _)| dtype.to_string())
}

/// Ollama's `format.HumanNumber`: whole numbers bare, else one decimal for billions and two for
/// millions; thousands rounded.
pub fn human_number(n: u64) -> String {
    const THOUSAND: u64 = 1_000;
    const MILLION: u64 = 1_000_000;
    const BILLION: u64 = 1_000_000_000;
    let scaled = |unit: u64, decimals: usize, suffix: &str| {
        let number = n as f64 / unit as f64;
        let decimals = if number == number.floor() {
            0
        } else {
            decimals
        };
        format!("{number:.decimals$}{suffix}")
    };
    match n {
        n if n >= BILLION => scaled(BILLION, 1, "B"),
        n if n >= MILLION => scaled(MILLION, 2, "M"),
        n if n >= THOUSAND => format!("{:.0}K", n as f64 / THOUSAND as f64),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests;
