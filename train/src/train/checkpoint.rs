//! Training checkpoints (`<out>/checkpoint/`: f32 weights, AdamW moments, the step and the
//! settings they were made with) and the exported model directory the engine loads
//! (`<out>/config.json`, `model.safetensors`, `redraft.json`; `tokenizer.json` is written when
//! training starts).
//!
//! A checkpoint is written whole into `checkpoint.new/`, then swapped in with two renames
//! (`checkpoint` -> `checkpoint.old`, `checkpoint.new` -> `checkpoint`), so a run killed at any
//! point leaves either the previous checkpoint or the new one; [`find`] looks for `checkpoint.old`
//! when the kill fell between the renames.
//!
//! Tensors are streamed to their files one at a time (`Stored`): a checkpoint of a 0.5B model
//! is 7.5 GB (weights and both moments), and serialising it in memory first would need that
//! much again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::model::TrainModel;
use super::optim::{AdamW, MomentRef};
use super::tokens::{temp_sibling, write_atomic};
use super::{TrainConfig, TrainError, TrainResult};
use redraft_engine::checkpoint::SINGLE_FILE;
use redraft_engine::engine::{CONFIG_FILE, REDRAFT_FILE};

pub const CHECKPOINT_DIR: &str = "checkpoint";
const STATE_FILE: &str = "state.json";
const OPTIMIZER_FILE: &str = "optimizer.safetensors";
const STATE_FORMAT: u32 = 1;

/// Everything besides tensors that a resumed run needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainState {
    pub format: u32,
    /// Optimizer steps taken (the next batch is number `step`).
    pub step: usize,
    pub config: TrainConfig,
    /// Content hashes (FNV-1a, hex) of what the data stream depends on.
    pub corpus_hash: String,
    pub tokenizer_hash: String,
    pub tokens_seen: u64,
    /// Seconds spent training so far, over all sessions.
    pub train_seconds: f64,
}

impl TrainState {
    pub fn new(
        step: usize,
        config: &TrainConfig,
        corpus_hash: &str,
        tokenizer_hash: &str,
        tokens_seen: u64,
        train_seconds: f64,
    ) -> TrainState {
        TrainState {
            format: STATE_FORMAT,
            step,
            config: config.clone(),
            corpus_hash: corpus_hash.into(),
            tokenizer_hash: tokenizer_hash.into(),
            tokens_seen,
            train_seconds,
        }
    }
}

/// Writes a checkpoint (see the module docs for why it cannot be half-written).
pub fn save(out: &Path, model: &TrainModel, optim: &AdamW, state: &TrainState) -> TrainResult<()> {
    let final_dir = out.join(CHECKPOINT_DIR);
    let new_dir = out.join(format!("{CHECKPOINT_DIR}.new"));
    let old_dir = out.join(format!("{CHECKPOINT_DIR}.old"));
    if new_dir.exists() {
        std::fs::remove_dir_all(&new_dir).map_err(|e| TrainError::write(&new_dir, e))?;
    }
    std::fs::create_dir_all(&new_dir).map_err(|e| TrainError::write(&new_dir, e))?;
    save_tensors(
        model_tensors(model, DType::F32)?,
        &new_dir.join(SINGLE_FILE),
    )?;
    let moments = optim
        .moment_refs(model.params())?
        .into_iter()
        .map(|(name, moment, shape)| {
            let stored = match moment {
                MomentRef::Host(values) => Stored::Host { values, shape },
                MomentRef::Tensor(t) => Stored::Tensor(t.clone()),
            };
            (name, stored)
        })
        .collect();
    save_tensors(moments, &new_dir.join(OPTIMIZER_FILE))?;
    let json = serde_json::to_vec_pretty(state).expect("the state serialises");
    write_atomic(&new_dir.join(STATE_FILE), &json)?;
    if old_dir.exists() {
        std::fs::remove_dir_all(&old_dir).map_err(|e| TrainError::write(&old_dir, e))?;
    }
    if final_dir.exists() {
        std::fs::rename(&final_dir, &old_dir).map_err(|e| TrainError::write(&final_dir, e))?;
    }
    std::fs::rename(&new_dir, &final_dir).map_err(|e| TrainError::write(&final_dir, e))?;
    sync_dir(out);
    if old_dir.exists() {
        std::fs::remove_dir_all(&old_dir).map_err(|e| TrainError::write(&old_dir, e))?;
    }
    Ok(())
}

/// The directory holding the latest complete checkpoint, if any.
pub fn find(out: &Path) -> Option<PathBuf> {
    [CHECKPOINT_DIR.to_string(), format!("{CHECKPOINT_DIR}.old")]
        .iter()
        .map(|name| out.join(name))
        .find(|dir| dir.join(STATE_FILE).is_file())
}

/// Refuses to start a run in `out` when it holds one already (its checkpoint), or a model (a
/// run's export whose checkpoint is gone, a downloaded or converted model): nothing of it is to
/// be written over, its tokenizer first, before the new run knows it cannot start. A tokenizer
/// alone (a `--tokenizer-only` run's) is what a run may start from.
pub fn refuse_existing(out: &Path) -> TrainResult<()> {
    if let Some(dir) = find(out) {
        return Err(TrainError::Resume(format!(
            "{} already holds a checkpoint: pass --resume to continue it, or choose another --out",
            dir.display()
        )));
    }
    match model_file(out) {
        Some(file) => Err(TrainError::Resume(format!(
            "{} holds a model ({}) and no checkpoint to resume: choose another --out, or move \
             the model away to train over it",
            out.display(),
            file.display()
        ))),
        None => Ok(()),
    }
}

