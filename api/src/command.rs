//! What Raft groups replicate and answer.
//!
//! A router sends an [`Operation`]; the leader stamps it into a [`Command`] with
//! its clock before proposing, so every replica applies the same bytes to the same
//! result. Reads are [`Query`] values answered from a replica's state machine.

use serde::{Deserialize, Serialize};

use crate::meta::{ClusterMap, SessionRecord, UserRecord};

/// A client's intent, as the router sends it to a group leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Operation {
    Kv(KvOp),
    Meta(MetaOp),
    Object(crate::object::ObjectOp),
    Sql(crate::sql::SqlOp),
    Document(crate::document::DocOp),
    Vector(crate::vector::VectorOp),
    TimeSeries(crate::timeseries::TsOp),
    Stream(crate::stream::StreamOp),
    Graph(crate::graph::GraphOp),
    /// One batch of a SQL bulk import (applied all or nothing).
    SqlImport(crate::import::SqlImportOp),
    /// Range sharding: split the group's key-value range (see [`SplitOp`]).
    Split(SplitOp),
    /// Erase a data subject's key-value entries, documents and graph nodes
    /// (with their edges) in this group, in one apply (spec 02 erasure).
    EraseSubject(crate::compliance::EraseSubjectOp),
    /// Restore of a backup into this group (see [`RestoreOp`]).
    Restore(RestoreOp),
    /// `op`, sent by the restore of `backup_id` while it holds the group (see
    /// [`RestoreOp::End`]): the only writes a held group takes.
    DuringRestore {
        backup_id: String,
        op: Box<Operation>,
    },
    /// Commands proposed together by a leader as one log entry (see
    /// [`Operation::batchable`]): each applies as if it were an entry of its own,
    /// in order, and answers in [`Response::Batch`].
    Batch(Vec<Command>),
}

impl Operation {
    /// Whether a leader may propose this operation in an [`Operation::Batch`] with
    /// others: key-value writes and SQL writes, each applied in order and in a
    /// write batch of its own (a SQL write's change-capture records name its
    /// place in the entry). Operations that number things by log index, bulk
    /// imports, and those that change the group itself always have an entry
    /// of their own.
    pub fn batchable(&self) -> bool {
        matches!(self, Operation::Kv(_) | Operation::Sql(_))
    }

    /// The operation itself, without a [`Operation::DuringRestore`] wrapper.
    pub fn unwrapped(&self) -> &Operation {
        match self {
            Operation::DuringRestore { op, .. } => op.unwrapped(),
            op => op,
        }
    }
}

/// A backup restored into a group through its log, so every replica applies
/// it: `Begin` deletes the group's records (not its Raft state; in the meta
/// group not the cluster map either), each `Pairs` writes a batch of the
/// backup's records, `End` marks the restore done. The same backup restored
/// twice gives the same state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RestoreOp {
    Begin {
        backup_id: String,
    },
    /// Records as [`crate::backup::encode_pairs`] writes them (keys relative to the group).
    Pairs {
        pairs: Vec<u8>,
    },
    /// With `hold`, the group stays held after the swap: it answers no read and
    /// takes no write but the restore's own ([`Operation::DuringRestore`],
    /// [`Query::DuringRestore`]) until [`RestoreOp::Release`], so the erasures
    /// issued after the backup are re-applied before anyone reads its records.
    End {
        backup_id: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hold: bool,
    },
    /// Lifts the hold of `End { hold: true }` (nothing when the group is not held).
    Release {
        backup_id: String,
    },
}

/// Splits a group's key-value range at `at`: the keys from `at` to the end of
/// its range move, in the same apply, into the new group `child` on the same
/// replicas, which starts from them as its applied state. Applying it again
/// with the same child and key changes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitOp {
    pub child: crate::GroupId,
    pub at: String,
}

