//! Speculation for causal canvases: after a pass, guess the slots after the committed lead
//! from the draft or the context (where the text repeats), verify the guesses with the next pass
//! and keep the run the model agrees with: a run of copies commits in one pass.

use rand::rngs::StdRng;

use super::*;

impl<'a> Sampler<'a> {
    /// Guessing, for causal greedy decoding (n-gram speculative decoding): after the committed
    /// lead, the canvas shows the tokens its source says come next, up to [`SPECULATED`] (fewer
    /// after a pass that confirmed few: `Slots::guess_limit`), so one pass scores them all and
    /// [`Self::verify`] commits every guess the model would have written itself. The source is
    /// the canvas's draft (a next edit's old region, with drafts on: `draft_tau`), followed
    /// through the lead by [`draft_position`], so a rewrite that is mostly copies takes a pass
    /// per change, not per token; without a draft, the request's own context
    /// (`guess_context`, [`context_position`]). Each row sees only the guesses before it, so a
    /// confirmed guess's token is the one a pass per token would commit: greedy results do not
    /// change, only the number of passes.
    pub(super) fn speculate(&self, state: &mut Slots, seq: &mut [u32], config: &SamplerConfig) {
        state.guesses.clear();
        let Some(source) = self.guess_source(state, config) else {
            return;
        };
        let Some(first) = state.first_masked() else {
            return;
        };
        if state.values[first..].iter().any(Option::is_some) {
            return;
        }
        // Both lookups read only the lead's length and its last three tokens.
        let mut last = [0u32; 3];
        let n = first.min(3);
        for (token, value) in last.iter_mut().zip(&state.values[first - n..first]) {
            *token = value.expect("causal decoding commits left to right");
        }
        let tail = &last[..n];
        let (tokens, at) = match source {
            GuessSource::Draft => {
                let (at, shift) = draft_position(first, tail, &state.draft, state.draft_shift);
                state.draft_shift = shift;
                (&state.draft, at)
            }
            GuessSource::Context => match context_position(tail, &state.context) {
                Some(at) => (&state.context, at),
                None => return,
            },
        };
        let room = state.values.len() - first;
        state.guesses = tokens[at..]
            .iter()
            .copied()
            .take(state.guess_limit.min(room.saturating_sub(1)))
            .collect();
        for (i, &guess) in state.guesses.iter().enumerate() {
            seq[state.start + first + i] = guess;
        }
    }

    /// Where `state`'s guesses come from, if it is a causal canvas decoded greedily that
    /// guesses (see [`Self::speculate`]): its draft when drafts are on, else its context.
    pub(super) fn guess_source(
        &self,
        state: &Slots,
        config: &SamplerConfig,
    ) -> Option<GuessSource> {
        if self.block() != Some(1) || config.temperature > 0.0 {
            return None;
        }
        if !state.draft.is_empty() && config.draft_tau.is_some() {
            Some(GuessSource::Draft)
        } else if !state.context.is_empty() && config.guess_context {
            Some(GuessSource::Context)
        } else {
            None
        }
    }

    /// Commits, after the step's own commit, each guessed slot whose row saw only confirmed
    /// guesses and the committed lead: while the token committed at a slot equals its guess,
    /// the next slot's row is what a pass after that commit would give, so its choice is
    /// committed too. Returns the first slot whose row the pass did not compute with its final
    /// token (the slots before it are settled in the cache).
    pub(super) fn verify(
        &self,
        state: &mut Slots,
        committed: &mut Vec<usize>,
        rows: Rows<'_>,
        config: &SamplerConfig,
        rng: &mut StdRng,
    ) -> usize {
        let guesses = std::mem::take(&mut state.guesses);
        let Some(&first) = committed.first().filter(|_| !guesses.is_empty()) else {
            return 0;
        };
        let mut slot = first;
        let mut confirmed = 0;
        for (i, &guess) in guesses.iter().enumerate() {
            let next = first + i + 1;
            if state.values[slot] != Some(guess) {
                break;
            }
            confirmed += 1;
            if self.is_end(guess) || next >= state.values.len() || state.values[next].is_some() {
                break;
            }
            let row = rows.at(logit_row(self.settings.logit_shift, state.start + next));
            let choice = self.choose(row, next, state.end_allowed(next), config, false, rng);
            committed.extend(self.commit(state, next, choice.token, choice.probability));
            slot = next;
        }
        state.guess_limit = if confirmed == guesses.len() {
            2 * state.guess_limit
        } else {
            2 * confirmed
        }
        .clamp(2, SPECULATED);
        // Slot `slot`'s row was computed with its guess (or a mask); it and what follows are
        // recomputed by the next pass.
        slot
    }
}

