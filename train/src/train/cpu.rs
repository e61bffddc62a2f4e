//! The CPU training path: [`TrainModel::score`] + `backward` written out by hand, in the style
//! of llm.c, over plain `f32` buffers.
//!
//! Why: on CPU, candle's autograd spends about as long on bookkeeping (a zeroed tensor and an
//! add per node for gradient accumulation, broadcast ops and their reductions, attention over
//! `[batch, heads, len, len]` tensors in a chain of ops, an allocation per op, RoPE from
//! narrow/neg/cat) as on the matmuls themselves. Here the matmuls go straight to `gemm` with
//! transposes as strides (`matmul`), everything between them is one fused pass
//! (`cpu/kernels.rs`, and `redraft_kernels::rows` for the SwiGLU forward), and every activation
//! lives in buffers allocated for the first batch of a shape and reused after (they only grow,
//! so the steady state allocates nothing).
//!
//! [`CpuModel`] owns the weights, gradients and activations; the optimiser updates its flat
//! weights in place ([`AdamW::step_flat`], the same code as the candle path's
//! [`AdamW::step`]). The [`TrainModel`] it was built from stays the model of record for
//! checkpoints and export: [`CpuModel::write_to`] copies the weights back before those.
//! `TrainModel` is the reference: `cpu/tests.rs` holds the loss, every row's cross-entropy and
//! every parameter's gradient to its autograd's.

mod kernels;
mod matmul;
#[cfg(test)]
mod tests;

use rayon::prelude::*;

use super::examples::Batch;
use super::model::TrainModel;
use super::optim::{AdamW, UpdateReport};
use super::TrainResult;
use kernels::Rope;
use matmul::{matmul, Mat, MatMut, Threads};
use redraft_engine::config::{AttentionPattern, ModelConfig};
use redraft_engine::{Error, Result};
use redraft_kernels::rows::par_swiglu_rows;

/// Indices (into [`CpuModel`]'s parameter list) of one block's tensors.
struct LayerIndex {
    input_norm: usize,
    q: usize,
    k: usize,
    v: usize,
    q_bias: usize,
    k_bias: usize,
    v_bias: usize,
    o: usize,
    post_norm: usize,
    gate: usize,
    up: usize,
    down: usize,
}

/// One block's saved activations (for the backward pass).
#[derive(Default)]
struct LayerActs {
    /// `1 / rms` of the block input's rows, and the normed input `[n, d]`.
    r1: Vec<f32>,
    h1: Vec<f32>,
    /// `[n, q | k | v]` after the bias, q and k rotated.
    qkv: Vec<f32>,
    /// Attention probabilities `[batch, heads, len, len]`.
    probs: Vec<f32>,
    /// Attention output `[n, heads * head_dim]`.
    attn: Vec<f32>,
    /// The residual stream after attention, its `1 / rms` and normed rows.
    mid: Vec<f32>,
    r2: Vec<f32>,
    h2: Vec<f32>,
    /// `[n, gate | up]` and `silu(gate) * up`.
    gate_up: Vec<f32>,
    act: Vec<f32>,
}

/// Every buffer of a step; sized by [`fit`], which only ever grows them.
#[derive(Default)]
struct Workspace {
    /// RoPE tables for `rope_len` positions.
    rope_len: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// The residual stream entering each block, and leaving the last: `layers + 1` of `[n, d]`.
    resid: Vec<Vec<f32>>,
    layers: Vec<LayerActs>,
    /// The scored rows: gathered, `1 / rms`, normed, and logits (then their gradient).
    rows_x: Vec<f32>,
    rows_r: Vec<f32>,
    rows_h: Vec<f32>,
    logits: Vec<f32>,
    // Gradients flowing backward, reused by every block.
    dx: Vec<f32>,
    dh: Vec<f32>,
    d_act: Vec<f32>,
    d_gate_up: Vec<f32>,
    d_attn: Vec<f32>,
    d_qkv: Vec<f32>,
    /// One `[len, len]` attention-gradient scratch per sequence.
    d_scores: Vec<f32>,
    d_rows_x: Vec<f32>,
    d_rows_h: Vec<f32>,
    d_bias: Vec<f32>,
}

