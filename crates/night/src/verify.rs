//! The held-out checks: perplexity of a fixed text under llama.cpp, and
//! the success rate on fresh tasks of the practised and held-out families
//! and of desk work (simulated requests in a scratch data folder).

use std::path::Path;
use std::sync::Arc;

use reverie_agent::CancelFlag;
use reverie_core::Home;
use reverie_infer::{Engine, EngineConfig};
use reverie_practice::days::{day_tasks, eval_day_tasks, DayFamily};
use reverie_practice::{paired, run_model, Family, Outcome, Paired, RunConfig, EVAL_SEED};
use reverie_store::{EpisodeKind, Store};
use serde::{Deserialize, Serialize};

use crate::config::NightConfig;
use crate::error::NightError;
use crate::report::NightReport;

pub const SANITY_TEXT: &str = include_str!("../../../assets/prompts/sanity.txt");

/// Perplexity of the sanity text under the model at `path`.
pub fn perplexity(path: &Path, gpu_layers: u32) -> Result<f64, reverie_infer::InferError> {
    let engine = Engine::load(path, EngineConfig::sized(1, 512, gpu_layers, None))?;
    let ids = engine.tokenize_document(SANITY_TEXT);
    let lps = engine.score(&ids)?;
    let mean = lps.iter().map(|&x| x as f64).sum::<f64>() / lps.len().max(1) as f64;
    Ok((-mean).exp())
}

/// Level of the held-out family's check (the default of `reverie eval`).
const HELD_OUT_LEVEL: u32 = 3;

/// Level a family never practised is checked at (where the default model
/// passes most tasks, so a night that breaks it shows).
const UNPRACTISED_LEVEL: u32 = 1;

/// Level desk-work families are checked at (`bench days`' default, where
/// the default model passes about half of them).
const DESK_LEVEL: u32 = 2;

/// Seed of the desk checks' tasks: not the eval seed, so the tasks that
/// gate a night are never the ones `bench days` measures it on.
const DESK_SEED: u64 = EVAL_SEED ^ 0x6465_736B;

/// The families to measure after every night, day nights included: each
/// trainable family at the level of its latest practice episode (level 1
/// if never practised), on a fixed set of tasks at the eval seed so the old
/// model's results can be reused, then the held-out families, which no
/// night trains on, then the desk-work families of `desk`.
pub fn families_to_check(
    store: &Store,
    desk: &[DayFamily],
) -> Result<Vec<(DayFamily, u32)>, NightError> {
    let mut out: Vec<(Family, u32)> = Vec::new();
    for e in store.episodes_since(0)?.iter().rev() {
        let Ok(f) = Family::parse(&e.family) else {
            continue;
        };
        if e.kind == EpisodeKind::Practice && !f.held_out() && !out.iter().any(|(g, _)| *g == f) {
            out.push((f, e.difficulty));
        }
    }
    for f in Family::ALL.into_iter().filter(|f| !f.held_out()) {
        if !out.iter().any(|(g, _)| *g == f) {
            out.push((f, UNPRACTISED_LEVEL));
        }
    }
    out.sort_by_key(|(f, _)| f.as_str());
    let held_out = Family::ALL.into_iter().filter(|f| f.held_out());
    out.extend(held_out.map(|f| (f, HELD_OUT_LEVEL)));
    let mut out: Vec<(DayFamily, u32)> = out.into_iter().map(|(f, l)| (f.into(), l)).collect();
    for &f in desk.iter().filter(|f| f.practice().is_none()) {
        if !out.iter().any(|(g, _)| *g == f) {
            out.push((f, DESK_LEVEL));
        }
    }
    Ok(out)
}

/// One family's success rate on the same tasks before and after the night.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct FamilyCheck {
    pub family: String,
    pub level: u32,
    pub tasks: usize,
    pub before: f64,
    pub after: f64,
    /// Task by task: gained, lost and how likely that split is by chance.
    pub paired: Paired,
    #[serde(default)]
    pub before_outcomes: Vec<Outcome>,
    #[serde(default)]
    pub after_outcomes: Vec<Outcome>,
    /// The earlier night that had already measured the old model on these
    /// tasks (as the model it deployed), when those results were reused
    /// instead of measured again.
    #[ts(type = "number | null")]
    pub before_from_night: Option<i64>,
}

