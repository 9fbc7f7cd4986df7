//! Meeting summaries, made when `AI_SERVICE_URL` is set: once a meeting is
//! stopped, its transcript is sent to the text-generation service as an
//! OpenAI-compatible chat completion (`POST {AI_SERVICE_URL}/v1/chat/completions`,
//! model `AI_MODEL`, default `default`) and the answer is kept in the
//! meeting's `summary`. Without the variable no summary is made and nothing
//! else changes.
//!
//! # Pending summaries live in Tessera
//!
//! A summary is work recorded in the meeting's own row, never held by one
//! instance, so an instance that dies (or a service that fails once) loses
//! nothing. The columns (added to a `meetings` table made by an earlier
//! version by [`SCHEMA`]'s `ALTER TABLE … ADD COLUMN IF NOT EXISTS`):
//!
//! - `summary_state`: `NULL` (no summary asked for: the meeting is not
//!   stopped, or was stopped by an instance without `AI_SERVICE_URL`, or
//!   before this version), `pending`, `done` (`summary` holds it), `skipped`
//!   (the transcript was empty: nothing to summarize) or `failed` (every
//!   attempt failed). The API shows it as the meeting's `summary_status`.
//! - `summary_attempts`, `summary_next_at` (when the next attempt is due, ms).
//! - `summary_claimed_by`, `summary_claim_until`: the instance working on it
//!   and its lease.
//!
//! Stopping a meeting (the conditional `UPDATE … WHERE status = 'active'` of
//! [`crate::meetings::stop`]) sets `summary_state = 'pending'` in the same
//! statement when the stopping instance has `AI_SERVICE_URL`, and wakes the
//! instance's loop. Instances without the variable record nothing and run no
//! loop, so a deployment should set it on every instance or on none: a
//! meeting stopped on an instance without it gets no summary.
//!
//! Every instance with `AI_SERVICE_URL` runs [`spawn_summary_loop`] (as it
//! runs the webhook deliveries, [`crate::webhooks`]): at start, every
//! [`POLL`], and when woken, it looks for due pending summaries and claims
//! each with one conditional `UPDATE` that succeeds only while no live lease
//! exists (and only if the attempt count is the one it read), counting the
//! attempt. While the attempt runs (reading the transcript, then the service,
//! up to [`ATTEMPT_TIMEOUT`]) the instance renews its [`CLAIM_LEASE`] every
//! [`RENEW_EVERY`]; it gives the attempt up if a renewal finds the claim
//! gone. The outcome (the summary and `done`, `skipped`, a later
//! `summary_next_at`, or `failed`) is written only while the instance still
//! holds the claim. A failed attempt is retried after [`backoff`]: 5 s, 10 s,
//! 20 s, … doubling, capped at [`MAX_BACKOFF`] (10 minutes); after
//! [`MAX_ATTEMPTS`] attempts the summary is `failed` (and logged). An
//! instance that dies mid-attempt stops renewing: its lease lapses within
//! [`CLAIM_LEASE`] and another instance (or the next one started) claims the
//! summary. The service may therefore be asked twice for one meeting; the
//! summary is written once.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::clock::now_ms;
use crate::db::DbError;
use crate::state::AppState;

/// Upgrades a `meetings` table made before summaries were kept in Tessera
/// (a no-op on one made by this version), and indexes the state the loop
/// looks up. Runs after [`crate::meetings::SCHEMA`].
pub const SCHEMA: &[&str] = &[
    "ALTER TABLE meetings ADD COLUMN IF NOT EXISTS summary_state TEXT, ADD COLUMN IF NOT EXISTS summary_attempts BIGINT, \
     ADD COLUMN IF NOT EXISTS summary_next_at BIGINT, ADD COLUMN IF NOT EXISTS summary_claimed_by TEXT, \
     ADD COLUMN IF NOT EXISTS summary_claim_until BIGINT",
    "CREATE INDEX IF NOT EXISTS meetings_summary_state ON meetings (summary_state)",
];

/// The instruction sent with every transcript.
const INSTRUCTION: &str = "Summarize this meeting transcript in a few sentences: decisions, action items and open questions.";

/// Attempts of one summary before it is `failed`.
pub const MAX_ATTEMPTS: u32 = 8;
/// The wait after the first failed attempt; it doubles after each one.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// How long one call to the service may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a claim keeps other instances off a summary unless renewed:
/// what another instance waits, at most, after the claimer died.
pub const CLAIM_LEASE: Duration = Duration::from_secs(30);
/// How often a running attempt renews its claim (well within the lease, so
/// that a slow database write does not let it lapse).
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How often the loop looks for due summaries when nothing wakes it.
pub const POLL: Duration = Duration::from_secs(2);
/// Summaries claimed per round, and made at once.
const BATCH: usize = 8;
const CONCURRENCY: usize = 2;

