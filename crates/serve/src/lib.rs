//! `reverie serve`: an OpenAI-compatible API on 127.0.0.1 for the user's
//! other tools, on the same engine (slots, fair queue) the app uses.
//!
//! `GET /v1/models` and `POST /v1/chat/completions` (streamed over
//! server-sent events or not) with `tools` and `tool_choice` in the
//! model's own call format, `response_format` JSON schemas, the usual
//! sampling fields, `stop` and `usage`. Every request needs the bearer
//! token kept in the data folder; errors come in OpenAI's shape. Each
//! exchange is recorded as a channel the nights learn from ([`record`]),
//! unless the server was started without a recorder.

mod chat;
mod error;
pub mod record;
mod token;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use reverie_infer::{Engine, GenEvent};
use serde_json::{json, Value};

pub use error::ApiError;
pub use token::{api_token, TOKEN_FILE};

/// What the server shares between requests.
pub struct Server {
    pub engine: Arc<Engine>,
    /// The model's id in `/v1/models` (its file name without `.gguf`).
    pub model_id: String,
    pub token: String,
    /// Where exchanges are recorded (`None`: not recorded).
    pub recorder: Option<Arc<record::Recorder>>,
}

type Shared = Arc<Server>;

/// The API's routes, behind the token check.
pub fn router(server: Server) -> Router {
    let shared: Shared = Arc::new(server);
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(completions))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            require_token,
        ))
        .with_state(shared)
}

/// Serves on `listener` until the future is dropped.
pub async fn serve(listener: tokio::net::TcpListener, server: Server) -> std::io::Result<()> {
    axum::serve(listener, router(server)).await
}

async fn require_token(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if token::same(t, &s.token) => next.run(req).await,
        _ => ApiError::Unauthorized.into_response(),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn models(State(s): State<Shared>) -> Json<Value> {
    Json(json!({"object": "list", "data": [{
        "id": s.model_id, "object": "model", "created": now(), "owned_by": "reverie",
    }]}))
}

/// The body as a request, with OpenAI's error for bad JSON.
fn parse(body: &[u8]) -> Result<chat::CompletionRequest, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the request body is not a valid chat completion request: {e}"
        ))
    })
}

async fn completions(
    State(s): State<Shared>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req = parse(&body)?;
    let stream = req.stream;
    let engine = s.engine.clone();
    let model_id = s.model_id.clone();
    let prepared = {
        let engine = engine.clone();
        let id = model_id.clone();
        tokio::task::spawn_blocking(move || chat::prepare(&engine, &id, req))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))??
    };
    let id = format!("chatcmpl-{:016x}", rand::random::<u64>());
    let created = now();
    if stream {
        let recorder = s.recorder.clone();
        return Ok(stream_reply(engine, prepared, recorder, id, created, model_id).into_response());
    }
    let chat::Prepared {
        generate,
        reading,
        prompt_tokens,
        exchange,
    } = prepared;
    let recorder = s.recorder.clone();
    let completion = tokio::task::spawn_blocking(move || {
        let c = engine.generate(generate)?.complete()?;
        keep(recorder.as_deref(), &exchange, &c);
        Ok::<_, ApiError>(c)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    tracing::debug!(text = %completion.text, "reply");
    let message = chat::message(&reading, &completion.text);
    let calls = message.get("tool_calls").is_some();
    Ok(Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model_id,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": chat::finish_reason(completion.reason, calls),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion.ids.len(),
            "total_tokens": prompt_tokens + completion.ids.len(),
        },
    }))
    .into_response())
}

/// Records an exchange where the server records; a failure is logged, never
/// the client's problem.
fn keep(
    recorder: Option<&record::Recorder>,
    ex: &record::Exchange,
    reply: &reverie_infer::Completion,
) {
    if let Some(r) = recorder {
        if let Err(e) = r.record(ex, reply) {
            tracing::warn!("could not record an API exchange: {e}");
        }
    }
}

/// Streams the reply as chat.completion.chunk events. Text streams as it
/// is generated, through the format's parser (so the template's own
/// markers never reach the client); when the caller gave tools or a call
/// is required, the reply is held until the end and the parsed message
/// (content, calls) is sent then, so a call is never shown half-written.
fn stream_reply(
    engine: Arc<Engine>,
    prepared: chat::Prepared,
    recorder: Option<Arc<record::Recorder>>,
    id: String,
    created: u64,
    model: String,
) -> Sse<tokio_stream::wrappers::UnboundedReceiverStream<Result<Event, std::convert::Infallible>>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let chunk = move |delta: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut v = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            v["usage"] = u;
        }
        Ok(Event::default().data(v.to_string()))
    };
    tokio::task::spawn_blocking(move || {
        let chat::Prepared {
            generate,
            reading,
            prompt_tokens,
            exchange,
        } = prepared;
        let hold = match &reading {
            chat::Reading::Format { tools, .. } => *tools,
            chat::Reading::JsonCall | chat::Reading::Json => true,
        };
        let mut text = String::new();
        let mut sent = 0;
        let send = |e| tx.send(e).is_ok();
        send(chunk(
            json!({"role": "assistant", "content": ""}),
            None,
            None,
        ));
        let generation = match engine.generate(generate) {
            Ok(g) => g,
            Err(e) => {
                let err = json!({"error": {"message": e.to_string(), "type": "server_error"}});
                send(Ok(Event::default().data(err.to_string())));
                return;
            }
        };
        let cancel = generation.canceller();
        let result = generation.complete_with(|ev| {
            if let GenEvent::Token { piece, .. } = ev {
                text.push_str(piece);
                if hold {
                    return;
                }
                // What the parser reads as content so far, sent as it grows.
                let content = chat::partial_content(&reading, &text);
                if content.len() > sent && content.is_char_boundary(sent) {
                    let delta = content[sent..].to_string();
                    sent = content.len();
                    if !send(chunk(json!({"content": delta}), None, None)) {
                        // The client went away.
                        cancel();
                    }
                }
            }
        });
        match result {
            Ok(c) => {
                keep(recorder.as_deref(), &exchange, &c);
                let mut calls = false;
                if !hold {
                    let content = chat::message(&reading, &c.text)["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if content.len() > sent && content.is_char_boundary(sent) {
                        send(chunk(json!({"content": &content[sent..]}), None, None));
                    }
                } else {
                    let mut message = chat::message(&reading, &c.text);
                    calls = message.get("tool_calls").is_some();
                    if let Some(list) = message.get_mut("tool_calls").and_then(Value::as_array_mut)
                    {
                        for (i, call) in list.iter_mut().enumerate() {
                            call["index"] = json!(i);
                        }
                    }
                    message.as_object_mut().map(|m| m.remove("role"));
                    send(chunk(message, None, None));
                }
                let usage = json!({
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": c.ids.len(),
                    "total_tokens": prompt_tokens + c.ids.len(),
                });
                send(chunk(
                    json!({}),
                    Some(chat::finish_reason(c.reason, calls)),
                    Some(usage),
                ));
            }
            Err(e) => {
                let err = json!({"error": {"message": e.to_string(), "type": "server_error"}});
                send(Ok(Event::default().data(err.to_string())));
            }
        }
        send(Ok(Event::default().data("[DONE]")));
    });
    Sse::new(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
}
