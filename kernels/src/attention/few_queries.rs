//! Attention for a few query rows against many keys: a decoding step's rows.
//!
//! [`super::attention`]'s blocked path computes each (sequence, head, block of queries) with two
//! matrix products through `gemm`. With the 1-8 rows of a decoding step those products are a few
//! thousand multiply-adds each and `gemm`'s set-up per call is most of their cost: a fused
//! serving call of 8 lanes on the 0.5B model makes ~2,700 of them a layer pass, about 15% of
//! the call. Here one task takes one query row and every query head of one key head's group,
//! so each key and value row is read once for the whole group, the scores are dot products in
//! registers, and nothing is packed or transposed. The arithmetic is the same (scaled dot
//! products, softmax, weighted sum of values); only the order of the additions differs. On
//! x86-64 the common head sizes have their own paths: AVX-512 and AVX2 score 16 or 8 keys at a
//! time (their sums taken across lanes together), and AVX2 takes keys and values in blocks that
//! stay in L1 while the group's heads read them. `cargo bench -p redraft-engine --bench
//! attention` times them.

use rayon::prelude::*;

use super::Shapes;
use crate::rows::softmax_rows;

/// Query rows per sequence up to which [`super::attention`] takes this path.
pub(crate) const FEW: usize = 8;

/// Attention output `[batch, queries, heads * head_dim]` for the rows of `q` (queries) and `kv`
/// (keys from column `k_col`, values right after them), shapes checked by the caller.
pub(super) fn attention(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Vec<f32> {
    let (hd, heads, kv_heads) = (s.layout.head_dim, s.layout.heads, s.layout.kv_heads);
    let group = heads / kv_heads;
    let queries = s.queries.len();
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; s.batch * queries * heads * hd];
    // One task per (sequence, query row, key head): the group's heads of that row, which lie
    // side by side in the output.
    out.par_chunks_mut(group * hd)
        .enumerate()
        .for_each(|(task, out)| {
            let (row_of_batch, g) = (task / kv_heads, task % kv_heads);
            let (b, r) = (row_of_batch / queries, row_of_batch % queries);
            let row = s.queries.start + r;
            let seen = (s.visible)(row, s.key_lens[b]).min(s.key_lens[b]);
            let q_at = (b * s.q_len + row) * s.q_stride + g * group * hd;
            let k_at = b * s.keys * s.kv_stride + s.k_col + g * hd;
            group_row(
                &q[q_at..q_at + group * hd],
                &kv[k_at..],
                Keys {
                    head_dim: hd,
                    count: seen,
                    stride: s.kv_stride,
                    values: kv_heads * hd,
                },
                scale,
                out,
            );
        });
    out
}

/// Where one key head's keys lie: key `j` at `j * stride`, its values `values` after it.
#[derive(Clone, Copy)]
struct Keys {
    head_dim: usize,
    count: usize,
    stride: usize,
    values: usize,
}

impl Keys {
    /// The query heads `q` holds, once it is checked that `q` and `out` hold the same whole
    /// heads and `kv` every key and its values (what the vector paths' pointer reads rely on).
    #[cfg(target_arch = "x86_64")]
    fn heads_checked(self, q: &[f32], kv: &[f32], out: &[f32]) -> usize {
        let hd = self.head_dim;
        assert!(
            q.len().is_multiple_of(hd)
                && out.len() == q.len()
                && self.count > 0
                && kv.len() >= (self.count - 1) * self.stride + self.values + hd
        );
        q.len() / hd
    }
}

