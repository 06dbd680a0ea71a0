//! A matmul against a frozen weight whose backward returns only the input
//! gradient: candle's own matmul would also compute (and keep) a gradient for
//! every base weight, which for a LoRA run is pure waste.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};

/// `x [n, in] -> x · Wᵀ [n, out]` with `W [out, in]` held constant.
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
        let w = w.detach().contiguous()?;
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
        x.contiguous()?.apply_op1_arc(self.op.clone())
    }
}

impl CustomOp1 for Op {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let data = match storage {
            CpuStorage::F32(v) => v,
            _ => candle_core::bail!("frozen matmul expects f32 input"),
        };
        let (start, end) = layout.contiguous_offsets().ok_or_else(|| {
            candle_core::Error::Msg("frozen matmul input must be contiguous".into())
        })?;
        let x = Tensor::from_slice(&data[start..end], layout.shape(), &candle_core::Device::Cpu)?;
        let y = x.matmul(&self.w.t()?)?;
        let shape = y.shape().clone();
        Ok((CpuStorage::F32(y.flatten_all()?.to_vec1::<f32>()?), shape))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad_res.matmul(&self.w)?))
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