/// What a group knows of its key-value range (range sharding).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeInfo {
    /// The keys the group holds (the whole keyspace until it first splits).
    pub range: crate::meta::KeyRange,
    /// The splits it applied, oldest first.
    pub splits: Vec<crate::meta::SplitRecord>,
    /// Live and expired entries it stores, and their keys' and values' bytes.
    pub keys: u64,
    pub bytes: u64,
    /// The key in the middle of the stored ones (a split point), when there are at least two.
    pub middle_key: Option<String>,
    /// The log index the answering replica has applied: two answers apart in
    /// time give the group's write rate (entries per second).
    #[serde(default)]
    pub applied_index: u64,
}

/// The replicated form of an operation: everything that varies is fixed here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// The leader's wall clock (Unix milliseconds) when it proposed the command.
    pub issued_at_ms: i64,
    pub op: Operation,
    /// The router's id for the client request (32 hex digits), the same on every
    /// retry: a state machine applies a request id once and answers a repeat
    /// with the first response, so a retried write never applies twice.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// Key-value writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KvOp {
    /// Insert or overwrite; `ttl_secs` makes the entry expire that long after `issued_at_ms`.
    Put { key: String, value: serde_json::Value, ttl_secs: Option<u64> },
    /// Remove one key.
    Delete { key: String },
    /// Remove every key that starts with `prefix` (within `range` when given:
    /// the range the router believes the group holds; refused with
    /// `RANGE_MOVED` when the group holds less).
    DeletePrefix {
        prefix: String,
        #[serde(default)]
        range: Option<crate::meta::KeyRange>,
    },
    /// Insert or overwrite many pairs at once (bulk import).
    PutMany { pairs: Vec<(String, serde_json::Value)> },
}

