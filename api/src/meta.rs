//! Records kept by the meta group (group 0): the cluster map, users and sessions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{GroupId, NodeId};

/// A data node, its gRPC address and its lifecycle state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    pub addr: String,
    /// `active` unless an operator asked to drain it.
    #[serde(default, skip_serializing_if = "NodeState::is_active")]
    pub state: NodeState,
    /// Where the node runs, as `key=value` tiers from the widest
    /// (`zone=a,rack=3`; `cluster.locality`), empty when not configured. The
    /// placement driver spreads each group's replicas over distinct first
    /// tiers ([`NodeInfo::failure_domain`]) when it can.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub locality: String,
}

impl NodeInfo {
    /// An active node.
    pub fn new(id: NodeId, addr: impl Into<String>) -> NodeInfo {
        NodeInfo { id, addr: addr.into(), state: NodeState::Active, locality: String::new() }
    }

    /// The same node in `state`.
    pub fn in_state(mut self, state: NodeState) -> NodeInfo {
        self.state = state;
        self
    }

    /// The widest tier of the node's locality (`zone=a` of `zone=a,rack=3`):
    /// what one failure may take down with it. `None` without a locality (the
    /// node is its own failure domain).
    pub fn failure_domain(&self) -> Option<&str> {
        self.locality.split(',').next().map(str::trim).filter(|t| !t.is_empty())
    }
}

/// Checks a locality (`key=value` tiers separated by commas, e.g.
/// `region=eu,zone=a`; empty for none): every tier has a non-empty key and
/// value of letters, digits, `-`, `_`, `.` and `/`.
pub fn check_locality(locality: &str) -> Result<(), String> {
    if locality.is_empty() {
        return Ok(());
    }
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    for tier in locality.split(',') {
        match tier.split_once('=') {
            Some((k, v)) if word(k) && word(v) => {}
            _ => return Err(format!("locality {locality:?}: tier {tier:?} is not key=value (e.g. zone=a,rack=3)")),
        }
    }
    Ok(())
}

/// Where a node is in its lifecycle. A removed node leaves the map altogether.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Hosts replicas and may lead groups.
    #[default]
    Active,
    /// Added to the cluster (`POST /api/v1/admin/nodes`): replicas are moving to it.
    Joining,
    /// Gives up and no longer takes leadership; may then be removed.
    Draining,
    /// Being removed: its groups' memberships are dropping it.
    Removing,
}

impl NodeState {
    fn is_active(&self) -> bool {
        *self == NodeState::Active
    }

    /// The state's name in answers.
    pub fn as_str(&self) -> &'static str {
        match self {
            NodeState::Active => "active",
            NodeState::Joining => "joining",
            NodeState::Draining => "draining",
            NodeState::Removing => "removing",
        }
    }
}

/// How keys are mapped onto data groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ShardingStrategy {
    /// Consistent hashing of the routing key over the data groups.
    #[default]
    Hash,
    /// Sorted split points over the routing key.
    Range,
}

/// One Raft group and the nodes holding its replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub id: GroupId,
    pub members: Vec<NodeId>,
    /// The group this one was split from (range sharding): it holds key-value
    /// ranges only and is not on the hash ring of the other models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_from: Option<GroupId>,
    /// The member an operator wants to lead the group
    /// (`PUT /api/v1/admin/groups/{id}/leader`): leadership rebalancing moves
    /// the group's leadership to it while it is an active voter, and never away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_leader: Option<NodeId>,
}

impl GroupInfo {
    /// A group with `members`, placed at bootstrap or by a move (not split off).
    pub fn new(id: GroupId, members: Vec<NodeId>) -> GroupInfo {
        GroupInfo { id, members, split_from: None, preferred_leader: None }
    }
}

/// A contiguous span `[start, end)` of key-value keys in byte order; `end`
/// `None` runs to the end of the keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct KeyRange {
    pub start: String,
    #[serde(default)]
    pub end: Option<String>,
}

impl KeyRange {
    /// Every key.
    pub fn full() -> KeyRange {
        KeyRange::default()
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &str) -> bool {
        key >= self.start.as_str() && self.end.as_deref().is_none_or(|end| key < end)
    }

