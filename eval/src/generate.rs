//! The generation driver: each task's prompt and suffix become a document with the cursor
//! between them, and the request is built exactly as the language server builds one: the
//! context layer's [`redraft_context::plan`] picks the windows and the canvas length, the
//! engine fills the canvas, [`redraft_context::finish`] cleans the middle. So the eval scores
//! what an editor user would have been shown. The pipeline itself is `redraft_suggest::fim`,
//! the one the language server and `redraft serve` call.

use std::time::Instant;

use redraft_context::{Language, Source};
use redraft_engine::qwen2::KvCache;
use redraft_engine::sampler::{Controls, SamplerConfig};
use redraft_engine::Engine;
use redraft_suggest::fim::{self, FimOptions};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::task::{Task, TaskLanguage};

/// One decoding setting: what a sweep varies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    /// How the user wrote it (`--effort low`), for tables and directory names.
    pub name: String,
    pub sampler: SamplerConfig,
    /// The canvas is the true middle's length in tokens instead of the context layer's choice.
    pub oracle_length: bool,
    /// The largest canvas the plan may choose (the editor's "max tokens"; the LSP's default is
    /// 32).
    pub max_tokens: usize,
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
    pub tokens_per_forward: f64,
    pub ended_by_eos: bool,
    /// The engine's length choice: tokens of the raw middle (before post-processing).
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
}

/// Fills `task`'s middle with `engine` under `setting`; the completion is `finish`'s output,
/// empty when post-processing keeps nothing.
pub fn generate(
    engine: &Engine,
    task: &Task,
    language: TaskLanguage,
    setting: &Setting,
) -> Result<(String, GenerationStats)> {
    let true_tokens = engine.tokenizer().encode(&task.canonical_solution)?.len();
    let oracle = setting.oracle_length.then_some(true_tokens.max(1));
    let started = Instant::now();
    let text = format!("{}{}", task.prompt, task.suffix);
    let source = Source {
        text: &text,
        cursor: task.prompt.len(),
        language: match language {
            TaskLanguage::Rust => Language::Rust,
            TaskLanguage::Python => Language::Python,
        },
        tree: None,
    };
    let options = FimOptions {
        fixed_length: oracle,
        ..FimOptions::new(setting.max_tokens, setting.sampler.clone())
    };
    let outcome = fim::complete(
        engine,
        &source,
        &[],
        &options,
        &mut KvCache::default(),
        Controls::default(),
    )?;
    let plan = outcome.prepared.plan;
    let finished = outcome.texts.into_iter().next().unwrap_or_default();
    let completion = outcome
        .completions
        .into_iter()
        .next()
        .expect("one canvas length, one completion");
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((
        finished,
        GenerationStats {
            raw_middle: completion.middle,
            canvas_tokens: plan.canvas.tokens,
            canvas_reason: plan.canvas.reason,
            steps: completion.steps,
            forwards: completion.forwards,
            tokens_per_forward: completion.tokens_per_forward,
            ended_by_eos: completion.ended_by_eos,
            middle_tokens: completion.tokens.len(),
            true_tokens,
            slots: completion.slots,
            steps_after_end: completion.steps_after_end,
            latency_ms,
            model_ms: completion.timings.model_ms,
        },
    ))
}
