//! `health`: memory, model, embedding model, jobs and disk, at a glance.

use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{ToolDef, ToolOutput, Toolbox};

/// `(available, total)` bytes of memory from /proc/meminfo.
fn memory() -> Option<(u64, u64)> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = info.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// `(free, total)` bytes on the filesystem holding `path`.
fn disk(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct for a valid C path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let frag = s.f_frsize as u64;
    Some((s.f_bavail as u64 * frag, s.f_blocks as u64 * frag))
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn health(tb: &Toolbox, _args: &Value) -> Result<ToolOutput, ToolError> {
    let s = tb.services();
    let model = s.model_name();
    let mut lines = vec![format!(
        "model: {}",
        if model.is_empty() {
            "(none loaded)"
        } else {
            &model
        }
    )];
    lines.push(format!(
        "embedding model: {}",
        if s.embedder().is_some() {
            "all-MiniLM-L6-v2 (notes search by meaning)"
        } else {
            "not installed (notes search by shared words)"
        }
    ));
    if let Some((avail, total)) = memory() {
        lines.push(format!("memory: {} free of {}", gib(avail), gib(total)));
    }
    lines.push(format!(
        "jobs: {} running in all channels, {} in this one",
        s.jobs.running(),
        s.jobs
            .list(tb.channel())
            .iter()
            .filter(|j| j.1 == "running")
            .count()
    ));
    if let Some((free, total)) = disk(tb.workspace().root()) {
        lines.push(format!(
            "disk (workspace): {} free of {}",
            gib(free),
            gib(total)
        ));
    }
    Ok(lines.join("\n").into())
}

pub(crate) const TOOLS: &[ToolDef] = &[ToolDef {
    name: "health",
    description: "Memory, model, embedding model, running jobs and free disk.",
    parameters: || json!({"type": "object", "properties": {}}),
    run: health,
}];
