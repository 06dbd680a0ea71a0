//! The whole loop on a tiny model: chat → trajectory → sleep → new GGUF →
//! llama.cpp loads it → chat continues; then rollback.

mod util;

use std::path::Path;

use util::{command, json as last_json, reverie};

fn day(home: &Path) {
    let m = home.join("base.gguf");
    assert!(reverie(
        home,
        &[
            "model",
            "synth",
            "--arch",
            "qwen2",
            "--out",
            m.to_str().unwrap()
        ]
    )
    .status
    .success());
    assert!(reverie(home, &["model", "use", m.to_str().unwrap()])
        .status
        .success());
    for (ch, p) in [
        ("work", "fix the bug"),
        ("work", "now add a test"),
        ("notes", "summarise the file"),
    ] {
        last_json(&reverie(
            home,
            &[
                "chat",
                "--no-tools",
                "--channel",
                ch,
                "--prompt",
                p,
                "--max-tokens",
                "6",
                "--json",
            ],
        ));
    }
}

fn config(home: &Path, max_regression: f64) -> String {
    let p = home.join(format!("night-{max_regression}.json"));
    let cfg = serde_json::json!({
        "n_ctx": 4096,
        "retries": 1,
        "max_perplexity_regression": max_regression,
        "verify_tasks": 1,
        "train": {"batch_size": 4, "lora": {"rank": 4, "alpha": 8.0}, "optim": {"lr": 0.001, "warmup_steps": 1}}
    });
    std::fs::write(&p, cfg.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn day_night_day() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    // With the embedding model installed the value memory uses it.
    last_json(&reverie(
        home,
        &["model", "fetch", "all-minilm-l6-v2", "--json"],
    ));
    let out = reverie(
        home,
        &["sleep", "--json", "--config", &config(home, 1000.0)],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let summary = last_json(&out);
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for stage in [
        "practice",
        "collect",
        "judge",
        "predict",
        "understand",
        "advantage",
        "train",
        "export",
        "verify",
        "deploy",
    ] {
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "stage_finished" && e["stage"] == stage),
            "stage {stage} did not finish: {stdout}"
        );
    }
    assert!(events.iter().any(|e| e["type"] == "train_step"));
    let deployed = summary["deployed"]
        .as_str()
        .expect("a checkpoint is deployed")
        .to_string();
    assert!(Path::new(&deployed).exists());
    let report = &summary["report"];
    assert!(report["tasks"].as_array().unwrap().len() >= 2, "{report}");
    // The night's training set stays beside its checkpoint, one sequence a
    // line, as `reverie train --data` reads it.
    let data = std::fs::read_to_string(report["train"]["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data.lines().count() as u64,
        report["train"]["sequences"].as_u64().unwrap(),
        "{report}"
    );
    for line in data.lines() {
        let seq: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            seq["ids"].as_array().unwrap().len(),
            seq["roles"].as_array().unwrap().len()
        );
    }
    assert!(report["verify"]["perplexity_after"].is_number());
    assert_eq!(report["memory"]["similarity"], "all-minilm-l6-v2");
    let understood = report["understanding"].as_array().unwrap();
    assert_eq!(understood.len(), report["tasks"].as_array().unwrap().len());
    assert!(
        understood.iter().any(|u| u.is_number()),
        "30% of the sub-tasks get the understanding pass: {report}"
    );

    // The night's baselines, read back: every judged sub-task predicted
    // again, its written grade and its mean grade side by side.
    let value = last_json(&reverie(home, &["bench", "value", "--json"]));
    let tasks = report["tasks"].as_array().unwrap().len() as u64;
    assert_eq!(
        value["tasks"].as_u64().unwrap() + value["unanswered"].as_u64().unwrap(),
        tasks,
        "{value}"
    );
    for k in ["mae_answered", "mae_mean", "spread_mean"] {
        assert!(
            value[k].as_f64().is_some_and(|v| (0.0..=1.0).contains(&v)),
            "{value}"
        );
    }

    // Morning: the new model is the active one and llama.cpp serves it.
    let list = last_json(&reverie(home, &["model", "list", "--json"]));
    assert_eq!(
        list["active"],
        std::fs::canonicalize(&deployed).unwrap().to_str().unwrap()
    );
    let r = last_json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--channel",
            "work",
            "--prompt",
            "good morning",
            "--max-tokens",
            "4",
            "--json",
        ],
    ));
    assert!(r["reply_tokens"].as_u64().unwrap() > 0);

    let nights = last_json(&reverie(home, &["night", "list", "--json"]));
    assert_eq!(nights["nights"][0]["status"], "done");
    let cps = last_json(&reverie(home, &["checkpoint", "list", "--json"]));
    let cps = cps["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[1]["active"], true);
    let base_id = cps[0]["id"].as_i64().unwrap().to_string();
    assert!(reverie(home, &["checkpoint", "rollback", &base_id])
        .status
        .success());
    let list = last_json(&reverie(home, &["model", "list", "--json"]));
    assert!(list["active"].as_str().unwrap().ends_with("base.gguf"));
}

