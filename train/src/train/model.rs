//! The differentiable Qwen2 that training runs: the same architecture as [`redraft_engine::qwen2::Qwen2`]
//! (checkpoint tensor names, RMSNorm, RoPE with `rotate_half`, grouped-query attention with
//! q/k/v biases, SwiGLU, tied or untied head, bidirectional, block-causal or causal attention
//! as [`AttentionPattern`] says) built only from ops that have a backward pass.
//!
//! Why not reuse the inference model: it calls candle-nn's fused `rms_norm`, `rotary_emb::rope`
//! and `redraft_engine::ops`' kernels, none of which has a backward, so gradients would silently stop at
//! the head. Here RMSNorm, softmax and SwiGLU are the fused ops of [`fused`] on CPU (each with its
//! own backward, tested against the composed formulas) and those [`fused::composed`] formulas on
//! other devices (CUDA); RoPE is `x * cos + rotate_half(x) * sin`.
//! `every_parameter_gets_a_gradient`
//! and `training_forward_matches_inference_logits` in `train/tests.rs` keep it that way.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var, D};

use super::examples::Batch;
use crate::train::fused;
use redraft_engine::config::{AttentionPattern, ModelConfig};
use redraft_engine::ops::Kernels;
use redraft_engine::{Error, Result};

/// One trainable tensor under its checkpoint name.
pub struct Param {
    pub name: String,
    pub var: Var,
    /// AdamW weight decay applies (projection matrices; not norms, biases or embeddings).
    pub decay: bool,
}

struct LayerParams {
    input_norm: Var,
    q: Var,
    k: Var,
    v: Var,
    q_bias: Var,
    k_bias: Var,
    v_bias: Var,
    o: Var,
    post_norm: Var,
    gate: Var,
    up: Var,
    down: Var,
}

/// The model's trainable state plus RoPE tables.
pub struct TrainModel {
    config: ModelConfig,
    params: Vec<Param>,
    embed: Var,
    layers: Vec<LayerParams>,
    norm: Var,
    /// `None` when the head is tied to the embeddings.
    lm_head: Option<Var>,
    device: Device,
    /// [`Kernels::Cpu`]: the fused ops of [`fused`]; otherwise their [`fused::composed`] forms.
    kernels: Kernels,
    attention: AttentionPattern,
}

/// What a forward pass is asked for: token ids `[batch, len]` and the rows (flattened
/// `b * len + j`) whose logits are needed.
pub struct ForwardInput<'a> {
    pub tokens: &'a [u32],
    pub batch: usize,
    pub len: usize,
    /// Real length of each sequence; positions at or past it are padding, hidden from attention.
    pub lens: &'a [usize],
    pub rows: &'a [u32],
}

