//! The last reply of a stopped turn. When the harness stops a turn (the
//! tool-call limit, or calls that keep failing) the model gets one more
//! reply in which it cannot call a tool, so the turn ends on an answer made
//! from what it found instead of on a call nobody will run.

use reverie_core::{Message, MessageRole, TokenRole};
use reverie_infer::Constraint;

/// How the notice of a stopped turn begins.
pub const STOPPED: &str = "This turn was stopped";

/// A reply that cannot hold a call: it starts with neither whitespace nor
/// `[`, and holds no `{` (no JSON call, bare or wrapped), `<` (no
/// `<tool_call>` tag or token) or backtick (no fenced call). Nor does it
/// open with the notice's own first words: asked to answer after "This
/// turn was stopped: …", the default model copied the notice as its answer
/// in half of the stopped turns.
pub fn no_tools_grammar() -> String {
    let opening = &STOPPED[..OPENING_WORDS];
    let mut alternatives = vec![format!("[^{}{{<`\\[ \\t\\r\\n] rest", &opening[..1])];
    for k in 1..opening.len() {
        let next = &opening[k..=k];
        let class = if next == " " { "\\t\\n " } else { next };
        alternatives.push(format!("\"{}\" ([^{class}{{<`] rest)?", &opening[..k]));
    }
    format!("root ::= {}\nrest ::= [^{{<`]*", alternatives.join(" | "))
}

/// How many of the notice's first characters a last reply may not open with.
const OPENING_WORDS: usize = "This turn".len();

/// What the notice of a stopped turn adds when an answer follows.
pub const ANSWER_NOW: &str = "Answer now with what you have, without tools.";

/// [`ANSWER_NOW`] with the person's message it answers quoted after it, so
/// that the last thing the model reads is the request, not the notice.
pub fn answer_now(request: &str) -> String {
    const SHOWN: usize = 400;
    let mut quoted: String = request.trim().chars().take(SHOWN).collect();
    if request.trim().chars().count() > SHOWN {
        quoted.push_str(" …");
    }
    format!("{ANSWER_NOW} The user's message was:\n\n{quoted}")
}

/// The default constraint of the last reply.
pub fn no_tools() -> Constraint {
    Constraint::Gbnf(no_tools_grammar())
}

/// Whether the harness stopped a turn in `messages`: a notice it wrote
/// (every token a warning), not a person quoting one.
pub fn was_stopped(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| from_harness(m) && m.text.starts_with(STOPPED))
}

/// Whether the harness wrote `m` to the model (a notice or a question,
/// every token a warning) rather than the person.
pub fn from_harness(m: &Message) -> bool {
    m.role == MessageRole::User
        && !m.tokens.roles.is_empty()
        && m.tokens.roles.iter().all(|r| *r == TokenRole::Warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_reply_may_not_open_with_the_notice_and_the_request_comes_last() {
        let g = no_tools_grammar();
        assert!(g.starts_with("root ::= [^T{<`\\[ \\t\\r\\n] rest | \"T\" ([^h{<`] rest)?"));
        assert!(g.contains("\"This\" ([^\\t\\n {<`] rest)? | \"This \" ([^t{<`] rest)?"));
        assert!(
            g.ends_with("\"This tur\" ([^n{<`] rest)?\nrest ::= [^{<`]*"),
            "{g}"
        );
        let long = "x".repeat(500);
        let said = answer_now(&long);
        assert!(said.starts_with(ANSWER_NOW) && said.ends_with(" …"));
        assert_eq!(
            answer_now(" 17 × 3? ").rsplit("\n\n").next(),
            Some("17 × 3?")
        );
    }
}
