//! The SwiGLU gate `silu(g) · u` as one op with its own backward pass, and
//! the whole gated pair of adapted projections, `silu(x·W_gᵀ + …) ·
//! (x·W_uᵀ + …)`, as one op too.
//!
//! Composed from candle ops the gate keeps five intermediates of the
//! feed-forward width per layer (the largest activations after the logits)
//! and walks them single-threaded, twice as often again in the backward
//! pass. As one op it keeps only `g` and `u` and runs on every core. As
//! part of [`gated`], `g` and `u` are not graph nodes at all: candle's
//! backward pass zeroes and adds a buffer for every node's input, which for
//! these two was a tenth of a 2048-token step.

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use crate::cpu::{f32_slice, gradients_of, with_f32s};
use crate::frozen::{AdapterValues, FrozenMatmul, Weight};
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
pub(crate) const GRAIN: usize = 16 * 1024;

/// `out = silu(g) · u`.
pub(crate) fn gate_into(out: &mut [f32], g: &[f32], u: &[f32]) {
    out.par_chunks_mut(GRAIN)
        .zip(g.par_chunks(GRAIN).zip(u.par_chunks(GRAIN)))
        .for_each(|(o, (g, u))| {
            for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                *o = g * sigmoid(g) * u;
            }
        });
}

/// The gate's backward pass for the upstream `d`, in place: `g` becomes
/// `dg` and `u` becomes `du`.
pub(crate) fn gate_back_in_place(g: &mut [f32], u: &mut [f32], d: &[f32]) {
    g.par_chunks_mut(GRAIN)
        .zip(u.par_chunks_mut(GRAIN))
        .zip(d.par_chunks(GRAIN))
        .for_each(|((g, u), d)| {
            for i in 0..g.len() {
                let s = sigmoid(g[i]);
                // d silu(g) / dg = σ(g) · (1 + g · (1 − σ(g)))
                let dg = d[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
                u[i] = d[i] * g[i] * s;
                g[i] = dg;
            }
        });
}

/// The backward pass of the gate's and the up projection's adapted
/// products for their output gradients `dg` and `du` (each `[rows, ffn]`):
/// `dx` summed over both, and `dA = [dA_g; dA_u]`, `dB = [dB_g; dB_u]`.
pub(crate) fn gated_projections_back(
    (gate, up): (&Weight, &Weight),
    x: &[f32],
    [ag, au]: [AdapterValues; 2],
    (mut dg, du): (Vec<f32>, Vec<f32>),
    rows: usize,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let inp = x.len() / rows.max(1);
    let mut dx = vec![0f32; rows * inp];
    let (mut da, mut db) = gate.project_adapted_back(&mut dx, x, ag, &dg, rows)?;
    // `dg` is spent: it takes the up projection's share of dx when it is
    // large enough (the feed-forward width is the wider one in every real
    // model).
    let mut spare = Vec::new();
    let dx_up = if dg.len() >= rows * inp {
        &mut dg[..rows * inp]
    } else {
        spare.resize(rows * inp, 0f32);
        &mut spare[..]
    };
    let (da_u, db_u) = up.project_adapted_back(dx_up, x, au, &du, rows)?;
    dx.par_chunks_mut(GRAIN)
        .zip(dx_up.par_chunks(GRAIN))
        .for_each(|(o, y)| o.iter_mut().zip(y).for_each(|(o, y)| *o += y));
    da.extend(da_u);
    db.extend(db_u);
    Ok((dx, da, db))
}

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
        gate_into(&mut out, g, u);
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
        let (dg, du) = with_f32s([g, u, grad], self.name(), |[gv, uv, dv]| {
            let (mut dg, mut du) = (gv.to_vec(), uv.to_vec());
            gate_back_in_place(&mut dg, &mut du, dv);
            Ok((dg, du))
        })?;
        Ok((
            Some(Tensor::from_vec(dg, g.shape(), g.device())?),
            Some(Tensor::from_vec(du, u.shape(), u.device())?),
        ))
    }
}

