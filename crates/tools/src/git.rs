//! git inside the workspace only: the repository is the workspace's own
//! `.git` folder (never a parent's, never a link), git runs in the sandbox
//! with no system or user configuration, no hooks, no fsmonitor, no
//! external diff or textconv, and a repository whose configuration would
//! run a command (filters, editors, pagers, includes, …) is refused.
//! `checkout` records an undo revision. No command here talks to a network.

use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::sandbox::Limits;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const MAX_OUTPUT: usize = 16 << 10;

#[derive(Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum GitAction {
    Init,
    Status,
    Diff,
    Log,
    Add,
    Commit,
    Checkout,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GitArgs {
    action: GitAction,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    staged: bool,
}

/// Repository settings that make git run a program (or read settings
/// from elsewhere); a repository with any of them is refused.
const RUNS_COMMANDS: &[&str] = &[
    "filter.",
    "core.fsmonitor",
    "core.sshcommand",
    "core.editor",
    "core.pager",
    "core.askpass",
    "core.gitproxy",
    "core.hookspath",
    "core.attributesfile",
    "core.worktree",
    "diff.external",
    "gpg.",
    "credential.",
    "include.",
    "includeif.",
    "sequence.editor",
    "merge.",
    "pager.",
    "alias.",
    "uploadpack.",
    "receive.",
    "remote.",
    "url.",
    "protocol.",
    "http.",
    "sendemail.",
    "extensions.worktreeconfig",
];

/// Whether the setting `key` (lower case, as `git config --list` gives
/// it) can run a program.
fn runs_command(key: &str) -> bool {
    RUNS_COMMANDS.iter().any(|p| key.starts_with(p))
        || (key.starts_with("diff.") && (key.ends_with(".command") || key.ends_with(".textconv")))
}

/// git in the cage, with no configuration but the repository's own.
fn git_command(tb: &Toolbox, git: &std::path::Path) -> Command {
    let root = tb.workspace().root();
    let mut cmd = Command::new(git);
    cmd.current_dir(root)
        .env("GIT_DIR", root.join(".git"))
        .env("GIT_WORK_TREE", root)
        .env("GIT_CEILING_DIRECTORIES", root.parent().unwrap_or(root))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args([
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "color.ui=false",
        ])
        .args(["-c", "protocol.allow=never", "-c", "safe.directory=*"])
        .args([
            "-c",
            "user.name=Reverie agent",
            "-c",
            "user.email=agent@reverie.local",
        ]);
    cmd
}

fn run_git(tb: &Toolbox, cmd: Command) -> Result<crate::jobs::RunResult, ToolError> {
    // The cage clears the user's environment and keeps git's variables.
    tb.services().jobs.run_blocking(
        cmd,
        &tb.cage(Limits::default(), Vec::new()),
        Duration::from_secs(60),
        MAX_OUTPUT,
        tb.stop_flag(),
    )
}

/// Refuses a `.git` that is not a plain folder, and a repository whose
/// settings would run a program.
fn check_repository(tb: &Toolbox, git: &std::path::Path, init: bool) -> Result<(), ToolError> {
    let git_dir = tb.workspace().root().join(".git");
    match git_dir.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(ToolError::refused(
                "`.git` is a symbolic link, so it may point at another repository; git runs only on a `.git` folder inside the workspace",
            ))
        }
        Ok(m) if !m.is_dir() => {
            return Err(ToolError::refused(
                "`.git` is a file, not a folder (a linked worktree or submodule); git runs only on a `.git` folder inside the workspace",
            ))
        }
        Ok(_) => {}
        Err(_) if init => return Ok(()),
        Err(_) => {
            return Err(ToolError::refused(
                "the workspace is not a git repository yet; call git with action \"init\" first",
            ))
        }
    }
    let mut cmd = git_command(tb, git);
    cmd.args([
        "config",
        "--no-includes",
        "--file",
        ".git/config",
        "--list",
        "--name-only",
    ]);
    let res = run_git(tb, cmd)?;
    if res.status.and_then(|s| s.code()) != Some(0) {
        return Err(ToolError::refused(format!(
            "git could not read the repository's settings, so it was not run: {}. Fix or remove .git/config",
            res.output.trim()
        )));
    }
    let bad: Vec<&str> = res
        .output
        .lines()
        .map(str::trim)
        .filter(|k| runs_command(&k.to_ascii_lowercase()))
        .collect();
    if !bad.is_empty() {
        return Err(ToolError::refused(format!(
            "the repository's .git/config sets {}, which can make git run a program; git was not run. Remove {} from .git/config first",
            bad.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
            if bad.len() == 1 { "it" } else { "them" }
        )));
    }
    Ok(())
}