/// The query heads in `q` (`keys.head_dim` values each, side by side) attending to `keys` of
/// `kv`, into `out` (the same layout). The vector paths check the slices against `keys`
/// themselves (`Keys::heads_checked`); what they need from here is the CPU's features.
fn group_row(q: &[f32], kv: &[f32], keys: Keys, scale: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        match keys.head_dim {
            // SAFETY: `available` detected AVX-512F; 64 = 16 * 4.
            64 => return unsafe { avx512::group_row::<4>(q, kv, keys, scale, out) },
            // SAFETY: as above; 128 = 16 * 8.
            128 => return unsafe { avx512::group_row::<8>(q, kv, keys, scale, out) },
            // SAFETY: as above; 32 = 16 * 2.
            32 => return unsafe { avx512::group_row::<2>(q, kv, keys, scale, out) },
            _ => {}
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::rows::avx2::available() {
        match keys.head_dim {
            // SAFETY: `available` detected AVX2 and FMA; 64 = 8 * 8, 8 a multiple of 4.
            64 => return unsafe { avx2::group_row::<8>(q, kv, keys, scale, out) },
            // SAFETY: as above; 128 = 8 * 16.
            128 => return unsafe { avx2::group_row::<16>(q, kv, keys, scale, out) },
            // SAFETY: as above; 32 = 8 * 4.
            32 => return unsafe { avx2::group_row::<4>(q, kv, keys, scale, out) },
            // SAFETY: `available` detected AVX2 and FMA, all `group_row_fma` enables.
            _ => return unsafe { group_row_fma(q, kv, keys, scale, out) },
        }
    }
    group_row_any(q, kv, keys, scale, out)
}

/// [`group_row_any`] compiled with AVX2 and FMA (the loops vectorise to 8 lanes with FMAs).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn group_row_fma(q: &[f32], kv: &[f32], keys: Keys, scale: f32, out: &mut [f32]) {
    group_row_any(q, kv, keys, scale, out)
}

/// Lanes of the accumulators: chunks the compiler keeps in vector registers.
const LANES: usize = 16;

#[inline(always)]
fn group_row_any(q: &[f32], kv: &[f32], keys: Keys, scale: f32, out: &mut [f32]) {
    let hd = keys.head_dim;
    let group = q.len() / hd;
    let kl = keys.count;
    let mut scores = vec![0f32; group * kl];
    for j in 0..kl {
        let k = &kv[j * keys.stride..][..hd];
        for h in 0..group {
            scores[h * kl + j] = dot(&q[h * hd..][..hd], k) * scale;
        }
    }
    softmax_rows(&mut scores, kl);
    out.fill(0.0);
    for j in 0..kl {
        let v = &kv[j * keys.stride + keys.values..][..hd];
        for h in 0..group {
            add_scaled(&mut out[h * hd..][..hd], scores[h * kl + j], v);
        }
    }
}

/// `a · b`, in [`LANES`] partial sums.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            acc[i] = x[i].mul_add(y[i], acc[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `out += p * v`.
#[inline(always)]
fn add_scaled(out: &mut [f32], p: f32, v: &[f32]) {
    for (o, v) in out.iter_mut().zip(v) {
        *o = p.mul_add(*v, *o);
    }
}