impl TrainModel {
    /// Wraps `tensors` (checkpoint names, as [`redraft_engine::qwen2::init_weights`] returns them) in
    /// variables, checking every name and shape the config implies.
    pub fn from_tensors(
        config: &ModelConfig,
        mut tensors: HashMap<String, Tensor>,
        device: &Device,
    ) -> Result<TrainModel> {
        let (d, v, ffn) = (
            config.hidden_size,
            config.vocab_size,
            config.intermediate_size,
        );
        let hd = config.head_dim();
        let (q_out, kv_out) = (config.num_attention_heads * hd, config.num_kv_heads() * hd);
        let mut params = Vec::new();
        let mut take = |name: String, shape: &[usize], decay: bool| -> Result<Var> {
            let tensor = tensors.remove(&name).ok_or_else(|| Error::MissingTensor {
                name: name.clone(),
                searched: "the weights given to the training model".into(),
            })?;
            if tensor.dims() != shape {
                return Err(Error::TensorShape {
                    name,
                    path: "<training weights>".into(),
                    expected: shape.to_vec(),
                    found: tensor.dims().to_vec(),
                });
            }
            let var = Var::from_tensor(&tensor.to_dtype(DType::F32)?.to_device(device)?)?;
            params.push(Param {
                name,
                var: var.clone(),
                decay,
            });
            Ok(var)
        };
        let embed = take("model.embed_tokens.weight".into(), &[v, d], false)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("model.layers.{i}");
            let mut get = |name: &str, shape: &[usize], decay: bool| {
                take(format!("{p}.{name}"), shape, decay)
            };
            layers.push(LayerParams {
                input_norm: get("input_layernorm.weight", &[d], false)?,
                q: get("self_attn.q_proj.weight", &[q_out, d], true)?,
                k: get("self_attn.k_proj.weight", &[kv_out, d], true)?,
                v: get("self_attn.v_proj.weight", &[kv_out, d], true)?,
                q_bias: get("self_attn.q_proj.bias", &[q_out], false)?,
                k_bias: get("self_attn.k_proj.bias", &[kv_out], false)?,
                v_bias: get("self_attn.v_proj.bias", &[kv_out], false)?,
                o: get("self_attn.o_proj.weight", &[d, q_out], true)?,
                post_norm: get("post_attention_layernorm.weight", &[d], false)?,
                gate: get("mlp.gate_proj.weight", &[ffn, d], true)?,
                up: get("mlp.up_proj.weight", &[ffn, d], true)?,
                down: get("mlp.down_proj.weight", &[d, ffn], true)?,
            });
        }
        let norm = take("model.norm.weight".into(), &[d], false)?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            // An untied head is a projection matrix like the others.
            Some(take("lm_head.weight".into(), &[v, d], true)?)
        };
        if let Some(extra) = tensors.keys().min() {
            return Err(Error::InvalidRequest(format!(
                "tensor `{extra}` is not part of a {}-layer model",
                config.num_hidden_layers
            )));
        }
        params.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(TrainModel {
            config: config.clone(),
            params,
            embed,
            layers,
            norm,
            lm_head,
            device: device.clone(),
            kernels: Kernels::for_device(device),
            attention: AttentionPattern::Bidirectional,
        })
    }

    /// The model attending as `pattern` (the inference model's [`AttentionPattern`]; blocks are
    /// counted from position 0) instead of bidirectionally.
    pub fn with_attention(mut self, pattern: AttentionPattern) -> TrainModel {
        self.attention = pattern;
        self
    }

    pub fn attention(&self) -> AttentionPattern {
        self.attention
    }

    /// The model training through `kernels` instead of the ones its device calls for (the
    /// composed ops run anywhere; the fused ones only on CPU).
    pub fn with_kernels(mut self, kernels: Kernels) -> Result<TrainModel> {
        kernels.check(&self.device)?;
        self.kernels = kernels;
        Ok(self)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    fn softmax_last_dim(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self.kernels {
            Kernels::Cpu => fused::softmax_last_dim(x)?,
            Kernels::Portable => fused::composed::softmax_last_dim(x)?,
        })
    }

    fn swiglu(&self, gate_up: &Tensor) -> Result<Tensor> {
        Ok(match self.kernels {
            Kernels::Cpu => fused::swiglu(gate_up)?,
            Kernels::Portable => fused::composed::swiglu(gate_up)?,
        })
    }

    /// `x * rsqrt(mean(x²) + eps) * w` over the last dimension.
    fn rms_norm(&self, x: &Tensor, weight: &Tensor) -> Result<Tensor> {
        let eps = self.config.rms_norm_eps;
        Ok(match self.kernels {
            Kernels::Cpu => fused::rms_norm(x, weight, eps)?,
            Kernels::Portable => fused::composed::rms_norm(x, weight, eps)?,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Every trainable tensor, sorted by name (the order the optimiser and checkpoints use).
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn num_parameters(&self) -> usize {
        self.params.iter().map(|p| p.var.elem_count()).sum()
    }

    /// Current values under checkpoint names, detached from the graph.
    pub fn tensors(&self) -> HashMap<String, Tensor> {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.var.as_detached_tensor()))
            .collect()
    }

    /// Replaces every parameter's value by `weights` (flat, in [`TrainModel::params`] order).
    pub fn set_weights(&self, weights: &[Vec<f32>]) -> Result<()> {
        if weights.len() != self.params.len() {
            return Err(Error::InvalidRequest(format!(
                "{} weight buffers for {} parameters",
                weights.len(),
                self.params.len()
            )));
        }
        for (p, w) in self.params.iter().zip(weights) {
            if w.len() != p.var.elem_count() {
                return Err(Error::InvalidRequest(format!(
                    "{} values for `{}` of shape {:?}",
                    w.len(),
                    p.name,
                    p.var.dims()
                )));
            }
            p.var
                .set(&Tensor::from_slice(w, p.var.shape(), &self.device)?)?;
        }
        Ok(())
    }

    /// Logits `[rows.len(), vocab]` for the requested rows. Attention follows the model's
    /// pattern; padding keys (past each sequence's length) are masked out, as in the inference
    /// model.
    pub fn forward(&self, input: &ForwardInput<'_>) -> Result<Tensor> {
        let cfg = &self.config;
        let (b, len) = (input.batch, input.len);
        if input.tokens.len() != b * len || input.lens.len() != b {
            return Err(Error::InvalidRequest(format!(
                "{} tokens and {} lengths for a {b}x{len} batch",
                input.tokens.len(),
                input.lens.len()
            )));
        }
        let vocab = cfg.vocab_size;
        if let Some(bad) = input.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::InvalidRequest(format!(
                "token id {bad} outside the vocabulary of {vocab}"
            )));
        }
        let ids = Tensor::from_slice(input.tokens, b * len, &self.device)?;
        let mut x = self.embed.as_tensor().embedding(&ids)?;
        let mask = attention_mask(self.attention, input.lens, len, &self.device)?;
        let (cos, sin) = rope_tables(cfg.rope_theta(), cfg.head_dim(), len, &self.device)?;
        for layer in &self.layers {
            x = self.layer_forward(layer, &x, b, len, &cos, &sin, mask.as_ref())?;
        }
        let rows = Tensor::from_slice(input.rows, input.rows.len(), &self.device)?;
        // The final norm is per row: only the rows whose logits are needed go through it and
        // the head (the head is the biggest matmul of a small model).
        let h = self.rms_norm(&x.index_select(&rows, 0)?, self.norm.as_tensor())?;
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        Ok(h.matmul(&head.as_tensor().t()?)?)
    }

    /// One block over `x` (`[b * len, d]`).
    #[allow(clippy::too_many_arguments)]
    fn layer_forward(
        &self,
        layer: &LayerParams,
        x: &Tensor,
        b: usize,
        len: usize,
        cos: &Tensor,
        sin: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let cfg = &self.config;
        let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.num_kv_heads(), cfg.head_dim());
        let h = self.rms_norm(x, layer.input_norm.as_tensor())?;
        // q|k|v in one matmul; the concatenation of the weights is small next to the matmul.
        let w_qkv = Tensor::cat(
            &[
                layer.q.as_tensor(),
                layer.k.as_tensor(),
                layer.v.as_tensor(),
            ],
            0,
        )?;
        let b_qkv = Tensor::cat(
            &[
                layer.q_bias.as_tensor(),
                layer.k_bias.as_tensor(),
                layer.v_bias.as_tensor(),
            ],
            0,
        )?;
        let qkv = h.matmul(&w_qkv.t()?)?.broadcast_add(&b_qkv)?.reshape((
            b,
            len,
            heads + 2 * kv_heads,
            hd,
        ))?;
        let split = |start: usize, n: usize| -> Result<Tensor> {
            Ok(qkv.narrow(2, start, n)?.transpose(1, 2)?.contiguous()?)
        };
        let q = rope(&split(0, heads)?, cos, sin)?;
        let k = rope(&split(heads, kv_heads)?, cos, sin)?;
        let v = split(heads + kv_heads, kv_heads)?;
        // Grouped-query attention: the query heads sharing a key head are folded into rows
        // (head h reads key head h / group, as transformers' `repeat_kv`).
        let group = heads / kv_heads;
        let scale = 1.0 / (hd as f64).sqrt();
        let q = (q.reshape((b, kv_heads, group * len, hd))? * scale)?;
        let mut scores = q.matmul(&k.t()?)?;
        if let Some(mask) = mask {
            // `[b, kv_heads, group, len, len]`: every query head of a group reads the mask of
            // its own position.
            scores = scores
                .reshape((b, kv_heads, group, len, len))?
                .broadcast_add(mask)?
                .reshape((b, kv_heads, group * len, len))?;
        }
        let probs = self.softmax_last_dim(&scores)?;
        let attn = probs
            .matmul(&v)?
            .reshape((b, heads, len, hd))?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b * len, heads * hd))?;
        let x = (x + attn.matmul(&layer.o.as_tensor().t()?)?)?;
        let h = self.rms_norm(&x, layer.post_norm.as_tensor())?;
        let w_gate_up = Tensor::cat(&[layer.gate.as_tensor(), layer.up.as_tensor()], 0)?;
        let gate_up = h.matmul(&w_gate_up.t()?)?;
        let act = self.swiglu(&gate_up)?;
        Ok((x + act.matmul(&layer.down.as_tensor().t()?)?)?)
    }
}

