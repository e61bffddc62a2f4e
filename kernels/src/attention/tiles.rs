//! Attention for blocks of query rows (a full pass's every row, a window's) with AVX-512, for
//! head sizes that are multiples of 8.
//!
//! [`super::blocks`] computes each (sequence, head, block of queries) with two products through
//! `gemm`. At the head size of every model redraft runs (64; 128 for the larger Qwens) those
//! products are only `head_dim` deep, and `gemm` spends more of their time packing the block's
//! keys and values than multiplying them: about half the time of a full pass of the default
//! model over 1,024 tokens was attention, at half the core's f32 rate. Here nothing is packed
//! but the block's own queries:
//!
//! - the block's [`ROWS`] queries are transposed once (`head_dim` rows of 48, already scaled);
//! - scores are computed transposed, [`KEYS`] keys by 48 queries at a time in 24 registers: for
//!   each of the head's dimensions, the keys' values there broadcast against three vectors of
//!   queries. Keys are read where they lie, in the projection rows or the cache;
//! - the softmax runs down the columns (a query's scores), 16 queries a vector;
//! - the weighted values, [`KEYS`] of the head's dimensions by 48 queries in 24 registers: each
//!   key's values broadcast against its three vectors of weights, then written to the output
//!   rows.
//!
//! The arithmetic is the same as the other paths' (scaled dot products, softmax, weighted sum of
//! values); only the order of the additions differs. `cargo bench -p redraft-engine --bench
//! attention` times both paths on this CPU.

use std::arch::x86_64::*;

use rayon::prelude::*;

use super::{HeadLayout, Shapes};
use crate::rows::avx512::exp16;
use crate::DisjointOutput;

/// Query rows a task takes at most: three vectors of 16, the columns of every tile. A block of
/// fewer rows (a window's 16, the last block of a pass) takes as few vectors as hold them.
const ROWS: usize = 48;
/// Keys (scores) or value dimensions (output) a tile takes at a time, each with up to three
/// vectors of accumulators: 24 of the 32 registers.
const KEYS: usize = 8;

/// Whether this CPU runs this path for heads of `head_dim` values (a multiple of [`KEYS`]).
pub(super) fn available(head_dim: usize) -> bool {
    head_dim > 0 && head_dim.is_multiple_of(KEYS) && std::is_x86_feature_detected!("avx512f")
}

/// A task's buffers, kept from task to task on each thread (a fresh score block of up to a few
/// hundred kilobytes per task would be fresh pages to fault in).
#[derive(Default)]
struct Scratch {
    /// The block's queries, transposed and scaled: `[head_dim][ROWS]`.
    queries: Vec<f32>,
    /// Scores, then weights, transposed: `[keys][ROWS]`.
    scores: Vec<f32>,
    /// The block's output, transposed: `[head_dim][ROWS]`.
    out: Vec<f32>,
    /// The keys each of the block's rows sees.
    seen: Vec<usize>,
}

/// [`super::attention`] for shapes the caller checked and a CPU and head size [`available`]
/// accepts (asserted).
pub(super) fn attention(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Vec<f32> {
    let HeadLayout {
        heads,
        kv_heads,
        head_dim: hd,
    } = s.layout;
    assert!(available(hd));
    let queries = s.queries.len();
    let group = heads / kv_heads;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; s.batch * queries * heads * hd];
    let shared = DisjointOutput::new(&mut out);
    let blocks = queries.div_ceil(ROWS);
    (0..s.batch * heads * blocks).into_par_iter().for_each_init(
        Scratch::default,
        |scratch, task| {
            let (b, rest) = (task / (heads * blocks), task % (heads * blocks));
            let (h, blk) = (rest / blocks, rest % blocks);
            let q0 = blk * ROWS;
            let rows = ROWS.min(queries - q0);
            let row0 = s.queries.start + q0;
            let key_len = s.key_lens[b];
            scratch.seen.clear();
            scratch
                .seen
                .extend((0..rows).map(|r| (s.visible)(row0 + r, key_len).min(key_len)));
            // Rows see a prefix of the keys each, the block's last row the most; a block that
            // sees none keeps its zeros.
            let kl = scratch.seen[rows - 1];
            if kl == 0 {
                return;
            }
            let g = h / group;
            let k_at = b * s.keys * s.kv_stride + s.k_col + g * hd;
            let block = Block {
                q: &q[(b * s.q_len + row0) * s.q_stride + h * hd..],
                q_stride: s.q_stride,
                rows,
                keys: &kv[k_at..],
                values: kv_heads * hd,
                kv_stride: s.kv_stride,
                kl,
                scale,
                out: shared,
                out_at: ((b * queries + q0) * heads + h) * hd,
                out_stride: heads * hd,
            };
            block.check(hd);
            // SAFETY: `available` (asserted above) detected AVX-512F; `check` asserted the
            // bounds `run` reads and writes within; the rows (b, q0..q0 + rows) of head h are
            // this task's alone: no other task has this (b, h, block), so `shared`'s contract
            // holds.
            unsafe {
                match rows.div_ceil(16) {
                    1 => block.run::<1>(hd, scratch),
                    2 => block.run::<2>(hd, scratch),
                    _ => block.run::<3>(hd, scratch),
                }
            }
        },
    );
    out
}

