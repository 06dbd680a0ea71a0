//! The training loop: batches by gradient accumulation, progress reports,
//! atomic checkpoints and exact resume.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::data::{apply_group_baselines, Sequence};
use crate::device::DeviceChoice;
use crate::error::TrainError;
use crate::heap::HeapHold;
use crate::lora::{Lora, LoraConfig};
use crate::loss::{scored_positions, sequence_loss, LossConfig, LossTerms};
use crate::model::Model;
use crate::optim::{lr_at, AdamW, OptimConfig};

/// Everything that shapes a run, with documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    pub lora: LoraConfig,
    pub loss: LossConfig,
    pub optim: OptimConfig,
    /// Sequences per optimizer step (gradient accumulation).
    pub batch_size: usize,
    pub epochs: usize,
    /// Save a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: usize,
    /// Positions per LM-head chunk.
    pub chunk: usize,
    /// Shuffle seed.
    pub seed: u64,
    /// Keep only each layer's input during the forward pass and recompute
    /// the layer in the backward pass (activation memory grows with one
    /// layer, not the whole model).
    pub recompute: bool,
    /// Sequences of at most this many tokens keep the whole graph instead
    /// (no second forward pass: a third of a step's time), when its
    /// estimated size also fits in half of the memory available
    /// ([`crate::memory::keeps_graph`]). A 2048-token step of the 0.5B
    /// default model keeps about 5.2 GB of graph.
    pub recompute_above: usize,
    /// Where the model is loaded and trained ([`Model::load_on`]).
    pub device: DeviceChoice,
    /// On a CPU with AMX or AVX-512 BF16, hold the frozen weights as bf16 tiles and
    /// multiply in bf16 with f32 sums ([`Model::load_for_training`]): the
    /// numerics of a GPU run, several times the speed of f32. Off: f32
    /// everywhere on the CPU.
    pub cpu_bf16: bool,
    /// Keep the frozen projections, the LM head and the embeddings in the
    /// GGUF's block formats, expanded a tile at a time inside each product
    /// ([`crate::model::Held::Quantized`]): the model costs its file's size
    /// in memory instead of four bytes per parameter; with `cpu_bf16` on a
    /// CPU with AMX or AVX-512 BF16, each expanded tile is multiplied in bf16.
    pub quantized: bool,
    /// Keep each adapted feed-forward block's gate and up projections in
    /// bf16 for the backward pass ([`crate::feed_forward::Saved::Bf16`]):
    /// the forward pass stays f32 and the gradients move within bf16
    /// rounding (tested against f32 in `feed_forward`). On by default: it
    /// takes a 2,048-token step of the default model from 4.84 to 3.96 GB
    /// at the same speed, and a recomputed 8,192-token step from 3.19 to
    /// 2.86 GB (the block computes 2,048 rows at a time, so what it keeps
    /// is most of its share of the peak). A step that recomputes each layer
    /// also keeps each layer's attention output in bf16 for the second
    /// pass ([`crate::attention::Memo`]).
    pub bf16_saved: bool,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            lora: LoraConfig::default(),
            loss: LossConfig::default(),
            optim: OptimConfig::default(),
            batch_size: 64,
            epochs: 1,
            checkpoint_every: 10,
            chunk: 512,
            seed: 7,
            recompute: true,
            recompute_above: 2048,
            device: DeviceChoice::Auto,
            cpu_bf16: true,
            quantized: true,
            bf16_saved: true,
        }
    }
}

/// What one optimizer step did.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub step: usize,
    pub total_steps: usize,
    /// Mean over the batch of each loss term.
    pub loss: LossTerms,
    pub grad_norm: f64,
    pub lr: f64,
    pub tokens: usize,
    pub tokens_per_s: f64,
    pub eta_s: f64,
}

pub struct Trainer<'m> {
    model: &'m Model,
    pub lora: Lora,
    opt: AdamW,
    cfg: TrainConfig,
    data: Vec<Sequence>,
    lag: Vec<Vec<f32>>,
    step: usize,
    started: Instant,
    steps_this_session: usize,
    _heap: HeapHold,
}

const CHECKPOINT: &str = "checkpoint";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The log-probs of `seq` under `model` (with `lora` if given) at the
/// positions some term of its loss reads.
fn logprobs(
    model: &Model,
    cfg: &TrainConfig,
    seq: &Sequence,
    lora: Option<&Lora>,
) -> candle_core::Result<Tensor> {
    let scored = scored_positions(seq, &cfg.loss);
    model.scored_logprobs(&seq.ids, lora, cfg.chunk, Some(&scored))
}

