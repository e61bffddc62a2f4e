//! The panel kernel for CPUs with AVX2 but no AVX-512 VNNI (most laptops' x86 chips, AMD before
//! Zen 4). The panels are the same; a 64-byte line is read as two 256-bit halves (rows 0..8 and
//! 8..16 of the panel), and each `vpdpbusd` of the AVX-512 kernel becomes `vpmaddubsw` (pairs
//! of unsigned-by-signed products summed to i16) then `vpmaddwd` by ones (pairs of those summed
//! to the i32 of 4 inputs a row), twice: a half line each.
//!
//! `vpmaddubsw` saturates its i16 pair sums, which only Q8_0's stored bytes (`w + 128`, up to
//! 255) can reach: those are turned back into signed weights and multiplied as `|w|` by the
//! activation with `w`'s sign (at most 128·127·2, under 2^15), so Q8_0 needs no offset. The
//! other packings (at most 63) times an activation (at most 127 in magnitude) stay far below.

use std::arch::x86_64::*;

use super::{Packing, Q8Matrix, Quantized, Scales, BLOCK, BYTES, FIVE, FOUR, PANEL, SIX};

/// Whether this CPU runs this kernel.
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c")
}

/// Panel groups `groups` of every row, in tiles of up to 6 rows by one panel (the last tile
/// takes the rows left, so each panel is unpacked once per 6 rows; 6 rather than 4 made a
/// 512-token prompt ~10% faster on a Zen 3 core); one or two rows, a decoding step's, go two
/// panels at a time.
///
/// # Safety
/// The CPU has the features enabled here; `x`, `groups` and `out` are as [`Q8Matrix::band`]
/// requires.
#[target_feature(enable = "avx2,fma,f16c")]
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
        // `groups` (g + width <= groups.end), as `tile` requires; the rest is the caller's.
        unsafe {
            // Few rows (a decoding step): every row in one tile, two panels at a time.
            let width = if m <= 2 { left.min(2) } else { 1 };
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(6);
                match (rows, width) {
                    (6, _) => tiles::<6, 1>(w, x, r, g, out),
                    (5, _) => tiles::<5, 1>(w, x, r, g, out),
                    (4, _) => tiles::<4, 1>(w, x, r, g, out),
                    (3, _) => tiles::<3, 1>(w, x, r, g, out),
                    (2, 2) => tiles::<2, 2>(w, x, r, g, out),
                    (2, _) => tiles::<2, 1>(w, x, r, g, out),
                    (_, 2) => tiles::<1, 2>(w, x, r, g, out),
                    _ => tiles::<1, 1>(w, x, r, g, out),
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
#[target_feature(enable = "avx2,fma,f16c")]
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

/// 32 bits as 32 bytes: byte `i` is 0xFF where bit `i` is set, else 0.
#[target_feature(enable = "avx2")]
fn bytes_of_bits(bits: u32) -> __m256i {
    // Byte i takes byte i / 8 of the word (the shuffle works within each 128-bit lane; both
    // lanes hold the whole word), then keeps its own bit i % 8.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select)
}

/// Half `h` (< 2: rows `8h..8h + 8`) of line `k` (< 8) of a panel, unpacked to its 32
/// integers: unsigned, except Q8_0's, which come back signed (`w`, not `w + 128`).
///
/// # Safety
/// The CPU has AVX2; `panel` points at a whole panel of `P`'s packing (its `Packing::lines`
/// lines of 64 bytes).
#[target_feature(enable = "avx2")]
unsafe fn half_line<const P: u8>(panel: *const u8, k: usize, h: usize) -> __m256i {
    // SAFETY: the bytes read are those `P`'s packing has for half h of unpacked line k (32 of
    // line k or k / 2, and 8 bytes of bit masks at lines 4 and 5), inside the panel (caller);
    // the loads are unaligned ones.
    unsafe {
        if P == BYTES {
            let stored = _mm256_loadu_si256(panel.add(k * 64 + 32 * h) as *const _);
            return _mm256_xor_si256(stored, _mm256_set1_epi8(-128));
        }
        let raw = _mm256_loadu_si256(panel.add(k / 2 * 64 + 32 * h) as *const _);
        let nibble = _mm256_set1_epi8(0x0F);
        let mut v = if k.is_multiple_of(2) {
            _mm256_and_si256(raw, nibble)
        } else {
            _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble)
        };
        let bits = |line: usize| {
            let word = (panel.add(line * 64 + 8 * k) as *const u64).read_unaligned();
            (word >> (32 * h)) as u32
        };
        if P == FIVE || P == SIX {
            let set = bytes_of_bits(bits(4));
            v = _mm256_add_epi8(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        }
        if P == SIX {
            let set = bytes_of_bits(bits(5));
            v = _mm256_add_epi8(v, _mm256_and_si256(set, _mm256_set1_epi8(32)));
        }
        v
    }
}

/// Lines whose 16-bit pair sums may be added before they are widened to i32: 2·63·127 per
/// line for Q6_K, 2·31·127 for Q5_0, 2·15·127 for Q4_K, 2·128·127 for Q8_0; 2^15 bounds the
/// total.
const fn lines_in_i16(p: u8) -> usize {
    match p {
        FIVE => 4,
        FOUR => 8,
        SIX => 2,
        _ => 1,
    }
}

/// Rows `r..r + R` of the output times panel groups `g..g + G`, as the AVX-512 kernel's tile
/// computes them, a panel's 16 columns as two halves of 8 done one after the other (half the
/// live registers).
///
/// # Safety
/// The CPU has the features enabled here; `P` is `w`'s packing; rows `r..r + R` lie in `x`'s
/// rows and groups `g..g + G` in `w`'s panel groups; `out` points at the `[x rows, w.rows]`
/// output, whose columns of those groups no other thread touches.
#[target_feature(enable = "avx2,fma,f16c")]
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
    // Q8_0's weights come back signed (see the module's documentation): no offset.
    let offset = if P == BYTES { 0 } else { w.packing.offset() };
    let in_i16 = lines_in_i16(P);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[[_mm256_setzero_ps(); 2]; G]; R];
    let lines = w.lines.as_ptr() as *const u8;
    let x_values = x.values.as_ptr();
    // Panel (g + j, b) exists for every j < G and b < blocks (the caller's groups), and rows
    // r + i < R hold `blocks` blocks of activations: what every read below relies on.
    for b in 0..blocks {
        let panels: [*const u8; G] = std::array::from_fn(|j| {
            // SAFETY: panel (g + j, b) starts there, inside `w.lines` (see above).
            unsafe { lines.add(((g + j) * blocks + b) * per_panel * 64) }
        });
        let panel = |j: usize| ((g + j) * blocks + b) * PANEL;
        // Q6_K's two half blocks have scales of their own: each half's sums fold into `acc`
        // before the next half's start.
        let halves = if P == SIX { 2 } else { 1 };
        for h in 0..2 {
            for half in 0..halves {
                let mut dot = [[_mm256_setzero_si256(); G]; R];
                let mut pairs = [[_mm256_setzero_si256(); G]; R];
                let first = half * 8 / halves;
                for k in first..(half + 1) * 8 / halves {
                    let weights: [__m256i; G] = std::array::from_fn(|j| {
                        // SAFETY: `panels[j]` is a whole panel of packing `P` (caller); k < 8,
                        // h < 2.
                        unsafe { half_line::<P>(panels[j], k, h) }
                    });
                    // Q8_0: |w| as the unsigned operand, once per line for every row.
                    let magnitudes: [__m256i; G] = if P == BYTES {
                        std::array::from_fn(|j| _mm256_abs_epi8(weights[j]))
                    } else {
                        weights
                    };
                    let widen = (k - first + 1).is_multiple_of(in_i16);
                    for i in 0..R {
                        // SAFETY: inputs 4k..4k + 4 (k < 8) of block b of row r + i, inside
                        // `x.values`.
                        let quad = unsafe {
                            (x_values.add(((r + i) * blocks + b) * BLOCK + 4 * k) as *const i32)
                                .read_unaligned()
                        };
                        let quad = _mm256_set1_epi32(quad);
                        for j in 0..G {
                            let signed = if P == BYTES {
                                _mm256_sign_epi8(quad, weights[j])
                            } else {
                                quad
                            };
                            pairs[i][j] = _mm256_add_epi16(
                                pairs[i][j],
                                _mm256_maddubs_epi16(magnitudes[j], signed),
                            );
                            if widen {
                                dot[i][j] = _mm256_add_epi32(
                                    dot[i][j],
                                    _mm256_madd_epi16(pairs[i][j], ones),
                                );
                                pairs[i][j] = _mm256_setzero_si256();
                            }
                        }
                    }
                }
                for j in 0..G {
                    // SAFETY: panel (g + j, b) has 16 scales (f16) or 2 x 16 (f32) at
                    // `panel(j)` (times 2), inside `w.scales`; h < 2 picks 8 of the 16.
                    let [a, c] = unsafe {
                        match &w.scales {
                            Scales::Half(s) => [
                                _mm256_cvtph_ps(_mm_loadu_si128(
                                    s.as_ptr().add(panel(j) + 8 * h) as *const _
                                )),
                                _mm256_setzero_ps(),
                            ],
                            Scales::Full(s) => [
                                _mm256_loadu_ps(s.as_ptr().add(2 * panel(j) + 8 * h)),
                                _mm256_loadu_ps(s.as_ptr().add(2 * panel(j) + PANEL + 8 * h)),
                            ],
                        }
                    };
                    for i in 0..R {
                        let at = (r + i) * blocks + b;
                        // SAFETY: block b of row r + i: one sum pair and scale each.
                        let ([s0, s1], x_scale) =
                            unsafe { (*x.sums.get_unchecked(at), *x.scales.get_unchecked(at)) };
                        let x_scale = _mm256_set1_ps(x_scale);
                        let dot = dot[i][j];
                        acc[i][j][h] = match P {
                            BYTES | FIVE => {
                                let exact =
                                    _mm256_sub_epi32(dot, _mm256_set1_epi32(offset * (s0 + s1)));
                                _mm256_fmadd_ps(
                                    _mm256_cvtepi32_ps(exact),
                                    _mm256_mul_ps(a, x_scale),
                                    acc[i][j][h],
                                )
                            }
                            FOUR => _mm256_fmadd_ps(
                                _mm256_fmsub_ps(
                                    a,
                                    _mm256_cvtepi32_ps(dot),
                                    _mm256_mul_ps(c, _mm256_set1_ps((s0 + s1) as f32)),
                                ),
                                x_scale,
                                acc[i][j][h],
                            ),
                            _ => {
                                let (scale, sum) = if half == 0 { (a, s0) } else { (c, s1) };
                                let exact = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset * sum));
                                _mm256_fmadd_ps(
                                    _mm256_cvtepi32_ps(exact),
                                    _mm256_mul_ps(scale, x_scale),
                                    acc[i][j][h],
                                )
                            }
                        };
                    }
                }
            }
        }
    }
    for i in 0..R {
        for j in 0..G {
            let first = (g + j) * PANEL;
            let valid = w.rows.saturating_sub(first).min(PANEL);
            let mut columns = [0f32; PANEL];
            // SAFETY: `columns` holds 16 floats.
            unsafe {
                _mm256_storeu_ps(columns.as_mut_ptr(), acc[i][j][0]);
                _mm256_storeu_ps(columns.as_mut_ptr().add(8), acc[i][j][1]);
            }
            // SAFETY: columns first..first + valid (< w.rows) of row r + i lie in `out`, in
            // group g + j, which is this call's alone (caller).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    columns.as_ptr(),
                    out.add((r + i) * w.rows + first),
                    valid,
                )
            };
        }
    }
}
