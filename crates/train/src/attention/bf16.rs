//! Attention's products in bf16 with f32 sums, on CPUs with AVX-512 BF16
//! (which those with AMX also have): the blocks, masking and softmax of the
//! f32 pass, with each head's queries, keys, values and output gradient
//! rounded and laid out once per call, and each block's probabilities and
//! score gradients once per block.
//!
//! With a head size of 64, a generic tiled product spends more on packing
//! than it saves (two `k` steps per 32 × 32 tile). Here every product runs
//! on [`dpbf16::rows`], whose sums stay in registers across the whole
//! inner dimension, and each operand is laid out for the product that
//! reads it: `q kᵀ` and `dO vᵀ` read keys and values as columns, `p v` and
//! `dS k` as rows, and the key and value gradients are computed transposed
//! (`dvᵀ = dOᵀ p`, `dkᵀ = qᵀ dS`) so that the probabilities are the right
//! operand, packed as they come, row pair by row pair.

use rayon::prelude::*;

use super::{Dims, Gradients, Output};
use crate::bf16_matmul::{bf16, plain_into, round_into, Packed};
use crate::dpbf16;

/// `k` pairs per pass over a right operand: two groups' share
/// (2 × 256 × 64 bytes) stays in L1 while every row pass reads it.
const K_PAIRS: usize = 256;

/// Query blocks, key ranges and head sizes align to the kernel's 32
/// columns (a multiple of its 8 rows).
const ALIGN: usize = 32;

/// A kernel computing `C [8, 32] (+)= A · B` as [`dpbf16::rows`] does.
pub(super) type Rows =
    unsafe fn(*const u16, usize, (*const u16, *const u16, usize), *mut f32, usize, bool);

/// The kernel this pass runs for heads of size `d`, where the CPU has one.
pub(super) fn kernel(d: usize) -> Option<Rows> {
    (dpbf16::available() && d.is_multiple_of(ALIGN)).then_some(dpbf16::rows as Rows)
}

/// A packed right operand, from a column group and a `k` pair on.
#[derive(Clone, Copy)]
struct Right<'a> {
    data: &'a [u16],
    group_len: usize,
    first_group: usize,
    first_pair: usize,
}

