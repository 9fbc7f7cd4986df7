//! Compliance records kept by the meta group (spec 02): consent per subject
//! and purpose, with every change kept in a history, the do-not-sell list
//! that follows from the `do_not_sell` purpose, and the audit trail (a hash
//! chain every consent change is appended to in the same apply).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The purposes a consent may be recorded for (spec 02).
pub const PURPOSES: [&str; 11] = [
    "marketing",
    "analytics",
    "third_party_sharing",
    "data_processing",
    "personalization",
    "location_tracking",
    "profiling",
    "cross_device_tracking",
    "advertising",
    "research",
    "do_not_sell",
];

/// The purpose whose grant puts a subject on the do-not-sell list.
pub const DO_NOT_SELL: &str = "do_not_sell";

/// Longest subject id, purpose, source, version or reason accepted.
pub const MAX_FIELD_BYTES: usize = 256;

/// The current consent of one subject for one purpose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsentRecord {
    /// Fixed by the router for the request that recorded it (`con-…`).
    pub consent_id: String,
    pub subject_id: String,
    pub purpose: String,
    pub granted: bool,
    pub source: String,
    pub version: String,
    #[serde(default)]
    pub metadata: Value,
    #[serde(default)]
    pub lawful_basis: Option<String>,
    /// When the consent lapses (Unix ms); `None`: it does not.
    #[serde(default)]
    pub expiry_ms: Option<i64>,
    /// Set by the meta group from the command's time.
    #[serde(default)]
    pub recorded_at_ms: i64,
    /// Why it was withdrawn, when it was.
    #[serde(default)]
    pub withdrawal_reason: Option<String>,
}

impl ConsentRecord {
    /// Granted and not lapsed at `now_ms`.
    pub fn active(&self, now_ms: i64) -> bool {
        self.granted && self.expiry_ms.is_none_or(|e| e > now_ms)
    }
}

/// One change of a subject's consent, as kept in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsentChange {
    /// Position in the meta group's consent history (increasing).
    pub seq: u64,
    pub consent_id: String,
    pub subject_id: String,
    pub purpose: String,
    /// `granted`, `denied` or `withdrawn`.
    pub action: String,
    pub granted: bool,
    pub source: String,
    pub version: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub at_ms: i64,
}

/// Consent writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConsentOp {
    /// Sets each record's subject and purpose to it (one history entry each).
    Record { records: Vec<ConsentRecord>, actor: String },
    /// Sets a recorded purpose to denied with `reason` (refused as not found
    /// when the subject never recorded it).
    Withdraw { subject_id: String, purpose: String, reason: Option<String>, actor: String },
    /// Removes every consent record and history entry of a subject (`Deleted(n)`).
    Erase { subject_id: String, actor: String },
}

/// Consent reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConsentQuery {
    /// The subject's current records, by purpose.
    Subject {
        subject_id: String,
    },
    /// The subject's changes, oldest first.
    History {
        subject_id: String,
    },
    Stats,
    /// Subjects whose `do_not_sell` is granted, by subject id, from `offset`.
    DoNotSell {
        offset: usize,
        limit: usize,
    },
}

/// Consent statistics (spec 02).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsentStats {
    pub total_subjects: u64,
    pub total_records: u64,
    pub total_history_entries: u64,
    pub do_not_sell_count: u64,
    /// Purpose → (granted, denied) records.
    pub consents_by_purpose: std::collections::BTreeMap<String, (u64, u64)>,
}

/// A subject on the do-not-sell list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoNotSellEntry {
    pub subject_id: String,
    pub opted_out_at_ms: i64,
    /// The channel the opt-out came through (the consent's `source`).
    pub verification_method: String,
}

/// Answers to [`ConsentQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConsentAnswer {
    Records(Vec<ConsentRecord>),
    History(Vec<ConsentChange>),
    Stats(ConsentStats),
    DoNotSell { subjects: Vec<DoNotSellEntry>, total: u64 },
}

/// An action to append to the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub event_type: String,
    pub actor: String,
    /// The data subject the action concerns, when there is one.
    #[serde(default)]
    pub subject_id: Option<String>,
    #[serde(default)]
    pub details: Value,
}

/// One entry of the audit trail's hash chain. `hash` is the SHA-256 (hex) of
/// the entry's canonical form, which includes `prev_hash`, the hash of the
/// entry before it (64 zeros for the first); see `tessera_storage`'s
/// `engine::meta::audit` for the exact bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// `aud-<seq, 12 digits>`.
    pub id: String,
    pub seq: u64,
    pub event_type: String,
    pub timestamp_ms: i64,
    pub actor: String,
    #[serde(default)]
    pub subject_id: Option<String>,
    #[serde(default)]
    pub details: Value,
    pub prev_hash: String,
    pub hash: String,
}

