//! Notes the agent keeps across channels (searched by meaning), and recipes:
//! named text templates with `{parameters}` it can fill later.

use std::collections::BTreeSet;

use reverie_store::Note;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const MAX_NOTE_BYTES: usize = 64 << 10;
const SEARCH_RESULTS: usize = 5;

fn note_text(n: &Note) -> String {
    format!("{}\n{}", n.title, n.body)
}

fn embeddings(tb: &Toolbox, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>, ToolError> {
    tb.embeddings(texts)
}

/// Days after which an untouched note's recency weight has halved.
const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;

/// A note's weight for being recent: 1 when created or recalled now, halving
/// every [`RECENCY_HALF_LIFE_DAYS`] untouched, never under a half, so that
/// relevance still decides between a close old note and a vague new one.
pub fn recency(touched_ms: i64, now_ms: i64) -> f64 {
    let days = (now_ms - touched_ms).max(0) as f64 / 86_400_000.0;
    0.5 + 0.5 * 0.5f64.powf(days / RECENCY_HALF_LIFE_DAYS)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The UTC day of `ms` since the epoch, as `2026-12-03`.
pub(crate) fn day(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .map(|t| t.date().to_string())
        .unwrap_or_default()
}

/// "written 2026-12-01, recalled 2026-12-03" (UTC days).
fn dates(n: &Note) -> String {
    match n.used_ms {
        Some(u) => format!("written {}, recalled {}", day(n.created_ms), day(u)),
        None => format!("written {}, never recalled", day(n.created_ms)),
    }
}

/// Notes ranked by similarity to `query` times their [`recency`], best
/// first, with their scores.
pub(crate) fn search_notes(tb: &Toolbox, query: &str) -> Result<Vec<(f64, Note)>, ToolError> {
    let notes = tb.store().notes()?;
    let mut texts: Vec<String> = notes.iter().map(note_text).collect();
    texts.push(query.to_string());
    let scores: Vec<f64> = match embeddings(tb, &texts)? {
        Some(vecs) => {
            let q = vecs.last().expect("query embedded");
            vecs[..notes.len()]
                .iter()
                .map(|v| reverie_embed::cosine(v, q) as f64)
                .collect()
        }
        None => texts[..notes.len()]
            .iter()
            .map(|t| reverie_embed::word_overlap(t, query))
            .collect(),
    };
    let now = now_ms();
    let mut ranked: Vec<(f64, Note)> = scores
        .into_iter()
        .zip(notes)
        .map(|(s, n)| (s * recency(n.touched_ms(), now), n))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(ranked)
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum NoteAction {
    Create,
    List,
    Search,
    Delete,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    action: NoteAction,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    id: Option<i64>,
}

fn notes(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: NoteArgs = parse_args("notes", args)?;
    let text = match a.action {
        NoteAction::Create => {
            let body = a
                .text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::refused("create needs `text`: what to remember"))?;
            if body.len() > MAX_NOTE_BYTES {
                return Err(ToolError::refused(
                    "the note is over 64 KiB; keep notes short, put long text in a file",
                ));
            }
            let title = a
                .title
                .unwrap_or_else(|| crate::output::cap_line(body.lines().next().unwrap_or(""), 60));
            // The same note again is not a second note: the default model
            // saved one, then saved it again and again.
            let notes = tb.store().notes()?;
            match notes.iter().find(|n| n.title == title && n.body == body) {
                Some(n) => format!(
                    "{} note {} already says exactly this; nothing was saved",
                    crate::UNCHANGED,
                    n.id
                ),
                None => {
                    let id = tb.store().add_note(&title, &body)?;
                    format!("saved note {id}: {title}")
                }
            }
        }
        NoteAction::List => {
            let all = tb.store().notes()?;
            if all.is_empty() {
                "no notes yet".to_string()
            } else {
                all.iter()
                    .map(|n| format!("{}: {} ({})", n.id, n.title, dates(n)))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        NoteAction::Search => {
            let q = a
                .query
                .filter(|q| !q.trim().is_empty())
                .ok_or_else(|| ToolError::refused("search needs `query`: what to look for"))?;
            let ranked = search_notes(tb, &q)?;
            let shown: Vec<i64> = ranked
                .iter()
                .take(SEARCH_RESULTS)
                .map(|(_, n)| n.id)
                .collect();
            tb.store().touch_notes(&shown)?;
            if ranked.is_empty() {
                "no notes yet".to_string()
            } else {
                ranked
                    .iter()
                    .take(SEARCH_RESULTS)
                    .map(|(s, n)| format!("note {} (score {s:.2}): {}\n{}", n.id, n.title, n.body))
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            }
        }
        NoteAction::Delete => {
            let id =
                a.id.ok_or_else(|| ToolError::refused("delete needs `id`; list shows the ids"))?;
            tb.store().delete_note(id).map_err(|_| {
                ToolError::refused(format!("there is no note {id}; list shows the ids"))
            })?;
            format!("deleted note {id}")
        }
    };
    Ok(text.into())
}

/// The `{name}` placeholders of a template (`{{` and `}}` are literal braces).
fn placeholders(template: &str) -> Result<BTreeSet<String>, ToolError> {
    let mut out = BTreeSet::new();
    let mut rest = template.replace("{{", "").replace("}}", "");
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return Err(ToolError::refused(
                "the template has a `{` without a closing `}`; write `{{` for a literal brace",
            ));
        };
        let name = rest[start + 1..start + len].trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(ToolError::refused(format!(
                "`{{{name}}}` is not a valid parameter; use letters, digits and _ inside braces"
            )));
        }
        out.insert(name);
        rest = rest[start + len + 1..].to_string();
    }
    Ok(out)
}

fn fill(template: &str, values: &serde_json::Map<String, Value>) -> Result<String, ToolError> {
    let needed = placeholders(template)?;
    let missing: Vec<_> = needed.iter().filter(|n| !values.contains_key(*n)).collect();
    if !missing.is_empty() {
        return Err(ToolError::refused(format!(
            "missing values for {}; pass them in `values`",
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let unknown: Vec<_> = values.keys().filter(|k| !needed.contains(*k)).collect();
    if !unknown.is_empty() {
        return Err(ToolError::refused(format!(
            "the recipe has no parameter {}; its parameters are {}",
            unknown
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", "),
            needed
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    // One pass over the template: a value is never searched for
    // placeholders again, so values that hold `{name}` cannot multiply.
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        let name_end = tail.find('}').filter(|_| tail.starts_with('{'));
        match name_end.and_then(|end| values.get(&tail[1..end]).map(|v| (end, v))) {
            Some((end, v)) => {
                match v {
                    Value::String(s) => out.push_str(s),
                    other => out.push_str(&other.to_string()),
                }
                rest = &tail[end + 1..];
            }
            None => {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        if out.len() > MAX_FILLED {
            return Err(ToolError::refused(format!(
                "the filled recipe would be over {} KiB; use shorter values",
                MAX_FILLED >> 10
            )));
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Largest text a filled recipe may be.
const MAX_FILLED: usize = 256 << 10;

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum RecipeAction {
    Save,
    Fill,
    List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeArgs {
    action: RecipeAction,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    values: serde_json::Map<String, Value>,
}

fn recipe(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: RecipeArgs = parse_args("recipe", args)?;
    let need_name = || {
        a.name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| ToolError::refused("this action needs `name`"))
    };
    let text = match a.action {
        RecipeAction::Save => {
            let name = need_name()?;
            let template = a.template.clone().ok_or_else(|| {
                ToolError::refused("save needs `template`, e.g. \"Dear {name}, …\"")
            })?;
            let params = placeholders(&template)?;
            tb.store().save_recipe(&name, &template)?;
            format!(
                "saved recipe `{name}` with parameters: {}",
                params.into_iter().collect::<Vec<_>>().join(", ")
            )
        }
        RecipeAction::Fill => {
            let name = need_name()?;
            let template = tb.store().recipe(&name)?.ok_or_else(|| {
                ToolError::refused(format!("there is no recipe `{name}`; list shows them"))
            })?;
            fill(&template, &a.values)?
        }
        RecipeAction::List => {
            let all = tb.store().recipes()?;
            if all.is_empty() {
                "no recipes yet".to_string()
            } else {
                all.iter()
                    .map(|(n, t)| {
                        let params = placeholders(t).unwrap_or_default();
                        format!("{n}({})", params.into_iter().collect::<Vec<_>>().join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
    };
    Ok(text.into())
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "notes",
        description:
            "Your notes, kept across channels and days: create, list, search (by meaning), delete.",
        parameters: || {
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["create", "list", "search", "delete"]},
                "title": {"type": "string"},
                "text": {"type": "string", "description": "the note (create)"},
                "query": {"type": "string", "description": "what to look for (search)"},
                "id": {"type": "integer", "description": "note id (delete)"}
            }, "required": ["action"]})
        },
        run: notes,
    },
    ToolDef {
        name: "recipe",
        description: "Reusable text templates with {parameters}: save, fill (with values), list.",
        parameters: || {
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["save", "fill", "list"]},
                "name": {"type": "string"},
                "template": {"type": "string", "description": "text with {parameter} slots (save)"},
                "values": {"type": "object", "description": "parameter values (fill)"}
            }, "required": ["action"]})
        },
        run: recipe,
    },
];

#[cfg(test)]
mod tests {
    #[test]
    fn recency_halves_its_bonus_each_month_untouched() {
        let day = 86_400_000i64;
        let now = 1000 * day;
        assert_eq!(super::recency(now, now), 1.0);
        assert!((super::recency(now - 30 * day, now) - 0.75).abs() < 1e-9);
        assert!((super::recency(now - 60 * day, now) - 0.625).abs() < 1e-9);
        assert!(super::recency(0, now) > 0.5);
    }

    use super::*;

    #[test]
    fn templates_fill_and_complain() {
        let t = "Dear {name}, your {item} ships {{soon}}.";
        assert_eq!(
            placeholders(t).unwrap().into_iter().collect::<Vec<_>>(),
            ["item", "name"]
        );
        let v = json!({"name": "Ada", "item": "lathe"});
        assert_eq!(
            fill(t, v.as_object().unwrap()).unwrap(),
            "Dear Ada, your lathe ships {soon}."
        );
        let e = fill(t, json!({"name": "Ada"}).as_object().unwrap()).unwrap_err();
        assert!(e.to_string().contains("missing values for `item`"), "{e}");
        let e = fill(
            t,
            json!({"name": "A", "item": "b", "x": 1})
                .as_object()
                .unwrap(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("no parameter `x`"), "{e}");
        assert!(placeholders("a {b").is_err());
    }
}
