//! Organizations, their members and invitations, and their usage.
//!
//! # Routes
//!
//! - `POST /api/v1/organizations` `{name, slug}` → 201 with the organization;
//!   the creator is its member with role `owner`. `slug`: 2 to 63 lowercase
//!   letters, digits and `-`, unique (a taken one answers 409).
//! - `GET /api/v1/organizations`: the caller's organizations.
//! - `GET /api/v1/organizations/{org_id}`: the organization with its members
//!   (members and site admins only; anyone else gets 404).
//! - `POST /api/v1/organizations/{org_id}/members` `{email, role}` → 201
//!   `{invitation, member_added, delivery}`: roles `owner`, `admin`, `editor`,
//!   `viewer`; only the organization's owners and admins invite (403
//!   otherwise), and only owners make owners. An invitation row is recorded
//!   with a random token (only its SHA-256 is kept). When the email belongs
//!   to a registered user, they become a member at once (`member_added:
//!   true`, the invitation `accepted`; a member already answers 409).
//!   Otherwise the invitation stays `pending`.
//!
//!   Mail ([`crate::mail`]): with `EMAIL_SERVICE_API_KEY` the invitation's
//!   message is queued with it and sent by the mail loop (`"delivery":
//!   "queued"`); without the key it is only logged (the email and the
//!   organization, never the token; `"delivery": "logged"`). A pending invitation is
//!   accepted when its email registers ([`join_invited`]): the new user
//!   becomes a member with the invited role (unless it expired).
//! - `GET /api/v1/organizations/{org_id}/usage` (members only), computed from
//!   the data at each call: `meetings` (meetings with this
//!   `organization_id`), `segments`, `minutes_transcribed` (the sum of
//!   `end_ms - start_ms` of those meetings' transcript segments / 60000, a
//!   float; a segment ending before it starts counts 0), `storage_bytes` (the
//!   UTF-8 bytes of those segments' texts plus the meetings' titles and
//!   descriptions: the text the organization stored, not Tessera's on-disk
//!   size, which includes keys, indexes and replicas) with its two parts, and
//!   `members`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{self, post};
use axum::{Json, Router};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::auth::{Caller, valid_email};
use crate::clock::{iso, now_ms};
use crate::db::Db;
use crate::error::{AppError, AppResult};
use crate::mail::InvitationMail;
use crate::state::AppState;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS organizations (id TEXT PRIMARY KEY, name TEXT NOT NULL, slug TEXT NOT NULL UNIQUE, created_by TEXT, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS org_members (org_id TEXT NOT NULL, user_id TEXT NOT NULL, role TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (org_id, user_id))",
    "CREATE TABLE IF NOT EXISTS org_invitations (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, email TEXT NOT NULL, role TEXT NOT NULL, token_hash TEXT NOT NULL, invited_by TEXT, status TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)",
];

/// The roles of a member, strongest first.
pub const ROLES: &[&str] = &["owner", "admin", "editor", "viewer"];

/// How long an invitation is valid.
const INVITATION_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// Checks a slug: 2 to 63 lowercase ASCII letters, digits and `-`.
pub fn valid_slug(slug: &str) -> bool {
    (2..=63).contains(&slug.len()) && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Checks an organization's name: 1 to 100 characters, not only spaces, no control characters.
pub fn valid_name(name: &str) -> bool {
    !name.trim().is_empty() && name.chars().count() <= 100 && !name.chars().any(char::is_control)
}

pub fn valid_role(role: &str) -> bool {
    ROLES.contains(&role)
}

/// Whether a member with role `inviter` may give `role` to someone: owners
/// give any role, admins any but owner, others none.
pub fn may_invite(inviter: &str, role: &str) -> bool {
    match inviter {
        "owner" => valid_role(role),
        "admin" => valid_role(role) && role != "owner",
        _ => false,
    }
}

/// An organization as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Organization {
    pub id: String,
    pub name: String,
    pub slug: String,
    pub created_at: String,
    /// The caller's role in it (null for a site admin who is no member).
    pub role: Option<String>,
    /// Its members, on `GET /api/v1/organizations/{org_id}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<Member>>,
}

