//! The cage around every process a tool starts (python, background jobs,
//! git).
//!
//! Everything that allocates is prepared in the app ([`Cage::arm`]): the
//! Landlock ruleset, the seccomp program, the id maps, a private temp
//! folder. Between fork and exec only raw system calls run
//! ([`Gate::enter`]):
//!
//! 1. own process group, `PR_SET_PDEATHSIG`, resource limits (address
//!    space, file size, open files, CPU time, no core dumps);
//! 2. where the kernel allows, new user, PID, network and IPC namespaces,
//!    then a second fork: the tool runs as PID 1 of its namespace, so every
//!    process it starts (after `setsid` too) dies with it, and it has no
//!    network but a loopback that is down. The first child stays outside,
//!    waits, and exits as the tool did; the caller sees it as the tool;
//! 3. `no_new_privs`, Landlock (read-write only in the workspace and the
//!    private temp folder, read-only on the system's programs and
//!    libraries, no TCP, no signals to processes outside) and a seccomp
//!    filter that refuses the calls a script never needs (ptrace, mount,
//!    namespaces, keyrings, BPF, clearing its parent-death signal).
//!
//! The environment is cleared to an allow-list. Where the kernel has no
//! Landlock nothing is started unless the user turned the sandbox off.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};

use crate::error::ToolError;

/// Limits of one child process (and everything it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub memory_bytes: u64,
    pub file_bytes: u64,
    /// Processes and threads inside the cage (enforced where the cage has
    /// its own user namespace or a pids cgroup).
    pub processes: u64,
    pub open_files: u64,
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 2 << 30,
            file_bytes: 256 << 20,
            processes: 64,
            open_files: 256,
            cpu_seconds: 3600,
        }
    }
}

/// Whether tools' processes are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Confined; refused where the kernel cannot confine them.
    #[default]
    On,
    /// Run with the user's full rights (an explicit choice in settings).
    Off,
}

impl SandboxMode {
    /// `Off` only when `REVERIE_SANDBOX=off` is set, for the command line.
    pub fn from_env() -> SandboxMode {
        match std::env::var("REVERIE_SANDBOX").as_deref() {
            Ok("off") => SandboxMode::Off,
            _ => SandboxMode::On,
        }
    }
}

/// What this kernel lets the cage use, probed once.
#[derive(Debug, Clone)]
pub struct Support {
    /// Landlock ABI version; 0 when the kernel has none.
    pub landlock_abi: i32,
    /// New user, PID and network namespaces work for this user.
    pub namespaces: bool,
    /// A pids cgroup folder the app may create children in.
    pub pids_cgroup: Option<PathBuf>,
}

impl Support {
    /// The kernel's support, probed on first use.
    pub fn get() -> &'static Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT.get_or_init(|| Support {
            landlock_abi: landlock_abi(),
            namespaces: namespaces_work(),
            pids_cgroup: pids_cgroup(),
        })
    }

    /// One line per mechanism, for `reverie doctor`.
    pub fn describe(&self) -> String {
        let landlock = if self.landlock_abi > 0 {
            format!("Landlock ABI {}", self.landlock_abi)
        } else {
            "no Landlock".into()
        };
        let ns = if self.namespaces {
            "own PID and network namespaces"
        } else {
            "no namespaces (network limited to Landlock's TCP rules)"
        };
        let procs = match (&self.pids_cgroup, self.namespaces && !is_root()) {
            (Some(_), _) => "process count held by a pids cgroup",
            (None, true) => "process count held by a per-namespace limit",
            (None, false) => "process count not limited",
        };
        format!("{landlock}; {ns}; {procs}")
    }
}

fn is_root() -> bool {
    // SAFETY: getuid has no failure mode.
    unsafe { libc::getuid() == 0 }
}

fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no ruleset and writes nothing.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as i32
}

fn namespaces_work() -> bool {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "exit 0"]);
    // SAFETY: one system call between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(NAMESPACES) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

/// A writable pids cgroup (v1 hierarchy, or v2 with the pids controller),
/// e.g. when the app runs as root or systemd delegated one.
fn pids_cgroup() -> Option<PathBuf> {
    let candidates = [
        PathBuf::from("/sys/fs/cgroup/pids"),
        PathBuf::from("/sys/fs/cgroup"),
    ];
    candidates.into_iter().find(|dir| {
        let probe = dir.join(format!("reverie-probe-{}", std::process::id()));
        let ok = std::fs::create_dir(&probe).is_ok() && probe.join("pids.max").exists();
        let _ = std::fs::remove_dir(&probe);
        ok
    })
}

const NAMESPACES: libc::c_int =
    libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWIPC;

/// Read-only system folders every tool needs (programs, libraries, the
/// loader's cache, time zone, Python's and git's own files).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/ssl",
    "/etc/mime.types",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];

