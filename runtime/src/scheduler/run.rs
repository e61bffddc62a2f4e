//! One job through the suggestion pipelines (`redraft_suggest::fim` and `::edit`), as any loop
//! runs it: the document and cursor in, the answer every door formats out (stop strings
//! applied, tokens counted, a next edit's rewrite cut to the work's region, a report of how it
//! ran), under the cache policy [`super::cache_policy`] chose for it; or a FIM job's run step
//! sent to a remote backend ([`backend_job`], run by the backend workers).

use std::ops::Range;
use std::time::{Duration, Instant};

use redraft_context::edit::{EditBudget, EditSuggestion};
use redraft_context::Source;
use redraft_engine::sampler::{
    CachePolicy, CanvasView, Controls, DenoiseStep, Interrupt, SamplerConfig,
};
use redraft_engine::ContextCache;
use redraft_engine::{Completion, Engine};
use redraft_suggest::edit::{next_edit, EditInput, EditOutcome};
use redraft_suggest::fim::{self, Prepared};

use super::remote::Remote;
use super::{
    Answer, Draft, EditAnswer, EditReport, EditWork, FimAnswer, FimChoice, FimReport, FimWork,
    FinishReason, Job, JobError,
};
use crate::backend::BackendError;
use crate::metrics::Metrics;

/// The raw middle of `view` so far ([`Engine::draft`]: committed text, a mask glyph per masked
/// slot, nothing past the end); and how many slots are masked.
pub fn draft_text(engine: &Engine, view: &CanvasView) -> (String, usize) {
    let draft = engine.draft(view);
    (draft.text, draft.masked)
}

/// The engine's error as the job's: a request this model cannot run is the client's (422),
/// anything else ours.
pub fn job_error(err: redraft_engine::Error) -> JobError {
    match err {
        redraft_engine::Error::Cancelled => JobError::Cancelled,
        redraft_engine::Error::InvalidRequest(message) => JobError::Invalid(message),
        other => JobError::Failed(format!("{other:#}")),
    }
}

/// How a loop steers a job's run beyond what the job carries itself.
#[derive(Clone, Copy, Default)]
pub struct Steering<'a> {
    /// The testing delay after each step (`REDRAFT_STEP_DELAY_MS`).
    pub delay: Option<Duration>,
    /// Asked as the job's cancel flag is: `true` ends the run as cancelled
    /// ([`Controls::interrupt`]; the serial loop's job run ahead of any request, making way for
    /// one).
    pub interrupt: Option<&'a Interrupt<'a>>,
}

