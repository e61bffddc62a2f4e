//! Reusing a [`ContextCache`] across an edit ([`Pass::Realign`]): the request's tokens are aligned with
//! the cached ones (the common head and tail, and long common runs between them, so a
//! prefix-suffix-middle prompt keeps its suffix while the prefix is edited), the cached rows of
//! every unchanged run move to their new positions (keys re-rotated by the position delta, as
//! llama.cpp's K-shift does; values as they are), and one pass recomputes `radius` tokens on each
//! side of each change plus the window, reading every other position from the realigned cache.
//!
//! For a causal or block-causal model the rows before the first change are exact (nothing
//! before it sees it), and so are the recomputed rows right after it; the kept rows after those
//! attended to the old tokens. For a bidirectional model every kept row did: keys and values far
//! from an edit barely move, which is the approximation the eval measures against exact
//! recomputation.

use std::ops::Range;

use candle_core::Tensor;

use super::forward::Then;
use super::rope::Rope;
use super::Qwen2;
use crate::cache::ContextCache;
use crate::error::{Error, Result};

/// The shortest run of common tokens between the head and the tail worth keeping: shorter ones
/// are mostly inside the recomputed margins, and a short run that matches far away is more
/// likely a coincidence than the same code.
const MIN_RUN: usize = 16;

/// Bound on the comparisons the search for common runs between head and tail may make
/// (`old * new` tokens per search); past it only the head and tail are kept.
const MAX_CELLS: usize = 1 << 24;

/// New positions `new` whose keys/values come from the cached rows from `old` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kept {
    pub new: Range<usize>,
    pub old: usize,
}

/// What a realigning pass over a batch does.
#[derive(Debug)]
pub(super) struct Realignment {
    /// Per sequence, the runs taken from the cache (outside `spans`), in order.
    kept: Vec<Vec<Kept>>,
    /// Positions recomputed in every sequence (sorted, disjoint, not adjacent).
    spans: Vec<Range<usize>>,
    /// Positions kept, over the batch.
    kept_positions: usize,
    /// Kept positions that are not exact (they attended to tokens the edit changed).
    pub drifted: usize,
    /// Leading positions exact after the pass.
    exact_rows: usize,
    /// Where the pass stops computing (a causal window's block end), as [`ContextCache`] keeps it.
    stopped_at: Option<usize>,
}

/// What a realigning pass records in its cache once its layers are through.
pub(super) struct Realigned {
    exact_rows: usize,
    stopped_at: Option<usize>,
    approximate_passes: usize,
    kept_positions: usize,
    drifted: usize,
}

impl Realigned {
    /// Records the pass in `cache` (whose layers and tokens are already the new ones).
    pub(super) fn apply(self, cache: &mut ContextCache) {
        cache.exact_rows = self.exact_rows;
        cache.stopped_at = self.stopped_at;
        cache.approximate_passes = self.approximate_passes;
        cache.reused_positions += self.kept_positions;
        cache.drifted_positions += self.drifted;
    }
}

impl Qwen2 {
    /// How a realigning pass over `tokens` realigns `cache`, recomputing `radius` tokens on each
    /// side of each change and `window`; `None` when the cache is not one this model filled
    /// for a batch of this size.
    pub(super) fn realignment(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
        radius: usize,
    ) -> Option<Realignment> {
        if cache.layers.len() != self.layers.len() || cache.tokens.len() != tokens.len() {
            return None;
        }
        let block = self.attention.block();
        let mut spans = vec![window.clone()];
        let mut runs = Vec::with_capacity(tokens.len());
        // Leading positions of every sequence taken unchanged from where they were.
        let mut unchanged = usize::MAX;
        // Rows the cache never computed hold nothing to keep.
        let computed = cache.computed_rows();
        for (old, new) in cache.tokens.iter().zip(tokens) {
            let matched = matching_runs(&old[..computed.min(old.len())], new);
            unchanged = unchanged.min(match matched.first() {
                Some(Kept { new, old: 0 }) if new.start == 0 => new.end,
                _ => 0,
            });
            for change in changes(&matched, old.len(), new.len()) {
                spans.push(recomputed(change, radius, block, new.len()));
            }
            runs.push(matched);
        }
        // A causal pass computes nothing past its window's block; the rows there become
        // placeholders, neither recomputed nor kept.
        let len = tokens.iter().map(Vec::len).max().unwrap_or(0);
        let limit = self.computed_end(window, len);
        let spans: Vec<Range<usize>> = merged(spans)
            .into_iter()
            .filter(|s| s.start < limit)
            .map(|s| s.start..s.end.min(limit))
            .collect();
        let mut dropped = spans.clone();
        dropped.push(limit..usize::MAX);
        let exact_rows = match block {
            // Only causal rows can be exact, and only before the first change's block; the rows
            // recomputed from there on see exact rows only.
            Some(n) => {
                let exact = unchanged.min(cache.exact_rows).min(computed) / n * n;
                spans
                    .iter()
                    .find(|s| s.start <= exact && exact < s.end)
                    .map_or(exact, |s| s.end)
            }
            None => 0,
        };
        let kept: Vec<Vec<Kept>> = runs.iter().map(|r| outside(r, &dropped)).collect();
        let kept_positions = kept.iter().flatten().map(|k| k.new.len()).sum();
        let drifted = kept
            .iter()
            .flatten()
            .map(|k| k.new.end.saturating_sub(k.new.start.max(exact_rows)))
            .sum();
        Some(Realignment {
            kept,
            spans,
            kept_positions,
            drifted,
            exact_rows,
            stopped_at: (limit < len).then_some(limit),
        })
    }

