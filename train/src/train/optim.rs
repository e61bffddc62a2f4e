//! AdamW (its moments in plain vectors on CPU, in tensors beside the parameters on a GPU; a
//! checkpoint holds them either way, so a resumed run takes exactly the steps an uninterrupted
//! one would), global-norm gradient clipping, and the learning-rate schedule (linear warmup,
//! cosine decay to a floor).

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::model::Param;
use super::{TrainError, TrainResult};

/// Optimiser and schedule settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// Steps of linear warmup to the peak.
    pub warmup: usize,
    /// The cosine decays to `lr * min_lr_ratio` at the last step.
    pub min_lr_ratio: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay, on projection matrices only.
    pub weight_decay: f64,
    /// Gradients are scaled down when their global L2 norm exceeds this.
    pub clip_norm: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        OptimConfig {
            lr: 1e-3,
            warmup: 200,
            min_lr_ratio: 0.1,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            clip_norm: 1.0,
        }
    }
}

impl OptimConfig {
    /// Learning rate of step `step` (0-based) of `total`.
    pub fn lr_at(&self, step: usize, total: usize) -> f64 {
        if step < self.warmup {
            return self.lr * (step + 1) as f64 / self.warmup as f64;
        }
        let decay_steps = total.saturating_sub(self.warmup).max(1);
        let progress = ((step - self.warmup) as f64 / decay_steps as f64).min(1.0);
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        let floor = self.lr * self.min_lr_ratio;
        floor + (self.lr - floor) * cosine
    }
}

/// AdamW state for a fixed list of parameters (in [`super::model::TrainModel::params`] order).
pub struct AdamW {
    config: OptimConfig,
    moments: Moments,
    /// Updates taken so far (for bias correction).
    steps: u64,
}

