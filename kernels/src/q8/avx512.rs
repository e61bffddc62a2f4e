//! The panel kernel for CPUs with AVX-512 VNNI: tiles of up to 4 activation rows by 2 panels (32
//! columns), or a decoding step's row by 4 panels; each `vpdpbusd` multiplies four inputs of a
//! broadcast activation row with the 16 columns of a panel line.

use std::arch::x86_64::*;

use super::{Packing, Q8Matrix, Quantized, Scales, BLOCK, BYTES, FIVE, FOUR, PANEL, SIX};

/// Whether this CPU runs this kernel.
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512vnni")
        && std::is_x86_feature_detected!("f16c")
}

/// Panel groups `groups` of every row, in tiles of up to 4 rows by 2 panels (one row by 4
/// panels when there are fewer than 4 rows: a decoding step).
///
/// # Safety
/// The CPU has the features enabled here; `x`, `groups` and `out` are as
/// [`Q8Matrix::band`] requires.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
pub unsafe fn band(
    w: &Q8Matrix,
    x: &Quantized,
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

/// The tile for the matrix's packing (one branch, outside the loops).
///
/// # Safety
/// As [`tile`]'s.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn tiles<const R: usize, const G: usize>(
    w: &Q8Matrix,
    x: &Quantized,
    r: usize,
    g: usize,
    out: *mut f32,
) {
    // SAFETY: the caller's promises are `tile`'s, and `P` is the matrix's own packing.
    unsafe {
        match w.packing {
            Packing::Bytes => tile::<R, G, BYTES>(w, x, r, g, out),
            Packing::Five => tile::<R, G, FIVE>(w, x, r, g, out),
            Packing::Four => tile::<R, G, FOUR>(w, x, r, g, out),
            Packing::Six => tile::<R, G, SIX>(w, x, r, g, out),
        }
    }
}

/// Line `k` (< 8) of a panel, unpacked to its 64 unsigned integers.
///
/// # Safety
/// The CPU has AVX-512F and BW; `panel` points at a whole panel of `P`'s packing (its
/// `Packing::lines` lines), 64-byte aligned.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn line<const P: u8>(panel: *const u8, k: usize) -> __m512i {
    // SAFETY: the lines read are those `P`'s packing has for unpacked line k (k, k / 2,
    // and 64 bytes of bit masks at lines 4 and 5), inside the panel (caller); the aligned
    // loads are at multiples of 64 from its 64-byte aligned start (`Line`).
    unsafe {
        if P == BYTES {
            return _mm512_load_si512(panel.add(k * 64) as *const _);
        }
        let raw = _mm512_load_si512(panel.add(k / 2 * 64) as *const _);
        let nibble = _mm512_set1_epi8(0x0F);
        let mut v = if k.is_multiple_of(2) {
            _mm512_and_si512(raw, nibble)
        } else {
            _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble)
        };
        if P == FIVE || P == SIX {
            let bits = (panel.add(4 * 64 + 8 * k) as *const u64).read_unaligned();
            v = _mm512_mask_add_epi8(v, bits, v, _mm512_set1_epi8(16));
        }
        if P == SIX {
            let bits = (panel.add(5 * 64 + 8 * k) as *const u64).read_unaligned();
            v = _mm512_mask_add_epi8(v, bits, v, _mm512_set1_epi8(32));
        }
        v
    }
}

