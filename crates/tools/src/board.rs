//! A message board shared by every channel, so channels working on one
//! project can coordinate.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{parse_args, ToolDef, ToolOutput, Toolbox};

const MAX_POST_BYTES: usize = 8 << 10;
const READ_LIMIT: usize = 50;

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum BoardAction {
    Post,
    Read,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoardArgs {
    action: BoardAction,
    #[serde(default = "main_board")]
    board: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    after: i64,
}

fn main_board() -> String {
    "main".into()
}

fn board(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: BoardArgs = parse_args("board", args)?;
    let text = match a.action {
        BoardAction::Post => {
            let text = a
                .text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::refused("post needs `text`"))?;
            if text.len() > MAX_POST_BYTES {
                return Err(ToolError::refused(
                    "posts are limited to 8 KiB; put long text in a file",
                ));
            }
            let id = tb
                .store()
                .post_to_board(&a.board, tb.channel_name(), &text)?;
            format!("posted #{id} on board `{}`", a.board)
        }
        BoardAction::Read => {
            let posts = tb.store().board_posts(&a.board, a.after, READ_LIMIT)?;
            if posts.is_empty() {
                format!("no posts on board `{}` after #{}", a.board, a.after)
            } else {
                let mut out: Vec<String> = posts
                    .iter()
                    .map(|p| format!("#{} from {}: {}", p.id, p.author, p.text))
                    .collect();
                if posts.len() == READ_LIMIT {
                    let last = posts.last().map_or(0, |p| p.id);
                    out.push(format!("… more; read again with after {last}"));
                }
                out.join("\n")
            }
        }
    };
    Ok(text.into())
}

pub(crate) const TOOLS: &[ToolDef] = &[ToolDef {
    name: "board",
    description:
        "A board shared by all channels: post a message, or read posts (after a post number).",
    parameters: || {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["post", "read"]},
            "board": {"type": "string", "description": "board name (default main)"},
            "text": {"type": "string"},
            "after": {"type": "integer", "description": "read posts after this number (default 0)"}
        }, "required": ["action"]})
    },
    run: board,
}];
