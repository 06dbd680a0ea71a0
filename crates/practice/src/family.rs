//! The families and how a task of each is made from a seed and a difficulty
//! (1 = easiest). The same seed and difficulty always give the same task.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Arithmetic,
    Strings,
    Ledger,
    /// Held out: measured, never trained on.
    Units,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::Arithmetic,
        Family::Strings,
        Family::Ledger,
        Family::Units,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Arithmetic => "arithmetic",
            Family::Strings => "strings",
            Family::Ledger => "ledger",
            Family::Units => "units",
        }
    }

    pub fn parse(s: &str) -> Result<Family, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "no task family {s:?}; the families are arithmetic, strings, ledger and units"
                )
            })
    }

    pub fn held_out(self) -> bool {
        self == Family::Units
    }

    /// The tools a solver of this family gets.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Family::Arithmetic | Family::Units => &["calculator"],
            Family::Strings => &["python"],
            Family::Ledger => &["read_file", "write_file", "edit_file", "calculator"],
        }
    }

    pub fn task(self, seed: u64, difficulty: u32) -> Task {
        let mut rng = StdRng::seed_from_u64(seed ^ (self as u64) << 56);
        let d = difficulty.clamp(1, 8);
        let (prompt, expected) = match self {
            Family::Arithmetic => arithmetic(&mut rng, d),
            Family::Strings => strings(&mut rng, d),
            Family::Ledger => ledger(&mut rng, d),
            Family::Units => units(&mut rng, d),
        };
        Task {
            family: self,
            difficulty: d,
            seed,
            prompt,
            expected,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub family: Family,
    pub difficulty: u32,
    pub seed: u64,
    pub prompt: String,
    pub expected: String,
}

/// One step of an arithmetic chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
}

