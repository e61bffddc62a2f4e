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
pub mod tokens;

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "cuda"))]
mod cuda_tests;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::{DType, Device};
use serde::{Deserialize, Serialize};

use checkpoint::TrainState;
pub use config::{DiffusionSetup, ModelShape, TrainConfig};
use cpu::{BatchScores, CpuModel};
use examples::{Batch, ExampleBuilder, ExampleKind, Stream};
use model::TrainModel;
use optim::AdamW;
use redraft_context::edit::cut::EditCase;
use redraft_engine::engine::TOKENIZER_FILE;
use redraft_engine::tokenizer::Tokenizer;
use tokens::CorpusSplit;

/// Special tokens, in id order: the mask, EOS (also padding), a BOS that redraft's models do not
/// use, and markers reserved for prompts that are not trained yet.
pub const SPECIAL_TOKENS: [&str; 8] = [
    "<|mask|>",
    "<|endoftext|>",
    "<|bos|>",
    "<|file_sep|>",
    "<|cursor|>",
    "<|edit_start|>",
    "<|edit_end|>",
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

/// What computes the gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// [`cpu::CpuModel`] on CPU, [`Backend::Portable`] on other devices.
    #[default]
    Auto,
    /// candle's autograd over [`TrainModel`] with the device's own kernels (on CPU: the
    /// reference the CPU path is held to).
    Autograd,
    /// candle's autograd over [`TrainModel`] built from composed ops, with the optimizer's
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

/// Puts the tokenizer at `paths.tokenizer()`, copying or training it, and returns it.
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
        Backend::Auto,
        controls,
    )
}

