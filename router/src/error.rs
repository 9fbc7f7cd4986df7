//! The router's error type, and its one mapping to HTTP.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tessera_api::error::{ErrorClass, Rejection};
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
    /// The caller's address is on the block list (403 `IP_BLOCKED`).
    #[error("{0}")]
    IpBlocked(String),
    /// The caller went over its request rate (429 `RATE_LIMITED`).
    #[error("{0}")]
    RateLimited(String),
    /// The path exists, not with this method (405 `METHOD_NOT_ALLOWED`, with
    /// the methods it takes in `Allow`).
    #[error("{method} is not a method of {path}: it takes {allow}")]
    MethodNotAllowed { method: String, path: String, allow: String },
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
    /// A vault secret operation while this router's vault is sealed (503).
    #[error("{0}")]
    VaultSealed(String),
    #[error("the write is committed by a majority but not yet applied on every replica: {0}")]
    NotAppliedEverywhere(String),
    /// A lifecycle call whose wait ran out; the message names what is still pending (504).
    #[error("{0}")]
    StillPending(String),
    #[error("{0}")]
    Internal(String),
    /// Range sharding: the key's range moved to another group and the map did
    /// not settle within the router's retries (503).
    #[error("{0}")]
    RangeMoved(String),
    /// An engine refused the request; the status follows its code's class.
    #[error("{}", .0.message)]
    Rejected(Rejection),
    /// A SQL statement was refused: SQL's own body, with the statement.
    #[error("{}", .rejection.message)]
    Sql { rejection: Rejection, sql: String },
}

impl ApiError {
    /// HTTP status and stable code of the error.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "BAD_REQUEST"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            ApiError::IpBlocked(_) => (StatusCode::FORBIDDEN, "IP_BLOCKED"),
            ApiError::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED"),
            ApiError::MethodNotAllowed { .. } => (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "CONFLICT"),
            ApiError::RangeNotSatisfiable(_) => (StatusCode::RANGE_NOT_SATISFIABLE, "RANGE_NOT_SATISFIABLE"),
            ApiError::NotProvisioned => (StatusCode::SERVICE_UNAVAILABLE, "NOT_PROVISIONED"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            ApiError::VaultSealed(_) => (StatusCode::SERVICE_UNAVAILABLE, "VAULT_SEALED"),
            ApiError::NotAppliedEverywhere(_) => (StatusCode::GATEWAY_TIMEOUT, "NOT_APPLIED_EVERYWHERE"),
            ApiError::StillPending(_) => (StatusCode::GATEWAY_TIMEOUT, "STILL_PENDING"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
            ApiError::RangeMoved(_) => (StatusCode::SERVICE_UNAVAILABLE, "RANGE_MOVED"),
            ApiError::Rejected(r) | ApiError::Sql { rejection: r, .. } => match r.code.class() {
                ErrorClass::NotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
                ErrorClass::Conflict => (StatusCode::CONFLICT, "CONFLICT"),
                ErrorClass::Invalid => (StatusCode::BAD_REQUEST, "BAD_REQUEST"),
                ErrorClass::Timeout => (StatusCode::REQUEST_TIMEOUT, "QUERY_TIMEOUT"),
                ErrorClass::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
                ErrorClass::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            },
        }
    }

    /// The body of the error: `{error, code}`, with SQL's and positioned
    /// rejections' own fields.
    fn body(&self, code: &str) -> serde_json::Value {
        match self {
            ApiError::Sql { rejection: r, .. } if r.code.class() == ErrorClass::Timeout => {
                json!({"success": false, "error": r.message})
            }
            ApiError::Sql { rejection: r, sql } => {
                let position = r.position.map(|p| json!({"line": p.line, "column": p.column}));
                json!({"error": {"code": r.code.as_str(), "message": r.message, "position": position, "sql": sql}})
            }
            ApiError::Rejected(r) if r.position.is_some() => {
                let p = r.position.expect("checked");
                let mut body = json!({
                    "error": format!("{} (line {}, column {})", r.message, p.line, p.column),
                    "code": code,
                    "line": p.line,
                    "column": p.column,
                });
                if let Some(offset) = p.offset {
                    body["position"] = json!(offset);
                }
                body
            }
            _ => serde_json::to_value(ErrorBody { error: self.to_string(), code: code.to_string() }).unwrap_or_default(),
        }
    }

    /// A SQL rejection of statement `sql`.
    pub fn sql(rejection: Rejection, sql: &str) -> Self {
        ApiError::Sql { rejection, sql: sql.to_string() }
    }
}