/// Natural-log softmax over the last dimension (the max is detached: it only keeps
/// `exp` in range and the result does not depend on it).
pub(crate) fn log_softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let shifted = x.broadcast_sub(&max)?;
    let log_sum = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    Ok(shifted.broadcast_sub(&log_sum)?)
}

/// `x * cos + rotate_half(x) * sin` for `x` `[b, heads, len, head_dim]`; `cos`, `sin` are
/// `[len, head_dim]` (each half-table repeated, as transformers builds them).
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let hd = x.dim(D::Minus1)?;
    let half = hd / 2;
    let rotated = Tensor::cat(
        &[
            &x.narrow(D::Minus1, half, half)?.neg()?,
            &x.narrow(D::Minus1, 0, half)?,
        ],
        D::Minus1,
    )?;
    Ok((x.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?)?)
}

/// RoPE tables `[len, head_dim]` as tensors (see [`rope_table_values`]).
fn rope_tables(
    theta: f64,
    head_dim: usize,
    len: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = rope_table_values(theta, head_dim, len);
    Ok((
        Tensor::from_vec(cos, (len, head_dim), device)?,
        Tensor::from_vec(sin, (len, head_dim), device)?,
    ))
}

/// RoPE tables `[len, head_dim]` computed exactly as the inference model does (inverse frequency
/// in f32 from an f64 power, the angle as an f32 product); the CPU training path uses the same.
pub(crate) fn rope_table_values(theta: f64, head_dim: usize, len: usize) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(len * head_dim);
    let mut sin = Vec::with_capacity(len * head_dim);
    for pos in 0..len {
        let angles: Vec<f32> = (0..half)
            .map(|i| pos as f32 * (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32)
            .collect();
        for _ in 0..2 {
            cos.extend(angles.iter().map(|a| a.cos()));
            sin.extend(angles.iter().map(|a| a.sin()));
        }
    }
    (cos, sin)
}