/// Meta group writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaOp {
    /// Record the cluster map, unless one is recorded already.
    InitClusterMap(ClusterMap),
    /// Set a node's lifecycle state in the map (refused for a node it does not have).
    SetNodeState {
        node: crate::NodeId,
        state: crate::meta::NodeState,
    },
    /// Drop a node from the map and from every group's members.
    RemoveNode {
        node: crate::NodeId,
    },
    /// Add a node to the map as `joining` (refused when its id is taken or
    /// another node is joining or leaving).
    AddNode {
        node: crate::meta::NodeInfo,
    },
    /// Record the locality a node reports (`Applied(false)` when recorded
    /// already; refused for a node the map does not have or a malformed one).
    SetNodeLocality {
        node: crate::NodeId,
        locality: String,
    },
    /// Record that `parent` split at `at` into the new group `child` on
    /// `members` (range sharding; `Applied(false)` when recorded already).
    RecordSplit {
        parent: crate::GroupId,
        child: crate::GroupId,
        at: String,
        members: Vec<crate::NodeId>,
    },
    /// Reserve the child id of `parent`'s next split in the map's
    /// `pending_splits` (`Applied(false)` when one is reserved already: it is
    /// kept); see [`crate::meta::ClusterMap::reserve_split`].
    ReserveSplit {
        parent: crate::GroupId,
    },
    /// Record a group's members after a replica moved (refused for a member
    /// the map does not list). With `expected_move`, a compare-and-set: refused
    /// unless that move is the one recorded in flight (or the members are
    /// recorded already), so a deposed driver's late record changes nothing.
    SetGroupMembers {
        group: crate::GroupId,
        members: Vec<crate::NodeId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_move: Option<crate::meta::ReplicaMove>,
    },
    /// Record a replica move before its first step (see [`crate::meta::ClusterMap::begin_move`]);
    /// `Applied(false)` when it is recorded already.
    BeginMove(crate::meta::ReplicaMove),
    /// Set (or clear, `node: None`) `group`'s preferred leader; refused for a
    /// node that is not one of its members.
    SetPreferredLeader {
        group: crate::GroupId,
        node: Option<crate::NodeId>,
    },
    /// Clear `group`'s replica move without recording new members (it cannot
    /// go on); `Applied(false)` when there is none.
    EndMove {
        group: crate::GroupId,
    },
    /// Append activity records (the oldest beyond `ACTIVITIES_KEEP` are dropped).
    RecordActivities(Vec<crate::meta::ActivityRecord>),
    /// Replace a router's published request figures (its time set to the
    /// command's); figures no router published for an hour are dropped.
    PutRouterStats(crate::meta::RouterStatsRecord),
    /// Create the first admin, only while no user exists (bootstrap provisioning).
    ProvisionFirstAdmin(UserRecord),
    /// Create a user; refused when the username is taken.
    CreateUser(UserRecord),
    /// Replace a user's record (same id); refused if it would leave no admin.
    UpdateUser(UserRecord),
    /// Remove a user; refused for the last admin.
    DeleteUser {
        id: String,
    },
    /// Create (`create: true`, refused if it exists) or replace a custom role.
    PutRole {
        role: crate::meta::RoleRecord,
        create: bool,
    },
    DeleteRole {
        name: String,
    },
    /// Store a session under the hex SHA-256 of its token.
    CreateSession {
        token_hash: String,
        session: SessionRecord,
    },
    /// Remove a session (logout).
    DeleteSession {
        token_hash: String,
    },
    /// MFA, alerts, failed-login counting and IP blocks.
    Security(crate::security::SecurityOp),
    /// Record the vault's wrapped data key, only if none exists (`Applied(false)` otherwise).
    VaultInit(crate::meta::VaultKeyRecord),
    /// Raise the vault's seal epoch: every router drops its unsealed key.
    VaultSeal,
    /// Store a vault secret (`Applied(true)` when it was created, `false` when replaced).
    VaultPutSecret(crate::meta::VaultSecretRecord),
    /// Remove a vault secret (`Deleted(0|1)`).
    VaultDeleteSecret {
        path: String,
    },
    /// Create or replace a vault access policy (`Applied(true)` when created).
    VaultPutPolicy(crate::meta::VaultPolicyRecord),
    /// Remove a vault access policy; refused when absent.
    VaultDeletePolicy {
        name: String,
    },
    /// Append an audit record (its time is set to the command's).
    VaultAudit(crate::meta::VaultAuditRecord),
    /// Consent records and their history (spec 02).
    Consent(crate::compliance::ConsentOp),
    /// Append entries to the audit trail's hash chain.
    Audit(Vec<crate::compliance::AuditEvent>),
    /// Remove the audit entries recorded before `before_ms` (retention), the
    /// oldest first; the chain then verifies from the last removed entry's
    /// hash, kept as its anchor (`Deleted(n)`).
    PruneAudit {
        before_ms: i64,
    },
    /// Set column classifications (answers `Applied(true)`).
    Classify(crate::compliance::ClassifyOp),
    /// Move a breach incident through its states, or clean old ones up.
    Incident(crate::compliance::IncidentOp),
    /// Record the cluster's certificate-signing key (an Ed25519 seed the
    /// proposer drew), unless one exists (`Applied(false)` then).
    EnsureSigningKey {
        seed_b64: String,
    },
    /// Store a signed deletion certificate under its id.
    RecordCertificate {
        id: String,
        certificate: serde_json::Value,
    },
    /// Rewraps the vault's data key under a new passphrase (the key, its id and
    /// every secret stay): applied only while the stored wrapping is still
    /// `expected_wrapped_key`, so two concurrent changes cannot both win.
    VaultRekey {
        #[serde(with = "crate::b64")]
        expected_wrapped_key: Vec<u8>,
        key: crate::meta::VaultKeyRecord,
    },
    /// Records (or updates) an erasure job (spec 02 erasure across shards):
    /// what was found to erase, without the data, and how far it got.
    PutErasureJob {
        id: String,
        job: serde_json::Value,
    },
    /// Keeps a data subject's export for download until it expires (spec 02's
    /// `download_url`/`expires_at`); expired ones are removed in the same apply.
    PutExport {
        id: String,
        file: crate::compliance::ExportFile,
    },
    /// Removes every kept export of a subject (an erasure of the subject).
    DropExports {
        subject_id: String,
    },
    /// Replaces the detail (SQL text) of every activity record that contains
    /// `needle` (a secure erasure's subject id) with a note that it was redacted.
    RedactActivities {
        needle: String,
    },
}

