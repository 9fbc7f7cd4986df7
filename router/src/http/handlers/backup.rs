//! `POST /api/v1/admin/backup` and the backups it makes: list, get, delete,
//! and `POST /api/v1/admin/restore` (see [`crate::services::backup`]).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::OptionalJsonBody;
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::backup::BackupView;
use crate::state::AppState;

/// The body of `POST /api/v1/admin/backup` (both fields optional; others refused).
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackupBody {
    encrypted: bool,
    /// A short name such as `none` (the default), `gdpr`, `hipaa`, `soc2`.
    #[schemars(pattern(r"^[A-Za-z0-9_-]{1,64}$"))]
    compliance_mode: Option<String>,
}

/// `POST /api/v1/admin/backup` `{"encrypted": bool, "compliance_mode": "…"}`:
/// exports every group at its own applied index into a new backup of this
/// router's backup directory; 201 with its metadata once complete.
pub async fn create(
    State(state): State<AppState>,
    _caller: Caller,
    OptionalJsonBody(req): OptionalJsonBody<BackupBody>,
) -> Result<(StatusCode, Json<BackupView>), ApiError> {
    let mode = req.compliance_mode.unwrap_or_else(|| "none".into());
    if mode.is_empty() || mode.len() > 64 || !mode.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(ApiError::BadRequest("compliance_mode is a short name such as none, gdpr, hipaa, soc2".into()));
    }
    // The certificates held before anything is exported: a restore re-applies
    // every later one (one issued during the backup is re-applied too, harmlessly).
    let erasures = certificates(&state).await?.iter().filter_map(|c| c["certificate_id"].as_str().map(str::to_string)).collect();
    let manifest = state.backups.create(state.cluster.as_ref(), req.encrypted, &mode.to_ascii_lowercase(), erasures).await?;
    Ok((StatusCode::CREATED, Json(manifest.view())))
}

/// `GET /api/v1/admin/backups`: this router's backups, newest first.
pub async fn list(State(state): State<AppState>, _caller: Caller) -> Result<Json<BackupList>, ApiError> {
    let backups: Vec<BackupView> = state.backups.list().iter().map(|m| m.view()).collect();
    Ok(Json(BackupList { count: backups.len(), backups }))
}

/// `GET /api/v1/admin/backups`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BackupList {
    /// Newest first.
    pub backups: Vec<BackupView>,
    pub count: usize,
}

/// `DELETE /api/v1/admin/backups/{backup_id}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BackupDeleted {
    pub backup_id: String,
    pub deleted: bool,
}