/// Runs `body` with the job's controls: its cancel flag, deadline and draft stream, and the
/// loop's `steering`.
fn with_controls<T>(
    engine: &Engine,
    job: &Job,
    steering: Steering<'_>,
    body: impl FnOnce(Controls<'_>) -> T,
) -> T {
    let delay = steering.delay;
    let drafts = job.drafts.as_ref();
    let mut on_step = |step: &DenoiseStep| {
        if let (Some(tx), Some(view)) = (drafts, step.canvases.first()) {
            let (text, masked) = draft_text(engine, view);
            let _ = tx.send(Draft {
                step: step.step,
                text,
                masked,
                slots: view.slots.len(),
            });
        }
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
    };
    let watched = drafts.is_some() || delay.is_some();
    body(Controls {
        cancel: Some(&job.cancel),
        interrupt: steering.interrupt,
        deadline: job.deadline,
        on_step: watched.then_some(&mut on_step as &mut dyn FnMut(&DenoiseStep)),
        stop: None,
    })
}

/// `text` cut before the first of `stop` (empty strings ignored); whether it was cut.
pub fn cut_at_stop(text: &str, stop: &[String]) -> (String, bool) {
    let first = stop
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min();
    match first {
        Some(at) => (text[..at].to_string(), true),
        None => (text.to_string(), false),
    }
}

/// The answer to a job whose run panicked (a bug), logged under `door`: the job fails with an
/// internal error and the server goes on. Every taker of jobs (the loops, the backend workers)
/// answers a panic so.
pub fn internal_error(door: &str) -> Result<Answer, JobError> {
    crate::stderr_line(format_args!(
        "{door}: a job failed unexpectedly (a bug); the server goes on"
    ));
    Err(JobError::Failed("internal error".into()))
}

/// A FIM job alone, its cache under `policy`: [`fim::prepare`], [`fim::run`], then
/// [`finish_fim`].
pub fn fim_job(
    engine: &Engine,
    cache: &mut ContextCache,
    policy: CachePolicy,
    job: &Job,
    work: &FimWork,
    steering: Steering<'_>,
    metrics: &Metrics,
) -> Result<Answer, JobError> {
    let source = work.source();
    let mut prepared = fim::prepare(engine, &source, &work.neighbours, &work.options);
    prepared.request.sampler.cache = policy;
    let started = Instant::now();
    let reused = cache.reused_positions();
    let completions = with_controls(engine, job, steering, |controls| {
        fim::run(engine, &prepared, cache, controls)
    })
    .map_err(job_error)?;
    let model_ms = started.elapsed().as_secs_f64() * 1e3;
    if let Some(first) = completions.first() {
        let slots: usize = completions.iter().map(|c| c.slots).sum();
        metrics.model_calls(first.forwards, completions.len(), slots);
        metrics.passes(first.full_passes, first.window_passes, first.realign_passes);
    }
    let mut answer = finish_fim(engine, &prepared, &completions, work, metrics);
    answer.report.model_ms = model_ms;
    answer.report.cached_positions = Some(cache.reused_positions() - reused);
    Ok(Answer::Fim(answer))
}

/// The report of a FIM job planned as `prepared` (no model passes, no time counted yet).
fn fim_report(prepared: &Prepared) -> FimReport {
    let plan = &prepared.plan;
    FimReport {
        canvas_tokens: plan.canvas.tokens,
        canvas_reason: plan.canvas.reason.clone(),
        lengths: prepared.lengths.clone(),
        neighbour_tokens: plan.neighbour_tokens,
        prefix_tokens: plan.prefix_tokens,
        suffix_tokens: plan.suffix_tokens,
        full_passes: 0,
        window_passes: 0,
        realign_passes: 0,
        cached_positions: None,
        model_ms: 0.0,
        backend: None,
        confidences: Vec::new(),
        withheld: 0,
    }
}

/// A choice from a raw `middle`: cleaned by the context layer (`None`: nothing worth showing,
/// or nothing the model was sure enough of), cut at the first stop string; `ended`: the model
/// ended it itself.
fn choice(cleaned: Option<&String>, middle: &str, ended: bool, stop: &[String]) -> FimChoice {
    let finished = cleaned.cloned().unwrap_or_default();
    let (text, stopped) = cut_at_stop(&finished, stop);
    // The context layer cutting the middle at its unit is a stop too.
    let cut = finished.len() < middle.len();
    FimChoice {
        text,
        finish_reason: if stopped || cut || ended {
            FinishReason::Stop
        } else {
            FinishReason::Length
        },
    }
}

/// The answer from a FIM job's completions (one per candidate length, in the order of
/// `prepared.lengths`): [`fim::finish`] (cleaned, the unsure withheld), stop strings, finish
/// reasons, counts.
pub fn finish_fim(
    engine: &Engine,
    prepared: &Prepared,
    completions: &[Completion],
    work: &FimWork,
    metrics: &Metrics,
) -> FimAnswer {
    if let Some(first) = completions.first() {
        let slots: usize = completions.iter().map(|c| c.slots).sum();
        metrics
            .tokens_per_forward
            .observe(slots as f64 / first.forwards.max(1) as f64);
    }
    let finished = fim::finish(engine.tokenizer(), prepared, completions);
    let mut completion_tokens = 0;
    let choices = completions
        .iter()
        .zip(&finished.judged)
        .map(|(completion, judged)| {
            let ended = completion.ended_by_eos || completion.stopped;
            // The client's stop strings cut the text before the bar weighs it: it judges what
            // the client is sent.
            let sent = judged.text.as_ref().filter(|text| {
                let (cut, stopped) = cut_at_stop(text, &work.stop);
                if !stopped {
                    return !judged.unsure;
                }
                cut.is_empty()
                    || fim::confidence(engine.tokenizer(), completion, &cut)
                        .is_none_or(|c| c >= prepared.min_confidence)
            });
            let choice = choice(sent, &completion.middle, ended, &work.stop);
            completion_tokens += engine
                .tokenizer()
                .encode(&choice.text)
                .map_or(0, |ids| ids.len());
            choice
        })
        .collect();
    let (prefix_tokens, suffix_tokens) = completions
        .first()
        .map_or((0, 0), |c| (c.prefix_tokens, c.suffix_tokens));
    let mut report = fim_report(prepared);
    if let Some(first) = completions.first() {
        report.full_passes = first.full_passes;
        report.window_passes = first.window_passes;
        report.realign_passes = first.realign_passes;
    }
    report.confidences = finished.judged.iter().map(|j| j.confidence).collect();
    report.withheld = finished.judged.iter().filter(|j| j.unsure).count();
    FimAnswer {
        choices,
        suggestions: finished.texts,
        prompt_tokens: prefix_tokens + suffix_tokens,
        completion_tokens,
        report,
    }
}

/// A FIM job whose middle a remote backend fills: the same plan and post-processing around
/// another process's model ([`Backend::complete`]); the job's cancel flag closes the request.
pub fn backend_job(remote: &Remote, job: &Job, work: &FimWork) -> Result<Answer, JobError> {
    let config = work
        .backend
        .as_ref()
        .expect("a backend job names its backend");
    let backend = remote.backend(config)?;
    let outcome = backend
        .complete(
            &work.source(),
            &work.neighbours,
            &work.options,
            Some(&job.cancel),
        )
        .map_err(|e| match e {
            BackendError::Cancelled => JobError::Cancelled,
            other => JobError::Backend(other.to_string()),
        })?;
    let plan = &outcome.prepared.plan;
    let choices = outcome
        .fill
        .middles
        .iter()
        .map(|middle| {
            let cleaned = redraft_context::finish(&middle.text, plan);
            choice(cleaned.as_ref(), &middle.text, middle.ended(), &work.stop)
        })
        .collect();
    let mut report = fim_report(&outcome.prepared);
    report.model_ms = outcome.latency_ms;
    report.backend = Some(backend.endpoint().to_string());
    Ok(Answer::Fim(FimAnswer {
        choices,
        suggestions: outcome.texts,
        prompt_tokens: outcome.fill.prompt_tokens.unwrap_or(0),
        completion_tokens: outcome.fill.completion_tokens.unwrap_or(0),
        report,
    }))
}

/// What the next-edit pipeline takes for `work`.
pub fn edit_input(work: &EditWork) -> EditInput<'_> {
    EditInput {
        source: Source {
            text: &work.document,
            cursor: work.cursor,
            language: work.language,
            tree: work.tree.as_ref(),
        },
        path: &work.path,
        history: &work.history,
    }
}