/// [`train`] with the gradients computed by `backend`. Every device and backend reads and
/// writes the same checkpoints, so a run may be resumed with any of them (the steps differ only
/// by float rounding).
pub fn train_with(
    config: &TrainConfig,
    paths: &TrainPaths,
    resume: bool,
    export_dtype: DType,
    device: &Device,
    backend: Backend,
    mut controls: TrainControls<'_>,
) -> TrainResult<TrainSummary> {
    config.validate()?;
    let out = &paths.out;
    let tokenizer_path = paths.tokenizer();
    let tokenizer = Tokenizer::load(&tokenizer_path)?;
    check_tokenizer(&tokenizer, config, &tokenizer_path)?;
    let tokenizer_bytes =
        std::fs::read(&tokenizer_path).map_err(|e| TrainError::read(&tokenizer_path, e))?;
    let tokenizer_hash = tokens::fnv1a(&tokenizer_bytes);
    controls.status("loading and tokenizing the corpus (cached after the first run)");
    let cache = out.join(CACHE_DIR);
    let train_split = CorpusSplit::load(&paths.train_split(), &tokenizer, tokenizer_hash, &cache)?;
    let valid_split = CorpusSplit::load(&paths.valid_split(), &tokenizer, tokenizer_hash, &cache)?;
    for (split, path) in [
        (&train_split, paths.train_split()),
        (&valid_split, paths.valid_split()),
    ] {
        if split.num_tokens() == 0 {
            return Err(TrainError::EmptyCorpus { path });
        }
    }
    controls.status(&format!(
        "corpus: train {} files, {} tokens ({:.2} bytes/token); valid {} files, {} tokens",
        train_split.num_files(),
        train_split.num_tokens(),
        train_split.num_bytes() as f64 / train_split.num_tokens() as f64,
        valid_split.num_files(),
        valid_split.num_tokens(),
    ));
    let edits = load_edits(config, paths)?;
    if let Some(edits) = &edits {
        controls.status(&format!(
            "next-edit cases: train {}, valid {}",
            edits.train.len(),
            edits.valid.len()
        ));
    }
    let corpus_hash = format!(
        "{:016x}",
        train_split.hash()
            ^ valid_split.hash().rotate_left(1)
            ^ edits.as_ref().map_or(0, |e| e.hash.rotate_left(2))
    );
    let tokenizer_hash = format!("{tokenizer_hash:016x}");
    let model_config = config.model_config();
    let attention = config.diffusion.attention;

    let (model, mut optim, start_step, mut tokens_seen, mut train_seconds) = if resume {
        let state = checkpoint::load_state(out)?.ok_or_else(|| {
            TrainError::Resume(format!(
                "{} holds no checkpoint: drop --resume to start a new run",
                out.display()
            ))
        })?;
        let conflicts = config.resume_conflicts(&state.config);
        if !conflicts.is_empty() {
            return Err(TrainError::Resume(format!(
                "settings differ from the checkpoint's ({}): keep them or start a new --out",
                conflicts.join(", ")
            )));
        }
        if state.corpus_hash != corpus_hash || state.tokenizer_hash != tokenizer_hash {
            return Err(TrainError::Resume(
                "the corpus or the tokenizer changed since the checkpoint: resume with the same ones or start a new --out".into(),
            ));
        }
        let (weights, moments) = checkpoint::load_tensors(out)?;
        let model = build_model(&model_config, weights, attention, device, backend)?;
        let mut optim = new_optimizer(config, &model, backend)?;
        optim.restore(model.params(), &moments, state.step as u64)?;
        truncate_log(&out.join(LOG_FILE), state.step)?;
        controls.status(&format!(
            "resumed from the checkpoint at step {}",
            state.step
        ));
        (
            model,
            optim,
            state.step,
            state.tokens_seen,
            state.train_seconds,
        )
    } else {
        if let Some(dir) = checkpoint::find(out) {
            return Err(TrainError::Resume(format!(
                "{} already holds a checkpoint: pass --resume to continue it, or choose another --out",
                dir.display()
            )));
        }
        let weights = match &config.init {
            Some(path) => {
                controls.status(&format!("starting from the weights in {}", path.display()));
                init::load_weights(path, &model_config)?
            }
            None => redraft_engine::qwen2::init_weights(&model_config, config.seed)?,
        };
        let model = build_model(&model_config, weights, attention, device, backend)?;
        let optim = new_optimizer(config, &model, backend)?;
        let _ = std::fs::remove_file(out.join(LOG_FILE));
        (model, optim, 0, 0, 0.0)
    };
    controls.status(&format!(
        "model: {} parameters ({} layers, hidden {}, {} heads / {} kv, ffn {}, vocab {}, {} head); attention {:?}, mask {}, EOS {}, logit shift {}",
        model.num_parameters(),
        config.model.layers,
        config.model.hidden,
        config.model.heads,
        config.model.kv_heads,
        config.model.ffn,
        config.model.vocab_size,
        if config.model.tied_head { "tied" } else { "untied" },
        attention,
        config.diffusion.mask_id,
        config.diffusion.eos_id,
        config.diffusion.logit_shift,
    ));

    let mut fast = match backend {
        Backend::Auto if device.is_cpu() => Some(CpuModel::new(&model)?),
        _ => None,
    };
    controls.status(&format!(
        "training on {} ({})",
        redraft_engine::device::describe(device),
        if fast.is_some() {
            "redraft's CPU forward and backward"
        } else {
            "candle autograd"
        }
    ));
    let seq_len = config.data.seq_len;
    let builder = ExampleBuilder::new(
        &train_split,
        &tokenizer,
        config.data.clone(),
        config.seed,
        Stream::Train,
    )
    .with_setup(config.diffusion);
    let builder = match &edits {
        Some(edits) => builder.with_edits(&edits.train)?,
        None => builder,
    };
    let eval_set = eval_batches(
        config,
        &valid_split,
        edits.as_ref().map(|e| &e.valid[..]),
        &tokenizer,
    )?;
    let tokens_per_step = (config.batch * seq_len) as u64;
    let mut step_time = Duration::ZERO;
    let mut session_steps = 0;
    let mut loss_since_eval = (0.0f64, 0usize);
    let mut last_eval = None;
    if !resume && config.init.is_some() {
        // What the run starts from: a checkpoint's weights, on this run's held-out sample and
        // objective (an adapted autoregressive model's first attempt at diffusion).
        let lr = config.optim.lr_at(0, config.steps);
        let report = evaluate(
            &model,
            fast.as_mut(),
            &eval_set,
            0,
            (0.0, 0),
            lr,
            0.0,
            0,
            0.0,
        )?;
        append_log(&out.join(LOG_FILE), &report)?;
        if let Some(f) = controls.on_eval.as_mut() {
            f(&report);
        }
        last_eval = Some(report);
    }
    let mut last_saved = start_step;
    let mut step = start_step;
    let tokens_per_s = |time: Duration, steps: usize| {
        if steps == 0 {
            0.0
        } else {
            (steps as u64 * tokens_per_step) as f64 / time.as_secs_f64()
        }
    };
    let stopped = loop {
        if step >= config.steps {
            break StopReason::Finished;
        }
        if controls.stop_after.is_some_and(|s| step >= s) {
            break StopReason::StepLimit;
        }
        if controls.deadline.is_some_and(|d| Instant::now() >= d) {
            break StopReason::Deadline;
        }
        let started = Instant::now();
        let batch = Batch::new(
            &builder.batch(step as u64, config.batch)?,
            seq_len,
            &config.diffusion,
        );
        let lr = config.optim.lr_at(step, config.steps);
        let diverged = |loss: f32| TrainError::NonFinite {
            what: format!("loss {loss} at step {step}"),
        };
        let (loss, update) = match fast.as_mut() {
            Some(fast) => {
                let scored = fast.score(&batch, true)?;
                if !scored.loss.is_finite() {
                    return Err(diverged(scored.loss));
                }
                (scored.loss, fast.step(&mut optim, lr)?)
            }
            None => {
                let scored = model.score(&batch)?;
                let loss = scored.loss.to_scalar::<f32>()?;
                if !loss.is_finite() {
                    return Err(diverged(loss));
                }
                let grads = scored.loss.backward()?;
                (loss, optim.step(model.params(), &grads, lr)?)
            }
        };
        step += 1;
        session_steps += 1;
        tokens_seen += tokens_per_step;
        let elapsed = started.elapsed();
        step_time += elapsed;
        train_seconds += elapsed.as_secs_f64();
        loss_since_eval.0 += loss as f64;
        loss_since_eval.1 += 1;
        let speed = tokens_per_s(step_time, session_steps);
        if let Some(f) = controls.on_progress.as_mut() {
            f(&Progress {
                step,
                steps: config.steps,
                loss,
                lr,
                grad_norm: update.grad_norm,
                tokens_per_s: speed,
                eta_s: (config.steps - step) as f64 * step_time.as_secs_f64()
                    / session_steps as f64,
            });
        }
        if step.is_multiple_of(config.eval_every) {
            let report = evaluate(
                &model,
                fast.as_mut(),
                &eval_set,
                step,
                loss_since_eval,
                lr,
                speed,
                tokens_seen,
                train_seconds,
            )?;
            loss_since_eval = (0.0, 0);
            append_log(&out.join(LOG_FILE), &report)?;
            if let Some(f) = controls.on_eval.as_mut() {
                f(&report);
            }
            last_eval = Some(report);
        }
        if step.is_multiple_of(config.save_every) && step < config.steps {
            let state = TrainState::new(
                step,
                config,
                &corpus_hash,
                &tokenizer_hash,
                tokens_seen,
                train_seconds,
            );
            save_all(out, &model, fast.as_ref(), &optim, &state, export_dtype)?;
            last_saved = step;
            controls.status(&format!("saved the checkpoint at step {step}"));
        }
    };
    // The final evaluation, unless this session did nothing or just evaluated this step.
    if stopped == StopReason::Finished
        && session_steps > 0
        && last_eval.as_ref().is_none_or(|e| e.step != step)
    {
        let lr = config.optim.lr_at(step.saturating_sub(1), config.steps);
        let speed = tokens_per_s(step_time, session_steps);
        let report = evaluate(
            &model,
            fast.as_mut(),
            &eval_set,
            step,
            loss_since_eval,
            lr,
            speed,
            tokens_seen,
            train_seconds,
        )?;
        append_log(&out.join(LOG_FILE), &report)?;
        if let Some(f) = controls.on_eval.as_mut() {
            f(&report);
        }
        last_eval = Some(report);
    }
    if last_saved != step || !out.join(redraft_engine::checkpoint::SINGLE_FILE).exists() {
        let state = TrainState::new(
            step,
            config,
            &corpus_hash,
            &tokenizer_hash,
            tokens_seen,
            train_seconds,
        );
        save_all(out, &model, fast.as_ref(), &optim, &state, export_dtype)?;
        controls.status(&format!(
            "saved the checkpoint and the model at step {step}"
        ));
    }
    Ok(TrainSummary {
        step,
        steps_this_session: session_steps,
        stopped,
        tokens_per_s: tokens_per_s(step_time, session_steps),
        last_eval,
        parameters: model.num_parameters(),
        device: redraft_engine::device::describe(device),
    })
}