/// `GET /api/v1/admin/backups/{backup_id}`: one backup (also while it runs: `state`, `groups_done`).
pub async fn get(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<BackupView>, ApiError> {
    Ok(Json(state.backups.manifest(&id)?.view()))
}

/// `DELETE /api/v1/admin/backups/{backup_id}`.
pub async fn delete(State(state): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Json<BackupDeleted>, ApiError> {
    state.backups.delete(&id)?;
    Ok(Json(BackupDeleted { backup_id: id, deleted: true }))
}

/// The body of `POST /api/v1/admin/restore`.
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    backup_id: Option<String>,
}

/// `POST /api/v1/admin/restore` `{"backup_id": "…"}`: checks every file of the
/// backup (digests, decryption, decoding), then replaces every group's records
/// with the backup's (the cluster map and Raft state stay). 400 for a corrupt
/// or truncated backup (nothing is written), 409 for a cluster of another
/// shape, 404 for an unknown backup.
///
/// Erasures are not undone by a restore: every deletion certificate the live
/// cluster or the erasure ledger beside the backups holds, and the backup does
/// not, is re-applied before the restore answers (`erasures_reapplied`); one
/// that cannot be is a 503 naming it (send the restore again). Meanwhile every
/// data group is held from the moment its records are swapped in (`held`):
/// reads and writes of anyone but the restore answer 503 `UNAVAILABLE`, so no
/// one reads an erased subject's restored records; the hold is lifted once the
/// erasures are re-applied, or by sending the restore again after a failure.
/// The audit entries recorded since the backup began are recorded again after
/// the restored chain (`audit_entries_re_recorded`), then `backup_restored`.
pub async fn restore(
    State(state): State<AppState>,
    caller: Caller,
    OptionalJsonBody(req): OptionalJsonBody<RestoreBody>,
) -> Result<Json<RestoreAnswer>, ApiError> {
    let id = req
        .backup_id
        .filter(|id| !id.is_empty())
        .ok_or_else(|| ApiError::BadRequest(r#"the body names the backup: {"backup_id": "…"}"#.into()))?;
    let manifest = state.backups.manifest(&id)?;
    let held: std::collections::HashSet<String> = manifest.erasures.clone().unwrap_or_default().into_iter().collect();
    // The audit entries recorded since the backup began: the restore of the meta
    // group would roll them back, so those it does not bring back are recorded again.
    let began_ms = chrono::DateTime::parse_from_rfc3339(&manifest.created_at).map_or(0, |t| t.timestamp_millis());
    let live_audit = audit_since(&state, began_ms).await?;
    // Read before the meta group is replaced: the live certificates, then the ledger.
    let mut ledger: std::collections::BTreeMap<String, Value> = std::collections::BTreeMap::new();
    for c in certificates(&state).await?.into_iter().chain(state.backups.erasure_ledger()) {
        if let Some(cid) = c["certificate_id"].as_str() {
            ledger.entry(cid.to_string()).or_insert(c);
        }
    }
    let mut later: Vec<Value> = ledger.into_iter().filter(|(cid, _)| !held.contains(cid)).map(|(_, c)| c).collect();
    later.sort_by_key(|c| c["issued_at_ms"].as_i64());
    // With erasures to re-apply, every data group stays held from its swap
    // until they are: no read sees the restored records of an erased subject.
    let hold = !later.is_empty();
    let restored = state.backups.restore(state.cluster.as_ref(), &id, hold).await?;
    let (done, pending) =
        crate::cluster::as_restore(&id, crate::services::compliance::erasure::reapply_after_restore(&state, later, &id)).await;
    if !pending.is_empty() {
        return Err(ApiError::Unavailable(format!(
            "backup {id} was restored, but erasures issued after it are not all re-applied: {}; the data groups stay held \
             (reads answer 503) until they are: send the restore again",
            pending.join("; ")
        )));
    }
    if hold {
        state.backups.release(state.cluster.as_ref(), &id).await?;
    }
    let re_recorded = record_audit_again(&state, &caller, &id, began_ms, live_audit, done.len()).await?;
    Ok(Json(RestoreAnswer { restored, erasures_reapplied: done, audit_entries_re_recorded: re_recorded }))
}

/// The answer of a restore.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct RestoreAnswer {
    #[serde(flatten)]
    restored: crate::services::backup::Restored,
    /// The erasures issued after the backup, applied again to what it brought back.
    erasures_reapplied: Vec<Value>,
    /// Audit entries recorded since the backup began, recorded again after the restored chain.
    audit_entries_re_recorded: usize,
}

/// The audit entries recorded at or after `from_ms`, oldest first.
async fn audit_since(state: &AppState, from_ms: i64) -> Result<Vec<tessera_api::compliance::AuditEntry>, ApiError> {
    use tessera_api::command::{MetaQuery, MetaQueryResult};
    use tessera_api::compliance::{AuditAnswer, AuditQuery};
    match state.cluster.meta_read(MetaQuery::Audit(AuditQuery::Since { from_ms })).await? {
        MetaQueryResult::Audit(AuditAnswer::Entries(entries)) => Ok(entries),
        other => Err(ApiError::unexpected(other)),
    }
}

/// After a restore of backup `id`: appends to the (restored) audit chain every
/// entry of `live` (the chain before the restore, since the backup began) that
/// the restored chain does not hold, as a new entry naming the original (its
/// id, time and hash), then a `backup_restored` entry. The chain stays whole;
/// nothing recorded after a backup is lost by restoring it. Answers how many
/// entries were recorded again.
async fn record_audit_again(
    state: &AppState,
    caller: &Caller,
    id: &str,
    began_ms: i64,
    live: Vec<tessera_api::compliance::AuditEntry>,
    erasures_reapplied: usize,
) -> Result<usize, ApiError> {
    use tessera_api::command::{MetaOp, Response};
    use tessera_api::compliance::AuditEvent;
    let restored: std::collections::HashSet<String> = audit_since(state, began_ms).await?.into_iter().map(|e| e.hash).collect();
    let mut events: Vec<AuditEvent> = live
        .into_iter()
        .filter(|e| !restored.contains(&e.hash))
        .map(|e| AuditEvent {
            event_type: e.event_type,
            actor: e.actor,
            subject_id: e.subject_id,
            details: serde_json::json!({
                "details": e.details,
                "recorded_again_after_restore_of": id,
                "original_id": e.id,
                "original_timestamp": tessera_api::http::iso8601_ms(e.timestamp_ms),
                "original_hash": e.hash,
            }),
        })
        .collect();
    let again = events.len();
    events.push(AuditEvent {
        event_type: "backup_restored".into(),
        actor: crate::services::compliance::actor(caller),
        subject_id: None,
        details: serde_json::json!({"backup_id": id, "audit_entries_re_recorded": again, "erasures_reapplied": erasures_reapplied}),
    });
    match state.cluster.meta_write(MetaOp::Audit(events)).await? {
        Response::Rejected(r) => Err(ApiError::Unavailable(format!(
            "backup {id} was restored, but the audit entries recorded since it were not recorded again ({}); send the restore again",
            r.message
        ))),
        _ => Ok(again),
    }
}

/// Every deletion certificate the cluster holds now.
async fn certificates(state: &AppState) -> Result<Vec<Value>, ApiError> {
    use tessera_api::command::{MetaQuery, MetaQueryResult};
    crate::cluster::typed::pick(
        state.cluster.meta_read(MetaQuery::Certificates { from_ms: None, to_ms: None }).await?,
        crate::cluster::typed::shape!(MetaQueryResult::Certificates),
    )
}
