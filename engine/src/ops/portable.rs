//! The same operations as the fused CPU kernels of [`super`], composed from candle's own tensor
//! ops, so they run on every device candle has (CUDA above all). Same arguments and results as
//! their CPU counterparts, except that [`bias_rope`] returns a new tensor where the CPU kernel
//! works in place. The tests hold each one to its CPU kernel.

use candle_core::{Device, Result, Tensor, D};

use super::{HeadLayout, Mask};

/// [`super::attention`]: grouped-query attention straight from fused projection rows, sequence
/// `b` attending to its first `key_lens[b]` keys, each query to those its [`Mask`] allows.
pub fn attention(
    q_rows: &Tensor,
    kv_rows: &Tensor,
    layout: HeadLayout,
    queries: std::ops::Range<usize>,
    k_col: usize,
    key_lens: &[usize],
    mask: Mask,
) -> Result<Tensor> {
    let HeadLayout {
        heads,
        kv_heads,
        head_dim: hd,
    } = layout;
    let (batch, q_len, _) = q_rows.dims3()?;
    let (kv_batch, keys, _) = kv_rows.dims3()?;
    if kv_batch != batch || queries.end > q_len || queries.is_empty() {
        candle_core::bail!(
            "attention: {batch} query and {kv_batch} key sequences, queries {queries:?} of {q_len}"
        );
    }
    if kv_heads == 0 || heads % kv_heads != 0 || key_lens.len() != batch {
        candle_core::bail!(
            "attention: {heads} heads, {kv_heads} key heads, {} key lengths for {batch} sequences",
            key_lens.len()
        );
    }
    if let Some(&bad) = key_lens.iter().find(|&&l| l == 0 || l > keys) {
        candle_core::bail!("attention: key length {bad} outside 1..={keys}");
    }
    let group = heads / kv_heads;
    let rows = queries.len();
    // [B, T, n * hd] columns from `first` as [B, n, T, hd].
    let heads_of = |x: &Tensor, first: usize, n: usize| -> Result<Tensor> {
        let t = x.dim(1)?;
        x.narrow(2, first, n * hd)?
            .reshape((batch, t, n, hd))?
            .transpose(1, 2)?
            .contiguous()
    };
    // The query heads sharing a key head are folded into rows (head h reads key head h / group).
    let q = heads_of(&q_rows.narrow(1, queries.start, rows)?, 0, heads)?.reshape((
        batch,
        kv_heads,
        group * rows,
        hd,
    ))?;
    let k = heads_of(kv_rows, k_col, kv_heads)?;
    let v = heads_of(kv_rows, k_col + kv_heads * hd, kv_heads)?;
    let mut scores = (q.matmul(&k.t()?)? * (1.0 / (hd as f64).sqrt()))?;
    if mask.pattern.block().is_some() {
        let mask = causal_mask(key_lens, keys, &queries, group, mask, q_rows.device())?;
        scores = scores.broadcast_add(&mask)?;
    } else if key_lens.iter().any(|&l| l < keys) {
        let mask = key_mask(key_lens, keys, q_rows.device())?;
        scores = scores.broadcast_add(&mask)?;
    }
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    probs
        .matmul(&v)?
        .reshape((batch, heads, rows, hd))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((batch, rows, heads * hd))
}

/// Additive `[B, 1, 1, keys]` mask: 0 for a sequence's keys, -inf past its length.
fn key_mask(key_lens: &[usize], keys: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<f32> = key_lens
        .iter()
        .flat_map(|&l| (0..keys).map(move |j| if j < l { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Tensor::from_vec(mask, (key_lens.len(), 1, 1, keys), device)
}

/// Additive `[B, 1, group * queries, keys]` mask (rows as the folded query heads lie: head-group
/// member first, then query): 0 where a query sees a key, -inf elsewhere.
fn causal_mask(
    key_lens: &[usize],
    keys: usize,
    queries: &std::ops::Range<usize>,
    group: usize,
    mask: Mask,
    device: &Device,
) -> Result<Tensor> {
    let rows = queries.len();
    let mut values = Vec::with_capacity(key_lens.len() * group * rows * keys);
    for &len in key_lens {
        for _ in 0..group {
            for row in queries.clone() {
                let seen = mask.visible(row, len);
                values.extend((0..keys).map(|j| if j < seen { 0.0 } else { f32::NEG_INFINITY }));
            }
        }
    }
    Tensor::from_vec(values, (key_lens.len(), 1, group * rows, keys), device)
}

/// [`super::bias_rope_`], returning the result: `qkv + bias`, then RoPE (`rotate_half`) on the
/// query and key heads. `bias` is `[width]`; `cos` and `sin` are `[T, head_dim / 2]`.
pub fn bias_rope(
    qkv: &Tensor,
    bias: &Tensor,
    layout: HeadLayout,
    cos: &Tensor,
    sin: &Tensor,
) -> Result<Tensor> {
    let HeadLayout {
        heads,
        kv_heads,
        head_dim: hd,
    } = layout;
    let (b, t, width) = qkv.dims3()?;
    if width != (heads + 2 * kv_heads) * hd {
        candle_core::bail!(
            "bias-rope: rows of {width} values for {heads}+2x{kv_heads} heads of {hd}"
        );
    }
    let x = qkv.broadcast_add(bias)?;
    let rotated = heads + kv_heads;
    let qk = x
        .narrow(D::Minus1, 0, rotated * hd)?
        .reshape((b, t, rotated, hd))?
        .transpose(1, 2)?
        .contiguous()?;
    let qk = candle_nn::rotary_emb::rope(&qk, cos, sin)?
        .transpose(1, 2)?
        .reshape((b, t, rotated * hd))?;
    Tensor::cat(
        &[&qk, &x.narrow(D::Minus1, rotated * hd, kv_heads * hd)?],
        D::Minus1,
    )
}

/// [`super::swiglu`]: `silu(gate) * up` where the last dimension of `gate_up` is `[gate | up]`.
pub fn swiglu(gate_up: &Tensor) -> Result<Tensor> {
    let half = gate_up.dim(D::Minus1)? / 2;
    let gate = gate_up.narrow(D::Minus1, 0, half)?;
    let up = gate_up.narrow(D::Minus1, half, half)?;
    candle_nn::ops::silu(&gate)? * up
}
