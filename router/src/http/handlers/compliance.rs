//! Compliance routes (spec 02), switched on by `compliance.enabled`
//! (`SERVICE_COMPLIANCE_ENABLED=true`; off: every route answers 404 saying so).
//! Built so far: consent per subject and purpose with its full history, the
//! consent statistics, and the do-not-sell list, kept in the meta group
//! (replicated; times fixed by the meta group's leader), with the GDPR and
//! CCPA alias paths for them; and the audit trail, a hash chain every consent
//! change is appended to in the same apply, with its verification.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tessera_api::command::now_ms;
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response};
use tessera_api::compliance::{
    AuditAnswer, AuditEntry, AuditQuery, CLASSIFICATION_LEVELS, ClassifyOp, ColumnClassification, classification_level,
};
use tessera_api::compliance::{
    ConsentAnswer, ConsentChange, ConsentOp, ConsentQuery, ConsentRecord, DO_NOT_SELL, MAX_FIELD_BYTES, PURPOSES,
};
use tessera_api::compliance::{Incident, IncidentAnswer, IncidentOp, IncidentQuery};
use tessera_api::http::iso8601_ms;

use super::{JsonBody, OptionalJsonBody, QueryParams};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id};
use crate::services::compliance::read_consent as read;
use crate::services::compliance::{BreachStats, actor, enabled, read_audit, read_incidents};
use crate::state::AppState;

/// Subjects a do-not-sell page lists without a `limit`, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

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
        .get(format!("{C}/exports/{{export_id}}"), P("manage:compliance"), super::compliance_subject::download)
        .body::<super::compliance_subject::ExportRequest>(false)
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

fn check_field(what: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > MAX_FIELD_BYTES || value.contains('\0') {
        return Err(ApiError::BadRequest(format!("{what} must be 1 to {MAX_FIELD_BYTES} bytes without NUL")));
    }
    Ok(())
}

/// A purpose: one of spec 02's, or another lower-case identifier (the
/// alternate shape names purposes such as `marketing_emails`).
fn check_purpose(purpose: &str) -> Result<(), ApiError> {
    let ok =
        !purpose.is_empty() && purpose.len() <= 64 && purpose.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(ApiError::BadRequest(format!(
            "purpose must be a lower-case identifier such as {}, not {purpose:?}",
            PURPOSES.join(", ")
        )));
    }
    Ok(())
}

async fn write(state: &AppState, op: ConsentOp) -> Result<Response, ApiError> {
    match state.cluster.meta_write(MetaOp::Consent(op)).await? {
        Response::Rejected(r) => Err(r.into()),
        other => Ok(other),
    }
}

/// A subject's current consent for one purpose.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentView {
    consent_id: String,
    subject_id: String,
    purpose: String,
    granted: bool,
    /// Granted and not lapsed now.
    active: bool,
    source: String,
    version: String,
    /// The caller's own data recorded with the consent.
    metadata: Value,
    lawful_basis: Option<String>,
    /// When the consent lapses; null: it does not.
    expiry: Option<String>,
    recorded_at: String,
    withdrawal_reason: Option<String>,
}

impl ConsentView {
    fn new(r: &ConsentRecord, now: i64) -> ConsentView {
        ConsentView {
            consent_id: r.consent_id.clone(),
            subject_id: r.subject_id.clone(),
            purpose: r.purpose.clone(),
            granted: r.granted,
            active: r.active(now),
            source: r.source.clone(),
            version: r.version.clone(),
            metadata: r.metadata.clone(),
            lawful_basis: r.lawful_basis.clone(),
            expiry: r.expiry_ms.map(iso8601_ms),
            recorded_at: iso8601_ms(r.recorded_at_ms),
            withdrawal_reason: r.withdrawal_reason.clone(),
        }
    }
}

/// One change of a subject's consent, as kept in its history.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentChangeView {
    /// Position in the consent history (increasing).
    seq: u64,
    consent_id: String,
    subject_id: String,
    purpose: String,
    /// `granted`, `denied` or `withdrawn`.
    action: String,
    granted: bool,
    source: String,
    version: String,
    reason: Option<String>,
    timestamp: String,
}

impl From<&ConsentChange> for ConsentChangeView {
    fn from(c: &ConsentChange) -> ConsentChangeView {
        ConsentChangeView {
            seq: c.seq,
            consent_id: c.consent_id.clone(),
            subject_id: c.subject_id.clone(),
            purpose: c.purpose.clone(),
            action: c.action.clone(),
            granted: c.granted,
            source: c.source.clone(),
            version: c.version.clone(),
            reason: c.reason.clone(),
            timestamp: iso8601_ms(c.at_ms),
        }
    }
}

/// Answer of a consent recorded for one or more purposes.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentRecorded {
    success: bool,
    consent_id: String,
    /// The subject, purpose, grant and time of the first consent recorded.
    subject_id: String,
    purpose: String,
    granted: bool,
    recorded_at: String,
    /// Every consent recorded, one per purpose.
    consents: Vec<ConsentView>,
    message: String,
}

