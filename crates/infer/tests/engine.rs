//! Real llama.cpp on tiny synthetic GGUFs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reverie_core::{ChannelId, MessageRole, SamplingParams, StopReason, TokenRole};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{
    ChatMessage, Constraint, Engine, EngineConfig, GenEvent, GenerateRequest, InferError,
    Transcript,
};

fn synth_model(dir: &Path, arch: Arch, seed: u64) -> PathBuf {
    let p = dir.join(format!("{}-{seed}.gguf", arch.as_str()));
    let mut cfg = SynthConfig::tiny(arch);
    cfg.seed = seed;
    synth::write(&p, &cfg).unwrap();
    p
}

fn config() -> EngineConfig {
    EngineConfig {
        slots: 2,
        n_ctx: 1024,
        threads: 1,
        ..EngineConfig::default()
    }
}

fn user(text: &str) -> ChatMessage {
    ChatMessage::new(MessageRole::User, text)
}

/// A request that runs to `n` tokens whatever the model says (for cancel,
/// stop and stall tests).
fn endless(engine: &Engine, ch: i64, text: &str, n: usize) -> GenerateRequest {
    let mut t = Transcript::default();
    engine.extend_transcript(&mut t, &[user(text)]).unwrap();
    let mut req = GenerateRequest::new(ChannelId(ch), t.tokens.ids, SamplingParams::greedy(n));
    req.ignore_eog = true;
    req
}

fn turn(
    engine: &Engine,
    ch: i64,
    t: &mut Transcript,
    text: &str,
    n: usize,
) -> reverie_infer::Completion {
    engine.extend_transcript(t, &[user(text)]).unwrap();
    let req = GenerateRequest::new(
        ChannelId(ch),
        t.tokens.ids.clone(),
        SamplingParams::greedy(n),
    );
    let reply = engine.generate(req).unwrap().complete().unwrap();
    engine.record_reply(t, &reply);
    reply
}

#[test]
fn streamed_ids_are_the_recorded_ids() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Llama, 1), config()).unwrap();
    let mut t = Transcript::default();
    let span = engine
        .extend_transcript(
            &mut t,
            &[
                ChatMessage::new(MessageRole::System, "be brief"),
                user("hello there"),
            ],
        )
        .unwrap();
    assert!(span.count(TokenRole::User) > 0 && span.count(TokenRole::Context) > 0);
    assert_eq!(span.count(TokenRole::Action), 0);
    // user text tokens decode back to the user's text
    let user_ids: Vec<i32> = span
        .ids
        .iter()
        .zip(&span.roles)
        .filter(|(_, r)| **r == TokenRole::User)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(engine.detokenize(&user_ids, false), "hello there");

    let params = SamplingParams {
        temperature: 0.8,
        max_tokens: 24,
        ..SamplingParams::default()
    };
    let gen = engine
        .generate(GenerateRequest::new(
            ChannelId(1),
            t.tokens.ids.clone(),
            params,
        ))
        .unwrap();
    let mut streamed = Vec::new();
    let reply = gen
        .complete_with(|ev| {
            if let GenEvent::Token { id, logprob, .. } = ev {
                assert!(*logprob <= 0.0 && logprob.is_finite());
                streamed.push(*id);
            }
        })
        .unwrap();
    assert_eq!(streamed, reply.ids);
    let before = t.tokens.len();
    let recorded = engine.record_reply(&mut t, &reply);
    assert_eq!(recorded.ids, streamed);
    assert!(recorded.roles.iter().all(|r| *r == TokenRole::Action));
    assert_eq!(&t.tokens.ids[before..], &streamed[..]);
    assert_eq!(reply.usage.generated_tokens, streamed.len());
}

