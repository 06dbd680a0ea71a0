//! The stages of a night, persisted in the night record after each one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use reverie_core::{ChannelId, Home, Message, MessageRole, TokenRole, TokenSpan};
use reverie_store::{NightStatus, Store};
use reverie_train::data::Sequence;
use reverie_train::{Model, Trainer};
use serde_json::{json, Value};

use crate::advantage::task_advantages;
use crate::config::NightConfig;
use crate::error::NightError;
use crate::event::{NightEvent, Stage};
use crate::judge::{judge_window, understanding, windows, JudgedTask};
use crate::value::{Prediction, Similarity, ValueMemory};
use crate::verify::{families_to_check, perplexity, task_success, FamilyCheck, Measured};

/// How a night ended.
#[derive(Debug, Clone)]
pub struct NightOutcome {
    pub night: i64,
    /// The new checkpoint, when one was deployed.
    pub deployed: Option<PathBuf>,
    /// Why the current model was kept, when it was.
    pub kept_reason: Option<String>,
    pub report: Value,
}

struct Night<'a> {
    id: i64,
    store: &'a Store,
    report: Value,
    on: &'a mut dyn FnMut(NightEvent),
    cancel: &'a AtomicBool,
}

impl Night<'_> {
    fn done(&self, stage: Stage) -> bool {
        self.report["done"]
            .as_array()
            .is_some_and(|d| d.iter().any(|s| s == stage.as_str()))
    }

    /// Announces `stage` and starts its clock.
    fn start(&mut self, stage: Stage) -> Instant {
        (self.on)(NightEvent::StageStarted { stage });
        Instant::now()
    }

    /// The sub-tasks judged so far.
    fn tasks(&self) -> Vec<JudgedTask> {
        serde_json::from_value(self.report["tasks"].clone()).unwrap_or_default()
    }

    /// Reports item `index` (0-based) of `count`, after checking for a cancel.
    fn item(
        &mut self,
        stage: Stage,
        index: usize,
        count: usize,
        label: String,
    ) -> Result<(), NightError> {
        self.check_cancel()?;
        (self.on)(NightEvent::Item {
            stage,
            index: index + 1,
            count,
            label,
        });
        Ok(())
    }

    fn check_cancel(&self) -> Result<(), NightError> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err(NightError::Cancelled);
        }
        Ok(())
    }

    /// Records a finished stage durably before the next one starts.
    fn finish(&mut self, stage: Stage, started: Instant) -> Result<(), NightError> {
        let secs = started.elapsed().as_secs_f64();
        self.report["seconds"][stage.as_str()] = json!(secs);
        if !self.report["done"].is_array() {
            self.report["done"] = json!([]);
        }
        self.report["done"]
            .as_array_mut()
            .expect("array")
            .push(json!(stage.as_str()));
        self.store
            .update_night(self.id, NightStatus::Running, stage.as_str(), &self.report)?;
        (self.on)(NightEvent::StageFinished {
            stage,
            seconds: secs,
        });
        Ok(())
    }

    fn note(&mut self, stage: Stage, message: String) {
        tracing::info!(stage = stage.as_str(), "{message}");
        if !self.report["notes"].is_array() {
            self.report["notes"] = json!([]);
        }
        self.report["notes"]
            .as_array_mut()
            .expect("array")
            .push(json!({"stage": stage.as_str(), "message": message}));
        (self.on)(NightEvent::Note { stage, message });
    }
}

fn io(e: impl std::fmt::Display) -> NightError {
    NightError::Io(e.to_string())
}

/// Runs (or resumes) a night on the model at `model`, the one deployed today.
pub fn run_night(
    home: &Home,
    store: &Store,
    model: &Path,
    cfg: &NightConfig,
    cancel: &AtomicBool,
    on: &mut dyn FnMut(NightEvent),
) -> Result<NightOutcome, NightError> {
    let nights = store.nights()?;
    let (id, report) = match nights.last() {
        Some(n) if n.status == NightStatus::Running => {
            tracing::info!(night = n.id, stage = %n.stage, "resuming an interrupted night");
            (n.id, n.report.clone())
        }
        _ => {
            let since = nights
                .iter()
                .rev()
                .find(|n| n.status == NightStatus::Done)
                .map_or(0, |n| n.started_ms);
            let id = store.start_night()?;
            (id, json!({"since_ms": since, "base": model, "done": []}))
        }
    };
    let mut night = Night {
        id,
        store,
        report,
        on,
        cancel,
    };
    let result = stages(home, &mut night, cfg);
    match result {
        Ok(outcome) => {
            store.update_night(id, NightStatus::Done, "deploy", &night.report)?;
            Ok(outcome)
        }
        Err(NightError::Cancelled) => {
            night.report["cancelled"] = json!(true);
            store.update_night(id, NightStatus::Cancelled, "cancelled", &night.report)?;
            Err(NightError::Cancelled)
        }
        Err(e) => {
            night.report["error"] = json!(e.to_string());
            // Left `running` so the next `sleep` resumes after the last stage.
            store.update_night(id, NightStatus::Running, "interrupted", &night.report)?;
            Err(e)
        }
    }
}