/// The training model for `backend` on `device`.
fn build_model(
    config: &redraft_engine::config::ModelConfig,
    weights: std::collections::HashMap<String, candle_core::Tensor>,
    attention: redraft_engine::config::AttentionPattern,
    device: &Device,
    backend: Backend,
) -> TrainResult<TrainModel> {
    let model = TrainModel::from_tensors(config, weights, device)?.with_attention(attention);
    Ok(match backend {
        Backend::Portable => model.with_kernels(redraft_engine::ops::Kernels::Portable)?,
        Backend::Auto | Backend::Autograd => model,
    })
}

fn new_optimizer(config: &TrainConfig, model: &TrainModel, backend: Backend) -> TrainResult<AdamW> {
    match backend {
        Backend::Portable => AdamW::with_tensor_moments(config.optim.clone(), model.params()),
        Backend::Auto | Backend::Autograd => AdamW::new(config.optim.clone(), model.params()),
    }
}

/// Saves the checkpoint and exports the model, first copying the CPU path's weights (when it
/// trains) into `model`.
fn save_all(
    out: &Path,
    model: &TrainModel,
    fast: Option<&CpuModel>,
    optim: &AdamW,
    state: &TrainState,
    dtype: DType,
) -> TrainResult<()> {
    if let Some(fast) = fast {
        fast.write_to(model)?;
    }
    checkpoint::save(out, model, optim, state)?;
    checkpoint::export(out, model, dtype, &state.config)
}