impl Organization {
    fn from_row(row: &Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Organization {
            id: text("id"),
            name: text("name"),
            slug: text("slug"),
            created_at: iso(row.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
            role: row.get("role").and_then(Value::as_str).map(str::to_string),
            members: None,
        }
    }
}

/// A member of an organization.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    pub user_id: String,
    pub email: String,
    pub display_name: String,
    pub role: String,
    pub joined_at: String,
}

/// An invitation as the API shows it (never its token).
#[derive(Debug, Clone, Serialize)]
pub struct Invitation {
    pub id: String,
    pub organization_id: String,
    pub email: String,
    pub role: String,
    /// `pending`, or `accepted` when the email's user was added at once.
    pub status: String,
    pub invited_by: String,
    pub created_at: String,
    pub expires_at: String,
}

/// Answer of `POST /api/v1/organizations/{org_id}/members`.
#[derive(Debug, Serialize)]
pub struct Invited {
    pub invitation: Invitation,
    /// The email belongs to a registered user, now a member.
    pub member_added: bool,
    /// How the invitation reaches the invitee: `queued` (a mail, see
    /// [`crate::mail`]) or `logged` (no `EMAIL_SERVICE_API_KEY`: no mail).
    pub delivery: &'static str,
}

/// Body of `POST /api/v1/organizations`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewOrganization {
    pub name: String,
    pub slug: String,
}

/// Body of `POST /api/v1/organizations/{org_id}/members`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    pub email: String,
    pub role: String,
}

/// The caller's organizations.
#[derive(Debug, Serialize)]
pub struct OrganizationList {
    pub organizations: Vec<Organization>,
    pub total: usize,
}

