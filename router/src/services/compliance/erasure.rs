//! Right to erasure (GDPR art. 17): erasure jobs across every store, signed certificates, and their re-application after a restore.
//!
//! An erasure (spec 02) erases a data subject's key-value entries, documents,
//! graph nodes with their edges, objects, vector records, time-series series
//! and stream events (one command per data group, applied atomically there;
//! see `tessera_storage::subject`) and SQL rows (one `DELETE` per table with a
//! subject column), then issues a deletion certificate signed with the
//! cluster's Ed25519 key, kept in the meta group; certificates are listed,
//! read and verified.
//!
//! Every step finds what is left, so an erasure that failed midway (a group
//! without a leader) fails as unavailable, naming what is pending, and nothing is
//! certified; the same request again finishes it and certifies the whole.
//!
//! No HTTP here: the handlers (`http/handlers/compliance_erasure.rs`) parse,
//! call one of these and shape the answer.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Operation, Response};
use tessera_api::compliance::{AuditEvent, EraseSubjectOp, SubjectItem};
use tessera_api::http::iso8601_ms;
use tessera_api::rpc::Consistency;
use tessera_api::sql::SqlOp;

use super::export::{Coverage, Scope, compact_timestamp, find, parse_date, rule, sql_rows};
use crate::cluster::typed::{self, Sql};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::compliance::{actor, enabled};
use crate::state::AppState;

/// The body of an erasure (the path's id is the subject; `subject_identifier`
/// and `consumer_id` are accepted for `subject_id`).
#[derive(schemars::JsonSchema, Debug, Default, Deserialize)]
pub struct EraseRequest {
    subject_id: Option<String>,
    subject_identifier: Option<String>,
    consumer_id: Option<String>,
    requestor: Option<String>,
    reason: Option<String>,
    scope: Option<Scope>,
    #[serde(default)]
    secure_erase: bool,
}

/// A deletion certificate, as it was signed and recorded.
// Kept as the JSON its signature covers (see `canonical`), never retyped.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SignedCertificate(#[schemars(with = "CertificateFields")] Value);

/// A deletion certificate: its Ed25519 `signature` covers every other field,
/// as compact JSON with object keys sorted.
// Documentation only: certificates are built, signed and kept as JSON (`run`).
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct CertificateFields {
    /// `DEL-<YYYYMMDDHHMMSS>-<first 8 characters of the subject>`.
    id: String,
    /// The same as `id`.
    certificate_id: String,
    subject_id: String,
    /// The same as `subject_id`.
    subject_identifier: String,
    /// When it was issued (RFC 3339).
    timestamp: String,
    /// The same as `timestamp`.
    deleted_at: String,
    /// When it was issued, in Unix milliseconds.
    issued_at_ms: i64,
    /// Records erased.
    total_items: u64,
    /// The same as `total_items`.
    records_deleted: u64,
    /// Stored bytes of the records erased.
    total_bytes: u64,
    items_by_store: ItemsByStore,
    /// Every `store:place` a record was erased from (sorted).
    tables_affected: Vec<String>,
    /// SHA-256 (hex) of the subject and every erased record's store, place, id and size.
    verification_hash: String,
    /// The router that issued it.
    verified_by: String,
    /// The `requestor`, else the caller.
    deleted_by: String,
    requestor: Option<String>,
    reason: Option<String>,
    /// `scope.type` of the request: `all`, `specific_collections` or `exclude_audit_logs`.
    scope: String,
    secure_erase_performed: bool,
    /// The request's scope, which a restore of older data re-applies (null: the whole subject).
    erasure_scope: Option<Scope>,
    /// Where the subject's data is gone, and how backups are covered.
    covers: Option<CertificateCoverage>,
    /// `Ed25519`.
    signature_algorithm: String,
    /// The signing key (base64 of its 32 bytes).
    public_key: String,
    /// Ed25519 signature (base64) over the certificate without `signature`,
    /// as compact JSON with object keys sorted.
    signature: String,
}

