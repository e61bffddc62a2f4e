//! Tests of the panels: they hold the blocks' integers, every path this CPU runs equals the
//! scalar arithmetic (at tile edges, with one row and several, at full scale), and bytes that are
//! not whole rows of blocks are errors.

use super::*;

/// A deterministic stream of u64s.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 16
    }

    /// In `[-0.5, 0.5)`.
    fn float(&mut self) -> f32 {
        (self.next() % (1 << 24)) as f32 / (1 << 24) as f32 - 0.5
    }
}

const TYPES: [BlockType; 4] = [
    BlockType::Q8_0,
    BlockType::Q5_0,
    BlockType::Q4K,
    BlockType::Q6K,
];

/// The largest stored integer of each type.
fn top(dtype: BlockType) -> u8 {
    match dtype {
        BlockType::Q8_0 => 255,
        BlockType::Q5_0 => 31,
        BlockType::Q4K => 15,
        BlockType::Q6K => 63,
    }
}

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

/// GGUF rows of `dtype` blocks whose stored (unsigned, as the panels hold them) integers are
/// `stored(row, input)`, with random scales of a sane size: the inverse of the unpacking in
/// `Q8Matrix::q8_0` and its siblings, written from ggml's block layouts.
fn blocks(
    dtype: BlockType,
    rows: usize,
    cols: usize,
    stored: impl Fn(usize, usize) -> u8,
    seed: u64,
) -> Vec<u8> {
    let mut rng = Stream(seed);
    let mut out = Vec::new();
    for row in 0..rows {
        let v = |i: usize| stored(row, i);
        match dtype {
            BlockType::Q8_0 | BlockType::Q5_0 => {
                for b in 0..cols / BLOCK {
                    let v = |j: usize| v(b * BLOCK + j);
                    out.extend(f16_bytes(0.01 + rng.float().abs() * 0.02));
                    if dtype == BlockType::Q8_0 {
                        out.extend((0..BLOCK).map(|j| (v(j) as i16 - 128) as i8 as u8));
                    } else {
                        let high: u32 = (0..BLOCK).map(|j| ((v(j) as u32 >> 4) & 1) << j).sum();
                        out.extend(high.to_le_bytes());
                        out.extend((0..16).map(|j| (v(j) & 0x0F) | (v(j + 16) & 0x0F) << 4));
                    }
                }
            }
            BlockType::Q4K => {
                for sb in 0..cols / SUPER {
                    let v = |j: usize| v(sb * SUPER + j);
                    out.extend(f16_bytes(0.001 + rng.float().abs() * 0.002));
                    out.extend(f16_bytes(0.001 + rng.float().abs() * 0.002));
                    out.extend((0..12).map(|_| rng.next() as u8));
                    for c in 0..4 {
                        out.extend(
                            (0..32)
                                .map(|l| v(64 * c + l) & 0x0F | (v(64 * c + 32 + l) & 0x0F) << 4),
                        );
                    }
                }
            }
            BlockType::Q6K => {
                for sb in 0..cols / SUPER {
                    let v = |j: usize| v(sb * SUPER + j);
                    let mut ql = [0u8; 128];
                    let mut qh = [0u8; 64];
                    for i in 0..SUPER {
                        let (h, t, l) = (i / 128, (i % 128) / 32, i % 32);
                        ql[64 * h + l + 32 * (t % 2)] |= (v(i) & 0x0F) << (4 * (t / 2));
                        qh[32 * h + l] |= ((v(i) >> 4) & 3) << (2 * t);
                    }
                    out.extend(ql);
                    out.extend(qh);
                    out.extend((0..16).map(|_| (rng.next() % 120) as u8 as i8 as u8));
                    out.extend(f16_bytes(0.001 + rng.float().abs() * 0.002));
                }
            }
        }
    }
    out
}

/// `blocks` as a matrix, the rows in two runs (as a fused projection's parts arrive).
fn matrix(dtype: BlockType, rows: usize, cols: usize, bytes: &[u8]) -> Q8Matrix {
    let split = rows / 3 * (bytes.len() / rows);
    let matrix = Q8Matrix::from_blocks(dtype, &[&bytes[..split], &bytes[split..]], cols)
        .expect("whole rows of whole blocks");
    assert_eq!(matrix.rows(), rows);
    matrix
}

/// The panels hold the blocks' integers, for every packing, with rows that leave the last
/// panel part padding; Q8_0 and Q5_0 take the file's bytes (34 and 22 a block).
#[test]
fn panels_hold_the_stored_integers() {
    let (rows, cols) = (21, 512);
    for dtype in TYPES {
        let value =
            |row: usize, i: usize| ((row * 7919 + i * 104_729) % (top(dtype) as usize + 1)) as u8;
        let bytes = blocks(dtype, rows, cols, value, 3);
        let matrix = matrix(dtype, rows, cols, &bytes);
        for row in 0..rows {
            for b in 0..cols / BLOCK {
                let expected: [u8; BLOCK] = std::array::from_fn(|j| value(row, b * BLOCK + j));
                assert_eq!(
                    matrix.stored(row, b),
                    expected,
                    "{dtype:?} row {row} block {b}"
                );
            }
        }
        let padded = 32 * cols / BLOCK;
        match dtype {
            BlockType::Q8_0 => assert_eq!(matrix.bytes(), padded * 34),
            BlockType::Q5_0 => assert_eq!(matrix.bytes(), padded * 22),
            _ => {}
        }
    }
}