/// Audit trail reads.
#[derive(schemars::JsonSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AuditQuery {
    /// The entries concerning a subject, oldest first.
    Subject { subject_id: String },
    /// Walks the whole chain.
    Verify,
    /// The entries recorded at or after `from_ms`, oldest first (a restore
    /// records again those the restored backup does not hold).
    Since { from_ms: i64 },
}

/// Answers to [`AuditQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AuditAnswer {
    Entries(Vec<AuditEntry>),
    /// `message` names the entry where a broken chain breaks.
    Verified {
        valid: bool,
        entries_verified: u64,
        message: String,
    },
}

/// Classification levels (spec 02), by level.
pub const CLASSIFICATION_LEVELS: [&str; 6] = ["Public", "Internal", "Confidential", "PHI", "PII", "Restricted"];

/// The level of a classification name (case-insensitive) or of its number.
pub fn classification_level(name: &str) -> Option<u8> {
    if let Ok(n) = name.trim().parse::<u8>() {
        return (usize::from(n) < CLASSIFICATION_LEVELS.len()).then_some(n);
    }
    CLASSIFICATION_LEVELS.iter().position(|l| l.eq_ignore_ascii_case(name.trim())).map(|i| i as u8)
}

/// The classification of one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnClassification {
    pub table: String,
    pub column: String,
    pub level: u8,
    #[serde(default)]
    pub reason: Option<String>,
    pub classified_by: String,
    /// Set by the meta group from the command's time.
    #[serde(default)]
    pub classified_at_ms: i64,
}

/// Classification writes: set each column's classification (one audit entry each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifyOp {
    pub columns: Vec<ColumnClassification>,
}

/// Breach event types and their severities (spec 02).
pub const BREACH_TYPES: [(&str, &str); 10] = [
    ("failed_login", "medium"),
    ("unauthorized_access", "medium"),
    ("unusual_access_pattern", "medium"),
    ("admin_from_unknown_ip", "high"),
    ("mass_data_export", "high"),
    ("session_hijacking", "high"),
    ("sql_injection", "high"),
    ("mass_data_deletion", "critical"),
    ("brute_force_attack", "critical"),
    ("privilege_escalation", "critical"),
];

/// The severity spec 02 gives a breach event type; `None` for other kinds.
pub fn breach_severity(event_type: &str) -> Option<&'static str> {
    BREACH_TYPES.iter().find(|(t, _)| *t == event_type).map(|(_, s)| *s)
}

/// A data subject's export kept for download (`GET /api/v1/compliance/exports/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportFile {
    pub subject_id: String,
    pub content_type: String,
    pub file_name: String,
    #[serde(with = "crate::b64")]
    pub bytes: Vec<u8>,
    pub expires_at_ms: i64,
}

/// How long an export stays downloadable.
pub const EXPORT_TTL_MS: i64 = 24 * 3600 * 1000;
/// The largest export kept for download (larger ones are answered inline only).
pub const EXPORT_KEEP_MAX_BYTES: usize = 8 * 1024 * 1024;

/// How long after detection a breach must be notified (GDPR: 72 hours).
pub const NOTIFICATION_DEADLINE_MS: i64 = 72 * 3600 * 1000;

/// HIPAA: a breach affecting at least this many people is notified to the
/// Secretary and the media within [`HIPAA_NOTICE_DEADLINE_MS`].
pub const HIPAA_MEDIA_NOTICE_SUBJECTS: usize = 500;
/// HIPAA's notice deadline (60 days after discovery).
pub const HIPAA_NOTICE_DEADLINE_MS: i64 = 60 * 24 * 3600 * 1000;

/// What an operator should do first about a breach of `event_type` (the
/// alternate webhook payload's `recommended_action`).
pub fn recommended_action(event_type: &str) -> &'static str {
    match event_type {
        "failed_login" | "brute_force_attack" => "block the source addresses, force a password reset of the targeted accounts, require MFA",
        "sql_injection" => "block the source address, review the queries it sent and the application that built them",
        "session_hijacking" => "end the user's sessions, make the user log in again, check the account's recent activity",
        "mass_data_export" | "unusual_access_pattern" => "review what the user read, suspend the account if the access is not explained",
        "mass_data_deletion" => "suspend the account, restore the deleted data from a backup, review the account's activity",
        "admin_from_unknown_ip" | "privilege_escalation" => {
            "suspend the account, review role changes and admin actions, rotate its credentials"
        }
        _ => "review the incident and the security events it names",
    }
}

