//! The next-edit pipeline, the one path from a document to a suggested edit for every caller
//! (`redraft eval --next-edit`, `redraft complete --next-edit`, the language server, `redraft
//! serve`): [`prepare`] (the context layer's [`plan_edit`] picks the editable region and what
//! is shown around it), the engine rewrites the region ([`Engine::next_edit`], or a batch
//! through [`Prepared::request`]), [`finish`] ([`suggestion_from_region`] turns the rewrite into
//! minimal edits and a jump target, the small-edit guard and the confidence bar apply).

use std::time::Instant;

use redraft_context::edit::{
    plan_edit, suggestion_from_region, EditBudget, EditPlan, EditStyle, EditSuggestion, HistoryEdit,
};
use redraft_context::{Source, TokenCounter};
use redraft_engine::edit::EditFormat;
use redraft_engine::sampler::{Controls, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::{Completion, EditRequest, Engine, Result};
use similar::{capture_diff_slices, Algorithm, DiffTag};

use crate::EngineTokens;

/// The draft bar next edits decode with unless told otherwise: a token the model copies from
/// the old region is committed once it is this sure of it (see `SamplerConfig::draft_tau`).
pub const DRAFT_TAU: f32 = 0.5;

/// What a next edit is asked about: the document (with the cursor), its name, and the recent
/// edits, oldest first.
#[derive(Debug, Clone, Copy)]
pub struct EditInput<'a> {
    pub source: Source<'a>,
    pub path: &'a str,
    pub history: &'a [HistoryEdit],
}

/// A suggested next edit with how it was made.
#[derive(Debug, Clone)]
pub struct EditOutcome {
    pub plan: EditPlan,
    /// The engine's rewrite of `plan.region`.
    pub new_region: String,
    /// Empty: no edit.
    pub suggestion: EditSuggestion,
    /// The rewrite changed more of the region than the budget allows
    /// (`EditBudget::max_changed_fraction`), or ran on past the longest rewrite that could
    /// pass that (the request's `max_tokens`), so `suggestion` is empty.
    pub rewrote_too_much: bool,
    /// How sure the model was of the rewrite's change ([`edit_confidence`]); `None` for a
    /// rewrite that changes no token, or a completion that carries no probabilities.
    pub confidence: Option<f32>,
    /// The confidence was below the bar ([`Prepared::min_confidence`]), so `suggestion` is
    /// empty.
    pub unsure: bool,
    pub completion: Completion,
    /// Plan + engine + extraction.
    pub latency_ms: f64,
}

/// The engine request for a plan: the one place a next-edit plan becomes an [`EditRequest`].
pub fn edit_request(plan: &EditPlan, sampler: SamplerConfig) -> EditRequest {
    EditRequest {
        history: plan.history.clone(),
        path: plan.path.clone(),
        before: plan.before.clone(),
        region: plan.region.clone(),
        original: plan.original.clone(),
        cursor: plan.cursor_in_region,
        after: plan.after.clone(),
        max_tokens: None,
        sampler,
    }
}

/// A planned next edit: the region and context the context layer chose, and the engine
/// request made from them.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub plan: EditPlan,
    pub request: EditRequest,
    /// The old region's tokens as the canvas's draft holds them ([`Engine::edit_draft`]): what
    /// the rewrite's changed tokens are found against.
    pub old_tokens: Vec<u32>,
    /// A suggestion the model is less sure of is withheld: `EditBudget::min_confidence`, else
    /// the model's own bar (`redraft.json` `edit_min_confidence`).
    pub min_confidence: f32,
}

