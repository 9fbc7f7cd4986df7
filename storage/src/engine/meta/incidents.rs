//! Breach incidents of the meta group (spec 02). A detector opens one in the
//! same apply as the security alert that shows the breach (see
//! `security::AlertLog::add`); operators move it through its states; every
//! change is appended to the audit trail.
//!
//! Keys: `inc/r/<id>` → [`Incident`]; `inc/seq` → the last incident number.

use tessera_api::command::Response;
use tessera_api::compliance::{
    AuditEvent, Incident, IncidentAnswer, IncidentOp, IncidentQuery, IncidentStats, NOTIFICATION_DEADLINE_MS, breach_severity,
};
use tessera_api::error::ErrorCode;
use tessera_api::security::AlertRecord;

use super::{ReadView, Tx};
use crate::error::Result;

const RECORD: &[u8] = b"inc/r/";
const SEQ: &[u8] = b"inc/seq";

fn key(id: &str) -> Vec<u8> {
    [RECORD, id.as_bytes()].concat()
}

fn audit(tx: &mut Tx<'_>, now: i64, event_type: &str, actor: &str, i: &Incident) -> Result<()> {
    let details = serde_json::json!({"incident_id": i.incident_id, "type": i.event_type, "severity": i.severity, "status": i.status});
    super::audit::append(tx, now, vec![AuditEvent { event_type: event_type.into(), actor: actor.into(), subject_id: None, details }])?;
    Ok(())
}

/// Opens an incident for `alert` when its kind is a breach event type.
pub fn open_from_alert(tx: &mut Tx<'_>, now: i64, alert: &AlertRecord) -> Result<Option<Incident>> {
    let Some(severity) = breach_severity(&alert.kind) else { return Ok(None) };
    let seq: u64 = match tx.view().get(SEQ)? {
        Some(raw) => serde_json::from_slice(&raw)?,
        None => 0,
    } + 1;
    let incident = Incident {
        incident_id: format!("inc-{seq:012}"),
        detected_at_ms: now,
        event_type: alert.kind.clone(),
        severity: severity.into(),
        description: alert.message.clone(),
        affected_subjects: alert.username.iter().cloned().collect(),
        involved_ips: alert.source_ip.iter().cloned().collect(),
        status: "open".into(),
        source: format!("security alert {}", alert.id),
        notification_deadline_ms: now + NOTIFICATION_DEADLINE_MS,
        acknowledged_by: None,
        acknowledged_at_ms: None,
        notes: None,
        resolved_by: None,
        resolved_at_ms: None,
        resolution_notes: None,
        remediation_steps: Vec::new(),
        webhook: tessera_api::compliance::WebhookDelivery { status: "pending".into(), ..Default::default() },
    };
    tx.put(SEQ, &serde_json::to_vec(&seq)?);
    tx.put(&key(&incident.incident_id), &serde_json::to_vec(&incident)?);
    audit(tx, now, "breach_detected", "detector", &incident)?;
    Ok(Some(incident))
}

