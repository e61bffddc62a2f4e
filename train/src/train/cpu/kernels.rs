//! The element-wise passes of the CPU training path, each one fused pass over rows:
//! RMSNorm and its backward, bias + RoPE and its inverse, the attention softmax over the keys
//! each query sees and its backward, SwiGLU's backward, and the cross-entropy head. The formulas
//! are those of `train::fused` and `train::model` (same operation order where it matters for
//! rounding), which the gradient-equality tests in `cpu/tests.rs` hold them to.
//!
//! Sums that end up in a parameter gradient (norm weights, biases) are taken over fixed chunks
//! of rows and added in order, never through a work-stealing reduction: a step is a pure
//! function of its inputs, so a resumed run repeats an uninterrupted one bit for bit.

use rayon::prelude::*;

use crate::train::fused::rms_norm_backward_coefficient;
use redraft_engine::config::AttentionPattern;
use redraft_kernels::rows::{exp, rows_per_task, softmax_rows};

/// Rows per fixed chunk of a column sum.
const SUM_ROWS: usize = 256;

/// `y = x * r * w` per row with `r = 1 / sqrt(mean(x²) + eps)`; keeps `r` for the backward.
pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, y: &mut [f32], inv_rms: &mut [f32]) {
    let width = w.len();
    let chunk = rows_per_task(width);
    y.par_chunks_mut(width * chunk)
        .zip(x.par_chunks(width * chunk))
        .zip(inv_rms.par_chunks_mut(chunk))
        .for_each(|((y, x), inv)| {
            for ((y, x), r) in y.chunks_mut(width).zip(x.chunks(width)).zip(inv) {
                let mean = x.iter().map(|v| v * v).sum::<f32>() / width as f32;
                *r = 1.0 / (mean + eps).sqrt();
                for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
                    *y = x * *r * w;
                }
            }
        });
}

/// `dx += r * (w * g) - x * r³ * mean(w * g * x)` per row, and `dw += Σ_rows g * x * r`.
pub(super) fn rms_norm_backward(
    x: &[f32],
    w: &[f32],
    inv_rms: &[f32],
    g: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
) {
    let width = w.len();
    dx.par_chunks_mut(width * SUM_ROWS)
        .zip(x.par_chunks(width * SUM_ROWS))
        .zip(g.par_chunks(width * SUM_ROWS))
        .zip(inv_rms.par_chunks(SUM_ROWS))
        .map(|(((dx, x), g), inv)| {
            let mut partial = vec![0f32; width];
            for (((dx, x), g), &r) in dx
                .chunks_mut(width)
                .zip(x.chunks(width))
                .zip(g.chunks(width))
                .zip(inv)
            {
                let c = rms_norm_backward_coefficient(x, g, w, r);
                for i in 0..width {
                    dx[i] += r * w[i] * g[i] - x[i] * c;
                    partial[i] += g[i] * (x[i] * r);
                }
            }
            partial
        })
        .collect::<Vec<_>>()
        .iter()
        .for_each(|partial| add(dw, partial));
}

fn add(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}

/// Adds row `i` of `src` to row `at[i]` of `dst` (rows of `width` values): the backward of a
/// row gather (the masked rows' head input, the embedding lookup).
pub(super) fn add_rows_at(src: &[f32], at: &[u32], dst: &mut [f32], width: usize) {
    for (row, &r) in src.chunks(width).zip(at) {
        add(&mut dst[r as usize * width..][..width], row);
    }
}

/// `dst += Σ_rows src` for `src` rows of `dst.len()` values.
pub(super) fn add_column_sums(src: &[f32], dst: &mut [f32]) {
    let width = dst.len();
    src.par_chunks(width * SUM_ROWS)
        .map(|rows| {
            let mut partial = vec![0f32; width];
            for row in rows.chunks(width) {
                add(&mut partial, row);
            }
            partial
        })
        .collect::<Vec<_>>()
        .iter()
        .for_each(|partial| add(dst, partial));
}

/// The q|k|v projection rows' layout and RoPE tables (`cos`, `sin`: `[len, head_dim]`).
pub(super) struct Rope<'a> {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub len: usize,
    pub cos: &'a [f32],
    pub sin: &'a [f32],
}

