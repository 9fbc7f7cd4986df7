//! Compliance (spec 02), one module per duty: consent, the audit trail,
//! classification, incidents and their reports, breach webhooks, the
//! retention expiry, erasure with its certificates, subject export, and the
//! compliance reports. Here: the switch, the actor the audit trail names, the
//! field rule, and the reads of the meta group's consent, audit and incident
//! records they share.

pub mod audit;
pub mod classify;
pub mod consent;
pub mod erasure;
pub mod expiry;
pub mod export;
pub mod incident_report;
pub mod incidents;
pub mod reports;
pub mod webhooks;

use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::compliance::{
    AuditAnswer, AuditQuery, ConsentAnswer, ConsentQuery, DEFAULT_SUBJECT_FIELDS, IncidentAnswer, IncidentQuery, MAX_FIELD_BYTES,
    SubjectRule,
};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The rule that finds a data subject's records: the configured
/// `compliance.subject_fields`, or the default fields.
pub fn subject_rule(config: &crate::config::ComplianceSection, subject_id: &str) -> SubjectRule {
    let configured: Vec<String> = config.subject_fields.split(',').map(str::trim).filter(|f| !f.is_empty()).map(str::to_string).collect();
    let fields = if configured.is_empty() { DEFAULT_SUBJECT_FIELDS.iter().map(|f| f.to_string()).collect() } else { configured };
    SubjectRule { subject_id: subject_id.to_string(), fields }
}

/// Refuses while the compliance interface is off (`compliance.enabled`).
pub fn enabled(state: &AppState) -> Result<(), ApiError> {
    if state.config.compliance.enabled {
        Ok(())
    } else {
        Err(ApiError::NotFound("the compliance interface is off: start the router with SERVICE_COMPLIANCE_ENABLED=true".into()))
    }
}

/// Entries a page lists without a `limit`, and at most.
pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

/// A free-text field of a compliance record: 1 to `MAX_FIELD_BYTES` bytes without NUL.
pub fn check_field(what: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > MAX_FIELD_BYTES || value.contains('\0') {
        return Err(ApiError::BadRequest(format!("{what} must be 1 to {MAX_FIELD_BYTES} bytes without NUL")));
    }
    Ok(())
}

/// Who acts, as the audit trail names them.
pub fn actor(caller: &Caller) -> String {
    match caller {
        Caller::User { user, .. } => user.username.clone(),
        Caller::Bootstrap => "bootstrap".into(),
    }
}

/// Answers a consent query from the meta group.
pub async fn read_consent(state: &AppState, q: ConsentQuery) -> Result<ConsentAnswer, ApiError> {
    match state.cluster.meta_read(MetaQuery::Consent(q)).await? {
        MetaQueryResult::Consent(answer) => Ok(answer),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Answers an audit-trail query from the meta group.
pub async fn read_audit(state: &AppState, q: AuditQuery) -> Result<AuditAnswer, ApiError> {
    match state.cluster.meta_read(MetaQuery::Audit(q)).await? {
        MetaQueryResult::Audit(answer) => Ok(answer),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Answers an incident query from the meta group.
pub async fn read_incidents(state: &AppState, q: IncidentQuery) -> Result<IncidentAnswer, ApiError> {
    match state.cluster.meta_read(MetaQuery::Incident(q)).await? {
        MetaQueryResult::Incident(answer) => Ok(answer),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Breach statistics.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct BreachStats {
    pub total_incidents: u64,
    open_incidents: u64,
    acknowledged_incidents: u64,
    resolved_incidents: u64,
    false_positives: u64,
    /// Severity → incidents.
    by_severity: std::collections::BTreeMap<String, u64>,
    /// Event type → incidents.
    by_type: std::collections::BTreeMap<String, u64>,
}

impl From<tessera_api::compliance::IncidentStats> for BreachStats {
    fn from(s: tessera_api::compliance::IncidentStats) -> BreachStats {
        BreachStats {
            total_incidents: s.total_incidents,
            open_incidents: s.open_incidents,
            acknowledged_incidents: s.acknowledged_incidents,
            resolved_incidents: s.resolved_incidents,
            false_positives: s.false_positives,
            by_severity: s.by_severity,
            by_type: s.by_type,
        }
    }
}
