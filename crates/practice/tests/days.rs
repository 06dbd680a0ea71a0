//! Simulated days on a tiny llama.cpp model: the person's requests,
//! follow-ups and ratings land in ordinary channels with the task's files,
//! and nothing a night reads holds a check's answer or verdict.

use std::path::Path;
use std::sync::Arc;

use reverie_agent::{CancelFlag, DEFAULT_SYSTEM_PROMPT};
use reverie_core::{Home, MessageRole, SamplingParams};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Engine, EngineConfig};
use reverie_practice::days::{day_tasks, simulate_day, Channels, DayFamily, DayOptions, Posed};
use reverie_store::Store;
use reverie_tools::Services;

fn options(follow_up: f64, feedback: f64) -> DayOptions {
    DayOptions {
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        params: SamplingParams {
            temperature: 0.0,
            top_k: 1,
            max_tokens: 12,
            ..SamplingParams::default()
        },
        max_calls: 1,
        family_tools: true,
        follow_up,
        feedback,
        seed: 5,
    }
}

/// Every file under `dir`, as bytes.
fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_simulated_day_leaves_only_what_a_person_would_have_written() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    synth::write(&model, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let home = Home::new(dir.path().join("home"));
    let engine = Engine::load(
        &model,
        EngineConfig {
            slots: 1,
            n_ctx: 8192,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let store = Arc::new(Store::open(&home).unwrap());
    let services = Arc::new(Services::new(&home));
    // Level 3: answers long enough that finding one is not chance.
    let tasks = day_tasks(&DayFamily::ALL, 14, 77, 3);
    let posed: Vec<Posed> = simulate_day(
        &engine,
        &store,
        &services,
        &tasks,
        Channels::new("day1", 3),
        &options(1.0, 1.0),
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();
    // Two notes tasks each ask twice; every request got an answer.
    let steps: usize = tasks.iter().map(|t| t.steps.len()).sum();
    assert_eq!(posed.len(), steps);
    assert_eq!(
        store.channels().unwrap().len(),
        5,
        "14 tasks, 3 to a channel"
    );

    // The tiny model answers nothing right: every request was followed up
    // once and rated 👎, as the simulated person does at these shares.
    for p in &posed {
        assert!(!p.passed, "{p:?}");
        assert!(p.followed_up && p.rated == Some(false), "{p:?}");
        let ch = reverie_core::ChannelId(p.channel);
        let msgs = store.messages(ch).unwrap();
        assert_eq!(msgs[p.reply].role, MessageRole::Assistant);
        assert!(p.reply > p.request);
        let rated = store.feedback(ch).unwrap();
        assert!(
            rated
                .iter()
                .any(|f| f.message == msgs[p.reply].id && !f.good),
            "the rating is on the final reply"
        );
    }
    // The task's files are in its channel's workspace.
    let with_files = tasks.iter().position(|t| !t.files.is_empty()).unwrap();
    let channel = posed.iter().find(|p| p.task == with_files).unwrap().channel;
    let toolbox =
        reverie_tools::Toolbox::open(store.clone(), reverie_core::ChannelId(channel), services)
            .unwrap();
    for (path, _) in &tasks[with_files].files {
        assert!(toolbox.workspace().root().join(path).exists(), "{path}");
    }
    drop(toolbox);

    // Everything the night could read: the data folder (database, its
    // log, blobs, workspaces) and every message's text.
    drop(engine);
    let mut files = Vec::new();
    files_under(home.root(), &mut files);
    let texts: Vec<String> = store
        .channels()
        .unwrap()
        .iter()
        .flat_map(|c| store.messages(c.id).unwrap())
        .map(|m| m.text)
        .collect();
    // The scan sees what was written: the first request is found.
    let first = &tasks[0].steps[0].request;
    assert!(files.iter().any(|(_, b)| contains(b, first)));
    assert!(texts.iter().any(|t| t.contains(first.as_str())));
    let mut secrets = 0;
    for t in &tasks {
        for s in &t.steps {
            let Some(secret) = s.hidden.secret().filter(|s| s.len() >= 4) else {
                continue;
            };
            secrets += 1;
            for (path, bytes) in &files {
                assert!(!contains(bytes, &secret), "{secret} in {path}");
            }
            assert!(!texts.iter().any(|x| x.contains(&secret)), "{secret}");
        }
    }
    assert!(
        secrets >= 4,
        "only {secrets} answers were long enough to look for"
    );
    for p in &posed {
        for (path, bytes) in &files {
            assert!(!contains(bytes, &p.why), "verdict {:?} in {path}", p.why);
        }
    }
}
