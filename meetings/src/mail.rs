//! Mail: organization invitations sent through a mail service's HTTP API.
//!
//! - **Without `EMAIL_SERVICE_API_KEY`** no mail is sent: the invitation is
//!   logged (the address and the organization) and answers `"delivery": "logged"`.
//! - **With the key**, the invitation's message is written to `mail_outbox` in
//!   the same transaction as the invitation (`"delivery": "queued"`), so a
//!   recorded invitation always has its mail and an instance's death loses none.
//!   Every instance runs [`spawn_mail_loop`]: it claims due messages with one
//!   conditional UPDATE (a lease in `claimed_by`/`claim_until`, as webhook
//!   deliveries are claimed) and POSTs each to `EMAIL_SERVICE_URL` (default
//!   `https://api.resend.com/emails`, Resend's API; any service taking the same
//!   JSON works): `Authorization: Bearer <key>`, `Idempotency-Key: <message id>`
//!   (a message re-sent after a lost claim is not delivered twice by a service
//!   that honours it), body `{"from", "to": [address], "subject", "text"}`, the
//!   sender from `EMAIL_FROM`. A 2xx answer marks it `sent`; anything else is
//!   retried with the webhooks' backoff (1 s, 2 s, 4 s … 300 s), `failed` after
//!   [`MAX_ATTEMPTS`] attempts. The key is never logged or stored.
//! - The message names the organization, the role and the inviter, and says
//!   how to join: an invitee without an account registers with the invited
//!   address at `MEETINGS_PUBLIC_URL` (the invitation is accepted then); a
//!   registered user is a member already and is told so.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::clock::now_ms;
use crate::db::DbError;
use crate::state::AppState;
use crate::webhooks::{Next, next_step, truncate};

/// The table this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS mail_outbox (id TEXT PRIMARY KEY, to_addr TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, last_status_code BIGINT, last_error TEXT, claimed_by TEXT, claim_until BIGINT, created_at BIGINT NOT NULL, sent_at BIGINT)",
];

/// Attempts before a message is `failed`.
pub const MAX_ATTEMPTS: u32 = crate::webhooks::MAX_ATTEMPTS;
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim keeps other instances off a message.
const CLAIM_LEASE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_secs(1);
const BATCH: usize = 16;
const CONCURRENCY: usize = 4;
const MAX_ERROR_LEN: usize = 500;

/// A message to queue: the INSERT statement and its parameters come from [`Message::insert`].
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub to: String,
    pub subject: String,
    pub text: String,
}

impl Message {
    /// The statement that queues this message, numbering its placeholders
    /// from `first` (so it can follow another statement's parameters in one
    /// transaction), and those parameters.
    pub fn insert(&self, first: usize, now_ms: i64) -> (String, Vec<Value>) {
        let p: Vec<String> = (first..first + 5).map(|i| format!("${i}")).collect();
        (
            format!(
                "INSERT INTO mail_outbox (id, to_addr, subject, body, status, attempts, next_attempt_at, created_at) \
                 VALUES ({}, {}, {}, {}, 'pending', 0, {}, {})",
                p[0], p[1], p[2], p[3], p[4], p[4]
            ),
            vec![json!(self.id), json!(self.to), json!(self.subject), json!(self.text), json!(now_ms)],
        )
    }
}

/// What an invitation's mail says.
pub struct InvitationMail<'a> {
    pub to: &'a str,
    pub organization: &'a str,
    pub role: &'a str,
    pub inviter: &'a str,
    /// The invitee is a registered user, made a member at once.
    pub member_added: bool,
    pub public_url: &'a str,
    pub expires_at: &'a str,
}

impl InvitationMail<'_> {
    pub fn message(&self) -> Message {
        let subject = format!("{} invited you to {} on Tessera Meetings", self.inviter, self.organization);
        let how = if self.member_added {
            format!("You are a member already: sign in at {} to see its meetings.", self.public_url)
        } else {
            format!(
                "To join, register at {} with this address ({}); the invitation is accepted then. It expires at {}.",
                self.public_url, self.to, self.expires_at
            )
        };
        let text = format!(
            "Hello,\n\n{} invited you to the organization \"{}\" as {}.\n\n{how}\n\nIf you did not expect this, ignore this message.\n",
            self.inviter, self.organization, self.role
        );
        Message { id: uuid::Uuid::new_v4().to_string(), to: self.to.to_string(), subject, text }
    }
}

/// Sends queued messages; one per instance, in [`AppState`].
pub struct Mailer {
    http: reqwest::Client,
    /// This instance, as `claimed_by` names it.
    instance: String,
    /// Wakes the loop when a message is queued.
    pub wake: tokio::sync::Notify,
}

impl Default for Mailer {
    fn default() -> Self {
        Self::new()
    }
}

impl Mailer {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("tessera-meetings-mail/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Mailer { http, instance: uuid::Uuid::new_v4().to_string(), wake: tokio::sync::Notify::new() }
    }
}

