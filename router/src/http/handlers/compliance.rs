//! Compliance routes (spec 02), switched on by `compliance.enabled`
//! (`SERVICE_COMPLIANCE_ENABLED=true`; off: every route answers 404 saying so).
//! Each handler parses the request and calls one function of
//! `services::compliance` (consent, audit, classification, incidents; erasure,
//! export and reports in the sibling files).

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{JsonBody, OptionalJsonBody, QueryParams};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::services::compliance::audit::{self, AuditTrail, AuditVerification};
use crate::services::compliance::classify::{self, ClassificationList, Classified, ClassifyBody};
use crate::services::compliance::consent::{self, ConsentBody, ConsentCheck, ConsentErased, ConsentExport, ConsentHistory};
use crate::services::compliance::consent::{ConsentRecorded, ConsentStatsView, ConsentStatus, ConsentWithdrawn, DoNotSellPage};
use crate::services::compliance::consent::{OptOutBody, OptedOut, WithdrawBody};
use crate::services::compliance::incident_report::{self, IncidentReport};
use crate::services::compliance::incidents::{self, AcknowledgeBody, IncidentAcknowledged, IncidentList, IncidentResolved};
use crate::services::compliance::incidents::{IncidentView, IncidentsCleaned, ResolveBody, SecurityEventList};
use crate::services::compliance::{BreachStats, actor, enabled};
use crate::state::AppState;

pub fn routes() -> RouteTable {
    const C: &str = "/api/v1/compliance";
    RouteTable::new()
        .post(format!("{C}/consent"), P("write:compliance"), record_consent)
        .get(format!("{C}/consent/stats"), P("read:compliance"), consent_stats)
        .get(format!("{C}/consent/{{subject_id}}"), P("read:compliance"), consent_status)
        .delete(format!("{C}/consent/{{subject_id}}"), P("write:compliance"), erase_consent)
        .get(format!("{C}/consent/{{subject_id}}/history"), P("read:compliance"), consent_history)
        .get(format!("{C}/consent/{{subject_id}}/export"), P("read:compliance"), consent_export)
        .get(format!("{C}/consent/{{subject_id}}/check/{{purpose}}"), P("read:compliance"), consent_check)
        .delete(format!("{C}/consent/{{subject_id}}/{{purpose}}"), P("write:compliance"), withdraw_consent)
        .get(format!("{C}/do-not-sell"), P("read:compliance"), do_not_sell)
        .get(format!("{C}/breaches"), P("read:compliance"), list_breaches)
        .get(format!("{C}/breaches/stats"), P("read:compliance"), breach_stats)
        .post(format!("{C}/breaches/cleanup"), P("manage:compliance"), cleanup_breaches)
        .get(format!("{C}/breaches/{{id}}"), P("read:compliance"), get_breach)
        .get(format!("{C}/breaches/{{id}}/report"), P("read:compliance"), breach_report)
        .returns_or_files::<IncidentReport>(&["application/pdf"])
        .get(format!("{C}/security-events"), P("read:compliance"), security_events)
        .post(format!("{C}/breaches/{{id}}/acknowledge"), P("manage:compliance"), acknowledge_breach)
        .post(format!("{C}/breaches/{{id}}/resolve"), P("manage:compliance"), resolve_breach)
        .post(format!("{C}/classify"), P("write:compliance"), classify)
        .get(format!("{C}/classifications"), P("read:compliance"), classifications)
        .get(format!("{C}/audit/verify"), P("read:compliance"), audit_verify)
        .get(format!("{C}/audit/{{subject_id}}"), P("read:compliance"), audit_trail)
        .post("/api/v1/gdpr/consent", P("write:compliance"), record_consent)
        .get("/api/v1/gdpr/consent", P("read:compliance"), gdpr_consent_status)
        .post("/api/v1/ccpa/opt-out", P("write:compliance"), ccpa_opt_out)
        .post(format!("{C}/export"), P("manage:compliance"), super::compliance_subject::export)
        .returns::<super::compliance_subject::ExportAnswer>()
        .body::<super::compliance_subject::ExportRequest>(true)
        .get(format!("{C}/exports/{{export_id}}"), P("manage:compliance"), super::compliance_subject::download)
        .returns_or_files::<crate::services::compliance::export::ExportContent>(&["text/csv", "application/xml"])
        .delete(format!("{C}/data-subject/{{id}}"), P("manage:compliance"), super::compliance_erasure::erase)
        .body::<super::compliance_erasure::EraseRequest>(false)
        .delete("/api/v1/gdpr/erasure", P("manage:compliance"), super::compliance_erasure::erase_by_body)
        .body::<super::compliance_erasure::EraseRequest>(true)
        .delete("/api/v1/ccpa/delete", P("manage:compliance"), super::compliance_erasure::erase_by_body)
        .body::<super::compliance_erasure::EraseRequest>(true)
        .get(format!("{C}/erasure-jobs"), P("read:compliance"), super::compliance_erasure::list_jobs)
        .get(format!("{C}/erasure-jobs/{{id}}"), P("read:compliance"), super::compliance_erasure::get_job)
        .get(format!("{C}/certificates"), P("read:compliance"), super::compliance_erasure::list)
        .get(format!("{C}/certificates/public-key"), P("read:compliance"), super::compliance_erasure::public_key)
        .get(format!("{C}/certificates/{{id}}"), P("read:compliance"), super::compliance_erasure::get)
        .get(format!("{C}/certificates/{{id}}/verify"), P("read:compliance"), super::compliance_erasure::verify)
        .get("/api/v1/gdpr/export", P("manage:compliance"), super::compliance_subject::export_get)
        .returns::<super::compliance_subject::ExportAnswer>()
        .get("/api/v1/gdpr/access", P("manage:compliance"), super::compliance_subject::export_get)
        .returns::<super::compliance_subject::ExportAnswer>()
        .get("/api/v1/ccpa/access", P("manage:compliance"), super::compliance_subject::export_get)
        .returns::<super::compliance_subject::ExportAnswer>()
        .get("/api/v1/admin/compliance/status", P("read:compliance"), super::compliance_reports::status)
        .get("/api/v1/admin/compliance/soc2-report", P("read:compliance"), super::compliance_reports::soc2_report)
}

