//! What the hand-written CPU ops share: reading candle's storage as `f32`
//! slices and choosing gemm's threading.

use candle_core::{CpuStorage, Layout, Result, Storage, Tensor};
use gemm::Parallelism;

/// The contiguous `f32` values of an op's input.
pub(crate) fn f32_slice<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<&'a [f32]> {
    let data = match s {
        CpuStorage::F32(v) => v,
        _ => candle_core::bail!("{op} expects f32 tensors"),
    };
    let (a, b) = l
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg(format!("{op} inputs must be contiguous")))?;
    Ok(&data[a..b])
}

/// Runs `f` on the values of `t`, a contiguous `f32` tensor on the CPU,
/// without copying them.
pub(crate) fn with_f32<R>(t: &Tensor, op: &str, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    match (&*storage, layout.contiguous_offsets()) {
        (Storage::Cpu(CpuStorage::F32(v)), Some((a, b))) => f(&v[a..b]),
        _ => candle_core::bail!("{op} expects a contiguous f32 tensor on the CPU"),
    }
}

/// A copy of the values of `t`, in row-major order.
pub(crate) fn f32_values(t: &Tensor) -> Result<Vec<f32>> {
    t.contiguous()?.flatten_all()?.to_vec1::<f32>()
}

/// gemm on every thread of the pool (one call at a time).
pub(crate) fn parallelism() -> Parallelism {
    match rayon::current_num_threads() {
        0 | 1 => Parallelism::None,
        n => Parallelism::Rayon(n),
    }
}

/// `dst[m, n] = x[m, k] · w[n, k]ᵀ`, all row-major and contiguous, on every
/// thread: a projection by a weight stored as GGUF stores it.
pub(crate) fn matmul_by_transposed(
    dst: &mut [f32],
    x: &[f32],
    w: &[f32],
    m: usize,
    n: usize,
    k: usize,
) {
    assert!(dst.len() >= m * n && x.len() >= m * k && w.len() >= n * k);
    // SAFETY: the assert above bounds every index the strides reach.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            x.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            k as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism(),
        )
    }
}

/// Gradients of `Σ y · up`: the backward pass of `y` for the upstream
/// gradient `up`.
#[cfg(test)]
pub(crate) fn pull_back(y: &Tensor, up: &Tensor) -> candle_core::backprop::GradStore {
    (y * up)
        .and_then(|p| p.sum_all()?.backward())
        .expect("a differentiable graph")
}

/// The largest absolute difference between two tensors of one shape.
#[cfg(test)]
pub(crate) fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .and_then(|d| d.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>())
        .expect("tensors of one shape")
}
