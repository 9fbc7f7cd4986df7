//! Privacy: the caller's own data, exported or erased, and their consent and
//! CCPA choices, kept in Tessera's compliance API as the source of truth.
//!
//! # Routes
//!
//! - `POST /api/v1/privacy/export` → 200 with every record of the caller:
//!   `user`, `sessions` (ids and times, never tokens), `meetings` they own,
//!   `segments` they spoke (in any meeting), `webhooks` (never secrets, with
//!   their delivery counts), `organizations` they belong to, `invitations`
//!   addressed to their email, `consent` and `ccpa`.
//! - `POST /api/v1/privacy/delete` `{confirm: true}` (anything else: 400) → 200
//!   `{deleted: true, user_id, erasure_certificate_id, compliance_consent_records_deleted, counts}`.
//!   In order:
//!   1. Tessera erases the subject (the user's id) through
//!      `DELETE /api/v1/compliance/data-subject/{user_id}`, limited to the
//!      application's database (`scope: specific_collections`): every row of a
//!      column Tessera takes for a subject (`user_id`, `owner_id`, … by
//!      default) equal to the id, with a signed deletion certificate.
//!   2. Tessera deletes the subject's consent records:
//!      `DELETE /api/v1/compliance/consent/{user_id}`.
//!   3. The application then deletes, in one transaction, what remains and
//!      what Tessera cannot tell belongs to the user, whatever Tessera's
//!      subject columns are: their sessions and refresh tokens, webhooks and
//!      deliveries, the segments they spoke, the meetings they own with
//!      every segment of those meetings, their memberships, invitations to
//!      their email, their consent and CCPA records, and their user row (its
//!      key column is `id`, no subject column). Organizations and
//!      invitations they created forget them (`created_by`, `invited_by` set
//!      to null). Afterwards an organization left without members is deleted;
//!      one left without an owner gets its longest-standing member as owner.
//!
//!   A failure of step 1 or 2 answers 503 before anything of the application
//!   is deleted. Step 1 deletes the user's sessions, so when step 3 fails
//!   (503 too) the user signs in again and repeats the request: the erasure
//!   runs again (issuing a new certificate) and the rest is deleted. Deleting
//!   the sessions ends every token of the user (the auth layer looks the
//!   session up on every request).
//! - `GET`/`PUT /api/v1/privacy/consent` `{marketing: bool, analytics: bool}`
//!   and `GET`/`PUT /api/v1/privacy/ccpa` `{do_not_sell: bool, ca_resident: bool}`:
//!   a PUT records each purpose first with `POST /api/v1/compliance/consent`
//!   (`marketing`, `analytics`; CCPA: `do_not_sell`, granted when the user
//!   opts out of sale, `ca_resident` in its metadata), then stores the record
//!   here with `updated_at` and the compliance consent ids, and answers it.
//!   When the compliance API fails the PUT answers 503 and nothing is stored
//!   here. A GET answers the stored record (all false and `updated_at` null
//!   before the first PUT).
//!
//! The compliance calls go through [`Db::call`], signed in as the
//! application's database user. Tessera allows erasure to admins only
//! (`manage:compliance`) and consent writes to `write:compliance`, and the
//! router must run with `SERVICE_COMPLIANCE_ENABLED=true`; otherwise those
//! requests answer 503 saying why.

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::clock::{iso, now_ms};
use crate::db::{Db, DbError};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS privacy_consents (user_id TEXT PRIMARY KEY, marketing BOOLEAN NOT NULL, analytics BOOLEAN NOT NULL, compliance_consent_ids TEXT NOT NULL, updated_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS privacy_ccpa (user_id TEXT PRIMARY KEY, do_not_sell BOOLEAN NOT NULL, ca_resident BOOLEAN NOT NULL, compliance_consent_id TEXT NOT NULL, updated_at BIGINT NOT NULL)",
];

/// The source Tessera's consent records name.
const SOURCE: &str = "tessera-meetings";
/// The version of the application's privacy policy the consents refer to.
pub const POLICY_VERSION: &str = "1";
/// Rows read per page when exporting.
const PAGE: usize = 2000;
/// Owned meetings per `DELETE … IN (…)` statement.
const IN_CHUNK: usize = 500;

/// The calls to Tessera's compliance API (spec 02) the application makes.
pub mod compliance {
    use super::*;

