//! Helpers shared by the CLI's integration tests: run the real binary
//! against a data folder and read its JSON.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `reverie --home HOME ARGS…` to completion.
pub fn reverie(home: &Path, args: &[&str]) -> Output {
    command(home).args(args).output().unwrap()
}

/// `reverie --home HOME` ready for more arguments (for spawning).
pub fn command(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_reverie"));
    c.arg("--home").arg(home).env_remove("REVERIE_HOME");
    c
}

/// The last stdout line of a successful run, as JSON.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim().lines().last().unwrap_or("")).unwrap()
}

/// Writes a tiny synthetic model of `arch` into `home`.
pub fn synth(home: &Path, arch: &str) -> PathBuf {
    let path = home.join(format!("{arch}.gguf"));
    let out = reverie(
        home,
        &[
            "model",
            "synth",
            "--arch",
            arch,
            "--out",
            path.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}
