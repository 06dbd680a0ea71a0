//! The programmatic checks: a verdict and a one-line reason, from the final
//! reply (and, for the ledger, the file the agent kept).

use std::path::Path;

use serde::Serialize;

use crate::family::{Family, Task};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub passed: bool,
    pub why: String,
}

fn verdict(passed: bool, why: String) -> Verdict {
    Verdict { passed, why }
}

/// The last number written in `text` (`-1,234.5` counts as one number; the
/// `-` of `3-4` is a minus, not a sign).
pub(crate) fn last_number(text: &str) -> Option<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = None;
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit()
            || (chars[i] == '-'
                && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                && (i == 0 || !chars[i - 1].is_alphanumeric()));
        if !starts {
            i += 1;
            continue;
        }
        let begin = i;
        i += 1;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || ((chars[i] == ',' || chars[i] == '.')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        let s: String = chars[begin..i].iter().filter(|c| **c != ',').collect();
        found = s.parse().ok().or(found);
    }
    found
}

fn number_answer(task: &Task, reply: &str) -> Verdict {
    let expected: f64 = task.expected.parse().unwrap_or(f64::NAN);
    match last_number(reply) {
        Some(v) if (v - expected).abs() < 1e-6 => {
            verdict(true, format!("answered {}", task.expected))
        }
        Some(v) => verdict(false, format!("answered {v}, expected {}", task.expected)),
        None => verdict(
            false,
            format!("no number in the answer; expected {}", task.expected),
        ),
    }
}

fn text_answer(task: &Task, reply: &str) -> Verdict {
    let quoted: Vec<&str> = reply.split('`').skip(1).step_by(2).collect();
    if quoted.iter().any(|q| *q == task.expected) || reply.trim() == task.expected {
        return verdict(true, format!("answered `{}`", task.expected));
    }
    let got = quoted.last().map_or_else(
        || reply.trim().chars().take(60).collect(),
        |q| q.to_string(),
    );
    verdict(
        false,
        format!("answered `{got}`, expected `{}`", task.expected),
    )
}

/// The ledger must hold every transaction and the balance must be right.
fn ledger_answer(task: &Task, reply: &str, workspace: &Path) -> Verdict {
    let answer = number_answer(task, reply);
    let asked = task
        .prompt
        .split("tell me ")
        .nth(1)
        .and_then(|s| s.split("'s balance").next())
        .unwrap_or_default();
    let wanted_rows = task.prompt.matches(['+', '-']).count();
    let Ok(csv) = std::fs::read_to_string(workspace.join("ledger.csv")) else {
        return verdict(false, format!("no ledger.csv was written; {}", answer.why));
    };
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    if lines.next().map(|h| h.replace(' ', "")) != Some("account,amount".into()) {
        return verdict(
            false,
            "ledger.csv does not start with the header account,amount".into(),
        );
    }
    let mut rows = 0;
    let mut balance = 0.0;
    for line in lines {
        let Some((who, amount)) = line.split_once(',') else {
            return verdict(
                false,
                format!("ledger.csv has a row without a comma: {line:?}"),
            );
        };
        let Ok(amount) = amount.trim().trim_start_matches('+').parse::<f64>() else {
            return verdict(
                false,
                format!("ledger.csv has an amount that is not a number: {line:?}"),
            );
        };
        rows += 1;
        if who.trim() == asked {
            balance += amount;
        }
    }
    if rows != wanted_rows {
        return verdict(
            false,
            format!("ledger.csv has {rows} rows; there were {wanted_rows} transactions"),
        );
    }
    if (balance - task.expected.parse::<f64>().unwrap_or(f64::NAN)).abs() > 1e-6 {
        return verdict(
            false,
            format!("ledger.csv gives {asked} {balance}, not {}", task.expected),
        );
    }
    answer
}

/// Checks the agent's final `reply` to `task` (and its `workspace`).
pub fn check(task: &Task, reply: &str, workspace: &Path) -> Verdict {
    match task.family {
        Family::Arithmetic | Family::Units => number_answer(task, reply),
        Family::Strings => text_answer(task, reply),
        Family::Ledger => ledger_answer(task, reply, workspace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_number_is_the_answer() {
        assert_eq!(last_number("17 * 23 = 391"), Some(391.0));
        assert_eq!(last_number("The balance is -1,204.50."), Some(-1204.5));
        assert_eq!(last_number("step 1, step 2: 3-4"), Some(4.0));
        assert_eq!(last_number("none"), None);
    }

    #[test]
    fn the_ledger_check_reads_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = Family::Ledger.task(5, 1);
        let reply = format!("The balance is {}.", t.expected);
        assert!(check(&t, &reply, dir.path()).why.contains("no ledger.csv"));
        std::fs::write(dir.path().join("ledger.csv"), "name,value\n").unwrap();
        assert!(check(&t, &reply, dir.path()).why.contains("header"));
        // The right file: every transaction of the prompt, in order.
        let list = t
            .prompt
            .split("in order: ")
            .nth(1)
            .unwrap()
            .split(". Then")
            .next()
            .unwrap();
        let rows: Vec<String> = list
            .split(", ")
            .map(|r| {
                let (who, amount) = r.split_once(' ').unwrap();
                format!("{who},{amount}")
            })
            .collect();
        std::fs::write(
            dir.path().join("ledger.csv"),
            format!("account,amount\n{}\n", rows.join("\n")),
        )
        .unwrap();
        let v = check(&t, &reply, dir.path());
        assert!(v.passed, "{v:?}\n{}", t.prompt);
        std::fs::write(
            dir.path().join("ledger.csv"),
            format!("account,amount\n{}\n", rows[1..].join("\n")),
        )
        .unwrap();
        assert!(check(&t, &reply, dir.path()).why.contains("rows"));
    }
}
