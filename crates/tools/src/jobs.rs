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
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reverie_core::ChannelId;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::output::cap;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

/// Limits of one child process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub memory_bytes: u64,
    pub file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 2 << 30,
            file_bytes: 256 << 20,
        }
    }
}

type SpawnRequest = (Command, Limits, Sender<std::io::Result<Child>>);

struct Job {
    channel: ChannelId,
    child: Child,
    log: PathBuf,
    read: u64,
    what: String,
    started: Instant,
    status: Option<String>,
}

/// Jobs of every channel; dropping it kills them all.
pub struct JobTable {
    dir: PathBuf,
    spawner: Mutex<Sender<SpawnRequest>>,
    jobs: Mutex<BTreeMap<u32, Job>>,
    next: Mutex<u32>,
}

const MAX_JOBS_PER_CHANNEL: usize = 4;
const POLL_BYTES: usize = 16 << 10;

fn limit(resource: libc::__rlimit_resource_t, bytes: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit with a valid struct; runs in the child before exec.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn spawner_loop(rx: mpsc::Receiver<SpawnRequest>) {
    for (mut cmd, limits, reply) in rx {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                limit(libc::RLIMIT_AS, limits.memory_bytes)?;
                limit(libc::RLIMIT_FSIZE, limits.file_bytes)?;
                Ok(())
            });
        }
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
        JobTable {
            dir,
            spawner: Mutex::new(tx),
            jobs: Mutex::new(BTreeMap::new()),
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

    fn spawn(&self, mut cmd: Command, limits: Limits) -> Result<(Child, PathBuf), ToolError> {
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
            .send((cmd, limits, tx))
            .map_err(|_| ToolError::refused("the app is shutting down; no new processes"))?;
        let child = rx
            .recv()
            .map_err(|_| ToolError::refused("the app is shutting down; no new processes"))?
            .map_err(err)?;
        Ok((child, path))
    }

    /// Runs `cmd` to completion or until `timeout`, returning its output
    /// capped to `max_output` bytes.
    pub(crate) fn run_blocking(
        &self,
        cmd: Command,
        limits: Limits,
        timeout: Duration,
        max_output: usize,
        stop: &AtomicBool,
    ) -> Result<RunResult, ToolError> {
        let (mut child, log) = self.spawn(cmd, limits)?;
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
        let bytes = std::fs::read(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        Ok(RunResult {
            output: cap(&String::from_utf8_lossy(&bytes), max_output),
            status,
            timed_out,
        })
    }

    /// Starts a background job for `channel`; returns its id.
    pub(crate) fn start(
        &self,
        channel: ChannelId,
        cmd: Command,
        what: String,
    ) -> Result<u32, ToolError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let running = jobs
            .values_mut()
            .filter(|j| j.channel == channel)
            .filter_map(|j| j.child.try_wait().ok().map(|s| s.is_none()))
            .filter(|r| *r)
            .count();
        if running >= MAX_JOBS_PER_CHANNEL {
            return Err(ToolError::refused(format!(
                "{running} jobs are already running in this channel (the limit); stop one first"
            )));
        }
        let (child, log) = self.spawn(cmd, Limits::default())?;
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        *next += 1;
        jobs.insert(
            id,
            Job {
                channel,
                child,
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
                if j.status.is_none() {
                    if let Ok(Some(s)) = j.child.try_wait() {
                        j.status = Some(describe_exit(s));
                    }
                }
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
            format!("stopped job {id}")
        })
    }

    /// Jobs of `channel`: id, state, what it runs.
    pub(crate) fn list(&self, channel: ChannelId) -> Vec<(u32, String, String)> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter_mut()
            .filter(|(_, j)| j.channel == channel)
            .map(|(id, j)| {
                if j.status.is_none() {
                    if let Ok(Some(s)) = j.child.try_wait() {
                        j.status = Some(describe_exit(s));
                    }
                }
                let state = j.status.clone().unwrap_or_else(|| "running".into());
                (*id, state, j.what.clone())
            })
            .collect()
    }

    /// Jobs still running, across channels (for `health`).
    pub fn running(&self) -> usize {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.values_mut()
            .filter_map(|j| j.child.try_wait().ok())
            .filter(Option::is_none)
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
            let (cmd, what) =
                crate::python::command(tb, a.code.as_deref(), a.path.as_deref(), &a.args)?;
            let id = table.start(tb.channel(), cmd, what)?;
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
