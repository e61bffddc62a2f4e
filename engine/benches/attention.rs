//! The attention of a decoding step on the CPU: `ops::attention` for the few query rows a step
//! computes, at the head shapes of real checkpoints and the context lengths an editor sends.
//!
//! `cargo bench -p redraft-engine --bench attention` prints one line per shape: milliseconds per
//! call (the median of repeated calls, after warm-up) for one sequence of one row (a step
//! alone) and for 8 sequences of 3 rows (a fused serving call), on every thread. Compare builds
//! by running it on each; only ratios within a run on an idle machine mean anything.

use std::time::Duration;

use candle_core::{Device, Tensor};
use redraft_engine::ops::{attention, HeadLayout, Mask};

use redraft_kernels::testing::median_ms as time;

fn main() {
    // `cargo test` runs benches with `--bench` absent: one short pass to show it still works.
    let quick = !std::env::args().any(|a| a == "--bench");
    let budget = Duration::from_millis(if quick { 1 } else { 1500 });
    let shapes: &[(&str, HeadLayout)] = &[
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
    println!("| heads | keys | 1 x 1 row ms | 8 x 3 rows ms |");
    println!("|---|---:|---:|---:|");
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
            println!("| {name} | {keys} | {:.3} | {:.3} |", ms(1, 1), ms(8, 3));
        }
    }
}
