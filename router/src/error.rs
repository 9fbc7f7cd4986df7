//! The router's error type, and its one mapping to HTTP.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tessera_api::http::ErrorBody;

/// Every way a request can fail, as the client sees it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    RangeNotSatisfiable(String),
    #[error(
        "no users are provisioned: restart a router with SERVICE_ADMIN_USERNAME and SERVICE_ADMIN_PASSWORD set \
         to create the first admin (or SERVICE_OPEN_BOOTSTRAP=true for anonymous reads)"
    )]
    NotProvisioned,
    #[error("{0}")]
    Unavailable(String),
    #[error("the write is committed by a majority but not yet applied on every replica: {0}")]
    NotAppliedEverywhere(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// HTTP status and stable code of the error.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "BAD_REQUEST"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "CONFLICT"),
            ApiError::RangeNotSatisfiable(_) => (StatusCode::RANGE_NOT_SATISFIABLE, "RANGE_NOT_SATISFIABLE"),
            ApiError::NotProvisioned => (StatusCode::SERVICE_UNAVAILABLE, "NOT_PROVISIONED"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            ApiError::NotAppliedEverywhere(_) => (StatusCode::GATEWAY_TIMEOUT, "NOT_APPLIED_EVERYWHERE"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(%status, "request failed: {self}");
        }
        (status, Json(ErrorBody { error: self.to_string(), code: code.to_string() })).into_response()
    }
}

impl From<crate::cluster::ClusterError> for ApiError {
    fn from(e: crate::cluster::ClusterError) -> Self {
        use crate::cluster::ClusterError as C;
        match e {
            C::NotAppliedEverywhere(m) => ApiError::NotAppliedEverywhere(m),
            C::BadRequest(m) => ApiError::BadRequest(m),
            C::Unavailable(m) => ApiError::Unavailable(m),
            C::UnexpectedReply(m) | C::Storage(m) => ApiError::Internal(m),
        }
    }
}

impl ApiError {
    /// The error for a command its engine refused.
    pub fn rejected(kind: tessera_api::command::RejectKind, message: String) -> Self {
        use tessera_api::command::RejectKind as K;
        match kind {
            K::NotFound => ApiError::NotFound(message),
            K::Conflict => ApiError::Conflict(message),
            K::Invalid => ApiError::BadRequest(message),
        }
    }

    /// The error for a reply of an unexpected shape.
    pub fn unexpected<T: std::fmt::Debug>(other: T) -> Self {
        ApiError::Internal(format!("unexpected reply from the cluster: {other:?}"))
    }
}
