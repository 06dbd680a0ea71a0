//! The heavy ops composed from candle tensor ops, for devices that have no
//! hand-written kernel here (CUDA, Metal).
//!
//! Each op computes its forward value from detached inputs, in blocks, and
//! then hands candle a custom op that only copies that value and carries an
//! explicit backward pass, itself made of tensor ops. So the memory stays
//! what the CPU kernels need (no `[heads, t, t]` scores, no `[t, vocab]`
//! logits, no gradient for a frozen weight) and every line runs wherever
//! candle's own ops run. The same code runs on the CPU in tests, against the
//! CPU kernels, through [`force_on_cpu`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{
    CpuStorage, CudaStorage, CustomOp1, CustomOp3, DType, Layout, MetalStorage, Result, Shape,
    Storage, Tensor, D,
};

use crate::frozen::Weight;

static FORCED: AtomicBool = AtomicBool::new(false);

/// Runs the portable ops on the CPU too, to check on a machine without a
/// GPU the code a GPU runs. Process-wide.
pub fn force_on_cpu(on: bool) {
    FORCED.store(on, Ordering::SeqCst);
}

/// Whether the op on `t` must take the portable path.
pub(crate) fn wanted(t: &Tensor) -> bool {
    !t.device().is_cpu() || FORCED.load(Ordering::SeqCst)
}

/// A copy of the values `l` describes, contiguous from offset 0.
fn copy_out<B>(s: &B, l: &Layout) -> Result<B>
where
    B: BackendStorage,
    B::Device: BackendDevice<Storage = B>,
{
    let mut dst = s.device().zeros_impl(l.shape(), s.dtype())?;
    s.copy_strided_src(&mut dst, 0, l)?;
    Ok(dst)
}

/// Forwards of an op whose value was computed beforehand: `out`, copied
/// into the storage of the device the op runs on.
macro_rules! copy_forwards {
    ($($arg:ident: $layout:ident),*) => {
        fn cpu_fwd(&self, $($arg: &CpuStorage, $layout: &Layout),*) -> Result<(CpuStorage, Shape)> {
            let (s, l) = self.out.storage_and_layout();
            match &*s {
                Storage::Cpu(s) => Ok((copy_out(s, l)?, l.shape().clone())),
                _ => candle_core::bail!("{}: value and inputs on different devices", self.name()),
            }
        }

        fn cuda_fwd(&self, $($arg: &CudaStorage, $layout: &Layout),*) -> Result<(CudaStorage, Shape)> {
            let (s, l) = self.out.storage_and_layout();
            match &*s {
                Storage::Cuda(s) => Ok((copy_out(s, l)?, l.shape().clone())),
                _ => candle_core::bail!("{}: value and inputs on different devices", self.name()),
            }
        }

        fn metal_fwd(&self, $($arg: &MetalStorage, $layout: &Layout),*) -> Result<(MetalStorage, Shape)> {
            let (s, l) = self.out.storage_and_layout();
            match &*s {
                Storage::Metal(s) => Ok((copy_out(s, l)?, l.shape().clone())),
                _ => candle_core::bail!("{}: value and inputs on different devices", self.name()),
            }
        }
    };
}

type Backward1 = Box<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;
type Backward3 = Box<dyn Fn(&Tensor) -> Result<(Tensor, Tensor, Tensor)> + Send + Sync>;

/// One input; `bwd` maps the output's gradient to the input's.
struct Attached1 {
    name: &'static str,
    out: Tensor,
    bwd: Backward1,
}

impl CustomOp1 for Attached1 {
    fn name(&self) -> &'static str {
        self.name
    }

    copy_forwards!(_s: _l);

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        (self.bwd)(grad).map(Some)
    }
}

/// Three inputs; `bwd` maps the output's gradient to theirs.
struct Attached3 {
    name: &'static str,
    out: Tensor,
    bwd: Backward3,
}