/// Body of `POST /api/v1/compliance/consent`: one purpose, or several
/// (`purposes`, the alternate shape) recorded together.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct ConsentBody {
    #[serde(alias = "subject_identifier", alias = "consumer_id")]
    subject_id: String,
    purpose: Option<String>,
    purposes: Option<Vec<String>>,
    /// Absent: granted (recording a consent grants it unless told otherwise).
    granted: Option<bool>,
    source: Option<String>,
    version: Option<String>,
    metadata: Option<Value>,
    lawful_basis: Option<String>,
    /// RFC 3339 time or Unix milliseconds; null for none.
    expiry: Option<Value>,
}

/// An expiry: null, or a time in any form the time-series API takes (RFC 3339, Unix seconds or ms).
fn parse_expiry(v: &Value) -> Result<Option<i64>, ApiError> {
    match v {
        Value::Null => Ok(None),
        other => tessera_timeseries::timestamp::parse_timestamp(other).map(Some).map_err(|e| ApiError::BadRequest(format!("expiry: {e}"))),
    }
}

/// `POST /api/v1/compliance/consent` (and `POST /api/v1/gdpr/consent`).
async fn record_consent(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<ConsentBody>,
) -> Result<Json<ConsentRecorded>, ApiError> {
    enabled(&state)?;
    check_field("subject_id", &b.subject_id)?;
    let purposes: Vec<String> = match (b.purpose, b.purposes) {
        (Some(p), None) => vec![p],
        (None, Some(ps)) if !ps.is_empty() => ps,
        (Some(p), Some(mut ps)) => {
            ps.insert(0, p);
            ps
        }
        _ => return Err(ApiError::BadRequest("purpose (or a non-empty purposes list) is required".into())),
    };
    for p in &purposes {
        check_purpose(p)?;
    }
    let source = b.source.unwrap_or_else(|| "api".into());
    let version = b.version.unwrap_or_else(|| "1".into());
    check_field("source", &source)?;
    check_field("version", &version)?;
    if let Some(basis) = &b.lawful_basis {
        check_field("lawful_basis", basis)?;
    }
    let metadata = match b.metadata {
        None | Some(Value::Null) => json!({}),
        Some(m @ Value::Object(_)) => m,
        Some(_) => return Err(ApiError::BadRequest("metadata must be a JSON object".into())),
    };
    let expiry_ms = b.expiry.as_ref().map(parse_expiry).transpose()?.flatten();
    let consent_id = format!("con-{}", &new_id()[..16]);
    let records: Vec<ConsentRecord> = purposes
        .iter()
        .map(|purpose| ConsentRecord {
            consent_id: consent_id.clone(),
            subject_id: b.subject_id.clone(),
            purpose: purpose.clone(),
            granted: b.granted.unwrap_or(true),
            source: source.clone(),
            version: version.clone(),
            metadata: metadata.clone(),
            lawful_basis: b.lawful_basis.clone(),
            expiry_ms,
            recorded_at_ms: 0,
            withdrawal_reason: None,
        })
        .collect();
    let Response::Consent(stored) = write(&state, ConsentOp::Record { records, actor: actor(&caller) }).await? else {
        return Err(ApiError::Internal("the meta group answered a consent record with another reply".into()));
    };
    let now = now_ms();
    let first = stored.first().ok_or_else(|| ApiError::Internal("no consent was stored".into()))?;
    Ok(Json(ConsentRecorded {
        success: true,
        consent_id,
        subject_id: first.subject_id.clone(),
        purpose: first.purpose.clone(),
        granted: first.granted,
        recorded_at: iso8601_ms(first.recorded_at_ms),
        consents: stored.iter().map(|r| ConsentView::new(r, now)).collect(),
        message: format!("consent recorded for {} purpose(s)", stored.len()),
    }))
}

/// A subject's current consents.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentStatus {
    subject_id: String,
    consents: Vec<ConsentView>,
    /// Purpose → whether it is granted and not lapsed now.
    purposes: BTreeMap<String, bool>,
    total: usize,
    /// Whether the subject's `do_not_sell` purpose is granted.
    do_not_sell: bool,
}

async fn status_of(state: &AppState, subject_id: &str) -> Result<ConsentStatus, ApiError> {
    check_field("subject_id", subject_id)?;
    let ConsentAnswer::Records(records) = read(state, ConsentQuery::Subject { subject_id: subject_id.into() }).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    let now = now_ms();
    Ok(ConsentStatus {
        subject_id: subject_id.to_string(),
        consents: records.iter().map(|r| ConsentView::new(r, now)).collect(),
        purposes: records.iter().map(|r| (r.purpose.clone(), r.active(now))).collect(),
        total: records.len(),
        do_not_sell: records.iter().any(|r| r.purpose == DO_NOT_SELL && r.granted),
    })
}

/// `GET /api/v1/compliance/consent/{subject_id}`: the subject's current consents
/// (an empty list for a subject without any).
async fn consent_status(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentStatus>, ApiError> {
    enabled(&state)?;
    Ok(Json(status_of(&state, &subject_id).await?))
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
    Ok(Json(status_of(&state, &subject).await?))
}

/// A subject's consent history.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentHistory {
    subject_id: String,
    /// Oldest first.
    history: Vec<ConsentChangeView>,
    total: usize,
}

