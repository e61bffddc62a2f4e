//! Fused CPU kernels for inference, where candle's generic ops spend their time in scalar libm
//! `expf` and extra tensors: softmax over the last dimension and SwiGLU (`silu(gate) * up`).
//!
//! Both use [`exp`], a branch-free exponential that LLVM vectorises (relative error < 1e-6,
//! well inside the 1e-4 parity budget), compiled for AVX2+FMA and picked at run time when the
//! CPU has them. Inference only: these ops have no backward pass.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// e^x for f32, vectorisable: x = n ln 2 + r with n an integer (the exponent bits) and
/// |r| <= ln2 / 2, ln 2 split in two parts so r stays exact (Cody-Waite), then a degree-6
/// polynomial for e^r.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer without a branch.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[inline(always)]
fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

#[inline(always)]
fn swiglu_row(gate_up: &[f32], out: &mut [f32]) {
    let (gate, up) = gate_up.split_at(out.len());
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp(-g)) * u;
    }
}

macro_rules! dispatch {
    ($name:ident, $avx:ident, $body:ident, ($($arg:ident: $ty:ty),*)) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx($($arg: $ty),*) {
            $body($($arg),*)
        }

        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU supports the features the function was compiled for.
                return unsafe { $avx($($arg),*) };
            }
            $body($($arg),*)
        }
    };
}

dispatch!(softmax_rows, softmax_rows_avx2, softmax_rows_generic, (data: &mut [f32], width: usize));
dispatch!(swiglu_rows, swiglu_rows_avx2, swiglu_rows_generic, (src: &[f32], dst: &mut [f32], width: usize));

#[inline(always)]
fn softmax_rows_generic(data: &mut [f32], width: usize) {
    data.chunks_mut(width).for_each(softmax_row);
}

#[inline(always)]
fn swiglu_rows_generic(src: &[f32], dst: &mut [f32], width: usize) {
    for (gu, out) in src.chunks(2 * width).zip(dst.chunks_mut(width)) {
        swiglu_row(gu, out);
    }
}

/// Rows per parallel task: enough work to be worth a thread hop.
fn rows_per_task(width: usize) -> usize {
    (16_384 / width.max(1)).max(1)
}

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "redraft-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(storage, layout, self.name())?;
        let width = layout.shape().dims().last().copied().unwrap_or(1);
        let mut dst = src.to_vec();
        dst.par_chunks_mut(width * rows_per_task(width))
            .for_each(|chunk| softmax_rows(chunk, width));
        Ok((CpuStorage::F32(dst), layout.shape().clone()))
    }
}

struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "redraft-swiglu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let full = dims.last().copied().unwrap_or(0);
        if full % 2 != 0 {
            candle_core::bail!("swiglu: last dimension {full} is odd");
        }
        let width = full / 2;
        let mut dst = vec![0f32; src.len() / 2];
        let rows = rows_per_task(width);
        src.par_chunks(full * rows)
            .zip(dst.par_chunks_mut(width * rows))
            .for_each(|(s, d)| swiglu_rows(s, d, width));
        let mut out = dims.to_vec();
        *out.last_mut().expect("at least one dimension") = width;
        Ok((CpuStorage::F32(dst), Shape::from_dims(&out)))
    }
}

/// Softmax over the last dimension of a contiguous f32 tensor.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.apply_op1_no_bwd(&Softmax)
}

/// `silu(gate) * up` where the last dimension of `gate_up` is `[gate | up]`.
pub fn swiglu(gate_up: &Tensor) -> Result<Tensor> {
    gate_up.apply_op1_no_bwd(&SwiGlu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn fast_exp_is_accurate_over_the_useful_range() {
        let mut worst: f32 = 0.0;
        for i in -8700..=8800 {
            let x = i as f32 / 100.0;
            let rel = ((exp(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn fused_ops_match_candle_reference() {
        let x = Tensor::randn(0f32, 3.0, (3, 5, 37), &Device::Cpu).unwrap();
        let ours = softmax_last_dim(&x).unwrap();
        let reference = candle_nn::ops::softmax_last_dim(&x).unwrap();
        let diff: f32 = (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert!(diff < 1e-6, "softmax differs by {diff}");

        let gu = Tensor::randn(0f32, 3.0, (4, 2 * 19), &Device::Cpu).unwrap();
        let ours = swiglu(&gu).unwrap();
        let (gate, up) = (gu.narrow(1, 0, 19).unwrap(), gu.narrow(1, 19, 19).unwrap());
        let reference = (candle_nn::ops::silu(&gate).unwrap() * up).unwrap();
        let diff: f32 = (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert!(diff < 1e-5, "swiglu differs by {diff}");
    }
}