#[test]
fn json_schema_constrains_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Qwen2, 2), config()).unwrap();
    let mut t = Transcript::default();
    engine
        .extend_transcript(&mut t, &[user("rate it")])
        .unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"reward": {"type": "integer", "minimum": 0, "maximum": 9}, "ok": {"type": "boolean"}},
        "required": ["reward", "ok"],
        "additionalProperties": false
    });
    for seed in 0..3 {
        let params = SamplingParams {
            temperature: 1.0,
            seed,
            max_tokens: 200,
            ..SamplingParams::default()
        };
        let req = GenerateRequest::new(ChannelId(seed as i64), t.tokens.ids.clone(), params)
            .with_constraint(Constraint::JsonSchema(schema.clone()));
        let reply = engine.generate(req).unwrap().complete().unwrap();
        assert_eq!(
            reply.reason,
            StopReason::EndOfTurn,
            "grammar must close: {:?}",
            reply.text
        );
        let v: serde_json::Value = serde_json::from_str(reply.text.trim())
            .unwrap_or_else(|e| panic!("{e}: {:?}", reply.text));
        assert!(v["reward"].is_i64() && v["ok"].is_boolean(), "{v}");
    }
    let bad = GenerateRequest::new(
        ChannelId(9),
        t.tokens.ids.clone(),
        SamplingParams::greedy(5),
    )
    .with_constraint(Constraint::Gbnf("root ::= (".into()));
    let err = engine.generate(bad).unwrap().complete().unwrap_err();
    assert!(err.to_string().contains("grammar"), "{err}");
}

#[test]
fn parallel_channels_stay_independent() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::load(synth_model(dir.path(), Arch::Llama, 3), config()).unwrap());
    let prompts = ["the first channel asks", "a second and different question"];
    let solo: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| turn(&engine, 100 + i as i64, &mut Transcript::default(), p, 40).ids)
        .collect();
    let handles: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let engine = engine.clone();
            let p = p.to_string();
            std::thread::spawn(move || {
                turn(&engine, i as i64, &mut Transcript::default(), &p, 40).ids
            })
        })
        .collect();
    let together: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(together, solo);
    assert_ne!(solo[0], solo[1]);
}

#[test]
fn second_turn_reuses_the_cache_and_matches_a_fresh_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = synth_model(dir.path(), Arch::Qwen3, 4);
    let engine = Engine::load(&path, config()).unwrap();
    let mut t = Transcript::default();
    turn(&engine, 1, &mut t, "first question", 16);
    let second = turn(&engine, 1, &mut t, "and a follow up", 16);
    assert!(second.usage.reused_tokens > 0, "{:?}", second.usage);

    let fresh = Engine::load(&path, config()).unwrap();
    let mut t2 = Transcript::default();
    turn(&fresh, 7, &mut t2, "first question", 16);
    let again = turn(&fresh, 7, &mut t2, "and a follow up", 16);
    assert_eq!(again.ids, second.ids);
}

#[test]
fn swapping_models_mid_session_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = synth_model(dir.path(), Arch::Llama, 5);
    let b = synth_model(dir.path(), Arch::Llama, 6);
    let engine = Engine::load(&a, config()).unwrap();
    let mut t = Transcript::default();
    turn(&engine, 1, &mut t, "before the swap", 12);
    let before = t.clone();

    // A long generation is running while the swap happens.
    let long = engine
        .generate(GenerateRequest::new(
            ChannelId(2),
            t.tokens.ids.clone(),
            SamplingParams::greedy(300),
        ))
        .unwrap();
    let info = engine.swap_model(&b).unwrap();
    assert_eq!(info.path, b);
    let finished = long.complete().unwrap();
    assert!(!finished.ids.is_empty());

    let after = turn(&engine, 1, &mut t, "after the swap", 12);
    assert_eq!(&t.tokens.ids[..before.tokens.len()], &before.tokens.ids[..]);
    assert_eq!(t.messages.len(), before.messages.len() + 2);

    // The reply came from model B on the whole history.
    let fresh_b = Engine::load(&b, config()).unwrap();
    let mut prompt = before.clone();
    fresh_b
        .extend_transcript(&mut prompt, &[user("after the swap")])
        .unwrap();
    let expect = fresh_b
        .generate(GenerateRequest::new(
            ChannelId(1),
            prompt.tokens.ids.clone(),
            SamplingParams::greedy(12),
        ))
        .unwrap()
        .complete()
        .unwrap();
    assert_eq!(after.ids, expect.ids);
}