/// One task: one head's block of query rows against a prefix of its key head's keys.
struct Block<'a> {
    /// The block's first query row, from the head's first value; row r at `r * q_stride`.
    q: &'a [f32],
    q_stride: usize,
    rows: usize,
    /// Key 0 of the key head; key n at `n * kv_stride`, its values `values` after it.
    keys: &'a [f32],
    values: usize,
    kv_stride: usize,
    /// Keys the block reads (those its last row sees).
    kl: usize,
    scale: f32,
    out: DisjointOutput<'a, f32>,
    /// The block's first output row, at this head's columns; row r at `r * out_stride`.
    out_at: usize,
    out_stride: usize,
}

impl Block<'_> {
    /// Panics unless every read and write of [`Block::run`] is in bounds.
    fn check(&self, hd: usize) {
        let last = self.rows - 1;
        assert!(
            self.rows > 0
                && self.rows <= ROWS
                && self.kl > 0
                && self.q.len() >= last * self.q_stride + hd
                && self.keys.len() >= (self.kl - 1) * self.kv_stride + self.values + hd
                && self.out_at + last * self.out_stride + hd <= self.out.len()
        );
    }

    /// The block's attention, written to its output rows, in tiles of `V` vectors of queries.
    ///
    /// # Safety
    /// The CPU has AVX-512F, [`Block::check`] passed for a head size of `hd`, the block's rows
    /// fit `V` vectors of 16, and no other thread reads or writes the block's output rows
    /// (`out_at`, `rows` rows of `hd`).
    #[target_feature(enable = "avx512f")]
    unsafe fn run<const V: usize>(&self, hd: usize, scratch: &mut Scratch) {
        // The tiles' width: the block's rows, padded to whole vectors.
        let width = 16 * V;
        debug_assert!(self.rows <= width && width <= ROWS);
        let (rows, kl) = (self.rows, self.kl);
        let Scratch {
            queries,
            scores,
            out,
            seen,
        } = scratch;
        // The queries, transposed and scaled; the columns past the block's rows stay 0, so
        // their scores are 0 and their (unused) weights finite.
        queries.clear();
        queries.resize(hd * width, 0.0);
        for r in 0..rows {
            let row = &self.q[r * self.q_stride..][..hd];
            for (d, &x) in row.iter().enumerate() {
                queries[d * width + r] = x * self.scale;
            }
        }
        scores.resize(kl * width, 0.0);
        out.resize(hd * width, 0.0);
        // SAFETY: the CPU has AVX-512F (caller). `check` asserted that key n < kl lies at
        // keys[n * kv_stride..][..hd] and its values `values` further, inside `keys`: the
        // scalar reads of `scores_tile` and `values_tile` stay there. `queries` and `out`
        // hold hd rows of `width`, `scores` kl rows of it: every vector load and store below
        // (row < hd or n < kl, columns 16 * v..16 * v + 16 <= width) stays in them.
        unsafe {
            let keys = self.keys.as_ptr();
            let mut n = 0;
            while n + KEYS <= kl {
                scores_tile::<KEYS, V>(
                    queries,
                    hd,
                    keys.add(n * self.kv_stride),
                    self.kv_stride,
                    scores.as_mut_ptr().add(n * width),
                );
                n += KEYS;
            }
            for n in n..kl {
                let at = scores.as_mut_ptr().add(n * width);
                scores_tile::<1, V>(
                    queries,
                    hd,
                    keys.add(n * self.kv_stride),
                    self.kv_stride,
                    at,
                );
            }
            let inverse = softmax_columns::<V>(scores, kl, &seen[..rows]);
            let values = keys.add(self.values);
            let mut d = 0;
            while d + KEYS <= hd {
                let at = out.as_mut_ptr().add(d * width);
                values_tile::<V>(scores, kl, values.add(d), self.kv_stride, &inverse, at);
                d += KEYS;
            }
            debug_assert_eq!(d, hd, "head sizes are multiples of KEYS");
        }
        for r in 0..rows {
            let at = self.out_at + r * self.out_stride;
            // SAFETY: `check` asserted at + hd <= the output's length; the caller promised the
            // block's rows are this thread's alone.
            let row = unsafe { std::slice::from_raw_parts_mut(self.out.at(at), hd) };
            for (d, o) in row.iter_mut().enumerate() {
                *o = out[d * width + r];
            }
        }
    }
}

