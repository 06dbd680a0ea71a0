//! grep and glob over the workspace, with ripgrep's own crates: `ignore`
//! walks (respecting .gitignore), `grep-searcher` searches, `globset` matches.

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::output::cap_line;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const DEFAULT_RESULTS: usize = 50;
const MAX_RESULTS: usize = 200;
/// Matches counted before a search stops (a pattern that matches
/// everything in a large workspace).
const MAX_COUNTED: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default = "default_results")]
    max_results: usize,
}

fn default_results() -> usize {
    DEFAULT_RESULTS
}

fn compile_glob(pattern: &str) -> Result<globset::GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            ToolError::refused(format!(
                "`{pattern}` is not a valid glob ({e}); e.g. `*.py` or `src/**/*.rs`"
            ))
        })
}

/// A sorted walk of the folder `rel`, and the line that says the
/// workspace was used for a folder named in words.
fn walker(tb: &Toolbox, rel: &str) -> Result<(Option<String>, ignore::Walk), ToolError> {
    let (abs, said) = tb.workspace().resolve_folder(rel)?;
    if !abs.exists() {
        return Err(ToolError::NotFound {
            path: rel.to_string(),
            near: String::new(),
        });
    }
    let walk = ignore::WalkBuilder::new(&abs)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    Ok((said, walk))
}

/// Where `rel` points, for messages (the root when it names none).
fn abs_of(tb: &Toolbox, rel: &str) -> std::path::PathBuf {
    tb.workspace()
        .resolve_folder(rel)
        .map_or_else(|_| tb.workspace().root().to_path_buf(), |(p, _)| p)
}

/// Whether `rel` (relative to the root) or its file name matches `g`.
fn glob_matches(g: &globset::GlobMatcher, rel: &std::path::Path) -> bool {
    g.is_match(rel) || rel.file_name().is_some_and(|n| g.is_match(n))
}

fn grep(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let mut a: GrepArgs = parse_args("grep", args)?;
    let max = a.max_results.clamp(1, MAX_RESULTS);
    let matcher = regex_matcher(&a.pattern, a.ignore_case)?;
    // A path missing its folder (`app.log` for logs/app.log) is the only
    // file of that name, as read_file takes it: told "no file at app.log",
    // the default model listed the root until the harness stopped the turn.
    let mut moved = None;
    if tb
        .workspace()
        .resolve_folder(&a.path)
        .is_ok_and(|(p, _)| !p.exists())
    {
        if let [only] = &tb.workspace().same_names(&a.path)[..] {
            moved = Some(std::mem::replace(&mut a.path, only.clone()));
        }
    }
    let (said, walk) = walker(tb, &a.path)?;
    let root = tb.workspace().root().to_path_buf();
    let place = tb.workspace().display(&abs_of(tb, &a.path));
    let (glob, glob_note) = match a.glob.as_deref() {
        Some(g) => usable_glob(tb, &a.path, g, &place)?,
        None => (None, None),
    };
    // What the search found comes first and what the tool changed about
    // the call after it: given the note first ("No file in `src` matches
    // the glob …"), the default model answered with the note in 4 of 10
    // simulated files tasks, with the matching line right below it.
    let mut notes: Vec<String> = moved
        .map(|given| format!("Searched `{}`, the only file named `{given}`.", a.path))
        .into_iter()
        .chain(glob_note)
        .collect();
    let mut found = search(tb, walk, glob.as_ref(), &matcher, max);
    // Narrowed to a place it guessed, the default model was told "no
    // matches" and answered from that; the rest of the workspace is
    // searched too, and said to be.
    let narrowed = abs_of(tb, &a.path) != root || glob.is_some();
    if found.hits.is_empty() && narrowed {
        let (_, everywhere) = walker(tb, "")?;
        let wide = search(tb, everywhere, None, &matcher, max);
        if !wide.hits.is_empty() {
            let glob = glob.as_ref().and(a.glob.as_deref());
            let within = glob.map(|g| format!(" (glob `{g}`)")).unwrap_or_default();
            notes.push(format!(
                "These lines are from the whole workspace, outside `{place}`{within}."
            ));
            found = wide;
        }
    }
    // Asked which file defines a function, the default model searched for
    // the file it guessed (`build_summary.py`) rather than the name, and
    // repeated that until the harness stopped the turn.
    if found.hits.is_empty() {
        if let Some(stem) = name_without_extension(&a.pattern) {
            let (_, everywhere) = walker(tb, "")?;
            // A stem is word characters only: a pattern as it is.
            let plain = regex_matcher(stem, a.ignore_case)?;
            let by_stem = search(tb, everywhere, None, &plain, max);
            if !by_stem.hits.is_empty() {
                notes.push(format!(
                    "Searched for `{stem}`, the name in `{}` without its extension.",
                    a.pattern
                ));
                found = by_stem;
            }
        }
    }
    let mut out = said.unwrap_or_default();
    if found.hits.is_empty() {
        out.push_str(&format!("no matches for `{}`", a.pattern));
        if narrowed {
            out.push_str(" anywhere in the workspace");
        }
    } else {
        out.push_str(&grep_summary(&found));
    }
    for note in notes {
        out.push_str(&format!("\n({note})"));
    }
    Ok(out.into())
}

