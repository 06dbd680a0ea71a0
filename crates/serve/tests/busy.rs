//! A full queue answers 429 in OpenAI's shape with `Retry-After`, at once,
//! instead of keeping the client waiting; requests already queued are
//! untouched.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Engine, EngineConfig};
use reverie_serve::Server;

/// Posts a chat completion and returns the raw HTTP response (status line,
/// headers and body), or times out after `wait`.
fn post(port: u16, wait: Duration) -> std::io::Result<String> {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8}"#;
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(wait))?;
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

#[test]
fn a_full_queue_is_answered_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    synth::write(&path, &SynthConfig::tiny(Arch::Qwen2)).unwrap();
    let engine = Engine::load(
        &path,
        EngineConfig {
            slots: 1,
            max_queued: 1,
            threads: 1,
            n_ctx: 512,
            // The first generation hangs in the backend, holding the slot.
            fault_hang_after_tokens: Some(1),
            // Long enough to hold it while the test asks; short, so the
            // watchdog frees it soon after.
            stall_timeout: Duration::from_secs(4),
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = Server {
        engine: Arc::new(engine),
        model_id: "m".into(),
        token: "secret".into(),
        recorder: None,
    };
    rt.spawn(reverie_serve::serve(listener, server));
    // One request holds the slot, one waits in the queue.
    for _ in 0..2 {
        std::thread::spawn(move || post(port, Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(500));
    }
    let t0 = Instant::now();
    let third = post(port, Duration::from_secs(10)).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "a full queue answers at once"
    );
    assert!(third.starts_with("HTTP/1.1 429"), "{third}");
    let lower = third.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1"), "{third}");
    assert!(third.contains("\"rate_limit_error\""), "{third}");
    assert!(third.contains("\"rate_limit_exceeded\""), "{third}");
}
