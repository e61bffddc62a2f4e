//! Fused training ops that have a backward pass: softmax, SwiGLU and RMSNorm.
//!
//! candle's composed versions of these are a dozen element-wise passes each (and its own fused
//! ones have no backward, so they cannot be trained through). Here the forward runs the
//! inference kernels of `redraft_kernels::rows`, and each backward is one fused pass too. Tests hold both
//! the values and the gradients to the composed formulas of [`composed`], which are what
//! devices other than the CPU train through.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, D};
use rayon::prelude::*;

use redraft_engine::ops::contiguous_f32;
use redraft_kernels::rows::{exp, par_softmax_rows, par_swiglu_rows};

fn last_dim(layout: &Layout) -> usize {
    layout.shape().dims().last().copied().unwrap_or(1)
}

struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "redraft-train-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let mut out = contiguous_f32(storage, layout, self.name())?.to_vec();
        par_softmax_rows(&mut out, last_dim(layout));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(res.apply_op2_no_bwd(
            &grad_res.contiguous()?,
            &SoftmaxBackward,
        )?))
    }
}

/// `dx = y * (g - sum(g * y))` per row.
struct SoftmaxBackward;

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "redraft-train-softmax-bwd"
    }

    fn cpu_fwd(
        &self,
        y_storage: &CpuStorage,
        y_layout: &Layout,
        g_storage: &CpuStorage,
        g_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let y = contiguous_f32(y_storage, y_layout, self.name())?;
        let g = contiguous_f32(g_storage, g_layout, self.name())?;
        let width = last_dim(y_layout);
        let mut dx = vec![0f32; y.len()];
        dx.par_chunks_mut(width)
            .zip(y.par_chunks(width).zip(g.par_chunks(width)))
            .for_each(|(dx, (y, g))| {
                let dot: f32 = y.iter().zip(g).map(|(a, b)| a * b).sum();
                for ((d, &y), &g) in dx.iter_mut().zip(y).zip(g) {
                    *d = y * (g - dot);
                }
            });
        Ok((CpuStorage::F32(dx), y_layout.shape().clone()))
    }
}

struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "redraft-train-swiglu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(storage, layout, self.name())?;
        let full = last_dim(layout);
        if !full.is_multiple_of(2) {
            candle_core::bail!("{}: last dimension {full} is odd", self.name());
        }
        let width = full / 2;
        let mut dst = vec![0f32; src.len() / 2];
        par_swiglu_rows(src, &mut dst, width);
        let mut dims = layout.shape().dims().to_vec();
        *dims.last_mut().expect("an odd-checked last dimension") = width;
        Ok((CpuStorage::F32(dst), Shape::from_dims(&dims)))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(arg.apply_op2_no_bwd(
            &grad_res.contiguous()?,
            &SwiGluBackward,
        )?))
    }
}

/// With `s = sigmoid(gate)`: `d_gate = g * up * s * (1 + gate * (1 - s))`,
/// `d_up = g * gate * s`.
struct SwiGluBackward;

impl CustomOp2 for SwiGluBackward {
    fn name(&self) -> &'static str {
        "redraft-train-swiglu-bwd"
    }

    fn cpu_fwd(
        &self,
        gu_storage: &CpuStorage,
        gu_layout: &Layout,
        g_storage: &CpuStorage,
        g_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let gate_up = contiguous_f32(gu_storage, gu_layout, self.name())?;
        let grad = contiguous_f32(g_storage, g_layout, self.name())?;
        let full = last_dim(gu_layout);
        let width = full / 2;
        let mut out = vec![0f32; gate_up.len()];
        out.par_chunks_mut(full)
            .zip(gate_up.par_chunks(full).zip(grad.par_chunks(width)))
            .for_each(|(out, (gu, g))| {
                let (gate, up) = gu.split_at(width);
                let (d_gate, d_up) = out.split_at_mut(width);
                for i in 0..width {
                    let s = 1.0 / (1.0 + exp(-gate[i]));
                    d_gate[i] = g[i] * up[i] * s * (1.0 + gate[i] * (1.0 - s));
                    d_up[i] = g[i] * gate[i] * s;
                }
            });
        Ok((CpuStorage::F32(out), gu_layout.shape().clone()))
    }
}