/// Where one child may read and write.
#[derive(Debug, Clone)]
pub(crate) struct Cage {
    pub mode: SandboxMode,
    pub writable: Vec<PathBuf>,
    /// Read-only beyond the system folders (a Python outside /usr).
    pub readable: Vec<PathBuf>,
    pub limits: Limits,
}

/// What the child needs to enter the cage: nothing left to allocate.
struct Gate {
    ruleset: Option<OwnedFd>,
    seccomp: Vec<libc::sock_filter>,
    uid_map: CString,
    gid_map: CString,
    namespaces: bool,
    cgroup_procs: Option<CString>,
    limits: Limits,
}

/// What outlives the spawn: held until the child has ended.
pub(crate) struct CageGuard {
    /// The private temp folder (`HOME` and `TMPDIR`); removed on drop.
    _tmp: tempfile::TempDir,
    _cgroup: Option<CgroupDir>,
}

/// A per-child pids cgroup, removed when dropped (after the child ended).
pub(crate) struct CgroupDir(PathBuf);

impl Drop for CgroupDir {
    fn drop(&mut self) {
        if let Ok(pids) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: signalling processes of our own cgroup.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

impl Cage {
    /// Puts `cmd` in the cage: clears its environment to the allow-list
    /// and prepares everything [`Gate::enter`] does after the fork.
    pub fn arm(&self, cmd: &mut Command) -> Result<CageGuard, ToolError> {
        self.arm_on(Support::get(), cmd)
    }

    /// [`Cage::arm`] on a kernel that offers `support`.
    fn arm_on(&self, support: &Support, cmd: &mut Command) -> Result<CageGuard, ToolError> {
        let on = self.mode == SandboxMode::On;
        if on && support.landlock_abi < 1 {
            return Err(ToolError::refused(
                "this system's kernel has no Landlock, so the process cannot be confined to the workspace; \
                 it was not started. To run it anyway with all your rights, turn the sandbox off in Settings \
                 (REVERIE_SANDBOX=off for the command line)",
            ));
        }
        let tmp = tempfile::Builder::new()
            .prefix("reverie-tool-")
            .tempdir()
            .map_err(|e| failed("creating the private temp folder", e))?;
        clear_env(cmd, tmp.path());
        let namespaces = on && support.namespaces;
        // SAFETY: getuid/getgid have no failure mode.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let cgroup = match (&support.pids_cgroup, on) {
            (Some(root), true) => Some(self.cgroup(root)?),
            _ => None,
        };
        let cgroup_procs = cgroup
            .as_ref()
            .map(|c| cstring(&c.0.join("cgroup.procs")))
            .transpose()?;
        let (ruleset, seccomp) = if on {
            let mut readable: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
            readable.extend(self.readable.iter().cloned());
            let mut writable = self.writable.clone();
            writable.push(tmp.path().to_path_buf());
            (
                Some(ruleset(&readable, &writable, support.landlock_abi)?),
                seccomp_program()?,
            )
        } else {
            (None, Vec::new())
        };
        let gate = Gate {
            ruleset,
            seccomp,
            uid_map: CString::new(format!("{uid} {uid} 1")).expect("digits"),
            gid_map: CString::new(format!("{gid} {gid} 1")).expect("digits"),
            namespaces,
            cgroup_procs,
            limits: self.limits,
        };
        // SAFETY: `enter` makes only async-signal-safe system calls on data
        // prepared here (the closure runs in the forked child's copy).
        unsafe {
            cmd.pre_exec(move || gate.enter());
        }
        Ok(CageGuard {
            _tmp: tmp,
            _cgroup: cgroup,
        })
    }

    fn cgroup(&self, root: &Path) -> Result<CgroupDir, ToolError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = root.join(format!("reverie-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| failed("creating a pids cgroup", e))?;
        let dir = CgroupDir(dir);
        std::fs::write(dir.0.join("pids.max"), self.limits.processes.to_string())
            .map_err(|e| failed("limiting the cgroup's processes", e))?;
        Ok(dir)
    }
}

fn cstring(p: &Path) -> Result<CString, ToolError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|e| failed("a path with a NUL byte", e))
}

/// The environment a child sees: nothing of the user's (tokens, agent
/// sockets), only what programs need to run and what the tool set on
/// `cmd` itself.
fn clear_env(cmd: &mut Command, tmp: &Path) {
    let lang = std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into());
    let own: Vec<_> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", tmp)
        .env("TMPDIR", tmp)
        .env("LANG", lang)
        .env("TERM", "dumb")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .envs(own);
}