    fn failed(what: &str, e: DbError) -> AppError {
        let hint = match &e {
            DbError::Refused { code, .. } if code == "404" || code.eq_ignore_ascii_case("NOT_FOUND") => {
                " (is the router started with SERVICE_COMPLIANCE_ENABLED=true?)"
            }
            DbError::Refused { code, .. } if code == "403" || code.eq_ignore_ascii_case("FORBIDDEN") => {
                " (the application's database user lacks the permission: erasure needs an admin)"
            }
            _ => "",
        };
        AppError::Unavailable(format!("Tessera's compliance API did not {what}: {e}{hint}"))
    }

    /// The body of `POST /api/v1/compliance/consent` for one purpose.
    pub fn consent_body(subject: &str, purpose: &str, granted: bool, metadata: Value) -> Value {
        json!({
            "subject_id": subject,
            "purpose": purpose,
            "granted": granted,
            "source": SOURCE,
            "version": POLICY_VERSION,
            "lawful_basis": "consent",
            "metadata": metadata,
        })
    }

    /// Records `subject`'s choice for `purpose`; answers Tessera's consent id.
    pub async fn record_consent(db: &Db, subject: &str, purpose: &str, granted: bool, metadata: Value) -> AppResult<String> {
        let answer = db
            .call(reqwest::Method::POST, "/api/v1/compliance/consent", Some(&consent_body(subject, purpose, granted, metadata)))
            .await
            .map_err(|e| failed(&format!("record the {purpose} consent"), e))?;
        Ok(answer["consent_id"].as_str().unwrap_or_default().to_string())
    }

    /// The body of the erasure of `subject` in the application's `database`.
    pub fn erasure_body(subject: &str, database: &str) -> Value {
        json!({
            "subject_id": subject,
            "requestor": SOURCE,
            "reason": "the user deleted their account (POST /api/v1/privacy/delete)",
            "scope": {"type": "specific_collections", "collections": [database]},
            "secure_erase": false,
        })
    }

    /// Erases `subject` from the application's database; answers the signed
    /// deletion certificate.
    pub async fn erase_subject(db: &Db, subject: &str) -> AppResult<Value> {
        let path = format!("/api/v1/compliance/data-subject/{subject}");
        let answer = db
            .call(reqwest::Method::DELETE, &path, Some(&erasure_body(subject, db.database())))
            .await
            .map_err(|e| failed("erase the user", e))?;
        Ok(answer["certificate"].clone())
    }

    /// Deletes every consent record of `subject`; answers how many.
    pub async fn erase_consents(db: &Db, subject: &str) -> AppResult<u64> {
        let path = format!("/api/v1/compliance/consent/{subject}");
        let answer = db.call(reqwest::Method::DELETE, &path, None).await.map_err(|e| failed("delete the user's consent records", e))?;
        Ok(answer["deleted_records"].as_u64().unwrap_or(0))
    }
}

/// The caller's consent, as stored.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Consent {
    pub marketing: bool,
    pub analytics: bool,
    /// Null before the first choice.
    pub updated_at: Option<String>,
    /// The consent records of Tessera's compliance API that hold the choice.
    pub compliance_consent_ids: Vec<String>,
}

/// The caller's CCPA choices, as stored.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ccpa {
    pub do_not_sell: bool,
    pub ca_resident: bool,
    pub updated_at: Option<String>,
    pub compliance_consent_id: Option<String>,
}

/// Body of `PUT /api/v1/privacy/consent`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentChoice {
    pub marketing: bool,
    pub analytics: bool,
}

/// Body of `PUT /api/v1/privacy/ccpa`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CcpaChoice {
    pub do_not_sell: bool,
    pub ca_resident: bool,
}

/// Body of `POST /api/v1/privacy/delete`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    pub confirm: Value,
}

