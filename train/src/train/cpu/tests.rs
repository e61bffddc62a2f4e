//! The CPU path against candle's autograd over [`TrainModel`]: the same loss, per-row
//! cross-entropy and correctness, and every parameter's gradient, over the shapes training
//! meets (tied and untied heads, grouped-query attention, padded sequences, rows spread over
//! the batch); the same optimiser update; and the same run through [`train_with`].

use std::path::Path;

use candle_core::{DType, Device};

use super::*;
use crate::train::examples::ExampleKind;
use crate::train::optim::OptimConfig;
use crate::train::tests::{
    log_losses, random_weights, tiny_run, tiny_shape, token_batch, write_corpus,
};
use crate::train::{train_with, Gradients, ModelShape, StopReason, TrainControls, MASK_ID};
use redraft_engine::config::AttentionPattern;

/// A batch with padding in every sequence but the first, masked rows in all of them and a
/// different weight per row.
fn spread_batch(vocab: u32, lens: Vec<usize>, len: usize) -> Batch {
    let batch = lens.len();
    let clean = token_batch(vocab, batch, len, lens.clone());
    let mut rows = Vec::new();
    for (b, &l) in lens.iter().enumerate() {
        // Every third position from a per-sequence start, within the sequence.
        rows.extend((b % 3..l).step_by(3).map(|j| (b * len + j) as u32));
    }
    let mut input = clean.clone();
    for &r in &rows {
        input[r as usize] = MASK_ID;
    }
    Batch {
        batch,
        len,
        input,
        lens,
        targets: rows.iter().map(|&r| clean[r as usize]).collect(),
        weights: (0..rows.len()).map(|i| 0.05 + 0.01 * i as f32).collect(),
        row_kind: vec![ExampleKind::Plain; rows.len()],
        rows,
    }
}

fn model(tied: bool, heads: usize, kv_heads: usize, seed: u64) -> TrainModel {
    let shape = ModelShape {
        heads,
        kv_heads,
        ..tiny_shape(64)
    };
    let mut config = shape.model_config(512);
    config.tie_word_embeddings = tied;
    TrainModel::from_tensors(&config, random_weights(&config, seed), &Device::Cpu).unwrap()
}

/// `|a - b|_inf <= rel * |b|_inf + 1e-7`, with the worst element in the message.
fn assert_close(what: &str, a: &[f32], b: &[f32], rel: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    let (worst, diff) = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .enumerate()
        .fold(
            (0, 0f32),
            |acc, (i, d)| if d > acc.1 { (i, d) } else { acc },
        );
    assert!(
        diff <= rel * scale + 1e-7,
        "{what}: differs by {diff} at {worst} ({} vs {}), largest magnitude {scale}",
        a[worst],
        b[worst]
    );
}

