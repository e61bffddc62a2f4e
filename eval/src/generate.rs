//! The generation driver: each task's prompt and suffix become a document with the cursor
//! between them, and the request is built exactly as the language server builds one: the
//! context layer's [`redraft_context::plan`] picks the windows and the canvas length, the
//! engine fills the canvas, [`redraft_context::finish`] cleans the middle. So the eval scores
//! what an editor user would have been shown. The pipeline itself is `redraft_suggest::fim`,
//! the one the language server and `redraft serve` call.
//!
//! The run step is a [`Filler`]: the local engine, or a [`FimBackend`] (a model served by
//! another process, `redraft eval --backend`) that fills the same plan's middle; prepare and
//! finish are the same either way.

use std::time::Instant;

use redraft_context::{Language, Source};
use redraft_engine::sampler::{Controls, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::{Completion, Engine};
use redraft_suggest::fim::{self, FimOptions, Prepared};
use redraft_suggest::remote::{BackendSpec, FimBackend};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::task::{Task, TaskLanguage};

/// What fills a prepared request's middle: the run step of `prepare -> run -> finish`.
#[derive(Clone, Copy)]
pub enum Filler<'a> {
    /// The model in this process.
    Engine(&'a Engine),
    /// A model served by another process.
    Backend(&'a dyn FimBackend),
}

impl Filler<'_> {
    /// What a run's identity records about a backend; `None` for the local engine.
    pub fn backend_spec(&self) -> Option<BackendSpec> {
        match self {
            Filler::Engine(_) => None,
            Filler::Backend(backend) => Some(backend.spec()),
        }
    }
}

/// One decoding setting: what a sweep varies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    /// How the user wrote it (`--effort low`), for tables and directory names.
    pub name: String,
    pub sampler: SamplerConfig,
    /// The canvas is the true middle's length in tokens instead of the context layer's choice.
    pub oracle_length: bool,
    /// The largest canvas the plan may choose (the editor's "max tokens"; the LSP's default is
    /// `redraft_runtime::DEFAULT_MAX_TOKENS`, 64).
    pub max_tokens: usize,
    /// Characters typed before the task, through one kept cache: the task is first completed
    /// with its prompt this much shorter, then once per character typed, and the last
    /// completion (the task's own) is scored. 0: a fresh cache, as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub typed: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What generation recorded for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationStats {
    /// The engine's middle before post-processing.
    pub raw_middle: String,
    pub canvas_tokens: usize,
    /// Why the canvas has that size (the context layer's reason).
    pub canvas_reason: String,
    pub steps: usize,
    pub forwards: usize,
    /// Canvas slots committed per model call, EOS padding included (the engine's
    /// `Completion::tokens_per_forward`; the summary's tokens per forward counts `middle_tokens`).
    #[serde(alias = "tokens_per_forward")]
    pub slots_per_forward: f64,
    pub ended_by_eos: bool,
    /// The engine's length choice: tokens of the raw middle before the end (before
    /// post-processing).
    #[serde(default)]
    pub middle_tokens: usize,
    /// Tokens of the task's own middle.
    #[serde(default)]
    pub true_tokens: usize,
    /// Canvas slots at the end (the plan's length plus what the canvas grew by).
    #[serde(default)]
    pub slots: usize,
    /// Steps after the one that committed the end (none when the middle filled the canvas).
    #[serde(default)]
    pub steps_after_end: Option<usize>,
    /// Plan + engine + post-processing: what the user waits for after the debounce.
    pub latency_ms: f64,
    pub model_ms: f64,
    /// How sure the model was of the completion ([`fim::confidence`]): what a confidence bar
    /// compares (`bars` in the summary). `None` for an empty completion or a backend's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
}

