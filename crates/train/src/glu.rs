//! The SwiGLU gate `silu(g) · u` as one op with its own backward pass.
//!
//! Composed from candle ops it keeps five intermediates of the feed-forward
//! width per layer (the largest activations after the logits) and walks
//! them single-threaded, twice as often again in the backward pass. As one
//! op it keeps only `g` and `u` and runs on every core.

use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use crate::cpu::{f32_slice, held_f32};
use crate::portable;

/// `silu(g) · u`, element-wise; `g` and `u` have the same shape.
pub fn silu_mul(g: &Tensor, u: &Tensor) -> Result<Tensor> {
    if g.shape() != u.shape() {
        candle_core::bail!("silu_mul: g {:?} and u {:?} differ", g.dims(), u.dims());
    }
    if portable::wanted(g) {
        return crate::ops::silu(g)? * u;
    }
    g.contiguous()?.apply_op2(&u.contiguous()?, SiluMul)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + crate::cpu::exp(-x))
}

/// Elements per task: small enough to balance the threads, large enough to
/// amortise the scheduling.
const GRAIN: usize = 16 * 1024;

#[derive(Clone, Copy)]
struct SiluMul;

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "silu-mul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("silu_mul.fwd");
        let (g, u) = (
            f32_slice(s1, l1, self.name())?,
            f32_slice(s2, l2, self.name())?,
        );
        let mut out = vec![0f32; g.len()];
        out.par_chunks_mut(GRAIN)
            .zip(g.par_chunks(GRAIN).zip(u.par_chunks(GRAIN)))
            .for_each(|(o, (g, u))| {
                for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                    *o = g * sigmoid(g) * u;
                }
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        g: &Tensor,
        u: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let _t = crate::timing::span("silu_mul.bwd");
        let [gc, uc, dc] = [g, u, grad].map(Tensor::contiguous);
        let (gc, uc, dc) = (gc?, uc?, dc?);
        let held = [&gc, &uc, &dc].map(Tensor::storage_and_layout);
        let (gv, uv, dv) = (
            held_f32(&held[0])?,
            held_f32(&held[1])?,
            held_f32(&held[2])?,
        );
        let mut dg = vec![0f32; gv.len()];
        let mut du = vec![0f32; gv.len()];
        dg.par_chunks_mut(GRAIN)
            .zip(du.par_chunks_mut(GRAIN))
            .zip(gv.par_chunks(GRAIN).zip(uv.par_chunks(GRAIN)))
            .zip(dv.par_chunks(GRAIN))
            .for_each(|(((dg, du), (g, u)), d)| {
                for i in 0..g.len() {
                    let s = sigmoid(g[i]);
                    // d silu(g) / dg = σ(g) · (1 + g · (1 − σ(g)))
                    dg[i] = d[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
                    du[i] = d[i] * g[i] * s;
                }
            });
        Ok((
            Some(Tensor::from_vec(dg, g.shape(), g.device())?),
            Some(Tensor::from_vec(du, u.shape(), u.device())?),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use crate::ops;
    use candle_core::{Device, Var};

    #[test]
    fn matches_the_composed_gate_and_its_gradients() {
        let dev = Device::Cpu;
        let g = Var::randn(0f32, 3.0, (7, 40_001), &dev).unwrap();
        let u = Var::randn(0f32, 1.0, (7, 40_001), &dev).unwrap();
        let up = Tensor::randn(0f32, 1.0, (7, 40_001), &dev).unwrap();
        let ours = silu_mul(&g, &u).unwrap();
        let theirs = (ops::silu(&g).unwrap() * u.as_tensor()).unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-5);
        let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
        for x in [&g, &u] {
            let d = max_abs_diff(g1.get(x).unwrap(), g2.get(x).unwrap());
            assert!(d < 1e-4, "gradient differs by {d}");
        }
    }

    #[test]
    fn shapes_must_agree() {
        let dev = Device::Cpu;
        let a = Tensor::zeros((2, 3), candle_core::DType::F32, &dev).unwrap();
        let b = Tensor::zeros((3, 2), candle_core::DType::F32, &dev).unwrap();
        assert!(silu_mul(&a, &b).unwrap_err().to_string().contains("differ"));
    }
}
