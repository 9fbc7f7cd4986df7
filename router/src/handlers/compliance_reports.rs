//! `GET /api/v1/admin/compliance/status` and `/soc2-report` (spec 02
//! "Reports"): each framework's controls judged from this cluster's real
//! configuration and state when asked — TLS, encryption at rest on every
//! node, the audit chain's verification, consent and do-not-sell records,
//! breach detection and notification, classification, access control — and
//! the evidence a SOC 2 auditor asks for.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::compliance::{AuditAnswer, AuditQuery, ConsentAnswer, ConsentQuery, IncidentAnswer, IncidentQuery};
use tessera_api::http::iso8601_ms;
use tessera_api::meta::Role;

use super::compliance::{audit, enabled, incidents, read};
use crate::auth::Caller;
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::state::AppState;

/// What the controls are judged from, gathered once per call.
struct Facts {
    https: bool,
    cluster_tls: bool,
    nodes: usize,
    nodes_answering: usize,
    nodes_encrypted: usize,
    audit_valid: bool,
    audit_entries: u64,
    audit_message: String,
    consent_records: u64,
    consent_subjects: u64,
    do_not_sell: u64,
    incidents_total: usize,
    incidents_overdue: Vec<String>,
    webhook: bool,
    classified_columns: usize,
    users: usize,
    admins: usize,
    admins_with_mfa: usize,
    custom_roles: usize,
    activities: usize,
    alerts_unacknowledged: u64,
    certificates: usize,
}

impl Facts {
    async fn gather(state: &AppState) -> Result<Facts, ApiError> {
        let statuses = state.cluster.node_statuses().await?;
        let answering: Vec<_> = statuses.iter().filter_map(|(_, s)| s.as_ref().ok()).collect();
        let AuditAnswer::Verified { valid, entries_verified, message } = audit(state, AuditQuery::Verify).await? else {
            return Err(ApiError::Internal("unexpected audit answer".into()));
        };
        let ConsentAnswer::Stats(consent) = read(state, ConsentQuery::Stats).await? else {
            return Err(ApiError::Internal("unexpected consent answer".into()));
        };
        let IncidentAnswer::List(list) = incidents(state, IncidentQuery::List { status: None, severity: None }).await? else {
            return Err(ApiError::Internal("unexpected incident answer".into()));
        };
        let now = tessera_api::command::now_ms();
        let overdue = list.iter().filter(|i| i.status == "open" && now > i.notification_deadline_ms).map(|i| i.incident_id.clone()).collect();
        let classified = match state.cluster.meta_read(MetaQuery::Classifications { table: None }).await? {
            MetaQueryResult::Classifications(c) => c.len(),
            other => return Err(ApiError::unexpected(other)),
        };
        let users = typed::pick(state.cluster.meta_read(MetaQuery::ListUsers).await?, shape!(MetaQueryResult::Users))?;
        let roles = typed::pick(state.cluster.meta_read(MetaQuery::ListRoles).await?, shape!(MetaQueryResult::Roles))?;
        let activities = typed::pick(
            state.cluster.meta_read(MetaQuery::Activities { limit: 10_000, kind: None }).await?,
            shape!(MetaQueryResult::Activities),
        )?;
        let alerts = state
            .cluster
            .meta_read(MetaQuery::Security(tessera_api::security::SecurityQuery::Alerts { acknowledged: Some(false), limit: 1 }))
            .await?;
        let alerts_unacknowledged = match alerts {
            MetaQueryResult::Security(tessera_api::security::SecurityQueryResult::Alerts { unacknowledged, .. }) => unacknowledged,
            other => return Err(ApiError::unexpected(other)),
        };
        let admins: Vec<_> = users.iter().filter(|u| u.role == Role::Admin).collect();
        let certificates = typed::pick(
            state.cluster.meta_read(MetaQuery::Certificates { from_ms: None, to_ms: None }).await?,
            shape!(MetaQueryResult::Certificates),
        )?
        .len();
        Ok(Facts {
            https: state.config.tls.cert.is_some() && state.config.tls.key.is_some(),
            cluster_tls: state.config.tls.cluster_ca.is_some(),
            nodes: statuses.len(),
            nodes_answering: answering.len(),
            nodes_encrypted: answering.iter().filter(|s| s.encrypted_at_rest).count(),
            audit_valid: valid,
            audit_entries: entries_verified,
            audit_message: message,
            consent_records: consent.total_records,
            consent_subjects: consent.total_subjects,
            do_not_sell: consent.do_not_sell_count,
            incidents_total: list.len(),
            incidents_overdue: overdue,
            webhook: state.config.compliance.breach_webhook_url.as_ref().is_some_and(|u| !u.is_empty()),
            classified_columns: classified,
            users: users.len(),
            admins: admins.len(),
            admins_with_mfa: admins.iter().filter(|u| u.mfa_enabled).count(),
            custom_roles: roles.len(),
            activities: activities.len(),
            alerts_unacknowledged,
            certificates,
        })
    }

