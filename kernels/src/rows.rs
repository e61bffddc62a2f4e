//! Row kernels, where candle's generic ops spend their time in scalar libm `expf` and extra
//! tensors: softmax of each row and SwiGLU (`silu(gate) * up`) of each `[gate | up]` row.
//!
//! Both use [`exp`], a branch-free exponential (relative error < 1e-6, well inside the 1e-4
//! parity budget), written out again in AVX2+FMA intrinsics and picked at run time when the CPU
//! has them (and in AVX-512, `avx512::exp16`, for the attention tiles); the tests hold both paths to the f64 formulas. The `par_` functions split the rows
//! into tasks of [`rows_per_task`] on rayon's threads; the others run on the calling thread, for
//! callers that are already inside a parallel task (attention, training's passes).

use rayon::prelude::*;

/// The constants of [`exp`] and its vector forms (`avx2::exp8`, `avx512::exp16`), one formula:
/// the input clamped to where `e^x` is a normal `f32`, `x = n ln 2 + r` with ln 2 split in
/// two for precision, `e^r` by its Taylor polynomial (coefficients highest first, Horner).
const EXP_MIN: f32 = -87.0;
const EXP_MAX: f32 = 88.0;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding and subtracting it rounds to the nearest integer without a branch.
const ROUND: f32 = 12_582_912.0;
const EXP_POLY: [f32; 7] = [
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// e^x for f32, vectorisable: x = n ln 2 + r with n an integer (the exponent bits) and
/// |r| <= ln2 / 2, ln 2 split in two parts so r stays exact (Cody-Waite), then a degree-6
/// polynomial for e^r.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Selects, not `clamp`: they vectorise (clamp's NaN rules do not).
    let x = if x < EXP_MIN { EXP_MIN } else { x };
    let x = if x > EXP_MAX { EXP_MAX } else { x };
    let k = x * LOG2E + ROUND;
    let n = k - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = EXP_POLY[1..].iter().fold(EXP_POLY[0], |p, &c| p * r + c);
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

/// Softmax of each row of `width` in place, on this thread (a last row may be shorter).
pub fn softmax_rows(data: &mut [f32], width: usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: `available` detected AVX2 and FMA on this CPU.
        return unsafe { avx2::softmax_rows(data, width) };
    }
    for row in data.chunks_mut(width) {
        softmax_row(row);
    }
}

/// SwiGLU of each `[gate | up]` row of `2 * width` of `src` into the row of `width` of `dst`,
/// on this thread.
pub fn swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: `available` detected AVX2 and FMA on this CPU.
        return unsafe { avx2::swiglu_rows(src, dst, width) };
    }
    for (gate_up, out) in src.chunks(2 * width).zip(dst.chunks_mut(width)) {
        swiglu_row(gate_up, out);
    }
}

/// Rows per parallel task: enough work to be worth a thread hop.
pub fn rows_per_task(width: usize) -> usize {
    (16_384 / width.max(1)).max(1)
}

/// [`softmax_rows`] on rayon's threads.
pub fn par_softmax_rows(data: &mut [f32], width: usize) {
    data.par_chunks_mut(width * rows_per_task(width))
        .for_each(|chunk| softmax_rows(chunk, width));
}

/// [`swiglu_rows`] on rayon's threads.
pub fn par_swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
    let rows = rows_per_task(width);
    src.par_chunks(2 * width * rows)
        .zip(dst.par_chunks_mut(width * rows))
        .for_each(|(s, d)| swiglu_rows(s, d, width));
}