#[test]
fn bad_files_get_errors_that_name_them_and_a_failed_swap_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let good = synth_model(dir.path(), Arch::Gemma3, 8);
    let truncated = dir.path().join("cut.gguf");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = Engine::load(&truncated, config())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("cut.gguf") && err.contains("truncated"),
        "{err}"
    );

    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"this is not a model at all").unwrap();
    let err = Engine::load(&garbage, config()).err().unwrap().to_string();
    assert!(
        err.contains("garbage.gguf") && err.contains("not a GGUF"),
        "{err}"
    );

    let missing = Engine::load(dir.path().join("nope.gguf"), config())
        .err()
        .unwrap();
    assert!(missing.to_string().contains("nope.gguf"));

    // Valid header without the tensors the architecture needs: llama.cpp refuses.
    let header = reverie_gguf::GgufFile::open(&good).unwrap();
    let hollow = dir.path().join("hollow.gguf");
    reverie_gguf::GgufWriter::create(&hollow, &header.metadata, &[])
        .unwrap()
        .finish()
        .unwrap();
    let err = Engine::load(&hollow, config()).err().unwrap();
    assert!(matches!(err, InferError::Load { .. }), "{err}");
    assert!(err.to_string().contains("hollow.gguf"));

    let engine = Engine::load(&good, config()).unwrap();
    assert!(engine.swap_model(&truncated).is_err());
    assert_eq!(engine.model_path(), good);
    let mut t = Transcript::default();
    assert!(!turn(&engine, 1, &mut t, "still alive?", 4).ids.is_empty());
}

#[test]
fn cancel_stops_mid_stream() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Llama, 9), config()).unwrap();
    let req = endless(&engine, 1, "go on forever", 800);
    let gen = engine.generate(req).unwrap();
    let cancel = gen.canceller();
    let mut seen = 0;
    let reply = gen
        .complete_with(|ev| {
            if matches!(ev, GenEvent::Token { .. }) {
                seen += 1;
                if seen == 5 {
                    cancel();
                }
            }
        })
        .unwrap();
    assert_eq!(reply.reason, StopReason::Cancelled);
    assert!(reply.ids.len() < 800);
}

#[test]
fn max_tokens_and_limits_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EngineConfig {
        slots: 1,
        max_queued: 1,
        n_ctx: 256,
        ..config()
    };
    let engine = Engine::load(synth_model(dir.path(), Arch::Qwen2, 10), cfg).unwrap();
    let mut req = GenerateRequest::new(ChannelId(1), vec![5, 6, 7], SamplingParams::greedy(9));
    req.ignore_eog = true;
    let reply = engine.generate(req).unwrap().complete().unwrap();
    assert_eq!(reply.ids.len(), 9);
    assert_eq!(reply.reason, StopReason::MaxTokens);

    let too_long = GenerateRequest::new(ChannelId(1), vec![5; 300], SamplingParams::greedy(1));
    assert!(matches!(
        engine.generate(too_long),
        Err(InferError::ContextFull { .. })
    ));
    assert!(matches!(
        engine.generate(GenerateRequest::new(
            ChannelId(1),
            vec![],
            SamplingParams::greedy(1)
        )),
        Err(InferError::EmptyPrompt)
    ));

    // One runs, one waits, the next is refused.
    let mut long = GenerateRequest::new(ChannelId(2), vec![5, 6], SamplingParams::greedy(200));
    long.ignore_eog = true;
    let mut running = engine.generate(long.clone()).unwrap();
    // Once it streams a token it is off the queue.
    assert!(matches!(running.next(), Some(GenEvent::Token { .. })));
    let waiting = engine.generate(long.clone()).unwrap();
    let refused = engine.generate(long);
    assert!(
        matches!(refused, Err(InferError::Busy { .. })),
        "{:?}",
        refused.err()
    );
    running.cancel();
    waiting.cancel();
}