/// Resizes `buffer` to `n` values; its capacity never shrinks, so a buffer that has held a
/// bigger batch is reused without allocating.
fn fit(buffer: &mut Vec<f32>, n: usize) {
    buffer.resize(n, 0.0);
}

/// A batch's objective and per-row numbers, as [`super::model::Scored`] reports them.
#[derive(Debug, Clone)]
pub struct BatchScores {
    /// `sum(weight * cross_entropy)` over the masked rows.
    pub loss: f32,
    pub ce: Vec<f32>,
    pub correct: Vec<bool>,
}

/// The model's weights, their gradients and the activations of a step, as flat buffers.
pub struct CpuModel {
    config: ModelConfig,
    attention: AttentionPattern,
    names: Vec<String>,
    decay: Vec<bool>,
    weights: Vec<Vec<f32>>,
    grads: Vec<Vec<f32>>,
    embed: usize,
    norm: usize,
    /// The embeddings' index when the head is tied.
    head: usize,
    layers: Vec<LayerIndex>,
    work: Workspace,
}

impl CpuModel {
    /// Copies `model`'s parameters (same names, order and shapes as [`TrainModel::params`]).
    pub fn new(model: &TrainModel) -> Result<CpuModel> {
        let params = model.params();
        let names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
        let find = |name: &str| {
            names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::MissingTensor {
                    name: name.into(),
                    searched: "the training model's parameters".into(),
                })
        };
        let config = model.config().clone();
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let get = |name: &str| find(&format!("model.layers.{i}.{name}"));
                Ok(LayerIndex {
                    input_norm: get("input_layernorm.weight")?,
                    q: get("self_attn.q_proj.weight")?,
                    k: get("self_attn.k_proj.weight")?,
                    v: get("self_attn.v_proj.weight")?,
                    q_bias: get("self_attn.q_proj.bias")?,
                    k_bias: get("self_attn.k_proj.bias")?,
                    v_bias: get("self_attn.v_proj.bias")?,
                    o: get("self_attn.o_proj.weight")?,
                    post_norm: get("post_attention_layernorm.weight")?,
                    gate: get("mlp.gate_proj.weight")?,
                    up: get("mlp.up_proj.weight")?,
                    down: get("mlp.down_proj.weight")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let embed = find("model.embed_tokens.weight")?;
        let head = if config.tie_word_embeddings {
            embed
        } else {
            find("lm_head.weight")?
        };
        let weights = params
            .iter()
            .map(|p| Ok(p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?))
            .collect::<Result<Vec<_>>>()?;
        Ok(CpuModel {
            grads: weights.iter().map(|w| vec![0.0; w.len()]).collect(),
            decay: params.iter().map(|p| p.decay).collect(),
            norm: find("model.norm.weight")?,
            attention: model.attention(),
            config,
            names,
            weights,
            embed,
            head,
            layers,
            work: Workspace::default(),
        })
    }

    /// Parameter names, in [`TrainModel::params`] order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn weights(&self) -> &[Vec<f32>] {
        &self.weights
    }

    /// The gradients of the last [`CpuModel::score`] with `backward`.
    pub fn grads(&self) -> &[Vec<f32>] {
        &self.grads
    }

    /// Copies the weights into `model`'s variables (before a checkpoint or an export).
    pub fn write_to(&self, model: &TrainModel) -> Result<()> {
        model.set_weights(&self.weights)
    }

    /// Clips and applies one AdamW update to the weights in place, from the last gradients.
    pub fn step(&mut self, optim: &mut AdamW, lr: f64) -> TrainResult<UpdateReport> {
        optim.step_flat(&mut self.weights, &self.grads, &self.decay, lr)
    }