/// The same kernels with explicit AVX2+FMA intrinsics (8 lanes), same arithmetic as [`exp`].
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8(x: __m256) -> __m256 {
        use crate::rows::{EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, LOG2E, ROUND};
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(EXP_MIN)),
            _mm256_set1_ps(EXP_MAX),
        );
        let round = _mm256_set1_ps(ROUND);
        let k = _mm256_fmadd_ps(x, _mm256_set1_ps(LOG2E), round);
        let n = _mm256_sub_ps(k, round);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let n_int = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_castps_si256(round));
        let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(n_int, _mm256_set1_epi32(127)));
        _mm256_mul_ps(p, _mm256_castsi256_ps(scale))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn hsum(v: __m256) -> f32 {
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

    /// [`super::softmax_rows`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax_rows(data: &mut [f32], width: usize) {
        for row in data.chunks_mut(width) {
            // The row's own length: the last row may be shorter than `width`.
            let full = row.len() / 8 * 8;
            let ptr = row.as_mut_ptr();
            let mut vmax = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut i = 0;
            while i < full {
                // SAFETY: i + 8 <= full <= row.len(): the 8 floats lie in `row`.
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
                // SAFETY: i + 8 <= full <= row.len(): the 8 floats lie in `row`, which `ptr`
                // borrows mutably.
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
                // SAFETY: i + 8 <= full <= row.len(): the 8 floats lie in `row`, which `ptr`
                // borrows mutably.
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

    /// [`super::swiglu_rows`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn swiglu_rows(src: &[f32], dst: &mut [f32], width: usize) {
        let one = _mm256_set1_ps(1.0);
        let zero = _mm256_setzero_ps();
        for (gate_up, out) in src.chunks(2 * width).zip(dst.chunks_mut(width)) {
            // Bounds-checked once a row: `n` gate, up and output values.
            let n = out.len();
            let (gate, up) = (&gate_up[..n], &gate_up[width..width + n]);
            let full = n / 8 * 8;
            let (g, u, o) = (gate.as_ptr(), up.as_ptr(), out.as_mut_ptr());
            let mut i = 0;
            while i < full {
                // SAFETY: i + 8 <= full <= n, and `gate`, `up` and `out` hold n floats each.
                unsafe {
                    let gv = _mm256_loadu_ps(g.add(i));
                    let silu = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, gv))));
                    _mm256_storeu_ps(o.add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(u.add(i))));
                }
                i += 8;
            }
            for j in full..n {
                out[j] = gate[j] / (1.0 + super::exp(-gate[j])) * up[j];
            }
        }
    }
}

/// [`exp`] with AVX-512, for kernels elsewhere in the crate that already hold 16 lanes (the
/// attention tiles' softmax).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use std::arch::x86_64::*;

    /// [`crate::rows::exp`], 16 lanes at a time.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn exp16(x: __m512) -> __m512 {
        use crate::rows::{EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, LOG2E, ROUND};
        let x = _mm512_min_ps(
            _mm512_max_ps(x, _mm512_set1_ps(EXP_MIN)),
            _mm512_set1_ps(EXP_MAX),
        );
        let round = _mm512_set1_ps(ROUND);
        let k = _mm512_fmadd_ps(x, _mm512_set1_ps(LOG2E), round);
        let n = _mm512_sub_ps(k, round);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let n_int = _mm512_sub_epi32(_mm512_castps_si512(k), _mm512_castps_si512(round));
        let scale = _mm512_slli_epi32::<23>(_mm512_add_epi32(n_int, _mm512_set1_epi32(127)));
        _mm512_mul_ps(p, _mm512_castsi512_ps(scale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in `[-scale, scale)`.
    fn random(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5) * 2.0 * scale
            })
            .collect()
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

    /// The rows' kernels (the AVX2 path where this CPU has it, and the portable one) equal the
    /// f64 formulas, at widths on and off the 8 lanes, in parallel and on one thread, with a
    /// last row shorter than the others.
    #[test]
    fn row_kernels_match_the_formulas() {
        for width in [1, 7, 8, 19, 37, 64, 300] {
            let rows = 5;
            let x = random(rows * width + width / 2, width as u64, 6.0);
            let mut ours = x.clone();
            softmax_rows(&mut ours, width);
            let mut parallel = x.clone();
            par_softmax_rows(&mut parallel, width);
            assert_eq!(ours, parallel);
            let mut portable = x.clone();
            portable.chunks_mut(width).for_each(softmax_row);
            for ((row, got), portable) in x
                .chunks(width)
                .zip(ours.chunks(width))
                .zip(portable.chunks(width))
            {
                let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
                for ((&v, &g), &p) in row.iter().zip(got).zip(portable) {
                    let expected = (v as f64 - max).exp() / sum;
                    assert!((g as f64 - expected).abs() < 1e-6, "softmax {width}");
                    assert!(
                        (p as f64 - expected).abs() < 1e-6,
                        "portable softmax {width}"
                    );
                }
            }

            let gate_up = random(rows * 2 * width, 7 + width as u64, 6.0);
            let mut ours = vec![0f32; rows * width];
            swiglu_rows(&gate_up, &mut ours, width);
            let mut parallel = vec![0f32; rows * width];
            par_swiglu_rows(&gate_up, &mut parallel, width);
            assert_eq!(ours, parallel);
            for (gu, out) in gate_up.chunks(2 * width).zip(ours.chunks(width)) {
                let mut portable = vec![0f32; width];
                swiglu_row(gu, &mut portable);
                for j in 0..width {
                    let (g, u) = (gu[j] as f64, gu[width + j] as f64);
                    let expected = g / (1.0 + (-g).exp()) * u;
                    let tolerance = 1e-5 * expected.abs().max(1.0);
                    assert!(
                        (out[j] as f64 - expected).abs() < tolerance,
                        "swiglu {width}"
                    );
                    assert!((portable[j] as f64 - expected).abs() < tolerance);
                }
            }
        }
    }
}