impl Op {
    pub(crate) const NAMES: [&'static str; 4] = ["add", "subtract", "multiply", "divide"];

    pub(crate) fn parse(s: &str) -> Option<Op> {
        [Op::Add, Op::Subtract, Op::Multiply, Op::Divide]
            .into_iter()
            .zip(Op::NAMES)
            .find(|(_, n)| *n == s)
            .map(|(op, _)| op)
    }
}

/// The largest operand of a level's arithmetic.
pub(crate) fn arithmetic_scale(d: u32) -> i64 {
    10i64.pow(1 + d / 3)
}

/// A chain of `d + 1` integer operations; divisions always come out even.
fn arithmetic(rng: &mut StdRng, d: u32) -> (String, String) {
    let scale = arithmetic_scale(d);
    let start: i64 = rng.random_range(2..scale * 5);
    let mut v = start;
    let mut steps = Vec::new();
    for _ in 0..=d {
        let divisors: Vec<i64> = (2..13).filter(|k| v != 0 && v % k == 0).collect();
        let step = match rng.random_range(0..4) {
            2 => (Op::Multiply, rng.random_range(2..13)),
            3 if !divisors.is_empty() => {
                (Op::Divide, divisors[rng.random_range(0..divisors.len())])
            }
            1 => (Op::Subtract, rng.random_range(2..scale * 3)),
            _ => (Op::Add, rng.random_range(2..scale * 3)),
        };
        v = apply_op(v, step).expect("generated divisions come out even");
        steps.push(step);
    }
    render_arithmetic(start, &steps).expect("generated chains are valid")
}

fn apply_op(v: i64, (op, k): (Op, i64)) -> Option<i64> {
    match op {
        Op::Add => v.checked_add(k),
        Op::Subtract => v.checked_sub(k),
        Op::Multiply => v.checked_mul(k),
        Op::Divide => (k != 0 && v % k == 0).then(|| v / k),
    }
}

/// The prompt and answer of a chain, or why it is not a task (a division
/// that does not come out even, an overflow).
pub(crate) fn render_arithmetic(
    start: i64,
    steps: &[(Op, i64)],
) -> Result<(String, String), String> {
    let mut v = start;
    let mut words = Vec::new();
    for (i, &(op, k)) in steps.iter().enumerate() {
        v = apply_op(v, (op, k)).ok_or_else(|| match op {
            Op::Divide => format!("step {}: {v} does not divide evenly by {k}", i + 1),
            _ => format!("step {}: the number grows too large", i + 1),
        })?;
        words.push(match op {
            Op::Add => format!("add {k}"),
            Op::Subtract => format!("subtract {k}"),
            Op::Multiply => format!("multiply by {k}"),
            Op::Divide => format!("divide by {k}"),
        });
    }
    let prompt = format!(
        "Start with {start}, then {}. What is the result? End your answer with the number.",
        join(&words)
    );
    Ok((prompt, v.to_string()))
}

/// "a, b, c and d".
pub(crate) fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

pub(crate) const WORDS: &[&str] = &[
    "sunset",
    "boulevard",
    "lantern",
    "orchid",
    "granite",
    "meadow",
    "copper",
    "harbor",
    "velvet",
    "thunder",
    "pepper",
    "glacier",
    "saffron",
    "compass",
    "willow",
    "ember",
];

/// Composed transformations of a short phrase.
pub(crate) fn apply(op: &str, s: &str) -> String {
    match op {
        "reverse it" => s.chars().rev().collect(),
        "make it uppercase" => s.to_uppercase(),
        "make it lowercase" => s.to_lowercase(),
        "remove the vowels" => s.chars().filter(|c| !"aeiouAEIOU".contains(*c)).collect(),
        "remove the spaces" => s.chars().filter(|c| *c != ' ').collect(),
        "replace every e with 3" => s.replace(['e', 'E'], "3"),
        "keep only the first 8 characters" => s.chars().take(8).collect(),
        "double every character" => s.chars().flat_map(|c| [c, c]).collect(),
        _ => unreachable!("unknown string operation {op}"),
    }
}

pub(crate) const STRING_OPS: &[&str] = &[
    "reverse it",
    "make it uppercase",
    "make it lowercase",
    "remove the vowels",
    "remove the spaces",
    "replace every e with 3",
    "keep only the first 8 characters",
    "double every character",
];

fn strings(rng: &mut StdRng, d: u32) -> (String, String) {
    let n_words = 1 + (d as usize).min(3);
    let words: Vec<&str> = (0..n_words)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect();
    let ops: Vec<&str> = (0..(d as usize + 1).min(6))
        .map(|_| STRING_OPS[rng.random_range(0..STRING_OPS.len())])
        .collect();
    render_strings(&words, &ops)
}

pub(crate) fn render_strings(words: &[&str], ops: &[&str]) -> (String, String) {
    let text = words.join(" ");
    let result = ops.iter().fold(text.clone(), |acc, op| apply(op, &acc));
    let ops: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
    let prompt = format!(
        "Take the text \"{text}\" and, in this order, {}. Reply with the final text between backticks, like `this`.",
        join(&ops)
    );
    (prompt, result)
}

const ACCOUNTS: &[&str] = &["alice", "bob", "carol", "dave"];

/// Accounts a level's ledger uses.
pub(crate) fn ledger_accounts(d: u32) -> &'static [&'static str] {
    &ACCOUNTS[..(1 + d as usize).clamp(2, ACCOUNTS.len())]
}

fn ledger(rng: &mut StdRng, d: u32) -> (String, String) {
    let n = 2 + d as usize * 2;
    let accounts = ledger_accounts(d);
    let mut rows = Vec::new();
    for _ in 0..n {
        let who = accounts[rng.random_range(0..accounts.len())];
        let amount: i64 = rng.random_range(-90..150);
        rows.push((who, amount));
    }
    let asked = rows[rng.random_range(0..rows.len())].0;
    render_ledger(&rows, asked)
}