/// The summary loop's per-instance part, in [`AppState`].
pub struct Summarizer {
    /// Wakes the loop when a meeting of this instance is stopped.
    pub wake: tokio::sync::Notify,
    /// This instance, as `summary_claimed_by` names it.
    instance: String,
    http: reqwest::Client,
}

impl Default for Summarizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Summarizer {
    pub fn new() -> Self {
        let http = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT).build().unwrap_or_default();
        Summarizer { wake: tokio::sync::Notify::new(), instance: uuid::Uuid::new_v4().to_string(), http }
    }
}

/// The wait before the next attempt after `attempts` failed ones (1 → 5 s,
/// 2 → 10 s, 3 → 20 s, …), capped at [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(20);
    FIRST_BACKOFF.saturating_mul(1 << exponent).min(MAX_BACKOFF)
}

/// What a failed attempt makes of a summary that has had `attempts` attempts
/// (this one included): pending again at a later time, or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    RetryAt(i64),
    Failed,
}

pub fn after_failure(attempts: u32, now_ms: i64) -> Next {
    if attempts >= MAX_ATTEMPTS { Next::Failed } else { Next::RetryAt(now_ms + backoff(attempts).as_millis() as i64) }
}

/// Starts the loop that makes pending summaries (see the module
/// documentation); without `AI_SERVICE_URL`, none.
pub fn spawn_summary_loop(state: AppState) {
    let Some(url) = state.config.ai_service_url.clone() else {
        tracing::info!("AI_SERVICE_URL is not set: meetings get no summary");
        return;
    };
    tokio::spawn(async move {
        loop {
            match summarize_due(&state, &url).await {
                // A full batch made: more may be due at once.
                Ok(n) if n >= BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!("meeting summaries: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = state.summaries.wake.notified() => {}
            }
        }
    });
}

/// Claims the due pending summaries (up to a batch) and makes them; answers
/// how many this instance claimed.
async fn summarize_due(state: &AppState, url: &str) -> Result<usize, DbError> {
    let now = now_ms();
    let due = state
        .db
        .sql(
            &format!(
                "SELECT id, summary_attempts FROM meetings \
                 WHERE summary_state = 'pending' AND summary_next_at <= $1 AND (summary_claim_until IS NULL OR summary_claim_until < $1) \
                 ORDER BY summary_next_at, id LIMIT {BATCH}"
            ),
            &[json!(now)],
        )
        .await?;
    let candidates: Vec<(String, u32)> = due
        .objects()
        .iter()
        .filter_map(|r| {
            let id = r.get("id").and_then(Value::as_str)?.to_string();
            Some((id, r.get("summary_attempts").and_then(Value::as_u64).unwrap_or(0) as u32))
        })
        .collect();
    let outcomes: Vec<Result<bool, DbError>> = futures::stream::iter(candidates)
        .map(|(id, attempts)| claim_and_summarize(state, url, id, attempts))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut claimed = 0;
    for outcome in outcomes {
        match outcome {
            Ok(true) => claimed += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!("meeting summary: {e}"),
        }
    }
    Ok(claimed)
}

/// What an attempt came to.
enum Outcome {
    Summary(String),
    /// The transcript is empty.
    Empty,
    Error(String),
}

/// Claims meeting `id`'s summary, which had `before` attempts (one
/// conditional UPDATE; another instance's live claim wins), makes it while
/// renewing the claim, and records the outcome while still holding it.
/// Answers whether this instance claimed it.
async fn claim_and_summarize(state: &AppState, url: &str, id: String, before: u32) -> Result<bool, DbError> {
    let me = &state.summaries.instance;
    let now = now_ms();
    let attempts = before + 1;
    let claimed = state
        .db
        .sql(
            "UPDATE meetings SET summary_claimed_by = $2, summary_claim_until = $3, summary_attempts = $6 \
             WHERE id = $1 AND summary_state = 'pending' AND summary_attempts = $5 AND summary_next_at <= $4 \
             AND (summary_claim_until IS NULL OR summary_claim_until < $4)",
            &[json!(id), json!(me), json!(now + CLAIM_LEASE.as_millis() as i64), json!(now), json!(before), json!(attempts)],
        )
        .await?;
    if claimed.affected != 1 {
        return Ok(false);
    }
    let outcome = if attempts > MAX_ATTEMPTS {
        // The last attempt's instance died before recording its outcome.
        Outcome::Error(format!("{MAX_ATTEMPTS} attempts were cut short"))
    } else {
        tokio::select! {
            outcome = attempt(state, url, &id) => outcome,
            () = keep_claim(state, &id) => {
                tracing::warn!(meeting = %id, "the summary's claim was lost mid-attempt; another instance has it");
                return Ok(true);
            }
        }
    };
    let done = now_ms();
    let (sql, params) = match &outcome {
        Outcome::Summary(summary) => (
            "UPDATE meetings SET summary = $3, summary_state = 'done', summary_claimed_by = NULL, summary_claim_until = NULL \
             WHERE id = $1 AND summary_claimed_by = $2 AND summary_state = 'pending'",
            vec![json!(id), json!(me), json!(summary)],
        ),
        Outcome::Empty => (
            "UPDATE meetings SET summary_state = 'skipped', summary_claimed_by = NULL, summary_claim_until = NULL \
             WHERE id = $1 AND summary_claimed_by = $2 AND summary_state = 'pending'",
            vec![json!(id), json!(me)],
        ),
        Outcome::Error(_) => match after_failure(attempts, done) {
            Next::RetryAt(at) => (
                "UPDATE meetings SET summary_next_at = $3, summary_claimed_by = NULL, summary_claim_until = NULL \
                 WHERE id = $1 AND summary_claimed_by = $2 AND summary_state = 'pending'",
                vec![json!(id), json!(me), json!(at)],
            ),
            Next::Failed => (
                "UPDATE meetings SET summary_state = 'failed', summary_claimed_by = NULL, summary_claim_until = NULL \
                 WHERE id = $1 AND summary_claimed_by = $2 AND summary_state = 'pending'",
                vec![json!(id), json!(me)],
            ),
        },
    };
    let recorded = state.db.sql(sql, &params).await?;
    if recorded.affected != 1 {
        tracing::warn!(meeting = %id, "the summary's claim was lost (or the meeting deleted) before its outcome was recorded");
        return Ok(true);
    }
    match outcome {
        Outcome::Summary(_) => tracing::info!(meeting = %id, attempts, "meeting summarized"),
        Outcome::Empty => tracing::debug!(meeting = %id, "empty transcript: no summary"),
        Outcome::Error(e) if attempts >= MAX_ATTEMPTS => {
            tracing::error!(meeting = %id, attempts, "the meeting's summary failed for good: {e}")
        }
        Outcome::Error(e) => {
            tracing::warn!(meeting = %id, attempts, retry_in = ?backoff(attempts), "the text-generation service made no summary: {e}")
        }
    }
    Ok(true)
}

/// Renews this instance's claim on meeting `id`'s summary every
/// [`RENEW_EVERY`]; returns only when the claim is found lost (a failed
/// renewal is tried again at the next tick).
async fn keep_claim(state: &AppState, id: &str) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let until = now_ms() + CLAIM_LEASE.as_millis() as i64;
        match state
            .db
            .sql(
                "UPDATE meetings SET summary_claim_until = $3 WHERE id = $1 AND summary_claimed_by = $2 AND summary_state = 'pending'",
                &[json!(id), json!(state.summaries.instance), json!(until)],
            )
            .await
        {
            Ok(r) if r.affected == 1 => {}
            Ok(_) => return,
            Err(e) => tracing::warn!(meeting = %id, "renewing the summary's claim: {e}"),
        }
    }
}

