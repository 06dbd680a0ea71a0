//! The attack suite: what a prompt-injected document or a confused model
//! could ask the tools to do, one test per case. Each asserts the refusal
//! and that nothing outside the workspace changed.

mod util;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use util::{assert_has, none_with_argument, pids_with_argument, Fixture, Process};

/// What a call said, whether it succeeded or not.
fn outcome(f: &Fixture, tool: &str, args: serde_json::Value) -> String {
    match f.tools.call(tool, &args) {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    }
}

fn python_output(f: &Fixture, code: &str) -> String {
    outcome(f, "python", json!({"code": code, "timeout_s": 20}))
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
    let db = f.data().join("reverie.sqlite3");
    assert!(db.exists());
    assert!(
        !f.tools.workspace().root().starts_with(f.data()),
        "the default workspace lies outside the data folder"
    );
    let before = std::fs::read(&db).unwrap();
    let out = python_output(&f, &format!("open({db:?}, 'ab').write(b'x')"));
    assert_has(&out, "PermissionError");
    let out = python_output(&f, "open('../../data/reverie.sqlite3', 'rb').read()");
    assert_has(&out, "PermissionError");
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
    let out = outcome(
        &f,
        "python",
        json!({"code": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "timeout_s": 5}),
    );
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
    let grandchild = Process::wait_for(marker, 10).expect("the grandchild never started");
    let Fixture {
        tools, services, ..
    } = f;
    drop(tools);
    drop(services);
    assert!(
        grandchild.ends_within(5),
        "a setsid grandchild outlived the app: {:?}",
        pids_with_argument(marker)
    );
}

#[test]
fn a_stopped_run_leaves_no_processes() {
    let marker = "876.54321";
    let f = Fixture::new();
    let out = outcome(
        &f,
        "python",
        json!({"code": ("import subprocess, os, time\nsubprocess.Popen(['sleep', '876.' + '54321'], start_new_session=True)\ntime.sleep(60)"), "timeout_s": 2}),
    );
    assert_has(&out, "timed out");
    assert!(
        none_with_argument(marker, 5),
        "a grandchild outlived its run: {:?}",
        pids_with_argument(marker)
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

/// Runs `call` on another thread; fails the test if it does not return
/// within `secs` (a read that blocks on a pipe would hang forever).
fn within<T: Send + 'static>(secs: u64, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the tool call hung")
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn pipes_and_devices_are_refused_without_blocking() {
    let f = std::sync::Arc::new(Fixture::new());
    mkfifo(&f.path("pipe"));
    std::os::unix::fs::symlink("/dev/zero", f.path("zero")).ok();
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        ("file_info", json!({"path": "pipe"})),
        ("delete_path", json!({"path": "pipe"})),
        (
            "edit_file",
            json!({"path": "pipe", "action": "delete", "start_line": 1}),
        ),
        ("read_pdf", json!({"path": "pipe"})),
    ] {
        let g = f.clone();
        let e = within(10, move || g.err(tool, args));
        assert!(
            e.contains("named pipe") || e.contains("outside the workspace"),
            "{tool}: {e}"
        );
    }
    assert!(f.path("pipe").exists(), "the pipe is left as it was");
}

#[test]
fn undo_of_a_change_to_a_pipe_does_not_block() {
    let f = std::sync::Arc::new(Fixture::new());
    f.ok("write_file", json!({"path": "p", "content": "x\n"}));
    std::fs::remove_file(f.path("p")).unwrap();
    mkfifo(&f.path("p"));
    let g = f.clone();
    let e = within(10, move || g.err("undo", json!({})));
    assert_has(&e, "named pipe");
}

#[test]
fn a_huge_sparse_file_is_not_read_into_memory() {
    let f = std::sync::Arc::new(Fixture::new());
    let big = std::fs::File::create(f.path("big.log")).unwrap();
    big.set_len(6 << 30).unwrap();
    let g = f.clone();
    let e = within(10, move || g.err("read_file", json!({"path": "big.log"})));
    assert_has(&e, "6.0 GiB");
    assert_has(&e, "grep");
    let g = f.clone();
    let info = within(10, move || {
        g.ok_text("file_info", json!({"path": "big.log"}))
    });
    assert_has(&info, "6442450944 bytes");
    let g = f.clone();
    let e = within(10, move || g.err("delete_path", json!({"path": "big.log"})));
    assert_has(&e, "too large to keep for undo");
    assert!(f.path("big.log").exists());
}

#[test]
fn writes_inside_git_are_refused() {
    let f = Fixture::new();
    f.ok("git", json!({"action": "init"}));
    let config = f.read(".git/config");
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".git/config", "content": "[core]\n\tfsmonitor = touch /tmp/x\n"}),
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "action": "delete", "start_line": 1}),
        ),
        ("make_dir", json!({"path": ".git/hooks2"})),
        ("delete_path", json!({"path": ".git", "recursive": true})),
        (
            "write_file",
            json!({"path": "sub/.git/config", "content": "x"}),
        ),
    ] {
        assert_has(&f.err(tool, args), "inside a `.git` folder");
    }
    assert_eq!(f.read(".git/config"), config);
    assert!(!f.path(".git/hooks2").exists());
}