/// Applies an incident write at `now`.
pub fn apply(tx: &mut Tx<'_>, now: i64, op: &IncidentOp) -> Result<Response> {
    let get = |tx: &Tx<'_>, id: &str| -> Result<Option<Incident>> {
        Ok(tx.view().get(&key(id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
    };
    match op {
        IncidentOp::Acknowledge { id, by, notes } => {
            let Some(mut i) = get(tx, id)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("incident {id} does not exist")));
            };
            if i.status != "open" {
                return Ok(Response::rejected(
                    ErrorCode::Conflict,
                    format!("incident {id} is {}; only an open incident can be acknowledged", i.status),
                ));
            }
            i.status = "acknowledged".into();
            i.acknowledged_by = Some(by.clone());
            i.acknowledged_at_ms = Some(now);
            i.notes = notes.clone();
            tx.put(&key(id), &serde_json::to_vec(&i)?);
            audit(tx, now, "breach_acknowledged", by, &i)?;
            Ok(Response::Incident(i))
        }
        IncidentOp::Resolve { id, by, notes, false_positive, remediation_steps } => {
            let Some(mut i) = get(tx, id)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("incident {id} does not exist")));
            };
            if i.status != "open" && i.status != "acknowledged" {
                return Ok(Response::rejected(ErrorCode::Conflict, format!("incident {id} is {} already", i.status)));
            }
            i.status = if *false_positive { "false_positive".into() } else { "resolved".into() };
            i.resolved_by = Some(by.clone());
            i.resolved_at_ms = Some(now);
            i.resolution_notes = notes.clone();
            i.remediation_steps = remediation_steps.clone();
            tx.put(&key(id), &serde_json::to_vec(&i)?);
            audit(tx, now, "breach_resolved", by, &i)?;
            Ok(Response::Incident(i))
        }
        IncidentOp::ClaimWebhook { id, router, lease_ms } => {
            let Some(mut i) = get(tx, id)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("incident {id} does not exist")));
            };
            if !i.webhook.due(now) {
                return Ok(Response::rejected(ErrorCode::Conflict, format!("incident {id}'s webhook delivery is {}", i.webhook.status)));
            }
            i.webhook.status = "delivering".into();
            i.webhook.claimed_by = Some(router.clone());
            i.webhook.claim_until_ms = now + lease_ms;
            tx.put(&key(id), &serde_json::to_vec(&i)?);
            Ok(Response::Incident(i))
        }
        IncidentOp::RecordWebhook { id, router, delivered, attempts, error } => {
            let Some(mut i) = get(tx, id)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("incident {id} does not exist")));
            };
            if i.webhook.status != "delivering" || i.webhook.claimed_by.as_ref() != Some(router) {
                return Ok(Response::rejected(ErrorCode::Conflict, format!("router {router} holds no claim on incident {id}'s delivery")));
            }
            i.webhook.status = if *delivered { "delivered".into() } else { "failed".into() };
            i.webhook.attempts += attempts;
            i.webhook.last_error = error.clone();
            i.webhook.delivered_at_ms = delivered.then_some(now);
            tx.put(&key(id), &serde_json::to_vec(&i)?);
            Ok(Response::Incident(i))
        }
        IncidentOp::Cleanup { before_ms } => {
            let mut doomed = Vec::new();
            tx.view().scan_prefix(RECORD, |k, v| {
                let i: Incident = serde_json::from_slice(v)?;
                if (i.status == "resolved" || i.status == "false_positive") && i.detected_at_ms < *before_ms {
                    doomed.push(k.to_vec());
                }
                Ok(true)
            })?;
            for k in &doomed {
                tx.delete(k);
            }
            Ok(Response::Deleted(doomed.len() as u64))
        }
    }
}

/// Answers an incident read.
pub fn query(view: &ReadView<'_>, q: &IncidentQuery) -> Result<IncidentAnswer> {
    let mut all: Vec<Incident> = Vec::new();
    view.scan_prefix(RECORD, |_, v| {
        all.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(match q {
        IncidentQuery::Get { id } => IncidentAnswer::One(all.into_iter().find(|i| &i.incident_id == id)),
        IncidentQuery::List { status, severity } => {
            let mut listed: Vec<Incident> = all
                .into_iter()
                .filter(|i| status.as_ref().is_none_or(|s| &i.status == s))
                .filter(|i| severity.as_ref().is_none_or(|s| &i.severity == s))
                .collect();
            listed.reverse();
            IncidentAnswer::List(listed)
        }
        IncidentQuery::Stats => {
            let mut s = IncidentStats { total_incidents: all.len() as u64, ..Default::default() };
            for sev in ["low", "medium", "high", "critical"] {
                s.by_severity.insert(sev.into(), 0);
            }
            for i in &all {
                match i.status.as_str() {
                    "open" => s.open_incidents += 1,
                    "acknowledged" => s.acknowledged_incidents += 1,
                    "resolved" => s.resolved_incidents += 1,
                    _ => s.false_positives += 1,
                }
                *s.by_severity.entry(i.severity.clone()).or_default() += 1;
                *s.by_type.entry(i.event_type.clone()).or_default() += 1;
            }
            IncidentAnswer::Stats(s)
        }
    })
}