/// Creates an organization owned by the caller (one transaction: the
/// organization and its first member, or neither).
pub async fn create(db: &Db, caller: &Caller, o: NewOrganization) -> AppResult<Organization> {
    let name = o.name.trim();
    if !valid_name(name) {
        return Err(AppError::Validation("name: 1 to 100 characters".into()));
    }
    if !valid_slug(&o.slug) {
        return Err(AppError::Validation("slug: 2 to 63 lowercase letters, digits and '-'".into()));
    }
    let taken = db.sql("SELECT id FROM organizations WHERE slug = $1", &[json!(o.slug)]).await?;
    if !taken.rows.is_empty() {
        return Err(AppError::Conflict(format!("the slug {} is taken", o.slug)));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let now = now_ms();
    // Two creators of one slug at once: the unique slug refuses the second transaction whole.
    db.sql(
        "INSERT INTO organizations (id, name, slug, created_by, created_at) VALUES ($1, $2, $3, $4, $5); \
         INSERT INTO org_members (org_id, user_id, role, created_at) VALUES ($1, $4, 'owner', $5)",
        &[json!(id), json!(name), json!(o.slug), json!(caller.user.id), json!(now)],
    )
    .await
    .map_err(|e| match e {
        crate::db::DbError::Constraint(_) => AppError::Conflict(format!("the slug {} is taken", o.slug)),
        e => e.into(),
    })?;
    Ok(Organization { id, name: name.to_string(), slug: o.slug, created_at: iso(now), role: Some("owner".into()), members: None })
}

pub async fn list(db: &Db, caller: &Caller) -> AppResult<OrganizationList> {
    let rows = db
        .sql(
            "SELECT o.id AS id, o.name AS name, o.slug AS slug, o.created_at AS created_at, m.role AS role \
             FROM org_members m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = $1 ORDER BY o.created_at, o.id",
            &[json!(caller.user.id)],
        )
        .await?;
    let organizations: Vec<Organization> = rows.objects().iter().map(Organization::from_row).collect();
    Ok(OrganizationList { total: organizations.len(), organizations })
}

/// The caller's role in `org`: `Ok(None)` for a site admin who is no member;
/// 404 when the organization does not exist or the caller is not a member.
async fn caller_role(db: &Db, caller: &Caller, org: &str) -> AppResult<Option<String>> {
    let not_found = || AppError::NotFound(format!("organization {org} does not exist"));
    if uuid::Uuid::parse_str(org).is_err() {
        return Err(not_found());
    }
    let member = db.sql("SELECT role FROM org_members WHERE org_id = $1 AND user_id = $2", &[json!(org), json!(caller.user.id)]).await?;
    if let Some(role) = member.first().and_then(|r| r.get("role").and_then(Value::as_str).map(str::to_string)) {
        return Ok(Some(role));
    }
    if caller.user.is_admin() {
        let exists = db.sql("SELECT id FROM organizations WHERE id = $1", &[json!(org)]).await?;
        if !exists.rows.is_empty() {
            return Ok(None);
        }
    }
    Err(not_found())
}

/// Refuses (404) a caller who is not a member of organization `org` (or
/// when it does not exist); site admins pass.
pub async fn require_member(db: &Db, caller: &Caller, org: &str) -> AppResult<()> {
    caller_role(db, caller, org).await.map(|_| ())
}

/// Organization `org` with its members (members and site admins only).
pub async fn get(db: &Db, caller: &Caller, org: &str) -> AppResult<Organization> {
    let role = caller_role(db, caller, org).await?;
    let rows = db.sql("SELECT id, name, slug, created_at FROM organizations WHERE id = $1", &[json!(org)]).await?;
    let mut organization =
        rows.first().map(|r| Organization::from_row(&r)).ok_or_else(|| AppError::NotFound(format!("organization {org} does not exist")))?;
    organization.role = role;
    let members = db
        .sql(
            "SELECT m.user_id AS user_id, u.email AS email, u.display_name AS display_name, m.role AS role, m.created_at AS created_at \
             FROM org_members m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 ORDER BY m.created_at, m.user_id",
            &[json!(org)],
        )
        .await?;
    let text = |r: &Map<String, Value>, k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    organization.members = Some(
        members
            .objects()
            .iter()
            .map(|r| Member {
                user_id: text(r, "user_id"),
                email: text(r, "email"),
                display_name: text(r, "display_name"),
                role: text(r, "role"),
                joined_at: iso(r.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
            })
            .collect(),
    );
    Ok(organization)
}

fn random_token() -> String {
    let mut buf = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Invites `email` into `org` with `role` (see the module documentation).
pub async fn invite(state: &AppState, caller: &Caller, org: &str, m: NewMember) -> AppResult<Invited> {
    let db = &state.db;
    let role = caller_role(db, caller, org).await?;
    let email = m.email.trim().to_lowercase();
    if !valid_email(&email) {
        return Err(AppError::Validation("email: not a valid email address".into()));
    }
    if !valid_role(&m.role) {
        return Err(AppError::Validation(format!("role: one of {}", ROLES.join(", "))));
    }
    // A site admin acts as an owner.
    let acting = if caller.user.is_admin() { "owner" } else { role.as_deref().unwrap_or("") };
    if !may_invite(acting, &m.role) {
        return Err(AppError::Forbidden(if matches!(acting, "owner" | "admin") {
            "only an owner of the organization makes owners".to_string()
        } else {
            "only an owner or admin of the organization invites members".to_string()
        }));
    }
    let now = now_ms();
    let invitee = db.sql("SELECT id FROM users WHERE email = $1", &[json!(email)]).await?;
    let invitee = invitee.first().and_then(|r| r.get("id").and_then(Value::as_str).map(str::to_string));
    let id = uuid::Uuid::new_v4().to_string();
    let token_hash = hex::encode(Sha256::digest(random_token().as_bytes()));
    let invitation = Invitation {
        id: id.clone(),
        organization_id: org.to_string(),
        email: email.clone(),
        role: m.role.clone(),
        status: if invitee.is_some() { "accepted" } else { "pending" }.into(),
        invited_by: caller.user.id.clone(),
        created_at: iso(now),
        expires_at: iso(now + INVITATION_TTL_MS),
    };
    let insert_invitation = "INSERT INTO org_invitations (id, org_id, email, role, token_hash, invited_by, status, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    let params = [
        json!(id),
        json!(org),
        json!(email),
        json!(m.role),
        json!(token_hash),
        json!(caller.user.id),
        json!(invitation.status),
        json!(now),
        json!(now + INVITATION_TTL_MS),
    ];
    // With a mail key, the invitation's message is queued in the same transaction (see `crate::mail`).
    let mail = match &state.config.email_api_key {
        Some(_) => {
            let names = db.sql("SELECT name FROM organizations WHERE id = $1", &[json!(org)]).await?;
            let organization = names.first().and_then(|r| r.get("name").and_then(Value::as_str).map(str::to_string)).unwrap_or_default();
            Some(
                InvitationMail {
                    to: &email,
                    organization: &organization,
                    role: &m.role,
                    inviter: &caller.user.display_name,
                    member_added: invitee.is_some(),
                    public_url: &state.config.public_url,
                    expires_at: &invitation.expires_at,
                }
                .message(),
            )
        }
        None => None,
    };
    let mut statements = vec![insert_invitation.to_string()];
    let mut params = params.to_vec();
    if let Some(user_id) = &invitee {
        let member = db.sql("SELECT role FROM org_members WHERE org_id = $1 AND user_id = $2", &[json!(org), json!(user_id)]).await?;
        if let Some(existing) = member.first() {
            let existing = existing.get("role").and_then(Value::as_str).unwrap_or_default().to_string();
            return Err(AppError::Conflict(format!("{email} is already a member ({existing})")));
        }
        params.push(json!(user_id));
        statements.push("INSERT INTO org_members (org_id, user_id, role, created_at) VALUES ($2, $10, $4, $8)".to_string());
    }
    if let Some(message) = &mail {
        let (insert, more) = message.insert(params.len() + 1, now);
        statements.push(insert);
        params.extend(more);
    }
    // One transaction: the invitation, the member it made and its mail.
    db.sql(&statements.join("; "), &params).await.map_err(|e| match e {
        crate::db::DbError::Constraint(_) if invitee.is_some() => AppError::Conflict(format!("{email} is already a member")),
        e => e.into(),
    })?;
    let member_added = invitee.is_some();
    let delivery = match &mail {
        Some(message) => {
            state.mail.wake.notify_one();
            tracing::info!(email = %email, organization = %org, role = %m.role, member_added, message = %message.id, "organization invitation recorded; its mail is queued");
            "queued"
        }
        None => {
            tracing::info!(
                email = %email,
                organization = %org,
                role = %m.role,
                member_added,
                "organization invitation recorded; no mail is sent (EMAIL_SERVICE_API_KEY is not set)"
            );
            "logged"
        }
    };
    Ok(Invited { invitation, member_added, delivery })
}

/// An organization's usage (see the module documentation).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Usage {
    pub organization_id: String,
    pub meetings: u64,
    pub segments: u64,
    pub minutes_transcribed: f64,
    pub storage_bytes: u64,
    pub storage: StorageBreakdown,
    pub members: u64,
    pub computed_at: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StorageBreakdown {
    /// UTF-8 bytes of the transcript segments' texts.
    pub transcript_bytes: u64,
    /// UTF-8 bytes of the meetings' titles and descriptions.
    pub meeting_text_bytes: u64,
}

/// The sums [`usage`] reads from the database.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSums {
    pub meetings: u64,
    pub segments: u64,
    /// The sum of the segments' durations (negative ones as 0).
    pub speech_ms: u64,
    pub transcript_bytes: u64,
    pub meeting_text_bytes: u64,
    pub members: u64,
}

impl UsageSums {
    pub fn usage(&self, org: &str, now_ms: i64) -> Usage {
        Usage {
            organization_id: org.to_string(),
            meetings: self.meetings,
            segments: self.segments,
            minutes_transcribed: self.speech_ms as f64 / 60_000.0,
            storage_bytes: self.transcript_bytes + self.meeting_text_bytes,
            storage: StorageBreakdown { transcript_bytes: self.transcript_bytes, meeting_text_bytes: self.meeting_text_bytes },
            members: self.members,
            computed_at: iso(now_ms),
        }
    }
}

/// A count or sum of an answer (NULL, the sum of no rows, is 0; a float or
/// decimal text is rounded).
fn number(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0).round() as u64)).unwrap_or(0),
        Some(Value::String(s)) => s.parse::<f64>().map(|f| f.max(0.0).round() as u64).unwrap_or(0),
        _ => 0,
    }
}

