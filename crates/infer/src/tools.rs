//! Tool definitions in the system prompt, the way the model was trained to
//! read them. llama.cpp's built-in templates do not render tools, so the
//! block that Hermes/Qwen-style Jinja templates emit is written here.

/// JSON as Python's `json.dumps` writes it (`", "` and `": "`), which is
/// what Jinja's `tojson` produced in the model's training data.
pub fn python_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_json).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), python_json(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// `system` followed by the tool definitions: the exact Qwen/Hermes block
/// when the model's template has `<tools>`, else a plain equivalent.
pub fn system_with_tools(
    template: Option<&str>,
    system: &str,
    tools: &[serde_json::Value],
) -> String {
    if tools.is_empty() {
        return system.to_string();
    }
    let defs: String = tools
        .iter()
        .map(|t| format!("\n{}", python_json(t)))
        .collect();
    if template.is_some_and(|t| t.contains("<tools>")) {
        format!(
            "{system}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>{defs}\n</tools>\n\n\
             For each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
        )
    } else {
        format!(
            "{system}\n\n# Tools\n\nYou can call these functions:{defs}\n\n\
             To call one, answer with <tool_call>{{\"name\": <function-name>, \"arguments\": <args-json-object>}}</tool_call>"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> serde_json::Value {
        serde_json::json!({"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}})
    }

    #[test]
    fn qwen_style_block_matches_the_jinja_template() {
        let out = system_with_tools(
            Some("...{{- \"\\n</tools>\" }} <tools>..."),
            "Be brief.",
            &[tool()],
        );
        assert!(out.starts_with("Be brief.\n\n# Tools\n\nYou may call one or more functions"));
        assert!(out.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}, \"required\": [\"path\"]}}}\n</tools>"), "{out}");
        assert!(out.ends_with("</tool_call>"));
    }

    #[test]
    fn no_tools_leaves_the_prompt_alone_and_others_get_a_plain_block() {
        assert_eq!(system_with_tools(None, "x", &[]), "x");
        let plain = system_with_tools(Some("chatml"), "x", &[tool()]);
        assert!(plain.contains("read_file") && plain.contains("<tool_call>"));
    }
}
