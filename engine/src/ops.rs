//! The fused operations of inference as candle ops: attention straight from the fused q|k|v
//! projection rows, bias + RoPE, softmax over the last dimension and SwiGLU (`silu(gate) * up`).
//!
//! On CPU storage each one is a thin safe wrapper: it checks the tensors' dtype, layout and
//! shapes and hands their slices to `redraft_kernels` (where the loops, the SIMD paths and every
//! `unsafe` block live). Inference only: these ops have no backward pass (training's are in
//! `redraft-train`'s `train::fused`, on the same kernels). [`portable`] composes the same
//! operations from candle's own ops for every other device, and [`Kernels`] says which of the
//! two a model uses.

pub mod portable;

use candle_core::{CpuStorage, CustomOp1, Device, Layout, Result, Shape, Tensor};
use redraft_kernels::{attention as kernel, rope, rows};

use crate::config::AttentionPattern;

pub use redraft_kernels::attention::HeadLayout;

/// Which implementation of the fused operations a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// The CPU kernels of `redraft_kernels`, as the custom candle ops of this module.
    Cpu,
    /// [`portable`]: candle's own tensor ops, on any device (what CUDA runs).
    Portable,
}

impl Kernels {
    /// The fast choice for `device`.
    pub fn for_device(device: &Device) -> Kernels {
        if device.is_cpu() {
            Kernels::Cpu
        } else {
            Kernels::Portable
        }
    }

    /// An error unless these kernels run on `device` (the CPU kernels run on the CPU only).
    pub fn check(self, device: &Device) -> crate::Result<()> {
        if self == Kernels::Cpu && !device.is_cpu() {
            return Err(crate::Error::Device(format!(
                "the CPU kernels cannot run on {}",
                crate::device::describe(device)
            )));
        }
        Ok(())
    }
}

/// The f32 data of a contiguous CPU tensor: the input check of a custom op over CPU storage
/// (these and training's).
pub fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// The mutable f32 data of a contiguous CPU tensor, for an in-place op.
fn contiguous_f32_mut<'a>(
    storage: &'a mut CpuStorage,
    layout: &Layout,
    op: &str,
) -> Result<&'a mut [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&mut data[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

struct Softmax;

impl candle_core::InplaceOp1 for Softmax {
    fn name(&self) -> &'static str {
        "redraft-softmax"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let width = layout.shape().dims().last().copied().unwrap_or(1);
        rows::par_softmax_rows(contiguous_f32_mut(storage, layout, self.name())?, width);
        Ok(())
    }
}

struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "redraft-swiglu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let full = dims.last().copied().unwrap_or(0);
        if !full.is_multiple_of(2) {
            candle_core::bail!("{}: last dimension {full} is odd", self.name());
        }
        let width = full / 2;
        let mut dst = vec![0f32; src.len() / 2];
        rows::par_swiglu_rows(src, &mut dst, width);
        let mut out = dims.to_vec();
        *out.last_mut().expect("at least one dimension") = width;
        Ok((CpuStorage::F32(dst), Shape::from_dims(&out)))
    }
}

/// Attention from fused projection rows (see [`attention`]), computed by
/// `redraft_kernels::attention`: one task per (sequence, head, block of queries), or per
/// (sequence, query row, key head) for a decoding step's few rows.
struct Attention {
    layout: HeadLayout,
    queries: std::ops::Range<usize>,
    k_col: usize,
    key_lens: Vec<usize>,
    mask: Mask,
}

/// The attention pattern of one call: `pattern`, with query row `i` of the rows passed in at
/// absolute position `first + i` (keys are at their own positions, from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mask {
    pub pattern: AttentionPattern,
    pub first: usize,
}

impl Mask {
    /// Every query sees every key (of its sequence's length).
    pub const NONE: Mask = Mask {
        pattern: AttentionPattern::Bidirectional,
        first: 0,
    };

    /// Keys (of `keys`) that query row `row` sees.
    pub fn visible(self, row: usize, keys: usize) -> usize {
        self.pattern.visible_keys(self.first + row, keys)
    }
}

