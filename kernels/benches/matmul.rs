//! The quantized and half-precision matrix kernels at the shapes of a real checkpoint's
//! projections: `Q8Matrix` for each GGUF block type it takes and `HalfMatrix` for f16 and bf16,
//! on the path this CPU runs.
//!
//! `cargo bench -p redraft-kernels --bench matmul` prints one line per matrix and type:
//! milliseconds per product (the median of repeated calls, after warm-up) for one activation
//! row (a decoding step) and for 16 (a fused serving call or a short prompt chunk), on every
//! thread. Compare builds by running it on each; only ratios within a run on an idle machine
//! mean anything. The weights are random blocks (the kernels' speed does not depend on them).

use std::time::Duration;

use redraft_kernels::half::{HalfKind, HalfMatrix};
use redraft_kernels::q8::{BlockType, Q8Matrix};

use redraft_kernels::testing::median_ms as time;

/// A deterministic byte stream.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

/// `rows` rows of `cols` weights in `dtype`'s blocks: random bytes, with every f16 scale a
/// small normal number (random bits could be infinities or NaNs).
fn blocks(dtype: BlockType, rows: usize, cols: usize) -> Vec<u8> {
    let (per, size, scales): (usize, usize, &[usize]) = match dtype {
        BlockType::Q8_0 => (32, 34, &[0]),
        BlockType::Q5_0 => (32, 22, &[0]),
        BlockType::Q4K => (256, 144, &[0, 2]),
        BlockType::Q6K => (256, 210, &[208]),
    };
    let mut data = bytes(rows * cols / per * size, 7);
    let scale = half::f16::from_f32(0.004).to_le_bytes();
    for block in data.chunks_mut(size) {
        for &at in scales {
            block[at..at + 2].copy_from_slice(&scale);
        }
    }
    data
}

fn main() {
    // `cargo test` runs benches with `--bench` absent: one short pass to show it still works.
    let quick = !std::env::args().any(|a| a == "--bench");
    let budget = Duration::from_millis(if quick { 1 } else { 1000 });
    // Qwen2.5-Coder-1.5B's gate and up (1536 -> 2 x 8960) and down (8960 -> 1536) projections
    // (the 0.5B's 896 inputs are not whole k-quant super-blocks).
    let shapes: &[(&str, usize, usize)] = if quick {
        &[("small", 40, 256)]
    } else {
        &[
            ("gate and up, 1536 -> 17920", 17920, 1536),
            ("down, 8960 -> 1536", 1536, 8960),
        ]
    };
    println!("| matrix | type | 1 row ms | 16 rows ms |");
    println!("|---|---|---:|---:|");
    for &(name, rows, cols) in shapes {
        let ms = |product: &dyn Fn(&[f32], usize) -> Vec<f32>, m: usize| {
            let x: Vec<f32> = bytes(m * cols, 3)
                .iter()
                .map(|&b| b as f32 / 255.0 - 0.5)
                .collect();
            time(
                || {
                    std::hint::black_box(product(&x, m));
                },
                budget,
            )
        };
        if Q8Matrix::available() {
            for dtype in [
                BlockType::Q8_0,
                BlockType::Q5_0,
                BlockType::Q4K,
                BlockType::Q6K,
            ] {
                let data = blocks(dtype, rows, cols);
                let matrix = Q8Matrix::from_blocks(dtype, &[&data], cols).unwrap();
                let product = |x: &[f32], m: usize| matrix.matmul(x, m);
                println!(
                    "| {name} | {dtype:?} | {:.3} | {:.3} |",
                    ms(&product, 1),
                    ms(&product, 16)
                );
            }
        }
        // Where the CPU has no AVX-512 the engine widens half weights to f32 at load.
        let kinds = if HalfMatrix::available() {
            &[HalfKind::F16, HalfKind::Bf16][..]
        } else {
            &[]
        };
        for &kind in kinds {
            let bits: Vec<u16> = bytes(2 * rows * cols, 5)
                .chunks(2)
                .map(|b| match kind {
                    // Small normal f16s and bf16s: random exponents would be infinities.
                    HalfKind::F16 => half::f16::from_f32(b[0] as f32 / 4096.0).to_bits(),
                    HalfKind::Bf16 => half::bf16::from_f32(b[1] as f32 / 4096.0).to_bits(),
                })
                .collect();
            let matrix = HalfMatrix::new(&[&bits], cols, kind);
            let product = |x: &[f32], m: usize| matrix.matmul(x, m);
            println!(
                "| {name} | {kind:?} | {:.3} | {:.3} |",
                ms(&product, 1),
                ms(&product, 16)
            );
        }
    }
}