/// `GET /api/v1/compliance/consent/{subject_id}/history`: every change, oldest first.
async fn consent_history(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentHistory>, ApiError> {
    enabled(&state)?;
    check_field("subject_id", &subject_id)?;
    let ConsentAnswer::History(changes) = read(&state, ConsentQuery::History { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(Json(ConsentHistory { subject_id, history: changes.iter().map(ConsentChangeView::from).collect(), total: changes.len() }))
}

/// A subject's consents and consent history, exported.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentExport {
    subject_id: String,
    exported_at: String,
    /// Always `json`.
    format: String,
    consents: Vec<ConsentView>,
    /// Oldest first.
    history: Vec<ConsentChangeView>,
}

/// `GET /api/v1/compliance/consent/{subject_id}/export`: current consents and history.
async fn consent_export(
    State(state): State<AppState>,
    _caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentExport>, ApiError> {
    enabled(&state)?;
    let status = status_of(&state, &subject_id).await?;
    let ConsentAnswer::History(changes) = read(&state, ConsentQuery::History { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(Json(ConsentExport {
        subject_id,
        exported_at: iso8601_ms(now_ms()),
        format: "json".into(),
        consents: status.consents,
        history: changes.iter().map(ConsentChangeView::from).collect(),
    }))
}

/// Whether a subject's purpose is granted now.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentCheck {
    subject_id: String,
    purpose: String,
    /// False when never recorded, withdrawn or lapsed.
    granted: bool,
}

/// `GET /api/v1/compliance/consent/{subject_id}/check/{purpose}`: whether the
/// purpose is granted now (false when never recorded, withdrawn or lapsed).
async fn consent_check(
    State(state): State<AppState>,
    _caller: Caller,
    Path((subject_id, purpose)): Path<(String, String)>,
) -> Result<Json<ConsentCheck>, ApiError> {
    enabled(&state)?;
    check_purpose(&purpose)?;
    let status = status_of(&state, &subject_id).await?;
    let granted = status.purposes.get(&purpose).copied().unwrap_or(false);
    Ok(Json(ConsentCheck { subject_id, purpose, granted }))
}

#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
struct WithdrawBody {
    reason: Option<String>,
}

/// Answer of a consent withdrawn.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentWithdrawn {
    success: bool,
    subject_id: String,
    purpose: String,
    /// Always false.
    granted: bool,
    withdrawn_at: String,
    reason: Option<String>,
    message: String,
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
    check_field("subject_id", &subject_id)?;
    check_purpose(&purpose)?;
    if let Some(reason) = &b.reason {
        check_field("reason", reason)?;
    }
    let op =
        ConsentOp::Withdraw { subject_id: subject_id.clone(), purpose: purpose.clone(), reason: b.reason.clone(), actor: actor(&caller) };
    let Response::Consent(stored) = write(&state, op).await? else {
        return Err(ApiError::Internal("the meta group answered a withdrawal with another reply".into()));
    };
    let at = stored.first().map_or_else(now_ms, |r| r.recorded_at_ms);
    let message = format!("consent for {purpose} withdrawn");
    Ok(Json(ConsentWithdrawn {
        success: true,
        subject_id,
        purpose,
        granted: false,
        withdrawn_at: iso8601_ms(at),
        reason: b.reason,
        message,
    }))
}

/// Answer of a subject's consent data erased.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentErased {
    success: bool,
    subject_id: String,
    /// Consent records and history entries removed.
    deleted_records: u64,
    message: String,
}

/// `DELETE /api/v1/compliance/consent/{subject_id}`: every consent record and
/// history entry of the subject is removed.
async fn erase_consent(
    State(state): State<AppState>,
    caller: Caller,
    Path(subject_id): Path<String>,
) -> Result<Json<ConsentErased>, ApiError> {
    enabled(&state)?;
    check_field("subject_id", &subject_id)?;
    let Response::Deleted(n) = write(&state, ConsentOp::Erase { subject_id: subject_id.clone(), actor: actor(&caller) }).await? else {
        return Err(ApiError::Internal("the meta group answered an erasure with another reply".into()));
    };
    let message = format!("all consent data of {subject_id} deleted");
    Ok(Json(ConsentErased { success: true, subject_id, deleted_records: n, message }))
}

/// Consent statistics.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentStatsView {
    total_subjects: u64,
    total_records: u64,
    total_history_entries: u64,
    do_not_sell_count: u64,
    /// Purpose → `[granted, denied]` records.
    consents_by_purpose: BTreeMap<String, [u64; 2]>,
}

/// `GET /api/v1/compliance/consent/stats`.
async fn consent_stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<ConsentStatsView>, ApiError> {
    enabled(&state)?;
    let ConsentAnswer::Stats(s) = read(&state, ConsentQuery::Stats).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(Json(ConsentStatsView {
        total_subjects: s.total_subjects,
        total_records: s.total_records,
        total_history_entries: s.total_history_entries,
        do_not_sell_count: s.do_not_sell_count,
        consents_by_purpose: s.consents_by_purpose.into_iter().map(|(p, (granted, denied))| (p, [granted, denied])).collect(),
    }))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct PageParams {
    page: Option<usize>,
    limit: Option<usize>,
}

/// A subject on the do-not-sell list.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DoNotSellView {
    subject_id: String,
    opted_out_at: String,
    /// The channel the opt-out came through (the consent's `source`).
    verification_method: String,
}

/// A page of the do-not-sell list.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DoNotSellPage {
    subjects: Vec<DoNotSellView>,
    /// Subjects on the whole list.
    total: u64,
    page: usize,
    limit: usize,
}

