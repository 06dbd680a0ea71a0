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

/// Runs `f` on the row-major values of `t`, an `f32` tensor on the CPU,
/// without copying them unless `t` is a strided view.
pub(crate) fn with_f32<R>(t: &Tensor, op: &str, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
    with_f32s([t], op, |[v]| f(v))
}

/// [`with_f32`] for several tensors at once (an op's backward pass reads
/// its inputs and the incoming gradient together).
pub(crate) fn with_f32s<const N: usize, R>(
    ts: [&Tensor; N],
    op: &str,
    f: impl FnOnce([&[f32]; N]) -> Result<R>,
) -> Result<R> {
    let mut owned = Vec::with_capacity(N);
    for t in ts {
        owned.push(if t.is_contiguous() {
            t.clone()
        } else {
            t.contiguous()?
        });
    }
    let held: Vec<_> = owned.iter().map(Tensor::storage_and_layout).collect();
    let mut values = Vec::with_capacity(N);
    for (storage, layout) in &held {
        match (&**storage, layout.contiguous_offsets()) {
            (Storage::Cpu(CpuStorage::F32(v)), Some((a, b))) => values.push(&v[a..b]),
            _ => candle_core::bail!("{op} expects contiguous f32 tensors on the CPU"),
        }
    }
    match values.try_into() {
        Ok(values) => f(values),
        Err(_) => candle_core::bail!("{op}: {N} tensors expected"),
    }
}

/// The gradients of a three-input op, each as a tensor shaped like its
/// input.
pub(crate) fn gradients_of(
    inputs: [&Tensor; 3],
    (d0, d1, d2): (Vec<f32>, Vec<f32>, Vec<f32>),
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let like = |d: Vec<f32>, t: &Tensor| Tensor::from_vec(d, t.shape(), t.device()).map(Some);
    Ok((
        like(d0, inputs[0])?,
        like(d1, inputs[1])?,
        like(d2, inputs[2])?,
    ))
}

/// A copy of the values of `t`, in row-major order.
pub(crate) fn f32_values(t: &Tensor) -> Result<Vec<f32>> {
    t.contiguous()?.flatten_all()?.to_vec1::<f32>()
}

/// `e^x` within 2 ulp for `x ≤ 88`, from arithmetic alone so that loops
/// over slices vectorize (libm's `expf` is one call per value): `2^k ·
/// e^r` with `|r| ≤ ln 2 / 2` and a degree-7 Taylor polynomial.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let k = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 5040.0 + r * (1.0 / 40320.0);
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = c + r * p;
    }
    p * f32::from_bits(((k as i32 + 127) as u32) << 23)
}

/// Lanes of the row loops below: independent partial results, so that the
/// compiler keeps them in vector registers.
const LANES: usize = 16;

/// The largest value of a row (−∞ for an empty row), in [`LANES`] lanes.
pub(crate) fn max(row: &[f32]) -> f32 {
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    let mut m = [f32::NEG_INFINITY; LANES];
    for c in chunks {
        for i in 0..LANES {
            m[i] = if c[i] > m[i] { c[i] } else { m[i] };
        }
    }
    tail.iter()
        .chain(&m)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
}

/// `x ← exp(x − shift)` over a row; returns the new sum. In [`LANES`]
/// lanes.
pub(crate) fn exp_in_place(row: &mut [f32], shift: f32) -> f32 {
    let mut chunks = row.chunks_exact_mut(LANES);
    let mut s = [0f32; LANES];
    for c in &mut chunks {
        for i in 0..LANES {
            c[i] = exp(c[i] - shift);
            s[i] += c[i];
        }
    }
    let tail: f32 = chunks
        .into_remainder()
        .iter_mut()
        .map(|x| {
            *x = exp(*x - shift);
            *x
        })
        .sum();
    s.iter().sum::<f32>() + tail
}

/// `max + ln Σ exp(x − max)` of a row, in [`LANES`] lanes.
pub(crate) fn log_sum_exp(row: &[f32]) -> f32 {
    let m = max(row);
    let chunks = row.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().map(|&x| exp(x - m)).sum();
    let mut s = [0f32; LANES];
    for c in chunks {
        for i in 0..LANES {
            s[i] += exp(c[i] - m);
        }
    }
    m + (s.iter().sum::<f32>() + tail).ln()
}

/// gemm on every thread of the pool (one call at a time).
pub(crate) fn parallelism() -> Parallelism {
    match rayon::current_num_threads() {
        0 | 1 => Parallelism::None,
        n => Parallelism::Rayon(n),
    }
}

