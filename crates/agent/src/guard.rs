//! The turn's stop policy: when a run of tool calls is going nowhere, the
//! harness stops it with a notice. Counts failures of the same call,
//! failures in a row, calls that repeat an earlier call of the turn to no
//! effect, and the turn's call budget.

use std::collections::HashSet;

use crate::wrap_up::STOPPED;

/// A call that fails the same way this many times in a row ends the turn.
const MAX_REPEATED_FAILURES: usize = 3;
/// Failed calls in a row, whatever they were, that end the turn: a model
/// that varies a broken call slightly is not getting anywhere either.
const MAX_FAILURES_IN_A_ROW: usize = 5;

/// Ends every successful tool result. Small models read a result as a cue
/// to call again (the default model restated each answer as one more
/// calculator call until the harness stopped the turn: 10 of 10 arithmetic
/// evals); told that a result may be the answer, they answer (0 of 10).
/// Worded as an instruction to give the answer, not as a condition: asked
/// to "reply ... if this answers the question", the model answered the
/// condition ("Yes, the answer is correct.", without the number, in 2 of 10
/// simulated arithmetic tasks); told to tell the answer, it wrote the
/// number in all 10. A hint that also offered "the next call" brought the
/// restating calls back (1 of 6 arithmetic tasks passed instead of 5).
pub(crate) const RESULT_HINT: &str =
    "If this answers the question, tell the user the answer now, in words.";

/// Ends a file's contents instead of [`RESULT_HINT`]. Asked for the total
/// of a CSV column, the default model read the file and added the numbers
/// in its head, wrongly (6 of 10 simulated files tasks); with this hint it
/// used the calculator in 3 of those and answered 2 right (files tasks: 0
/// of 10 → 2 of 10, none lost). Asked to count a log's WARN lines, it read
/// the file again and again and answered with the file's line count (3 of
/// 10 failed files tasks): grep counts the lines that match.
pub(crate) const READ_HINT: &str = "If this answers the question, tell the user the answer now, in words. If the answer is a sum of numbers in it, add them with the calculator first. To count the lines that hold a word, grep the file for it.";

/// Tools whose result says where to look next, not what the answer is:
/// their results carry no [`RESULT_HINT`]. With it, the default model
/// listed the folder that held the file it was asked to read and answered
/// "1 entries." (simulated files tasks).
const LOCATING_TOOLS: &[&str] = &["list_dir", "glob"];

/// Ends the result of a call that changed something (a note saved, a file
/// written). Told "if this answers the question, tell the answer", the
/// default model answered a request to save two codes with "The answer
/// is: Meeting Room: Friday's Meeting", or listed the notes again and
/// again until the harness stopped the turn (2 of 3 simulated notes
/// tasks).
pub(crate) const DONE_HINT: &str = "That is done. Tell the user, in words, what you did.";

/// Tools, and the actions of a tool, that change something.
pub(crate) fn changes(tool: &str, arguments: &serde_json::Value) -> bool {
    let action = arguments["action"].as_str().unwrap_or("");
    match tool {
        "write_file" | "edit_file" | "make_dir" | "delete_path" | "undo" | "redo" | "send_file" => {
            true
        }
        "notes" => matches!(action, "create" | "delete"),
        "recipe" => action == "save",
        _ => false,
    }
}

/// What makes two calls of a turn the same for [`TurnGuard::record`]. A
/// reading call that succeeded (`read_ok`) and returned what an earlier
/// call of the same tool returned gave the model nothing new, whatever its
/// arguments: the default model, having saved a note, listed the notes
/// again and again, changing each time a title the listing ignores, and
/// the turn ran to its call limit. A call that changed something or failed
/// is the same only with the same arguments (two writes can report the
/// same size). The calculator's results are the same when their values
/// are: asked to add a CSV column, the default model called it with the
/// sum, then again and again with the sum's bare value (`646 = 646`) until
/// the harness stopped the turn (6 of 20 simulated files tasks).
pub(crate) fn signature(tool: &str, arguments: &str, read_ok: bool, result: &str) -> String {
    let value = (read_ok && tool == "calculator")
        .then(|| result.split_once(" = ")?.1.split_whitespace().next())
        .flatten();
    if let Some(value) = value {
        format!("{tool}\u{0}={value}")
    } else if read_ok {
        format!("{tool}\u{0}{result}")
    } else {
        format!("{tool}\u{0}{arguments}\u{0}{result}")
    }
}

/// The hint a successful result `text` of `tool` ends with, if any;
/// `changed`: whether the call changes something ([`changes`]). A table's
/// contents shown with its column totals need no calculator; a change
/// that changed nothing gets the guard's [`ALREADY_DONE_HINT`] instead.
pub(crate) fn result_hint(tool: &str, changed: bool, text: &str) -> Option<&'static str> {
    if changed && text.starts_with(reverie_tools::UNCHANGED) {
        None
    } else if changed {
        Some(DONE_HINT)
    } else if tool == "read_file" && !text.contains(reverie_tools::COLUMN_TOTALS) {
        Some(READ_HINT)
    } else {
        (!LOCATING_TOOLS.contains(&tool)).then_some(RESULT_HINT)
    }
}