fn ruleset(readable: &[PathBuf], writable: &[PathBuf], abi: i32) -> Result<OwnedFd, ToolError> {
    let err = |e: landlock::RulesetError| failed("building the Landlock rules", e);
    let all = ABI::V6;
    let read = AccessFs::from_read(all);
    let write = AccessFs::from_all(all);
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(all))
        .map_err(err)?
        .handle_access(AccessNet::from_all(all))
        .map_err(err)?
        .scope(Scope::from_all(all))
        .map_err(err)?
        .create()
        .map_err(err)?;
    let rules = |paths: &[PathBuf], access| -> Vec<Result<_, landlock::RulesetError>> {
        paths
            .iter()
            .filter_map(|p| landlock::PathFd::new(p).ok().map(|fd| (p, fd)))
            .map(move |(p, fd)| {
                // Files take only file rights; folders take all of them.
                let access = if p.is_dir() {
                    access
                } else {
                    access & AccessFs::from_file(all)
                };
                Ok(landlock::PathBeneath::new(fd, access))
            })
            .collect()
    };
    created = created
        .add_rules(rules(readable, read))
        .map_err(err)?
        .add_rules(rules(writable, write))
        .map_err(err)?;
    // /dev/null is written to by many programs.
    if let Ok(fd) = landlock::PathFd::new("/dev/null") {
        created = created
            .add_rule(landlock::PathBeneath::new(
                fd,
                AccessFs::ReadFile | AccessFs::WriteFile,
            ))
            .map_err(err)?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| {
        failed(
            "building the Landlock rules",
            format!("the kernel (Landlock ABI {abi}) returned no ruleset"),
        )
    })
}

/// System calls a tool's process never needs, refused with EPERM.
fn seccomp_program() -> Result<Vec<libc::sock_filter>, ToolError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    let err = |e: seccompiler::BackendError| failed("building the seccomp filter", e);
    let denied = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_acct,
        libc::SYS_syslog,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied.iter().map(|nr| (*nr, Vec::new())).collect();
    // A script may not clear its parent-death signal (it would outlive
    // the app) nor push keystrokes into a terminal.
    let arg_is = |index, value| -> Result<SeccompRule, ToolError> {
        SeccompRule::new(vec![SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            value,
        )
        .map_err(err)?])
        .map_err(err)
    };
    rules.insert(
        libc::SYS_prctl,
        vec![arg_is(0, libc::PR_SET_PDEATHSIG as u64)?],
    );
    rules.insert(libc::SYS_ioctl, vec![arg_is(1, libc::TIOCSTI)?]);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| failed("building the seccomp filter", e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| failed("building the seccomp filter", e))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| failed("building the seccomp filter", e))?;
    Ok(program
        .iter()
        .map(|f| libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        })
        .collect())
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes `data` to `path`: open, write, close, nothing else.
unsafe fn write_file(path: &CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    check(fd)?;
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    libc::close(fd);
    if n != data.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

unsafe fn limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    check(libc::setrlimit(resource, &lim))
}

impl Gate {
    /// Runs in the forked child. Never allocates.
    unsafe fn enter(&self) -> std::io::Result<()> {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
        check(libc::setpgid(0, 0))?;
        let l = self.limits;
        limit(libc::RLIMIT_AS, l.memory_bytes)?;
        limit(libc::RLIMIT_FSIZE, l.file_bytes)?;
        limit(libc::RLIMIT_NOFILE, l.open_files)?;
        limit(libc::RLIMIT_CPU, l.cpu_seconds)?;
        limit(libc::RLIMIT_CORE, 0)?;
        if let Some(procs) = &self.cgroup_procs {
            write_file(procs, b"0")?;
        }
        if self.namespaces {
            check(libc::unshare(NAMESPACES))?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
            write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())?;
            // Counted in the new namespace only, not across the user's session.
            limit(libc::RLIMIT_NPROC, l.processes)?;
            self.fork_into_namespace()?;
        }
        if let Some(fd) = &self.ruleset {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            let r = libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0);
            check(r as libc::c_int)?;
        }
        if !self.seccomp.is_empty() {
            let prog = libc::sock_fprog {
                len: self.seccomp.len() as u16,
                filter: self.seccomp.as_ptr() as *mut libc::sock_filter,
            };
            check(libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            ))?;
        }
        Ok(())
    }

    /// Forks the process that will exec the tool (PID 1 of the new PID
    /// namespace). This process waits for it and exits the same way; it
    /// returns only in the new child.
    unsafe fn fork_into_namespace(&self) -> std::io::Result<()> {
        let mut alive = [0; 2];
        check(libc::pipe2(
            alive.as_mut_ptr(),
            libc::O_CLOEXEC | libc::O_NONBLOCK,
        ))?;
        let pid = libc::fork();
        check(pid)?;
        if pid > 0 {
            // Keep only stdio and the write end the child watches.
            let w = alive[1] as libc::c_uint;
            libc::syscall(libc::SYS_close_range, 3u32, w - 1, 0u32);
            libc::syscall(libc::SYS_close_range, w + 1, u32::MAX, 0u32);
            let mut status = 0;
            loop {
                let r = libc::waitpid(pid, &mut status, 0);
                if r == pid {
                    break;
                }
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(125);
                }
            }
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
        libc::close(alive[1]);
        // If the waiting parent died before the death signal was set, the
        // pipe is already closed: leave now.
        let mut byte = 0u8;
        if libc::read(alive[0], (&mut byte as *mut u8).cast(), 1) == 0 {
            libc::_exit(125);
        }
        Ok(())
    }
}