/// `GET /api/v1/compliance/do-not-sell?page=&limit=`: subjects whose
/// `do_not_sell` consent is granted, by subject id (pages from 1).
async fn do_not_sell(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(p): QueryParams<PageParams>,
) -> Result<Json<DoNotSellPage>, ApiError> {
    enabled(&state)?;
    let page = p.page.unwrap_or(1);
    let limit = p.limit.unwrap_or(DEFAULT_PAGE);
    if page == 0 || limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!("page starts at 1 and limit is 1 to {MAX_PAGE}")));
    }
    let q = ConsentQuery::DoNotSell { offset: (page - 1).saturating_mul(limit), limit };
    let ConsentAnswer::DoNotSell { subjects, total } = read(&state, q).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    let subjects = subjects
        .into_iter()
        .map(|s| DoNotSellView {
            subject_id: s.subject_id,
            opted_out_at: iso8601_ms(s.opted_out_at_ms),
            verification_method: s.verification_method,
        })
        .collect();
    Ok(Json(DoNotSellPage { subjects, total, page, limit }))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct OptOutBody {
    #[serde(alias = "consumer_id", alias = "subject_identifier")]
    subject_id: String,
    verification_method: Option<String>,
}

/// Answer of a CCPA opt-out.
#[derive(Serialize, schemars::JsonSchema)]
pub struct OptedOut {
    success: bool,
    subject_id: String,
    /// Always true.
    opted_out: bool,
    opted_out_at: String,
}

/// `POST /api/v1/ccpa/opt-out {consumer_id | subject_id}`: puts the subject on
/// the do-not-sell list (grants its `do_not_sell` purpose).
async fn ccpa_opt_out(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<OptOutBody>,
) -> Result<Json<OptedOut>, ApiError> {
    enabled(&state)?;
    check_field("subject_id", &b.subject_id)?;
    let source = b.verification_method.unwrap_or_else(|| "ccpa_opt_out".into());
    check_field("verification_method", &source)?;
    let record = ConsentRecord {
        consent_id: format!("con-{}", &new_id()[..16]),
        subject_id: b.subject_id.clone(),
        purpose: DO_NOT_SELL.into(),
        granted: true,
        source,
        version: "1".into(),
        metadata: json!({}),
        lawful_basis: Some("ccpa".into()),
        expiry_ms: None,
        recorded_at_ms: 0,
        withdrawal_reason: None,
    };
    let Response::Consent(stored) = write(&state, ConsentOp::Record { records: vec![record], actor: actor(&caller) }).await? else {
        return Err(ApiError::Internal("the meta group answered an opt-out with another reply".into()));
    };
    let at = stored.first().map_or_else(now_ms, |r| r.recorded_at_ms);
    Ok(Json(OptedOut { success: true, subject_id: b.subject_id, opted_out: true, opted_out_at: iso8601_ms(at) }))
}

/// One entry of the audit trail's hash chain.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AuditEntryView {
    /// `aud-<seq, 12 digits>`.
    id: String,
    seq: u64,
    event_type: String,
    timestamp: String,
    actor: String,
    /// The data subject the action concerns, when there is one.
    subject_id: Option<String>,
    /// What the action recorded (free-form).
    details: Value,
    /// The hash of the entry before it (64 zeros for the first).
    prev_hash: String,
    /// SHA-256 (hex) of the entry's canonical form.
    hash: String,
}

impl From<&AuditEntry> for AuditEntryView {
    fn from(e: &AuditEntry) -> AuditEntryView {
        AuditEntryView {
            id: e.id.clone(),
            seq: e.seq,
            event_type: e.event_type.clone(),
            timestamp: iso8601_ms(e.timestamp_ms),
            actor: e.actor.clone(),
            subject_id: e.subject_id.clone(),
            details: e.details.clone(),
            prev_hash: e.prev_hash.clone(),
            hash: e.hash.clone(),
        }
    }
}

/// The audit entries concerning a subject.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AuditTrail {
    subject_id: String,
    /// Oldest first.
    entries: Vec<AuditEntryView>,
    total: usize,
}

/// `GET /api/v1/compliance/audit/{subject_id}`: the audit entries concerning a
/// subject, oldest first.
async fn audit_trail(State(state): State<AppState>, _caller: Caller, Path(subject_id): Path<String>) -> Result<Json<AuditTrail>, ApiError> {
    enabled(&state)?;
    check_field("subject_id", &subject_id)?;
    let AuditAnswer::Entries(entries) = read_audit(&state, AuditQuery::Subject { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected audit answer".into()));
    };
    Ok(Json(AuditTrail { subject_id, entries: entries.iter().map(AuditEntryView::from).collect(), total: entries.len() }))
}

/// The audit chain's verification.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AuditVerification {
    valid: bool,
    entries_verified: u64,
    /// Names the entry where a broken chain breaks.
    message: String,
}

