//! Fused CPU kernels for inference, where candle's generic ops spend their time in scalar libm
//! `expf` and extra tensors: softmax over the last dimension and SwiGLU (`silu(gate) * up`).
//!
//! Both use [`exp`], a branch-free exponential (relative error < 1e-6, well inside the 1e-4
//! parity budget), written out again in AVX2+FMA intrinsics and picked at run time when the CPU
//! has them; the tests hold both paths to candle's reference ops. Inference only: these ops have
//! no backward pass.
//!
//! They run on CPU storage only; [`portable`] composes the same operations from candle's own
//! ops for every other device, and [`Kernels`] says which of the two a model uses.

mod few_queries;
pub mod half;
pub mod portable;
pub mod q8;

use candle_core::{CpuStorage, CustomOp1, Device, Layout, Result, Shape, Tensor};

use crate::config::AttentionPattern;
use rayon::prelude::*;

/// Which implementation of the fused operations a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// The CPU kernels of this module (custom candle ops over CPU storage).
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

/// e^x for f32, vectorisable: x = n ln 2 + r with n an integer (the exponent bits) and
/// |r| <= ln2 / 2, ln 2 split in two parts so r stays exact (Cody-Waite), then a degree-6
/// polynomial for e^r.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer without a branch.
    const ROUND: f32 = 12_582_912.0;
    // Selects, not `clamp`: they vectorise (clamp's NaN rules do not).
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let k = x * LOG2E + ROUND;
    let n = k - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // n's integer value sits in k's low mantissa bits: integer ops only, no float-to-int
    // conversion (whose saturating semantics would stop vectorisation).
    let n_int = k.to_bits().wrapping_sub(ROUND.to_bits());
    p * f32::from_bits(n_int.wrapping_add(127) << 23)
}

#[inline(always)]
fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

#[inline(always)]
fn swiglu_row(gate_up: &[f32], out: &mut [f32]) {
    let (gate, up) = gate_up.split_at(out.len());
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp(-g)) * u;
    }
}

/// Softmax of each row of `width` in place, on this thread (training's kernels reuse it).
#[doc(hidden)]
pub fn softmax_rows(data: &mut [f32], width: usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { avx2::softmax_rows(data, width) };
    }
    for row in data.chunks_mut(width) {
        softmax_row(row);
    }
}

/// SwiGLU of each `[gate | up]` row of `2 * width` into `dst`, on this thread (training's
/// kernels reuse it).
#[doc(hidden)]
pub fn swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { avx2::swiglu_rows(src, dst, width) };
    }
    for (gate_up, out) in src.chunks(2 * width).zip(dst.chunks_mut(width)) {
        swiglu_row(gate_up, out);
    }
}

/// The same kernels with explicit AVX2+FMA intrinsics (8 lanes), same arithmetic as [`exp`].
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(-87.0)),
            _mm256_set1_ps(88.0),
        );
        let round = _mm256_set1_ps(12_582_912.0);
        let k = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), round);
        let n = _mm256_sub_ps(k, round);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut p = _mm256_set1_ps(1.0 / 720.0);
        for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let n_int = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_castps_si256(round));
        let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(n_int, _mm256_set1_epi32(127)));
        _mm256_mul_ps(p, _mm256_castsi256_ps(scale))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hmax(v: __m256) -> f32 {
        let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_max_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax_rows(data: &mut [f32], width: usize) {
        let full = width / 8 * 8;
        for row in data.chunks_mut(width) {
            let ptr = row.as_mut_ptr();
            let mut vmax = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut i = 0;
            while i < full {
                // SAFETY: i + 8 <= full <= row.len().
                vmax = _mm256_max_ps(vmax, unsafe { _mm256_loadu_ps(ptr.add(i)) });
                i += 8;
            }
            let mut max = hmax(vmax);
            for &x in &row[full..] {
                max = max.max(x);
            }
            let vm = _mm256_set1_ps(max);
            let mut vsum = _mm256_setzero_ps();
            let mut i = 0;
            while i < full {
                // SAFETY: as above.
                unsafe {
                    let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(ptr.add(i)), vm));
                    _mm256_storeu_ps(ptr.add(i), e);
                    vsum = _mm256_add_ps(vsum, e);
                }
                i += 8;
            }
            let mut sum = hsum(vsum);
            for x in &mut row[full..] {
                *x = super::exp(*x - max);
                sum += *x;
            }
            let inv = 1.0 / sum;
            let vi = _mm256_set1_ps(inv);
            let mut i = 0;
            while i < full {
                // SAFETY: as above.
                unsafe {
                    _mm256_storeu_ps(ptr.add(i), _mm256_mul_ps(_mm256_loadu_ps(ptr.add(i)), vi))
                };
                i += 8;
            }
            for x in &mut row[full..] {
                *x *= inv;
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
        let full = width / 8 * 8;
        let one = _mm256_set1_ps(1.0);
        let zero = _mm256_setzero_ps();
        for (gate_up, out) in src.chunks(2 * width).zip(dst.chunks_mut(width)) {
            let (g, u, o) = (
                gate_up.as_ptr(),
                gate_up[width..].as_ptr(),
                out.as_mut_ptr(),
            );
            let mut i = 0;
            while i < full {
                // SAFETY: i + 8 <= full <= width, and gate_up holds 2 * width values.
                unsafe {
                    let gv = _mm256_loadu_ps(g.add(i));
                    let silu = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, gv))));
                    _mm256_storeu_ps(o.add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(u.add(i))));
                }
                i += 8;
            }
            for j in full..width {
                let gj = gate_up[j];
                out[j] = gj / (1.0 + super::exp(-gj)) * gate_up[width + j];
            }
        }
    }
}

