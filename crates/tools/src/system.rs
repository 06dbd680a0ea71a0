//! `update_sys`: the agent's own section of its channel's system prompt,
//! holding its current directives and to-dos.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const MAX_SECTION_BYTES: usize = 4000;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Section {
    #[serde(default)]
    directives: String,
    #[serde(default)]
    todos: Vec<String>,
    /// What was done and what is left, written when the channel neared the
    /// end of its context and older turns left the model's view.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    summary: String,
}

impl Section {
    fn parse(stored: &str) -> Section {
        serde_json::from_str(stored).unwrap_or_else(|_| Section {
            directives: stored.to_string(),
            todos: Vec::new(),
            summary: String::new(),
        })
    }

    fn render(&self) -> String {
        let mut out = String::new();
        if !self.directives.trim().is_empty() {
            out.push_str(&format!("Directives:\n{}\n", self.directives.trim()));
        }
        if !self.summary.trim().is_empty() {
            out.push_str(&format!(
                "Earlier in this channel (older turns are out of view):\n{}\n",
                self.summary.trim()
            ));
        }
        if !self.todos.is_empty() {
            out.push_str("To-dos:\n");
            for t in &self.todos {
                out.push_str(&format!("- {t}\n"));
            }
        }
        out
    }
}

/// The agent-owned section as it appears in the system prompt (empty when
/// the agent has not written one).
pub fn agent_section_text(stored: &str) -> String {
    if stored.trim().is_empty() {
        return String::new();
    }
    Section::parse(stored).render()
}

/// The stored section with `summary` as its summary of the channel so far
/// (replacing an earlier one), cut to fit the section's size.
pub fn section_with_summary(stored: &str, summary: &str) -> String {
    let mut section = if stored.trim().is_empty() {
        Section::default()
    } else {
        Section::parse(stored)
    };
    section.summary = String::new();
    let room = MAX_SECTION_BYTES.saturating_sub(section.render().len() + 64);
    let mut cut = summary.trim().to_string();
    if cut.len() > room {
        let end = (0..=room)
            .rev()
            .find(|&i| cut.is_char_boundary(i))
            .unwrap_or(0);
        cut.truncate(end);
    }
    section.summary = cut;
    serde_json::to_string(&section).expect("section serializes")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    #[serde(default)]
    directives: Option<String>,
    #[serde(default)]
    todos: Option<Vec<String>>,
}

fn update_sys(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: UpdateArgs = parse_args("update_sys", args)?;
    if a.directives.is_none() && a.todos.is_none() {
        return Err(ToolError::refused(
            "give `directives` (text) and/or `todos` (a list); each replaces what was there",
        ));
    }
    let stored = tb.store().channel(tb.channel())?.agent_section;
    let mut section = if stored.trim().is_empty() {
        Section::default()
    } else {
        Section::parse(&stored)
    };
    if let Some(d) = a.directives {
        section.directives = d;
    }
    if let Some(t) = a.todos {
        section.todos = t.into_iter().filter(|t| !t.trim().is_empty()).collect();
    }
    let rendered = section.render();
    if rendered.len() > MAX_SECTION_BYTES {
        return Err(ToolError::refused(format!(
            "the section would be {} bytes; keep it under {MAX_SECTION_BYTES} (move details to notes)",
            rendered.len()
        )));
    }
    let encoded = serde_json::to_string(&section).expect("section serializes");
    tb.store().set_agent_section(tb.channel(), &encoded)?;
    Ok(format!(
        "your section of the system prompt now reads:\n{}",
        if rendered.is_empty() {
            "(empty)\n"
        } else {
            &rendered
        }
    )
    .into())
}

pub(crate) const TOOLS: &[ToolDef] = &[ToolDef {
    name: "update_sys",
    description: "Rewrite your own section of this channel's system prompt: standing directives and a to-do list.",
    parameters: || {
        json!({"type": "object", "properties": {
            "directives": {"type": "string", "description": "replaces your directives"},
            "todos": {"type": "array", "items": {"type": "string"}, "description": "replaces your to-do list"}
        }})
    },
    run: update_sys,
}];
