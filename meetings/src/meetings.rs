//! Meetings and their transcripts.
//!
//! A meeting moves `scheduled` → `active` (start) → `completed` (stop); any
//! other move answers 409. Each move is one conditional UPDATE, so two
//! instances starting the same meeting at once cannot both succeed. Stopping
//! records in that same UPDATE that the meeting's summary is pending, when
//! summaries are made (see [`crate::summary`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::clock::{iso, now_ms, parse_iso};
use crate::db::{Db, DbError};
use crate::error::{AppError, AppResult};
use crate::search;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS meetings (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, organization_id TEXT, title TEXT NOT NULL, description TEXT NOT NULL, scheduled_at BIGINT NOT NULL, status TEXT NOT NULL, created_at BIGINT NOT NULL, started_at BIGINT, ended_at BIGINT, summary TEXT, summary_state TEXT, summary_attempts BIGINT, summary_next_at BIGINT, summary_claimed_by TEXT, summary_claim_until BIGINT)",
    "CREATE TABLE IF NOT EXISTS comments (id TEXT PRIMARY KEY, meeting_id TEXT NOT NULL, user_id TEXT NOT NULL, author TEXT NOT NULL, text TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS segments (id TEXT PRIMARY KEY, meeting_id TEXT NOT NULL, user_id TEXT NOT NULL, speaker TEXT NOT NULL, text TEXT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, confidence DOUBLE PRECISION NOT NULL, created_at BIGINT NOT NULL)",
];

const COLUMNS: &str =
    "id, owner_id, organization_id, title, description, scheduled_at, status, created_at, started_at, ended_at, summary, summary_state";

/// A meeting as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Meeting {
    pub id: String,
    pub owner_id: String,
    pub organization_id: Option<String>,
    pub title: String,
    pub description: String,
    pub scheduled_at: String,
    pub status: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// Made by the text-generation service after the meeting ended (`AI_SERVICE_URL`).
    pub summary: Option<String>,
    /// Where the summary stands: null (none asked for), `pending`, `done`,
    /// `skipped` (empty transcript) or `failed` (see [`crate::summary`]).
    pub summary_status: Option<String>,
}

impl Meeting {
    fn from_row(row: &serde_json::Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let time = |k: &str| row.get(k).and_then(Value::as_i64).map(iso);
        Meeting {
            id: text("id"),
            owner_id: text("owner_id"),
            organization_id: row.get("organization_id").and_then(Value::as_str).map(str::to_string),
            title: text("title"),
            description: text("description"),
            scheduled_at: time("scheduled_at").unwrap_or_default(),
            status: text("status"),
            created_at: time("created_at").unwrap_or_default(),
            started_at: time("started_at"),
            ended_at: time("ended_at"),
            summary: row.get("summary").and_then(Value::as_str).map(str::to_string),
            summary_status: row.get("summary_state").and_then(Value::as_str).map(str::to_string),
        }
    }
}

/// Body of `POST /api/v1/meetings`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMeeting {
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// ISO 8601; now when left out.
    pub scheduled_at: Option<String>,
    pub organization_id: Option<String>,
}

/// The statuses a meeting can have.
pub const STATUSES: &[&str] = &["scheduled", "active", "completed"];

pub async fn create(db: &Db, caller: &Caller, m: NewMeeting) -> AppResult<Meeting> {
    let title = m.title.trim();
    if title.is_empty() || title.chars().count() > 200 || title.chars().any(char::is_control) {
        return Err(AppError::Validation("title: 1 to 200 characters".into()));
    }
    if m.description.chars().count() > 10_000 {
        return Err(AppError::Validation("description: at most 10000 characters".into()));
    }
    let now = now_ms();
    let scheduled = match &m.scheduled_at {
        Some(text) => parse_iso(text).ok_or_else(|| AppError::Validation("scheduled_at: not an ISO 8601 date-time".into()))?,
        None => now,
    };
    if let Some(org) = &m.organization_id {
        crate::orgs::require_member(db, caller, org).await?;
    }
    let id = uuid::Uuid::new_v4().to_string();
    let body = format!("{title}\n{}", m.description);
    let doc =
        search::Doc { id: &id, doc_type: "meeting", owner_id: &caller.user.id, meeting_id: &id, title, body: &body, at_ms: scheduled };
    search::write_indexed(
        db,
        &format!("INSERT INTO meetings ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, 'scheduled', $7, NULL, NULL, NULL, NULL)"),
        vec![json!(id), json!(caller.user.id), json!(m.organization_id), json!(title), json!(m.description), json!(scheduled), json!(now)],
        &doc,
    )
    .await?;
    get(db, caller, &id).await
}

