//! Training sequences: token ids with roles and advantages.

use std::io::BufRead;
use std::path::Path;

use reverie_core::TokenRole;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// One training sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sequence {
    pub ids: Vec<i32>,
    pub roles: Vec<TokenRole>,
    /// The policy advantage of the sequence's actions.
    #[serde(default)]
    pub advantage: f32,
    /// The reward, when the sequence belongs to a group of samples of one
    /// prompt (then the advantage is computed from the group).
    #[serde(default)]
    pub reward: Option<f32>,
    #[serde(default)]
    pub group: Option<String>,
    /// Extra per-token advantages (e.g. a stray end of turn), by position.
    #[serde(default)]
    pub token_advantages: Vec<(usize, f32)>,
    /// Earlier sub-tasks the sequence holds, in order: a channel's
    /// sub-task is the context of the next one, so the later one's tokens
    /// carry the earlier one's whole and its log-probs are those of a
    /// sequence of its own (attention is causal). Each owns the actions
    /// from the previous one's end to its own; `advantage` owns the rest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Segment>,
}

/// An earlier sub-task inside a [`Sequence`]: its actions end before token
/// `end` and are trained with `advantage`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub end: usize,
    pub advantage: f32,
}

impl Sequence {
    /// Whether training on the sequence under `cfg` can move the adapter:
    /// it has a policy advantage (or a reward its group turns into one), a
    /// token mark, or tokens of an ECHO term that is on. Any other sequence
    /// costs a forward and a backward pass for a gradient of zero.
    pub fn carries_signal(&self, cfg: &crate::loss::LossConfig) -> bool {
        self.advantage.abs() > 1e-6
            || self.earlier.iter().any(|s| s.advantage.abs() > 1e-6)
            || self.reward.is_some()
            || !self.token_advantages.is_empty()
            || self.roles.iter().skip(1).any(|&r| cfg.echoes(r))
    }

    pub fn validate(&self, n_vocab: usize, line: usize) -> Result<(), TrainError> {
        let bad = |m: String| Err(TrainError::Data(format!("sequence {line}: {m}")));
        if self.ids.len() != self.roles.len() {
            return bad(format!(
                "{} ids but {} roles",
                self.ids.len(),
                self.roles.len()
            ));
        }
        if self.ids.len() < 2 {
            return bad("needs at least two tokens".into());
        }
        if let Some(id) = self.ids.iter().find(|&&i| i < 0 || i as usize >= n_vocab) {
            return bad(format!("token id {id} is outside the model's vocabulary of {n_vocab}; was it exported from another model?"));
        }
        if let Some((p, _)) = self
            .token_advantages
            .iter()
            .find(|(p, _)| *p >= self.ids.len())
        {
            return bad(format!("token advantage at position {p} is past the end"));
        }
        let mut from = 0;
        for seg in &self.earlier {
            if seg.end <= from || seg.end > self.ids.len() {
                return bad(format!(
                    "an earlier sub-task ends at token {} (after token {from}, within {} tokens expected)",
                    seg.end,
                    self.ids.len()
                ));
            }
            from = seg.end;
        }
        Ok(())
    }

    /// The sub-tasks the sequence trains: one, plus its earlier ones.
    pub fn sub_tasks(&self) -> usize {
        self.earlier.len() + 1
    }

    /// Each sub-task's tokens (a range of token indices) and advantage, in
    /// order.
    pub fn segments(&self) -> Vec<(std::ops::Range<usize>, f32)> {
        let mut from = 0;
        let mut out = Vec::with_capacity(self.sub_tasks());
        for seg in &self.earlier {
            out.push((from..seg.end, seg.advantage));
            from = seg.end;
        }
        out.push((from..self.ids.len(), self.advantage));
        out
    }