/// Guesses a causal canvas shows a pass at most (see `Sampler::speculate`). On the 2-core
/// CPU a pass over 17 rows of the 0.5B Q4_K_M costs about 2.9 times one over a single row
/// (docs/reports/real-weights/next-edit.md), so guesses pay when the model copies and the limit
/// shrinks while it does not; a run of copies longer than this takes another pass.
pub const SPECULATED: usize = 16;

/// Guesses a causal canvas without a draft starts from (see [`SamplerConfig::guess_context`]):
/// its context repeats only here and there, and a pass over few rows costs about one over one.
pub const CONTEXT_GUESSES: usize = 4;

/// Where in `context` the slot after the lead may continue from: after the last occurrence of
/// the lead's last three or two tokens (`tail`, its last three or fewer; the occurrence nearest
/// the canvas: the context is the prefix and then the suffix), or `None`. A single token is too
/// common a match to guess from.
pub(super) fn context_position(tail: &[u32], context: &[u32]) -> Option<usize> {
    (2..=tail.len()).rev().find_map(|n| {
        let tail = &tail[tail.len() - n..];
        context
            .windows(n)
            .rposition(|w| w == tail)
            .map(|i| i + n)
            .filter(|&end| end < context.len())
    })
}

/// Where in `draft` the slot after a lead of `lead` tokens is expected to copy from, and the
/// shift between slots and draft positions that says so (`shift`: the one found for an earlier
/// lead). The lead's last three, two or one tokens (`tail`) are looked up in the draft, the occurrence nearest
/// where the shift expects it winning, so copying goes on, and an insertion or deletion
/// resynchronises once the lead copies again; with none (a token the draft does not have),
/// the shift stays: the draft is assumed to go on after a substitution.
pub(super) fn draft_position(
    lead: usize,
    tail: &[u32],
    draft: &[u32],
    shift: isize,
) -> (usize, isize) {
    let expected = (lead as isize + shift).clamp(0, draft.len() as isize) as usize;
    for n in (1..=tail.len()).rev() {
        let tail = &tail[tail.len() - n..];
        let nearest = draft
            .windows(n)
            .enumerate()
            .filter(|(_, w)| *w == tail)
            .map(|(i, _)| i + n)
            .min_by_key(|&end| end.abs_diff(expected));
        if let Some(end) = nearest {
            return (end, end as isize - lead as isize);
        }
    }
    (expected, shift)
}

/// What a guessing canvas guesses from (see [`Sampler::speculate`]).
#[derive(Clone, Copy)]
pub(super) enum GuessSource {
    Draft,
    Context,
}

/// The matched index pairs of a longest common subsequence of `a` and `b`, in order (ties go to
/// the earliest match in `b`). Quadratic: canvases and drafts are a few hundred tokens.
pub(super) fn lcs_pairs(a: &[u32], b: &[u32]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    // lengths[i][j]: LCS of a[i..] and b[j..].
    let mut lengths = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lengths[at(i, j)] = if a[i] == b[j] {
                lengths[at(i + 1, j + 1)] + 1
            } else {
                lengths[at(i + 1, j)].max(lengths[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pairs = Vec::new();
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if lengths[at(i + 1, j)] >= lengths[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}