    fn check(&self, batch: &Batch) -> Result<()> {
        let (b, len, vocab) = (batch.batch, batch.len, self.config.vocab_size);
        let bad = |message: String| Err(Error::InvalidRequest(message));
        if b == 0 || len == 0 {
            return bad(format!("cannot score an empty {b}x{len} batch"));
        }
        if batch.input.len() != b * len || batch.lens.len() != b {
            return bad(format!(
                "{} tokens and {} lengths for a {b}x{len} batch",
                batch.input.len(),
                batch.lens.len()
            ));
        }
        if let Some(l) = batch.lens.iter().find(|&&l| l > len) {
            return bad(format!(
                "a sequence of {l} tokens in a batch of length {len}"
            ));
        }
        let m = batch.rows.len();
        if batch.targets.len() != m || batch.weights.len() != m {
            return bad(format!(
                "{m} rows, {} targets and {} weights",
                batch.targets.len(),
                batch.weights.len()
            ));
        }
        if let Some(r) = batch.rows.iter().find(|&&r| r as usize >= b * len) {
            return bad(format!("row {r} outside a {b}x{len} batch"));
        }
        if let Some(t) = batch
            .input
            .iter()
            .chain(&batch.targets)
            .find(|&&t| t as usize >= vocab)
        {
            return bad(format!("token id {t} outside the vocabulary of {vocab}"));
        }
        Ok(())
    }

    /// The masked-diffusion objective of `batch`; with `backward`, also every parameter's
    /// gradient (read them with [`CpuModel::grads`], apply them with [`CpuModel::step`]).
    pub fn score(&mut self, batch: &Batch, backward: bool) -> Result<BatchScores> {
        self.check(batch)?;
        self.forward(batch)?;
        let (m, vocab) = (batch.rows.len(), self.config.vocab_size);
        let mut ce = vec![0f32; m];
        let mut correct = vec![false; m];
        if m > 0 {
            kernels::cross_entropy(
                &mut self.work.logits[..m * vocab],
                &batch.targets,
                &batch.weights,
                &mut ce,
                &mut correct,
                vocab,
                backward,
            );
        }
        let loss = ce.iter().zip(&batch.weights).map(|(c, w)| c * w).sum();
        if backward {
            self.backward(batch)?;
        }
        Ok(BatchScores { loss, ce, correct })
    }

