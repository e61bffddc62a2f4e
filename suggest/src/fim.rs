//! Fill in the middle: the document around the cursor (and snippets of other open documents)
//! becomes an engine request through the context layer's [`redraft_context::plan`], the engine
//! fills the canvas (one or several lengths, batched), and [`redraft_context::finish`] cleans
//! each middle into what the editor shows.

use std::time::Instant;

use redraft_context::{Budget, CanvasPlan, Neighbour, Plan, Source, TokenCounter, Unit};
use redraft_engine::sampler::{Controls, DenoiseStep, SamplerConfig, StopFn};
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
}

impl FimOptions {
    pub fn new(max_tokens: usize, sampler: SamplerConfig) -> FimOptions {
        FimOptions {
            max_tokens,
            context_tokens: None,
            fixed_length: None,
            candidates: 1,
            sampler,
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
}

/// What the pipeline suggested.
#[derive(Debug, Clone)]
pub struct FimOutcome {
    pub prepared: Prepared,
    /// One per canvas length, in the order of `prepared.lengths`.
    pub completions: Vec<Completion>,
    /// The cleaned suggestions, best first, without duplicates; empty when nothing was worth
    /// showing.
    pub texts: Vec<String>,
    /// Plan + engine + post-processing.
    pub latency_ms: f64,
}

/// What the context may hold for a request under `options` on `engine`'s model. A caller
/// whose neighbour snippets are costly to gather may skip them when `neighbour_tokens` is 0.
pub fn budget(engine: &Engine, options: &FimOptions) -> Budget {
    budget_for(engine.model().config().max_position_embeddings, options)
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
    prepare_with(
        engine.model().config().max_position_embeddings,
        &EngineTokens(engine),
        source,
        neighbours,
        options,
    )
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
    }
}

/// The [`InfillRequest`] for a plan made under `budget`: the one place the context layer's
/// output becomes an engine request.
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

/// Cleans each middle with the context layer, drops duplicates, keeps the order.
pub fn finish<'a>(middles: impl IntoIterator<Item = &'a str>, plan: &Plan) -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    for middle in middles {
        if let Some(text) = redraft_context::finish(middle, plan) {
            if !texts.contains(&text) {
                texts.push(text);
            }
        }
    }
    texts
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
    let texts = finish(
        completions.iter().map(|c| c.middle.as_str()),
        &prepared.plan,
    );
    Ok(FimOutcome {
        prepared,
        completions,
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
