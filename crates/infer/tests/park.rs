//! A parked engine gives its model's memory back and serves what waited
//! once it resumes. Its own test binary: resident memory is measured, and
//! no other test may load models beside it.

use std::sync::mpsc;
use std::time::Duration;

use reverie_core::{ChannelId, MessageRole, SamplingParams};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{ChatMessage, Engine, EngineConfig, GenerateRequest, InferError, Transcript};

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_parked_engine_frees_its_memory_and_serves_what_waited_after_resuming() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.gguf");
    // About 100 MB of f32 weights, so that their leaving shows.
    let cfg = SynthConfig {
        n_embd: 512,
        n_layer: 6,
        n_head: 8,
        n_head_kv: 2,
        head_dim: 64,
        n_ff: 2048,
        ..SynthConfig::tiny(Arch::Qwen2)
    };
    synth::write(&path, &cfg).unwrap();
    let engine = Engine::load(
        &path,
        EngineConfig {
            slots: 2,
            n_ctx: 2048,
            threads: 1,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let mut t = Transcript::default();
    engine
        .extend_transcript(&mut t, &[ChatMessage::new(MessageRole::User, "hello")])
        .unwrap();
    let prompt = t.tokens.ids.clone();
    let ask =
        |ch: i64| GenerateRequest::new(ChannelId(ch), prompt.clone(), SamplingParams::greedy(8));
    let first = engine.generate(ask(1)).unwrap().complete().unwrap();
    let scored = engine.score(&prompt).unwrap();
    let loaded = resident_bytes();

    engine.park().unwrap();
    assert!(engine.parked());
    let parked = resident_bytes();
    eprintln!(
        "resident {} MB loaded, {} MB parked",
        loaded >> 20,
        parked >> 20
    );
    assert!(
        loaded.saturating_sub(parked) > 60 << 20,
        "parking gave back {} MB of {} MB",
        loaded.saturating_sub(parked) >> 20,
        loaded >> 20
    );
    // The vocabulary stays: the same tokens, the same rendering.
    let mut again = Transcript::default();
    engine
        .extend_transcript(&mut again, &[ChatMessage::new(MessageRole::User, "hello")])
        .unwrap();
    assert_eq!(again.tokens.ids, prompt);
    assert!(matches!(engine.score(&prompt), Err(InferError::Parked)));

    // A request made while parked waits, then gets the same greedy reply.
    let waiting = engine.generate(ask(2)).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(waiting.complete()).unwrap());
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "a parked engine served a request"
    );
    engine.resume().unwrap();
    assert!(!engine.parked());
    let served = rx.recv_timeout(Duration::from_secs(60)).unwrap().unwrap();
    assert_eq!(served.ids, first.ids);
    assert_eq!(engine.score(&prompt).unwrap(), scored);
    // Resuming an engine that is not parked changes nothing.
    engine.resume().unwrap();
    assert_eq!(
        engine.generate(ask(3)).unwrap().complete().unwrap().ids,
        first.ids
    );
}
