//! Stage 6, train: a LoRA on the night's sequences with OAPL + ECHO,
//! checkpointed so a killed night resumes at its last step; a device that
//! runs out of memory is tried again with less, then the CPU ([`fallbacks`]).

use reverie_train::data::Sequence;
use reverie_train::{DeviceChoice, Lora, Model, TrainConfig, Trainer};

use crate::dataset::sequences;
use crate::error::NightError;
use crate::event::{NightEvent, Stage};
use crate::report::TrainReport;
use crate::run::NightRun;
use crate::stages::Next;

/// The trained adapter on its base, for the export stage.
pub struct Trained {
    pub model: Model,
    pub lora: Lora,
}

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let (store, cfg) = (night.store, night.cfg);
    let r = &night.report;
    let all = sequences(store, &r.tasks, &r.predictions, &r.advantages, cfg)?;
    let n_all = all.len();
    // An unmarked attempt no better than its group teaches nothing.
    let seqs: Vec<Sequence> = all
        .into_iter()
        .filter(|s| s.carries_signal(&cfg.train.loss))
        .collect();
    if seqs.is_empty() {
        let why = format!(
            "nothing to train on tonight: {n_all} sequences, none with an advantage, a mark or a reward"
        );
        return Ok(night.keep(Stage::Train, why));
    }
    // The night's training set, to read or to train on again with
    // `reverie train --data`; the export stage of a resumed night reads it.
    let data = night.dir.join("train-data.jsonl");
    reverie_train::data::write_jsonl(&data, &seqs)?;
    let n_seqs = seqs.len();
    let longest = fitting_length(night.base(), &cfg.train_for(n_seqs), cfg.max_train_tokens);
    let too_long = seqs.iter().filter(|s| s.ids.len() > longest).count();
    if too_long > 0 {
        night.note(
            Stage::Train,
            format!(
                "{too_long} sequence(s) longer than {longest} tokens, the most a step fits in the memory available, train on their last {longest} tokens"
            ),
        );
    }
    let seqs: Vec<Sequence> = seqs.into_iter().map(|s| keep_end(s, longest)).collect();
    let mut tries = fallbacks(&cfg.train_for(n_seqs)).into_iter().peekable();
    let tried = loop {
        let (tcfg, how) = tries.next().expect("at least one configuration");
        match attempt(night, seqs.clone(), tcfg) {
            Err(NightError::Train(e)) if out_of_memory(&e) && tries.peek().is_some() => {
                let next = tries.peek().map_or("", |t| t.1);
                night.note(
                    Stage::Train,
                    format!("the trainer ran out of memory {how} ({e}); trying again {next}"),
                );
            }
            other => break other?,
        }
    };
    if !tried.done {
        return Err(NightError::Cancelled);
    }
    let reports = &tried.reports;
    night.report.train = Some(TrainReport {
        data: Some(data),
        sequences: n_seqs,
        without_signal: n_all - n_seqs,
        steps: tried.steps,
        losses: reports.iter().map(|r| r.loss).collect(),
        tokens: reports.iter().map(|r| r.tokens).sum(),
    });
    night.trained = Some(Trained {
        model: tried.model,
        lora: tried.lora,
    });
    Ok(Next::Continue)
}

/// What one try leaves.
struct Tried {
    model: Model,
    lora: Lora,
    reports: Vec<reverie_train::StepReport>,
    steps: usize,
    /// Every step taken (not stopped by a cancel).
    done: bool,
}

/// The configurations a night tries in turn while the device runs out of
/// memory: as configured; then, off the CPU, every sequence recomputed
/// layer by layer (the least activation memory); then the CPU. Each starts
/// from the last checkpoint, so no step is lost. With a phrase for the
/// morning summary.
pub fn fallbacks(tcfg: &TrainConfig) -> Vec<(TrainConfig, &'static str)> {
    let mut out = vec![(tcfg.clone(), "as configured")];
    if tcfg.device != DeviceChoice::Cpu {
        out.push((
            TrainConfig {
                recompute: true,
                recompute_above: 0,
                ..tcfg.clone()
            },
            "recomputing every layer",
        ));
        out.push((
            TrainConfig {
                device: DeviceChoice::Cpu,
                ..tcfg.clone()
            },
            "on the CPU",
        ));
    }
    out
}

/// The longest sequence whose step fits in nine tenths of the memory
/// available (when the night trains on the CPU), at most `max` and at
/// least 512 tokens; `max` where the memory cannot be told.
pub fn fitting_length(model: &std::path::Path, tcfg: &TrainConfig, max: usize) -> usize {
    let on_cpu = tcfg.device.open().is_ok_and(|d| d.is_cpu());
    match reverie_train::memory::available().filter(|_| on_cpu) {
        Some(free) => longest_within(model, tcfg, max, free / 10 * 9),
        None => max,
    }
}