impl CustomOp3 for Attached3 {
    fn name(&self) -> &'static str {
        self.name
    }

    copy_forwards!(_s1: _l1, _s2: _l2, _s3: _l3);

    fn bwd(
        &self,
        _a: &Tensor,
        _b: &Tensor,
        _c: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (a, b, c) = (self.bwd)(grad)?;
        Ok((Some(a), Some(b), Some(c)))
    }
}

/// The dtype products with a quantized weight run in: bf16 on a GPU, f32
/// on the CPU.
fn compute_dtype(t: &Tensor) -> DType {
    if t.device().is_cpu() {
        DType::F32
    } else {
        DType::BF16
    }
}

/// `x · Wᵀ` in the weight's dtype (bf16 on a GPU), result in f32.
fn project(x: &Tensor, w: &Weight) -> Result<Tensor> {
    match w {
        Weight::Dense(w) => x.to_dtype(w.dtype())?.matmul(&w.t()?)?.to_dtype(DType::F32),
        Weight::Quant(q) => q.project_tensor(x, compute_dtype(x)),
        Weight::Tiles(_) => no_tiles(),
    }
}

/// `g · W`, the input gradient of [`project`].
fn project_back(g: &Tensor, w: &Weight) -> Result<Tensor> {
    match w {
        Weight::Dense(w) => g.to_dtype(w.dtype())?.matmul(w)?.to_dtype(DType::F32),
        Weight::Quant(q) => q.project_back_tensor(g, compute_dtype(g)),
        Weight::Tiles(_) => no_tiles(),
    }
}

fn no_tiles<T>() -> Result<T> {
    candle_core::bail!("the portable ops cannot use bf16 tiles: load the model without them")
}

/// `x [.., in] · Wᵀ` for a frozen `W [out, in]`; only `x` gets a gradient.
pub(crate) fn frozen_matmul(x: &Tensor, w: &Weight) -> Result<Tensor> {
    let (out, inp) = w.dims()?;
    let x_shape = x.shape().clone();
    let rows = x.elem_count() / inp.max(1);
    if x.dims().last() != Some(&inp) {
        candle_core::bail!("frozen matmul: input {:?}, weight [{out}, {inp}]", x.dims());
    }
    let mut y_dims = x.dims().to_vec();
    *y_dims.last_mut().expect("checked above") = out;
    let y = project(&x.detach().reshape((rows, inp))?, w)?.reshape(y_dims.clone())?;
    let w = w.clone();
    let bwd = move |g: &Tensor| project_back(&g.reshape((rows, out))?, &w)?.reshape(&x_shape);
    x.apply_op1_arc(Arc::new(Box::new(Attached1 {
        name: "frozen-matmul-portable",
        out: y,
        bwd: Box::new(bwd),
    })))
}

/// `log softmax(h · Wᵀ)[i, targets[i]]` per row of `h [n, e]`, `block` rows
/// of logits at a time in both passes.
pub(crate) fn target_logprobs(
    h: &Tensor,
    w: &Weight,
    targets: &[u32],
    block: usize,
) -> Result<Tensor> {
    let (n, _) = h.dims2()?;
    let block = block.max(1);
    let ids = Tensor::from_slice(targets, (n, 1), h.device())?;
    let hd = h.detach();
    let (mut lps, mut lses) = (Vec::new(), Vec::new());
    for b0 in (0..n).step_by(block) {
        let m = block.min(n - b0);
        let logits = project(&hd.narrow(0, b0, m)?, w)?;
        let lse = log_sum_exp(&logits)?;
        lps.push(logits.gather(&ids.narrow(0, b0, m)?, 1)?.sub(&lse)?);
        lses.push(lse);
    }
    let out = Tensor::cat(&lps, 0)?.reshape(n)?;
    let lse = Tensor::cat(&lses, 0)?;
    let w = w.clone();
    let bwd = move |g: &Tensor| -> Result<Tensor> {
        let g = g.reshape((n, 1))?;
        let mut dh = Vec::new();
        for b0 in (0..n).step_by(block) {
            let m = block.min(n - b0);
            let gb = g.narrow(0, b0, m)?;
            let logits = project(&hd.narrow(0, b0, m)?, &w)?;
            // d lp / d logits = g · (onehot(target) − softmax)
            let p = logits.broadcast_sub(&lse.narrow(0, b0, m)?)?.exp()?;
            let dl = p
                .broadcast_mul(&gb.neg()?)?
                .scatter_add(&ids.narrow(0, b0, m)?, &gb, 1)?;
            dh.push(project_back(&dl, &w)?);
        }
        Tensor::cat(&dh, 0)
    };
    h.apply_op1_arc(Arc::new(Box::new(Attached1 {
        name: "lm-head-logprobs-portable",
        out,
        bwd: Box::new(bwd),
    })))
}