/// The result of applying a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Membership changes and blank entries produce this.
    Empty,
    /// The entry as stored after a put.
    KvEntry(KvEntry),
    /// How many keys a delete removed (0 or 1 for a single key).
    Deleted(u64),
    /// Whether a conditional meta write took effect.
    Applied(bool),
    /// The command broke a rule of its engine and changed nothing.
    Rejected(crate::error::Rejection),
    /// Stored object metadata after a commit.
    Object(crate::object::ObjectMeta),
    Sql(crate::sql::SqlResult),
    Document(crate::document::DocResponse),
    Vector(crate::vector::VectorResponse),
    TimeSeries(crate::timeseries::TsResponse),
    Security(crate::security::SecurityResponse),
    Stream(crate::stream::StreamResponse),
    Graph(crate::graph::GraphResponse),
    /// The outcome of one bulk import batch.
    Import(crate::import::ImportResult),
    /// Consent records as stored (times set by the meta group).
    Consent(Vec<crate::compliance::ConsentRecord>),
    /// A breach incident after a state change.
    Incident(crate::compliance::Incident),
    /// What an erasure removed in one group: its items and their stored bytes.
    SubjectErased {
        items: Vec<crate::compliance::SubjectItem>,
    },
    /// The answers to an [`Operation::Batch`], one per command, in order.
    Batch(Vec<Response>),
}

/// Reads a group answers, one variant per data model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Query {
    Kv(KvQuery),
    Meta(MetaQuery),
    Object(crate::object::ObjectQuery),
    Sql(crate::sql::SqlQuery),
    Document(crate::document::DocQuery),
    Vector(crate::vector::VectorQuery),
    TimeSeries(crate::timeseries::TsQuery),
    Stream(crate::stream::StreamQuery),
    Graph(crate::graph::GraphQuery),
    /// A data subject's records in this group's key-value, document and graph
    /// spaces (spec 02 export and erasure; SQL rows are found with SQL).
    Subject(crate::compliance::SubjectRule),
    /// `query`, asked by the restore of `backup_id` while it holds the group
    /// (see [`RestoreOp::End`]): the only reads a held group answers.
    DuringRestore {
        backup_id: String,
        query: Box<Query>,
    },
}

/// Answers to [`Query`], one variant per data model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum QueryResult {
    Kv(KvQueryResult),
    Meta(MetaQueryResult),
    Object(crate::object::ObjectQueryResult),
    Sql(crate::sql::SqlResult),
    Document(crate::document::DocQueryResult),
    Vector(crate::vector::VectorQueryResult),
    TimeSeries(crate::timeseries::TsQueryResult),
    Stream(crate::stream::StreamQueryResult),
    Graph(crate::graph::GraphQueryResult),
    Subject(Vec<crate::compliance::SubjectItem>),
    /// The query named something missing or was invalid; nothing was read.
    Rejected(crate::error::Rejection),
}

/// Key-value reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KvQuery {
    Get {
        key: String,
    },
    /// Live entries with the prefix in key order, at most `limit`, and how many
    /// match in all; within `range` as for [`KvOp::DeletePrefix`].
    List {
        prefix: String,
        limit: usize,
        #[serde(default)]
        range: Option<crate::meta::KeyRange>,
    },
    Count {
        prefix: String,
        #[serde(default)]
        range: Option<crate::meta::KeyRange>,
    },
    /// The group's range, splits and size ([`RangeInfo`]).
    Range,
}

/// Answers to [`KvQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KvQueryResult {
    Entry(Option<KvEntry>),
    List { entries: Vec<KvEntry>, total: u64 },
    Count(u64),
    Range(RangeInfo),
}