impl Incident {
    /// HIPAA's notice deadline when the breach affects 500 people or more.
    pub fn hipaa_deadline_ms(&self) -> Option<i64> {
        (self.affected_subjects.len() >= HIPAA_MEDIA_NOTICE_SUBJECTS).then_some(self.detected_at_ms + HIPAA_NOTICE_DEADLINE_MS)
    }

    /// A lower bound of the records involved: one per affected subject (the
    /// detectors do not count records yet; at least one when the breach names nobody).
    pub fn affected_records_estimate(&self) -> usize {
        self.affected_subjects.len().max(1)
    }
}

/// A breach incident, opened by a detector from a security event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// `inc-<12 digits>`.
    pub incident_id: String,
    pub detected_at_ms: i64,
    pub event_type: String,
    pub severity: String,
    pub description: String,
    pub affected_subjects: Vec<String>,
    pub involved_ips: Vec<String>,
    /// `open`, `acknowledged`, `resolved` or `false_positive`.
    pub status: String,
    pub source: String,
    /// When the breach must be notified (detection + 72 h).
    pub notification_deadline_ms: i64,
    #[serde(default)]
    pub acknowledged_by: Option<String>,
    #[serde(default)]
    pub acknowledged_at_ms: Option<i64>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub resolved_by: Option<String>,
    #[serde(default)]
    pub resolved_at_ms: Option<i64>,
    #[serde(default)]
    pub resolution_notes: Option<String>,
    #[serde(default)]
    pub remediation_steps: Vec<String>,
    /// Its delivery to the breach webhook (`SERVICE_BREACH_WEBHOOK_URL`).
    #[serde(default)]
    pub webhook: WebhookDelivery,
}

/// How an incident's breach-webhook delivery stands. One router at a time
/// delivers it: it claims the delivery for a lease, posts (retrying with
/// backoff), then records the outcome; a claim whose router died expires and
/// another router delivers (at least once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WebhookDelivery {
    /// `pending` (to deliver), `delivering` (claimed), `delivered` or
    /// `failed` (every attempt failed); empty for incidents older than the webhook.
    pub status: String,
    #[serde(default)]
    pub claimed_by: Option<String>,
    #[serde(default)]
    pub claim_until_ms: i64,
    /// Requests sent, over every claim.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub delivered_at_ms: Option<i64>,
}

impl WebhookDelivery {
    /// Whether a router may claim it at `now_ms`.
    pub fn due(&self, now_ms: i64) -> bool {
        self.status == "pending" || (self.status == "delivering" && self.claim_until_ms < now_ms)
    }
}

/// Incident writes: the state machine open → acknowledged → resolved /
/// false_positive (open may go straight to either end); other moves are
/// refused as conflicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum IncidentOp {
    Acknowledge {
        id: String,
        by: String,
        notes: Option<String>,
    },
    Resolve {
        id: String,
        by: String,
        notes: Option<String>,
        false_positive: bool,
        remediation_steps: Vec<String>,
    },
    /// Removes resolved and false-positive incidents detected before `before_ms` (`Deleted(n)`).
    Cleanup {
        before_ms: i64,
    },
    /// Claims the incident's webhook delivery for `router` until the
    /// command's time + `lease_ms` (refused while another claim holds or once
    /// delivered or failed).
    ClaimWebhook {
        id: String,
        router: String,
        lease_ms: i64,
    },
    /// Records the outcome of `router`'s claim: `attempts` requests sent, delivered or not.
    RecordWebhook {
        id: String,
        router: String,
        delivered: bool,
        attempts: u32,
        error: Option<String>,
    },
}

/// Incident reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum IncidentQuery {
    /// Newest first, filtered by status and severity.
    List {
        status: Option<String>,
        severity: Option<String>,
    },
    Get {
        id: String,
    },
    Stats,
}

/// Breach statistics (spec 02).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncidentStats {
    pub total_incidents: u64,
    pub open_incidents: u64,
    pub acknowledged_incidents: u64,
    pub resolved_incidents: u64,
    pub false_positives: u64,
    pub by_severity: std::collections::BTreeMap<String, u64>,
    pub by_type: std::collections::BTreeMap<String, u64>,
}

/// Answers to [`IncidentQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum IncidentAnswer {
    List(Vec<Incident>),
    One(Option<Incident>),
    Stats(IncidentStats),
}

/// Fields (top-level JSON fields, document fields, graph node properties, SQL
/// columns) that name a data subject unless configured otherwise
/// (`compliance.subject_fields`).
pub const DEFAULT_SUBJECT_FIELDS: [&str; 7] = ["subject_id", "user_id", "customer_id", "patient_id", "student_id", "email", "owner_id"];

