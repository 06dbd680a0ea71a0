//! What can go wrong in a turn, with what to do about it.

use reverie_infer::InferError;
use reverie_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error("the message is empty; type something to send")]
    EmptyMessage,
    #[error("there is no message to answer again in this channel")]
    NothingToAnswerAgain,
    #[error("only your own messages can be edited")]
    NotYourMessage,
    #[error("message {message} is not in channel {channel:?}")]
    NoSuchMessage { message: i64, channel: String },
    #[error(transparent)]
    Tool(#[from] reverie_tools::ToolError),
    #[error("the agent of this channel has stopped; reopen the channel")]
    ActorGone,
    #[error("the channel's agent could not start: {0}")]
    Actor(String),
}
