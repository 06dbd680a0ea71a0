//! The simulator's checks of a reply: the practice checks, numbers, names,
//! saved notes, and files read back after an edit.

use std::path::Path;

use reverie_store::Store;

use super::family::Hidden;
use crate::check::{check as practice_check, last_number, Verdict};

/// Whether `reply` (and what the turn left in `workspace` and the notes,
/// counting notes after `notes_before`) does what `hidden` asks.
pub fn verdict(
    hidden: &Hidden,
    reply: &str,
    workspace: &Path,
    store: &Store,
    notes_before: i64,
) -> Verdict {
    let v = |passed, why: String| Verdict { passed, why };
    match hidden {
        Hidden::Practice(task) => practice_check(task, reply, workspace),
        Hidden::Number(n) => match last_number(reply) {
            Some(x) if (x - *n as f64).abs() < 1e-6 => v(true, format!("answered {n}")),
            Some(x) => v(false, format!("answered {x}, expected {n}")),
            None => v(false, format!("no number in the answer; expected {n}")),
        },
        Hidden::Mentions(what) => {
            let found = reply.to_lowercase().contains(&what.to_lowercase());
            v(
                found,
                if found {
                    format!("named {what}")
                } else {
                    format!("did not name {what}")
                },
            )
        }
        Hidden::NoteSaved(what) => {
            let notes = store.notes().unwrap_or_default();
            let saved = notes.iter().any(|n| {
                n.id > notes_before
                    && (n.title.contains(what.as_str()) || n.body.contains(what.as_str()))
            });
            v(
                saved,
                if saved {
                    format!("a note holds {what}")
                } else {
                    format!("no new note holds {what}")
                },
            )
        }
        Hidden::Settings { path, lines } => match std::fs::read_to_string(workspace.join(path)) {
            Err(e) => v(false, format!("{path} could not be read: {e}")),
            Ok(text) => {
                let got: Vec<String> = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| match l.split_once('=') {
                        Some((k, val)) => format!("{} = {}", k.trim(), val.trim()),
                        None => l.trim().to_string(),
                    })
                    .collect();
                match got.iter().zip(lines).find(|(g, w)| g != w) {
                    Some((g, w)) => v(false, format!("{path} has `{g}` where `{w}` was wanted")),
                    None if got.len() != lines.len() => v(
                        false,
                        format!("{path} has {} settings, not {}", got.len(), lines.len()),
                    ),
                    None => v(true, format!("{path} holds the asked settings")),
                }
            }
        },
        Hidden::Text { path, text } => match std::fs::read_to_string(workspace.join(path)) {
            Err(e) => v(false, format!("{path} could not be read: {e}")),
            Ok(got) if got.trim_end() == text.trim_end() => {
                v(true, format!("{path} reads as asked"))
            }
            Ok(got) => {
                let line = got
                    .lines()
                    .zip(text.lines())
                    .position(|(g, w)| g.trim_end() != w.trim_end())
                    .unwrap_or(got.lines().count().min(text.lines().count()));
                v(
                    false,
                    format!("{path} differs from what was asked at line {}", line + 1),
                )
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::days::{DayFamily, DayTask};
    use reverie_core::Home;

    fn setup() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path().join("home"))).unwrap();
        (dir, store)
    }

    /// Writes a task's files into `ws`.
    fn put(ws: &Path, t: &DayTask) {
        for (path, text) in &t.files {
            std::fs::create_dir_all(ws.join(path).parent().unwrap()).unwrap();
            std::fs::write(ws.join(path), text).unwrap();
        }
    }

    #[test]
    fn tasks_repeat_for_a_seed_and_vary_across_seeds() {
        for f in DayFamily::ALL {
            assert_eq!(f.task(9, 2), f.task(9, 2));
            let distinct: std::collections::HashSet<String> = (0..30)
                .map(|s| format!("{:?}", f.task(s, 2).steps))
                .collect();
            assert!(distinct.len() >= 20, "{f:?}: {}", distinct.len());
            assert_eq!(DayFamily::parse(f.as_str()), Ok(f));
        }
        assert!(DayFamily::parse("poetry").unwrap_err().contains("files"));
    }

    #[test]
    fn the_files_answers_are_what_the_files_say() {
        let (dir, store) = setup();
        for seed in 0..40 {
            let ws = dir.path().join(format!("ws{seed}"));
            let t = DayFamily::Files.task(seed, 3);
            put(&ws, &t);
            let step = &t.steps[0];
            let right = match &step.hidden {
                Hidden::Number(_) if step.request.contains("logs/app.log") => {
                    let level = step.request.split("level ").nth(1).unwrap();
                    let level = level.split('.').next().unwrap();
                    let log = std::fs::read_to_string(ws.join("logs/app.log")).unwrap();
                    let n = log
                        .lines()
                        .filter(|l| l.contains(&format!(" {level} ")))
                        .count();
                    format!("There are {n} such lines.")
                }
                Hidden::Number(_) => {
                    let csv = std::fs::read_to_string(ws.join("data/sales.csv")).unwrap();
                    let total: i64 = csv
                        .lines()
                        .skip(1)
                        .map(|l| l.rsplit(',').next().unwrap().parse::<i64>().unwrap())
                        .sum();
                    format!("The total is {total}.")
                }
                Hidden::Mentions(_) => {
                    let function = step.request.split('`').nth(1).unwrap();
                    let src = std::fs::read_dir(ws.join("src")).unwrap();
                    let file = src
                        .map(|e| e.unwrap().path())
                        .find(|p| {
                            std::fs::read_to_string(p)
                                .unwrap()
                                .contains(&format!("def {function}("))
                        })
                        .unwrap();
                    format!("It is in {}.", file.file_name().unwrap().to_string_lossy())
                }
                other => panic!("{other:?}"),
            };
            let v = verdict(&step.hidden, &right, &ws, &store, 0);
            assert!(v.passed, "{v:?}: {right} for {}", step.request);
            assert!(!verdict(&step.hidden, "I could not tell.", &ws, &store, 0).passed);
        }
    }

    #[test]
    fn a_note_must_be_saved_during_the_turn_and_recalled_by_value() {
        let (dir, store) = setup();
        let t = DayFamily::Notes.task(4, 3);
        let [save, recall] = &t.steps[..] else {
            panic!("{:?}", t.steps)
        };
        assert!(recall.later && !save.later);
        let Hidden::Mentions(value) = &recall.hidden else {
            panic!()
        };
        assert!(save.request.contains(value.as_str()));
        let old = store.add_note("", &format!("old: {value}")).unwrap();
        assert!(
            !verdict(&save.hidden, "Saved.", dir.path(), &store, old).passed,
            "a note from before the turn does not count"
        );
        store.add_note("", &format!("Code: {value}")).unwrap();
        assert!(verdict(&save.hidden, "Saved.", dir.path(), &store, old).passed);
        let answer = format!("It was {}.", value.to_uppercase());
        assert!(verdict(&recall.hidden, &answer, dir.path(), &store, 0).passed);
        assert!(!verdict(&recall.hidden, "I don't know.", dir.path(), &store, 0).passed);
    }

    #[test]
    fn an_edit_is_read_back_from_the_file() {
        let (dir, store) = setup();
        let (mut settings, mut text) = (0, 0);
        for seed in 0..20 {
            let ws = dir.path().join(format!("ws{seed}"));
            let t = DayFamily::Edit.task(seed, 2);
            put(&ws, &t);
            let hidden = &t.steps[0].hidden;
            let (path, wanted) = match hidden {
                Hidden::Settings { path, lines } => {
                    settings += 1;
                    // Spacing around `=` does not matter.
                    let body: String = lines.iter().map(|l| l.replace(" = ", "=") + "\n").collect();
                    (path, body)
                }
                Hidden::Text { path, text: t } => {
                    text += 1;
                    (path, t.clone())
                }
                other => panic!("{other:?}"),
            };
            let v = verdict(hidden, "Done.", &ws, &store, 0);
            assert!(!v.passed, "untouched file passed: {v:?}");
            std::fs::write(ws.join(path), &wanted).unwrap();
            let v = verdict(hidden, "Done.", &ws, &store, 0);
            assert!(v.passed, "{v:?}");
            std::fs::write(ws.join(path), format!("{wanted}extra = 1\n")).unwrap();
            assert!(!verdict(hidden, "Done.", &ws, &store, 0).passed);
            std::fs::remove_file(ws.join(path)).unwrap();
            let v = verdict(hidden, "Done.", &ws, &store, 0);
            assert!(v.why.contains("could not be read"), "{v:?}");
        }
        assert!(settings > 0 && text > 0, "both kinds of edit are asked");
    }
}
