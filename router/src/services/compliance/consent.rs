//! Consent (spec 02): recording, withdrawing and erasing consent, its status,
//! history, export and checks, the statistics, the do-not-sell list and the
//! CCPA opt-out, kept in the meta group (replicated; times fixed by the meta
//! group's leader). Every change is appended to the audit trail in the same apply.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tessera_api::command::{MetaOp, Response, now_ms};
use tessera_api::compliance::{ConsentAnswer, ConsentChange, ConsentOp, ConsentQuery, ConsentRecord, DO_NOT_SELL, PURPOSES};
use tessera_api::http::iso8601_ms;

use super::{DEFAULT_PAGE, MAX_PAGE, check_field, read_consent};
use crate::error::ApiError;
use crate::services::auth::new_id;
use crate::state::AppState;

/// A purpose: one of spec 02's, or another lower-case identifier (the
/// alternate shape names purposes such as `marketing_emails`).
pub fn check_purpose(purpose: &str) -> Result<(), ApiError> {
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
pub struct ConsentBody {
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

/// Records a consent for one purpose or several (one consent id for all).
pub async fn record(state: &AppState, actor: String, b: ConsentBody) -> Result<ConsentRecorded, ApiError> {
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
    let Response::Consent(stored) = write(state, ConsentOp::Record { records, actor }).await? else {
        return Err(ApiError::Internal("the meta group answered a consent record with another reply".into()));
    };
    let now = now_ms();
    let first = stored.first().ok_or_else(|| ApiError::Internal("no consent was stored".into()))?;
    Ok(ConsentRecorded {
        success: true,
        consent_id,
        subject_id: first.subject_id.clone(),
        purpose: first.purpose.clone(),
        granted: first.granted,
        recorded_at: iso8601_ms(first.recorded_at_ms),
        consents: stored.iter().map(|r| ConsentView::new(r, now)).collect(),
        message: format!("consent recorded for {} purpose(s)", stored.len()),
    })
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

/// A subject's current consents (none: an empty list).
pub async fn status(state: &AppState, subject_id: &str) -> Result<ConsentStatus, ApiError> {
    check_field("subject_id", subject_id)?;
    let ConsentAnswer::Records(records) = read_consent(state, ConsentQuery::Subject { subject_id: subject_id.into() }).await? else {
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

/// A subject's consent history.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentHistory {
    subject_id: String,
    /// Oldest first.
    history: Vec<ConsentChangeView>,
    total: usize,
}

/// Every change of a subject's consent, oldest first.
pub async fn history(state: &AppState, subject_id: String) -> Result<ConsentHistory, ApiError> {
    check_field("subject_id", &subject_id)?;
    let ConsentAnswer::History(changes) = read_consent(state, ConsentQuery::History { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(ConsentHistory { subject_id, history: changes.iter().map(ConsentChangeView::from).collect(), total: changes.len() })
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

/// A subject's current consents and history.
pub async fn export(state: &AppState, subject_id: String) -> Result<ConsentExport, ApiError> {
    let status = status(state, &subject_id).await?;
    let ConsentAnswer::History(changes) = read_consent(state, ConsentQuery::History { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(ConsentExport {
        subject_id,
        exported_at: iso8601_ms(now_ms()),
        format: "json".into(),
        consents: status.consents,
        history: changes.iter().map(ConsentChangeView::from).collect(),
    })
}

/// Whether a subject's purpose is granted now.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsentCheck {
    subject_id: String,
    purpose: String,
    /// False when never recorded, withdrawn or lapsed.
    granted: bool,
}

/// Whether the purpose is granted now (false when never recorded, withdrawn or lapsed).
pub async fn check(state: &AppState, subject_id: String, purpose: String) -> Result<ConsentCheck, ApiError> {
    check_purpose(&purpose)?;
    let status = status(state, &subject_id).await?;
    let granted = status.purposes.get(&purpose).copied().unwrap_or(false);
    Ok(ConsentCheck { subject_id, purpose, granted })
}

/// Body of a consent withdrawal.
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
pub struct WithdrawBody {
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

/// Sets the purpose to denied (404 when the subject never recorded it).
pub async fn withdraw(
    state: &AppState,
    actor: String,
    subject_id: String,
    purpose: String,
    b: WithdrawBody,
) -> Result<ConsentWithdrawn, ApiError> {
    check_field("subject_id", &subject_id)?;
    check_purpose(&purpose)?;
    if let Some(reason) = &b.reason {
        check_field("reason", reason)?;
    }
    let op = ConsentOp::Withdraw { subject_id: subject_id.clone(), purpose: purpose.clone(), reason: b.reason.clone(), actor };
    let Response::Consent(stored) = write(state, op).await? else {
        return Err(ApiError::Internal("the meta group answered a withdrawal with another reply".into()));
    };
    let at = stored.first().map_or_else(now_ms, |r| r.recorded_at_ms);
    let message = format!("consent for {purpose} withdrawn");
    Ok(ConsentWithdrawn { success: true, subject_id, purpose, granted: false, withdrawn_at: iso8601_ms(at), reason: b.reason, message })
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

/// Removes every consent record and history entry of the subject.
pub async fn erase(state: &AppState, actor: String, subject_id: String) -> Result<ConsentErased, ApiError> {
    check_field("subject_id", &subject_id)?;
    let Response::Deleted(n) = write(state, ConsentOp::Erase { subject_id: subject_id.clone(), actor }).await? else {
        return Err(ApiError::Internal("the meta group answered an erasure with another reply".into()));
    };
    let message = format!("all consent data of {subject_id} deleted");
    Ok(ConsentErased { success: true, subject_id, deleted_records: n, message })
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

/// The consent statistics.
pub async fn stats(state: &AppState) -> Result<ConsentStatsView, ApiError> {
    let ConsentAnswer::Stats(s) = read_consent(state, ConsentQuery::Stats).await? else {
        return Err(ApiError::Internal("unexpected consent answer".into()));
    };
    Ok(ConsentStatsView {
        total_subjects: s.total_subjects,
        total_records: s.total_records,
        total_history_entries: s.total_history_entries,
        do_not_sell_count: s.do_not_sell_count,
        consents_by_purpose: s.consents_by_purpose.into_iter().map(|(p, (granted, denied))| (p, [granted, denied])).collect(),
    })
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

/// Subjects whose `do_not_sell` consent is granted, by subject id (pages from 1).
pub async fn do_not_sell(state: &AppState, page: Option<usize>, limit: Option<usize>) -> Result<DoNotSellPage, ApiError> {
    let page = page.unwrap_or(1);
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if page == 0 || limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!("page starts at 1 and limit is 1 to {MAX_PAGE}")));
    }
    let q = ConsentQuery::DoNotSell { offset: (page - 1).saturating_mul(limit), limit };
    let ConsentAnswer::DoNotSell { subjects, total } = read_consent(state, q).await? else {
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
    Ok(DoNotSellPage { subjects, total, page, limit })
}

/// Body of a CCPA opt-out.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct OptOutBody {
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

/// Puts the subject on the do-not-sell list (grants its `do_not_sell` purpose).
pub async fn opt_out(state: &AppState, actor: String, b: OptOutBody) -> Result<OptedOut, ApiError> {
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
    let Response::Consent(stored) = write(state, ConsentOp::Record { records: vec![record], actor }).await? else {
        return Err(ApiError::Internal("the meta group answered an opt-out with another reply".into()));
    };
    let at = stored.first().map_or_else(now_ms, |r| r.recorded_at_ms);
    Ok(OptedOut { success: true, subject_id: b.subject_id, opted_out: true, opted_out_at: iso8601_ms(at) })
}
