//! The attack suite: what a prompt-injected document or a confused model
//! could ask the tools to do, one test per case. Each asserts the refusal
//! and that nothing outside the workspace changed.

mod util;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use util::{assert_has, Fixture};

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

/// Waits up to `secs` for `cond`.
fn eventually(secs: u64, cond: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

fn python_output(f: &Fixture, code: &str) -> String {
    match f
        .tools
        .call("python", &json!({"code": code, "timeout_s": 20}))
    {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    }
}

#[test]
fn python_cannot_read_system_files() {
    let f = Fixture::new();
    let out = python_output(&f, "print(open('/etc/hostname').read())");
    assert_has(&out, "PermissionError");
}

#[test]
fn python_cannot_read_secrets_outside_the_workspace() {
    let f = Fixture::new();
    let ssh = f.dir.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY").unwrap();
    let out = python_output(
        &f,
        &format!("print(open({:?}).read())", ssh.join("id_ed25519")),
    );
    assert_has(&out, "PermissionError");
    assert!(!out.contains("PRIVATE KEY"), "{out}");
    let listing = python_output(&f, &format!("import os\nprint(os.listdir({:?}))", ssh));
    assert_has(&listing, "PermissionError");
}

#[test]
fn python_cannot_reach_the_data_folder() {
    let f = Fixture::new();
    let db = f.dir.path().join("reverie.sqlite3");
    assert!(db.exists());
    let before = std::fs::read(&db).unwrap();
    let out = python_output(&f, &format!("open({db:?}, 'ab').write(b'x')"));
    assert_has(&out, "PermissionError");
    let out = python_output(&f, "open('../../reverie.sqlite3', 'rb').read()");
    assert!(
        out.contains("PermissionError") || out.contains("FileNotFoundError"),
        "{out}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn python_cannot_write_outside_the_workspace() {
    let f = Fixture::new();
    let target = f.dir.path().join("planted.txt");
    let out = python_output(&f, &format!("open({target:?}, 'w').write('x')"));
    assert_has(&out, "PermissionError");
    assert!(!target.exists());
    let out = python_output(&f, "open('/tmp/reverie-attack-planted', 'w').write('x')");
    assert_has(&out, "PermissionError");
    assert!(!Path::new("/tmp/reverie-attack-planted").exists());
    // Inside the workspace it may write, and its private temp folder works.
    let ok = python_output(
        &f,
        "import tempfile\nopen('mine.txt', 'w').write('ok')\nwith tempfile.NamedTemporaryFile() as t: t.write(b'x')\nprint('done')",
    );
    assert_has(&ok, "done");
    assert_eq!(f.read("mine.txt"), "ok");
}

#[test]
fn the_childs_environment_holds_no_secrets() {
    // SAFETY: set before any child starts in this test binary's thread;
    // other tests only ever add, never read, this name.
    unsafe { std::env::set_var("REVERIE_TEST_SECRET_TOKEN", "hunter2") };
    let f = Fixture::new();
    let out = python_output(&f, "import os\nprint(sorted(os.environ))");
    assert!(!out.contains("REVERIE_TEST_SECRET_TOKEN"), "{out}");
    assert!(!out.contains("SSH_AUTH_SOCK"), "{out}");
    for allowed in ["PATH", "HOME", "TMPDIR"] {
        assert_has(&out, allowed);
    }
}

#[test]
fn python_has_no_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let f = Fixture::new();
    let out = python_output(
        &f,
        &format!("import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')"),
    );
    assert!(!out.contains("connected"), "{out}");
    assert!(
        out.contains("Error") || out.contains("error"),
        "the connection must fail: {out}"
    );
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing may have connected");
    let udp = python_output(
        &f,
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x', ('1.1.1.1', 53))\nprint('sent')",
    );
    if reverie_tools::SandboxSupport::get().namespaces {
        assert!(!udp.contains("sent"), "{udp}");
    }
}

#[test]
fn a_fork_bomb_is_contained() {
    let support = reverie_tools::SandboxSupport::get();
    assert!(
        !support.describe().contains("not limited"),
        "this machine cannot limit the number of processes: {}",
        support.describe()
    );
    let f = Fixture::new();
    let t0 = Instant::now();
    let out = match f.tools.call(
        "python",
        &json!({"code": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "timeout_s": 5}),
    ) {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    };
    assert_has(&out, "timed out");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    // The app can still start processes afterwards.
    assert_has(&python_output(&f, "print('still here')"), "still here");
}

#[test]
fn a_setsid_grandchild_dies_with_the_app() {
    // Built at run time so that only the grandchild's command line has it.
    let marker = "987.654321";
    let f = Fixture::new();
    f.ok(
        "jobs",
        json!({"action": "start", "code": ("import subprocess, time\nsubprocess.Popen(['sleep', '987.' + '654321'], start_new_session=True)\nprint('spawned', flush=True)\ntime.sleep(600)")}),
    );
    assert!(
        eventually(10, || !processes_with(marker).is_empty()),
        "the grandchild never started"
    );
    let Fixture {
        tools, services, ..
    } = f;
    drop(tools);
    drop(services);
    assert!(
        eventually(5, || processes_with(marker).is_empty()),
        "a setsid grandchild outlived the app: {:?}",
        processes_with(marker)
    );
}

#[test]
fn a_stopped_run_leaves_no_processes() {
    let marker = "876.54321";
    let f = Fixture::new();
    let out = match f.tools.call(
        "python",
        &json!({"code": ("import subprocess, os, time\nsubprocess.Popen(['sleep', '876.' + '54321'], start_new_session=True)\ntime.sleep(60)"), "timeout_s": 2}),
    ) {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    };
    assert_has(&out, "timed out");
    assert!(
        eventually(5, || processes_with(marker).is_empty()),
        "a grandchild outlived its run: {:?}",
        processes_with(marker)
    );
}

#[test]
fn python_cannot_clear_its_parent_death_signal_or_trace() {
    let f = Fixture::new();
    let out = python_output(
        &f,
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('prctl', libc.prctl(1, 0, 0, 0, 0), ctypes.get_errno())\nprint('ptrace', libc.ptrace(0, 0, 0, 0), ctypes.get_errno())",
    );
    assert_has(&out, "prctl -1 1");
    assert_has(&out, "ptrace -1 1");
}
