//! Right to erasure (spec 02): `DELETE /api/v1/compliance/data-subject/{id}`
//! (and `DELETE /api/v1/gdpr/erasure`, `/ccpa/delete`) erases a data subject's
//! records in every store and issues a signed deletion certificate; erasure
//! jobs and certificates are listed, read and verified.
//!
//! The work is the erasure service's (`services/compliance/erasure.rs`);
//! these parse, call it and shape the answer.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;

use super::QueryParams;
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::compliance::enabled;
pub use crate::services::compliance::erasure::EraseRequest;
use crate::services::compliance::erasure::{
    self, CertificateList, CertificateVerification, Erased, ErasureJobList, ErasureJobView, PublicKeyView, SignedCertificate,
};
use crate::state::AppState;

/// `DELETE /api/v1/compliance/data-subject/{id}` (admin only).
pub async fn erase(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Erased>, ApiError> {
    // The interface being off answers before a malformed body does.
    enabled(&state)?;
    let req = parse(&body)?;
    Ok(Json(erasure::erase(&state, &caller, id, req).await?))
}

/// `DELETE /api/v1/gdpr/erasure`, `/api/v1/ccpa/delete` with the subject in the body.
pub async fn erase_by_body(State(state): State<AppState>, caller: Caller, body: axum::body::Bytes) -> Result<Json<Erased>, ApiError> {
    // The interface being off answers before a malformed body does.
    enabled(&state)?;
    let req = parse(&body)?;
    Ok(Json(erasure::erase_by_body(&state, &caller, req).await?))
}

/// The body of an erasure: none (or only whitespace) is an empty request.
fn parse(body: &[u8]) -> Result<EraseRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(EraseRequest::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("body: {e}")))
}

/// `GET /api/v1/compliance/erasure-jobs`: every erasure job, oldest first.
pub async fn list_jobs(State(state): State<AppState>, _caller: Caller) -> Result<Json<ErasureJobList>, ApiError> {
    Ok(Json(erasure::list_jobs(&state).await?))
}

/// `GET /api/v1/compliance/erasure-jobs/{id}`.
pub async fn get_job(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<ErasureJobView>, ApiError> {
    Ok(Json(erasure::get_job(&state, &id).await?))
}

/// `GET /api/v1/compliance/certificates/public-key`: the key certificates verify with.
pub async fn public_key(State(state): State<AppState>, _caller: Caller) -> Result<Json<PublicKeyView>, ApiError> {
    Ok(Json(erasure::public_key(&state).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct CertificateRange {
    from: Option<String>,
    to: Option<String>,
}

/// `GET /api/v1/compliance/certificates?from=&to=`: issued in the range, oldest first.
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(r): QueryParams<CertificateRange>,
) -> Result<Json<CertificateList>, ApiError> {
    Ok(Json(erasure::list_certificates(&state, r.from.as_deref(), r.to.as_deref()).await?))
}

/// `GET /api/v1/compliance/certificates/{id}`.
pub async fn get(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<SignedCertificate>, ApiError> {
    Ok(Json(erasure::get_certificate(&state, &id).await?))
}

/// `GET /api/v1/compliance/certificates/{id}/verify`: `{valid, certificate,
/// message}`: valid when its Ed25519 signature over its content verifies with
/// the cluster's key (a changed field, a foreign key or signature fails).
pub async fn verify(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<CertificateVerification>, ApiError> {
    Ok(Json(erasure::verify_certificate(&state, &id).await?))
}