struct RmsNorm {
    eps: f32,
}

impl RmsNorm {
    fn inv_rms(&self, row: &[f32]) -> f32 {
        let mean = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
        1.0 / (mean + self.eps).sqrt()
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "redraft-train-rms-norm"
    }

    fn cpu_fwd(
        &self,
        x_storage: &CpuStorage,
        x_layout: &Layout,
        w_storage: &CpuStorage,
        w_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(x_storage, x_layout, self.name())?;
        let w = contiguous_f32(w_storage, w_layout, self.name())?;
        let width = last_dim(x_layout);
        if w.len() != width {
            candle_core::bail!("{}: weight of {} for rows of {width}", self.name(), w.len());
        }
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(width)
            .zip(x.par_chunks(width))
            .for_each(|(y, x)| {
                let r = self.inv_rms(x);
                for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
                    *y = x * r * w;
                }
            });
        Ok((CpuStorage::F32(y), x_layout.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad_res.contiguous()?;
        let dx = x.apply_op3_no_bwd(w, &grad, &RmsNormBackward { eps: self.eps })?;
        let width = x.dim(D::Minus1)?;
        let inv_rms = (x.sqr()?.mean_keepdim(D::Minus1)? + self.eps as f64)?
            .sqrt()?
            .recip()?;
        let dw = (grad * x.broadcast_mul(&inv_rms)?)?
            .reshape(((), width))?
            .sum(0)?;
        Ok((Some(dx), Some(dw)))
    }
}

/// `dx = r * (w * g) - x * r^3 * mean(w * g * x)` per row, `r = 1 / rms(x)`.
struct RmsNormBackward {
    eps: f32,
}

impl CustomOp3 for RmsNormBackward {
    fn name(&self) -> &'static str {
        "redraft-train-rms-norm-bwd"
    }

    fn cpu_fwd(
        &self,
        x_storage: &CpuStorage,
        x_layout: &Layout,
        w_storage: &CpuStorage,
        w_layout: &Layout,
        g_storage: &CpuStorage,
        g_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(x_storage, x_layout, self.name())?;
        let w = contiguous_f32(w_storage, w_layout, self.name())?;
        let g = contiguous_f32(g_storage, g_layout, self.name())?;
        let width = last_dim(x_layout);
        let norm = RmsNorm { eps: self.eps };
        let mut dx = vec![0f32; x.len()];
        dx.par_chunks_mut(width)
            .zip(x.par_chunks(width).zip(g.par_chunks(width)))
            .for_each(|(dx, (x, g))| {
                let r = norm.inv_rms(x);
                let c = rms_norm_backward_coefficient(x, g, w, r);
                for i in 0..width {
                    dx[i] = r * w[i] * g[i] - x[i] * c;
                }
            });
        Ok((CpuStorage::F32(dx), x_layout.shape().clone()))
    }
}

/// Softmax over the last dimension of a contiguous f32 tensor, with a backward pass.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Softmax)
}

/// `silu(gate) * up` over `[gate | up]` rows, with a backward pass.
pub fn swiglu(gate_up: &Tensor) -> Result<Tensor> {
    gate_up.contiguous()?.apply_op1(SwiGlu)
}

/// `x * rsqrt(mean(x²) + eps) * w` over the last dimension, with a backward pass.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    x.contiguous()?
        .apply_op2(weight, RmsNorm { eps: eps as f32 })
}

/// The same three operations composed from candle's differentiable tensor ops: slower on CPU,
/// but they run (and train) on every device.
pub mod composed {
    use candle_core::{Result, Tensor, D};