/// Records erased from each store.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct ItemsByStore {
    kv: u64,
    document: u64,
    sql: u64,
    graph: u64,
    object: u64,
    vector: u64,
    timeseries: u64,
    stream: u64,
}

/// What an erasure reached.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct CertificateCoverage {
    /// Always true: the records left every store.
    live_stores: bool,
    /// True for a secure erasure: every node purged its logs and snapshots and compacted its files.
    logs_snapshots_and_files: bool,
    /// How backups older than the erasure are covered.
    backups: String,
}

/// Answer of an erasure.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Erased {
    success: bool,
    certificate: SignedCertificate,
    message: String,
}

/// Erases subject `id` (the path's), which the request may name again but
/// not differently.
pub async fn erase(state: &AppState, caller: &Caller, id: String, req: EraseRequest) -> Result<Erased, ApiError> {
    enabled(state)?;
    if let Some(named) = req.subject_id.as_ref().or(req.subject_identifier.as_ref()).or(req.consumer_id.as_ref())
        && *named != id
    {
        return Err(ApiError::BadRequest(format!("the body names subject {named:?}, the path {id:?}")));
    }
    run(state, caller, id, req).await
}

/// Erases the subject the request names (`subject_id`, `subject_identifier` or `consumer_id`).
pub async fn erase_by_body(state: &AppState, caller: &Caller, req: EraseRequest) -> Result<Erased, ApiError> {
    enabled(state)?;
    let id = req.subject_id.clone().or_else(|| req.subject_identifier.clone()).or_else(|| req.consumer_id.clone());
    let id = id.ok_or_else(|| ApiError::BadRequest("subject_id (or consumer_id) is required".into()))?;
    run(state, caller, id, req).await
}