/// The same with AVX-512 for head sizes of `16 * C`: scores 16 keys at a time (their dot products
/// summed across lanes by one transpose, not one horizontal sum per key), then the weighted
/// values for up to 4 heads at a time in registers.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::Keys;

    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
    }

    /// [`super::group_row`] for head sizes of `16 * C` (asserted, with the slices: see
    /// [`Keys::heads_checked`]).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn group_row<const C: usize>(
        q: &[f32],
        kv: &[f32],
        keys: Keys,
        scale: f32,
        out: &mut [f32],
    ) {
        let hd = 16 * C;
        assert_eq!(keys.head_dim, hd);
        let group = keys.heads_checked(q, kv, out);
        let kl = keys.count;
        let mut scores = vec![0f32; group * kl];
        let kv = kv.as_ptr();
        let scale = _mm512_set1_ps(scale);
        // SAFETY: the CPU has AVX-512F (caller). `heads_checked` asserted that key j < kl lies
        // at kv[j * stride..][..hd] and its values `values` further, inside `kv`, and that `q`
        // and `out` hold `group` heads of hd = 16 * C: the loads of query head h < group, the
        // stores of output head h + i < group, and scores[(h + i) * kl + j] (of group * kl)
        // stay in their slices.
        unsafe {
            for h in 0..group {
                let qh: [__m512; C] =
                    std::array::from_fn(|c| _mm512_loadu_ps(q.as_ptr().add(h * hd + 16 * c)));
                let dot = |j: usize| -> __m512 {
                    let k = kv.add(j * keys.stride);
                    let mut t = _mm512_mul_ps(qh[0], _mm512_loadu_ps(k));
                    for (c, &qc) in qh.iter().enumerate().skip(1) {
                        t = _mm512_fmadd_ps(qc, _mm512_loadu_ps(k.add(16 * c)), t);
                    }
                    t
                };
                let row = scores.as_mut_ptr().add(h * kl);
                let mut j = 0;
                while j + 16 <= kl {
                    // A loop, not `array::from_fn`: LLVM unrolled that for 128-wide heads and
                    // spilled, 10-20% slower on a decoding step's attention.
                    let mut t = [_mm512_setzero_ps(); 16];
                    for (i, t) in t.iter_mut().enumerate() {
                        *t = dot(j + i);
                    }
                    _mm512_storeu_ps(row.add(j), _mm512_mul_ps(sums(t), scale));
                    j += 16;
                }
                for j in j..kl {
                    *row.add(j) = _mm512_reduce_add_ps(dot(j)) * _mm512_cvtss_f32(scale);
                }
            }
            crate::rows::softmax_rows(&mut scores, kl);
            let mut h = 0;
            while h < group {
                let n = (group - h).min(4);
                let mut acc = [[_mm512_setzero_ps(); C]; 4];
                for j in 0..kl {
                    let v = kv.add(j * keys.stride + keys.values);
                    let vj: [__m512; C] = std::array::from_fn(|c| _mm512_loadu_ps(v.add(16 * c)));
                    for (i, acc) in acc.iter_mut().enumerate().take(n) {
                        let p = _mm512_set1_ps(*scores.get_unchecked((h + i) * kl + j));
                        for c in 0..C {
                            acc[c] = _mm512_fmadd_ps(p, vj[c], acc[c]);
                        }
                    }
                }
                for (i, acc) in acc.iter().enumerate().take(n) {
                    for (c, &a) in acc.iter().enumerate() {
                        _mm512_storeu_ps(out.as_mut_ptr().add((h + i) * hd + 16 * c), a);
                    }
                }
                h += n;
            }
        }
    }

    /// The lane sums of 16 vectors, as one vector (element i: the sum of `t[i]`): pairs summed
    /// within 128-bit lanes (32-bit, then 64-bit interleaves), then across the four lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sums(t: [__m512; 16]) -> __m512 {
        let a: [__m512; 8] = std::array::from_fn(|i| {
            let (x, y) = (t[2 * i], t[2 * i + 1]);
            _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y))
        });
        // Per 128-bit lane k of b[i]: the lane-k sums of t[4i..4i + 4].
        let b: [__m512; 4] = std::array::from_fn(|i| {
            let (x, y) = (_mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
            _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)),
            )
        });
        // 0x88: lanes (0, 2) of each operand; 0xDD: lanes (1, 3).
        let d0 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(b[0], b[1]),
            _mm512_shuffle_f32x4::<0xDD>(b[0], b[1]),
        );
        let d1 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(b[2], b[3]),
            _mm512_shuffle_f32x4::<0xDD>(b[2], b[3]),
        );
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(d0, d1),
            _mm512_shuffle_f32x4::<0xDD>(d0, d1),
        )
    }
}