impl FamilyCheck {
    pub fn new(
        family: DayFamily,
        level: u32,
        before_outcomes: Vec<Outcome>,
        after_outcomes: Vec<Outcome>,
        before_from_night: Option<i64>,
    ) -> FamilyCheck {
        let rate =
            |o: &[Outcome]| o.iter().filter(|o| o.passed).count() as f64 / o.len().max(1) as f64;
        FamilyCheck {
            family: family.as_str().to_string(),
            level,
            tasks: after_outcomes.len(),
            before: rate(&before_outcomes),
            after: rate(&after_outcomes),
            paired: paired(&before_outcomes, &after_outcomes),
            before_outcomes,
            after_outcomes,
            before_from_night,
        }
    }

    /// A check of `tasks` tasks, the first `before` and `after` shares of
    /// them passed.
    #[cfg(test)]
    pub(crate) fn with_rates(
        family: DayFamily,
        tasks: usize,
        before: f64,
        after: f64,
    ) -> FamilyCheck {
        let outcomes = |share: f64| -> Vec<Outcome> {
            (0..tasks)
                .map(|i| Outcome {
                    prompt: format!("task {i}"),
                    passed: (i as f64) < share * tasks as f64 - 1e-9,
                })
                .collect()
        };
        FamilyCheck::new(family, 3, outcomes(before), outcomes(after), None)
    }

    /// The new model lost more of these tasks than it gained.
    pub fn regressed(&self) -> bool {
        self.paired.lost > self.paired.gained
    }
}

/// What an earlier night's verify stage measured on the model it deployed:
/// when that model is tonight's old model, its perplexity and task results
/// are already known (the same file, the same fixed text and tasks, greedy
/// decoding), so they are read back instead of measured again.
#[derive(Debug, Clone)]
pub struct Measured {
    pub night: i64,
    pub perplexity: Option<f64>,
    pub checks: Vec<FamilyCheck>,
}

impl Measured {
    /// The latest night that deployed the file at `model`, if it is still
    /// that file (same SHA-256), with what its verify stage measured.
    pub fn of(store: &Store, model: &Path) -> Result<Option<Measured>, NightError> {
        let Ok(model) = std::fs::canonicalize(model) else {
            return Ok(None);
        };
        let Some((night, sha)) = store.checkpoints()?.into_iter().rev().find_map(|c| {
            c.night
                .filter(|_| crate::checkpoint::same_file(&c.path, &model))
                .map(|n| (n, c.sha256))
        }) else {
            return Ok(None);
        };
        if reverie_models::fetch::sha256_file(&model)? != sha {
            return Ok(None);
        }
        let Some(record) = store.nights()?.into_iter().find(|n| n.id == night) else {
            return Ok(None);
        };
        // Reports written before outcomes were recorded have none to reuse.
        let verify = NightReport::from_json_or_empty(&record.report)
            .verify
            .unwrap_or_default();
        Ok(Some(Measured {
            night,
            perplexity: verify.perplexity_after,
            checks: verify.tasks,
        }))
    }

    /// The new model's outcomes of the same check: family, level and count.
    fn outcomes(&self, family: DayFamily, level: u32, tasks: usize) -> Option<Vec<Outcome>> {
        self.checks
            .iter()
            .find(|c| {
                c.family == family.as_str()
                    && c.level == level
                    && tasks > 0
                    && c.after_outcomes.len() == tasks
            })
            .map(|c| c.after_outcomes.clone())
    }
}

/// Measures every family of `families` on the `before` and `after` models
/// (greedy, `cfg.verify_tasks` fixed tasks each); the old model's side
/// comes from `earlier` where that night already measured it.
pub fn task_success(
    home: &Home,
    (before, earlier): (&Path, Option<&Measured>),
    after: &Path,
    families: &[(DayFamily, u32)],
    cfg: &NightConfig,
    cancel: &CancelFlag,
    on_family: &mut dyn FnMut(usize, DayFamily),
) -> Result<Vec<FamilyCheck>, NightError> {
    let store = Arc::new(Store::open(home)?);
    let services = Arc::new(reverie_tools::Services::new(home));
    let desk = DeskFolder::new(home);
    // A child: each attempt's turn resets its flag, never the night's.
    let cancel = cancel.child();
    let mut out = Vec::new();
    for (i, &(family, level)) in families.iter().enumerate() {
        if cancel.is_cancelled() {
            return Err(NightError::Cancelled);
        }
        on_family(i, family);
        let attempt = |model: &Path| -> Result<Vec<Outcome>, NightError> {
            let outcomes = match family.practice() {
                Some(practice) => {
                    let run = RunConfig::eval(practice, cfg.verify_tasks, EVAL_SEED, level);
                    let episodes =
                        run_model(model, cfg.gpu_layers, &store, &services, &run, &cancel)?;
                    Outcome::of(&episodes)
                }
                None => desk.measure(model, family, level, cfg, &cancel)?,
            };
            // A cancelled run stops early; its partial outcomes mean nothing.
            if cancel.is_cancelled() {
                return Err(NightError::Cancelled);
            }
            Ok(outcomes)
        };
        let known = earlier.and_then(|m| {
            m.outcomes(family, level, cfg.verify_tasks)
                .map(|o| (o, m.night))
        });
        let (was, from) = match known {
            Some((o, night)) => (o, Some(night)),
            None => (attempt(before)?, None),
        };
        out.push(FamilyCheck::new(family, level, was, attempt(after)?, from));
    }
    Ok(out)
}

