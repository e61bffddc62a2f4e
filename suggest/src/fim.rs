//! Fill in the middle: the document around the cursor (and snippets of other open documents)
//! becomes an engine request through the context layer's [`redraft_context::plan`], the engine
//! fills the canvas (one or several lengths, batched), and [`redraft_context::finish`] cleans
//! each middle into what the editor shows, unless the model was less sure of it than the bar
//! ([`confidence`], [`Prepared::min_confidence`]).

use std::borrow::Cow;
use std::time::Instant;

use redraft_context::{Budget, CanvasPlan, Neighbour, Plan, Source, TokenCounter, Unit};
use redraft_engine::sampler::{Controls, DenoiseStep, SamplerConfig, StopFn};
use redraft_engine::tokenizer::Tokenizer;
use redraft_engine::ContextCache;
use redraft_engine::{Completion, Engine, InfillRequest, Result, Tail};

use crate::EngineTokens;

/// How a FIM suggestion is asked for, apart from the document.
#[derive(Debug, Clone)]
pub struct FimOptions {
    /// The largest canvas the plan may choose (the editor's "max tokens").
    pub max_tokens: usize,
    /// Context tokens to use at most (prefix, suffix and snippets); `None`: what the model's
    /// positions allow.
    pub context_tokens: Option<usize>,
    /// A canvas of exactly this many tokens instead of the context layer's choice (an oracle
    /// length in the eval, or a client that insists).
    pub fixed_length: Option<usize>,
    /// Different suggestions to compute, one canvas length each, batched.
    pub candidates: usize,
    pub sampler: SamplerConfig,
    /// A suggestion the model is less sure of is not shown ([`confidence`]); `None`: the
    /// model's own bar (`redraft.json` `fim_min_confidence`, 0 without one).
    pub min_confidence: Option<f32>,
}

impl FimOptions {
    pub fn new(max_tokens: usize, sampler: SamplerConfig) -> FimOptions {
        FimOptions {
            max_tokens,
            context_tokens: None,
            fixed_length: None,
            candidates: 1,
            sampler,
            min_confidence: None,
        }
    }
}

/// A planned FIM request: what the context layer chose and the engine request made from it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub plan: Plan,
    pub budget: Budget,
    pub request: InfillRequest,
    /// Canvas lengths to fill (the plan's first), one per candidate.
    pub lengths: Vec<usize>,
    /// A suggestion whose [`confidence`] is below this is withheld: [`FimOptions::min_confidence`],
    /// else the model's own bar (0 for a model of another process, whose middles come without
    /// probabilities anyway).
    pub min_confidence: f32,
}

/// What the pipeline suggested.
#[derive(Debug, Clone)]
pub struct FimOutcome {
    pub prepared: Prepared,
    /// One per canvas length, in the order of `prepared.lengths`.
    pub completions: Vec<Completion>,
    /// What [`finish`] made of each completion, in the same order.
    pub judged: Vec<Judged>,
    /// The cleaned suggestions, best first, without duplicates; empty when nothing was worth
    /// showing or the model was sure of none.
    pub texts: Vec<String>,
    /// Plan + engine + post-processing.
    pub latency_ms: f64,
}

/// What the context may hold for a request under `options` on `engine`'s model. A caller
/// whose neighbour snippets are costly to gather may skip them when `neighbour_tokens` is 0.
pub fn budget(engine: &Engine, options: &FimOptions) -> Budget {
    let positions = engine.model().config().max_position_embeddings;
    budget_for(positions, &fit_to_model(positions, options))
}

/// The longest middle a request may ask of a model of `positions` positions: a quarter of
/// them, so the context keeps the rest whatever `max_tokens` says (an HTTP client's 2048, or
/// `--max-tokens 256` on the 2M default's 256 positions, reserved every position for a canvas
/// the model would seldom fill and left it no context).
pub fn longest_middle(positions: usize) -> usize {
    (positions / 4).max(1)
}