/// Added to the result of a call the turn already made with the same
/// arguments and result, so a small model that repeats itself is told to
/// use what it has.
pub(crate) const REPEAT_HINT: &str =
    "(Same call and result as earlier in this turn: use it and answer.)";

/// Added to the result of a call that repeated an earlier one again,
/// right after [`REPEAT_HINT`], whose tool then leaves the turn's grammar.
/// Stopped there instead, the turn ended in the harness's notice: the
/// default model, having written a ledger, added the same numbers three
/// times with the calculator (1 of 20 ledger eval turns once the file
/// writers left together; with this, none of the 20 was stopped).
pub(crate) const REPEATED_AGAIN_HINT: &str =
    "(Same call and result again: the tool is not offered again until the next question. Use what you have and answer.)";

/// Added to the error of a call that already failed the same way in this
/// turn, whose tool then leaves the turn's grammar: the default model
/// repeated a failing `read_file` of a file it was asked to create until
/// the harness stopped the turn, in every ledger eval task, and told that
/// the call would fail again, it still did (10 of 10).
pub(crate) const FAILED_AGAIN_HINT: &str =
    "(This exact call already failed the same way in this turn; the tool is not offered again until the next question. Do what the error says with another tool, or answer in words.)";

/// Added to the result of a changing call that changed nothing (its tool
/// says [`reverie_tools::UNCHANGED`]: the file already held that content,
/// the note was already saved), whose tool then leaves the turn's grammar.
/// Told "That is done" after each identical rewrite of the ledger, the
/// default model wrote it again until the harness stopped the turn.
pub(crate) const ALREADY_DONE_HINT: &str =
    "(That was already done, so nothing changed; the tool is not offered again until the next question. Do the rest of what the user asked, or tell them in words what you did.)";

/// The tools that write a file's contents. A write of what a file already
/// holds takes both out of the turn: with only write_file blocked, the
/// default model "edited" the ledger it had just rewritten unchanged to the
/// same lines, and that second repeat stopped the turn (most of the 15 of
/// 20 ledger eval turns the harness stopped; 1 was stopped with both out).
const FILE_WRITERS: &[&str] = &["write_file", "edit_file"];

/// The tools a `hint` on a call of `tool` takes out of the rest of the
/// turn: the call's own tool after a repeated failure, and after a change
/// that changed nothing every tool that changes the same thing.
pub(crate) fn blocked_by(tool: &str, hint: &str) -> Vec<String> {
    if hint == ALREADY_DONE_HINT && FILE_WRITERS.contains(&tool) {
        FILE_WRITERS.iter().map(|t| t.to_string()).collect()
    } else if [FAILED_AGAIN_HINT, ALREADY_DONE_HINT, REPEATED_AGAIN_HINT].contains(&hint) {
        vec![tool.to_string()]
    } else {
        Vec::new()
    }
}

/// Why the harness stops a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// The same call failed the same way again and again.
    SameFailure,
    /// Calls repeated an earlier call with the same result, past the hint.
    RepeatedCall,
    /// Call after call failed.
    FailuresInRow,
    /// The turn used its budget of calls.
    CallLimit,
}

impl StopCause {
    /// The notice the model sees; `then` says what to do next. No counts
    /// in these texts: a small model asked for a number answers with any
    /// number it was just shown.
    pub fn notice(self, then: &str) -> String {
        let why = match self {
            StopCause::SameFailure => {
                "the same tool call failed again and again. Read the error; next time try something different."
            }
            StopCause::RepeatedCall => {
                "the same tool call was repeated with the same result. Use the result you have."
            }
            StopCause::FailuresInRow => "tool call after tool call failed. Read the errors.",
            StopCause::CallLimit => "it reached the limit of tool calls for one turn.",
        };
        format!("{STOPPED}: {why} {then}")
    }
}

/// One turn's counters.
#[derive(Debug, Default)]
pub struct TurnGuard {
    max_repeated_calls: usize,
    last_failure: Option<String>,
    same_failures: usize,
    failures_in_row: usize,
    succeeded: HashSet<String>,
    failed: HashSet<String>,
    repeats_in_row: usize,
}

impl TurnGuard {
    /// A fresh turn that stops after `max_repeated_calls` repeated calls
    /// in a row (`usize::MAX`: never).
    pub fn new(max_repeated_calls: usize) -> TurnGuard {
        TurnGuard {
            max_repeated_calls,
            ..TurnGuard::default()
        }
    }

