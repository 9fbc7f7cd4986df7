//! Breach incidents (spec 02): listing, statistics, acknowledging, resolving
//! and cleaning up the incidents the meta group keeps, each incident's report,
//! and the recorded security events.

use serde::{Deserialize, Serialize};
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response, now_ms};
use tessera_api::compliance::{Incident, IncidentAnswer, IncidentOp, IncidentQuery};
use tessera_api::http::iso8601_ms;
use tessera_api::security::{SecurityQuery, SecurityQueryResult};

use super::incident_report::{self, IncidentReport, SecurityEventView};
use super::{BreachStats, DEFAULT_PAGE, MAX_PAGE, check_field, read_incidents};
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::state::AppState;

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

/// The incidents, newest first, of one status and severity when given.
pub async fn list(state: &AppState, status: Option<String>, severity: Option<String>) -> Result<IncidentList, ApiError> {
    if let Some(s) = &status
        && !["open", "acknowledged", "resolved", "false_positive"].contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("status must be open, acknowledged, resolved or false_positive, not {s:?}")));
    }
    if let Some(s) = &severity
        && !["low", "medium", "high", "critical"].contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("severity must be low, medium, high or critical, not {s:?}")));
    }
    let IncidentAnswer::List(list) = read_incidents(state, IncidentQuery::List { status, severity }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let now = now_ms();
    let count = |s: &str| list.iter().filter(|i| i.status == s).count();
    Ok(IncidentList {
        incidents: list.iter().map(|i| IncidentView::new(i, now)).collect(),
        total_count: list.len(),
        open_count: count("open"),
        acknowledged_count: count("acknowledged"),
    })
}

/// The incident statistics.
pub async fn stats(state: &AppState) -> Result<BreachStats, ApiError> {
    let IncidentAnswer::Stats(s) = read_incidents(state, IncidentQuery::Stats).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    Ok(s.into())
}

/// The incident, its timeline, its notification duties (GDPR 72 h, HIPAA media
/// notice at 500 subjects, the webhook delivery) and the security events
/// within an hour of its detection from its addresses or subjects.
pub async fn report(state: &AppState, id: String) -> Result<IncidentReport, ApiError> {
    let IncidentAnswer::One(found) = read_incidents(state, IncidentQuery::Get { id: id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let i = found.ok_or_else(|| ApiError::NotFound(format!("incident {id} does not exist")))?;
    state.activities.flush(&*state.cluster).await?;
    let query = SecurityQuery::Events { event_type: None, limit: 1000 };
    let SecurityQueryResult::Events { events, .. } =
        typed::pick(state.cluster.meta_read(MetaQuery::Security(query)).await?, shape!(MetaQueryResult::Security))?
    else {
        return Err(ApiError::Internal("unexpected security answer".into()));
    };
    let related: Vec<_> = events
        .into_iter()
        .filter(|e| (e.at_ms - i.detected_at_ms).abs() <= incident_report::RELATED_WINDOW_MS)
        .filter(|e| {
            e.source_ip.as_ref().is_some_and(|ip| i.involved_ips.contains(ip))
                || e.username.as_ref().is_some_and(|u| i.affected_subjects.contains(u))
        })
        .rev()
        .collect();
    Ok(incident_report::report(&i, related, now_ms()))
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

/// The recorded security events (each failed login, each permission refused,
/// every alert raised), newest first; 100 by default, at most 1000.
pub async fn security_events(state: &AppState, limit: Option<usize>, event_type: Option<String>) -> Result<SecurityEventList, ApiError> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {MAX_PAGE}")));
    }
    if event_type.as_ref().is_some_and(|t| t.is_empty() || t.len() > 64) {
        return Err(ApiError::BadRequest("event_type must be 1 to 64 characters".into()));
    }
    // What this router noted and has not written yet is written first.
    state.activities.flush(&*state.cluster).await?;
    let query = SecurityQuery::Events { event_type: event_type.clone(), limit };
    let SecurityQueryResult::Events { events, total } =
        typed::pick(state.cluster.meta_read(MetaQuery::Security(query)).await?, shape!(MetaQueryResult::Security))?
    else {
        return Err(ApiError::Internal("unexpected security answer".into()));
    };
    let items: Vec<SecurityEventView> = events.into_iter().map(SecurityEventView::from).collect();
    Ok(SecurityEventList { count: items.len(), events: items, total_count: total, event_type })
}

/// One incident (404 when it does not exist).
pub async fn get(state: &AppState, id: String) -> Result<IncidentView, ApiError> {
    let IncidentAnswer::One(found) = read_incidents(state, IncidentQuery::Get { id: id.clone() }).await? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let i = found.ok_or_else(|| ApiError::NotFound(format!("incident {id} does not exist")))?;
    Ok(IncidentView::new(&i, now_ms()))
}

async fn move_incident(state: &AppState, op: IncidentOp) -> Result<Incident, ApiError> {
    match state.cluster.meta_write(MetaOp::Incident(op)).await? {
        Response::Incident(i) => Ok(i),
        Response::Rejected(r) => Err(r.into()),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Body of an incident acknowledgement.
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
pub struct AcknowledgeBody {
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

/// Open → acknowledged (409 from any other state), by `acknowledged_by` or else the actor.
pub async fn acknowledge(state: &AppState, actor: String, id: String, b: AcknowledgeBody) -> Result<IncidentAcknowledged, ApiError> {
    let by = b.acknowledged_by.unwrap_or(actor);
    check_field("acknowledged_by", &by)?;
    let notes = match (b.notes, b.classification) {
        (Some(n), Some(c)) => Some(format!("{n} (classification: {c})")),
        (n, c) => n.or(c.map(|c| format!("classification: {c}"))),
    };
    let i = move_incident(state, IncidentOp::Acknowledge { id, by, notes }).await?;
    Ok(IncidentAcknowledged {
        success: true,
        incident_id: i.incident_id,
        status: i.status,
        acknowledged_by: i.acknowledged_by,
        acknowledged_at: i.acknowledged_at_ms.map(iso8601_ms),
    })
}

/// Body of an incident resolution.
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
pub struct ResolveBody {
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

/// Open or acknowledged → resolved, or false_positive (409 once ended).
pub async fn resolve(state: &AppState, actor: String, id: String, b: ResolveBody) -> Result<IncidentResolved, ApiError> {
    let by = b.resolved_by.unwrap_or(actor);
    check_field("resolved_by", &by)?;
    let op = IncidentOp::Resolve {
        id,
        by,
        notes: b.resolution_notes,
        false_positive: b.false_positive,
        remediation_steps: b.remediation_steps_taken,
    };
    let i = move_incident(state, op).await?;
    Ok(IncidentResolved {
        success: true,
        false_positive: i.status == "false_positive",
        incident_id: i.incident_id,
        status: i.status,
        resolved_by: i.resolved_by,
        resolved_at: i.resolved_at_ms.map(iso8601_ms),
        resolution_notes: i.resolution_notes,
    })
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

/// Removes resolved and false-positive incidents detected more than 30 days ago.
pub async fn cleanup(state: &AppState) -> Result<IncidentsCleaned, ApiError> {
    let before_ms = now_ms() - ENDED_INCIDENTS_KEEP_MS;
    let n = match state.cluster.meta_write(MetaOp::Incident(IncidentOp::Cleanup { before_ms })).await? {
        Response::Deleted(n) => n,
        other => return Err(ApiError::unexpected(other)),
    };
    Ok(IncidentsCleaned { success: true, removed: n, older_than: iso8601_ms(before_ms) })
}
