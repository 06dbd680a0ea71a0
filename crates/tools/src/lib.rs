//! The agent's tools: what it can do on its user's machine, each with a JSON
//! schema, limits, and error texts that tell the model what to do next.
//!
//! A [`Toolbox`] belongs to one channel. Every file path resolves inside the
//! channel's [`Workspace`]: `..`, absolute paths and symlinks that lead out
//! are refused. Every file-changing tool records a revision (forward and
//! inverse edits, contents in the blob store), so `undo` and `redo` work
//! across restarts. Things several channels share (background jobs, the
//! embedding model, the camera) live in one [`Services`].
//!
//! Tools, by family: files (`read_file`, `write_file`, `edit_file`,
//! `list_dir`, `make_dir`, `delete_path`, `file_info`, `tree`, `undo`,
//! `redo`), search (`grep`, `glob`), python (`python`, `jobs`, `outline`),
//! notes and recipes (`notes`, `recipe`), `git`, media (`read_pdf`,
//! `load_image`, `capture_webcam`, `send_file`), `health`, `update_sys`
//! and `board`.
//!
//! This crate must never talk to the model: it takes arguments and returns
//! text (and attachments); the agent loop decides what the model sees.
//!
//! ```
//! use std::sync::Arc;
//! use reverie_core::Home;
//! use reverie_store::Store;
//! use reverie_tools::{Services, Toolbox};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let home = Home::new(dir.path().join("data"));
//! let store = Arc::new(Store::open(&home).unwrap());
//! let channel = store.ensure_channel("general").unwrap();
//! let services = Arc::new(Services::new(&home));
//! let tools = Toolbox::open(store, channel, services).unwrap();
//! tools.call("write_file", &serde_json::json!({"path": "a.txt", "content": "hi\n"})).unwrap();
//! let out = tools.call("read_file", &serde_json::json!({"path": "a.txt"})).unwrap();
//! assert!(out.text.contains("hi"));
//! tools.call("undo", &serde_json::json!({})).unwrap();
//! assert!(tools.call("read_file", &serde_json::json!({"path": "a.txt"})).is_err());
//! ```

pub mod attachments;
mod beneath;
mod board;
pub mod calculator;
mod camera;
mod error;
mod files;
mod git;
mod health;
mod history;
mod jobs;
mod media;
pub mod note_cleaning;
mod notes;
mod output;
pub mod past;
mod python;
mod sandbox;
mod search;
mod services;
mod system;
mod table;
mod workspace;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use reverie_core::ChannelId;
use reverie_store::Store;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[cfg(feature = "webcam")]
pub use camera::DeviceCamera;
pub use camera::{Frame, FrameSource, NoCamera, SyntheticCamera};
pub use error::ToolError;
pub use files::UNCHANGED;
pub use jobs::JobTable;
pub use media::image_kind;
pub use sandbox::{SandboxMode, Support as SandboxSupport};
pub use services::Services;
pub use system::{agent_section_text, section_with_summary};
pub use table::COLUMN_TOTALS;
pub use workspace::{Workspace, SCRATCHPAD};

/// A file or image the tool puts into the chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Content hash in the blob store.
    pub blob: String,
    pub name: String,
    pub is_image: bool,
}

/// What a successful call returns: text for the model and, for media tools,
/// attachments for the chat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub attachments: Vec<Attachment>,
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput {
            text,
            attachments: Vec::new(),
        }
    }
}

/// One tool: its name, what it is for, its parameter schema, its code.
pub(crate) struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: fn() -> Value,
    pub run: fn(&Toolbox, &Value) -> Result<ToolOutput, ToolError>,
}

fn all_tools() -> impl Iterator<Item = &'static ToolDef> {
    [
        files::TOOLS,
        history::TOOLS,
        search::TOOLS,
        python::TOOLS,
        jobs::TOOLS,
        notes::TOOLS,
        git::TOOLS,
        media::TOOLS,
        health::TOOLS,
        system::TOOLS,
        board::TOOLS,
        calculator::TOOLS,
    ]
    .into_iter()
    .flatten()
}

/// Names of every tool, in the order the model is shown them.
pub fn tool_names() -> Vec<&'static str> {
    all_tools().map(|t| t.name).collect()
}

/// The tool definitions in the OpenAI / Hermes function format the chat
/// templates expect.
pub fn definitions() -> Vec<Value> {
    all_tools()
        .map(|t| {
            serde_json::json!({
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": (t.parameters)(),
                }
            })
        })
        .collect()
}

/// The most text any one tool call returns; each tool pages or caps below
/// this, and this holds for all of them.
pub const MAX_TOOL_OUTPUT: usize = 32 << 10;

/// How long a call may take before the caller stops waiting for it:
/// process tools bound their own run (their timeout plus a margin), the
/// others get a minute.
fn deadline(name: &str) -> std::time::Duration {
    std::time::Duration::from_secs(match name {
        "python" | "jobs" | "git" | "outline" => 11 * 60,
        _ => 60,
    })
}

/// One channel's tools.
#[derive(Clone)]
pub struct Toolbox {
    store: Arc<Store>,
    channel: ChannelId,
    channel_name: String,
    workspace: Workspace,
    services: Arc<Services>,
    stop: Arc<AtomicBool>,
}

/// Where `channel`'s file tools work: the folder set on the channel, else
/// `<id>` in the default workspaces folder, outside the data folder.
pub fn workspace_root(channel: &reverie_store::Channel, services: &Services) -> std::path::PathBuf {
    if channel.workspace.trim().is_empty() {
        services.default_workspace(channel.id)
    } else {
        channel.workspace.clone().into()
    }
}