async fn run(state: &AppState, caller: &Caller, subject: String, req: EraseRequest) -> Result<Erased, ApiError> {
    if subject.trim().is_empty() || subject.len() > 256 {
        return Err(ApiError::BadRequest("the subject id is 1 to 256 characters".into()));
    }
    let scope_kind = req.scope.as_ref().and_then(|s| s.kind_name()).unwrap_or("all").to_string();
    let coverage = Coverage::of(req.scope.as_ref(), None)?;
    let rule = rule(state, &subject);
    let op = Operation::EraseSubject(EraseSubjectOp {
        rule: rule.clone(),
        locations: coverage.collections.clone(),
        secure_erase: req.secure_erase,
        written_before_ms: None,
    });
    let params = params_digest(&op);
    let mut job = open_job(state, &subject, &rule, &coverage, &req, &params).await?;
    // For the test of an erasure interrupted midway only: a pause between
    // recording the job and erasing (`TESSERA_TEST_ERASURE_PAUSE_MS`).
    if let Some(ms) = std::env::var("TESSERA_TEST_ERASURE_PAUSE_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }

    let groups = state.cluster.data_groups()?;
    let mut erased: Vec<SubjectItem> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    // SQL rows first: one DELETE per table holding some (their change records in
    // CDC channels are then erased with the stream events below).
    let rows: Vec<SubjectItem> = match sql_rows(state, &rule, &groups).await {
        Ok(rows) => rows.into_iter().filter(|i| coverage.covers(i)).collect(),
        Err(e) => {
            pending.push(format!("SQL tables: {e}"));
            Vec::new()
        }
    };
    let mut tables: Vec<String> = rows.iter().map(|r| r.location.clone()).collect();
    tables.sort();
    tables.dedup();
    for location in &tables {
        let Some((database, table)) = location.split_once('.') else { continue };
        if let Err(e) = delete_rows(state, database, table, &rule).await {
            pending.push(format!("table {location}: {e}"));
            continue;
        }
        erased.extend(rows.iter().filter(|r| r.location == *location).cloned());
    }
    // Every store of each data group: one command per group. Its request id is
    // the job's, so a command a failed attempt left in a group's log applies
    // once and its answer comes back to the retry (within the ten minutes the
    // nodes remember answers).
    let job_id = job["id"].as_str().unwrap_or_default().to_string();
    let (op, job_id_ref, params) = (&op, &job_id, &params);
    let writes = groups.iter().map(|&g| async move {
        let request_id = job_request_id(job_id_ref, &format!("{params} group {g}"));
        (g, state.cluster.write_as(g, op, Consistency::Quorum, request_id).await)
    });
    for (group, outcome) in futures::future::join_all(writes).await {
        match outcome.map(|s| s.value) {
            Ok(Response::SubjectErased { items }) => erased.extend(items),
            Ok(Response::Rejected(r)) => pending.push(format!("group {group}: {}", r.message)),
            Ok(other) => pending.push(format!("group {group}: unexpected answer {other:?}")),
            Err(e) => pending.push(format!("group {group}: {e}")),
        }
    }
    // A secure erasure: every node snapshots and purges the data groups' logs
    // and compacts its store, so the erased records leave its files.
    if req.secure_erase && pending.is_empty() {
        // The SQL text of recorded activities that named the subject goes too.
        state.activities.redact_pending(&subject);
        if let Err(e) = state.cluster.meta_write(MetaOp::RedactActivities { needle: subject.clone() }).await {
            pending.push(format!("redacting activity records: {e}"));
        }
        let nodes = state.cluster.map().map(|m| m.nodes).unwrap_or_default();
        let mut purged_groups = groups.clone();
        purged_groups.push(tessera_api::META_GROUP);
        let groups = &purged_groups;
        let purges =
            nodes.iter().map(|n| async move { (n.id, state.cluster.purge_erased(n, groups, std::time::Duration::from_secs(60)).await) });
        for (node, outcome) in futures::future::join_all(purges).await {
            if let Err(e) = outcome {
                pending.push(format!("purging node {node}'s files: {e}"));
            }
        }
    }
    // What the job found at its start and what any attempt erased since.
    let mut all: Vec<SubjectItem> = job_items(&job);
    for item in erased.iter().map(without_data) {
        if !all.iter().any(|i| (&i.store, &i.location, &i.item_id) == (&item.store, &item.location, &item.item_id)) {
            all.push(item);
        }
    }
    job["attempts"] = json!(job["attempts"].as_u64().unwrap_or(0) + 1);
    job["updated_at_ms"] = json!(tessera_api::command::now_ms());
    if !pending.is_empty() {
        job["pending"] = json!(pending);
        let recorded = state.cluster.meta_write(MetaOp::PutErasureJob { id: job_id.clone(), job: job.clone() }).await;
        tracing::warn!(subject = %subject, job = %job_id, ?pending, recorded = recorded.is_ok(), "erasure incomplete");
        return Err(ApiError::Unavailable(format!(
            "erasure job {job_id} of subject {subject} is incomplete (attempt {}): pending: {}; send the same request again to finish it \
             (no certificate is issued until every store and shard confirmed; status: GET /api/v1/compliance/erasure-jobs/{job_id})",
            job["attempts"],
            pending.join("; ")
        )));
    }
    let erased = all;
    // Exports of the subject kept for download hold its data too.
    match state.cluster.meta_write(MetaOp::DropExports { subject_id: subject.clone() }).await {
        Ok(Response::Deleted(n)) if n > 0 => tracing::info!(subject = %subject, exports = n, "kept exports of the erased subject removed"),
        Ok(_) => {}
        Err(e) => {
            return Err(ApiError::Unavailable(format!(
                "erasure job {job_id} of subject {subject}: removing its kept exports failed ({e}); send the same request again to finish it"
            )));
        }
    }

    let key = signing_key(state).await?;
    let now = tessera_api::command::now_ms();
    let first8: String = subject.chars().take(8).collect();
    let cert_id = format!("DEL-{}-{first8}", compact_timestamp(now));
    let total_bytes: u64 = erased.iter().map(|i| i.bytes).sum();
    let count = |store: &str| erased.iter().filter(|i| i.store == store).count();
    let mut affected: Vec<String> = erased.iter().map(|i| format!("{}:{}", i.store, i.location)).collect();
    affected.sort();
    affected.dedup();
    let mut certificate = json!({
        "id": cert_id, "certificate_id": cert_id, "subject_id": subject, "subject_identifier": subject,
        "timestamp": iso8601_ms(now), "deleted_at": iso8601_ms(now), "issued_at_ms": now,
        "total_items": erased.len(), "records_deleted": erased.len(), "total_bytes": total_bytes,
        "items_by_store": {
            "kv": count("kv"), "document": count("document"), "sql": count("sql"), "graph": count("graph"),
            "object": count("object"), "vector": count("vector"), "timeseries": count("timeseries"), "stream": count("stream"),
        },
        "tables_affected": affected,
        "verification_hash": verification_hash(&subject, &erased),
        "verified_by": state.router_name, "deleted_by": req.requestor.clone().unwrap_or_else(|| actor(caller)),
        "requestor": req.requestor, "reason": req.reason, "scope": scope_kind,
        "secure_erase_performed": req.secure_erase,
        // What a restore re-applies when it brings back data older than this.
        "erasure_scope": req.scope,
        // Where the subject's data is gone, and how backups are covered.
        "covers": {
            "live_stores": true,
            "logs_snapshots_and_files": req.secure_erase,
            "backups": "older backups still hold the data; restoring one re-applies this erasure before the restore answers (erasure ledger beside the backups)",
        },
        "signature_algorithm": "Ed25519",
        "public_key": B64.encode(key.verifying_key().to_bytes()),
    });
    let signature = key.sign(&canonical(&certificate));
    certificate["signature"] = json!(B64.encode(signature.to_bytes()));
    if let Response::Rejected(r) =
        state.cluster.meta_write(MetaOp::RecordCertificate { id: cert_id.clone(), certificate: certificate.clone() }).await?
    {
        return Err(r.into());
    }
    // The ledger beside the backups outlives a restore of the meta group (and the cluster).
    if let Err(e) = state.backups.record_erasure(&certificate) {
        tracing::error!(certificate = %cert_id, "the certificate was not appended to the erasure ledger beside the backups: {e}");
    }
    job["state"] = json!("complete");
    job["pending"] = json!([]);
    job["certificate_id"] = json!(cert_id);
    if let Err(e) = state.cluster.meta_write(MetaOp::PutErasureJob { id: job_id.clone(), job }).await {
        tracing::warn!(job = %job_id, "the erasure job was not marked complete: {e}");
    }
    let event = AuditEvent {
        event_type: "data_erased".into(),
        actor: actor(caller),
        subject_id: Some(subject.clone()),
        details: json!({"certificate_id": cert_id, "total_items": erased.len(), "total_bytes": total_bytes, "secure_erase": req.secure_erase}),
    };
    if let Response::Rejected(r) = state.cluster.meta_write(MetaOp::Audit(vec![event])).await? {
        tracing::warn!("the erasure was not audited: {}", r.message);
    }
    tracing::info!(subject = %subject, certificate = %cert_id, items = erased.len(), "data subject erased");
    Ok(Erased {
        success: true,
        certificate: SignedCertificate(certificate),
        message: format!("erased {} items ({} bytes) of subject {subject}", erased.len(), total_bytes),
    })
}

/// Re-applies the erasures of `certificates` after a restore of `backup_id`
/// brought back data older than them: each subject is erased again with the
/// certificate's scope (a new certificate records that), and the original
/// certificate is recorded again. Answers what was re-applied and what is
/// still pending.
pub(crate) async fn reapply_after_restore(state: &AppState, certificates: Vec<Value>, backup_id: &str) -> (Vec<Value>, Vec<String>) {
    let (mut done, mut pending) = (Vec::new(), Vec::new());
    for original in certificates {
        let (Some(id), Some(subject)) = (original["certificate_id"].as_str(), original["subject_id"].as_str()) else { continue };
        let scope = match &original["erasure_scope"] {
            Value::Null => serde_json::from_value(json!({"type": original["scope"]})).ok(),
            given => serde_json::from_value(given.clone()).ok(),
        };
        let req = EraseRequest {
            subject_id: Some(subject.to_string()),
            scope,
            secure_erase: original["secure_erase_performed"].as_bool().unwrap_or(false),
            requestor: Some(format!("restore of backup {backup_id}")),
            reason: Some(format!("re-applying certificate {id}: the restored backup predates it")),
            ..EraseRequest::default()
        };
        match run(state, &Caller::Bootstrap, subject.to_string(), req).await {
            Ok(Erased { certificate: SignedCertificate(issued), .. }) => {
                let again = MetaOp::RecordCertificate { id: id.to_string(), certificate: original.clone() };
                match state.cluster.meta_write(again).await {
                    Ok(Response::Rejected(r)) if !r.message.contains("exists") => {
                        pending.push(format!("certificate {id}: recording it again: {}", r.message))
                    }
                    Err(e) => pending.push(format!("certificate {id}: recording it again: {e}")),
                    _ => {}
                }
                done.push(json!({
                    "certificate_id": id, "subject_id": subject,
                    "reapplied_by": issued["certificate_id"], "items_erased": issued["total_items"],
                }));
            }
            Err(e) => pending.push(format!("certificate {id} (subject {subject}): {e}")),
        }
    }
    (done, pending)
}

/// The subject's running erasure job, or a new one recording what the subject
/// has now in every store (every group must answer; nothing is erased before).
/// The job keeps where each item was and its size, never its data.
/// A running job continues only with the same parameters (scope, rule,
/// `secure_erase`): its commands' request ids would replay the first answers.
async fn open_job(
    state: &AppState,
    subject: &str,
    rule: &tessera_api::compliance::SubjectRule,
    coverage: &Coverage,
    req: &EraseRequest,
    params: &str,
) -> Result<Value, ApiError> {
    let jobs = typed::pick(state.cluster.meta_read(MetaQuery::ErasureJobs).await?, typed::shape!(MetaQueryResult::ErasureJobs))?;
    if let Some(job) = jobs.into_iter().find(|j| j["subject_id"] == subject && j["state"] == "running") {
        if job["params"] != params {
            return Err(ApiError::Conflict(format!(
                "erasure job {} of subject {subject} is running with another scope or secure_erase; send that request again to finish it first",
                job["id"].as_str().unwrap_or_default()
            )));
        }
        return Ok(job);
    }
    let found: Vec<SubjectItem> = find(state, rule)
        .await
        .map_err(|e| {
            ApiError::Unavailable(format!("erasure of subject {subject} not started (nothing was erased): finding its records: {e}"))
        })?
        .into_iter()
        .filter(|i| coverage.covers(i))
        .map(|i| without_data(&i))
        .collect();
    let now = tessera_api::command::now_ms();
    let id = format!("ERJ-{}-{:08x}", compact_timestamp(now), rand::random::<u32>());
    let job = json!({
        "id": id, "subject_id": subject, "state": "running", "created_at_ms": now, "created_at": iso8601_ms(now),
        "updated_at_ms": now, "attempts": 0, "pending": [], "items": found, "params": params,
        "requestor": req.requestor, "reason": req.reason, "secure_erase": req.secure_erase,
    });
    match state.cluster.meta_write(MetaOp::PutErasureJob { id, job: job.clone() }).await? {
        Response::Rejected(r) => Err(r.into()),
        _ => Ok(job),
    }
}

/// A digest of what an erasure command does (rule, places, secure_erase).
fn params_digest(op: &Operation) -> String {
    let bytes = tessera_api::codec::encode(op).unwrap_or_default();
    hex::encode(&Sha256::digest(&bytes)[..8])
}

/// The request id of a job's write to `target`: the same for every attempt.
fn job_request_id(job_id: &str, target: &str) -> String {
    hex::encode(&Sha256::new().chain_update(job_id.as_bytes()).chain_update([0]).chain_update(target.as_bytes()).finalize()[..16])
}

fn without_data(item: &SubjectItem) -> SubjectItem {
    SubjectItem { data: Value::Null, ..item.clone() }
}

fn job_items(job: &Value) -> Vec<SubjectItem> {
    serde_json::from_value(job["items"].clone()).unwrap_or_default()
}

/// An erasure job: what it found and how far it got.
// Read back from the JSON `open_job` and `run` record.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErasureJobRecord {
    /// `ERJ-<YYYYMMDDHHMMSS>-<8 hex digits>`.
    id: String,
    subject_id: String,
    /// `running` until every store confirmed, then `complete`.
    state: String,
    created_at_ms: i64,
    created_at: String,
    updated_at_ms: i64,
    /// Attempts made so far (a failed one is finished by sending the request again).
    attempts: u64,
    /// What the last attempt could not do; empty once complete.
    pending: Vec<String>,
    /// What the job found at its start and what any attempt erased since.
    items: Vec<ErasedItem>,
    /// A digest of the erasure's command (rule, places, secure_erase): a running
    /// job continues only with the same.
    params: String,
    requestor: Option<String>,
    reason: Option<String>,
    secure_erase: bool,
    /// The deletion certificate issued; absent until complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_id: Option<String>,
}