fn flag(row: &Map<String, Value>, k: &str) -> bool {
    row.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn consent_from(row: Option<Map<String, Value>>) -> Consent {
    match row {
        None => Consent { marketing: false, analytics: false, updated_at: None, compliance_consent_ids: Vec::new() },
        Some(r) => Consent {
            marketing: flag(&r, "marketing"),
            analytics: flag(&r, "analytics"),
            updated_at: r.get("updated_at").and_then(Value::as_i64).map(iso),
            compliance_consent_ids: r
                .get("compliance_consent_ids")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default(),
        },
    }
}

fn ccpa_from(row: Option<Map<String, Value>>) -> Ccpa {
    match row {
        None => Ccpa { do_not_sell: false, ca_resident: false, updated_at: None, compliance_consent_id: None },
        Some(r) => Ccpa {
            do_not_sell: flag(&r, "do_not_sell"),
            ca_resident: flag(&r, "ca_resident"),
            updated_at: r.get("updated_at").and_then(Value::as_i64).map(iso),
            compliance_consent_id: r.get("compliance_consent_id").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string),
        },
    }
}

pub async fn consent(db: &Db, caller: &Caller) -> AppResult<Consent> {
    let rows = db
        .sql(
            "SELECT marketing, analytics, compliance_consent_ids, updated_at FROM privacy_consents WHERE user_id = $1",
            &[json!(caller.user.id)],
        )
        .await?;
    Ok(consent_from(rows.first()))
}

pub async fn ccpa(db: &Db, caller: &Caller) -> AppResult<Ccpa> {
    let rows = db
        .sql(
            "SELECT do_not_sell, ca_resident, compliance_consent_id, updated_at FROM privacy_ccpa WHERE user_id = $1",
            &[json!(caller.user.id)],
        )
        .await?;
    Ok(ccpa_from(rows.first()))
}

/// Records the caller's consent in Tessera's compliance API, then here.
pub async fn set_consent(db: &Db, caller: &Caller, c: ConsentChoice) -> AppResult<Consent> {
    let user = &caller.user.id;
    let metadata = json!({"application": SOURCE, "route": "PUT /api/v1/privacy/consent"});
    let marketing = compliance::record_consent(db, user, "marketing", c.marketing, metadata.clone()).await?;
    let analytics = compliance::record_consent(db, user, "analytics", c.analytics, metadata).await?;
    let ids = vec![marketing, analytics];
    let now = now_ms();
    db.sql(
        "INSERT INTO privacy_consents (user_id, marketing, analytics, compliance_consent_ids, updated_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (user_id) DO UPDATE SET marketing = $2, analytics = $3, compliance_consent_ids = $4, updated_at = $5",
        &[json!(user), json!(c.marketing), json!(c.analytics), json!(serde_json::to_string(&ids).unwrap_or_default()), json!(now)],
    )
    .await?;
    Ok(Consent { marketing: c.marketing, analytics: c.analytics, updated_at: Some(iso(now)), compliance_consent_ids: ids })
}

/// Records the caller's CCPA choices in Tessera's compliance API (the
/// `do_not_sell` purpose), then here.
pub async fn set_ccpa(db: &Db, caller: &Caller, c: CcpaChoice) -> AppResult<Ccpa> {
    let user = &caller.user.id;
    let metadata = json!({"application": SOURCE, "route": "PUT /api/v1/privacy/ccpa", "ca_resident": c.ca_resident});
    let id = compliance::record_consent(db, user, "do_not_sell", c.do_not_sell, metadata).await?;
    let now = now_ms();
    db.sql(
        "INSERT INTO privacy_ccpa (user_id, do_not_sell, ca_resident, compliance_consent_id, updated_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (user_id) DO UPDATE SET do_not_sell = $2, ca_resident = $3, compliance_consent_id = $4, updated_at = $5",
        &[json!(user), json!(c.do_not_sell), json!(c.ca_resident), json!(id), json!(now)],
    )
    .await?;
    Ok(Ccpa {
        do_not_sell: c.do_not_sell,
        ca_resident: c.ca_resident,
        updated_at: Some(iso(now)),
        compliance_consent_id: Some(id).filter(|s| !s.is_empty()),
    })
}

/// A row as exported: every `…_at` column of Unix milliseconds as an RFC 3339 time.
fn exported(mut row: Map<String, Value>) -> Value {
    for (k, v) in row.iter_mut() {
        if k.ends_with("_at")
            && let Some(ms) = v.as_i64()
        {
            *v = json!(iso(ms));
        }
    }
    Value::Object(row)
}