/// How a row-major operand of a product is stored: as the matrix itself,
/// or as its transpose (`[k, m]` for a left operand `[m, k]`).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Stored {
    AsIs,
    Transposed,
}

/// A matrix in a slice: element `(i, j)` at `data[i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl View<'_> {
    /// Whether a `rows × cols` matrix at these strides lies in `data`.
    fn holds(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// `dst[m, n] = x[m, k] · w[k, n]` (with `add`, added to what `dst`
/// holds), each operand row-major as `Stored` says, on every thread.
pub(crate) fn gemm(
    dst: &mut [f32],
    (m, n, k): (usize, usize, usize),
    (x, xs): (&[f32], Stored),
    (w, ws): (&[f32], Stored),
    add: bool,
) {
    let view = |data, stored, rows: usize, cols: usize| match stored {
        Stored::AsIs => View {
            data,
            rs: cols,
            cs: 1,
        },
        Stored::Transposed => View {
            data,
            rs: 1,
            cs: rows,
        },
    };
    gemm_views(dst, n, (m, n, k), view(x, xs, m, k), view(w, ws, k, n), add);
}

/// `dst[m, n] (+)= x[m, k] · w[k, n]` for operands at any strides, `dst`'s
/// rows `ld` apart (a column range of a wider matrix when `ld > n`), on
/// every thread.
pub(crate) fn gemm_views(
    dst: &mut [f32],
    ld: usize,
    (m, n, k): (usize, usize, usize),
    x: View,
    w: View,
    add: bool,
) {
    let out = View {
        data: dst,
        rs: ld,
        cs: 1,
    };
    assert!(
        out.holds(m, n) && x.holds(m, k) && w.holds(k, n),
        "gemm operand sizes"
    );
    // SAFETY: the assert above bounds every index the strides reach.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            ld as isize,
            add,
            x.data.as_ptr(),
            x.cs as isize,
            x.rs as isize,
            w.data.as_ptr(),
            w.cs as isize,
            w.rs as isize,
            if add { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            parallelism(),
        )
    }
}

/// `dst[m, n] = x[m, k] · w[k, n]`, all row-major and contiguous.
pub(crate) fn matmul(dst: &mut [f32], x: &[f32], w: &[f32], m: usize, n: usize, k: usize) {
    gemm(dst, (m, n, k), (x, Stored::AsIs), (w, Stored::AsIs), false)
}

/// `dst[m, n] = x[m, k] · w[n, k]ᵀ`: a projection by a weight stored as
/// GGUF stores it.
pub(crate) fn matmul_by_transposed(
    dst: &mut [f32],
    x: &[f32],
    w: &[f32],
    m: usize,
    n: usize,
    k: usize,
) {
    gemm(
        dst,
        (m, n, k),
        (x, Stored::AsIs),
        (w, Stored::Transposed),
        false,
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_of_libm_and_log_sum_exp_agrees() {
        let mut worst = 0f32;
        for i in 0..=200_000 {
            let x = -87.0 + 175.0 * i as f32 / 200_000.0;
            let (ours, libm) = (exp(x), x.exp());
            worst = worst.max((ours - libm).abs() / libm);
        }
        assert!(worst < 2.5e-7, "relative error {worst}");
        assert_eq!(exp(f32::NEG_INFINITY), (-87f32).exp());
        assert!(exp(f32::NAN).is_nan());
        let row: Vec<f32> = (0..1001)
            .map(|i| ((i * 37) % 101) as f32 / 7.0 - 5.0)
            .collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let naive = max as f64
            + row
                .iter()
                .map(|&x| ((x - max) as f64).exp())
                .sum::<f64>()
                .ln();
        assert!((log_sum_exp(&row) as f64 - naive).abs() < 1e-5);
        assert_eq!(super::max(&row), max_ref(&row));
        assert_eq!(
            super::max(&row[..7]),
            max_ref(&row[..7]),
            "a row shorter than the lanes"
        );
        assert_eq!(super::max(&[]), f32::NEG_INFINITY);
        let mut e = row.clone();
        let sum = exp_in_place(&mut e, 2.0);
        for (x, y) in row.iter().zip(&e) {
            assert!((exp(x - 2.0) - y).abs() <= f32::EPSILON * y);
        }
        let plain: f32 = e.iter().sum();
        assert!((sum - plain).abs() < 1e-4 * plain, "{sum} vs {plain}");
    }

    fn max_ref(row: &[f32]) -> f32 {
        row.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    }
}