/// One record of an erasure job: where it was, its id and size (never its data).
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErasedItem {
    /// `kv`, `document`, `sql`, `graph`, `object`, `vector`, `timeseries` or `stream`.
    store: String,
    /// The collection, graph, `database.table`, bucket or other place of the store.
    location: String,
    item_id: String,
    /// Always null: a job never keeps the data.
    data: Value,
    /// Its stored size.
    bytes: u64,
    /// When it was last written (Unix milliseconds), where the store keeps it.
    at_ms: Option<i64>,
}

/// An erasure job with its totals.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ErasureJobView {
    #[serde(flatten)]
    job: ErasureJobRecord,
    /// Records in `items`.
    total_items: usize,
    /// Their stored bytes.
    total_bytes: u64,
}

/// Every erasure job.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ErasureJobList {
    jobs: Vec<ErasureJobView>,
    total_count: usize,
}

/// Every erasure job, oldest first.
pub async fn list_jobs(state: &AppState) -> Result<ErasureJobList, ApiError> {
    enabled(state)?;
    let jobs = typed::pick(state.cluster.meta_read(MetaQuery::ErasureJobs).await?, typed::shape!(MetaQueryResult::ErasureJobs))?;
    let summaries: Vec<ErasureJobView> = jobs.iter().map(job_summary).collect::<Result<_, _>>()?;
    Ok(ErasureJobList { total_count: summaries.len(), jobs: summaries })
}