/// Scores `batch` on both paths and compares everything the training loop reads.
fn check_against_autograd(model: &TrainModel, batch: &Batch) {
    let reference = model.score(batch).unwrap();
    let reference_loss = reference.loss.to_scalar::<f32>().unwrap();
    let grads = reference.loss.backward().unwrap();
    let mut fast = CpuModel::new(model).unwrap();
    let scored = fast.score(batch, true).unwrap();
    assert_close("loss", &[scored.loss], &[reference_loss], 1e-5);
    assert_close("per-row cross-entropy", &scored.ce, &reference.ce, 1e-5);
    assert_eq!(scored.correct, reference.correct);
    assert_eq!(fast.names().len(), model.params().len());
    for (i, p) in model.params().iter().enumerate() {
        assert_eq!(fast.names()[i], p.name);
        let expected: Vec<f32> = grads
            .get(p.var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert!(
            expected.iter().any(|&g| g != 0.0),
            "{}: the reference gradient is zero, the comparison would prove nothing",
            p.name
        );
        assert_close(&p.name, &fast.grads()[i], &expected, 1e-4);
    }
    // Scoring without the backward gives the same numbers.
    let forward_only = fast.score(batch, false).unwrap();
    assert_eq!(forward_only.loss, scored.loss);
    assert_eq!(forward_only.ce, scored.ce);
}

#[test]
fn tied_head_with_grouped_query_attention_and_padding_matches_autograd() {
    let model = model(true, 4, 2, 3);
    check_against_autograd(&model, &spread_batch(64, vec![16, 11, 5], 16));
}

#[test]
fn untied_head_with_full_attention_matches_autograd() {
    let model = model(false, 4, 4, 5);
    check_against_autograd(&model, &spread_batch(64, vec![20, 20], 20));
    check_against_autograd(&model, &spread_batch(64, vec![20, 13, 20, 1], 20));
}

#[test]
fn untied_head_with_one_key_head_matches_autograd() {
    let model = model(false, 4, 1, 7);
    check_against_autograd(&model, &spread_batch(64, vec![9, 12, 12], 12));
}

/// Causal and block-causal attention with the logit shift's rows (each masked slot scored by
/// the row before it, so row 0 twice): the CPU path's attention hides the same keys as the
/// autograd model's, in the forward and the backward.
#[test]
fn causal_and_block_attention_with_shifted_rows_match_autograd() {
    let len = 14;
    let mut batch = spread_batch(64, vec![14, 9, 14], len);
    batch.rows = batch
        .rows
        .iter()
        .map(|&r| {
            let (b, p) = (r as usize / len, r as usize % len);
            (b * len + redraft_engine::sampler::logit_row(true, p)) as u32
        })
        .collect();
    // Slot 1 of the first sequence is scored by row 0 too.
    batch.rows.push(0);
    batch.targets.push(7);
    batch.weights.push(0.03);
    batch.row_kind.push(ExampleKind::Plain);
    for pattern in [
        AttentionPattern::Causal,
        AttentionPattern::Block(4),
        AttentionPattern::Block(7),
    ] {
        let model = model(false, 4, 2, 11).with_attention(pattern);
        check_against_autograd(&model, &batch);
    }
}

/// Buffers sized for a bigger batch are reused for a smaller one (and the reverse) without
/// stale values leaking in: each result equals a fresh model's.
#[test]
fn reused_buffers_give_the_results_of_fresh_ones() {
    let model = model(true, 4, 2, 9);
    let big = spread_batch(64, vec![24, 17, 24, 3], 24);
    let small = spread_batch(64, vec![7, 10], 10);
    let mut reused = CpuModel::new(&model).unwrap();
    reused.score(&big, true).unwrap();
    let after_big = reused.score(&small, true).unwrap();
    let mut fresh = CpuModel::new(&model).unwrap();
    let fresh_small = fresh.score(&small, true).unwrap();
    assert_eq!(after_big.loss, fresh_small.loss);
    assert_eq!(reused.grads(), fresh.grads());
    let again = reused.score(&big, true).unwrap();
    let fresh_big = CpuModel::new(&model).unwrap().score(&big, true).unwrap();
    assert_eq!(again.ce, fresh_big.ce);
}

#[test]
fn malformed_batches_are_errors() {
    let model = model(true, 4, 2, 1);
    let mut fast = CpuModel::new(&model).unwrap();
    let good = spread_batch(64, vec![8, 6], 8);
    type Spoil = fn(&mut Batch);
    let cases: [(&str, Spoil); 5] = [
        ("outside the vocabulary", |b| b.input[3] = 64),
        ("outside the vocabulary", |b| b.targets[0] = 99),
        ("outside a 2x8 batch", |b| b.rows[0] = 16),
        ("a sequence of 9 tokens", |b| b.lens[1] = 9),
        ("targets and", |b| {
            b.weights.pop();
        }),
    ];
    for (message, spoil) in cases {
        let mut batch = good.clone();
        spoil(&mut batch);
        let err = fast.score(&batch, true).unwrap_err().to_string();
        assert!(err.contains(message), "{err}");
    }
    let empty = Batch {
        batch: 0,
        input: vec![],
        lens: vec![],
        ..good
    };
    assert!(fast.score(&empty, false).is_err());
}

/// The flat update is the candle path's, bit for bit, on the same gradients: an unclipped
/// step, then a clipped one.
#[test]
fn optimizer_step_on_flat_buffers_equals_the_candle_step() {
    let reference_model = model(true, 4, 2, 2);
    let mut fast = CpuModel::new(&reference_model).unwrap();
    let batch = spread_batch(64, vec![12, 9], 12);
    for (clip_norm, expect_clipped) in [(1e6, false), (1e-3, true)] {
        let config = OptimConfig {
            clip_norm,
            ..OptimConfig::default()
        };
        let mut reference_optim = AdamW::new(config.clone(), reference_model.params()).unwrap();
        let mut fast_optim = AdamW::new(config, reference_model.params()).unwrap();
        for lr in [1e-3, 5e-4] {
            let grads = reference_model
                .score(&batch)
                .unwrap()
                .loss
                .backward()
                .unwrap();
            fast.grads = reference_model
                .params()
                .iter()
                .map(|p| {
                    let g = grads.get(p.var.as_tensor()).unwrap();
                    g.flatten_all().unwrap().to_vec1().unwrap()
                })
                .collect();
            let a = reference_optim
                .step(reference_model.params(), &grads, lr)
                .unwrap();
            let b = fast.step(&mut fast_optim, lr).unwrap();
            assert_eq!(a.grad_norm, b.grad_norm);
            assert_eq!((a.clipped, b.clipped), (expect_clipped, expect_clipped));
            for (i, p) in reference_model.params().iter().enumerate() {
                let w: Vec<f32> = p.var.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
                assert!(w == fast.weights()[i], "{}: weights differ", p.name);
            }
            assert!(reference_optim.moments().unwrap() == fast_optim.moments().unwrap());
        }
        // Back in step for the next round: the fast model restarts from the reference's weights.
        fast = CpuModel::new(&reference_model).unwrap();
    }
    // Writing the weights back gives a training model exactly the flat values.
    let target = model(true, 4, 2, 4);
    fast.write_to(&target).unwrap();
    for (p, w) in target.params().iter().zip(fast.weights()) {
        let got: Vec<f32> = p.var.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
        assert!(&got == w, "{} was not written back", p.name);
    }
}

/// A short run through the training loop with each way of computing gradients: the same losses (to float
/// rounding), evaluations at the same steps, and each exports a model.
#[test]
fn a_run_on_the_cpu_path_follows_the_autograd_run() {
    let corpus = tempfile::tempdir().unwrap();
    write_corpus(corpus.path());
    let mut losses = Vec::new();
    let all_gradients = [Gradients::Autograd, Gradients::Auto, Gradients::Portable];
    for gradients in all_gradients {
        let out = tempfile::tempdir().unwrap();
        let (config, paths) = tiny_run(corpus.path(), out.path());
        let summary = train_with(
            &config,
            &paths,
            false,
            DType::F32,
            &Device::Cpu,
            gradients,
            TrainControls::default(),
        )
        .unwrap();
        assert_eq!((summary.step, summary.stopped), (6, StopReason::Finished));
        redraft_engine::Engine::load(out.path()).unwrap();
        losses.push(log_losses(out.path()));
    }
    let steps = |l: &[(usize, f64)]| l.iter().map(|(s, _)| *s).collect::<Vec<_>>();
    for (other, gradients) in losses.iter().zip(all_gradients).skip(1) {
        assert_eq!(steps(&losses[0]), steps(other));
        for ((step, a), (_, b)) in losses[0].iter().zip(other) {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs(),
                "step {step}: validation loss {a} (autograd) vs {b} ({gradients:?})"
            );
        }
    }
}

