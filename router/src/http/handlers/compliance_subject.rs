//! A data subject's records across the stores (spec 02): `POST
//! /api/v1/compliance/export` (and `GET /api/v1/gdpr/export`,
//! `/gdpr/access`, `/ccpa/access`), and `GET
//! /api/v1/compliance/exports/{export_id}` for a kept export.
//!
//! The work is the export service's (`services/compliance/export.rs`); these
//! parse, call it and shape the answer: JSON, or a file download with its
//! `Content-Type`, `Content-Disposition` and, when kept, `Content-Location`
//! and `Expires`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::compliance::enabled;
use crate::services::compliance::export::{self, DownloadFile, ExportOutcome, KeptExport};
pub use crate::services::compliance::export::{ExportAnswer, ExportRequest};
use crate::state::AppState;

/// `POST /api/v1/compliance/export {subject_id, format: json|csv|xml, date_range, scope}`
/// (admin only): every record of the subject in the key-value, document, SQL
/// and graph stores, as `{success, export_id: EXP-<ts>-<8>, subject_id, format,
/// generated_at, total_items, data: {subject_id, kv, document, sql, graph}}`
/// with items `{location, item_id, data}` (and classification metadata of SQL
/// columns when `include_metadata`, on by default); `csv` and `xml` answer the
/// same items as a file.
pub async fn export(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Response, ApiError> {
    // The interface being off answers before a malformed body does.
    enabled(&state)?;
    let req: ExportRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ExportRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("body: {e}")))?
    };
    Ok(answer(export::export(&state, req).await?))
}

/// `GET /api/v1/gdpr/export?subject_id=&format=`, `/gdpr/access`, `/ccpa/access?consumer_id=`.
pub async fn export_get(
    State(state): State<AppState>,
    _caller: Caller,
    super::QueryParams(q): super::QueryParams<std::collections::HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let req = ExportRequest::of_query(q.get("subject_id").cloned(), q.get("consumer_id").cloned(), q.get("format").cloned());
    Ok(answer(export::export(&state, req).await?))
}

/// An export's answer: the JSON, or the file naming where it is kept.
fn answer(outcome: ExportOutcome) -> Response {
    match outcome {
        ExportOutcome::Json(answer) => Json(answer).into_response(),
        ExportOutcome::File { file: f, kept } => with_location(file(f), kept),
    }
}

/// A file answer naming where it can be downloaded again, and until when.
fn with_location(mut response: Response, kept: Option<KeptExport>) -> Response {
    if let Some(KeptExport { url, expires_at }) = kept
        && let (Ok(url), Ok(expires)) = (url.parse(), expires_at.parse())
    {
        response.headers_mut().insert(header::CONTENT_LOCATION, url);
        response.headers_mut().insert(header::EXPIRES, expires);
    }
    response
}

/// `GET /api/v1/compliance/exports/{export_id}`: a kept export, as it was
/// answered, until it expires (24 h; 404 after, or once the subject is erased).
pub async fn download(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(file(export::download(&state, &id).await?))
}

/// A downloadable answer.
fn file(f: DownloadFile) -> Response {
    let headers = [(header::CONTENT_TYPE, f.content_type), (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}\"", f.name))];
    (headers, f.bytes).into_response()
}