fn git(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: GitArgs = parse_args("git", args)?;
    let git = crate::sandbox::find_program("git")
        .ok_or_else(|| ToolError::refused("git is not installed on this computer"))?;
    check_repository(tb, &git, a.action == GitAction::Init)?;
    let mut paths = Vec::new();
    let mut abs_paths = Vec::new();
    for p in &a.paths {
        let abs = tb.workspace().resolve(p)?;
        paths.push(tb.workspace().display(&abs));
        abs_paths.push(abs);
    }
    let mut cmd = git_command(tb, &git);
    let mut recorder = None;
    match a.action {
        GitAction::Init => {
            cmd.args(["init", "--quiet"]);
        }
        GitAction::Status => {
            cmd.args(["status", "--short", "--branch"]);
        }
        GitAction::Diff => {
            cmd.args(["diff", "--no-ext-diff", "--no-textconv"]);
            if a.staged {
                cmd.arg("--cached");
            }
            cmd.arg("--").args(&paths);
        }
        GitAction::Log => {
            let n = a.n.unwrap_or(10).clamp(1, 100);
            cmd.args([
                "log",
                "--no-ext-diff",
                "--no-textconv",
                "--oneline",
                "--decorate",
                &format!("-n{n}"),
            ]);
            cmd.arg("--").args(&paths);
        }
        GitAction::Add => {
            if paths.is_empty() {
                return Err(ToolError::refused(
                    "add needs `paths`: the files to stage (\".\" for everything)",
                ));
            }
            cmd.arg("add").arg("--").args(&paths);
        }
        GitAction::Commit => {
            let msg = a
                .message
                .as_deref()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| ToolError::refused("commit needs `message`"))?;
            cmd.args(["commit", "--quiet", "-m", msg]);
        }
        GitAction::Checkout => {
            if paths.is_empty() {
                return Err(ToolError::refused(
                    "checkout needs `paths`: the files to restore from the last commit",
                ));
            }
            recorder = Some(crate::history::Recorder::trees(tb, &abs_paths)?);
            cmd.args(["checkout", "HEAD", "--"]).args(&paths);
        }
    }
    let res = run_git(tb, cmd)?;
    if let Some(recorder) = recorder {
        recorder.commit(tb, "git", &format!("git checkout {}", paths.join(" ")))?;
    }
    let out = res.output.trim().to_string();
    match res.status.and_then(|s| s.code()) {
        Some(0) if out.is_empty() => Ok(match a.action {
            GitAction::Init => "initialised an empty git repository in the workspace".to_string(),
            GitAction::Commit => "committed".to_string(),
            GitAction::Diff => "no differences".to_string(),
            _ => "done".to_string(),
        }
        .into()),
        Some(0) => Ok(out.into()),
        _ if res.timed_out => Err(ToolError::refused("git took over 60 s and was stopped")),
        _ => Err(ToolError::Failed {
            what: "git".into(),
            detail: out,
        }),
    }
}

pub(crate) const TOOLS: &[ToolDef] = &[ToolDef {
    name: "git",
    description: "git in the workspace: init, status, diff, log, add, commit, checkout (restore files from the last commit).",
    parameters: || {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["init", "status", "diff", "log", "add", "commit", "checkout"]},
            "paths": {"type": "array", "items": {"type": "string"}},
            "message": {"type": "string", "description": "commit message"},
            "n": {"type": "integer", "description": "log entries (default 10)"},
            "staged": {"type": "boolean", "description": "diff the staged changes"}
        }, "required": ["action"]})
    },
    run: git,
}];