fn stages(
    home: &Home,
    night: &mut Night<'_>,
    cfg: &NightConfig,
) -> Result<NightOutcome, NightError> {
    let base = PathBuf::from(night.report["base"].as_str().unwrap_or_default());
    let store = night.store;
    let dir = home.checkpoints().join(format!("night-{}", night.id));
    std::fs::create_dir_all(&dir).map_err(io)?;

    // 0. practice: the model writes tasks, attempts them, a program checks
    if !night.done(Stage::Practice) {
        let t = night.start(Stage::Practice);
        if !cfg.practice.is_empty() {
            let cancel = night.cancel;
            let lines = crate::practice::practise(home, &base, cfg, cancel, &mut |i, n, label| {
                (night.on)(NightEvent::Item {
                    stage: Stage::Practice,
                    index: i + 1,
                    count: n,
                    label,
                })
            })?;
            for l in &lines {
                night.note(Stage::Practice, l.clone());
            }
            night.report["practice"] = json!(lines);
        }
        night.finish(Stage::Practice, t)?;
    }

    // 1. collect
    if !night.done(Stage::Collect) {
        let t = night.start(Stage::Collect);
        let since = night.report["since_ms"].as_i64().unwrap_or(0);
        let mut channels = Vec::new();
        let mut total = 0;
        for c in store.channels()? {
            let msgs = store.messages(c.id)?;
            if let Some(from) = msgs.iter().position(|m| m.created_ms >= since) {
                total += msgs.len() - from;
                channels.push(json!({"channel": c.id.0, "name": c.name, "from": from}));
            }
        }
        night.report["channels"] = json!(channels);
        night.report["counts"] = json!({"messages": total, "channels": channels.len()});
        night.finish(Stage::Collect, t)?;
    }

    // 2-3. judge and predict with the deployed model
    let need_model =
        !night.done(Stage::Judge) || !night.done(Stage::Predict) || !night.done(Stage::Understand);
    if need_model {
        let engine = cfg.engine(&base)?;
        if !night.done(Stage::Judge) {
            let t = night.start(Stage::Judge);
            let since = night.report["since_ms"].as_i64().unwrap_or(0);
            let (practised, checked) =
                crate::practice::episode_tasks(store, since, cfg.stopped_pass_reward)?;
            let mut all = Vec::new();
            for c in night.report["channels"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let ch = ChannelId(c["channel"].as_i64().unwrap_or(0));
                if checked.contains(&ch.0) {
                    continue;
                }
                let msgs: Vec<(MessageRole, String)> = store
                    .messages(ch)?
                    .into_iter()
                    .map(|m| (m.role, m.text))
                    .collect();
                all.extend(windows(
                    ch,
                    &msgs,
                    c["from"].as_u64().unwrap_or(0) as usize,
                    cfg.window,
                ));
            }
            let mut tasks = Vec::new();
            for (i, w) in all.iter().enumerate() {
                night.item(
                    Stage::Judge,
                    i,
                    all.len(),
                    format!("channel {} messages {}", w.channel.0, w.messages.len()),
                )?;
                match judge_window(&engine, w, cfg.retries) {
                    Ok(j) => {
                        for (a, b) in &j.reads {
                            night.note(
                                Stage::Judge,
                                format!(
                                    "the judge read messages {a}–{b} of channel {}",
                                    w.channel.0
                                ),
                            );
                        }
                        tasks.extend(j.tasks)
                    }
                    Err(why) => night.note(
                        Stage::Judge,
                        format!("skipped a window of channel {}: {why}", w.channel.0),
                    ),
                }
            }
            if !practised.is_empty() {
                let proposals = practised
                    .iter()
                    .filter(|t| t.description.starts_with("tasker"))
                    .count();
                let episodes = practised.len() - proposals;
                let s = |n: usize| if n == 1 { "" } else { "s" };
                night.note(
                    Stage::Judge,
                    format!(
                        "{episodes} practice episode{} rewarded by their checks, {proposals} tasker proposal{} by their solvers' pass rates",
                        s(episodes),
                        s(proposals)
                    ),
                );
            }
            tasks.extend(practised);
            let marks = store.review_marks()?;
            let ids = |ch: i64| {
                store
                    .messages(ChannelId(ch))
                    .map(|ms| ms.iter().map(|m| m.id).collect())
                    .unwrap_or_default()
            };
            let (tasks, changes) = crate::review::apply(tasks, &marks, &ids);
            for c in changes {
                night.note(Stage::Judge, c);
            }
            night.report["tasks"] = serde_json::to_value(&tasks).map_err(io)?;
            night.finish(Stage::Judge, t)?;
        }
        if !night.done(Stage::Predict) {
            let t = night.start(Stage::Predict);
            let tasks = night.tasks();
            let started = store
                .nights()?
                .into_iter()
                .find(|n| n.id == night.id)
                .map_or(0, |n| n.started_ms);
            let mem = ValueMemory::from_finished_nights(store, started)?;
            let similarity = Similarity::new(home, store);
            night.report["memory"] =
                json!({"entries": mem.entries.len(), "similarity": similarity.kind()});
            // The memory is frozen for the night, so a prediction depends on
            // the description alone: the attempts of one practice task ask once.
            let mut asked: HashMap<&str, Option<Prediction>> = HashMap::new();
            let mut preds: Vec<Option<Prediction>> = Vec::new();
            for (i, task) in tasks.iter().enumerate() {
                night.item(Stage::Predict, i, tasks.len(), task.description.clone())?;
                if let Some(p) = asked.get(task.description.as_str()) {
                    preds.push(p.clone());
                    continue;
                }
                let p = match mem.predict(&engine, &task.description, cfg, &similarity) {
                    Ok(p) => Some(p),
                    Err(why) => {
                        night.note(
                            Stage::Predict,
                            format!("no prediction for {:?}: {why}", task.description),
                        );
                        None
                    }
                };
                asked.insert(&task.description, p.clone());
                preds.push(p);
            }
            night.report["memory"]["asked"] = json!(asked.len());
            night.report["predictions"] = serde_json::to_value(&preds).map_err(io)?;
            night.finish(Stage::Predict, t)?;
        }
        if !night.done(Stage::Understand) {
            let t = night.start(Stage::Understand);
            let tasks = night.tasks();
            let picked = for_understanding(&tasks, cfg.understanding_fraction, night.id as u64);
            let mut scores: Vec<Option<f32>> = vec![None; tasks.len()];
            for (n, &i) in picked.iter().enumerate() {
                let task = &tasks[i];
                night.item(Stage::Understand, n, picked.len(), task.description.clone())?;
                let msgs: Vec<(usize, MessageRole, String)> = store
                    .messages(ChannelId(task.channel))?
                    .into_iter()
                    .enumerate()
                    .filter(|(k, m)| {
                        *k >= task.first && *k <= task.last + 1 && m.role != MessageRole::System
                    })
                    .map(|(k, m)| (k, m.role, m.text))
                    .collect();
                match understanding(&engine, &msgs, cfg.retries) {
                    Ok(s) => scores[i] = Some(s),
                    Err(why) => night.note(
                        Stage::Understand,
                        format!("no understanding score for {:?}: {why}", task.description),
                    ),
                }
            }
            night.report["understanding"] = json!(scores);
            night.finish(Stage::Understand, t)?;
        }
    }

    // 4. advantages
    let tasks = night.tasks();
    let preds: Vec<Option<Prediction>> =
        serde_json::from_value(night.report["predictions"].clone()).unwrap_or_default();
    if !night.done(Stage::Advantage) {
        let t = night.start(Stage::Advantage);
        let understood: Vec<Option<f32>> =
            serde_json::from_value(night.report["understanding"].clone()).unwrap_or_default();
        let advs = task_advantages(&tasks, &preds, &understood, cfg);
        let judged: Vec<f32> = tasks.iter().map(|t| t.reward).collect();
        let predicted: Vec<f32> = preds.iter().flatten().map(|p| p.reward).collect();
        night.report["advantages"] = json!(advs);
        night.report["summary"] = json!({
            "tasks": tasks.len(),
            "mean_reward": mean(&judged),
            "mean_predicted": mean(&predicted),
            "mean_abs_prediction_error": mean(&tasks.iter().zip(&preds).filter_map(|(t, p)| p.as_ref().map(|p| (t.reward - p.reward).abs())).collect::<Vec<_>>()),
        });
        night.finish(Stage::Advantage, t)?;
    }

    // 5. train
    let merged = dir.join("model-q8_0.gguf");
    if !night.done(Stage::Train) || !night.done(Stage::Export) {
        let advs: Vec<Option<f32>> =
            serde_json::from_value(night.report["advantages"].clone()).unwrap_or_default();
        let all = sequences(store, &tasks, &preds, &advs, cfg)?;
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
            night.note(Stage::Train, why.clone());
            night.report["deploy"] = json!({"kept": why});
            return Ok(NightOutcome {
                night: night.id,
                deployed: None,
                kept_reason: Some(why),
                report: night.report.clone(),
            });
        }
        // The night's training set, to read or to train on again with
        // `reverie train --data`.
        let data = dir.join("train-data.jsonl");
        reverie_train::data::write_jsonl(&data, &seqs)?;
        let n_seqs = seqs.len();
        let tcfg = cfg.train_for(n_seqs);
        let model = Model::load_for_training(&base, &tcfg)?;
        let mut trainer = Trainer::new(&model, seqs, tcfg)?;
        if !night.done(Stage::Train) {
            let t = night.start(Stage::Train);
            let cancel = night.cancel;
            let on = &mut night.on;
            let mut cb = |r: &reverie_train::StepReport| {
                on(NightEvent::TrainStep {
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
            let reports = trainer.run_while(Some(&dir.join("train")), &mut cb, &|| {
                !cancel.load(Ordering::SeqCst)
            })?;
            if !trainer.is_done() {
                return Err(NightError::Cancelled);
            }
            night.report["train"] = json!({
                "data": data,
                "sequences": n_seqs,
                "without_signal": n_all - n_seqs,
                "steps": trainer.step_index(),
                "losses": reports.iter().map(|r| r.loss).collect::<Vec<_>>(),
                "tokens": reports.iter().map(|r| r.tokens).sum::<usize>(),
            });
            night.finish(Stage::Train, t)?;
        } else {
            trainer.resume(&dir.join("train"))?;
        }
        // 6. export
        let t = night.start(Stage::Export);
        let exp = reverie_train::export::write_merged_q8_0(&model, Some(&trainer.lora), &merged)?;
        night.report["export"] = json!({"path": merged, "report": exp});
        night.finish(Stage::Export, t)?;
    }

    // 7. verify
    if !night.done(Stage::Verify) {
        let t = night.start(Stage::Verify);
        // The night that deployed tonight's old model measured it already.
        let earlier = Measured::of(store, &base)?;
        let before = match earlier.as_ref().and_then(|m| m.perplexity) {
            Some(p) => p,
            None => perplexity(&base, cfg.gpu_layers)?,
        };
        let after = perplexity(&merged, cfg.gpu_layers);
        let verdict = match after {
            Err(e) => {
                json!({"ok": false, "why": format!("llama.cpp cannot run the new model: {e}"), "perplexity_before": before})
            }
            Ok(after) => {
                let worse = after / before - 1.0;
                let ok = worse <= cfg.max_perplexity_regression;
                json!({
                    "ok": ok,
                    "perplexity_before": before,
                    "perplexity_after": after,
                    "why": if ok { String::new() } else { format!("perplexity on the sanity text rose {:.1}% ({before:.2} → {after:.2}), more than the allowed {:.0}%", worse * 100.0, cfg.max_perplexity_regression * 100.0) },
                })
            }
        };
        let since = night.report["since_ms"].as_i64().unwrap_or(0);
        let families = families_to_check(store, since)?;
        let mut verdict =
            if verdict["ok"] == json!(true) && cfg.verify_tasks > 0 && !families.is_empty() {
                let n = families.len();
                let old = (base.as_path(), earlier.as_ref());
                let checks = task_success(home, old, &merged, &families, cfg, &mut |i, f| {
                    let _ = night.item(
                        Stage::Verify,
                        i,
                        n,
                        format!("{} tasks, old and new model", f.as_str()),
                    );
                })?;
                with_task_checks(verdict, checks, cfg.max_success_drop)
            } else {
                verdict
            };
        if let Some(m) = earlier.as_ref().filter(|m| m.perplexity.is_some()) {
            verdict["perplexity_before_from_night"] = json!(m.night);
        }
        night.report["verify"] = verdict;
        night.finish(Stage::Verify, t)?;
    }

    // 8. deploy
    let verdict = night.report["verify"].clone();
    if verdict["ok"] != json!(true) {
        let why = verdict["why"]
            .as_str()
            .unwrap_or("verification failed")
            .to_string();
        night.note(Stage::Deploy, format!("kept the current model: {why}"));
        night.report["deploy"] = json!({"kept": why});
        return Ok(NightOutcome {
            night: night.id,
            deployed: None,
            kept_reason: Some(why),
            report: night.report.clone(),
        });
    }
    let t = night.start(Stage::Deploy);
    if store.checkpoints()?.is_empty() {
        // The model the day ran on becomes the first checkpoint, so the
        // night can be rolled back.
        let sha = reverie_models::fetch::sha256_file(&base)?;
        store.add_checkpoint(&base.display().to_string(), &sha, None, true)?;
    }
    let sha = reverie_models::fetch::sha256_file(&merged)?;
    let cp = store.add_checkpoint(&merged.display().to_string(), &sha, Some(night.id), true)?;
    reverie_models::active::set_active(home, &merged)?;
    night.report["deploy"] = json!({"checkpoint": cp, "path": merged});
    night.finish(Stage::Deploy, t)?;
    Ok(NightOutcome {
        night: night.id,
        deployed: Some(merged),
        kept_reason: None,
        report: night.report.clone(),
    })
}

/// The sub-tasks that get the understanding pass: a reproducible share of
/// those the judge rewarded. Practice and tasker rewards were measured by a
/// program, and averaging a guess into them would only halve the measured
/// advantage and add noise.
fn for_understanding(tasks: &[JudgedTask], fraction: f64, seed: u64) -> Vec<usize> {
    let judged: Vec<usize> = (0..tasks.len())
        .filter(|&i| tasks[i].group.is_none())
        .collect();
    sample(judged.len(), fraction, seed)
        .into_iter()
        .map(|k| judged[k])
        .collect()
}

/// A reproducible choice of `ceil(fraction · n)` indices out of `n`.
fn sample(n: usize, fraction: f64, seed: u64) -> Vec<usize> {
    let k = ((n as f64) * fraction.clamp(0.0, 1.0)).ceil() as usize;
    let mut idx: Vec<usize> = (0..n).collect();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        idx.swap(i, (state % (i as u64 + 1)) as usize);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

fn mean(v: &[f32]) -> Option<f32> {
    (!v.is_empty()).then(|| v.iter().sum::<f32>() / v.len() as f32)
}

/// Adds the task checks to the perplexity verdict; the first family that
/// dropped by more than `max_drop` fails it.
fn with_task_checks(
    mut verdict: serde_json::Value,
    checks: Vec<FamilyCheck>,
    max_drop: f64,
) -> serde_json::Value {
    if let Some(c) = checks.iter().find(|c| c.regressed(max_drop)) {
        verdict["ok"] = json!(false);
        verdict["why"] = json!(format!(
            "{} tasks: {:.0}% solved before, {:.0}% after ({} tasks at level {}), a drop of more than the allowed {:.0} points",
            c.family,
            c.before * 100.0,
            c.after * 100.0,
            c.tasks,
            c.level,
            max_drop * 100.0
        ));
    }
    verdict["tasks"] = json!(checks);
    verdict
}

/// Training sequences: each judged sub-task is its channel's recorded tokens
/// up to the sub-task's last message, with earlier replies demoted to
/// context (the advantage belongs to this sub-task's actions only); the
/// token that ended a turn by mistake is marked, and so is every token of
/// a call that repeated the one before it to no effect. Each value
/// prediction is a sequence rewarded for the accuracy of the grade it
/// wrote; the attempts of one practice task share one prediction, which
/// becomes one sequence rewarded by its mean accuracy over them (one copy
/// per attempt cost a pass each and weighed a task by its attempt count).
fn sequences(
    store: &Store,
    tasks: &[JudgedTask],
    preds: &[Option<Prediction>],
    advs: &[Option<f32>],
    cfg: &NightConfig,
) -> Result<Vec<Sequence>, NightError> {
    let mut out = Vec::new();
    // Value answer tokens → (its sequence in `out`, sum and count of accuracies).
    let mut answers: HashMap<&[i32], (usize, f32, f32)> = HashMap::new();
    for ((task, pred), adv) in tasks.iter().zip(preds).zip(advs) {
        let Some(adv) = adv else { continue };
        let msgs = store.messages(ChannelId(task.channel))?;
        let unintended = store.unintended_ends(ChannelId(task.channel))?;
        let mut span = TokenSpan::default();
        let mut marks = Vec::new();
        for (i, m) in msgs.iter().enumerate().take(task.last + 1) {
            let mut s = m.tokens.clone();
            if task.checked && !cfg.practice_echo {
                // No world-model targets in a practice episode.
                for r in s.roles.iter_mut() {
                    if matches!(r, TokenRole::Env | TokenRole::User) {
                        *r = TokenRole::Context;
                    }
                }
            }
            if i < task.first {
                for r in s.roles.iter_mut().filter(|r| **r == TokenRole::Action) {
                    *r = TokenRole::Context;
                }
            } else if unintended.contains(&m.id) && !s.is_empty() {
                // The token that ended the turn too early.
                marks.push((span.len() + s.len() - 1, cfg.stray_end_advantage));
            } else if repeats_the_call_before(&msgs, i) {
                // The whole call, not just its first token: a mark on the
                // first token alone taught the model to open the same call
                // with another token (a ```json fence instead of the tag).
                let action: Vec<usize> = (0..s.len())
                    .filter(|&k| s.roles[k] == TokenRole::Action)
                    .collect();
                let each = cfg.repeated_call_advantage / action.len().max(1) as f32;
                marks.extend(action.iter().map(|&k| (span.len() + k, each)));
            }
            span.append(&s);
        }
        if span.len() >= 2 && span.count(TokenRole::Action) > 0 {
            out.push(Sequence {
                ids: span.ids,
                roles: span.roles,
                advantage: *adv,
                reward: None,
                group: None,
                token_advantages: marks,
            });
        }
        if let Some(p) = pred.as_ref().filter(|p| p.tokens.len() >= 2) {
            let accuracy = 1.0 - (p.answered() - task.reward).abs();
            let (at, sum, n) = answers.entry(&p.tokens.ids).or_insert_with(|| {
                out.push(Sequence {
                    ids: p.tokens.ids.clone(),
                    roles: p.tokens.roles.clone(),
                    advantage: 0.0,
                    reward: None,
                    group: Some("value-model".into()),
                    token_advantages: vec![],
                });
                (out.len() - 1, 0.0, 0.0)
            });
            *sum += accuracy;
            *n += 1.0;
            out[*at].reward = Some(*sum / *n);
        }
    }
    Ok(out)
}

/// Whether assistant message `i` is a call that repeated the turn's call just
/// before it to no effect: the same text, and every result it got says so.
fn repeats_the_call_before(msgs: &[Message], i: usize) -> bool {
    let is_reply = |m: &Message| m.role == MessageRole::Assistant;
    if !is_reply(&msgs[i]) {
        return false;
    }
    let results: Vec<&Message> = msgs[i + 1..]
        .iter()
        .take_while(|m| m.role == MessageRole::Tool)
        .collect();
    let before = msgs[..i]
        .iter()
        .rev()
        .take_while(|m| matches!(m.role, MessageRole::Tool | MessageRole::Assistant))
        .find(|m| is_reply(m));
    !results.is_empty()
        && results
            .iter()
            .all(|m| reverie_agent::repeats_an_earlier_call(&m.text))
        && before.is_some_and(|b| b.text.trim() == msgs[i].text.trim())
}

#[cfg(test)]
mod tests {
    use super::{for_understanding, sample, sequences, with_task_checks};
    use crate::config::NightConfig;
    use crate::judge::JudgedTask;
    use crate::verify::FamilyCheck;
    use reverie_core::{Home, MessageRole, TokenRole, TokenSpan};
    use reverie_store::Store;
    use reverie_train::data::Sequence;

    #[test]
    fn an_unintended_end_marks_its_last_token() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let span = |ids: &[i32], role| {
            let mut s = TokenSpan::default();
            for &i in ids {
                s.push(i, role, (role == TokenRole::Action).then_some(-0.5));
            }
            s
        };
        store
            .append_message(
                ch,
                MessageRole::User,
                "q",
                &span(&[1, 2, 3], TokenRole::User),
            )
            .unwrap();
        let early = store
            .append_message(
                ch,
                MessageRole::Assistant,
                "Here:",
                &span(&[4, 5], TokenRole::Action),
            )
            .unwrap();
        store
            .append_message(ch, MessageRole::User, "?", &span(&[6], TokenRole::Warning))
            .unwrap();
        store
            .append_message(
                ch,
                MessageRole::Assistant,
                "no",
                &span(&[7, 8], TokenRole::Action),
            )
            .unwrap();
        store.record_stray_end(early, true).unwrap();
        let task = JudgedTask {
            channel: ch.0,
            description: "t".into(),
            first: 0,
            last: 3,
            turns: 1,
            reward: 1.0,
            reason: String::new(),
            group: None,
            checked: false,
        };
        let seqs = sequences(
            &store,
            &[task],
            &[None],
            &[Some(0.5)],
            &NightConfig::default(),
        )
        .unwrap();
        assert_eq!(seqs.len(), 1);
        // ids 1 2 3 4 5 6 7 8: the reply [4, 5] ended at position 4
        assert_eq!(seqs[0].token_advantages, vec![(4, -1.0)]);
        assert_eq!(seqs[0].ids[4], 5);
    }

    #[test]
    fn a_value_answer_shared_by_attempts_is_one_sequence_with_their_mean_accuracy() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let made = std::cell::Cell::new(0);
        let attempt = |reward| {
            made.set(made.get() + 1);
            let ch = store
                .create_channel(&format!("attempt {}", made.get()))
                .unwrap();
            let mut s = TokenSpan::default();
            s.push(1, TokenRole::User, None);
            store
                .append_message(ch, MessageRole::User, "q", &s)
                .unwrap();
            JudgedTask {
                channel: ch.0,
                description: "practice: q".into(),
                first: 0,
                last: 0,
                turns: 1,
                reward,
                reason: String::new(),
                group: Some("q".into()),
                checked: true,
            }
        };
        let answer = |ids: &[i32], answered| {
            let mut tokens = TokenSpan::default();
            for &i in ids {
                tokens.push(i, TokenRole::Action, Some(-0.1));
            }
            Some(crate::value::Prediction {
                reward: 0.5,
                turns: 1,
                tokens,
                answered: Some(answered),
            })
        };
        let tasks = [attempt(1.0), attempt(0.0), attempt(0.0), attempt(1.0)];
        let shared = answer(&[7, 8, 9], 0.25);
        let preds = [
            shared.clone(),
            shared.clone(),
            shared,
            answer(&[7, 8, 10], 1.0),
        ];
        let seqs = sequences(
            &store,
            &tasks,
            &preds,
            &[Some(0.0); 4],
            &NightConfig::default(),
        )
        .unwrap();
        let value: Vec<&Sequence> = seqs
            .iter()
            .filter(|s| s.group.as_deref() == Some("value-model"))
            .collect();
        assert_eq!(value.len(), 2, "{seqs:?}");
        assert_eq!(value[0].ids, [7, 8, 9]);
        // Accuracies 0.25, 0.75 and 0.75 for the grade 0.25.
        assert!((value[0].reward.unwrap() - 1.75 / 3.0).abs() < 1e-6);
        assert_eq!(value[1].reward, Some(1.0));
    }

    #[test]
    fn a_call_repeated_to_no_effect_shares_its_mark_over_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        // Each message: [context token, action tokens...] so the mark must
        // skip the scaffolding.
        let mut next = 0;
        let mut add = |role: MessageRole, text: &str, n_action: usize| {
            let mut s = TokenSpan::default();
            let tok_role = match role {
                MessageRole::User => TokenRole::User,
                MessageRole::Tool => TokenRole::Env,
                _ => TokenRole::Context,
            };
            s.push(next, tok_role, None);
            next += 1;
            for _ in 0..n_action {
                s.push(next, TokenRole::Action, Some(-0.5));
                next += 1;
            }
            store.append_message(ch, role, text, &s).unwrap();
        };
        let call = r#"{"name": "calculator", "arguments": {"expression": "2+2"}}"#;
        let hint = "2+2 = 4\n\n(Same call and result as earlier in this turn: use it and answer.)";
        add(MessageRole::User, "2+2?", 0); // 0
        add(MessageRole::Assistant, call, 2); // 1 2 3
        add(MessageRole::Tool, "2+2 = 4", 0); // 4
        add(MessageRole::Assistant, call, 2); // 5 6 7: repeated, marked at 6 and 7
        add(MessageRole::Tool, hint, 0); // 8
        add(
            MessageRole::Assistant,
            r#"{"name": "list_files", "arguments": {}}"#,
            2,
        ); // 9 10 11
        add(MessageRole::Tool, "(empty)", 0); // 12
        add(MessageRole::Assistant, call, 2); // 13 14 15: not the call just before, not marked
        add(MessageRole::Tool, hint, 0); // 16
        add(MessageRole::Assistant, "4", 1); // 17 18
        let task = JudgedTask {
            channel: ch.0,
            description: "t".into(),
            first: 0,
            last: 10,
            turns: 1,
            reward: 1.0,
            reason: String::new(),
            group: None,
            checked: false,
        };
        let cfg = NightConfig {
            repeated_call_advantage: -0.7,
            ..NightConfig::default()
        };
        let seqs = sequences(
            &store,
            std::slice::from_ref(&task),
            &[None],
            &[Some(0.5)],
            &cfg,
        )
        .unwrap();
        assert_eq!(seqs[0].token_advantages, vec![(6, -0.35), (7, -0.35)]);
        let roles = |seq: &Sequence, role| seq.roles.iter().filter(|&&r| r == role).count();
        assert_eq!(
            (
                roles(&seqs[0], TokenRole::Env),
                roles(&seqs[0], TokenRole::User)
            ),
            (4, 1)
        );

        // Without ECHO on practice, a practice episode trains the policy
        // only: its tool results and prompts are context.
        let checked = JudgedTask {
            checked: true,
            ..task
        };
        let no_echo = NightConfig {
            practice_echo: false,
            ..cfg.clone()
        };
        let policy_only = sequences(
            &store,
            std::slice::from_ref(&checked),
            &[None],
            &[Some(0.5)],
            &no_echo,
        )
        .unwrap();
        assert_eq!(policy_only[0].ids, seqs[0].ids);
        assert_eq!(roles(&policy_only[0], TokenRole::Env), 0);
        assert_eq!(roles(&policy_only[0], TokenRole::User), 0);
        assert_eq!(
            roles(&policy_only[0], TokenRole::Action),
            roles(&seqs[0], TokenRole::Action)
        );
        let echo = NightConfig {
            practice_echo: true,
            ..cfg
        };
        let with_echo = sequences(&store, &[checked], &[None], &[Some(0.5)], &echo).unwrap();
        assert_eq!(with_echo[0].roles, seqs[0].roles);
    }

    #[test]
    fn the_understanding_sample_is_a_reproducible_share() {
        assert_eq!(sample(10, 0.3, 7).len(), 3);
        assert_eq!(sample(3, 0.3, 7).len(), 1);
        assert_eq!(sample(0, 0.3, 7), Vec::<usize>::new());
        assert_eq!(sample(10, 0.3, 7), sample(10, 0.3, 7));
        assert!(sample(10, 1.0, 1) == (0..10).collect::<Vec<_>>());
        let s = sample(50, 0.3, 9);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|&i| i < 50));
    }

    #[test]
    fn only_the_judges_rewards_get_the_understanding_pass() {
        let task = |group: Option<&str>| JudgedTask {
            channel: 1,
            description: String::new(),
            first: 0,
            last: 1,
            turns: 1,
            reward: 1.0,
            reason: String::new(),
            group: group.map(String::from),
            checked: false,
        };
        let tasks: Vec<JudgedTask> = (0..20)
            .map(|i| match i % 4 {
                0 => task(None),
                1 => task(Some("tasker: arithmetic")),
                _ => task(Some("arithmetic: Start with 3")),
            })
            .collect();
        let picked = for_understanding(&tasks, 0.3, 7);
        assert_eq!(
            picked.len(),
            2,
            "30 % of the 5 judged sub-tasks: {picked:?}"
        );
        assert!(
            picked.iter().all(|&i| tasks[i].group.is_none()),
            "{picked:?}"
        );
        assert_eq!(picked, for_understanding(&tasks, 0.3, 7));
        assert_eq!(
            for_understanding(&tasks, 1.0, 7),
            [0, 4, 8, 12, 16],
            "every judged one and nothing else"
        );
        assert!(for_understanding(&tasks[1..4], 1.0, 7).is_empty());
    }

    #[test]
    fn a_family_that_drops_fails_the_verdict_and_says_which() {
        let check = |family: &str, before, after| {
            let family = reverie_practice::Family::parse(family).unwrap();
            FamilyCheck::with_rates(family, 8, before, after)
        };
        let ok = serde_json::json!({"ok": true, "why": ""});
        let kept = with_task_checks(
            ok.clone(),
            vec![check("arithmetic", 0.25, 0.5), check("units", 0.25, 0.25)],
            0.25,
        );
        assert_eq!(kept["ok"], true);
        assert_eq!(kept["tasks"].as_array().unwrap().len(), 2);
        let failed = with_task_checks(
            ok,
            vec![check("arithmetic", 0.5, 0.5), check("units", 0.625, 0.25)],
            0.25,
        );
        assert_eq!(failed["ok"], false);
        let why = failed["why"].as_str().unwrap();
        assert!(
            why.starts_with("units tasks: 62% solved before, 25% after"),
            "{why}"
        );
    }
}
