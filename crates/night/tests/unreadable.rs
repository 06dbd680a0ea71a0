//! A running night whose record this version cannot read is kept as it
//! is, marked failed, and the next sleep starts a new night instead of
//! failing forever.

use reverie_core::Home;
use reverie_night::{run_night, CancelFlag, NightConfig, NightEvent, NightReport, Stage};
use reverie_store::{NightStatus, Store};

#[test]
fn an_unreadable_running_night_is_kept_failed_and_a_new_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let store = Store::open(&home).unwrap();
    let broken = serde_json::json!({"tasks": "not a list", "done": ["collect"]});
    let old = store.start_night().unwrap();
    store
        .update_night(old, NightStatus::Running, "judge", &broken)
        .unwrap();

    let mut events = Vec::new();
    // An empty day: no stage needs the model, so none is given.
    let out = run_night(
        &home,
        &store,
        &dir.path().join("no-model.gguf"),
        &NightConfig::default(),
        &CancelFlag::default(),
        &mut |ev| events.push(ev),
    )
    .unwrap();

    let nights = store.nights().unwrap();
    assert_eq!(nights.len(), 2);
    assert_eq!(nights[0].status, NightStatus::Failed);
    assert_eq!(
        nights[0].report, broken,
        "the unreadable record is kept as it was"
    );
    assert_eq!(out.night, nights[1].id);
    assert!(out.deployed.is_none());
    let kept = out.kept_reason.unwrap_or_default();
    assert!(kept.contains("nothing to train"), "{kept:?}");
    let report = NightReport::from_json(&nights[1].report).unwrap();
    assert!(
        report.notes[0].message.contains("could not be resumed"),
        "{report:?}"
    );
    assert!(report.is_done(Stage::Advantage) && !report.is_done(Stage::Train));
    assert!(events.iter().any(|e| matches!(
        e,
        NightEvent::StageFinished {
            stage: Stage::Collect,
            ..
        }
    )));
}
