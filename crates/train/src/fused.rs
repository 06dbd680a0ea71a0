//! RMS norm and rotary embedding as single ops with their own backward
//! passes, on the CPU.
//!
//! Composed from candle ops ([`crate::ops`]) each is eight to twelve graph
//! nodes, and candle's backward pass allocates, zeroes and adds a gradient
//! buffer for every node: for a short sequence that bookkeeping costs more
//! than the arithmetic. As one op each keeps only its input and makes one
//! pass per direction on every core. Other devices take the composed ops.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use crate::cpu::{f32_slice, f32_values, with_f32, with_f32s};
use crate::{ops, portable};

/// RMS norm over the last dimension, times the frozen `weight`; only `x`
/// gets a gradient.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    if portable::wanted(x) {
        return ops::rms_norm(x, weight, eps);
    }
    let d = x.dims().last().copied().unwrap_or(0);
    if weight.dims() != [d] {
        candle_core::bail!("rms_norm: input {:?}, weight {:?}", x.dims(), weight.dims());
    }
    x.contiguous()?.apply_op1(RmsNorm {
        w: f32_values(weight)?,
        eps,
    })
}

/// Rotary embedding of `x [t, heads, dim]` with the `[t, dim/2]` tables of
/// [`ops::rope_tables`]; `interleaved` as in [`ops::rope`].
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, interleaved: bool) -> Result<Tensor> {
    if portable::wanted(x) {
        return ops::rope(x, cos, sin, interleaved);
    }
    let (t, _, d) = x.dims3()?;
    if cos.dims() != [t, d / 2] || sin.dims() != [t, d / 2] || d % 2 != 0 {
        candle_core::bail!(
            "rope: input {:?}, tables {:?} and {:?}",
            x.dims(),
            cos.dims(),
            sin.dims()
        );
    }
    x.contiguous()?.apply_op1(Rope {
        cos: f32_values(cos)?,
        sin: f32_values(sin)?,
        interleaved,
    })
}

/// Rows per task.
const ROWS: usize = 16;

struct RmsNorm {
    w: Vec<f32>,
    eps: f64,
}

impl RmsNorm {
    /// `1 / sqrt(mean(x²) + eps)` of a row, summed in f64 as ggml does.
    fn inv(&self, row: &[f32]) -> f32 {
        let ss: f64 = row.iter().map(|&v| v as f64 * v as f64).sum();
        (1.0 / (ss / row.len() as f64 + self.eps).sqrt()) as f32
    }
}

impl CustomOp1 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("rms_norm.fwd");
        let x = f32_slice(s, l, self.name())?;
        let d = self.w.len();
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(d * ROWS)
            .zip(x.par_chunks(d * ROWS))
            .for_each(|(y, x)| {
                for (y, x) in y.chunks_mut(d).zip(x.chunks(d)) {
                    let inv = self.inv(x);
                    for ((y, &x), &w) in y.iter_mut().zip(x).zip(&self.w) {
                        *y = x * inv * w;
                    }
                }
            });
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let _t = crate::timing::span("rms_norm.bwd");
        // y = x·r·w with r = (Σx²/d + eps)^-½, so
        // dx = r·(g·w) − x·r³·Σ(g·w·x)/d.
        let dx = with_f32s([arg, grad], self.name(), |[x, g]| {
            let d = self.w.len();
            let mut dx = vec![0f32; x.len()];
            dx.par_chunks_mut(d * ROWS)
                .zip(x.par_chunks(d * ROWS).zip(g.par_chunks(d * ROWS)))
                .for_each(|(dx, (x, g))| {
                    for ((dx, x), g) in dx.chunks_mut(d).zip(x.chunks(d)).zip(g.chunks(d)) {
                        let r = self.inv(x);
                        let dot: f64 = x
                            .iter()
                            .zip(g)
                            .zip(&self.w)
                            .map(|((&x, &g), &w)| (g * w * x) as f64)
                            .sum();
                        let c = (r as f64).powi(3) * dot / d as f64;
                        for (((dx, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(&self.w) {
                            *dx = r * g * w - (x as f64 * c) as f32;
                        }
                    }
                });
            Ok(dx)
        })?;
        Tensor::from_vec(dx, arg.shape(), arg.device()).map(Some)
    }
}

struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
    interleaved: bool,
}

