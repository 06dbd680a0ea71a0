//! `reverie bench days` killed in the middle of its day goes on with
//! `--resume`: the channels it finished are kept, the one it was posing is
//! posed again, and the night and the measurement after it follow. Killed
//! during a measurement, it measures only the families left.

mod util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use util::{command, json, reverie, synth};

/// The results file of the one run under `home/bench`, once it exists.
fn results_file(home: &Path) -> Option<PathBuf> {
    std::fs::read_dir(home.join("bench"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("days-") && name.ends_with(".results.json")
        })
}

fn channels_posed(results: &Path) -> u64 {
    std::fs::read_to_string(results)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["day"]["channels"].as_u64())
        .unwrap_or(0)
}

fn families_measured(results: &Path) -> usize {
    std::fs::read_to_string(results)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["before_measured"]["scores"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Waits until `ready` holds for the run's results file, then kills the run.
fn kill_when(run: &mut std::process::Child, home: &Path, ready: fn(&Path) -> bool) -> PathBuf {
    let started = Instant::now();
    let results = loop {
        if let Some(f) = results_file(home).filter(|f| ready(f)) {
            break f;
        }
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended before it could be stopped"
        );
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the run stalled"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill().unwrap();
    run.wait().unwrap();
    results
}

/// A data folder whose active model is a tiny synthetic one.
fn tiny_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let model = synth(dir.path(), "qwen2");
    assert!(
        reverie(dir.path(), &["model", "use", model.to_str().unwrap()])
            .status
            .success()
    );
    dir
}

/// Starts a one-night run with one eval task per family, no verify gate
/// and `plan`'s other settings, its output discarded.
fn start_run(home: &Path, plan: &[&str]) -> std::process::Child {
    // The tools' definitions alone fill the tiny model's own 4K.
    let common = ["bench", "days", "--ctx", "16384", "--nights", "1"];
    let rest = ["--eval", "1", "--verify", "0"];
    command(home)
        .args(common.iter().chain(plan).chain(&rest))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Goes on with the run whose results file is `results`.
fn resume(home: &Path, results: &Path) -> std::process::Output {
    let results = results.to_str().unwrap();
    let args = ["bench", "days", "--ctx", "16384", "--resume", results];
    reverie(home, &[&args[..], &["--json"]].concat())
}

#[test]
fn a_run_killed_during_its_first_measurement_measures_only_what_is_left() {
    let dir = tiny_home();
    let home = dir.path();
    let plan = [
        "--tasks",
        "1",
        "--families",
        "arithmetic",
        "--held-out",
        "strings",
    ];
    let mut run = start_run(home, &plan);
    let results = kill_when(&mut run, home, |f| families_measured(f) == 1);
    let out = resume(home, &results);
    let log = String::from_utf8_lossy(&out.stderr);
    let report = json(&out);
    let before: Vec<&str> = report["before"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["family"].as_str().unwrap())
        .collect();
    assert_eq!(before, ["arithmetic", "strings"], "{report}");
    // The first measurement went on with strings alone; the one after the
    // night measured both.
    assert_eq!(log.matches("  arithmetic ").count(), 1, "{log}");
    assert_eq!(log.matches("  strings ").count(), 2, "{log}");
    assert!(report["after"].is_array(), "{report}");
}

#[test]
fn a_run_killed_during_its_day_resumes_where_it_stopped() {
    let dir = tiny_home();
    let home = dir.path();
    // Five channels of one task each, none followed up.
    let plan = [
        "--tasks",
        "5",
        "--per-channel",
        "1",
        "--families",
        "arithmetic",
        "--held-out",
        "",
        "--follow-up",
        "0",
        "--json",
    ];
    let mut run = start_run(home, &plan);
    // Killed as soon as its first channel of the day is saved.
    let results = kill_when(&mut run, home, |f| channels_posed(f) >= 1);
    let posed_before_kill = channels_posed(&results);
    assert!(posed_before_kill < 5, "killed in the middle of the day");

    let report = json(&resume(home, &results));
    let nights = report["nights"].as_array().unwrap();
    assert_eq!(nights.len(), 1, "{report}");
    // Every task of the day was posed once: nothing lost, nothing twice.
    assert_eq!(nights[0]["requests"], 5, "{report}");
    assert!(report["after"].is_array(), "{report}");
    assert_eq!(report["plan"]["tasks"], 5);
    let data = report["data_folder"].as_str().unwrap();
    let list = json(&reverie(Path::new(data), &["channel", "list", "--json"]));
    let mut names: Vec<String> = list["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["day1-1", "day1-2", "day1-3", "day1-4", "day1-5"]);

    // A finished run resumed again only reports what it measured.
    let again = json(&resume(home, &results));
    assert_eq!(again["after"], report["after"]);
    assert_eq!(again["nights"].as_array().unwrap().len(), 1);
    // Files that are no run say so.
    let stray = home.join("stray.json");
    std::fs::write(&stray, "{\"nights\": []}").unwrap();
    let out = reverie(
        home,
        &["bench", "days", "--resume", stray.to_str().unwrap()],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be resumed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn with_a_model_given_the_measurement_after_the_nights_is_of_their_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    // No active model: the run is started on this file by name.
    let model = synth(home, "qwen2");
    let model = model.to_str().unwrap();
    let args = [
        "bench",
        "days",
        "--model",
        model,
        "--ctx",
        "16384",
        "--nights",
        "1",
        "--tasks",
        "1",
        "--eval",
        "1",
        "--verify",
        "0",
        "--families",
        "arithmetic",
        "--held-out",
        "",
        "--json",
    ];
    let out = reverie(home, &args);
    let report = json(&out);
    let night = &report["nights"][0];
    assert_eq!(night["day_model"], model, "{report}");
    assert_eq!(report["before_measured"]["model"], model, "{report}");
    // The model the nights left active: their checkpoint where one was
    // deployed (which the tiny model's night is), never `--model` again.
    let deployed = night["deployed"].as_str().expect("the night deployed");
    assert!(deployed.contains("checkpoints"), "{deployed}");
    assert_eq!(report["after_measured"]["model"], deployed, "{report}");
}
