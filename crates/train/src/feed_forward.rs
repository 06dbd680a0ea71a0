//! The whole adapted SwiGLU feed-forward block, `down(silu(gate(x)) ·
//! up(x))` with a LoRA adapter on each of the three projections, as one op.
//!
//! Composed of [`crate::glu::gated`] and an adapted down projection, the
//! gate's output `h [rows, ffn]` is a graph node (the down projection's
//! input), so the step holds it beside `g` and `u` until the backward pass
//! ends: three feed-forward-wide rows per token and layer, the largest part
//! of a kept graph. As one op the block keeps only `g` and `u` and
//! recomputes `h` from them (one element-wise pass) in the backward pass;
//! with [`Saved::Bf16`] it keeps those two in bf16, a third of the bytes
//! again. The forward pass computes in f32 either way: only the backward
//! pass sees the rounded values.
//!
//! Both passes walk the rows in blocks of [`ROWS_PER_PASS`]: the block is
//! row-wise but for the adapters' gradients (sums over rows), so the
//! feed-forward-wide temporaries (`g`, `u`, `h`, their gradients in f32)
//! are one block's, not the whole sequence's: at 24,576 tokens of the
//! default model they would be 1.9 GB, more than the kept `g` and `u`.

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};

use crate::bf16_matmul;
use crate::cpu::{f32_slice, gradients_of, with_f32s};
use crate::frozen::{AdapterValues, FrozenMatmul, Weight};
use crate::glu::{gate_back_in_place, gate_into, gated_projections_back, silu_mul};
use crate::portable;

/// How the block keeps `g` and `u` for its backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    F32,
    /// Rounded to bf16 (to nearest even): half the bytes, and gradients
    /// within bf16 rounding of the f32 ones.
    Bf16,
}

/// Rows each pass computes at a time: enough for the products to run at
/// full speed (the quantized weights are expanded once per block).
pub const ROWS_PER_PASS: usize = 2048;

/// The three projections of one block and their adapters: `a` holds
/// `A_gate [r, in]`, `A_up [r, in]`, `A_down [r, ffn]`; `b` holds
/// `B_gate [ffn, r]`, `B_up [ffn, r]`, `B_down [in, r]`.
pub fn feed_forward(
    x: &Tensor,
    (gate, up, down): (&FrozenMatmul, &FrozenMatmul, &FrozenMatmul),
    a: [&Tensor; 3],
    b: [&Tensor; 3],
    scale: f64,
    saved: Saved,
) -> Result<Tensor> {
    feed_forward_in_blocks(x, (gate, up, down), a, b, scale, saved, ROWS_PER_PASS)
}

/// [`feed_forward`] over blocks of `rows_per_pass` rows.
fn feed_forward_in_blocks(
    x: &Tensor,
    (gate, up, down): (&FrozenMatmul, &FrozenMatmul, &FrozenMatmul),
    a: [&Tensor; 3],
    b: [&Tensor; 3],
    scale: f64,
    saved: Saved,
    rows_per_pass: usize,
) -> Result<Tensor> {
    if portable::wanted(x) {
        let g = gate.forward_adapted(x, a[0], b[0], scale)?;
        let u = up.forward_adapted(x, a[1], b[1], scale)?;
        return down.forward_adapted(&silu_mul(&g, &u)?, a[2], b[2], scale);
    }
    // Flattened and joined: a custom op takes three inputs, and the joins'
    // backward passes hand each adapter its own slice of the gradient.
    let join = |ts: [&Tensor; 3]| -> Result<Tensor> {
        let flat = ts.map(Tensor::flatten_all);
        let [p, q, r] = flat;
        Tensor::cat(&[p?, q?, r?], 0)
    };
    x.contiguous()?.apply_op3(
        &join(a)?,
        &join(b)?,
        FeedForward {
            gate: gate.held().clone(),
            up: up.held().clone(),
            down: down.held().clone(),
            scale: scale as f32,
            keep: saved,
            rows_per_pass: rows_per_pass.max(1),
            saved: Mutex::new(None),
        },
    )
}

struct FeedForward {
    gate: Weight,
    up: Weight,
    down: Weight,
    scale: f32,
    keep: Saved,
    rows_per_pass: usize,
    /// `g` and `u` of each block of rows from the forward pass, for the
    /// backward pass.
    saved: Mutex<Option<Vec<Kept>>>,
}

/// `g` and `u`, each kept as [`Saved`] says.
struct Kept(bf16_matmul::Kept, bf16_matmul::Kept);

impl Kept {
    fn new(keep: Saved, g: Vec<f32>, u: Vec<f32>) -> Kept {
        let in_bf16 = keep == Saved::Bf16;
        let g = bf16_matmul::Kept::new(g, in_bf16);
        Kept(g, bf16_matmul::Kept::new(u, in_bf16))
    }

    fn into_f32(self) -> (Vec<f32>, Vec<f32>) {
        (self.0.into_f32(), self.1.into_f32())
    }
}

/// Sizes of one call: rows, input width, feed-forward width, rank.
struct Dims {
    rows: usize,
    inp: usize,
    ffn: usize,
    r: usize,
}

