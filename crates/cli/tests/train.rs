//! `reverie train` and `reverie logprobs` end to end.

mod util;

use std::path::Path;
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

use util::{command, json, reverie, synth};

fn setup(home: &Path) -> String {
    synth(home, "qwen2").to_str().unwrap().to_string()
}

/// `reverie train --data DATA --base BASE --out OUT`, then `extra`.
fn train(home: &Path, data: &Path, base: &str, out: &Path, extra: &[&str]) -> Command {
    let mut c = command(home);
    c.arg("train")
        .arg("--data")
        .arg(data)
        .args(["--base", base, "--out"])
        .arg(out)
        .args(extra);
    c
}

#[test]
fn trains_on_an_exported_day_and_reports_every_term() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = setup(home);
    for p in ["first task", "second task"] {
        json(&reverie(
            home,
            &[
                "chat",
                "--no-tools",
                "--model",
                &m,
                "--prompt",
                p,
                "--max-tokens",
                "6",
                "--json",
            ],
        ));
    }
    let data = home.join("day.jsonl");
    assert!(reverie(home, &["export", "--out", data.to_str().unwrap()])
        .status
        .success());
    let out = home.join("night");
    let s = json(
        &train(home, &data, &m, &out, &["--batch-size", "1", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(s["steps"], 1);
    assert!(
        s["last_loss"]["oapl"].is_number()
            && s["last_loss"]["env"].is_number()
            && s["last_loss"]["user"].as_f64().unwrap() > 0.0
    );
    let kl = s["kl_merged_vs_exported"].as_f64().unwrap();
    assert!((0.0..0.05).contains(&kl), "kl {kl}");
    assert!(out.join("model-q8_0.gguf").exists() && out.join("adapter.gguf").exists());
    // llama.cpp serves the night's model
    let r = json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--model",
            out.join("model-q8_0.gguf").to_str().unwrap(),
            "--prompt",
            "morning",
            "--max-tokens",
            "3",
            "--json",
        ],
    ));
    assert!(r["reply_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn logprobs_agree_between_trainer_and_llama_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = setup(home);
    let text = home.join("t.txt");
    std::fs::write(&text, "<|im_start|>user\nthe file has many lines<|im_end|>").unwrap();
    let t = text.to_str().unwrap();
    let a = json(&reverie(
        home,
        &[
            "logprobs", "--model", &m, "--text", t, "--engine", "train", "--json",
        ],
    ));
    let b = json(&reverie(
        home,
        &[
            "logprobs", "--model", &m, "--text", t, "--engine", "infer", "--json",
        ],
    ));
    assert_eq!(a["tokens"], b["tokens"]);
    let (x, y) = (
        a["logprobs"].as_array().unwrap(),
        b["logprobs"].as_array().unwrap(),
    );
    for (p, q) in x.iter().zip(y) {
        assert!((p.as_f64().unwrap() - q.as_f64().unwrap()).abs() < 1e-3);
    }
}

#[test]
fn bad_training_data_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = setup(home);
    let data = home.join("bad.jsonl");
    std::fs::write(
        &data,
        "{\"ids\":[1,2,99999],\"roles\":[\"context\",\"action\",\"action\"]}\n",
    )
    .unwrap();
    let out = train(home, &data, &m, &home.join("o"), &[])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the model's vocabulary"));
}

#[test]
fn a_device_that_cannot_be_had_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = setup(home);
    let data = home.join("day.jsonl");
    write_data(&data);
    let train_on = |device: &str| {
        train(home, &data, &m, &home.join("o"), &["--device", device])
            .output()
            .unwrap()
    };
    let out = train_on("tpu");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use auto, cpu, cuda or cuda:N"), "{err}");
    if cfg!(feature = "cuda") {
        return;
    }
    // Without CUDA in the build, asking for a GPU is refused before any
    // work, with the way to get one.
    let out = train_on("cuda:0");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features cuda"), "{err}");
    assert!(!home.join("o").join("model-q8_0.gguf").exists());
}

fn write_data(path: &Path) {
    let mut lines = String::new();
    for i in 0..24 {
        let adv = if i % 3 == 0 { -1.0 } else { 1.0 };
        lines.push_str(&format!(
            "{{\"ids\":[3,{},{},4,3,{}],\"roles\":[\"context\",\"user\",\"user\",\"context\",\"context\",\"action\"],\"advantage\":{adv}}}\n",
            300 + i, 301 + i % 5, 280 + i % 7
        ));
    }
    std::fs::write(path, lines).unwrap();
}

fn losses(log: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["step"].as_u64().unwrap(),
                v["loss"]["total"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn kill_9_mid_training_then_resume_gives_the_same_losses() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = setup(home);
    let data = home.join("d.jsonl");
    write_data(&data);
    let cfg = home.join("cfg.json");
    std::fs::write(
        &cfg,
        r#"{"batch_size":2,"epochs":3,"checkpoint_every":1,"optim":{"lr":0.01,"warmup_steps":2}}"#,
    )
    .unwrap();
    let run = |out: &Path, log: &Path| {
        train(
            home,
            &data,
            &m,
            out,
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--steps-log",
                log.to_str().unwrap(),
                "--json",
            ],
        )
    };
    let (full_out, full_log) = (home.join("full"), home.join("full.log"));
    json(&run(&full_out, &full_log).output().unwrap());
    let full = losses(&full_log);
    assert_eq!(full.len(), 36);

    let (out, log) = (home.join("killed"), home.join("killed.log"));
    let mut child = run(&out, &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while losses(&log).len() < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, wherever it is
    child.wait().unwrap();
    let before = losses(&log);
    assert!(
        before.len() >= 10 && before.len() < 36,
        "killed after {} steps",
        before.len()
    );
    json(&run(&out, &log).output().unwrap());
    let mut all = losses(&log);
    // A step that ran after the last checkpoint is redone: keep the redo.
    all.sort_by_key(|(s, _)| *s);
    all.dedup_by(|b, a| {
        if a.0 == b.0 {
            *a = *b;
            true
        } else {
            false
        }
    });
    assert_eq!(all.len(), 36);
    for ((s1, l1), (s2, l2)) in full.iter().zip(&all) {
        assert_eq!(s1, s2);
        assert_eq!(l1, l2, "step {s1}: loss after resume differs");
    }
}