/// Erasure job `id`.
pub async fn get_job(state: &AppState, id: &str) -> Result<ErasureJobView, ApiError> {
    enabled(state)?;
    let jobs = typed::pick(state.cluster.meta_read(MetaQuery::ErasureJobs).await?, typed::shape!(MetaQueryResult::ErasureJobs))?;
    let job = jobs.iter().find(|j| j["id"] == id).ok_or_else(|| ApiError::NotFound(format!("erasure job {id} does not exist")))?;
    job_summary(job)
}

fn job_summary(job: &Value) -> Result<ErasureJobView, ApiError> {
    let job: ErasureJobRecord = serde_json::from_value(job.clone())
        .map_err(|e| ApiError::Internal(format!("erasure job {} is malformed: {e}", job["id"].as_str().unwrap_or_default())))?;
    Ok(ErasureJobView { total_items: job.items.len(), total_bytes: job.items.iter().map(|i| i.bytes).sum(), job })
}

/// Deletes the subject's rows of one table (`VACUUM` after it is not needed:
/// SQL deletes are compacted with the table's next vacuum).
async fn delete_rows(state: &AppState, database: &str, table: &str, rule: &tessera_api::compliance::SubjectRule) -> Result<(), ApiError> {
    let group = state.cluster.group_for(&tessera_api::routing::RoutingKey::SqlDatabase(database))?;
    let q = tessera_api::sql::SqlQuery::DescribeTable { database: database.into(), name: table.into() };
    let schema = typed::pick(
        typed::read::<Sql>(&*state.cluster, group, q, Consistency::Quorum, None).await?.value,
        typed::shape!(tessera_api::sql::SqlResult::Catalog),
    )?;
    let columns: Vec<String> =
        schema["columns"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_string)).collect();
    let condition: Vec<String> = columns
        .iter()
        .filter(|c| rule.fields.iter().any(|f| f.eq_ignore_ascii_case(c)))
        .map(|c| format!("CAST(\"{c}\" AS TEXT) = $1"))
        .collect();
    if condition.is_empty() {
        return Ok(());
    }
    let op = SqlOp {
        database: database.into(),
        sql: format!("DELETE FROM \"{table}\" WHERE {}", condition.join(" OR ")),
        params: vec![json!(rule.subject_id)],
        max_result_rows: state.config.query_limits.max_result_rows,
        timeout_ms: state.config.query_limits.query_timeout_secs.saturating_mul(1000),
        max_memory_mb: state.config.query_limits.max_memory_mb,
        transaction: None,
    };
    let answer = typed::propose::<Sql>(&*state.cluster, group, op, Consistency::Quorum).await?.value;
    answer.map(|_| ()).map_err(|r| ApiError::sql(r, ""))
}