/// `GET /api/v1/compliance/audit/verify`: walks the whole chain; `valid: false`
/// with a message naming the entry where it breaks.
async fn audit_verify(State(state): State<AppState>, _caller: Caller) -> Result<Json<AuditVerification>, ApiError> {
    enabled(&state)?;
    let AuditAnswer::Verified { valid, entries_verified, message } = read_audit(&state, AuditQuery::Verify).await? else {
        return Err(ApiError::Internal("unexpected audit answer".into()));
    };
    Ok(Json(AuditVerification { valid, entries_verified, message }))
}

/// One column to classify: `classification` is a level's name (Public,
/// Internal, Confidential, PHI, PII, Restricted; any case) or its number.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct ClassifyItem {
    table: String,
    column: String,
    /// Absent: `data_classification.default_level`.
    #[serde(alias = "level", default)]
    classification: Value,
    reason: Option<String>,
}

/// `POST /api/v1/compliance/classify`: one column (`{table, column,
/// classification, reason}`) or a batch (`{classifications: [...]}`).
#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct ClassifyBody {
    #[serde(flatten)]
    single: Option<ClassifyItem>,
    classifications: Option<Vec<ClassifyItem>>,
}

fn to_column(mut item: ClassifyItem, by: &str, default_level: &str) -> Result<ColumnClassification, ApiError> {
    if item.classification.is_null() {
        item.classification = Value::String(default_level.to_string());
    }
    check_field("table", &item.table)?;
    check_field("column", &item.column)?;
    if let Some(reason) = &item.reason {
        check_field("reason", reason)?;
    }
    let name = match &item.classification {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let level = classification_level(&name).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "classification must be one of {} (or 0-5), not {}",
            CLASSIFICATION_LEVELS.join(", "),
            item.classification
        ))
    })?;
    Ok(ColumnClassification {
        table: item.table,
        column: item.column,
        level,
        reason: item.reason,
        classified_by: by.into(),
        classified_at_ms: 0,
    })
}

/// The classification of one column.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClassificationView {
    table: String,
    column: String,
    /// 0 (Public) to 5 (Restricted).
    level: u8,
    /// The level's name: Public, Internal, Confidential, PHI, PII or Restricted.
    classification: String,
    reason: Option<String>,
    classified_by: String,
    /// Null until the meta group has fixed it.
    classified_at: Option<String>,
}

impl From<&ColumnClassification> for ClassificationView {
    fn from(c: &ColumnClassification) -> ClassificationView {
        ClassificationView {
            table: c.table.clone(),
            column: c.column.clone(),
            level: c.level,
            classification: CLASSIFICATION_LEVELS[usize::from(c.level)].to_string(),
            reason: c.reason.clone(),
            classified_by: c.classified_by.clone(),
            classified_at: (c.classified_at_ms > 0).then(|| iso8601_ms(c.classified_at_ms)),
        }
    }
}

/// Answer of `POST /api/v1/compliance/classify`: a batch, or one column.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Classified {
    /// `{classifications: [...]}` was given.
    Batch {
        success: bool,
        /// How many columns were classified.
        classified: usize,
        classifications: Vec<ClassificationView>,
        message: String,
    },
    /// One column was given.
    One {
        success: bool,
        table: String,
        column: String,
        /// The level's name.
        classification: String,
        level: u8,
        message: String,
    },
}

/// `POST /api/v1/compliance/classify`.
async fn classify(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(b): JsonBody<ClassifyBody>,
) -> Result<Json<Classified>, ApiError> {
    enabled(&state)?;
    let by = actor(&caller);
    let (batch, items) = match (b.classifications, b.single) {
        (Some(items), _) if !items.is_empty() => (true, items),
        (None, Some(item)) => (false, vec![item]),
        _ => return Err(ApiError::BadRequest("give {table, column, classification} or a non-empty classifications list".into())),
    };
    let default_level = state.config.data_classification.default_level.clone();
    let columns = items.into_iter().map(|i| to_column(i, &by, &default_level)).collect::<Result<Vec<_>, _>>()?;
    if let Some(c) = columns.iter().find(|c| c.level >= 5) {
        restricted_needs_encryption(&state, c).await?;
    }
    match state.cluster.meta_write(MetaOp::Classify(ClassifyOp { columns: columns.clone() })).await? {
        Response::Applied(_) => {}
        Response::Rejected(r) => return Err(r.into()),
        other => return Err(ApiError::unexpected(other)),
    }
    state.classification.invalidate().await;
    if batch {
        return Ok(Json(Classified::Batch {
            success: true,
            classified: columns.len(),
            classifications: columns.iter().map(ClassificationView::from).collect(),
            message: format!("{} columns classified", columns.len()),
        }));
    }
    let c = &columns[0];
    let name = CLASSIFICATION_LEVELS[usize::from(c.level)];
    Ok(Json(Classified::One {
        success: true,
        table: c.table.clone(),
        column: c.column.clone(),
        classification: name.to_string(),
        level: c.level,
        message: format!("{}.{} classified as {name} (level {})", c.table, c.column, c.level),
    }))
}

