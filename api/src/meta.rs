//! Records kept by the meta group (group 0): the cluster map, users and sessions.

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
}

impl NodeInfo {
    /// An active node.
    pub fn new(id: NodeId, addr: impl Into<String>) -> NodeInfo {
        NodeInfo { id, addr: addr.into(), state: NodeState::Active }
    }
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
}

impl ClusterMap {
    /// The data groups' ids (every group but the meta group).
    pub fn data_groups(&self) -> Vec<GroupId> {
        self.groups.iter().map(|g| g.id).filter(|id| *id != crate::META_GROUP).collect()
    }

    /// A node of the map.
    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The address of a node.
    pub fn addr_of(&self, node: NodeId) -> Option<&str> {
        self.nodes.iter().find(|n| n.id == node).map(|n| n.addr.as_str())
    }
}

/// A built-in role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
pub const PERMISSIONS: [&str; 25] = [
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
    "read:cluster",
    "manage:cluster",
    "manage:users",
    "manage:roles",
    "manage:security",
    "manage:vault",
    "manage:backup",
    "manage:compliance",
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