    /// Softmax over the last dimension (the max is detached: it only keeps `exp` in range).
    pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
        let max = x.max_keepdim(D::Minus1)?.detach();
        let e = x.broadcast_sub(&max)?.exp()?;
        e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
    }

    /// `silu(gate) * up` over `[gate | up]` in the last dimension.
    pub fn swiglu(gate_up: &Tensor) -> Result<Tensor> {
        let half = gate_up.dim(D::Minus1)? / 2;
        gate_up.narrow(D::Minus1, 0, half)?.silu()? * gate_up.narrow(D::Minus1, half, half)?
    }

    /// `x * rsqrt(mean(x²) + eps) * w` over the last dimension.
    pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
        let inv = (x.sqr()?.mean_keepdim(D::Minus1)? + eps)?.sqrt()?.recip()?;
        x.broadcast_mul(&inv)?.broadcast_mul(weight)
    }
}

/// RMSNorm's backward for one row `x` with output gradient `g`, weight `w` and `r = 1 / rms(x)`
/// is `dx = r * w * g - x * c`; this is `c = r³ * mean(x * g * w)`. Shared by the candle op and
/// the CPU training path.
pub(crate) fn rms_norm_backward_coefficient(x: &[f32], g: &[f32], w: &[f32], r: f32) -> f32 {
    let mean = x
        .iter()
        .zip(g)
        .zip(w)
        .map(|((x, g), w)| x * g * w)
        .sum::<f32>()
        / x.len() as f32;
    r * r * r * mean
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar()
            .unwrap()
    }

    /// Runs `fused` and `composed` on the same inputs, weighting the outputs by the same random
    /// tensor, and compares values and every input's gradient.
    fn check(
        inputs: &[Tensor],
        fused: impl Fn(&[Tensor]) -> Tensor,
        composed: impl Fn(&[Tensor]) -> Tensor,
    ) {
        let run = |f: &dyn Fn(&[Tensor]) -> Tensor| {
            let vars: Vec<Var> = inputs
                .iter()
                .map(|t| Var::from_tensor(t).unwrap())
                .collect();
            let xs: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
            let out = f(&xs);
            let weights = Tensor::randn(0f32, 1.0, out.shape(), &Device::Cpu).unwrap();
            (out, weights, vars)
        };
        let (out_a, weights, vars_a) = run(&fused);
        let grads_a = (&out_a * &weights)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let vars_b: Vec<Var> = inputs
            .iter()
            .map(|t| Var::from_tensor(t).unwrap())
            .collect();
        let xs_b: Vec<Tensor> = vars_b.iter().map(|v| v.as_tensor().clone()).collect();
        let out_b = composed(&xs_b);
        let grads_b = (&out_b * &weights)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert!(
            max_diff(&out_a, &out_b) < 1e-5,
            "values differ by {}",
            max_diff(&out_a, &out_b)
        );
        for (i, (a, b)) in vars_a.iter().zip(&vars_b).enumerate() {
            let (ga, gb) = (
                grads_a.get(a).expect("fused gradient"),
                grads_b.get(b).expect("composed gradient"),
            );
            let diff = max_diff(ga, gb);
            assert!(diff < 1e-4, "gradient of input {i} differs by {diff}");
        }
    }

    #[test]
    fn softmax_values_and_gradients_match_the_formula() {
        let x = Tensor::randn(0f32, 2.0, (3, 4, 37), &Device::Cpu).unwrap();
        check(
            &[x],
            |x| softmax_last_dim(&x[0]).unwrap(),
            |x| composed::softmax_last_dim(&x[0]).unwrap(),
        );
    }

    #[test]
    fn swiglu_values_and_gradients_match_the_formula() {
        let x = Tensor::randn(0f32, 2.0, (5, 2 * 19), &Device::Cpu).unwrap();
        check(
            &[x],
            |x| swiglu(&x[0]).unwrap(),
            |x| composed::swiglu(&x[0]).unwrap(),
        );
    }

    #[test]
    fn rms_norm_values_and_gradients_match_the_formula() {
        let x = Tensor::randn(0f32, 2.0, (6, 24), &Device::Cpu).unwrap();
        let w = Tensor::randn(1f32, 0.3, 24, &Device::Cpu).unwrap();
        check(
            &[x, w],
            |x| rms_norm(&x[0], &x[1], 1e-6).unwrap(),
            |x| composed::rms_norm(&x[0], &x[1], 1e-6).unwrap(),
        );
    }
}
