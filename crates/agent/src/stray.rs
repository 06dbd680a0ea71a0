//! "Did you mean to end your turn?": a simple detector for replies that stop
//! mid-thought. Every case is recorded, so a learned detector can replace
//! this one.

/// The question the harness asks; its tokens carry no loss.
pub const QUESTION: &str = "Did you mean to end your turn? Answer yes or no.";

/// The grammar of the answer.
pub const ANSWER_GRAMMAR: &str = "root ::= \"yes\" | \"no\"";

/// True when `reply` looks like the model stopped before it was done: empty,
/// ending on a colon or comma, inside an open code block, or on a phrase
/// that announces more ("let me", "here is", …).
pub fn looks_unfinished(reply: &str) -> bool {
    let t = reply.trim_end();
    if t.is_empty() {
        return true;
    }
    if t.matches("```").count() % 2 == 1 {
        return true;
    }
    if t.ends_with(':') || t.ends_with(',') {
        return true;
    }
    let lower = t.to_lowercase();
    [
        "let me", "i'll", "i will", "here is", "here's", "next", "first", "then",
    ]
    .iter()
    .any(|p| lower.ends_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detector_cases() {
        for t in [
            "",
            "  ",
            "Here is the fix:",
            "I'll",
            "First, open the file,",
            "```python\nprint(1)",
        ] {
            assert!(looks_unfinished(t), "{t:?}");
        }
        for t in ["Done.", "The answer is 4.", "```\ncode\n```", "It works!"] {
            assert!(!looks_unfinished(t), "{t:?}");
        }
    }
}
