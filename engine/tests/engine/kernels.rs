//! `redraft_kernels`' quantized matrices held to candle's reading of the same GGUF blocks:
//! candle (ggml's formats) quantizes random weights, and the panels read back what candle
//! dequantizes, and multiply like the dense matrix. The kernels crate's own tests hold each SIMD
//! path to its scalar arithmetic; these check that arithmetic is the file format's.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use redraft_kernels::q8::{BlockType, Q8Matrix};
use redraft_kernels::testing::random;

const TYPES: [(GgmlDType, BlockType); 4] = [
    (GgmlDType::Q8_0, BlockType::Q8_0),
    (GgmlDType::Q5_0, BlockType::Q5_0),
    (GgmlDType::Q4K, BlockType::Q4K),
    (GgmlDType::Q6K, BlockType::Q6K),
];

/// `w` (`rows` by `cols`) quantized by candle, as a panel matrix and as candle's own dequantized
/// values.
fn quantized(
    w: &[f32],
    rows: usize,
    cols: usize,
    (dtype, block_type): (GgmlDType, BlockType),
) -> (Q8Matrix, Vec<f32>) {
    let dev = Device::Cpu;
    let t = Tensor::from_slice(w, (rows, cols), &dev).unwrap();
    let q = QTensor::quantize(&t, dtype).unwrap();
    let data = q.data().unwrap();
    // In two runs of rows, as a fused projection's parts arrive.
    let split = rows / 3 * (data.len() / rows);
    let matrix =
        Q8Matrix::from_blocks(block_type, &[&data[..split], &data[split..]], cols).unwrap();
    assert_eq!(matrix.rows(), rows);
    let dense = q.dequantize(&dev).unwrap().flatten_all().unwrap();
    (matrix, dense.to_vec1().unwrap())
}

/// The panels hold the file's weights: every block reads back as candle (ggml's formulas)
/// dequantizes it, for every packing, with rows that leave the last panel part padding.
#[test]
fn panels_read_back_the_weights() {
    let (rows, cols) = (21, 512);
    let w = random(rows * cols, 3);
    for types in TYPES {
        let (matrix, dense) = quantized(&w, rows, cols, types);
        for row in 0..rows {
            for b in 0..cols / 32 {
                let got = matrix.dequantized(row, b);
                let expected = &dense[row * cols + b * 32..][..32];
                for (g, e) in got.iter().zip(expected) {
                    assert!(
                        (g - e).abs() <= 1e-6 * e.abs().max(1e-3),
                        "{:?} row {row} block {b}: {g} vs {e}",
                        types.0
                    );
                }
            }
        }
    }
}

/// The kernel (whichever path this CPU runs) is the matmul with candle's dequantized weights,
/// up to the activations' 8-bit rounding, at tile edges and with one row or several.
#[test]
fn the_kernel_is_the_dequantized_matmul() {
    for (m, rows, cols) in [(1, 7, 256), (1, 130, 512), (5, 9, 768), (13, 130, 256)] {
        let w = random(rows * cols, 1);
        let x = random(m * cols, 2);
        for types in TYPES {
            let (matrix, dense) = quantized(&w, rows, cols, types);
            let got = matrix.matmul(&x, m);
            for r in 0..m {
                for c in 0..rows {
                    let exact: f32 = (0..cols)
                        .map(|k| x[r * cols + k] * dense[c * cols + k])
                        .sum();
                    let g = got[r * rows + c];
                    assert!(
                        (g - exact).abs() < 0.01 * (cols as f32).sqrt(),
                        "{m}x{rows}x{cols} {:?}: {g} vs the dense {exact}",
                        types.0
                    );
                }
            }
        }
    }
}