    /// The realigning pass ([`crate::sampler::Pass::Realign`]), up to its layers: realigns `cache`'s
    /// layers with `tokens` (the cache vouches for nothing until the pass is through). Returns
    /// the positions to recompute (sorted spans, the window inside one), the realigned layers
    /// the pass attends over, and what to record in the cache once it is through.
    pub(super) fn edit_pass(
        &self,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
        cache: &mut ContextCache,
        radius: usize,
    ) -> Result<(Vec<Range<usize>>, Vec<Tensor>, Then)> {
        let plan = self
            .realignment(cache, tokens, window, radius)
            .ok_or_else(|| {
                Error::InvalidRequest("edit pass without a cache this batch can reuse".into())
            })?;
        let len = tokens.iter().map(Vec::len).max().unwrap_or(0);
        let layers = cache
            .layers
            .iter()
            .map(|kv| self.realigned(kv, &plan.kept, len))
            .collect::<Result<Vec<_>>>()?;
        let realigned = Realigned {
            exact_rows: plan.exact_rows,
            stopped_at: plan.stopped_at,
            approximate_passes: cache.approximate_passes + 1,
            kept_positions: plan.kept_positions,
            drifted: plan.drifted,
        };
        cache.clear();
        Ok((plan.spans, layers, Then::Edit(realigned)))
    }

    /// One layer's cached rows (`[B, T_old, 2 * kv_heads * head_dim]`) laid out for the new
    /// tokens (`[B, len, _]`): each kept run's rows at its new positions, keys rotated by the
    /// distance they moved; zeros where the pass recomputes (or a sequence is padded).
    fn realigned(&self, kv: &Tensor, kept: &[Vec<Kept>], len: usize) -> Result<Tensor> {
        let (_, _, width) = kv.dims3()?;
        let zeros = |rows: usize| Tensor::zeros((rows, width), kv.dtype(), kv.device());
        let mut sequences = Vec::with_capacity(kept.len());
        for (b, runs) in kept.iter().enumerate() {
            let old = kv.get(b)?;
            let mut pieces = Vec::new();
            let mut at = 0;
            for run in runs {
                if run.new.start > at {
                    pieces.push(zeros(run.new.start - at)?);
                }
                let rows = old.narrow(0, run.old, run.new.len())?;
                pieces.push(if run.old == run.new.start {
                    rows
                } else {
                    self.shifted(&rows, run.old, run.new.start)?
                });
                at = run.new.end;
            }
            if at < len {
                pieces.push(zeros(len - at)?);
            }
            sequences.push(Tensor::cat(&pieces, 0)?);
        }
        Ok(Tensor::stack(&sequences, 0)?)
    }

    /// Cached rows (`[n, 2 * kv_heads * head_dim]`, keys then values) computed at positions
    /// `from..from + n`, as they read at `to..to + n`: each key head re-rotated by the
    /// difference of the two positions' RoPE angles (rotations compose), values unchanged.
    pub(super) fn shifted(&self, rows: &Tensor, from: usize, to: usize) -> Result<Tensor> {
        let (n, width) = rows.dims2()?;
        let hd = self.config.head_dim();
        let keys = self.config.num_kv_heads() * hd;
        let half = hd / 2;
        let (cos, sin) = self.rope.shift(from, to, n);
        let table = |values: Vec<f32>| Tensor::from_vec(values, (n, 1, half), rows.device());
        let (cos, sin) = (table(cos)?, table(sin)?);
        let k = rows.narrow(1, 0, keys)?.reshape((n, keys / hd, 2, half))?;
        let (x1, x2) = (
            k.narrow(2, 0, 1)?.squeeze(2)?,
            k.narrow(2, 1, 1)?.squeeze(2)?,
        );
        let r1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
        let r2 = (x2.broadcast_mul(&cos)? + x1.broadcast_mul(&sin)?)?;
        let rotated = Tensor::stack(&[r1, r2], 2)?.reshape((n, keys))?;
        Ok(Tensor::cat(
            &[&rotated, &rows.narrow(1, keys, width - keys)?],
            1,
        )?)
    }
}