/// The optimizer with its moments in tensors (what a GPU run uses) takes the host update's
/// steps, clipped or not, and its state survives a checkpoint round trip into either kind.
#[test]
fn tensor_moments_take_the_host_steps() {
    let batch = spread_batch(64, vec![12, 9], 12);
    for (clip_norm, expect_clipped) in [(1e6, false), (1e-3, true)] {
        let config = OptimConfig {
            clip_norm,
            ..OptimConfig::default()
        };
        let host_model = model(false, 4, 2, 7);
        let copies = host_model
            .tensors()
            .into_iter()
            .map(|(name, t)| (name, t.copy().unwrap()))
            .collect();
        let tensor_model =
            TrainModel::from_tensors(host_model.config(), copies, &Device::Cpu).unwrap();
        let mut host = AdamW::new(config.clone(), host_model.params()).unwrap();
        let mut tensors =
            AdamW::with_tensor_moments(config.clone(), tensor_model.params()).unwrap();
        for lr in [1e-3, 5e-4, 2e-4] {
            let host_grads = host_model.score(&batch).unwrap().loss.backward().unwrap();
            let tensor_grads = tensor_model.score(&batch).unwrap().loss.backward().unwrap();
            let a = host.step(host_model.params(), &host_grads, lr).unwrap();
            let b = tensors
                .step(tensor_model.params(), &tensor_grads, lr)
                .unwrap();
            assert!(
                (a.grad_norm - b.grad_norm).abs() <= 1e-5 * a.grad_norm,
                "lr {lr}: gradient norm {} vs {}",
                a.grad_norm,
                b.grad_norm
            );
            assert_eq!((a.clipped, b.clipped), (expect_clipped, expect_clipped));
            for (p, q) in host_model.params().iter().zip(tensor_model.params()) {
                let flat = |p: &crate::train::model::Param| -> Vec<f32> {
                    p.var.as_tensor().flatten_all().unwrap().to_vec1().unwrap()
                };
                // Up to 1.1e-5 seen with the two models' gradients summed in different orders
                // (threads busy with other tests); one step misapplied moves a weight by ~lr,
                // 2e-4 and more here.
                assert_close(&p.name, &flat(q), &flat(p), 3e-5);
            }
            let ((hm, hv), (tm, tv)) = (host.moments().unwrap(), tensors.moments().unwrap());
            for i in 0..hm.len() {
                assert_close("first moment", &tm[i], &hm[i], 1e-5);
                assert_close("second moment", &tv[i], &hv[i], 1e-5);
            }
        }
        // Saved from tensors, restored into host vectors and into tensors again.
        let saved = tensors.state_tensors(tensor_model.params()).unwrap();
        assert!(saved.values().all(|t| t.device().is_cpu()));
        let mut restored_host = AdamW::new(config.clone(), host_model.params()).unwrap();
        restored_host
            .restore(host_model.params(), &saved, 3)
            .unwrap();
        let mut restored = AdamW::with_tensor_moments(config, tensor_model.params()).unwrap();
        restored.restore(tensor_model.params(), &saved, 3).unwrap();
        assert!(restored.moments().unwrap() == tensors.moments().unwrap());
        assert!(restored_host.moments().unwrap() == tensors.moments().unwrap());
        assert_eq!(restored.steps(), 3);
    }
    // Flat buffers need host moments.
    let m = model(false, 4, 2, 7);
    let mut tensors = AdamW::with_tensor_moments(OptimConfig::default(), m.params()).unwrap();
    let mut fast = CpuModel::new(&m).unwrap();
    assert!(fast.step(&mut tensors, 1e-3).is_err());
}

