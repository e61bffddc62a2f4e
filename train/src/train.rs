//! Training redraft's own masked-diffusion code model (MDLM / LLaDA style) on the corpus that
//! [`crate::corpus`] builds, into a model directory [`redraft_engine::Engine::load`] loads.
//!
//! - [`config`]: the run's settings ([`TrainConfig`]);
//! - [`tokens`]: the byte-level BPE (specials at fixed ids, [`SPECIAL_TOKENS`]) and the corpus
//!   tokenized once, cached on disk;
//! - [`examples`]: fill-in-the-middle and plain examples with their masking, and batches;
//! - [`model`]: the Qwen2 of [`redraft_engine::qwen2`] rebuilt from differentiable ops over `Var`s;
//! - [`cpu`]: the same model's forward and backward written out over flat buffers, which
//!   trains on CPU (the autograd model stays the reference, and the path for other devices);
//! - [`optim`]: AdamW, the warmup + cosine schedule, gradient clipping;
//! - [`checkpoint`]: resumable checkpoints and the exported model directory;
//! - [`init`]: a run's start from a checkpoint's weights (redraft's, another Qwen2 layout's, a
//!   GGUF's), adapting an autoregressive one to diffusion.
//!
//! [`train`] runs the loop: seeded and deterministic (example `i` of step `s` depends only on
//! the seed, `s` and `i`), so a run stopped and resumed from a checkpoint takes exactly the
//! steps an uninterrupted one would. Synchronous, and silent: progress reaches the caller through
//! [`TrainControls`].

pub mod checkpoint;
pub mod config;
pub mod cpu;
pub mod examples;
pub mod fused;
pub mod init;
pub mod model;
pub mod optim;
mod run;
pub mod tokens;

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "cuda"))]
mod cuda_tests;

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device};
use serde::{Deserialize, Serialize};

pub use config::{DiffusionSetup, ModelShape, TrainConfig};
use redraft_engine::engine::TOKENIZER_FILE;
use redraft_engine::tokenizer::Tokenizer;
use redraft_prompts::markers;
pub use run::train_with;

/// Special tokens, in id order: the mask, EOS (also padding), a BOS that redraft's models do not
/// use, and markers reserved for prompts that are not trained yet.
pub const SPECIAL_TOKENS: [&str; 8] = [
    "<|mask|>",
    "<|endoftext|>",
    "<|bos|>",
    markers::FILE_SEP,
    markers::CURSOR,
    markers::EDIT_START,
    markers::EDIT_END,
    "<|expand|>",
];
pub const MASK_ID: u32 = 0;
pub const EOS_ID: u32 = 1;

/// The log of evaluations, JSON Lines of [`EvalReport`], in the output directory.
pub const LOG_FILE: &str = "train_log.jsonl";
/// Token caches live here, under the output directory.
pub const CACHE_DIR: &str = "cache";

/// Errors of training.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Engine(#[from] redraft_engine::Error),
    #[error("model computation failed: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} line {line} is not a corpus record: {message} (build the corpus with the corpus builder)")]
    BadCorpus {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path} holds no text to train on: point --corpus at a built corpus")]
    EmptyCorpus { path: PathBuf },
    #[error(transparent)]
    Edits(#[from] crate::edits::EditsError),
    #[error("invalid training settings: {0}")]
    Config(String),
    #[error("the checkpoint cannot be used: {message}")]
    BadCheckpoint { message: String },
    #[error("cannot start from {path}: {message}")]
    Init { path: PathBuf, message: String },
    #[error("cannot resume: {0}")]
    Resume(String),
    #[error("parameter `{0}` received no gradient: an op without a backward pass cut the graph")]
    NoGradient(String),
    #[error("training diverged: {what} (lower --lr or raise --warmup, then resume from the last checkpoint)")]
    NonFinite { what: String },
}

impl TrainError {
    pub(crate) fn read(path: impl Into<PathBuf>, source: std::io::Error) -> TrainError {
        TrainError::Read {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn write(path: impl Into<PathBuf>, source: std::io::Error) -> TrainError {
        TrainError::Write {
            path: path.into(),
            source,
        }
    }
}

pub type TrainResult<T, E = TrainError> = std::result::Result<T, E>;

/// Where the corpus is read and everything is written.
#[derive(Debug, Clone)]
pub struct TrainPaths {
    /// Holds `train.jsonl` and `valid.jsonl`.
    pub corpus: PathBuf,
    /// The model directory being written (and the checkpoint, caches and log inside it).
    pub out: PathBuf,
    /// Holds the next-edit cases (`edits-train.jsonl`, `edits-valid.jsonl`), when the run
    /// learns next edits too.
    pub edits: Option<PathBuf>,
}

impl TrainPaths {
    pub fn train_split(&self) -> PathBuf {
        self.corpus.join(crate::corpus::TRAIN_FILE)
    }

    pub fn valid_split(&self) -> PathBuf {
        self.corpus.join(crate::corpus::VALID_FILE)
    }

    pub fn tokenizer(&self) -> PathBuf {
        self.out.join(TOKENIZER_FILE)
    }
}

/// One step's numbers, for a progress line.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub step: usize,
    pub steps: usize,
    pub loss: f32,
    pub lr: f64,
    pub grad_norm: f64,
    /// `batch * seq_len` per second of step time in this session.
    pub tokens_per_s: f64,
    pub eta_s: f64,
}

/// A held-out evaluation, as written to [`LOG_FILE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalReport {
    pub step: usize,
    /// The training objective on the held-out sample.
    pub val_loss: f64,
    /// Mean cross-entropy per masked token (nats).
    pub val_ce: f64,
    /// Share of masked tokens whose most likely prediction is right.
    pub val_acc: f64,
    pub val_fim_acc: f64,
    pub val_plain_acc: f64,
    /// Share of masked next-edit canvas tokens predicted right (runs with edit cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_edit_acc: Option<f64>,
    /// Mean training loss since the previous evaluation (none when no step ran since).
    pub train_loss: Option<f64>,
    pub lr: f64,
    pub tokens_per_s: f64,
    pub tokens_seen: u64,
    pub train_seconds: f64,
}