impl Rope {
    /// `[n, head_dim / 2]` rotations taking a key rotated for position `from + i` to one
    /// rotated for `to + i`: by the difference of the two angles as [`Rope::tables`] computes
    /// them (in f32), taken in f64, so the composition is the new position's own angle.
    fn shift(&self, from: usize, to: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
        let half = self.head_dim / 2;
        let mut cos = Vec::with_capacity(n * half);
        let mut sin = Vec::with_capacity(n * half);
        for i in 0..n {
            for j in 0..half {
                let inv_freq =
                    (1.0 / self.theta.powf((2 * j) as f64 / self.head_dim as f64)) as f32;
                let old = ((from + i) as f32 * inv_freq) as f64;
                let new = ((to + i) as f32 * inv_freq) as f64;
                let (s, c) = (new - old).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        (cos, sin)
    }
}

/// Runs of `new` that hold the same tokens as runs of `old`, in order: the common head, the
/// common tail, and between them, recursively, the longest common run (of at least
/// [`MIN_RUN`] tokens) and what matches on either side of it.
pub(super) fn matching_runs(old: &[u32], new: &[u32]) -> Vec<Kept> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut runs = Vec::new();
    if head > 0 {
        runs.push(Kept {
            new: 0..head,
            old: 0,
        });
    }
    let mut cells = MAX_CELLS;
    between(
        old,
        new,
        head..old.len() - tail,
        head..new.len() - tail,
        &mut cells,
        &mut runs,
    );
    if tail > 0 {
        runs.push(Kept {
            new: new.len() - tail..new.len(),
            old: old.len() - tail,
        });
    }
    runs
}

/// The common runs of `old[o]` and `new[n]`, appended in order.
fn between(
    old: &[u32],
    new: &[u32],
    o: Range<usize>,
    n: Range<usize>,
    cells: &mut usize,
    runs: &mut Vec<Kept>,
) {
    if o.len() < MIN_RUN || n.len() < MIN_RUN || o.len() * n.len() > *cells {
        return;
    }
    *cells -= o.len() * n.len();
    let (len, oi, ni) = longest_common_run(&old[o.clone()], &new[n.clone()]);
    if len < MIN_RUN {
        return;
    }
    let (oi, ni) = (o.start + oi, n.start + ni);
    between(old, new, o.start..oi, n.start..ni, cells, runs);
    runs.push(Kept {
        new: ni..ni + len,
        old: oi,
    });
    between(old, new, oi + len..o.end, ni + len..n.end, cells, runs);
}

/// The longest run of tokens `a` and `b` share: `(length, start in a, start in b)`; of equally
/// long ones, the one that moved least.
fn longest_common_run(a: &[u32], b: &[u32]) -> (usize, usize, usize) {
    let mut best = (0, 0, 0);
    let mut prev = vec![0u32; b.len() + 1];
    let mut cur = vec![0u32; b.len() + 1];
    for (i, &x) in a.iter().enumerate() {
        for (j, &y) in b.iter().enumerate() {
            cur[j + 1] = if x == y { prev[j] + 1 } else { 0 };
            let len = cur[j + 1] as usize;
            if len >= best.0 && len > 0 {
                let (ai, bi) = (i + 1 - len, j + 1 - len);
                let moved = |(_, p, q): (usize, usize, usize)| p.abs_diff(q);
                if len > best.0 || moved((len, ai, bi)) < moved(best) {
                    best = (len, ai, bi);
                }
            }
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    best
}

/// The changed stretches of the new sequence (possibly empty, where tokens were only
/// deleted): wherever consecutive runs are not consecutive in both sequences, and before the
/// first and after the last unless they reach the ends.
fn changes(runs: &[Kept], old_len: usize, new_len: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut new_at, mut old_at) = (0, 0);
    for run in runs {
        if run.new.start != new_at || run.old != old_at {
            out.push(new_at..run.new.start);
        }
        new_at = run.new.end;
        old_at = run.old + run.new.len();
    }
    if new_at != new_len || old_at != old_len {
        out.push(new_at..new_len);
    }
    out
}

/// The positions recomputed for `change`: `radius` tokens after it, and before it `radius` for
/// bidirectional attention; a causal or block-causal row before a change never sees it, but
/// the rows of the change's block do.
fn recomputed(
    change: Range<usize>,
    radius: usize,
    block: Option<usize>,
    len: usize,
) -> Range<usize> {
    let (start, end) = match block {
        None => (change.start.saturating_sub(radius), change.end + radius),
        Some(n) => {
            let last = change.end.max(change.start + 1);
            (
                change.start / n * n,
                (change.end + radius).max(last.div_ceil(n) * n),
            )
        }
    };
    start.min(len)..end.min(len)
}

/// `spans` sorted, with overlapping or touching ones joined.
fn merged(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.retain(|s| !s.is_empty());
    spans.sort_by_key(|s| s.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => out.push(span),
        }
    }
    out
}

/// `runs` without the positions of `spans` (both sorted).
fn outside(runs: &[Kept], spans: &[Range<usize>]) -> Vec<Kept> {
    let mut out = Vec::new();
    for run in runs {
        let mut start = run.new.start;
        for span in spans {
            if span.end <= start || span.start >= run.new.end {
                continue;
            }
            if span.start > start {
                out.push(Kept {
                    new: start..span.start,
                    old: run.old + (start - run.new.start),
                });
            }
            start = start.max(span.end);
        }
        if start < run.new.end {
            out.push(Kept {
                new: start..run.new.end,
                old: run.old + (start - run.new.start),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
