//! A reply that hands the person a tool's output instead of an answer.
//! After reading a file, the default model often sends the result back as
//! its reply: the numbered lines, the hint the harness wrote under them,
//! even the closing tag, and the count or name asked for is never said (2
//! of the 6 answers its judge misread on a simulated day of files tasks).
//! Such a reply gets one more reply, in words, without tools.

use std::collections::HashSet;

use crate::guard::{DONE_HINT, READ_HINT, RESULT_HINT};

/// What the harness says before the reply in words.
pub const NOTICE: &str =
    "Your reply repeated the tool's output instead of answering. Say what the user asked for, in a sentence or two.";

/// What the harness says to a reply that repeated an earlier turn's tool
/// output in a turn that has called nothing: there is nothing to answer
/// from yet, so the next reply calls a tool. Asked to recall a note it had
/// saved, the default model sent back the listing of an earlier turn,
/// hint and all (simulated notes tasks).
pub const LOOK_NOTICE: &str =
    "Your reply repeated an earlier tool's output instead of answering. Look up what the user asked for with a tool, then answer in words.";

/// Whether `reply` repeats a hint the harness wrote under one of `results`.
pub fn repeats_hint<'a>(reply: &str, results: impl IntoIterator<Item = &'a str> + Clone) -> bool {
    [READ_HINT, RESULT_HINT, DONE_HINT]
        .iter()
        .any(|h| reply.contains(h) && results.clone().into_iter().any(|r| r.contains(h)))
}

/// Lines shorter than this are too common to count as copied ("ok", "}").
const MIN_LINE: usize = 8;

/// Whether `reply` is a copy of this turn's tool `results`: it repeats the
/// hint the harness wrote into them, or at least three of its lines, and
/// more than half of them, are lines of a result.
pub fn copies(reply: &str, results: &[String]) -> bool {
    if repeats_hint(reply, results.iter().map(String::as_str)) {
        return true;
    }
    let seen: HashSet<&str> = results
        .iter()
        .flat_map(|r| r.lines())
        .map(str::trim)
        .filter(|l| l.len() >= MIN_LINE)
        .collect();
    let lines: Vec<&str> = reply
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= MIN_LINE)
        .collect();
    let copied = lines.iter().filter(|l| seen.contains(*l)).count();
    copied >= 3 && 2 * copied > lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_made_of_a_result_s_lines_or_its_hint_is_a_copy() {
        let log = "logs/app.log: lines 1-4 of 4\n1| 09:01:07 INFO token ok\n2| 09:02:14 ERROR quote failed\n3| 09:03:21 WARN address slow\n4| 09:04:28 ERROR summary failed";
        let result = format!("{log}\n\n{READ_HINT}");
        let results = [result.clone()];
        assert!(copies(&result, &results), "the whole result");
        assert!(copies(
            "2| 09:02:14 ERROR quote failed\n4| 09:04:28 ERROR summary failed\n3| 09:03:21 WARN address slow\nSo two.",
            &results
        ));
        assert!(copies(&format!("Here it is. {READ_HINT}"), &results));
        // An answer that quotes a line or two is an answer.
        assert!(!copies(
            "Two lines hold ERROR:\n2| 09:02:14 ERROR quote failed\n4| 09:04:28 ERROR summary failed\nThe answer is 2.",
            &results
        ));
        assert!(!copies("The answer is 2.", &results));
        // The hint counts only where the harness wrote it.
        assert!(!copies(READ_HINT, &[log.to_string()]));
        let saved = format!("saved note 1: Codes\n\n{DONE_HINT}");
        assert!(repeats_hint(
            &format!("1: Codes. {DONE_HINT}"),
            [saved.as_str()]
        ));
        assert!(!repeats_hint(
            "I saved both codes in a note.",
            [saved.as_str()]
        ));
    }
}