    fn forward(&mut self, batch: &Batch) -> Result<()> {
        let Dims {
            b,
            len,
            n,
            d,
            heads,
            kv_heads,
            hd,
            ffn,
            vocab,
            q_width,
            kv_width,
            width,
            group,
            scale,
        } = Dims::new(&self.config, batch);
        let eps = self.config.rms_norm_eps as f32;
        let pattern = self.attention;
        let w = &self.weights;
        let work = &mut self.work;
        if work.rope_len != len {
            (work.cos, work.sin) =
                super::model::rope_table_values(self.config.rope_theta(), hd, len);
            work.rope_len = len;
        }
        let rope = Rope {
            heads,
            kv_heads,
            head_dim: hd,
            len,
            cos: &work.cos,
            sin: &work.sin,
        };
        work.resid.resize_with(self.layers.len() + 1, Vec::new);
        work.layers
            .resize_with(self.layers.len(), LayerActs::default);
        for r in &mut work.resid {
            fit(r, n * d);
        }
        let embed = &w[self.embed];
        work.resid[0]
            .par_chunks_mut(d)
            .zip(&batch.input)
            .for_each(|(x, &t)| x.copy_from_slice(&embed[t as usize * d..(t as usize + 1) * d]));
        for (l, (idx, acts)) in self.layers.iter().zip(&mut work.layers).enumerate() {
            let (before, after) = work.resid.split_at_mut(l + 1);
            let (x, out) = (&before[l], &mut after[0]);
            for (buf, size) in [
                (&mut acts.r1, n),
                (&mut acts.h1, n * d),
                (&mut acts.qkv, n * width),
                (&mut acts.probs, b * heads * len * len),
                (&mut acts.attn, n * q_width),
                (&mut acts.mid, n * d),
                (&mut acts.r2, n),
                (&mut acts.h2, n * d),
                (&mut acts.gate_up, n * 2 * ffn),
                (&mut acts.act, n * ffn),
            ] {
                fit(buf, size);
            }
            kernels::rms_norm(x, &w[idx.input_norm], eps, &mut acts.h1, &mut acts.r1);
            for (param, offset, rows) in [
                (idx.q, 0, q_width),
                (idx.k, q_width, kv_width),
                (idx.v, q_width + kv_width, kv_width),
            ] {
                matmul(
                    MatMut::at(&mut acts.qkv, offset, n, rows, width),
                    Mat::rows(&acts.h1, n, d),
                    Mat::rows(&w[param], rows, d).t(),
                    false,
                    1.0,
                    Threads::Pool,
                )?;
            }
            rope.forward(
                &mut acts.qkv,
                [&w[idx.q_bias], &w[idx.k_bias], &w[idx.v_bias]],
            );
            let qkv = &acts.qkv;
            acts.attn
                .par_chunks_mut(len * q_width)
                .zip(acts.probs.par_chunks_mut(heads * len * len))
                .zip(&batch.lens)
                .enumerate()
                .try_for_each(|(s, ((out, probs), &keys))| -> Result<()> {
                    let base = s * len * width;
                    for (h, p) in probs.chunks_mut(len * len).enumerate() {
                        let kv = h / group;
                        matmul(
                            MatMut::at(p, 0, len, keys, len),
                            Mat::at(qkv, base + h * hd, len, hd, width),
                            Mat::at(qkv, base + q_width + kv * hd, keys, hd, width).t(),
                            false,
                            scale,
                            Threads::One,
                        )?;
                        kernels::masked_softmax(p, len, keys, pattern);
                        matmul(
                            MatMut::at(out, h * hd, len, hd, q_width),
                            Mat::at(p, 0, len, keys, len),
                            Mat::at(qkv, base + q_width + kv_width + kv * hd, keys, hd, width),
                            false,
                            1.0,
                            Threads::One,
                        )?;
                    }
                    Ok(())
                })?;
            acts.mid.copy_from_slice(x);
            matmul(
                MatMut::rows(&mut acts.mid, n, d),
                Mat::rows(&acts.attn, n, q_width),
                Mat::rows(&w[idx.o], d, q_width).t(),
                true,
                1.0,
                Threads::Pool,
            )?;
            kernels::rms_norm(
                &acts.mid,
                &w[idx.post_norm],
                eps,
                &mut acts.h2,
                &mut acts.r2,
            );
            for (param, offset) in [(idx.gate, 0), (idx.up, ffn)] {
                matmul(
                    MatMut::at(&mut acts.gate_up, offset, n, ffn, 2 * ffn),
                    Mat::rows(&acts.h2, n, d),
                    Mat::rows(&w[param], ffn, d).t(),
                    false,
                    1.0,
                    Threads::Pool,
                )?;
            }
            par_swiglu_rows(&acts.gate_up, &mut acts.act, ffn);
            out.copy_from_slice(&acts.mid);
            matmul(
                MatMut::rows(out, n, d),
                Mat::rows(&acts.act, n, ffn),
                Mat::rows(&w[idx.down], d, ffn).t(),
                true,
                1.0,
                Threads::Pool,
            )?;
        }
        // Only the scored rows go through the final norm and the head.
        let m = batch.rows.len();
        fit(&mut work.rows_x, m * d);
        fit(&mut work.rows_r, m);
        fit(&mut work.rows_h, m * d);
        fit(&mut work.logits, m * vocab);
        let last = &work.resid[self.layers.len()];
        for (dst, &r) in work.rows_x.chunks_mut(d).zip(&batch.rows) {
            dst.copy_from_slice(&last[r as usize * d..(r as usize + 1) * d]);
        }
        kernels::rms_norm(
            &work.rows_x,
            &w[self.norm],
            eps,
            &mut work.rows_h,
            &mut work.rows_r,
        );
        matmul(
            MatMut::rows(&mut work.logits, m, vocab),
            Mat::rows(&work.rows_h, m, d),
            Mat::rows(&w[self.head], vocab, d).t(),
            false,
            1.0,
            Threads::Pool,
        )
    }