#[test]
fn a_regressed_night_keeps_the_old_model_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    let before = last_json(&reverie(home, &["model", "list", "--json"]))["active"].clone();
    // Any change at all counts as a regression here.
    let summary = last_json(&reverie(
        home,
        &["sleep", "--json", "--config", &config(home, -1.0)],
    ));
    assert!(summary["deployed"].is_null());
    assert!(
        summary["kept_reason"]
            .as_str()
            .unwrap()
            .contains("perplexity"),
        "{summary}"
    );
    assert_eq!(
        last_json(&reverie(home, &["model", "list", "--json"]))["active"],
        before
    );
    assert!(
        last_json(&reverie(home, &["checkpoint", "list", "--json"]))["checkpoints"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// The verify gate on task checks, end to end: the second night's old
/// model is the one the first night deployed, so the second night reads
/// that model's results back from the first night's report instead of
/// measuring them again. Here they say it passed its arithmetic check; the
/// new model (a random-weight one) fails it when measured for real, so the
/// night lost a task of a trained family and must keep the old model.
#[test]
fn a_night_that_loses_a_familys_tasks_keeps_the_old_model() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    let first = last_json(&reverie(
        home,
        &["sleep", "--json", "--config", &config(home, 1000.0)],
    ));
    assert!(first["deployed"].is_string(), "{first}");
    let deployed = last_json(&reverie(home, &["model", "list", "--json"]))["active"].clone();

    let store = reverie_store::Store::open(&reverie_core::Home::new(home)).unwrap();
    let night = store.nights().unwrap().pop().unwrap();
    let mut report = night.report.clone();
    let checks = report["verify"]["tasks"].as_array_mut().unwrap();
    let arithmetic = checks
        .iter_mut()
        .find(|c| c["family"] == "arithmetic")
        .expect("day nights check arithmetic too");
    for o in arithmetic["after_outcomes"].as_array_mut().unwrap() {
        o["passed"] = true.into();
    }
    store
        .update_night(night.id, night.status, &night.stage, &report)
        .unwrap();
    drop(store);

    day(home);
    // `day` made the base model active again: go back to the deployed one.
    assert!(reverie(home, &["model", "use", deployed.as_str().unwrap()])
        .status
        .success());
    let second = last_json(&reverie(
        home,
        &["sleep", "--json", "--config", &config(home, 1000.0)],
    ));
    assert!(second["deployed"].is_null(), "{second}");
    // The second night trained the first one's model but was judged by the
    // model as installed, so one night's training cannot move the next
    // night's rewards.
    assert_eq!(second["report"]["base"], deployed);
    assert_eq!(second["report"]["judge"], first["report"]["base"]);
    assert_eq!(first["report"]["judge"], first["report"]["base"]);
    let why = second["kept_reason"].as_str().unwrap();
    assert!(why.contains("arithmetic"), "{why}");
    let check = second["report"]["verify"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["family"] == "arithmetic")
        .unwrap()
        .clone();
    assert_eq!(check["before_from_night"], first["night"], "{check}");
    assert_eq!(check["paired"]["lost"], 1, "{check}");
    assert_eq!(
        last_json(&reverie(home, &["model", "list", "--json"]))["active"],
        deployed,
        "the old model stays"
    );
}

#[test]
fn a_killed_night_resumes_after_its_last_finished_stage() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    let cfg = config(home, 1000.0);
    let mut child = command(home)
        .args(["sleep", "--json", "--config", &cfg])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Kill it (SIGKILL) as soon as the judge stage is recorded.
    while let Some(Ok(l)) = lines.next() {
        let v: serde_json::Value = serde_json::from_str(&l).unwrap_or_default();
        if v["type"] == "stage_finished" && v["stage"] == "judge" {
            child.kill().unwrap();
            break;
        }
    }
    child.wait().unwrap();
    let nights = last_json(&reverie(home, &["night", "list", "--json"]));
    assert_eq!(nights["nights"][0]["status"], "running");
    // doctor points at the interrupted night
    let out = reverie(home, &["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let night = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "night")
        .unwrap()
        .clone();
    assert_eq!(night["ok"], false);
    assert!(night["fix"].as_str().unwrap().contains("reverie sleep"));

    let out = reverie(home, &["sleep", "--json", "--config", &cfg]);
    let summary = last_json(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let started: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "stage_started")
        .map(|e| e["stage"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !started.contains(&"collect".to_string()) && !started.contains(&"judge".to_string()),
        "{started:?}"
    );
    assert!(started.contains(&"predict".to_string()) && started.contains(&"train".to_string()));
    assert_eq!(summary["night"], 1, "the same night continues");
    assert!(summary["deployed"].is_string());
    let nights = last_json(&reverie(home, &["night", "list", "--json"]));
    assert_eq!(nights["nights"].as_array().unwrap().len(), 1);
    assert_eq!(nights["nights"][0]["status"], "done");
}

#[test]
fn ctrl_c_during_training_cancels_and_keeps_the_model() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    let before = last_json(&reverie(home, &["model", "list", "--json"]))["active"].clone();
    let cfg = home.join("long.json");
    std::fs::write(&cfg, r#"{"retries":1,"n_ctx":4096,"train":{"batch_size":1,"epochs":200,"lora":{"rank":4,"alpha":8.0}}}"#).unwrap();
    let mut child = command(home)
        .args(["sleep", "--json", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(l)) = lines.next() {
        if l.contains("\"train_step\"") {
            // SIGINT, as Ctrl-C sends
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            break;
        }
    }
    for _ in lines.by_ref() {}
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("cancelled"), "{err}");
    let nights = last_json(&reverie(home, &["night", "list", "--json"]));
    assert_eq!(nights["nights"][0]["status"], "cancelled");
    assert_eq!(
        last_json(&reverie(home, &["model", "list", "--json"]))["active"],
        before
    );
}

#[test]
fn sleep_when_idle_waits_for_quiet_and_at_checks_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    // The day just ended, so 0 idle minutes are already reached.
    let summary = last_json(&reverie(
        home,
        &[
            "sleep",
            "--json",
            "--when-idle",
            "0",
            "--config",
            &config(home, 1000.0),
        ],
    ));
    assert!(summary["deployed"].is_string());
    let out = reverie(home, &["sleep", "--at", "25:99"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HH:MM"));
}

#[test]
fn chat_waits_while_a_night_runs_and_two_nights_do_not_overlap() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    // This test process plays the running night: it holds the night lock.
    let lock = reverie_night::lock::SleepGuard::acquire(&reverie_core::Home::new(home)).unwrap();
    let out = reverie(home, &["sleep", "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already running"));

    let mut child = command(home)
        .args([
            "chat",
            "--no-tools",
            "--prompt",
            "are you awake?",
            "--max-tokens",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "chat must wait for the night"
    );
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let v = last_json(&out);
    assert!(v["reply_tokens"].as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("sleeping"));
}

/// Practice by day; the night rewards those episodes by their checks (no
/// judge) and leaves eval episodes out.
#[test]
fn practice_is_trained_on_by_its_checks_and_eval_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = home.join("base.gguf");
    let m = m.to_str().unwrap();
    assert!(
        reverie(home, &["model", "synth", "--arch", "qwen2", "--out", m])
            .status
            .success()
    );
    assert!(reverie(home, &["model", "use", m]).status.success());
    let tiny = ["--ctx", "4096", "--max-tool-calls", "1"];
    let practice = last_json(&reverie(
        home,
        &[
            &[
                "practice",
                "--family",
                "arithmetic",
                "--n",
                "2",
                "--samples",
                "2",
                "--seed",
                "5",
                "--json",
            ][..],
            &tiny[..],
        ]
        .concat(),
    ));
    assert_eq!(practice["kind"], "practice");
    assert_eq!(practice["n"], 4, "two tasks, two attempts each");
    assert_eq!(practice["tasks"], 2);
    assert_eq!(practice["difficulty"], 2, "the tasker starts at level 2");
    let first = &practice["episodes"][0];
    assert!(first["task"]["prompt"]
        .as_str()
        .unwrap()
        .starts_with("Start with"));
    assert!(first["verdict"]["why"].is_string());
    let eval = last_json(&reverie(
        home,
        &[
            &["eval", "--family", "units", "--n", "2", "--json"][..],
            &tiny[..],
        ]
        .concat(),
    ));
    assert_eq!(eval["kind"], "eval");
    assert!(eval["success_rate"].as_f64().unwrap() <= 1.0);
    let stopped = eval["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["stopped"] == true)
        .count();
    assert_eq!(eval["stopped"], stopped, "turns the harness stopped");
    let refused = reverie(home, &["practice", "--family", "units", "--n", "1"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("held-out"));

    // The night's own practice stage adds a batch of another family.
    let out = reverie(
        home,
        &[
            &["sleep", "--json", "--config", &config(home, 1000.0)][..],
            &["--practice", "strings:1", "--practice-samples", "2"],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let practice_items = stdout
        .lines()
        .filter(|l| l.contains("\"type\":\"item\"") && l.contains("\"stage\":\"practice\""))
        .count();
    assert_eq!(
        practice_items, 2,
        "one progress event per practice attempt: {stdout}"
    );
    let report = &last_json(&out)["report"];
    let tasks = report["tasks"].as_array().unwrap();
    let strings = tasks
        .iter()
        .filter(|t| {
            t["description"]
                .as_str()
                .unwrap()
                .starts_with("practice (strings")
        })
        .count();
    assert_eq!(strings, 2, "{report}");
    // The model wrote every other task (the second arithmetic one; the
    // single strings task came from the generator): one proposal, rewarded
    // by how the solvers did, compared with the family's other proposals.
    let proposals: Vec<_> = tasks
        .iter()
        .filter(|t| t["description"].as_str().unwrap().starts_with("tasker ("))
        .collect();
    assert_eq!(proposals.len(), 1, "{report}");
    assert!(proposals
        .iter()
        .all(|t| t["group"].as_str().unwrap().starts_with("tasker: ")));
    let practised: Vec<_> = tasks
        .iter()
        .filter(|t| {
            t["description"]
                .as_str()
                .unwrap()
                .starts_with("practice (arithmetic, level 2)")
        })
        .collect();
    assert_eq!(practised.len(), 4, "{report}");
    for t in &practised {
        assert!(t["reason"]
            .as_str()
            .unwrap()
            .starts_with("checked by program"));
        assert!(t["reward"] == 0.0 || t["reward"] == 1.0);
    }
    // Attempts of one task are judged against each other: a group where
    // all passed or all failed teaches nothing.
    let advs = report["advantages"].as_array().unwrap();
    for (i, t) in tasks.iter().enumerate() {
        let Some(group) = t["group"].as_str().filter(|g| !g.starts_with("tasker:")) else {
            continue;
        };
        if !report["understanding"][i].is_null() {
            continue; // averaged with its understanding score
        }
        let rewards: Vec<f64> = tasks
            .iter()
            .filter(|u| u["group"].as_str() == Some(group))
            .map(|u| u["reward"].as_f64().unwrap())
            .collect();
        assert_eq!(rewards.len(), 2, "{group}");
        if rewards[0] == rewards[1] {
            assert_eq!(advs[i].as_f64(), Some(0.0), "{report}");
        } else {
            let a = advs[i].as_f64().unwrap();
            assert_eq!(a > 0.0, t["reward"] == 1.0, "{report}");
        }
    }
    // The value model is asked once per description: the attempts of one
    // task share its prediction, tokens and all.
    let preds = report["predictions"].as_array().unwrap();
    let mut distinct = std::collections::HashMap::new();
    for (t, p) in tasks.iter().zip(preds) {
        let first = distinct
            .entry(t["description"].as_str().unwrap())
            .or_insert(p);
        assert_eq!(*first, p, "{report}");
    }
    assert!(distinct.len() < tasks.len(), "{report}");
    assert_eq!(report["memory"]["asked"], distinct.len(), "{report}");
    // The verify stage measured every family (the practised ones at their
    // level), the held-out one and desk work on the old and the new model;
    // the desk checks' scratch folder is gone.
    let checks = report["verify"]["tasks"].as_array().unwrap();
    let families: Vec<&str> = checks
        .iter()
        .map(|c| c["family"].as_str().unwrap())
        .collect();
    assert_eq!(
        families,
        ["arithmetic", "ledger", "strings", "units", "files", "notes"],
        "{report}"
    );
    assert!(!home.join("night-scratch").join("desk").exists());
    assert!(checks
        .iter()
        .all(|c| c["tasks"] == 1 && c["before"].is_f64()));
    assert!(
        tasks
            .iter()
            .all(|t| !t["description"].as_str().unwrap().contains("How many")),
        "eval episodes are never trained on: {report}"
    );
    let notes = report["notes"].to_string();
    assert!(
        notes.contains(
            "6 practice episodes rewarded by their checks, 1 tasker proposal by their solvers' pass rates"
        ),
        "{notes}"
    );

    // The next night's old model is the one this night deployed and
    // measured: its side of each check is read back, not measured again.
    let first = last_json(&out);
    assert!(first["deployed"].is_string(), "{first}");
    let out = reverie(
        home,
        &[
            &["sleep", "--json", "--config", &config(home, 1000.0)][..],
            &["--practice", "strings:1", "--practice-samples", "2"],
        ]
        .concat(),
    );
    let second = last_json(&out);
    let (was, now) = (&first["report"]["verify"], &second["report"]["verify"]);
    assert_eq!(now["perplexity_before_from_night"], first["night"], "{now}");
    assert_eq!(now["perplexity_before"], was["perplexity_after"]);
    let check = |v: &serde_json::Value, family: &str| {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["family"] == family)
            .cloned()
            .unwrap_or_else(|| panic!("no {family} check: {v}"))
    };
    let (units_was, units_now) = (check(was, "units"), check(now, "units"));
    assert_eq!(units_now["before_from_night"], first["night"], "{now}");
    assert_eq!(units_now["before_outcomes"], units_was["after_outcomes"]);
    assert_eq!(units_now["before"], units_was["after"]);
    assert_eq!(units_now["after_outcomes"].as_array().unwrap().len(), 1);
    // The practised family is reused only at the level it was measured at.
    let (strings_was, strings_now) = (check(was, "strings"), check(now, "strings"));
    if strings_now["level"] == strings_was["level"] {
        assert_eq!(strings_now["before_from_night"], first["night"], "{now}");
    } else {
        assert!(strings_now["before_from_night"].is_null(), "{now}");
    }
}

#[test]
fn ratings_from_the_cli_are_the_rewards_the_night_trains_with() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let m = util::synth(home, "qwen2");
    assert!(reverie(home, &["model", "use", m.to_str().unwrap()])
        .status
        .success());
    let ask = |p: &str| {
        last_json(&reverie(
            home,
            &[
                "chat",
                "--no-tools",
                "--channel",
                "work",
                "--prompt",
                p,
                "--max-tokens",
                "6",
                "--json",
            ],
        ))
    };
    let first = ask("what is 17 times 3?")["reply_message"]
        .as_i64()
        .unwrap();
    ask("and what is 2 + 2?");
    // ↻ from the command line: the same question again, the old answer
    // taken back.
    let again = last_json(&reverie(
        home,
        &[
            "chat",
            "--no-tools",
            "--channel",
            "work",
            "--again",
            "--seed",
            "7",
            "--max-tokens",
            "6",
            "--json",
        ],
    ));
    assert!(again["reply_message"].as_i64().is_some(), "{again}");

    // `/bad` in the interactive chat rates the reply just given.
    let mut chat = command(home)
        .args([
            "chat",
            "--no-tools",
            "--channel",
            "work",
            "--max-tokens",
            "4",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"spell cat backwards\n/bad\n")
        .unwrap();
    let out = chat.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("👎 reply"), "{said}");

    let rated = last_json(&reverie(
        home,
        &[
            "rate",
            "good",
            "--channel",
            "work",
            "--message",
            &first.to_string(),
            "--json",
        ],
    ));
    assert_eq!(
        (rated["message"].as_i64(), rated["good"].as_bool()),
        (Some(first), Some(true))
    );
    let refused = reverie(home, &["rate", "good", "--channel", "nowhere"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no channel named \"nowhere\""));

    let summary = last_json(&reverie(
        home,
        &["sleep", "--json", "--config", &config(home, 1000.0)],
    ));
    let report = &summary["report"];
    let tasks = report["tasks"].as_array().unwrap();
    let rated: Vec<&serde_json::Value> = tasks
        .iter()
        .filter(|t| t["feedback"].is_boolean())
        .collect();
    assert_eq!(rated.len(), 2, "{report}");
    for t in rated {
        let good = t["feedback"].as_bool().unwrap();
        assert_eq!(t["kind"], "rated");
        assert_eq!(
            t["reward"].as_f64().unwrap(),
            if good { 1.0 } else { 0.0 },
            "{t}"
        );
    }
    assert_eq!(report["judge_agreement"]["rated"], 2, "{report}");
    let preferred: Vec<f64> = tasks
        .iter()
        .filter(|t| t["kind"] == "preference")
        .map(|t| t["reward"].as_f64().unwrap())
        .collect();
    assert_eq!(
        preferred,
        [1.0, 0.0],
        "the answer kept, then the one taken back: {report}"
    );
}

#[test]
fn a_device_out_of_memory_trains_again_with_less_then_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    day(home);
    // The first two tries fail as a GPU out of memory would.
    let out = command(home)
        .env("REVERIE_FAULT_TRAIN_OOM", "2")
        .args(["sleep", "--json", "--config", &config(home, 1000.0)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    let notes: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "note")
        .filter_map(|v| v["message"].as_str().map(str::to_string))
        .filter(|m| m.contains("ran out of memory"))
        .collect();
    assert_eq!(notes.len(), 2, "{stdout}");
    assert!(
        notes[0].contains("trying again recomputing every layer"),
        "{}",
        notes[0]
    );
    assert!(notes[1].contains("trying again on the CPU"), "{}", notes[1]);
    let summary = last_json(&out);
    assert!(
        summary["report"]["train"]["steps"].as_u64().unwrap() > 0,
        "{summary}"
    );
}