/// The same with AVX2 and FMA for head sizes of `8 * C` (`C` a multiple of 4): scores 8 keys at a
/// time (their dot products summed across lanes together, not one horizontal sum per key), then
/// the weighted values in registers, 32 columns of up to 3 heads at a time (12 of the 16
/// registers), so each value row is read a few times per group instead of once per head.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::Keys;

    /// Query heads whose weighted values are summed together.
    const HEADS: usize = 3;

    /// Floats of keys (or values) a block holds: 16 KiB, half of L1.
    const BLOCK_FLOATS: usize = 4096;

    /// [`super::group_row`] for head sizes of `8 * C` with `C % 4 == 0` (asserted, with the
    /// slices: see [`Keys::heads_checked`]).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn group_row<const C: usize>(
        q: &[f32],
        kv: &[f32],
        keys: Keys,
        scale: f32,
        out: &mut [f32],
    ) {
        let hd = 8 * C;
        assert!(C.is_multiple_of(4) && keys.head_dim == hd);
        let group = keys.heads_checked(q, kv, out);
        let kl = keys.count;
        let mut scores = vec![0f32; group * kl];
        let kv = kv.as_ptr();
        // Keys a block: the group's heads take a block's keys (or values) in turn while they
        // are in L1, instead of each head reading every key from L2 or beyond.
        let block = (BLOCK_FLOATS / hd).max(8);
        // SAFETY: the CPU has AVX2 and FMA (caller). `heads_checked` asserted that key j < kl
        // lies at kv[j * stride..][..hd] and its values `values` further, inside `kv`, and that
        // `q` and `out` hold `group` heads of hd = 8 * C: query head h < group, columns
        // col..col + 32 of output head h + i < group (hd is a multiple of 32) and
        // scores[(h + i) * kl + j] (of group * kl) stay in their slices.
        unsafe {
            let scale_v = _mm256_set1_ps(scale);
            for from in (0..kl).step_by(block) {
                let to = (from + block).min(kl);
                for h in 0..group {
                    let qh = q.as_ptr().add(h * hd);
                    // `dot8` inlined always, called from a loop rather than `array::from_fn`:
                    // left to LLVM, 128-wide heads' dot product went out of line (through
                    // `from_fn`) or ran ~10% slower (a closure in the loop).
                    let dot = |j: usize| dot8::<C>(qh, kv.add(j * keys.stride));
                    let row = scores.as_mut_ptr().add(h * kl);
                    let mut j = from;
                    while j + 8 <= to {
                        let mut t = [_mm256_setzero_ps(); 8];
                        for (i, t) in t.iter_mut().enumerate() {
                            *t = dot(j + i);
                        }
                        _mm256_storeu_ps(row.add(j), _mm256_mul_ps(sums(t), scale_v));
                        j += 8;
                    }
                    for j in j..to {
                        *row.add(j) = crate::rows::avx2::hsum(dot(j)) * scale;
                    }
                }
            }
            crate::rows::softmax_rows(&mut scores, kl);
            out.fill(0.0);
            for from in (0..kl).step_by(block) {
                let to = (from + block).min(kl);
                for col in (0..hd).step_by(32) {
                    let mut h = 0;
                    while h < group {
                        let n = (group - h).min(HEADS);
                        let at = |i: usize, c: usize| (h + i) * hd + col + 8 * c;
                        let mut acc = [[_mm256_setzero_ps(); 4]; HEADS];
                        for (i, acc) in acc.iter_mut().enumerate().take(n) {
                            for (c, a) in acc.iter_mut().enumerate() {
                                *a = _mm256_loadu_ps(out.as_ptr().add(at(i, c)));
                            }
                        }
                        for j in from..to {
                            let v = kv.add(j * keys.stride + keys.values + col);
                            let vj: [__m256; 4] =
                                std::array::from_fn(|c| _mm256_loadu_ps(v.add(8 * c)));
                            for (i, acc) in acc.iter_mut().enumerate().take(n) {
                                let p = _mm256_set1_ps(*scores.get_unchecked((h + i) * kl + j));
                                for c in 0..4 {
                                    acc[c] = _mm256_fmadd_ps(p, vj[c], acc[c]);
                                }
                            }
                        }
                        for (i, acc) in acc.iter().enumerate().take(n) {
                            for (c, &a) in acc.iter().enumerate() {
                                _mm256_storeu_ps(out.as_mut_ptr().add(at(i, c)), a);
                            }
                        }
                        h += n;
                    }
                }
            }
        }
    }

    /// The 8 lanes of the products of query head `qh` and key `k` (8 * C floats each), summed
    /// over the C vectors (not across lanes).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `qh` and `k` point at 8 * C floats.
    #[inline(always)]
    unsafe fn dot8<const C: usize>(qh: *const f32, k: *const f32) -> __m256 {
        // SAFETY: the caller's promises: the CPU features (this is inlined into `group_row`,
        // which enables them) and 8 * C floats at `qh` and at `k`.
        unsafe {
            let mut t = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_loadu_ps(k));
            for c in 1..C {
                t = _mm256_fmadd_ps(
                    _mm256_loadu_ps(qh.add(8 * c)),
                    _mm256_loadu_ps(k.add(8 * c)),
                    t,
                );
            }
            t
        }
    }

    /// The lane sums of 8 vectors, as one vector (element i: the sum of `t[i]`): pairs added
    /// within 128-bit halves twice, then the two halves added.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sums(t: [__m256; 8]) -> __m256 {
        let a: [__m256; 4] = std::array::from_fn(|i| _mm256_hadd_ps(t[2 * i], t[2 * i + 1]));
        // Per half k of b[i]: that half's sums of t[4i..4i + 4].
        let b0 = _mm256_hadd_ps(a[0], a[1]);
        let b1 = _mm256_hadd_ps(a[2], a[3]);
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(b0, b1),
            _mm256_permute2f128_ps::<0x31>(b0, b1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{max_abs_diff, random};

    /// Every vector path this CPU runs (not only the one `group_row` picks: an AVX-512 machine
    /// runs the AVX2 paths here too) equals the generic code, at the head sizes they take, with
    /// key counts on and off their blocks of 8 and 16.
    #[test]
    fn every_path_this_cpu_runs_matches_the_generic_code() {
        for hd in [32, 64, 128] {
            for (group, count) in [(1, 1), (3, 7), (6, 16), (7, 17), (2, 300)] {
                let keys = Keys {
                    head_dim: hd,
                    count,
                    stride: 2 * hd + 5,
                    values: hd + 3,
                };
                let q = random(group * hd, hd as u64);
                let kv = random(count * keys.stride, count as u64);
                let scale = 1.0 / (hd as f32).sqrt();
                let run = |path: &dyn Fn(&mut [f32])| {
                    let mut out = vec![f32::NAN; group * hd];
                    path(&mut out);
                    out
                };
                let expected = run(&|out| group_row_any(&q, &kv, keys, scale, out));
                #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
                let mut paths: Vec<(&str, Vec<f32>)> = Vec::new();
                #[cfg(target_arch = "x86_64")]
                if avx512::available() {
                    // SAFETY: `available` detected AVX-512F; hd = 16 * C in each arm.
                    let got = run(&|out| unsafe {
                        match hd {
                            32 => avx512::group_row::<2>(&q, &kv, keys, scale, out),
                            64 => avx512::group_row::<4>(&q, &kv, keys, scale, out),
                            _ => avx512::group_row::<8>(&q, &kv, keys, scale, out),
                        }
                    });
                    paths.push(("AVX-512", got));
                }
                #[cfg(target_arch = "x86_64")]
                if crate::rows::avx2::available() {
                    // SAFETY: `available` detected AVX2 and FMA; hd = 8 * C with C % 4 == 0.
                    let got = run(&|out| unsafe {
                        match hd {
                            32 => avx2::group_row::<4>(&q, &kv, keys, scale, out),
                            64 => avx2::group_row::<8>(&q, &kv, keys, scale, out),
                            _ => avx2::group_row::<16>(&q, &kv, keys, scale, out),
                        }
                    });
                    paths.push(("AVX2", got));
                    // SAFETY: as above.
                    let got = run(&|out| unsafe { group_row_fma(&q, &kv, keys, scale, out) });
                    paths.push(("generic with FMA", got));
                }
                for (path, got) in paths {
                    assert!(
                        got.iter().all(|v| v.is_finite()),
                        "{path} left values unwritten"
                    );
                    let diff = max_abs_diff(&got, &expected);
                    assert!(
                        diff < 1e-5,
                        "{path}: head size {hd}, {group} heads, {count} keys: {diff}"
                    );
                }
            }
        }
    }
}
