//! Reports already in users' databases load, whatever version wrote them:
//! one stored report of each earlier schema (`data/reports/`), read as the
//! typed `NightReport` and written back unchanged in meaning.

use reverie_night::report::NightReport;
use reverie_night::{Stage, TaskKind};

fn load(name: &str) -> NightReport {
    let path = format!("{}/tests/data/reports/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let report = NightReport::from_json(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
    let again = NightReport::from_json(&report.to_json()).unwrap();
    assert_eq!(again, report, "{name} survives a write and a read");
    report
}

#[test]
fn the_first_nights_reports_load() {
    let r = load("1-first-nights.json");
    assert!((r.total_seconds() - 165.41).abs() < 1e-9);
    assert!(r.is_done(Stage::Deploy) && !r.is_done(Stage::Understand));
    assert_eq!(r.tasks[0].kind, TaskKind::Judged);
    assert_eq!(r.tasks[0].group, None);
    let p = r.predictions[0].as_ref().unwrap();
    assert_eq!(
        (p.reward, p.answered()),
        (0.6, 0.6),
        "no answered grade: the reward"
    );
    assert!(r.understanding.is_empty() && r.memory.is_none() && r.practice.is_empty());
    let train = r.train.unwrap();
    assert_eq!((train.steps, train.tokens, train.data), (1, 412, None));
    assert_eq!(train.losses[0].total, 0.17);
    assert_eq!(r.export.unwrap().report.bytes, 531_000_000);
    let v = r.verify.unwrap();
    assert!(v.ok && v.tasks.is_empty());
    assert_eq!(v.perplexity_after, Some(9.77));
    assert_eq!(r.deploy.as_ref().unwrap().checkpoint, Some(2));
    assert_eq!(r.notes[0].stage, Some(Stage::Judge));
}

#[test]
fn reports_with_understanding_memory_and_a_kept_model_load() {
    let r = load("2-understanding-and-memory.json");
    assert_eq!(r.understanding, [Some(0.8), None]);
    assert_eq!(r.advantages, [None, Some(0.3)]);
    assert!(r.predictions[0].is_none());
    let m = r.memory.unwrap();
    assert_eq!(
        (m.entries, m.similarity.as_str(), m.asked),
        (1, "word-overlap", None)
    );
    let d = r.deploy.unwrap();
    assert!(d.checkpoint.is_none() && d.kept.unwrap().starts_with("perplexity"));
    assert!(!r.verify.unwrap().ok);
}

#[test]
fn reports_with_practice_and_task_checks_load() {
    let r = load("3-practice-and-task-checks.json");
    assert_eq!(r.practice.len(), 1);
    assert!(r.tasks.iter().all(|t| t.checked && t.group.is_some()));
    let check = &r.verify.unwrap().tasks[0];
    assert_eq!((check.family.as_str(), check.tasks), ("arithmetic", 8));
    assert_eq!((check.paired.gained, check.paired.lost), (2, 0));
    assert!(check.before_outcomes.is_empty() && check.before_from_night.is_none());
}

#[test]
fn reports_with_outcomes_and_signal_counts_load() {
    let r = load("4-outcomes-and-signal.json");
    let train = r.train.unwrap();
    assert_eq!((train.sequences, train.without_signal), (1, 1));
    assert!(train.data.unwrap().ends_with("train-data.jsonl"));
    assert_eq!(r.memory.unwrap().asked, Some(1));
    assert_eq!(r.predictions[0].as_ref().unwrap().answered(), 0.3);
    let v = r.verify.unwrap();
    assert_eq!(v.perplexity_before_from_night, Some(3));
    assert_eq!(v.tasks[0].after_outcomes.len(), 2);
    assert_eq!(v.tasks[0].before_from_night, Some(3));
    assert!(r.counts.is_some() && r.channels.is_empty());
}

#[test]
fn cancelled_and_failed_nights_load_with_what_they_finished() {
    let r = load("5-cancelled-early.json");
    assert!(r.cancelled && r.is_done(Stage::Collect) && !r.is_done(Stage::Judge));
    assert!(r.tasks.is_empty() && r.verify.is_none() && r.deploy.is_none());
    let r = load("6-failed-and-left-running.json");
    assert!(r.error.unwrap().contains("out of memory"));
    assert_eq!(r.done, [Stage::Practice, Stage::Collect]);
}

#[test]
fn an_unreadable_report_says_so_instead_of_vanishing() {
    assert_eq!(
        NightReport::from_json(&serde_json::Value::Null).unwrap(),
        NightReport::default()
    );
    let broken = serde_json::json!({"tasks": "not a list"});
    assert!(NightReport::from_json(&broken).is_err());
    let shown = NightReport::from_json_or_empty(&broken);
    assert!(shown.error.unwrap().contains("could not be read"));
}