/// The next-edit cases of a run, when it learns next edits.
struct EditCases {
    train: Vec<EditCase>,
    valid: Vec<EditCase>,
    /// Of both files' bytes: a resumed run must see the same cases.
    hash: u64,
}

fn load_edits(config: &TrainConfig, paths: &TrainPaths) -> TrainResult<Option<EditCases>> {
    if config.data.edit_rate <= 0.0 {
        return Ok(None);
    }
    let Some(dir) = &paths.edits else {
        return Err(TrainError::Config(
            "a next-edit rate needs the next-edit cases: pass --edits DIR (built by build_edits)"
                .into(),
        ));
    };
    let mut hash = 0u64;
    let mut read = |name: &str| -> TrainResult<Vec<EditCase>> {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| TrainError::read(&path, e))?;
        hash = hash.rotate_left(1) ^ tokens::fnv1a(&bytes);
        let cases = crate::edits::read_edit_cases(&path)?;
        if cases.is_empty() {
            return Err(TrainError::Config(format!(
                "{} holds no next-edit cases",
                path.display()
            )));
        }
        Ok(cases)
    };
    let train = read(crate::edits::TRAIN_FILE)?;
    let valid = read(crate::edits::VALID_FILE)?;
    Ok(Some(EditCases { train, valid, hash }))
}

