//! The generation driver: each task's prompt and suffix become a document with the cursor
//! between them, and the request is built exactly as the language server builds one: the
//! context layer's [`redraft_context::plan`] picks the windows and the canvas length, the
//! engine fills the canvas, [`redraft_context::finish`] cleans the middle. So the eval scores
//! what an editor user would have been shown. [`edit`] is the same for next edits.

pub mod edit;

use std::time::Instant;

use redraft_context::{
    Budget, ByteEstimate, CanvasPlan, Language, Plan, Source, TokenCounter, Unit,
};
use redraft_engine::qwen2::KvCache;
use redraft_engine::sampler::{Controls, SamplerConfig};
use redraft_engine::{Engine, InfillRequest};
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

/// Token counts from the model's own tokenizer, so the windows fit what the engine will see.
pub struct EngineTokens<'a>(pub &'a Engine);

impl TokenCounter for EngineTokens<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0
            .tokenizer()
            .encode(text)
            .map_or_else(|_| ByteEstimate.count_tokens(text), |ids| ids.len())
    }
}

/// The engine request for `source`: the context layer's plan, turned into an
/// [`InfillRequest`] the way the language server's worker does (budget from the model's
/// positions and the largest canvas allowed).
pub fn request(
    engine: &Engine,
    source: &Source<'_>,
    max_tokens: usize,
    fixed_length: Option<usize>,
    sampler: SamplerConfig,
) -> (Plan, InfillRequest) {
    let positions = engine.model().config().max_position_embeddings;
    let budget = Budget::for_positions(positions, fixed_length.unwrap_or(max_tokens));
    let mut plan = redraft_context::plan(source, &budget, &EngineTokens(engine), &[]);
    if let Some(tokens) = fixed_length {
        plan.canvas = CanvasPlan::fixed(tokens.min(budget.max_canvas_tokens));
    }
    let request = engine_request(&plan, &budget, sampler);
    (plan, request)
}

/// The [`InfillRequest`] for a plan made under `budget`: the one place (for the language
/// server and the eval alike) where the context layer's output becomes an engine request.
pub fn engine_request(plan: &Plan, budget: &Budget, sampler: SamplerConfig) -> InfillRequest {
    InfillRequest {
        prefix: plan.prefix.clone(),
        suffix: plan.suffix.clone(),
        canvas_tokens: plan.canvas.tokens,
        // The plan's length is a prior the model may outgrow up to the largest canvas allowed;
        // a length fixed by the caller (the oracle) is kept.
        max_tokens: match plan.canvas.unit {
            Unit::Fixed => plan.canvas.tokens,
            _ => budget.max_canvas_tokens.max(plan.canvas.tokens),
        },
        max_prefix_tokens: budget.prefix_tokens + budget.neighbour_tokens,
        max_suffix_tokens: budget.suffix_tokens,
        sampler,
    }
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
    let (plan, request) = request(
        engine,
        &source,
        setting.max_tokens,
        oracle,
        setting.sampler.clone(),
    );
    let completion = engine.complete(&request, &mut KvCache::default(), Controls::default())?;
    let finished = redraft_context::finish(&completion.middle, &plan).unwrap_or_default();
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