    /// Back-propagates the gradient the cross-entropy left in the logits buffer.
    fn backward(&mut self, batch: &Batch) -> Result<()> {
        let Dims {
            b,
            len,
            n,
            d,
            heads,
            kv_heads,
            hd,
            ffn,
            vocab,
            q_width,
            kv_width,
            width,
            group,
            scale,
        } = Dims::new(&self.config, batch);
        let m = batch.rows.len();
        let pattern = self.attention;
        let w = &self.weights;
        let grads = &mut self.grads;
        let work = &mut self.work;
        for g in grads.iter_mut() {
            g.fill(0.0);
        }
        for (buf, size) in [
            (&mut work.dx, n * d),
            (&mut work.dh, n * d),
            (&mut work.d_act, n * ffn),
            (&mut work.d_gate_up, n * 2 * ffn),
            (&mut work.d_attn, n * q_width),
            (&mut work.d_qkv, n * width),
            (&mut work.d_scores, b * len * len),
            (&mut work.d_rows_x, m * d),
            (&mut work.d_rows_h, m * d),
            (&mut work.d_bias, width),
        ] {
            fit(buf, size);
        }
        let rope = Rope {
            heads,
            kv_heads,
            head_dim: hd,
            len,
            cos: &work.cos,
            sin: &work.sin,
        };
        // The head (the embeddings' gradient when tied) and the final norm.
        matmul(
            MatMut::rows(&mut grads[self.head], vocab, d),
            Mat::rows(&work.logits, m, vocab).t(),
            Mat::rows(&work.rows_h, m, d),
            true,
            1.0,
            Threads::Pool,
        )?;
        matmul(
            MatMut::rows(&mut work.d_rows_h, m, d),
            Mat::rows(&work.logits, m, vocab),
            Mat::rows(&w[self.head], vocab, d),
            false,
            1.0,
            Threads::Pool,
        )?;
        work.d_rows_x.fill(0.0);
        kernels::rms_norm_backward(
            &work.rows_x,
            &w[self.norm],
            &work.rows_r,
            &work.d_rows_h,
            &mut work.d_rows_x,
            &mut grads[self.norm],
        );
        let dx = &mut work.dx;
        dx.fill(0.0);
        kernels::add_rows_at(&work.d_rows_x, &batch.rows, dx, d);
        for (l, (idx, acts)) in self.layers.iter().zip(&work.layers).enumerate().rev() {
            // dx holds the gradient of the block's output. The MLP:
            linear_backward(
                Mat::rows(dx, n, d),
                Mat::rows(&acts.act, n, ffn),
                Mat::rows(&w[idx.down], d, ffn),
                MatMut::rows(&mut grads[idx.down], d, ffn),
                MatMut::rows(&mut work.d_act, n, ffn),
                false,
            )?;
            kernels::swiglu_backward(&acts.gate_up, &work.d_act, &mut work.d_gate_up, ffn);
            for (i, (param, offset)) in [(idx.gate, 0), (idx.up, ffn)].into_iter().enumerate() {
                linear_backward(
                    Mat::at(&work.d_gate_up, offset, n, ffn, 2 * ffn),
                    Mat::rows(&acts.h2, n, d),
                    Mat::rows(&w[param], ffn, d),
                    MatMut::rows(&mut grads[param], ffn, d),
                    MatMut::rows(&mut work.dh, n, d),
                    i > 0,
                )?;
            }
            kernels::rms_norm_backward(
                &acts.mid,
                &w[idx.post_norm],
                &acts.r2,
                &work.dh,
                dx,
                &mut grads[idx.post_norm],
            );
            // dx now holds the gradient of the residual after attention.
            linear_backward(
                Mat::rows(dx, n, d),
                Mat::rows(&acts.attn, n, q_width),
                Mat::rows(&w[idx.o], d, q_width),
                MatMut::rows(&mut grads[idx.o], d, q_width),
                MatMut::rows(&mut work.d_attn, n, q_width),
                false,
            )?;
            let (qkv, probs, d_attn) = (&acts.qkv, &acts.probs, &work.d_attn);
            work.d_qkv
                .par_chunks_mut(len * width)
                .zip(work.d_scores.par_chunks_mut(len * len))
                .zip(&batch.lens)
                .enumerate()
                .try_for_each(|(s, ((d_qkv, ds), &keys))| -> Result<()> {
                    d_qkv.fill(0.0);
                    let (base, out_base) = (s * len * width, s * len * q_width);
                    for h in 0..heads {
                        let kv = h / group;
                        let (k_col, v_col) = (q_width + kv * hd, q_width + kv_width + kv * hd);
                        let p = Mat::at(probs, (s * heads + h) * len * len, len, keys, len);
                        let d_out = Mat::at(d_attn, out_base + h * hd, len, hd, q_width);
                        matmul(
                            MatMut::at(ds, 0, len, keys, len),
                            d_out,
                            Mat::at(qkv, base + v_col, keys, hd, width).t(),
                            false,
                            1.0,
                            Threads::One,
                        )?;
                        matmul(
                            MatMut::at(d_qkv, v_col, keys, hd, width),
                            p.t(),
                            d_out,
                            true,
                            1.0,
                            Threads::One,
                        )?;
                        let p_rows = &probs[(s * heads + h) * len * len..][..len * len];
                        kernels::softmax_backward(p_rows, ds, len, keys, pattern);
                        let d_scores = Mat::at(ds, 0, len, keys, len);
                        matmul(
                            MatMut::at(d_qkv, h * hd, len, hd, width),
                            d_scores,
                            Mat::at(qkv, base + k_col, keys, hd, width),
                            false,
                            scale,
                            Threads::One,
                        )?;
                        matmul(
                            MatMut::at(d_qkv, k_col, keys, hd, width),
                            d_scores.t(),
                            Mat::at(qkv, base + h * hd, len, hd, width),
                            true,
                            scale,
                            Threads::One,
                        )?;
                    }
                    rope.backward(d_qkv, s * len);
                    Ok(())
                })?;
            work.d_bias.fill(0.0);
            kernels::add_column_sums(&work.d_qkv, &mut work.d_bias);
            let mut offset = 0;
            for (i, (param, bias, rows)) in [
                (idx.q, idx.q_bias, q_width),
                (idx.k, idx.k_bias, kv_width),
                (idx.v, idx.v_bias, kv_width),
            ]
            .into_iter()
            .enumerate()
            {
                grads[bias].copy_from_slice(&work.d_bias[offset..offset + rows]);
                linear_backward(
                    Mat::at(&work.d_qkv, offset, n, rows, width),
                    Mat::rows(&acts.h1, n, d),
                    Mat::rows(&w[param], rows, d),
                    MatMut::rows(&mut grads[param], rows, d),
                    MatMut::rows(&mut work.dh, n, d),
                    i > 0,
                )?;
                offset += rows;
            }
            kernels::rms_norm_backward(
                &work.resid[l],
                &w[idx.input_norm],
                &acts.r1,
                &work.dh,
                dx,
                &mut grads[idx.input_norm],
            );
        }
        // dx is now the embeddings' output gradient: add each row to its token's embedding.
        let d_embed = &mut grads[self.embed];
        kernels::add_rows_at(dx, &batch.input, d_embed, d);
        Ok(())
    }
}

