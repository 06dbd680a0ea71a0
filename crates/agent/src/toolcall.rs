//! Tool calls in the model's output, in the format its chat template taught
//! it. Hermes/Qwen (`<tool_call>{"name": …, "arguments": …}</tool_call>`) is
//! built in; other formats plug in through [`ToolCallFormat`].

use serde_json::Value;

/// One call found in a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedCall {
    Call {
        name: String,
        arguments: Value,
    },
    /// Something that was meant as a call but could not be read; the model
    /// is told why.
    Malformed {
        raw: String,
        error: String,
    },
}

pub trait ToolCallFormat: Send + Sync {
    /// The calls in `reply`, in order; empty when it is a plain answer.
    fn parse(&self, reply: &str) -> Vec<ParsedCall>;
}

/// `<tool_call>` blocks holding `{"name": …, "arguments": {…}}`. Small
/// models sometimes drop the tags and answer with the bare JSON object (or
/// one in a ```json fence); a reply that is nothing but such an object
/// counts as one call.
pub struct Hermes;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

impl ToolCallFormat for Hermes {
    fn parse(&self, reply: &str) -> Vec<ParsedCall> {
        let mut out = Vec::new();
        let mut rest = reply;
        while let Some(start) = rest.find(OPEN) {
            let body_start = start + OPEN.len();
            // An unclosed block at the end (cut by max tokens) still counts.
            let (body, next) = match rest[body_start..].find(CLOSE) {
                Some(end) => (
                    &rest[body_start..body_start + end],
                    &rest[body_start + end + CLOSE.len()..],
                ),
                None => (&rest[body_start..], ""),
            };
            out.push(parse_body(body.trim()));
            rest = next;
        }
        if out.is_empty() {
            if let Some(call) = bare_call(reply) {
                out.push(call);
            }
        }
        out
    }
}

/// A reply that ends in a call without tags (see
/// [`reverie_infer::bare_call`]).
fn bare_call(reply: &str) -> Option<ParsedCall> {
    reverie_infer::bare_call(reply).map(|(_, body)| parse_body(&body))
}

/// The calls in `reply` as the model's own format's parser reads them. A
/// reply that is nothing but a bare call object counts as one call; a reply
/// the parser cannot read (cut off mid-call) is read as Hermes.
pub fn calls_in_reply(parser: &reverie_infer::ReplyParser, reply: &str) -> Vec<ParsedCall> {
    let parsed = match parser.parse(reply, false) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!("reply not in the model's format ({e}); reading it as Hermes");
            return Hermes.parse(reply);
        }
    };
    if parsed.tool_calls.is_empty() {
        return bare_call(&parsed.content).into_iter().collect();
    }
    parsed
        .tool_calls
        .into_iter()
        .map(|c| match serde_json::from_str::<Value>(&c.arguments) {
            Ok(Value::Object(m)) => ParsedCall::Call {
                name: c.name,
                arguments: Value::Object(m),
            },
            _ if c.arguments.trim().is_empty() => ParsedCall::Call {
                name: c.name,
                arguments: Value::Object(Default::default()),
            },
            _ => ParsedCall::Malformed {
                raw: c.arguments,
                error: "\"arguments\" must be a JSON object".into(),
            },
        })
        .collect()
}

fn parse_body(body: &str) -> ParsedCall {
    let malformed = |error: String| ParsedCall::Malformed {
        raw: body.to_string(),
        error,
    };
    let v: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => {
            match reverie_infer::close_braces(body).and_then(|b| serde_json::from_str(&b).ok()) {
                Some(v) => v,
                None => return malformed(format!("it is not valid JSON ({e})")),
            }
        }
    };
    let Some(name) = v.get("name").and_then(Value::as_str) else {
        return malformed("it has no \"name\" string".into());
    };
    let arguments = match v.get("arguments") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        // Some models write the arguments as a JSON string.
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => Value::Object(m),
            _ => return malformed("\"arguments\" must be a JSON object".into()),
        },
        Some(Value::Object(m)) => Value::Object(m.clone()),
        Some(_) => return malformed("\"arguments\" must be a JSON object".into()),
    };
    ParsedCall::Call {
        name: name.to_string(),
        arguments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_hermes_calls() {
        let reply = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>\n<tool_call>{\"name\": \"health\"}</tool_call>";
        assert_eq!(
            Hermes.parse(reply),
            [
                ParsedCall::Call {
                    name: "read_file".into(),
                    arguments: json!({"path": "a.txt"})
                },
                ParsedCall::Call {
                    name: "health".into(),
                    arguments: json!({})
                }
            ]
        );
        assert!(Hermes.parse("just an answer").is_empty());
        let bare = Hermes.parse(" {\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n");
        assert_eq!(
            bare[0],
            ParsedCall::Call {
                name: "list_dir".into(),
                arguments: json!({"path": "."})
            }
        );
        assert_eq!(
            Hermes
                .parse("```json\n{\"name\": \"health\", \"arguments\": {}}\n```")
                .len(),
            1
        );
        assert_eq!(
            Hermes.parse(
                "I'll add them.\n```json\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2+2\"}}\n```"
            ),
            vec![ParsedCall::Call {
                name: "calculator".into(),
                arguments: json!({"expression": "2+2"})
            }],
            "a fenced call after some words is a call"
        );
        assert!(
            Hermes.parse("{\"answer\": 4}").is_empty(),
            "JSON that is not a call is an answer"
        );
        // A call one or two braces short is completed, tagged or bare.
        let short = ParsedCall::Call {
            name: "calculator".into(),
            arguments: json!({"expression": "(5 + 3 - 2) * 4 {}"}),
        };
        let body =
            "{\"name\": \"calculator\", \"arguments\": {\"expression\": \"(5 + 3 - 2) * 4 {}\"}";
        assert_eq!(Hermes.parse(body), vec![short.clone()]);
        assert_eq!(Hermes.parse(&format!("{body}\n")), vec![short.clone()]);
        assert_eq!(
            Hermes.parse(&format!("<tool_call>{body}</tool_call>")),
            vec![short]
        );
        assert!(
            Hermes
                .parse("{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1\"}} so 1")
                .is_empty(),
            "a call followed by prose is an answer"
        );
        let stringy = Hermes
            .parse("<tool_call>{\"name\": \"x\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
        assert_eq!(
            stringy[0],
            ParsedCall::Call {
                name: "x".into(),
                arguments: json!({"a": 1})
            }
        );
    }

    #[test]
    fn says_what_is_wrong_with_a_bad_call() {
        for (body, why) in [
            ("{\"name\": \"x\", ", "not valid JSON"),
            ("{\"arguments\": {}}", "no \"name\""),
            (
                "{\"name\": \"x\", \"arguments\": [1]}",
                "must be a JSON object",
            ),
        ] {
            match &Hermes.parse(&format!("<tool_call>{body}</tool_call>"))[0] {
                ParsedCall::Malformed { error, .. } => assert!(error.contains(why), "{error}"),
                other => panic!("{other:?}"),
            }
        }
        // Cut off by the token limit: still reported.
        assert_eq!(Hermes.parse("<tool_call>{\"name\": \"health\"}").len(), 1);
    }
}