impl candle_core::CustomOp2 for Attention {
    fn name(&self) -> &'static str {
        "redraft-attention"
    }

    fn cpu_fwd(
        &self,
        q_storage: &CpuStorage,
        q_layout: &Layout,
        kv_storage: &CpuStorage,
        kv_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let name = self.name();
        let q = contiguous_f32(q_storage, q_layout, name)?;
        let kv = contiguous_f32(kv_storage, kv_layout, name)?;
        let (batch, q_len, q_stride) = q_layout.shape().dims3()?;
        let (kv_batch, keys, kv_stride) = kv_layout.shape().dims3()?;
        if kv_batch != batch {
            candle_core::bail!("{name}: {batch} query and {kv_batch} key sequences");
        }
        let visible = |row: usize, keys: usize| self.mask.visible(row, keys);
        let shapes = kernel::Shapes {
            layout: self.layout,
            batch,
            q_len,
            q_stride,
            keys,
            kv_stride,
            k_col: self.k_col,
            queries: self.queries.clone(),
            key_lens: &self.key_lens,
            visible: &visible,
        };
        let out = kernel::attention(q, kv, &shapes).map_err(|e| {
            candle_core::Error::Msg(format!(
                "{name}: {e} (rows {:?} / {:?})",
                q_layout.shape(),
                kv_layout.shape()
            ))
        })?;
        let HeadLayout {
            heads, head_dim, ..
        } = self.layout;
        Ok((
            CpuStorage::F32(out),
            Shape::from_dims(&[batch, self.queries.len(), heads * head_dim]),
        ))
    }
}

/// Attention straight from fused projection rows, bidirectional or as `mask` says.
///
/// `q_rows` (`[B, Tq, _]`) holds each query head's `head_dim` values side by side from column 0;
/// `kv_rows` (`[B, T, _]`) holds the key heads from column `k_col` and the value heads right after
/// them. Only queries `queries` of `q_rows` are computed, and sequence `b` attends to its first
/// `key_lens[b]` keys, of which each query sees those its [`Mask`] allows. Returns
/// `[B, queries.len(), heads * head_dim]`.
pub fn attention(
    q_rows: &Tensor,
    kv_rows: &Tensor,
    layout: HeadLayout,
    queries: std::ops::Range<usize>,
    k_col: usize,
    key_lens: &[usize],
    mask: Mask,
) -> Result<Tensor> {
    let op = Attention {
        layout,
        queries,
        k_col,
        key_lens: key_lens.to_vec(),
        mask,
    };
    q_rows.apply_op2_no_bwd(kv_rows, &op)
}

/// Adds the projection bias to fused q|k|v rows and rotates the query and key heads (RoPE,
/// `rotate_half` convention), in place: `redraft_kernels::rope::bias_rope`.
struct BiasRope<'a> {
    layout: HeadLayout,
    bias: &'a [f32],
    /// `[rows, head_dim / 2]` for the rows' positions.
    cos: &'a [f32],
    sin: &'a [f32],
}

impl candle_core::InplaceOp1 for BiasRope<'_> {
    fn name(&self) -> &'static str {
        "redraft-bias-rope"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let name = self.name();
        let (_, rows, width) = layout.shape().dims3()?;
        if width != self.layout.qkv_width() {
            candle_core::bail!(
                "{name}: rows of {width} values for {:?} (rows of {})",
                self.layout,
                self.layout.qkv_width()
            );
        }
        let data = contiguous_f32_mut(storage, layout, name)?;
        rope::bias_rope(data, rows, self.layout, self.bias, self.cos, self.sin)
            .map_err(|e| candle_core::Error::Msg(format!("{name}: {e}")))
    }
}

/// `qkv` (`[B, T, (heads + 2 kv_heads) * head_dim]`, contiguous, not shared) += `bias`, then RoPE
/// on its query and key heads with `cos`/`sin` rows (`[T, head_dim / 2]`) for its positions.
pub fn bias_rope_(
    qkv: &Tensor,
    bias: &[f32],
    layout: HeadLayout,
    cos: &[f32],
    sin: &[f32],
) -> Result<()> {
    qkv.inplace_op1(&BiasRope {
        layout,
        bias,
        cos,
        sin,
    })
}

/// Softmax over the last dimension of a contiguous f32 tensor, in place: `x` must not be shared
/// (a tensor just produced by another op).
pub fn softmax_last_dim_(x: &Tensor) -> Result<()> {
    x.inplace_op1(&Softmax)
}