/// The backward of a projection `y = x w^T` (`x` `[n, k]`, `w` `[m, k]`, `dy` `[n, m]`):
/// `dw += dy^T x`, and `dx = dy w`, added to what `dx` holds when `accumulate_dx` (the
/// projections that read the same input: gate/up, q/k/v).
fn linear_backward(
    dy: Mat<'_>,
    x: Mat<'_>,
    w: Mat<'_>,
    dw: MatMut<'_>,
    dx: MatMut<'_>,
    accumulate_dx: bool,
) -> Result<()> {
    matmul(dw, dy.t(), x, true, 1.0, Threads::Pool)?;
    matmul(dx, dy, w, accumulate_dx, 1.0, Threads::Pool)
}

/// The sizes a step works with, from the model's config and the batch's shape.
struct Dims {
    b: usize,
    len: usize,
    /// Token rows in the batch (`b * len`).
    n: usize,
    d: usize,
    heads: usize,
    kv_heads: usize,
    hd: usize,
    ffn: usize,
    vocab: usize,
    /// Widths of the q and of the k (= v) projections, and of the packed `q | k | v` rows.
    q_width: usize,
    kv_width: usize,
    width: usize,
    /// Query heads per key head.
    group: usize,
    /// `1 / sqrt(head_dim)`.
    scale: f32,
}

impl Dims {
    fn new(cfg: &ModelConfig, batch: &Batch) -> Dims {
        let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.num_kv_heads(), cfg.head_dim());
        Dims {
            b: batch.batch,
            len: batch.len,
            n: batch.batch * batch.len,
            d: cfg.hidden_size,
            heads,
            kv_heads,
            hd,
            ffn: cfg.intermediate_size,
            vocab: cfg.vocab_size,
            q_width: heads * hd,
            kv_width: kv_heads * hd,
            width: (heads + 2 * kv_heads) * hd,
            group: heads / kv_heads,
            scale: (1.0 / (hd as f64).sqrt()) as f32,
        }
    }
}