impl FeedForward {
    fn dims(&self, x: &[usize], a: usize, b: usize) -> Result<Dims> {
        let inp = x.last().copied().unwrap_or(0);
        let rows = x.iter().product::<usize>() / inp.max(1);
        let ((ffn, gi), (ffn_u, ui), (d_out, d_in)) =
            (self.gate.dims()?, self.up.dims()?, self.down.dims()?);
        let per_rank = 2 * inp + ffn;
        let r = a / per_rank.max(1);
        let fits = gi == inp
            && ui == inp
            && ffn_u == ffn
            && d_out == inp
            && d_in == ffn
            && r > 0
            && a == r * per_rank
            && b == r * (2 * ffn + inp);
        if !fits {
            candle_core::bail!(
                "feed-forward: input {x:?}, gate [{ffn}, {gi}], up [{ffn_u}, {ui}], down [{d_out}, {d_in}], {a} adapter A values, {b} B values"
            );
        }
        Ok(Dims { rows, inp, ffn, r })
    }

    /// The gate's, the up and the down projection's adapters within `a`
    /// and `b`.
    fn adapters<'a>(&self, d: &Dims, a: &'a [f32], b: &'a [f32]) -> [AdapterValues<'a>; 3] {
        let (ra, rb) = (d.r * d.inp, d.ffn * d.r);
        let ad = |a: &'a [f32], b: &'a [f32]| AdapterValues {
            a,
            b,
            r: d.r,
            scale: self.scale,
        };
        [
            ad(&a[..ra], &b[..rb]),
            ad(&a[ra..2 * ra], &b[rb..2 * rb]),
            ad(&a[2 * ra..], &b[2 * rb..]),
        ]
    }
}

impl CustomOp3 for FeedForward {
    fn name(&self) -> &'static str {
        "feed-forward"
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
        let _t = crate::timing::span("feed_forward.fwd");
        let name = self.name();
        let (x, a, b) = (
            f32_slice(xs, xl, name)?,
            f32_slice(a_s, al, name)?,
            f32_slice(bs, bl, name)?,
        );
        let d = self.dims(xl.dims(), a.len(), b.len())?;
        let [ag, au, ad] = self.adapters(&d, a, b);
        let mut y = vec![0f32; d.rows * d.inp];
        let mut kept = Vec::new();
        for (rows, x, y) in blocks(self.rows_per_pass, x, &mut y, d.inp) {
            let g = self.gate.project_adapted(x, ag, rows)?;
            let u = self.up.project_adapted(x, au, rows)?;
            let mut h = vec![0f32; rows * d.ffn];
            gate_into(&mut h, &g, &u);
            y.copy_from_slice(&self.down.project_adapted(&h, ad, rows)?);
            kept.push(Kept::new(self.keep, g, u));
        }
        *self.saved.lock().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let _t = crate::timing::span("feed_forward.bwd");
        let d = self.dims(x.dims(), a.elem_count(), b.elem_count())?;
        let kept = self.saved.lock().unwrap_or_else(|p| p.into_inner()).take();
        let (dx, da, db) = with_f32s([x, a, b, grad], self.name(), |[xv, av, bv, grad]| {
            self.back(&d, kept, xv, av, bv, grad)
        })?;
        gradients_of([x, a, b], (dx, da, db))
    }
}

impl FeedForward {
    /// The backward pass on the values: the gradients of `x`, of the
    /// concatenated `A`s and of the concatenated `B`s.
    fn back(
        &self,
        d: &Dims,
        kept: Option<Vec<Kept>>,
        xv: &[f32],
        av: &[f32],
        bv: &[f32],
        grad: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let [ag, au, ad] = self.adapters(d, av, bv);
        let mut kept = kept.map(Vec::into_iter);
        let mut dx = vec![0f32; d.rows * d.inp];
        let (mut da, mut db) = (vec![0f32; av.len()], vec![0f32; bv.len()]);
        let grads = grad.chunks(self.rows_per_pass * d.inp);
        for ((rows, xv, dx), grad) in blocks(self.rows_per_pass, xv, &mut dx, d.inp).zip(grads) {
            let (mut g, mut u) = match kept.as_mut().and_then(Iterator::next) {
                Some(k) => k.into_f32(),
                None => (
                    self.gate.project_adapted(xv, ag, rows)?,
                    self.up.project_adapted(xv, au, rows)?,
                ),
            };
            // The down projection's backward pass, on the recomputed `h`.
            let mut h = vec![0f32; rows * d.ffn];
            gate_into(&mut h, &g, &u);
            let mut dh = vec![0f32; rows * d.ffn];
            let (da_d, db_d) = self
                .down
                .project_adapted_back(&mut dh, &h, ad, grad, rows)?;
            drop(h);
            gate_back_in_place(&mut g, &mut u, &dh);
            drop(dh);
            let (dx_block, mut da_b, mut db_b) =
                gated_projections_back((&self.gate, &self.up), xv, [ag, au], (g, u), rows)?;
            dx.copy_from_slice(&dx_block);
            da_b.extend(da_d);
            db_b.extend(db_d);
            add_into(&mut da, &da_b);
            add_into(&mut db, &db_b);
        }
        Ok((dx, da, db))
    }
}