/// SHA-256 (hex) of the subject and every erased item's store, place, id and
/// size, sorted: it names exactly what was erased without keeping the data.
fn verification_hash(subject: &str, items: &[SubjectItem]) -> String {
    let mut lines: Vec<String> = items.iter().map(|i| format!("{}\t{}\t{}\t{}", i.store, i.location, i.item_id, i.bytes)).collect();
    lines.sort();
    let mut h = Sha256::new();
    h.update(subject.as_bytes());
    for l in lines {
        h.update(b"\n");
        h.update(l.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The bytes a certificate's signature covers: the certificate without
/// `signature`, as compact JSON with object keys sorted (`jq -cS 'del(.signature)'`).
pub fn canonical(v: &Value) -> Vec<u8> {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().filter(|k| k.as_str() != "signature").collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Keys are inserted in sorted order, so the output is sorted whether or
    // not serde_json keeps insertion order.
    serde_json::to_vec(&sorted(v)).unwrap_or_default()
}

/// The cluster's certificate-signing key: its seed is drawn once by the first
/// router that needs it and recorded in the meta group (the first record wins).
async fn signing_key(state: &AppState) -> Result<SigningKey, ApiError> {
    if let Some(key) = recorded_key(state).await? {
        return Ok(key);
    }
    let mut seed = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut seed);
    state.cluster.meta_write(MetaOp::EnsureSigningKey { seed_b64: B64.encode(seed) }).await?;
    recorded_key(state).await?.ok_or_else(|| ApiError::Internal("the signing key was not recorded".into()))
}

async fn recorded_key(state: &AppState) -> Result<Option<SigningKey>, ApiError> {
    let seed = typed::pick(state.cluster.meta_read(MetaQuery::SigningKey).await?, typed::shape!(MetaQueryResult::SigningKey))?;
    let Some(seed) = seed else { return Ok(None) };
    let bytes: [u8; 32] = B64
        .decode(seed)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ApiError::Internal("the recorded signing key is malformed".into()))?;
    Ok(Some(SigningKey::from_bytes(&bytes)))
}

/// The key deletion certificates are signed with.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PublicKeyView {
    /// `Ed25519`.
    algorithm: String,
    /// Base64 of the key's 32 bytes.
    public_key: String,
    /// The key as a PEM SubjectPublicKeyInfo (RFC 8410).
    public_key_pem: String,
}