    /// Records one call's outcome, in order; `signature` is its name,
    /// arguments and result. Returns the hint its result carries if it
    /// repeated an earlier call of the turn to no effect: the same success
    /// ([`REPEAT_HINT`], or [`REPEATED_AGAIN_HINT`] when the repeats in a
    /// row reach the limit, which takes the tool out) or the same failure
    /// ([`FAILED_AGAIN_HINT`]).
    pub fn record(&mut self, signature: &str, ok: bool) -> Option<&'static str> {
        if !ok && self.last_failure.as_deref() == Some(signature) {
            self.same_failures += 1;
        } else {
            self.same_failures = usize::from(!ok);
        }
        self.last_failure = (!ok).then(|| signature.to_string());
        self.failures_in_row = if ok { 0 } else { self.failures_in_row + 1 };
        let repeat = ok && !self.succeeded.insert(signature.to_string());
        self.repeats_in_row = if repeat { self.repeats_in_row + 1 } else { 0 };
        let failed_again = !ok && !self.failed.insert(signature.to_string());
        if repeat && self.repeats_in_row == self.max_repeated_calls {
            // Its tool leaves the turn, so its repeats end here.
            self.repeats_in_row = 0;
            Some(REPEATED_AGAIN_HINT)
        } else if repeat {
            Some(REPEAT_HINT)
        } else if failed_again {
            Some(FAILED_AGAIN_HINT)
        } else {
            None
        }
    }

    /// Records a changing call that changed nothing: a success that
    /// repeats what the turn already did. Returns its hint.
    pub fn record_unchanged(&mut self) -> &'static str {
        self.last_failure = None;
        self.same_failures = 0;
        self.failures_in_row = 0;
        self.repeats_in_row += 1;
        ALREADY_DONE_HINT
    }

    /// Whether the turn must stop now, having made `calls_made` of its
    /// `max_calls` calls, and why (the first reason in this order).
    pub fn stop(&self, calls_made: usize, max_calls: usize) -> Option<StopCause> {
        if self.same_failures >= MAX_REPEATED_FAILURES {
            Some(StopCause::SameFailure)
        } else if self.repeats_in_row >= self.max_repeated_calls {
            Some(StopCause::RepeatedCall)
        } else if self.failures_in_row >= MAX_FAILURES_IN_A_ROW {
            Some(StopCause::FailuresInRow)
        } else if calls_made >= max_calls {
            Some(StopCause::CallLimit)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_call_with_an_earlier_result_repeats_it_whatever_its_arguments() {
        let mut g = TurnGuard::new(2);
        let listing = "1: Friday (written today)";
        let first = signature("notes", r#"{"action":"list"}"#, true, listing);
        let again = signature("notes", r#"{"action":"list","title":"x"}"#, true, listing);
        assert_eq!(g.record(&first, true), None);
        assert_eq!(g.record(&again, true), Some(REPEAT_HINT));
        // Writes and failures differ by their arguments.
        let write = |content: &str| {
            signature(
                "write_file",
                &format!(r#"{{"content":"{content}"}}"#),
                false,
                "overwrote a.txt (1 lines, 2 bytes)",
            )
        };
        assert_eq!(g.record(&write("ab"), true), None);
        assert_eq!(g.record(&write("cd"), true), None);
        assert_eq!(g.record(&write("cd"), true), Some(REPEAT_HINT));
    }

    #[test]
    fn a_calculator_call_on_a_value_it_already_gave_repeats_it() {
        let mut g = TurnGuard::new(2);
        let calc = |expression: &str, result: &str| {
            signature(
                "calculator",
                &format!(r#"{{"expression":"{expression}"}}"#),
                true,
                &format!("{result}  {RESULT_HINT}"),
            )
        };
        assert_eq!(g.record(&calc("173 + 473", "173 + 473 = 646"), true), None);
        assert_eq!(g.record(&calc("646", "646 = 646"), true), Some(REPEAT_HINT));
        assert_eq!(g.record(&calc("646 * 2", "646 * 2 = 1292"), true), None);
        // A refusal has no value: it is told apart by its arguments.
        let refused = signature("calculator", r#"{"expression":"x"}"#, false, "error: `x`");
        assert_eq!(g.record(&refused, false), None);
    }

    #[test]
    fn a_call_that_changed_something_is_told_to_say_what_it_did() {
        let args = |a: &str| serde_json::json!({ "action": a });
        let hint = |tool: &str, arguments: serde_json::Value| {
            result_hint(tool, changes(tool, &arguments), "")
        };
        assert_eq!(hint("notes", args("create")), Some(DONE_HINT));
        assert_eq!(hint("write_file", serde_json::json!({})), Some(DONE_HINT));
        assert_eq!(hint("recipe", args("save")), Some(DONE_HINT));
        // Reading calls may hold the answer; locating ones never do.
        assert_eq!(hint("notes", args("search")), Some(RESULT_HINT));
        assert_eq!(hint("notes", args("list")), Some(RESULT_HINT));
        assert_eq!(hint("calculator", serde_json::json!({})), Some(RESULT_HINT));
        assert_eq!(hint("read_file", serde_json::json!({})), Some(READ_HINT));
        assert_eq!(hint("glob", serde_json::json!({})), None);
        let table = "a.csv: lines 1-3 of 3\n…\nColumn totals (2 rows): amount 7";
        assert_eq!(result_hint("read_file", false, table), Some(RESULT_HINT));
    }

    #[test]
    fn a_change_that_changed_nothing_blocks_its_tool_and_counts_as_a_repeat() {
        let mut g = TurnGuard::new(2);
        let unchanged = "unchanged: `a.csv` already holds exactly this content";
        assert_eq!(result_hint("write_file", true, unchanged), None);
        assert_eq!(g.record("read_file a.csv: not found", false), None);
        assert_eq!(g.record_unchanged(), ALREADY_DONE_HINT);
        assert_eq!(blocked_by("notes", ALREADY_DONE_HINT), ["notes"]);
        assert_eq!(blocked_by("read_file", FAILED_AGAIN_HINT), ["read_file"]);
        assert_eq!(blocked_by("edit_file", FAILED_AGAIN_HINT), ["edit_file"]);
        let writers = ["write_file", "edit_file"];
        assert_eq!(blocked_by("write_file", ALREADY_DONE_HINT), writers);
        assert_eq!(blocked_by("edit_file", ALREADY_DONE_HINT), writers);
        assert!(blocked_by("calculator", REPEAT_HINT).is_empty());
        assert_eq!(g.stop(2, 24), None, "it also ends the run of failures");
        g.record_unchanged();
        assert_eq!(g.stop(3, 24), Some(StopCause::RepeatedCall));
    }

    #[test]
    fn the_same_failure_three_times_stops_the_turn() {
        let mut g = TurnGuard::new(2);
        assert_eq!(g.record("read_file a.txt: not found", false), None);
        assert_eq!(g.stop(1, 24), None);
        assert_eq!(
            g.record("read_file a.txt: not found", false),
            Some(FAILED_AGAIN_HINT),
            "a failure repeated is told it will fail again"
        );
        assert_eq!(g.stop(2, 24), None);
        g.record("read_file a.txt: not found", false);
        assert_eq!(g.stop(3, 24), Some(StopCause::SameFailure));
    }

    #[test]
    fn five_different_failures_in_a_row_stop_it_and_a_success_resets_them() {
        let mut g = TurnGuard::new(2);
        for i in 0..4 {
            g.record(&format!("call {i}: error"), false);
        }
        g.record("list_files: ok", true);
        assert_eq!(g.stop(5, 24), None, "a success in between");
        for i in 0..5 {
            g.record(&format!("call {i}: error"), false);
        }
        assert_eq!(g.stop(10, 24), Some(StopCause::FailuresInRow));
    }

    #[test]
    fn a_repeated_call_gets_the_hint_and_a_second_in_a_row_takes_its_tool_out() {
        let mut g = TurnGuard::new(2);
        assert_eq!(g.record("calculator 2+2 = 4", true), None);
        assert_eq!(
            g.record("calculator 2+2 = 4", true),
            Some(REPEAT_HINT),
            "first repeat: hint"
        );
        assert_eq!(g.stop(2, 24), None);
        assert_eq!(
            g.record("calculator 2+2 = 4", true),
            Some(REPEATED_AGAIN_HINT)
        );
        assert_eq!(
            blocked_by("calculator", REPEATED_AGAIN_HINT),
            ["calculator"]
        );
        assert_eq!(g.stop(3, 24), None, "the tool is out, the turn goes on");
        // A repeat then a change that changed nothing stop it.
        assert_eq!(g.record("notes list: 1 note", true), None);
        assert_eq!(g.record("notes list: 1 note", true), Some(REPEAT_HINT));
        g.record_unchanged();
        assert_eq!(g.stop(6, 24), Some(StopCause::RepeatedCall));
        let mut never = TurnGuard::new(usize::MAX);
        for _ in 0..10 {
            never.record("calculator 2+2 = 4", true);
        }
        assert_eq!(never.stop(10, 24), None);
    }

    #[test]
    fn the_call_budget_stops_it_last_and_the_notice_says_why_without_numbers() {
        let g = TurnGuard::new(2);
        assert_eq!(g.stop(23, 24), None);
        assert_eq!(g.stop(24, 24), Some(StopCause::CallLimit));
        let text = StopCause::CallLimit.notice("Answer now.");
        assert!(
            text.starts_with(STOPPED) && text.ends_with("Answer now."),
            "{text}"
        );
        assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text}");
    }
}