/// Meta group reads: the cluster map, users, roles, sessions, security and the vault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaQuery {
    ClusterMap,
    UserByName {
        username: String,
    },
    UserById {
        id: String,
    },
    UserCount,
    Session {
        token_hash: String,
    },
    ListUsers,
    ListRoles,
    Role {
        name: String,
    },
    Security(crate::security::SecurityQuery),
    /// The vault's key record and seal epoch.
    VaultState,
    VaultSecret {
        path: String,
    },
    /// Vault secrets whose path starts with `prefix`, in path order.
    VaultSecrets {
        prefix: String,
    },
    VaultPolicies,
    /// The newest `limit` audit records, newest first.
    VaultAudit {
        limit: usize,
    },
    /// The newest `limit` activity records of `kind` (every kind when `None`), newest first.
    Activities {
        limit: usize,
        kind: Option<String>,
    },
    /// Every router's published request figures.
    RouterStats,
    /// The certificate-signing key's seed (base64), if recorded.
    SigningKey,
    /// Deletion certificates, oldest first, issued in `[from_ms, to_ms]`.
    Certificates {
        from_ms: Option<i64>,
        to_ms: Option<i64>,
    },
    Certificate {
        id: String,
    },
    /// Consent records, history, statistics and the do-not-sell list.
    Consent(crate::compliance::ConsentQuery),
    /// The audit trail.
    Audit(crate::compliance::AuditQuery),
    /// Column classifications, of one table or all, by table and column.
    Classifications {
        table: Option<String>,
    },
    /// Breach incidents.
    Incident(crate::compliance::IncidentQuery),
    /// Every erasure job, oldest first.
    ErasureJobs,
    /// A kept export, unless it expired.
    Export {
        id: String,
    },
}

/// Answers to [`MetaQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaQueryResult {
    ClusterMap(Option<ClusterMap>),
    User(Option<UserRecord>),
    UserCount(u64),
    Session(Option<SessionRecord>),
    Users(Vec<UserRecord>),
    Roles(Vec<crate::meta::RoleRecord>),
    Role(Option<crate::meta::RoleRecord>),
    Security(crate::security::SecurityQueryResult),
    VaultState { key: Option<crate::meta::VaultKeyRecord>, seal_epoch: u64 },
    VaultSecret(Option<crate::meta::VaultSecretRecord>),
    VaultSecrets(Vec<crate::meta::VaultSecretRecord>),
    VaultPolicies(Vec<crate::meta::VaultPolicyRecord>),
    VaultAudit(Vec<crate::meta::VaultAuditRecord>),
    Activities(Vec<crate::meta::ActivityRecord>),
    RouterStats(Vec<crate::meta::RouterStatsRecord>),
    SigningKey(Option<String>),
    Certificates(Vec<serde_json::Value>),
    Certificate(Option<serde_json::Value>),
    Consent(crate::compliance::ConsentAnswer),
    Audit(crate::compliance::AuditAnswer),
    Classifications(Vec<crate::compliance::ColumnClassification>),
    Incident(crate::compliance::IncidentAnswer),
    ErasureJobs(Vec<serde_json::Value>),
    Export(Option<crate::compliance::ExportFile>),
}

/// A stored key-value entry. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvEntry {
    pub key: String,
    pub value: serde_json::Value,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// When the entry stops being visible; `None` for no expiry.
    pub expires_at_ms: Option<i64>,
}

impl Response {
    /// A rejection with `code` and `message`.
    pub fn rejected(code: crate::error::ErrorCode, message: impl Into<String>) -> Self {
        Response::Rejected(crate::error::Rejection::new(code, message))
    }
}

impl QueryResult {
    /// A rejection with `code` and `message`.
    pub fn rejected(code: crate::error::ErrorCode, message: impl Into<String>) -> Self {
        QueryResult::Rejected(crate::error::Rejection::new(code, message))
    }
}

impl KvEntry {
    /// Whether the entry is still visible at `now_ms`.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

/// Wall-clock time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
