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

/// A ```json fence opening a call after some words ("I'll check the file:
/// ```json {"name": …"), which the same models also write, is held too.
const FENCED_CALL_TRIGGER: &str = r#"```(?:json)?\s*(\{\s*"name")"#;

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
                patterns.push(FENCED_CALL_TRIGGER.to_string());
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

/// A reply that ends in one call without its format's tags: the words
/// before it and the call object's text. The object is the whole reply,
/// maybe in a ```json fence, or a fence that closes the reply after some
/// words. `None` when the reply does not end in such an object (a call
/// followed by prose is an answer) or the object has no `"name"` string and
/// `"arguments"`. The object's text is completed when it lacks its last one
/// or two braces, where a small model often stops.
pub fn bare_call(reply: &str) -> Option<(&str, String)> {
    let t = reply.trim();
    // A call held to the grammar ends at its last brace, before the fence
    // could close.
    let t = t.strip_suffix("```").unwrap_or(t).trim_end();
    let (words, body) = match t.rfind("```") {
        Some(open) => {
            let inner = &t[open + 3..];
            (
                t[..open].trim_end(),
                inner.strip_prefix("json").unwrap_or(inner).trim(),
            )
        }
        None => ("", t),
    };
    if !body.starts_with('{') {
        return None;
    }
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(_) => body.to_string(),
        Err(_) => close_braces(body)?,
    };
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    (v.get("name").is_some_and(serde_json::Value::is_string) && v.get("arguments").is_some())
        .then_some((words, text))
}

/// `body` with the one or two closing braces it lacks: small models often
/// stop just short of the end of a call (`{"name": …, "arguments": {…}`).
/// `None` when more is missing or something else is wrong.
pub fn close_braces(body: &str) -> Option<String> {
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    for c in body.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    (!in_string && (1..=2).contains(&depth))
        .then(|| format!("{body}{}", "}".repeat(depth as usize)))
}

/// A JSON schema for one call, `{"name": …, "arguments": …}`, of any of
/// `tools` (OpenAI tool definitions): the grammar of a reply that must
/// call, which every model follows from its first token.
pub fn call_schema(tools: &[serde_json::Value]) -> serde_json::Value {
    let one = |t: &serde_json::Value| {
        serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": t["function"]
                    .get("parameters")
                    .cloned()
                    .unwrap_or(serde_json::json!({"type": "object"})),
            },
            "required": ["name", "arguments"],
        })
    };
    serde_json::json!({"anyOf": tools.iter().map(one).collect::<Vec<_>>()})
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

    #[test]
    fn a_call_that_ends_the_reply_is_read_with_the_words_before_it() {
        let call = r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#;
        for reply in [
            call.to_string(),
            format!("```json\n{call}\n```"),
            format!("```\n{call}"),
        ] {
            assert_eq!(bare_call(&reply), Some(("", call.to_string())), "{reply}");
        }
        for reply in [
            format!("Let me read it.\n```json\n{call}\n```"),
            format!("Let me read it.\n```json\n{call} "),
        ] {
            assert_eq!(
                bare_call(&reply),
                Some(("Let me read it.", call.to_string())),
                "{reply}"
            );
        }
        let short = r#"{"name": "calculator", "arguments": {"expression": "2 {}"}"#;
        assert_eq!(
            bare_call(&format!("So:\n```json\n{short}\n```")).map(|(_, b)| b),
            Some(format!("{short}}}"))
        );
        for answer in [
            format!("{call} so that is the file"),
            format!("```json\n{call}\n```\nThat is how you would call it."),
            "```python\nprint(1)\n```\nIt prints 1.".to_string(),
            "```json\n{\"answer\": 4}\n```".to_string(),
            r#"{"name": "x"}"#.to_string(),
        ] {
            assert_eq!(bare_call(&answer), None, "{answer}");
        }
    }
}
