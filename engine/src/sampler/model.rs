//! The model as the sampler sees it: a [`Denoiser`] (token ids in, logits out, with a cache it
//! owns), the [`Pass`] it is asked for, and which row scores a slot ([`logit_row`]).

use std::ops::Range;

use crate::error::Result;

use super::*;

/// Which positions a forward pass recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Every position; when `store` is set, the cache is refilled from this pass.
    Full { store: bool },
    /// Only the window; every other position comes from the cache of the last stored pass.
    Window,
    /// A stored pass over tokens that differ from the cached ones by edits: the cache is
    /// realigned with them (runs of unchanged tokens keep their keys/values, moved ones with
    /// their keys re-rotated to the new positions) and only `radius` tokens on each side of
    /// each change and the window are recomputed. Approximate wherever a kept position attends
    /// to a changed one (see [`Realign`]).
    Realign { radius: usize },
}

/// A model as the sampler sees it.
pub trait Denoiser {
    /// Whatever the model keeps between passes (keys/values); owned by the caller.
    type Cache: Default;

    fn vocab_size(&self) -> usize;

    /// Logits for positions `window` of every sequence, row-major `[batch][window][vocab]`.
    /// Row j is the model's output at position j (no shift applied).
    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut Self::Cache,
        pass: Pass,
    ) -> Result<Vec<f32>>;

    /// The logits of several independent calls (each its own sequences, window, cache and
    /// pass), in order: what [`Denoiser::logits`] gives each alone. A model that can serve them
    /// in one pass (sharing its weights' trip through memory) says so here; the default makes
    /// the calls one after the other. An error fails them all.
    fn logits_many(&self, calls: &mut [ModelCall<'_, Self::Cache>]) -> Result<Vec<Vec<f32>>> {
        calls
            .iter_mut()
            .map(|call| self.logits(call.tokens, call.window.clone(), call.cache, call.pass))
            .collect()
    }

    /// [`Denoiser::logits_many`] unless `stop` says stop: then `None`, and the calls' caches
    /// may be half written (the caller empties them). A model that can give up part way asks
    /// `stop` while it computes (the engine: before each layer and after its attention), so a
    /// caller whose requests were all cancelled waits a fraction of a pass; the default asks
    /// once, before the calls.
    fn logits_many_unless(
        &self,
        calls: &mut [ModelCall<'_, Self::Cache>],
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Vec<f32>>>> {
        if stop() {
            return Ok(None);
        }
        self.logits_many(calls).map(Some)
    }

    /// Whether `cache` holds a stored pass that a window pass over `tokens` may reuse.
    fn cache_covers(&self, cache: &Self::Cache, tokens: &[Vec<u32>], window: &Range<usize>)
        -> bool;

    /// Whether a [`Pass::Realign`] over `tokens` may start from `cache` under `reuse`: the cache
    /// holds a pass over tokens these differ from by edits, it has taken fewer than
    /// `reuse.refresh_after` approximate passes since its last exact one, and realigning it
    /// keeps positions an exact stored pass could not. A model that cannot realign its cache
    /// says no (the default), and the sampler makes a stored full pass instead.
    fn cache_realigns(
        &self,
        _cache: &Self::Cache,
        _tokens: &[Vec<u32>],
        _window: &Range<usize>,
        _reuse: Realign,
    ) -> bool {
        false
    }

    /// How many leading positions of every sequence a stored full pass over `tokens` would
    /// take from `cache` as they are, when the model can compute a prompt in pieces (causal
    /// or block-causal attention: a position reads only what precedes it, so stored pieces
    /// are what one pass computes); `None` when it cannot (the default: bidirectional
    /// attention reads every position from every other).
    fn stored_prefix(
        &self,
        _cache: &Self::Cache,
        _tokens: &[Vec<u32>],
        _window: &Range<usize>,
    ) -> Option<usize> {
        None
    }
}

/// One call of [`Denoiser::logits_many`]: the arguments of [`Denoiser::logits`].
pub struct ModelCall<'a, C> {
    pub tokens: &'a [Vec<u32>],
    pub window: Range<usize>,
    pub cache: &'a mut C,
    pub pass: Pass,
}

/// The row whose logits predict the token at `position`: Dream-style models (shift) read the
/// hidden state one to the left; position 0 keeps its own.
pub fn logit_row(logit_shift: bool, position: usize) -> usize {
    if logit_shift {
        position.saturating_sub(1)
    } else {
        position
    }
}

/// The position whose token row `row`'s logits predict: [`logit_row`] the other way (a shifted
/// model's last row predicts the position after the sequence).
pub fn predicted_position(logit_shift: bool, row: usize) -> usize {
    row + usize::from(logit_shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two directions of the shift agree: the row that predicts a position predicts that
    /// position, shifted (Dream) or not (LLaDA).
    #[test]
    fn the_row_for_a_position_predicts_that_position() {
        for shift in [false, true] {
            for position in 1..6 {
                let row = logit_row(shift, position);
                assert_eq!(predicted_position(shift, row), position, "shift {shift}");
            }
        }
        assert_eq!(predicted_position(true, 0), 1);
        assert_eq!(predicted_position(false, 0), 0);
    }
}