/// Writes `.git/config` as a script in the workspace could, then asks git
/// to act; git must refuse and the planted command must not run.
fn git_refuses_config(setting: &str, value: &str, action: serde_json::Value) {
    let f = Fixture::new();
    f.ok("write_file", json!({"path": "a.txt", "content": "a\n"}));
    f.ok(
        "write_file",
        json!({"path": ".gitattributes", "content": "* filter=evil diff=evil\n"}),
    );
    f.ok("git", json!({"action": "init"}));
    let marker = f.dir.path().join("pwned");
    let (section, key) = setting.rsplit_once('.').unwrap();
    let (name, sub) = match section.split_once('.') {
        Some((n, s)) => (n.to_string(), format!(" \"{s}\"")),
        None => (section.to_string(), String::new()),
    };
    let mut config = std::fs::read_to_string(f.path(".git/config")).unwrap();
    config.push_str(&format!(
        "[{name}{sub}]\n\t{key} = {}\n",
        value.replace("MARKER", &marker.display().to_string())
    ));
    std::fs::write(f.path(".git/config"), config).unwrap();
    let e = f.err("git", action);
    assert_has(&e, "can make git run a program");
    assert_has(&e, &setting.to_ascii_lowercase());
    assert!(!marker.exists(), "{setting} ran a command");
}

#[test]
fn git_filter_drivers_are_refused() {
    git_refuses_config(
        "filter.evil.clean",
        "sh -c 'touch MARKER'",
        json!({"action": "add", "paths": ["a.txt"]}),
    );
}

#[test]
fn git_fsmonitor_is_refused() {
    git_refuses_config(
        "core.fsmonitor",
        "sh -c 'touch MARKER'",
        json!({"action": "status"}),
    );
}

#[test]
fn git_external_diff_and_textconv_are_refused() {
    git_refuses_config(
        "diff.external",
        "sh -c 'touch MARKER'",
        json!({"action": "diff"}),
    );
    git_refuses_config(
        "diff.evil.textconv",
        "sh -c 'touch MARKER'",
        json!({"action": "diff"}),
    );
}

#[test]
fn git_signing_programs_and_includes_are_refused() {
    git_refuses_config(
        "gpg.program",
        "sh -c 'touch MARKER'",
        json!({"action": "commit", "message": "m"}),
    );
    git_refuses_config("include.path", "../a.txt", json!({"action": "status"}));
}

#[test]
fn git_refuses_a_linked_repository() {
    let f = Fixture::new();
    let elsewhere = f.dir.path().join("other");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&elsewhere)
        .status()
        .unwrap();
    std::os::unix::fs::symlink(elsewhere.join(".git"), f.path(".git")).unwrap();
    assert_has(&f.err("git", json!({"action": "status"})), "symbolic link");
    std::fs::remove_file(f.path(".git")).unwrap();
    std::fs::write(f.path(".git"), "gitdir: ../other/.git\n").unwrap();
    assert_has(&f.err("git", json!({"action": "status"})), "is a file");
}

