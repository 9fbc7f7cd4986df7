//! Records kept by the meta group (group 0): the cluster map, users and sessions.

use serde::{Deserialize, Serialize};

use crate::{GroupId, NodeId};

/// A data node and its gRPC address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    pub addr: String,
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

/// The placement of every group, written once into the meta group at bootstrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    pub nodes: Vec<NodeInfo>,
    pub strategy: ShardingStrategy,
    pub replication_factor: usize,
    /// Group 0 (meta) first, then the data groups in id order.
    pub groups: Vec<GroupInfo>,
}

impl ClusterMap {
    /// The data groups' ids (every group but the meta group).
    pub fn data_groups(&self) -> Vec<GroupId> {
        self.groups.iter().map(|g| g.id).filter(|id| *id != crate::META_GROUP).collect()
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