/// A run stopped on the portable (GPU) path resumes on the CPU path and ends where an
/// uninterrupted CPU run does, to float rounding: checkpoints do not depend on the device.
#[test]
fn a_portable_run_resumes_on_the_cpu_path() {
    let corpus = tempfile::tempdir().unwrap();
    write_corpus(corpus.path());
    let (straight, switched) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |out: &Path, resume: bool, gradients: Gradients, stop_after: Option<usize>| {
        let (config, paths) = tiny_run(corpus.path(), out);
        let controls = TrainControls {
            stop_after,
            ..TrainControls::default()
        };
        train_with(
            &config,
            &paths,
            resume,
            DType::F32,
            &Device::Cpu,
            gradients,
            controls,
        )
        .unwrap()
    };
    run(straight.path(), false, Gradients::Auto, None);
    let first = run(switched.path(), false, Gradients::Portable, Some(3));
    assert_eq!((first.step, first.stopped), (3, StopReason::StepLimit));
    let second = run(switched.path(), true, Gradients::Auto, None);
    assert_eq!((second.step, second.steps_this_session), (6, 3));
    let (a, b) = (log_losses(straight.path()), log_losses(switched.path()));
    assert_eq!(a.len(), b.len());
    for ((step, x), (_, y)) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-4 * x.abs(), "step {step}: {x} vs {y}");
    }
}
