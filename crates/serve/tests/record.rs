//! The API's exchanges become channels the nights learn from: one channel
//! per conversation, the prompt the model was fed as context and the reply
//! it sampled as actions with their log-probs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use reverie_core::{live_start, Home, MessageRole, TokenRole};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{ChatRequest, Engine, EngineConfig};
use reverie_serve::record::Recorder;
use reverie_serve::Server;
use reverie_store::Store;
use serde_json::{json, Value};

fn post(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, json) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{out}");
    serde_json::from_str(json).unwrap()
}

/// The prompt tokens the engine renders for `messages`.
fn prompt(engine: &Engine, messages: &[(MessageRole, &str)]) -> Vec<i32> {
    let req = ChatRequest {
        messages: messages
            .iter()
            .map(|(r, t)| json!({"role": r.as_str(), "content": t}))
            .collect(),
        add_generation_prompt: true,
        enable_thinking: true,
        ..ChatRequest::default()
    };
    engine.tokenize_rendered(&engine.chat_params(&req).unwrap().prompt)
}

#[test]
fn each_conversation_is_a_channel_holding_what_the_model_saw_and_sampled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    synth::write(&path, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let engine = Arc::new(
        Engine::load(
            &path,
            EngineConfig {
                slots: 1,
                threads: 1,
                n_ctx: 2048,
                ..EngineConfig::default()
            },
        )
        .unwrap(),
    );
    let store = Arc::new(Store::open(&Home::new(dir.path().join("home"))).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(reverie_serve::serve(
        listener,
        Server {
            engine: engine.clone(),
            model_id: "m".into(),
            token: "t".into(),
            recorder: Some(Arc::new(Recorder::new(store.clone()))),
        },
    ));
    let ask = |messages: &[(MessageRole, &str)]| {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|(r, t)| json!({"role": r.as_str(), "content": t}))
            .collect();
        let r = post(
            port,
            &json!({"model": "m", "messages": msgs, "max_tokens": 6, "temperature": 0}),
        );
        r["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    use MessageRole::{Assistant, System, User};
    let first = [(System, "be brief"), (User, "hello there")];
    let a1 = ask(&first);
    let second = [
        (System, "be brief"),
        (User, "hello there"),
        (Assistant, a1.as_str()),
        (User, "and the water"),
    ];
    let _a2 = ask(&second);
    // Another conversation.
    ask(&[(User, "what day is it")]);

    let channels: Vec<_> = store
        .channels()
        .unwrap()
        .into_iter()
        .filter(|c| c.name.starts_with("api-"))
        .collect();
    assert_eq!(channels.len(), 2, "two conversations, two channels");
    let msgs = store.messages(channels[0].id).unwrap();
    let users: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == User)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(users, ["hello there", "and the water"]);
    let replies: Vec<_> = msgs.iter().filter(|m| m.role == Assistant).collect();
    assert_eq!(replies.len(), 2);
    for r in &replies {
        assert!(!r.tokens.is_empty());
        assert!(r.tokens.roles.iter().all(|x| *x == TokenRole::Action));
        assert!(r.tokens.logprobs.iter().all(Option::is_some));
    }
    // A reply cut at max_tokens, sent back as text, does not re-render to
    // the tokens sampled: the live context starts again with the whole
    // prompt rather than train on tokens the model never saw.
    let systems = msgs.iter().filter(|m| m.role == System).count();
    assert!((1..=2).contains(&systems), "{systems}");
    // What the night trains on for the last reply is exactly what the model
    // was fed for it, then what it sampled.
    let live = &msgs[live_start(&msgs)..];
    let held: Vec<i32> = live.iter().flat_map(|m| m.tokens.ids.clone()).collect();
    let fed = prompt(&engine, &second);
    let last = &replies[1].tokens.ids;
    assert_eq!(&held[..held.len() - last.len()], fed.as_slice());
    assert_eq!(&held[held.len() - last.len()..], last.as_slice());
}