/// Fills `task`'s middle with `filler` under `setting`; the completion is `finish`'s output,
/// empty when post-processing keeps nothing.
pub fn generate(
    filler: Filler<'_>,
    task: &Task,
    language: TaskLanguage,
    setting: &Setting,
) -> Result<(String, GenerationStats)> {
    let true_tokens = match filler {
        Filler::Engine(engine) => engine.tokenizer().encode(&task.canonical_solution)?.len(),
        Filler::Backend(backend) => backend.counter().count_tokens(&task.canonical_solution),
    };
    let oracle = setting.oracle_length.then_some(true_tokens.max(1));
    // Nothing is withheld: the completion is scored as the model wrote it, and the summary
    // scores it again at each bar from its confidence.
    let options = FimOptions {
        fixed_length: oracle,
        min_confidence: Some(0.0),
        ..FimOptions::new(setting.max_tokens, setting.sampler.clone())
    };
    let language = match language {
        TaskLanguage::Rust => Language::Rust,
        TaskLanguage::Python => Language::Python,
    };
    let prepare = |prompt: &str| {
        let text = format!("{prompt}{}", task.suffix);
        let source = Source {
            text: &text,
            cursor: prompt.len(),
            language,
            tree: None,
        };
        match filler {
            Filler::Engine(engine) => fim::prepare(engine, &source, &[], &options),
            Filler::Backend(backend) => fim::prepare_with(
                backend.positions(&options),
                backend.counter(),
                &source,
                &[],
                &options,
            ),
        }
    };
    // The user typing the prompt's last characters, a completion per keystroke, one cache.
    let mut cache = ContextCache::default();
    let starts: Vec<usize> = task.prompt.char_indices().map(|(i, _)| i).collect();
    let typed = setting.typed.min(starts.len());
    for &end in &starts[starts.len() - typed..] {
        run(
            filler,
            &prepare(&task.prompt[..end]),
            &task.task_id,
            &mut cache,
        )?;
    }
    let started = Instant::now();
    let prepared = prepare(&task.prompt);
    let mut run = run(filler, &prepared, &task.task_id, &mut cache)?;
    let (finished, confidence) = match (filler, run.completion.take()) {
        (Filler::Engine(engine), Some(completion)) => {
            let judged = fim::finish(engine.tokenizer(), &prepared, &[completion])
                .judged
                .remove(0);
            (judged.text.unwrap_or_default(), judged.confidence)
        }
        _ => (
            fim::finish_middles([run.raw_middle.as_str()], &prepared.plan)
                .into_iter()
                .next()
                .unwrap_or_default(),
            None,
        ),
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let plan = prepared.plan;
    Ok((
        finished,
        GenerationStats {
            raw_middle: run.raw_middle,
            canvas_tokens: plan.canvas.tokens,
            canvas_reason: plan.canvas.reason,
            steps: run.steps,
            forwards: run.forwards,
            slots_per_forward: run.slots_per_forward,
            ended_by_eos: run.ended_by_eos,
            middle_tokens: run.middle_tokens,
            true_tokens,
            slots: run.slots,
            steps_after_end: run.steps_after_end,
            latency_ms,
            model_ms: run.model_ms,
            confidence,
        },
    ))
}

/// What the run step recorded, whichever filler ran it.
struct Run {
    raw_middle: String,
    steps: usize,
    forwards: usize,
    slots_per_forward: f64,
    ended_by_eos: bool,
    middle_tokens: usize,
    slots: usize,
    steps_after_end: Option<usize>,
    model_ms: f64,
    /// The engine's completion, for [`fim::finish`]; `None` from a backend.
    completion: Option<Completion>,
}

fn run(
    filler: Filler<'_>,
    prepared: &Prepared,
    task_id: &str,
    cache: &mut ContextCache,
) -> Result<Run> {
    match filler {
        Filler::Engine(engine) => {
            let completion = fim::run(engine, prepared, cache, Controls::default())?
                .into_iter()
                .next()
                .expect("one canvas length, one completion");
            Ok(Run {
                steps: completion.steps,
                forwards: completion.forwards,
                slots_per_forward: completion.tokens_per_forward,
                ended_by_eos: completion.ended_by_eos,
                middle_tokens: completion.tokens.len(),
                slots: completion.slots,
                steps_after_end: completion.steps_after_end,
                model_ms: completion.timings.model_ms,
                raw_middle: completion.middle.clone(),
                completion: Some(completion),
            })
        }
        Filler::Backend(backend) => {
            let started = Instant::now();
            let middle = backend.fill(prepared).map_err(|message| Error::Backend {
                task_id: task_id.to_string(),
                message,
            })?;
            // An autoregressive server takes one step per token and reports none of them: the
            // step counts stay 0 rather than pretend.
            Ok(Run {
                middle_tokens: middle
                    .tokens
                    .unwrap_or_else(|| backend.counter().count_tokens(&middle.text)),
                steps: 0,
                forwards: 0,
                slots_per_forward: 0.0,
                ended_by_eos: middle.ended,
                slots: 0,
                steps_after_end: None,
                model_ms: started.elapsed().as_secs_f64() * 1e3,
                raw_middle: middle.text,
                completion: None,
            })
        }
    }
}
