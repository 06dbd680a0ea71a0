//! File tools: read, write, edit, list, make, delete, inspect, tree.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::history::{write_atomic, Recorder};
use crate::output::cap_line;
use crate::workspace::check_not_special;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

/// Largest text file the file tools read whole.
const MAX_TEXT_BYTES: u64 = 16 << 20;
/// Lines one `read_file` call returns at most.
pub const MAX_READ_LINES: usize = 100;
/// Largest file `write_file` and `edit_file` produce.
const MAX_WRITE_BYTES: usize = 4 << 20;
const MAX_LINE_BYTES: usize = 2000;
const MAX_LISTED: usize = 300;

fn path_param(what: &str) -> Value {
    json!({"type": "string", "description": what})
}

/// The text of a workspace file, or an error that says why it is not text.
pub(crate) fn read_text(
    tb: &Toolbox,
    rel: &str,
) -> Result<(std::path::PathBuf, String), ToolError> {
    let abs = tb.workspace().resolve(rel)?;
    let bytes = tb.workspace().read_regular(
        &abs,
        rel,
        MAX_TEXT_BYTES,
        "Find the lines you need with grep, or read it with python in pieces.",
    )?;
    match String::from_utf8(bytes) {
        Ok(s) if !s.contains('\0') => Ok((abs, s)),
        _ => Err(ToolError::refused(format!(
            "`{rel}` is a binary file, not text; use file_info, read_pdf or load_image instead"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default = "one")]
    offset: usize,
    #[serde(default = "max_lines")]
    limit: usize,
}

fn one() -> usize {
    1
}

fn max_lines() -> usize {
    MAX_READ_LINES
}

fn read_file(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let mut a: ReadArgs = parse_args("read_file", args)?;
    let (text, found) = match read_text(tb, &a.path) {
        Ok((_, text)) => (text, None),
        // A small model drops the folder from a path it was given
        // ("sales.csv" for data/sales.csv) and, told where the file is,
        // lists the folder instead of reading it. When exactly one file
        // has that name, it is read, and the result says which.
        Err(ToolError::NotFound { path, near }) => match tb.workspace().same_names(&a.path)[..] {
            [ref only] => {
                let (_, text) = read_text(tb, only)?;
                let said = std::mem::replace(&mut a.path, only.clone());
                (text, Some(said))
            }
            _ => return Err(ToolError::NotFound { path, near }),
        },
        Err(e) => return Err(e),
    };
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if a.limit == 0 || a.limit > MAX_READ_LINES {
        return Err(ToolError::refused(format!(
            "limit must be between 1 and {MAX_READ_LINES}; read long files in pieces with offset"
        )));
    }
    if total == 0 {
        return Ok(format!("{}: empty file (0 lines)", a.path).into());
    }
    if a.offset == 0 || a.offset > total {
        return Err(ToolError::refused(format!(
            "offset {} is out of range: `{}` has {total} lines; use an offset from 1 to {total}",
            a.offset, a.path
        )));
    }
    let end = (a.offset - 1 + a.limit).min(total);
    let mut out = match found {
        Some(said) => format!(
            "There is no `{said}`; the only file of that name is `{}`, read here.\n",
            a.path
        ),
        None => String::new(),
    };
    out.push_str(&format!(
        "{}: lines {}-{end} of {total}\n",
        a.path, a.offset
    ));
    for (i, line) in lines[a.offset - 1..end].iter().enumerate() {
        out.push_str(&format!(
            "{}| {}\n",
            a.offset + i,
            cap_line(line, MAX_LINE_BYTES)
        ));
    }
    if end < total {
        out.push_str(&format!(
            "… {} more lines; call read_file with offset {}\n",
            total - end,
            end + 1
        ));
    }
    // Totals only of the whole table: a part's would read as the file's.
    let whole = a.offset == 1 && end == total;
    if let Some(totals) = crate::table::delimiter(&a.path)
        .filter(|_| whole)
        .and_then(|d| crate::table::column_totals(&text, d))
    {
        out.push_str(&totals);
        out.push('\n');
    }
    Ok(out.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

fn write_file(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: WriteArgs = parse_args("write_file", args)?;
    if a.content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::refused(format!(
            "content is {} bytes; the limit is {} MiB per file",
            a.content.len(),
            MAX_WRITE_BYTES >> 20
        )));
    }
    let abs = tb.workspace().resolve_for_change(&a.path)?;
    if abs == tb.workspace().root() || abs.is_dir() {
        return Err(ToolError::refused(format!(
            "`{}` is a folder; give a file path",
            a.path
        )));
    }
    let existed = abs.exists();
    // Writing what the file already holds changes nothing: no revision to
    // undo, and the model is told so (the default model rewrote the same
    // ledger again and again, each told "overwrote", until the harness
    // stopped the turn: every ledger eval task).
    if existed && holds(tb, &abs, &a.path, a.content.as_bytes()) {
        return Ok(format!(
            "{UNCHANGED} `{}` already holds exactly this content ({} lines, {} bytes); nothing was written",
            a.path,
            a.content.lines().count(),
            a.content.len()
        )
        .into());
    }
    let rec = Recorder::creating(tb, &abs)?;
    if let Some(parent) = abs.parent() {
        tb.workspace()
            .make_dirs(parent)
            .map_err(|e| ToolError::io(&a.path, e))?;
    }
    write_atomic(tb, &abs, a.content.as_bytes())?;
    let verb = if existed { "overwrote" } else { "created" };
    rec.commit(tb, "write_file", &format!("{verb} {}", a.path))?;
    Ok(format!(
        "{verb} {} ({} lines, {} bytes)",
        a.path,
        a.content.lines().count(),
        a.content.len()
    )
    .into())
}

/// How the result of a changing call that changed nothing begins.
pub const UNCHANGED: &str = "unchanged:";

/// Whether the regular file `abs` holds exactly `content`. A file that
/// cannot be read (a pipe, too big, gone) does not.
fn holds(tb: &Toolbox, abs: &std::path::Path, rel: &str, content: &[u8]) -> bool {
    let max = content.len() as u64;
    tb.workspace()
        .read_regular(abs, rel, max, "")
        .is_ok_and(|bytes| bytes == content)
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum EditAction {
    Replace,
    Insert,
    Delete,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    action: EditAction,
    start_line: usize,
    end_line: Option<usize>,
    #[serde(default)]
    text: Option<String>,
}

fn edit_file(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: EditArgs = parse_args("edit_file", args)?;
    tb.workspace().resolve_for_change(&a.path)?;
    let (abs, text) = read_text(tb, &a.path)?;
    let had_newline = text.ends_with('\n') || text.is_empty();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let total = lines.len();
    let new_lines = |t: &Option<String>| -> Result<Vec<String>, ToolError> {
        t.as_deref()
            .map(|t| t.lines().map(str::to_string).collect())
            .ok_or_else(|| ToolError::refused("this action needs `text`: the lines to put in"))
    };
    let range = |end: Option<usize>| -> Result<(usize, usize), ToolError> {
        let end = end.unwrap_or(a.start_line);
        if a.start_line == 0 || a.start_line > total || end < a.start_line || end > total {
            return Err(ToolError::refused(format!(
                "lines {}-{end} are out of range: `{}` has {total} lines (numbered from 1); read_file shows the numbers",
                a.start_line, a.path
            )));
        }
        Ok((a.start_line - 1, end))
    };
    let summary = match a.action {
        EditAction::Replace => {
            let (s, e) = range(a.end_line)?;
            let new = new_lines(&a.text)?;
            let n = new.len();
            lines.splice(s..e, new);
            format!("replaced lines {}-{e} of {} with {n} lines", s + 1, a.path)
        }
        EditAction::Delete => {
            let (s, e) = range(a.end_line)?;
            lines.drain(s..e);
            format!("deleted lines {}-{e} of {}", s + 1, a.path)
        }
        EditAction::Insert => {
            if a.start_line == 0 || a.start_line > total + 1 {
                return Err(ToolError::refused(format!(
                    "start_line {} is out of range for insert: `{}` has {total} lines; use 1 to {} ({} appends)",
                    a.start_line,
                    a.path,
                    total + 1,
                    total + 1
                )));
            }
            let new = new_lines(&a.text)?;
            let n = new.len();
            lines.splice(a.start_line - 1..a.start_line - 1, new);
            format!(
                "inserted {n} lines before line {} of {}",
                a.start_line, a.path
            )
        }
    };
    let mut out = lines.join("\n");
    if had_newline && !out.is_empty() {
        out.push('\n');
    }
    if out.len() > MAX_WRITE_BYTES {
        return Err(ToolError::refused(
            "the edited file would be over the size limit",
        ));
    }
    if out == text {
        return Ok(format!(
            "{UNCHANGED} `{}` already holds these lines there; nothing was written",
            a.path
        )
        .into());
    }
    let rec = Recorder::path(tb, &abs)?;
    write_atomic(tb, &abs, out.as_bytes())?;
    rec.commit(tb, "edit_file", &summary)?;
    Ok(format!("{summary}; it now has {} lines", lines.len()).into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    #[serde(default)]
    path: String,
}

fn list_dir(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PathArgs = parse_args("list_dir", args)?;
    let (abs, said) = tb.workspace().resolve_folder(&a.path)?;
    let shown = tb.workspace().display(&abs);
    if abs.is_file() {
        return Err(ToolError::refused(format!(
            "`{shown}` is a file; use read_file or file_info"
        )));
    }
    let mut entries = tb
        .workspace()
        .list(&abs)
        .map_err(|e| ToolError::io(&shown, e))?;
    entries.sort();
    let mut out = said.unwrap_or_default();
    if entries.is_empty() {
        out.push_str(&format!("{shown}: empty folder"));
        return Ok(out.into());
    }
    out.push_str(&format!("{shown}: {} entries\n", entries.len()));
    for (name, is_dir, size) in entries.iter().take(MAX_LISTED) {
        if *is_dir {
            out.push_str(&format!("{name}/\n"));
        } else {
            out.push_str(&format!("{name}  ({size} bytes)\n"));
        }
    }
    if entries.len() > MAX_LISTED {
        out.push_str(&format!(
            "… {} more; use glob to narrow down\n",
            entries.len() - MAX_LISTED
        ));
    }
    Ok(out.into())
}

fn make_dir(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PathArgs = parse_args("make_dir", args)?;
    let abs = tb.workspace().resolve_for_change(&a.path)?;
    if abs.is_file() {
        return Err(ToolError::refused(format!(
            "`{}` already exists as a file",
            a.path
        )));
    }
    if abs.is_dir() {
        return Ok(format!("{} already exists", a.path).into());
    }
    let rec = Recorder::creating(tb, &abs)?;
    tb.workspace()
        .make_dirs(&abs)
        .map_err(|e| ToolError::io(&a.path, e))?;
    rec.commit(tb, "make_dir", &format!("created folder {}", a.path))?;
    Ok(format!("created folder {}", a.path).into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    path: String,
    #[serde(default)]
    recursive: bool,
}

fn delete_path(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: DeleteArgs = parse_args("delete_path", args)?;
    let abs = tb.workspace().resolve_for_change(&a.path)?;
    if abs == tb.workspace().root() {
        return Err(ToolError::refused(
            "the workspace root cannot be deleted; delete the things inside it",
        ));
    }
    let meta = abs
        .symlink_metadata()
        .map_err(|e| ToolError::io(&a.path, e))?;
    let rec = if meta.is_dir() {
        let non_empty = std::fs::read_dir(&abs)
            .map_err(|e| ToolError::io(&a.path, e))?
            .next()
            .is_some();
        if non_empty && !a.recursive {
            return Err(ToolError::refused(format!(
                "`{}` is a folder that is not empty; pass \"recursive\": true to delete it with everything inside",
                a.path
            )));
        }
        let rec = Recorder::tree(tb, &abs)?;
        tb.workspace()
            .remove(&abs)
            .map_err(|e| ToolError::io(&a.path, e))?;
        rec
    } else {
        let rec = Recorder::path(tb, &abs)?;
        tb.workspace()
            .remove(&abs)
            .map_err(|e| ToolError::io(&a.path, e))?;
        rec
    };
    rec.commit(tb, "delete_path", &format!("deleted {}", a.path))?;
    Ok(format!("deleted {} (undo brings it back)", a.path).into())
}

fn rfc3339(t: std::time::SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn file_info(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PathArgs = parse_args("file_info", args)?;
    let abs = tb.workspace().resolve(&a.path)?;
    let shown = tb.workspace().display(&abs);
    let meta = abs.metadata().map_err(|e| ToolError::io(&shown, e))?;
    check_not_special(&meta, &shown)?;
    let kind = if meta.is_dir() { "folder" } else { "file" };
    let modified = meta.modified().map(rfc3339).unwrap_or_default();
    let mut out = format!("{shown}: {kind}, {} bytes, modified {modified}", meta.len());
    if meta.is_file() {
        match tb
            .workspace()
            .read_regular(&abs, &shown, MAX_TEXT_BYTES, "")
        {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => out.push_str(&format!(", {} lines of text", text.lines().count())),
                Err(_) => out.push_str(", binary"),
            },
            Err(_) => out.push_str(", too large to count its lines"),
        }
    }
    Ok(out.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeArgs {
    #[serde(default)]
    path: String,
    #[serde(default = "three")]
    depth: usize,
}

fn three() -> usize {
    3
}

fn tree(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: TreeArgs = parse_args("tree", args)?;
    let (abs, said) = tb.workspace().resolve_folder(&a.path)?;
    let shown = tb.workspace().display(&abs);
    if !abs.is_dir() {
        return Err(ToolError::NotFound {
            path: shown,
            near: String::new(),
        });
    }
    let walk = ignore::WalkBuilder::new(&abs)
        .max_depth(Some(a.depth.clamp(1, 10)))
        .sort_by_file_name(|x, y| x.cmp(y))
        .build();
    let mut out = said.unwrap_or_default();
    out.push_str(&format!("{shown}/\n"));
    let mut n = 0;
    for entry in walk.filter_map(Result::ok).skip(1) {
        n += 1;
        if n > MAX_LISTED {
            out.push_str("… more entries; narrow down with path or depth\n");
            break;
        }
        let depth = entry.depth();
        let name = entry.file_name().to_string_lossy();
        let slash = if entry.file_type().is_some_and(|t| t.is_dir()) {
            "/"
        } else {
            ""
        };
        out.push_str(&format!("{}{name}{slash}\n", "  ".repeat(depth)));
    }
    Ok(out.into())
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "read_file",
        description: "Read a text file, at most 100 lines per call, with line numbers.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": path_param("file path relative to the workspace"),
                "offset": {"type": "integer", "description": "first line to read, from 1 (default 1)"},
                "limit": {"type": "integer", "description": "lines to read, at most 100 (default 100)"}
            }, "required": ["path"]})
        },
        run: read_file,
    },
    ToolDef {
        name: "write_file",
        description: "Create or overwrite a text file (folders are created as needed).",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": path_param("file path relative to the workspace"),
                "content": {"type": "string", "description": "the whole new content"}
            }, "required": ["path", "content"]})
        },
        run: write_file,
    },
    ToolDef {
        name: "edit_file",
        description: "Edit lines of a text file: replace lines start_line..end_line with text, insert text before start_line, or delete lines.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": path_param("file path relative to the workspace"),
                "action": {"type": "string", "enum": ["replace", "insert", "delete"]},
                "start_line": {"type": "integer", "description": "first line, from 1"},
                "end_line": {"type": "integer", "description": "last line, inclusive (default start_line)"},
                "text": {"type": "string", "description": "new lines for replace and insert"}
            }, "required": ["path", "action", "start_line"]})
        },
        run: edit_file,
    },
    ToolDef {
        name: "list_dir",
        description: "List a folder's entries with sizes.",
        parameters: || json!({"type": "object", "properties": {"path": path_param("folder (default: workspace root)")}}),
        run: list_dir,
    },
    ToolDef {
        name: "make_dir",
        description: "Create a folder (and its parents).",
        parameters: || json!({"type": "object", "properties": {"path": path_param("folder to create")}, "required": ["path"]}),
        run: make_dir,
    },
    ToolDef {
        name: "delete_path",
        description: "Delete a file, or a folder with recursive=true. Undo brings it back.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": path_param("file or folder to delete"),
                "recursive": {"type": "boolean", "description": "needed for a folder that is not empty"}
            }, "required": ["path"]})
        },
        run: delete_path,
    },
    ToolDef {
        name: "file_info",
        description: "Size, modification time and kind of a file or folder.",
        parameters: || json!({"type": "object", "properties": {"path": path_param("file or folder")}, "required": ["path"]}),
        run: file_info,
    },
    ToolDef {
        name: "tree",
        description: "The folder tree (ignoring what .gitignore ignores).",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": path_param("folder (default: workspace root)"),
                "depth": {"type": "integer", "description": "levels to show (default 3)"}
            }})
        },
        run: tree,
    },
];
