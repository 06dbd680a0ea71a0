//! A matmul against a frozen weight whose backward returns only the input
//! gradient: candle's own matmul would also compute (and keep) a gradient for
//! every base weight, which for a LoRA run is pure waste.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, CustomOp3, DType, Layout, Result, Shape, Tensor};

use crate::bf16_matmul::{self, Packed};
use crate::cpu::{
    f32_slice, f32_values, gemm, gradients_of, matmul, matmul_by_transposed, with_f32, with_f32s,
    Stored,
};
use crate::portable;
use crate::quant::Quantized;

/// `x [n, in] -> x · Wᵀ [n, out]` with `W [out, in]` held constant: f32 on
/// the CPU (or bf16 tiles, [`FrozenMatmul::tiled`]), bf16 on other
/// devices (the portable path casts around it).
#[derive(Clone)]
pub struct FrozenMatmul {
    op: Arc<Box<dyn CustomOp1 + Send + Sync>>,
    weight: Weight,
    dims: (usize, usize),
}

/// A frozen `W [out, in]` as packed bf16 tiles ([`Packed`]), in the layout of each pass:
/// `x · Wᵀ` forward, `g · W` backward.
pub(crate) struct Tiles {
    pub(crate) forward: Packed,
    pub(crate) backward: Packed,
}

impl Tiles {
    fn new(w: &[f32], out: usize, inp: usize) -> Tiles {
        Tiles {
            forward: Packed::transposed(w, out, inp),
            backward: Packed::plain(w, out, inp),
        }
    }
}

#[derive(Clone)]
pub(crate) enum Weight {
    Dense(Tensor),
    Tiles(Arc<Tiles>),
    /// In its GGUF block format, expanded a tile at a time.
    Quant(Arc<Quantized>),
}

struct Op {
    /// `W`, contiguous `[out, in]`; the forward multiplies by its transposed
    /// view, so the weight is held once.
    w: Weight,
}

impl FrozenMatmul {
    pub fn new(w: &Tensor) -> Result<FrozenMatmul> {
        let w = if w.device().is_cpu() {
            w.detach().contiguous()?
        } else {
            w.detach().to_dtype(DType::BF16)?.contiguous()?
        };
        let dims = w.dims2()?;
        Ok(FrozenMatmul::from_weight(Weight::Dense(w), dims))
    }

    /// The weight rounded to bf16 and laid out for the CPU's bf16 dot products ([`bf16_matmul`])
    /// (the numerics of a GPU run, several times faster than f32 on the
    /// CPUs that have them); the f32 values are not kept. Only where
    /// [`bf16_matmul::available`].
    pub fn tiled(w: &Tensor) -> Result<FrozenMatmul> {
        if !bf16_matmul::available() || !w.device().is_cpu() {
            candle_core::bail!("bf16 tiles need a CPU with AMX or AVX-512 BF16");
        }
        let (out, inp) = w.dims2()?;
        let tiles = Tiles::new(&f32_values(&w.to_dtype(DType::F32)?)?, out, inp);
        Ok(FrozenMatmul::from_weight(
            Weight::Tiles(Arc::new(tiles)),
            (out, inp),
        ))
    }

    /// The weight kept in its GGUF block format ([`Quantized`]): the
    /// file's bytes in memory, each product expanding one tile of rows at a
    /// time. CPU kernels on the CPU, the portable path elsewhere.
    pub(crate) fn quantized(q: Arc<Quantized>) -> FrozenMatmul {
        let dims = q.dims();
        FrozenMatmul::from_weight(Weight::Quant(q), dims)
    }

    fn from_weight(w: Weight, dims: (usize, usize)) -> FrozenMatmul {
        FrozenMatmul {
            op: Arc::new(Box::new(Op { w: w.clone() })),
            weight: w,
            dims,
        }
    }

    /// The frozen `W [out, in]`, when it is held as a dense tensor.
    pub fn weight(&self) -> Option<&Tensor> {
        match &self.weight {
            Weight::Dense(w) => Some(w),
            Weight::Tiles(_) | Weight::Quant(_) => None,
        }
    }

    /// Bytes the frozen weight occupies.
    pub fn bytes(&self) -> usize {
        match &self.weight {
            Weight::Dense(w) => w.elem_count() * w.dtype().size_in_bytes(),
            Weight::Tiles(t) => t.forward.bytes() + t.backward.bytes(),
            Weight::Quant(q) => q.bytes(),
        }
    }

    pub(crate) fn held(&self) -> &Weight {
        &self.weight
    }

