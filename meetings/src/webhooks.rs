//! Webhooks: a user's HTTP endpoints told about their meetings' events, with a
//! delivery log kept in Tessera.
//!
//! # Routes
//!
//! - `GET /api/v1/webhooks`: the caller's webhooks, `{webhooks, total}`.
//! - `POST /api/v1/webhooks` `{url, events, secret}` → 201 with the webhook:
//!   `url` is http(s), `events` a non-empty list of [`EVENTS`], `secret` 16 to
//!   256 characters. The secret is never shown again: every answer carries
//!   `secret_hint` (its last four characters) instead.
//! - `GET /api/v1/webhooks/{id}`, `DELETE /api/v1/webhooks/{id}` (204; its
//!   deliveries go with it): the caller's own only, others answer 404.
//! - `GET /api/v1/webhooks/{id}/deliveries?limit=&status=`: the delivery log,
//!   newest first: `event`, `status` (`pending`, `delivered`, `failed`),
//!   `attempts`, `last_status_code`, `last_error`, `next_attempt_at`,
//!   `created_at`, `delivered_at`.
//!
//! # Deliveries
//!
//! [`emit`] records one `pending` delivery per webhook of the user subscribed
//! to the event, with the exact body to send, and wakes the delivery loop. The
//! body is fixed when the event happens, so every retry sends identical bytes:
//!
//! ```text
//! POST <url>
//! Content-Type: application/json
//! User-Agent: tessera-meetings-webhooks/<version>
//! X-Tessera-Event: meeting.started
//! X-Tessera-Delivery: <delivery id>            (the same on every retry)
//! X-Tessera-Timestamp: <Unix seconds of this attempt>
//! X-Tessera-Signature: sha256=<hex HMAC-SHA256 of the body bytes, keyed with the webhook's secret>
//!
//! {"id":"<delivery id>","event":"meeting.started","created_at":"2026-11-29T10:00:00.000Z","data":{…}}
//! ```
//!
//! A receiver recomputes the HMAC over the raw body it received and compares
//! it in constant time with the header's hex digest. The signature covers the
//! body only; the body carries the delivery's `id` and `created_at`, so a
//! receiver refuses replays by remembering ids (deliveries are at least once,
//! see below) and may refuse old `created_at`s.
//!
//! An attempt succeeds on a 2xx answer within [`ATTEMPT_TIMEOUT`] (redirects
//! are not followed: a 3xx is a failure). A failed attempt is retried after
//! [`backoff`]: 1 s, 2 s, 4 s, … doubling, capped at [`MAX_BACKOFF`]; after
//! [`MAX_ATTEMPTS`] attempts the delivery is `failed`.
//!
//! Deliveries are rows of `webhook_deliveries`, so pending ones survive a
//! restart: every instance runs [`spawn_delivery_loop`], which looks for due
//! pending rows at start, every second, and when [`emit`] wakes it. With
//! several instances, a delivery is sent by one at a time: an instance first
//! claims it with one conditional UPDATE (`claimed_by`, a lease
//! `claim_until`), which only succeeds while no live lease exists, and goes on
//! only if that UPDATE changed the row. Its outcome is written only while it
//! still holds the claim. An instance that dies mid-attempt leaves a lease
//! that expires after [`CLAIM_LEASE`], and another instance then retries the
//! delivery: delivery is at least once, never concurrent.

use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing;
use axum::{Json, Router};
use futures::StreamExt;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use crate::auth::Caller;
use crate::clock::{iso, now_ms};
use crate::db::{Db, DbError};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS webhook_deliveries (id TEXT PRIMARY KEY, webhook_id TEXT NOT NULL, user_id TEXT NOT NULL, event TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, last_status_code BIGINT, last_error TEXT, claimed_by TEXT, claim_until BIGINT, created_at BIGINT NOT NULL, delivered_at BIGINT)",
];

/// The events a webhook may subscribe to.
pub const EVENTS: &[&str] = &["meeting.started", "meeting.ended", "transcript.completed", "participant.joined", "participant.left"];