/// Which records belong to a data subject (spec 02 erasure and export):
/// a key-value key equal to the subject id or holding it as a segment between
/// `:` or `/` separators (`user:alice`, `users/alice/profile`); a JSON
/// value, document, graph node or SQL row whose subject field equals it
/// (a document's `_id` and a node's id too); the edges of such nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubjectRule {
    pub subject_id: String,
    pub fields: Vec<String>,
}

impl SubjectRule {
    /// Whether key-value key `key` is the subject's.
    pub fn matches_key(&self, key: &str) -> bool {
        !self.subject_id.is_empty() && (key == self.subject_id || key.split([':', '/']).any(|segment| segment == self.subject_id))
    }

    /// The rule of every data subject at once (retention's expiry of personal
    /// data): a record matches when a subject field holds any id.
    pub fn any_subject(fields: Vec<String>) -> SubjectRule {
        SubjectRule { subject_id: String::new(), fields }
    }

    /// Whether `value` equals the subject id (a string, or a number written the same way).
    pub fn is_subject(&self, value: &serde_json::Value) -> bool {
        if self.subject_id.is_empty() {
            return match value {
                serde_json::Value::String(s) => !s.is_empty(),
                serde_json::Value::Number(_) => true,
                _ => false,
            };
        }
        match value {
            serde_json::Value::String(s) => *s == self.subject_id,
            serde_json::Value::Number(n) => n.to_string() == self.subject_id,
            _ => false,
        }
    }

    /// Whether the JSON object `value` has a subject field equal to the subject id.
    pub fn matches_object(&self, value: &serde_json::Value) -> bool {
        value.as_object().is_some_and(|o| self.fields.iter().any(|f| o.get(f).is_some_and(|v| self.is_subject(v))))
    }
}

/// Whether `text` holds `id` as a whole token: not inside a longer word or
/// number (`7` is in `id = 7` and `'user-7'`, not in `17` or `x7`).
pub fn names_token(text: &str, id: &str) -> bool {
    if id.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(id).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + id.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// One record of a data subject: where it is, its id there, its data and its stored size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubjectItem {
    /// `kv`, `document`, `graph` or `sql`.
    pub store: String,
    /// The collection, graph, `database.table`, or the key-value store.
    pub location: String,
    pub item_id: String,
    pub data: serde_json::Value,
    pub bytes: u64,
    /// When it was last written, where the store keeps it (for date ranges).
    #[serde(default)]
    pub at_ms: Option<i64>,
}

/// Erase a data subject in one group (see [`crate::command::Operation::EraseSubject`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EraseSubjectOp {
    pub rule: SubjectRule,
    /// Only these places (collections, graphs, `kv`); `None`: every one.
    pub locations: Option<Vec<String>>,
    /// Compact the erased spaces once the apply is written, so the bytes leave the data files.
    pub secure_erase: bool,
    /// Only records last written before this time (retention's expiry; records
    /// without a time are kept); `None`: whenever written.
    #[serde(default)]
    pub written_before_ms: Option<i64>,
}

impl EraseSubjectOp {
    /// Whether `item` is in the places the erasure covers.
    pub fn covers(&self, item: &SubjectItem) -> bool {
        self.locations.as_ref().is_none_or(|l| l.iter().any(|n| *n == item.location || *n == item.store))
            && self.written_before_ms.is_none_or(|cut| item.at_ms.is_some_and(|at| at < cut))
    }
}

#[cfg(test)]
mod subject_tests {
    use super::*;

    #[test]
    fn a_token_is_named_only_whole() {
        assert!(names_token("SELECT * FROM t WHERE id = 7", "7") && names_token("VALUES ('user-7', 1)", "user-7"));
        assert!(!names_token("VALUES (17, 'x7')", "7") && !names_token("anything", ""));
    }

    #[test]
    fn keys_and_objects_of_the_subject_match_and_others_do_not() {
        let rule = SubjectRule { subject_id: "alice".into(), fields: vec!["user_id".into(), "email".into()] };
        assert!(rule.matches_key("alice") && rule.matches_key("user:alice") && rule.matches_key("users/alice/profile"));
        assert!(!rule.matches_key("alice2") && !rule.matches_key("malice:x") && !rule.matches_key("user:alicex"));
        assert!(rule.matches_object(&serde_json::json!({"user_id": "alice", "n": 1})));
        assert!(!rule.matches_object(&serde_json::json!({"owner": "alice"})), "not a subject field");
        let numeric = SubjectRule { subject_id: "42".into(), fields: vec!["user_id".into()] };
        assert!(numeric.matches_object(&serde_json::json!({"user_id": 42})));
    }
}
