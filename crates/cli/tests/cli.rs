//! The `reverie` binary end to end, on synthetic models and a real store.

mod util;

use util::{json as ok_json, reverie, synth};

#[test]
fn chat_one_shot_records_and_exports_exact_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let model = synth(home, "llama");
    let m = model.to_str().unwrap();
    let reply = ok_json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--model",
            m,
            "--channel",
            "work",
            "--prompt",
            "hello",
            "--max-tokens",
            "8",
            "--json",
            "--temperature",
            "0",
        ],
    ));
    assert_eq!(reply["channel"], "work");
    let n = reply["reply_tokens"].as_u64().unwrap();
    assert!(n > 0 && n <= 8);

    // a second turn continues the same channel
    ok_json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--model",
            m,
            "--channel",
            "work",
            "--prompt",
            "more",
            "--max-tokens",
            "4",
            "--json",
        ],
    ));

    let out = reverie(home, &["export", "--format", "jsonl"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let msgs = line["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
    let first_reply = &msgs[2]["tokens"];
    assert_eq!(first_reply["ids"].as_array().unwrap().len() as u64, n);
    assert!(first_reply["roles"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r == "action"));
    assert!(first_reply["logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l.is_f64()));
    assert!(msgs[1]["tokens"]["roles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "user"));

    let list = ok_json(&reverie(home, &["channel", "list", "--json"]));
    assert_eq!(list["channels"][0]["messages"], 5);
}

#[test]
fn every_architecture_chats() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ["llama", "qwen2", "qwen3", "gemma3"] {
        let model = synth(dir.path(), arch);
        let r = ok_json(&reverie(
            dir.path(),
            &[
                "chat",
                "--no-tools",
                "--model",
                model.to_str().unwrap(),
                "--channel",
                arch,
                "--prompt",
                "hi",
                "--max-tokens",
                "3",
                "--json",
            ],
        ));
        assert!(r["reply_tokens"].as_u64().unwrap() > 0, "{arch}");
    }
}

/// One named row of `reverie doctor --json`.
fn doctor_check<'v>(report: &'v serde_json::Value, name: &str) -> &'v serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[test]
fn doctor_reports_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let out = reverie(home, &["doctor", "--json"]);
    assert!(!out.status.success(), "no model installed must fail");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    let model = doctor_check(&v, "model");
    assert_eq!(model["ok"], false);
    assert!(model["fix"]
        .as_str()
        .unwrap()
        .contains("reverie model fetch"));

    let good = synth(home, "qwen3");
    let v = ok_json(&reverie(
        home,
        &["doctor", "--json", "--model", good.to_str().unwrap()],
    ));
    assert_eq!(v["ok"], true, "{v}");
    // A ChatML template does not describe tools: Reverie's own prompt.
    let tools = doctor_check(&v, "tool calls");
    assert!(
        tools["detail"]
            .as_str()
            .unwrap()
            .contains("Hermes tool prompt"),
        "{tools}"
    );
    let training = doctor_check(&v, "training");
    let detail = training["detail"].as_str().unwrap();
    assert!(
        detail.contains("the night trains on the CPU") && detail.contains("at 24,576"),
        "{training}"
    );
    let sandbox = doctor_check(&v, "sandbox");
    assert!(
        sandbox["detail"]
            .as_str()
            .unwrap()
            .contains("confined to the workspace"),
        "{sandbox}"
    );
}

#[test]
fn bad_model_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let bad = home.join("broken.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00").unwrap();
    let out = reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--model",
            bad.to_str().unwrap(),
            "--prompt",
            "x",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.gguf") && err.contains("truncated"),
        "{err}"
    );

    let out = reverie(home, &["model", "use", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    // Nothing has slept here, so there are no baselines to check.
    let out = reverie(home, &["bench", "value"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no finished night"));
    let out = reverie(home, &["bench", "export", "--runs", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs must be at least 1"));
    for (flag, value, says) in [
        ("--graph", "sideways", "choose auto, keep or recompute"),
        ("--steps", "0", "--steps must be at least 1"),
    ] {
        let args = [
            "bench",
            "train-step",
            "--model",
            "/tmp/x.gguf",
            "--len",
            "8",
            flag,
            value,
        ];
        let out = reverie(home, &args);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{flag} {value}"
        );
    }
    let out = reverie(home, &["model", "fetch", "no-such-model"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("reverie model list"));
    let out = reverie(
        home,
        &["model", "synth", "--arch", "mamba", "--out", "/tmp/x.gguf"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("qwen2"));
    // Simulated days: bad choices of families, shares and night settings
    // say what to do, before anything is measured.
    let broken = home.join("broken-night.json");
    std::fs::write(&broken, "{\"train\": ").unwrap();
    let broken = broken.to_str().unwrap();
    for (args, says) in [
        (
            &["--night-config", "/no/such/night.json"][..],
            "cannot read /no/such/night.json",
        ),
        (&["--night-config", broken], "fix or delete it"),
        (&["--families", "poetry"][..], "the families are arithmetic"),
        (
            &["--families", "arithmetic,notes"],
            "notes is both posed and held out",
        ),
        (&["--families", ""], "at least one family"),
        (&["--feedback", "2"], "shares between 0 and 1"),
        (
            &["--before", "/no/such/results.json"],
            "reading /no/such/results.json",
        ),
    ] {
        let out = reverie(home, &[&["bench", "days"][..], args].concat());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn model_use_makes_a_file_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let model = synth(home, "gemma3");
    assert!(reverie(home, &["model", "use", model.to_str().unwrap()])
        .status
        .success());
    let list = ok_json(&reverie(home, &["model", "list", "--json"]));
    assert_eq!(
        list["active"],
        model.canonicalize().unwrap().to_str().unwrap()
    );
    // chat now needs no --model
    let r = ok_json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--prompt",
            "hi",
            "--max-tokens",
            "2",
            "--json",
        ],
    ));
    assert!(r["reply_tokens"].as_u64().unwrap() > 0);
}