/// One attempt: reads the transcript and asks the service.
async fn attempt(state: &AppState, url: &str, id: &str) -> Outcome {
    let text = match crate::meetings::transcript_text(&state.db, id).await {
        Ok(text) => text,
        Err(e) => return Outcome::Error(format!("reading the transcript: {e}")),
    };
    if text.trim().is_empty() {
        return Outcome::Empty;
    }
    match summarize(&state.summaries.http, url, &state.config.ai_model, &text).await {
        Ok(summary) => Outcome::Summary(summary),
        Err(e) => Outcome::Error(format!("{e:#}")),
    }
}

async fn summarize(http: &reqwest::Client, url: &str, model: &str, transcript: &str) -> anyhow::Result<String> {
    let body = json!({
        "model": model,
        "messages": [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": transcript}],
    });
    let answer: Value = http
        .post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    answer["choices"][0]["message"]["content"]
        .as_str()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| anyhow::anyhow!("no choices[0].message.content in {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_five_seconds_to_ten_minutes_then_fail() {
        let waits: Vec<u64> = (1..=MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 600]);
        assert_eq!(backoff(0), FIRST_BACKOFF);
        assert_eq!(backoff(30), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(after_failure(1, 1000), Next::RetryAt(6000));
        assert_eq!(after_failure(MAX_ATTEMPTS - 1, 0), Next::RetryAt(320_000));
        assert_eq!(after_failure(MAX_ATTEMPTS, 1000), Next::Failed);
        assert_eq!(after_failure(MAX_ATTEMPTS + 1, 1000), Next::Failed);
        // Every wait of a summary that never succeeds: a little over ten minutes.
        let total: u64 = (1..MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).sum();
        assert_eq!(total, 635);
        // A live claim is renewed well before it lapses, and outlives no attempt's end.
        assert!(RENEW_EVERY * 3 <= CLAIM_LEASE);
    }
}
