//! The LM head and log-softmax as one op: `h [n, e]` → `log p(target | h)`
//! per row, with its own backward pass.
//!
//! The vocabulary is large (152K for Qwen), so `[n, vocab]` logits are the
//! biggest activations of a step, and a composed log-softmax walks them
//! several times, single-threaded, and keeps them for the backward pass.
//! Here logits exist for one block of rows at a time: the forward pass keeps
//! only each row's target log-prob, and the backward pass recomputes the
//! block's logits (one `gemm`), turns them into `g · (onehot − softmax)` in
//! place and multiplies back by the weight (a second `gemm`).

use std::sync::{Arc, Mutex};

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use crate::cpu::{exp, f32_slice, log_sum_exp, with_f32s};
use crate::frozen::{FrozenMatmul, Weight};
use crate::portable;

/// `log softmax(h · Wᵀ)[i, targets[i]]` for every row `i` of `h [n, e]`,
/// with `W [vocab, e]` frozen, `block` rows of logits at a time.
pub fn target_logprobs(h: &Tensor, w: &Tensor, targets: &[u32], block: usize) -> Result<Tensor> {
    head_logprobs(h, &Weight::Dense(w.detach().contiguous()?), targets, block)
}

/// [`target_logprobs`] for the head a [`FrozenMatmul`] holds, dense, tiled
/// or quantized.
pub fn frozen_target_logprobs(
    h: &Tensor,
    w: &FrozenMatmul,
    targets: &[u32],
    block: usize,
) -> Result<Tensor> {
    head_logprobs(h, w.held(), targets, block)
}

fn check(h: &Tensor, (vocab, we): (usize, usize), targets: &[u32]) -> Result<()> {
    let (n, e) = h.dims2()?;
    if we != e || targets.len() != n {
        candle_core::bail!(
            "lm head: h {:?}, weight [{vocab}, {we}] and {} targets do not fit together",
            h.dims(),
            targets.len()
        );
    }
    if let Some(t) = targets.iter().find(|&&t| t as usize >= vocab) {
        candle_core::bail!("lm head: target {t} is outside the vocabulary of {vocab}");
    }
    Ok(())
}

fn head_logprobs(h: &Tensor, w: &Weight, targets: &[u32], block: usize) -> Result<Tensor> {
    let dims = w.dims()?;
    check(h, dims, targets)?;
    if portable::wanted(h) {
        return portable::target_logprobs(h, w, targets, block);
    }
    let op = LmHead {
        w: w.clone(),
        vocab: dims.0,
        targets: targets.to_vec(),
        block: block.max(1),
        lse: Mutex::new(Vec::new()),
        pullback: h.track_op().then(|| Mutex::new(Vec::new())),
    };
    h.contiguous()?.apply_op1_arc(Arc::new(Box::new(op)))
}

struct LmHead {
    w: Weight,
    vocab: usize,
    targets: Vec<u32>,
    block: usize,
    /// Each row's log-sum-exp from the forward pass, for the backward pass.
    lse: Mutex<Vec<f32>>,
    /// When `h` tracks gradients: `d lp_i / d h_i` for every row, `[n, e]`,
    /// made by the forward pass while it holds the block's logits, so the
    /// backward pass only scales rows instead of computing the logits again.
    pullback: Option<Mutex<Vec<f32>>>,
}

impl LmHead {
    /// Runs `f(first_row, logits)` on each block of rows' logits.
    fn for_blocks(
        &self,
        h: &[f32],
        e: usize,
        mut f: impl FnMut(usize, &mut [f32]) -> Result<()>,
    ) -> Result<()> {
        let vocab = self.vocab;
        let n = h.len() / e;
        let mut logits = vec![0f32; self.block.min(n) * vocab];
        for b0 in (0..n).step_by(self.block) {
            let m = self.block.min(n - b0);
            self.w.project(&mut logits, &h[b0 * e..(b0 + m) * e], m)?;
            f(b0, &mut logits[..m * vocab])?;
        }
        Ok(())
    }
}

impl LmHead {
    /// `d lp_i / d logits = g_i · (onehot(target_i) − softmax)`, in place,
    /// for the block of rows from `b0`; `lse` as the forward pass left it
    /// (or empty, and then computed here).
    fn grad_logits(
        &self,
        logits: &mut [f32],
        b0: usize,
        g: impl Fn(usize) -> f32 + Sync,
        lse: &[f32],
    ) {
        logits
            .par_chunks_mut(self.vocab)
            .enumerate()
            .for_each(|(r, row)| {
                let i = b0 + r;
                let lse = lse.get(i).copied().unwrap_or_else(|| log_sum_exp(row));
                let g = g(i);
                for x in row.iter_mut() {
                    *x = -g * exp(*x - lse);
                }
                row[self.targets[i] as usize] += g;
            });
    }
}