#[test]
fn git_checkout_can_be_undone() {
    let f = Fixture::new();
    f.ok(
        "write_file",
        json!({"path": "a.txt", "content": "committed\n"}),
    );
    f.ok("git", json!({"action": "init"}));
    f.ok("git", json!({"action": "add", "paths": ["a.txt"]}));
    f.ok("git", json!({"action": "commit", "message": "first"}));
    f.ok(
        "write_file",
        json!({"path": "a.txt", "content": "work in progress\n"}),
    );
    f.ok("git", json!({"action": "checkout", "paths": ["a.txt"]}));
    assert_eq!(f.read("a.txt"), "committed\n");
    f.ok("undo", json!({}));
    assert_eq!(f.read("a.txt"), "work in progress\n");
}

#[test]
fn recipe_values_are_not_expanded_again() {
    let f = Fixture::new();
    f.ok(
        "recipe",
        json!({"action": "save", "name": "bomb", "template": "{a}{b}{c}{d}"}),
    );
    let out = f.ok_text(
        "recipe",
        json!({"action": "fill", "name": "bomb", "values": {"a": "{b}{b}", "b": "{c}{c}", "c": "{d}{d}", "d": "x"}}),
    );
    assert_has(&out, "{b}{b}{c}{c}{d}{d}x");
    let huge = "y".repeat(200_000);
    let e = f.err(
        "recipe",
        json!({"action": "fill", "name": "bomb", "values": {"a": huge, "b": huge, "c": "", "d": ""}}),
    );
    assert_has(&e, "use shorter values");
}

#[test]
fn deep_calculator_nesting_is_refused_not_a_crash() {
    let f = Fixture::new();
    let deep = format!("{}1{}", "(".repeat(900), ")".repeat(900));
    assert_has(
        &f.err("calculator", json!({"expression": deep})),
        "nested more than",
    );
    let signs = format!("{}1", "-".repeat(1900));
    assert_has(
        &f.err("calculator", json!({"expression": signs})),
        "nested more than",
    );
    assert_has(
        &f.ok_text("calculator", json!({"expression": "((2+3))*-(-4)"})),
        "20",
    );
}

#[test]
fn every_tool_output_is_capped() {
    let f = Fixture::new();
    let out = f.ok_text("python", json!({"code": "print('z' * 10_000_000)"}));
    assert!(
        out.len() <= reverie_tools::MAX_TOOL_OUTPUT + 100,
        "{}",
        out.len()
    );
    assert_has(&out, "bytes cut");
    // The log was not read whole: only its head and tail.
    assert_has(&out, "more unread");
}

