//! The model as tasker: it writes a task of a family as JSON (the family's
//! parameters, nothing free-form), the family's own code turns that into a
//! prompt and the expected answer, and the task is then attempted like any
//! other. The tasker is rewarded for tasks the solvers pass about half the
//! time ([`tasker_reward`]), where there is most to learn.

use serde_json::{json, Value};

use crate::family::{
    arithmetic_scale, ledger_accounts, render_arithmetic, render_ledger, render_strings, Op,
    STRING_OPS, WORDS,
};
use crate::{Family, Task};

/// What the tasker is told.
pub const TASKER_PROMPT: &str = "You write practice tasks for an AI assistant. A good task is \
one the assistant solves about half the time: not trivial, not hopeless.";

/// The request for one task of `family` at `level`.
pub fn request(family: Family, level: u32) -> String {
    let what = match family {
        Family::Arithmetic => "a chain of integer operations (add, subtract, multiply, divide) starting from a number; every division must come out even",
        Family::Strings => "a short text made of the given words and a sequence of edits to apply to it in order",
        Family::Ledger => "a list of transactions (account and amount) and the account whose balance is asked",
        Family::Units => "a unit conversion",
    };
    format!(
        "Write one practice task of the family \"{}\" at level {level} of 8: {what}. Answer with JSON only.",
        family.as_str()
    )
}

/// The JSON schema of a task of `family` at `level`, or `None` for the
/// held-out family, which is never practised.
pub fn schema(family: Family, level: u32) -> Option<Value> {
    let d = level.clamp(1, 8);
    let obj = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
    let exactly = |items: Value, n: usize| json!({"type": "array", "items": items, "minItems": n, "maxItems": n});
    match family {
        Family::Arithmetic => {
            let scale = arithmetic_scale(d);
            let step = obj(
                json!({
                    "op": {"enum": Op::NAMES},
                    "value": {"type": "integer", "minimum": 2, "maximum": scale * 3}
                }),
                &["op", "value"],
            );
            Some(obj(
                json!({
                    "start": {"type": "integer", "minimum": 2, "maximum": scale * 5},
                    "steps": exactly(step, d as usize + 1)
                }),
                &["start", "steps"],
            ))
        }
        Family::Strings => Some(obj(
            json!({
                "words": exactly(json!({"enum": WORDS}), 1 + (d as usize).min(3)),
                "edits": exactly(json!({"enum": STRING_OPS}), (d as usize + 1).min(6))
            }),
            &["words", "edits"],
        )),
        Family::Ledger => {
            let accounts = ledger_accounts(d);
            let row = obj(
                json!({
                    "account": {"enum": accounts},
                    "amount": {"type": "integer", "minimum": -90, "maximum": 149}
                }),
                &["account", "amount"],
            );
            Some(obj(
                json!({"rows": exactly(row, 2 + d as usize * 2), "asked": {"enum": accounts}}),
                &["rows", "asked"],
            ))
        }
        Family::Units => None,
    }
}

/// The task the tasker's JSON describes, or why it is not one.
pub fn task_from_json(family: Family, level: u32, text: &str) -> Result<Task, String> {
    let v: Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("not the task JSON ({e})"))?;
    let d = level.clamp(1, 8);
    let strs = |key: &str, allowed: &[&str]| -> Result<Vec<String>, String> {
        let items = v[key].as_array().ok_or(format!("no \"{key}\" list"))?;
        items
            .iter()
            .map(|x| match x.as_str() {
                Some(s) if allowed.contains(&s) => Ok(s.to_string()),
                _ => Err(format!(
                    "\"{key}\" has {x}, which is not one of the allowed values"
                )),
            })
            .collect()
    };
    let (prompt, expected) = match family {
        Family::Arithmetic => {
            let start = v["start"].as_i64().ok_or("no integer \"start\"")?;
            let steps = v["steps"]
                .as_array()
                .ok_or("no \"steps\" list")?
                .iter()
                .map(|s| {
                    let op = s["op"].as_str().and_then(Op::parse);
                    match (op, s["value"].as_i64()) {
                        (Some(op), Some(k)) => Ok((op, k)),
                        _ => Err(format!("a step is not an op with an integer value: {s}")),
                    }
                })
                .collect::<Result<Vec<_>, String>>()?;
            if steps.is_empty() {
                return Err("a chain needs at least one step".into());
            }
            render_arithmetic(start, &steps)?
        }
        Family::Strings => {
            let words = strs("words", WORDS)?;
            let edits = strs("edits", STRING_OPS)?;
            if words.is_empty() || edits.is_empty() {
                return Err("a task needs at least one word and one edit".into());
            }
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let edits: Vec<&str> = edits.iter().map(String::as_str).collect();
            render_strings(&words, &edits)
        }
        Family::Ledger => {
            let accounts = ledger_accounts(d);
            let rows = v["rows"]
                .as_array()
                .ok_or("no \"rows\" list")?
                .iter()
                .map(|r| match (r["account"].as_str(), r["amount"].as_i64()) {
                    (Some(a), Some(x)) if accounts.contains(&a) => Ok((a.to_string(), x)),
                    _ => Err(format!("a row is not a known account with an amount: {r}")),
                })
                .collect::<Result<Vec<_>, String>>()?;
            let asked = v["asked"].as_str().ok_or("no \"asked\" account")?;
            if !rows.iter().any(|(a, _)| a == asked) {
                return Err(format!("{asked} has no transaction to ask about"));
            }
            let rows: Vec<(&str, i64)> = rows.iter().map(|(a, x)| (a.as_str(), *x)).collect();
            render_ledger(&rows, asked)
        }
        Family::Units => return Err("the held-out family is never practised".into()),
    };
    Ok(Task {
        family,
        difficulty: d,
        seed: 0,
        prompt,
        expected,
    })
}

