//! OAPL on action tokens plus ECHO cross-entropy on environment (and,
//! lightly, user) tokens, for one sequence.

use candle_core::{Device, Result, Tensor};
use reverie_core::TokenRole;
use serde::{Deserialize, Serialize};

use crate::data::Sequence;

/// Loss coefficients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossConfig {
    /// Temperature of the group baseline `V* = β1 ln mean exp(r/β1)`.
    /// The published 1 puts `V*` well above the group's mean reward for
    /// rewards in [0, 1]: four attempts with two passes get advantages that
    /// sum to −0.48, so every mixed group pushes down the tokens all its
    /// attempts share (the opening tool call), and with a small `beta2` the
    /// squared error never saturates to stop that push. Nights at β1 = 1
    /// drifted away from calling tools into empty replies. At 10 the same
    /// group sums to −0.05: the baseline is nearly the mean, as in RLOO.
    pub beta1: f32,
    /// Scale of the log-ratio in OAPL's squared error.
    pub beta2: f32,
    /// ECHO weight on environment (tool output) tokens.
    pub lambda_env: f32,
    /// Imitation weight on the user's tokens (0 turns it off).
    pub lambda_user: f32,
    /// Divide the summed log-ratio by the number of action tokens, so long
    /// answers are not favoured.
    pub length_normalize: bool,
}

impl Default for LossConfig {
    fn default() -> Self {
        LossConfig {
            beta1: 10.0,
            beta2: 1e-3,
            lambda_env: 0.05,
            lambda_user: 0.01,
            length_normalize: false,
        }
    }
}

impl LossConfig {
    /// Whether an ECHO term reads tokens of `role` (environment or user
    /// tokens whose weight is not 0).
    pub fn echoes(&self, role: TokenRole) -> bool {
        match role {
            TokenRole::Env => self.lambda_env > 0.0,
            TokenRole::User => self.lambda_user > 0.0,
            _ => false,
        }
    }
}

/// The terms of one sequence's loss, as numbers for logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct LossTerms {
    pub oapl: f32,
    pub env: f32,
    pub user: f32,
    pub total: f32,
}

fn mask(seq: &Sequence, role: TokenRole, device: &Device) -> Result<(Tensor, usize)> {
    mask_within(seq, role, 0..seq.ids.len(), device)
}

/// The positions predicting the tokens of `role` among `tokens` (token
/// indices), as a 0/1 mask over the sequence's positions, and their count.
fn mask_within(
    seq: &Sequence,
    role: TokenRole,
    tokens: std::ops::Range<usize>,
    device: &Device,
) -> Result<(Tensor, usize)> {
    // Position j predicts token j+1.
    let m: Vec<f32> = (1..seq.ids.len())
        .map(|k| f32::from(u8::from(tokens.contains(&k) && seq.roles[k] == role)))
        .collect();
    let n = m.iter().filter(|x| **x > 0.0).count();
    Ok((Tensor::from_vec(m, seq.ids.len() - 1, device)?, n))
}

/// The positions (`j` predicts token `j+1`) whose log-prob some term of
/// [`sequence_loss`] reads under `cfg`: action tokens, token advantages,
/// and env and user tokens when their weight is not 0. Only these need the
/// LM head.
pub fn scored_positions(seq: &Sequence, cfg: &LossConfig) -> Vec<bool> {
    let mut scored: Vec<bool> = seq.roles[1..]
        .iter()
        .map(|&r| r == TokenRole::Action || cfg.echoes(r))
        .collect();
    for &(pos, _) in &seq.token_advantages {
        if let Some(s) = pos.checked_sub(1).and_then(|j| scored.get_mut(j)) {
            *s = true;
        }
    }
    scored
}

/// Loss of one sequence from its token log-probs `lp [t-1]` under the
/// policy and `lag [t-1]` under the policy that generated the data.
pub fn sequence_loss(
    seq: &Sequence,
    lp: &Tensor,
    lag: &[f32],
    cfg: &LossConfig,
) -> Result<(Tensor, LossTerms)> {
    let device = lp.device();
    let lag_t = Tensor::from_slice(lag, lag.len(), device)?;
    let ratio = (lp - &lag_t)?;
    let mut total = Tensor::zeros((), candle_core::DType::F32, device)?;
    let mut terms = LossTerms::default();
    // One squared error per sub-task, over its own actions: a sequence
    // that holds earlier sub-tasks has the loss of their sequences summed.
    for (tokens, advantage) in seq.segments() {
        let (act, n_act) = mask_within(seq, TokenRole::Action, tokens, device)?;
        if n_act == 0 {
            continue;
        }
        let mut delta = (&ratio * &act)?.sum_all()?;
        if cfg.length_normalize {
            delta = (delta / n_act as f64)?;
        }
        let err = ((delta * cfg.beta2 as f64)? - advantage as f64)?;
        let oapl = err.sqr()?;
        terms.oapl += oapl.to_scalar::<f32>()?;
        total = (total + oapl)?;
    }
    // Per-token advantages: the same squared error on single tokens.
    for &(pos, a) in &seq.token_advantages {
        if pos == 0 {
            continue;
        }
        let d = ratio.narrow(0, pos - 1, 1)?.sum_all()?;
        let err = ((d * cfg.beta2 as f64)? - a as f64)?.sqr()?;
        terms.oapl += err.to_scalar::<f32>()?;
        total = (total + err)?;
    }
    for (role, lambda, slot) in [
        (TokenRole::Env, cfg.lambda_env, 0),
        (TokenRole::User, cfg.lambda_user, 1),
    ] {
        if lambda <= 0.0 {
            continue;
        }
        let (m, n) = mask(seq, role, device)?;
        if n == 0 {
            continue;
        }
        // Weighed once per sub-task, as when each sub-task was a sequence
        // of its own whose context held the same tokens.
        let ce = ((lp * &m)?.sum_all()? * (-(seq.sub_tasks() as f64) / n as f64))?;
        let v = ce.to_scalar::<f32>()?;
        if slot == 0 {
            terms.env = v;
        } else {
            terms.user = v;
        }
        total = (total + (ce * lambda as f64)?)?;
    }
    terms.total = total.to_scalar::<f32>()?;
    Ok((total, terms))
}
