//! Child processes the agent starts: blocking runs and background jobs.
//!
//! Every child is forked by one long-lived spawner thread with
//! `PR_SET_PDEATHSIG`, so when that thread ends (the table is dropped, or
//! the app dies in any way) the kernel kills the children; each child leads
//! its own process group so a stop reaches its grandchildren too. Output
//! goes to a log file (stdout and stderr interleaved as written), which is
//! what `poll` reads from.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reverie_core::ChannelId;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::output::cap;
use crate::sandbox::{Cage, CageGuard, Limits};
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

type SpawnRequest = (Command, Sender<std::io::Result<Child>>);

struct Job {
    channel: ChannelId,
    child: Child,
    _cage: CageGuard,
    ended: Option<Instant>,
    log: PathBuf,
    read: u64,
    what: String,
    started: Instant,
    status: Option<String>,
}

impl Job {
    /// Notes whether the job ended, and stops it once it has run past
    /// [`JOB_WALL_LIMIT`].
    fn refresh(&mut self) {
        if self.status.is_some() {
            return;
        }
        if let Ok(Some(s)) = self.child.try_wait() {
            self.status = Some(describe_exit(s));
            self.ended = Some(Instant::now());
        } else if self.started.elapsed() > JOB_WALL_LIMIT {
            kill_group(&self.child);
            let _ = self.child.wait();
            self.status = Some(format!(
                "stopped after the wall-clock limit of {} min",
                JOB_WALL_LIMIT.as_secs() / 60
            ));
            self.ended = Some(Instant::now());
        }
    }

    fn running(&mut self) -> bool {
        self.refresh();
        self.status.is_none()
    }
}

type Jobs = Arc<Mutex<BTreeMap<u32, Job>>>;

/// Jobs of every channel; dropping it kills them all.
pub struct JobTable {
    dir: PathBuf,
    spawner: Mutex<Sender<SpawnRequest>>,
    jobs: Jobs,
    next: Mutex<u32>,
}

const MAX_JOBS_PER_CHANNEL: usize = 4;
const POLL_BYTES: usize = 16 << 10;
/// A background job is stopped after this long.
const JOB_WALL_LIMIT: Duration = Duration::from_secs(60 * 60);
/// A finished job's log is deleted (and the job forgotten) this long after
/// it ended.
const FINISHED_KEPT: Duration = Duration::from_secs(60 * 60);

/// Every few seconds: stops jobs past their wall-clock limit and forgets
/// finished ones (deleting their logs). Ends with the table.
fn watchdog(jobs: std::sync::Weak<Mutex<BTreeMap<u32, Job>>>) {
    while let Some(jobs) = jobs.upgrade() {
        {
            let mut jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
            jobs.retain(|_, j| {
                j.refresh();
                let old = j.ended.is_some_and(|t| t.elapsed() > FINISHED_KEPT);
                if old {
                    let _ = std::fs::remove_file(&j.log);
                }
                !old
            });
        }
        drop(jobs);
        std::thread::sleep(Duration::from_secs(2));
    }
}

fn spawner_loop(rx: mpsc::Receiver<SpawnRequest>) {
    // The cage's parent-death signal fires when this thread ends.
    for (mut cmd, reply) in rx {
        let _ = reply.send(cmd.spawn());
    }
}

fn kill_group(child: &Child) {
    // SAFETY: signalling a process group we created.
    unsafe {
        libc::killpg(child.id() as i32, libc::SIGKILL);
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => "finished (exit status 0)".into(),
        (Some(c), _) => format!("failed (exit status {c})"),
        (None, Some(libc::SIGKILL)) => "killed".into(),
        (None, Some(libc::SIGXFSZ)) => "killed: its output passed the size limit".into(),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "ended".into(),
    }
}

