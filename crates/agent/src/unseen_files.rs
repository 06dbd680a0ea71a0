//! A final answer that names a file the workspace does not hold. Asked
//! which file of `src/` defines a function, the default model answered
//! from the function's name ("`merge_customer.py`") without a look in 5 to
//! 6 of 20 simulated files tasks. Such an answer is told, once a turn, that
//! no such file exists and which files of its kind do; the session's next
//! reply must then call a tool that looks before the model answers again.

use reverie_tools::Workspace;

/// Endings of the names read as files. A word such as `e.g.` or `3.5` is
/// not a file; neither is a name with an ending outside this list.
const FILE_ENDINGS: &[&str] = &[
    "py", "rs", "js", "ts", "tsx", "jsx", "txt", "md", "csv", "tsv", "json", "log", "toml", "yaml",
    "yml", "ini", "cfg", "c", "h", "cc", "cpp", "hpp", "go", "java", "rb", "sh", "html", "css",
    "sql", "xml",
];

/// The names in `reply` that look like file paths (`src/a.py`, `notes.txt`),
/// in order, each once.
pub fn named_paths(reply: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let separators = |c: char| c.is_whitespace() || "`'\"()[]<>,;*".contains(c);
    for word in reply.split(separators) {
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if word.contains("://") || word.starts_with('-') {
            continue;
        }
        let Some((stem, ending)) = word.rsplit_once('.') else {
            continue;
        };
        let stem_name = stem.rsplit('/').next().unwrap_or(stem);
        let plain = |c: char| c.is_alphanumeric() || "_-./".contains(c);
        if !stem_name.is_empty()
            && stem_name.chars().any(char::is_alphabetic)
            && word.chars().all(plain)
            && FILE_ENDINGS.contains(&ending.to_ascii_lowercase().as_str())
            && !out.iter().any(|w| w == word)
        {
            out.push(word.to_string());
        }
    }
    out
}

/// The files `reply` names that are nowhere in `workspace` (neither at
/// that path nor by that name in another folder) and that `request`, the
/// person's message, does not name itself (asked about a file that is not
/// there, an answer may well name it).
pub fn missing_files(workspace: &Workspace, request: &str, reply: &str) -> Vec<String> {
    let asked = named_paths(request);
    named_paths(reply)
        .into_iter()
        .filter(|name| !asked.iter().any(|a| a == name))
        .filter(|name| {
            let here = workspace.resolve(name).is_ok_and(|p| p.exists());
            !here && workspace.same_names(name).is_empty()
        })
        .collect()
}

/// How many files of the kind named the notice shows.
const SHOWN: usize = 8;

/// The notice for an answer that named `missing` files, with the files of
/// the first one's kind that `workspace` does hold. Told only that the
/// file was not there, the default model gave the same answer again.
pub fn notice(workspace: &Workspace, missing: &[String]) -> String {
    let (names, verb) = listed(missing);
    let mut text =
        format!("{names} {verb} not in the workspace: no file of that name exists there.");
    let ending = missing
        .first()
        .and_then(|m| m.rsplit_once('.'))
        .map(|(_, e)| e);
    if let Some(ending) = ending {
        let there = workspace.files_ending(ending, SHOWN);
        if !there.is_empty() {
            text.push_str(&format!(
                " The .{ending} files there: {}.",
                listed(&there).0
            ));
        }
    }
    text.push_str(" Look inside them (grep searches them all) before you answer again.");
    text
}

/// `names` in backticks, joined as words, and the verb that agrees.
fn listed(names: &[String]) -> (String, &'static str) {
    let names: Vec<String> = names.iter().map(|m| format!("`{m}`")).collect();
    match names.as_slice() {
        [one] => (one.clone(), "is"),
        [rest @ .., last] => (format!("{} and {last}", rest.join(", ")), "are"),
        [] => (String::new(), "is"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_look_like_files_are_read_from_a_reply() {
        assert_eq!(
            named_paths("It is defined in `src/billing.py`. See also notes.txt, e.g. 3.5 times."),
            ["src/billing.py", "notes.txt"]
        );
        assert_eq!(
            named_paths("The file is **report.csv**: it has (data.json)."),
            ["report.csv", "data.json"]
        );
        assert!(named_paths("Visit https://example.com/a.html or run x.y.z").is_empty());
        assert!(named_paths("The total is 42.5. Done.").is_empty());
        assert_eq!(named_paths("a.py and a.py again"), ["a.py"]);
    }

    #[test]
    fn only_files_nowhere_in_the_workspace_and_not_asked_about_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/billing.py"), "def f(): pass\n").unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        let request = "Which file in src defines `f`? Is there an old.py?";
        let reply = "`src/billing.py` (also billing.py); old.py is gone; see f.py.";
        assert_eq!(missing_files(&ws, request, reply), ["f.py"]);
        std::fs::write(dir.path().join("setup.py"), "\n").unwrap();
        assert_eq!(
            notice(&ws, &["f.py".into()]),
            "`f.py` is not in the workspace: no file of that name exists there. The .py files there: `setup.py` and `src/billing.py`. Look inside them (grep searches them all) before you answer again."
        );
        let two = notice(&ws, &["a.txt".into(), "b.py".into()]);
        assert!(two.starts_with("`a.txt` and `b.py` are not"), "{two}");
        assert!(!two.contains("files there"), "no .txt file: {two}");
    }
}
