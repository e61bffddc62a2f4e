//! Half-precision weights on the CPU: f16 or bf16 matrices kept in their 2 bytes a weight and
//! multiplied with f32 activations, each weight widened to f32 in registers (AVX-512: one
//! instruction per 16 weights) and accumulated with FMAs.
//!
//! Why: a checkpoint's f16/bf16 matrices widened to f32 at load take twice the memory and twice
//! the reading a decoding step does (every weight once per step); kept half they take the file's
//! bytes. The layout is panels, as [`crate::q8`]'s: 16 weight rows (output columns) side by side
//! per input, so one load is 16 columns of one input, one FMA multiplies them with a broadcast
//! activation, and the 16 sums land as 16 output columns. Tiles are up to 4 activation rows by
//! 32 columns (decoding: one row by 64), every widened weight register used for 4 rows.
//!
//! Used only where the CPU has AVX-512 (F, BW, F16C); elsewhere the weights are widened to f32
//! at load, as before.

use rayon::prelude::*;

use crate::q8::in_bands;

/// Output columns per panel: the 16 f32 lanes of a 512-bit register.
const PANEL: usize = 16;

/// Which half format the weights are in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HalfKind {
    F16,
    Bf16,
}

/// A `[rows, cols]` matrix of f16 or bf16 weights in panels.
pub struct HalfMatrix {
    rows: usize,
    cols: usize,
    kind: HalfKind,
    /// Group `g` (rows `16 g..16 g + 16`), input `k`: the 16 rows' weights at
    /// `(g * cols + k) * 16`; the last group's missing rows are zero.
    values: Vec<u16>,
}