impl From<Rejection> for ApiError {
    /// By the code's class; a rejection that points into the request text
    /// keeps its position (and its own body).
    fn from(r: Rejection) -> Self {
        if r.position.is_some() {
            return ApiError::Rejected(r);
        }
        if r.code == tessera_api::error::ErrorCode::RangeMoved {
            return ApiError::RangeMoved(r.message);
        }
        match r.code.class() {
            ErrorClass::NotFound => ApiError::NotFound(r.message),
            ErrorClass::Conflict => ApiError::Conflict(r.message),
            ErrorClass::Invalid => ApiError::BadRequest(r.message),
            ErrorClass::Internal => ApiError::Internal(r.message),
            ErrorClass::Unavailable => ApiError::Unavailable(r.message),
            ErrorClass::Timeout => ApiError::Rejected(r),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(%status, "request failed: {self}");
        }
        let body = Json(self.body(code));
        if let ApiError::MethodNotAllowed { allow, .. } = &self
            && let Ok(allow) = axum::http::HeaderValue::from_str(allow)
        {
            return (status, [(axum::http::header::ALLOW, allow)], body).into_response();
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Busy or electing: worth retrying shortly (HTTP's Retry-After, in seconds).
            return (status, [(axum::http::header::RETRY_AFTER, "1")], body).into_response();
        }
        (status, body).into_response()
    }
}

impl From<crate::services::backup::BackupError> for ApiError {
    /// A corrupt, truncated or unreadable backup is the request's fault (400):
    /// nothing was written.
    fn from(e: crate::services::backup::BackupError) -> Self {
        use crate::services::backup::BackupError as B;
        match e {
            B::NotFound(id) => ApiError::NotFound(format!("backup {id} does not exist")),
            B::BadRequest(m) | B::Corrupt(m) => ApiError::BadRequest(m),
            B::Conflict(m) => ApiError::Conflict(m),
            B::Cluster(c) => c.into(),
            B::Io(e) => ApiError::Internal(format!("backup directory: {e}")),
        }
    }
}

impl From<crate::cluster::ClusterError> for ApiError {
    fn from(e: crate::cluster::ClusterError) -> Self {
        use crate::cluster::ClusterError as C;
        match e {
            C::NotAppliedEverywhere(m) => ApiError::NotAppliedEverywhere(m),
            C::BadRequest(m) => ApiError::BadRequest(m),
            C::Unavailable(m) | C::Incompatible(m) => ApiError::Unavailable(m),
            C::UnexpectedReply(m) | C::Storage(m) => ApiError::Internal(m),
        }
    }
}

impl ApiError {
    /// The error for a reply of an unexpected shape. Names only the reply's
    /// variant: replies can hold records with secrets (hashes, MFA secrets,
    /// vault ciphertexts), and 5xx messages are logged.
    pub fn unexpected<T: std::fmt::Debug>(other: T) -> Self {
        let shape = format!("{other:?}");
        let variant = shape.split(['(', '{', ' ']).next().unwrap_or_default();
        ApiError::Internal(format!("unexpected reply from the cluster: {variant}"))
    }
}

/// Largest declared request body an error answer keeps the connection open for.
const UNREAD_BODY_KEEPALIVE_BYTES: u64 = 64 * 1024;

/// What the error answer of a request needs to know of it.
#[derive(Clone, Copy)]
pub struct RequestShape {
    declared_body: u64,
    http1: bool,
}

impl RequestShape {
    pub fn of(req: &axum::extract::Request) -> Self {
        use axum::http::header::CONTENT_LENGTH;
        let declared_body =
            req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        RequestShape { declared_body, http1: req.version() < axum::http::Version::HTTP_2 }
    }
}

/// Error answers made outside the handlers (axum's extractor rejections — an
/// undecodable path segment or query string, a wrong content type, a body over
/// the limit — and 405s) get the same JSON body `{error, code}` as every other
/// error; their headers are kept. Applied by the front door to every answer.
pub async fn with_json_error_body(mut resp: Response, shape: RequestShape) -> Response {
    use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
    let RequestShape { declared_body, http1 } = shape;
    let status = resp.status();
    // A body refused before it was read to its end (too large, or refused by
    // authentication, rate limiting or the block list) makes hyper close the
    // connection after the response. Say so, or a client may reuse it for its
    // next request and see "connection closed before message completed".
    // Small bodies are drained by hyper and keep the connection; HTTP/2 has no
    // such header (a refused stream is reset on its own).
    let refused = status.is_client_error() || status.is_server_error();
    if http1 && (status == StatusCode::PAYLOAD_TOO_LARGE || (refused && declared_body > UNREAD_BODY_KEEPALIVE_BYTES)) {
        resp.headers_mut().insert(CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    let is_json = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let reason = status.canonical_reason().unwrap_or("error");
    let error = if text.is_empty() { reason.to_string() } else { text };
    let code = reason.to_ascii_uppercase().replace([' ', '-'], "_");
    let mut out = (status, Json(ErrorBody { error, code })).into_response();
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}