/// Rows per parallel task: enough work to be worth a thread hop.
#[doc(hidden)]
pub fn rows_per_task(width: usize) -> usize {
    (16_384 / width.max(1)).max(1)
}

/// The f32 data of a contiguous CPU tensor (the fused ops' input check; training's ops reuse it).
#[doc(hidden)]
pub fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

struct Softmax;

impl candle_core::InplaceOp1 for Softmax {
    fn name(&self) -> &'static str {
        "redraft-softmax"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("{}: only f32 is supported", self.name())
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("{}: input must be contiguous", self.name())
        };
        let width = layout.shape().dims().last().copied().unwrap_or(1);
        softmax_in_place(&mut data[start..end], width);
        Ok(())
    }
}

struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "redraft-swiglu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        swiglu_cpu(storage, layout)
    }
}

/// SwiGLU over `[gate | up]` rows: the forward of both the inference op and the training op.
#[doc(hidden)]
pub fn swiglu_cpu(storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
    let src = contiguous_f32(storage, layout, "swiglu")?;
    let dims = layout.shape().dims();
    let full = dims.last().copied().unwrap_or(0);
    if full % 2 != 0 {
        candle_core::bail!("swiglu: last dimension {full} is odd");
    }
    let width = full / 2;
    let mut dst = vec![0f32; src.len() / 2];
    let rows = rows_per_task(width);
    src.par_chunks(full * rows)
        .zip(dst.par_chunks_mut(width * rows))
        .for_each(|(s, d)| swiglu_rows(s, d, width));
    let mut out = dims.to_vec();
    *out.last_mut().expect("at least one dimension") = width;
    Ok((CpuStorage::F32(dst), Shape::from_dims(&out)))
}

/// Softmax over the last dimension of `data` (rows of `width`), in parallel: the forward of
/// both the inference op and the training op.
#[doc(hidden)]
pub fn softmax_in_place(data: &mut [f32], width: usize) {
    data.par_chunks_mut(width * rows_per_task(width))
        .for_each(|chunk| softmax_rows(chunk, width));
}

/// Which columns of the fused projection rows hold what (see [`attention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLayout {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// Attention, fused: for each (sequence, head, block of queries) one task
/// computes the block's scores against every key, its softmax and the weighted values, so no
/// `[heads, queries, keys]` tensor is ever materialised, nothing is transposed, and
/// grouped-query heads read their shared keys in place. Keys past `key_lens[b]` (padding) are
/// left out entirely, and so are the keys a causal or block-causal [`Mask`] hides from a query.
/// A decoding step's few query rows (at most [`few_queries::FEW`] a sequence) take
/// [`few_queries`]' kernel instead, where these blocks would be tiny matrix products.
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