fn regex_matcher(pattern: &str, ignore_case: bool) -> Result<grep_regex::RegexMatcher, ToolError> {
    RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .build(pattern)
        .map_err(|e| {
            ToolError::refused(format!(
                "`{pattern}` is not a valid regular expression: {e}. Escape special characters like ( [ . with a backslash"
            ))
        })
}

/// The glob a search under `rel` uses for the `glob` it was given, and a
/// note when it was dropped. Made to look, the default model passed
/// regular expressions as globs (`.*`, `.*py`): they are read as the globs
/// they mean (`*`, `*py`). A glob that no file there matches is dropped,
/// and the note says so (else "no matches" in every folder); so is one
/// beside a path that names a file.
fn usable_glob(
    tb: &Toolbox,
    rel: &str,
    given: &str,
    place: &str,
) -> Result<(Option<globset::GlobMatcher>, Option<String>), ToolError> {
    let read = glob_of_regex(given);
    let a_file = tb
        .workspace()
        .resolve_folder(rel)
        .is_ok_and(|(p, _)| p.is_file());
    if a_file || matches!(read.as_str(), "" | "*" | "**" | "**/*") {
        return Ok((None, None));
    }
    let g = compile_glob(&read)?;
    let root = tb.workspace().root().to_path_buf();
    let (_, files) = walker(tb, rel)?;
    let any = files
        .filter_map(Result::ok)
        .take(5_000)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .any(|e| glob_matches(&g, e.path().strip_prefix(&root).unwrap_or(e.path())));
    if !any {
        let note = format!("Searched every file in `{place}`: the glob `{given}` matches none.");
        return Ok((None, Some(note)));
    }
    Ok((Some(g), None))
}

/// The glob a regular expression given as one means: `.*` for `*`, `\.`
/// for `.`, without anchors. Anything else is left as it is.
fn glob_of_regex(given: &str) -> String {
    let t = given.trim();
    let t = t.strip_prefix('^').unwrap_or(t);
    let t = t.strip_suffix('$').unwrap_or(t);
    t.replace(".*", "*").replace("\\.", ".")
}

/// `name` for a pattern that is a plain file name such as `name.py`.
fn name_without_extension(pattern: &str) -> Option<&str> {
    let (stem, ext) = pattern.rsplit_once('.')?;
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    (word(stem) && word(ext) && ext.len() <= 5).then_some(stem)
}

/// What one search found: the lines shown, and every match counted.
struct Found {
    hits: Vec<String>,
    matched: usize,
    files: usize,
}

