//! Arithmetic the judge need not trust itself with: a small model misreads
//! "17 × 23 = 391" as often as it gets it right, so the judge is shown what
//! a calculator says of the sums the user asked for and the equations the
//! assistant wrote.

use reverie_core::MessageRole;
use reverie_tools::calculator::{evaluate, format_number};

/// Checks shown to the judge for one window at most.
const MAX_CHECKS: usize = 6;

/// Calculator lines for the judge: each sum a user message poses (`17 times
/// 23` → its value) and each equation an assistant message claims (`17 × 23
/// = 391` → true or false), in message order.
pub fn checks<'a>(
    messages: impl IntoIterator<Item = (usize, MessageRole, &'a str)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, role, text) in messages {
        for run in arithmetic_runs(text) {
            let line = match (role, run.split_once('=')) {
                (MessageRole::Assistant, Some((lhs, rhs))) => claim(i, lhs, rhs),
                (MessageRole::User, None) => posed(i, &run),
                _ => None,
            };
            if let Some(l) = line.filter(|l| !out.contains(l)) {
                out.push(l);
            }
            if out.len() == MAX_CHECKS {
                return out;
            }
        }
    }
    out
}

/// What the calculator gives for each sum in `texts`, posed or claimed
/// (the left side of an equation), as the checks spell it.
pub fn values<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    texts
        .into_iter()
        .flat_map(arithmetic_runs)
        .filter_map(|run| {
            let lhs = run.split('=').next()?;
            evaluate(lhs).ok().map(format_number)
        })
        .collect()
}

fn posed(message: usize, expr: &str) -> Option<String> {
    let v = evaluate(expr).ok()?;
    Some(format!(
        "[check] message {message} asks about {}: the calculator gives {}",
        expr.trim(),
        format_number(v)
    ))
}

fn claim(message: usize, lhs: &str, rhs: &str) -> Option<String> {
    let (lhs, rhs) = (lhs.trim(), rhs.trim());
    let (want, got) = (evaluate(lhs).ok()?, evaluate(rhs).ok()?);
    let right = (want - got).abs() <= 1e-6 * want.abs().max(1.0);
    Some(format!(
        "[check] message {message} says {lhs} = {rhs}: {}",
        if right {
            "correct".to_string()
        } else {
            format!("wrong, the calculator gives {}", format_number(want))
        }
    ))
}

/// Spans of `text` that read as arithmetic: numbers joined by operators
/// (words such as "times" and signs such as × count), with at most one `=`.
/// A lone hyphen between numbers without spaces (a date, a range) is not a
/// sum.
fn arithmetic_runs(text: &str) -> Vec<String> {
    let t = operators_as_symbols(text);
    let allowed = |c: char| c.is_ascii_digit() || " .+-*/^()=".contains(c);
    t.split(|c: char| !allowed(c))
        .map(|r| r.trim().trim_end_matches('.').trim())
        .filter(|r| r.split('=').count() <= 2 && is_sum(r))
        .map(str::to_string)
        .collect()
}

/// `text` in lowercase with the operators people spell ("times",
/// "divided by", "×") written as the calculator's symbols.
pub(crate) fn operators_as_symbols(text: &str) -> String {
    let mut t = format!(" {} ", text.to_lowercase());
    for (word, op) in [
        (" multiplied by ", " * "),
        (" divided by ", " / "),
        (" times ", " * "),
        (" plus ", " + "),
        (" minus ", " - "),
        ("×", "*"),
        ("÷", "/"),
        ("−", "-"),
    ] {
        t = t.replace(word, op);
    }
    t
}

/// A number, an operator and a number, in that order somewhere.
fn is_sum(run: &str) -> bool {
    let lhs = run.split('=').next().unwrap_or_default();
    let spaced_minus = lhs.contains(" - ");
    let op = lhs
        .char_indices()
        .filter(|&(_, c)| "+*/^".contains(c) || (c == '-' && spaced_minus))
        .any(|(k, _)| {
            lhs[..k].contains(|c: char| c.is_ascii_digit())
                && lhs[k + 1..].contains(|c: char| c.is_ascii_digit())
        });
    op && run.chars().any(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use MessageRole::{Assistant, User};

    #[test]
    fn a_right_and_a_wrong_claim_are_told_apart() {
        let got = checks([
            (3, User, "What is 17 × 23?"),
            (4, Assistant, "17 × 23 = 391."),
            (5, User, "and 12 times 12"),
            (6, Assistant, "12 * 12 = 124"),
        ]);
        assert_eq!(
            got,
            vec![
                "[check] message 3 asks about 17 * 23: the calculator gives 391",
                "[check] message 4 says 17 * 23 = 391: correct",
                "[check] message 5 asks about 12 * 12: the calculator gives 144",
                "[check] message 6 says 12 * 12 = 124: wrong, the calculator gives 144",
            ]
        );
    }

    #[test]
    fn values_are_those_of_sums_posed_and_claimed() {
        let got = values(["What is 17 × 23?", "12 * 12 = 124, and no sum here"]);
        assert_eq!(got, vec!["391", "144"]);
    }

    #[test]
    fn dates_lists_and_prose_are_not_sums() {
        assert!(checks([(
            1,
            User,
            "On 2026-12-03 I read pages 10-20, items 1, 2 and 3."
        )])
        .is_empty());
        assert!(checks([(1, Assistant, "Version 2.0 = better")]).is_empty());
        assert_eq!(
            checks([(1, User, "what's (2 + 3) * 4 - 1 minus 1?")]),
            vec!["[check] message 1 asks about (2 + 3) * 4 - 1 - 1: the calculator gives 18"]
        );
    }

    #[test]
    fn a_long_day_gives_at_most_a_handful_of_checks() {
        let texts: Vec<String> = (0..20).map(|i| format!("{i} + 1")).collect();
        let msgs = texts.iter().enumerate().map(|(i, t)| (i, User, t.as_str()));
        assert_eq!(checks(msgs).len(), MAX_CHECKS);
    }
}
