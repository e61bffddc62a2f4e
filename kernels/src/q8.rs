//! Quantized matrix multiplication on the CPU: weights as a GGUF file's integers (Q8_0, Q5_0,
//! Q4_K, Q6_K), activations quantized to 8 bits per call as ggml does, block dot products in
//! integers with AVX-512 VNNI (`q8/avx512.rs`), or AVX2 where the CPU has no AVX-512 (`q8/avx2.rs`).
//!
//! Why not candle's: its Q8_0 path computes one dot product per (row, column) pair, converting
//! both f16 block scales each time, so for a prompt every weight is loaded once per row; its
//! Q5_0 path is a scalar loop; its k-quant paths run on a thread pool of its own next to rayon's,
//! whose spinning workers took a core from ours on a 2-core machine.
//!
//! The weights are repacked at load into **panels**: 16 weight rows (16 output columns) by one
//! block of 32 inputs, laid out as `vpdpbusd` wants its unsigned operand: line `k` (64 bytes)
//! holds inputs `4k..4k + 4` of each of the 16 rows, so one instruction multiplies four inputs of
//! an activation row (broadcast) with 16 columns at once and the 16 sums land in the 16 lanes
//! of one register, already the output's layout (no horizontal sums). A band of columns is one
//! sequential stream of panels, which is what a decoding step (one activation row, every weight
//! read once) needs from memory. The integers are stored unsigned, Q8_0's as `w + 128` and
//! Q5_0's as they are (0..=31, packed: nibbles and fifth bits, unpacked in registers), and the
//! offset is taken back with the activation block's sum: `Σ x·w = Σ x·u - offset·Σ x`. So a
//! Q8_0 or Q5_0 matrix takes exactly the file's bytes (34 or 22 a block), and the sign trick
//! (`|x|`, the signs moved onto the weights) costs nothing per product. The k-quants fit the same
//! panels: a Q4_K sub-block is 32 inputs with a scale and a minimum (`Σ x·w = d·Σ x·q - m·Σ x`),
//! a Q6_K one 16 inputs with a scale (two dot products a block, offset 32); their scales are
//! kept as f32 (`d·sc`, exact), 0.75 and 1.0 bytes a weight against the file's 0.56 and 0.82.
//! Tiles are up to 4 activation rows by 32 columns (2 panels), every panel register used for 4
//! rows.
//!
//! Used where the CPU has AVX-512 VNNI or else AVX2 with FMA and F16C (the engine runs candle's
//! kernels elsewhere). Every path computes what [`Q8Matrix`]'s scalar reference does, which the
//! tests hold them to; the engine's tests hold the panels to candle's own reading of the blocks.

use rayon::prelude::*;

use crate::{DisjointOutput, Error, Result};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

const BLOCK: usize = 32;
/// Weight rows (output columns) per panel: the 16 i32 lanes of a 512-bit register.
const PANEL: usize = 16;
const Q8_0_BYTES: usize = 2 + BLOCK;
const Q5_0_BYTES: usize = 2 + 4 + BLOCK / 2;
/// A k-quant super-block's values.
const SUPER: usize = 256;
const Q4_K_BYTES: usize = 2 + 2 + 12 + SUPER / 2;
const Q6_K_BYTES: usize = SUPER / 2 + SUPER / 4 + SUPER / 16 + 2;

/// The GGUF block types the kernel takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockType {
    /// An f16 scale and 32 signed bytes.
    Q8_0,
    /// An f16 scale, 32 fifth bits and 16 bytes of nibbles.
    Q5_0,
    /// Super-blocks of 256: f16 `d` and `dmin`, 6-bit sub-block scales and minimums, nibbles.
    Q4K,
    /// Super-blocks of 256: low nibbles, high bit pairs, signed sub-block scales, f16 `d`.
    Q6K,
}

/// 64 bytes on a 64-byte boundary: one register's load.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A `[rows, cols]` quantized matrix in panels (see the module's documentation).
pub struct Q8Matrix {
    rows: usize,
    cols: usize,
    packing: Packing,
    /// Per panel (16 rows, one block of 32 inputs): `packing.lines()` lines; the panels of a
    /// group of 16 rows in block order, groups in row order.
    lines: Vec<Line>,
    /// Per panel, the 16 rows' scales: f16 bits for Q8_0 and Q5_0, f32 for the k-quants
    /// (Q4_K: scales then minimums; Q6_K: the scales of the block's two halves).
    scales: Scales,
}

