//! A checkpoint's weights by name: safetensors (single-file or sharded, f32/f16/bf16; f16/bf16
//! matrices stay half where the CPU kernel multiplies them, [`crate::linear::keeps_half`], and
//! everything else becomes f32) or a GGUF file
//! ([`crate::gguf`]; quantized tensors stay in their blocks, [`Stored::Quantized`]).
//!
//! Tensors are kept under `transformers`' Qwen2 names. A LLaDA checkpoint's own names
//! (`model.transformer.blocks.N.*`, [`crate::gguf::Naming::Llada`]) are renamed on load through
//! the one table of tensor names in [`crate::gguf`]. Every tensor remembers the file it came
//! from, so a wrong shape or a missing name is reported against the right file, under the name
//! that file uses. What the files hold, as stored, is tallied as they are read, for the engine's
//! [`WeightsSummary`] (`checkpoint/summary.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use candle_core::safetensors::Load;
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::gguf::{llada_name, rename, type_name, Naming};
use crate::linear::{keeps_half, Stored};

mod summary;

pub(crate) use summary::WeightsTally;
pub use summary::{WeightsFormat, WeightsSummary};

pub const SINGLE_FILE: &str = "model.safetensors";
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// All tensors of a checkpoint, by name.
pub struct Weights {
    tensors: HashMap<String, (Stored, usize)>,
    files: Vec<PathBuf>,
    /// The file's own name for a tensor, where it differs (GGUF's llama.cpp names).
    file_name: fn(&str) -> Option<String>,
    /// What the files read hold, as stored (nothing for tensors built in memory).
    tally: WeightsTally,
}