/// `silu(gate) * up` where the last dimension of `gate_up` is `[gate | up]`.
pub fn swiglu(gate_up: &Tensor) -> Result<Tensor> {
    gate_up.apply_op1_no_bwd(&SwiGlu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap()
    }

    #[test]
    fn fused_ops_match_candle_reference() {
        let x = Tensor::randn(0f32, 3.0, (3, 5, 37), &Device::Cpu).unwrap();
        let ours = x.copy().unwrap();
        softmax_last_dim_(&ours).unwrap();
        let reference = candle_nn::ops::softmax_last_dim(&x).unwrap();
        let diff = max_diff(&ours, &reference);
        assert!(diff < 1e-6, "softmax differs by {diff}");

        let gu = Tensor::randn(0f32, 3.0, (4, 2 * 19), &Device::Cpu).unwrap();
        let ours = swiglu(&gu).unwrap();
        let (gate, up) = (gu.narrow(1, 0, 19).unwrap(), gu.narrow(1, 19, 19).unwrap());
        let reference = (candle_nn::ops::silu(&gate).unwrap() * up).unwrap();
        let diff = max_diff(&ours, &reference);
        assert!(diff < 1e-5, "swiglu differs by {diff}");
    }

    /// The textbook formula on `[B, H, T, hd]` tensors, with explicit repeats of the key heads
    /// and a padding mask.
    fn reference_attention(q: &Tensor, k: &Tensor, v: &Tensor, key_lens: &[usize]) -> Tensor {
        let (b, h, _, hd) = q.dims4().unwrap();
        let (_, kvh, t, _) = k.dims4().unwrap();
        let repeat = |x: &Tensor| {
            let parts: Vec<Tensor> = (0..h)
                .map(|i| x.narrow(1, i / (h / kvh), 1).unwrap())
                .collect();
            Tensor::cat(&parts, 1).unwrap()
        };
        let (k, v) = (repeat(k), repeat(v));
        let scores = (q.matmul(&k.t().unwrap()).unwrap() / (hd as f64).sqrt()).unwrap();
        let mask: Vec<f32> = key_lens
            .iter()
            .flat_map(|&l| (0..t).map(move |j| if j < l { 0.0 } else { f32::NEG_INFINITY }))
            .collect();
        let mask = Tensor::from_vec(mask, (b, 1, 1, t), &Device::Cpu).unwrap();
        let p = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&mask).unwrap()).unwrap();
        p.matmul(&v)
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .reshape((b, (), h * hd))
            .unwrap()
    }

    /// `[B, T, n * hd]` rows starting at head `first` as `[B, n, T, hd]`.
    fn heads_of(rows: &Tensor, first: usize, n: usize, hd: usize) -> Tensor {
        let (b, t, _) = rows.dims3().unwrap();
        rows.narrow(2, first * hd, n * hd)
            .unwrap()
            .reshape((b, t, n, hd))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    }

    #[test]
    fn fused_attention_matches_the_formula_with_gqa_padding_blocks_and_query_subsets() {
        let layout = HeadLayout {
            heads: 6,
            kv_heads: 2,
            head_dim: 8,
        };
        for (tokens, queries) in [(5, 0..5), (70, 0..70), (130, 60..63)] {
            let rows = Tensor::randn(0f32, 1.0, (2, tokens, 10 * 8), &Device::Cpu).unwrap();
            let key_lens = [tokens, tokens - 2];
            let ours = attention(
                &rows,
                &rows,
                layout,
                queries.clone(),
                6 * 8,
                &key_lens,
                Mask::NONE,
            )
            .unwrap();
            let q = heads_of(&rows, 0, 6, 8)
                .narrow(2, queries.start, queries.len())
                .unwrap();
            let expected = reference_attention(
                &q,
                &heads_of(&rows, 6, 2, 8),
                &heads_of(&rows, 8, 2, 8),
                &key_lens,
            );
            let diff = max_diff(&ours, &expected);
            assert!(diff < 1e-5, "{tokens} tokens: attention differs by {diff}");
            // Keys and values from a separate cache (no query columns).
            let kv = rows.narrow(2, 6 * 8, 4 * 8).unwrap().contiguous().unwrap();
            let cached = attention(
                &rows,
                &kv,
                layout,
                queries.clone(),
                0,
                &key_lens,
                Mask::NONE,
            )
            .unwrap();
            let again =
                attention(&rows, &rows, layout, queries, 6 * 8, &key_lens, Mask::NONE).unwrap();
            let diff = max_diff(&cached, &again);
            assert_eq!(diff, 0.0);
        }
        let rows = Tensor::zeros((1, 3, 10 * 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(
            attention(&rows, &rows, layout, 0..3, 48, &[4], Mask::NONE).is_err(),
            "key length past the keys"
        );
        assert!(
            attention(&rows, &rows, layout, 0..3, 48, &[3, 3], Mask::NONE).is_err(),
            "one key length per sequence"
        );
        assert!(
            attention(&rows, &rows, layout, 0..4, 48, &[3], Mask::NONE).is_err(),
            "queries past the rows"
        );
    }

    /// Random `[2, t, width]` rows, a `[width]` bias and `[t, 4]` cos and sin tables (head dim 8).
    fn rope_inputs(t: usize, width: usize) -> [Tensor; 4] {
        let randn = |shape: &[usize]| Tensor::randn(0f32, 1.0, shape, &Device::Cpu).unwrap();
        [
            randn(&[2, t, width]),
            randn(&[width]),
            randn(&[t, 4]),
            randn(&[t, 4]),
        ]
    }

    /// [`bias_rope_`] on a copy of `qkv`, given its arguments as tensors.
    fn cpu_bias_rope(
        qkv: &Tensor,
        bias: &Tensor,
        layout: HeadLayout,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Tensor {
        let out = qkv.copy().unwrap();
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        bias_rope_(&out, &flat(bias), layout, &flat(cos), &flat(sin)).unwrap();
        out
    }

    #[test]
    fn portable_ops_match_the_cpu_kernels() {
        let layout = HeadLayout {
            heads: 6,
            kv_heads: 2,
            head_dim: 8,
        };
        let width = 10 * 8;
        for (tokens, queries, key_lens) in [
            (5, 0..5, [5, 5]),
            (9, 0..9, [9, 8]),
            (70, 0..70, [70, 61]),
            (130, 60..63, [1, 130]),
        ] {
            let rows = Tensor::randn(0f32, 1.0, (2, tokens, width), &Device::Cpu).unwrap();
            let cpu = attention(
                &rows,
                &rows,
                layout,
                queries.clone(),
                6 * 8,
                &key_lens,
                Mask::NONE,
            )
            .unwrap();
            let portable = portable::attention(
                &rows,
                &rows,
                layout,
                queries.clone(),
                6 * 8,
                &key_lens,
                Mask::NONE,
            )
            .unwrap();
            assert_eq!(cpu.dims(), portable.dims());
            let diff = max_diff(&cpu, &portable);
            assert!(diff < 1e-5, "{tokens} tokens: attention differs by {diff}");
            // Keys and values from a separate cache (no query columns).
            let kv = rows.narrow(2, 6 * 8, 4 * 8).unwrap().contiguous().unwrap();
            let cached =
                portable::attention(&rows, &kv, layout, queries, 0, &key_lens, Mask::NONE).unwrap();
            assert!(max_diff(&cached, &portable) < 1e-6);
        }
        let rows = Tensor::zeros((1, 3, width), candle_core::DType::F32, &Device::Cpu).unwrap();
        for (queries, lens) in [
            (0..3, vec![4]),
            (0..3, vec![3, 3]),
            (0..4, vec![3]),
            (0..3, vec![0]),
        ] {
            assert!(
                portable::attention(&rows, &rows, layout, queries.clone(), 48, &lens, Mask::NONE)
                    .is_err(),
                "queries {queries:?}, key lengths {lens:?}"
            );
        }

        let [qkv, bias, cos, sin] = rope_inputs(7, width);
        let portable = portable::bias_rope(&qkv, &bias, layout, &cos, &sin).unwrap();
        let diff = max_diff(&cpu_bias_rope(&qkv, &bias, layout, &cos, &sin), &portable);
        assert!(diff < 1e-5, "bias + RoPE differs by {diff}");

        let gate_up = Tensor::randn(0f32, 3.0, (2, 3, 2 * 19), &Device::Cpu).unwrap();
        let diff = max_diff(
            &swiglu(&gate_up).unwrap(),
            &portable::swiglu(&gate_up).unwrap(),
        );
        assert!(diff < 1e-5, "swiglu differs by {diff}");
    }

    /// [`attention`]'s signature, which [`portable::attention`] shares.
    type AttentionFn = fn(
        &Tensor,
        &Tensor,
        HeadLayout,
        std::ops::Range<usize>,
        usize,
        &[usize],
        Mask,
    ) -> Result<Tensor>;

    /// A decoding step's few query rows take their own kernel (`few_queries`); it equals the
    /// reference at every head size it has a path for (and one it has not), with grouped and
    /// ungrouped heads, key counts on and off its blocks of 16, and every mask.
    #[test]
    fn few_query_rows_match_the_reference() {
        for (heads, kv_heads, head_dim) in [(14, 2, 64), (4, 4, 32), (8, 2, 128), (6, 3, 24)] {
            let layout = HeadLayout {
                heads,
                kv_heads,
                head_dim,
            };
            let width = (heads + 2 * kv_heads) * head_dim;
            for keys in [1, 15, 16, 17, 300] {
                let rows = Tensor::randn(0f32, 1.0, (2, keys, width), &Device::Cpu).unwrap();
                for pattern in [
                    AttentionPattern::Bidirectional,
                    AttentionPattern::Causal,
                    AttentionPattern::Block(4),
                ] {
                    for queries in [keys - 1..keys, keys.saturating_sub(8)..keys] {
                        let mask = Mask { pattern, first: 0 };
                        let key_lens = [keys, keys.div_ceil(2).max(queries.end)];
                        let k_col = heads * head_dim;
                        let run = |kernel: AttentionFn| {
                            kernel(
                                &rows,
                                &rows,
                                layout,
                                queries.clone(),
                                k_col,
                                &key_lens,
                                mask,
                            )
                            .unwrap()
                        };
                        let diff = max_diff(&run(attention), &run(portable::attention));
                        assert!(
                            diff < 1e-5,
                            "{layout:?}, {keys} keys, {pattern:?}, queries {queries:?}: {diff}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn causal_and_block_masks_match_between_kernels_and_hide_later_keys() {
        let layout = HeadLayout {
            heads: 6,
            kv_heads: 2,
            head_dim: 8,
        };
        let width = 10 * 8;
        let rows = Tensor::randn(0f32, 1.0, (2, 150, width), &Device::Cpu).unwrap();
        for pattern in [AttentionPattern::Causal, AttentionPattern::Block(4)] {
            for (queries, key_lens, first) in [
                (0..150, [150, 131], 0),
                (60..75, [150, 70], 0),
                (3..9, [140, 150], 130),
            ] {
                let mask = Mask { pattern, first };
                let q = rows
                    .narrow(1, 0, queries.end)
                    .unwrap()
                    .contiguous()
                    .unwrap();
                let cpu =
                    attention(&q, &rows, layout, queries.clone(), 48, &key_lens, mask).unwrap();
                let portable =
                    portable::attention(&q, &rows, layout, queries.clone(), 48, &key_lens, mask)
                        .unwrap();
                let diff = max_diff(&cpu, &portable);
                assert!(
                    diff < 1e-5,
                    "{pattern:?} {queries:?}: kernels differ by {diff}"
                );
                // Changing the keys a query may not see leaves its output alone.
                let last = queries.end - 1;
                let hidden_from = mask.visible(last, 150);
                if hidden_from < 150 {
                    let noise =
                        Tensor::randn(0f32, 1.0, (2, 150 - hidden_from, width), &Device::Cpu)
                            .unwrap();
                    let changed =
                        Tensor::cat(&[&rows.narrow(1, 0, hidden_from).unwrap(), &noise], 1)
                            .unwrap();
                    let again =
                        attention(&q, &changed, layout, queries.clone(), 48, &key_lens, mask)
                            .unwrap();
                    assert_eq!(
                        max_diff(&cpu, &again),
                        0.0,
                        "{pattern:?}: a hidden key was read"
                    );
                }
            }
        }
        // Bidirectional through a mask equals no mask.
        let none = attention(&rows, &rows, layout, 0..150, 48, &[150, 131], Mask::NONE).unwrap();
        let far = Mask {
            pattern: AttentionPattern::Block(1000),
            first: 0,
        };
        let wide = attention(&rows, &rows, layout, 0..150, 48, &[150, 131], far).unwrap();
        assert_eq!(max_diff(&none, &wide), 0.0);
    }

    #[test]
    fn bias_rope_matches_candle_rope_on_each_head() {
        let layout = HeadLayout {
            heads: 4,
            kv_heads: 2,
            head_dim: 8,
        };
        let [qkv, bias, cos, sin] = rope_inputs(5, 8 * 8);
        let biased = qkv.broadcast_add(&bias).unwrap();
        let ours = cpu_bias_rope(&qkv, &bias, layout, &cos, &sin);
        let rotated = candle_nn::rotary_emb::rope(&heads_of(&biased, 0, 6, 8), &cos, &sin).unwrap();
        let diff = max_diff(&heads_of(&ours, 0, 6, 8), &rotated);
        assert!(diff < 1e-5, "rotated heads differ by {diff}");
        let values = max_diff(&heads_of(&ours, 6, 2, 8), &heads_of(&biased, 6, 2, 8));
        assert_eq!(values, 0.0, "value heads only get the bias");
    }
}