/// `POST /api/v1/compliance/consent` (and `POST /api/v1/gdpr/consent`).
async fn record_consent(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<ConsentBody>,
) -> Result<Json<ConsentRecorded>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::record(&state, actor(&caller), b).await?))
}

/// `GET /api/v1/compliance/consent/{subject_id}`: the subject's current consents
/// (an empty list for a subject without any).
async fn consent_status(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentStatus>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::status(&state, &subject_id).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct SubjectParams {
    #[serde(alias = "subject_identifier", alias = "consumer_id")]
    subject_id: Option<String>,
}

/// `GET /api/v1/gdpr/consent?subject_id=`.
async fn gdpr_consent_status(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(p): QueryParams<SubjectParams>,
) -> Result<Json<ConsentStatus>, ApiError> {
    enabled(&state)?;
    let subject = p.subject_id.ok_or_else(|| ApiError::BadRequest("the subject_id query parameter is required".into()))?;
    Ok(Json(consent::status(&state, &subject).await?))
}

/// `GET /api/v1/compliance/consent/{subject_id}/history`: every change, oldest first.
async fn consent_history(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentHistory>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::history(&state, subject_id).await?))
}

/// `GET /api/v1/compliance/consent/{subject_id}/export`: current consents and history.
async fn consent_export(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentExport>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::export(&state, subject_id).await?))
}

/// `GET /api/v1/compliance/consent/{subject_id}/check/{purpose}`: whether the
/// purpose is granted now (false when never recorded, withdrawn or lapsed).
async fn consent_check(
    State(state): State<AppState>,
    _caller: Caller,
    Path((subject_id, purpose)): Path<(String, String)>,
) -> Result<Json<ConsentCheck>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::check(&state, subject_id, purpose).await?))
}

/// `DELETE /api/v1/compliance/consent/{subject_id}/{purpose}` `{reason}`: sets
/// the purpose to denied (404 when the subject never recorded it).
async fn withdraw_consent(
    State(state): State<AppState>,
    caller: Caller,
    Path((subject_id, purpose)): Path<(String, String)>,
    OptionalJsonBody(b): OptionalJsonBody<WithdrawBody>,
) -> Result<Json<ConsentWithdrawn>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::withdraw(&state, actor(&caller), subject_id, purpose, b).await?))
}

/// `DELETE /api/v1/compliance/consent/{subject_id}`: every consent record and
/// history entry of the subject is removed.
async fn erase_consent(
    State(state): State<AppState>,
    caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentErased>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::erase(&state, actor(&caller), subject_id).await?))
}

/// `GET /api/v1/compliance/consent/stats`.
async fn consent_stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<ConsentStatsView>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::stats(&state).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct PageParams {
    page: Option<usize>,
    limit: Option<usize>,
}

/// `GET /api/v1/compliance/do-not-sell?page=&limit=`: subjects whose
/// `do_not_sell` consent is granted, by subject id (pages from 1).
async fn do_not_sell(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(p): QueryParams<PageParams>,
) -> Result<Json<DoNotSellPage>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::do_not_sell(&state, p.page, p.limit).await?))
}

/// `POST /api/v1/ccpa/opt-out {consumer_id | subject_id}`: puts the subject on
/// the do-not-sell list (grants its `do_not_sell` purpose).
async fn ccpa_opt_out(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<OptOutBody>,
) -> Result<Json<OptedOut>, ApiError> {
    enabled(&state)?;
    Ok(Json(consent::opt_out(&state, actor(&caller), b).await?))
}