fn same_name(_: &str) -> Option<String> {
    None
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

impl Weights {
    /// Loads `model.safetensors`, or the shards listed by `model.safetensors.index.json`. A
    /// directory holding both loads the single file, as `transformers` does (and as redraft
    /// chooses files on the Hub, `redraft_models`' plan): the index may be a leftover.
    pub fn load(dir: &Path, dtype: DType, device: &Device) -> Result<Weights> {
        let index_path = dir.join(INDEX_FILE);
        let single = dir.join(SINGLE_FILE);
        let mut weights = Weights::empty();
        if single.exists() {
            weights.load_file(&single, dtype, device)?;
        } else if index_path.exists() {
            let text = crate::config::read_text(&index_path, "the shard index")?;
            weights.tally.bytes += text.len() as u64;
            let index: ShardIndex =
                crate::config::parse_json(&text, &index_path, "the shard index")?;
            let mut shards: Vec<&String> = index.weight_map.values().collect();
            shards.sort();
            shards.dedup();
            for shard in shards {
                // A shard is a file beside the index: a name that leads elsewhere (`../x`, an
                // absolute path) is not opened.
                let mut parts = Path::new(shard).components();
                let beside = matches!(
                    (parts.next(), parts.next()),
                    (Some(std::path::Component::Normal(_)), None)
                );
                if !beside {
                    return Err(Error::CorruptWeights {
                        path: index_path,
                        message: format!(
                            "the shard `{shard}` is not a file name in the model's directory"
                        ),
                    });
                }
                weights.load_file(&dir.join(shard), dtype, device)?;
            }
            for (name, shard) in &index.weight_map {
                if !weights.tensors.contains_key(&Weights::ours(name)) {
                    return Err(Error::MissingTensor {
                        name: name.clone(),
                        searched: format!("{INDEX_FILE} maps it to {shard}, which lacks it"),
                    });
                }
            }
        } else {
            return Err(Error::MissingFile {
                path: single,
                what: "weights (model.safetensors or model.safetensors.index.json)",
            });
        }
        Ok(weights)
    }

    /// A file's tensor name as the engine names it: LLaDA's renamed, any other kept.
    fn ours(name: &str) -> String {
        rename(name, Naming::Llada, Naming::Transformers).unwrap_or_else(|| name.to_string())
    }

    fn empty() -> Weights {
        Weights {
            tensors: HashMap::new(),
            files: Vec::new(),
            file_name: same_name,
            tally: WeightsTally::default(),
        }
    }

    /// Builds weights from tensors already in memory (tests, freshly initialised models).
    pub fn from_tensors(tensors: HashMap<String, Tensor>, origin: &str) -> Weights {
        Weights::from_stored(
            tensors
                .into_iter()
                .map(|(k, v)| (k, Stored::Dense(v)))
                .collect(),
            Path::new(origin),
            same_name,
        )
    }

    /// Weights of one file (a GGUF) under `transformers` names; `file_name` maps a name back to
    /// the file's own for error messages.
    pub fn from_stored(
        tensors: HashMap<String, Stored>,
        origin: &Path,
        file_name: fn(&str) -> Option<String>,
    ) -> Weights {
        Weights {
            tensors: tensors.into_iter().map(|(k, v)| (k, (v, 0))).collect(),
            files: vec![origin.to_path_buf()],
            file_name,
            tally: WeightsTally::default(),
        }
    }

    /// These weights with what their file was found to hold as it was read (a GGUF's).
    pub(crate) fn tallied(self, tally: WeightsTally) -> Weights {
        Weights { tally, ..self }
    }

    /// What the files read hold, as stored, for the engine's [`WeightsSummary`].
    pub(crate) fn tally(&self) -> &WeightsTally {
        &self.tally
    }

    fn load_file(&mut self, path: &Path, dtype: DType, device: &Device) -> Result<()> {
        let file = std::fs::File::open(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                Error::MissingFile {
                    path: path.to_path_buf(),
                    what: "every shard named by the shard index",
                }
            } else {
                Error::io(path, source)
            }
        })?;
        // SAFETY: the map is read-only and dropped before this function returns; a file
        // truncated underneath us is the one hazard, as with every mmap-based loader.
        let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        self.load_bytes(&mmap, path, dtype, device)
    }

    /// Weights from the bytes of one safetensors file; `origin` names it in errors.
    pub fn from_safetensors_bytes(
        bytes: &[u8],
        origin: &Path,
        dtype: DType,
        device: &Device,
    ) -> Result<Weights> {
        let mut weights = Weights::empty();
        weights.load_bytes(bytes, origin, dtype, device)?;
        Ok(weights)
    }

    fn load_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        dtype: DType,
        device: &Device,
    ) -> Result<()> {
        let corrupt = |message: String| Error::CorruptWeights {
            path: path.to_path_buf(),
            message,
        };
        let st =
            safetensors::SafeTensors::deserialize(bytes).map_err(|e| corrupt(e.to_string()))?;
        let file_index = self.files.len();
        self.files.push(path.to_path_buf());
        self.tally.bytes += bytes.len() as u64;
        let params: usize = st
            .tensors()
            .iter()
            .map(|(_, v)| v.shape().iter().product::<usize>())
            .sum();
        for (name, view) in st.tensors() {
            let stored_type = match view.dtype() {
                safetensors::Dtype::F32 => GgmlDType::F32,
                safetensors::Dtype::F16 => GgmlDType::F16,
                safetensors::Dtype::BF16 => GgmlDType::BF16,
                other => {
                    return Err(Error::TensorDtype {
                        name,
                        path: path.to_path_buf(),
                        dtype: format!("{other:?}"),
                    })
                }
            };
            // An f16/bf16 matrix stays half where the CPU kernel multiplies it (half the memory
            // and half the reading a step does); f32 is asked for, so vectors are widened.
            let half = matches!(
                view.dtype(),
                safetensors::Dtype::F16 | safetensors::Dtype::BF16
            ) && dtype == DType::F32
                && keeps_half(params, view.shape(), device);
            let tensor = view
                .load(&Device::Cpu)
                .and_then(|t| if half { Ok(t) } else { t.to_dtype(dtype) })
                .and_then(|t| t.to_device(device))
                .map_err(|e| corrupt(format!("tensor `{name}`: {e}")))?;
            let ours = Weights::ours(&name);
            self.tally
                .tensor(Some(&ours), type_name(stored_type), view.shape());
            if ours != name {
                self.file_name = llada_name;
            }
            self.tensors
                .insert(ours, (Stored::Dense(tensor), file_index));
        }
        Ok(())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor `name` in f32 (dequantized if it is stored quantized), checked against the
    /// expected shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let stored = self.stored(name, shape)?;
        stored.dense(&stored.device())
    }

    /// The tensor `name` as stored, checked against the expected shape.
    pub fn stored(&self, name: &str, shape: &[usize]) -> Result<Stored> {
        let shown = || (self.file_name)(name).unwrap_or_else(|| name.to_string());
        let (tensor, file) = self.tensors.get(name).ok_or_else(|| Error::MissingTensor {
            name: shown(),
            searched: self.searched(),
        })?;
        if tensor.dims() != shape {
            return Err(Error::TensorShape {
                name: shown(),
                path: self.files[*file].clone(),
                expected: shape.to_vec(),
                found: tensor.dims().to_vec(),
            });
        }
        Ok(tensor.clone())
    }

    /// Every tensor in f32 (quantized ones dequantized), by name.
    pub fn dense_tensors(&self) -> Result<HashMap<String, Tensor>> {
        self.tensors
            .iter()
            .map(|(name, (stored, _))| Ok((name.clone(), stored.dense(&stored.device())?)))
            .collect()
    }

    fn searched(&self) -> String {
        let files: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
        format!("searched {}", files.join(", "))
    }
}