/// Attempts of one delivery before it is `failed`.
pub const MAX_ATTEMPTS: u32 = 8;
/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long a claim keeps other instances off a delivery: well past an
/// attempt's timeout plus the database writes around it.
pub const CLAIM_LEASE: Duration = Duration::from_secs(60);
/// How often the loop looks for due deliveries when nothing wakes it.
const POLL: Duration = Duration::from_secs(1);
/// Deliveries claimed per round, and sent at once.
const BATCH: usize = 32;
const CONCURRENCY: usize = 8;
/// Webhooks one user may have.
const MAX_WEBHOOKS_PER_USER: u64 = 50;
/// The longest `last_error` kept.
const MAX_ERROR_LEN: usize = 500;

type HmacSha256 = Hmac<Sha256>;

/// The value of `X-Tessera-Signature` for `body` under `secret`:
/// `sha256=<hex HMAC-SHA256>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The wait before the next attempt after `attempts` failed ones (1 → 1 s,
/// 2 → 2 s, 3 → 4 s, …), capped at [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(30);
    Duration::from_secs(1u64 << exponent).min(MAX_BACKOFF)
}

/// What an attempt's outcome makes of a delivery that has had `attempts`
/// attempts (this one included): delivered, pending again at a later time, or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Delivered,
    RetryAt(i64),
    Failed,
}

pub fn next_step(success: bool, attempts: u32, now_ms: i64) -> Next {
    if success {
        Next::Delivered
    } else if attempts >= MAX_ATTEMPTS {
        Next::Failed
    } else {
        Next::RetryAt(now_ms + backoff(attempts).as_millis() as i64)
    }
}

