//! Activities (`GET /api/v1/admin/activities`): the SQL queries, logins,
//! configuration changes and admin actions this router served, kept in the
//! meta group so every router lists the same ones. The request middleware
//! ([`crate::http::request_stats::record`]) notes each one here; a flusher writes what
//! was noted as one meta command per second (and a listing flushes first).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::meta::ActivityRecord;

use crate::cluster::ClusterClient;
use crate::error::ApiError;

/// Most records a router holds while the meta group does not take them.
const BUFFER_CAP: usize = 10_000;
/// How much of a SQL text a record keeps.
const DETAIL_CHARS: usize = 500;

/// What a handler adds to its request's record (the SQL text, the login name):
/// a response extension.
#[derive(Clone)]
pub struct ActivityDetail(pub String);

impl ActivityDetail {
    /// `text` cut to what a record keeps.
    pub fn of(text: &str) -> ActivityDetail {
        ActivityDetail(text.chars().take(DETAIL_CHARS).collect())
    }
}

/// Who made a request, as the permission check found it: a response extension.
#[derive(Clone)]
pub struct ActivityUser(pub String);

/// Items noted and not written yet, at most [`BUFFER_CAP`]: under load it is
/// full, and the oldest leaves as each item comes.
struct Ring<T>(Mutex<VecDeque<T>>);

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring(Mutex::new(VecDeque::new()))
    }
}

impl<T> Ring<T> {
    fn held(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, item: T) {
        let mut held = self.held();
        if held.len() >= BUFFER_CAP {
            held.pop_front();
        }
        held.push_back(item);
    }

    fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.held()).into()
    }

    /// Puts back `older` (taken and not written) before what came since,
    /// keeping the newest [`BUFFER_CAP`].
    fn put_back(&self, older: Vec<T>) {
        let mut held = self.held();
        let mut items = VecDeque::from(older);
        items.append(&mut held);
        let excess = items.len().saturating_sub(BUFFER_CAP);
        items.drain(..excess);
        *held = items;
    }
}

/// The records this router noted and has not written yet.
#[derive(Default)]
pub struct Activities {
    pending: Ring<ActivityRecord>,
    /// Security events noted (permissions refused) and not written yet.
    events: Ring<tessera_api::security::NewSecurityEvent>,
    /// Counts the records noted: the front of each id, so records of one router
    /// in the same millisecond keep their order (the meta group orders by time, then id).
    noted: std::sync::atomic::AtomicU64,
}

impl Activities {
    /// Notes one record (the oldest unwritten ones go when the buffer is full).
    /// Its id becomes this router's count of records, then 16 random hex digits.
    pub fn note(&self, mut record: ActivityRecord) {
        let count = self.noted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        record.id = format!("{count:016x}{}", record.id.get(..16).unwrap_or(&record.id));
        self.pending.push(record);
    }

    /// Redacts the details of the records not written yet that contain
    /// `needle` (a secure erasure's subject id).
    pub fn redact_pending(&self, needle: &str) {
        let mut pending = self.pending.held();
        for record in pending.iter_mut().filter(|r| tessera_api::compliance::names_token(&r.detail, needle)) {
            record.detail = "(redacted by a secure erasure of the data subject it named)".into();
        }
    }

    /// Notes a security event (the oldest unwritten ones go when the buffer is full).
    pub fn note_event(&self, event: tessera_api::security::NewSecurityEvent) {
        self.events.push(event);
    }
}

/// The kind of activity a request is, if it is one: SQL queries, logins, and
/// every mutation under `/api/v1/admin/` (`config` for users, roles, security
/// and the vault; `admin` for the rest).
pub fn kind_of(method: &str, route: &str) -> Option<&'static str> {
    match route {
        "/api/v1/query" => return Some("query"),
        "/api/v1/auth/login" | "/api/v1/auth/mfa/verify" => return Some("login"),
        _ => {}
    }
    if method == "GET" || method == "HEAD" {
        return None;
    }
    let admin = route.strip_prefix("/api/v1/admin/")?;
    let area = admin.split('/').next().unwrap_or_default();
    Some(if matches!(area, "users" | "roles" | "security" | "vault" | "permissions") { "config" } else { "admin" })
}

impl Activities {
    /// Writes the noted records and security events to the meta group (kept for
    /// the next try if it fails).
    pub async fn flush(&self, cluster: &dyn ClusterClient) -> Result<(), ApiError> {
        let events = self.events.take();
        if !events.is_empty() {
            let op = MetaOp::Security(tessera_api::security::SecurityOp::RecordEvents(events.clone()));
            match cluster.meta_write(op).await {
                Ok(Reply::Rejected(r)) => return Err(r.into()),
                Ok(_) => {}
                Err(e) => {
                    self.events.put_back(events);
                    return Err(e.into());
                }
            }
        }
        let batch = self.pending.take();
        if batch.is_empty() {
            return Ok(());
        }
        match cluster.meta_write(MetaOp::RecordActivities(batch.clone())).await {
            Ok(Reply::Rejected(r)) => Err(r.into()),
            Ok(_) => Ok(()),
            Err(e) => {
                self.pending.put_back(batch);
                Err(e.into())
            }
        }
    }

    /// Flushes once a second, for the router's life.
    pub async fn flush_loop(self: Arc<Self>, cluster: Arc<dyn ClusterClient>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if let Err(e) = self.flush(&*cluster).await {
                tracing::debug!("activities not written yet: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified() {
        assert_eq!(kind_of("POST", "/api/v1/query"), Some("query"));
        assert_eq!(kind_of("POST", "/api/v1/auth/login"), Some("login"));
        assert_eq!(kind_of("POST", "/api/v1/admin/users"), Some("config"));
        assert_eq!(kind_of("DELETE", "/api/v1/admin/vault/secrets/{*path}"), Some("config"));
        assert_eq!(kind_of("POST", "/api/v1/admin/nodes/{node_id}/drain"), Some("admin"));
        assert_eq!(kind_of("GET", "/api/v1/admin/users"), None);
        assert_eq!(kind_of("POST", "/api/v1/kv/keys"), None);
    }
}