impl HalfMatrix {
    /// Whether this CPU runs the kernel.
    pub fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// From `rows` rows of `cols` half floats (`bits`, row-major, a checkpoint's `[out, in]`).
    /// From `parts`, runs of whole rows of `cols` weights stacked in order (a fused
    /// projection's parts, read where they lie).
    pub fn new(parts: &[&[u16]], cols: usize, kind: HalfKind) -> HalfMatrix {
        let mut starts = Vec::with_capacity(parts.len());
        let mut rows = 0;
        for part in parts {
            assert!(part.len().is_multiple_of(cols), "rows of {cols}");
            starts.push(rows);
            rows += part.len() / cols;
        }
        let row = |r: usize| {
            let i = starts.partition_point(|&s| s <= r) - 1;
            &parts[i][(r - starts[i]) * cols..][..cols]
        };
        let groups = rows.div_ceil(PANEL);
        let mut values = vec![0u16; groups * cols * PANEL];
        values
            .par_chunks_mut(cols * PANEL)
            .enumerate()
            .for_each(|(g, panel)| {
                for n in 0..PANEL.min(rows - g * PANEL) {
                    for (k, &w) in row(g * PANEL + n).iter().enumerate() {
                        panel[k * PANEL + n] = w;
                    }
                }
            });
        HalfMatrix {
            rows,
            cols,
            kind,
            values,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn kind(&self) -> HalfKind {
        self.kind
    }

    /// Bytes the matrix holds (the last panel's padding rows included).
    pub fn bytes(&self) -> usize {
        self.values.len() * 2
    }

    /// Weight `(row, k)` as f32.
    fn weight(&self, row: usize, k: usize) -> f32 {
        let bits = self.values[((row / PANEL) * self.cols + k) * PANEL + row % PANEL];
        match self.kind {
            HalfKind::F16 => half::f16::from_bits(bits).to_f32(),
            HalfKind::Bf16 => half::bf16::from_bits(bits).to_f32(),
        }
    }

    /// `x @ W^T` for `m` rows of `x` (`[m, cols]`, row-major): `[m, rows]`.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols, "activations of the wrong width");
        // SAFETY: x holds m rows of cols (asserted above); `in_bands` hands each call a pointer
        // to its `[m, rows]` output and groups no other call has, as `band` requires.
        in_bands(m, self.rows, |groups, out| unsafe {
            self.band(x, m, groups, out)
        })
    }

    /// Panel groups `groups` of every row into `out` (`[m, rows]`).
    ///
    /// # Safety
    /// `x` holds `m` rows of `cols`; `groups` are panel groups of this matrix; `out` points at
    /// `m * rows` floats of which no other thread reads or writes these groups' columns while
    /// this runs.
    unsafe fn band(&self, x: &[f32], m: usize, groups: std::ops::Range<usize>, out: *mut f32) {
        #[cfg(target_arch = "x86_64")]
        if HalfMatrix::available() {
            // SAFETY: `available` detected the features `avx512::band` enables; the rest is the
            // caller's promise, which is `avx512::band`'s.
            unsafe { avx512::band(self, x, m, groups, out) };
            return;
        }
        for r in 0..m {
            for c in groups.start * PANEL..(groups.end * PANEL).min(self.rows) {
                let sum = (0..self.cols)
                    .map(|k| x[r * self.cols + k] * self.weight(c, k))
                    .sum();
                // SAFETY: r < m and c < rows, so `r * rows + c` is within `out`, a column of
                // `groups`, which no other thread touches (caller).
                unsafe { *out.add(r * self.rows + c) = sum };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{HalfKind, HalfMatrix, PANEL};

    /// Panel groups `groups` of every row, in tiles of up to 4 rows by 2 panels (one row by 4
    /// panels when there are fewer than 4 rows).
    ///
    /// # Safety
    /// The CPU has the features enabled here; `x`, `groups` and `out` are as
    /// [`HalfMatrix::band`] requires.
    #[target_feature(enable = "avx512f,avx512bw,f16c")]
    pub unsafe fn band(
        w: &HalfMatrix,
        x: &[f32],
        m: usize,
        groups: std::ops::Range<usize>,
        out: *mut f32,
    ) {
        let mut g = groups.start;
        while g < groups.end {
            let left = groups.end - g;
            // SAFETY: every tile's rows lie in `0..m` (r + rows <= m) and its panel groups in
            // `groups` (g + 4 or g + width <= groups.end), as `tile` requires; the rest is the
            // caller's.
            unsafe {
                if m < 4 && left >= 4 {
                    for r in 0..m {
                        tiles::<1, 4>(w, x, r, g, out);
                    }
                    g += 4;
                    continue;
                }
                let width = left.min(2);
                let mut r = 0;
                while r < m {
                    let rows = (m - r).min(4);
                    match (rows, width) {
                        (4, 2) => tiles::<4, 2>(w, x, r, g, out),
                        (4, _) => tiles::<4, 1>(w, x, r, g, out),
                        (_, 2) => {
                            for rr in r..r + rows {
                                tiles::<1, 2>(w, x, rr, g, out)
                            }
                        }
                        _ => {
                            for rr in r..r + rows {
                                tiles::<1, 1>(w, x, rr, g, out)
                            }
                        }
                    }
                    r += rows;
                }
                g += width;
            }
        }
    }

    /// The tile for the matrix's format (one branch, outside the loops).
    ///
    /// # Safety
    /// As [`tile`]'s.
    #[target_feature(enable = "avx512f,avx512bw,f16c")]
    unsafe fn tiles<const R: usize, const G: usize>(
        w: &HalfMatrix,
        x: &[f32],
        r: usize,
        g: usize,
        out: *mut f32,
    ) {
        // SAFETY: the caller's promises are `tile`'s, and `BF16` says the matrix's own format.
        unsafe {
            match w.kind {
                HalfKind::F16 => tile::<R, G, false>(w, x, r, g, out),
                HalfKind::Bf16 => tile::<R, G, true>(w, x, r, g, out),
            }
        }
    }

    /// Rows `r..r + R` of the output times panel groups `g..g + G`: per input, the panels' 16
    /// weights widened to f32 and multiplied with the row's activation, broadcast.
    ///
    /// # Safety
    /// The CPU has the features enabled here; rows `r..r + R` lie in `x` (rows of `w.cols`)
    /// and groups `g..g + G` in `w`'s panel groups; `out` points at the `[x rows, w.rows]`
    /// output, whose columns of those groups no other thread touches.
    #[target_feature(enable = "avx512f,avx512bw,f16c")]
    #[allow(clippy::needless_range_loop)] // a kernel over tiles
    unsafe fn tile<const R: usize, const G: usize, const BF16: bool>(
        w: &HalfMatrix,
        x: &[f32],
        r: usize,
        g: usize,
        out: *mut f32,
    ) {
        let cols = w.cols;
        let mut acc = [[_mm512_setzero_ps(); G]; R];
        let values = w.values.as_ptr();
        let xs = x.as_ptr();
        // Panel group g + j (< the matrix's groups) holds `cols` inputs of 16 weights, and rows
        // r + i < R of `x` hold `cols` activations: what every read below relies on.
        for k in 0..cols {
            let weights: [__m512; G] = std::array::from_fn(|j| {
                // SAFETY: input k's 16 weights of group g + j, inside `w.values` (see above).
                let bits = unsafe {
                    _mm256_loadu_si256(values.add(((g + j) * cols + k) * PANEL) as *const _)
                };
                if BF16 {
                    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16))
                } else {
                    _mm512_cvtph_ps(bits)
                }
            });
            for i in 0..R {
                // SAFETY: activation k of row r + i, inside `x` (see above).
                let a = _mm512_set1_ps(unsafe { *xs.add((r + i) * cols + k) });
                for j in 0..G {
                    acc[i][j] = _mm512_fmadd_ps(weights[j], a, acc[i][j]);
                }
            }
        }
        for i in 0..R {
            for j in 0..G {
                let first = (g + j) * PANEL;
                let valid = w.rows.saturating_sub(first).min(PANEL);
                let mask: __mmask16 = if valid == PANEL {
                    !0
                } else {
                    (1u16 << valid) - 1
                };
                // SAFETY: the mask keeps columns first..first + valid (< w.rows) of row r + i,
                // inside `out` and in group g + j, which is this call's alone (caller).
                unsafe {
                    _mm512_mask_storeu_ps(out.add((r + i) * w.rows + first), mask, acc[i][j])
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::random;

    /// The kernel is the matmul with the half weights widened to f32 (up to the order of the
    /// f32 sums), for both formats, at tile edges: rows not multiples of 4, columns not of 16,
    /// one row (the decoding tile) and several.
    #[test]
    fn the_kernel_is_the_widened_matmul() {
        for (m, rows, cols) in [
            (1, 7, 64),
            (1, 130, 96),
            (2, 70, 33),
            (5, 9, 96),
            (13, 50, 128),
        ] {
            let w = random(rows * cols, 1);
            let x = random(m * cols, 2);
            for kind in [HalfKind::F16, HalfKind::Bf16] {
                let bits: Vec<u16> = w
                    .iter()
                    .map(|&v| match kind {
                        HalfKind::F16 => half::f16::from_f32(v).to_bits(),
                        HalfKind::Bf16 => half::bf16::from_f32(v).to_bits(),
                    })
                    .collect();
                // In two runs of rows, as a fused projection's parts arrive.
                let (a, b) = bits.split_at(rows / 2 * cols);
                let matrix = HalfMatrix::new(&[a, b], cols, kind);
                assert_eq!(matrix.rows(), rows);
                assert_eq!(matrix.bytes(), rows.next_multiple_of(PANEL) * cols * 2);
                let got = matrix.matmul(&x, m);
                for r in 0..m {
                    for c in 0..rows {
                        let exact: f64 = (0..cols)
                            .map(|k| x[r * cols + k] as f64 * matrix.weight(c, k) as f64)
                            .sum();
                        let g = got[r * rows + c] as f64;
                        assert!(
                            (g - exact).abs() < 1e-5,
                            "{m}x{rows}x{cols} {kind:?}: {g} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