/// The fixed held-out sample, in batches of the training batch size.
fn eval_batches(
    config: &TrainConfig,
    valid: &CorpusSplit,
    valid_edits: Option<&[EditCase]>,
    tokenizer: &Tokenizer,
) -> TrainResult<Vec<Batch>> {
    let builder = ExampleBuilder::new(
        valid,
        tokenizer,
        config.data.clone(),
        config.seed,
        Stream::Eval,
    )
    .with_setup(config.diffusion);
    let builder = match valid_edits {
        Some(cases) => builder.with_edits(cases)?,
        None => builder,
    };
    let mut batches = Vec::new();
    let mut left = config.eval_examples;
    let mut number = 0;
    while left > 0 {
        let size = left.min(config.batch);
        // Batch numbers index a stream of full-size batches; a short last one is a prefix.
        let mut examples = builder.batch(number, config.batch)?;
        examples.truncate(size);
        batches.push(Batch::new(
            &examples,
            config.data.seq_len,
            &config.diffusion,
        ));
        left -= size;
        number += 1;
    }
    Ok(batches)
}

/// Scores `batch` without gradients, on the CPU path when it trains (its weights are the
/// current ones; `model`'s are only refreshed when saving).
fn score_only(
    model: &TrainModel,
    fast: Option<&mut CpuModel>,
    batch: &Batch,
) -> TrainResult<BatchScores> {
    Ok(match fast {
        Some(fast) => fast.score(batch, false)?,
        None => {
            let scored = model.score(batch)?;
            BatchScores {
                loss: scored.loss.to_scalar::<f32>()?,
                ce: scored.ce,
                correct: scored.correct,
            }
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn evaluate(
    model: &TrainModel,
    mut fast: Option<&mut CpuModel>,
    batches: &[Batch],
    step: usize,
    (train_loss_sum, train_steps): (f64, usize),
    lr: f64,
    tokens_per_s: f64,
    tokens_seen: u64,
    train_seconds: f64,
) -> TrainResult<EvalReport> {
    let (mut loss, mut examples) = (0.0f64, 0usize);
    let (mut ce_sum, mut rows) = (0.0f64, 0usize);
    // (correct, total) for FIM, plain and next-edit rows.
    let mut acc = [(0usize, 0usize); 3];
    for batch in batches {
        let scored = score_only(model, fast.as_deref_mut(), batch)?;
        loss += scored.loss as f64 * batch.batch as f64;
        examples += batch.batch;
        for ((ce, correct), kind) in scored.ce.iter().zip(&scored.correct).zip(&batch.row_kind) {
            ce_sum += *ce as f64;
            rows += 1;
            let slot = &mut acc[match kind {
                ExampleKind::Fim(_) => 0,
                ExampleKind::Plain => 1,
                ExampleKind::Edit { .. } => 2,
            }];
            slot.0 += usize::from(*correct);
            slot.1 += 1;
        }
    }
    let ratio = |(a, b): (usize, usize)| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Ok(EvalReport {
        step,
        val_loss: loss / examples.max(1) as f64,
        val_ce: ce_sum / rows.max(1) as f64,
        val_acc: ratio(acc.iter().fold((0, 0), |(a, b), (c, d)| (a + c, b + d))),
        val_fim_acc: ratio(acc[0]),
        val_plain_acc: ratio(acc[1]),
        val_edit_acc: (acc[2].1 > 0).then(|| ratio(acc[2])),
        train_loss: (train_steps > 0).then(|| train_loss_sum / train_steps as f64),
        lr,
        tokens_per_s,
        tokens_seen,
        train_seconds,
    })
}

fn append_log(path: &Path, report: &EvalReport) -> TrainResult<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| TrainError::write(path, e))?;
    let mut line = serde_json::to_string(report).expect("json");
    line.push('\n');
    file.write_all(line.as_bytes())
        .map_err(|e| TrainError::write(path, e))
}

/// Drops log entries past `step`: a run killed after evaluating but before saving resumes from
/// an earlier step and logs those steps again.
fn truncate_log(path: &Path, step: usize) -> TrainResult<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s as usize <= step)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    tokens::write_atomic(path, kept.as_bytes())
}