/// Scores of `M` keys (key i at `keys + i * stride`, `hd` values) against the `16 * V`
/// transposed queries, into `M` rows of `16 * V` at `scores`.
///
/// # Safety
/// The CPU has AVX-512F; `queries` holds `hd` rows of `16 * V`; the `M` keys' first `hd` values
/// and `M * `16 * V`` floats at `scores` are valid to read and write.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn scores_tile<const M: usize, const V: usize>(
    queries: &[f32],
    hd: usize,
    keys: *const f32,
    stride: usize,
    scores: *mut f32,
) {
    let w = 16 * V;
    debug_assert!(queries.len() >= hd * w);
    let mut acc = [[_mm512_setzero_ps(); V]; M];
    let q = queries.as_ptr();
    for d in 0..hd {
        // SAFETY: d < hd: row d of `queries` (`16 * V` floats) and value d of each key are in
        // bounds (caller).
        unsafe {
            let qv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(q.add(d * w + 16 * v)));
            for (i, acc) in acc.iter_mut().enumerate() {
                let k = _mm512_set1_ps(*keys.add(i * stride + d));
                for v in 0..V {
                    acc[v] = _mm512_fmadd_ps(k, qv[v], acc[v]);
                }
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        for (v, &a) in acc.iter().enumerate() {
            // SAFETY: i < M, 16 * v + 16 <= `16 * V`: inside the M rows at `scores` (caller).
            unsafe { _mm512_storeu_ps(scores.add(i * w + 16 * v), a) };
        }
    }
}

/// Each column of `scores` (`kl` rows of `16 * V`: a query's scores) becomes its softmax's
/// numerators, the keys past `seen[column]` 0; returns each column's 1 / sum.
///
/// # Safety
/// The CPU has AVX-512F; `scores` holds `kl > 0` rows of `16 * V` and `seen` at most `16 * V`
/// counts of at most `kl`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_columns<const V: usize>(
    scores: &mut [f32],
    kl: usize,
    seen: &[usize],
) -> [__m512; V] {
    let w = 16 * V;
    assert!(scores.len() >= kl * w && seen.len() <= w && kl > 0);
    let masked = seen.iter().any(|&n| n < kl);
    if masked {
        for (r, &n) in seen.iter().enumerate() {
            for row in n..kl {
                scores[row * w + r] = f32::NEG_INFINITY;
            }
        }
    }
    let p = scores.as_mut_ptr();
    // SAFETY: n < kl, 16 * v + 16 <= `16 * V`: every load and store is inside `scores` (asserted).
    unsafe {
        let mut max = [_mm512_set1_ps(f32::NEG_INFINITY); V];
        for n in 0..kl {
            for (v, m) in max.iter_mut().enumerate() {
                *m = _mm512_max_ps(*m, _mm512_loadu_ps(p.add(n * w + 16 * v)));
            }
        }
        let mut sum = [_mm512_setzero_ps(); V];
        for n in 0..kl {
            for v in 0..V {
                let at = p.add(n * w + 16 * v);
                let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(at), max[v]));
                _mm512_storeu_ps(at, e);
                sum[v] = _mm512_add_ps(sum[v], e);
            }
        }
        if masked {
            // exp16 clamps at e^-87, not 0: a hidden key gets no weight at all.
            for (r, &n) in seen.iter().enumerate() {
                for row in n..kl {
                    *p.add(row * w + r) = 0.0;
                }
            }
        }
        sum.map(|s| _mm512_div_ps(_mm512_set1_ps(1.0), s))
    }
}

/// `KEYS` output dimensions (dimension i of key n's values at `values + n * stride + i`) of the
/// `16 * V` queries: the weights' rows (`weights`, `kl` rows of `16 * V`) times the values,
/// scaled by `inverse`, into `KEYS` rows of `16 * V` at `out`.
///
/// # Safety
/// The CPU has AVX-512F; `weights` holds `kl` rows of `16 * V`; the `KEYS` values of each of the
/// `kl` keys and `KEYS * `16 * V`` floats at `out` are valid to read and write.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn values_tile<const V: usize>(
    weights: &[f32],
    kl: usize,
    values: *const f32,
    stride: usize,
    inverse: &[__m512; V],
    out: *mut f32,
) {
    let w = 16 * V;
    debug_assert!(weights.len() >= kl * w);
    let mut acc = [[_mm512_setzero_ps(); V]; KEYS];
    let weight = weights.as_ptr();
    for n in 0..kl {
        // SAFETY: n < kl: row n of `weights` and key n's values are in bounds (caller).
        unsafe {
            let wv: [__m512; V] =
                std::array::from_fn(|v| _mm512_loadu_ps(weight.add(n * w + 16 * v)));
            let row = values.add(n * stride);
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*row.add(i));
                for v in 0..V {
                    acc[v] = _mm512_fmadd_ps(x, wv[v], acc[v]);
                }
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        for (v, &a) in acc.iter().enumerate() {
            // SAFETY: i < KEYS, 16 * v + 16 <= `16 * V`: inside the rows at `out` (caller).
            unsafe { _mm512_storeu_ps(out.add(i * w + 16 * v), _mm512_mul_ps(a, inverse[v])) };
        }
    }
}