#[test]
fn watchdog_ends_a_hung_generation_and_the_channel_continues() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EngineConfig {
        slots: 1,
        stall_timeout: Duration::from_millis(1000),
        fault_hang_after_tokens: Some(3),
        ..config()
    };
    let engine = Engine::load(synth_model(dir.path(), Arch::Llama, 11), cfg).unwrap();
    let req = endless(&engine, 1, "this will hang", 50);
    let hung = engine.generate(req.clone()).unwrap().complete().unwrap();
    assert_eq!(hung.reason, StopReason::Stalled);
    assert_eq!(hung.ids.len(), 3, "tokens before the hang are kept");

    // The conversation is intact and the replacement worker serves it.
    let again = engine.generate(req).unwrap().complete().unwrap();
    assert_eq!(again.reason, StopReason::MaxTokens);
    assert_eq!(&again.ids[..3], &hung.ids[..]);
}

#[test]
fn tool_definitions_reach_the_model_inside_the_system_message() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Qwen2, 12), config()).unwrap();
    let tools = [
        serde_json::json!({"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}),
    ];
    let system = engine.system_prompt_with_tools("Be brief.", &tools);
    assert!(system.contains("read_file") && system.contains("<tool_call>"));
    let mut t = Transcript::default();
    let span = engine
        .extend_transcript(
            &mut t,
            &[
                ChatMessage::new(MessageRole::System, system.clone()),
                user("hi"),
            ],
        )
        .unwrap();
    assert!(t.rendered().contains("\"name\": \"read_file\""));
    // the system text (tools included) is conditioning only
    let user_ids: Vec<i32> = span
        .ids
        .iter()
        .zip(&span.roles)
        .filter(|(_, r)| **r == TokenRole::User)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(engine.detokenize(&user_ids, false), "hi");
}

#[test]
fn stop_strings_end_the_turn_and_are_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Llama, 13), config()).unwrap();
    let mut req = endless(&engine, 1, "say something", 40);
    let free = engine.generate(req.clone()).unwrap().complete().unwrap();
    // Stop on the text of a later token: the turn ends there at the latest.
    let (k, stop) = (2..free.ids.len())
        .map(|k| (k, engine.detokenize(&free.ids[k..k + 1], false)))
        .find(|(_, s)| !s.trim().is_empty())
        .expect("a printable token among the first 40");
    req.stop = vec![stop.clone()];
    let stopped = engine.generate(req).unwrap().complete().unwrap();
    assert_eq!(stopped.reason, StopReason::EndOfTurn);
    assert!(stopped.ids.len() <= k + 1, "{:?}", stopped.ids);
    assert!(stopped.ids.len() < free.ids.len());
    assert!(!stopped.text.ends_with(&stop));
}

#[test]
fn logits_at_chosen_positions_are_those_of_the_full_pass() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::load(synth_model(dir.path(), Arch::Qwen2, 3), config()).unwrap();
    // Longer than one 512-token chunk, so the positions span two.
    let tokens: Vec<i32> = (0..700).map(|i| 5 + (i * 7) % 200).collect();
    let mut every = Vec::new();
    engine
        .visit_logits(&tokens, &mut |i, l| every.push((i, l.to_vec())))
        .unwrap();
    let at = [0, 3, 511, 512, 699];
    let mut chosen = Vec::new();
    engine
        .visit_logits_at(&tokens, &at, &mut |i, l| chosen.push((i, l.to_vec())))
        .unwrap();
    assert_eq!(chosen.iter().map(|c| c.0).collect::<Vec<_>>(), at);
    for (i, l) in &chosen {
        let full = &every[*i].1;
        let worst = l
            .iter()
            .zip(full)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "position {i}: differs by {worst}");
    }
    let past = engine.visit_logits_at(&tokens, &[700], &mut |_, _| {});
    assert!(
        matches!(&past, Err(InferError::Decode(m)) if m.contains("past the 700 tokens")),
        "{past:?}"
    );
}