/// The scratch folder desk work is measured in, a data folder for each
/// model's run of a family: their channels, notes and workspaces never
/// reach the user's store (a night would judge them), and the folder goes
/// when the check is done, or at the next check after a kill.
struct DeskFolder {
    root: std::path::PathBuf,
    user: Home,
    runs: std::cell::Cell<usize>,
}

impl DeskFolder {
    /// Made on the first run; what a killed night left there goes now.
    fn new(home: &Home) -> DeskFolder {
        let root = home.root().join("night-scratch").join("desk");
        let _ = std::fs::remove_dir_all(&root);
        DeskFolder {
            root,
            user: home.clone(),
            runs: std::cell::Cell::new(0),
        }
    }

    /// `model` on the family's fixed tasks, each in a fresh channel.
    fn measure(
        &self,
        model: &Path,
        family: DayFamily,
        level: u32,
        cfg: &NightConfig,
        cancel: &CancelFlag,
    ) -> Result<Vec<Outcome>, NightError> {
        let run = self.runs.get();
        self.runs.set(run + 1);
        let scratch = Home::new(self.root.join(format!("{}-{run}", family.as_str())));
        let io = |e: std::io::Error| {
            NightError::Io(format!(
                "preparing {} for the desk checks: {e}",
                scratch.root().display()
            ))
        };
        std::fs::create_dir_all(scratch.root()).map_err(io)?;
        reverie_embed::share_model(&self.user, &scratch).map_err(io)?;
        let store = Arc::new(Store::open(&scratch)?);
        let services = Arc::new(reverie_tools::Services::new(&scratch));
        let engine = Engine::load(model, EngineConfig::sized(1, 8192, cfg.gpu_layers, None))?;
        let tasks = day_tasks(&[family], cfg.verify_tasks, DESK_SEED, level);
        let prefix = format!("verify-{}", family.as_str());
        let outcomes = eval_day_tasks(
            &engine,
            &store,
            &services,
            &tasks,
            &prefix,
            false,
            cancel,
            &mut |_| {},
        )?;
        Ok(outcomes.into_iter().map(|(_, o)| o).collect())
    }
}