/// Every row of `select` (a `SELECT id, … FROM … WHERE …` of a table keyed by a
/// text `id`, with `params` bound from `$1`), read in pages by id.
async fn all_rows(db: &Db, select: &str, params: &[Value]) -> AppResult<Vec<Map<String, Value>>> {
    let mut out = Vec::new();
    let mut last = String::new();
    loop {
        let mut p = params.to_vec();
        p.push(json!(last));
        let n = p.len();
        let page = db.sql(&format!("{select} AND id > ${n} ORDER BY id LIMIT {PAGE}"), &p).await?;
        let rows = page.objects();
        let full = rows.len() == PAGE;
        if let Some(l) = rows.last().and_then(|r| r.get("id")).and_then(Value::as_str) {
            last = l.to_string();
        }
        out.extend(rows);
        if !full {
            return Ok(out);
        }
    }
}

/// Every record of the caller (see the module documentation).
pub async fn export(db: &Db, caller: &Caller) -> AppResult<Value> {
    let me = json!(caller.user.id);
    let user = db.sql("SELECT id, email, display_name, role, created_at FROM users WHERE id = $1", std::slice::from_ref(&me)).await?;
    let user = user.first().map(exported).unwrap_or(Value::Null);
    let sessions = db
        .sql("SELECT id, created_at, revoked FROM sessions WHERE user_id = $1 ORDER BY created_at, id", std::slice::from_ref(&me))
        .await?;
    let meetings = all_rows(
        db,
        "SELECT id, organization_id, title, description, scheduled_at, status, created_at, started_at, ended_at, summary FROM meetings WHERE owner_id = $1",
        std::slice::from_ref(&me),
    )
    .await?;
    let segments = all_rows(
        db,
        "SELECT id, meeting_id, speaker, text, start_ms, end_ms, confidence, created_at FROM segments WHERE user_id = $1",
        std::slice::from_ref(&me),
    )
    .await?;
    let comments =
        all_rows(db, "SELECT id, meeting_id, text, created_at FROM comments WHERE user_id = $1", std::slice::from_ref(&me)).await?;
    let webhooks = db
        .sql("SELECT id, url, events, created_at FROM webhooks WHERE user_id = $1 ORDER BY created_at, id", std::slice::from_ref(&me))
        .await?;
    let mut hooks = Vec::new();
    for mut w in webhooks.objects() {
        if let Some(events) = w.get("events").and_then(Value::as_str).and_then(|t| serde_json::from_str::<Value>(t).ok()) {
            w.insert("events".into(), events);
        }
        let id = w.get("id").cloned().unwrap_or(Value::Null);
        let counts = db.sql("SELECT status, COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = $1 GROUP BY status", &[id]).await?;
        let counts: Map<String, Value> = counts
            .objects()
            .into_iter()
            .filter_map(|r| Some((r.get("status")?.as_str()?.to_string(), r.get("n").cloned().unwrap_or(json!(0)))))
            .collect();
        w.insert("deliveries".into(), Value::Object(counts));
        hooks.push(exported(w));
    }
    let organizations = db
        .sql(
            "SELECT o.id AS id, o.name AS name, o.slug AS slug, m.role AS role, m.created_at AS joined_at \
             FROM org_members m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = $1 ORDER BY m.created_at, o.id",
            std::slice::from_ref(&me),
        )
        .await?;
    let invitations = db
        .sql(
            "SELECT id, org_id AS organization_id, role, status, created_at, expires_at FROM org_invitations WHERE email = $1 ORDER BY created_at, id",
            &[json!(caller.user.email)],
        )
        .await?;
    Ok(json!({
        "exported_at": iso(now_ms()),
        "format": "tessera-meetings-export/1",
        "user": user,
        "sessions": sessions.objects().into_iter().map(exported).collect::<Vec<_>>(),
        "meetings": meetings.into_iter().map(exported).collect::<Vec<_>>(),
        "segments": segments.into_iter().map(exported).collect::<Vec<_>>(),
        "comments": comments.into_iter().map(exported).collect::<Vec<_>>(),
        "webhooks": hooks,
        "organizations": organizations.objects().into_iter().map(exported).collect::<Vec<_>>(),
        "invitations": invitations.objects().into_iter().map(exported).collect::<Vec<_>>(),
        "consent": consent(db, caller).await?,
        "ccpa": ccpa(db, caller).await?,
    }))
}