    /// Every control: (id, met, evidence).
    fn controls(&self) -> BTreeMap<&'static str, (bool, String)> {
        let encrypted = self.nodes_answering > 0 && self.nodes_encrypted == self.nodes && self.nodes_answering == self.nodes;
        BTreeMap::from([
            ("encryption_in_transit", (self.https && self.cluster_tls, format!(
                "client HTTPS {}, router-to-node TLS {}", on(self.https), on(self.cluster_tls)))),
            ("encryption_at_rest", (encrypted, format!(
                "{} of {} nodes encrypt at rest ({} answered)", self.nodes_encrypted, self.nodes, self.nodes_answering))),
            ("audit_trail", (self.audit_valid, format!("hash chain of {} entries: {}", self.audit_entries, self.audit_message))),
            ("consent_management", (true, format!(
                "{} consent records of {} subjects, every change kept in history", self.consent_records, self.consent_subjects))),
            ("do_not_sell", (true, format!("{} subjects on the do-not-sell list", self.do_not_sell))),
            ("breach_detection", (true, "failed-login and SQL-injection detectors open incidents".to_string())),
            ("breach_notification", (self.webhook && self.incidents_overdue.is_empty(), format!(
                "breach webhook {}; {} incidents, overdue: {:?}", if self.webhook { "configured" } else { "not configured" },
                self.incidents_total, self.incidents_overdue))),
            ("data_classification", (self.classified_columns > 0, format!("{} columns classified", self.classified_columns))),
            ("access_control", (true, format!(
                "role-based permissions on every route; {} users, {} custom roles", self.users, self.custom_roles))),
            ("admin_mfa", (self.admins > 0 && self.admins_with_mfa == self.admins, format!(
                "{} of {} admins use MFA", self.admins_with_mfa, self.admins))),
            ("change_log", (true, format!("{} activity records (queries, logins, configuration and admin actions)", self.activities))),
            ("monitoring", (true, format!("alerts raised from live state; {} unacknowledged security alerts", self.alerts_unacknowledged))),
            ("right_to_erasure", (true, format!(
                "erasure across every store (key-value, documents, SQL, graph, objects, vectors, time-series, streams) with Ed25519-signed certificates; {} issued",
                self.certificates))),
            ("data_portability", (true, "subject export as JSON, CSV or XML across every store".to_string())),
        ])
    }
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// The controls each framework is judged by.
const FRAMEWORKS: [(&str, &[&str]); 5] = [
    ("GDPR", &["consent_management", "right_to_erasure", "data_portability", "breach_notification", "encryption_at_rest", "audit_trail"]),
    ("CCPA", &["do_not_sell", "right_to_erasure", "data_portability", "consent_management"]),
    ("HIPAA", &["encryption_at_rest", "encryption_in_transit", "audit_trail", "data_classification", "breach_notification", "access_control"]),
    ("FERPA", &["access_control", "consent_management", "audit_trail"]),
    ("SOC2", &["monitoring", "change_log", "breach_detection", "breach_notification", "access_control", "admin_mfa", "audit_trail", "encryption_at_rest"]),
];

/// `GET /api/v1/admin/compliance/status`: per framework (GDPR, CCPA, HIPAA,
/// FERPA, SOC 2) `compliant` when every control it needs is met, `partial`
/// when some are, `non_compliant` when none is; each control with its evidence.
pub async fn status(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    enabled(&state)?;
    let facts = Facts::gather(&state).await?;
    let controls = facts.controls();
    let frameworks: Vec<Value> = FRAMEWORKS
        .iter()
        .map(|(name, needed)| {
            let judged: Vec<Value> = needed
                .iter()
                .map(|c| {
                    let (met, evidence) = &controls[c];
                    json!({"control": c, "status": if *met { "met" } else { "not_met" }, "evidence": evidence})
                })
                .collect();
            let met = needed.iter().filter(|c| controls[*c].0).count();
            let status = if met == needed.len() { "compliant" } else if met > 0 { "partial" } else { "non_compliant" };
            json!({"framework": name, "status": status, "controls_met": met, "controls_total": needed.len(), "controls": judged})
        })
        .collect();
    Ok(Json(json!({"generated_at": iso8601_ms(tessera_api::command::now_ms()), "frameworks": frameworks})))
}

/// `GET /api/v1/admin/compliance/soc2-report`: the evidence behind SOC 2's
/// trust criteria, read from the cluster when asked: access control (users by
/// role, MFA, custom roles), change management (activity records), monitoring
/// (alerts), incident response (incidents by status, notification), the audit
/// trail's verification and encryption.
pub async fn soc2_report(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    enabled(&state)?;
    let facts = Facts::gather(&state).await?;
    let controls = facts.controls();
    let IncidentAnswer::Stats(incident_stats) = incidents(&state, IncidentQuery::Stats).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let criteria = |ids: &[&str]| -> Vec<Value> {
        ids.iter()
            .map(|c| {
                let (met, evidence) = &controls[c];
                json!({"control": c, "status": if *met { "met" } else { "not_met" }, "evidence": evidence})
            })
            .collect()
    };
    Ok(Json(json!({
        "report": "SOC 2 evidence",
        "generated_at": iso8601_ms(tessera_api::command::now_ms()),
        "security": criteria(&["access_control", "admin_mfa", "encryption_in_transit", "encryption_at_rest"]),
        "availability": {"nodes": facts.nodes, "nodes_answering": facts.nodes_answering},
        "processing_integrity": criteria(&["audit_trail"]),
        "change_management": criteria(&["change_log"]),
        "monitoring": criteria(&["monitoring", "breach_detection"]),
        "incident_response": {"controls": criteria(&["breach_notification"]), "incidents": incident_stats},
        "access": {"users": facts.users, "admins": facts.admins, "admins_with_mfa": facts.admins_with_mfa, "custom_roles": facts.custom_roles},
    })))
}
