//! Fused CPU kernels for inference, where candle's generic ops spend their time in scalar libm
//! `expf` and extra tensors: softmax over the last dimension and SwiGLU (`silu(gate) * up`).
//!
//! Both use [`exp`], a branch-free exponential (relative error < 1e-6, well inside the 1e-4
//! parity budget), written out again in AVX2+FMA intrinsics and picked at run time when the CPU
//! has them; the tests hold both paths to candle's reference ops. Inference only: these ops have
//! no backward pass.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

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

fn softmax_rows(data: &mut [f32], width: usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { avx2::softmax_rows(data, width) };
    }
    for row in data.chunks_mut(width) {
        softmax_row(row);
    }
}

fn swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
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
    fn hsum(v: __m256) -> f32 {
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
fn rows_per_task(width: usize) -> usize {
    (16_384 / width.max(1)).max(1)
}

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
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
        data[start..end]
            .par_chunks_mut(width * rows_per_task(width))
            .for_each(|chunk| softmax_rows(chunk, width));
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
        let diff: f32 = (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert!(diff < 1e-6, "softmax differs by {diff}");

        let gu = Tensor::randn(0f32, 3.0, (4, 2 * 19), &Device::Cpu).unwrap();
        let ours = swiglu(&gu).unwrap();
        let (gate, up) = (gu.narrow(1, 0, 19).unwrap(), gu.narrow(1, 19, 19).unwrap());
        let reference = (candle_nn::ops::silu(&gate).unwrap() * up).unwrap();
        let diff: f32 = (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert!(diff < 1e-5, "swiglu differs by {diff}");
    }
}