    /// Whether every key of `other` is in this range.
    pub fn covers(&self, other: &KeyRange) -> bool {
        other.start >= self.start
            && match (&self.end, &other.end) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(mine), Some(theirs)) => theirs <= mine,
            }
    }

    /// The keys of this range that start with `prefix`, as byte bounds
    /// `[start, end)` (`end` `None`: unbounded); `None` when there are none.
    pub fn with_prefix(&self, prefix: &str) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let start = std::cmp::max(self.start.as_bytes(), prefix.as_bytes()).to_vec();
        let prefix_end = prefix_successor(prefix.as_bytes());
        let end = match (self.end.as_ref().map(|e| e.as_bytes().to_vec()), prefix_end) {
            (None, e) | (e, None) => e,
            (Some(a), Some(b)) => Some(a.min(b)),
        };
        match &end {
            Some(e) if *e <= start => None,
            _ => Some((start, end)),
        }
    }
}

/// The first byte string after every string starting with `prefix` (`None`
/// when there is none: an empty or all-0xff prefix).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Which data group holds a range of key-value keys (range sharding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeDescriptor {
    pub range: KeyRange,
    pub group: GroupId,
}

/// A split a group applied: keys from `at` to the end of its range went to `child`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitRecord {
    pub child: GroupId,
    pub at: String,
    /// The child's voters when it was split off (the parent's at that point).
    pub members: Vec<NodeId>,
}

/// The placement of every group, recorded in the meta group at bootstrap and
/// changed there by node lifecycle calls (each change raises `epoch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    pub nodes: Vec<NodeInfo>,
    pub strategy: ShardingStrategy,
    pub replication_factor: usize,
    /// Group 0 (meta) first, then the data groups in id order.
    pub groups: Vec<GroupInfo>,
    /// 0 at bootstrap; one more for every recorded change. Routers keep the map
    /// with the highest epoch any node shows them.
    #[serde(default)]
    pub epoch: u64,
    /// Range sharding: the key-value ranges in key order, covering every key.
    /// Empty under hash sharding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<RangeDescriptor>,
    /// The replica move in flight, recorded before its first step by whoever
    /// runs it (the placement driver, `POST /api/v1/admin/rebalance`); cleared
    /// when the group's new members are recorded. A driver that takes over
    /// after a crash finishes it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving: Option<ReplicaMove>,
    /// Range sharding: the child id reserved for each parent's next split
    /// (parent → child), from its reservation until the split is recorded. A
    /// parent's split is proposed only with the id reserved here, so two splits
    /// never share a child id, whoever leads the meta group.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending_splits: BTreeMap<GroupId, GroupId>,
    /// The highest group id ever handed out (reservations included): ids are
    /// never used twice, even when a reserved split never happens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_group_id: GroupId,
}

fn is_zero(n: &GroupId) -> bool {
    *n == 0
}

/// Group `group`'s replica on node `from` moving to node `to`; a move from a
/// node to itself ([`ReplicaMove::addition`]) adds a replica on it instead (a
/// group below its replication factor gets its missing replica back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaMove {
    pub group: GroupId,
    pub from: NodeId,
    pub to: NodeId,
}

impl ReplicaMove {
    /// A new replica of `group` on node `to`, nothing taken away.
    pub fn addition(group: GroupId, to: NodeId) -> Self {
        Self { group, from: to, to }
    }

    /// Whether this move adds a replica rather than moving one.
    pub fn is_addition(&self) -> bool {
        self.from == self.to
    }
}

impl ClusterMap {
    /// The data groups' ids (every group but the meta group).
    pub fn data_groups(&self) -> Vec<GroupId> {
        self.groups.iter().map(|g| g.id).filter(|id| *id != crate::META_GROUP).collect()
    }

    /// The data groups the hash ring is built over: every data group but
    /// those split off for key-value ranges (the ring never changes when a range splits).
    pub fn ring_groups(&self) -> Vec<GroupId> {
        self.groups.iter().filter(|g| g.id != crate::META_GROUP && g.split_from.is_none()).map(|g| g.id).collect()
    }

    /// Under range sharding, the group holding key-value key `key`; `None` under hash sharding.
    pub fn kv_range_of(&self, key: &str) -> Option<&RangeDescriptor> {
        if self.strategy != ShardingStrategy::Range {
            return None;
        }
        self.ranges.iter().find(|r| r.range.contains(key))
    }

    /// Under range sharding, the ranges holding keys with `prefix`, in key
    /// order; `None` under hash sharding.
    pub fn kv_ranges_with_prefix(&self, prefix: &str) -> Option<Vec<&RangeDescriptor>> {
        if self.strategy != ShardingStrategy::Range {
            return None;
        }
        Some(self.ranges.iter().filter(|r| r.range.with_prefix(prefix).is_some()).collect())
    }