/// The next-edit budget of `work` on `engine`'s model.
pub fn edit_budget(engine: &Engine, work: &EditWork) -> EditBudget {
    work.limits
        .budget(engine.model().config().max_position_embeddings)
}

/// A next-edit job alone, its cache under `policy`, through [`next_edit`], then
/// [`finish_edit`].
pub fn edit_job(
    engine: &Engine,
    cache: &mut ContextCache,
    policy: CachePolicy,
    job: &Job,
    work: &EditWork,
    steering: Steering<'_>,
    metrics: &Metrics,
) -> Result<Answer, JobError> {
    let budget = edit_budget(engine, work);
    let sampler = SamplerConfig {
        cache: policy,
        ..work.sampler.clone()
    };
    let outcome = with_controls(engine, job, steering, |controls| {
        next_edit(engine, &edit_input(work), &budget, sampler, cache, controls)
    })
    .map_err(job_error)?;
    let c = &outcome.completion;
    metrics.model_calls(c.forwards, 1, c.slots);
    metrics.passes(c.full_passes, c.window_passes, c.realign_passes);
    Ok(Answer::Edit(finish_edit(engine, work, &outcome, metrics)))
}

/// The answer from a next edit's outcome: its edits, and its rewrite cut to the work's region
/// (the plan's when the work names none).
pub fn finish_edit(
    engine: &Engine,
    work: &EditWork,
    outcome: &EditOutcome,
    metrics: &Metrics,
) -> EditAnswer {
    let c = &outcome.completion;
    metrics
        .tokens_per_forward
        .observe(c.slots as f64 / c.forwards.max(1) as f64);
    let region = work
        .region
        .clone()
        .unwrap_or_else(|| outcome.plan.region_range.clone());
    let (new_region, changed) = rewrite_region(&work.document, &outcome.suggestion, region);
    EditAnswer {
        completion_tokens: if changed {
            engine
                .tokenizer()
                .encode(&new_region)
                .map_or(0, |ids| ids.len())
        } else {
            0
        },
        new_region,
        changed,
        edits: outcome.suggestion.edits.clone(),
        prompt_tokens: c.prefix_tokens + c.suffix_tokens,
        report: EditReport {
            region: outcome.plan.region_range.clone(),
            reason: outcome.plan.reason,
            rewrote_too_much: outcome.rewrote_too_much,
            confidence: outcome.confidence,
            unsure: outcome.unsure,
            steps: c.steps,
            latency_ms: outcome.latency_ms,
        },
    }
}

