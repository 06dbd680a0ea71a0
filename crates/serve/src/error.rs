//! Errors in OpenAI's shape (`{"error": {"message", "type", "param",
//! "code"}}`) with the HTTP status a client library expects.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{message}")]
    BadParam {
        param: &'static str,
        message: String,
    },
    #[error("missing or wrong API key; send `Authorization: Bearer <token>` with the token `reverie serve --show-token` prints")]
    Unauthorized,
    #[error("the model `{asked}` does not exist; this server runs `{served}` (GET /v1/models)")]
    UnknownModel { asked: String, served: String },
    #[error("{0}")]
    ContextFull(String),
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::BadParam { .. } | ApiError::ContextFull(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::UnknownModel { .. } => StatusCode::NOT_FOUND,
            ApiError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind_and_code(&self) -> (&'static str, Option<&'static str>, Option<&'static str>) {
        match self {
            ApiError::BadRequest(_) => ("invalid_request_error", None, None),
            ApiError::BadParam { param, .. } => ("invalid_request_error", Some(param), None),
            ApiError::Unauthorized => ("invalid_request_error", None, Some("invalid_api_key")),
            ApiError::UnknownModel { .. } => (
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
            ApiError::ContextFull(_) => (
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
            ApiError::Busy(_) => ("rate_limit_error", None, Some("rate_limit_exceeded")),
            ApiError::Internal(_) => ("server_error", None, None),
        }
    }
}

impl From<reverie_infer::InferError> for ApiError {
    fn from(e: reverie_infer::InferError) -> Self {
        use reverie_infer::InferError as E;
        match e {
            E::ContextFull { .. } => ApiError::ContextFull(e.to_string()),
            E::Busy { .. } => ApiError::Busy(e.to_string()),
            E::EmptyPrompt => ApiError::BadParam {
                param: "messages",
                message: e.to_string(),
            },
            E::Template(_) | E::Grammar(_) => ApiError::BadRequest(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (kind, param, code) = self.kind_and_code();
        let body = json!({"error": {
            "message": self.to_string(),
            "type": kind,
            "param": param,
            "code": code,
        }});
        let mut r = (self.status(), axum::Json(body)).into_response();
        if matches!(self, ApiError::Busy(_)) {
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
        }
        r
    }
}