enum Scales {
    Half(Vec<u16>),
    Full(Vec<f32>),
}

/// How a panel holds its integers. Line `k` of the unpacked panel (64 bytes) is inputs
/// `4k..4k + 4` of each of the 16 rows (byte `4n + j`: row n, input `4k + j`), unsigned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Packing {
    /// Q8_0: the 8 lines, `w + 128`.
    Bytes,
    /// Q5_0: 4 lines of nibbles (line `v`'s low nibbles are line `2v`, its high nibbles line
    /// `2v + 1`), then a line of fifth bits (u64 `k`, bit `i`: byte `i` of line `k` has 16
    /// added). 0..=31, offset 16.
    Five,
    /// Q4_K: the 4 lines of nibbles. 0..=15, no offset (the minimum is a scale of its own).
    Four,
    /// Q6_K: the 4 lines of nibbles, a line of bit-4 masks and one of bit-5 masks (as Five's
    /// fifth bits, adding 16 and 32). 0..=63, offset 32; lines 0..4 are the block's first 16
    /// inputs, lines 4..8 its last 16, each half with its own scale.
    Six,
}

impl Packing {
    fn lines(self) -> usize {
        match self {
            Packing::Bytes => 8,
            Packing::Five => 5,
            Packing::Four => 4,
            Packing::Six => 6,
        }
    }

    /// What the stored unsigned integer exceeds the signed weight by.
    fn offset(self) -> i32 {
        match self {
            Packing::Bytes => 128,
            Packing::Five => 16,
            Packing::Four => 0,
            Packing::Six => 32,
        }
    }
}

/// One block of 32 of a weight row as it goes into a panel: the stored unsigned integers and
/// the scales (`Half`: one f16; `Full`: two f32, as [`Scales::Full`] holds them).
struct RowBlock {
    values: [u8; BLOCK],
    scales: BlockScales,
}

/// Weight rows of one block type in runs of whole rows, `(first row, bytes)` in row order.
struct RowBytes<'a> {
    parts: Vec<(usize, &'a [u8])>,
    row_bytes: usize,
}

impl<'a> RowBytes<'a> {
    fn row(&self, row: usize) -> &'a [u8] {
        let (first, bytes) = self
            .parts
            .iter()
            .rev()
            .find(|(first, _)| *first <= row)
            .expect("rows start at 0");
        &bytes[(row - first) * self.row_bytes..][..self.row_bytes]
    }
}

enum BlockScales {
    Half(u16),
    Full([f32; 2]),
}