/// `options` for the local model of `positions` positions: `max_tokens` at most
/// [`longest_middle`] (a length fixed by the caller is kept). [`budget`] and [`prepare`] plan
/// through it, whichever door the request came from; a remote backend's plan is sized by its
/// own context setting instead.
pub fn fit_to_model(positions: usize, options: &FimOptions) -> Cow<'_, FimOptions> {
    let longest = longest_middle(positions);
    if options.max_tokens <= longest {
        return Cow::Borrowed(options);
    }
    Cow::Owned(FimOptions {
        max_tokens: longest,
        ..options.clone()
    })
}

/// [`budget`] for a model of `positions` positions (a remote one, say).
pub fn budget_for(positions: usize, options: &FimOptions) -> Budget {
    let canvas_cap = options.fixed_length.unwrap_or(options.max_tokens);
    let positions = match options.context_tokens {
        Some(context) => positions.min(context + canvas_cap + 1),
        None => positions,
    };
    Budget::for_positions(positions, canvas_cap)
}

/// Plans the request for `source` with `neighbours` as snippets of other documents.
pub fn prepare(
    engine: &Engine,
    source: &Source<'_>,
    neighbours: &[Neighbour],
    options: &FimOptions,
) -> Prepared {
    let positions = engine.model().config().max_position_embeddings;
    let mut prepared = prepare_with(
        positions,
        &EngineTokens(engine),
        source,
        neighbours,
        &fit_to_model(positions, options),
    );
    prepared.min_confidence = options
        .min_confidence
        .unwrap_or(engine.settings().fim_min_confidence);
    prepared
}

/// [`prepare`] for a model of `positions` positions whose tokens `counter` counts: the plan a
/// remote backend (another process's model) is sent.
pub fn prepare_with(
    positions: usize,
    counter: &dyn TokenCounter,
    source: &Source<'_>,
    neighbours: &[Neighbour],
    options: &FimOptions,
) -> Prepared {
    let budget = budget_for(positions, options);
    let neighbours = if budget.neighbour_tokens > 0 {
        neighbours
    } else {
        &[]
    };
    let mut plan = redraft_context::plan(source, &budget, counter, neighbours);
    if let Some(tokens) = options.fixed_length {
        plan.canvas = CanvasPlan::fixed(tokens.min(budget.max_canvas_tokens));
    }
    let request = engine_request(&plan, &budget, options.sampler.clone());
    let lengths = candidate_lengths(
        plan.canvas.tokens,
        options.candidates,
        budget.max_canvas_tokens,
    );
    Prepared {
        plan,
        budget,
        request,
        lengths,
        min_confidence: options.min_confidence.unwrap_or(0.0),
    }
}

/// The [`InfillRequest`] for a plan made under `budget`: the one place the context layer's
/// output becomes an engine request.
pub fn engine_request(plan: &Plan, budget: &Budget, sampler: SamplerConfig) -> InfillRequest {
    let (max_prefix_tokens, max_suffix_tokens) = context_caps(plan, budget);
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
        max_prefix_tokens,
        max_suffix_tokens,
        sampler,
    }
}

/// The most context tokens the engine may keep on each side: as the plan measured them (the
/// windows give one side's unused share to the other), with room for the few tokens a window
/// tokenized whole may differ by from its pieces, never below the budget's own share; the
/// budget's shares when the plan measured more than the budget in all (a cursor line too long
/// for it, cut by bytes: the caps keep the context the caller asked for, `contextTokens`).
fn context_caps(plan: &Plan, budget: &Budget) -> (usize, usize) {
    let shares = (
        budget.prefix_tokens + budget.neighbour_tokens,
        budget.suffix_tokens,
    );
    let measured = (
        plan.prefix_tokens + plan.neighbour_tokens,
        plan.suffix_tokens,
    );
    if measured.0 + measured.1 > shares.0 + shares.1 {
        return shares;
    }
    (
        shares.0.max(measured.0 + WINDOW_SLACK_TOKENS),
        shares.1.max(measured.1 + WINDOW_SLACK_TOKENS),
    )
}

