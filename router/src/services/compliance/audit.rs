//! The compliance audit trail: the entries concerning a subject, the hash
//! chain's verification, and the retention round that removes entries past
//! `compliance.audit_retention_days`.

use serde::Serialize;
use serde_json::Value;
use tessera_api::command::{MetaOp, Response};
use tessera_api::compliance::{AuditAnswer, AuditEntry, AuditQuery};
use tessera_api::http::iso8601_ms;

use super::{check_field, read_audit};
use crate::error::ApiError;
use crate::state::AppState;

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

/// The audit entries concerning a subject, oldest first.
pub async fn trail(state: &AppState, subject_id: String) -> Result<AuditTrail, ApiError> {
    check_field("subject_id", &subject_id)?;
    let AuditAnswer::Entries(entries) = read_audit(state, AuditQuery::Subject { subject_id: subject_id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected audit answer".into()));
    };
    Ok(AuditTrail { subject_id, entries: entries.iter().map(AuditEntryView::from).collect(), total: entries.len() })
}

/// The audit chain's verification.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AuditVerification {
    valid: bool,
    entries_verified: u64,
    /// Names the entry where a broken chain breaks.
    message: String,
}

/// Walks the whole chain: `valid: false` with a message naming the entry where it breaks.
pub async fn verify(state: &AppState) -> Result<AuditVerification, ApiError> {
    let AuditAnswer::Verified { valid, entries_verified, message } = read_audit(state, AuditQuery::Verify).await? else {
        return Err(ApiError::Internal("unexpected audit answer".into()));
    };
    Ok(AuditVerification { valid, entries_verified, message })
}

/// Removes audit entries older than `compliance.audit_retention_days` once an
/// hour (every router asks; the meta group removes each entry once).
pub async fn retention_loop(state: AppState) {
    let days = state.config.compliance.audit_retention_days;
    if !state.config.compliance.enabled || days == 0 {
        return;
    }
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
    loop {
        tick.tick().await;
        let before_ms = tessera_api::command::now_ms() - (days as i64).saturating_mul(86_400_000);
        match state.cluster.meta_write(MetaOp::PruneAudit { before_ms }).await {
            Ok(Response::Deleted(n)) if n > 0 => tracing::info!(removed = n, days, "audit entries past their retention removed"),
            Ok(_) => {}
            Err(e) => tracing::debug!("audit retention not applied this hour: {e}"),
        }
    }
}