/// Level 5 (Restricted) columns are encrypted at rest: a column is classified
/// Restricted only while every node answers that its store encrypts at rest
/// (409 otherwise, naming the nodes that do not).
async fn restricted_needs_encryption(state: &AppState, c: &ColumnClassification) -> Result<(), ApiError> {
    let mut plain = Vec::new();
    for (node, status) in state.cluster.node_statuses().await? {
        match status {
            Ok(s) if s.encrypted_at_rest => {}
            Ok(_) => plain.push(format!("node {} does not encrypt at rest", node.id)),
            Err(e) => plain.push(format!("node {} did not answer ({e})", node.id)),
        }
    }
    if plain.is_empty() {
        return Ok(());
    }
    Err(ApiError::Conflict(format!(
        "{}.{} cannot be classified Restricted (level 5): level 5 columns are encrypted at rest and {} (set SERVICE_ENCRYPTION_AT_REST with SERVICE_ENCRYPTION_KEY on every node)",
        c.table,
        c.column,
        plain.join(", ")
    )))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct TableParams {
    table: Option<String>,
}

/// The classified columns.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClassificationList {
    classifications: Vec<ClassificationView>,
    total_count: usize,
}

/// `GET /api/v1/compliance/classifications?table=`: `{classifications, total_count}`.
async fn classifications(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(p): QueryParams<TableParams>,
) -> Result<Json<ClassificationList>, ApiError> {
    enabled(&state)?;
    if let Some(t) = &p.table {
        check_field("table", t)?;
    }
    let list = match state.cluster.meta_read(MetaQuery::Classifications { table: p.table }).await? {
        MetaQueryResult::Classifications(list) => list,
        other => return Err(ApiError::unexpected(other)),
    };
    Ok(Json(ClassificationList { classifications: list.iter().map(ClassificationView::from).collect(), total_count: list.len() }))
}

/// How an incident's delivery to the breach webhook stands.
#[derive(Serialize, schemars::JsonSchema)]
pub struct WebhookDeliveryView {
    /// `pending`, `delivering`, `delivered` or `failed`; empty for incidents
    /// older than the webhook.
    status: String,
    /// Requests sent.
    attempts: u32,
    last_error: Option<String>,
    delivered_at: Option<String>,
}

/// A breach incident.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentView {
    /// `inc-<12 digits>`.
    incident_id: String,
    /// The same as `incident_id`.
    id: String,
    detected_at: String,
    /// The breach event type.
    #[serde(rename = "type")]
    event_type: String,
    severity: String,
    description: String,
    affected_subjects: Vec<String>,
    involved_ips: Vec<String>,
    affected_subjects_estimate: usize,
    /// The first involved address, if any.
    source_ip: Option<String>,
    /// `open`, `acknowledged`, `resolved` or `false_positive`.
    status: String,
    source: String,
    acknowledged: bool,
    acknowledged_by: Option<String>,
    acknowledged_at: Option<String>,
    notes: Option<String>,
    resolved_by: Option<String>,
    resolved_at: Option<String>,
    resolution_notes: Option<String>,
    remediation_steps_taken: Vec<String>,
    /// When the breach must be notified (detection + 72 h).
    notification_deadline: String,
    /// Open past its notification deadline.
    notification_overdue: bool,
    affected_records_estimate: usize,
    /// HIPAA's notice deadline, when the breach affects 500 people or more.
    hipaa_notification_deadline: Option<String>,
    webhook: WebhookDeliveryView,
}

impl IncidentView {
    fn new(i: &Incident, now: i64) -> IncidentView {
        IncidentView {
            incident_id: i.incident_id.clone(),
            id: i.incident_id.clone(),
            detected_at: iso8601_ms(i.detected_at_ms),
            event_type: i.event_type.clone(),
            severity: i.severity.clone(),
            description: i.description.clone(),
            affected_subjects: i.affected_subjects.clone(),
            involved_ips: i.involved_ips.clone(),
            affected_subjects_estimate: i.affected_subjects.len(),
            source_ip: i.involved_ips.first().cloned(),
            status: i.status.clone(),
            source: i.source.clone(),
            acknowledged: i.acknowledged_by.is_some(),
            acknowledged_by: i.acknowledged_by.clone(),
            acknowledged_at: i.acknowledged_at_ms.map(iso8601_ms),
            notes: i.notes.clone(),
            resolved_by: i.resolved_by.clone(),
            resolved_at: i.resolved_at_ms.map(iso8601_ms),
            resolution_notes: i.resolution_notes.clone(),
            remediation_steps_taken: i.remediation_steps.clone(),
            notification_deadline: iso8601_ms(i.notification_deadline_ms),
            notification_overdue: i.status == "open" && now > i.notification_deadline_ms,
            affected_records_estimate: i.affected_records_estimate(),
            hipaa_notification_deadline: i.hipaa_deadline_ms().map(iso8601_ms),
            webhook: WebhookDeliveryView {
                status: i.webhook.status.clone(),
                attempts: i.webhook.attempts,
                last_error: i.webhook.last_error.clone(),
                delivered_at: i.webhook.delivered_at_ms.map(iso8601_ms),
            },
        }
    }
}