/// A raw pointer that tasks writing disjoint parts of one buffer may share.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: every task writes a disjoint set of elements (see `Attention::cpu_fwd`).
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    /// The pointer `offset` elements in (a method, so closures capture the `Send` wrapper).
    fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
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
        let HeadLayout {
            heads,
            kv_heads,
            head_dim: hd,
        } = self.layout;
        let (batch, q_len, q_stride) = q_layout.shape().dims3()?;
        let (kv_batch, keys, kv_stride) = kv_layout.shape().dims3()?;
        if kv_batch != batch
            || q_stride < heads * hd
            || kv_stride < self.k_col + 2 * kv_heads * hd
            || self.queries.end > q_len
        {
            candle_core::bail!(
                "{name}: rows {:?} / {:?} do not hold {heads} query and {kv_heads} key heads of {hd} (queries {:?})",
                q_layout.shape(), kv_layout.shape(), self.queries
            );
        }
        if kv_heads == 0 || heads % kv_heads != 0 || self.key_lens.len() != batch {
            candle_core::bail!(
                "{name}: {heads} heads, {kv_heads} key heads, {} key lengths for {batch} sequences",
                self.key_lens.len()
            );
        }
        if let Some(&bad) = self.key_lens.iter().find(|&&l| l == 0 || l > keys) {
            candle_core::bail!("{name}: key length {bad} outside 1..={keys}");
        }
        let queries = self.queries.len();
        if queries <= few_queries::FEW {
            let visible = |b: usize, row: usize| self.mask.visible(row, self.key_lens[b]);
            let shapes = few_queries::Shapes {
                heads,
                kv_heads,
                head_dim: hd,
                q_len,
                q_stride,
                keys,
                kv_stride,
                k_col: self.k_col,
                queries: self.queries.clone(),
                visible: &visible,
            };
            return Ok((
                CpuStorage::F32(few_queries::attention(q, kv, batch, &shapes)),
                Shape::from_dims(&[batch, queries, heads * hd]),
            ));
        }
        let group = heads / kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut out = vec![0f32; batch * queries * heads * hd];
        let out_ptr = SharedMut(out.as_mut_ptr());
        // Blocks small enough to keep a block's scores in L2, and enough tasks for every thread.
        let block = queries.clamp(1, 64);
        let blocks = queries.div_ceil(block);
        (0..batch * heads * blocks)
            .into_par_iter()
            .for_each(|task| {
                let (b, rest) = (task / (heads * blocks), task % (heads * blocks));
                let (h, blk) = (rest / blocks, rest % blocks);
                let q0 = blk * block;
                let rows = block.min(queries - q0);
                // Query rows see a prefix of the keys each (all of them when bidirectional); the
                // block's last row sees the most.
                let row0 = self.queries.start + q0;
                let kl = self.mask.visible(row0 + rows - 1, self.key_lens[b]);
                let g = h / group;
                let q_at = (b * q_len + self.queries.start + q0) * q_stride + h * hd;
                let k_at = b * keys * kv_stride + self.k_col + g * hd;
                let v_at = k_at + kv_heads * hd;
                let mut scores = vec![0f32; rows * kl];
                // SAFETY: every pointer stays inside its buffer (the checks above bound rows,
                // columns and key lengths). The destination rows (b, q0..q0 + rows, h, 0..hd) belong
                // to this task alone, so concurrent tasks never write the same element.
                unsafe {
                    gemm::gemm(
                        rows,
                        kl,
                        hd,
                        scores.as_mut_ptr(),
                        1,
                        kl as isize,
                        false,
                        q.as_ptr().add(q_at),
                        1,
                        q_stride as isize,
                        kv.as_ptr().add(k_at),
                        kv_stride as isize,
                        1,
                        0.0,
                        scale,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                    if self.mask.visible(row0, kl) == kl {
                        softmax_rows(&mut scores, kl);
                    } else {
                        for (r, row) in scores.chunks_mut(kl).enumerate() {
                            let seen = self.mask.visible(row0 + r, kl);
                            softmax_rows(&mut row[..seen], seen);
                            row[seen..].fill(0.0);
                        }
                    }
                    gemm::gemm(
                        rows,
                        hd,
                        kl,
                        out_ptr.at(((b * queries + q0) * heads + h) * hd),
                        1,
                        (heads * hd) as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        kl as isize,
                        kv.as_ptr().add(v_at),
                        1,
                        kv_stride as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
            });
        Ok((
            CpuStorage::F32(out),
            Shape::from_dims(&[batch, queries, heads * hd]),
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
/// `rotate_half` convention), in place.
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
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("{name}: only f32 is supported")
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("{name}: input must be contiguous")
        };
        let (_, rows, width) = layout.shape().dims3()?;
        let HeadLayout {
            heads,
            kv_heads,
            head_dim: hd,
        } = self.layout;
        let half = hd / 2;
        if width != (heads + 2 * kv_heads) * hd
            || self.bias.len() != width
            || self.cos.len() != rows * half
            || self.sin.len() != rows * half
        {
            candle_core::bail!(
                "{name}: rows of {width} values, bias {}, {} rotations for {rows} rows",
                self.bias.len(),
                self.cos.len()
            );
        }
        let rotated = (heads + kv_heads) * hd;
        data[start..end]
            .par_chunks_mut(width)
            .enumerate()
            .for_each(|(i, row)| {
                let t = i % rows;
                let (cos, sin) = (
                    &self.cos[t * half..(t + 1) * half],
                    &self.sin[t * half..(t + 1) * half],
                );
                for (x, b) in row.iter_mut().zip(self.bias) {
                    *x += b;
                }
                for head in row[..rotated].chunks_mut(hd) {
                    let (x1, x2) = head.split_at_mut(half);
                    for j in 0..half {
                        let (a, b) = (x1[j], x2[j]);
                        x1[j] = a * cos[j] - b * sin[j];
                        x2[j] = b * cos[j] + a * sin[j];
                    }
                }
            });
        Ok(())
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
    fn fast_exp_is_accurate_over_the_useful_range() {
        let mut worst: f32 = 0.0;
        for i in -8700..=8800 {
            let x = i as f32 / 100.0;
            let rel = ((exp(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
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
