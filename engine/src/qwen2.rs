//! Qwen2: the layout of Dream, Dream-Coder, DiffuCoder, DreamOn and Open-dCoder, and of the
//! autoregressive Qwen2.5(-Coder) they were adapted from. Follows Hugging Face `transformers`'
//! `modeling_qwen2.py` (RMSNorm, RoPE with `rotate_half`, grouped-query attention with q/k/v
//! biases, SwiGLU MLP, tied or untied head), run with a full (non-causal) attention mask as
//! masked-diffusion models are, or block-causal / causal ([`AttentionPattern`]).
//!
//! Inference-only: it uses fused ops without a backward pass (candle's `rms_norm`, and
//! attention, bias + RoPE and SwiGLU from [`crate::ops`]: its CPU kernels on CPU, their
//! [`crate::ops::portable`] compositions on other devices). Projections are stored
//! pre-transposed (`[in, out]`) and fused (q|k|v and gate|up), so a layer is four matmuls.
//!
//! Three kinds of pass ([`Pass`]), each returning logits only for the `window` of positions
//! the caller asks for (`qwen2/forward.rs`):
//! - [`Pass::Full`] runs every position and can fill a [`ContextCache`] with each layer's
//!   keys/values;
//! - [`Pass::Window`] recomputes only the window (the canvas), attending to cached keys/values
//!   for every other position (Fast-dLLM's approximate dual cache);
//! - [`Pass::Realign`] realigns a cache with tokens changed by an edit and recomputes only around
//!   the changes and the window (`qwen2/realign.rs`).
//!
//! This file builds the model from its weights and is its [`Denoiser`]; RoPE's tables are in
//! `qwen2/rope.rs`.

use std::ops::Range;

use candle_core::{Device, Tensor};

use crate::cache::ContextCache;
use crate::checkpoint::Weights;
use crate::config::{AttentionPattern, ModelConfig};
use crate::error::Result;
use crate::linear::{Embedding, Linear};
use crate::ops::Kernels;
use crate::sampler::{Denoiser, ModelCall, Pass, Realign};

mod forward;
mod realign;
mod rope;

use rope::Rope;

struct Layer {
    input_norm: Tensor,
    qkv: Linear,
    qkv_bias: Vec<f32>,
    /// The same bias as a tensor on the model's device (for [`Kernels::Portable`]).
    qkv_bias_tensor: Tensor,
    o: Linear,
    post_norm: Tensor,
    gate_up: Linear,
    down: Linear,
}

/// The model.
pub struct Qwen2 {
    config: ModelConfig,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Linear,
    /// Bytes of weights held (quantized ones in their blocks).
    weight_bytes: usize,
    rope: Rope,
    device: Device,
    kernels: Kernels,
    attention: AttentionPattern,
}

