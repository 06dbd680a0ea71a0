//! Tool calls in the model's own format, well-formed by construction: a lazy
//! grammar from llama.cpp's chat layer sleeps over free text and, once the
//! model opens a call, holds it to a tool offered this turn with arguments
//! that follow that tool's schema; the format's parser reads the calls back.

use crate::chat_format::{ChatParams, ChatRequest, ReplyParser, ToolChoice};
use crate::engine::Engine;
use crate::error::InferError;
use crate::prompt::{ChatMessage, Transcript};
use crate::sampler::Constraint;

/// How the next reply of a transcript calls tools.
#[derive(Debug, Clone)]
pub struct ToolCalling {
    /// llama.cpp's name for the format.
    pub format: String,
    /// The grammar over calls; `None` when the format has none.
    pub constraint: Option<Constraint>,
    pub parser: ReplyParser,
    /// Strings that end the reply besides the model's end-of-turn token.
    pub stops: Vec<String>,
}

/// Where Hermes-style formats open a call.
const HERMES_OPEN: &str = "<tool_call>";

/// A reply that opens with a bare `{"name"` (small Qwen models' habit of
/// leaving out the `<tool_call>` tags), maybe in a ```json fence, is held
/// to the same grammar from the brace on.
const BARE_CALL_TRIGGER: &str = r#"^\s*(?:```(?:json)?\s*)?(\{\s*"name")"#;

impl Engine {
    /// The constraint and parser for the next reply of `t` (its messages
    /// rendered through the model's own template), calling any of
    /// `callable`: the tools the transcript describes and any others the
    /// caller lets it reach for.
    pub fn tool_calling(
        &self,
        t: &Transcript,
        callable: &[serde_json::Value],
        choice: ToolChoice,
    ) -> Result<ToolCalling, InferError> {
        let req = ChatRequest {
            messages: t.messages.iter().map(ChatMessage::to_openai).collect(),
            tools: callable.to_vec(),
            tool_choice: choice,
            parallel_tool_calls: true,
            add_generation_prompt: true,
            enable_thinking: true,
            ..Default::default()
        };
        let params = self.chat_params(&req)?;
        Ok(ToolCalling {
            format: params.format_name.clone(),
            constraint: call_constraint(&params),
            parser: params.reply_parser(),
            stops: params.additional_stops.clone(),
        })
    }
}

/// The constraint llama.cpp's chat layer asks for (`None` when it has no
/// grammar): lazy over free text where the format allows it, with the
/// default model's bare-call habit held too.
pub fn call_constraint(params: &ChatParams) -> Option<Constraint> {
    (!params.grammar.is_empty()).then(|| {
        let (mut patterns, tokens) = params.trigger_patterns();
        let mut gbnf = params.grammar.clone();
        let hermes = params
            .grammar_triggers
            .iter()
            .any(|t| t.value.starts_with(HERMES_OPEN));
        if params.grammar_lazy && hermes {
            if let Some(g) = with_bare_calls(&gbnf) {
                gbnf = g;
                patterns.push(BARE_CALL_TRIGGER.to_string());
            }
        }
        if params.grammar_lazy {
            Constraint::Lazy {
                gbnf,
                patterns,
                tokens,
            }
        } else {
            Constraint::Gbnf(gbnf)
        }
    })
}

/// `gbnf` (a Hermes-style call grammar) with a second way in: the call's
/// JSON object without its tags. `None` when the grammar has no
/// `tool-call` rule naming its tools.
pub fn with_bare_calls(gbnf: &str) -> Option<String> {
    let rule = gbnf
        .lines()
        .find_map(|l| l.strip_prefix("tool-call ::= "))?;
    let open = rule.find("(tool-")?;
    let close = open + rule[open..].find(')')?;
    let tools = &rule[open..=close];
    let mut out = String::with_capacity(gbnf.len() + 64);
    for line in gbnf.lines() {
        match line.strip_prefix("root ::= ") {
            Some(body) => out.push_str(&format!("root ::= reverie-bare-call | {body}")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out.push_str(&format!("reverie-bare-call ::= {tools} space\n"));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAMMAR: &str = "root ::= tool-call | tool-calls\nspace ::= \" \"?\ntool-call ::= \"<tool_call>\\n\" space (tool-a | tool-b) space \"</tool_call>\"\ntool-calls ::= (tool-call? space)+\n";

    #[test]
    fn bare_calls_join_the_root_with_the_same_tools() {
        let g = with_bare_calls(GRAMMAR).unwrap();
        assert!(
            g.contains("root ::= reverie-bare-call | tool-call | tool-calls\n"),
            "{g}"
        );
        assert!(
            g.ends_with("reverie-bare-call ::= (tool-a | tool-b) space\n"),
            "{g}"
        );
        assert_eq!(with_bare_calls("root ::= \"x\"\n"), None);
    }
}