/// Tokens a window's text may take beyond what the plan measured of it (its pieces tokenized
/// apart), so the engine does not cut the end of a window the plan chose.
const WINDOW_SLACK_TOKENS: usize = 16;

/// The stop rule of a plan ([`redraft_engine::sampler::StopRule`]): a middle whose committed
/// lead already decides what [`finish`] makes of it ([`redraft_context::decided`]: a line
/// completion's line is complete, or the lead's bytes stopped being UTF-8, where the middle
/// ends whatever comes after) needs no more passes.
pub fn stop_rule<'e>(
    engine: &'e Engine,
    plan: &Plan,
) -> impl Fn(&[u32]) -> bool + Send + Sync + 'e {
    let plan = plan.clone();
    move |lead: &[u32]| {
        engine.tokenizer().text(lead).is_ok_and(|text| {
            text.tail == Tail::Invalid || redraft_context::decided(&text.text, &plan)
        })
    }
}

/// Runs a prepared request on `engine` (its lengths batched into one run), each canvas ending
/// once its lead decides the finished suggestion ([`stop_rule`]) unless `controls` bring a rule
/// of their own.
pub fn run(
    engine: &Engine,
    prepared: &Prepared,
    cache: &mut ContextCache,
    controls: Controls<'_>,
) -> Result<Vec<Completion>> {
    let rule = stop_rule(engine, &prepared.plan);
    let Controls {
        cancel,
        interrupt,
        deadline,
        on_step,
        stop,
    } = controls;
    let stop: &StopFn<'_> = match stop {
        Some(stop) => stop,
        None => &rule,
    };
    let controls = Controls {
        cancel,
        interrupt,
        deadline,
        on_step: on_step.map(|f| -> &mut dyn FnMut(&DenoiseStep) { f }),
        stop: Some(stop),
    };
    if prepared.lengths.len() == 1 {
        engine
            .complete(&prepared.request, cache, controls)
            .map(|c| vec![c])
    } else {
        engine.complete_lengths(&prepared.request, &prepared.lengths, cache, controls)
    }
}

/// What [`finish`] made of one completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The middle cleaned by the context layer; `None` when nothing of it was worth showing.
    pub text: Option<String>,
    /// How sure the model was of `text` ([`confidence`]); `None` without a text.
    pub confidence: Option<f32>,
    /// The confidence is below the bar ([`Prepared::min_confidence`]): `text` is not shown.
    pub unsure: bool,
}

impl Judged {
    /// The text to show, if any.
    pub fn shown(&self) -> Option<&str> {
        self.text.as_deref().filter(|_| !self.unsure)
    }
}

/// What [`finish`] made of a run's completions.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// One per completion, in order.
    pub judged: Vec<Judged>,
    /// The texts shown, best first, without duplicates.
    pub texts: Vec<String>,
}

/// Cleans each completion's middle with the context layer and withholds the ones the model
/// was less sure of than `prepared`'s bar; duplicates are dropped, the order kept.
pub fn finish(tokenizer: &Tokenizer, prepared: &Prepared, completions: &[Completion]) -> Finished {
    let judged: Vec<Judged> = completions
        .iter()
        .map(|completion| {
            let text = redraft_context::finish(&completion.middle, &prepared.plan);
            let confidence = text
                .as_deref()
                .and_then(|text| confidence(tokenizer, completion, text));
            Judged {
                unsure: confidence.is_some_and(|c| c < prepared.min_confidence),
                text,
                confidence,
            }
        })
        .collect();
    let texts = distinct(judged.iter().filter_map(|j| j.shown().map(str::to_string)));
    Finished { judged, texts }
}

/// [`finish`] for middles another process's model wrote (a remote backend's): cleaned, never
/// withheld (they come without probabilities).
pub fn finish_middles<'a>(middles: impl IntoIterator<Item = &'a str>, plan: &Plan) -> Vec<String> {
    distinct(
        middles
            .into_iter()
            .filter_map(|middle| redraft_context::finish(middle, plan)),
    )
}

