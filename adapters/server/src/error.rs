//! Errors as the API answers them: a status and `{"error": {"code", "message"}}`.
//!
//! The `code` is stable (clients branch on it); the `message` is for people and may change.
//! Every refusal of the server goes through [`ApiError`], including axum's own rejections of
//! a path, a query or a body, so no answer is ever plain text.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use turnstile_core::Rejection;
use turnstile_host::{SubmitError, WaitError};

/// A refused request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    #[must_use]
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    /// 400 `invalid_request`.
    #[must_use]
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404 with the given code.
    #[must_use]
    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 500 `store_error`: the store could not be read.
    #[must_use]
    pub fn store(e: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "store_error", e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 7235: a 401 names the scheme it wants.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        let message = e.to_string();
        match e {
            SubmitError::Rejected(Rejection::RunIdConflict(_)) => {
                ApiError::new(StatusCode::CONFLICT, "run_id_conflict", message)
            }
            SubmitError::Rejected(Rejection::Busy) => {
                ApiError::new(StatusCode::CONFLICT, "session_busy", message)
            }
            SubmitError::Rejected(Rejection::WorkspaceClosing) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", message)
            }
            SubmitError::Rejected(Rejection::ChildSession(_)) => {
                ApiError::new(StatusCode::BAD_REQUEST, "child_session", message)
            }
            SubmitError::Rejected(_) => ApiError::invalid(message),
            SubmitError::Invalid(turnstile_host::InvalidRequest::SessionNotFound(_)) => {
                ApiError::not_found("session_not_found", message)
            }
            SubmitError::Invalid(_) => ApiError::invalid(message),
            SubmitError::Stopped(_) => stopped(message),
            SubmitError::Store(_) => ApiError::store(message),
            // A variant added later is a server fault until it is mapped here.
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message),
        }
    }
}

impl From<WaitError> for ApiError {
    fn from(e: WaitError) -> ApiError {
        let message = e.to_string();
        match e {
            WaitError::NotFound(_) | WaitError::SeqNotFound(_) => {
                ApiError::not_found("run_not_found", message)
            }
            WaitError::Stopped(_) => stopped(message),
            _ => ApiError::store(message),
        }
    }
}

/// 503 `engine_stopped`: the host stopped (a storage failure); the next start recovers.
fn stopped(message: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "engine_stopped", message)
}
