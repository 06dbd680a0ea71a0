//! The value model never sees tonight's judgements.

use reverie_core::Home;
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Engine, EngineConfig};
use reverie_night::{predict, ValueMemory};
use reverie_store::{NightStatus, Store};
use serde_json::json;

#[test]
fn a_prediction_does_not_depend_on_tonight_s_judgements() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path())).unwrap();
    let past = store.start_night().unwrap();
    let task = |d: &str, r: f32| json!({"channel": 1, "description": d, "first": 0, "last": 1, "turns": 2, "reward": r, "reason": ""});
    store
        .update_night(
            past,
            NightStatus::Done,
            "deploy",
            &json!({"tasks": [task("sort a list of numbers in python", 0.9)]}),
        )
        .unwrap();
    let tonight = store.start_night().unwrap();

    let model = dir.path().join("m.gguf");
    synth::write(&model, &SynthConfig::tiny(Arch::Llama)).unwrap();
    let engine = Engine::load(
        &model,
        EngineConfig {
            slots: 1,
            n_ctx: 2048,
            threads: 1,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let b = "sort a list of words in python";

    let mem_before = ValueMemory::from_finished_nights(&store, 0).unwrap();
    let before = predict(&engine, &mem_before.nearest(b, 5, 0.9), b, 1).unwrap();
    // Task A of the same night is judged (recorded in tonight's report).
    store
        .update_night(
            tonight,
            NightStatus::Running,
            "judge",
            &json!({"tasks": [task("sort a list of numbers in python quickly", 0.1)]}),
        )
        .unwrap();
    let mem_after = ValueMemory::from_finished_nights(&store, 0).unwrap();
    let after = predict(&engine, &mem_after.nearest(b, 5, 0.9), b, 1).unwrap();

    assert_eq!(
        mem_after.entries.len(),
        1,
        "only the finished night is remembered"
    );
    assert_eq!(before.tokens.ids, after.tokens.ids);
    assert_eq!(before.tokens.roles, after.tokens.roles);
    assert_eq!((before.reward, before.turns), (after.reward, after.turns));
    // The baseline is the mean grade under the model's distribution, read
    // from llama.cpp's logits, not the one grade the answer wrote.
    let answered = before.answered.unwrap();
    assert!((0.0..=1.0).contains(&before.reward), "{}", before.reward);
    assert!(
        (before.reward - answered).abs() > 1e-3,
        "{} vs {answered}",
        before.reward
    );
    // and the memory does reach the prompt: relevant past tasks come first
    assert_eq!(
        mem_after.nearest(b, 5, 0.9)[0].description,
        "sort a list of numbers in python"
    );
}
