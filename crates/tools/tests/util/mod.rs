//! A toolbox on a fresh data folder, and shorthands for calling it.
#![allow(dead_code)] // each test file uses a different part

use std::sync::Arc;

use reverie_core::Home;
use reverie_store::Store;
use reverie_tools::{Services, ToolOutput, Toolbox};
use serde_json::Value;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Arc<Store>,
    pub services: Arc<Services>,
    pub tools: Toolbox,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_services(|s| s)
    }

    pub fn with_services(f: impl FnOnce(Services) -> Services) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("data"));
        let store = Arc::new(Store::open(&home).unwrap());
        let ch = store.ensure_channel("general").unwrap();
        let services = Arc::new(f(Services::new(&home)));
        let tools = Toolbox::open(store.clone(), ch, services.clone()).unwrap();
        Fixture {
            dir,
            store,
            services,
            tools,
        }
    }

    /// Reopens the toolbox as after a restart of the app.
    pub fn restart(self) -> Fixture {
        let home = Home::new(self.dir.path().join("data"));
        let store = Arc::new(Store::open(&home).unwrap());
        let ch = store.ensure_channel("general").unwrap();
        let services = Arc::new(Services::new(&home));
        let tools = Toolbox::open(store.clone(), ch, services.clone()).unwrap();
        Fixture {
            dir: self.dir,
            store,
            services,
            tools,
        }
    }

    pub fn ok(&self, name: &str, args: Value) -> ToolOutput {
        match self.tools.call(name, &args) {
            Ok(o) => o,
            Err(e) => panic!("{name} {args} failed: {e}"),
        }
    }

    pub fn ok_text(&self, name: &str, args: Value) -> String {
        self.ok(name, args).text
    }

    /// The error text of a call that must fail.
    pub fn err(&self, name: &str, args: Value) -> String {
        match self.tools.call(name, &args) {
            Ok(o) => panic!("{name} {args} should fail, gave: {}", o.text),
            Err(e) => e.to_string(),
        }
    }

    /// The data folder (database, blobs, models).
    pub fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.tools.workspace().root().join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

/// Asserts `haystack` contains `needle`, showing both when not.
#[track_caller]
pub fn assert_has(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}

/// PIDs of the processes whose command line holds `arg`.
pub fn pids_with_argument(arg: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(arg))
        })
        .collect()
}

/// A process followed by its PID and start time. A scan of /proc can miss
/// a process that is starting, so a scan only finds it; whether it still
/// runs is read from its own `/proc/PID/stat`.
pub struct Process {
    pid: u32,
    started: String,
}

impl Process {
    /// The first process whose command line holds `arg`, waiting up to
    /// `secs` for it to appear.
    pub fn wait_for(arg: &str, secs: u64) -> Option<Process> {
        let t0 = std::time::Instant::now();
        loop {
            let found = pids_with_argument(arg).into_iter().find_map(|pid| {
                let (_, started) = stat(pid)?;
                Some(Process { pid, started })
            });
            if found.is_some() || t0.elapsed().as_secs() >= secs {
                return found;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Whether it still runs (a zombie or a reused PID does not count).
    pub fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|(state, t)| t == self.started && state != "Z" && state != "X")
    }

    /// Waits up to `secs` for it to end; whether it did.
    pub fn ends_within(&self, secs: u64) -> bool {
        let t0 = std::time::Instant::now();
        while self.alive() && t0.elapsed().as_secs() < secs {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        !self.alive()
    }
}

/// Waits up to `secs` until three scans in a row, 50 ms apart, find no
/// process whose command line holds `arg` (one scan can miss a process
/// that is starting); whether they did.
pub fn none_with_argument(arg: &str, secs: u64) -> bool {
    let t0 = std::time::Instant::now();
    let mut clear = 0;
    while clear < 3 && t0.elapsed().as_secs() < secs {
        clear = if pids_with_argument(arg).is_empty() {
            clear + 1
        } else {
            0
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    clear >= 3
}

/// A process's state letter and start time, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(String, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((rest.first()?.to_string(), rest.get(19)?.to_string()))
}