/// Starts the loop that sends queued messages; does nothing without a key.
pub fn spawn_mail_loop(state: AppState) {
    if state.config.email_api_key.is_none() {
        return;
    }
    tokio::spawn(async move {
        loop {
            match send_due(&state).await {
                Ok(n) if n >= BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!("mail: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = state.mail.wake.notified() => {}
            }
        }
    });
}

struct Claimed {
    id: String,
    to: String,
    subject: String,
    text: String,
    attempts: u32,
}

/// Claims the due messages (up to a batch) and sends them; answers how many
/// this instance claimed.
async fn send_due(state: &AppState) -> Result<usize, DbError> {
    let now = now_ms();
    let due = state
        .db
        .sql(
            &format!(
                "SELECT id, to_addr, subject, body, attempts FROM mail_outbox \
                 WHERE status = 'pending' AND next_attempt_at <= $1 AND (claim_until IS NULL OR claim_until < $1) \
                 ORDER BY next_attempt_at, id LIMIT {BATCH}"
            ),
            &[json!(now)],
        )
        .await?;
    let text = |row: &Map<String, Value>, k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let candidates: Vec<Claimed> = due
        .objects()
        .iter()
        .map(|r| Claimed {
            id: text(r, "id"),
            to: text(r, "to_addr"),
            subject: text(r, "subject"),
            text: text(r, "body"),
            attempts: r.get("attempts").and_then(Value::as_u64).unwrap_or(0) as u32,
        })
        .collect();
    let outcomes: Vec<Result<bool, DbError>> =
        futures::stream::iter(candidates).map(|m| claim_and_send(state, m)).buffer_unordered(CONCURRENCY).collect().await;
    let mut claimed = 0;
    for outcome in outcomes {
        match outcome {
            Ok(true) => claimed += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!("mail: {e}"),
        }
    }
    Ok(claimed)
}

async fn claim_and_send(state: &AppState, m: Claimed) -> Result<bool, DbError> {
    let me = &state.mail.instance;
    let now = now_ms();
    let claimed = state
        .db
        .sql(
            "UPDATE mail_outbox SET claimed_by = $2, claim_until = $3 \
             WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $4 AND (claim_until IS NULL OR claim_until < $4)",
            &[json!(m.id), json!(me), json!(now + CLAIM_LEASE.as_millis() as i64), json!(now)],
        )
        .await?;
    if claimed.affected != 1 {
        return Ok(false);
    }
    let outcome = send(state, &m).await;
    let attempts = m.attempts + 1;
    let done = now_ms();
    let (success, code, error) = match &outcome {
        Ok(status) if (200..300).contains(status) => (true, Some(*status), None),
        Ok(status) => (false, Some(*status), Some(format!("the mail service answered HTTP {status}"))),
        Err(e) => (false, None, Some(truncate(e, MAX_ERROR_LEN))),
    };
    let (status, next_at, sent_at) = match next_step(success, attempts, done) {
        Next::Delivered => ("sent", done, Some(done)),
        Next::RetryAt(at) => ("pending", at, None),
        Next::Failed => ("failed", done, None),
    };
    let recorded = state
        .db
        .sql(
            "UPDATE mail_outbox SET status = $3, attempts = $4, next_attempt_at = $5, last_status_code = $6, last_error = $7, \
             sent_at = $8, claimed_by = NULL, claim_until = NULL WHERE id = $1 AND claimed_by = $2",
            &[json!(m.id), json!(me), json!(status), json!(attempts), json!(next_at), json!(code), json!(error), json!(sent_at)],
        )
        .await?;
    if recorded.affected != 1 {
        tracing::warn!(message = %m.id, "the message's claim was lost before its outcome was recorded (it may be sent again)");
    }
    match status {
        "sent" => tracing::info!(message = %m.id, to = %m.to, attempts, "mail sent"),
        "failed" => tracing::warn!(message = %m.id, to = %m.to, attempts, error = ?error, "mail failed for good"),
        _ => tracing::debug!(message = %m.id, attempts, error = ?error, "mail attempt failed; retrying"),
    }
    Ok(true)
}

/// One attempt: the HTTP status the mail service answered, or why there was none.
async fn send(state: &AppState, m: &Claimed) -> Result<u16, String> {
    let key = state.config.email_api_key.as_deref().ok_or("no EMAIL_SERVICE_API_KEY")?;
    let body = json!({"from": state.config.email_from, "to": [m.to], "subject": m.subject, "text": m.text});
    let response = state
        .mail
        .http
        .post(&state.config.email_service_url)
        .bearer_auth(key)
        .header("Idempotency-Key", &m.id)
        .json(&body)
        .send()
        .await
        .map_err(|e| if e.is_timeout() { format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()) } else { e.to_string() })?;
    Ok(response.status().as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invitation_says_how_to_join() {
        let mail = InvitationMail {
            to: "carol@example.com",
            organization: "Acme",
            role: "editor",
            inviter: "Ada",
            member_added: false,
            public_url: "https://meet.example.com",
            expires_at: "2026-12-07T00:00:00Z",
        };
        let m = mail.message();
        assert_eq!(m.to, "carol@example.com");
        assert!(m.subject.contains("Acme") && m.subject.contains("Ada"), "{}", m.subject);
        assert!(m.text.contains("register at https://meet.example.com") && m.text.contains("as editor"), "{}", m.text);
        let member = InvitationMail { member_added: true, ..mail }.message();
        assert!(member.text.contains("member already"), "{}", member.text);
    }

    #[test]
    fn a_queued_message_numbers_its_placeholders_after_the_statement_it_follows() {
        let m = Message { id: "m1".into(), to: "a@b.c".into(), subject: "s".into(), text: "t".into() };
        let (sql, params) = m.insert(10, 7);
        assert!(sql.contains("VALUES ($10, $11, $12, $13, 'pending', 0, $14, $14)"), "{sql}");
        assert_eq!(params.len(), 5);
        assert_eq!(params[4], json!(7));
    }
}
