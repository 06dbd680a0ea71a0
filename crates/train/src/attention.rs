//! Causal self-attention as one op with its own backward pass.
//!
//! Composed from candle ops, attention materializes `[heads, t, t]` scores,
//! a mask of the same size and the softmax's intermediates, several times
//! over in the backward pass: quadratic memory that rules out long
//! sequences, and single-threaded element-wise work that dominates a step.
//! Here each head runs on its own thread and visits a block of queries at a
//! time: scores for the block against the keys it may see (one `gemm`),
//! masking and softmax in place, then `P·V` (a second `gemm`). Only the
//! per-row log-sum-exp is kept for the backward pass, which recomputes the
//! block's probabilities from it (the flash-attention scheme), so memory
//! grows with `t`, not `t²`. Grouped-query heads read their shared key/value
//! head directly, and sliding-window layers skip keys outside the window.
//! Where the frozen products run in bf16, so do attention's ([`bf16`]). A
//! layer recomputed for its backward pass takes its attention output from
//! the first pass ([`Memo`]) instead of computing it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use crate::bf16_matmul;
use crate::cpu::{self, f32_slice, gradients_of, with_f32s};
use crate::portable;

mod bf16;

/// Queries per block: scores for one block against `t` keys take
/// `BLOCK · t` floats per thread.
const BLOCK: usize = 128;

/// Queries per block on the portable path: fewer, larger kernels.
const PORTABLE_BLOCK: usize = 512;

/// `softmax(scale · q kᵀ + causal mask) v` for `q [t, heads, d]` and
/// `k, v [t, kv_heads, d]`; query head `h` reads key/value head
/// `h / (heads / kv_heads)`. With `window = Some(w)`, query `i` sees keys
/// `i - w < j <= i`. Returns `[t, heads, d]`. With `in_bf16`, on a CPU
/// with AVX-512 BF16 and a head size that is a multiple of 32, the products
/// take bf16 operands (sums stay f32); elsewhere they stay f32.
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    window: Option<usize>,
    scale: f64,
    in_bf16: bool,
) -> Result<Tensor> {
    attention_remembered(q, k, v, (window, scale), in_bf16, None)
}

/// [`attention`], remembering its result in `memo` under `layer` on the
/// CPU: the first call with given inputs computes and keeps it, the next
/// call with the same inputs takes it back.
pub fn attention_remembered(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    (window, scale): (Option<usize>, f64),
    in_bf16: bool,
    memo: Option<(&Arc<Memo>, usize)>,
) -> Result<Tensor> {
    let block = if portable::wanted(q) {
        PORTABLE_BLOCK
    } else {
        BLOCK
    };
    let products = if in_bf16 {
        bf16::kernel(q.dim(2)?)
    } else {
        None
    };
    let memo = memo.map(|(m, layer)| (Arc::clone(m), layer));
    attention_in_blocks(q, k, v, (window, scale), block, products, memo)
}

fn attention_in_blocks(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    (window, scale): (Option<usize>, f64),
    block: usize,
    products: Option<bf16::Rows>,
    memo: Option<(Arc<Memo>, usize)>,
) -> Result<Tensor> {
    let (t, heads, d) = q.dims3()?;
    let (tk, kv_heads, dk) = k.dims3()?;
    if tk != t || dk != d || v.dims3()? != (t, kv_heads, d) || heads % kv_heads != 0 {
        candle_core::bail!(
            "attention: q {:?}, k {:?}, v {:?} do not fit together",
            q.dims(),
            k.dims(),
            v.dims()
        );
    }
    if portable::wanted(q) {
        return portable::attention(q, k, v, window, scale, block);
    }
    let op = Attention {
        dims: Dims {
            t,
            heads,
            kv_heads,
            d,
            window,
            scale: scale as f32,
            block: block.max(1),
        },
        bf16: products,
        memo,
        lse: Mutex::new(Vec::new()),
    };
    q.contiguous()?
        .apply_op3_arc(&k.contiguous()?, &v.contiguous()?, Arc::new(Box::new(op)))
}