/// Each path this CPU runs computes `matrix`'s product with `x` as the scalar integer
/// arithmetic does, up to the float rounding of the scales.
fn every_path_matches_the_scalar(matrix: &Q8Matrix, x: &[f32], m: usize, dtype: BlockType) {
    let expected = matrix.matmul_on(None, x, m);
    for isa in Isa::ALL.into_iter().filter(|isa| isa.runs_here()) {
        let got = matrix.matmul_on(Some(isa), x, m);
        for (g, e) in got.iter().zip(&expected) {
            assert!(
                (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                "{m}x{}x{} {dtype:?} on {isa:?}: {g} vs {e}",
                matrix.rows,
                matrix.cols
            );
        }
    }
}

/// Weights and activations at full scale (every stored value its packing's extreme, signs
/// mixed): the largest pair sums the AVX2 path's 16-bit products see. Each path agrees with
/// the scalar arithmetic (whose sums are i32).
#[test]
fn full_scale_values_do_not_saturate() {
    let (m, rows, cols) = (5, 33, 256);
    let positive = |i: usize, s: usize| (i * s) % 7 >= 3;
    let x: Vec<f32> = (0..m * cols)
        .map(|i| if positive(i, 5) { 1.0 } else { -1.0 })
        .collect();
    for dtype in TYPES {
        // Q8_0's extremes are ±127 (1 and 255 stored); the others' are 0 and the top.
        let low = if dtype == BlockType::Q8_0 { 1 } else { 0 };
        let stored = |row: usize, i: usize| {
            if positive(row * cols + i, 3) {
                top(dtype)
            } else {
                low
            }
        };
        let matrix = matrix(dtype, rows, cols, &blocks(dtype, rows, cols, stored, 9));
        // A saturated pair sum would be off by thousands of units of the dot product.
        every_path_matches_the_scalar(&matrix, &x, m, dtype);
    }
}

/// Each path of the kernel this CPU runs equals the integer arithmetic it stands for (the
/// scalar loop) for every packing, at tile edges (rows not multiples of 4, columns not of
/// 16 or 32), with one row (the decoding tile) and several; and that arithmetic is the
/// matmul with the panels' weights, up to the activations' 8-bit rounding.
#[test]
fn the_kernel_equals_the_scalar_arithmetic() {
    for (m, rows, cols) in [
        (1, 7, 256),
        (1, 130, 512),
        (2, 70, 256),
        (5, 9, 768),
        (4, 48, 256),
        (3, 40, 256),
        (13, 130, 256),
    ] {
        let mut rng = Stream(m as u64 * 1000 + rows as u64);
        let x: Vec<f32> = (0..m * cols).map(|_| rng.float()).collect();
        for dtype in TYPES {
            let noise: Vec<u8> = (0..rows * cols)
                .map(|_| (rng.next() % (top(dtype) as u64 + 1)) as u8)
                .collect();
            let bytes = blocks(dtype, rows, cols, |r, i| noise[r * cols + i], 5);
            let matrix = matrix(dtype, rows, cols, &bytes);
            every_path_matches_the_scalar(&matrix, &x, m, dtype);
            let got = matrix.matmul(&x, m);
            for c in 0..rows {
                let w: Vec<f32> = (0..cols / BLOCK)
                    .flat_map(|b| matrix.dequantized(c, b))
                    .collect();
                let norm = w.iter().map(|v| v * v).sum::<f32>().sqrt();
                for r in 0..m {
                    let exact: f32 = (0..cols).map(|k| x[r * cols + k] * w[k]).sum();
                    let g = got[r * rows + c];
                    // Each activation is off by at most half a step (its block's largest
                    // magnitude, at most 0.5, over 254) plus the f16 rounding of the step
                    // (127 steps of 2^-11 of it); Cauchy-Schwarz for the sum.
                    let bound = 0.5 * (1.0 / 254.0 + 1.0 / 2048.0) * norm * (cols as f32).sqrt();
                    assert!(
                        (g - exact).abs() <= bound,
                        "{m}x{rows}x{cols} {dtype:?}: {g} vs the dense {exact}"
                    );
                }
            }
        }
    }
}

#[test]
fn bytes_that_are_not_whole_rows_of_blocks_are_errors() {
    let err = |dtype, parts: &[&[u8]], cols| Q8Matrix::from_blocks(dtype, parts, cols).err();
    assert_eq!(
        err(BlockType::Q8_0, &[&[0; 33]], 32),
        Some(Error::Blocks {
            bytes: 33,
            cols: 32,
            block_bytes: 34,
            per: 32
        })
    );
    assert!(err(BlockType::Q5_0, &[&[0; 22], &[0; 23]], 32).is_some());
    assert!(
        err(BlockType::Q4K, &[&[0; 144]], 32).is_some(),
        "less than a super-block"
    );
    assert!(err(BlockType::Q6K, &[&[0; 209]], 256).is_some());
    assert!(err(BlockType::Q8_0, &[&[0; 68]], 64).is_none());
}