/// `max + log Σ exp(x − max)` over the last dimension, kept as `[.., 1]`.
fn log_sum_exp(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?;
    max.add(
        &x.broadcast_sub(&max)?
            .exp()?
            .sum_keepdim(D::Minus1)?
            .log()?,
    )
}

/// The keys a block of queries `q0..q0 + m` may see: `k0..q0 + m`.
fn key_start(q0: usize, window: Option<usize>) -> usize {
    window.map_or(0, |w| (q0 + 1).saturating_sub(w))
}

/// Additive mask `[m, n]` for queries `q0..q0 + m` against keys
/// `k0..k0 + n`, built on the device: 0 where `k <= q` (and `q − k < w`
/// with a window), −∞ elsewhere.
fn block_mask(
    q0: usize,
    m: usize,
    k0: usize,
    n: usize,
    window: Option<usize>,
    dev: &candle_core::Device,
) -> Result<Tensor> {
    let qi = Tensor::arange(q0 as f32, (q0 + m) as f32, dev)?.reshape((m, 1))?;
    let kj = Tensor::arange(k0 as f32, (k0 + n) as f32, dev)?.reshape((1, n))?;
    let ahead = qi.broadcast_sub(&kj)?;
    let mut visible = ahead.ge(0f64)?;
    if let Some(w) = window {
        visible = visible.mul(&ahead.lt(w as f64)?)?;
    }
    let zero = Tensor::zeros((m, n), DType::F32, dev)?;
    let hidden = Tensor::full(f32::NEG_INFINITY, (m, n), dev)?;
    visible.where_cond(&zero, &hidden)
}

/// `[t, kv_heads, d]` → `[heads, t, d]`, each key/value head repeated for
/// the `group` query heads that read it.
fn expand_kv(x: &Tensor, group: usize) -> Result<Tensor> {
    let (t, kv_heads, d) = x.dims3()?;
    x.transpose(0, 1)?
        .unsqueeze(1)?
        .expand((kv_heads, group, t, d))?
        .reshape((kv_heads * group, t, d))
}

/// `[heads, t, d]` → `[t, kv_heads, d]`, summing each group's heads: the
/// gradient of [`expand_kv`].
fn fold_kv(x: &Tensor, group: usize) -> Result<Tensor> {
    let (heads, t, d) = x.dims3()?;
    x.reshape((heads / group, group, t, d))?
        .sum(1)?
        .transpose(0, 1)?
        .contiguous()
}