/// What a deletion removed, counted just before it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeletedCounts {
    pub sessions: u64,
    pub refresh_tokens: u64,
    pub webhooks: u64,
    pub webhook_deliveries: u64,
    /// Segments the user spoke, in any meeting.
    pub segments: u64,
    pub meetings: u64,
    /// Segments others spoke in the user's meetings.
    pub segments_of_owned_meetings: u64,
    pub memberships: u64,
    pub invitations: u64,
    pub consents: u64,
    pub ccpa: u64,
}

/// Answer of `POST /api/v1/privacy/delete`.
#[derive(Debug, Serialize)]
pub struct Deleted {
    pub deleted: bool,
    pub user_id: String,
    /// The id of the deletion certificate Tessera signed for the erasure.
    pub erasure_certificate_id: Option<String>,
    /// What Tessera's certificate counts (the rows its erasure removed).
    pub erasure_items: Option<u64>,
    pub compliance_consent_records_deleted: u64,
    pub counts: DeletedCounts,
}

async fn count(db: &Db, sql: &str, params: &[Value]) -> AppResult<u64> {
    let rows = db.sql(sql, params).await?;
    Ok(rows.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0))
}

/// `(sql, params)` of the statements deleting `meetings`' segments, in chunks.
fn segment_deletes(meetings: &[String]) -> Vec<(String, Vec<Value>)> {
    meetings
        .chunks(IN_CHUNK)
        .map(|chunk| {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let marks = marks.join(", ");
            let sql = format!("DELETE FROM segments WHERE meeting_id IN ({marks}); DELETE FROM comments WHERE meeting_id IN ({marks})");
            (sql, chunk.iter().map(|m| json!(m)).collect())
        })
        .collect()
}

/// The statements that delete what remains of user `$1` (email `$2`), in one transaction.
/// The search index goes with the texts: the user's own index (documents of
/// their meetings) and the entries of what they said or wrote in others' meetings.
pub const DELETE_USER: &str = "DELETE FROM search_postings WHERE doc_id IN (SELECT id FROM segments WHERE user_id = $1); \
     DELETE FROM search_docs WHERE id IN (SELECT id FROM segments WHERE user_id = $1); \
     DELETE FROM search_postings WHERE doc_id IN (SELECT id FROM comments WHERE user_id = $1); \
     DELETE FROM search_docs WHERE id IN (SELECT id FROM comments WHERE user_id = $1); \
     DELETE FROM search_postings WHERE owner_id = $1; \
     DELETE FROM search_docs WHERE owner_id = $1; \
     DELETE FROM search_stats WHERE owner_id = $1; \
     DELETE FROM comments WHERE user_id = $1; \
     DELETE FROM webhook_deliveries WHERE user_id = $1; \
     DELETE FROM webhooks WHERE user_id = $1; \
     DELETE FROM segments WHERE user_id = $1; \
     DELETE FROM meetings WHERE owner_id = $1; \
     DELETE FROM org_members WHERE user_id = $1; \
     DELETE FROM org_invitations WHERE email = $2; \
     DELETE FROM mail_outbox WHERE to_addr = $2; \
     UPDATE org_invitations SET invited_by = NULL WHERE invited_by = $1; \
     UPDATE organizations SET created_by = NULL WHERE created_by = $1; \
     DELETE FROM privacy_consents WHERE user_id = $1; \
     DELETE FROM privacy_ccpa WHERE user_id = $1; \
     DELETE FROM refresh_tokens WHERE user_id = $1; \
     DELETE FROM sessions WHERE user_id = $1; \
     DELETE FROM users WHERE id = $1";