    /// The id a new group gets: one more than any group's or any id handed out.
    pub fn next_group_id(&self) -> GroupId {
        self.groups.iter().map(|g| g.id).max().unwrap_or(0).max(self.last_group_id) + 1
    }

    /// Reserves the child id of `parent`'s next split (`Ok(true)`), or keeps the
    /// one reserved already (`Ok(false)`: a split proposed with it may still
    /// apply, so the next attempt uses the same id and the parent refuses a
    /// second split into it). Refused for a group that holds no range.
    pub fn reserve_split(&mut self, parent: GroupId) -> Result<bool, String> {
        if self.pending_splits.contains_key(&parent) {
            return Ok(false);
        }
        if !self.ranges.iter().any(|r| r.group == parent) {
            return Err(format!("group {parent} holds no key-value range"));
        }
        let child = self.next_group_id();
        self.last_group_id = child;
        self.pending_splits.insert(parent, child);
        self.epoch += 1;
        Ok(true)
    }

    /// Records that `parent` split at `at` into `child` with `members`
    /// (idempotent: false when it was recorded already). Refused when `parent`
    /// holds no range containing `at` or `child` is another group's id.
    pub fn record_split(&mut self, parent: GroupId, child: GroupId, at: &str, members: &[NodeId]) -> Result<bool, String> {
        if let Some(g) = self.groups.iter().find(|g| g.id == child) {
            if g.split_from == Some(parent) && self.ranges.iter().any(|r| r.group == child && r.range.start == at) {
                return Ok(false);
            }
            return Err(format!("group {child} exists already"));
        }
        let Some(i) = self.ranges.iter().position(|r| r.group == parent && r.range.contains(at) && r.range.start != at) else {
            return Err(format!("group {parent} holds no range that {at:?} splits"));
        };
        let end = self.ranges[i].range.end.replace(at.to_string());
        let child_range = RangeDescriptor { range: KeyRange { start: at.to_string(), end }, group: child };
        self.ranges.insert(i + 1, child_range);
        self.groups.push(GroupInfo { id: child, members: members.to_vec(), split_from: Some(parent), preferred_leader: None });
        if self.pending_splits.get(&parent) == Some(&child) {
            self.pending_splits.remove(&parent);
        }
        self.last_group_id = self.last_group_id.max(child);
        self.epoch += 1;
        Ok(true)
    }

    /// A node of the map.
    /// Records `mv` as the replica move in flight: `Ok(false)` when it is
    /// recorded already; refused while another move is in flight, while a node
    /// joins or leaves (unless `mv` moves a replica to the joining node or off
    /// the draining one), or when `mv` does not fit the map (`from` must hold
    /// the group, `to` must exist and not hold it).
    pub fn begin_move(&mut self, mv: ReplicaMove) -> Result<bool, String> {
        if let Some(current) = self.moving {
            if current == mv {
                return Ok(false);
            }
            return Err(format!(
                "group {}'s replica is moving from node {} to node {}: one replica move at a time",
                current.group, current.from, current.to
            ));
        }
        // While a node joins or leaves, replicas move only to it or off it.
        if let Some(other) = self.nodes.iter().find(|n| n.state != NodeState::Active) {
            let part_of_it = match other.state {
                NodeState::Joining => mv.to == other.id,
                NodeState::Draining => mv.from == other.id,
                _ => false,
            };
            if !part_of_it {
                return Err(format!("node {} is {}: replicas move only while no node joins or leaves", other.id, other.state.as_str()));
            }
        }
        let group = self.groups.iter().find(|g| g.id == mv.group).ok_or_else(|| format!("group {} does not exist", mv.group))?;
        if mv.is_addition() {
            if group.members.len() >= self.target_replicas(mv.group) {
                return Err(format!("group {} has its {} replicas already", mv.group, group.members.len()));
            }
        } else if !group.members.contains(&mv.from) {
            return Err(format!("node {} holds no replica of group {}", mv.from, mv.group));
        }
        if group.members.contains(&mv.to) {
            return Err(format!("node {} holds a replica of group {} already", mv.to, mv.group));
        }
        if self.node(mv.to).is_none() {
            return Err(format!("node {} does not exist", mv.to));
        }
        self.moving = Some(mv);
        self.epoch += 1;
        Ok(true)
    }

