//! The held-out checks: perplexity of a fixed text under llama.cpp, and
//! the success rate on fresh tasks of the practised and held-out families.

use std::path::Path;
use std::sync::Arc;

use reverie_agent::CancelFlag;
use reverie_core::Home;
use reverie_infer::{Engine, EngineConfig};
use reverie_practice::{paired, run_model, Family, Paired, RunConfig, Tally, EVAL_SEED};
use reverie_store::Store;
use serde::Serialize;

use crate::config::NightConfig;
use crate::error::NightError;

pub const SANITY_TEXT: &str = include_str!("../../../assets/prompts/sanity.txt");

/// Perplexity of the sanity text under the model at `path`.
pub fn perplexity(path: &Path, gpu_layers: u32) -> Result<f64, reverie_infer::InferError> {
    let engine = Engine::load(
        path,
        EngineConfig {
            slots: 1,
            n_ctx: 512,
            gpu_layers,
            ..EngineConfig::default()
        },
    )?;
    let ids = engine.tokenize_document(SANITY_TEXT);
    let lps = engine.score(&ids)?;
    let mean = lps.iter().map(|&x| x as f64).sum::<f64>() / lps.len().max(1) as f64;
    Ok((-mean).exp())
}

/// Level of the held-out family's check (the default of `reverie eval`).
const HELD_OUT_LEVEL: u32 = 3;

/// The families to measure after a night: each one practised since
/// `since_ms`, at the level of its latest episode, then the held-out family.
/// Empty when nothing was practised (a night of chat has no task families).
pub fn families_to_check(store: &Store, since_ms: i64) -> Result<Vec<(Family, u32)>, NightError> {
    let mut out: Vec<(Family, u32)> = Vec::new();
    for e in store.episodes_since(since_ms)?.iter().rev() {
        let Ok(f) = Family::parse(&e.family) else {
            continue;
        };
        if e.kind == "practice" && !out.iter().any(|(g, _)| *g == f) {
            out.push((f, e.difficulty));
        }
    }
    if !out.is_empty() {
        out.sort_by_key(|(f, _)| f.as_str());
        let held_out = Family::ALL.into_iter().filter(|f| f.held_out());
        out.extend(held_out.map(|f| (f, HELD_OUT_LEVEL)));
    }
    Ok(out)
}

/// One family's success rate on the same tasks before and after the night.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyCheck {
    pub family: String,
    pub level: u32,
    pub tasks: usize,
    pub before: f64,
    pub after: f64,
    /// Task by task: gained, lost and how likely that split is by chance.
    pub paired: Paired,
}

impl FamilyCheck {
    pub fn regressed(&self, max_drop: f64) -> bool {
        self.before - self.after > max_drop + 1e-9
    }
}

/// Measures every family of `families` on the `before` and `after` models
/// (greedy, the eval seed, `cfg.verify_tasks` tasks each).
pub fn task_success(
    home: &Home,
    before: &Path,
    after: &Path,
    families: &[(Family, u32)],
    cfg: &NightConfig,
    on_family: &mut dyn FnMut(usize, Family),
) -> Result<Vec<FamilyCheck>, NightError> {
    let store = Arc::new(Store::open(home)?);
    let services = Arc::new(reverie_tools::Services::new(home));
    let cancel = CancelFlag::default();
    let mut out = Vec::new();
    for (i, &(family, level)) in families.iter().enumerate() {
        on_family(i, family);
        let run = RunConfig::eval(family, cfg.verify_tasks, EVAL_SEED, level);
        let attempt =
            |model: &Path| run_model(model, cfg.gpu_layers, &store, &services, &run, &cancel);
        let (was, now) = (attempt(before)?, attempt(after)?);
        out.push(FamilyCheck {
            family: family.as_str().to_string(),
            level,
            tasks: cfg.verify_tasks,
            before: Tally::of(&was).success(),
            after: Tally::of(&now).success(),
            paired: paired(&was, &now),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{MessageRole, TokenSpan};
    use reverie_store::{EpisodeKind, NewEpisode};

    #[test]
    fn practised_families_are_checked_with_the_held_out_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        assert!(families_to_check(&store, 0).unwrap().is_empty());
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
        assert!(
            families_to_check(&store, 0).unwrap().is_empty(),
            "eval alone trains nothing, so there is nothing to check"
        );
        record("strings", false, 2);
        record("arithmetic", false, 2);
        record("arithmetic", false, 4);
        let got = families_to_check(&store, 0).unwrap();
        assert_eq!(
            got,
            vec![
                (Family::Arithmetic, 4),
                (Family::Strings, 2),
                (Family::Units, HELD_OUT_LEVEL)
            ],
            "the latest level of each practised family, then the held-out one"
        );
    }

    #[test]
    fn a_drop_beyond_the_allowance_is_a_regression() {
        let c = |before, after| FamilyCheck {
            family: "arithmetic".into(),
            level: 2,
            tasks: 8,
            before,
            after,
            // Recorded for the report; the gate reads the rates.
            paired: reverie_practice::Paired {
                tasks: 8,
                gained: 0,
                lost: 0,
                p_value: 1.0,
            },
        };
        assert!(!c(0.5, 0.25).regressed(0.25));
        assert!(c(0.5, 0.125).regressed(0.25));
        assert!(!c(0.0, 1.0).regressed(0.0));
    }
}