/// Searches every file of `walk` (that `glob` matches) for `matcher`.
fn search(
    tb: &Toolbox,
    walk: ignore::Walk,
    glob: Option<&globset::GlobMatcher>,
    matcher: &grep_regex::RegexMatcher,
    max: usize,
) -> Found {
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let root = tb.workspace().root();
    let mut hits = Vec::new();
    // Every match is counted, not only those shown, so the result answers
    // "how many lines match" without the model counting them itself.
    let mut matched = 0usize;
    let mut files = 0usize;
    for entry in walk.filter_map(Result::ok) {
        if matched >= MAX_COUNTED {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(root)
            .unwrap_or(entry.path())
            .to_path_buf();
        if glob.is_some_and(|g| !glob_matches(g, &rel)) {
            continue;
        }
        let shown = rel.display().to_string();
        // Opened beneath the workspace root: a folder swapped for a link
        // on the way cannot lead the search into another file.
        let Ok(file) = tb.workspace().open_read(
            entry.path(),
            rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY,
        ) else {
            continue;
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let before = matched;
        let res = searcher.search_file(
            matcher,
            &file,
            UTF8(|line_no, line| {
                matched += 1;
                if hits.len() < max {
                    hits.push(format!(
                        "{shown}:{line_no}: {}",
                        cap_line(line.trim_end(), 300)
                    ));
                }
                Ok(matched < MAX_COUNTED)
            }),
        );
        if let Err(e) = res {
            tracing::debug!("grep skipped {shown}: {e}");
        }
        files += (matched > before) as usize;
    }
    Found {
        hits,
        matched,
        files,
    }
}

/// The result of a search: how many lines matched in how many files, then
/// those shown.
fn grep_summary(found: &Found) -> String {
    let Found {
        hits,
        matched,
        files,
    } = found;
    let (matched, files) = (*matched, *files);
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let lines = if matched >= MAX_COUNTED {
        format!("more than {MAX_COUNTED} matching lines")
    } else {
        plural(matched, "matching line", "matching lines")
    };
    let mut out = format!("{lines} in {}", plural(files, "file", "files"));
    if matched > hits.len() {
        out.push_str(&format!(
            " (the first {} shown; narrow the pattern, path or glob to see the rest)",
            hits.len()
        ));
    }
    out.push_str(":\n");
    out.push_str(&hits.join("\n"));
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    path: String,
}

fn glob(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: GlobArgs = parse_args("glob", args)?;
    let g = compile_glob(&a.pattern)?;
    let (said, walk) = walker(tb, &a.path)?;
    let root = tb.workspace().root().to_path_buf();
    let mut found = Vec::new();
    for entry in walk.filter_map(Result::ok) {
        let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
        if rel.as_os_str().is_empty() {
            continue;
        }
        if g.is_match(rel) || rel.file_name().is_some_and(|n| g.is_match(n)) {
            found.push(rel.display().to_string());
            if found.len() > MAX_RESULTS {
                break;
            }
        }
    }
    let mut out = said.unwrap_or_default();
    if found.is_empty() {
        out.push_str(&format!("nothing matches `{}`", a.pattern));
        return Ok(out.into());
    }
    let more = found.len() > MAX_RESULTS;
    found.truncate(MAX_RESULTS);
    out.push_str(&found.join("\n"));
    if more {
        out.push_str(&format!("\n… more than {MAX_RESULTS}; narrow the pattern"));
    }
    Ok(out.into())
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "grep",
        description: "Search file contents with a regular expression; prints how many lines match, then path:line: text.",
        parameters: || {
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "regular expression"},
                "path": {"type": "string", "description": "folder or file to search (default: workspace root)"},
                "glob": {"type": "string", "description": "only files matching this glob, e.g. *.py"},
                "ignore_case": {"type": "boolean"},
                "max_results": {"type": "integer", "description": "default 50, at most 200"}
            }, "required": ["pattern"]})
        },
        run: grep,
    },
    ToolDef {
        name: "glob",
        description: "Find files and folders whose path matches a glob such as **/*.py.",
        parameters: || {
            json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "folder to look in (default: workspace root)"}
            }, "required": ["pattern"]})
        },
        run: glob,
    },
];