/// Sends recorded deliveries; one per instance, in [`AppState`].
pub struct Dispatcher {
    /// Wakes the delivery loop when new deliveries are recorded.
    pub wake: tokio::sync::Notify,
    http: reqwest::Client,
    /// This instance, as `claimed_by` names it.
    instance: String,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Dispatcher {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("tessera-meetings-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Dispatcher { wake: tokio::sync::Notify::new(), http, instance: uuid::Uuid::new_v4().to_string() }
    }
}

/// Checks a webhook's URL: absolute http or https with a host, at most 2048 characters.
pub fn valid_url(text: &str) -> Result<(), String> {
    if text.len() > 2048 {
        return Err("url: at most 2048 characters".into());
    }
    let url = url::Url::parse(text).map_err(|e| format!("url: not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("url: the scheme must be http or https, not {}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("url: names no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url: must not carry credentials".into());
    }
    Ok(())
}

/// Checks the subscribed events: at least one, each one of [`EVENTS`];
/// answers them without duplicates, in the order given.
pub fn valid_events(events: &[String]) -> Result<Vec<String>, String> {
    if events.is_empty() {
        return Err(format!("events: at least one of {}", EVENTS.join(", ")));
    }
    let mut out: Vec<String> = Vec::new();
    for e in events {
        if !EVENTS.contains(&e.as_str()) {
            return Err(format!("events: {e:?} is not one of {}", EVENTS.join(", ")));
        }
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    Ok(out)
}

/// Checks a secret: 16 to 256 characters, no control characters.
pub fn valid_secret(secret: &str) -> Result<(), String> {
    let n = secret.chars().count();
    if !(16..=256).contains(&n) || secret.chars().any(char::is_control) {
        return Err("secret: 16 to 256 characters, no control characters".into());
    }
    Ok(())
}

/// What answers show of a secret: its last four characters.
fn secret_hint(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
    format!("…{tail}")
}

/// A webhook as the API shows it (never its secret).
#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    /// The secret's last four characters.
    pub secret_hint: String,
    pub created_at: String,
}

impl Webhook {
    fn from_row(row: &Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Webhook {
            id: text("id"),
            url: text("url"),
            events: serde_json::from_str(&text("events")).unwrap_or_default(),
            secret_hint: secret_hint(&text("secret")),
            created_at: iso(row.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
        }
    }
}

/// Body of `POST /api/v1/webhooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
}

/// The caller's webhooks.
#[derive(Debug, Serialize)]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
    pub total: usize,
}

const WEBHOOK_COLUMNS: &str = "id, user_id, url, events, secret, created_at";

pub async fn create(db: &Db, caller: &Caller, w: NewWebhook) -> AppResult<Webhook> {
    let url = w.url.trim().to_string();
    valid_url(&url).map_err(AppError::Validation)?;
    let events = valid_events(&w.events).map_err(AppError::Validation)?;
    valid_secret(&w.secret).map_err(AppError::Validation)?;
    let count = db.sql("SELECT COUNT(*) AS n FROM webhooks WHERE user_id = $1", &[json!(caller.user.id)]).await?;
    if count.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0) >= MAX_WEBHOOKS_PER_USER {
        return Err(AppError::Validation(format!("at most {MAX_WEBHOOKS_PER_USER} webhooks per user: delete one first")));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let now = now_ms();
    let events_text = serde_json::to_string(&events).map_err(|e| AppError::Internal(e.to_string()))?;
    db.sql(
        &format!("INSERT INTO webhooks ({WEBHOOK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"),
        &[json!(id), json!(caller.user.id), json!(url), json!(events_text), json!(w.secret), json!(now)],
    )
    .await?;
    Ok(Webhook { id, url, events, secret_hint: secret_hint(&w.secret), created_at: iso(now) })
}

pub async fn list(db: &Db, caller: &Caller) -> AppResult<WebhookList> {
    let rows = db
        .sql(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE user_id = $1 ORDER BY created_at, id"), &[json!(caller.user.id)])
        .await?;
    let webhooks: Vec<Webhook> = rows.objects().iter().map(Webhook::from_row).collect();
    Ok(WebhookList { total: webhooks.len(), webhooks })
}

/// The caller's webhook `id`; another's, or none, answers 404.
pub async fn get(db: &Db, caller: &Caller, id: &str) -> AppResult<Webhook> {
    let not_found = || AppError::NotFound(format!("webhook {id} does not exist"));
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(not_found());
    }
    let rows = db
        .sql(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1 AND user_id = $2"), &[json!(id), json!(caller.user.id)])
        .await?;
    rows.first().map(|r| Webhook::from_row(&r)).ok_or_else(not_found)
}

/// Deletes the caller's webhook `id` and its deliveries (one transaction).
pub async fn delete(db: &Db, caller: &Caller, id: &str) -> AppResult<()> {
    get(db, caller, id).await?;
    db.sql(
        "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND user_id = $2; DELETE FROM webhooks WHERE id = $1 AND user_id = $2",
        &[json!(id), json!(caller.user.id)],
    )
    .await?;
    Ok(())
}

/// One delivery of the log.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub event: String,
    pub status: String,
    pub attempts: u64,
    pub last_status_code: Option<u64>,
    pub last_error: Option<String>,
    /// When the next attempt is due; null once delivered or failed.
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub delivered_at: Option<String>,
}

impl Delivery {
    fn from_row(row: &Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let status = text("status");
        Delivery {
            id: text("id"),
            webhook_id: text("webhook_id"),
            event: text("event"),
            attempts: row.get("attempts").and_then(Value::as_u64).unwrap_or(0),
            last_status_code: row.get("last_status_code").and_then(Value::as_u64),
            last_error: row.get("last_error").and_then(Value::as_str).map(str::to_string),
            next_attempt_at: if status == "pending" { row.get("next_attempt_at").and_then(Value::as_i64).map(iso) } else { None },
            created_at: iso(row.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
            delivered_at: row.get("delivered_at").and_then(Value::as_i64).map(iso),
            status,
        }
    }
}

/// `GET /api/v1/webhooks/{id}/deliveries` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    pub limit: Option<u64>,
    pub status: Option<String>,
}

/// A webhook's delivery log, newest first.
#[derive(Debug, Serialize)]
pub struct DeliveryLog {
    pub webhook_id: String,
    pub deliveries: Vec<Delivery>,
    /// Deliveries of the webhook (with the status filter), beyond the page too.
    pub total: u64,
}

pub const DELIVERY_STATUSES: &[&str] = &["pending", "delivered", "failed"];

pub async fn deliveries(db: &Db, caller: &Caller, id: &str, q: DeliveryQuery) -> AppResult<DeliveryLog> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(AppError::Validation("limit: 1 to 500".into()));
    }
    let webhook = get(db, caller, id).await?;
    let mut filter = "webhook_id = $1".to_string();
    let mut params = vec![json!(webhook.id)];
    if let Some(status) = &q.status {
        if !DELIVERY_STATUSES.contains(&status.as_str()) {
            return Err(AppError::Validation(format!("status: one of {}", DELIVERY_STATUSES.join(", "))));
        }
        filter.push_str(" AND status = $2");
        params.push(json!(status));
    }
    let rows = db
        .sql(
            &format!(
                "SELECT id, webhook_id, event, status, attempts, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
                 FROM webhook_deliveries WHERE {filter} ORDER BY created_at DESC, id LIMIT {limit}"
            ),
            &params,
        )
        .await?;
    let total = db.sql(&format!("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE {filter}"), &params).await?;
    let total = total.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0);
    Ok(DeliveryLog { webhook_id: webhook.id, deliveries: rows.objects().iter().map(Delivery::from_row).collect(), total })
}

