//! Failures a program can prove, so the judge is not asked about them. A
//! small judge says "right" to a request to change a file that no tool
//! changed, to an answer that is a tool's error message, or to a file name
//! that exists nowhere; the record shows each of these for certain. A
//! sub-task with such a failure gets a reward of 0 and the reason, and the
//! judge's time goes to the rest.
//!
//! The person's own next message counts the same way: "that doesn't look
//! right, check it again" says the answer failed as plainly as a 👎.
//!
//! Some successes are as certain: the person asks back a code they gave
//! earlier in the channel and the answer gives it, a note asked for is
//! saved with its code, the one file that defines a function is named, a
//! figure asked for at the end of the answer ("End your answer with the
//! number") is the one it ends with. A follow-up that only doubts the
//! answer ("Are you sure?") is held to what the message before it asked.
//!
//! Every rule errs towards silence: a rule that cannot tell leaves the
//! sub-task to the judge.

use reverie_tools::calculator::format_number;

use crate::figure::{expected, gives, wanted_last};
use crate::file_facts::{asked, names, Fact};
use crate::grounding::{file_names, quotes};

/// What the record shows of one sub-task.
pub struct Record<'a> {
    /// The person's request, in full.
    pub request: &'a str,
    /// The assistant's final answer.
    pub answer: &'a str,
    /// Files that changed between the request and the answer, with their
    /// text at the answer (or why it cannot be shown).
    pub changed: &'a [(String, String)],
    /// Notes saved between the request and the answer (title and body).
    pub notes_added: &'a [String],
    /// The workspace's files when the answer was written; `None` where the
    /// channel has no workspace to look at.
    pub files: Option<&'a [String]>,
    /// What the assistant read before answering: the span's tool results
    /// and the person's earlier messages.
    pub read: &'a [&'a str],
    /// The person's messages of the channel before the request, oldest
    /// first.
    pub said_before: &'a [&'a str],
    /// The person's next message after the answer, if any.
    pub next: Option<&'a str>,
    /// A workspace file's text when the answer was written, or `None`
    /// where it cannot be told.
    pub read_file: &'a dyn Fn(&str) -> Option<String>,
}

/// What a request asks to be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    File,
    Notes,
}

/// What the record proves of one sub-task: one line per failure, or where
/// there is none, one line per success; each starts `[verified]`.
pub enum Proven {
    Failed(Vec<String>),
    Done(Vec<String>),
    Nothing,
}

/// What the record proves of `r`. The facts both sides need (a code
/// asked back, what the files say) are worked out once.
pub fn prove(r: &Record) -> Proven {
    let recalled = recalled(r.request, r.said_before);
    let question = question(r);
    let fact = r
        .files
        .and_then(|files| asked(question, files, r.read_file));
    let failed = failures(r, question, recalled.as_ref(), fact.as_ref());
    if !failed.is_empty() {
        return Proven::Failed(failed);
    }
    let done = successes(r, question, recalled.as_ref(), fact.as_ref());
    if done.is_empty() {
        Proven::Nothing
    } else {
        Proven::Done(done)
    }
}

/// What the figure of `r` is asked by: its request, or where the request
/// only doubts the answer before it ("Are you sure? Check it again."), the
/// person's message that answer was for.
fn question<'a>(r: &Record<'a>) -> &'a str {
    let own = expected(r.request).is_some() || !file_names(r.request).is_empty();
    match r.said_before.last() {
        Some(before) if !own && doubt(r.request).is_some() => before,
        _ => r.request,
    }
}

/// How the answer misses `value`, where it does: the number it ends with
/// where `question` asks for the figure last, any figure otherwise.
fn misses(question: &str, answer: &str, value: f64) -> Option<&'static str> {
    match gives(question, answer, value) {
        Some(false) if wanted_last(question) => {
            Some("the number the final answer ends with is another")
        }
        Some(false) => Some("the final answer gives no such figure"),
        _ => None,
    }
}