/// Rows `r..r + R` of the output times panel groups `g..g + G`: for each block, 8 steps of
/// `vpdpbusd` (4 inputs of each row, broadcast, times 16 columns of each panel) into i32
/// lanes (Q6_K: one sum per half block), the offsets and minimums taken back with the row's
/// block sums, scaled by both sides' scales into f32 accumulators that are the output's
/// columns.
///
/// # Safety
/// The CPU has the features enabled here; `P` is `w`'s packing; rows `r..r + R` lie in
/// `x`'s rows and groups `g..g + G` in `w`'s panel groups; `out` points at the
/// `[x rows, w.rows]` output, whose columns of those groups no other thread touches.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
#[allow(clippy::needless_range_loop)] // a kernel over tiles
unsafe fn tile<const R: usize, const G: usize, const P: u8>(
    w: &Q8Matrix,
    x: &Quantized,
    r: usize,
    g: usize,
    out: *mut f32,
) {
    let blocks = w.cols / BLOCK;
    let per_panel = w.packing.lines();
    let offset = w.packing.offset();
    let mut acc = [[_mm512_setzero_ps(); G]; R];
    let lines = w.lines.as_ptr() as *const u8;
    let x_values = x.values.as_ptr();
    // Panel (g + j, b) exists for every j < G and b < blocks (the caller's groups), and
    // rows r + i < R hold `blocks` blocks of activations: what every read below relies on.
    for b in 0..blocks {
        let panels: [*const u8; G] = std::array::from_fn(|j| {
            // SAFETY: panel (g + j, b) starts there, inside `w.lines` (see above).
            unsafe { lines.add(((g + j) * blocks + b) * per_panel * 64) }
        });
        let panel = |j: usize| ((g + j) * blocks + b) * PANEL;
        let scales: [[__m512; 2]; G] = std::array::from_fn(|j| {
            // SAFETY: panel (g + j, b) has 16 scales (f16) or 2 x 16 (f32) at `panel(j)`
            // (times 2), inside `w.scales`.
            unsafe {
                match &w.scales {
                    Scales::Half(s) => [
                        _mm512_cvtph_ps(_mm256_loadu_si256(s.as_ptr().add(panel(j)) as *const _)),
                        _mm512_setzero_ps(),
                    ],
                    Scales::Full(s) => [
                        _mm512_loadu_ps(s.as_ptr().add(2 * panel(j))),
                        _mm512_loadu_ps(s.as_ptr().add(2 * panel(j) + PANEL)),
                    ],
                }
            }
        });
        // Q6_K's two half blocks have scales of their own: each half's integer sums fold
        // into `acc` before the next half's start, so only R x G sums are live at a time
        // (both halves' at once spilled registers and ran Q6_K at half Q4_K's speed).
        let halves = if P == SIX { 2 } else { 1 };
        for half in 0..halves {
            let mut dot = [[_mm512_setzero_si512(); G]; R];
            for k in half * 8 / halves..(half + 1) * 8 / halves {
                let weights: [__m512i; G] = std::array::from_fn(|j| {
                    // SAFETY: `panels[j]` is a whole panel of packing `P` (caller), k < 8.
                    unsafe { line::<P>(panels[j], k) }
                });
                for i in 0..R {
                    // SAFETY: inputs 4k..4k + 4 (k < 8) of block b of row r + i, inside
                    // `x.values`.
                    let quad = unsafe {
                        (x_values.add(((r + i) * blocks + b) * BLOCK + 4 * k) as *const i32)
                            .read_unaligned()
                    };
                    let quad = _mm512_set1_epi32(quad);
                    for j in 0..G {
                        dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], weights[j], quad);
                    }
                }
            }
            for i in 0..R {
                let at = (r + i) * blocks + b;
                // SAFETY: block b of row r + i: one sum pair and scale each.
                let ([s0, s1], x_scale) =
                    unsafe { (*x.sums.get_unchecked(at), *x.scales.get_unchecked(at)) };
                let x_scale = _mm512_set1_ps(x_scale);
                for j in 0..G {
                    let [a, c] = scales[j];
                    acc[i][j] = match P {
                        BYTES | FIVE => {
                            let exact =
                                _mm512_sub_epi32(dot[i][j], _mm512_set1_epi32(offset * (s0 + s1)));
                            _mm512_fmadd_ps(
                                _mm512_cvtepi32_ps(exact),
                                _mm512_mul_ps(a, x_scale),
                                acc[i][j],
                            )
                        }
                        FOUR => _mm512_fmadd_ps(
                            _mm512_fmsub_ps(
                                a,
                                _mm512_cvtepi32_ps(dot[i][j]),
                                _mm512_mul_ps(c, _mm512_set1_ps((s0 + s1) as f32)),
                            ),
                            x_scale,
                            acc[i][j],
                        ),
                        _ => {
                            let (scale, sum) = if half == 0 { (a, s0) } else { (c, s1) };
                            let exact =
                                _mm512_sub_epi32(dot[i][j], _mm512_set1_epi32(offset * sum));
                            _mm512_fmadd_ps(
                                _mm512_cvtepi32_ps(exact),
                                _mm512_mul_ps(scale, x_scale),
                                acc[i][j],
                            )
                        }
                    };
                }
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
            unsafe { _mm512_mask_storeu_ps(out.add((r + i) * w.rows + first), mask, acc[i][j]) };
        }
    }
}