/// Plans the next edit for `input` under `budget`.
pub fn prepare(
    engine: &Engine,
    input: &EditInput<'_>,
    budget: &EditBudget,
    sampler: SamplerConfig,
) -> Prepared {
    let style = match engine.edit_format() {
        Ok(EditFormat::Sweep { .. }) => EditStyle::Sweep,
        // A model that cannot make next edits says so when the request runs.
        Ok(EditFormat::Markers(_)) | Err(_) => EditStyle::Redraft,
    };
    let plan = plan_edit(
        &input.source,
        input.path,
        input.history,
        budget,
        style,
        &EngineTokens(engine),
    );
    let mut request = edit_request(&plan, sampler);
    let positions = engine.model().config().max_position_embeddings;
    let region_tokens = EngineTokens(engine).count_within(&plan.region, positions);
    request.max_tokens = longest_useful(region_tokens, budget);
    // A model that cannot make next edits, a region the tokenizer refuses or one longer than
    // the model's positions (not encoded again: a megabyte line is costly) fails the request in
    // the engine, which says why.
    let old_tokens = match region_tokens <= positions {
        true => engine.edit_draft(&plan.region).unwrap_or_default(),
        false => Vec::new(),
    };
    let min_confidence = budget
        .min_confidence
        .unwrap_or(engine.settings().edit_min_confidence);
    Prepared {
        plan,
        request,
        old_tokens,
        min_confidence,
    }
}

/// How sure the model was of the change a rewrite makes: the lowest probability among the new
/// tokens that are not the old region's (what a minimal diff of the two token sequences
/// inserts), each as it was when committed ([`Completion::probabilities`]). A deletion is
/// vouched for by the tokens on either side of it (and a rewrite that deletes everything by
/// nothing: 0). `None` when no token changed or the completion carries no probabilities (one
/// made elsewhere than by the engine).
pub fn edit_confidence(old: &[u32], new: &[u32], probabilities: &[f32]) -> Option<f32> {
    if probabilities.len() != new.len() || old == new {
        return None;
    }
    let mut vouching = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, old, new) {
        let (tag, _, written) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {}
            DiffTag::Insert | DiffTag::Replace => vouching.extend(written),
            DiffTag::Delete => {
                vouching.extend(written.start.checked_sub(1));
                vouching.extend((written.start < new.len()).then_some(written.start));
            }
        }
    }
    Some(
        vouching
            .into_iter()
            .map(|j| probabilities[j])
            .reduce(f32::min)
            .unwrap_or(0.0),
    )
}

/// The longest rewrite the small-edit guard could let through: one that inserts more than
/// `max_changed_fraction` of the region is refused whatever it says, so the canvas need not
/// grow past the region's tokens plus that share (and a model that writes on past its window,
/// as an autoregressive one not trained to end it does, stops there). `None` without a guard
/// (a share of 1 or more): the engine's own limit.
fn longest_useful(region_tokens: usize, budget: &EditBudget) -> Option<usize> {
    if budget.max_changed_fraction >= 1.0 {
        return None;
    }
    Some((region_tokens as f64 * (1.0 + budget.max_changed_fraction.max(0.0))).ceil() as usize + 8)
}