impl Toolbox {
    /// The tools of `channel`, working in its workspace (the one set on the
    /// channel, else `<id>` in the default workspaces folder, outside the
    /// data folder).
    pub fn open(
        store: Arc<Store>,
        channel: ChannelId,
        services: Arc<Services>,
    ) -> Result<Toolbox, ToolError> {
        let info = store.channel(channel)?;
        let root = workspace_root(&info, &services);
        let workspace = Workspace::open(&root)?;
        Ok(Toolbox {
            store,
            channel,
            channel_name: info.name,
            workspace,
            services,
            stop: Arc::default(),
        })
    }

    /// A switch that stops the running call (a Python run, git) from
    /// another thread, e.g. the chat's Stop button. Each call clears it.
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub(crate) fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn channel(&self) -> ChannelId {
        self.channel
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Embeddings of `texts` (cached in the store), or `None` when the
    /// embedding model is not installed.
    pub fn embeddings(&self, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>, ToolError> {
        let Some(embedder) = self.services.embedder() else {
            return Ok(None);
        };
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        reverie_embed::embed_cached(embedder, &self.store, &texts)
            .map(Some)
            .map_err(|e| ToolError::Failed {
                what: "embedding".into(),
                detail: e.to_string(),
            })
    }

    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Stores the workspace image `rel` (a file the person attached) as a
    /// blob and returns its hash.
    pub fn store_image(&self, rel: &str) -> Result<String, ToolError> {
        media::store_image(self, rel).map(|(hash, _, _)| hash.0)
    }

    pub(crate) fn channel_name(&self) -> &str {
        &self.channel_name
    }

    /// The cage for a process this channel's tools start: read-write in
    /// the workspace only, plus `readable` (a Python outside /usr).
    pub(crate) fn cage(
        &self,
        limits: sandbox::Limits,
        readable: Vec<std::path::PathBuf>,
    ) -> sandbox::Cage {
        sandbox::Cage {
            mode: self.services.sandbox(),
            writable: vec![self.workspace.root().to_path_buf()],
            readable,
            limits,
        }
    }

    /// Runs tool `name` with `args` (a JSON object; `null` counts as `{}`).
    ///
    /// The tool runs on a thread of its own. The caller stops waiting when
    /// the stop switch is thrown or the tool's deadline passes, so a stuck
    /// tool never holds up the chat, the Stop button or quitting (the
    /// thread is left to finish, its result dropped).
    pub fn call(&self, name: &str, args: &Value) -> Result<ToolOutput, ToolError> {
        self.call_within(name, args, deadline(name))
    }

    /// [`Toolbox::call`] with an explicit deadline.
    pub fn call_within(
        &self,
        name: &str,
        args: &Value,
        deadline: std::time::Duration,
    ) -> Result<ToolOutput, ToolError> {
        use std::sync::atomic::Ordering;
        let tool = all_tools()
            .find(|t| t.name == name)
            .ok_or_else(|| ToolError::UnknownTool {
                name: name.to_string(),
                available: tool_names().join(", "),
            })?;
        self.stop.store(false, Ordering::SeqCst);
        let args = if args.is_null() {
            Value::Object(Default::default())
        } else {
            without_schema_words(args, &(tool.parameters)())
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let me = self.clone();
        std::thread::Builder::new()
            .name(format!("tool-{name}"))
            .spawn(move || {
                let _ = tx.send((tool.run)(&me, &args));
            })
            .map_err(|e| ToolError::Failed {
                what: "starting the tool".into(),
                detail: e.to_string(),
            })?;
        let started = std::time::Instant::now();
        let result = loop {
            match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(r) => break r,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(ToolError::Failed {
                        what: format!("the tool {name}"),
                        detail: "it crashed".into(),
                    })
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if self.stop.load(Ordering::SeqCst) {
                        break Err(ToolError::refused("stopped by the user before it finished"));
                    }
                    if started.elapsed() >= deadline {
                        // Ask it to stop too (process tools honour this).
                        self.stop.store(true, Ordering::SeqCst);
                        break Err(ToolError::refused(format!(
                            "{name} took longer than {} s and was abandoned; try a smaller piece of the work",
                            deadline.as_secs()
                        )));
                    }
                }
            }
        };
        let mut out = match result {
            Err(ToolError::NotFound { path, near }) if near.is_empty() => {
                let near = self.workspace.same_names(&path);
                return Err(ToolError::NotFound {
                    path,
                    near: if near.is_empty() {
                        String::new()
                    } else {
                        format!("; did you mean `{}`?", near.join("` or `"))
                    },
                });
            }
            r => r?,
        };
        out.text = output::cap(&out.text, MAX_TOOL_OUTPUT);
        Ok(out)
    }
}

/// JSON-schema words small models copy from a tool's definition into their
/// arguments (`"required": ["expression"]` next to the expression).
const SCHEMA_WORDS: [&str; 5] = [
    "required",
    "type",
    "properties",
    "description",
    "additionalProperties",
];

/// `args` without the schema words that are not arguments of the tool, so
/// a call whose intent is clear is not refused for the copy.
fn without_schema_words(args: &Value, parameters: &Value) -> Value {
    let declared = |k: &str| parameters["properties"].get(k).is_some();
    match args {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !SCHEMA_WORDS.contains(&k.as_str()) || declared(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Parses a tool's arguments, naming the tool in the error.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &'static str,
    args: &Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args.clone()).map_err(|e| ToolError::BadArguments {
        tool,
        detail: e.to_string(),
    })
}
