//! git inside the workspace only: the repository is the workspace's own
//! `.git` (never a parent folder's), hooks are off, and paths go through
//! the sandbox. No command here talks to a network.

use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::jobs::Limits;
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

fn git(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: GitArgs = parse_args("git", args)?;
    let root = tb.workspace().root();
    let git_dir = root.join(".git");
    if a.action != GitAction::Init && !git_dir.is_dir() {
        return Err(ToolError::refused(
            "the workspace is not a git repository yet; call git with action \"init\" first",
        ));
    }
    let mut paths = Vec::new();
    for p in &a.paths {
        let abs = tb.workspace().resolve(p)?;
        paths.push(tb.workspace().display(&abs));
    }
    let mut cmd = Command::new("git");
    cmd.current_dir(root)
        .env("GIT_DIR", &git_dir)
        .env("GIT_WORK_TREE", root)
        .env("GIT_CEILING_DIRECTORIES", root.parent().unwrap_or(root))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .args(["-c", "core.hooksPath=/dev/null", "-c", "color.ui=false"])
        .args([
            "-c",
            "user.name=Reverie agent",
            "-c",
            "user.email=agent@reverie.local",
        ]);
    match a.action {
        GitAction::Init => {
            cmd.args(["init", "--quiet"]);
        }
        GitAction::Status => {
            cmd.args(["status", "--short", "--branch"]);
        }
        GitAction::Diff => {
            cmd.arg("diff");
            if a.staged {
                cmd.arg("--cached");
            }
            cmd.arg("--").args(&paths);
        }
        GitAction::Log => {
            let n = a.n.unwrap_or(10).clamp(1, 100);
            cmd.args(["log", "--oneline", "--decorate", &format!("-n{n}")]);
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
            cmd.args(["checkout", "HEAD", "--"]).args(&paths);
        }
    }
    let res = tb.services().jobs.run_blocking(
        cmd,
        Limits::default(),
        Duration::from_secs(60),
        MAX_OUTPUT,
        tb.stop_flag(),
    )?;
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
