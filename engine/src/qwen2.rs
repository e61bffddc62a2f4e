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
//! Two passes, both returning logits only for the `window` of positions the caller asks for:
//! - [`Pass::Full`] runs every position and can fill a [`KvCache`] with each layer's keys/values;
//! - [`Pass::Window`] recomputes only the window (the canvas), attending to cached keys/values
//!   for every other position (Fast-dLLM's approximate dual cache);
//! - [`Pass::Edit`] realigns a cache with tokens changed by an edit and recomputes only around
//!   the changes and the window (`qwen2/realign.rs`).

use std::borrow::Cow;
use std::ops::Range;

use candle_core::{Device, Tensor};
use candle_nn::ops::rms_norm;

use crate::config::AttentionPattern;
use crate::ops::{attention, bias_rope_, portable, swiglu, HeadLayout, Kernels, Mask};

use crate::checkpoint::Weights;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::linear::{Embedding, Linear};
use crate::sampler::{Denoiser, EditReuse, ModelCall, Pass};

mod realign;

/// Per-layer keys and values (after RoPE; `[B, T, kv_heads * head_dim * 2]`, keys then values)
/// with the tokens they were computed from. A value the caller keeps: a later request over the
/// same context reuses it.
#[derive(Default)]
pub struct KvCache {
    layers: Vec<Tensor>,
    tokens: Vec<Vec<u32>>,
    /// Positions stored full passes took from the cache instead of computing (causal and
    /// block-causal models reuse the unchanged prefix of the last request), and edit passes
    /// kept (exact or not).
    reused_positions: usize,
    /// Leading positions of every sequence whose keys/values are exactly what a full pass over
    /// `tokens` computes (only causal and block-causal rows can be; a stored full pass makes
    /// all of them exact, an edit pass keeps what precedes its first change).
    exact_rows: usize,
    /// Edit passes since the last exact stored pass.
    approximate_passes: usize,
    /// Positions edit passes kept that were not exact (they attended to older tokens).
    drifted_positions: usize,
    /// `Some(p)`: rows at or past `p` were not computed (a causal pass stops at its window's
    /// block: nothing before reads them), so their keys/values are placeholders whatever the
    /// cached tokens say. Window passes moving on from `p` compute them.
    stopped_at: Option<usize>,
}

impl KvCache {
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
    fn mark_exact(&mut self) {
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

    /// Positions that stored full passes and edit passes over this cache took from it instead
    /// of computing.
    pub fn reused_positions(&self) -> usize {
        self.reused_positions
    }

    /// Positions edit passes took from this cache that were approximate (they had attended to
    /// tokens the edit changed).
    pub fn drifted_positions(&self) -> usize {
        self.drifted_positions
    }

    /// Edit passes made since the cache was last exact (a stored full pass).
    pub fn approximate_passes(&self) -> usize {
        self.approximate_passes
    }

    /// Bytes held by the cached keys and values.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|kv| kv.elem_count() * 4).sum()
    }
}

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

/// RoPE rotations (`[position, head_dim / 2]` cos and sin), precomputed for the usual
/// lengths and computed on demand past them.
struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
    theta: f64,
    head_dim: usize,
}

impl Rope {
    const PRECOMPUTED: usize = 4096;

    fn new(theta: f64, head_dim: usize) -> Rope {
        let (cos, sin) = Rope::tables(theta, head_dim, 0..Rope::PRECOMPUTED);
        Rope {
            cos,
            sin,
            theta,
            head_dim,
        }
    }

