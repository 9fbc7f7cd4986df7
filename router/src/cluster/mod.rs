//! The router's view of the cluster, behind one trait: [`ClusterClient`] is
//! what handlers call (`write`, `read`, the shard of a key, the data groups).
//! [`grpc::GrpcCluster`] serves it from the nodes; in tests, `memory` serves it
//! from state machines in this process, so handlers, fan-out merges and error
//! mapping are tested without processes or sockets.

pub mod grpc;
mod lanes;
#[cfg(test)]
pub mod memory;
pub mod typed;

use std::collections::HashMap;

use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Operation, Query, QueryResult, Response};
use tessera_api::meta::{ClusterMap, NodeInfo};
use tessera_api::routing::{Ring, RoutingKey};
use tessera_api::rpc::{Consistency, ExportGroupReply, FetchExportReply, FetchExportRequest, StatusReply};
use tessera_api::{GroupId, META_GROUP, NodeId};

pub use grpc::GrpcCluster;

/// How a read is served: its consistency level, and with `one` the node whose
/// local state should answer (a request's `X-Consistency` and `X-Tessera-Replica`).
pub struct ReadPrefs {
    pub consistency: Consistency,
    /// With `one`, the node whose local state should answer.
    pub replica: Option<NodeId>,
}

impl ReadPrefs {
    /// A quorum read from whichever node leads: what the router's own
    /// bookkeeping reads (existence checks before a write) use.
    pub const QUORUM: ReadPrefs = ReadPrefs { consistency: Consistency::Quorum, replica: None };
}

tokio::task_local! {
    /// The backup whose restore the current task works for (see [`as_restore`]).
    static RESTORE_PASS: String;
}

/// Runs `work` as part of the restore of `backup_id`: its data-group reads and
/// writes go as that restore's own ([`Operation::DuringRestore`],
/// [`Query::DuringRestore`]), the only ones a group the restore holds takes.
pub async fn as_restore<F: std::future::Future>(backup_id: &str, work: F) -> F::Output {
    RESTORE_PASS.scope(backup_id.to_string(), work).await
}

/// `op` as the current task sends it to `group` (see [`as_restore`]).
fn outgoing_op(group: GroupId, op: &Operation) -> std::borrow::Cow<'_, Operation> {
    match RESTORE_PASS.try_with(String::clone) {
        Ok(backup_id) if group != META_GROUP => {
            std::borrow::Cow::Owned(Operation::DuringRestore { backup_id, op: Box::new(op.unwrapped().clone()) })
        }
        _ => std::borrow::Cow::Borrowed(op),
    }
}

/// `query` as the current task sends it to `group` (see [`as_restore`]).
fn outgoing_query(group: GroupId, query: &Query) -> std::borrow::Cow<'_, Query> {
    match RESTORE_PASS.try_with(String::clone) {
        Ok(backup_id) if group != META_GROUP => std::borrow::Cow::Owned(Query::DuringRestore { backup_id, query: Box::new(query.clone()) }),
        _ => std::borrow::Cow::Borrowed(query),
    }
}

/// Why a routed call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotAppliedEverywhere(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("storage error on a node: {0}")]
    Storage(String),
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
    /// A node does not serve this router's wire contract version.
    #[error("{0}")]
    Incompatible(String),
}

/// A successful routed call: the value and who served it.
#[derive(Debug)]
pub struct Served<T> {
    pub value: T,
    pub group: GroupId,
    pub node: NodeId,
}