/// The suggestion in the engine's rewrite of the prepared region (`completion`, from
/// [`Engine::next_edit`] or a batch): the minimal edits and jump, or no edit when the rewrite
/// changed more of the region than `budget` allows. `started`: when the request began, for
/// the latency.
pub fn finish(
    input: &EditInput<'_>,
    prepared: Prepared,
    completion: Completion,
    budget: &EditBudget,
    started: Instant,
) -> EditOutcome {
    // A rewrite that filled the longest canvas the guard allows without ending ran past what
    // the guard lets through, and one whose bytes stopped being UTF-8 ends where they did: what
    // it wrote is cut off, not a rewrite (the rest of the region would read as deleted).
    let cut_off = completion.invalid_text
        || !completion.ended_by_eos
            && prepared
                .request
                .max_tokens
                .is_some_and(|longest| completion.slots >= longest);
    let plan = prepared.plan;
    // A region at the end of a text without a final newline is shown to a Sweep model as a
    // block, which ends in one; the rewrite's is not an edit.
    let new_region = match completion.middle.strip_suffix('\n') {
        Some(stripped) if !plan.region.ends_with('\n') => stripped,
        _ => completion.middle.as_str(),
    };
    let mut suggestion =
        suggestion_from_region(input.source.text, &plan, new_region, input.source.cursor);
    let rewrote_too_much = cut_off
        || suggestion.changed_fraction(plan.region_range.len()) > budget.max_changed_fraction;
    let confidence = edit_confidence(
        &prepared.old_tokens,
        &completion.tokens,
        &completion.probabilities,
    );
    let unsure = !suggestion.is_empty()
        && !rewrote_too_much
        && confidence.is_some_and(|c| c < prepared.min_confidence);
    if rewrote_too_much || unsure {
        suggestion = EditSuggestion::default();
    }
    EditOutcome {
        new_region: new_region.to_string(),
        plan,
        suggestion,
        rewrote_too_much,
        confidence,
        unsure,
        completion,
        latency_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}

/// Suggests the next edit for `input`: [`prepare`], [`Engine::next_edit`], [`finish`].
pub fn next_edit(
    engine: &Engine,
    input: &EditInput<'_>,
    budget: &EditBudget,
    sampler: SamplerConfig,
    cache: &mut ContextCache,
    controls: Controls<'_>,
) -> Result<EditOutcome> {
    let started = Instant::now();
    let prepared = prepare(engine, input, budget, sampler);
    let completion = engine.next_edit(&prepared.request, cache, controls)?;
    Ok(finish(input, prepared, completion, budget, started))
}

/// `text` with `suggestion`'s edits applied (they are in document order and do not overlap).
pub fn apply(text: &str, suggestion: &EditSuggestion) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for edit in &suggestion.edits {
        out.push_str(&text[at..edit.range.start]);
        out.push_str(&edit.new_text);
        at = edit.range.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::edit_confidence;

    /// Probabilities of the new tokens, each its index over ten plus 0.05 (so which one was
    /// taken shows).
    fn sure(n: usize) -> Vec<f32> {
        (0..n).map(|j| j as f32 / 10.0 + 0.05).collect()
    }

    fn close(got: Option<f32>, want: f32) -> bool {
        got.is_some_and(|g| (g - want).abs() < 1e-6)
    }

    #[test]
    fn a_rewrite_is_as_sure_as_its_least_probable_changed_token() {
        let old = [1, 2, 3, 4, 5];
        // 3 replaced by 9 (new index 2).
        assert!(close(
            edit_confidence(&old, &[1, 2, 9, 4, 5], &sure(5)),
            0.25
        ));
        // 7, 8 inserted after 2 (new indices 2 and 3): the lower.
        assert!(close(
            edit_confidence(&old, &[1, 2, 7, 8, 3, 4, 5], &sure(7)),
            0.25
        ));
        // Two changes far apart: the least sure of them.
        let mut probabilities = sure(5);
        probabilities[4] = 0.01;
        assert!(close(
            edit_confidence(&old, &[9, 2, 3, 4, 8], &probabilities),
            0.01
        ));
    }

    #[test]
    fn a_deletion_is_vouched_for_by_the_tokens_around_it() {
        let old = [1, 2, 3, 4, 5];
        // 3 deleted: new tokens 2 (index 1) and 4 (index 2) around it.
        assert!(close(edit_confidence(&old, &[1, 2, 4, 5], &sure(4)), 0.15));
        // The end deleted: only the token before it.
        assert!(close(edit_confidence(&old, &[1, 2, 3], &sure(3)), 0.25));
        // The start deleted: only the token after it.
        assert!(close(edit_confidence(&old, &[3, 4, 5], &sure(3)), 0.05));
        // Everything deleted: nothing vouches for it.
        assert_eq!(edit_confidence(&old, &[], &[]), Some(0.0));
    }

    #[test]
    fn no_change_or_no_probabilities_is_no_confidence() {
        let old = [1, 2, 3];
        assert_eq!(edit_confidence(&old, &old, &sure(3)), None);
        assert_eq!(edit_confidence(&[], &[], &[]), None);
        // A completion that carries no probabilities.
        assert_eq!(edit_confidence(&old, &[1, 9, 3], &[]), None);
    }
}