/// SQL for the UTF-8 bytes of a TEXT column: the length of its bytes
/// (`CAST … AS BYTEA`). A leading character keeps a text that begins with
/// `\x` from being read as a hex literal; it is subtracted again.
fn utf8_bytes(column: &str) -> String {
    format!("(LENGTH(CAST(CONCAT('.', {column}) AS BYTEA)) - 1)")
}

pub async fn usage(db: &Db, caller: &Caller, org: &str) -> AppResult<Usage> {
    caller_role(db, caller, org).await?;
    let meetings = db
        .sql(
            &format!(
                "SELECT COUNT(*) AS meetings, SUM({} + {}) AS text_bytes FROM meetings WHERE organization_id = $1",
                utf8_bytes("title"),
                utf8_bytes("description")
            ),
            &[json!(org)],
        )
        .await?;
    let segments = db
        .sql(
            &format!(
                "SELECT COUNT(*) AS segments, SUM(CASE WHEN s.end_ms > s.start_ms THEN s.end_ms - s.start_ms ELSE 0 END) AS speech_ms, SUM({}) AS text_bytes \
                 FROM segments s JOIN meetings m ON m.id = s.meeting_id WHERE m.organization_id = $1",
                utf8_bytes("s.text")
            ),
            &[json!(org)],
        )
        .await?;
    let members = db.sql("SELECT COUNT(*) AS members FROM org_members WHERE org_id = $1", &[json!(org)]).await?;
    let (m, s, n) = (meetings.first().unwrap_or_default(), segments.first().unwrap_or_default(), members.first().unwrap_or_default());
    let sums = UsageSums {
        meetings: number(m.get("meetings")),
        meeting_text_bytes: number(m.get("text_bytes")),
        segments: number(s.get("segments")),
        speech_ms: number(s.get("speech_ms")),
        transcript_bytes: number(s.get("text_bytes")),
        members: number(n.get("members")),
    };
    Ok(sums.usage(org, now_ms()))
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/organizations", routing::get(list_route).post(create_route))
        .route("/api/v1/organizations/{org_id}", routing::get(get_route))
        .route("/api/v1/organizations/{org_id}/members", post(invite_route))
        .route("/api/v1/organizations/{org_id}/usage", routing::get(usage_route))
}