/// A meeting the caller may see: its owner's, an admin's, or one of an
/// organization the caller belongs to. Another's answers 404 (its existence
/// is not revealed).
pub async fn get(db: &Db, caller: &Caller, id: &str) -> AppResult<Meeting> {
    let not_found = || AppError::NotFound(format!("meeting {id} does not exist"));
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(not_found());
    }
    let rows = db.sql(&format!("SELECT {COLUMNS} FROM meetings WHERE id = $1"), &[json!(id)]).await?;
    let meeting = rows.first().map(|r| Meeting::from_row(&r)).ok_or_else(not_found)?;
    if meeting.owner_id == caller.user.id || caller.user.is_admin() {
        return Ok(meeting);
    }
    if let Some(org) = &meeting.organization_id
        && crate::orgs::require_member(db, caller, org).await.is_ok()
    {
        return Ok(meeting);
    }
    Err(not_found())
}

/// `GET /api/v1/meetings` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub page: Option<u64>,
    pub limit: Option<u64>,
    pub status: Option<String>,
}

/// One page of meetings.
#[derive(Debug, Serialize)]
pub struct Page {
    pub meetings: Vec<Meeting>,
    pub page: u64,
    pub limit: u64,
    pub total: u64,
}

/// The caller's meetings, newest scheduled first.
pub async fn list(db: &Db, caller: &Caller, q: ListQuery) -> AppResult<Page> {
    let page = q.page.unwrap_or(1);
    let limit = q.limit.unwrap_or(20);
    if page == 0 || page > 1_000_000 {
        return Err(AppError::Validation("page: 1 or more".into()));
    }
    if !(1..=100).contains(&limit) {
        return Err(AppError::Validation("limit: 1 to 100".into()));
    }
    let mut filter = "owner_id = $1".to_string();
    let mut params = vec![json!(caller.user.id)];
    if let Some(status) = &q.status {
        if !STATUSES.contains(&status.as_str()) {
            return Err(AppError::Validation(format!("status: one of {}", STATUSES.join(", "))));
        }
        filter.push_str(" AND status = $2");
        params.push(json!(status));
    }
    let offset = (page - 1) * limit;
    let sql = format!("SELECT {COLUMNS} FROM meetings WHERE {filter} ORDER BY scheduled_at DESC, id LIMIT {limit} OFFSET {offset}");
    let rows = db.sql(&sql, &params).await?;
    let total = db.sql(&format!("SELECT COUNT(*) AS n FROM meetings WHERE {filter}"), &params).await?;
    let total = total.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0);
    Ok(Page { meetings: rows.objects().iter().map(Meeting::from_row).collect(), page, limit, total })
}

/// Moves a meeting the caller owns from `from` to `to` (start or stop).
pub async fn transition(db: &Db, caller: &Caller, id: &str, from: &str, to: &str) -> AppResult<Meeting> {
    move_meeting(db, caller, id, from, to, false).await
}

/// Stops a meeting the caller owns (`active` → `completed`); with `summarize`
/// (`AI_SERVICE_URL` is set), the same UPDATE records its summary as pending
/// for the summary loop ([`crate::summary`]).
pub async fn stop(db: &Db, caller: &Caller, id: &str, summarize: bool) -> AppResult<Meeting> {
    move_meeting(db, caller, id, "active", "completed", summarize).await
}

async fn move_meeting(db: &Db, caller: &Caller, id: &str, from: &str, to: &str, summarize: bool) -> AppResult<Meeting> {
    let meeting = get(db, caller, id).await?;
    if meeting.owner_id != caller.user.id && !caller.user.is_admin() {
        return Err(AppError::Forbidden("only the meeting's owner starts or stops it".into()));
    }
    let stamp = if to == "active" { "started_at" } else { "ended_at" };
    let pending = if summarize {
        ", summary_state = 'pending', summary_attempts = 0, summary_next_at = $4, summary_claimed_by = NULL, summary_claim_until = NULL"
    } else {
        ""
    };
    let moved = db
        .sql(
            &format!("UPDATE meetings SET status = $3, {stamp} = $4{pending} WHERE id = $1 AND status = $2"),
            &[json!(id), json!(from), json!(to), json!(now_ms())],
        )
        .await?;
    if moved.affected == 0 {
        let now = get(db, caller, id).await?;
        return Err(AppError::Conflict(format!("meeting {id} is {}: it cannot move from {from} to {to}", now.status)));
    }
    get(db, caller, id).await
}

/// One recognized stretch of speech.
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    pub id: String,
    pub meeting_id: String,
    pub user_id: String,
    pub speaker: String,
    pub text: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub confidence: f64,
    pub created_at: String,
}

impl Segment {
    fn from_row(row: &serde_json::Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let int = |k: &str| row.get(k).and_then(Value::as_i64).unwrap_or(0);
        Segment {
            id: text("id"),
            meeting_id: text("meeting_id"),
            user_id: text("user_id"),
            speaker: text("speaker"),
            text: text("text"),
            start_ms: int("start_ms"),
            end_ms: int("end_ms"),
            confidence: row.get("confidence").and_then(Value::as_f64).unwrap_or(0.0),
            created_at: iso(int("created_at")),
        }
    }
}