    /// The sequence without its first `from` tokens: marks and earlier
    /// sub-tasks follow their tokens (a sub-task that lost all its tokens
    /// is gone).
    pub fn drop_start(mut self, from: usize) -> Sequence {
        let from = from.min(self.ids.len());
        if from == 0 {
            return self;
        }
        self.ids.drain(..from);
        self.roles.drain(..from);
        self.token_advantages = self
            .token_advantages
            .into_iter()
            .filter(|(k, _)| *k >= from)
            .map(|(k, a)| (k - from, a))
            .collect();
        self.earlier = self
            .earlier
            .into_iter()
            .filter(|s| s.end > from)
            .map(|s| Segment {
                end: s.end - from,
                ..s
            })
            .collect();
        self
    }
}

/// Reads JSONL: either one [`Sequence`] per line, or the lines of
/// `reverie export` (a channel's messages with tokens), which become one
/// sequence each with advantage 0.
pub fn read_jsonl(path: &Path) -> Result<Vec<Sequence>, TrainError> {
    let file = std::fs::File::open(path).map_err(|source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
            TrainError::Data(format!("{}:{}: not JSON: {e}", path.display(), i + 1))
        })?;
        if v.get("ids").is_some() {
            out.push(
                serde_json::from_value(v)
                    .map_err(|e| TrainError::Data(format!("{}:{}: {e}", path.display(), i + 1)))?,
            );
        } else if let Some(msgs) = v.get("messages").and_then(|m| m.as_array()) {
            let mut seq = Sequence {
                ids: vec![],
                roles: vec![],
                advantage: 0.0,
                reward: None,
                group: None,
                token_advantages: vec![],
                earlier: vec![],
            };
            for m in msgs {
                let t = &m["tokens"];
                let ids = t["ids"].as_array().cloned().unwrap_or_default();
                let roles = t["roles"].as_array().cloned().unwrap_or_default();
                for (id, role) in ids.iter().zip(&roles) {
                    seq.ids.push(id.as_i64().unwrap_or(-1) as i32);
                    seq.roles
                        .push(role.as_str().unwrap_or("").parse().map_err(|e| {
                            TrainError::Data(format!("{}:{}: {e}", path.display(), i + 1))
                        })?);
                }
            }
            out.push(seq);
        } else {
            return Err(TrainError::Data(format!(
                "{}:{}: expected \"ids\"/\"roles\" or \"messages\"",
                path.display(),
                i + 1
            )));
        }
    }
    Ok(out)
}

/// Writes `seqs` as JSONL that [`read_jsonl`] reads back, atomically: a
/// temporary file, synced, then renamed over `path`.
pub fn write_jsonl(path: &Path, seqs: &[Sequence]) -> Result<(), TrainError> {
    let io = |source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    for s in seqs {
        text.push_str(&serde_json::to_string(s).map_err(|e| TrainError::Data(e.to_string()))?);
        text.push('\n');
    }
    let partial = path.with_extension("jsonl.partial");
    std::fs::write(&partial, text).map_err(io)?;
    std::fs::File::open(&partial)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)
}

/// OAPL's value of a group of rewards: `β1 · ln mean exp(r / β1)`, a soft
/// maximum that tends to the mean as `β1` grows and to the best reward as
/// it shrinks.
pub fn group_baseline(rewards: &[f32], beta1: f32) -> f32 {
    let max = rewards.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mean_exp = rewards
        .iter()
        .map(|r| ((r - max) / beta1).exp())
        .sum::<f32>()
        / rewards.len() as f32;
    max + beta1 * mean_exp.ln()
}