/// First and second moments of every parameter, flat, on the host.
pub type HostMoments = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// One moment of one parameter, where it lives.
pub enum MomentRef<'a> {
    Host(&'a [f32]),
    Tensor(&'a Tensor),
}

/// First and second moments, one per parameter.
enum Moments {
    /// Host vectors, updated by [`AdamW::step_flat`] (parameters on the CPU).
    Host { m: Vec<Vec<f32>>, v: Vec<Vec<f32>> },
    /// Tensors on the parameters' device, updated by tensor ops: nothing crosses to the host
    /// but the gradient norm.
    Tensors { m: Vec<Tensor>, v: Vec<Tensor> },
}

impl Moments {
    fn len(&self) -> usize {
        match self {
            Moments::Host { m, .. } => m.len(),
            Moments::Tensors { m, .. } => m.len(),
        }
    }
}

/// What one update did.
#[derive(Debug, Clone, Copy)]
pub struct UpdateReport {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
}

impl AdamW {
    /// Fresh state for `params`: host vectors when they live on the CPU, tensors beside them
    /// otherwise.
    pub fn new(config: OptimConfig, params: &[Param]) -> TrainResult<AdamW> {
        if params.iter().all(|p| p.var.device().is_cpu()) {
            let zeros = || -> Vec<Vec<f32>> {
                params
                    .iter()
                    .map(|p| vec![0.0; p.var.elem_count()])
                    .collect()
            };
            Ok(AdamW {
                config,
                moments: Moments::Host {
                    m: zeros(),
                    v: zeros(),
                },
                steps: 0,
            })
        } else {
            AdamW::with_tensor_moments(config, params)
        }
    }

    /// Fresh state held in tensors beside `params`, on whatever device they are (what a GPU
    /// run uses; on CPU, tests hold it to the host update).
    pub fn with_tensor_moments(config: OptimConfig, params: &[Param]) -> TrainResult<AdamW> {
        let zeros = || -> TrainResult<Vec<Tensor>> {
            params
                .iter()
                .map(|p| Ok(p.var.as_tensor().zeros_like()?))
                .collect()
        };
        Ok(AdamW {
            config,
            moments: Moments::Tensors {
                m: zeros()?,
                v: zeros()?,
            },
            steps: 0,
        })
    }

    /// Clips the gradients of `params` to the global norm and applies one AdamW update at `lr`.
    /// A parameter without a gradient is an error: it means the graph was cut (a fused op
    /// without a backward) and training would silently leave it untouched.
    pub fn step(
        &mut self,
        params: &[Param],
        grads: &GradStore,
        lr: f64,
    ) -> TrainResult<UpdateReport> {
        if params.len() != self.moments.len() {
            return Err(mismatch());
        }
        if matches!(self.moments, Moments::Tensors { .. }) {
            return self.step_tensors(params, grads, lr);
        }
        let grads: Vec<Vec<f32>> = params
            .iter()
            .map(|p| {
                let g = grads
                    .get(p.var.as_tensor())
                    .ok_or_else(|| TrainError::NoGradient(p.name.clone()))?;
                Ok(g.flatten_all()?.to_vec1::<f32>()?)
            })
            .collect::<TrainResult<_>>()?;
        let mut weights: Vec<Vec<f32>> = params
            .iter()
            .map(|p| Ok(p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?))
            .collect::<TrainResult<_>>()?;
        let decay: Vec<bool> = params.iter().map(|p| p.decay).collect();
        let report = self.step_flat(&mut weights, &grads, &decay, lr)?;
        for (p, w) in params.iter().zip(weights) {
            let shape = p.var.shape().clone();
            p.var.set(&Tensor::from_vec(w, shape, p.var.device())?)?;
        }
        Ok(report)
    }

    /// [`AdamW::step`] on flat buffers, updated in place (the CPU training path's weights and
    /// gradients, in [`super::model::TrainModel::params`] order; `decay` per parameter).
    pub fn step_flat(
        &mut self,
        weights: &mut [Vec<f32>],
        grads: &[Vec<f32>],
        decay: &[bool],
        lr: f64,
    ) -> TrainResult<UpdateReport> {
        let Moments::Host { m, v } = &mut self.moments else {
            return Err(TrainError::Config(
                "flat buffers need an optimizer with host moments (AdamW::new on CPU parameters)"
                    .into(),
            ));
        };
        let sizes_match = weights.len() == m.len()
            && grads.len() == m.len()
            && decay.len() == m.len()
            && (weights.iter().zip(grads).zip(m.iter()))
                .all(|((w, g), m)| w.len() == m.len() && g.len() == m.len());
        if !sizes_match {
            return Err(mismatch());
        }
        let sum_sq: f64 = grads
            .iter()
            .map(|g| g.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>())
            .sum();
        let (grad_norm, scale) = self.config.clip(sum_sq)?;
        self.steps += 1;
        let c = &self.config;
        let (b1, b2) = (c.beta1 as f32, c.beta2 as f32);
        let (bias1, bias2) = c.bias_corrections(self.steps);
        let (lr32, eps) = (lr as f32, c.eps as f32);
        for (i, w) in weights.iter_mut().enumerate() {
            let decay = c.decay_factor(decay[i], lr);
            const CHUNK: usize = 1 << 14;
            w.par_chunks_mut(CHUNK)
                .zip(m[i].par_chunks_mut(CHUNK))
                .zip(v[i].par_chunks_mut(CHUNK))
                .zip(grads[i].par_chunks(CHUNK))
                .for_each(|(((w, m), v), g)| {
                    for j in 0..w.len() {
                        let g = g[j] * scale;
                        m[j] = b1 * m[j] + (1.0 - b1) * g;
                        v[j] = b2 * v[j] + (1.0 - b2) * g * g;
                        let update = (m[j] / bias1) / ((v[j] / bias2).sqrt() + eps);
                        w[j] = w[j] * decay - lr32 * update;
                    }
                });
        }
        Ok(UpdateReport {
            grad_norm,
            clipped: scale < 1.0,
        })
    }

    /// [`AdamW::step`] with tensor moments: the same arithmetic as [`AdamW::step_flat`] in
    /// tensor ops on the parameters' device.
    fn step_tensors(
        &mut self,
        params: &[Param],
        grads: &GradStore,
        lr: f64,
    ) -> TrainResult<UpdateReport> {
        let Moments::Tensors { m, v } = &mut self.moments else {
            unreachable!("step_tensors is only called with tensor moments")
        };
        let grads: Vec<&Tensor> = params
            .iter()
            .map(|p| {
                grads
                    .get(p.var.as_tensor())
                    .ok_or_else(|| TrainError::NoGradient(p.name.clone()))
            })
            .collect::<TrainResult<_>>()?;
        // One transfer for the norm: every parameter's sum of squares in f64 (as the host
        // update sums them), added up on the host.
        let sums = grads
            .iter()
            .map(|g| g.to_dtype(DType::F64)?.sqr()?.sum_all())
            .collect::<candle_core::Result<Vec<_>>>()?;
        let sum_sq: f64 = Tensor::stack(&sums, 0)?.to_vec1::<f64>()?.iter().sum();
        let (grad_norm, scale) = self.config.clip(sum_sq)?;
        self.steps += 1;
        let c = &self.config;
        let (bias1, bias2) = c.bias_corrections(self.steps);
        for (i, (p, g)) in params.iter().zip(&grads).enumerate() {
            let g = g.affine(scale as f64, 0.0)?;
            m[i] = (m[i].affine(c.beta1, 0.0)? + g.affine(1.0 - c.beta1, 0.0)?)?;
            v[i] = (v[i].affine(c.beta2, 0.0)? + g.sqr()?.affine(1.0 - c.beta2, 0.0)?)?;
            let denominator = ((&v[i] / bias2 as f64)?.sqrt()? + c.eps)?;
            let update = ((&m[i] / bias1 as f64)? / denominator)?;
            let decay = c.decay_factor(p.decay, lr) as f64;
            let w = (p.var.as_tensor().affine(decay, 0.0)? - update.affine(lr, 0.0)?)?;
            p.var.set(&w)?;
        }
        Ok(UpdateReport {
            grad_norm,
            clipped: scale < 1.0,
        })
    }

    /// The first and second moments of every parameter, on the host (tests compare optimiser
    /// paths).
    pub fn moments(&self) -> TrainResult<HostMoments> {
        match &self.moments {
            Moments::Host { m, v } => Ok((m.clone(), v.clone())),
            Moments::Tensors { m, v } => {
                let host = |ts: &[Tensor]| -> TrainResult<Vec<Vec<f32>>> {
                    ts.iter()
                        .map(|t| Ok(t.flatten_all()?.to_vec1::<f32>()?))
                        .collect()
                };
                Ok((host(m)?, host(v)?))
            }
        }
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The moments as CPU tensors named `m.<param>` and `v.<param>`.
    pub fn state_tensors(&self, params: &[Param]) -> TrainResult<HashMap<String, Tensor>> {
        if params.len() != self.moments.len() {
            return Err(mismatch());
        }
        let mut out = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            let (m, v) = match &self.moments {
                Moments::Host { m, v } => (
                    Tensor::from_slice(&m[i], p.var.shape(), &Device::Cpu)?,
                    Tensor::from_slice(&v[i], p.var.shape(), &Device::Cpu)?,
                ),
                Moments::Tensors { m, v } => {
                    (m[i].to_device(&Device::Cpu)?, v[i].to_device(&Device::Cpu)?)
                }
            };
            out.insert(format!("m.{}", p.name), m);
            out.insert(format!("v.{}", p.name), v);
        }
        Ok(out)
    }

    /// The moments under the names [`AdamW::state_tensors`] gives them, borrowed, with their
    /// shapes: what a checkpoint writes one tensor at a time (a 0.5B model's moments are 5 GB;
    /// building them all as tensors first would double that).
    pub fn moment_refs<'a>(
        &'a self,
        params: &[Param],
    ) -> TrainResult<Vec<(String, MomentRef<'a>, Vec<usize>)>> {
        if params.len() != self.moments.len() {
            return Err(mismatch());
        }
        let mut out = Vec::with_capacity(2 * params.len());
        for (i, p) in params.iter().enumerate() {
            let (m, v) = match &self.moments {
                Moments::Host { m, v } => (MomentRef::Host(&m[i]), MomentRef::Host(&v[i])),
                Moments::Tensors { m, v } => (MomentRef::Tensor(&m[i]), MomentRef::Tensor(&v[i])),
            };
            out.push((format!("m.{}", p.name), m, p.var.dims().to_vec()));
            out.push((format!("v.{}", p.name), v, p.var.dims().to_vec()));
        }
        Ok(out)
    }

    /// Restores the moments and step count written by [`AdamW::state_tensors`].
    pub fn restore(
        &mut self,
        params: &[Param],
        tensors: &HashMap<String, Tensor>,
        steps: u64,
    ) -> TrainResult<()> {
        if params.len() != self.moments.len() {
            return Err(mismatch());
        }
        for (i, p) in params.iter().enumerate() {
            for prefix in ["m", "v"] {
                let name = format!("{prefix}.{}", p.name);
                let t = tensors
                    .get(&name)
                    .ok_or_else(|| TrainError::BadCheckpoint {
                        message: format!("optimizer state lacks `{name}`"),
                    })?;
                if t.dims() != p.var.dims() {
                    return Err(TrainError::BadCheckpoint {
                        message: format!(
                            "optimizer state `{name}` has shape {:?}, the model {:?}",
                            t.dims(),
                            p.var.dims()
                        ),
                    });
                }
                let t = t.to_dtype(DType::F32)?;
                match &mut self.moments {
                    Moments::Host { m, v } => {
                        let slot = if prefix == "m" { &mut m[i] } else { &mut v[i] };
                        *slot = t.flatten_all()?.to_vec1::<f32>()?;
                    }
                    Moments::Tensors { m, v } => {
                        let slot = if prefix == "m" { &mut m[i] } else { &mut v[i] };
                        *slot = t.to_device(p.var.device())?;
                    }
                }
            }
        }
        self.steps = steps;
        Ok(())
    }
}