    fn tables(theta: f64, head_dim: usize, positions: Range<usize>) -> (Vec<f32>, Vec<f32>) {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for pos in positions {
            for i in 0..half {
                // Same as transformers: inv_freq in f32, the product in f32.
                let inv_freq = (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32;
                let angle = pos as f32 * inv_freq;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        (cos, sin)
    }

    /// The rotations for each of `spans`' positions, in order.
    fn at_spans(&self, spans: &[Range<usize>]) -> (Cow<'_, [f32]>, Cow<'_, [f32]>) {
        if let [span] = spans {
            return self.at(span.clone());
        }
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for span in spans {
            let (c, s) = self.at(span.clone());
            cos.extend_from_slice(&c);
            sin.extend_from_slice(&s);
        }
        (Cow::Owned(cos), Cow::Owned(sin))
    }

    /// The rotations for `positions`.
    fn at(&self, positions: Range<usize>) -> (Cow<'_, [f32]>, Cow<'_, [f32]>) {
        let half = self.head_dim / 2;
        if positions.end <= Rope::PRECOMPUTED {
            let span = positions.start * half..positions.end * half;
            (
                Cow::Borrowed(&self.cos[span.clone()]),
                Cow::Borrowed(&self.sin[span]),
            )
        } else {
            let (cos, sin) = Rope::tables(self.theta, self.head_dim, positions);
            (Cow::Owned(cos), Cow::Owned(sin))
        }
    }
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
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
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

    /// Logits `[batch, window.len(), vocab]` (unshifted: row j is the hidden state at j).
    ///
    /// Sequences may differ in length: shorter ones are padded and their padding is masked out
    /// of attention. `window` must lie within the longest sequence.
    pub fn forward(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut KvCache,
        pass: Pass,
    ) -> Result<Tensor> {
        let mut logits = self.forward_many(&mut [ModelCall {
            tokens,
            window,
            cache,
            pass,
        }])?;
        Ok(logits.pop().expect("one call, one answer"))
    }

    /// Several independent calls in one pass: each has its own sequences, window, cache and
    /// kind of pass (and gets the logits [`Qwen2::forward`] would give it alone), but the
    /// projections of every layer multiply all of their rows at once, so canvases of different
    /// requests share the weights' trip through memory whatever their positions. Attention
    /// stays per call. An error fails every call (their caches may be half written).
    pub fn forward_many(&self, calls: &mut [ModelCall<'_, KvCache>]) -> Result<Vec<Tensor>> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut prepared = calls
            .iter_mut()
            .map(|call| self.prepare(call))
            .collect::<Result<Vec<_>>>()?;
        let last = self.layers.len() - 1;
        for i in 0..self.layers.len() {
            let mut lanes: Vec<&mut Lane> = prepared.iter_mut().map(|(lane, _)| lane).collect();
            self.layer_forward(i, &mut lanes, i == last)?;
        }
        let mut windows = Vec::with_capacity(prepared.len());
        for (call, (lane, then)) in calls.iter_mut().zip(prepared) {
            let (b, w, d) = lane.x.dims3()?;
            windows.push(((b, w), lane.x.reshape((b * w, d))?));
            Self::finish(call, lane.keys, then)?;
        }
        let eps = self.config.rms_norm_eps as f32;
        let hidden = joined(windows.iter().map(|(_, x)| x))?;
        let logits = self
            .lm_head
            .forward(&rms_norm(&hidden.contiguous()?, &self.norm, eps)?)?;
        let vocab = self.config.vocab_size;
        let mut offset = 0;
        windows
            .iter()
            .map(|&((b, w), _)| {
                let rows = logits.narrow(0, offset, b * w)?.reshape((b, w, vocab))?;
                offset += b * w;
                Ok(rows)
            })
            .collect()
    }

    /// Checks a call and lays out the rows its pass computes (touching the cache where the
    /// pass starts by rearranging it); [`Qwen2::finish`] completes it after the layers.
    fn prepare(&self, call: &mut ModelCall<'_, KvCache>) -> Result<(Lane, Then)> {
        let (tokens, window, pass) = (call.tokens, call.window.clone(), call.pass);
        let cache = &mut *call.cache;
        let batch = tokens.len();
        let len = tokens.iter().map(Vec::len).max().unwrap_or(0);
        if batch == 0 || len == 0 {
            return Err(Error::InvalidRequest("empty batch".into()));
        }
        if window.is_empty() || window.end > len {
            return Err(Error::InvalidRequest(format!(
                "window {window:?} outside a sequence of {len} tokens"
            )));
        }
        let vocab = self.config.vocab_size;
        if let Some(bad) = tokens.iter().flatten().find(|&&t| t as usize >= vocab) {
            return Err(Error::InvalidRequest(format!(
                "token id {bad} outside the vocabulary of {vocab}"
            )));
        }
        if pass == Pass::Window && !cache.covers(tokens, &window) {
            return Err(Error::InvalidRequest(
                "window pass without a cache for these tokens".into(),
            ));
        }
        let key_lens: Vec<usize> = tokens.iter().map(Vec::len).collect();
        let padded: Vec<u32> = tokens
            .iter()
            .flat_map(|t| {
                t.iter()
                    .copied()
                    .chain(std::iter::repeat_n(0, len - t.len()))
            })
            .collect();
        let ids = Tensor::from_vec(padded, (batch, len), &self.device)?;
        let embed = |ids: &Tensor| -> Result<Tensor> {
            let rows = ids.dim(1)?;
            Ok(self
                .embed
                .lookup(&ids.flatten_all()?)?
                .reshape((batch, rows, ()))?)
        };
        let reuse = match pass {
            Pass::Full { store: true } => self.reusable_prefix(cache, tokens, &window),
            _ => 0,
        };
        let end = self.computed_end(&window, len);
        let stopped_at = (end < len).then_some(end);
        Ok(match pass {
            Pass::Full { store: true } if reuse > 0 => {
                // Causal attention: the cached keys/values of the positions before `reuse` are
                // exactly what this pass would compute. Keep them, recompute the rest (up to
                // `end`; the rows past it stay placeholders).
                for kv in &mut cache.layers {
                    let width = kv.dim(2)?;
                    let fresh =
                        Tensor::zeros((batch, len - reuse, width), kv.dtype(), kv.device())?;
                    *kv = Tensor::cat(&[&kv.narrow(1, 0, reuse)?, &fresh], 1)?;
                }
                // Until the pass is through, the cache vouches only for the prefix it kept.
                for cached in &mut cache.tokens {
                    cached.truncate(reuse);
                }
                cache.reused_positions += reuse;
                cache.mark_exact();
                let rest = reuse..end;
                let lane = Lane {
                    x: embed(&ids.narrow(1, reuse, rest.len())?)?,
                    last_queries: window.start - reuse..window.end - reuse,
                    spans: vec![rest],
                    keys: Keys::Cached(cache.layers.clone()),
                    key_lens,
                };
                (lane, Then::Stored { stopped_at })
            }
            Pass::Full { store } => {
                if store {
                    cache.clear();
                }
                // The pass holds rows up to `end` only: no key past it.
                let key_lens = key_lens.iter().map(|&k| k.min(end)).collect();
                let all = 0..end;
                let lane = Lane {
                    x: embed(&ids.narrow(1, 0, end)?)?,
                    spans: vec![all],
                    last_queries: window,
                    keys: if store {
                        Keys::Keep(Vec::with_capacity(self.layers.len()))
                    } else {
                        Keys::Drop
                    },
                    key_lens,
                };
                (lane, Then::Full { stopped_at, len })
            }
            Pass::Edit { radius } => {
                let (spans, layers, then) = self.edit_pass(tokens, &window, cache, radius)?;
                let pieces = spans
                    .iter()
                    .map(|s| ids.narrow(1, s.start, s.len()))
                    .collect::<candle_core::Result<Vec<_>>>()?;
                // The window lies in one span; the last layer only runs its queries.
                let mut offset = 0;
                let mut last_queries = 0..0;
                for span in &spans {
                    if span.start <= window.start && window.end <= span.end {
                        let first = offset + window.start - span.start;
                        last_queries = first..first + window.len();
                    }
                    offset += span.len();
                }
                let lane = Lane {
                    x: embed(&Tensor::cat(&pieces, 1)?)?,
                    spans,
                    last_queries,
                    keys: Keys::Cached(layers),
                    key_lens,
                };
                (lane, then)
            }
            Pass::Window => {
                let lane = Lane {
                    x: embed(&ids.narrow(1, window.start, window.len())?)?,
                    last_queries: 0..window.len(),
                    spans: vec![window.clone()],
                    keys: Keys::Cached(cache.layers.clone()),
                    key_lens,
                };
                (lane, Then::Window { window, len })
            }
        })
    }

    /// What a call's pass leaves in its cache, once its rows went through every layer.
    fn finish(call: &mut ModelCall<'_, KvCache>, keys: Keys, then: Then) -> Result<()> {
        let (tokens, cache) = (call.tokens, &mut *call.cache);
        match then {
            Then::Stored { stopped_at } => {
                cache.tokens = tokens.to_vec();
                cache.stopped_at = stopped_at;
            }
            Then::Full { stopped_at, len } => {
                let Keys::Keep(layers) = keys else {
                    return Ok(());
                };
                for kv in layers {
                    // Placeholder rows past the pass's end, for window passes to fill.
                    let (batch, rows, width) = kv.dims3()?;
                    cache.layers.push(if rows < len {
                        let rest =
                            Tensor::zeros((batch, len - rows, width), kv.dtype(), kv.device())?;
                        Tensor::cat(&[&kv, &rest], 1)?
                    } else {
                        kv
                    });
                }
                cache.tokens = tokens.to_vec();
                cache.mark_exact();
                cache.stopped_at = stopped_at;
            }
            Then::Edit(realigned) => {
                let Keys::Cached(layers) = keys else {
                    unreachable!("an edit pass attends over its realigned cache")
                };
                cache.layers = layers;
                cache.tokens = tokens.to_vec();
                realigned.apply(cache);
            }
            Then::Window { window, len } => {
                // The cache now holds the window's keys/values for these tokens (and has
                // computed every row up to its end: it covered none past the window's start).
                for (cached, new) in cache.tokens.iter_mut().zip(tokens) {
                    let end = window.end.min(new.len());
                    if window.start < end {
                        cached[window.start..end].copy_from_slice(&new[window.start..end]);
                    }
                }
                if let Some(at) = cache.stopped_at {
                    cache.stopped_at = (window.end.max(at) < len).then_some(window.end.max(at));
                }
            }
        }
        Ok(())
    }

    /// The rows a pass with `window` over sequences of `len` computes: all of them, or with
    /// causal or block-causal attention those up to the end of the window's last block (no
    /// row before reads a later one).
    fn computed_end(&self, window: &Range<usize>, len: usize) -> usize {
        match self.attention.block() {
            Some(n) => window.end.div_ceil(n).saturating_mul(n).min(len),
            None => len,
        }
    }

    /// How many leading positions of every sequence a stored full pass may take from `cache`
    /// unchanged: with causal or block-causal attention a position's keys and values depend
    /// only on the blocks up to its own, so everything before the first changed token's block is
    /// exact (as far as the cache itself is: after an edit pass, up to its first change).
    /// Bidirectional attention reuses nothing (0). At most `window.start`, so the window's rows
    /// are computed.
    fn reusable_prefix(
        &self,
        cache: &KvCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
    ) -> usize {
        let Some(block) = self.attention.block() else {
            return 0;
        };
        if cache.layers.len() != self.layers.len() || cache.tokens.len() != tokens.len() {
            return 0;
        }
        // Padding rows (a shorter sequence of a batch) hold nothing to reuse past the shortest.
        let shortest = tokens.iter().map(Vec::len).min().unwrap_or(0);
        let common = cache
            .tokens
            .iter()
            .zip(tokens)
            .map(|(old, new)| old.iter().zip(new).take_while(|(a, b)| a == b).count())
            .min()
            .unwrap_or(0)
            .min(shortest)
            .min(cache.tokens.iter().map(Vec::len).min().unwrap_or(0))
            .min(cache.exact_rows)
            .min(cache.computed_rows());
        (common / block * block).min(window.start)
    }

    /// Layer `index` over every lane's rows (`[B, rows, d]`, sitting at the positions of the
    /// lane's spans, in order): the projections multiply all lanes' rows at once, attention is
    /// per lane. Each lane's rows become the layer's output for its query rows (all of them,
    /// or `last_queries` in the `last` layer); a [`Keys::Keep`] lane collects the layer's keys
    /// and values.
    fn layer_forward(&self, index: usize, lanes: &mut [&mut Lane], last: bool) -> Result<()> {
        let layer = &self.layers[index];
        let cfg = &self.config;
        let eps = cfg.rms_norm_eps as f32;
        let heads = HeadLayout {
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_kv_heads(),
            head_dim: cfg.head_dim(),
        };
        let (q_width, kv_width) = (
            heads.heads * heads.head_dim,
            2 * heads.kv_heads * heads.head_dim,
        );
        let flat = lanes
            .iter()
            .map(|lane| {
                let (b, rows, d) = lane.x.dims3()?;
                Ok(lane.x.reshape((b * rows, d))?)
            })
            .collect::<Result<Vec<_>>>()?;
        let h = rms_norm(&joined(flat.iter())?, &layer.input_norm, eps)?;
        let qkv_all = layer.qkv.forward(&h)?;
        let attention = match self.kernels {
            Kernels::Cpu => attention,
            Kernels::Portable => portable::attention,
        };
        let (mut attended, mut residual) = (Vec::new(), Vec::new());
        let mut offset = 0;
        for lane in lanes.iter_mut() {
            let (b, rows, d) = lane.x.dims3()?;
            let qkv =
                qkv_all
                    .narrow(0, offset, b * rows)?
                    .reshape((b, rows, q_width + kv_width))?;
            offset += b * rows;
            let (cos, sin) = self.rope.at_spans(&lane.spans);
            let qkv = match self.kernels {
                Kernels::Cpu => {
                    bias_rope_(&qkv, &layer.qkv_bias, heads, &cos, &sin)?;
                    qkv
                }
                Kernels::Portable => {
                    let table = |values: &[f32]| {
                        Tensor::from_slice(values, (rows, heads.head_dim / 2), &self.device)
                    };
                    portable::bias_rope(
                        &qkv,
                        &layer.qkv_bias_tensor,
                        heads,
                        &table(&cos)?,
                        &table(&sin)?,
                    )?
                }
            };
            let queries = if last {
                lane.last_queries.clone()
            } else {
                0..rows
            };
            let spans = &lane.spans;
            let key_lens = &lane.key_lens;
            // A mask places query row i at `first + i`: rows from several spans are attended
            // span by span (bidirectional attention needs no positions).
            let attend = |kv: &Tensor, k_col: usize| -> Result<Tensor> {
                if spans.len() == 1 || self.attention.block().is_none() {
                    let mask = Mask {
                        pattern: self.attention,
                        first: spans[0].start,
                    };
                    return Ok(attention(
                        &qkv,
                        kv,
                        heads,
                        queries.clone(),
                        k_col,
                        key_lens,
                        mask,
                    )?);
                }
                let mut parts = Vec::with_capacity(spans.len());
                let mut offset = 0;
                for span in spans {
                    let rows = queries.start.max(offset)..queries.end.min(offset + span.len());
                    if !rows.is_empty() {
                        let mask = Mask {
                            pattern: self.attention,
                            first: span.start - offset,
                        };
                        parts.push(attention(&qkv, kv, heads, rows, k_col, key_lens, mask)?);
                    }
                    offset += span.len();
                }
                Ok(Tensor::cat(&parts, 1)?)
            };
            let fresh_kv =
                || -> Result<Tensor> { Ok(qkv.narrow(2, q_width, kv_width)?.contiguous()?) };
            let attn = match &mut lane.keys {
                Keys::Drop => attend(&qkv, q_width)?,
                Keys::Keep(kept) => {
                    kept.push(fresh_kv()?);
                    attend(&qkv, q_width)?
                }
                Keys::Cached(layers) => {
                    // The rows' fresh keys/values replace the cached ones in place (as
                    // Fast-dLLM's dual cache does): no copy of the whole cache per step.
                    let cache = &layers[index];
                    let fresh = fresh_kv()?;
                    let mut offset = 0;
                    for span in spans {
                        // (A span of a batch's rows is strided: slice_set wants it contiguous.)
                        let rows = fresh.narrow(1, offset, span.len())?.contiguous()?;
                        cache.slice_set(&rows, 1, span.start)?;
                        offset += span.len();
                    }
                    attend(cache, 0)?
                }
            };
            let q_rows = queries.len();
            attended.push(attn.reshape((b * q_rows, q_width))?);
            residual.push(
                lane.x
                    .narrow(1, queries.start, q_rows)?
                    .reshape((b * q_rows, d))?,
            );
        }
        let x = (joined(residual.iter())? + layer.o.forward(&joined(attended.iter())?)?)?;
        let h = rms_norm(&x, &layer.post_norm, eps)?;
        let gate_up = layer.gate_up.forward(&h)?;
        let act = match self.kernels {
            Kernels::Cpu => swiglu(&gate_up)?,
            Kernels::Portable => portable::swiglu(&gate_up)?,
        };
        let out = (x + layer.down.forward(&act)?)?;
        let mut offset = 0;
        for lane in lanes.iter_mut() {
            let (b, _, d) = lane.x.dims3()?;
            let q_rows = if last {
                lane.last_queries.len()
            } else {
                lane.x.dim(1)?
            };
            lane.x = out.narrow(0, offset, b * q_rows)?.reshape((b, q_rows, d))?;
            offset += b * q_rows;
        }
        Ok(())
    }
}

/// One call's rows on their way through the layers of a [`Qwen2::forward_many`] pass.
struct Lane {
    /// Hidden states `[B, rows, d]` of the rows the pass computes (after the last layer, of its
    /// window's rows).
    x: Tensor,
    /// The positions of `x`'s rows, span after span.
    spans: Vec<Range<usize>>,
    /// The rows of `x` the last layer computes: the window's.
    last_queries: Range<usize>,
    keys: Keys,
    /// Keys of each sequence (shorter ones are padded).
    key_lens: Vec<usize>,
}

/// What a lane's layers do with keys and values.
enum Keys {
    /// Attend within the rows, keep nothing.
    Drop,
    /// Attend within the rows and collect each layer's keys/values for the cache.
    Keep(Vec<Tensor>),
    /// Attend over each layer's cache, after writing the rows' keys/values into it (the rows
    /// sit at the spans' positions; every other position comes from the cache).
    Cached(Vec<Tensor>),
}

/// What a call's pass leaves in its cache once the layers are through ([`Qwen2::finish`]).
enum Then {
    /// A stored full pass that kept the cache's exact prefix.
    Stored {
        stopped_at: Option<usize>,
    },
    /// A full pass from scratch (stored when its keys were kept).
    Full {
        stopped_at: Option<usize>,
        len: usize,
    },
    /// An edit pass over a realigned cache.
    Edit(realign::Realigned),
    Window {
        window: Range<usize>,
        len: usize,
    },
}

/// Rows of 2-D tensors stacked (one tensor as it is).
fn joined<'a>(parts: impl Iterator<Item = &'a Tensor>) -> Result<Tensor> {
    let parts: Vec<&Tensor> = parts.collect();
    Ok(match parts.as_slice() {
        [one] => (*one).clone(),
        _ => Tensor::cat(&parts, 0)?,
    })
}

impl Denoiser for Qwen2 {
    type Cache = KvCache;

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut KvCache,
        pass: Pass,
    ) -> Result<Vec<f32>> {
        Ok(self
            .forward(tokens, window, cache, pass)?
            .flatten_all()?
            .to_vec1()?)
    }

    fn logits_many(&self, calls: &mut [ModelCall<'_, KvCache>]) -> Result<Vec<Vec<f32>>> {
        self.forward_many(calls)?
            .iter()
            .map(|logits| Ok(logits.flatten_all()?.to_vec1()?))
            .collect()
    }

    fn cache_covers(&self, cache: &KvCache, tokens: &[Vec<u32>], window: &Range<usize>) -> bool {
        cache.covers(tokens, window)
    }

    fn cache_realigns(
        &self,
        cache: &KvCache,
        tokens: &[Vec<u32>],
        window: &Range<usize>,
        reuse: EditReuse,
    ) -> bool {
        cache.approximate_passes < reuse.refresh_after
            && self
                .realignment(cache, tokens, window, reuse.radius)
                .is_some_and(|plan| plan.drifted > 0)
    }

    fn stored_prefix(
        &self,
        cache: &KvCache,
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