impl Rope<'_> {
    fn width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }

    /// Adds the biases to every `[q | k | v]` row and rotates the q and k heads in place:
    /// `x * cos + rotate_half(x) * sin`, position `row % len`.
    pub(super) fn forward(&self, qkv: &mut [f32], biases: [&[f32]; 3]) {
        let (width, hd) = (self.width(), self.head_dim);
        let half = hd / 2;
        let rotated = (self.heads + self.kv_heads) * hd;
        qkv.par_chunks_mut(width).enumerate().for_each(|(row, x)| {
            let (q, rest) = x.split_at_mut(biases[0].len());
            let (k, v) = rest.split_at_mut(biases[1].len());
            add(q, biases[0]);
            add(k, biases[1]);
            add(v, biases[2]);
            let pos = row % self.len;
            let (cos, sin) = (
                &self.cos[pos * hd..(pos + 1) * hd],
                &self.sin[pos * hd..(pos + 1) * hd],
            );
            for head in x[..rotated].chunks_mut(hd) {
                for i in 0..half {
                    let (x1, x2) = (head[i], head[i + half]);
                    head[i] = x1 * cos[i] + (-x2) * sin[i];
                    head[i + half] = x2 * cos[i + half] + x1 * sin[i + half];
                }
            }
        });
    }

    /// The RoPE backward on the q and k gradients in place (a rotation's transpose).
    pub(super) fn backward(&self, dqkv: &mut [f32], first_row: usize) {
        let (width, hd) = (self.width(), self.head_dim);
        let half = hd / 2;
        let rotated = (self.heads + self.kv_heads) * hd;
        for (i, g) in dqkv.chunks_mut(width).enumerate() {
            let pos = (first_row + i) % self.len;
            let (cos, sin) = (
                &self.cos[pos * hd..(pos + 1) * hd],
                &self.sin[pos * hd..(pos + 1) * hd],
            );
            for head in g[..rotated].chunks_mut(hd) {
                for i in 0..half {
                    let (g1, g2) = (head[i], head[i + half]);
                    head[i] = g1 * cos[i] + g2 * sin[i + half];
                    head[i + half] = g2 * cos[i + half] - g1 * sin[i];
                }
            }
        }
    }
}

/// Softmax of each `len`-wide row `i` over the keys it sees (`pattern.visible_keys(i, keys)`
/// of the first `keys`); the others (padding, later blocks) get probability 0 (the reference
/// adds `-inf` there). With no key at all the row is 0.
pub(super) fn masked_softmax(
    scores: &mut [f32],
    len: usize,
    keys: usize,
    pattern: AttentionPattern,
) {
    for (i, row) in scores.chunks_mut(len).enumerate() {
        let visible = pattern.visible_keys(i, keys);
        let (valid, hidden) = row.split_at_mut(visible);
        if !valid.is_empty() {
            softmax_rows(valid, visible);
        }
        hidden.fill(0.0);
    }
}

/// `dS = P * (dP - Σ_j dP * P)` per row over the keys it sees, in place in `dp`; the columns
/// of hidden keys among the first `keys` become 0 (their scores never reached the output).
pub(super) fn softmax_backward(
    p: &[f32],
    dp: &mut [f32],
    len: usize,
    keys: usize,
    pattern: AttentionPattern,
) {
    for (i, (p, dp)) in p.chunks(len).zip(dp.chunks_mut(len)).enumerate() {
        let visible = pattern.visible_keys(i, keys);
        let (p, (dp, hidden)) = (&p[..visible], dp[..keys].split_at_mut(visible));
        let dot: f32 = p.iter().zip(dp.iter()).map(|(a, b)| a * b).sum();
        for (d, &p) in dp.iter_mut().zip(p) {
            *d = p * (*d - dot);
        }
        hidden.fill(0.0);
    }
}

/// With `s = sigmoid(gate)`: `d_gate = g * up * s * (1 + gate * (1 - s))`, `d_up = g * gate * s`.
pub(super) fn swiglu_backward(gate_up: &[f32], g: &[f32], d_gate_up: &mut [f32], width: usize) {
    let chunk = rows_per_task(width);
    d_gate_up
        .par_chunks_mut(2 * width * chunk)
        .zip(gate_up.par_chunks(2 * width * chunk))
        .zip(g.par_chunks(width * chunk))
        .for_each(|((out, gu), g)| {
            for ((out, gu), g) in out
                .chunks_mut(2 * width)
                .zip(gu.chunks(2 * width))
                .zip(g.chunks(width))
            {
                let (gate, up) = gu.split_at(width);
                let (d_gate, d_up) = out.split_at_mut(width);
                for i in 0..width {
                    let s = 1.0 / (1.0 + exp(-gate[i]));
                    d_gate[i] = g[i] * up[i] * s * (1.0 + gate[i] * (1.0 - s));
                    d_up[i] = g[i] * gate[i] * s;
                }
            }
        });
}

/// Cross-entropy of each logits row against its target: writes `ce`, whether the first
/// most likely token is the target, and (with `grad`) replaces the logits by
/// `d(weight * ce)/d logits = weight * (softmax - onehot)`.
pub(super) fn cross_entropy(
    logits: &mut [f32],
    targets: &[u32],
    weights: &[f32],
    ce: &mut [f32],
    correct: &mut [bool],
    vocab: usize,
    grad: bool,
) {
    logits
        .par_chunks_mut(vocab)
        .zip(targets.par_iter().zip(weights))
        .zip(ce.par_iter_mut().zip(correct.par_iter_mut()))
        .for_each(|((row, (&target, &w)), (ce, correct))| {
            let (mut max, mut best) = (f32::NEG_INFINITY, 0);
            for (i, &v) in row.iter().enumerate() {
                if v > max {
                    (max, best) = (v, i);
                }
            }
            *correct = best == target as usize;
            let target_shifted = row[target as usize] - max;
            if grad {
                let mut sum = 0.0;
                for v in row.iter_mut() {
                    *v = exp(*v - max);
                    sum += *v;
                }
                *ce = sum.ln() - target_shifted;
                let scale = w / sum;
                row.iter_mut().for_each(|v| *v *= scale);
                row[target as usize] -= w;
            } else {
                let sum: f32 = row.iter().map(|&v| exp(v - max)).sum();
                *ce = sum.ln() - target_shifted;
            }
        });
}