/// A group's part of [`Scales`], being written.
enum ScalesMut<'a> {
    Half(&'a mut [u16]),
    Full(&'a mut [f32]),
}

impl Q8Matrix {
    /// Whether this CPU runs the kernel.
    pub fn available() -> bool {
        Isa::detect().is_some()
    }

    /// From GGUF blocks of `dtype`, rows of `cols` inputs: `parts` are runs of whole rows
    /// stacked in order (a fused projection's parts, read where they lie, in the file's memory
    /// map: no concatenated copy on the way to the panels).
    pub fn from_blocks(dtype: BlockType, parts: &[&[u8]], cols: usize) -> Result<Q8Matrix> {
        let (per, block_bytes) = match dtype {
            BlockType::Q8_0 => (BLOCK, Q8_0_BYTES),
            BlockType::Q5_0 => (BLOCK, Q5_0_BYTES),
            BlockType::Q4K => (SUPER, Q4_K_BYTES),
            BlockType::Q6K => (SUPER, Q6_K_BYTES),
        };
        let row_bytes = cols / per * block_bytes;
        let mut rows = RowBytes {
            parts: Vec::with_capacity(parts.len()),
            row_bytes,
        };
        let mut total = 0;
        for part in parts {
            if !cols.is_multiple_of(per) || row_bytes == 0 || !part.len().is_multiple_of(row_bytes)
            {
                return Err(Error::Blocks {
                    bytes: part.len(),
                    cols,
                    block_bytes,
                    per,
                });
            }
            rows.parts.push((total, part));
            total += part.len() / row_bytes;
        }
        Ok(match dtype {
            BlockType::Q8_0 => Q8Matrix::q8_0(&rows, total, cols),
            BlockType::Q5_0 => Q8Matrix::q5_0(&rows, total, cols),
            BlockType::Q4K => Q8Matrix::q4_k(&rows, total, cols),
            BlockType::Q6K => Q8Matrix::q6_k(&rows, total, cols),
        })
    }

    /// Q8_0 blocks (f16 scale, 32 signed bytes).
    fn q8_0(data: &RowBytes<'_>, rows: usize, cols: usize) -> Q8Matrix {
        Q8Matrix::pack(rows, cols, Packing::Bytes, |row, b| {
            let block = &data.row(row)[b * Q8_0_BYTES..][..Q8_0_BYTES];
            let mut values = [0u8; BLOCK];
            for (v, &w) in values.iter_mut().zip(&block[2..]) {
                *v = (w as i8 as i16 + 128) as u8;
            }
            RowBlock {
                values,
                scales: BlockScales::Half(u16::from_le_bytes([block[0], block[1]])),
            }
        })
    }

    /// Q5_0 blocks (f16 scale, 32 fifth bits, 16 bytes of nibbles), kept packed.
    fn q5_0(data: &RowBytes<'_>, rows: usize, cols: usize) -> Q8Matrix {
        Q8Matrix::pack(rows, cols, Packing::Five, |row, b| {
            let block = &data.row(row)[b * Q5_0_BYTES..][..Q5_0_BYTES];
            let high = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
            let low = &block[6..];
            let mut values = [0u8; BLOCK];
            for (j, v) in values.iter_mut().enumerate() {
                let nibble = if j < 16 {
                    low[j] & 0x0F
                } else {
                    low[j - 16] >> 4
                };
                *v = nibble | (((high >> j) & 1) << 4) as u8;
            }
            RowBlock {
                values,
                scales: BlockScales::Half(u16::from_le_bytes([block[0], block[1]])),
            }
        })
    }

    /// Q4_K super-blocks (f16 `d` and `dmin`, 12 bytes of 6-bit sub-block scales and minimums,
    /// 128 bytes of nibbles): weight `d·sc·q - dmin·m`, as ggml dequantizes it.
    fn q4_k(data: &RowBytes<'_>, rows: usize, cols: usize) -> Q8Matrix {
        Q8Matrix::pack(rows, cols, Packing::Four, |row, b| {
            let (sb, sub) = (b / 8, b % 8);
            let block = &data.row(row)[sb * Q4_K_BYTES..][..Q4_K_BYTES];
            let d = f16_at(&block[0..2]);
            let dmin = f16_at(&block[2..4]);
            let scales = &block[4..16];
            let (sc, m) = if sub < 4 {
                (scales[sub] & 63, scales[sub + 4] & 63)
            } else {
                (
                    (scales[sub + 4] & 0x0F) | ((scales[sub - 4] >> 6) << 4),
                    (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4),
                )
            };
            // Sub-blocks 2c and 2c + 1 are the low and high nibbles of bytes 32c..32c + 32.
            let qs = &block[16 + 32 * (sub / 2)..][..32];
            let mut values = [0u8; BLOCK];
            for (v, &q) in values.iter_mut().zip(qs) {
                *v = if sub % 2 == 0 { q & 0x0F } else { q >> 4 };
            }
            RowBlock {
                values,
                scales: BlockScales::Full([d * sc as f32, dmin * m as f32]),
            }
        })
    }

    /// Q6_K super-blocks (128 bytes of low nibbles, 64 of high bit pairs, 16 signed sub-block
    /// scales, f16 `d`): weight `d·sc·(q - 32)`, as ggml dequantizes it.
    fn q6_k(data: &RowBytes<'_>, rows: usize, cols: usize) -> Q8Matrix {
        Q8Matrix::pack(rows, cols, Packing::Six, |row, b| {
            let (sb, sub) = (b / 8, b % 8);
            let block = &data.row(row)[sb * Q6_K_BYTES..][..Q6_K_BYTES];
            let (ql, qh) = (&block[..128], &block[128..192]);
            let sc = &block[192..208];
            let d = f16_at(&block[208..210]);
            // Value i of the super-block: half h = i / 128, then l = i % 32 and t = (i % 128) / 32
            // pick ql[64h + l + 32 (t % 2)]'s nibble t / 2 and qh[32h + l]'s bit pair t.
            let mut values = [0u8; BLOCK];
            for (j, v) in values.iter_mut().enumerate() {
                let i = sub * BLOCK + j;
                let (h, t, l) = (i / 128, (i % 128) / 32, i % 32);
                let low = ql[64 * h + l + 32 * (t % 2)] >> (4 * (t / 2)) & 0x0F;
                let high = (qh[32 * h + l] >> (2 * t)) & 3;
                *v = low | high << 4;
            }
            let scale = |half: usize| d * sc[2 * sub + half] as i8 as f32;
            RowBlock {
                values,
                scales: BlockScales::Full([scale(0), scale(1)]),
            }
        })
    }

    /// Panels from `block(row, b)`, block `b` (of 32 inputs) of weight row `row`. Rows past
    /// `rows` (the last panel's padding) are zero.
    fn pack(
        rows: usize,
        cols: usize,
        packing: Packing,
        block: impl Fn(usize, usize) -> RowBlock + Sync,
    ) -> Q8Matrix {
        let blocks = cols / BLOCK;
        let groups = rows.div_ceil(PANEL);
        let per_panel = packing.lines();
        let mut lines = vec![Line([0; 64]); groups * blocks * per_panel];
        let half = matches!(packing, Packing::Bytes | Packing::Five);
        let per_scales = if half { PANEL } else { 2 * PANEL };
        let mut halves = vec![0u16; if half { groups * blocks * PANEL } else { 0 }];
        let mut fulls = vec![0f32; if half { 0 } else { groups * blocks * 2 * PANEL }];
        // A padding row's integers are the offset (zero weights, besides a zero scale).
        let padding = RowBlock {
            values: [packing.offset() as u8; BLOCK],
            scales: if half {
                BlockScales::Half(0)
            } else {
                BlockScales::Full([0.0; 2])
            },
        };
        let pack_group = |g: usize, lines: &mut [Line], mut scales: ScalesMut<'_>| {
            for b in 0..blocks {
                let mut values = [[0u8; 64]; 8];
                for n in 0..PANEL {
                    let row = g * PANEL + n;
                    let owned;
                    let RowBlock {
                        values: v,
                        scales: s,
                    } = if row < rows {
                        owned = block(row, b);
                        &owned
                    } else {
                        &padding
                    };
                    match (&mut scales, s) {
                        (ScalesMut::Half(out), BlockScales::Half(s)) => out[b * PANEL + n] = *s,
                        (ScalesMut::Full(out), BlockScales::Full([a, c])) => {
                            out[b * 2 * PANEL + n] = *a;
                            out[b * 2 * PANEL + PANEL + n] = *c;
                        }
                        _ => unreachable!("a packing has one kind of scales"),
                    }
                    for (k, quad) in v.chunks_exact(4).enumerate() {
                        values[k][4 * n..4 * n + 4].copy_from_slice(quad);
                    }
                }
                pack_panel(
                    packing,
                    &values,
                    &mut lines[b * per_panel..(b + 1) * per_panel],
                );
            }
        };
        let line_chunks = lines.par_chunks_mut(blocks * per_panel).enumerate();
        if half {
            line_chunks
                .zip(halves.par_chunks_mut(blocks * per_scales))
                .for_each(|((g, lines), s)| pack_group(g, lines, ScalesMut::Half(s)));
        } else {
            line_chunks
                .zip(fulls.par_chunks_mut(blocks * per_scales))
                .for_each(|((g, lines), s)| pack_group(g, lines, ScalesMut::Full(s)));
        }
        Q8Matrix {
            rows,
            cols,
            packing,
            lines,
            scales: if half {
                Scales::Half(halves)
            } else {
                Scales::Full(fulls)
            },
        }
    }

    /// The stored (unsigned) integers of block `b` of weight row `row`, read back from the
    /// panels.
    fn stored(&self, row: usize, b: usize) -> [u8; BLOCK] {
        let blocks = self.cols / BLOCK;
        let (g, n) = (row / PANEL, row % PANEL);
        let panel = &self.lines[(g * blocks + b) * self.packing.lines()..];
        let bits = |line: usize, k: usize, at: usize| {
            let word = u64::from_le_bytes(panel[line].0[8 * k..8 * k + 8].try_into().unwrap());
            ((word >> at) & 1) as u8
        };
        let mut out = [0u8; BLOCK];
        for (j, v) in out.iter_mut().enumerate() {
            let (k, at) = (j / 4, 4 * n + j % 4);
            let nibble = || (panel[k / 2].0[at] >> (4 * (k % 2))) & 0x0F;
            *v = match self.packing {
                Packing::Bytes => panel[k].0[at],
                Packing::Five => nibble() | bits(4, k, at) << 4,
                Packing::Four => nibble(),
                Packing::Six => nibble() | bits(4, k, at) << 4 | bits(5, k, at) << 5,
            };
        }
        out
    }

    /// Block `b` (inputs `32 b..32 b + 32`) of weight row `row` as the file's weights, read back
    /// from the panels: what the kernel multiplies by, for tests to hold to another reading of
    /// the file (the engine's, to candle's dequantization).
    pub fn dequantized(&self, row: usize, b: usize) -> [f32; BLOCK] {
        let stored = self.stored(row, b);
        let [a, c] = self.block_scales(row, b);
        let offset = self.packing.offset();
        std::array::from_fn(|j| {
            let q = stored[j] as i32 - offset;
            match self.packing {
                Packing::Bytes | Packing::Five => q as f32 * a,
                Packing::Four => a * q as f32 - c,
                Packing::Six => (if j < 16 { a } else { c }) * q as f32,
            }
        })
    }

    /// Block `b`'s scales of weight row `row`: `[d, 0]` (Q8_0, Q5_0), `[d·sc, dmin·m]` (Q4_K),
    /// the halves' `[d·sc, d·sc']` (Q6_K).
    fn block_scales(&self, row: usize, b: usize) -> [f32; 2] {
        let blocks = self.cols / BLOCK;
        let panel = (row / PANEL) * blocks + b;
        let n = row % PANEL;
        match &self.scales {
            Scales::Half(s) => [half::f16::from_bits(s[panel * PANEL + n]).to_f32(), 0.0],
            Scales::Full(s) => [s[panel * 2 * PANEL + n], s[panel * 2 * PANEL + PANEL + n]],
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes the matrix holds (the last panel's padding rows included).
    pub fn bytes(&self) -> usize {
        self.lines.len() * 64
            + match &self.scales {
                Scales::Half(s) => s.len() * 2,
                Scales::Full(s) => s.len() * 4,
            }
    }

    /// `x @ W^T` for `m` rows of `x` (`[m, cols]`, row-major): `[m, rows]`.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_on(Isa::detect(), x, m)
    }

    /// [`Q8Matrix::matmul`] on `isa`'s path (`None`: the scalar reference), which this CPU must
    /// run.
    fn matmul_on(&self, isa: Option<Isa>, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.cols, "activations of the wrong width");
        assert!(
            isa.is_none_or(Isa::runs_here),
            "{isa:?} on a CPU without it"
        );
        let activations = quantize(x, self.cols);
        // SAFETY: the CPU runs `isa` (asserted above); `activations` holds m rows of
        // cols / 32 blocks (x holds m * cols values); `in_bands` hands each call a pointer to
        // its `[m, rows]` output and groups no other call has, as `band` requires.
        in_bands(m, self.rows, |groups, out| unsafe {
            self.band(isa, &activations, m, groups, out)
        })
    }

    /// Panel groups `groups` (output columns `16 g..`) of every row into `out` (`[m, rows]`), on
    /// `isa`'s path.
    ///
    /// # Safety
    /// The CPU runs `isa`; `x` holds `m` rows of `cols / 32` blocks; `groups` are panel groups
    /// of this matrix; `out` points at `m * rows` floats of which no other thread reads or
    /// writes these groups' columns while this runs.
    unsafe fn band(
        &self,
        isa: Option<Isa>,
        x: &Quantized,
        m: usize,
        groups: std::ops::Range<usize>,
        out: *mut f32,
    ) {
        match isa {
            // SAFETY: the caller's promises are the path's (its features included); its reads
            // stay within this matrix's panels and `x`'s blocks.
            #[cfg(target_arch = "x86_64")]
            Some(Isa::Avx512) => unsafe { avx512::band(self, x, m, groups, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Some(Isa::Avx2) => unsafe { avx2::band(self, x, m, groups, out) },
            // SAFETY: as above, and the scalar path needs no CPU feature.
            _ => unsafe { self.band_scalar(x, m, groups, out) },
        }
    }

    /// The same arithmetic, one output at a time (the kernel's reference).
    ///
    /// # Safety
    /// As [`Q8Matrix::band`]'s, less the CPU features.
    unsafe fn band_scalar(
        &self,
        x: &Quantized,
        m: usize,
        groups: std::ops::Range<usize>,
        out: *mut f32,
    ) {
        let blocks = self.cols / BLOCK;
        let offset = self.packing.offset();
        for r in 0..m {
            for c in groups.start * PANEL..(groups.end * PANEL).min(self.rows) {
                let mut sum = 0f32;
                for b in 0..blocks {
                    let at = r * blocks + b;
                    let xs = &x.values[at * BLOCK..][..BLOCK];
                    let ws = self.stored(c, b);
                    let dot = |range: std::ops::Range<usize>| -> i32 {
                        range.map(|j| xs[j] as i32 * ws[j] as i32).sum()
                    };
                    let [s0, s1] = x.sums[at];
                    let [a, c2] = self.block_scales(c, b);
                    let block = match self.packing {
                        Packing::Bytes | Packing::Five => {
                            (dot(0..BLOCK) - offset * (s0 + s1)) as f32 * (a * x.scales[at])
                        }
                        Packing::Four => {
                            a.mul_add(dot(0..BLOCK) as f32, -(c2 * (s0 + s1) as f32)) * x.scales[at]
                        }
                        Packing::Six => {
                            c2.mul_add(
                                (dot(16..BLOCK) - offset * s1) as f32,
                                a * (dot(0..16) - offset * s0) as f32,
                            ) * x.scales[at]
                        }
                    };
                    sum += block;
                }
                // SAFETY: r < m and c < rows, so `r * rows + c` is within `out`, a column of
                // `groups`, which no other thread touches (caller).
                unsafe { *out.add(r * self.rows + c) = sum };
            }
        }
    }
}

/// [`Packing`] as the kernels' tiles take it, a const generic parameter.
#[cfg(target_arch = "x86_64")]
const BYTES: u8 = 0;
#[cfg(target_arch = "x86_64")]
const FIVE: u8 = 1;
#[cfg(target_arch = "x86_64")]
const FOUR: u8 = 2;
#[cfg(target_arch = "x86_64")]
const SIX: u8 = 3;

/// The instruction sets the kernel has a path for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// AVX-512 with VNNI (`vpdpbusd`): [`avx512`].
    Avx512,
    /// AVX2 with FMA and F16C: [`avx2`].
    Avx2,
}

impl Isa {
    const ALL: [Isa; 2] = [Isa::Avx512, Isa::Avx2];

    /// The fastest path this CPU runs, if any.
    fn detect() -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.runs_here())
    }

    fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::Avx512 => avx512::available(),
                Isa::Avx2 => avx2::available(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

/// A panel's lines from its 8 unpacked lines.
fn pack_panel(packing: Packing, values: &[[u8; 64]; 8], panel: &mut [Line]) {
    let nibbles = |panel: &mut [Line]| {
        for (v, line) in panel[..4].iter_mut().enumerate() {
            for (i, byte) in line.0.iter_mut().enumerate() {
                *byte = (values[2 * v][i] & 0x0F) | (values[2 * v + 1][i] << 4);
            }
        }
    };
    let masks = |panel: &mut Line, bit: u8| {
        for (k, v) in values.iter().enumerate() {
            let mask: u64 = v
                .iter()
                .enumerate()
                .map(|(i, &x)| (((x >> bit) & 1) as u64) << i)
                .sum();
            panel.0[8 * k..8 * k + 8].copy_from_slice(&mask.to_le_bytes());
        }
    };
    match packing {
        Packing::Bytes => {
            for (line, v) in panel.iter_mut().zip(values) {
                line.0 = *v;
            }
        }
        Packing::Five => {
            nibbles(panel);
            masks(&mut panel[4], 4);
        }
        Packing::Four => nibbles(panel),
        Packing::Six => {
            nibbles(panel);
            masks(&mut panel[4], 4);
            masks(&mut panel[5], 5);
        }
    }
}

fn f16_at(bytes: &[u8]) -> f32 {
    half::f16::from_le_bytes([bytes[0], bytes[1]]).to_f32()
}

/// An `[m, rows]` output computed by tasks over bands of panel groups (16 columns each), on
/// rayon's threads: `band(groups, out)` is given a pointer to the whole output and must write
/// those groups' columns of every row and nothing else ([`DisjointOutput`]'s contract: the
/// bands are disjoint). Bands are small enough for every thread to get several. Shared by
/// [`Q8Matrix`] and [`crate::half::HalfMatrix`].
pub(crate) fn in_bands(
    m: usize,
    rows: usize,
    band: impl Fn(std::ops::Range<usize>, *mut f32) + Sync,
) -> Vec<f32> {
    let mut out = vec![0f32; m * rows];
    let groups = rows.div_ceil(PANEL);
    let size = (groups / (4 * rayon::current_num_threads())).clamp(1, 16);
    let shared = DisjointOutput::new(&mut out);
    (0..groups.div_ceil(size))
        .into_par_iter()
        .for_each(|t| band(t * size..((t + 1) * size).min(groups), shared.at(0)));
    out
}

/// Activations quantized as ggml's Q8_0 (per block of 32, the scale is the largest magnitude
/// over 127, kept as f16 rounds it; values rounded half to even as its SIMD paths do), with the
/// sums of each block's two halves of values for the weights' offsets and minimums.
struct Quantized {
    values: Vec<i8>,
    scales: Vec<f32>,
    sums: Vec<[i32; 2]>,
}

/// 1.5·2^23: a float this large has no fraction bits left.
const ROUND: f32 = 12_582_912.0;

/// One row of [`quantize`]: its blocks' values, scales and half sums.
#[inline(always)]
fn quantize_row(v: &mut [i8], s: &mut [f32], sum: &mut [[i32; 2]], x: &[f32]) {
    for (((v, s), sum), x) in v.chunks_mut(BLOCK).zip(s).zip(sum).zip(x.chunks(BLOCK)) {
        // `max` by comparison, not `f32::max`: its NaN rules keep the loop scalar.
        let amax = x
            .iter()
            .fold(0f32, |m, &a| if a.abs() > m { a.abs() } else { m });
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        *s = half::f16::from_f32(d).to_f32();
        for (v, &a) in v.iter_mut().zip(x) {
            // Half to even by the float unit's own rounding: adding 1.5·2^23 leaves no
            // fraction bits (|a·id| <= 127). `round_ties_even` is a libm call here.
            *v = ((a * id + ROUND) - ROUND) as i8;
        }
        let half = |h: &[i8]| h.iter().map(|&v| v as i32).sum();
        *sum = [half(&v[..16]), half(&v[16..])];
    }
}

/// [`quantize_row`] compiled for AVX-512 (its loops vectorise to 16 lanes).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn quantize_row_avx512(v: &mut [i8], s: &mut [f32], sum: &mut [[i32; 2]], x: &[f32]) {
    quantize_row(v, s, sum, x)
}

/// [`quantize_row`] compiled for AVX2 (8 lanes).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_row_avx2(v: &mut [i8], s: &mut [f32], sum: &mut [[i32; 2]], x: &[f32]) {
    quantize_row(v, s, sum, x)
}