/// The key certificates verify with.
pub async fn public_key(state: &AppState) -> Result<PublicKeyView, ApiError> {
    enabled(state)?;
    let key = signing_key(state).await?.verifying_key();
    // SubjectPublicKeyInfo of an Ed25519 key (RFC 8410): a fixed prefix, then the 32 bytes.
    let mut der = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    der.extend_from_slice(&key.to_bytes());
    let pem = format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", B64.encode(der));
    Ok(PublicKeyView { algorithm: "Ed25519".into(), public_key: B64.encode(key.to_bytes()), public_key_pem: pem })
}

fn time_param(v: Option<&str>, name: &str) -> Result<Option<i64>, ApiError> {
    let Some(s) = v else { return Ok(None) };
    s.parse::<i64>()
        .ok()
        .or_else(|| parse_date(s))
        .map(Some)
        .ok_or_else(|| ApiError::BadRequest(format!("{name} must be Unix milliseconds or an RFC 3339 date")))
}

/// Deletion certificates.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CertificateList {
    certificates: Vec<SignedCertificate>,
    total_count: usize,
}

/// The certificates issued from `from` to `to` (Unix milliseconds or RFC 3339 dates), oldest first.
pub async fn list_certificates(state: &AppState, from: Option<&str>, to: Option<&str>) -> Result<CertificateList, ApiError> {
    enabled(state)?;
    let q = MetaQuery::Certificates { from_ms: time_param(from, "from")?, to_ms: time_param(to, "to")? };
    let certs = typed::pick(state.cluster.meta_read(q).await?, typed::shape!(MetaQueryResult::Certificates))?;
    Ok(CertificateList { total_count: certs.len(), certificates: certs.into_iter().map(SignedCertificate).collect() })
}