/// Causal attention as [`crate::attention::attention`] computes it, for
/// `q [t, heads, d]`, `k, v [t, kv_heads, d]`: queries in blocks of
/// `block`, only the per-row log-sum-exp kept, the backward pass by the
/// flash-attention equations.
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    window: Option<usize>,
    scale: f64,
    block: usize,
) -> Result<Tensor> {
    let (t, heads, _) = q.dims3()?;
    let group = heads / k.dim(1)?;
    let block = block.max(1);
    let dev = q.device().clone();
    let qh = q.detach().transpose(0, 1)?.contiguous()?;
    let kh = expand_kv(&k.detach(), group)?;
    let vh = expand_kv(&v.detach(), group)?;
    let blocks: Vec<(usize, usize, usize)> = (0..t)
        .step_by(block)
        .map(|q0| (q0, block.min(t - q0), key_start(q0, window)))
        .collect();
    let scores = {
        let (qh, kh) = (qh.clone(), kh.clone());
        move |q0: usize, m: usize, k0: usize| -> Result<Tensor> {
            let n = q0 + m - k0;
            let s = (qh.narrow(1, q0, m)?.matmul(&kh.narrow(1, k0, n)?.t()?)? * scale)?;
            s.broadcast_add(&block_mask(q0, m, k0, n, window, &dev)?)
        }
    };
    let (mut outs, mut lses) = (Vec::new(), Vec::new());
    for &(q0, m, k0) in &blocks {
        let s = scores(q0, m, k0)?;
        let lse = log_sum_exp(&s)?;
        let p = s.broadcast_sub(&lse)?.exp()?;
        outs.push(p.matmul(&vh.narrow(1, k0, q0 + m - k0)?)?);
        lses.push(lse);
    }
    let out_h = Tensor::cat(&outs, 1)?;
    let lse = Tensor::cat(&lses, 1)?;
    let out = out_h.transpose(0, 1)?.contiguous()?;
    let bwd = move |g: &Tensor| -> Result<(Tensor, Tensor, Tensor)> {
        let go = g.transpose(0, 1)?.contiguous()?;
        // D_i = Σ_d dO_id · O_id
        let delta = go.mul(&out_h)?.sum_keepdim(D::Minus1)?;
        let mut dq = Vec::new();
        let mut dk = kh.zeros_like()?;
        let mut dv = vh.zeros_like()?;
        for &(q0, m, k0) in &blocks {
            let n = q0 + m - k0;
            let (qb, kb, vb) = (
                qh.narrow(1, q0, m)?,
                kh.narrow(1, k0, n)?,
                vh.narrow(1, k0, n)?,
            );
            let gb = go.narrow(1, q0, m)?;
            let p = scores(q0, m, k0)?
                .broadcast_sub(&lse.narrow(1, q0, m)?)?
                .exp()?;
            let dp = gb.matmul(&vb.t()?)?;
            let ds = p.mul(&dp.broadcast_sub(&delta.narrow(1, q0, m)?)?)?;
            let pad = |x: Tensor| x.pad_with_zeros(1, k0, t - k0 - n);
            dv = dv.add(&pad(p.t()?.matmul(&gb)?)?)?;
            dk = dk.add(&pad((ds.t()?.matmul(&qb)? * scale)?)?)?;
            dq.push((ds.matmul(&kb)? * scale)?);
        }
        let dq = Tensor::cat(&dq, 1)?.transpose(0, 1)?.contiguous()?;
        Ok((dq, fold_kv(&dk, group)?, fold_kv(&dv, group)?))
    };
    q.apply_op3_arc(
        k,
        v,
        Arc::new(Box::new(Attached3 {
            name: "causal-attention-portable",
            out,
            bwd: Box::new(bwd),
        })),
    )
}

#[cfg(test)]
mod tests {
    //! The portable ops called directly, on the CPU, against the CPU
    //! kernels: values and gradients.

    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use crate::frozen::FrozenMatmul;
    use candle_core::{Device, Var};

    fn grads_agree(ours: &Tensor, theirs: &Tensor, inputs: &[(&str, &Var)], tol: f32) {
        let up = Tensor::randn(0f32, 1.0, ours.shape(), ours.device()).unwrap();
        let (g1, g2) = (pull_back(ours, &up), pull_back(theirs, &up));
        for (name, x) in inputs {
            let a = g1
                .get(x)
                .unwrap_or_else(|| panic!("no portable gradient for {name}"));
            let b = g2.get(x).expect("kernel gradient");
            let d = max_abs_diff(a, b);
            assert!(d < tol, "d{name} differs by {d}");
        }
    }

