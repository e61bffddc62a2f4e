//! Training checkpoints (`<out>/checkpoint/`: f32 weights, AdamW moments, the step and the
//! settings they were made with) and the exported model directory the engine loads
//! (`<out>/config.json`, `model.safetensors`, `redraft.json`; `tokenizer.json` is written when
//! training starts).
//!
//! A checkpoint is written whole into `checkpoint.new/`, then swapped in with two renames
//! (`checkpoint` -> `checkpoint.old`, `checkpoint.new` -> `checkpoint`), so a run killed at any
//! point leaves either the previous checkpoint or the new one; [`find`] looks for `checkpoint.old`
//! when the kill fell between the renames.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::model::TrainModel;
use super::optim::AdamW;
use super::tokens::write_atomic;
use super::{TrainConfig, TrainError, TrainResult, EOS_ID, MASK_ID};
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
    save_tensors(&model.tensors(), &new_dir.join(SINGLE_FILE))?;
    save_tensors(
        &optim.state_tensors(model.params())?,
        &new_dir.join(OPTIMIZER_FILE),
    )?;
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
/// and `redraft.json` (which says how next-edit canvases were shown in training:
/// `edit_draft`). Each file is replaced atomically.
pub fn export(out: &Path, model: &TrainModel, dtype: DType, edit_draft: bool) -> TrainResult<()> {
    let cfg = model.config();
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
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
    });
    let mut redraft = serde_json::json!({
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        "logit_shift": false,
    });
    if edit_draft {
        redraft["edit_canvas"] = "draft".into();
    }
    let tensors = model
        .tensors()
        .into_iter()
        .map(|(name, t)| Ok((name, t.to_dtype(dtype)?)))
        .collect::<TrainResult<HashMap<_, _>>>()?;
    save_tensors(&tensors, &out.join(SINGLE_FILE))?;
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

/// Serialises `tensors` and writes them atomically (safetensors' own file writer leaves the file
/// readable by its owner only, which a shipped model directory should not be).
fn save_tensors(tensors: &HashMap<String, Tensor>, path: &Path) -> TrainResult<()> {
    let bytes = safetensors::serialize(tensors.iter(), None).map_err(|e| TrainError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    write_atomic(path, &bytes)
}

/// Makes the renames in `dir` durable (best effort: not every filesystem supports it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
