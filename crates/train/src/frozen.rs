//! A matmul against a frozen weight whose backward returns only the input
//! gradient: candle's own matmul would also compute (and keep) a gradient for
//! every base weight, which for a LoRA run is pure waste.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};

use crate::cpu::{f32_slice, matmul_by_transposed, with_f32};
use crate::portable;

/// `x [n, in] -> x · Wᵀ [n, out]` with `W [out, in]` held constant: f32 on
/// the CPU, bf16 on other devices (the portable path casts around it).
#[derive(Clone)]
pub struct FrozenMatmul {
    op: Arc<Box<dyn CustomOp1 + Send + Sync>>,
    weight: Tensor,
}

struct Op {
    /// `W`, contiguous `[out, in]`; the forward multiplies by its transposed
    /// view, so the weight is held once.
    w: Tensor,
}

impl FrozenMatmul {
    pub fn new(w: &Tensor) -> Result<FrozenMatmul> {
        let w = if w.device().is_cpu() {
            w.detach().contiguous()?
        } else {
            w.detach().to_dtype(DType::BF16)?.contiguous()?
        };
        let op = Op { w: w.clone() };
        Ok(FrozenMatmul {
            op: Arc::new(Box::new(op)),
            weight: w,
        })
    }

    /// The frozen `W [out, in]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if portable::wanted(x) {
            return portable::frozen_matmul(x, &self.weight);
        }
        x.contiguous()?.apply_op1_arc(self.op.clone())
    }
}

impl CustomOp1 for Op {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let (&inp, rows) = match dims.split_last() {
            Some((last, rest)) => (last, rest.iter().product::<usize>()),
            None => candle_core::bail!("frozen matmul needs at least one dimension"),
        };
        let (out, w_in) = self.w.dims2()?;
        if w_in != inp {
            candle_core::bail!("frozen matmul: input width {inp}, weight [{out}, {w_in}]");
        }
        let mut y = vec![0f32; rows * out];
        with_f32(&self.w, self.name(), |w| {
            matmul_by_transposed(&mut y, x, w, rows, out, inp);
            Ok(())
        })?;
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("checked above") = out;
        Ok((CpuStorage::F32(y), Shape::from(shape)))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad_res.broadcast_matmul(&self.w)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn matches_matmul_and_passes_only_the_input_gradient() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (5, 3), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (4, 3), &dev).unwrap();
        let f = FrozenMatmul::new(&w).unwrap();
        let y = f.forward(x.as_tensor()).unwrap();
        let reference = x.as_tensor().matmul(&w.t().unwrap()).unwrap();
        let diff = (y.clone() - &reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-5);
        let grads = y.sum_all().unwrap().backward().unwrap();
        let gx = grads.get(x.as_tensor()).unwrap();
        let expect = Tensor::ones((4, 5), candle_core::DType::F32, &dev)
            .unwrap()
            .matmul(&w)
            .unwrap();
        let d = (gx - expect).unwrap().abs().unwrap().max_all().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() < 1e-5);
        assert!(
            grads.get(&w).is_none(),
            "no gradient may exist for the frozen weight"
        );
    }
}