/// The body sent for delivery `id`: compact JSON, fixed when the event happens.
pub fn delivery_body(id: &str, event: &str, created_at_ms: i64, data: &Value) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        id: &'a str,
        event: &'a str,
        created_at: String,
        data: &'a Value,
    }
    serde_json::to_string(&Body { id, event, created_at: iso(created_at_ms), data }).unwrap_or_default()
}

/// Records a delivery of `event` with `data` to every webhook of `user_id`
/// subscribed to it; the delivery loop sends them. Never fails the caller:
/// a database error is logged.
pub async fn emit(state: &AppState, user_id: &str, event: &str, data: Value) {
    match record(&state.db, user_id, event, &data).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::debug!(user_id, event, deliveries = n, "webhook deliveries recorded");
            state.webhooks.wake.notify_one();
        }
        Err(e) => tracing::error!(user_id, event, "webhook deliveries were not recorded: {e}"),
    }
}

async fn record(db: &Db, user_id: &str, event: &str, data: &Value) -> Result<usize, DbError> {
    let hooks = db.sql("SELECT id, events FROM webhooks WHERE user_id = $1", &[json!(user_id)]).await?;
    let subscribed: Vec<String> = hooks
        .objects()
        .iter()
        .filter(|h| {
            let events: Vec<String> =
                h.get("events").and_then(Value::as_str).and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
            events.iter().any(|e| e == event)
        })
        .filter_map(|h| h.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    if subscribed.is_empty() {
        return Ok(0);
    }
    let now = now_ms();
    let mut values = Vec::new();
    let mut params = vec![json!(user_id), json!(event), json!(now)];
    for hook in &subscribed {
        let id = uuid::Uuid::new_v4().to_string();
        let body = delivery_body(&id, event, now, data);
        let n = params.len();
        values.push(format!("(${}, ${}, $1, $2, ${}, 'pending', 0, $3, NULL, NULL, NULL, NULL, $3, NULL)", n + 1, n + 2, n + 3));
        params.extend([json!(id), json!(hook), json!(body)]);
    }
    db.sql(
        &format!(
            "INSERT INTO webhook_deliveries (id, webhook_id, user_id, event, body, status, attempts, next_attempt_at, last_status_code, last_error, claimed_by, claim_until, created_at, delivered_at) VALUES {}",
            values.join(", ")
        ),
        &params,
    )
    .await?;
    Ok(subscribed.len())
}

/// Starts the loop that sends recorded deliveries (see the module documentation).
pub fn spawn_delivery_loop(state: AppState) {
    tokio::spawn(async move {
        loop {
            match deliver_due(&state).await {
                // A full batch sent: more may be due at once.
                Ok(n) if n >= BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!("webhook deliveries: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = state.webhooks.wake.notified() => {}
            }
        }
    });
}

/// A delivery this instance claimed.
struct Claimed {
    id: String,
    url: String,
    secret: String,
    event: String,
    body: String,
    attempts: u32,
}

/// Claims the due pending deliveries (up to a batch) and sends them; answers
/// how many this instance claimed and sent.
async fn deliver_due(state: &AppState) -> Result<usize, DbError> {
    let now = now_ms();
    let due = state
        .db
        .sql(
            &format!(
                "SELECT d.id AS id, d.event AS event, d.body AS body, d.attempts AS attempts, w.url AS url, w.secret AS secret \
                 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id \
                 WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.claim_until IS NULL OR d.claim_until < $1) \
                 ORDER BY d.next_attempt_at, d.id LIMIT {BATCH}"
            ),
            &[json!(now)],
        )
        .await?;
    let rows = due.objects();
    let text = |row: &Map<String, Value>, k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let candidates: Vec<Claimed> = rows
        .iter()
        .map(|r| Claimed {
            id: text(r, "id"),
            url: text(r, "url"),
            secret: text(r, "secret"),
            event: text(r, "event"),
            body: text(r, "body"),
            attempts: r.get("attempts").and_then(Value::as_u64).unwrap_or(0) as u32,
        })
        .collect();
    let outcomes: Vec<Result<bool, DbError>> =
        futures::stream::iter(candidates).map(|d| claim_and_send(state, d)).buffer_unordered(CONCURRENCY).collect().await;
    let mut sent = 0;
    for outcome in outcomes {
        match outcome {
            Ok(true) => sent += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!("webhook delivery: {e}"),
        }
    }
    Ok(sent)
}

/// Claims delivery `d` (one conditional UPDATE; another instance's live claim
/// wins), sends it once and records the outcome while still holding the claim.
/// Answers whether this instance claimed it.
async fn claim_and_send(state: &AppState, d: Claimed) -> Result<bool, DbError> {
    let me = &state.webhooks.instance;
    let now = now_ms();
    let lease_until = now + CLAIM_LEASE.as_millis() as i64;
    let claimed = state
        .db
        .sql(
            "UPDATE webhook_deliveries SET claimed_by = $2, claim_until = $3 \
             WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $4 AND (claim_until IS NULL OR claim_until < $4)",
            &[json!(d.id), json!(me), json!(lease_until), json!(now)],
        )
        .await?;
    if claimed.affected != 1 {
        return Ok(false);
    }
    let outcome = send(&state.webhooks.http, &d).await;
    let attempts = d.attempts + 1;
    let done = now_ms();
    let (success, code, error) = match &outcome {
        Ok(status) if (200..300).contains(status) => (true, Some(*status), None),
        Ok(status) => (false, Some(*status), Some(format!("the endpoint answered HTTP {status}"))),
        Err(e) => (false, None, Some(truncate(e, MAX_ERROR_LEN))),
    };
    let (status, next_at, delivered_at) = match next_step(success, attempts, done) {
        Next::Delivered => ("delivered", done, Some(done)),
        Next::RetryAt(at) => ("pending", at, None),
        Next::Failed => ("failed", done, None),
    };
    let recorded = state
        .db
        .sql(
            "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, last_status_code = $6, last_error = $7, \
             delivered_at = $8, claimed_by = NULL, claim_until = NULL WHERE id = $1 AND claimed_by = $2",
            &[json!(d.id), json!(me), json!(status), json!(attempts), json!(next_at), json!(code), json!(error), json!(delivered_at)],
        )
        .await?;
    if recorded.affected != 1 {
        tracing::warn!(delivery = %d.id, "the delivery's claim was lost before its outcome was recorded (it may be sent again)");
    }
    match status {
        "delivered" => tracing::debug!(delivery = %d.id, event = %d.event, attempts, "webhook delivered"),
        "failed" => tracing::warn!(delivery = %d.id, event = %d.event, attempts, error = ?error, "webhook delivery failed for good"),
        _ => tracing::debug!(delivery = %d.id, event = %d.event, attempts, error = ?error, "webhook attempt failed; retrying"),
    }
    Ok(true)
}

/// One attempt: the HTTP status the endpoint answered, or why there was none.
async fn send(http: &reqwest::Client, d: &Claimed) -> Result<u16, String> {
    let response = http
        .post(&d.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Tessera-Event", &d.event)
        .header("X-Tessera-Delivery", &d.id)
        .header("X-Tessera-Timestamp", (now_ms() / 1000).to_string())
        .header("X-Tessera-Signature", signature(&d.secret, d.body.as_bytes()))
        .body(d.body.clone())
        .send()
        .await
        .map_err(|e| if e.is_timeout() { format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()) } else { error_chain(&e) })?;
    Ok(response.status().as_u16())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/webhooks", routing::get(list_route).post(create_route))
        .route("/api/v1/webhooks/{id}", routing::get(get_route).delete(delete_route))
        .route("/api/v1/webhooks/{id}/deliveries", routing::get(deliveries_route))
}

async fn list_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<WebhookList>> {
    Ok(Json(list(&state.db, &caller).await?))
}

async fn create_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<NewWebhook>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Webhook>)> {
    let Json(w) = body?;
    Ok((StatusCode::CREATED, Json(create(&state.db, &caller, w).await?)))
}

async fn get_route(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Webhook>> {
    Ok(Json(get(&state.db, &caller, &id).await?))
}

async fn delete_route(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<StatusCode> {
    delete(&state.db, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn deliveries_route(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Result<Query<DeliveryQuery>, QueryRejection>,
) -> AppResult<Json<DeliveryLog>> {
    let Query(q) = q?;
    Ok(Json(deliveries(&state.db, &caller, &id, q).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hex_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // The same body and secret give the same signature; any change another.
        let body = delivery_body("d1", "meeting.started", 1_790_000_000_123, &json!({"meeting": {"id": "m1"}}));
        assert_eq!(body, r#"{"id":"d1","event":"meeting.started","created_at":"2026-09-21T14:13:20.123Z","data":{"meeting":{"id":"m1"}}}"#);
        let secret = "0123456789abcdef";
        assert_eq!(signature(secret, body.as_bytes()), signature(secret, body.as_bytes()));
        assert_ne!(signature(secret, body.as_bytes()), signature("0123456789abcdeg", body.as_bytes()));
        assert_ne!(signature(secret, body.as_bytes()), signature(secret, body.replace("m1", "m2").as_bytes()));
    }

    #[test]
    fn retries_back_off_exponentially_then_fail() {
        let waits: Vec<u64> = (1..=MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128]);
        assert_eq!(backoff(20), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(next_step(true, 1, 1000), Next::Delivered);
        assert_eq!(next_step(true, MAX_ATTEMPTS, 1000), Next::Delivered);
        assert_eq!(next_step(false, 1, 1000), Next::RetryAt(2000));
        assert_eq!(next_step(false, 3, 1000), Next::RetryAt(5000));
        assert_eq!(next_step(false, MAX_ATTEMPTS - 1, 0), Next::RetryAt(64_000));
        assert_eq!(next_step(false, MAX_ATTEMPTS, 1000), Next::Failed);
        // Every attempt and wait of a delivery that never succeeds: about four minutes.
        let total: u64 = (1..MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).sum();
        assert_eq!(total, 127);
    }

    #[test]
    fn urls_events_and_secrets_are_checked() {
        for good in ["http://127.0.0.1:8080/hook", "https://example.com/a?b=c"] {
            assert!(valid_url(good).is_ok(), "{good}");
        }
        for bad in ["", "example.com/hook", "ftp://example.com/", "https://user:pw@example.com/", "http://", "javascript:alert(1)"] {
            assert!(valid_url(bad).is_err(), "{bad}");
        }
        assert!(valid_url(&format!("https://example.com/{}", "a".repeat(2100))).is_err());
        let events = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            valid_events(&events(&["meeting.ended", "meeting.started", "meeting.ended"])).unwrap(),
            events(&["meeting.ended", "meeting.started"])
        );
        assert!(valid_events(&[]).is_err());
        assert!(valid_events(&events(&["meeting.started", "meeting.deleted"])).is_err());
        assert!(valid_secret(&"s".repeat(16)).is_ok() && valid_secret(&"s".repeat(256)).is_ok());
        assert!(valid_secret(&"s".repeat(15)).is_err() && valid_secret(&"s".repeat(257)).is_err());
        assert!(valid_secret("0123456789abcdef\n").is_err());
        assert_eq!(secret_hint("0123456789abcdef"), "…cdef");
        assert_eq!(secret_hint("ab"), "…ab");
    }

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééééé", 3), "é…");
    }
}