/// What the router needs of the cluster.
#[async_trait::async_trait]
pub trait ClusterClient: Send + Sync {
    /// Learns the map, leaders and liveness anew.
    async fn refresh(&self);
    /// `Ok` when this router can serve: it was not refused by the nodes, knows
    /// the map and reaches the meta group's leader. One data group without a
    /// quorum does not make it unready (that group's requests answer 503; its
    /// health is in `/api/v1/admin/cluster`, alerts and metrics).
    fn readiness(&self) -> Result<(), String>;
    /// `Ok` when, besides [`ClusterClient::readiness`], every group has a
    /// reachable leader (`/readyz?groups=all`: the whole cluster is serving).
    fn every_group_led(&self) -> Result<(), String> {
        self.readiness()
    }
    /// The cluster map, once learned.
    fn map(&self) -> Option<ClusterMap>;
    /// Per node, as of the last refresh: (WAL syncs, log entries they made durable).
    fn wal_stats(&self) -> HashMap<NodeId, (u64, u64)>;
    /// Node id → (cluster id, incarnation) the node reported.
    fn identities(&self) -> HashMap<NodeId, (u64, u64)>;
    /// The wire contract version this router speaks to the nodes.
    fn wire_version(&self) -> u32 {
        tessera_api::rpc::WIRE_VERSION
    }
    /// Group id → the highest Raft term a node reported (a new term means an election).
    fn terms(&self) -> HashMap<GroupId, u64>;
    /// Group id → cached leader, and node id → whether it answered the last refresh.
    fn leaders_and_liveness(&self) -> (HashMap<GroupId, NodeId>, HashMap<NodeId, bool>);
    /// The data group that owns a routing key.
    fn group_for(&self, key: &RoutingKey<'_>) -> Result<GroupId, ClusterError>;
    /// Every data group.
    fn data_groups(&self) -> Result<Vec<GroupId>, ClusterError>;
    /// Proposes a write to a group's leader; acknowledged once committed and applied.
    async fn write(&self, group: GroupId, op: &Operation, consistency: Consistency) -> Result<Served<Response>, ClusterError>;
    /// As [`ClusterClient::write`] with the caller's request id: writes sent
    /// again with the same id apply once and answer what the first did.
    async fn write_as(
        &self,
        group: GroupId,
        op: &Operation,
        consistency: Consistency,
        request_id: String,
    ) -> Result<Served<Response>, ClusterError>;
    /// Reads from a group with a consistency mode; `replica` picks the node for `one`.
    async fn read(
        &self,
        group: GroupId,
        query: &Query,
        consistency: Consistency,
        replica: Option<NodeId>,
    ) -> Result<Served<QueryResult>, ClusterError>;

    /// Every node of the cluster map with its status, freshly asked; `Err` for a
    /// node that did not answer.
    async fn node_statuses(&self) -> Result<Vec<(NodeInfo, Result<StatusReply, ClusterError>)>, ClusterError>;

    /// Asks node `node` to restart its process (it stops its groups, then runs again).
    async fn restart_node(&self, node: &NodeInfo, binary: Option<&str>) -> Result<(), ClusterError>;

    /// After a secure erasure: asks `node` to snapshot and purge the log of
    /// each of `groups` it hosts and compact its store (see the node's
    /// `PurgeErased`); answers the groups it purged.
    async fn purge_erased(&self, node: &NodeInfo, groups: &[GroupId], timeout: std::time::Duration) -> Result<Vec<GroupId>, ClusterError>;

    /// After an encryption key rotation: asks `node` to rewrite what it stores
    /// under its current key (unless `count_only`) and count what still needs
    /// a previous key (the node's `Reseal`).
    async fn reseal(
        &self,
        node: &NodeInfo,
        count_only: bool,
        timeout: std::time::Duration,
    ) -> Result<tessera_api::rpc::ResealReply, ClusterError>;

    /// Asks `node` to stop leading (it stops campaigning until its next start);
    /// answers the groups it still leads after `timeout_ms`.
    async fn release_leadership(&self, node: &NodeInfo, timeout_ms: u64) -> Result<Vec<GroupId>, ClusterError>;

    /// Drains node `node` (it stops campaigning and leading); answers the groups it led.
    async fn drain_node(&self, node: &NodeInfo) -> Result<Vec<GroupId>, ClusterError>;

    /// Moves the leadership of `group` from node `from` (its leader) to `to`
    /// (one of its voters): `from` hands it off, `to` campaigns. Answers the
    /// leader afterwards (another voter may win the election).
    async fn transfer_leader(&self, group: GroupId, from: &NodeInfo, to: &NodeInfo) -> Result<Option<NodeId>, ClusterError>;

    /// Removes `node` from `group`'s voters through the group's leader; answers
    /// the log index of the committed membership without it.
    async fn remove_voter(&self, group: GroupId, node: NodeId) -> Result<u64, ClusterError>;

    /// Exports `group`'s records on its leader (the known leader first, then
    /// the other members); answers the node holding the export and what it holds.
    async fn export_group(&self, group: GroupId) -> Result<(NodeInfo, ExportGroupReply), ClusterError>;

    /// One page of an export made by [`ClusterClient::export_group`] on `node`.
    async fn fetch_export(&self, node: &NodeInfo, req: FetchExportRequest) -> Result<FetchExportReply, ClusterError>;

    /// The node's effective configuration (JSON, secrets redacted).
    async fn node_config(&self, node: &NodeInfo) -> Result<String, ClusterError>;

    /// The status of a node that may not be in the map yet (one being added).
    async fn status_at(&self, node: &NodeInfo) -> Result<StatusReply, ClusterError>;

    /// Tells a removed node to record its tombstone and stop for good.
    async fn retire_node(&self, node: &NodeInfo) -> Result<(), ClusterError>;

    /// Asks node `node` to stop gracefully (it does not run again by itself).
    async fn shutdown_node(&self, node: &NodeInfo) -> Result<(), ClusterError>;

    /// What each group uses on node `node` (bytes per model, log, snapshot).
    async fn node_storage(&self, node: &NodeInfo) -> Result<tessera_api::rpc::StorageReply, ClusterError>;

    /// A digest of each group node `node` hosts, with the applied index it
    /// reflects (the replica consistency check).
    async fn node_digests(&self, node: &NodeInfo) -> Result<tessera_api::rpc::DigestReply, ClusterError>;

    /// The newest `lines` lines of node `node`'s own log.
    async fn node_logs(&self, node: &NodeInfo, lines: u32) -> Result<Vec<String>, ClusterError>;

    /// Reads from the meta group (its reads never refuse: a refusal is reported as bad input).
    async fn meta_read(&self, query: MetaQuery) -> Result<MetaQueryResult, ClusterError> {
        match self.read(META_GROUP, &Query::Meta(query), Consistency::Quorum, None).await?.value {
            QueryResult::Meta(answer) => Ok(answer),
            QueryResult::Rejected(r) => Err(ClusterError::BadRequest(r.message)),
            other => Err(ClusterError::UnexpectedReply(format!("{other:?}").chars().take(80).collect())),
        }
    }

    /// Writes to the meta group.
    async fn meta_write(&self, op: MetaOp) -> Result<Response, ClusterError> {
        Ok(self.write(META_GROUP, &Operation::Meta(op), Consistency::Quorum).await?.value)
    }
}

/// The hash ring of a map's data groups (not those split off for key-value ranges).
fn build_ring(map: &ClusterMap) -> Ring {
    Ring::new(map.ring_groups())
}

/// The data group that owns `key`: under range sharding a key-value key's
/// range's group, otherwise the group on the ring.
fn route(map: Option<&ClusterMap>, ring: Option<&Ring>, key: &RoutingKey<'_>) -> Result<GroupId, ClusterError> {
    if let (Some(map), RoutingKey::Kv(k)) = (map, key)
        && let Some(range) = map.kv_range_of(k)
    {
        return Ok(range.group);
    }
    ring_group(ring, key)
}

/// The data group owning `key` on `ring`.
fn ring_group(ring: Option<&Ring>, key: &RoutingKey<'_>) -> Result<GroupId, ClusterError> {
    let ring = ring.ok_or_else(|| ClusterError::Unavailable("the cluster map is not known yet".into()))?;
    ring.group_of(key).ok_or_else(|| ClusterError::Unavailable("no data groups".into()))
}