/// Deletes the caller's account and data (see the module documentation).
pub async fn delete_account(db: &Db, caller: &Caller, r: DeleteRequest) -> AppResult<Deleted> {
    if r.confirm != Value::Bool(true) {
        return Err(AppError::Validation("confirm: must be true to delete the account and all its data".into()));
    }
    let user = caller.user.id.clone();
    let me = [json!(user)];
    let owned: Vec<String> = all_rows(db, "SELECT id FROM meetings WHERE owner_id = $1", &me)
        .await?
        .iter()
        .filter_map(|r| r.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let orgs: Vec<String> = db
        .sql("SELECT org_id FROM org_members WHERE user_id = $1", &me)
        .await?
        .objects()
        .iter()
        .filter_map(|r| r.get("org_id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut counts = DeletedCounts {
        sessions: count(db, "SELECT COUNT(*) FROM sessions WHERE user_id = $1", &me).await?,
        refresh_tokens: count(db, "SELECT COUNT(*) FROM refresh_tokens WHERE user_id = $1", &me).await?,
        webhooks: count(db, "SELECT COUNT(*) FROM webhooks WHERE user_id = $1", &me).await?,
        webhook_deliveries: count(db, "SELECT COUNT(*) FROM webhook_deliveries WHERE user_id = $1", &me).await?,
        segments: count(db, "SELECT COUNT(*) FROM segments WHERE user_id = $1", &me).await?,
        meetings: owned.len() as u64,
        segments_of_owned_meetings: 0,
        memberships: orgs.len() as u64,
        invitations: count(db, "SELECT COUNT(*) FROM org_invitations WHERE email = $1", &[json!(caller.user.email)]).await?,
        consents: count(db, "SELECT COUNT(*) FROM privacy_consents WHERE user_id = $1", &me).await?,
        ccpa: count(db, "SELECT COUNT(*) FROM privacy_ccpa WHERE user_id = $1", &me).await?,
    };
    for chunk in owned.chunks(IN_CHUNK) {
        let marks: Vec<String> = (2..chunk.len() + 2).map(|i| format!("${i}")).collect();
        let mut params = me.to_vec();
        params.extend(chunk.iter().map(|m| json!(m)));
        counts.segments_of_owned_meetings +=
            count(db, &format!("SELECT COUNT(*) FROM segments WHERE user_id <> $1 AND meeting_id IN ({})", marks.join(", ")), &params)
                .await?;
    }

    // Tessera first: when it refuses, nothing of the application is deleted.
    let certificate = compliance::erase_subject(db, &user).await?;
    let consent_records = compliance::erase_consents(db, &user).await?;
    let certificate_id = certificate["id"].as_str().or_else(|| certificate["certificate_id"].as_str()).map(str::to_string);
    tracing::info!(user = %user, certificate = ?certificate_id, "the user's data was erased by Tessera's compliance API; deleting the rest");

    let local = async {
        for (sql, params) in segment_deletes(&owned) {
            db.sql(&sql, &params).await?;
        }
        db.sql(DELETE_USER, &[json!(user), json!(caller.user.email)]).await
    };
    if let Err(e) = local.await {
        tracing::error!(user = %user, "the account's remaining rows were not deleted after Tessera's erasure: {e}");
        return Err(AppError::Unavailable(format!(
            "Tessera erased the user's data (certificate {}), but deleting the account's remaining rows failed ({e}): sign in again and repeat the request",
            certificate_id.as_deref().unwrap_or("?")
        )));
    }
    for org in &orgs {
        if let Err(e) = settle_organization(db, org).await {
            tracing::warn!(organization = %org, "after a member's deletion: {e}");
        }
    }
    tracing::info!(user = %user, "account deleted");
    Ok(Deleted {
        deleted: true,
        user_id: user,
        erasure_items: certificate["total_items"].as_u64(),
        erasure_certificate_id: certificate_id,
        compliance_consent_records_deleted: consent_records,
        counts,
    })
}

/// After a member left for good: an organization without members is deleted
/// (with its invitations); one without an owner gets its longest-standing member as owner.
async fn settle_organization(db: &Db, org: &str) -> Result<(), DbError> {
    let members =
        db.sql("SELECT user_id, role, created_at FROM org_members WHERE org_id = $1 ORDER BY created_at, user_id", &[json!(org)]).await?;
    let members = members.objects();
    if members.is_empty() {
        db.sql("DELETE FROM org_invitations WHERE org_id = $1; DELETE FROM organizations WHERE id = $1", &[json!(org)]).await?;
        return Ok(());
    }
    if !members.iter().any(|m| m.get("role").and_then(Value::as_str) == Some("owner"))
        && let Some(first) = members.first().and_then(|m| m.get("user_id")).and_then(Value::as_str)
    {
        db.sql("UPDATE org_members SET role = 'owner' WHERE org_id = $1 AND user_id = $2", &[json!(org), json!(first)]).await?;
        tracing::info!(organization = %org, user = %first, "the organization had no owner left: its longest-standing member is now its owner");
    }
    Ok(())
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/privacy/export", post(export_route))
        .route("/api/v1/privacy/delete", post(delete_route))
        .route("/api/v1/privacy/consent", get(consent_route).put(set_consent_route))
        .route("/api/v1/privacy/ccpa", get(ccpa_route).put(set_ccpa_route))
}

async fn export_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<Value>> {
    Ok(Json(export(&state.db, &caller).await?))
}

async fn delete_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<DeleteRequest>, JsonRejection>,
) -> AppResult<Json<Deleted>> {
    let Json(r) = body?;
    Ok(Json(delete_account(&state.db, &caller, r).await?))
}

async fn consent_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<Consent>> {
    Ok(Json(consent(&state.db, &caller).await?))
}

async fn set_consent_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<ConsentChoice>, JsonRejection>,
) -> AppResult<Json<Consent>> {
    let Json(c) = body?;
    Ok(Json(set_consent(&state.db, &caller, c).await?))
}

