//! A pass through the model: [`Qwen2::forward`] and [`Qwen2::forward_many`], each call's rows
//! laid out as its kind of pass asks ([`Pass`]), the layers run over every call's rows at once,
//! and what the pass leaves in each call's [`ContextCache`].

use std::ops::Range;

use candle_core::Tensor;
use candle_nn::ops::rms_norm;

use super::{realign, Qwen2};
use crate::cache::ContextCache;
use crate::error::{Error, Result};
use crate::ops::{attention, bias_rope_, portable, swiglu, HeadLayout, Kernels, Mask};
use crate::sampler::{ModelCall, Pass};

impl Qwen2 {
    /// Logits `[batch, window.len(), vocab]` (unshifted: row j is the hidden state at j).
    ///
    /// Sequences may differ in length: shorter ones are padded and their padding is masked out
    /// of attention. `window` must lie within the longest sequence.
    pub fn forward(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut ContextCache,
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
    pub fn forward_many(&self, calls: &mut [ModelCall<'_, ContextCache>]) -> Result<Vec<Tensor>> {
        Ok(self
            .forward_many_unless(calls, &|| false)?
            .expect("a pass nothing stops runs to its end"))
    }

    /// Makes `cache` exact again: a stored full pass over the tokens it holds, into a new cache
    /// that replaces it once every layer is through (the old one serves until then). `stop` is
    /// asked twice a layer (before it, and after its attention); when it says stop, `cache` is left as it was and the answer is
    /// `false`. A cache that is exact already (no realigning pass since its last stored one) or
    /// empty is left alone, `false`.
    pub fn refresh(&self, cache: &mut ContextCache, stop: &dyn Fn() -> bool) -> Result<bool> {
        let len = cache.tokens.iter().map(Vec::len).max().unwrap_or(0);
        if cache.is_empty() || cache.approximate_passes == 0 || len == 0 {
            return Ok(false);
        }
        let mut fresh = ContextCache::default();
        let mut call = [ModelCall {
            tokens: &cache.tokens,
            window: len - 1..len,
            cache: &mut fresh,
            pass: Pass::Full { store: true },
        }];
        if self.forward_many_unless(&mut call, stop)?.is_none() {
            return Ok(false);
        }
        // What earlier passes reused and let drift stays counted (callers report differences).
        fresh.reused_positions = cache.reused_positions;
        fresh.drifted_positions = cache.drifted_positions;
        *cache = fresh;
        Ok(true)
    }

    /// [`Qwen2::forward_many`], asking `stop` before each layer and after each layer's
    /// attention: `None` once it said stop (the calls' caches may then be half written).
    pub(super) fn forward_many_unless(
        &self,
        calls: &mut [ModelCall<'_, ContextCache>],
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Tensor>>> {
        if calls.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut prepared = calls
            .iter_mut()
            .map(|call| self.prepare(call))
            .collect::<Result<Vec<_>>>()?;
        let last = self.layers.len() - 1;
        for i in 0..self.layers.len() {
            let mut lanes: Vec<&mut Lane> = prepared.iter_mut().map(|(lane, _)| lane).collect();
            if stop() || !self.layer_forward(i, &mut lanes, i == last, stop)? {
                return Ok(None);
            }
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
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Checks a call and lays out the rows its pass computes (touching the cache where the
    /// pass starts by rearranging it); [`Qwen2::finish`] completes it after the layers.
    fn prepare(&self, call: &mut ModelCall<'_, ContextCache>) -> Result<(Lane, Then)> {
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
            Pass::Realign { radius } => {
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
                // The rows of a block see each other: the window's blocks are recomputed whole,
                // so no row the window reads kept keys that saw the window's old tokens.
                let span = self.block_span(&window, len);
                let first = window.start - span.start;
                let lane = Lane {
                    x: embed(&ids.narrow(1, span.start, span.len())?)?,
                    last_queries: first..first + window.len(),
                    spans: vec![span.clone()],
                    keys: Keys::Cached(cache.layers.clone()),
                    key_lens,
                };
                let block = self.attention.block();
                (lane, Then::Window { span, len, block })
            }
        })
    }

    /// What a call's pass leaves in its cache, once its rows went through every layer.
    fn finish(call: &mut ModelCall<'_, ContextCache>, keys: Keys, then: Then) -> Result<()> {
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
                    unreachable!("a realigning pass attends over its realigned cache")
                };
                cache.layers = layers;
                cache.tokens = tokens.to_vec();
                realigned.apply(cache);
            }
            Then::Window { span, len, block } => {
                // The cache now holds the span's keys/values for these tokens (and has computed
                // every row up to its end: it covered none past the window's start).
                let mut changed = false;
                for (cached, new) in cache.tokens.iter_mut().zip(tokens) {
                    let end = span.end.min(new.len());
                    if span.start < end {
                        changed |= cached[span.start..end] != new[span.start..end];
                        cached[span.start..end].copy_from_slice(&new[span.start..end]);
                    }
                }
                // Causal rows: the span's are exact when every row before it is; rows computed
                // past it saw the span's old tokens, so with a token changed they are not.
                if block.is_some() && cache.exact_rows >= span.start {
                    cache.exact_rows = if changed {
                        span.end
                    } else {
                        cache.exact_rows.max(span.end)
                    };
                }
                if let Some(at) = cache.stopped_at {
                    cache.stopped_at = (span.end.max(at) < len).then_some(span.end.max(at));
                }
            }
        }
        Ok(())
    }

    /// The rows a pass with `window` over sequences of `len` computes: all of them, or with
    /// causal or block-causal attention those up to the end of the window's last block (no
    /// row before reads a later one).
    pub(super) fn computed_end(&self, window: &Range<usize>, len: usize) -> usize {
        match self.attention.block() {
            Some(n) => window.end.div_ceil(n).saturating_mul(n).min(len),
            None => len,
        }
    }

    /// The rows a pass recomputes for `window` over sequences of `len`: the window, or with
    /// causal or block-causal attention the whole blocks it touches (a block's rows see each
    /// other, so one changed token makes every row of its block new).
    fn block_span(&self, window: &Range<usize>, len: usize) -> Range<usize> {
        match self.attention.block() {
            Some(n) => window.start / n * n..self.computed_end(window, len),
            None => window.clone(),
        }
    }

    /// How many leading positions of every sequence a stored full pass may take from `cache`
    /// unchanged: with causal or block-causal attention a position's keys and values depend
    /// only on the blocks up to its own, so everything before the first changed token's block is
    /// exact (as far as the cache itself is: after a realigning pass, up to its first change).
    /// Bidirectional attention reuses nothing (0). At most `window.start`, so the window's rows
    /// are computed.
    pub(super) fn reusable_prefix(
        &self,
        cache: &ContextCache,
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
    ///
    /// `stop` is asked again after attention, before the rest of the layer: `false` when it said
    /// stop (the lanes are then half through the layer, good for nothing).
    fn layer_forward(
        &self,
        index: usize,
        lanes: &mut [&mut Lane],
        last: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool> {
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
        if stop() {
            return Ok(false);
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
        Ok(true)
    }
}

/// One call's rows on their way through the layers of a [`Qwen2::forward_many`] pass.
pub(super) struct Lane {
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
pub(super) enum Keys {
    /// Attend within the rows, keep nothing.
    Drop,
    /// Attend within the rows and collect each layer's keys/values for the cache.
    Keep(Vec<Tensor>),
    /// Attend over each layer's cache, after writing the rows' keys/values into it (the rows
    /// sit at the spans' positions; every other position comes from the cache).
    Cached(Vec<Tensor>),
}

/// What a call's pass leaves in its cache once the layers are through ([`Qwen2::finish`]).
pub(super) enum Then {
    /// A stored full pass that kept the cache's exact prefix.
    Stored { stopped_at: Option<usize> },
    /// A full pass from scratch (stored when its keys were kept).
    Full {
        stopped_at: Option<usize>,
        len: usize,
    },
    /// A realigning pass over a realigned cache.
    Edit(realign::Realigned),
    /// A window pass that recomputed `span` (the window, or its blocks whole).
    Window {
        span: Range<usize>,
        len: usize,
        block: Option<usize>,
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