    /// How many replicas `group` should have: the replication factor, and at
    /// least three for the meta group (as at bootstrap), nodes permitting.
    pub fn target_replicas(&self, group: GroupId) -> usize {
        let wanted = if group == crate::META_GROUP { self.replication_factor.max(3) } else { self.replication_factor };
        wanted.min(self.nodes.iter().filter(|n| n.state != NodeState::Draining).count()).max(1)
    }

    /// Clears the move in flight of `group`, if any; whether there was one.
    pub fn end_move(&mut self, group: GroupId) -> bool {
        if self.moving.is_some_and(|m| m.group == group) {
            self.moving = None;
            self.epoch += 1;
            return true;
        }
        false
    }

    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The address of a node.
    pub fn addr_of(&self, node: NodeId) -> Option<&str> {
        self.nodes.iter().find(|n| n.id == node).map(|n| n.addr.as_str())
    }
}

/// A built-in role.
#[derive(schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Operator,
    Viewer,
}

impl Role {
    /// Parses `Admin`, `admin`, `ADMIN`, ...
    pub fn parse(s: &str) -> Option<Role> {
        match s.to_ascii_lowercase().as_str() {
            "admin" => Some(Role::Admin),
            "operator" => Some(Role::Operator),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }
}

/// A user account as stored (the password only as its Argon2id PHC string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    pub id: String,
    pub username: String,
    pub email: String,
    pub role: Role,
    pub password_hash: String,
    pub mfa_enabled: bool,
    pub created_at_ms: i64,
    /// Custom roles granted on top of the built-in `role`.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The password's SCRAM-SHA-256 verifier, as PostgreSQL stores it
    /// (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`): the
    /// PostgreSQL listener checks a client's proof with it. Set with the
    /// password since it exists (older users get one when their password changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scram_verifier: Option<String>,
}

/// A custom role: a named set of permissions (`action:resource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleRecord {
    pub name: String,
    pub permissions: Vec<String>,
    pub created_at_ms: i64,
}

/// Every permission, as `action:resource`. `manage:*` ones belong to admins only
/// and cannot be granted through custom roles.
pub const PERMISSIONS: [&str; 28] = [
    "read:kv",
    "write:kv",
    "read:sql",
    "write:sql",
    "read:documents",
    "write:documents",
    "read:timeseries",
    "write:timeseries",
    "read:streaming",
    "write:streaming",
    "read:graph",
    "write:graph",
    "read:objects",
    "write:objects",
    "read:vectors",
    "write:vectors",
    "write:import",
    "read:compliance",
    "write:compliance",
    "read:cluster",
    "manage:cluster",
    "manage:users",
    "manage:roles",
    "manage:security",
    "manage:vault",
    "manage:backup",
    "manage:compliance",
    // Reading SQL columns classified PHI and above unmasked (spec 02 `data_classification`).
    "access:classified",
];

impl Role {
    /// The lower-case name used in responses.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }

    /// The permissions of a built-in role: admin has all; operator reads and
    /// writes data and reads cluster state; viewer only reads.
    pub fn permissions(self) -> Vec<&'static str> {
        PERMISSIONS
            .iter()
            .copied()
            .filter(|p| match self {
                Role::Admin => true,
                Role::Operator => p.starts_with("read:") || p.starts_with("write:"),
                Role::Viewer => p.starts_with("read:"),
            })
            .collect()
    }
}

/// A login session, stored under the SHA-256 of its token (never the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub user_id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// The address the login came from (the admin-from-unknown-IP detector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<String>,
    /// The login's User-Agent (what `security.session_binding` compares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// Opened with a second factor (`mfa/verify`), not the password alone
    /// (what `auth.mfa_required` asks of every session).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mfa_verified: bool,
}

/// The vault's data key, wrapped (AES-256-GCM) under a key derived from the
/// passphrase with Argon2id. Written once, when the vault is first unsealed; a
/// later unseal only reads it, so a wrong passphrase can never replace it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultKeyRecord {
    /// Random id of the data key (identifies it in audit records).
    pub key_id: String,
    /// Argon2id parameters: memory in KiB, iterations, parallelism.
    pub kdf_m_kib: u32,
    pub kdf_t: u32,
    pub kdf_p: u32,
    /// Random 16-byte Argon2id salt.
    #[serde(with = "crate::b64")]
    pub salt: Vec<u8>,
    /// 96-bit nonce of the wrapping.
    #[serde(with = "crate::b64")]
    pub wrap_nonce: Vec<u8>,
    /// The 256-bit data key encrypted under the passphrase key (with its tag).
    #[serde(with = "crate::b64")]
    pub wrapped_key: Vec<u8>,
    /// A known constant encrypted under the data key: confirms an unwrapped key.
    #[serde(with = "crate::b64")]
    pub check_nonce: Vec<u8>,
    #[serde(with = "crate::b64")]
    pub check: Vec<u8>,
    pub created_at_ms: i64,
}