impl Qwen2 {
    /// Builds the model from checkpoint weights (tensor names as in `transformers`). Quantized
    /// projections stay quantized ([`Linear`]).
    pub fn new(config: &ModelConfig, weights: &Weights, device: &Device) -> Result<Qwen2> {
        let (d, v) = (config.hidden_size, config.vocab_size);
        let hd = config.head_dim();
        let (q_out, kv_out) = (config.num_attention_heads * hd, config.num_kv_heads() * hd);
        let ffn = config.intermediate_size;
        let embed = Embedding::new(weights.stored("model.embed_tokens.weight", &[v, d])?);
        // Grown as layers are built, not sized from the config: a count the checkpoint does
        // not back with tensors ends at the first missing one, not in an allocation.
        let mut layers = Vec::new();
        for i in 0..config.num_hidden_layers {
            let p = format!("model.layers.{i}");
            let get = |name: &str, shape: &[usize]| weights.get(&format!("{p}.{name}"), shape);
            let stored =
                |name: &str, shape: &[usize]| weights.stored(&format!("{p}.{name}"), shape);
            let qkv = Linear::fused(
                &[
                    stored("self_attn.q_proj.weight", &[q_out, d])?,
                    stored("self_attn.k_proj.weight", &[kv_out, d])?,
                    stored("self_attn.v_proj.weight", &[kv_out, d])?,
                ],
                device,
            )?;
            // A model without q/k/v biases (LLaDA) adds zeros: in the pass that applies RoPE
            // (`ops::bias_rope_`), which reads and writes every row anyway; one code path.
            let bias = |name: &str, n: usize| {
                if config.qkv_bias() {
                    get(name, &[n])
                } else {
                    Ok(Tensor::zeros(n, candle_core::DType::F32, device)?)
                }
            };
            let qb = bias("self_attn.q_proj.bias", q_out)?;
            let kb = bias("self_attn.k_proj.bias", kv_out)?;
            let vb = bias("self_attn.v_proj.bias", kv_out)?;
            let gate_up = Linear::fused(
                &[
                    stored("mlp.gate_proj.weight", &[ffn, d])?,
                    stored("mlp.up_proj.weight", &[ffn, d])?,
                ],
                device,
            )?;
            let qkv_bias_tensor = Tensor::cat(&[&qb, &kb, &vb], 0)?;
            layers.push(Layer {
                input_norm: get("input_layernorm.weight", &[d])?,
                qkv,
                qkv_bias: qkv_bias_tensor.to_vec1()?,
                qkv_bias_tensor,
                o: Linear::fused(&[stored("self_attn.o_proj.weight", &[d, q_out])?], device)?,
                post_norm: get("post_attention_layernorm.weight", &[d])?,
                gate_up,
                down: Linear::fused(&[stored("mlp.down_proj.weight", &[d, ffn])?], device)?,
            });
        }
        let norm = weights.get("model.norm.weight", &[d])?;
        let lm_head = if config.tie_word_embeddings && !weights.contains("lm_head.weight") {
            embed.as_head(device)?
        } else {
            Linear::fused(&[weights.stored("lm_head.weight", &[v, d])?], device)?
        };
        // A tied quantized head multiplies by the embedding's own blocks (unless they were
        // Q5_0, which runs as a Q8_0 copy); a dense one is a transposed copy.
        let tied = config.tie_word_embeddings && !weights.contains("lm_head.weight");
        let shared = tied && embed.shares_blocks_with_head(device);
        let vector = |t: &Tensor| t.elem_count() * 4;
        let weight_bytes = embed.bytes()
            + if shared { 0 } else { lm_head.bytes() }
            + vector(&norm)
            + layers
                .iter()
                .map(|l| {
                    l.qkv.bytes()
                        + l.o.bytes()
                        + l.gate_up.bytes()
                        + l.down.bytes()
                        + vector(&l.input_norm)
                        + vector(&l.post_norm)
                        + l.qkv_bias.len() * 4
                })
                .sum::<usize>();
        Ok(Qwen2 {
            config: config.clone(),
            embed,
            layers,
            norm,
            lm_head,
            weight_bytes,
            rope: Rope::new(config.rope_theta(), hd),
            device: device.clone(),
            kernels: Kernels::for_device(device),
            attention: AttentionPattern::Bidirectional,
        })
    }

    /// The model attending as `pattern` says (bidirectional unless set).
    pub fn with_attention(mut self, pattern: AttentionPattern) -> Qwen2 {
        self.attention = pattern;
        self
    }

    pub fn attention(&self) -> AttentionPattern {
        self.attention
    }

    /// Bytes of weights the model was built from (quantized ones in their blocks).
    pub fn weight_bytes(&self) -> usize {
        self.weight_bytes
    }

    /// Whether any projection is quantized.
    pub fn is_quantized(&self) -> bool {
        self.lm_head.is_quantized() || self.layers.iter().any(|l| l.qkv.is_quantized())
    }

    /// The model running `kernels` instead of the ones its device calls for. Only the CPU
    /// runs [`Kernels::Cpu`]; [`Kernels::Portable`] runs anywhere (tests hold the two paths to
    /// each other on CPU).
    pub fn with_kernels(mut self, kernels: Kernels) -> Result<Qwen2> {
        kernels.check(&self.device)?;
        self.kernels = kernels;
        Ok(self)
    }

