//! Differentiable building blocks, composed only from candle ops whose
//! backward pass is implemented (no fused kernels).

use candle_core::{DType, Device, Result, Tensor, D};

/// RMS norm over the last dimension, times `weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let mean_sq = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (mean_sq + eps)?.sqrt()?.recip()?;
    x.broadcast_mul(&inv)?.broadcast_mul(weight)
}

/// Softmax over the last dimension. The shift by the row maximum is taken
/// from a detached copy: it cancels mathematically, so no gradient flows
/// through it.
pub fn softmax(x: &Tensor) -> Result<Tensor> {
    let max = x.detach().max_keepdim(D::Minus1)?;
    let e = x.broadcast_sub(&max)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}

/// Log-softmax over the last dimension.
pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let max = x.detach().max_keepdim(D::Minus1)?;
    let shifted = x.broadcast_sub(&max)?;
    let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    shifted.broadcast_sub(&lse)
}

/// cos and sin tables `[t, dim/2]` for positions `0..t`.
pub fn rope_tables(t: usize, dim: usize, base: f32, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = dim / 2;
    let mut cos = Vec::with_capacity(t * half);
    let mut sin = Vec::with_capacity(t * half);
    for p in 0..t {
        for i in 0..half {
            let theta = p as f64 * (base as f64).powf(-2.0 * i as f64 / dim as f64);
            cos.push(theta.cos() as f32);
            sin.push(theta.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (t, half), device)?,
        Tensor::from_vec(sin, (t, half), device)?,
    ))
}

/// Rotary embedding of `x [t, heads, dim]`. `interleaved` rotates pairs
/// `(2i, 2i+1)` (llama.cpp's normal mode, used by `llama` GGUFs whose q/k
/// rows are permuted for it); otherwise halves `(i, i+dim/2)` (NeoX).
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, interleaved: bool) -> Result<Tensor> {
    let (t, h, d) = x.dims3()?;
    let half = d / 2;
    if interleaved {
        let x = x.reshape((t, h, half, 2))?;
        let xe = x.narrow(3, 0, 1)?;
        let xo = x.narrow(3, 1, 1)?;
        let c = cos.reshape((t, 1, half, 1))?;
        let s = sin.reshape((t, 1, half, 1))?;
        let a = (xe.broadcast_mul(&c)? - xo.broadcast_mul(&s)?)?;
        let b = (xe.broadcast_mul(&s)? + xo.broadcast_mul(&c)?)?;
        Tensor::cat(&[a, b], 3)?.reshape((t, h, d))
    } else {
        let x1 = x.narrow(2, 0, half)?;
        let x2 = x.narrow(2, half, half)?;
        let c = cos.reshape((t, 1, half))?;
        let s = sin.reshape((t, 1, half))?;
        let a = (x1.broadcast_mul(&c)? - x2.broadcast_mul(&s)?)?;
        let b = (x1.broadcast_mul(&s)? + x2.broadcast_mul(&c)?)?;
        Tensor::cat(&[a, b], 2)
    }
}

/// Additive attention mask `[t, t]`: 0 where query `i` may see key `j`
/// (`j <= i`, and within `window` if given), −∞ elsewhere.
pub fn causal_mask(t: usize, window: Option<usize>, device: &Device) -> Result<Tensor> {
    let mut m = vec![0f32; t * t];
    for i in 0..t {
        for j in 0..t {
            let hidden = j > i || window.is_some_and(|w| i - j >= w);
            if hidden {
                m[i * t + j] = f32::NEG_INFINITY;
            }
        }
    }
    Tensor::from_vec(m, (t, t), device)
}

/// GELU with the tanh approximation, as ggml's CPU backend computes it: a
/// table indexed by the f16-rounded input, holding f16-rounded outputs. The
/// roundings are casts, whose backward passes the gradient straight through.
pub fn gelu_tanh(x: &Tensor) -> Result<Tensor> {
    let f16 = |t: &Tensor| t.to_dtype(DType::F16)?.to_dtype(DType::F32);
    let x = f16(x)?;
    let c = (2.0f64 / std::f64::consts::PI).sqrt();
    let inner = ((x.powf(3.0)? * 0.044715)? + &x)?;
    let t = (inner * c)?.tanh()?;
    f16(&(((t + 1.0)? * &x)? * 0.5)?)
}

/// SiLU, composed: `x · σ(x)`.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    let sig = (x.neg()?.exp()? + 1.0)?.recip()?;
    x * sig
}

pub fn f32_scalar(t: &Tensor) -> Result<f32> {
    t.to_dtype(DType::F32)?.to_scalar::<f32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composed_ops_match_their_definitions() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[1f32, 2.0, 3.0], [0.5, -1.0, 4.0]], &dev).unwrap();
        let s = softmax(&x).unwrap().to_vec2::<f32>().unwrap();
        let row: f32 = s[0].iter().sum();
        assert!((row - 1.0).abs() < 1e-6);
        let ls = log_softmax(&x).unwrap().to_vec2::<f32>().unwrap();
        assert!((ls[1][2] - s[1][2].ln()).abs() < 1e-5);
        let m = causal_mask(4, Some(2), &dev)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(m[3][3], 0.0);
        assert_eq!(m[3][2], 0.0);
        assert_eq!(m[3][1], f32::NEG_INFINITY, "outside the window");
        assert_eq!(m[1][2], f32::NEG_INFINITY, "future");
    }
}