impl CustomOp1 for LmHead {
    fn name(&self) -> &'static str {
        "lm-head-logprobs"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let _t = crate::timing::span("lm_head.fwd");
        let h = f32_slice(storage, layout, self.name())?;
        let (n, e) = layout.shape().dims2()?;
        let vocab = self.vocab;
        let mut out = vec![0f32; n];
        let mut lses = vec![0f32; n];
        let mut pullback = vec![0f32; if self.pullback.is_some() { n * e } else { 0 }];
        self.for_blocks(h, e, |b0, logits| {
            let rows = logits.len() / vocab;
            out[b0..b0 + rows]
                .par_iter_mut()
                .zip(&mut lses[b0..b0 + rows])
                .zip(logits.par_chunks(vocab))
                .enumerate()
                .for_each(|(r, ((o, lse), row))| {
                    *lse = log_sum_exp(row);
                    *o = row[self.targets[b0 + r] as usize] - *lse;
                });
            if pullback.is_empty() {
                return Ok(());
            }
            self.grad_logits(logits, b0, |_| 1.0, &lses);
            self.w
                .project_back_into(&mut pullback[b0 * e..(b0 + rows) * e], logits, rows)
        })?;
        *self.lse.lock().unwrap_or_else(|p| p.into_inner()) = lses;
        if let Some(slot) = &self.pullback {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = pullback;
        }
        Ok((CpuStorage::F32(out), Shape::from(n)))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let _t = crate::timing::span("lm_head.bwd");
        let (n, e) = arg.dims2()?;
        let vocab = self.vocab;
        let take =
            |m: &Mutex<Vec<f32>>| std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner()));
        let dh = with_f32s([arg, grad_res], self.name(), |[h, g]| {
            let mut dh = self.pullback.as_ref().map(take).unwrap_or_default();
            if dh.len() == n * e {
                dh.par_chunks_mut(e)
                    .zip(g)
                    .for_each(|(row, &g)| row.iter_mut().for_each(|x| *x *= g));
                return Ok(dh);
            }
            let mut dh = vec![0f32; n * e];
            let saved = take(&self.lse);
            self.for_blocks(h, e, |b0, logits| {
                let rows = logits.len() / vocab;
                self.grad_logits(logits, b0, |i| g[i], &saved);
                self.w
                    .project_back_into(&mut dh[b0 * e..(b0 + rows) * e], logits, rows)
            })?;
            Ok(dh)
        })?;
        Ok(Some(Tensor::from_vec(dh, (n, e), arg.device())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{max_abs_diff, pull_back};
    use crate::ops;
    use candle_core::{Device, Var, D};

    #[test]
    fn matches_composed_log_softmax_and_its_gradient() {
        let dev = Device::Cpu;
        let (n, e, vocab) = (11, 6, 23);
        let w = Tensor::randn(0f32, 1.0, (vocab, e), &dev).unwrap();
        let targets: Vec<u32> = (0..n as u32).map(|i| (i * 7) % vocab as u32).collect();
        let up = Tensor::randn(0f32, 1.0, n, &dev).unwrap();
        for block in [1, 4, 64] {
            let h = Var::randn(0f32, 1.0, (n, e), &dev).unwrap();
            let ours = target_logprobs(&h, &w, &targets, block).unwrap();
            let idx = Tensor::from_vec(targets.clone(), (n, 1), &dev).unwrap();
            let theirs = ops::log_softmax(&h.matmul(&w.t().unwrap()).unwrap())
                .unwrap()
                .gather(&idx, D::Minus1)
                .unwrap()
                .squeeze(1)
                .unwrap();
            assert!(
                max_abs_diff(&ours, &theirs) < 1e-5,
                "forward, block {block}"
            );
            let (g1, g2) = (pull_back(&ours, &up), pull_back(&theirs, &up));
            let d = max_abs_diff(g1.get(&h).unwrap(), g2.get(&h).unwrap());
            assert!(d < 1e-5, "gradient differs by {d}, block {block}");
            assert!(g1.get(&w).is_none(), "no gradient for the frozen weight");
            // The forward pass made the first backward's rows; a second
            // backward over the same graph computes the logits again.
            let again = pull_back(&ours, &up);
            let d = max_abs_diff(again.get(&h).unwrap(), g2.get(&h).unwrap());
            assert!(d < 1e-5, "second backward differs by {d}, block {block}");
        }
    }

    #[test]
    fn targets_outside_the_vocabulary_are_refused() {
        let dev = Device::Cpu;
        let w = Tensor::zeros((5, 3), candle_core::DType::F32, &dev).unwrap();
        let h = Tensor::zeros((2, 3), candle_core::DType::F32, &dev).unwrap();
        let err = target_logprobs(&h, &w, &[1, 5], 8).unwrap_err().to_string();
        assert!(err.contains("outside the vocabulary"), "{err}");
    }
}