/// `silu(x·W_gᵀ + s·(x·A_gᵀ)·B_gᵀ) · (x·W_uᵀ + s·(x·A_uᵀ)·B_uᵀ)` for
/// `x [.., in]`, with the two adapters stacked: `a = [A_g; A_u]` `[2r, in]`
/// and `b = [B_g; B_u]` `[2·ffn, r]`. One graph node on the CPU, with
/// gradients for `x`, `a` and `b`.
pub fn gated(
    x: &Tensor,
    (gate, up): (&FrozenMatmul, &FrozenMatmul),
    a: &Tensor,
    b: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    if portable::wanted(x) {
        let r = a.dim(0)? / 2;
        let ffn = b.dim(0)? / 2;
        let g = gate.forward_adapted(x, &a.narrow(0, 0, r)?, &b.narrow(0, 0, ffn)?, scale)?;
        let u = up.forward_adapted(x, &a.narrow(0, r, r)?, &b.narrow(0, ffn, ffn)?, scale)?;
        return silu_mul(&g, &u);
    }
    x.contiguous()?.apply_op3(
        &a.contiguous()?,
        &b.contiguous()?,
        Gated {
            gate: gate.held().clone(),
            up: up.held().clone(),
            scale: scale as f32,
            saved: Mutex::new(None),
        },
    )
}

struct Gated {
    gate: Weight,
    up: Weight,
    scale: f32,
    /// `g` and `u` from the forward pass, for the backward pass.
    saved: Mutex<Option<(Vec<f32>, Vec<f32>)>>,
}

/// Sizes of one call: rows, input width, feed-forward width, rank.
struct GatedDims {
    rows: usize,
    inp: usize,
    ffn: usize,
    r: usize,
}

impl Gated {
    fn dims(&self, x: &[usize], a: &[usize], b: &[usize]) -> Result<GatedDims> {
        let inp = x.last().copied().unwrap_or(0);
        let rows = x.iter().product::<usize>() / inp.max(1);
        let ((ffn, gi), (ffn_u, ui)) = (self.gate.dims()?, self.up.dims()?);
        let fits = gi == inp
            && ui == inp
            && ffn_u == ffn
            && a.len() == 2
            && b.len() == 2
            && a[0].is_multiple_of(2)
            && a[1] == inp
            && b[0] == 2 * ffn
            && b[1] == a[0] / 2;
        if !fits {
            candle_core::bail!(
                "gated projections: input {x:?}, gate [{ffn}, {gi}], up [{ffn_u}, {ui}], A {a:?}, B {b:?}"
            );
        }
        Ok(GatedDims {
            rows,
            inp,
            ffn,
            r: a[0] / 2,
        })
    }

    /// The gate's and the up projection's adapters within `a` and `b`.
    fn adapters<'a>(&self, d: &GatedDims, a: &'a [f32], b: &'a [f32]) -> [AdapterValues<'a>; 2] {
        let (ra, rb) = (d.r * d.inp, d.ffn * d.r);
        let at = |i: usize| AdapterValues {
            a: &a[i * ra..(i + 1) * ra],
            b: &b[i * rb..(i + 1) * rb],
            r: d.r,
            scale: self.scale,
        };
        [at(0), at(1)]
    }

    fn projections(
        &self,
        d: &GatedDims,
        x: &[f32],
        a: &[f32],
        b: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let [ag, au] = self.adapters(d, a, b);
        Ok((
            self.gate.project_adapted(x, ag, d.rows)?,
            self.up.project_adapted(x, au, d.rows)?,
        ))
    }
}

