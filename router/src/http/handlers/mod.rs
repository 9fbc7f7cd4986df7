//! HTTP handlers, one module per resource, thin over the cluster client, plus
//! the extractors they share.

pub mod admin;
pub mod auth;
pub mod backup;
pub mod compliance;
pub mod compliance_erasure;
pub mod compliance_reports;
pub mod compliance_subject;
pub mod compress;
pub mod consistency;
pub mod document;
pub mod encryption;
pub mod graph;
pub mod health;
pub mod import;
pub mod kv;
pub mod monitoring;
pub mod nodes;
pub mod object;
pub mod security;
pub mod sql;
pub mod stream;
pub mod timeseries;
pub mod update;
pub mod users;
pub mod vault;
pub mod vector;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;

use crate::cluster::Served;
use crate::error::ApiError;
use crate::state::{AppState, parse_consistency};

/// A JSON body whose every failure (unreadable, too large, malformed, wrong
/// shape) becomes a JSON [`ApiError`].
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(format!("request body too large: {e}"))
            } else {
                ApiError::BadRequest(format!("unreadable request body: {e}"))
            }
        })?;
        // Every request body of the interface is a JSON object (serde would
        // otherwise also take a struct from an array).
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => return Err(ApiError::BadRequest("a JSON request body is required".into())),
            Some(b'{') => {}
            Some(_) => return Err(ApiError::BadRequest("the request body must be a JSON object".into())),
        }
        decode_body(&bytes).map(JsonBody)
    }
}

/// Decodes a JSON request body; an error names the field at fault
/// (`invalid JSON body: at items[2].key: invalid type: …`), as a client
/// generated from the OpenAPI document needs to tell what it sent wrong.
fn decode_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ApiError::BadRequest(if path == "." {
            format!("invalid JSON body: {inner}")
        } else {
            format!("invalid JSON body: at {path}: {inner}")
        })
    })?;
    de.end().map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// A JSON object body that may be left out: an empty body is `T::default()`.
/// Failures become JSON [`ApiError`]s as for [`JsonBody`].
pub struct OptionalJsonBody<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| ApiError::BadRequest(format!("unreadable request body: {e}")))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(T::default()));
        }
        decode_body(&bytes).map(OptionalJsonBody)
    }
}

/// Query-string parameters whose every decoding failure becomes a JSON 400
/// [`ApiError`] (`invalid query string: …`).
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(params)) => Ok(QueryParams(params)),
            Err(e) => Err(ApiError::BadRequest(format!("invalid query string: {}", e.body_text()))),
        }
    }
}

pub use crate::cluster::ReadPrefs;

/// A request's read preferences: `X-Consistency` (default from
/// configuration) and `X-Tessera-Replica`.
impl FromRequestParts<AppState> for ReadPrefs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let consistency = match parts.headers.get("x-consistency") {
            Some(v) => v
                .to_str()
                .ok()
                .and_then(parse_consistency)
                .ok_or_else(|| ApiError::BadRequest("X-Consistency must be one of: one, quorum, all".into()))?,
            None => state.default_consistency,
        };
        let replica = match parts.headers.get("x-tessera-replica") {
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| ApiError::BadRequest("X-Tessera-Replica must be a node id".into()))?,
            ),
            None => None,
        };
        Ok(ReadPrefs { consistency, replica })
    }
}

/// Headers naming the group and node that served a routed call.
pub fn served_headers<T>(served: &Served<T>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-tessera-group", HeaderValue::from(served.group));
    h.insert("x-tessera-node", HeaderValue::from(served.node));
    h
}

/// Defense in depth behind the route table: the caller holds some `write:*`
/// permission (viewers hold none).
pub fn require_writer(caller: &crate::services::auth::Caller) -> Result<(), ApiError> {
    if caller.can_write() { Ok(()) } else { Err(ApiError::Forbidden("this caller cannot write data".into())) }
}

/// Runs a model's query under `query_limits.query_timeout_secs` (spec 01
/// §Limits: every query type). Past it the router stops waiting, which drops
/// the call to the node: its query worker sees the caller gone and stops at its
/// next check. The answer is 408 `QUERY_TIMEOUT`.
pub(crate) async fn within_query_timeout<T>(
    state: &AppState,
    query: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let secs = state.config.query_limits.query_timeout_secs;
    match tokio::time::timeout(std::time::Duration::from_secs(secs), query).await {
        Ok(answer) => answer,
        Err(_) => Err(ApiError::Rejected(tessera_api::error::Rejection::new(
            tessera_api::error::ErrorCode::QueryTimeout,
            format!("the query ran past query_timeout_secs = {secs} and was cancelled"),
        ))),
    }
}