    pub fn kernels(&self) -> Kernels {
        self.kernels
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl Denoiser for Qwen2 {
    type Cache = ContextCache;

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut ContextCache,
        pass: Pass,
    ) -> Result<Vec<f32>> {
        Ok(self
            .forward(tokens, window, cache, pass)?
            .flatten_all()?
            .to_vec1()?)
    }

    fn logits_many(&self, calls: &mut [ModelCall<'_, ContextCache>]) -> Result<Vec<Vec<f32>>> {
        Ok(self
            .logits_many_unless(calls, &|| false)?
            .expect("a call nothing stops runs to its end"))
    }

    fn logits_many_unless(
        &self,
        calls: &mut [ModelCall<'_, ContextCache>],
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Vec<f32>>>> {
        let Some(logits) = self.forward_many_unless(calls, stop)? else {
            return Ok(None);
        };
        logits
            .iter()
            .map(|logits| Ok(logits.flatten_all()?.to_vec1()?))
            .collect::<Result<_>>()
            .map(Some)
    }

    fn cache_covers(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
    ) -> bool {
        cache.covers(tokens, window)
    }

    fn cache_realigns(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
        reuse: Realign,
    ) -> bool {
        cache.approximate_passes < reuse.refresh_after
            && self
                .realignment(cache, tokens, window, reuse.radius)
                .is_some_and(|plan| plan.drifted > 0)
    }

    fn stored_prefix(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
    ) -> Option<usize> {
        self.attention
            .block()
            .map(|_| self.reusable_prefix(cache, tokens, window))
    }
}

/// Freshly initialised weights for `config` under checkpoint names (normal, std 0.02; norms at 1,
/// biases at 0), seeded. For benchmarks and as the starting point of training.
pub fn init_weights(
    config: &ModelConfig,
    seed: u64,
) -> Result<std::collections::HashMap<String, Tensor>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let device = Device::Cpu;
    let mut normal = |shape: &[usize]| -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| {
                // Box-Muller: one standard normal from two uniforms.
                let (u1, u2): (f32, f32) = (rng.random::<f32>().max(1e-12), rng.random());
                0.02 * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect();
        Ok(Tensor::from_vec(data, shape, &device)?)
    };
    let (d, v, ffn) = (
        config.hidden_size,
        config.vocab_size,
        config.intermediate_size,
    );
    let hd = config.head_dim();
    let (q_out, kv_out) = (config.num_attention_heads * hd, config.num_kv_heads() * hd);
    let mut w = std::collections::HashMap::new();
    w.insert("model.embed_tokens.weight".to_string(), normal(&[v, d])?);
    for i in 0..config.num_hidden_layers {
        let p = format!("model.layers.{i}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", vec![q_out, d]),
            ("self_attn.k_proj.weight", vec![kv_out, d]),
            ("self_attn.v_proj.weight", vec![kv_out, d]),
            ("self_attn.o_proj.weight", vec![d, q_out]),
            ("mlp.gate_proj.weight", vec![ffn, d]),
            ("mlp.up_proj.weight", vec![ffn, d]),
            ("mlp.down_proj.weight", vec![d, ffn]),
        ] {
            w.insert(format!("{p}.{name}"), normal(&shape)?);
        }
        for (name, n) in [
            ("self_attn.q_proj.bias", q_out),
            ("self_attn.k_proj.bias", kv_out),
            ("self_attn.v_proj.bias", kv_out),
        ] {
            w.insert(
                format!("{p}.{name}"),
                Tensor::zeros(n, candle_core::DType::F32, &device)?,
            );
        }
        for name in ["input_layernorm.weight", "post_attention_layernorm.weight"] {
            w.insert(
                format!("{p}.{name}"),
                Tensor::ones(d, candle_core::DType::F32, &device)?,
            );
        }
    }
    w.insert(
        "model.norm.weight".to_string(),
        Tensor::ones(d, candle_core::DType::F32, &device)?,
    );
    if !config.tie_word_embeddings {
        w.insert("lm_head.weight".to_string(), normal(&[v, d])?);
    }
    Ok(w)
}