/// One vault secret: only its ciphertext is stored (AES-256-GCM under the data
/// key, the path as associated data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultSecretRecord {
    pub path: String,
    /// The `key_id` of the data key it is encrypted under.
    pub key_id: String,
    #[serde(with = "crate::b64")]
    pub nonce: Vec<u8>,
    #[serde(with = "crate::b64")]
    pub ciphertext: Vec<u8>,
    /// Set by the meta engine: 1 on creation, +1 per overwrite.
    pub version: u64,
    /// Set by the meta engine on creation (kept on overwrite).
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub updated_by: String,
}

/// What a vault access policy may grant.
#[derive(schemars::JsonSchema, Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VaultCapability {
    Read,
    Write,
    List,
    Delete,
}

/// A vault access policy: grants `capabilities` on secrets whose path matches
/// one of `paths` (globs) to one user or to every holder of one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultPolicyRecord {
    pub name: String,
    pub username: Option<String>,
    pub role: Option<String>,
    pub paths: Vec<String>,
    pub capabilities: Vec<VaultCapability>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// One vault audit event (never holds a secret value or a passphrase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultAuditRecord {
    /// Random id; with `at_ms` it orders the audit trail.
    pub id: String,
    pub at_ms: i64,
    /// `initialized`, `unsealed`, `unseal_failed`, `sealed`, `secret_read`,
    /// `secret_written`, `secret_deleted`, `secrets_listed`, `policy_written`,
    /// `policy_deleted`, `access_denied`.
    pub event: String,
    /// The user, or `environment` for an unseal at router start.
    pub actor: String,
    /// The router that recorded it (`host:port`).
    pub router: String,
    pub path: Option<String>,
    pub success: bool,
    pub detail: String,
}

/// How many audit records the meta group keeps (the oldest are dropped).
pub const VAULT_AUDIT_KEEP: usize = 10_000;

/// What one router measured of the requests it served since it started,
/// published to the meta group every few seconds so `GET /api/v1/admin/stats`
/// on any router merges every router's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterStatsRecord {
    /// This router process (its address and a random instance id).
    pub router: String,
    /// When it was published (the command's time; set by the meta group).
    #[serde(default)]
    pub at_ms: i64,
    pub routes: Vec<RouteStatsRecord>,
}

/// One route's figures in a [`RouterStatsRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStatsRecord {
    pub method: String,
    pub route: String,
    pub requests: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    /// The latency histogram's recorded buckets: (microseconds, count).
    pub latency_micros: Vec<(u64, u64)>,
}

/// One recorded activity (`GET /api/v1/admin/activities`): a SQL query, a
/// login, a configuration change (users, roles, security, vault) or another
/// admin action, as the router that served it saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityRecord {
    /// Drawn by the router (its count of records, then random digits); with
    /// `at_ms` it orders the records.
    pub id: String,
    /// When the router finished serving it (Unix ms, the router's clock).
    pub at_ms: i64,
    /// `query`, `login`, `config` or `admin`.
    pub kind: String,
    /// The user (or `anonymous`).
    pub user: String,
    pub method: String,
    /// The route template (`/api/v1/admin/users/{id}`).
    pub route: String,
    pub status: u16,
    pub duration_ms: u64,
    /// The SQL text (cut at 500 characters), the login name, or empty.
    pub detail: String,
    /// The router that recorded it (`host:port`).
    pub router: String,
}

/// How many activity records the meta group keeps (the oldest are dropped).
pub const ACTIVITIES_KEEP: usize = 10_000;

#[cfg(test)]
mod range_tests {
    use super::*;

    fn range(start: &str, end: Option<&str>) -> KeyRange {
        KeyRange { start: start.into(), end: end.map(str::to_string) }
    }