async fn ccpa_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<Ccpa>> {
    Ok(Json(ccpa(&state.db, &caller).await?))
}

async fn set_ccpa_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<CcpaChoice>, JsonRejection>,
) -> AppResult<Json<Ccpa>> {
    let Json(c) = body?;
    Ok(Json(set_ccpa(&state.db, &caller, c).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_records_and_their_defaults() {
        assert_eq!(consent_from(None), Consent { marketing: false, analytics: false, updated_at: None, compliance_consent_ids: vec![] });
        let row: Map<String, Value> = serde_json::from_value(json!({"marketing": true, "analytics": false, "compliance_consent_ids": "[\"con-1\",\"con-2\"]", "updated_at": 1_790_000_000_123i64})).unwrap();
        let c = consent_from(Some(row));
        assert!(c.marketing && !c.analytics);
        assert_eq!(c.compliance_consent_ids, ["con-1", "con-2"]);
        assert_eq!(c.updated_at.as_deref(), Some("2026-09-21T14:13:20.123Z"));
        assert_eq!(ccpa_from(None), Ccpa { do_not_sell: false, ca_resident: false, updated_at: None, compliance_consent_id: None });
    }

    #[test]
    fn only_confirm_true_is_a_deletion() {
        for bad in
            [json!({}), json!({"confirm": false}), json!({"confirm": "true"}), json!({"confirm": 1}), json!({"confirm": true, "also": 1})]
        {
            let parsed: Result<DeleteRequest, _> = serde_json::from_value(bad.clone());
            assert!(parsed.map_or(true, |r| r.confirm != Value::Bool(true)), "{bad}");
        }
        let ok: DeleteRequest = serde_json::from_value(json!({"confirm": true})).unwrap();
        assert_eq!(ok.confirm, Value::Bool(true));
    }

    #[test]
    fn compliance_bodies_name_the_subject_purpose_and_database() {
        let body = compliance::consent_body("u1", "do_not_sell", true, json!({"ca_resident": true}));
        assert_eq!(body["subject_id"], "u1");
        assert_eq!(body["purpose"], "do_not_sell");
        assert_eq!(body["granted"], true);
        assert_eq!(body["metadata"]["ca_resident"], true);
        let erase = compliance::erasure_body("u1", "meetings");
        assert_eq!(erase["subject_id"], "u1");
        assert_eq!(erase["scope"], json!({"type": "specific_collections", "collections": ["meetings"]}));
    }

    #[test]
    fn exported_times_are_rfc3339_and_segments_are_deleted_in_chunks() {
        let row: Map<String, Value> = serde_json::from_value(json!({"id": "m", "created_at": 0, "ended_at": null, "start_ms": 5})).unwrap();
        assert_eq!(exported(row), json!({"id": "m", "created_at": "1970-01-01T00:00:00.000Z", "ended_at": null, "start_ms": 5}));
        let meetings: Vec<String> = (0..IN_CHUNK + 1).map(|i| format!("m{i}")).collect();
        let deletes = segment_deletes(&meetings);
        assert_eq!(deletes.len(), 2);
        assert_eq!(deletes[0].1.len(), IN_CHUNK);
        assert_eq!(deletes[1].0, "DELETE FROM segments WHERE meeting_id IN ($1); DELETE FROM comments WHERE meeting_id IN ($1)");
        assert!(segment_deletes(&[]).is_empty());
    }
}