    /// `(out, in)`.
    pub fn dims(&self) -> (usize, usize) {
        self.dims
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if portable::wanted(x) {
            return portable::frozen_matmul(x, &self.weight);
        }
        x.contiguous()?.apply_op1_arc(self.op.clone())
    }

    /// `x · Wᵀ + scale · (x · Aᵀ) · Bᵀ`: the projection with a LoRA
    /// adapter (`A [r, in]`, `B [out, r]`), one graph node on the CPU; `x`,
    /// `A` and `B` get gradients.
    pub fn forward_adapted(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        scale: f64,
    ) -> Result<Tensor> {
        if portable::wanted(x) {
            let h = (x.broadcast_matmul(&a.t()?)? * scale)?;
            return self.forward(x)? + h.broadcast_matmul(&b.t()?)?;
        }
        x.contiguous()?.apply_op3(
            &a.contiguous()?,
            &b.contiguous()?,
            Adapted {
                w: self.weight.clone(),
                scale: scale as f32,
            },
        )
    }
}

impl Weight {
    /// `(out, in)`.
    pub(crate) fn dims(&self) -> Result<(usize, usize)> {
        match self {
            Weight::Dense(w) => w.dims2(),
            Weight::Tiles(t) => Ok((t.forward.dims().1, t.forward.dims().0)),
            Weight::Quant(q) => Ok(q.dims()),
        }
    }

    /// `y [rows, out] = x [rows, in] · Wᵀ`.
    pub(crate) fn project(&self, y: &mut [f32], x: &[f32], rows: usize) -> Result<()> {
        let (out, inp) = self.dims()?;
        match self {
            Weight::Dense(w) => with_f32(w, "frozen matmul", |w| {
                matmul_by_transposed(y, x, w, rows, out, inp);
                Ok(())
            }),
            Weight::Tiles(t) => {
                bf16_matmul::matmul(y, x, rows, &t.forward);
                Ok(())
            }
            Weight::Quant(q) => q.project(y, x, rows),
        }
    }

    /// `dx [rows, in] = g [rows, out] · W`.
    pub(crate) fn project_back_into(&self, dx: &mut [f32], g: &[f32], rows: usize) -> Result<()> {
        let (out, inp) = self.dims()?;
        match self {
            Weight::Dense(w) => with_f32(w, "frozen matmul", |w| {
                matmul(dx, g, w, rows, inp, out);
                Ok(())
            }),
            Weight::Tiles(t) => {
                bf16_matmul::matmul(dx, g, rows, &t.backward);
                Ok(())
            }
            Weight::Quant(q) => q.project_back_into(dx, g, rows),
        }
    }

    /// `g [.., out] · W`, shaped `[.., in]`.
    fn project_back(&self, g: &Tensor) -> Result<Tensor> {
        match self {
            Weight::Dense(w) => g.broadcast_matmul(w),
            Weight::Tiles(_) | Weight::Quant(_) => {
                let (out, inp) = self.dims()?;
                let mut shape = g.dims().to_vec();
                if let Some(last) = shape.last_mut() {
                    *last = inp;
                }
                let rows = g.elem_count() / out.max(1);
                let mut dx = vec![0f32; rows * inp];
                with_f32(g, "frozen matmul", |g| {
                    self.project_back_into(&mut dx, g, rows)
                })?;
                Tensor::from_vec(dx, shape, &candle_core::Device::Cpu)
            }
        }
    }
}

/// A LoRA adapter's values: `A [r, in]`, `B [out, r]` and the scale.
#[derive(Clone, Copy)]
pub(crate) struct AdapterValues<'a> {
    pub(crate) a: &'a [f32],
    pub(crate) b: &'a [f32],
    pub(crate) r: usize,
    pub(crate) scale: f32,
}

impl Weight {
    /// `y [rows, out] = x · Wᵀ + s · (x · Aᵀ) · Bᵀ`.
    pub(crate) fn project_adapted(
        &self,
        x: &[f32],
        ad: AdapterValues,
        rows: usize,
    ) -> Result<Vec<f32>> {
        let (out, inp) = self.dims()?;
        let mut y = vec![0f32; rows * out];
        let frozen = crate::timing::span("adapted.fwd.frozen");
        self.project(&mut y, x, rows)?;
        drop(frozen);
        // Scaled at rank width: `[rows, r]` values, not `[rows, out]`.
        let mut h = vec![0f32; rows * ad.r];
        matmul_by_transposed(&mut h, x, ad.a, rows, ad.r, inp);
        h.iter_mut().for_each(|v| *v *= ad.scale);
        gemm(
            &mut y,
            (rows, out, ad.r),
            (&h, Stored::AsIs),
            (ad.b, Stored::Transposed),
            true,
        );
        Ok(y)
    }