/// 1 when the solvers passed half the attempts, 0 when all or none passed.
pub fn tasker_reward(passed: usize, attempts: usize) -> f32 {
    if attempts == 0 {
        return 0.0;
    }
    1.0 - 2.0 * (passed as f32 / attempts as f32 - 0.5).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_task_renders_like_a_generated_one() {
        let t = task_from_json(
            Family::Arithmetic,
            2,
            r#"{"start": 12, "steps": [{"op": "multiply", "value": 3}, {"op": "divide", "value": 4}, {"op": "add", "value": 5}]}"#,
        )
        .unwrap();
        assert_eq!(
            t.prompt,
            "Start with 12, then multiply by 3, divide by 4 and add 5. What is the result? End your answer with the number."
        );
        assert_eq!(t.expected, "14");
        let s = task_from_json(
            Family::Strings,
            1,
            r#"{"words": ["ember", "willow"], "edits": ["reverse it", "make it uppercase"]}"#,
        )
        .unwrap();
        assert_eq!(s.expected, "WOLLIW REBME");
        let l = task_from_json(
            Family::Ledger,
            1,
            r#"{"rows": [{"account": "alice", "amount": 10}, {"account": "bob", "amount": -4}, {"account": "alice", "amount": 5}], "asked": "alice"}"#,
        )
        .unwrap();
        assert_eq!(l.expected, "15");
        assert!(l.prompt.contains("alice +10, bob -4, alice +5"));
    }

    #[test]
    fn a_task_that_is_not_one_says_why() {
        let uneven = task_from_json(
            Family::Arithmetic,
            1,
            r#"{"start": 7, "steps": [{"op": "divide", "value": 2}]}"#,
        );
        assert_eq!(uneven.unwrap_err(), "step 1: 7 does not divide evenly by 2");
        let unknown = task_from_json(
            Family::Strings,
            1,
            r#"{"words": ["ember"], "edits": ["translate to French"]}"#,
        )
        .unwrap_err();
        assert!(
            unknown.contains("not one of the allowed values"),
            "{unknown}"
        );
        let nobody = task_from_json(
            Family::Ledger,
            1,
            r#"{"rows": [{"account": "alice", "amount": 1}], "asked": "bob"}"#,
        )
        .unwrap_err();
        assert!(nobody.contains("no transaction"), "{nobody}");
        assert!(task_from_json(Family::Arithmetic, 1, "a task")
            .unwrap_err()
            .starts_with("not the task JSON"));
        assert!(schema(Family::Units, 3).is_none());
    }

    #[test]
    fn schemas_follow_the_level() {
        let s = schema(Family::Arithmetic, 4).unwrap();
        assert_eq!(s["properties"]["steps"]["minItems"], 5);
        assert_eq!(s["properties"]["start"]["maximum"], 500);
        let s = schema(Family::Ledger, 1).unwrap();
        assert_eq!(s["properties"]["asked"]["enum"], json!(["alice", "bob"]));
    }

    #[test]
    fn the_tasker_is_rewarded_for_tasks_passed_half_the_time() {
        assert_eq!(tasker_reward(2, 4), 1.0);
        assert_eq!(tasker_reward(0, 4), 0.0);
        assert_eq!(tasker_reward(4, 4), 0.0);
        assert_eq!(tasker_reward(1, 4), 0.5);
        assert_eq!(tasker_reward(0, 0), 0.0);
    }
}
