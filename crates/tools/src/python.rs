//! Running Python: a script to completion (timeout, output cap, memory
//! limit), and the outline of a .py file from Python's own parser.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::sandbox::{Cage, Limits};
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const DEFAULT_TIMEOUT_S: u64 = 30;
const MAX_TIMEOUT_S: u64 = 600;
const MAX_OUTPUT: usize = 16 << 10;
const MAX_MEMORY_MB: u64 = 16 << 10;

/// The interpreter (`REVERIE_PYTHON`, else `python3` on the PATH) as an
/// absolute path, and the folder its installation lives in (read-only in
/// the sandbox: a virtual environment or a Python outside /usr).
pub(crate) fn python() -> Result<(PathBuf, PathBuf), ToolError> {
    let name = std::env::var("REVERIE_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = crate::sandbox::find_program(&name).ok_or_else(|| {
        ToolError::refused(format!(
            "Python (`{name}`) is not installed or not on the PATH; install python3 or set REVERIE_PYTHON"
        ))
    })?;
    let prefix = path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/usr"))
        .to_path_buf();
    Ok((path, prefix))
}

/// The cage a Python run gets.
fn cage(tb: &Toolbox, prefix: PathBuf, limits: Limits) -> Cage {
    tb.cage(limits, vec![prefix])
}

/// A Python command for `code` or the workspace file `path`, run in the
/// workspace root; returns it with a short description.
pub(crate) fn command(
    tb: &Toolbox,
    code: Option<&str>,
    path: Option<&str>,
    args: &[String],
    limits: Limits,
) -> Result<(Command, Cage, String), ToolError> {
    let (python, prefix) = python()?;
    let mut cmd = Command::new(python);
    cmd.current_dir(tb.workspace().root()).arg("-u");
    let what = match (code, path) {
        (Some(code), None) => {
            cmd.arg("-c").arg(code);
            let first = code.lines().next().unwrap_or_default();
            format!("python -c {:?}", crate::output::cap_line(first, 60))
        }
        (None, Some(path)) => {
            let abs = tb.workspace().resolve(path)?;
            if !abs.is_file() {
                return Err(ToolError::NotFound {
                    path: path.to_string(),
                    near: String::new(),
                });
            }
            cmd.arg(&abs);
            format!("python {path}")
        }
        _ => return Err(ToolError::refused(
            "give exactly one of `code` (Python source) or `path` (a .py file in the workspace)",
        )),
    };
    cmd.args(args);
    Ok((cmd, cage(tb, prefix, limits), what))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    timeout_s: Option<u64>,
    #[serde(default)]
    memory_mb: Option<u64>,
}

fn run(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: RunArgs = parse_args("python", args)?;
    let timeout = a.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout == 0 || timeout > MAX_TIMEOUT_S {
        return Err(ToolError::refused(format!(
            "timeout_s must be 1 to {MAX_TIMEOUT_S}; for longer work start a background job with `jobs`"
        )));
    }
    let mut limits = Limits::default();
    if let Some(mb) = a.memory_mb {
        if mb == 0 || mb > MAX_MEMORY_MB {
            return Err(ToolError::refused(format!(
                "memory_mb must be 1 to {MAX_MEMORY_MB}"
            )));
        }
        limits.memory_bytes = mb << 20;
    }
    let (cmd, cage, _) = command(tb, a.code.as_deref(), a.path.as_deref(), &a.args, limits)?;
    let res = tb.services().jobs.run_blocking(
        cmd,
        &cage,
        Duration::from_secs(timeout),
        MAX_OUTPUT,
        tb.stop_flag(),
    )?;
    let output = if res.output.trim().is_empty() {
        "(no output)".to_string()
    } else {
        res.output
    };
    if res.timed_out {
        return Err(ToolError::refused(format!(
            "timed out after {timeout} s and was stopped; make it faster, raise timeout_s, or start it as a background job with `jobs`. Output so far:\n{output}"
        )));
    }
    match res.status.and_then(|s| s.code()) {
        Some(0) => Ok(output.into()),
        Some(code) => Err(ToolError::Failed {
            what: "the script".into(),
            detail: format!("exit status {code}\n{output}"),
        }),
        None => Err(ToolError::Failed {
            what: "the script".into(),
            detail: format!(
                "it was killed (over the memory limit of {} MiB, or the output limit)\n{output}",
                limits.memory_bytes >> 20
            ),
        }),
    }
}