/// Each block of `n` rows: its length and its rows of `x` and of `out`,
/// both `width` wide.
fn blocks<'a>(
    n: usize,
    x: &'a [f32],
    out: &'a mut [f32],
    width: usize,
) -> impl Iterator<Item = (usize, &'a [f32], &'a mut [f32])> {
    x.chunks(n * width)
        .zip(out.chunks_mut(n * width))
        .map(move |(x, out)| (x.len() / width.max(1), x, out))
}

fn add_into(sum: &mut [f32], part: &[f32]) {
    sum.iter_mut().zip(part).for_each(|(s, p)| *s += p);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use candle_core::{Device, Var};

    /// The block against its composition from adapted projections and the
    /// gate, in both passes, for both ways of keeping `g` and `u`, in one
    /// block of rows and in ragged blocks.
    #[test]
    fn matches_the_composed_block_and_its_gradients() {
        let dev = Device::Cpu;
        for (inp, ffn) in [(40, 70), (96, 70)] {
            let w = |o, i| Tensor::randn(0f32, 0.3, (o, i), &dev).unwrap();
            let (wg, wu, wd) = (w(ffn, inp), w(ffn, inp), w(inp, ffn));
            let [g, u, dn] = [&wg, &wu, &wd].map(|w| FrozenMatmul::new(w).unwrap());
            let x = Var::randn(0f32, 1.0, (2, 9, inp), &dev).unwrap();
            let shapes = [(4, inp), (4, inp), (4, ffn), (ffn, 4), (ffn, 4), (inp, 4)];
            let vars: Vec<Var> = shapes
                .into_iter()
                .map(|s| Var::randn(0f32, 0.2, s, &dev).unwrap())
                .collect();
            let t = |i: usize| vars[i].as_tensor();
            let up = Tensor::randn(0f32, 1.0, (2, 9, inp), &dev).unwrap();
            let theirs = {
                let gv = g.forward_adapted(x.as_tensor(), t(0), t(3), 2.0).unwrap();
                let uv = u.forward_adapted(x.as_tensor(), t(1), t(4), 2.0).unwrap();
                dn.forward_adapted(&silu_mul(&gv, &uv).unwrap(), t(2), t(5), 2.0)
                    .unwrap()
            };
            let want = pull_back(&theirs, &up);
            let ways = [(Saved::F32, 1e-4), (Saved::Bf16, 2e-2)];
            for ((saved, tol), block) in ways.into_iter().flat_map(|w| [(w, ROWS_PER_PASS), (w, 4)])
            {
                let ours = feed_forward_in_blocks(
                    x.as_tensor(),
                    (&g, &u, &dn),
                    [t(0), t(1), t(2)],
                    [t(3), t(4), t(5)],
                    2.0,
                    saved,
                    block,
                )
                .unwrap();
                assert_eq!(ours.dims(), theirs.dims());
                // The forward pass is f32 either way.
                assert!(
                    max_abs_diff(&ours, &theirs) < 1e-4,
                    "{saved:?} {block} forward"
                );
                let got = pull_back(&ours, &up);
                let names = ["x", "A_g", "A_u", "A_d", "B_g", "B_u", "B_d"];
                for (name, v) in names.iter().zip(std::iter::once(&x).chain(&vars)) {
                    let (a, b) = (got.get(v.as_tensor()), want.get(v.as_tensor()));
                    let (a, b) = (a.unwrap(), b.unwrap());
                    let scale = b.abs().unwrap().max_all().unwrap();
                    let scale = scale.to_scalar::<f32>().unwrap().max(1.0);
                    let diff = max_abs_diff(a, b) / scale;
                    assert!(
                        diff < tol,
                        "{saved:?} in blocks of {block}: gradient of {name} differs by {diff}"
                    );
                }
            }
        }
    }

    #[test]
    fn adapters_of_the_wrong_size_are_refused() {
        let dev = Device::Cpu;
        let w = |o, i| {
            FrozenMatmul::new(&Tensor::zeros((o, i), candle_core::DType::F32, &dev).unwrap())
                .unwrap()
        };
        let (g, u, dn) = (w(6, 4), w(6, 4), w(4, 6));
        let x = Tensor::zeros((3, 4), candle_core::DType::F32, &dev).unwrap();
        let z = |s: (usize, usize)| Tensor::zeros(s, candle_core::DType::F32, &dev).unwrap();
        let (a, b) = (
            [z((2, 4)), z((2, 4)), z((2, 5))],
            [z((6, 2)), z((6, 2)), z((4, 2))],
        );
        let err = feed_forward(
            &x,
            (&g, &u, &dn),
            [&a[0], &a[1], &a[2]],
            [&b[0], &b[1], &b[2]],
            1.0,
            Saved::F32,
        )
        .unwrap_err();
        assert!(err.to_string().contains("feed-forward"), "{err}");
    }
}