/// A file in `out` that makes it a model's directory: a run's export (`config.json`,
/// `model.safetensors`), a sharded checkpoint's shards or a GGUF file.
fn model_file(out: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(out).ok()?;
    entries.flatten().map(|entry| entry.path()).find(|path| {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        name == CONFIG_FILE || name.ends_with(".safetensors") || name.ends_with(".gguf")
    })
}

/// Reads the latest checkpoint's state (without its tensors).
pub fn load_state(out: &Path) -> TrainResult<Option<TrainState>> {
    let Some(dir) = find(out) else {
        return Ok(None);
    };
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::read(&path, e))?;
    let state: TrainState = serde_json::from_str(&text).map_err(|e| TrainError::BadCheckpoint {
        message: format!("{}: {e}", path.display()),
    })?;
    if state.format != STATE_FORMAT {
        return Err(TrainError::BadCheckpoint {
            message: format!(
                "{} has format {}, this build reads {STATE_FORMAT}",
                path.display(),
                state.format
            ),
        });
    }
    Ok(Some(state))
}

/// The latest checkpoint's weights and optimizer tensors.
pub fn load_tensors(out: &Path) -> TrainResult<(HashMap<String, Tensor>, HashMap<String, Tensor>)> {
    let dir = find(out).ok_or_else(|| TrainError::BadCheckpoint {
        message: format!("no checkpoint under {}", out.display()),
    })?;
    let read = |name: &str| {
        let path = dir.join(name);
        candle_core::safetensors::load(&path, &Device::Cpu).map_err(|e| TrainError::BadCheckpoint {
            message: format!("{}: {e}", path.display()),
        })
    };
    Ok((read(SINGLE_FILE)?, read(OPTIMIZER_FILE)?))
}

/// Writes the model directory the engine loads: `config.json`, `model.safetensors` (in `dtype`)
/// and `redraft.json`, which say what the run trained: the ids, the logit shift, the attention
/// pattern and how next-edit canvases were shown (`edit_draft`). Each file is replaced
/// atomically.
pub fn export(out: &Path, model: &TrainModel, dtype: DType, run: &TrainConfig) -> TrainResult<()> {
    let cfg = model.config();
    let setup = &run.diffusion;
    let config = serde_json::json!({
        "model_type": "qwen2",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_kv_heads(),
        "head_dim": cfg.head_dim(),
        "max_position_embeddings": cfg.max_position_embeddings,
        "rope_theta": cfg.rope_theta(),
        "rms_norm_eps": cfg.rms_norm_eps,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "hidden_act": "silu",
        "use_sliding_window": false,
        "torch_dtype": if dtype == DType::F16 { "float16" } else { "float32" },
        "mask_token_id": setup.mask_id,
        "eos_token_id": setup.eos_id,
        "pad_token_id": setup.eos_id,
    });
    let mut redraft = serde_json::json!({
        "mask_token_id": setup.mask_id,
        "eos_token_id": setup.eos_id,
        "pad_token_id": setup.eos_id,
        "logit_shift": setup.logit_shift,
        "attention": setup.attention,
    });
    if run.data.edit_draft {
        redraft["edit_canvas"] = "draft".into();
    }
    save_tensors(model_tensors(model, dtype)?, &out.join(SINGLE_FILE))?;
    write_atomic(
        &out.join(CONFIG_FILE),
        serde_json::to_string_pretty(&config)
            .expect("json")
            .as_bytes(),
    )?;
    write_atomic(
        &out.join(REDRAFT_FILE),
        serde_json::to_string_pretty(&redraft)
            .expect("json")
            .as_bytes(),
    )?;
    Ok(())
}

/// One tensor of a file being written: its bytes are made only when the writer reaches it.
enum Stored<'a> {
    /// Host values (the CPU optimizer's moments), written as f32.
    Host {
        values: &'a [f32],
        shape: Vec<usize>,
    },
    /// A tensor, on any device, in the dtype it is written in.
    Tensor(Tensor),
}

impl safetensors::View for Stored<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        match self {
            Stored::Host { .. } => safetensors::Dtype::F32,
            Stored::Tensor(t) => safetensors::View::dtype(t),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Stored::Host { shape, .. } => shape,
            Stored::Tensor(t) => t.dims(),
        }
    }

    fn data(&self) -> Cow<'_, [u8]> {
        match self {
            Stored::Host { values, .. } => {
                let mut bytes = Vec::with_capacity(values.len() * 4);
                for v in values.iter() {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
                Cow::Owned(bytes)
            }
            Stored::Tensor(t) => safetensors::View::data(t),
        }
    }

    fn data_len(&self) -> usize {
        match self {
            Stored::Host { values, .. } => values.len() * 4,
            Stored::Tensor(t) => safetensors::View::data_len(t),
        }
    }
}

/// The model's weights as `dtype` tensors: in f32 the variables' own storage, not a copy (an f16
/// export converts them all first, half the weights' size).
fn model_tensors(model: &TrainModel, dtype: DType) -> TrainResult<Vec<(String, Stored<'static>)>> {
    model
        .params()
        .iter()
        .map(|p| {
            let t = p.var.as_detached_tensor().to_dtype(dtype)?;
            Ok((p.name.clone(), Stored::Tensor(t)))
        })
        .collect()
}

/// Streams `tensors` into `path` through a temporary sibling and a rename, made readable by all
/// (safetensors' own writer leaves its file readable by its owner only, which a shipped model
/// directory should not be) and synced first.
fn save_tensors(tensors: Vec<(String, Stored<'_>)>, path: &Path) -> TrainResult<()> {
    let tmp = temp_sibling(path);
    let fail = |source: std::io::Error| TrainError::write(path, source);
    let result = (|| {
        safetensors::serialize_to_file(tensors, None, &tmp)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

/// Makes the renames in `dir` durable (best effort: not every filesystem supports it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
