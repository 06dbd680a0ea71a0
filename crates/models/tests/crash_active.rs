//! `kill -9` while the active model is switched back and forth: afterwards
//! the recorded model always exists and opens.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reverie_core::Home;
use reverie_gguf::synth::{Arch, SynthConfig};

const CHILD_ENV: &str = "REVERIE_CRASH_ACTIVE_HOME";

fn models(dir: &std::path::Path) -> [std::path::PathBuf; 2] {
    let a = dir.join("a.gguf");
    let b = dir.join("b.gguf");
    [a, b]
}

#[test]
fn kill9_during_model_use_always_leaves_a_model_that_loads() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        return switcher(std::path::Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    for m in models(dir.path()) {
        reverie_gguf::synth::write(&m, &SynthConfig::tiny(Arch::Llama)).unwrap();
    }
    let home = Home::new(dir.path().join("home"));
    let exe = std::env::current_exe().unwrap();
    for round in 0..20u64 {
        let mut child = Command::new(&exe)
            .args([
                "kill9_during_model_use_always_leaves_a_model_that_loads",
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
        // Wait for a varying number of switches, then kill it mid-write.
        let want = 1 + (round * 7) % 23;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = 0;
        while got < want && Instant::now() < deadline {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("SWITCHED") => got += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(got > 0, "round {round}: the child never switched");
        let active = reverie_models::active::resolve(&home, None)
            .unwrap_or_else(|e| panic!("round {round}: no active model: {e}"));
        reverie_gguf::GgufFile::open(&active)
            .unwrap_or_else(|e| panic!("round {round}: {} does not load: {e}", active.display()));
        let stray: Vec<_> = std::fs::read_dir(home.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(
            stray.len() <= 1,
            "round {round}: temporary files pile up: {stray:?}"
        );
    }
}

/// The child: switches between the two models as fast as it can.
fn switcher(dir: &std::path::Path) {
    let home = Home::new(dir.join("home"));
    let [a, b] = models(dir);
    for i in 0.. {
        let m = if i % 2 == 0 { &a } else { &b };
        reverie_models::active::set_active(&home, m).unwrap();
        println!("SWITCHED {i}");
    }
}