#[derive(Clone, Copy)]
struct Dims {
    t: usize,
    heads: usize,
    kv_heads: usize,
    d: usize,
    window: Option<usize>,
    scale: f32,
    block: usize,
}

impl Dims {
    fn kv_head(&self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }

    /// Blocks of queries `[b0, b1)` with the keys `[lo, b1)` any of them sees.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.t).step_by(self.block).map(move |b0| {
            let b1 = (b0 + self.block).min(self.t);
            let lo = self.window.map_or(0, |w| (b0 + 1).saturating_sub(w));
            (b0, b1, lo)
        })
    }

    /// The keys query `i` sees, as a range `[a, b)` of a score row that
    /// starts at key `lo`.
    fn seen(&self, i: usize, lo: usize) -> (usize, usize) {
        let first = self.window.map_or(0, |w| (i + 1).saturating_sub(w));
        (first.max(lo) - lo, i + 1 - lo)
    }

    /// `dst[m, n] = beta · Q[b0..b0+m] · K[lo..lo+n]ᵀ` for head `h`.
    fn scores(&self, dst: &mut [f32], q: &[f32], k: &[f32], h: usize, rows: (usize, usize, usize)) {
        let (b0, m, lo) = rows;
        let n = (b0 + m) - lo;
        let g = self.kv_head(h);
        debug_assert!(dst.len() >= m * n);
        // SAFETY: every index the strides reach lies inside the slices:
        // query rows b0..b0+m of head h, key rows lo..b0+m of head g.
        unsafe {
            gemm(
                m,
                n,
                self.d,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                q.as_ptr().add((b0 * self.heads + h) * self.d),
                1,
                (self.heads * self.d) as isize,
                k.as_ptr().add((lo * self.kv_heads + g) * self.d),
                (self.kv_heads * self.d) as isize,
                1,
                0.0,
                self.scale,
                false,
                false,
                false,
                Parallelism::None,
            )
        }
    }
}

/// A score row turned into probabilities over the keys `[a, b)` it sees
/// (zero elsewhere); returns its log-sum-exp.
fn normalize(row: &mut [f32], (a, b): (usize, usize)) -> f32 {
    let max = cpu::max(&row[a..b]);
    let inv = 1.0 / cpu::exp_in_place(&mut row[a..b], max);
    row[a..b].iter_mut().for_each(|x| *x *= inv);
    row[..a].fill(0.0);
    row[b..].fill(0.0);
    max - inv.ln()
}

/// A score row's probabilities again, from the forward pass's log-sum-exp.
fn recompute(row: &mut [f32], (a, b): (usize, usize), lse: f32) {
    cpu::exp_in_place(&mut row[a..b], lse);
    row[..a].fill(0.0);
    row[b..].fill(0.0);
}

/// One head's output `[t, d]` and log-sum-exp `[t]`.
type Output = (Vec<f32>, Vec<f32>);

/// One head's `[dq, dk, dv]`, each `[t, d]`.
type Gradients = [Vec<f32>; 3];