/// Breach incidents, newest first.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentList {
    incidents: Vec<IncidentView>,
    total_count: usize,
    /// Of those listed.
    open_count: usize,
    /// Of those listed.
    acknowledged_count: usize,
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
    if let Some(s) = &f.status
        && !["open", "acknowledged", "resolved", "false_positive"].contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("status must be open, acknowledged, resolved or false_positive, not {s:?}")));
    }
    if let Some(s) = &f.severity
        && !["low", "medium", "high", "critical"].contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("severity must be low, medium, high or critical, not {s:?}")));
    }
    let IncidentAnswer::List(list) = read_incidents(&state, IncidentQuery::List { status: f.status, severity: f.severity }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let now = now_ms();
    let count = |s: &str| list.iter().filter(|i| i.status == s).count();
    Ok(Json(IncidentList {
        incidents: list.iter().map(|i| IncidentView::new(i, now)).collect(),
        total_count: list.len(),
        open_count: count("open"),
        acknowledged_count: count("acknowledged"),
    }))
}

/// `GET /api/v1/compliance/breaches/stats`.
async fn breach_stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<BreachStats>, ApiError> {
    enabled(&state)?;
    let IncidentAnswer::Stats(s) = read_incidents(&state, IncidentQuery::Stats).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    Ok(Json(s.into()))
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct ReportParams {
    format: Option<String>,
}

/// `GET /api/v1/compliance/breaches/{id}/report?format=json|pdf`: the
/// incident, its timeline, its notification duties (GDPR 72 h, HIPAA media
/// notice at 500 subjects, the webhook delivery) and the security events
/// within an hour of its detection from its addresses or subjects; JSON by
/// default, a PDF document (`application/pdf`) with `format=pdf`.
async fn breach_report(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<ReportParams>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    enabled(&state)?;
    let format = p.format.unwrap_or_else(|| "json".into());
    if format != "json" && format != "pdf" {
        return Err(ApiError::BadRequest(format!("format must be json or pdf, not {format:?}")));
    }
    let IncidentAnswer::One(found) = read_incidents(&state, IncidentQuery::Get { id: id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let i = found.ok_or_else(|| ApiError::NotFound(format!("incident {id} does not exist")))?;
    state.activities.flush(&*state.cluster).await?;
    let query = tessera_api::security::SecurityQuery::Events { event_type: None, limit: 1000 };
    let answer = state.cluster.meta_read(tessera_api::command::MetaQuery::Security(query)).await?;
    let tessera_api::security::SecurityQueryResult::Events { events, .. } =
        crate::cluster::typed::pick(answer, crate::cluster::typed::shape!(tessera_api::command::MetaQueryResult::Security))?
    else {
        return Err(ApiError::Internal("unexpected security answer".into()));
    };
    let related: Vec<_> = events
        .into_iter()
        .filter(|e| (e.at_ms - i.detected_at_ms).abs() <= crate::incident_report::RELATED_WINDOW_MS)
        .filter(|e| {
            e.source_ip.as_ref().is_some_and(|ip| i.involved_ips.contains(ip))
                || e.username.as_ref().is_some_and(|u| i.affected_subjects.contains(u))
        })
        .rev()
        .collect();
    let report = crate::incident_report::report(&i, &related, now_ms());
    if format == "json" {
        return Ok(Json(report).into_response());
    }
    let headers = [
        (axum::http::header::CONTENT_TYPE, "application/pdf".to_string()),
        (axum::http::header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}-report.pdf\"", i.incident_id)),
    ];
    Ok((headers, crate::incident_report::pdf(&report)).into_response())
}

#[derive(schemars::JsonSchema, Debug, Deserialize)]
struct EventFilter {
    limit: Option<usize>,
    event_type: Option<String>,
}

/// A recorded security event.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecurityEventView {
    /// `evt-<12 digits>`, increasing.
    event_id: String,
    event_type: String,
    /// `low`, `medium`, `high` or `critical`.
    severity: String,
    timestamp: String,
    source_ip: Option<String>,
    /// The user name involved, if any.
    user_id: Option<String>,
    description: String,
}

/// Recorded security events, newest first.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecurityEventList {
    events: Vec<SecurityEventView>,
    /// Events in this answer.
    count: usize,
    /// Events recorded (of `event_type`, when given).
    total_count: u64,
    /// The `event_type` filter, null without one.
    event_type: Option<String>,
}

