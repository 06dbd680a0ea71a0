//! `kill -9` a writer in a loop: every acknowledged message survives and the
//! database stays sound.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reverie_core::{Home, MessageRole, TokenRole, TokenSpan};
use reverie_store::Store;

const CHILD_ENV: &str = "REVERIE_CRASH_WRITER_HOME";

/// In the child role this appends forever, printing each acknowledged id;
/// in the parent role it kills such children at random moments.
#[test]
fn kill9_never_loses_an_acknowledged_message() {
    if let Ok(home) = std::env::var(CHILD_ENV) {
        return writer(&home);
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<i64> = Vec::new();
    for round in 0..8u64 {
        let mut child = Command::new(&exe)
            .args([
                "kill9_never_loses_an_acknowledged_message",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Let it write a varying number of messages, then kill it mid-stream.
        let want = 20 + (round * 37) % 90;
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while got < want && Instant::now() < deadline {
            match lines.next() {
                Some(Ok(l)) => {
                    if let Some(id) = l.strip_prefix("ACK ") {
                        acked.push(id.trim().parse().unwrap());
                        got += 1;
                    }
                }
                _ => break,
            }
        }
        child.kill().unwrap(); // SIGKILL
                               // Acks printed before the kill landed are still in the pipe.
        for l in lines.map_while(Result::ok) {
            if let Some(id) = l.strip_prefix("ACK ") {
                acked.push(id.trim().parse().unwrap());
            }
        }
        child.wait().unwrap();
        assert!(got > 0, "round {round}: the writer acknowledged nothing");
    }
    let store = Store::open(&Home::new(dir.path())).unwrap();
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
    let ch = store.ensure_channel("crash").unwrap();
    let stored: std::collections::HashSet<i64> =
        store.messages(ch).unwrap().iter().map(|m| m.id.0).collect();
    let lost: Vec<_> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    for m in store.messages(ch).unwrap() {
        assert_eq!(m.tokens.len(), 64, "message {} has torn tokens", m.id.0);
    }
    assert!(acked.len() >= 8 * 20);
}

fn writer(home: &str) {
    let store = Store::open(&Home::new(home)).unwrap();
    let ch = store.ensure_channel("crash").unwrap();
    let mut span = TokenSpan::default();
    for i in 0..64 {
        span.push(i, TokenRole::Action, Some(-(i as f32)));
    }
    let stdout = std::io::stdout();
    for i in 0.. {
        let id = store
            .append_message(ch, MessageRole::Assistant, &format!("message {i}"), &span)
            .unwrap();
        let mut out = stdout.lock();
        writeln!(out, "ACK {}", id.0).unwrap();
        out.flush().unwrap();
    }
}
