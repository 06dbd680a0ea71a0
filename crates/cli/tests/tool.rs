//! `reverie tool`, `undo` and `redo`: the agent's tools from the command
//! line, with the same sandbox and errors, and a non-zero exit on failure.

mod util;

use util::reverie;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn tools_run_by_hand_with_undo_and_redo() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let ws = dir.path().join("project");
    let ok = |args: &[&str]| {
        let out = reverie(&home, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let w = ws.to_str().unwrap();
    let created = ok(&[
        "tool",
        "write_file",
        "--workspace",
        w,
        "--args",
        r#"{"path": "todo.txt", "content": "milk\n"}"#,
    ]);
    assert!(created.contains("created todo.txt"), "{created}");
    assert_eq!(
        std::fs::read_to_string(ws.join("todo.txt")).unwrap(),
        "milk\n"
    );
    // The channel remembers its workspace.
    ok(&[
        "tool",
        "edit_file",
        "--args",
        r#"{"path": "todo.txt", "action": "insert", "start_line": 2, "text": "bread"}"#,
    ]);
    assert_eq!(
        std::fs::read_to_string(ws.join("todo.txt")).unwrap(),
        "milk\nbread\n"
    );

    let json = ok(&[
        "tool",
        "read_file",
        "--json",
        "--args",
        r#"{"path": "todo.txt"}"#,
    ]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["text"].as_str().unwrap().contains("2| bread"));

    assert!(ok(&["undo"]).contains("undid edit_file"));
    assert_eq!(
        std::fs::read_to_string(ws.join("todo.txt")).unwrap(),
        "milk\n"
    );
    ok(&["redo"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("todo.txt")).unwrap(),
        "milk\nbread\n"
    );

    // Tool errors: the agent's own text, and a failing exit status.
    let out = reverie(
        &home,
        &[
            "tool",
            "read_file",
            "--args",
            r#"{"path": "../../etc/passwd"}"#,
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is outside the workspace"),
        "{}",
        stderr(&out)
    );
    let out = reverie(&home, &["tool", "read_file", "--args", "{not json"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--args is not valid JSON"));
    let out = reverie(&home, &["tool", "fly", "--args", "{}"]);
    assert!(stderr(&out).contains("there is no tool named `fly`"));
    let out = reverie(&home, &["redo", "--channel", "other"]);
    assert!(!out.status.success() && stderr(&out).contains("nothing to redo"));

    let list = ok(&["tool", "--list"]);
    for name in [
        "read_file",
        "grep",
        "python",
        "git",
        "read_pdf",
        "board",
        "update_sys",
    ] {
        assert!(
            list.contains(&format!("{name}: ")),
            "{name} missing from --list"
        );
    }
}

/// Pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_setsid_grandchild_is_gone_when_the_app_exits() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // The marker is assembled by the script, so only the grandchild has it;
    // the script says so once the grandchild runs, then leaves it behind.
    let out = reverie(
        &home,
        &[
            "tool",
            "python",
            "--args",
            r#"{"code": "import subprocess\np = subprocess.Popen(['sleep', '765.' + '4321'], start_new_session=True)\nprint('grandchild', p.pid, 'started')"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("started"), "{}", stdout(&out));
    // The command has exited; within a moment nothing it started is left.
    let t0 = std::time::Instant::now();
    while !processes_with("765.4321").is_empty() && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        processes_with("765.4321").is_empty(),
        "a setsid grandchild outlived the app: {:?}",
        processes_with("765.4321")
    );
}