fn distinct(texts: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for text in texts {
        if !kept.contains(&text) {
            kept.push(text);
        }
    }
    kept
}

/// How sure the model was of `shown`, the text [`redraft_context::finish`] made of
/// `completion`'s middle: the lowest probability, when it was committed, among the tokens that
/// spell it. Those are the middle's tokens that start before the end of what `shown` keeps of
/// the middle (their common start, carriage returns aside: finish may write a document's line
/// endings); what finish cut off after it does not count. `None` when the completion came
/// without a probability per token.
pub fn confidence(tokenizer: &Tokenizer, completion: &Completion, shown: &str) -> Option<f32> {
    let probabilities = &completion.probabilities;
    if probabilities.is_empty() || probabilities.len() != completion.tokens.len() {
        return None;
    }
    let kept = common_start(&completion.middle, shown);
    let mut lowest = f32::INFINITY;
    let mut start = 0;
    for (i, &p) in probabilities.iter().enumerate() {
        // A shown text that shares no start with the middle counts every token.
        if kept > 0 && start >= kept {
            break;
        }
        lowest = lowest.min(p);
        start = tokenizer
            .text(&completion.tokens[..=i])
            .map_or(usize::MAX, |t| t.text.len());
    }
    lowest.is_finite().then_some(lowest)
}

/// Bytes of `middle` that `shown` starts with, `\r` skipped on both sides.
fn common_start(middle: &str, shown: &str) -> usize {
    let mut shown = shown.chars().filter(|&c| c != '\r');
    let mut end = 0;
    for (at, c) in middle.char_indices().filter(|&(_, c)| c != '\r') {
        if shown.next() != Some(c) {
            break;
        }
        end = at + c.len_utf8();
    }
    end
}

/// The whole pipeline for one document: [`prepare`], [`run`], [`finish`].
pub fn complete(
    engine: &Engine,
    source: &Source<'_>,
    neighbours: &[Neighbour],
    options: &FimOptions,
    cache: &mut ContextCache,
    controls: Controls<'_>,
) -> Result<FimOutcome> {
    let started = Instant::now();
    let prepared = prepare(engine, source, neighbours, options);
    let completions = run(engine, &prepared, cache, controls)?;
    let Finished { judged, texts } = finish(engine.tokenizer(), &prepared, &completions);
    Ok(FimOutcome {
        prepared,
        completions,
        judged,
        texts,
        latency_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Canvas lengths for `candidates` suggestions: the planned length first, then shorter and
/// longer ones (length is what decides a masked-diffusion middle most), capped and distinct.
pub fn candidate_lengths(planned: usize, candidates: usize, cap: usize) -> Vec<usize> {
    const FACTORS: [(usize, usize); 8] = [
        (1, 1),
        (1, 2),
        (2, 1),
        (3, 4),
        (3, 2),
        (1, 4),
        (3, 1),
        (5, 4),
    ];
    let mut lengths = Vec::with_capacity(candidates);
    for (num, den) in FACTORS {
        if lengths.len() >= candidates.max(1) {
            break;
        }
        let length = (planned * num / den).clamp(1, cap.max(1));
        if !lengths.contains(&length) {
            lengths.push(length);
        }
    }
    lengths
}

#[cfg(test)]
mod tests {
    use super::candidate_lengths;

    #[test]
    fn candidate_lengths_start_with_the_plan_and_stay_distinct_and_capped() {
        assert_eq!(candidate_lengths(16, 1, 32), vec![16]);
        assert_eq!(candidate_lengths(16, 3, 32), vec![16, 8, 32]);
        assert_eq!(candidate_lengths(16, 3, 20), vec![16, 8, 20]);
        assert_eq!(candidate_lengths(1, 3, 32), vec![1, 2, 3]);
        assert_eq!(candidate_lengths(0, 2, 32), vec![1]);
    }
}