/// The longest sequence, at most `max` and at least 512 tokens, whose
/// step's estimated peak stays within `budget` bytes (to 256 tokens).
fn longest_within(model: &std::path::Path, tcfg: &TrainConfig, max: usize, budget: u64) -> usize {
    let fits = |t: usize| {
        reverie_train::memory::step_memory(model, t, tcfg).map_or(true, |m| m.total() <= budget)
    };
    if fits(max) {
        return max;
    }
    let (mut lo, mut hi) = (512.min(max), max);
    while hi - lo > 256 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `s` cut to its last `n` tokens (its marks moved with them).
fn keep_end(s: Sequence, n: usize) -> Sequence {
    let from = s.ids.len().saturating_sub(n);
    s.drop_start(from)
}

/// Whether a training error is a device running out of memory.
pub fn out_of_memory(e: &reverie_train::TrainError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("out of memory") || text.contains("out_of_memory")
}

/// Loads the model as `tcfg` says and trains on `seqs` from the night's
/// last checkpoint.
fn attempt(
    night: &mut NightRun<'_>,
    seqs: Vec<Sequence>,
    tcfg: TrainConfig,
) -> Result<Tried, NightError> {
    if let Some(n) = fault_out_of_memory() {
        return Err(NightError::Train(reverie_train::TrainError::Device(
            format!("injected: CUDA_ERROR_OUT_OF_MEMORY: out of memory ({n} tries left to fail)"),
        )));
    }
    let model = Model::load_for_training(night.base(), &tcfg)?;
    let mut trainer = Trainer::new(&model, seqs, tcfg)?;
    let cancel = night.cancel;
    let checkpoints = night.dir.join("train");
    let mut on_step = |r: &reverie_train::StepReport| {
        night.emit(NightEvent::TrainStep {
            step: r.step,
            total: r.total_steps,
            loss: r.loss.total,
            oapl: r.loss.oapl,
            env: r.loss.env,
            user: r.loss.user,
            tokens_per_s: r.tokens_per_s,
            eta_s: r.eta_s,
        })
    };
    let reports =
        trainer.run_while(Some(&checkpoints), &mut on_step, &|| !cancel.is_cancelled())?;
    let (steps, done) = (trainer.step_index(), trainer.is_done());
    let lora = trainer.into_lora();
    Ok(Tried {
        model,
        lora,
        reports,
        steps,
        done,
    })
}

/// Fault injection for tests: `REVERIE_FAULT_TRAIN_OOM=N` fails the first
/// `N` tries of the process as a device out of memory.
fn fault_out_of_memory() -> Option<usize> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static FAILED: AtomicUsize = AtomicUsize::new(0);
    let n: usize = std::env::var("REVERIE_FAULT_TRAIN_OOM")
        .ok()?
        .parse()
        .ok()?;
    let done = FAILED.fetch_add(1, Ordering::SeqCst);
    (done < n).then(|| n - done - 1)
}

/// The adapter a finished train stage saved, for a night resumed after it.
pub fn resume(night: &NightRun<'_>) -> Result<Trained, NightError> {
    let data = night.dir.join("train-data.jsonl");
    let seqs = reverie_train::data::read_jsonl(&data)?;
    let tcfg = night.cfg.train_for(seqs.len());
    let model = Model::load_for_training(night.base(), &tcfg)?;
    let lora = {
        let mut trainer = Trainer::new(&model, seqs, tcfg)?;
        if !trainer.resume(&night.dir.join("train"))? {
            return Err(NightError::Io(format!(
                "night {} finished training but its checkpoint in {} is gone; \
                 cancel the night and sleep again",
                night.id,
                night.dir.join("train").display()
            )));
        }
        trainer.into_lora()
    };
    Ok(Trained { model, lora })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_train::data::Segment;

    #[test]
    fn a_gpu_falls_back_to_recomputing_then_to_the_cpu_and_a_cpu_to_nothing() {
        let cpu = TrainConfig {
            device: DeviceChoice::Cpu,
            ..TrainConfig::default()
        };
        assert_eq!(fallbacks(&cpu).len(), 1, "the CPU has nowhere to go");
        let gpu = TrainConfig {
            device: DeviceChoice::Cuda(0),
            recompute_above: 2048,
            ..TrainConfig::default()
        };
        let tries = fallbacks(&gpu);
        assert_eq!(tries.len(), 3);
        assert_eq!(tries[0].0, gpu);
        assert_eq!(
            (tries[1].0.recompute_above, tries[1].0.device),
            (0, DeviceChoice::Cuda(0))
        );
        assert_eq!(tries[2].0.device, DeviceChoice::Cpu);
        let oom = |m: &str| out_of_memory(&reverie_train::TrainError::Device(m.into()));
        assert!(oom(
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"
        ));
        assert!(!oom("shape mismatch in matmul"));
        // A sequence cut to its end keeps its marks with their tokens.
        let s = Sequence {
            ids: (0..10).collect(),
            roles: vec![reverie_core::TokenRole::Action; 10],
            advantage: 1.0,
            reward: None,
            group: None,
            token_advantages: vec![(2, -1.0), (8, -1.0)],
            earlier: vec![
                Segment {
                    end: 3,
                    advantage: 0.5,
                },
                Segment {
                    end: 8,
                    advantage: -0.5,
                },
            ],
        };
        let cut = keep_end(s.clone(), 4);
        assert_eq!(cut.ids, vec![6, 7, 8, 9]);
        assert_eq!(cut.token_advantages, vec![(2, -1.0)]);
        // So do the earlier sub-tasks: the first is gone, the second keeps
        // the two tokens left of it.
        assert_eq!(
            cut.earlier,
            vec![Segment {
                end: 2,
                advantage: -0.5
            }]
        );
        assert_eq!(keep_end(s.clone(), 20), s);
    }

    #[test]
    fn sequences_are_cut_to_what_fits_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        reverie_gguf::synth::write(
            &path,
            &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2),
        )
        .unwrap();
        let tcfg = TrainConfig::default();
        let need = |t| {
            reverie_train::memory::step_memory(&path, t, &tcfg)
                .unwrap()
                .total()
        };
        assert_eq!(longest_within(&path, &tcfg, 8192, need(8192)), 8192);
        let got = longest_within(&path, &tcfg, 8192, need(3000));
        assert!((2744..=3000).contains(&got), "{got}");
        assert_eq!(
            longest_within(&path, &tcfg, 8192, 1),
            512,
            "never under 512"
        );
    }
}
