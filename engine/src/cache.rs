//! The model's keys and values over a context, kept between passes and between requests:
//! [`ContextCache`]. A full pass fills it, a window pass reads every position but the canvas's
//! from it (Fast-dLLM's approximate dual cache), and a realigning pass moves it across an edit
//! of the context (`qwen2/realign.rs`); it records how exact what it holds still is.

use std::ops::Range;

use candle_core::Tensor;

/// Per-layer keys and values (after RoPE; `[B, T, kv_heads * head_dim * 2]`, keys then values)
/// with the tokens they were computed from, and how exact they are. A value the caller keeps:
/// a later request over the same context reuses it (the runtime's kept caches).
#[derive(Default)]
pub struct ContextCache {
    pub(crate) layers: Vec<Tensor>,
    pub(crate) tokens: Vec<Vec<u32>>,
    /// Positions stored full passes took from the cache instead of computing (causal and
    /// block-causal models reuse the unchanged prefix of the last request), and realigning passes
    /// kept (exact or not).
    pub(crate) reused_positions: usize,
    /// Leading positions of every sequence whose keys/values are exactly what a full pass over
    /// `tokens` computes (only causal and block-causal rows can be; a stored full pass makes
    /// all of them exact, a realigning pass keeps what precedes its first change).
    pub(crate) exact_rows: usize,
    /// Realigning passes since the last exact stored pass.
    pub(crate) approximate_passes: usize,
    /// Positions realigning passes kept that were not exact (they attended to older tokens).
    pub(crate) drifted_positions: usize,
    /// `Some(p)`: rows at or past `p` were not computed (a causal pass stops at its window's
    /// block: nothing before reads them), so their keys/values are placeholders whatever the
    /// cached tokens say. Window passes moving on from `p` compute them.
    pub(crate) stopped_at: Option<usize>,
}

impl ContextCache {
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    pub fn clear(&mut self) {
        self.layers.clear();
        self.tokens.clear();
        self.exact_rows = 0;
        self.approximate_passes = 0;
        self.stopped_at = None;
    }

    /// Rows of every sequence whose keys/values were computed (see `stopped_at`).
    pub fn computed_rows(&self) -> usize {
        self.stopped_at.unwrap_or(usize::MAX)
    }

    /// The cache now holds exactly what a stored full pass over its tokens would.
    pub(crate) fn mark_exact(&mut self) {
        self.exact_rows = usize::MAX;
        self.approximate_passes = 0;
    }

    /// Whether a window pass over `tokens` may use this cache: same batch, same lengths, every
    /// row before the window computed, and the same tokens everywhere outside `window` (past
    /// the computed rows nothing is held to compare).
    pub fn covers(&self, tokens: &[Vec<u32>], window: &Range<usize>) -> bool {
        let computed = self.computed_rows();
        !self.layers.is_empty()
            && window.start <= computed
            && self.tokens.len() == tokens.len()
            && self.tokens.iter().zip(tokens).all(|(cached, new)| {
                let len = new.len();
                let (start, end) = (
                    window.start.min(len),
                    window.end.min(len).max(window.start.min(len)),
                );
                let after = end..computed.min(len).max(end);
                cached.len() == len
                    && cached[..start] == new[..start]
                    && cached[after.clone()] == new[after]
            })
    }

    /// Positions that stored full passes and realigning passes over this cache took from it instead
    /// of computing.
    pub fn reused_positions(&self) -> usize {
        self.reused_positions
    }

    /// Positions realigning passes took from this cache that were approximate (they had attended to
    /// tokens the edit changed).
    pub fn drifted_positions(&self) -> usize {
        self.drifted_positions
    }

    /// The tokens of each sequence the cached keys and values were computed from (after window
    /// passes, the canvases as the last pass saw them).
    pub fn tokens(&self) -> &[Vec<u32>] {
        &self.tokens
    }

    /// Realigning passes made since the cache was last exact (a stored full pass).
    pub fn approximate_passes(&self) -> usize {
        self.approximate_passes
    }

    /// Bytes held by the cached keys and values.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|kv| kv.elem_count() * 4).sum()
    }
}