impl CustomOp3 for Gated {
    fn name(&self) -> &'static str {
        "gated-projections"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        a_s: &CpuStorage,
        al: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("gated.fwd");
        let name = self.name();
        let (x, a, b) = (
            f32_slice(xs, xl, name)?,
            f32_slice(a_s, al, name)?,
            f32_slice(bs, bl, name)?,
        );
        let d = self.dims(xl.dims(), al.dims(), bl.dims())?;
        let (g, u) = self.projections(&d, x, a, b)?;
        let mut out = vec![0f32; d.rows * d.ffn];
        gate_into(&mut out, &g, &u);
        *self.saved.lock().unwrap_or_else(|p| p.into_inner()) = Some((g, u));
        let mut shape = xl.dims().to_vec();
        *shape.last_mut().expect("checked in dims") = d.ffn;
        Ok((CpuStorage::F32(out), Shape::from(shape)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _t = crate::timing::span("gated.bwd");
        let d = self.dims(x.dims(), a.dims(), b.dims())?;
        let saved = self.saved.lock().unwrap_or_else(|p| p.into_inner()).take();
        let (dx, da, db) = with_f32s([x, a, b, grad], self.name(), |[xv, av, bv, grad]| {
            let (mut g, mut u) = match saved {
                Some(gu) => gu,
                None => self.projections(&d, xv, av, bv)?,
            };
            gate_back_in_place(&mut g, &mut u, grad);
            let [ag, au] = self.adapters(&d, av, bv);
            gated_projections_back((&self.gate, &self.up), xv, [ag, au], (g, u), d.rows)
        })?;
        gradients_of([x, a, b], (dx, da, db))
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
    fn gated_projections_match_their_composition_and_gradients() {
        let dev = Device::Cpu;
        // Feed-forward wider than the input, as in real models, and narrower.
        for (inp, ffn) in [(40, 70), (96, 70)] {
            let wg = Tensor::randn(0f32, 1.0, (ffn, inp), &dev).unwrap();
            let wu = Tensor::randn(0f32, 1.0, (ffn, inp), &dev).unwrap();
            let x = Var::randn(0f32, 1.0, (2, 9, inp), &dev).unwrap();
            let vars: Vec<Var> = [(4, inp), (ffn, 4), (4, inp), (ffn, 4)]
                .into_iter()
                .map(|shape| Var::randn(0f32, 0.1, shape, &dev).unwrap())
                .collect();
            let [ag, bg, au, bu] = [0, 1, 2, 3].map(|i| vars[i].as_tensor());
            let up = Tensor::randn(0f32, 1.0, (2, 9, ffn), &dev).unwrap();
            let mut kinds = vec![(
                FrozenMatmul::new(&wg).unwrap(),
                FrozenMatmul::new(&wu).unwrap(),
                1e-4,
            )];
            if crate::bf16_matmul::available() {
                kinds.push((
                    FrozenMatmul::tiled(&wg).unwrap(),
                    FrozenMatmul::tiled(&wu).unwrap(),
                    0.5,
                ));
            }
            for (g, u, tol) in kinds {
                let a = Tensor::cat(&[ag, au], 0).unwrap();
                let b = Tensor::cat(&[bg, bu], 0).unwrap();
                let ours = gated(x.as_tensor(), (&g, &u), &a, &b, 2.0).unwrap();
                let theirs = silu_mul(
                    &g.forward_adapted(x.as_tensor(), ag, bg, 2.0).unwrap(),
                    &u.forward_adapted(x.as_tensor(), au, bu, 2.0).unwrap(),
                )
                .unwrap();
                assert!(max_abs_diff(&ours, &theirs) < tol, "forward");
                let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
                for (name, v) in ["x", "A_g", "B_g", "A_u", "B_u"]
                    .iter()
                    .zip(std::iter::once(&x).chain(&vars))
                {
                    let d = max_abs_diff(
                        g1.get(v.as_tensor()).unwrap(),
                        g2.get(v.as_tensor()).unwrap(),
                    );
                    assert!(d < tol * 10.0, "gradient of {name} differs by {d}");
                }
            }
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
