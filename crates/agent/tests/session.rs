use reverie_agent::{CancelFlag, ChannelSession, ChatEvent};
use reverie_core::{Home, MessageRole, SamplingParams, StopReason, TokenRole};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Engine, EngineConfig};
use reverie_store::Store;

fn engine(dir: &std::path::Path) -> Engine {
    let p = dir.join("m.gguf");
    if !p.exists() {
        synth::write(&p, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    }
    Engine::load(
        &p,
        EngineConfig {
            slots: 1,
            n_ctx: 2048,
            threads: 1,
            ..EngineConfig::default()
        },
    )
    .unwrap()
}

fn params() -> SamplingParams {
    SamplingParams::greedy(12)
}

#[test]
fn a_turn_records_every_token_with_its_role() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
    let engine = engine(dir.path());
    let mut s = ChannelSession::open(&engine, &store, "general", "Be brief.").unwrap();
    let mut events = Vec::new();
    let out = s
        .send("hello", &params(), &CancelFlag::default(), &mut |e| {
            events.push(e)
        })
        .unwrap();
    let msgs = store.messages(s.channel()).unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            MessageRole::System,
            MessageRole::User,
            MessageRole::Assistant
        ]
    );
    let streamed: Vec<i32> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Token { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(msgs[2].tokens.ids, streamed);
    assert!(msgs[2].tokens.roles.iter().all(|r| *r == TokenRole::Action));
    assert!(msgs[2].tokens.logprobs.iter().all(|l| l.is_some()));
    assert!(msgs[1].tokens.count(TokenRole::User) > 0);
    assert!(
        matches!(events.last(), Some(ChatEvent::TurnEnd { reason, .. }) if *reason == out.reason)
    );
    assert!(s
        .send("   ", &params(), &CancelFlag::default(), &mut |_| {})
        .is_err());
}

#[test]
fn reopening_a_channel_continues_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let run = |home: &str, split: bool| {
        let store = Store::open(&Home::new(dir.path().join(home))).unwrap();
        {
            let mut s = ChannelSession::open(&engine, &store, "c", "").unwrap();
            s.send("one", &params(), &CancelFlag::default(), &mut |_| {})
                .unwrap();
            if !split {
                s.send("two", &params(), &CancelFlag::default(), &mut |_| {})
                    .unwrap();
            }
        }
        if split {
            let mut s = ChannelSession::open(&engine, &store, "c", "").unwrap();
            s.send("two", &params(), &CancelFlag::default(), &mut |_| {})
                .unwrap();
        }
        let ch = store.channel_by_name("c").unwrap().unwrap().id;
        store
            .messages(ch)
            .unwrap()
            .into_iter()
            .map(|m| m.tokens)
            .collect::<Vec<_>>()
    };
    let (a, b) = (run("a", false), run("b", true));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.ids, y.ids);
        assert_eq!(x.roles, y.roles);
        // KV reuse changes batch shapes, so the last bits of a float may differ.
        for (p, q) in x.logprobs.iter().zip(&y.logprobs) {
            assert_eq!(p.is_some(), q.is_some());
            assert!((p.unwrap_or(0.0) - q.unwrap_or(0.0)).abs() < 1e-3);
        }
    }
}

#[test]
fn a_cancelled_turn_keeps_what_was_generated() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
    let engine = engine(dir.path());
    let mut s = ChannelSession::open(&engine, &store, "general", "").unwrap();
    let cancel = CancelFlag::default();
    let c2 = cancel.clone();
    let mut n = 0;
    let long = SamplingParams {
        max_tokens: 500,
        ..SamplingParams::greedy(500)
    };
    let out = s
        .send("talk", &long, &cancel, &mut |e| {
            if matches!(e, ChatEvent::Token { .. }) {
                n += 1;
                if n == 3 {
                    c2.cancel();
                }
            }
        })
        .unwrap();
    if out.reason == StopReason::Cancelled {
        assert!(out.reply_tokens >= 3 && out.reply_tokens < 500);
    }
    let last = store.messages(s.channel()).unwrap().pop().unwrap();
    assert_eq!(last.tokens.len(), out.reply_tokens);
}
