//! Stage 6, train: a LoRA on the night's sequences with OAPL + ECHO,
//! checkpointed so a killed night resumes at its last step.

use reverie_train::data::Sequence;
use reverie_train::{Lora, Model, Trainer};

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
    let tcfg = cfg.train_for(n_seqs);
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
    if !trainer.is_done() {
        return Err(NightError::Cancelled);
    }
    night.report.train = Some(TrainReport {
        data: Some(data),
        sequences: n_seqs,
        without_signal: n_all - n_seqs,
        steps: trainer.step_index(),
        losses: reports.iter().map(|r| r.loss).collect(),
        tokens: reports.iter().map(|r| r.tokens).sum(),
    });
    let lora = trainer.into_lora();
    night.trained = Some(Trained { model, lora });
    Ok(Next::Continue)
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
