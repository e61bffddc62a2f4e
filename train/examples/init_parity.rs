//! The training model on a GGUF's weights (dequantized to f32, as `redraft train --init` starts
//! from them) against the engine, both attending bidirectionally: the engine on the same f32
//! weights (the training model is the inference architecture: f32 noise) and on the file itself
//! (its quantized matrices multiply quantized activations): the largest logit difference
//! relative to the largest logit, and how often the two agree on the most likely token, over
//! the first tokens of some code. What `docs/reports/real-weights/adapt.md`
//! reports for the real Qwen2.5-Coder-0.5B; `train/tests/train/init.rs` holds a tiny file to the same.
//!
//! ```text
//! cargo run --release -p redraft-train --example init_parity -- FILE.gguf [TOKENS]
//! ```

use std::path::PathBuf;

use anyhow::Context;
use candle_core::Device;
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::AttentionPattern;
use redraft_engine::qwen2::Qwen2;
use redraft_engine::sampler::Pass;
use redraft_engine::ContextCache;
use redraft_engine::Engine;
use redraft_train::train::init::{self, Adaptation, InitCheckpoint};
use redraft_train::train::model::{ForwardInput, TrainModel};

const CODE: &str = include_str!("../src/train/examples.rs");

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let file = PathBuf::from(
        args.next()
            .context("usage: init_parity FILE.gguf [TOKENS]")?,
    );
    let want: usize = args.next().map_or(Ok(128), |n| n.parse())?;
    let file = file.canonicalize()?;
    // The engine reads the attention from a redraft.json beside the file.
    let dir = tempfile::tempdir()?;
    let linked = dir.path().join(file.file_name().context("a file name")?);
    std::os::unix::fs::symlink(&file, &linked)?;
    std::fs::write(
        dir.path().join("redraft.json"),
        r#"{"attention": "bidirectional"}"#,
    )?;
    let engine = Engine::load(&linked)?;

    let checkpoint = InitCheckpoint::open(&file)?;
    let config = checkpoint
        .train_config(&Adaptation::default())?
        .model_config();
    let weights = init::load_weights(&file, &config)?;
    let dense = Qwen2::new(
        engine.model().config(),
        &Weights::from_tensors(weights.clone(), "<dequantized>"),
        &Device::Cpu,
    )?
    .with_attention(AttentionPattern::Bidirectional);
    let model = TrainModel::from_tensors(&config, weights, &Device::Cpu)?;
    let mut tokens = engine.tokenizer().encode(CODE)?;
    tokens.truncate(want);
    let len = tokens.len();
    let rows: Vec<u32> = (0..len as u32).collect();
    let trained: Vec<Vec<f32>> = model
        .forward(&ForwardInput {
            tokens: &tokens,
            batch: 1,
            len,
            lens: &[len],
            rows: &rows,
        })?
        .to_vec2()?;
    let logits = |model: &Qwen2| -> anyhow::Result<Vec<Vec<f32>>> {
        Ok(model
            .forward(
                &[tokens.clone()],
                0..len,
                &mut ContextCache::default(),
                Pass::Full { store: false },
            )?
            .squeeze(0)?
            .to_vec2()?)
    };
    let argmax = |row: &[f32]| {
        row.iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
                if v > best.1 {
                    (i, v)
                } else {
                    best
                }
            })
            .0
    };
    let compare = |reference: &[Vec<f32>]| {
        let (mut diff, mut scale, mut agree) = (0f32, 0f32, 0usize);
        for (a, b) in trained.iter().zip(reference) {
            for (x, y) in a.iter().zip(b) {
                diff = diff.max((x - y).abs());
                scale = scale.max(y.abs());
            }
            agree += usize::from(argmax(a) == argmax(b));
        }
        serde_json::json!({
            "max_abs_diff": diff,
            "max_abs_logit": scale,
            "relative": diff / scale,
            "argmax_agreement": agree as f64 / len as f64,
        })
    };
    let report = serde_json::json!({
        "file": file,
        "tokens": len,
        "engine_f32": compare(&logits(&dense)?),
        "engine_quantized": compare(&logits(engine.model())?),
    });
    println!("{report}");
    Ok(())
}
