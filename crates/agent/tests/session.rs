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

#[test]
fn an_unfinished_looking_end_asks_and_records_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
    let engine = engine(dir.path());
    let mut s = ChannelSession::open(&engine, &store, "c", "").unwrap();
    s.set_detector(|_| true); // every end looks unfinished
    let mut events = Vec::new();
    // A seed with which this synthetic model ends its first reply by itself.
    let params = SamplingParams {
        temperature: 2.0,
        top_k: 0,
        top_p: 1.0,
        seed: 1,
        max_tokens: 300,
    };
    let out = s
        .send("go", &params, &CancelFlag::default(), &mut |e| {
            events.push(e)
        })
        .unwrap();
    let stray = events.iter().find_map(|e| match e {
        ChatEvent::StrayEnd {
            unintended,
            message,
            ..
        } => Some((*unintended, *message)),
        _ => None,
    });
    let msgs = store.messages(s.channel()).unwrap();
    let (unintended, ended) = stray.expect("the question was asked");
    assert_eq!(msgs[1].id, ended);
    assert_eq!(msgs[2].text, reverie_agent::stray::QUESTION);
    assert!(msgs[2]
        .tokens
        .roles
        .iter()
        .all(|r| *r == TokenRole::Warning));
    assert!(
        msgs[3].text == "yes" || msgs[3].text == "no",
        "{:?}",
        msgs[3].text
    );
    assert_eq!(unintended, msgs[3].text == "no");
    assert_eq!(
        store.unintended_ends(s.channel()).unwrap().contains(&ended),
        unintended
    );
    if unintended {
        assert_eq!(
            out.reply_message, msgs[4].id,
            "the model went on in a new reply"
        );
    }
    // Stored tokens are still exactly what the model saw.
    let stored: Vec<i32> = msgs.iter().flat_map(|m| m.tokens.ids.clone()).collect();
    assert_eq!(stored, s.transcript().tokens.ids);
}

#[test]
fn earlier_reasoning_is_not_carried_into_later_turns() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
    let engine = engine(dir.path());
    let mut s = ChannelSession::open(&engine, &store, "think", "").unwrap();
    let thinking = r#"root ::= "<think>plan it</think>\nAnswer.""#;
    s.set_reply_constraint(Some(reverie_infer::Constraint::Gbnf(thinking.into())));
    let first = s
        .send(
            "q1",
            &SamplingParams::greedy(64),
            &CancelFlag::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(first.reply, "<think>plan it</think>\nAnswer.");
    // Within its own turn the reasoning is there.
    assert!(engine
        .detokenize(&s.transcript().tokens.ids, true)
        .contains("plan it"));
    s.set_reply_constraint(None);
    s.send("q2", &params(), &CancelFlag::default(), &mut |_| {})
        .unwrap();
    let live = s.transcript().clone();
    let seen = engine.detokenize(&live.tokens.ids, true);
    assert!(
        !seen.contains("plan it") && !seen.contains("<think>"),
        "{seen}"
    );
    assert!(seen.contains("Answer."), "{seen}");
    // The store keeps the reply whole, reasoning tokens included, for training.
    let reply = &store.messages(s.channel()).unwrap()[1];
    assert!(reply.text.contains("<think>plan it</think>"));
    assert!(engine
        .detokenize(&reply.tokens.ids, true)
        .contains("plan it"));
    // A reopened channel continues from exactly what the live one fed.
    let reopened = ChannelSession::open(&engine, &store, "think", "").unwrap();
    assert_eq!(reopened.transcript().tokens, live.tokens);
}

#[test]
fn a_channel_driven_past_its_context_compacts_and_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.gguf");
    synth::write(&p, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let engine = Engine::load(
        &p,
        EngineConfig {
            slots: 1,
            n_ctx: 384,
            threads: 1,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
    let mut s = ChannelSession::open(&engine, &store, "long", "Be brief.").unwrap();
    let mut notices = 0;
    let turns = 24;
    for i in 0..turns {
        let text = format!("number {i}: tell me about the water and the day, then the time");
        s.send(&text, &params(), &CancelFlag::default(), &mut |e| {
            if let ChatEvent::Notice { text, .. } = e {
                assert!(text.contains("context"), "{text}");
                notices += 1;
            }
        })
        .unwrap_or_else(|e| {
            let m = store.messages(s.channel()).unwrap();
            let lens: Vec<_> = m.iter().map(|m| (m.role, m.tokens.len())).collect();
            panic!("turn {i}: {e}; {lens:?}")
        });
    }
    assert!(
        notices >= 1,
        "a {turns}-turn channel in 384 tokens compacts"
    );
    let ch = s.channel();
    let msgs = store.messages(ch).unwrap();
    // Every message stays in the record: one system message per start.
    let systems = msgs
        .iter()
        .filter(|m| m.role == MessageRole::System)
        .count();
    assert_eq!(systems, notices + 1);
    assert_eq!(
        msgs.iter().filter(|m| m.role == MessageRole::User).count(),
        turns,
        "every question is kept"
    );
    // The summary is in the agent's section, and the fresh system prompt
    // carries it.
    let section = store.channel(ch).unwrap().agent_section;
    assert!(section.contains("summary"), "{section}");
    let live = &msgs[reverie_core::live_start(&msgs)..];
    assert!(
        live[0].text.contains("Earlier in this channel"),
        "{}",
        live[0].text
    );
    // What the model was fed is exactly the stored tokens from the live
    // start on, and the meter counts those.
    let fed: Vec<i32> = live.iter().flat_map(|m| m.tokens.ids.clone()).collect();
    assert_eq!(s.transcript().tokens.ids, fed);
    assert_eq!(store.context_tokens(ch).unwrap(), fed.len() as u64);
    assert!(fed.len() <= 384);
    // Reopened, the channel continues from the same live context.
    let again = ChannelSession::open(&engine, &store, "long", "Be brief.").unwrap();
    assert_eq!(again.transcript().tokens.ids, fed);
}
