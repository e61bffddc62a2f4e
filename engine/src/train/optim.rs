//! AdamW with its moments in plain vectors (so a checkpoint holds them and a resumed run takes
//! exactly the steps an uninterrupted one would), global-norm gradient clipping, and the
//! learning-rate schedule (linear warmup, cosine decay to a floor).

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
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
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    /// Updates taken so far (for bias correction).
    steps: u64,
}

/// What one update did.
#[derive(Debug, Clone, Copy)]
pub struct UpdateReport {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
}

impl AdamW {
    pub fn new(config: OptimConfig, params: &[Param]) -> AdamW {
        let zeros = || -> Vec<Vec<f32>> {
            params
                .iter()
                .map(|p| vec![0.0; p.var.elem_count()])
                .collect()
        };
        AdamW {
            config,
            m: zeros(),
            v: zeros(),
            steps: 0,
        }
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
        let sizes_match = weights.len() == self.m.len()
            && grads.len() == self.m.len()
            && decay.len() == self.m.len()
            && (weights.iter().zip(grads).zip(&self.m))
                .all(|((w, g), m)| w.len() == m.len() && g.len() == m.len());
        if !sizes_match {
            return Err(TrainError::Config(
                "the optimizer state does not match the parameters it is asked to update".into(),
            ));
        }
        let sum_sq: f64 = grads
            .iter()
            .map(|g| g.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>())
            .sum();
        let grad_norm = sum_sq.sqrt();
        if !grad_norm.is_finite() {
            return Err(TrainError::NonFinite {
                what: format!("gradient norm {grad_norm}"),
            });
        }
        let clipped = grad_norm > self.config.clip_norm;
        let scale = if clipped {
            (self.config.clip_norm / (grad_norm + 1e-6)) as f32
        } else {
            1.0
        };
        self.steps += 1;
        let c = &self.config;
        let (b1, b2) = (c.beta1 as f32, c.beta2 as f32);
        let bias1 = (1.0 - c.beta1.powi(self.steps as i32)) as f32;
        let bias2 = (1.0 - c.beta2.powi(self.steps as i32)) as f32;
        let (lr32, eps) = (lr as f32, c.eps as f32);
        for (i, w) in weights.iter_mut().enumerate() {
            let decay = if decay[i] {
                1.0 - (lr * c.weight_decay) as f32
            } else {
                1.0
            };
            const CHUNK: usize = 1 << 14;
            w.par_chunks_mut(CHUNK)
                .zip(self.m[i].par_chunks_mut(CHUNK))
                .zip(self.v[i].par_chunks_mut(CHUNK))
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
        Ok(UpdateReport { grad_norm, clipped })
    }

    /// The first and second moments of every parameter (tests compare optimiser paths).
    pub fn moments(&self) -> (&[Vec<f32>], &[Vec<f32>]) {
        (&self.m, &self.v)
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The moments as tensors named `m.<param>` and `v.<param>`.
    pub fn state_tensors(&self, params: &[Param]) -> TrainResult<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            for (prefix, data) in [("m", &self.m[i]), ("v", &self.v[i])] {
                out.insert(
                    format!("{prefix}.{}", p.name),
                    Tensor::from_slice(data, p.var.shape(), &Device::Cpu)?,
                );
            }
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
        for (i, p) in params.iter().enumerate() {
            for (prefix, slot) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
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
                *slot = t.flatten_all()?.to_vec1::<f32>()?;
            }
        }
        self.steps = steps;
        Ok(())
    }
}