    /// The backward pass of [`Weight::project_adapted`] for the gradient
    /// `g [rows, out]`: `dx = g·W + s·(g·B)·A` (written to `dx`), and
    /// returns `(dA, dB) = ((s·g·B)ᵀ·x, gᵀ·(s·x·Aᵀ))`.
    pub(crate) fn project_adapted_back(
        &self,
        dx: &mut [f32],
        x: &[f32],
        ad: AdapterValues,
        g: &[f32],
        rows: usize,
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let (out, inp) = self.dims()?;
        let (r, s) = (ad.r, ad.scale);
        let mut gb = vec![0f32; rows * r];
        matmul(&mut gb, g, ad.b, rows, r, out);
        gb.iter_mut().for_each(|v| *v *= s);
        let frozen = crate::timing::span("adapted.bwd.frozen");
        self.project_back_into(dx, g, rows)?;
        drop(frozen);
        gemm(
            dx,
            (rows, inp, r),
            (&gb, Stored::AsIs),
            (ad.a, Stored::AsIs),
            true,
        );
        let mut da = vec![0f32; r * inp];
        gemm(
            &mut da,
            (r, inp, rows),
            (&gb, Stored::Transposed),
            (x, Stored::AsIs),
            false,
        );
        let mut h = vec![0f32; rows * r];
        matmul_by_transposed(&mut h, x, ad.a, rows, r, inp);
        h.iter_mut().for_each(|v| *v *= s);
        let mut db = vec![0f32; out * r];
        gemm(
            &mut db,
            (out, r, rows),
            (g, Stored::Transposed),
            (&h, Stored::AsIs),
            false,
        );
        Ok((da, db))
    }
}

impl CustomOp1 for Op {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("frozen.fwd");
        let x = f32_slice(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let (&inp, rows) = match dims.split_last() {
            Some((last, rest)) => (last, rest.iter().product::<usize>()),
            None => candle_core::bail!("frozen matmul needs at least one dimension"),
        };
        let (out, w_in) = self.w.dims()?;
        if w_in != inp {
            candle_core::bail!("frozen matmul: input width {inp}, weight [{out}, {w_in}]");
        }
        let mut y = vec![0f32; rows * out];
        self.w.project(&mut y, x, rows)?;
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("checked above") = out;
        Ok((CpuStorage::F32(y), Shape::from(shape)))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let _t = crate::timing::span("frozen.bwd");
        self.w.project_back(grad_res).map(Some)
    }
}

/// The projection plus its adapter as one op.
struct Adapted {
    w: Weight,
    scale: f32,
}

impl CustomOp3 for Adapted {
    fn name(&self) -> &'static str {
        "adapted-matmul"
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
        let _t = crate::timing::span("adapted.fwd");
        let x = f32_slice(xs, xl, self.name())?;
        let (a, b) = (
            f32_slice(a_s, al, self.name())?,
            f32_slice(bs, bl, self.name())?,
        );
        let dims = xl.shape().dims();
        let inp = dims.last().copied().unwrap_or(0);
        let rows = x.len() / inp.max(1);
        let (out, w_in) = self.w.dims()?;
        let ((r, a_in), (b_out, b_r)) = (al.shape().dims2()?, bl.shape().dims2()?);
        if w_in != inp || a_in != inp || b_out != out || b_r != r {
            candle_core::bail!(
                "adapted matmul: input {dims:?}, weight [{out}, {w_in}], A [{r}, {a_in}], B [{b_out}, {b_r}]"
            );
        }
        let ad = AdapterValues {
            a,
            b,
            r,
            scale: self.scale,
        };
        let y = self.w.project_adapted(x, ad, rows)?;
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("checked above") = out;
        Ok((CpuStorage::F32(y), Shape::from(shape)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _t = crate::timing::span("adapted.bwd");
        // On the values, not on the variables: a gradient computed from the
        // variables would carry a graph that keeps every upstream gradient
        // alive until the whole backward pass ends (and candle's products
        // would copy and add on top).
        let (r, inp) = a.dims2()?;
        let rows = x.elem_count() / inp.max(1);
        let s = self.scale;
        let mut dx = vec![0f32; rows * inp];
        let (da, db) = with_f32s([x, a, b, grad], self.name(), |[x, a, b, grad]| {
            let ad = AdapterValues { a, b, r, scale: s };
            self.w.project_adapted_back(&mut dx, x, ad, grad, rows)
        })?;
        gradients_of([x, a, b], (dx, da, db))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use candle_core::{Device, Var};

    #[test]
    fn matches_matmul_and_passes_only_the_input_gradient() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (5, 3), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (4, 3), &dev).unwrap();
        let f = FrozenMatmul::new(&w).unwrap();
        let y = f.forward(x.as_tensor()).unwrap();
        let reference = x.as_tensor().matmul(&w.t().unwrap()).unwrap();
        assert!(max_abs_diff(&y, &reference) < 1e-5);
        let grads = y.sum_all().unwrap().backward().unwrap();
        let gx = grads.get(x.as_tensor()).unwrap();
        let expect = Tensor::ones((4, 5), candle_core::DType::F32, &dev)
            .unwrap()
            .matmul(&w)
            .unwrap();
        assert!(max_abs_diff(gx, &expect) < 1e-5);
        assert!(
            grads.get(&w).is_none(),
            "no gradient may exist for the frozen weight"
        );
    }