pub(crate) fn render_ledger(rows: &[(&str, i64)], asked: &str) -> (String, String) {
    let balance: i64 = rows
        .iter()
        .filter(|(w, _)| *w == asked)
        .map(|(_, a)| a)
        .sum();
    let list: Vec<String> = rows.iter().map(|(w, a)| format!("{w} {a:+}")).collect();
    let prompt = format!(
        "Keep a ledger in the file ledger.csv with the header `account,amount` and one row per transaction. \
         Record these transactions in order: {}. Then tell me {asked}'s balance, ending your answer with the number.",
        list.join(", ")
    );
    (prompt, balance.to_string())
}

fn units(rng: &mut StdRng, d: u32) -> (String, String) {
    // (question template, factor to the asked unit); answers are integers.
    let hours: i64 = rng.random_range(1..(4 + d as i64 * 3));
    let minutes: i64 = rng.random_range(0..60);
    match rng.random_range(0..3) {
        0 => (
            format!("How many minutes are {hours} hours and {minutes} minutes? End your answer with the number."),
            (hours * 60 + minutes).to_string(),
        ),
        1 => {
            let km: i64 = rng.random_range(1..(5 + d as i64 * 20));
            let m: i64 = rng.random_range(0..1000);
            (
                format!("How many metres are {km} km and {m} m? End your answer with the number."),
                (km * 1000 + m).to_string(),
            )
        }
        _ => {
            let kg: i64 = rng.random_range(1..(3 + d as i64 * 10));
            let g: i64 = rng.random_range(0..1000);
            (
                format!("How many grams are {kg} kg and {g} g? End your answer with the number."),
                (kg * 1000 + g).to_string(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check, Verdict};

    #[test]
    fn tasks_are_the_same_for_the_same_seed_and_differ_across_seeds() {
        for f in Family::ALL {
            assert_eq!(f.task(7, 3), f.task(7, 3));
            let distinct: std::collections::HashSet<String> =
                (0..20).map(|s| f.task(s, 3).prompt).collect();
            assert!(distinct.len() >= 15, "{f:?}: {}", distinct.len());
        }
    }

    #[test]
    fn arithmetic_answers_follow_the_stated_steps() {
        for seed in 0..200 {
            let t = Family::Arithmetic.task(seed, 4);
            let body = t.prompt.trim_start_matches("Start with ");
            let (start, rest) = body.split_once(", then ").unwrap();
            let mut v: i64 = start.parse().unwrap();
            let steps = rest.split(". What").next().unwrap();
            for step in steps.split(", ").flat_map(|s| s.split(" and ")) {
                let (op, k) = step.rsplit_once(' ').unwrap();
                let k: i64 = k.parse().unwrap();
                match op {
                    "add" => v += k,
                    "subtract" => v -= k,
                    "multiply by" => v *= k,
                    "divide by" => {
                        assert_eq!(v % k, 0, "{}", t.prompt);
                        v /= k
                    }
                    _ => panic!("{step}"),
                }
            }
            assert_eq!(v.to_string(), t.expected, "{}", t.prompt);
        }
    }

    #[test]
    fn harder_tasks_have_more_steps() {
        let steps = |d| {
            Family::Arithmetic
                .task(1, d)
                .prompt
                .matches(['y', 'd'])
                .count()
        };
        assert!(steps(6) > steps(1));
        let rows = |d| Family::Ledger.task(1, d).prompt.matches(['+', '-']).count();
        assert!(rows(5) > rows(1));
    }

    #[test]
    fn a_right_answer_passes_and_a_wrong_one_fails_for_every_family() {
        let dir = tempfile::tempdir().unwrap();
        for f in [Family::Arithmetic, Family::Strings, Family::Units] {
            let t = f.task(3, 2);
            let right = if f == Family::Strings {
                format!("Done: `{}`", t.expected)
            } else {
                format!("So the result is {}.", t.expected)
            };
            assert!(
                matches!(check(&t, &right, dir.path()), Verdict { passed: true, .. }),
                "{f:?}"
            );
            assert!(!check(&t, "I am not sure.", dir.path()).passed, "{f:?}");
        }
    }
}