/// How the caller steers and watches a run.
#[derive(Default)]
pub struct TrainControls<'a> {
    /// Stop (saving a checkpoint) before starting a step after this instant.
    pub deadline: Option<Instant>,
    /// Stop (saving a checkpoint) once this many steps are done.
    pub stop_after: Option<usize>,
    pub on_progress: Option<&'a mut dyn FnMut(&Progress)>,
    pub on_eval: Option<&'a mut dyn FnMut(&EvalReport)>,
    /// One-line notes on what the run is doing (loading, resuming, saving).
    pub on_status: Option<&'a mut dyn FnMut(&str)>,
}

impl TrainControls<'_> {
    fn status(&mut self, message: &str) {
        if let Some(f) = self.on_status.as_mut() {
            f(message);
        }
    }
}

/// Why [`train`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    Finished,
    Deadline,
    StepLimit,
}

/// What a call to [`train`] did.
#[derive(Debug, Clone, Serialize)]
pub struct TrainSummary {
    pub step: usize,
    pub steps_this_session: usize,
    pub stopped: StopReason,
    pub tokens_per_s: f64,
    pub last_eval: Option<EvalReport>,
    pub parameters: usize,
    /// Where it ran: `cpu` or `cuda:N`.
    pub device: String,
}

/// What computes the gradients (not to be confused with a remote inference backend, the
/// runtime's `Backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gradients {
    /// [`cpu::CpuModel`] on CPU, [`Gradients::Portable`] on other devices.
    #[default]
    Auto,
    /// candle's autograd over [`model::TrainModel`] with the device's own kernels (on CPU: the
    /// reference the CPU path is held to).
    Autograd,
    /// candle's autograd over [`model::TrainModel`] built from composed ops, with the optimizer's
    /// moments in tensors: what a GPU runs, on any device (tests run it on CPU).
    Portable,
}

/// Which tokenizer a fresh run uses.
#[derive(Debug, Clone)]
pub enum TokenizerSource {
    /// An existing `tokenizer.json` (its specials must sit at [`SPECIAL_TOKENS`]' ids).
    File(PathBuf),
    /// Train one on the training split's files, in order, until `sample_bytes` (`usize::MAX`:
    /// all of it, which takes ~7 s on 59 MB with two cores).
    Train {
        vocab_size: usize,
        sample_bytes: usize,
    },
}

/// Puts the tokenizer at `paths.tokenizer()`, copying or training it, and returns it (over the
/// one there: a caller starting a run checks first that `paths.out` holds none,
/// [`checkpoint::refuse_existing`]).
pub fn prepare_tokenizer(paths: &TrainPaths, source: &TokenizerSource) -> TrainResult<Tokenizer> {
    let dest = paths.tokenizer();
    std::fs::create_dir_all(&paths.out).map_err(|e| TrainError::write(&paths.out, e))?;
    let tokenizer = match source {
        TokenizerSource::File(path) => {
            let tokenizer = Tokenizer::load(path)?;
            check_specials(&tokenizer, path)?;
            let bytes = std::fs::read(path).map_err(|e| TrainError::read(path, e))?;
            tokens::write_atomic(&dest, &bytes)?;
            tokenizer
        }
        TokenizerSource::Train {
            vocab_size,
            sample_bytes,
        } => {
            let texts = tokens::read_texts(&paths.train_split(), *sample_bytes)?;
            if texts.is_empty() {
                return Err(TrainError::EmptyCorpus {
                    path: paths.train_split(),
                });
            }
            let tokenizer = tokens::train_tokenizer(&texts, *vocab_size)?;
            let tmp = tokens::temp_sibling(&dest);
            tokenizer.save(&tmp)?;
            std::fs::rename(&tmp, &dest).map_err(|e| TrainError::write(&dest, e))?;
            tokenizer
        }
    };
    Ok(tokenizer)
}

/// The tokenizer fits the run: redraft's specials where the run uses redraft's ids, no more
/// tokens than the model has embeddings.
fn check_tokenizer(tokenizer: &Tokenizer, config: &TrainConfig, path: &Path) -> TrainResult<()> {
    if config.diffusion.uses_redraft_ids() {
        check_specials(tokenizer, path)?;
    }
    if tokenizer.vocab_size() > config.model.vocab_size {
        return Err(TrainError::Config(format!(
            "the tokenizer has {} tokens, the model config says {}",
            tokenizer.vocab_size(),
            config.model.vocab_size
        )));
    }
    Ok(())
}

fn check_specials(tokenizer: &Tokenizer, path: &Path) -> TrainResult<()> {
    for (id, special) in SPECIAL_TOKENS.iter().enumerate() {
        if tokenizer.token_to_id(special) != Some(id as u32) {
            return Err(TrainError::Config(format!(
                "{} does not have `{special}` at id {id}: train a tokenizer with --vocab-size instead",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Runs (or, with `resume`, continues) training on `device`. The tokenizer must already be at
/// `paths.tokenizer()` ([`prepare_tokenizer`]); `config.model.vocab_size` must be its size.
pub fn train(
    config: &TrainConfig,
    paths: &TrainPaths,
    resume: bool,
    export_dtype: DType,
    device: &Device,
    controls: TrainControls<'_>,
) -> TrainResult<TrainSummary> {
    train_with(
        config,
        paths,
        resume,
        export_dtype,
        device,
        Gradients::Auto,
        controls,
    )
}