/// The failures `r` proves, given what its figure is asked by, the code it
/// asks back and the fact of the files it asks for.
fn failures(
    r: &Record,
    question: &str,
    recalled: Option<&(String, String)>,
    fact: Option<&Fact>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = error_answer(r.answer) {
        out.push(format!(
            "[verified] the final answer is an error message, not an answer: \"{e}\""
        ));
    }
    match wanted_change(r.request) {
        Some(Target::File) if r.changed.is_empty() => out.push(
            "[verified] the request asks to change a file, and no file of the workspace changed \
             before the answer"
                .to_string(),
        ),
        Some(Target::Notes) if r.notes_added.is_empty() && r.changed.is_empty() => out.push(
            "[verified] the request asks to save something in the notes, and no note was saved \
             before the answer"
                .to_string(),
        ),
        Some(Target::Notes) => {
            if let Some(code) = codes(r.request).into_iter().find(|c| !kept(r, c)) {
                out.push(format!(
                    "[verified] the request asks to save {code} in the notes, and nothing saved \
                     before the answer holds it"
                ));
            }
        }
        Some(Target::File) => {
            if let Some((what, value)) = set_to(r.request) {
                let holds = |text: &str| text.to_lowercase().contains(&value.to_lowercase());
                if !r.changed.iter().any(|(_, text)| holds(text)) {
                    out.push(format!(
                        "[verified] the request asks to set {what} to {value}, and no file \
                         changed for it holds {value}"
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(form) = missing_form(r.request, r.answer) {
        out.push(format!(
            "[verified] the request asks for {form}, and the final answer has none"
        ));
    }
    if let Some((value, how)) = expected(question) {
        if let Some(miss) = misses(question, r.answer, value) {
            out.push(format!(
                "[verified] the request works out to {} ({how}), and {miss}",
                format_number(value)
            ));
        }
    }
    if let Some((what, code)) = recalled {
        if !r.answer.to_lowercase().contains(code) {
            out.push(format!(
                "[verified] the person said earlier that {what} is {code}, and the final answer \
                 does not give it"
            ));
        }
    }
    if let Some(example) = copied_example(r.request, r.answer) {
        out.push(format!(
            "[verified] the final answer gives the request's own example \"{example}\" instead \
             of a result"
        ));
    }
    if let Some(said) = r.next.and_then(doubt) {
        out.push(format!(
            "[verified] the person's next message says the answer is wrong: \"{said}\""
        ));
    }
    if let Some(files) = r.files.filter(|_| about_files(r.request)) {
        for name in made_up_files(r, files) {
            out.push(format!(
                "[verified] the final answer names {name}, which is not in the workspace and \
                 which nothing the assistant read shows"
            ));
        }
    }
    match fact {
        Some(Fact::Figure(value, how)) => {
            if let Some(miss) = misses(question, r.answer, *value) {
                out.push(format!(
                    "[verified] {how} when the answer was written, and {miss}"
                ))
            }
        }
        Some(Fact::Defines { function, file }) if !names(r.answer, file) => out.push(format!(
            "[verified] only {file} defines `{function}`, and the final answer does not name it"
        )),
        _ => {}
    }
    out
}

/// One line per success the record proves, each starting `[verified]`:
/// the person asks back something they said earlier in the channel and
/// the answer gives it; the answer names the one file that defines the
/// function asked about, and no other; a note asked for was saved with
/// every code the request gave; the figure asked for last (a sum, steps,
/// a count of the files) is the number the answer ends with. Read only
/// where `failures` finds none.
fn successes(
    r: &Record,
    question: &str,
    recalled: Option<&(String, String)>,
    fact: Option<&Fact>,
) -> Vec<String> {
    let recalled = recalled
        .filter(|(_, code)| r.answer.to_lowercase().contains(code))
        .map(|(what, code)| {
            format!(
                "[verified] the person said earlier that {what} is {code}, and the final answer \
                 gives it"
            )
        });
    let named = match fact {
        Some(Fact::Defines { function, file }) => {
            let last = file.rsplit('/').next().unwrap_or(file).to_lowercase();
            let given = file_names(r.answer);
            let only_it = !given.is_empty()
                && given
                    .iter()
                    .all(|g| *g == last || *g == file.to_lowercase());
            only_it.then(|| {
                format!(
                    "[verified] only {file} defines `{function}`, and the final answer names it \
                     and no other file"
                )
            })
        }
        _ => None,
    };
    // A note asked for, saved with every code the request gave.
    let saved = (wanted_change(r.request) == Some(Target::Notes))
        .then(|| codes(r.request))
        .filter(|codes| !codes.is_empty())
        .filter(|codes| codes.iter().all(|code| kept(r, code)))
        .map(|codes| {
            format!(
                "[verified] the request asks to save {} in the notes, and a note saved before \
                 the answer holds it",
                codes.join(", ")
            )
        });
    let worked_out = expected(question).or_else(|| match fact {
        Some(Fact::Figure(value, how)) => Some((*value, format!("{how} at the answer"))),
        _ => None,
    });
    let ends_with = worked_out
        .filter(|(value, _)| {
            wanted_last(question) && gives(question, r.answer, *value) == Some(true)
        })
        .map(|(value, how)| {
            format!(
                "[verified] the request works out to {} ({how}), and the final answer ends \
                 with it",
                format_number(value)
            )
        });
    recalled
        .into_iter()
        .chain(named)
        .chain(saved)
        .chain(ends_with)
        .collect()
}

/// Whether a note or file saved before the answer holds `code`.
fn kept(r: &Record, code: &str) -> bool {
    let saved = r.notes_added.iter().chain(r.changed.iter().map(|(_, t)| t));
    saved.map(|t| t.to_lowercase()).any(|t| t.contains(code))
}

/// Words too common to tell one thing the person named from another.
const FILLER: [&str; 16] = [
    "the", "our", "your", "my", "for", "and", "that", "this", "with", "from", "was", "are", "what",
    "which", "you", "its",
];

/// The words of `text` that name things: lowercase, three letters or more,
/// no filler, a plural's or possessive's `s` dropped.
fn naming_words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3 && !FILLER.contains(w))
        .map(|w| {
            w.strip_suffix('s')
                .filter(|s| s.len() >= 3)
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

/// What `request` asks back of the person's earlier words, and the code
/// they gave for it: "What was the colour we picked for the hallway?"
/// after "… the colour we picked for the hallway is granite-5158". The
/// latest such statement counts; a request that holds a code itself asks
/// nothing back.
fn recalled(request: &str, said_before: &[&str]) -> Option<(String, String)> {
    let lower = request.to_lowercase();
    let asks = ["what", "which", "remind me", "tell me"]
        .iter()
        .any(|w| lower.contains(w));
    if !lower.contains('?') || !asks || !codes(request).is_empty() {
        return None;
    }
    let asked = naming_words(request);
    said_before.iter().rev().find_map(|said| {
        let clauses: Vec<&str> = said.split(['.', ';', ':', '\n', '!', '?']).collect();
        clauses.into_iter().rev().find_map(|clause| {
            let low = clause.to_lowercase();
            codes(clause).into_iter().rev().find_map(|code| {
                let before = low[..low.find(&code)?].trim_end();
                let subject = [" is", " are", " was", " ="]
                    .iter()
                    .find_map(|v| before.strip_suffix(v))?;
                // "Sorry, the colour … is": the thing named after a comma.
                let subject = subject.rsplit(',').next().unwrap_or(subject).trim();
                let named = naming_words(subject);
                let all_asked = !named.is_empty() && named.iter().all(|w| asked.contains(w));
                all_asked.then(|| (subject.to_string(), code))
            })
        })
    })
}

/// Ways a person says the answer they just got is wrong.
const DOUBTS: [&str; 20] = [
    "not right",
    "isn't right",
    "doesn't look right",
    "does not look right",
    "doesn't seem right",
    "that's wrong",
    "that is wrong",
    "this is wrong",
    "wrong answer",
    "that's incorrect",
    "that is incorrect",
    "are you sure",
    "double-check",
    "double check",
    "check it again",
    "look again",
    "try again",
    "that's not it",
    "i don't think that's",
    "not what i asked",
];

/// The first sentence of `next` where it doubts the answer before it (a
/// doubt later in a message belongs to a new request: "my sum is wrong").
fn doubt(next: &str) -> Option<String> {
    let t = next.trim().replace('’', "'");
    let end = t.find(['.', '?', '!', '\n']).map_or(t.len(), |k| k + 1);
    let first = &t[..end];
    let lower = first.to_lowercase();
    DOUBTS
        .iter()
        .any(|d| lower.contains(d))
        .then(|| crate::verdict::cut(first, 120))
}

/// The first line of `answer` where the whole answer is a tool's or the
/// harness's error message ("error: …").
fn error_answer(answer: &str) -> Option<String> {
    let t = answer.trim_start();
    let head = t.get(..6)?.to_ascii_lowercase();
    (head == "error:").then(|| crate::verdict::cut(t.lines().next().unwrap_or(t), 120))
}

/// Verbs that ask for a change to something kept, in the form a request
/// uses them.
const CHANGE_VERBS: [&str; 14] = [
    "change", "edit", "update", "modify", "replace", "rename", "delete", "create", "write", "save",
    "append", "record", "insert", "fix",
];
/// Verbs that ask for a note to be kept.
const NOTE_VERBS: [&str; 6] = ["save", "keep", "store", "write", "add", "make"];
/// Words that turn a request into a question about the past ("did you save
/// it?"), which asks for no change now.
const ABOUT_THE_PAST: [&str; 4] = ["did you", "have you", "earlier", "already"];

/// What `request` asks to be changed: the notes ("save this in your
/// notes"), a file (a change verb and a file named or spoken of), or
/// nothing.
fn wanted_change(request: &str) -> Option<Target> {
    let lower = request.to_lowercase();
    if ABOUT_THE_PAST.iter().any(|w| lower.contains(w)) {
        return None;
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |set: &[&str]| words.iter().any(|w| set.contains(w));
    let notes = words.iter().any(|w| *w == "notes" || *w == "note");
    if notes && has(&NOTE_VERBS) {
        return Some(Target::Notes);
    }
    // "keep a ledger in the file ledger.csv" asks for a file as surely as
    // "write".
    let keep_in_file = lower.contains("keep") && lower.contains("in the file");
    let file = !file_names(request).is_empty()
        || words
            .iter()
            .any(|w| matches!(*w, "file" | "files" | "folder"));
    (file && (has(&CHANGE_VERBS) || keep_in_file)).then_some(Target::File)
}

/// The codes of `text` (lowercase): words of letters and digits together
/// ("granite-5158", "a12b"), which a note keeps as they were given.
fn codes(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')) {
        let w = w.trim_matches(['-', '_']).to_lowercase();
        let mixed = w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(char::is_alphabetic);
        if mixed && w.chars().count() >= 3 && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The setting and the value of "change/set/update X to Y" in `request`,
/// where Y is one word or a quoted text.
fn set_to(request: &str) -> Option<(String, String)> {
    let lower = request.to_lowercase();
    let verb = ["change ", "set ", "update "]
        .iter()
        .filter_map(|v| lower.find(v).map(|k| k + v.len()))
        .min()?;
    let rest = &request[verb..];
    let to = rest.find(" to ")?;
    let what = rest[..to].trim();
    if what.is_empty() || what.split_whitespace().count() > 4 {
        return None;
    }
    let after = rest[to + 4..].trim_start();
    let value = after
        .split_whitespace()
        .next()?
        .trim_end_matches(['.', ',', ';', '!', '?', ':'])
        .trim_matches(['`', '"', '\'']);
    (!value.is_empty()).then(|| (what.to_string(), value.to_string()))
}

/// The request's example ("like `this`", "e.g. 'x'", "such as …",
/// "for example …") where the answer gives it as its result.
fn copied_example(request: &str, answer: &str) -> Option<String> {
    let lower = request.to_lowercase();
    let examples: Vec<String> = quotes(request)
        .into_iter()
        .filter(|q| {
            ["like ", "e.g. ", "such as ", "for example "]
                .iter()
                .any(|lead| {
                    [format!("{lead}`"), format!("{lead}\""), format!("{lead}'")]
                        .iter()
                        .any(|l| lower.contains(&format!("{l}{}", q.to_lowercase())))
                })
        })
        .collect();
    let mut given: Vec<String> = quotes(answer);
    given.extend(backticked(answer));
    let bare = answer
        .trim()
        .trim_end_matches('.')
        .trim_matches(['`', '"', '\''])
        .trim();
    examples
        .into_iter()
        .find(|e| given.iter().any(|g| g == e) || bare == e)
}

/// The form `request` asks the answer to take that `answer` lacks
/// altogether: a number ("end your answer with the number") or a text
/// between backticks. Only its absence is proven; where in the answer it
/// stands is the judge's to weigh.
fn missing_form(request: &str, answer: &str) -> Option<&'static str> {
    let lower = request.to_lowercase();
    let number = [
        "with the number",
        "with a number",
        "with the total",
        "just the number",
    ]
    .iter()
    .any(|p| lower.contains(p));
    let has_number = answer
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-'))
        .any(|w| w.chars().any(|c| c.is_ascii_digit()));
    if number && !has_number {
        return Some("a number");
    }
    let backticks = lower.contains("between backticks") || lower.contains("in backticks");
    (backticks && backticked(answer).is_empty()).then_some("a text between backticks")
}

/// The non-empty texts `answer` puts between backticks: inline ones and
/// the contents of fenced blocks, trimmed.
fn backticked(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in answer.lines() {
        if line.trim_start().starts_with("```") {
            match fence.take() {
                Some(block) => out.push(block),
                None => fence = Some(String::new()),
            }
            continue;
        }
        match &mut fence {
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => out.extend(line.split('`').skip(1).step_by(2).map(str::to_string)),
        }
    }
    out.extend(fence);
    out.iter()
        .map(|t| t.trim().trim_matches('`').trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Whether `request` speaks of the workspace's files.
fn about_files(request: &str) -> bool {
    let lower = request.to_lowercase();
    !file_names(request).is_empty()
        || ["file", "folder", "workspace", "directory"]
            .iter()
            .any(|w| lower.contains(w))
}

/// File names of the answer that the request does not hold, that nothing
/// read shows, and that no file of the workspace has (as its path or its
/// last part).
fn made_up_files(r: &Record, files: &[String]) -> Vec<String> {
    let asked = file_names(r.request);
    let read: Vec<String> = r.read.iter().map(|t| t.to_lowercase()).collect();
    let exists = |name: &str| {
        files.iter().any(|f| {
            let f = f.to_lowercase();
            f == name || f.ends_with(&format!("/{name}")) || name.ends_with(&format!("/{f}"))
        })
    };
    file_names(r.answer)
        .into_iter()
        .filter(|n| !asked.contains(n) && !exists(n) && !read.iter().any(|t| t.contains(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failures `r` proves.
    fn failures(r: &Record) -> Vec<String> {
        match prove(r) {
            Proven::Failed(lines) => lines,
            _ => Vec::new(),
        }
    }

    /// The successes `r` proves (none where it proves a failure).
    fn successes(r: &Record) -> Vec<String> {
        match prove(r) {
            Proven::Done(lines) => lines,
            _ => Vec::new(),
        }
    }

    fn record<'a>(request: &'a str, answer: &'a str) -> Record<'a> {
        Record {
            request,
            answer,
            changed: &[],
            notes_added: &[],
            files: None,
            read: &[],
            said_before: &[],
            next: None,
            read_file: &|_| None,
        }
    }

    #[test]
    fn a_change_asked_of_a_file_that_no_tool_made_is_a_failure() {
        let r = record(
            "Open config/app.ini in my workspace and change `port` to 9091.",
            "Done, the port is 9091.",
        );
        assert_eq!(
            failures(&r),
            vec![
                "[verified] the request asks to change a file, and no file of the workspace \
                 changed before the answer"
            ]
        );
        let changed = [("config/app.ini".to_string(), "port = 9091\n".to_string())];
        assert!(failures(&Record {
            changed: &changed,
            ..r
        })
        .is_empty());
        let wrong = [("config/app.ini".to_string(), "port = 5432\n".to_string())];
        assert_eq!(
            failures(&Record {
                changed: &wrong,
                ..r
            }),
            vec![
                "[verified] the request asks to set `port` to 9091, and no file changed for it \
                 holds 9091"
            ]
        );
        let ledger = record(
            "Keep a ledger in the file ledger.csv with one row per transaction: alice -3.",
            "alice's balance is -3",
        );
        assert_eq!(failures(&ledger).len(), 1);
    }

    #[test]
    fn reading_and_summing_ask_for_no_change() {
        for request in [
            "Please read data/sales.csv in my workspace and add up the amount column.",
            "Look through the Python files in src: which file defines `count`?",
            "Take the text \"harbor\" and replace the vowels with dots.",
            "Did you save the ledger file earlier?",
            "What was the colour we picked? I asked you to note it earlier.",
        ] {
            assert_eq!(wanted_change(request), None, "{request}");
        }
    }

    #[test]
    fn a_note_asked_for_is_a_note_saved_or_a_file_written() {
        let r = record(
            "Please save this in your notes: the hallway is granite-5158.",
            "Saved.",
        );
        assert_eq!(failures(&r).len(), 1, "{:?}", failures(&r));
        let note = ["hallway\nGranite-5158".to_string()];
        let saved = Record {
            notes_added: &note,
            ..r
        };
        assert!(failures(&saved).is_empty());
        assert_eq!(
            successes(&saved),
            vec![
                "[verified] the request asks to save granite-5158 in the notes, and a note saved \
                 before the answer holds it"
            ]
        );
        let without = ["hallway\ngranite".to_string()];
        assert_eq!(
            failures(&Record {
                notes_added: &without,
                ..r
            }),
            vec![
                "[verified] the request asks to save granite-5158 in the notes, and nothing \
                 saved before the answer holds it"
            ]
        );
        assert_eq!(
            codes("Room B12 at 10:30, code x-9; see 2026-12-05 or 42"),
            vec!["b12", "x-9"]
        );
        let file = [("notes.md".to_string(), "granite-5158".to_string())];
        assert!(failures(&Record {
            changed: &file,
            ..r
        })
        .is_empty());
    }

    #[test]
    fn an_error_message_as_the_answer_is_a_failure_and_a_word_about_one_is_not() {
        let r = record("What is 9 / 3 + 14?", "error: division by zero\nmore");
        assert_eq!(
            failures(&r),
            vec!["[verified] the final answer is an error message, not an answer: \"error: division by zero\""]
        );
        assert!(failures(&record("Why did it fail?", "The error was a typo.")).is_empty());
    }

    #[test]
    fn the_persons_doubt_in_the_next_message_is_a_failure() {
        let r = record("What is 13 * 7 + 12?", "103");
        for next in [
            "That doesn't look right to me. Could you check it again?",
            "Hmm, are you sure? Please double-check.",
            "I don’t think that’s it. Can you look again?",
        ] {
            let got = failures(&Record {
                next: Some(next),
                ..r
            });
            assert_eq!(got.len(), 1, "{next}");
            assert!(
                got[0].starts_with("[verified] the person's next message says the answer is wrong")
            );
        }
        for next in [
            "Thanks. Next thing: my sum is wrong, can you fix it?",
            "Great, thank you. Another one: what is 2 + 2?",
        ] {
            assert!(
                failures(&Record {
                    next: Some(next),
                    ..r
                })
                .is_empty(),
                "{next}"
            );
        }
    }

    #[test]
    fn an_answer_without_the_form_asked_for_is_a_failure() {
        let number = "How many grams are 3 kg and 298 g? End your answer with the number.";
        assert_eq!(
            failures(&record(number, "Three thousand and some.")),
            vec!["[verified] the request asks for a number, and the final answer has none"]
        );
        assert!(failures(&record(number, "It is 3298 grams.")).is_empty());
        let text = "Reverse \"stone\". Reply with the final text between backticks.";
        for answer in ["enots", "```json\n```\nenots"] {
            assert_eq!(
                failures(&record(text, answer)),
                vec![
                    "[verified] the request asks for a text between backticks, and the final \
                      answer has none"
                ],
                "{answer}"
            );
        }
        for answer in ["It is `enots`.", "```\nenots\n```", "```json\n`enots`\n```"] {
            assert!(failures(&record(text, answer)).is_empty(), "{answer}");
        }
        assert!(
            failures(&record("What is 2 + 2?", "Four.")).is_empty(),
            "no form asked"
        );
    }

    #[test]
    fn an_answer_without_the_figure_the_request_works_out_to_is_a_failure() {
        let steps = "Start with 20, then subtract 24 and multiply by 9. What is the result?";
        assert_eq!(
            failures(&record(steps, "20 - 24 * 9 = -196")),
            vec![
                "[verified] the request works out to -36 (step by step: 20 - 24 = -4 * 9 = -36), \
                 and the final answer gives no such figure"
            ]
        );
        assert!(failures(&record(steps, "It is −36.")).is_empty());
        let units = "How many metres are 8 km and 850 m? End your answer with the number.";
        assert_eq!(failures(&record(units, "The answer is 16000.")).len(), 1);
        assert!(failures(&record(units, "8 km and 850 m make 8,850 m.")).is_empty());
        // A figure in words is the judge's to read.
        assert!(failures(&record("What is 17 * 23?", "Three hundred ninety-one.")).is_empty());
    }

    #[test]
    fn a_figure_asked_for_last_is_held_to_the_number_the_answer_ends_with() {
        let steps = "Start with 26, then multiply by 3, multiply by 12 and divide by 6. What is \
                     the result? End your answer with the number.";
        // The right figure on the way, another one last: failed.
        assert_eq!(
            failures(&record(
                steps,
                "26 * 3 = 78, and 78 * 12 / 6 = 156; so 1,560"
            )),
            vec![
                "[verified] the request works out to 156 (step by step: 26 * 3 = 78 * 12 = 936 \
                 / 6 = 156), and the number the final answer ends with is another"
            ]
        );
        // Ending with it, whatever was quoted before: done.
        let done = successes(&record(steps, "data/sales.csv: 2| 26 * 3 * 12 / 6 = 156"));
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(
            done[0].ends_with("and the final answer ends with it"),
            "{done:?}"
        );
        // Not asked for last: a figure on the way proves nothing either way.
        let plain = "Start with 26, then multiply by 3, multiply by 12 and divide by 6.";
        assert!(prove_nothing(&record(plain, "78, then 156, then 1,560")));

        // A follow-up that only doubts the answer is held to the request
        // before it; one with a request of its own, to its own.
        let before = [steps];
        let again = |request, answer| Record {
            said_before: &before,
            ..record(request, answer)
        };
        assert_eq!(
            failures(&again(
                "Hmm, are you sure? Please double-check.",
                "It is -48.2"
            ))
            .len(),
            1
        );
        assert_eq!(
            successes(&again(
                "That doesn't look right to me. Check it again?",
                "It is 156."
            ))
            .len(),
            1
        );
        assert_eq!(
            failures(&again("Are you sure? What is 2 + 2?", "It is 156.")),
            vec![
                "[verified] the request works out to 4 (2 + 2 = 4), and the final answer gives no \
                 such figure"
            ]
        );
    }

    fn prove_nothing(r: &Record) -> bool {
        matches!(prove(r), Proven::Nothing)
    }

    #[test]
    fn counts_totals_and_definitions_are_checked_against_the_files_then() {
        let files = ["data/sales.csv".to_string(), "src/shipping.py".to_string()];
        let read = |p: &str| match p {
            "data/sales.csv" => Some("date,amount\n2026-10-01,120\n2026-10-02,35\n".to_string()),
            "src/shipping.py" => Some("def count_receipt(data):\n    return data\n".to_string()),
            _ => None,
        };
        let with_files = |request, answer| Record {
            files: Some(&files),
            read_file: &read,
            ..record(request, answer)
        };
        let total = "Please read data/sales.csv and add up the amount column.";
        assert_eq!(
            failures(&with_files(total, "The total is 150.")),
            vec![
                "[verified] the amount column of data/sales.csv adds up to 155 when the answer \
                 was written, and the final answer gives no such figure"
            ]
        );
        assert!(failures(&with_files(total, "The total is 155.")).is_empty());
        let which = "Which file in src defines the function `count_receipt`?";
        assert_eq!(
            failures(&with_files(which, "It is `billing.py`.")).len(),
            2,
            "a file that exists nowhere and not the one that defines it"
        );
        let right = with_files(which, "It is `shipping.py`.");
        assert!(failures(&right).is_empty());
        assert_eq!(
            successes(&right),
            vec![
                "[verified] only src/shipping.py defines `count_receipt`, and the final answer \
                 names it and no other file"
            ]
        );
        // Without the files' texts nothing is proven.
        assert!(failures(&record(total, "The total is 150.")).is_empty());
    }

    #[test]
    fn a_code_asked_back_is_given_or_not() {
        let said = [
            "Please save this in your notes: the colour we picked for the hallway is \
             granite-5158.",
            "Thanks. What is 2 + 2?",
        ];
        let r = Record {
            said_before: &said,
            ..record(
                "What was the colour we picked for the hallway? I asked you to note it earlier.",
                "The colour for the hallway is Granite-5158.",
            )
        };
        assert!(failures(&r).is_empty());
        assert_eq!(
            successes(&r),
            vec![
                "[verified] the person said earlier that the colour we picked for the hallway is \
                 granite-5158, and the final answer gives it"
            ]
        );
        let wrong = Record {
            answer: "The file name is `count_receipt.py`.",
            ..r
        };
        assert_eq!(failures(&wrong).len(), 1);
        assert!(successes(&wrong).is_empty());
        // Something else asked, or the code in the request: nothing proven.
        for request in [
            "What was the reference of my train ticket?",
            "Is granite-5158 the colour we picked for the hallway?",
            "The colour we picked for the hallway: save it again.",
        ] {
            let other = Record {
                request,
                answer: "I do not know.",
                ..r
            };
            assert!(failures(&other).is_empty(), "{request}");
            assert!(successes(&other).is_empty(), "{request}");
        }
        // The latest statement counts.
        let changed = [
            said[0],
            "Sorry, the colour we picked for the hallway is ash-12.",
        ];
        let later = Record {
            said_before: &changed,
            ..r
        };
        assert_eq!(failures(&later).len(), 1);
    }

    #[test]
    fn the_requests_example_given_back_is_a_failure() {
        let request =
            "Reverse \"lantern\". Reply with the final text between backticks, like `this`.";
        assert_eq!(failures(&record(request, "`this`")).len(), 1);
        assert_eq!(failures(&record(request, "The result: `this`.")).len(), 1);
        assert_eq!(failures(&record(request, "```\nthis\n```")).len(), 1);
        assert!(failures(&record(request, "`nretnal`")).is_empty());
        assert!(
            failures(&record("Write `this` backwards.", "`this`")).is_empty(),
            "quoted, but not as an example"
        );
    }

    #[test]
    fn a_file_named_that_exists_nowhere_is_made_up() {
        let files = ["src/shipping.py".to_string(), "src/reports.py".to_string()];
        let read = ["src/shipping.py:3:def count_receipt():"];
        let r = Record {
            files: Some(&files),
            ..record(
                "Which file in my workspace defines `count_receipt`?",
                "It is `count_receipt.py`.",
            )
        };
        assert_eq!(
            failures(&r),
            vec![
                "[verified] the final answer names count_receipt.py, which is not in the \
                 workspace and which nothing the assistant read shows"
            ]
        );
        for answer in [
            "It is shipping.py.",
            "src/shipping.py",
            "See src/reports.py.",
        ] {
            let ok = Record {
                files: Some(&files),
                read: &read,
                ..record(r.request, answer)
            };
            assert!(failures(&ok).is_empty(), "{answer}");
        }
        let mentioned = Record {
            read: &["count_receipt.py was deleted yesterday"],
            ..r
        };
        assert!(failures(&mentioned).is_empty(), "read somewhere");
        assert!(
            failures(&Record { files: None, ..r }).is_empty(),
            "no workspace to look at"
        );
    }
}