impl<'m> Trainer<'m> {
    /// Validates the data, computes the group baselines and the log-probs of
    /// the policy that generated the data (the model with no adapter).
    pub fn new(
        model: &'m Model,
        mut data: Vec<Sequence>,
        cfg: TrainConfig,
    ) -> Result<Trainer<'m>, TrainError> {
        if data.is_empty() {
            return Err(TrainError::Data("no training sequences".into()));
        }
        for (i, s) in data.iter().enumerate() {
            s.validate(model.hp.n_vocab, i + 1)?;
        }
        let heap = HeapHold::new();
        apply_group_baselines(&mut data, cfg.loss.beta1);
        let lag = data
            .iter()
            .map(|s| logprobs(model, &cfg, s, None)?.to_vec1::<f32>())
            .collect::<candle_core::Result<Vec<_>>>()?;
        let shapes = model.adaptable(&cfg.lora.targets);
        let lora = Lora::new(cfg.lora.clone(), &shapes, &model.device)?;
        let opt = {
            let vars: Vec<&Var> = lora.named_vars().into_iter().map(|(_, v)| v).collect();
            AdamW::new(cfg.optim.clone(), &vars)?
        };
        Ok(Trainer {
            model,
            lora,
            opt,
            cfg,
            data,
            lag,
            step: 0,
            started: Instant::now(),
            steps_this_session: 0,
            _heap: heap,
        })
    }

    pub fn total_steps(&self) -> usize {
        (self.data.len() * self.cfg.epochs).div_ceil(self.cfg.batch_size.max(1))
    }

    pub fn step_index(&self) -> usize {
        self.step
    }

    pub fn is_done(&self) -> bool {
        self.step >= self.total_steps()
    }

    /// The trained adapter, freeing the data and optimizer state.
    pub fn into_lora(self) -> Lora {
        self.lora
    }

    /// The data index at global cursor position `k` (a fresh seeded
    /// permutation per epoch).
    fn index_at(&self, k: usize) -> usize {
        let n = self.data.len();
        let epoch = k / n;
        let mut order: Vec<usize> = (0..n).collect();
        let mut state = self.cfg.seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for i in (1..n).rev() {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            order.swap(i, ((z ^ (z >> 31)) % (i as u64 + 1)) as usize);
        }
        order[k % n]
    }

    /// Mean loss terms of `seqs` under the current adapter, without training.
    pub fn evaluate(&self, seqs: &[Sequence]) -> Result<LossTerms, TrainError> {
        let mut sum = LossTerms::default();
        let n: usize = seqs.iter().map(Sequence::sub_tasks).sum();
        for s in seqs {
            let lag = logprobs(self.model, &self.cfg, s, None)?.to_vec1::<f32>()?;
            let lp = logprobs(self.model, &self.cfg, s, Some(&self.lora))?;
            let (_, t) = sequence_loss(s, &lp, &lag, &self.cfg.loss)?;
            add(&mut sum, &t, 1.0 / n as f32);
        }
        Ok(sum)
    }

    /// Whether a step on `tokens` tokens keeps the whole graph rather than
    /// recomputing each layer ([`crate::memory::keeps_graph`]).
    pub fn keeps_graph(&self, tokens: usize) -> bool {
        crate::memory::keeps_graph(&self.cfg, &self.model.hp, tokens)
    }

    /// The loss terms of `seq` and the gradient of `weight · loss` for each
    /// LoRA variable (in `named_vars` order).
    pub fn sequence_gradients(
        &self,
        seq: &Sequence,
        lag: &[f32],
        weight: f64,
    ) -> Result<(LossTerms, Vec<Option<Tensor>>), TrainError> {
        let named = self.lora.named_vars();
        if self.keeps_graph(seq.ids.len()) {
            let forward = crate::timing::span("forward");
            let lp = logprobs(self.model, &self.cfg, seq, Some(&self.lora))?;
            let (loss, terms) = sequence_loss(seq, &lp, lag, &self.cfg.loss)?;
            drop(forward);
            let _backward = crate::timing::span("backward");
            let grads = (loss * weight)?.backward()?;
            return Ok((
                terms,
                named
                    .iter()
                    .map(|(_, v)| grads.get(v.as_tensor()).cloned())
                    .collect(),
            ));
        }
        let model = self.model;
        // The recomputed layers take attention's output from the first
        // pass: half of its forward work, for the output's size per layer,
        // within a quarter of the memory available, so that a machine near
        // its limit computes it again rather than running out.
        let budget = crate::memory::available().map_or(usize::MAX, |free| free as usize / 4);
        let memo = crate::attention::Memo::new(self.cfg.bf16_saved, budget);
        let pos = model.positions(seq.ids.len())?;
        let mut inputs = vec![model.embed(&seq.ids)?];
        for il in 0..model.n_layer() {
            let out = model
                .layer_remembering(il, &inputs[il], &pos, Some(&self.lora), Some(&memo))?
                .detach();
            inputs.push(out);
        }
        // The LM head op keeps one block of logits alive at a time, in the
        // forward and the backward pass alike.
        let top = Var::from_tensor(&inputs[model.n_layer()])?;
        let scored = scored_positions(seq, &self.cfg.loss);
        let lp = model.head_logprobs(top.as_tensor(), &seq.ids, self.cfg.chunk, Some(&scored))?;
        let (loss, terms) = sequence_loss(seq, &lp, lag, &self.cfg.loss)?;
        let mut upstream = match (loss * weight)?.backward()?.get(top.as_tensor()) {
            Some(g) => g.clone(),
            None => return Ok((terms, vec![None; named.len()])),
        };
        let mut out: Vec<Option<Tensor>> = vec![None; named.len()];
        let lora = Some(&self.lora);
        for il in (0..model.n_layer()).rev() {
            let x = Var::from_tensor(&inputs[il])?;
            let y = model.layer_remembering(il, x.as_tensor(), &pos, lora, Some(&memo))?;
            let grads = (y * &upstream)?.sum_all()?.backward()?;
            let prefix = format!("blk.{il}.");
            for (slot, (name, v)) in out.iter_mut().zip(&named) {
                if name.starts_with(&prefix) {
                    *slot = grads.get(v.as_tensor()).cloned();
                }
            }
            if il > 0 {
                upstream = grads
                    .get(x.as_tensor())
                    .cloned()
                    .unwrap_or(upstream.zeros_like()?);
            }
        }
        // Every kept result was taken back: the recomputed layers saw
        // exactly the first pass's attention inputs.
        debug_assert_eq!(memo.bytes(), 0, "attention results left unclaimed");
        Ok((terms, out))
    }

    /// One optimizer step over the next batch.
    pub fn train_step(&mut self) -> Result<StepReport, TrainError> {
        let total = self.total_steps();
        let b = self.cfg.batch_size.max(1);
        let limit = self.data.len() * self.cfg.epochs;
        let range = (self.step * b)..((self.step + 1) * b).min(limit);
        // The mean is over sub-tasks: a sequence that holds several is
        // their sequences' losses summed.
        let n: usize = range
            .clone()
            .map(|k| self.data[self.index_at(k)].sub_tasks())
            .sum();
        let named = self.lora.named_vars();
        let vars: Vec<&Var> = named.iter().map(|(_, v)| *v).collect();
        let mut acc: Vec<Option<Tensor>> = vec![None; vars.len()];
        let mut mean = LossTerms::default();
        let mut tokens = 0;
        let t0 = Instant::now();
        for k in range {
            let i = self.index_at(k);
            let seq = &self.data[i];
            tokens += seq.ids.len();
            let (terms, grads) = self.sequence_gradients(seq, &self.lag[i], 1.0 / n as f64)?;
            add(&mut mean, &terms, 1.0 / n as f32);
            for (slot, g) in acc.iter_mut().zip(grads) {
                if let Some(g) = g {
                    *slot = Some(match slot.take() {
                        Some(a) => (a + g)?,
                        None => g,
                    });
                }
            }
        }
        let grads: Vec<Tensor> = acc
            .into_iter()
            .zip(&vars)
            .map(|(g, v)| g.map(Ok).unwrap_or_else(|| v.as_tensor().zeros_like()))
            .collect::<candle_core::Result<_>>()?;
        let lr = lr_at(&self.cfg.optim, self.step, total);
        let optimizer = crate::timing::span("optimizer");
        let grad_norm = self.opt.step(&vars, &grads, lr)?;
        drop(optimizer);
        self.step += 1;
        self.steps_this_session += 1;
        let elapsed = t0.elapsed().as_secs_f64();
        let per_step = self.started.elapsed().as_secs_f64() / self.steps_this_session as f64;
        Ok(StepReport {
            step: self.step,
            total_steps: total,
            loss: mean,
            grad_norm,
            lr,
            tokens,
            tokens_per_s: tokens as f64 / elapsed.max(1e-9),
            eta_s: per_step * total.saturating_sub(self.step) as f64,
        })
    }

    /// Trains to the end, checkpointing into `dir` (and resuming from it).
    pub fn run(
        &mut self,
        dir: Option<&Path>,
        progress: &mut dyn FnMut(&StepReport),
    ) -> Result<Vec<StepReport>, TrainError> {
        self.run_while(dir, progress, &|| true)
    }

    /// Like [`Trainer::run`], but stops early (after saving a checkpoint)
    /// as soon as `keep_going` answers false; [`Trainer::is_done`] then
    /// tells whether it finished.
    pub fn run_while(
        &mut self,
        dir: Option<&Path>,
        progress: &mut dyn FnMut(&StepReport),
        keep_going: &dyn Fn() -> bool,
    ) -> Result<Vec<StepReport>, TrainError> {
        if let Some(d) = dir {
            self.resume(d)?;
        }
        let mut reports = Vec::new();
        while !self.is_done() {
            if !keep_going() {
                if let Some(d) = dir {
                    self.save_checkpoint(d)?;
                }
                break;
            }
            let r = self.train_step()?;
            progress(&r);
            reports.push(r);
            if let Some(d) = dir {
                let every = self.cfg.checkpoint_every;
                if (every > 0 && self.step.is_multiple_of(every)) || self.is_done() {
                    self.save_checkpoint(d)?;
                }
            }
        }
        Ok(reports)
    }

    /// Saves adapter, optimizer state and cursor into `dir/checkpoint`,
    /// atomically (a crash leaves either the old or the new checkpoint).
    pub fn save_checkpoint(&self, dir: &Path) -> Result<PathBuf, TrainError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let partial = dir.join(format!("{CHECKPOINT}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial).map_err(io(&partial))?;
        let named = self.lora.named_vars();
        let names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
        let lora: HashMap<String, Tensor> = named
            .iter()
            .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
            .collect();
        candle_core::safetensors::save(&lora, partial.join("lora.safetensors"))?;
        candle_core::safetensors::save(
            &self.opt.state(&names),
            partial.join("optimizer.safetensors"),
        )?;
        let state = serde_json::json!({ "step": self.step, "optimizer_step": self.opt.step, "config": self.cfg });
        std::fs::write(partial.join("state.json"), state.to_string()).map_err(io(&partial))?;
        for f in ["lora.safetensors", "optimizer.safetensors", "state.json"] {
            let p = partial.join(f);
            std::fs::File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(io(&p))?;
        }
        let current = dir.join(CHECKPOINT);
        let old = dir.join(format!("{CHECKPOINT}.old"));
        let _ = std::fs::remove_dir_all(&old);
        if current.exists() {
            std::fs::rename(&current, &old).map_err(io(&current))?;
        }
        std::fs::rename(&partial, &current).map_err(io(&current))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        let _ = std::fs::remove_dir_all(&old);
        Ok(current)
    }

    /// Loads `dir/checkpoint` (or the previous one, if a crash interrupted
    /// the swap) when present. Returns whether anything was restored.
    pub fn resume(&mut self, dir: &Path) -> Result<bool, TrainError> {
        let chosen = [CHECKPOINT, "checkpoint.old"]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.join("state.json").exists());
        let Some(ck) = chosen else {
            return Ok(false);
        };
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ck.join("state.json")).map_err(io(&ck))?)
                .map_err(|e| TrainError::Data(format!("{}: {e}", ck.display())))?;
        let lora = candle_core::safetensors::load(ck.join("lora.safetensors"), &self.model.device)?;
        let opt =
            candle_core::safetensors::load(ck.join("optimizer.safetensors"), &self.model.device)?;
        let named = self.lora.named_vars();
        let names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
        for (n, v) in &named {
            let t = lora.get(n).ok_or_else(|| {
                TrainError::Data(format!(
                    "checkpoint lacks {n}; it was made with another LoRA configuration"
                ))
            })?;
            v.set(t)?;
        }
        self.opt
            .restore(&names, &opt, state["optimizer_step"].as_u64().unwrap_or(0))?;
        self.step = state["step"].as_u64().unwrap_or(0) as usize;
        tracing::info!(step = self.step, "resumed from {}", ck.display());
        Ok(true)
    }
}

fn add(sum: &mut LossTerms, t: &LossTerms, w: f32) {
    sum.oapl += t.oapl * w;
    sum.env += t.env * w;
    sum.user += t.user * w;
    sum.total += t.total * w;
}
