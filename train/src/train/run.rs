//! One training run ([`train_with`]): what it reads ([`RunData`]), where it starts ([`Start`]:
//! fresh, from `--init` weights, or resumed from its checkpoint), the loop of steps with its
//! evaluations and checkpoints, and the helpers they share.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::{DType, Device};
use redraft_context::edit::cut::EditCase;
use redraft_engine::tokenizer::Tokenizer;

use super::checkpoint::{self, TrainState};
use super::cpu::{BatchScores, CpuModel};
use super::examples::{Batch, ExampleBuilder, ExampleKind, Stream};
use super::model::TrainModel;
use super::optim::{AdamW, UpdateReport};
use super::tokens::{self, CorpusSplit};
use super::{
    check_tokenizer, init, EvalReport, Gradients, Progress, StopReason, TrainConfig, TrainControls,
    TrainError, TrainPaths, TrainResult, TrainSummary, CACHE_DIR, LOG_FILE,
};

/// [`super::train`] with the gradients computed as `gradients` says. Every device and way of computing
/// gradients reads and writes the same checkpoints, so a run may be resumed with any of them
/// (the steps differ only by float rounding).
pub fn train_with(
    config: &TrainConfig,
    paths: &TrainPaths,
    resume: bool,
    export_dtype: DType,
    device: &Device,
    gradients: Gradients,
    mut controls: TrainControls<'_>,
) -> TrainResult<TrainSummary> {
    config.validate()?;
    let out = &paths.out;
    let data = RunData::load(config, paths, &mut controls)?;
    let attention = config.diffusion.attention;
    let Start {
        model,
        mut optim,
        step: start_step,
        mut tokens_seen,
        mut train_seconds,
    } = Start::new(config, out, resume, &data, device, gradients, &mut controls)?;
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

    let mut fast = match gradients {
        Gradients::Auto if device.is_cpu() => Some(CpuModel::new(&model)?),
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
        &data.train,
        &data.tokenizer,
        config.data.clone(),
        config.seed,
        Stream::Train,
    )
    .with_setup(config.diffusion);
    let builder = match &data.edits {
        Some(edits) => builder.with_edits(&edits.train)?,
        None => builder,
    };
    let eval_set = eval_batches(
        config,
        &data.valid,
        data.edits.as_ref().map(|e| &e.valid[..]),
        &data.tokenizer,
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
        last_eval = Some(record(report, out, &mut controls)?);
    }
    let save = |step: usize,
                tokens_seen: u64,
                train_seconds: f64,
                model: &TrainModel,
                fast: Option<&CpuModel>,
                optim: &AdamW| {
        let state = TrainState::new(
            step,
            config,
            &data.corpus_hash,
            &data.tokenizer_hash,
            tokens_seen,
            train_seconds,
        );
        save_all(out, model, fast, optim, &state, export_dtype)
    };
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
        let (loss, update) = take_step(&model, fast.as_mut(), &mut optim, &batch, lr, step)?;
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
            last_eval = Some(record(report, out, &mut controls)?);
        }
        if step.is_multiple_of(config.save_every) && step < config.steps {
            save(
                step,
                tokens_seen,
                train_seconds,
                &model,
                fast.as_ref(),
                &optim,
            )?;
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
        last_eval = Some(record(report, out, &mut controls)?);
    }
    if last_saved != step || !out.join(redraft_engine::checkpoint::SINGLE_FILE).exists() {
        save(
            step,
            tokens_seen,
            train_seconds,
            &model,
            fast.as_ref(),
            &optim,
        )?;
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

/// One optimizer step on `batch` at learning rate `lr`, through the CPU path when it trains,
/// else candle's autograd: the loss before the step and the update's report. A loss that is
/// not finite stops the run before any weight moves.
fn take_step(
    model: &TrainModel,
    fast: Option<&mut CpuModel>,
    optim: &mut AdamW,
    batch: &Batch,
    lr: f64,
    step: usize,
) -> TrainResult<(f32, UpdateReport)> {
    let diverged = |loss: f32| TrainError::NonFinite {
        what: format!("loss {loss} at step {step}"),
    };
    match fast {
        Some(fast) => {
            let scored = fast.score(batch, true)?;
            if !scored.loss.is_finite() {
                return Err(diverged(scored.loss));
            }
            Ok((scored.loss, fast.step(optim, lr)?))
        }
        None => {
            let scored = model.score(batch)?;
            let loss = scored.loss.to_scalar::<f32>()?;
            if !loss.is_finite() {
                return Err(diverged(loss));
            }
            let grads = scored.loss.backward()?;
            Ok((loss, optim.step(model.params(), &grads, lr)?))
        }
    }
}

/// An evaluation done: appended to the run's log and shown to the caller.
fn record(
    report: EvalReport,
    out: &Path,
    controls: &mut TrainControls<'_>,
) -> TrainResult<EvalReport> {
    append_log(&out.join(LOG_FILE), &report)?;
    if let Some(f) = controls.on_eval.as_mut() {
        f(&report);
    }
    Ok(report)
}

/// What a run reads: the tokenizer, the corpus tokenized (cached after the first run), the
/// next-edit cases when it learns next edits, and the hashes its checkpoints record of them (a
/// resumed run must read the same).
struct RunData {
    tokenizer: Tokenizer,
    train: CorpusSplit,
    valid: CorpusSplit,
    edits: Option<EditCases>,
    corpus_hash: String,
    tokenizer_hash: String,
}

impl RunData {
    fn load(
        config: &TrainConfig,
        paths: &TrainPaths,
        controls: &mut TrainControls<'_>,
    ) -> TrainResult<RunData> {
        let tokenizer_path = paths.tokenizer();
        let tokenizer = Tokenizer::load(&tokenizer_path)?;
        check_tokenizer(&tokenizer, config, &tokenizer_path)?;
        let tokenizer_bytes =
            std::fs::read(&tokenizer_path).map_err(|e| TrainError::read(&tokenizer_path, e))?;
        let tokenizer_hash = tokens::fnv1a(&tokenizer_bytes);
        controls.status("loading and tokenizing the corpus (cached after the first run)");
        let cache = paths.out.join(CACHE_DIR);
        let train = CorpusSplit::load(&paths.train_split(), &tokenizer, tokenizer_hash, &cache)?;
        let valid = CorpusSplit::load(&paths.valid_split(), &tokenizer, tokenizer_hash, &cache)?;
        for (split, path) in [(&train, paths.train_split()), (&valid, paths.valid_split())] {
            if split.num_tokens() == 0 {
                return Err(TrainError::EmptyCorpus { path });
            }
        }
        controls.status(&format!(
            "corpus: train {} files, {} tokens ({:.2} bytes/token); valid {} files, {} tokens",
            train.num_files(),
            train.num_tokens(),
            train.num_bytes() as f64 / train.num_tokens() as f64,
            valid.num_files(),
            valid.num_tokens(),
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
            train.hash()
                ^ valid.hash().rotate_left(1)
                ^ edits.as_ref().map_or(0, |e| e.hash.rotate_left(2))
        );
        Ok(RunData {
            tokenizer,
            train,
            valid,
            edits,
            corpus_hash,
            tokenizer_hash: format!("{tokenizer_hash:016x}"),
        })
    }
}

/// Where a run starts: a new model (fresh weights or a checkpoint's, `--init`), or the
/// checkpoint in its output directory with its optimizer state and counters (`--resume`).
struct Start {
    model: TrainModel,
    optim: AdamW,
    step: usize,
    tokens_seen: u64,
    train_seconds: f64,
}

impl Start {
    fn new(
        config: &TrainConfig,
        out: &Path,
        resume: bool,
        data: &RunData,
        device: &Device,
        gradients: Gradients,
        controls: &mut TrainControls<'_>,
    ) -> TrainResult<Start> {
        let model_config = config.model_config();
        let attention = config.diffusion.attention;
        if resume {
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
            if state.corpus_hash != data.corpus_hash || state.tokenizer_hash != data.tokenizer_hash
            {
                return Err(TrainError::Resume(
                    "the corpus or the tokenizer changed since the checkpoint: resume with the same ones or start a new --out".into(),
                ));
            }
            let (weights, moments) = checkpoint::load_tensors(out)?;
            let model = build_model(&model_config, weights, attention, device, gradients)?;
            let mut optim = new_optimizer(config, &model, gradients)?;
            optim.restore(model.params(), &moments, state.step as u64)?;
            truncate_log(&out.join(LOG_FILE), state.step)?;
            controls.status(&format!(
                "resumed from the checkpoint at step {}",
                state.step
            ));
            return Ok(Start {
                model,
                optim,
                step: state.step,
                tokens_seen: state.tokens_seen,
                train_seconds: state.train_seconds,
            });
        }
        checkpoint::refuse_existing(out)?;
        let weights = match &config.init {
            Some(path) => {
                controls.status(&format!("starting from the weights in {}", path.display()));
                init::load_weights(path, &model_config)?
            }
            None => redraft_engine::qwen2::init_weights(&model_config, config.seed)?,
        };
        let model = build_model(&model_config, weights, attention, device, gradients)?;
        let optim = new_optimizer(config, &model, gradients)?;
        let _ = std::fs::remove_file(out.join(LOG_FILE));
        Ok(Start {
            model,
            optim,
            step: 0,
            tokens_seen: 0,
            train_seconds: 0.0,
        })
    }
}

/// The training model for `gradients` on `device`.
fn build_model(
    config: &redraft_engine::config::ModelConfig,
    weights: std::collections::HashMap<String, candle_core::Tensor>,
    attention: redraft_engine::config::AttentionPattern,
    device: &Device,
    gradients: Gradients,
) -> TrainResult<TrainModel> {
    let model = TrainModel::from_tensors(config, weights, device)?.with_attention(attention);
    Ok(match gradients {
        Gradients::Portable => model.with_kernels(redraft_engine::ops::Kernels::Portable)?,
        Gradients::Auto | Gradients::Autograd => model,
    })
}

fn new_optimizer(
    config: &TrainConfig,
    model: &TrainModel,
    gradients: Gradients,
) -> TrainResult<AdamW> {
    match gradients {
        Gradients::Portable => AdamW::with_tensor_moments(config.optim.clone(), model.params()),
        Gradients::Auto | Gradients::Autograd => AdamW::new(config.optim.clone(), model.params()),
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