/// `GET /api/v1/compliance/security-events?limit=&event_type=`: the recorded
/// security events (each failed login, each permission refused, every alert
/// raised), newest first; 100 by default, at most 1000.
async fn security_events(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(f): QueryParams<EventFilter>,
) -> Result<Json<SecurityEventList>, ApiError> {
    enabled(&state)?;
    let limit = f.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {MAX_PAGE}")));
    }
    if f.event_type.as_ref().is_some_and(|t| t.is_empty() || t.len() > 64) {
        return Err(ApiError::BadRequest("event_type must be 1 to 64 characters".into()));
    }
    // What this router noted and has not written yet is written first.
    state.activities.flush(&*state.cluster).await?;
    let query = tessera_api::security::SecurityQuery::Events { event_type: f.event_type.clone(), limit };
    let answer = state.cluster.meta_read(tessera_api::command::MetaQuery::Security(query)).await?;
    let tessera_api::security::SecurityQueryResult::Events { events, total } =
        crate::cluster::typed::pick(answer, crate::cluster::typed::shape!(tessera_api::command::MetaQueryResult::Security))?
    else {
        return Err(ApiError::Internal("unexpected security answer".into()));
    };
    let items: Vec<SecurityEventView> = events
        .into_iter()
        .map(|e| SecurityEventView {
            event_id: e.id,
            event_type: e.event_type,
            severity: e.severity,
            timestamp: iso8601_ms(e.at_ms),
            source_ip: e.source_ip,
            user_id: e.username,
            description: e.description,
        })
        .collect();
    Ok(Json(SecurityEventList { count: items.len(), events: items, total_count: total, event_type: f.event_type }))
}

/// `GET /api/v1/compliance/breaches/{id}`.
async fn get_breach(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<IncidentView>, ApiError> {
    enabled(&state)?;
    let IncidentAnswer::One(found) = read_incidents(&state, IncidentQuery::Get { id: id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let i = found.ok_or_else(|| ApiError::NotFound(format!("incident {id} does not exist")))?;
    Ok(Json(IncidentView::new(&i, now_ms())))
}

async fn move_incident(state: &AppState, op: IncidentOp) -> Result<Incident, ApiError> {
    match state.cluster.meta_write(MetaOp::Incident(op)).await? {
        Response::Incident(i) => Ok(i),
        Response::Rejected(r) => Err(r.into()),
        other => Err(ApiError::unexpected(other)),
    }
}

#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
struct AcknowledgeBody {
    acknowledged_by: Option<String>,
    notes: Option<String>,
    classification: Option<String>,
}

/// Answer of an incident acknowledged.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentAcknowledged {
    success: bool,
    incident_id: String,
    status: String,
    acknowledged_by: Option<String>,
    acknowledged_at: Option<String>,
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
    let by = b.acknowledged_by.unwrap_or_else(|| actor(&caller));
    check_field("acknowledged_by", &by)?;
    let notes = match (b.notes, b.classification) {
        (Some(n), Some(c)) => Some(format!("{n} (classification: {c})")),
        (n, c) => n.or(c.map(|c| format!("classification: {c}"))),
    };
    let i = move_incident(&state, IncidentOp::Acknowledge { id, by, notes }).await?;
    Ok(Json(IncidentAcknowledged {
        success: true,
        incident_id: i.incident_id,
        status: i.status,
        acknowledged_by: i.acknowledged_by,
        acknowledged_at: i.acknowledged_at_ms.map(iso8601_ms),
    }))
}

#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
struct ResolveBody {
    resolution_notes: Option<String>,
    #[serde(default)]
    false_positive: bool,
    resolved_by: Option<String>,
    #[serde(default)]
    remediation_steps_taken: Vec<String>,
}

/// Answer of an incident resolved (or found a false positive).
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentResolved {
    success: bool,
    incident_id: String,
    /// `resolved` or `false_positive`.
    status: String,
    false_positive: bool,
    resolved_by: Option<String>,
    resolved_at: Option<String>,
    resolution_notes: Option<String>,
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
    let by = b.resolved_by.unwrap_or_else(|| actor(&caller));
    check_field("resolved_by", &by)?;
    let op = IncidentOp::Resolve {
        id,
        by,
        notes: b.resolution_notes,
        false_positive: b.false_positive,
        remediation_steps: b.remediation_steps_taken,
    };
    let i = move_incident(&state, op).await?;
    Ok(Json(IncidentResolved {
        success: true,
        false_positive: i.status == "false_positive",
        incident_id: i.incident_id,
        status: i.status,
        resolved_by: i.resolved_by,
        resolved_at: i.resolved_at_ms.map(iso8601_ms),
        resolution_notes: i.resolution_notes,
    }))
}

/// Ended incidents are kept this long before a cleanup removes them.
const ENDED_INCIDENTS_KEEP_MS: i64 = 30 * 24 * 3600 * 1000;

/// Answer of a cleanup of ended incidents.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentsCleaned {
    success: bool,
    /// Incidents removed.
    removed: u64,
    /// Ended incidents detected before this time were removed.
    older_than: String,
}

/// `POST /api/v1/compliance/breaches/cleanup`: removes resolved and
/// false-positive incidents detected more than 30 days ago.
async fn cleanup_breaches(State(state): State<AppState>, _caller: Caller) -> Result<Json<IncidentsCleaned>, ApiError> {
    enabled(&state)?;
    let before_ms = now_ms() - ENDED_INCIDENTS_KEEP_MS;
    let n = match state.cluster.meta_write(MetaOp::Incident(IncidentOp::Cleanup { before_ms })).await? {
        Response::Deleted(n) => n,
        other => return Err(ApiError::unexpected(other)),
    };
    Ok(Json(IncidentsCleaned { success: true, removed: n, older_than: iso8601_ms(before_ms) }))
}