/// Additive `[b, 1, 1, len, len]` mask hiding, from the query at position `i` of a sequence of
/// `l` tokens, the keys past `pattern.visible_keys(i, l)` (padding, and the blocks after `i`'s);
/// `None` when it hides nothing.
fn attention_mask(
    pattern: AttentionPattern,
    lens: &[usize],
    len: usize,
    device: &Device,
) -> Result<Option<Tensor>> {
    if pattern == AttentionPattern::Bidirectional && lens.iter().all(|&l| l == len) {
        return Ok(None);
    }
    let mask: Vec<f32> = lens
        .iter()
        .flat_map(|&l| {
            (0..len).flat_map(move |i| {
                let visible = pattern.visible_keys(i, l);
                (0..len).map(move |j| if j < visible { 0.0 } else { f32::NEG_INFINITY })
            })
        })
        .collect();
    Ok(Some(Tensor::from_vec(
        mask,
        (lens.len(), 1, 1, len, len),
        device,
    )?))
}

/// A scored batch: the objective in the graph, and per-row numbers for reports.
pub struct Scored {
    /// `sum(weight * cross_entropy)` over the masked rows (a scalar; call `backward` on it).
    pub loss: Tensor,
    /// Cross-entropy of each masked row, in nats.
    pub ce: Vec<f32>,
    /// Whether the most likely token of each masked row is the right one.
    pub correct: Vec<bool>,
}

impl TrainModel {
    /// The masked-diffusion objective of `batch`.
    pub fn score(&self, batch: &Batch) -> Result<Scored> {
        let logits = self.forward(&ForwardInput {
            tokens: &batch.input,
            batch: batch.batch,
            len: batch.len,
            lens: &batch.lens,
            rows: &batch.rows,
        })?;
        let m = batch.rows.len();
        let targets = Tensor::from_slice(&batch.targets, (m, 1), &self.device)?;
        let ce = log_softmax_last_dim(&logits)?
            .gather(&targets, 1)?
            .squeeze(1)?
            .neg()?;
        let weights = Tensor::from_slice(&batch.weights, m, &self.device)?;
        let loss = (&ce * &weights)?.sum_all()?;
        let predicted = logits.detach().argmax(D::Minus1)?.to_vec1::<u32>()?;
        Ok(Scored {
            loss,
            ce: ce.detach().to_vec1()?,
            correct: predicted
                .iter()
                .zip(&batch.targets)
                .map(|(p, t)| p == t)
                .collect(),
        })
    }
}