async fn certificate(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let q = MetaQuery::Certificate { id: id.to_string() };
    typed::pick(state.cluster.meta_read(q).await?, typed::shape!(MetaQueryResult::Certificate))?
        .ok_or_else(|| ApiError::NotFound(format!("certificate {id} does not exist")))
}

/// Certificate `id`, as it was signed and recorded.
pub async fn get_certificate(state: &AppState, id: &str) -> Result<SignedCertificate, ApiError> {
    enabled(state)?;
    Ok(SignedCertificate(certificate(state, id).await?))
}

/// Whether a certificate's signature verifies, and why not.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CertificateVerification {
    /// Its Ed25519 signature over its content verifies with the cluster's key.
    valid: bool,
    certificate: SignedCertificate,
    message: String,
}

/// Whether certificate `id` verifies: valid when its Ed25519 signature over
/// its content verifies with the cluster's key (a changed field, a foreign key
/// or signature fails).
pub async fn verify_certificate(state: &AppState, id: &str) -> Result<CertificateVerification, ApiError> {
    enabled(state)?;
    let cert = certificate(state, id).await?;
    let key = signing_key(state).await?.verifying_key();
    let (valid, message) = check(&cert, &key);
    Ok(CertificateVerification { valid, certificate: SignedCertificate(cert), message })
}

/// Whether `cert` is signed by `key`, and why not.
pub fn check(cert: &Value, key: &VerifyingKey) -> (bool, String) {
    if cert["public_key"].as_str() != Some(&B64.encode(key.to_bytes())) {
        return (false, "the certificate names another public key than the cluster's".into());
    }
    let Some(signature) = cert["signature"].as_str().and_then(|s| B64.decode(s).ok()).and_then(|b| <[u8; 64]>::try_from(b).ok()) else {
        return (false, "the certificate has no well-formed signature".into());
    };
    match key.verify(&canonical(cert), &ed25519_dalek::Signature::from_bytes(&signature)) {
        Ok(()) => (true, "the Ed25519 signature verifies with the cluster's public key".into()),
        Err(_) => (false, "the signature does not match the certificate's content: it was altered".into()),
    }
}
