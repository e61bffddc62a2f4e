//! Attention on the CPU: `ops::attention` for the few query rows a decoding step computes and
//! for every row (a full pass: a cold request, an exact refresh), at the head shapes of the
//! default model and of real checkpoints and the context lengths an editor sends.
//!
//! `cargo bench -p redraft-engine --bench attention` prints one line per shape: milliseconds per
//! call (the median of repeated calls, after warm-up) for one sequence of one row (a step
//! alone), for 8 sequences of 3 rows (a fused serving call), for the 16 rows of a step's
//! window, and for one sequence's every row (one layer of a full pass), on every thread; the
//! last two also through `gemm` (`attention_through_gemm`, the path of CPUs without AVX-512),
//! the anchor the AVX-512 tiles are measured against, with the ratio. Compare builds by running
//! it on each; only ratios within a run on an idle machine mean anything.

use std::time::Duration;

use candle_core::{Device, Tensor};
use redraft_engine::ops::{attention, HeadLayout, Mask};
use redraft_kernels::attention::{attention_through_gemm, Shapes};

use redraft_kernels::testing::median_ms as time;

fn main() {
    // `cargo test` runs benches with `--bench` absent: one short pass to show it still works.
    let quick = !std::env::args().any(|a| a == "--bench");
    let budget = Duration::from_millis(if quick { 1 } else { 1500 });
    let shapes: &[(&str, HeadLayout)] = &[
        (
            "the default preset (8 heads, 4 key heads, 64)",
            HeadLayout {
                heads: 8,
                kv_heads: 4,
                head_dim: 64,
            },
        ),
        (
            "Qwen2.5-Coder-0.5B (14 heads, 2 key heads, 64)",
            HeadLayout {
                heads: 14,
                kv_heads: 2,
                head_dim: 64,
            },
        ),
        (
            "Qwen2.5-Coder-1.5B (12 heads, 2 key heads, 128)",
            HeadLayout {
                heads: 12,
                kv_heads: 2,
                head_dim: 128,
            },
        ),
    ];
    let contexts: &[usize] = if quick { &[40] } else { &[300, 771, 1500] };
    println!(
        "| heads | keys | 1 x 1 row ms | 8 x 3 rows ms | 16 rows ms (gemm) | every row ms \
         (gemm) | every row, gemm / this |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, layout) in shapes {
        let width = (layout.heads + 2 * layout.kv_heads) * layout.head_dim;
        let k_col = layout.heads * layout.head_dim;
        for &keys in contexts {
            let ms = |batch: usize, rows: usize| {
                let kv = Tensor::randn(0f32, 1.0, (batch, keys, width), &Device::Cpu).unwrap();
                let mask = Mask::NONE;
                let lens = vec![keys; batch];
                time(
                    || {
                        attention(&kv, &kv, *layout, keys - rows..keys, k_col, &lens, mask)
                            .unwrap();
                    },
                    budget,
                )
            };
            let gemm_ms = |rows: usize| {
                let kv = Tensor::randn(0f32, 1.0, (1, keys, width), &Device::Cpu).unwrap();
                let kv = kv.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let shapes = Shapes {
                    layout: *layout,
                    batch: 1,
                    q_len: keys,
                    q_stride: width,
                    keys,
                    kv_stride: width,
                    k_col,
                    queries: keys - rows..keys,
                    key_lens: &[keys],
                    visible: &|_, n| n,
                };
                time(
                    || {
                        attention_through_gemm(&kv, &kv, &shapes).unwrap();
                    },
                    budget,
                )
            };
            let (every, every_gemm) = (ms(1, keys), gemm_ms(keys));
            println!(
                "| {name} | {keys} | {:.3} | {:.3} | {:.3} ({:.3}) | {every:.2} ({every_gemm:.2}) \
                 | {:.2} |",
                ms(1, 1),
                ms(8, 3),
                ms(1, 16),
                gemm_ms(16),
                every_gemm / every
            );
        }
    }
}