#[test]
fn a_folder_swapped_for_a_symlink_cannot_redirect_writes_or_reads() {
    let f = std::sync::Arc::new(Fixture::new());
    let outside = f.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET\n").unwrap();
    let sub = f.path("sub");
    std::fs::create_dir_all(&sub).unwrap();
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let swaps = std::sync::Arc::new(AtomicU64::new(0));
    let swapper = {
        let (sub, outside, stop, swaps) =
            (sub.clone(), outside.clone(), stop.clone(), swaps.clone());
        // `sub` is exchanged atomically with a symlink out, back and forth:
        // it is never missing, only sometimes a way out.
        let link = sub.with_file_name("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let (a, b) = (c(&sub), c(&link));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: renameat2 on two valid C strings.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                if r == 0 {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let (mut written, mut read) = (0, 0);
    let t0 = Instant::now();
    // Thousands of swaps against thousands of writes, however loaded the
    // machine is (within a minute).
    let mut i = 0;
    while (i < 3000 || swaps.load(Ordering::Relaxed) < 2000)
        && t0.elapsed() < Duration::from_secs(60)
    {
        i += 1;
        let name = format!("sub/f{}.txt", i % 50);
        if f.tools
            .call("write_file", &json!({"path": name, "content": "in\n"}))
            .is_ok()
        {
            written += 1;
        }
        if let Ok(o) = f
            .tools
            .call("read_file", &json!({"path": "sub/secret.txt"}))
        {
            assert!(
                !o.text.contains("SECRET"),
                "read through the swapped link: {}",
                o.text
            );
            read += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    let planted: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "secret.txt")
        .collect();
    assert!(planted.is_empty(), "written outside: {planted:?}");
    assert!(swaps > 1000, "only {swaps} swaps raced the writes");
    assert!(written > 0, "no write got through at all");
    eprintln!("{swaps} swaps, {written} writes landed inside, {read} reads succeeded (none showed the secret)");
}

#[test]
fn an_attachment_cannot_be_saved_through_a_planted_symlink() {
    let f = Fixture::new();
    let outside = f.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.path("attachments")).unwrap();
    let e = reverie_tools::attachments::save_attachment(f.tools.workspace(), "report.pdf", b"x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("outside the workspace") || e.contains("symbolic link"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn a_call_past_its_deadline_is_abandoned_and_its_process_stopped() {
    let f = Fixture::new();
    let t0 = Instant::now();
    let e = f
        .tools
        .call_within(
            "python",
            &json!({"code": "import time\ntime.sleep(60)", "args": ["deadline-marker-4411"], "timeout_s": 120}),
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
    assert_has(&e, "took longer than 1 s");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(
        none_with_argument("deadline-marker-4411", 5),
        "the abandoned run's process is still there"
    );
}

#[test]
fn stop_never_waits_for_a_running_tool() {
    let f = Fixture::new();
    let stop = f.tools.stop_handle();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let t0 = Instant::now();
    let e = f
        .tools
        .call(
            "python",
            &json!({"code": "import time\ntime.sleep(60)", "timeout_s": 120}),
        )
        .unwrap_err()
        .to_string();
    assert_has(&e, "stopped by the user");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

/// A PDF whose one page's content inflates from about a megabyte to 3 GiB.
fn pdf_bomb() -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..3072 {
        z.write_all(&chunk).unwrap();
    }
    let data = z.finish().unwrap();
    let mut pdf = b"%PDF-1.5\n".to_vec();
    let mut offsets = Vec::new();
    let mut obj = |pdf: &mut Vec<u8>, body: &[u8]| {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", offsets.len()).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    };
    obj(&mut pdf, b"<< /Type /Catalog /Pages 2 0 R >>");
    obj(
        &mut pdf,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 612 792] >>",
    );
    obj(&mut pdf, b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>");
    let mut stream = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        data.len()
    )
    .into_bytes();
    stream.extend_from_slice(&data);
    stream.extend_from_slice(b"\nendstream");
    obj(&mut pdf, &stream);
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for o in &offsets {
        pdf.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

#[test]
fn a_pdf_bomb_is_refused_and_the_app_keeps_its_memory() {
    let f = Fixture::new();
    let bomb = pdf_bomb();
    assert!(bomb.len() < 8 << 20, "{} bytes", bomb.len());
    std::fs::write(f.path("bomb.pdf"), &bomb).unwrap();
    let t0 = Instant::now();
    let e = f.err("read_pdf", json!({"path": "bomb.pdf"}));
    assert!(
        e.contains("damaged PDF") || e.contains("took longer"),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let rss_kib: u64 = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        rss_kib < 2 << 20,
        "the app's peak memory reached {rss_kib} KiB"
    );
}

#[test]
fn a_change_whose_undo_record_fails_is_taken_back() {
    let f = Fixture::new();
    f.ok(
        "write_file",
        json!({"path": "a.txt", "content": "before\n"}),
    );
    // Another connection makes every new revision fail, as a full disk would.
    let db = rusqlite::Connection::open(f.data().join("reverie.sqlite3")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_room BEFORE INSERT ON revisions BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    let e = f.err("write_file", json!({"path": "a.txt", "content": "after\n"}));
    assert_has(&e, "the change was taken back");
    assert_eq!(f.read("a.txt"), "before\n");
    let e = f.err("write_file", json!({"path": "new/b.txt", "content": "x\n"}));
    assert_has(&e, "the change was taken back");
    assert!(
        !f.path("new").exists(),
        "the folder made for it is gone too"
    );
    db.execute_batch("DROP TRIGGER no_room;").unwrap();
    f.ok("write_file", json!({"path": "a.txt", "content": "after\n"}));
    f.ok("undo", json!({}));
    assert_eq!(f.read("a.txt"), "before\n");
}
