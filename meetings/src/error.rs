//! The application's one error type, mapped to HTTP in one place: every error
//! answers `{error: <code>, message: <text>}` with spec 03's codes.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// What went wrong, as the client sees it.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 401 `unauthorized`: a missing, invalid or expired token or wrong credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `forbidden`.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// 400 `validation_error`: the request body or query is invalid.
    #[error("{0}")]
    Validation(String),
    /// 409 `conflict`: the resource's state does not allow the move (a meeting
    /// started twice), or a unique field is taken.
    #[error("{0}")]
    Conflict(String),
    /// 429 `rate_limited`, with the seconds until a retry may succeed.
    #[error("{message}")]
    RateLimited { message: String, retry_after_secs: u64 },
    /// 503 `unavailable`: the database did not answer.
    #[error("{0}")]
    Unavailable(String),
    /// 500 `internal_error`.
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Validation(_) => StatusCode::BAD_REQUEST,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::Unauthorized(_) => "unauthorized",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound(_) => "not_found",
            AppError::Validation(_) => "validation_error",
            AppError::Conflict(_) => "conflict",
            AppError::RateLimited { .. } => "rate_limited",
            AppError::Unavailable(_) => "unavailable",
            AppError::Internal(_) => "internal_error",
        }
    }
}

/// The error body of every failed request.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: &'static str,
    pub message: String,
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(message) | AppError::Unavailable(message) = &self {
            tracing::warn!(code = self.code(), "{message}");
        }
        let retry_after = match &self {
            AppError::RateLimited { retry_after_secs, .. } => Some(*retry_after_secs),
            // The database is busy or electing: worth retrying shortly.
            AppError::Unavailable(_) => Some(1),
            _ => None,
        };
        let mut response = (self.status(), Json(ErrorBody { error: self.code(), message: self.to_string() })).into_response();
        if let Some(secs) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        response
    }
}

/// Request bodies and queries that do not parse answer `validation_error`.
impl From<axum::extract::rejection::JsonRejection> for AppError {
    fn from(e: axum::extract::rejection::JsonRejection) -> Self {
        AppError::Validation(e.body_text())
    }
}

impl From<axum::extract::rejection::QueryRejection> for AppError {
    fn from(e: axum::extract::rejection::QueryRejection) -> Self {
        AppError::Validation(e.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for AppError {
    fn from(e: axum::extract::rejection::PathRejection) -> Self {
        AppError::NotFound(e.body_text())
    }
}

pub type AppResult<T> = Result<T, AppError>;
