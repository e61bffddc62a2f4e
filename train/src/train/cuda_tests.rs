//! Training on a CUDA device against the CPU (built only with the `cuda` feature, and meant to
//! run where there is a GPU: without one these tests fail, they do not skip). The CPU tests
//! already hold the composed ops and the tensor-moment optimizer that a GPU runs to the CPU
//! path; these add candle's CUDA kernels: the same loss and gradients, the same optimizer step,
//! the same short run, and a checkpoint that moves between devices.

use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::model::TrainModel;
use super::optim::{AdamW, OptimConfig};
use super::tests::{log_losses, random_weights, tiny_batch, tiny_run, tiny_shape, write_corpus};
use super::{train_with, Gradients, StopReason, TrainControls};
use redraft_engine::ops::Kernels;

fn gpu() -> Device {
    Device::new_cuda(0).expect("these tests need a CUDA device")
}

fn host(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

/// `|a - b|_inf <= rel * |b|_inf + 1e-6`.
fn assert_close(what: &str, a: &[f32], b: &[f32], rel: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(
        diff <= rel * scale + 1e-6,
        "{what}: differs by {diff} (scale {scale})"
    );
}

#[test]
fn a_step_on_the_gpu_matches_the_cpu() {
    let gpu = gpu();
    let config = tiny_shape(64).model_config(512);
    let weights = random_weights(&config, 3);
    let cpu_model = TrainModel::from_tensors(&config, weights.clone(), &Device::Cpu).unwrap();
    let gpu_model = TrainModel::from_tensors(&config, weights, &gpu).unwrap();
    assert_eq!(Kernels::for_device(gpu_model.device()), Kernels::Portable);
    let refused = TrainModel::from_tensors(&config, random_weights(&config, 3), &gpu)
        .unwrap()
        .with_kernels(Kernels::Cpu);
    assert!(refused.is_err(), "the CPU kernels cannot run on a GPU");
    let batch = tiny_batch(64);
    let (cpu_scored, gpu_scored) = (
        cpu_model.score(&batch).unwrap(),
        gpu_model.score(&batch).unwrap(),
    );
    let (a, b) = (
        cpu_scored.loss.to_scalar::<f32>().unwrap(),
        gpu_scored.loss.to_scalar::<f32>().unwrap(),
    );
    assert!(
        (a - b).abs() <= 1e-4 * a.abs(),
        "loss {a} (cpu) vs {b} (gpu)"
    );
    assert_close("row cross-entropy", &gpu_scored.ce, &cpu_scored.ce, 1e-4);
    let (cpu_grads, gpu_grads) = (
        cpu_scored.loss.backward().unwrap(),
        gpu_scored.loss.backward().unwrap(),
    );
    for (p, q) in cpu_model.params().iter().zip(gpu_model.params()) {
        let g = gpu_grads.get(q.var.as_tensor()).unwrap();
        assert!(
            g.device().is_cuda(),
            "{} got its gradient off the GPU",
            q.name
        );
        assert_close(
            &p.name,
            &host(g),
            &host(cpu_grads.get(p.var.as_tensor()).unwrap()),
            1e-3,
        );
    }
    let optim = OptimConfig::default();
    let mut on_cpu = AdamW::new(optim.clone(), cpu_model.params()).unwrap();
    let mut on_gpu = AdamW::new(optim, gpu_model.params()).unwrap();
    on_cpu.step(cpu_model.params(), &cpu_grads, 1e-3).unwrap();
    on_gpu.step(gpu_model.params(), &gpu_grads, 1e-3).unwrap();
    for (p, q) in cpu_model.params().iter().zip(gpu_model.params()) {
        assert!(q.var.device().is_cuda());
        assert_close(
            &p.name,
            &host(q.var.as_tensor()),
            &host(p.var.as_tensor()),
            1e-4,
        );
    }
}

/// A short run on the GPU follows the CPU run; its checkpoint resumes on the CPU.
#[test]
fn a_run_on_the_gpu_follows_the_cpu_run_and_resumes_anywhere() {
    let gpu = gpu();
    let corpus = tempfile::tempdir().unwrap();
    write_corpus(corpus.path());
    let run = |out: &Path, device: &Device, resume: bool, stop_after: Option<usize>| {
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
            device,
            Gradients::Auto,
            controls,
        )
        .unwrap()
    };
    let (cpu_out, gpu_out, moved) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    run(cpu_out.path(), &Device::Cpu, false, None);
    let summary = run(gpu_out.path(), &gpu, false, None);
    assert_eq!((summary.step, summary.stopped), (6, StopReason::Finished));
    assert_eq!(summary.device, "cuda:0");
    let first = run(moved.path(), &gpu, false, Some(3));
    assert_eq!(first.step, 3);
    run(moved.path(), &Device::Cpu, true, None);
    let cpu = log_losses(cpu_out.path());
    for out in [gpu_out.path(), moved.path()] {
        let other = log_losses(out);
        assert_eq!(cpu.len(), other.len());
        for ((step, a), (_, b)) in cpu.iter().zip(&other) {
            assert!(
                (a - b).abs() <= 1e-3 * a.abs(),
                "step {step}: {a} (cpu) vs {b}"
            );
        }
    }
    // The exported model loads onto the GPU and completes.
    let engine = redraft_engine::Engine::load_on(gpu_out.path(), &gpu).unwrap();
    let mut request = redraft_engine::InfillRequest::new("fn main() {\n    let x = ", ";\n}\n");
    request.max_tokens = 8;
    let completion = engine
        .complete(
            &request,
            &mut redraft_engine::ContextCache::default(),
            redraft_engine::sampler::Controls::default(),
        )
        .unwrap();
    assert!(completion.tokens.len() <= 8);
}