/// Replaces the advantage of sequences in groups of two or more by
/// `r − β1 · ln(mean exp(r / β1))` over their group.
pub fn apply_group_baselines(seqs: &mut [Sequence], beta1: f32) {
    let mut groups: std::collections::HashMap<String, Vec<usize>> = Default::default();
    for (i, s) in seqs.iter().enumerate() {
        if let (Some(g), Some(_)) = (&s.group, s.reward) {
            groups.entry(g.clone()).or_default().push(i);
        }
    }
    for idx in groups.values().filter(|v| v.len() >= 2) {
        let rs: Vec<f32> = idx.iter().map(|&i| seqs[i].reward.unwrap_or(0.0)).collect();
        let v_star = group_baseline(&rs, beta1);
        for (&i, r) in idx.iter().zip(rs) {
            seqs[i].advantage = r - v_star;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_baseline_is_a_soft_max() {
        let mk = |r| Sequence {
            ids: vec![1, 2],
            roles: vec![TokenRole::Context, TokenRole::Action],
            advantage: 9.0,
            reward: Some(r),
            group: Some("g".into()),
            token_advantages: vec![],
            earlier: vec![],
        };
        let mut s = vec![mk(1.0), mk(0.0)];
        apply_group_baselines(&mut s, 1.0);
        let v = (0.5f32 * (1f32.exp() + 1.0)).ln();
        assert!((s[0].advantage - (1.0 - v)).abs() < 1e-6);
        assert!((s[1].advantage - (0.0 - v)).abs() < 1e-6);
        let mut lone = vec![Sequence {
            group: Some("h".into()),
            ..mk(1.0)
        }];
        apply_group_baselines(&mut lone, 1.0);
        assert_eq!(
            lone[0].advantage, 9.0,
            "a group of one keeps the caller's advantage"
        );
    }

    #[test]
    fn a_sequence_without_advantage_mark_or_echo_tokens_carries_no_signal() {
        let cfg = crate::loss::LossConfig::default();
        let silent = Sequence {
            ids: vec![1, 2, 3],
            roles: vec![TokenRole::Context, TokenRole::Action, TokenRole::Action],
            advantage: 0.0,
            reward: None,
            group: None,
            token_advantages: vec![],
            earlier: vec![],
        };
        assert!(!silent.carries_signal(&cfg));
        let with = |f: &dyn Fn(&mut Sequence)| {
            let mut s = silent.clone();
            f(&mut s);
            s.carries_signal(&cfg)
        };
        assert!(with(&|s| s.advantage = -0.3));
        assert!(
            with(&|s| s.reward = Some(0.0)),
            "its group sets the advantage"
        );
        assert!(with(&|s| s.token_advantages = vec![(2, -1.0)]));
        assert!(with(&|s| s.roles[2] = TokenRole::Env));
        // The first token is never predicted, so its role teaches nothing.
        assert!(!with(&|s| s.roles[0] = TokenRole::Env));
        let no_echo = crate::loss::LossConfig {
            lambda_env: 0.0,
            ..cfg.clone()
        };
        let mut env = silent.clone();
        env.roles[2] = TokenRole::Env;
        assert!(!env.carries_signal(&no_echo));
    }

    #[test]
    fn written_sequences_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data.jsonl");
        let seqs = vec![
            Sequence {
                ids: vec![1, 2, 3],
                roles: vec![TokenRole::Context, TokenRole::Action, TokenRole::Env],
                advantage: -0.25,
                reward: Some(0.5),
                group: Some("g".into()),
                token_advantages: vec![(2, -1.0)],
                earlier: vec![],
            };
            2
        ];
        write_jsonl(&p, &seqs).unwrap();
        assert_eq!(read_jsonl(&p).unwrap(), seqs);
        assert!(!p.with_extension("jsonl.partial").exists());
        let err = write_jsonl(&dir.path().join("missing/data.jsonl"), &seqs).unwrap_err();
        assert!(err.to_string().contains("missing/data.jsonl"), "{err}");
    }

    #[test]
    fn the_default_baseline_leaves_shared_tokens_almost_unpushed() {
        // Whatever all attempts of a group share is pushed by the sum of
        // their advantages.
        let push = |passes: usize, beta1: f32| {
            let rs: Vec<f32> = (0..4).map(|i| if i < passes { 1.0 } else { 0.0 }).collect();
            let v = group_baseline(&rs, beta1);
            rs.iter().map(|r| r - v).sum::<f32>()
        };
        let beta1 = crate::loss::LossConfig::default().beta1;
        for passes in 1..4 {
            assert!(push(passes, 1.0) < -0.3, "β1 = 1 pushes shared tokens down");
            let p = push(passes, beta1);
            assert!((-0.06..=0.0).contains(&p), "{passes} of 4 passed: {p}");
        }
        assert_eq!(push(0, beta1), 0.0, "no mixed outcome, no push");
        assert_eq!(push(4, beta1), 0.0);
    }
}