/// Prints `kind name (line N)` for each class and function, indented by
/// nesting, from Python's `ast`.
const OUTLINE_PY: &str = r#"
import ast, sys
src = open(sys.argv[1], encoding="utf-8").read()
try:
    tree = ast.parse(src)
except SyntaxError as e:
    print(f"syntax error at line {e.lineno}: {e.msg}", file=sys.stderr)
    sys.exit(2)
def walk(node, depth):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "class" if isinstance(child, ast.ClassDef) else "def"
            end = getattr(child, "end_lineno", child.lineno)
            print(f"{'  ' * depth}{kind} {child.name} (lines {child.lineno}-{end})")
            walk(child, depth + 1)
walk(tree, 0)
"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutlineArgs {
    path: String,
}

fn outline(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: OutlineArgs = parse_args("outline", args)?;
    let (abs, _) = crate::files::read_text(tb, &a.path)?;
    let (python, prefix) = python()?;
    let mut cmd = Command::new(python);
    cmd.current_dir(tb.workspace().root())
        .arg("-c")
        .arg(OUTLINE_PY)
        .arg(&abs);
    let res = tb.services().jobs.run_blocking(
        cmd,
        &cage(tb, prefix, Limits::default()),
        Duration::from_secs(20),
        MAX_OUTPUT,
        tb.stop_flag(),
    )?;
    match res.status.and_then(|s| s.code()) {
        Some(0) if res.output.trim().is_empty() => {
            Ok(format!("{}: no classes or functions", a.path).into())
        }
        Some(0) => Ok(format!("{}:\n{}", a.path, res.output).into()),
        _ => Err(ToolError::refused(format!(
            "`{}` could not be parsed as Python: {}",
            a.path,
            res.output.trim()
        ))),
    }
}

/// The python tool's arguments: `code` or `path`, never both. The
/// alternatives are whole objects because a call's grammar is built from
/// them alone (a small model otherwise writes both and is refused); the
/// properties beside them are for chat templates that list them.
fn python_parameters() -> serde_json::Value {
    let code = json!({"type": "string", "description": "Python source"});
    let path = json!({"type": "string", "description": "or a .py file in the workspace"});
    let args = json!({"type": "array", "items": {"type": "string"}});
    let timeout = json!({"type": "integer", "description": "1 to 600 (default 30)"});
    let memory = json!({"type": "integer", "description": "address-space limit (default 2048)"});
    json!({
        "type": "object",
        "properties": {"code": code, "path": path, "args": args, "timeout_s": timeout, "memory_mb": memory},
        "oneOf": [
            {"type": "object", "properties": {"code": code, "timeout_s": timeout, "memory_mb": memory}, "required": ["code"]},
            {"type": "object", "properties": {"path": path, "args": args, "timeout_s": timeout, "memory_mb": memory}, "required": ["path"]}
        ]
    })
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "python",
        description: "Run Python (code, or a .py file) in the workspace and wait for it; returns its output. Default timeout 30 s, memory 2 GiB.",
        parameters: python_parameters,
        run,
    },
    ToolDef {
        name: "outline",
        description: "Classes and functions of a .py file with their line numbers.",
        parameters: || json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        run: outline,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_allows_code_or_path_never_both() {
        let p = python_parameters();
        let alternatives = p["oneOf"].as_array().unwrap();
        let mut given = Vec::new();
        for alt in alternatives {
            let props = alt["properties"].as_object().unwrap();
            // Every alternative is a whole object of the listed properties.
            assert!(props.keys().all(|k| p["properties"].get(k).is_some()));
            let one: Vec<_> = ["code", "path"]
                .into_iter()
                .filter(|k| props.contains_key(*k))
                .collect();
            assert_eq!(one.len(), 1, "{alt}");
            assert_eq!(alt["required"], json!(one));
            given.push(one[0]);
        }
        assert_eq!(given, ["code", "path"]);
    }
}