impl<'a> Right<'a> {
    fn of(p: &'a Packed, first_group: usize, first_pair: usize) -> Right<'a> {
        Right {
            data: p.data(),
            group_len: p.group_len(),
            first_group,
            first_pair,
        }
    }

    /// Key-pair-major blocks packed by [`plain_into`] for `k` rows.
    fn block(data: &'a [u16], k: usize) -> Right<'a> {
        Right {
            data,
            group_len: k * 16,
            first_group: 0,
            first_pair: 0,
        }
    }
}

/// `c [m, n] (+)= a [m, 2·pairs] · b`, with `a`'s rows `lda` apart and
/// `c`'s `ldc` apart; `m` a multiple of 8 and `n` of 32.
#[allow(clippy::too_many_arguments)]
fn mul(
    rows: Rows,
    a: &[u16],
    lda: usize,
    m: usize,
    b: Right,
    pairs: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
    add: bool,
) {
    assert!(m.is_multiple_of(dpbf16::ROWS) && n.is_multiple_of(ALIGN) && m > 0 && n > 0);
    assert!(a.len() >= (m - 1) * lda + 2 * pairs, "left operand size");
    assert!(c.len() >= (m - 1) * ldc + n, "product size");
    let last_group = b.first_group + n / 16 - 1;
    assert!(
        b.data.len() >= last_group * b.group_len + (b.first_pair + pairs) * 32,
        "right operand size"
    );
    for p0 in (0..pairs).step_by(K_PAIRS) {
        let len = K_PAIRS.min(pairs - p0);
        for c0 in (0..n).step_by(ALIGN) {
            let g = b.first_group + c0 / 16;
            let at = |g: usize| b.data[g * b.group_len + (b.first_pair + p0) * 32..].as_ptr();
            for r0 in (0..m).step_by(dpbf16::ROWS) {
                // SAFETY: the kernel runs on this CPU (`kernel`), and the
                // asserts above bound every row, pair and column read or
                // written.
                unsafe {
                    rows(
                        a[r0 * lda + 2 * p0..].as_ptr(),
                        lda,
                        (at(g), at(g + 1), len),
                        c[r0 * ldc + c0..].as_mut_ptr(),
                        ldc,
                        add || p0 > 0,
                    )
                }
            }
        }
    }
}

/// Head `h`'s rows `[t, d]` of `x [t, n_heads, d]`, times `scale`.
fn head(x: &[f32], dims: &Dims, n_heads: usize, h: usize, scale: f32) -> Vec<f32> {
    let d = dims.d;
    let mut out = Vec::with_capacity(dims.t * d);
    for i in 0..dims.t {
        out.extend(x[(i * n_heads + h) * d..][..d].iter().map(|v| v * scale));
    }
    out
}

/// Rows `[t, d]` rounded, with zero rows up to `tp`.
fn rows16(x: &[f32], tp: usize, d: usize) -> Vec<u16> {
    let mut out = vec![0u16; tp * d];
    round_into(&mut out[..x.len()], x);
    out
}

/// Rows `[t, d]` rounded and transposed to `[d, tp]`, zero past `t`.
fn cols16(x: &[f32], t: usize, tp: usize, d: usize) -> Vec<u16> {
    let mut out = vec![0u16; d * tp];
    for (i, row) in x.chunks_exact(d).take(t).enumerate() {
        for (c, v) in row.iter().enumerate() {
            out[c * tp + i] = bf16(*v);
        }
    }
    out
}

/// The block geometry and kernel: queries in blocks of `mb` (a multiple of
/// 32), all padded to `tp`; keys to `t32`.
struct Grid {
    rows: Rows,
    dims: Dims,
    mb: usize,
    tp: usize,
    t32: usize,
}

/// Where one block reads: queries from `b0`, keys from `lo` (aligned),
/// `np` key columns.
#[derive(Clone, Copy)]
struct At {
    b0: usize,
    lo: usize,
    np: usize,
}

impl Grid {
    fn new(rows: Rows, dims: &Dims) -> Grid {
        let mb = dims.block.next_multiple_of(ALIGN);
        Grid {
            rows,
            dims: Dims { block: mb, ..*dims },
            mb,
            tp: dims.t.next_multiple_of(mb),
            t32: dims.t.next_multiple_of(ALIGN),
        }
    }

    /// Query blocks `[b0, b1)` and where each reads.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize, At)> + '_ {
        self.dims.blocks().map(|(b0, b1, lo)| {
            let lo = lo / ALIGN * ALIGN;
            let np = (b1 - lo).next_multiple_of(ALIGN);
            (b0, b1, At { b0, lo, np })
        })
    }

    /// Each key/value head of `x [t, kv_heads, d]` packed as the right
    /// operand of `· xᵀ` (keys as columns) with `columns`, else of `· x`
    /// (keys as rows).
    fn packed(&self, x: &[f32], columns: bool) -> Vec<Packed> {
        let Dims { t, kv_heads, d, .. } = self.dims;
        (0..kv_heads)
            .into_par_iter()
            .map(|g| {
                let xg = head(x, &self.dims, kv_heads, g, 1.0);
                if columns {
                    Packed::transposed(&xg, t, d)
                } else {
                    Packed::plain(&xg, t, d)
                }
            })
            .collect()
    }

    /// `s [mb, np] = a[b0..] · xᵀ[.., lo..]`: the block's rows of `a`
    /// (`[tp, d]`) against the keys packed as columns.
    fn scores(&self, a: &[u16], x: &Packed, at: At, s: &mut [f32]) {
        let (d, right) = (self.dims.d, Right::of(x, at.lo / 16, 0));
        let a = &a[at.b0 * d..];
        mul(
            self.rows,
            a,
            d,
            self.mb,
            right,
            d / 2,
            at.np,
            s,
            at.np,
            false,
        );
    }

    /// `out [mb, d] = p [mb, np] · x[lo..]`: rounded probabilities (or
    /// score gradients) times the keys or values packed as rows.
    fn mix(&self, p16: &[u16], x: &Packed, at: At, out: &mut [f32]) {
        let (d, right) = (self.dims.d, Right::of(x, 0, at.lo / 2));
        let out = &mut out[at.b0 * d..];
        mul(
            self.rows,
            p16,
            at.np,
            self.mb,
            right,
            at.np / 2,
            d,
            out,
            d,
            false,
        );
    }

    /// `outᵀ[:, lo..] += aᵀ[:, b0..] · p`: the transposed left operand
    /// `aᵀ [d, tp]` times the block's `p [mb, np]`, packed into `packed`,
    /// added to a transposed gradient `[d, t32]`.
    fn gather(&self, at_t: &[u16], p: &[f32], packed: &mut [u16], at: At, out: &mut [f32]) {
        let (mb, d) = (self.mb, self.dims.d);
        plain_into(packed, p, mb, at.np);
        let (a, right) = (&at_t[at.b0..], Right::block(packed, mb));
        let out = &mut out[at.lo..];
        mul(
            self.rows,
            a,
            self.tp,
            d,
            right,
            mb / 2,
            at.np,
            out,
            self.t32,
            true,
        );
    }
}

/// Forward pass: as [`super::forward`].
pub(super) fn forward(rows: Rows, dims: &Dims, q: &[f32], k: &[f32], v: &[f32]) -> Vec<Output> {
    let grid = Grid::new(rows, dims);
    let Grid { mb, tp, t32, .. } = grid;
    let Dims { t, heads, d, .. } = *dims;
    let (keys, values) = (grid.packed(k, true), grid.packed(v, false));
    (0..heads)
        .into_par_iter()
        .map(|h| {
            let g = dims.kv_head(h);
            // The scale goes into the queries before rounding, so that the
            // scores come out scaled, as in the f32 pass.
            let qr = rows16(&head(q, dims, heads, h, dims.scale), tp, d);
            let mut out = vec![0f32; tp * d];
            let mut lse = vec![0f32; t];
            let mut s = vec![0f32; mb * t32];
            let mut p16 = vec![0u16; mb * t32];
            for (b0, b1, at) in grid.blocks() {
                let s = &mut s[..mb * at.np];
                grid.scores(&qr, &keys[g], at, s);
                for (r, row) in s.chunks_exact_mut(at.np).take(b1 - b0).enumerate() {
                    let i = b0 + r;
                    lse[i] = super::normalize(row, grid.dims.seen(i, at.lo));
                }
                s[(b1 - b0) * at.np..].fill(0.0);
                round_into(&mut p16[..mb * at.np], s);
                grid.mix(&p16, &values[g], at, &mut out);
            }
            out.truncate(t * d);
            (out, lse)
        })
        .collect()
}

/// Backward pass: as [`super::backward`], with each head's `dO` in `dout`
/// and the row terms `D_i = dO_i · O_i` computed by the caller.
pub(super) fn backward(
    rows: Rows,
    dims: &Dims,
    (q, k, v): (&[f32], &[f32], &[f32]),
    dout: &[f32],
    lse: &[f32],
    delta: &[Vec<f32>],
) -> Vec<Gradients> {
    let grid = Grid::new(rows, dims);
    let Grid { mb, tp, t32, .. } = grid;
    let Dims { t, heads, d, .. } = *dims;
    let (keys, keys_as_rows) = (grid.packed(k, true), grid.packed(k, false));
    let values = grid.packed(v, true);
    (0..heads)
        .into_par_iter()
        .map(|h| {
            let g = dims.kv_head(h);
            let qr = rows16(&head(q, dims, heads, h, dims.scale), tp, d);
            let qt = cols16(&head(q, dims, heads, h, 1.0), t, tp, d);
            let doh = head(dout, dims, heads, h, 1.0);
            let (dor, dot) = (rows16(&doh, tp, d), cols16(&doh, t, tp, d));
            let delta = &delta[h];
            let mut dq = vec![0f32; tp * d];
            let (mut dkt, mut dvt) = (vec![0f32; d * t32], vec![0f32; d * t32]);
            let (mut p, mut dp) = (vec![0f32; mb * t32], vec![0f32; mb * t32]);
            let (mut p16, mut packed) = (vec![0u16; mb * t32], vec![0u16; mb * t32]);
            for (b0, b1, at) in grid.blocks() {
                let (m, np) = (b1 - b0, at.np);
                let (p, dp) = (&mut p[..mb * np], &mut dp[..mb * np]);
                grid.scores(&qr, &keys[g], at, p);
                for (r, row) in p.chunks_exact_mut(np).take(m).enumerate() {
                    let i = b0 + r;
                    super::recompute(row, grid.dims.seen(i, at.lo), lse[h * t + i]);
                }
                p[m * np..].fill(0.0);
                // dP = dO · vᵀ, and dvᵀ += dOᵀ · p.
                grid.scores(&dor, &values[g], at, dp);
                grid.gather(&dot, p, &mut packed, at, &mut dvt);
                // dS = scale · p ∘ (dP − D), in place of p.
                for r in 0..m {
                    let di = delta[b0 + r];
                    let (pr, dpr) = (&mut p[r * np..(r + 1) * np], &dp[r * np..(r + 1) * np]);
                    for (x, y) in pr.iter_mut().zip(dpr) {
                        *x *= (y - di) * dims.scale;
                    }
                }
                // dq = dS · k, and dkᵀ += qᵀ · dS.
                round_into(&mut p16[..mb * np], p);
                grid.mix(&p16, &keys_as_rows[g], at, &mut dq);
                grid.gather(&qt, p, &mut packed, at, &mut dkt);
            }
            dq.truncate(t * d);
            let untransposed = |x: &[f32]| {
                let mut out = vec![0f32; t * d];
                for (i, row) in out.chunks_exact_mut(d).enumerate() {
                    for (c, o) in row.iter_mut().enumerate() {
                        *o = x[c * t32 + i];
                    }
                }
                out
            };
            [dq, untransposed(&dkt), untransposed(&dvt)]
        })
        .collect()
}