/// `GET /api/v1/compliance/audit/{subject_id}`: the audit entries concerning a
/// subject, oldest first.
async fn audit_trail(State(state): State<AppState>, _caller: Caller, Path(subject_id): Path<String>) -> Result<Json<AuditTrail>, ApiError> {
    enabled(&state)?;
    Ok(Json(audit::trail(&state, subject_id).await?))
}

/// `GET /api/v1/compliance/audit/verify`: walks the whole chain; `valid: false`
/// with a message naming the entry where it breaks.
async fn audit_verify(State(state): State<AppState>, _caller: Caller) -> Result<Json<AuditVerification>, ApiError> {
    enabled(&state)?;
    Ok(Json(audit::verify(&state).await?))
}

/// `POST /api/v1/compliance/classify`: one column (`{table, column,
/// classification, reason}`) or a batch (`{classifications: [...]}`).
async fn classify(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<ClassifyBody>,
) -> Result<Json<Classified>, ApiError> {
    enabled(&state)?;
    Ok(Json(classify::classify(&state, actor(&caller), b).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct TableParams {
    table: Option<String>,
}

/// `GET /api/v1/compliance/classifications?table=`: `{classifications, total_count}`.
async fn classifications(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(p): QueryParams<TableParams>,
) -> Result<Json<ClassificationList>, ApiError> {
    enabled(&state)?;
    Ok(Json(classify::list(&state, p.table).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct BreachFilter {
    status: Option<String>,
    severity: Option<String>,
}

/// `GET /api/v1/compliance/breaches?status=&severity=`: newest first.
async fn list_breaches(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(f): QueryParams<BreachFilter>,
) -> Result<Json<IncidentList>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::list(&state, f.status, f.severity).await?))
}

/// `GET /api/v1/compliance/breaches/stats`.
async fn breach_stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<BreachStats>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::stats(&state).await?))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct ReportParams {
    format: Option<String>,
}

/// `GET /api/v1/compliance/breaches/{id}/report?format=json|pdf`: the
/// incident's report (see `incidents::report`); JSON by default, a PDF
/// document (`application/pdf`) with `format=pdf`.
async fn breach_report(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<ReportParams>,
) -> Result<Response, ApiError> {
    enabled(&state)?;
    let format = p.format.unwrap_or_else(|| "json".into());
    if format != "json" && format != "pdf" {
        return Err(ApiError::BadRequest(format!("format must be json or pdf, not {format:?}")));
    }
    let report = incidents::report(&state, id).await?;
    if format == "json" {
        return Ok(Json(report).into_response());
    }
    let headers = [
        (axum::http::header::CONTENT_TYPE, "application/pdf".to_string()),
        (axum::http::header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}-report.pdf\"", report.incident.incident_id)),
    ];
    Ok((headers, incident_report::pdf(&report)).into_response())
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct EventFilter {
    limit: Option<usize>,
    event_type: Option<String>,
}

/// `GET /api/v1/compliance/security-events?limit=&event_type=`: the recorded
/// security events, newest first; 100 by default, at most 1000.
async fn security_events(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(f): QueryParams<EventFilter>,
) -> Result<Json<SecurityEventList>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::security_events(&state, f.limit, f.event_type).await?))
}

/// `GET /api/v1/compliance/breaches/{id}`.
async fn get_breach(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<IncidentView>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::get(&state, id).await?))
}

/// `POST /api/v1/compliance/breaches/{id}/acknowledge {acknowledged_by, notes?}`:
/// open → acknowledged (409 from any other state).
async fn acknowledge_breach(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    OptionalJsonBody(b): OptionalJsonBody<AcknowledgeBody>,
) -> Result<Json<IncidentAcknowledged>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::acknowledge(&state, actor(&caller), id, b).await?))
}

/// `POST /api/v1/compliance/breaches/{id}/resolve {resolution_notes,
/// false_positive}` (alternate: `resolved_by`, `remediation_steps_taken`):
/// open or acknowledged → resolved, or false_positive (409 once ended).
async fn resolve_breach(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    OptionalJsonBody(b): OptionalJsonBody<ResolveBody>,
) -> Result<Json<IncidentResolved>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::resolve(&state, actor(&caller), id, b).await?))
}

/// `POST /api/v1/compliance/breaches/cleanup`: removes resolved and
/// false-positive incidents detected more than 30 days ago.
async fn cleanup_breaches(State(state): State<AppState>, _caller: Caller) -> Result<Json<IncidentsCleaned>, ApiError> {
    enabled(&state)?;
    Ok(Json(incidents::cleanup(&state).await?))
}
