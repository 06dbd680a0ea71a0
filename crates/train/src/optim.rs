//! AdamW whose state can be saved and restored (candle-nn's cannot), global
//! gradient-norm clipping, and a warm-up + cosine learning-rate schedule.

use std::collections::HashMap;

use candle_core::{Result, Tensor, Var};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OptimConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub warmup_steps: usize,
    /// The schedule decays to `lr · min_lr_ratio` at the last step.
    pub min_lr_ratio: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        OptimConfig {
            lr: 1e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            warmup_steps: 10,
            min_lr_ratio: 0.1,
        }
    }
}

/// The learning rate at `step` (0-based) of `total`. Warm-up takes at most
/// a quarter of the run, so a short run (a small night) still trains at the
/// full rate instead of ending inside its warm-up.
pub fn lr_at(cfg: &OptimConfig, step: usize, total: usize) -> f64 {
    let warmup = cfg.warmup_steps.min(total / 4);
    if step < warmup {
        return cfg.lr * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let progress = ((step - warmup) as f64 / span as f64).min(1.0);
    let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
    cfg.lr * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)
}

pub struct AdamW {
    pub cfg: OptimConfig,
    pub step: u64,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl AdamW {
    pub fn new(cfg: OptimConfig, vars: &[&Var]) -> Result<AdamW> {
        let zeros = |v: &&Var| v.as_tensor().zeros_like();
        Ok(AdamW {
            cfg,
            step: 0,
            m: vars.iter().map(zeros).collect::<Result<_>>()?,
            v: vars.iter().map(zeros).collect::<Result<_>>()?,
        })
    }

    /// Clips the gradients to `max_grad_norm` (global norm) and applies one
    /// update with learning rate `lr`. Returns the norm before clipping.
    pub fn step(&mut self, vars: &[&Var], grads: &[Tensor], lr: f64) -> Result<f64> {
        let mut sq = 0f64;
        for g in grads {
            sq += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
        let norm = sq.sqrt();
        let clip = if self.cfg.max_grad_norm > 0.0 && norm > self.cfg.max_grad_norm {
            self.cfg.max_grad_norm / norm
        } else {
            1.0
        };
        self.step += 1;
        let t = self.step as i32;
        let (b1, b2) = (self.cfg.beta1, self.cfg.beta2);
        let bc1 = 1.0 - b1.powi(t);
        let bc2 = 1.0 - b2.powi(t);
        for (i, (var, g)) in vars.iter().zip(grads).enumerate() {
            let g = (g * clip)?;
            self.m[i] = ((&self.m[i] * b1)? + (&g * (1.0 - b1))?)?;
            self.v[i] = ((&self.v[i] * b2)? + (g.sqr()? * (1.0 - b2))?)?;
            let m_hat = (&self.m[i] / bc1)?;
            let v_hat = (&self.v[i] / bc2)?;
            let update = (m_hat / (v_hat.sqrt()? + self.cfg.eps)?)?;
            let mut next = var.as_tensor().clone();
            if self.cfg.weight_decay > 0.0 {
                next = (&next * (1.0 - lr * self.cfg.weight_decay))?;
            }
            var.set(&(next - (update * lr)?)?)?;
        }
        Ok(norm)
    }

    /// Moment tensors keyed `m.NAME` / `v.NAME` for saving.
    pub fn state(&self, names: &[String]) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            out.insert(format!("m.{n}"), self.m[i].clone());
            out.insert(format!("v.{n}"), self.v[i].clone());
        }
        out
    }

    pub fn restore(
        &mut self,
        names: &[String],
        state: &HashMap<String, Tensor>,
        step: u64,
    ) -> Result<()> {
        for (i, n) in names.iter().enumerate() {
            let get = |k: String| {
                state
                    .get(&k)
                    .cloned()
                    .ok_or_else(|| candle_core::Error::Msg(format!("optimizer state lacks {k}")))
            };
            self.m[i] = get(format!("m.{n}"))?;
            self.v[i] = get(format!("v.{n}"))?;
        }
        self.step = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays() {
        let c = OptimConfig {
            lr: 1.0,
            warmup_steps: 4,
            min_lr_ratio: 0.1,
            ..OptimConfig::default()
        };
        assert!((lr_at(&c, 0, 20) - 0.25).abs() < 1e-9);
        assert!((lr_at(&c, 3, 20) - 1.0).abs() < 1e-9);
        assert!((lr_at(&c, 20, 20) - 0.1).abs() < 1e-9);
        assert!(lr_at(&c, 10, 20) < 1.0 && lr_at(&c, 10, 20) > 0.1);
        // Short runs: warm-up shrinks to a quarter of the run.
        assert!((lr_at(&c, 0, 8) - 0.5).abs() < 1e-9);
        assert!((lr_at(&c, 1, 8) - 1.0).abs() < 1e-9);
        assert!((lr_at(&c, 0, 1) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn adamw_moves_against_the_gradient_and_clips() {
        let dev = candle_core::Device::Cpu;
        let v = Var::new(&[1f32, -1.0], &dev).unwrap();
        let mut opt = AdamW::new(
            OptimConfig {
                max_grad_norm: 1.0,
                ..OptimConfig::default()
            },
            &[&v],
        )
        .unwrap();
        let g = Tensor::new(&[100f32, -100.0], &dev).unwrap();
        let norm = opt.step(&[&v], &[g], 0.1).unwrap();
        assert!((norm - 141.42).abs() < 0.1);
        let after = v.as_tensor().to_vec1::<f32>().unwrap();
        assert!(after[0] < 1.0 && after[1] > -1.0);
    }
}