fn mismatch() -> TrainError {
    TrainError::Config(
        "the optimizer state does not match the parameters it is asked to update".into(),
    )
}

impl OptimConfig {
    /// The global gradient norm from its square, and the factor that clips it (1 when it is
    /// within `clip_norm`). A non-finite norm is an error: the run diverged.
    fn clip(&self, sum_sq: f64) -> TrainResult<(f64, f32)> {
        let grad_norm = sum_sq.sqrt();
        if !grad_norm.is_finite() {
            return Err(TrainError::NonFinite {
                what: format!("gradient norm {grad_norm}"),
            });
        }
        let scale = if grad_norm > self.clip_norm {
            (self.clip_norm / (grad_norm + 1e-6)) as f32
        } else {
            1.0
        };
        Ok((grad_norm, scale))
    }

    /// Adam's bias corrections `1 - beta^t` after `steps` updates.
    fn bias_corrections(&self, steps: u64) -> (f32, f32) {
        (
            (1.0 - self.beta1.powi(steps as i32)) as f32,
            (1.0 - self.beta2.powi(steps as i32)) as f32,
        )
    }

    /// The factor decoupled weight decay multiplies a parameter by at `lr`.
    fn decay_factor(&self, decays: bool, lr: f64) -> f32 {
        if decays {
            1.0 - (lr * self.weight_decay) as f32
        } else {
            1.0
        }
    }
}