/// Records a segment spoken by `caller` in `meeting`, indexed for search.
pub async fn add_segment(
    db: &Db,
    caller: &Caller,
    meeting: &Meeting,
    text: &str,
    start_ms: i64,
    end_ms: i64,
    confidence: f64,
) -> AppResult<Segment> {
    let now = now_ms();
    let segment = Segment {
        id: uuid::Uuid::new_v4().to_string(),
        meeting_id: meeting.id.clone(),
        user_id: caller.user.id.clone(),
        speaker: caller.user.display_name.clone(),
        text: text.to_string(),
        start_ms,
        end_ms,
        confidence,
        created_at: iso(now),
    };
    let doc = search::Doc {
        id: &segment.id,
        doc_type: "transcript",
        owner_id: &meeting.owner_id,
        meeting_id: &meeting.id,
        title: &meeting.title,
        body: text,
        at_ms: now,
    };
    search::write_indexed(
        db,
        "INSERT INTO segments (id, meeting_id, user_id, speaker, text, start_ms, end_ms, confidence, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        vec![json!(segment.id), json!(meeting.id), json!(segment.user_id), json!(segment.speaker), json!(text), json!(start_ms), json!(end_ms), json!(confidence), json!(now)],
        &doc,
    )
    .await?;
    Ok(segment)
}

/// A comment on a meeting.
#[derive(Debug, Clone, Serialize)]
pub struct Comment {
    pub id: String,
    pub meeting_id: String,
    pub user_id: String,
    pub author: String,
    pub text: String,
    pub created_at: String,
}

/// Body of `POST /api/v1/meetings/{id}/comments`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    pub text: String,
}

/// Adds the caller's comment to a meeting they can see, indexed for search.
pub async fn add_comment(db: &Db, caller: &Caller, meeting_id: &str, c: NewComment) -> AppResult<Comment> {
    let meeting = get(db, caller, meeting_id).await?;
    let text = c.text.trim();
    if text.is_empty() || text.chars().count() > 5_000 {
        return Err(AppError::Validation("text: 1 to 5000 characters".into()));
    }
    let now = now_ms();
    let comment = Comment {
        id: uuid::Uuid::new_v4().to_string(),
        meeting_id: meeting.id.clone(),
        user_id: caller.user.id.clone(),
        author: caller.user.display_name.clone(),
        text: text.to_string(),
        created_at: iso(now),
    };
    let doc = search::Doc {
        id: &comment.id,
        doc_type: "comment",
        owner_id: &meeting.owner_id,
        meeting_id: &meeting.id,
        title: &meeting.title,
        body: text,
        at_ms: now,
    };
    search::write_indexed(
        db,
        "INSERT INTO comments (id, meeting_id, user_id, author, text, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        vec![json!(comment.id), json!(meeting.id), json!(comment.user_id), json!(comment.author), json!(text), json!(now)],
        &doc,
    )
    .await?;
    Ok(comment)
}

/// A meeting's comments, oldest first.
pub async fn comments(db: &Db, caller: &Caller, meeting_id: &str) -> AppResult<Vec<Comment>> {
    let meeting = get(db, caller, meeting_id).await?;
    let rows = db
        .sql(
            "SELECT id, meeting_id, user_id, author, text, created_at FROM comments WHERE meeting_id = $1 ORDER BY created_at, id",
            &[json!(meeting.id)],
        )
        .await?;
    Ok(rows
        .objects()
        .iter()
        .map(|r| {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            Comment {
                id: text("id"),
                meeting_id: text("meeting_id"),
                user_id: text("user_id"),
                author: text("author"),
                text: text("text"),
                created_at: iso(r.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
            }
        })
        .collect())
}

/// A meeting's transcript.
#[derive(Debug, Serialize)]
pub struct Transcript {
    pub meeting_id: String,
    pub status: String,
    pub segments: Vec<Segment>,
    /// The segments' text, in order, one line each.
    pub text: String,
}

/// Meeting `id`'s transcript text (its segments' texts in order, one line
/// each), for the summary loop: no caller, no check.
pub async fn transcript_text(db: &Db, id: &str) -> Result<String, DbError> {
    let rows = db.sql("SELECT text FROM segments WHERE meeting_id = $1 ORDER BY created_at, id", &[json!(id)]).await?;
    Ok(rows.rows.iter().filter_map(|r| r.first().and_then(Value::as_str)).collect::<Vec<_>>().join("\n"))
}

pub async fn transcript(db: &Db, caller: &Caller, id: &str) -> AppResult<Transcript> {
    let meeting = get(db, caller, id).await?;
    let rows = db
        .sql(
            "SELECT id, meeting_id, user_id, speaker, text, start_ms, end_ms, confidence, created_at FROM segments WHERE meeting_id = $1 ORDER BY created_at, id",
            &[json!(id)],
        )
        .await?;
    let segments: Vec<Segment> = rows.objects().iter().map(Segment::from_row).collect();
    let text = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join("\n");
    Ok(Transcript { meeting_id: meeting.id, status: meeting.status, segments, text })
}