    #[test]
    fn tiles_agree_with_f32_within_bf16_rounding_in_both_passes() {
        if !bf16_matmul::available() {
            assert!(
                FrozenMatmul::tiled(&Tensor::zeros((2, 2), DType::F32, &Device::Cpu).unwrap())
                    .is_err()
            );
            eprintln!("no bf16 dot products on this CPU: only the refusal is checked here");
            return;
        }
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (70, 96), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (2, 19, 96), &dev).unwrap();
        let up = Tensor::randn(0f32, 1.0, (2, 19, 70), &dev).unwrap();
        let dense = FrozenMatmul::new(&w).unwrap();
        let tiled = FrozenMatmul::tiled(&w).unwrap();
        assert!(tiled.weight().is_none(), "the f32 weight is not kept");
        assert_eq!(tiled.dims(), (70, 96));
        let (a, b) = (
            dense.forward(x.as_tensor()).unwrap(),
            tiled.forward(x.as_tensor()).unwrap(),
        );
        // Two bf16 roundings over 96 products of N(0, 1) values.
        let d = max_abs_diff(&a, &b);
        assert!(d > 0.0 && d < 0.5, "forward differs by {d}");
        let grad = |y: &Tensor| {
            let g = (y * &up).unwrap().sum_all().unwrap().backward().unwrap();
            g.get(x.as_tensor()).unwrap().clone()
        };
        let d = max_abs_diff(&grad(&a), &grad(&b));
        assert!(d > 0.0 && d < 0.5, "input gradient differs by {d}");
    }

    #[test]
    fn an_adapted_projection_matches_its_composition_and_gradients() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (70, 96), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (2, 19, 96), &dev).unwrap();
        let a = Var::randn(0f32, 0.1, (4, 96), &dev).unwrap();
        let b = Var::randn(0f32, 0.1, (70, 4), &dev).unwrap();
        let up = Tensor::randn(0f32, 1.0, (2, 19, 70), &dev).unwrap();
        let mut kinds = vec![(FrozenMatmul::new(&w).unwrap(), 1e-4)];
        if bf16_matmul::available() {
            // bf16 rounding of x and W in the frozen part.
            kinds.push((FrozenMatmul::tiled(&w).unwrap(), 0.5));
        }
        for (f, tol) in kinds {
            let ours = f
                .forward_adapted(x.as_tensor(), a.as_tensor(), b.as_tensor(), 2.0)
                .unwrap();
            let h = (x
                .as_tensor()
                .broadcast_matmul(&a.as_tensor().t().unwrap())
                .unwrap()
                * 2.0)
                .unwrap();
            let theirs = (x.as_tensor().broadcast_matmul(&w.t().unwrap()).unwrap()
                + h.broadcast_matmul(&b.as_tensor().t().unwrap()).unwrap())
            .unwrap();
            assert!(max_abs_diff(&ours, &theirs) < tol, "forward");
            let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
            for (name, v) in [("x", &x), ("A", &a), ("B", &b)] {
                let d = max_abs_diff(
                    g1.get(v.as_tensor()).unwrap(),
                    g2.get(v.as_tensor()).unwrap(),
                );
                assert!(d < tol * 10.0, "gradient of {name} differs by {d}");
            }
            assert!(g1.get(&w).is_none(), "no gradient for the frozen weight");
        }
    }
}