/// `name` as an absolute path: itself when it has a slash, else the first
/// match on the app's PATH. The cage's PATH is fixed, so programs are
/// found before it is entered.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then(|| std::path::absolute(&p).unwrap_or(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// How an [`isolated`] computation ended when it gave no result.
#[derive(Debug)]
pub(crate) enum Isolated {
    /// It ran past its time.
    TimedOut,
    /// It died (out of memory, a crash) or could not start.
    Failed(String),
}

/// Runs `work` in a forked copy of this process that can touch no file
/// (Landlock with nothing allowed), has `memory` bytes beyond what the app
/// already maps and `timeout` of time, and hands back only the bytes
/// `work` returns. For parsers of untrusted files (PDFs) that must not be
/// able to exhaust the app's memory or hang it.
pub(crate) fn isolated(
    timeout: std::time::Duration,
    memory: u64,
    work: impl FnOnce() -> Vec<u8>,
) -> Result<Vec<u8>, Isolated> {
    use std::io::Read;
    let failed = |e: &dyn std::fmt::Display| Isolated::Failed(e.to_string());
    // Prepared before the fork: the ruleset, and the address-space limit
    // counted from what the app maps now.
    let nothing = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI::V6))
        .and_then(|r| r.create())
        .map_err(|e| failed(&e))?;
    let ruleset: Option<OwnedFd> = nothing.into();
    let mapped = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096;
    let cpu = timeout.as_secs().max(1) + 1;
    let mut fds = [0; 2];
    // SAFETY: a plain pipe.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).map_err(|e| failed(&e))?;
    let (read_end, write_end) = (fds[0], fds[1]);
    // SAFETY: the child only computes, writes to its pipe and exits; it
    // never returns into the app's code.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the child, single-threaded.
        unsafe {
            libc::close(read_end);
            let ok = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0
                && limit(libc::RLIMIT_AS, mapped + memory).is_ok()
                && limit(libc::RLIMIT_CPU, cpu).is_ok()
                && limit(libc::RLIMIT_CORE, 0).is_ok()
                && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && ruleset.as_ref().is_none_or(|fd| {
                    libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) == 0
                });
            if !ok {
                libc::_exit(3);
            }
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let Ok(bytes) = out else { libc::_exit(2) };
            let mut at = 0;
            while at < bytes.len() {
                let n = libc::write(write_end, bytes[at..].as_ptr().cast(), bytes.len() - at);
                if n <= 0 {
                    libc::_exit(4);
                }
                at += n as usize;
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(write_end) };
    if pid < 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(read_end) };
        return Err(failed(&std::io::Error::last_os_error()));
    }
    // SAFETY: the read end is ours alone now.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(read_end) };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = pipe.read_to_end(&mut out).map(|_| out);
        let _ = tx.send(r);
    });
    let received = rx.recv_timeout(timeout);
    if received.is_err() {
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match received {
        Err(_) => Err(Isolated::TimedOut),
        Ok(Ok(bytes)) if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 => Ok(bytes),
        Ok(_) if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGXCPU => {
            Err(Isolated::TimedOut)
        }
        Ok(_) if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 2 => {
            Err(Isolated::Failed("it crashed".into()))
        }
        Ok(_) => Err(Isolated::Failed(
            "it ran out of memory or was killed".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cage(mode: SandboxMode) -> Cage {
        Cage {
            mode,
            writable: Vec::new(),
            readable: Vec::new(),
            limits: Limits::default(),
        }
    }

    #[test]
    fn without_landlock_nothing_starts_unless_the_sandbox_is_off() {
        let bare = Support {
            landlock_abi: 0,
            namespaces: false,
            pids_cgroup: None,
        };
        let mut cmd = Command::new("/bin/true");
        let e = cage(SandboxMode::On)
            .arm_on(&bare, &mut cmd)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("no Landlock") && e.contains("turn the sandbox off"),
            "{e}"
        );
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 7"]);
        let _guard = cage(SandboxMode::Off).arm_on(&bare, &mut cmd).unwrap();
        assert_eq!(cmd.status().unwrap().code(), Some(7));
    }
}