/// `dst[m, d] (+)= beta · a[m, n] · x[rows, d]`, where `x` is key/value head
/// `g`'s rows `lo..lo+n` (or, with `transpose_a`, `a` is read as `[n, m]`
/// and `x` is head `h` of the query-shaped tensor at rows `lo..lo+n`).
#[allow(clippy::too_many_arguments)]
fn mul_rows(
    dims: &Dims,
    dst: &mut [f32],
    accumulate: bool,
    a: &[f32],
    (m, n): (usize, usize),
    transpose_a: bool,
    x: &[f32],
    x_offset: usize,
    x_row_stride: usize,
    beta: f32,
) {
    debug_assert!(dst.len() >= m * dims.d && a.len() >= m * n);
    let (a_cs, a_rs) = if transpose_a {
        (m as isize, 1)
    } else {
        (1, n as isize)
    };
    // SAFETY: `a` holds m·n floats, `dst` m·d, and `x` rows
    // x_offset.. x_offset + (n-1)·stride + d, all checked by the callers'
    // block bounds.
    unsafe {
        gemm(
            m,
            dims.d,
            n,
            dst.as_mut_ptr(),
            1,
            dims.d as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            x.as_ptr().add(x_offset),
            1,
            x_row_stride as isize,
            1.0,
            beta,
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// Forward pass: the output `[t, heads, d]` and each row's log-sum-exp
/// `[heads, t]`.
fn forward(
    dims: &Dims,
    products: Option<bf16::Rows>,
    (q, k, v): (&[f32], &[f32], &[f32]),
) -> (Vec<f32>, Vec<f32>) {
    let per_head = match products {
        Some(rows) => bf16::forward(rows, dims, q, k, v),
        None => forward_f32(dims, q, k, v),
    };
    let Dims { t, heads, d, .. } = *dims;
    let mut out = vec![0f32; t * heads * d];
    let mut lse = Vec::with_capacity(heads * t);
    for (h, (o, l)) in per_head.into_iter().enumerate() {
        for i in 0..t {
            out[(i * heads + h) * d..][..d].copy_from_slice(&o[i * d..][..d]);
        }
        lse.extend(l);
    }
    (out, lse)
}

fn forward_f32(dims: &Dims, q: &[f32], k: &[f32], v: &[f32]) -> Vec<Output> {
    let Dims { t, heads, d, .. } = *dims;
    (0..heads)
        .into_par_iter()
        .map(|h| {
            let g = dims.kv_head(h);
            let mut out = vec![0f32; t * d];
            let mut lse = vec![0f32; t];
            let mut s = vec![0f32; dims.block.min(t) * t];
            for (b0, b1, lo) in dims.blocks() {
                let (m, n) = (b1 - b0, b1 - lo);
                dims.scores(&mut s, q, k, h, (b0, m, lo));
                for r in 0..m {
                    let i = b0 + r;
                    lse[i] = normalize(&mut s[r * n..(r + 1) * n], dims.seen(i, lo));
                }
                let kv_stride = dims.kv_heads * d;
                mul_rows(
                    dims,
                    &mut out[b0 * d..b1 * d],
                    false,
                    &s,
                    (m, n),
                    false,
                    v,
                    (lo * dims.kv_heads + g) * d,
                    kv_stride,
                    1.0,
                );
            }
            (out, lse)
        })
        .collect()
}

/// Gradients `(dq, dk, dv)` from the inputs, the output `o`, its gradient
/// `dout` and the forward pass's log-sum-exp.
fn backward(
    dims: &Dims,
    products: Option<bf16::Rows>,
    qkv: (&[f32], &[f32], &[f32]),
    o: &[f32],
    dout: &[f32],
    lse: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let Dims {
        t,
        heads,
        kv_heads,
        d,
        ..
    } = *dims;
    // D_i = dO_i · O_i, the softmax backward's row term, per head.
    let delta: Vec<Vec<f32>> = (0..heads)
        .into_par_iter()
        .map(|h| {
            (0..t)
                .map(|i| {
                    let at = (i * heads + h) * d;
                    (0..d).map(|c| dout[at + c] * o[at + c]).sum()
                })
                .collect()
        })
        .collect();
    let per_head = match products {
        Some(rows) => bf16::backward(rows, dims, qkv, dout, lse, &delta),
        None => backward_f32(dims, qkv, dout, lse, &delta),
    };
    let mut dq = vec![0f32; t * heads * d];
    let mut dk = vec![0f32; t * kv_heads * d];
    let mut dv = vec![0f32; t * kv_heads * d];
    for (h, [gq, gk, gv]) in per_head.into_iter().enumerate() {
        let g = dims.kv_head(h);
        for i in 0..t {
            dq[(i * heads + h) * d..][..d].copy_from_slice(&gq[i * d..][..d]);
            let at = (i * kv_heads + g) * d;
            for c in 0..d {
                dk[at + c] += gk[i * d + c];
                dv[at + c] += gv[i * d + c];
            }
        }
    }
    (dq, dk, dv)
}

fn backward_f32(
    dims: &Dims,
    (q, k, v): (&[f32], &[f32], &[f32]),
    dout: &[f32],
    lse: &[f32],
    delta: &[Vec<f32>],
) -> Vec<Gradients> {
    let Dims {
        t,
        heads,
        kv_heads,
        d,
        ..
    } = *dims;
    let q_stride = heads * d;
    let kv_stride = kv_heads * d;
    (0..heads)
        .into_par_iter()
        .map(|h| {
            let g = dims.kv_head(h);
            let (mut dq, mut dk, mut dv) =
                (vec![0f32; t * d], vec![0f32; t * d], vec![0f32; t * d]);
            let cap = dims.block.min(t) * t;
            let (mut p, mut dp) = (vec![0f32; cap], vec![0f32; cap]);
            let delta = &delta[h];
            for (b0, b1, lo) in dims.blocks() {
                let (m, n) = (b1 - b0, b1 - lo);
                dims.scores(&mut p, q, k, h, (b0, m, lo));
                for r in 0..m {
                    let i = b0 + r;
                    recompute(&mut p[r * n..(r + 1) * n], dims.seen(i, lo), lse[h * t + i]);
                }
                // dP = dO · Vᵀ: the scores routine with dO as queries, V as keys.
                let unscaled = Dims {
                    scale: 1.0,
                    ..*dims
                };
                unscaled.scores(&mut dp, dout, v, h, (b0, m, lo));
                // dV[lo..b1] += Pᵀ · dO[b0..b1]
                mul_rows(
                    dims,
                    &mut dv[lo * d..b1 * d],
                    true,
                    &p,
                    (n, m),
                    true,
                    dout,
                    (b0 * heads + h) * d,
                    q_stride,
                    1.0,
                );
                // dS = P ∘ (dP − D), in place of P.
                for r in 0..m {
                    let di = delta[b0 + r];
                    let (pr, dpr) = (&mut p[r * n..(r + 1) * n], &dp[r * n..(r + 1) * n]);
                    for (x, y) in pr.iter_mut().zip(dpr) {
                        *x *= y - di;
                    }
                }
                // dQ[b0..b1] = scale · dS · K[lo..b1]
                mul_rows(
                    dims,
                    &mut dq[b0 * d..b1 * d],
                    false,
                    &p,
                    (m, n),
                    false,
                    k,
                    (lo * kv_heads + g) * d,
                    kv_stride,
                    dims.scale,
                );
                // dK[lo..b1] += scale · dSᵀ · Q[b0..b1]
                mul_rows(
                    dims,
                    &mut dk[lo * d..b1 * d],
                    true,
                    &p,
                    (n, m),
                    true,
                    q,
                    (b0 * heads + h) * d,
                    q_stride,
                    dims.scale,
                );
            }
            [dq, dk, dv]
        })
        .collect()
}

/// Attention results kept from a forward pass for the pass that recomputes
/// it: a layer recomputed for its backward pass
/// ([`crate::TrainConfig::recompute`]) takes its output and log-sum-exp
/// from here, which saves half of attention's forward work. Each result is
/// keyed by its layer and a fingerprint of its inputs, so different inputs
/// are computed, never served stale; a result is given back once. With
/// `bf16`, outputs are kept in bf16 (like the feed-forward block's saved
/// projections): the recomputed layer's backward pass then reads the
/// rounded output. Results that would take the memo past its budget are
/// not kept, and are computed again instead.
pub struct Memo {
    bf16: bool,
    budget: usize,
    kept: Mutex<HashMap<usize, Kept>>,
}

struct Kept {
    inputs: u64,
    out: bf16_matmul::Kept,
    lse: Vec<f32>,
}

impl Kept {
    fn bytes(&self) -> usize {
        self.out.bytes() + self.lse.len() * 4
    }
}

impl Memo {
    /// A memo that holds at most `budget` bytes.
    pub fn new(bf16: bool, budget: usize) -> Arc<Memo> {
        Arc::new(Memo {
            bf16,
            budget,
            kept: Mutex::new(HashMap::new()),
        })
    }

    /// Bytes the kept results hold.
    pub fn bytes(&self) -> usize {
        let kept = self.kept.lock().expect("attention memo lock");
        kept.values().map(Kept::bytes).sum()
    }

    fn keep(&self, layer: usize, inputs: u64, out: &[f32], lse: &[f32]) {
        let mut kept = self.kept.lock().expect("attention memo lock");
        // A result this layer kept before is stale: other inputs came.
        kept.remove(&layer);
        let width = if self.bf16 { 2 } else { 4 };
        let held: usize = kept.values().map(Kept::bytes).sum();
        if held + out.len() * width + lse.len() * 4 > self.budget {
            return;
        }
        let out = bf16_matmul::Kept::new(out.to_vec(), self.bf16);
        let lse = lse.to_vec();
        kept.insert(layer, Kept { inputs, out, lse });
    }

    fn take(&self, layer: usize, inputs: u64) -> Option<(Vec<f32>, Vec<f32>)> {
        let mut kept = self.kept.lock().expect("attention memo lock");
        if kept.get(&layer)?.inputs != inputs {
            return None;
        }
        let Kept { out, lse, .. } = kept.remove(&layer)?;
        Some((out.into_f32(), lse))
    }
}

/// A hash of the inputs' bits and lengths, in 32-bit lanes that
/// vectorize: equal inputs give equal fingerprints, and a changed value
/// almost surely changes it (each lane chains its values in order).
fn fingerprint(xs: [&[f32]; 3]) -> u64 {
    const LANES: usize = 16;
    let mut h = [0u32; LANES];
    for x in xs {
        let chunks = x.chunks_exact(LANES);
        let tail = chunks.remainder();
        for c in chunks {
            for l in 0..LANES {
                h[l] = (h[l].rotate_left(5) ^ c[l].to_bits()).wrapping_mul(0x9E37_79B1);
            }
        }
        for (l, v) in tail.iter().enumerate() {
            h[l] = (h[l].rotate_left(5) ^ v.to_bits()).wrapping_mul(0x85EB_CA77);
        }
        h[0] ^= x.len() as u32;
    }
    h.iter().fold(0u64, |a, &b| {
        (a.rotate_left(23) ^ b as u64).wrapping_mul(0xFF51_AFD7_ED55_8CCD)
    })
}

struct Attention {
    dims: Dims,
    /// The kernel of bf16 products ([`bf16`]), if they are wanted and the
    /// CPU has one; f32 otherwise.
    bf16: Option<bf16::Rows>,
    /// Where the result is remembered, and under which layer.
    memo: Option<(Arc<Memo>, usize)>,
    /// The forward pass's per-row log-sum-exp, for the backward pass.
    lse: Mutex<Vec<f32>>,
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "causal-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("attention.fwd");
        let op = self.name();
        let (q, k, v) = (
            f32_slice(s1, l1, op)?,
            f32_slice(s2, l2, op)?,
            f32_slice(s3, l3, op)?,
        );
        let key = self
            .memo
            .as_ref()
            .map(|(memo, layer)| (memo, *layer, fingerprint([q, k, v])));
        if let Some((memo, layer, inputs)) = key {
            if let Some((out, lse)) = memo.take(layer, inputs) {
                *self.lse.lock().expect("attention lse lock") = lse;
                return Ok((CpuStorage::F32(out), l1.shape().clone()));
            }
        }
        let (out, lse) = forward(&self.dims, self.bf16, (q, k, v));
        if let Some((memo, layer, inputs)) = key {
            memo.keep(layer, inputs, &out, &lse);
        }
        *self.lse.lock().expect("attention lse lock") = lse;
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _t = crate::timing::span("attention.bwd");
        // Read in place: the gradients come contiguous from the ops after
        // this one, and a copy of each would cost as much as reading it.
        let lse = self.lse.lock().expect("attention lse lock").clone();
        let (dq, dk, dv) = with_f32s(
            [q, k, v, res, grad_res],
            self.name(),
            |[qv, kv, vv, res, grad_res]| {
                let qkv = (qv, kv, vv);
                let lse = if lse.len() == self.dims.heads * self.dims.t {
                    lse
                } else {
                    forward(&self.dims, self.bf16, qkv).1
                };
                Ok(backward(&self.dims, self.bf16, qkv, res, grad_res, &lse))
            },
        )?;
        gradients_of([q, k, v], (dq, dk, dv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use crate::ops;
    use candle_core::{Device, Var};

    /// The composed reference: expanded kv heads, a full mask, softmax.
    fn reference(q: &Tensor, k: &Tensor, v: &Tensor, window: Option<usize>) -> Tensor {
        let (t, heads, d) = q.dims3().unwrap();
        let kv_heads = k.dim(1).unwrap();
        let group = heads / kv_heads;
        let rep = |x: &Tensor| {
            x.transpose(0, 1)
                .unwrap()
                .unsqueeze(1)
                .unwrap()
                .expand((kv_heads, group, t, d))
                .unwrap()
                .reshape((heads, t, d))
                .unwrap()
        };
        let qh = q.transpose(0, 1).unwrap().contiguous().unwrap();
        let scores = (qh.matmul(&rep(k).t().unwrap()).unwrap() / (d as f64).sqrt()).unwrap();
        let mask = ops::causal_mask(t, window, q.device()).unwrap();
        let p = ops::softmax(&scores.broadcast_add(&mask).unwrap()).unwrap();
        p.matmul(&rep(v).contiguous().unwrap())
            .unwrap()
            .transpose(0, 1)
            .unwrap()
    }

    #[test]
    fn matches_composed_attention_and_its_gradients() {
        let dev = Device::Cpu;
        let (t, heads, kv_heads, d) = (37, 6, 2, 8);
        for window in [None, Some(5)] {
            for block in [4, 16, 128] {
                let q = Var::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
                let k = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                let v = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                let up = Tensor::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
                let scale = 1.0 / (d as f64).sqrt();
                let ours =
                    attention_in_blocks(&q, &k, &v, (window, scale), block, None, None).unwrap();
                let theirs = reference(&q, &k, &v, window);
                assert!(
                    max_abs_diff(&ours, &theirs) < 1e-5,
                    "forward, {window:?}/{block}"
                );
                let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
                for (name, x) in [("q", &q), ("k", &k), ("v", &v)] {
                    let a = g1.get(x).expect("gradient from the op");
                    let b = g2.get(x).expect("gradient from the reference");
                    let diff = max_abs_diff(a, b);
                    assert!(diff < 1e-4, "d{name} differs by {diff}, {window:?}/{block}");
                }
            }
        }
    }

    /// The largest difference relative to the largest value of `b`.
    fn relative_diff(a: &Tensor, b: &Tensor) -> f32 {
        let scale = b
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        max_abs_diff(a, b) / scale.max(1e-6)
    }

    /// Every bf16 kernel: the scalar reference (which checks the pass's
    /// layouts and blocks on any CPU) and the CPU's own, where it has one.
    fn bf16_kernels() -> Vec<(&'static str, bf16::Rows)> {
        let mut kernels = vec![("reference", crate::dpbf16::rows_reference as bf16::Rows)];
        match bf16::kernel(64) {
            Some(rows) => kernels.push(("avx512-bf16", rows)),
            None => eprintln!("no AVX-512 BF16 here: only the reference kernel runs"),
        }
        kernels
    }

    #[test]
    fn bf16_products_agree_with_f32_within_bf16_rounding() {
        let dev = Device::Cpu;
        // Several blocks, a ragged last one, a window that starts keys
        // mid-block, and grouped-query heads.
        let (t, heads, kv_heads, d) = (301, 4, 2, 64);
        for (kernel, rows) in bf16_kernels() {
            for window in [None, Some(45)] {
                for block in [32, 128] {
                    let q = Var::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
                    let k = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                    let v = Var::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap();
                    let up = Tensor::randn(0f32, 1.0, (t, heads, d), &dev).unwrap();
                    let scale = 1.0 / (d as f64).sqrt();
                    let run = |products| {
                        attention_in_blocks(&q, &k, &v, (window, scale), block, products, None)
                            .unwrap()
                    };
                    let (ours, theirs) = (run(Some(rows)), run(None));
                    let at = format!("{kernel}, window {window:?}, block {block}");
                    let diff = relative_diff(&ours, &theirs);
                    assert!(diff < 1e-2, "forward differs by {diff} ({at})");
                    let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
                    for (name, x) in [("q", &q), ("k", &k), ("v", &v)] {
                        let (a, b) = (g1.get(x).unwrap(), g2.get(x).unwrap());
                        let diff = relative_diff(a, b);
                        assert!(diff < 2e-2, "d{name} differs by {diff} ({at})");
                    }
                }
            }
        }
    }

    #[test]
    fn a_remembered_result_is_given_back_once_and_only_for_the_same_inputs() {
        let dev = Device::Cpu;
        let (t, heads, kv_heads, d) = (40, 4, 2, 32);
        let x = |s: f32| {
            let (q, k, v) = (
                Tensor::randn(0f32, 1.0, (t, heads, d), &dev).unwrap(),
                Tensor::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap(),
                Tensor::randn(0f32, 1.0, (t, kv_heads, d), &dev).unwrap(),
            );
            ((q * s as f64).unwrap(), k, v)
        };
        let spec = (Some(9), 0.2);
        for bf16 in [false, true] {
            let memo = Memo::new(bf16, usize::MAX);
            let run = |(q, k, v): &(Tensor, Tensor, Tensor), layer| {
                attention_remembered(q, k, v, spec, false, Some((&memo, layer))).unwrap()
            };
            let fresh = |(q, k, v): &(Tensor, Tensor, Tensor)| {
                attention_remembered(q, k, v, spec, false, None).unwrap()
            };
            let (a, b) = (x(1.0), x(2.0));
            let first = run(&a, 0);
            assert!(
                memo.bytes() >= t * heads * d * 2,
                "the first call keeps its result"
            );
            // Other inputs under the same layer are computed, not served.
            assert_eq!(max_abs_diff(&run(&b, 0), &fresh(&b)), 0.0);
            let again = run(&b, 0);
            assert_eq!(memo.bytes(), 0, "a kept result is given back once");
            let gap = max_abs_diff(&again, &first);
            assert!(gap > 0.0, "b's result is not a's");
            let gap = relative_diff(&again, &fresh(&b));
            let bound = if bf16 { 4e-3 } else { 0.0 };
            assert!(gap <= bound, "kept in bf16 {bf16}: differs by {gap}");
        }
        // A result larger than the budget is computed again, not kept.
        let small = Memo::new(true, t * heads * d);
        let a = x(1.0);
        let first = attention_remembered(&a.0, &a.1, &a.2, spec, false, Some((&small, 0))).unwrap();
        assert_eq!(small.bytes(), 0, "over the budget: nothing kept");
        let again = attention_remembered(&a.0, &a.1, &a.2, spec, false, Some((&small, 0))).unwrap();
        assert_eq!(max_abs_diff(&first, &again), 0.0);
    }

    #[test]
    fn mismatched_shapes_are_refused() {
        let dev = Device::Cpu;
        let q = Tensor::zeros((4, 3, 8), candle_core::DType::F32, &dev).unwrap();
        let k = Tensor::zeros((4, 2, 8), candle_core::DType::F32, &dev).unwrap();
        let err = attention(&q, &k, &k, None, 1.0, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("do not fit"), "{err}");
    }
}