/// The log at `path` as text of at most about `max` bytes: its head and
/// its tail are read, never the whole file (a run may write hundreds of
/// megabytes).
fn read_capped(path: &std::path::Path, max: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let read_at = |f: &mut File, from: u64, n: usize| {
        let mut buf = Vec::with_capacity(n);
        let _ = f.seek(SeekFrom::Start(from));
        let _ = f.by_ref().take(n as u64).read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    if len <= 2 * max as u64 {
        return cap(&read_at(&mut f, 0, 2 * max), max);
    }
    // The first and last `max` bytes, then cut to size as usual; the
    // marker also counts what was never read.
    let head = read_at(&mut f, 0, max);
    let tail = read_at(&mut f, len - max as u64, max);
    let unread = len - 2 * max as u64;
    cap(&format!("{head}{tail}"), max).replacen(
        " bytes cut …]",
        &format!(" bytes cut, and {unread} more unread …]"),
        1,
    )
}

/// How a blocking run ended.
pub(crate) struct RunResult {
    pub output: String,
    pub status: Option<std::process::ExitStatus>,
    pub timed_out: bool,
}

impl JobTable {
    pub fn new(dir: PathBuf) -> JobTable {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("reverie-spawner".into())
            .spawn(move || spawner_loop(rx))
            .expect("spawn the process spawner thread");
        let jobs: Jobs = Arc::default();
        let weak = Arc::downgrade(&jobs);
        std::thread::Builder::new()
            .name("reverie-jobs-watchdog".into())
            .spawn(move || watchdog(weak))
            .expect("spawn the jobs watchdog thread");
        JobTable {
            dir,
            spawner: Mutex::new(tx),
            jobs,
            next: Mutex::new(1),
        }
    }

    fn log_file(&self) -> Result<(PathBuf, File), ToolError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| ToolError::Failed {
            what: format!("creating {}", self.dir.display()),
            detail: e.to_string(),
        })?;
        let f = tempfile::Builder::new()
            .prefix("job-")
            .suffix(".log")
            .tempfile_in(&self.dir)
            .and_then(|f| f.keep().map_err(|e| e.error))
            .map_err(|e| ToolError::Failed {
                what: "creating an output log".into(),
                detail: e.to_string(),
            })?;
        Ok((f.1, f.0))
    }

    fn spawn(
        &self,
        mut cmd: Command,
        cage: &Cage,
    ) -> Result<(Child, PathBuf, CageGuard), ToolError> {
        let guard = cage.arm(&mut cmd)?;
        let (path, log) = self.log_file()?;
        let err = |e: std::io::Error| ToolError::Failed {
            what: "starting the process".into(),
            detail: e.to_string(),
        };
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().map_err(err)?)
            .stderr(log);
        let (tx, rx) = mpsc::channel();
        self.spawner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((cmd, tx))
            .map_err(|_| ToolError::refused("the app is shutting down; no new processes"))?;
        let child = rx
            .recv()
            .map_err(|_| ToolError::refused("the app is shutting down; no new processes"))?
            .map_err(err)?;
        Ok((child, path, guard))
    }

    /// Runs `cmd` to completion or until `timeout`, returning its output
    /// capped to `max_output` bytes.
    pub(crate) fn run_blocking(
        &self,
        cmd: Command,
        cage: &Cage,
        timeout: Duration,
        max_output: usize,
        stop: &AtomicBool,
    ) -> Result<RunResult, ToolError> {
        let (mut child, log, _guard) = self.spawn(cmd, cage)?;
        let deadline = Instant::now() + timeout;
        let mut status = None;
        let mut timed_out = false;
        loop {
            match child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) if stop.load(Ordering::SeqCst) => {
                    kill_group(&child);
                    let _ = child.wait();
                    let _ = std::fs::remove_file(&log);
                    return Err(ToolError::refused("stopped by the user before it finished"));
                }
                Ok(None) if Instant::now() >= deadline => {
                    kill_group(&child);
                    let _ = child.wait();
                    timed_out = true;
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => {
                    kill_group(&child);
                    return Err(ToolError::Failed {
                        what: "waiting for the process".into(),
                        detail: e.to_string(),
                    });
                }
            }
        }
        // The group may hold grandchildren that still write to the log.
        kill_group(&child);
        let output = read_capped(&log, max_output);
        let _ = std::fs::remove_file(&log);
        Ok(RunResult {
            output,
            status,
            timed_out,
        })
    }

    /// Starts a background job for `channel`; returns its id.
    pub(crate) fn start(
        &self,
        channel: ChannelId,
        cmd: Command,
        cage: &Cage,
        what: String,
    ) -> Result<u32, ToolError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let running = jobs
            .values_mut()
            .filter(|j| j.channel == channel)
            .filter_map(|j| j.running().then_some(()))
            .count();
        if running >= MAX_JOBS_PER_CHANNEL {
            return Err(ToolError::refused(format!(
                "{running} jobs are already running in this channel (the limit); stop one first"
            )));
        }
        let (child, log, guard) = self.spawn(cmd, cage)?;
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        *next += 1;
        jobs.insert(
            id,
            Job {
                channel,
                child,
                _cage: guard,
                ended: None,
                log,
                read: 0,
                what,
                started: Instant::now(),
                status: None,
            },
        );
        Ok(id)
    }

    fn with_job<T>(
        &self,
        channel: ChannelId,
        id: u32,
        f: impl FnOnce(&mut Job) -> T,
    ) -> Result<T, ToolError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        match jobs.get_mut(&id) {
            Some(j) if j.channel == channel => {
                j.refresh();
                Ok(f(j))
            }
            _ => Err(ToolError::refused(format!(
                "there is no job {id} in this channel; `jobs` with action list shows them"
            ))),
        }
    }

    /// New output of job `id` since the last poll, and its state.
    pub(crate) fn poll(&self, channel: ChannelId, id: u32) -> Result<String, ToolError> {
        self.with_job(channel, id, |j| {
            let mut new = Vec::new();
            if let Ok(mut f) = File::open(&j.log) {
                let _ = f.seek(SeekFrom::Start(j.read));
                let _ = f.take(POLL_BYTES as u64).read_to_end(&mut new);
            }
            j.read += new.len() as u64;
            let state = j.status.clone().unwrap_or_else(|| {
                format!("running for {:.0} s", j.started.elapsed().as_secs_f64())
            });
            let text = String::from_utf8_lossy(&new);
            let more = if new.len() == POLL_BYTES {
                "\n… more output; poll again"
            } else {
                ""
            };
            if text.is_empty() {
                format!("job {id}: {state}; no new output")
            } else {
                format!("job {id}: {state}; new output:\n{text}{more}")
            }
        })
    }

    pub(crate) fn stop(&self, channel: ChannelId, id: u32) -> Result<String, ToolError> {
        self.with_job(channel, id, |j| {
            if let Some(s) = &j.status {
                return format!("job {id} had already {s}");
            }
            kill_group(&j.child);
            let _ = j.child.wait();
            j.status = Some("stopped".into());
            j.ended = Some(Instant::now());
            format!("stopped job {id}")
        })
    }

    /// Jobs of `channel`: id, state, what it runs.
    pub(crate) fn list(&self, channel: ChannelId) -> Vec<(u32, String, String)> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter_mut()
            .filter(|(_, j)| j.channel == channel)
            .map(|(id, j)| {
                j.refresh();
                let state = j.status.clone().unwrap_or_else(|| "running".into());
                (*id, state, j.what.clone())
            })
            .collect()
    }

    /// Jobs still running, across channels (for `health`).
    pub fn running(&self) -> usize {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.values_mut()
            .filter_map(|j| j.running().then_some(()))
            .count()
    }

    /// Kills every job (also done on drop).
    pub fn stop_all(&self) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        for j in jobs.values_mut() {
            if matches!(j.child.try_wait(), Ok(None)) {
                kill_group(&j.child);
                let _ = j.child.wait();
            }
            let _ = std::fs::remove_file(&j.log);
        }
        jobs.clear();
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum JobAction {
    Start,
    Stop,
    List,
    Poll,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobArgs {
    action: JobAction,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    id: Option<u32>,
}

fn jobs_tool(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: JobArgs = parse_args("jobs", args)?;
    let table = &tb.services().jobs;
    let need_id = || {
        a.id.ok_or_else(|| {
            ToolError::refused("this action needs `id`: the job number from start or list")
        })
    };
    let text = match a.action {
        JobAction::Start => {
            let (cmd, cage, what) = crate::python::command(
                tb,
                a.code.as_deref(),
                a.path.as_deref(),
                &a.args,
                Limits::default(),
            )?;
            let id = table.start(tb.channel(), cmd, &cage, what)?;
            format!("started job {id}; poll it with {{\"action\": \"poll\", \"id\": {id}}}")
        }
        JobAction::Stop => table.stop(tb.channel(), need_id()?)?,
        JobAction::Poll => table.poll(tb.channel(), need_id()?)?,
        JobAction::List => {
            let list = table.list(tb.channel());
            if list.is_empty() {
                "no jobs in this channel".to_string()
            } else {
                list.iter()
                    .map(|(id, state, what)| format!("job {id}: {state}: {what}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
    };
    Ok(text.into())
}

pub(crate) const TOOLS: &[ToolDef] = &[ToolDef {
    name: "jobs",
    description: "Background Python jobs: start (code or path), poll for new output, stop, list.",
    parameters: || {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["start", "poll", "stop", "list"]},
            "code": {"type": "string", "description": "Python source to run (start)"},
            "path": {"type": "string", "description": "or a .py file in the workspace (start)"},
            "args": {"type": "array", "items": {"type": "string"}},
            "id": {"type": "integer", "description": "job number (poll, stop)"}
        }, "required": ["action"]})
    },
    run: jobs_tool,
}];