fn quantize(x: &[f32], cols: usize) -> Quantized {
    let mut values = vec![0i8; x.len()];
    let mut scales = vec![0f32; x.len() / BLOCK];
    let mut sums = vec![[0i32; 2]; x.len() / BLOCK];
    let per_row = cols / BLOCK;
    // Once a call, not once a row.
    #[cfg(target_arch = "x86_64")]
    let isa = Isa::detect();
    values
        .par_chunks_mut(cols)
        .zip(scales.par_chunks_mut(per_row))
        .zip(sums.par_chunks_mut(per_row))
        .zip(x.par_chunks(cols))
        .for_each(|(((v, s), sum), x)| {
            #[cfg(target_arch = "x86_64")]
            match isa {
                // SAFETY: `detect` found AVX-512 (F, BW, VL and VNNI), all
                // `quantize_row_avx512` enables.
                Some(Isa::Avx512) => return unsafe { quantize_row_avx512(v, s, sum, x) },
                // SAFETY: `detect` found AVX2 and FMA, all `quantize_row_avx2` enables.
                Some(Isa::Avx2) => return unsafe { quantize_row_avx2(v, s, sum, x) },
                None => {}
            }
            quantize_row(v, s, sum, x)
        });
    Quantized {
        values,
        scales,
        sums,
    }
}

#[cfg(test)]
mod tests;