    #[test]
    fn frozen_matmul_matches_the_kernel_and_keeps_the_weight_gradient_free() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (9, 6), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (2, 5, 6), &dev).unwrap();
        let ours = frozen_matmul(&x, &Weight::Dense(w.clone())).unwrap();
        let theirs = FrozenMatmul::new(&w).unwrap().forward(&x).unwrap();
        assert_eq!(ours.dims(), &[2, 5, 9]);
        assert!(max_abs_diff(&ours, &theirs) < 1e-5);
        grads_agree(&ours, &theirs, &[("x", &x)], 1e-4);
        let grads = ours.sum_all().unwrap().backward().unwrap();
        assert!(grads.get(&w).is_none());
        assert!(frozen_matmul(&x, &Weight::Dense(w.t().unwrap())).is_err());
    }

    #[test]
    fn bf16_weights_stay_within_bf16_rounding() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (16, 64), &dev).unwrap();
        let x = Var::randn(0f32, 1.0, (8, 64), &dev).unwrap();
        let exact = frozen_matmul(&x, &Weight::Dense(w.clone())).unwrap();
        let half = frozen_matmul(&x, &Weight::Dense(w.to_dtype(DType::BF16).unwrap())).unwrap();
        assert_eq!(half.dtype(), DType::F32);
        // Two bf16 roundings (8 significant bits) over 64 products of N(0,1).
        let d = max_abs_diff(&exact, &half);
        assert!(d > 0.0 && d < 0.5, "bf16 difference {d}");
        grads_agree(&half, &exact, &[("x", &x)], 0.5);
    }

    #[test]
    fn lm_head_matches_the_kernel() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (50, 12), &dev).unwrap();
        let h = Var::randn(0f32, 1.0, (11, 12), &dev).unwrap();
        let targets: Vec<u32> = (0..11).map(|i| (i * 7 % 50) as u32).collect();
        for block in [1, 4, 64] {
            let ours = target_logprobs(&h, &Weight::Dense(w.clone()), &targets, block).unwrap();
            let theirs = crate::lm_head::target_logprobs(&h, &w, &targets, 3).unwrap();
            assert!(max_abs_diff(&ours, &theirs) < 1e-4, "block {block}");
            grads_agree(&ours, &theirs, &[("h", &h)], 1e-4);
        }
    }

    #[test]
    fn attention_matches_the_kernel_with_groups_windows_and_blocks() {
        let dev = Device::Cpu;
        let (t, heads, kv_heads, d) = (23, 6, 2, 8);
        let scale = 1.0 / (d as f64).sqrt();
        for window in [None, Some(1), Some(5)] {
            for block in [1, 5, 64] {
                let q = Var::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
                let k = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                let v = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                let ours = attention(&q, &k, &v, window, scale, block).unwrap();
                let theirs = crate::attention::attention(&q, &k, &v, window, scale, false).unwrap();
                assert!(
                    max_abs_diff(&ours, &theirs) < 1e-5,
                    "forward, {window:?}/{block}"
                );
                grads_agree(&ours, &theirs, &[("q", &q), ("k", &k), ("v", &v)], 1e-4);
            }
        }
    }

    #[test]
    fn the_forward_copies_a_strided_value_in_order() {
        let dev = Device::Cpu;
        let x = Var::randn(0f32, 1.0, (3, 4), &dev).unwrap();
        let value = Tensor::arange(0f32, 12.0, &dev)
            .unwrap()
            .reshape((4, 3))
            .unwrap()
            .t()
            .unwrap();
        let y = x
            .apply_op1_arc(Arc::new(Box::new(Attached1 {
                name: "test",
                out: value.clone(),
                bwd: Box::new(|g: &Tensor| Ok(g.clone())),
            })))
            .unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap(), value.to_vec2::<f32>().unwrap());
        let g = y.sum_all().unwrap().backward().unwrap();
        assert_eq!(g.get(&x).unwrap().dims(), &[3, 4]);
    }
}