impl Drop for DeskFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{MessageRole, TokenSpan};
    use reverie_store::NewEpisode;

    #[test]
    fn every_family_is_checked_at_its_practised_level_with_the_held_out_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let held_out = (DayFamily::Units, HELD_OUT_LEVEL);
        let unpractised = vec![
            (DayFamily::Arithmetic, UNPRACTISED_LEVEL),
            (DayFamily::Ledger, UNPRACTISED_LEVEL),
            (DayFamily::Strings, UNPRACTISED_LEVEL),
            held_out,
        ];
        assert_eq!(
            families_to_check(&store, &[]).unwrap(),
            unpractised,
            "a night of chat alone is checked on every family"
        );
        let record = |family: &str, eval: bool, difficulty: u32| {
            let ch = store
                .create_channel(&format!("{family}-{difficulty}-{eval}"))
                .unwrap();
            store
                .append_message(ch, MessageRole::User, "task", &TokenSpan::default())
                .unwrap();
            store
                .record_episode(&NewEpisode {
                    channel: ch,
                    family,
                    kind: if eval {
                        EpisodeKind::Eval
                    } else {
                        EpisodeKind::Practice
                    },
                    difficulty,
                    prompt: "task",
                    expected: "1",
                    passed: false,
                    why: "",
                })
                .unwrap();
        };
        record("units", true, 5);
        assert_eq!(
            families_to_check(&store, &[]).unwrap(),
            unpractised,
            "eval alone sets no level"
        );
        record("strings", false, 2);
        record("arithmetic", false, 2);
        record("arithmetic", false, 4);
        let got = families_to_check(&store, &[]).unwrap();
        assert_eq!(
            got,
            vec![
                (DayFamily::Arithmetic, 4),
                (DayFamily::Ledger, UNPRACTISED_LEVEL),
                (DayFamily::Strings, 2),
                (DayFamily::Units, HELD_OUT_LEVEL)
            ],
            "the latest level of each family practised, then the held-out one"
        );
        let desk = [DayFamily::Files, DayFamily::Arithmetic, DayFamily::Notes];
        let with_desk = families_to_check(&store, &desk).unwrap();
        assert_eq!(
            with_desk[got.len()..],
            [
                (DayFamily::Files, DESK_LEVEL),
                (DayFamily::Notes, DESK_LEVEL)
            ],
            "desk work comes last, a practice family named there only once"
        );
    }

    /// A night recorded with `report` that deployed `model.gguf` in `dir`;
    /// returns the night's id.
    fn deployed(store: &Store, dir: &Path, report: &serde_json::Value) -> i64 {
        let model = dir.join("model.gguf");
        let sha = reverie_models::fetch::sha256_file(&model).unwrap();
        let night = store.start_night().unwrap();
        store
            .update_night(night, reverie_store::NightStatus::Done, "deploy", report)
            .unwrap();
        store
            .add_checkpoint(model.to_str().unwrap(), &sha, Some(night), true)
            .unwrap();
        night
    }

    #[test]
    fn the_old_model_is_measured_once_by_the_night_that_deployed_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let model = dir.path().join("model.gguf");
        std::fs::write(&model, b"night one's model").unwrap();
        // A model no night deployed has nothing measured.
        assert!(Measured::of(&store, &model).unwrap().is_none());

        let check = FamilyCheck::with_rates(DayFamily::Arithmetic, 4, 0.25, 0.75);
        let report = serde_json::json!({"verify": {
            "ok": true, "perplexity_before": 40.0, "perplexity_after": 41.5, "tasks": [check],
        }});
        let night = deployed(&store, dir.path(), &report);
        let m = Measured::of(&store, &model)
            .unwrap()
            .expect("measured by night 1");
        assert_eq!((m.night, m.perplexity), (night, Some(41.5)));
        // The new model's side of the same check becomes the old side now.
        let known = m.outcomes(DayFamily::Arithmetic, 3, 4).unwrap();
        assert_eq!(known, check.after_outcomes);
        assert_eq!(known.iter().filter(|o| o.passed).count(), 3);
        // Another level, count or family is not the same check.
        assert!(m.outcomes(DayFamily::Arithmetic, 2, 4).is_none());
        assert!(m.outcomes(DayFamily::Arithmetic, 3, 8).is_none());
        assert!(m.outcomes(DayFamily::Units, 3, 4).is_none());

        // A file changed since it was deployed is measured again.
        std::fs::write(&model, b"edited by hand").unwrap();
        assert!(Measured::of(&store, &model).unwrap().is_none());
    }

    #[test]
    fn a_report_without_outcomes_has_nothing_to_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let model = dir.path().join("model.gguf");
        std::fs::write(&model, b"older night's model").unwrap();
        // Written before task outcomes were recorded: rates only.
        let report = serde_json::json!({"verify": {"ok": true, "perplexity_after": 40.0, "tasks": [
            {"family": "arithmetic", "level": 3, "tasks": 4, "before": 0.5, "after": 0.5}
        ]}});
        deployed(&store, dir.path(), &report);
        let m = Measured::of(&store, &model).unwrap().unwrap();
        assert_eq!(m.perplexity, Some(40.0));
        assert!(m.outcomes(DayFamily::Arithmetic, 3, 4).is_none());
    }

    #[test]
    fn losing_more_tasks_than_gained_is_a_regression() {
        let c = |before: &[bool], after: &[bool]| {
            let o = |v: &[bool]| {
                v.iter()
                    .enumerate()
                    .map(|(i, &passed)| Outcome {
                        prompt: format!("task {i}"),
                        passed,
                    })
                    .collect::<Vec<_>>()
            };
            FamilyCheck::new(DayFamily::Arithmetic, 3, o(before), o(after), None)
        };
        // The same rate, different tasks: one lost, one gained.
        assert!(!c(&[true, false, true], &[false, true, true]).regressed());
        // One lost, none gained: a drop of one task in sixteen still counts.
        let mut before = [true; 16];
        let mut after = [true; 16];
        before[15] = false;
        after[3] = false;
        after[15] = false;
        assert!(c(&before, &after).regressed());
        assert!(!c(&[false, false], &[true, true]).regressed());
    }

    /// A folder with a tiny random-weight model and an empty data folder.
    fn tiny_night() -> (tempfile::TempDir, std::path::PathBuf, Home) {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny.gguf");
        let tiny = reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2);
        reverie_gguf::synth::write(&model, &tiny).unwrap();
        let home = Home::new(dir.path().join("home"));
        (dir, model, home)
    }

    /// Desk work is measured in a scratch data folder of its own: the
    /// user's store gets no channel, note or episode from it, each model
    /// runs the same tasks, and the folder is gone afterwards.
    #[test]
    fn desk_checks_run_in_a_scratch_folder_that_leaves_nothing_behind() {
        let (_dir, model, home) = tiny_night();
        let cfg = NightConfig {
            verify_tasks: 2,
            ..NightConfig::default()
        };
        let families = [
            (DayFamily::Files, DESK_LEVEL),
            (DayFamily::Notes, DESK_LEVEL),
        ];
        let mut started = Vec::new();
        let checks = task_success(
            &home,
            (&model, None),
            &model,
            &families,
            &cfg,
            &CancelFlag::default(),
            &mut |_, f| started.push(f),
        )
        .unwrap();
        assert_eq!(started, [DayFamily::Files, DayFamily::Notes]);
        assert_eq!(checks.len(), 2);
        for (check, (family, _)) in checks.iter().zip(families) {
            assert_eq!(check.family, family.as_str());
            assert_eq!((check.tasks, check.level), (2, DESK_LEVEL));
            let prompts = |o: &[Outcome]| o.iter().map(|o| o.prompt.clone()).collect::<Vec<_>>();
            assert_eq!(
                prompts(&check.before_outcomes),
                prompts(&check.after_outcomes)
            );
            let first = &day_tasks(&[family], 2, DESK_SEED, DESK_LEVEL)[0].steps[0].request;
            assert_eq!(check.after_outcomes[0].prompt, format!("{first} (task 1)"));
            assert_eq!(check.paired.tasks, 2, "each task is paired with itself");
        }
        let store = Store::open(&home).unwrap();
        assert!(store.channels().unwrap().is_empty());
        assert!(store.every_note().unwrap().is_empty());
        assert!(store.episodes_since(0).unwrap().is_empty());
        assert!(!home.root().join("night-scratch").join("desk").exists());
    }

    /// Cancelling the night while verify measures task families stops it
    /// within seconds, not after every attempt of every family.
    #[test]
    fn a_cancel_during_the_task_checks_stops_them_within_seconds() {
        let (_dir, model, home) = tiny_night();
        let cfg = NightConfig {
            // Far more work than the test waits for.
            verify_tasks: 2000,
            ..NightConfig::default()
        };
        let families = [(DayFamily::Arithmetic, 2), (DayFamily::Units, 3)];
        let cancel = CancelFlag::default();
        let presser = cancel.clone();
        let started = std::time::Instant::now();
        let pressed = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            presser.cancel();
            std::time::Instant::now()
        });
        let result = task_success(
            &home,
            (&model, None),
            &model,
            &families,
            &cfg,
            &cancel,
            &mut |_, _| {},
        );
        let stopped = std::time::Instant::now();
        let pressed = pressed.join().unwrap();
        assert!(matches!(result, Err(NightError::Cancelled)), "{result:?}");
        assert!(
            stopped.duration_since(pressed) < std::time::Duration::from_secs(5),
            "stopped {:?} after the press (ran {:?})",
            stopped.duration_since(pressed),
            started.elapsed()
        );
        // Pressed before it starts: nothing is measured.
        let before = task_success(
            &home,
            (&model, None),
            &model,
            &families,
            &cfg,
            &cancel,
            &mut |_, _| panic!("no family is started after a cancel"),
        );
        assert!(matches!(before, Err(NightError::Cancelled)));
    }
}