impl Rope {
    /// Rotates every head of every position by its angle (`sign` −1: the
    /// inverse rotation, which is the backward pass).
    fn rotate(&self, x: &[f32], dims: &[usize], sign: f32) -> Vec<f32> {
        let (heads, d) = (dims[1], dims[2]);
        let half = d / 2;
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(heads * d)
            .zip(x.par_chunks(heads * d))
            .enumerate()
            .for_each(|(p, (out, x))| {
                let (cos, sin) = (
                    &self.cos[p * half..(p + 1) * half],
                    &self.sin[p * half..(p + 1) * half],
                );
                for (o, x) in out.chunks_mut(d).zip(x.chunks(d)) {
                    for i in 0..half {
                        let (c, s) = (cos[i], sign * sin[i]);
                        let (a, b) = if self.interleaved {
                            (2 * i, 2 * i + 1)
                        } else {
                            (i, i + half)
                        };
                        o[a] = x[a] * c - x[b] * s;
                        o[b] = x[a] * s + x[b] * c;
                    }
                }
            });
        out
    }
}

impl CustomOp1 for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("rope.fwd");
        let x = f32_slice(s, l, self.name())?;
        let y = self.rotate(x, l.shape().dims(), 1.0);
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let _t = crate::timing::span("rope.bwd");
        let dx = with_f32(grad, self.name(), |g| Ok(self.rotate(g, arg.dims(), -1.0)))?;
        Tensor::from_vec(dx, arg.shape(), arg.device()).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use candle_core::{Device, Var};

    #[test]
    fn rms_norm_matches_the_composed_op_and_its_gradient() {
        let dev = Device::Cpu;
        for dims in [vec![7, 48], vec![5, 3, 16]] {
            let d = *dims.last().unwrap();
            let x = Var::randn(0f32, 2.0, dims.clone(), &dev).unwrap();
            let w = Tensor::randn(1f32, 0.3, d, &dev).unwrap();
            let up = Tensor::randn(0f32, 1.0, dims.clone(), &dev).unwrap();
            let ours = rms_norm(&x, &w, 1e-6).unwrap();
            let theirs = ops::rms_norm(&x, &w, 1e-6).unwrap();
            assert!(max_abs_diff(&ours, &theirs) < 1e-5, "{dims:?} forward");
            let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
            let d = max_abs_diff(g1.get(&x).unwrap(), g2.get(&x).unwrap());
            assert!(d < 1e-4, "{dims:?}: gradient differs by {d}");
            assert!(g1.get(&w).is_none(), "no gradient for the frozen weight");
        }
        let x = Tensor::zeros((2, 4), candle_core::DType::F32, &dev).unwrap();
        let w = Tensor::ones(3, candle_core::DType::F32, &dev).unwrap();
        assert!(
            rms_norm(&x, &w, 1e-6).is_err(),
            "a weight of the wrong width"
        );
    }

    #[test]
    fn rope_matches_the_composed_op_and_its_gradient_in_both_layouts() {
        let dev = Device::Cpu;
        let (t, heads, d) = (9, 3, 8);
        let (cos, sin) = ops::rope_tables(t, d, 10000.0, &dev).unwrap();
        for interleaved in [false, true] {
            let x = Var::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
            let up = Tensor::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
            let ours = rope(&x, &cos, &sin, interleaved).unwrap();
            let theirs = ops::rope(&x, &cos, &sin, interleaved).unwrap();
            assert!(max_abs_diff(&ours, &theirs) < 1e-6, "forward");
            let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
            let diff = max_abs_diff(g1.get(&x).unwrap(), g2.get(&x).unwrap());
            assert!(diff < 1e-5, "interleaved {interleaved}: gradient {diff}");
        }
        let x = Tensor::zeros((t + 1, heads, d), candle_core::DType::F32, &dev).unwrap();
        assert!(
            rope(&x, &cos, &sin, false).is_err(),
            "tables for another length"
        );
    }
}