async fn create_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<NewOrganization>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Organization>)> {
    let Json(o) = body?;
    Ok((StatusCode::CREATED, Json(create(&state.db, &caller, o).await?)))
}

async fn list_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<OrganizationList>> {
    Ok(Json(list(&state.db, &caller).await?))
}

async fn get_route(State(state): State<AppState>, caller: Caller, Path(org): Path<String>) -> AppResult<Json<Organization>> {
    Ok(Json(get(&state.db, &caller, &org).await?))
}

async fn invite_route(
    State(state): State<AppState>,
    caller: Caller,
    Path(org): Path<String>,
    body: Result<Json<NewMember>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Invited>)> {
    // Not a member: 404 before the body is looked at, as for every other route of the organization.
    caller_role(&state.db, &caller, &org).await?;
    let Json(m) = body?;
    Ok((StatusCode::CREATED, Json(invite(&state, &caller, &org, m).await?)))
}

async fn usage_route(State(state): State<AppState>, caller: Caller, Path(org): Path<String>) -> AppResult<Json<Usage>> {
    Ok(Json(usage(&state.db, &caller, &org).await?))
}

/// Makes a newly registered user a member of every organization that has a
/// pending, unexpired invitation for their email, with the invited role, and
/// marks those invitations `accepted`; answers how many it accepted.
pub async fn join_invited(db: &Db, user_id: &str, email: &str) -> AppResult<usize> {
    let now = now_ms();
    let pending = db
        .sql(
            "SELECT id, org_id, role FROM org_invitations WHERE email = $1 AND status = 'pending' AND expires_at > $2 ORDER BY created_at, id",
            &[json!(email), json!(now)],
        )
        .await?;
    let mut joined = 0;
    for inv in pending.objects() {
        let text = |k: &str| inv.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        db.sql(
            "INSERT INTO org_members (org_id, user_id, role, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, user_id) DO NOTHING;\n\
             UPDATE org_invitations SET status = 'accepted' WHERE id = $5",
            &[json!(text("org_id")), json!(user_id), json!(text("role")), json!(now), json!(text("id"))],
        )
        .await?;
        joined += 1;
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_names_and_roles_are_checked() {
        for good in ["ab", "acme", "acme-2", "a-b-c", "0x", &"a".repeat(63)] {
            assert!(valid_slug(good), "{good}");
        }
        for bad in ["", "a", "Acme", "acme_co", "acme co", "acmé", "acme.io", &"a".repeat(64)] {
            assert!(!valid_slug(bad), "{bad}");
        }
        assert!(valid_name("Acme, Inc.") && !valid_name("  ") && !valid_name("a\tb") && !valid_name(&"x".repeat(101)));
        for role in ROLES {
            assert!(valid_role(role));
        }
        assert!(!valid_role("member") && !valid_role("Owner"));
    }

    #[test]
    fn owners_and_admins_invite_and_only_owners_make_owners() {
        assert!(ROLES.iter().all(|r| may_invite("owner", r)));
        assert!(may_invite("admin", "admin") && may_invite("admin", "editor") && may_invite("admin", "viewer"));
        assert!(!may_invite("admin", "owner"));
        for weak in ["editor", "viewer", ""] {
            assert!(ROLES.iter().all(|r| !may_invite(weak, r)), "{weak}");
        }
        assert!(!may_invite("owner", "superuser"));
    }

    #[test]
    fn usage_is_counted_from_the_sums() {
        let sums = UsageSums { meetings: 3, segments: 4, speech_ms: 90_000, transcript_bytes: 120, meeting_text_bytes: 30, members: 2 };
        let usage = sums.usage("o1", 1_790_000_000_000);
        assert_eq!(usage.minutes_transcribed, 1.5);
        assert_eq!(usage.storage_bytes, 150);
        assert_eq!((usage.meetings, usage.segments, usage.members), (3, 4, 2));
        assert_eq!(usage.storage, StorageBreakdown { transcript_bytes: 120, meeting_text_bytes: 30 });
        assert_eq!(UsageSums::default().usage("o1", 0).minutes_transcribed, 0.0);
        assert_eq!(UsageSums { speech_ms: 1, ..Default::default() }.usage("o", 0).minutes_transcribed, 1.0 / 60_000.0);
    }

    #[test]
    fn sums_of_no_rows_are_zero() {
        assert_eq!(number(None), 0);
        assert_eq!(number(Some(&Value::Null)), 0);
        assert_eq!(number(Some(&json!(42))), 42);
        assert_eq!(number(Some(&json!(41.6))), 42);
        assert_eq!(number(Some(&json!("1500"))), 1500);
        assert_eq!(number(Some(&json!(-3))), 0);
    }
}
