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
/// `<tool_call>` tag or token) or backtick (no fenced call).
pub const NO_TOOLS_GRAMMAR: &str = r#"root ::= [^{<`\[ \t\r\n] [^{<`]*"#;

/// What the notice of a stopped turn adds when an answer follows.
pub const ANSWER_NOW: &str = "Answer now with what you have, without tools.";

/// The default constraint of the last reply.
pub fn no_tools() -> Constraint {
    Constraint::Gbnf(NO_TOOLS_GRAMMAR.into())
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