    #[test]
    fn ranges_contain_cover_and_clip_to_prefixes() {
        let r = range("b", Some("d"));
        assert!(r.contains("b") && r.contains("cz") && !r.contains("d") && !r.contains("a"));
        assert!(KeyRange::full().covers(&r) && r.covers(&range("c", Some("d"))));
        assert!(!r.covers(&range("c", None)) && !r.covers(&range("a", Some("c"))));
        assert_eq!(r.with_prefix("c"), Some((b"c".to_vec(), Some(b"d".to_vec()))));
        assert_eq!(r.with_prefix(""), Some((b"b".to_vec(), Some(b"d".to_vec()))));
        assert_eq!(r.with_prefix("e"), None);
        assert_eq!(range("", None).with_prefix("a"), Some((b"a".to_vec(), Some(b"b".to_vec()))));
    }

    #[test]
    fn a_recorded_split_divides_the_range_and_adds_a_group() {
        let mut map = ClusterMap {
            nodes: vec![NodeInfo::new(1, "a")],
            strategy: ShardingStrategy::Range,
            replication_factor: 1,
            groups: vec![GroupInfo::new(0, vec![1]), GroupInfo::new(1, vec![1]), GroupInfo::new(2, vec![1])],
            epoch: 0,
            ranges: vec![RangeDescriptor { range: KeyRange::full(), group: 1 }],
            moving: None,
            pending_splits: Default::default(),
            last_group_id: 0,
        };
        assert_eq!(map.next_group_id(), 3);
        assert_eq!(map.record_split(1, 3, "m", &[1]), Ok(true));
        assert_eq!(map.record_split(1, 3, "m", &[1]), Ok(false), "recorded once");
        assert!(map.record_split(1, 2, "c", &[1]).is_err(), "group 2 exists");
        assert!(map.record_split(1, 4, "x", &[1]).is_err(), "x is not in group 1's range any more");
        assert_eq!(map.kv_range_of("a").map(|r| r.group), Some(1));
        assert_eq!(map.kv_range_of("m").map(|r| r.group), Some(3));
        assert_eq!(map.ring_groups(), vec![1, 2], "the ring keeps the bootstrap groups");
        assert_eq!(map.epoch, 1);
        let covering: Vec<GroupId> = map.kv_ranges_with_prefix("").unwrap().iter().map(|r| r.group).collect();
        assert_eq!(covering, vec![1, 3]);
        map.strategy = ShardingStrategy::Hash;
        assert!(map.kv_range_of("a").is_none());
    }

    /// Issue 35, defect 1: split child ids come from reservations in the map,
    /// never from "one more than the groups I see": a reserved id is kept until
    /// its split is recorded (the next attempt reuses it), and no id is handed
    /// out twice, even when a reserved split never happens.
    #[test]
    fn split_child_ids_are_reserved_once() {
        let mut map = ClusterMap {
            nodes: vec![NodeInfo::new(1, "a")],
            strategy: ShardingStrategy::Range,
            replication_factor: 1,
            groups: vec![GroupInfo::new(0, vec![1]), GroupInfo::new(1, vec![1]), GroupInfo::new(2, vec![1])],
            epoch: 0,
            ranges: vec![
                RangeDescriptor { range: KeyRange { start: String::new(), end: Some("k".into()) }, group: 1 },
                RangeDescriptor { range: KeyRange { start: "k".into(), end: None }, group: 2 },
            ],
            moving: None,
            pending_splits: Default::default(),
            last_group_id: 0,
        };
        assert_eq!(map.reserve_split(1), Ok(true));
        assert_eq!(map.pending_splits.get(&1), Some(&3));
        assert_eq!(map.reserve_split(1), Ok(false), "the reservation is kept");
        assert_eq!(map.pending_splits.get(&1), Some(&3));
        assert_eq!(map.reserve_split(2), Ok(true));
        assert_eq!(map.pending_splits.get(&2), Some(&4), "another parent gets another id");
        assert!(map.reserve_split(9).is_err(), "group 9 holds no range");
        // Group 2's split never happens; group 1's is recorded: its id is free again? Never.
        assert_eq!(map.record_split(1, 3, "d", &[1]), Ok(true));
        assert!(!map.pending_splits.contains_key(&1));
        assert_eq!(map.reserve_split(1), Ok(true));
        assert_eq!(map.pending_splits.get(&1), Some(&5), "ids 3 and 4 are never handed out again");
        let json = serde_json::to_string(&map).unwrap();
        assert_eq!(serde_json::from_str::<ClusterMap>(&json).unwrap(), map);
    }
}
