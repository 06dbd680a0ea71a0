//! Tool failures, worded for the model that made the call: each says what
//! was wrong and what to do next.

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("there is no tool named `{name}`. Available tools: {available}")]
    UnknownTool { name: String, available: String },
    #[error(
        "bad arguments for {tool}: {detail}. Call it again with arguments that match its schema"
    )]
    BadArguments { tool: &'static str, detail: String },
    #[error("`{path}` is outside the workspace: {why}")]
    OutsideWorkspace { path: String, why: &'static str },
    #[error("no file or folder at `{path}`{near} (yet: write_file creates a file); paths are relative to the workspace root (\".\" is the root itself); list_dir or glob show what exists")]
    NotFound {
        path: String,
        /// "; did you mean `a/b.txt`?" where files of that name exist
        /// elsewhere in the workspace, else empty.
        near: String,
    },
    #[error("{0}")]
    Refused(String),
    #[error("{what} failed: {detail}")]
    Failed { what: String, detail: String },
    #[error("storage error: {0}")]
    Store(#[from] reverie_store::StoreError),
}

impl ToolError {
    pub fn refused(msg: impl Into<String>) -> ToolError {
        ToolError::Refused(msg.into())
    }

    /// An I/O error on `path` (shown relative to the workspace), with the
    /// common cases turned into advice.
    pub fn io(path: &str, err: std::io::Error) -> ToolError {
        use std::io::ErrorKind::*;
        match err.kind() {
            NotFound => ToolError::NotFound {
                path: path.to_string(),
                near: String::new(),
            },
            PermissionDenied => {
                ToolError::refused(format!("permission denied on `{path}`; it cannot be changed"))
            }
            StorageFull => ToolError::refused(format!(
                "the disk is full while writing `{path}`; nothing was changed. Free space (delete_path) and retry"
            )),
            _ => ToolError::Failed {
                what: format!("`{path}`"),
                detail: err.to_string(),
            },
        }
    }
}