/// `text[region]` with the edits of `suggestion` that lie inside it applied (the client diffs
/// only its region; an edit reaching outside it is left out); whether any was.
pub fn rewrite_region(
    text: &str,
    suggestion: &EditSuggestion,
    region: Range<usize>,
) -> (String, bool) {
    let mut out = String::new();
    let mut at = region.start;
    let mut changed = false;
    for edit in &suggestion.edits {
        if edit.range.start < at || edit.range.end > region.end {
            continue;
        }
        out.push_str(&text[at..edit.range.start]);
        out.push_str(&edit.new_text);
        at = edit.range.end;
        changed = true;
    }
    out.push_str(&text[at..region.end]);
    (out, changed)
}

#[cfg(test)]
mod tests {
    use redraft_context::edit::TextEdit;

    use super::*;

    #[test]
    fn stop_strings_cut_at_the_first_of_any() {
        let stop = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cut_at_stop("a + b\n\nfn c()", &stop(&["\n\n", "fn"])),
            ("a + b".into(), true)
        );
        assert_eq!(
            cut_at_stop("a + b", &stop(&["", "}"])),
            ("a + b".into(), false)
        );
        assert_eq!(
            cut_at_stop("x<|endoftext|>", &stop(&["<|endoftext|>"])).0,
            "x"
        );
    }

    #[test]
    fn a_rewrite_is_cut_to_the_clients_region() {
        let text = "aaa\nbbb\nccc\n";
        let edit = |range: Range<usize>, new: &str| TextEdit {
            range,
            new_text: new.into(),
        };
        let suggestion = EditSuggestion {
            edits: vec![edit(1..2, "X"), edit(4..7, "BBB"), edit(9..10, "Y")],
            jump: None,
        };
        // Region = the second line: only the edit inside it is applied.
        assert_eq!(
            rewrite_region(text, &suggestion, 4..8),
            ("BBB\n".into(), true)
        );
        assert_eq!(
            rewrite_region(text, &suggestion, 0..text.len()),
            ("aXa\nBBB\ncYc\n".into(), true)
        );
        assert_eq!(
            rewrite_region(text, &EditSuggestion::default(), 4..8),
            ("bbb\n".into(), false)
        );
    }
}
