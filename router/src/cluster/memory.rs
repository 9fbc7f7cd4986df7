//! A cluster in this process: one store, the real state machine and engines of
//! every group, no Raft, no sockets. Each write is stamped and applied as the
//! next log entry of its group exactly as a leader would (time fixed in the
//! command, the SQL trial run before it), so the router's handlers, fan-out
//! merges, catalog steps and error mapping run against real engine answers in
//! milliseconds. What needs processes (failover, restarts, snapshots) stays in
//! the `tessera-tests` scenarios.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use tessera_api::command::{Command, MetaOp, MetaQuery, MetaQueryResult, Operation, Query, QueryResult, Response};
use tessera_api::meta::{ClusterMap, GroupInfo, NodeInfo, ShardingStrategy};
use tessera_api::routing::{Ring, RoutingKey};
use tessera_api::rpc::{Consistency, GroupStatus, StatusReply};
use tessera_api::{GroupId, META_GROUP, NodeId};
use tessera_storage::{GroupReader, StateMachine, Store};

use super::{ClusterClient, ClusterError, Served, build_ring};

/// The one node id every answer is served by.
const NODE: NodeId = 1;

struct Group {
    state_machine: StateMachine,
    reader: GroupReader,
    /// The last applied log index; its lock orders the group's writes.
    applied: Mutex<u64>,
}

/// The meta group and `data_groups` data groups over one store in a temporary
/// directory (removed on drop).
pub struct MemoryCluster {
    groups: BTreeMap<GroupId, Group>,
    map: ClusterMap,
    ring: Ring,
    /// The last stamp handed out: commands get strictly increasing times.
    clock: AtomicI64,
    /// Groups that answer as if no leader could be reached.
    down: Mutex<HashSet<GroupId>>,
    store: Store,
    _dir: tempfile::TempDir,
}

impl Drop for MemoryCluster {
    /// Waits for background work (VACUUM compactions) and flushes, so no thread
    /// is inside RocksDB while a test process exits.
    fn drop(&mut self) {
        if let Err(e) = self.store.flush() {
            tracing::warn!("flushing the in-memory cluster's store: {e}");
        }
    }
}

impl MemoryCluster {
    /// A cluster of `data_groups` data groups (ids 1..=n) and the meta group.
    pub fn new(data_groups: u64) -> MemoryCluster {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open(dir.path()).expect("open the store");
        let ids: Vec<GroupId> = std::iter::once(META_GROUP).chain(1..=data_groups).collect();
        let map = ClusterMap {
            nodes: vec![NodeInfo::new(NODE, "in-process")],
            strategy: ShardingStrategy::default(),
            replication_factor: 1,
            groups: ids.iter().map(|&id| GroupInfo::new(id, vec![NODE])).collect(),
            epoch: 0,
            ranges: Vec::new(),
            moving: None,
            pending_splits: Default::default(),
            last_group_id: 0,
        };
        let groups: BTreeMap<GroupId, Group> = ids
            .iter()
            .map(|&id| {
                let group = Group { state_machine: store.state_machine(id), reader: store.reader(id), applied: Mutex::new(0) };
                (id, group)
            })
            .collect();
        // The map is recorded in the meta group, as the nodes record it.
        let meta: &Group = &groups[&META_GROUP];
        let init = Command { issued_at_ms: 1, op: Operation::Meta(MetaOp::InitClusterMap(map.clone())), request_id: None };
        meta.state_machine.apply_at(1, init).expect("record the cluster map");
        *meta.applied.lock().expect("meta lock") = 1;
        MemoryCluster { ring: build_ring(&map), groups, map, clock: AtomicI64::new(0), down: Mutex::default(), store, _dir: dir }
    }

    /// Makes `group` unreachable (`true`) or serves it again.
    pub fn set_down(&self, group: GroupId, down: bool) {
        let mut set = self.down.lock().expect("down lock");
        if down {
            set.insert(group);
        } else {
            set.remove(&group);
        }
    }

    /// The data group a routing key lands on.
    /// (`routing_bytes` as [`RoutingKey::bytes`] gives them: `doc/people/p1`, a KV key itself.)
    /// The store every group of this cluster lives in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn shard_of(&self, routing_bytes: &str) -> GroupId {
        self.ring.group_of_bytes(routing_bytes.as_bytes()).expect("data groups")
    }

    fn group(&self, id: GroupId) -> Result<&Group, ClusterError> {
        if self.down.lock().expect("down lock").contains(&id) {
            return Err(ClusterError::Unavailable(format!("group {id} did not answer: it is down (in-process test)")));
        }
        self.groups.get(&id).ok_or_else(|| ClusterError::Unavailable(format!("no group {id}")))
    }

    /// A time after every one handed out before: the leader's stamp.
    fn stamp(&self) -> i64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let previous = self.clock.fetch_max(now, Ordering::SeqCst);
        if previous >= now { self.clock.fetch_add(1, Ordering::SeqCst) + 1 } else { now }
    }
}

#[async_trait::async_trait]
impl ClusterClient for MemoryCluster {
    async fn refresh(&self) {}

    /// The one in-process node, leading every group; no process facts (uptime,
    /// disk, memory) since there is no node process.
    async fn node_statuses(&self) -> Result<Vec<(NodeInfo, Result<StatusReply, ClusterError>)>, ClusterError> {
        let groups = self
            .groups
            .iter()
            .map(|(id, g)| GroupStatus {
                group_id: *id,
                // A group made unreachable has no leader anyone knows.
                leader_id: if self.down.lock().expect("down lock").contains(id) { 0 } else { NODE },
                term: 1,
                last_applied: *g.applied.lock().expect("group write lock"),
                voters: vec![NODE],
            })
            .collect();
        let status = StatusReply { node_id: NODE, groups, version: env!("CARGO_PKG_VERSION").into(), ..Default::default() };
        let map = self.map().unwrap_or_else(|| self.map.clone());
        Ok(map.nodes.into_iter().map(|n| (n, Ok(status.clone()))).collect())
    }

    /// In process there are no files to purge: the state machines' stores are
    /// compacted by the secure erasure itself.
    async fn purge_erased(
        &self,
        _node: &NodeInfo,
        groups: &[GroupId],
        _timeout: std::time::Duration,
    ) -> Result<Vec<GroupId>, ClusterError> {
        Ok(groups.to_vec())
    }

    /// In process nothing is encrypted at rest: nothing needs a previous key.
    async fn reseal(
        &self,
        _node: &NodeInfo,
        _count_only: bool,
        _timeout: std::time::Duration,
    ) -> Result<tessera_api::rpc::ResealReply, ClusterError> {
        Ok(tessera_api::rpc::ResealReply::default())
    }

    async fn restart_node(&self, node: &NodeInfo, _binary: Option<&str>) -> Result<(), ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process and has no process to restart", node.id)))
    }

    async fn release_leadership(&self, node: &NodeInfo, _timeout_ms: u64) -> Result<Vec<GroupId>, ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process and leads its groups alone", node.id)))
    }

    async fn node_logs(&self, node: &NodeInfo, _lines: u32) -> Result<Vec<String>, ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process and keeps no log of its own", node.id)))
    }

    async fn shutdown_node(&self, node: &NodeInfo) -> Result<(), ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process and has no process to stop", node.id)))
    }

    async fn node_storage(&self, _node: &NodeInfo) -> Result<tessera_api::rpc::StorageReply, ClusterError> {
        let groups: Vec<GroupId> = self.groups.keys().copied().collect();
        let usage = self.store.usage(&groups).map_err(|e| ClusterError::Storage(e.to_string()))?;
        let groups = usage
            .into_iter()
            .map(|u| tessera_api::rpc::GroupStorage {
                group_id: u.group,
                models: u.models.into_iter().map(|(model, bytes)| tessera_api::rpc::ModelBytes { model: model.into(), bytes }).collect(),
                log_bytes: u.log_bytes,
                snapshot_bytes: u.snapshot_bytes,
            })
            .collect();
        Ok(tessera_api::rpc::StorageReply { groups, disk_bytes: 0 })
    }

    /// The one copy of each group (the in-process cluster has one replica per group).
    async fn node_digests(&self, _node: &NodeInfo) -> Result<tessera_api::rpc::DigestReply, ClusterError> {
        let mut groups = Vec::with_capacity(self.groups.len());
        for &id in self.groups.keys() {
            let d = self.store.digest(id).map_err(|e| ClusterError::Storage(e.to_string()))?;
            groups.push(tessera_api::rpc::GroupDigest {
                group_id: id,
                applied_index: d.applied_index,
                records: d.records,
                digest: d.digest,
                error: String::new(),
                voters: d.voters,
                learners: d.learners,
            });
        }
        Ok(tessera_api::rpc::DigestReply { groups })
    }

    async fn drain_node(&self, node: &NodeInfo) -> Result<Vec<GroupId>, ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is the only in-process node; it cannot hand its groups over", node.id)))
    }

    async fn transfer_leader(&self, group: GroupId, from: &NodeInfo, _to: &NodeInfo) -> Result<Option<NodeId>, ClusterError> {
        Err(ClusterError::Unavailable(format!("group {group} has one in-process member; node {} keeps leading it", from.id)))
    }

    async fn remove_voter(&self, group: GroupId, node: NodeId) -> Result<u64, ClusterError> {
        Err(ClusterError::Unavailable(format!("group {group} has one in-process member; node {node} cannot leave it")))
    }

    async fn export_group(&self, group: GroupId) -> Result<(NodeInfo, tessera_api::rpc::ExportGroupReply), ClusterError> {
        Err(ClusterError::Unavailable(format!("group {group} is in-process: backups need a cluster of nodes")))
    }

    async fn fetch_export(
        &self,
        node: &NodeInfo,
        _req: tessera_api::rpc::FetchExportRequest,
    ) -> Result<tessera_api::rpc::FetchExportReply, ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process: backups need a cluster of nodes", node.id)))
    }

    async fn node_config(&self, node: &NodeInfo) -> Result<String, ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process: it has no configuration of its own", node.id)))
    }

    async fn status_at(&self, node: &NodeInfo) -> Result<StatusReply, ClusterError> {
        Err(ClusterError::Unavailable(format!("no process answers for node {} at {}", node.id, node.addr)))
    }

    async fn retire_node(&self, node: &NodeInfo) -> Result<(), ClusterError> {
        Err(ClusterError::Unavailable(format!("node {} is in-process and has no process to stop", node.id)))
    }

    fn readiness(&self) -> Result<(), String> {
        Ok(())
    }

    fn map(&self) -> Option<ClusterMap> {
        let recorded = self.groups[&META_GROUP].reader.query(&Query::Meta(MetaQuery::ClusterMap), self.stamp());
        match recorded {
            Ok(QueryResult::Meta(MetaQueryResult::ClusterMap(Some(map)))) => Some(map),
            _ => Some(self.map.clone()),
        }
    }

    fn wal_stats(&self) -> HashMap<NodeId, (u64, u64)> {
        HashMap::new()
    }

    fn identities(&self) -> HashMap<NodeId, (u64, u64)> {
        HashMap::new()
    }

    fn terms(&self) -> HashMap<GroupId, u64> {
        self.groups.keys().map(|&g| (g, 1)).collect()
    }

    fn leaders_and_liveness(&self) -> (HashMap<GroupId, NodeId>, HashMap<NodeId, bool>) {
        (self.groups.keys().map(|&g| (g, NODE)).collect(), HashMap::from([(NODE, true)]))
    }

    fn group_for(&self, key: &RoutingKey<'_>) -> Result<GroupId, ClusterError> {
        super::route(Some(&self.map), Some(&self.ring), key)
    }

    fn data_groups(&self) -> Result<Vec<GroupId>, ClusterError> {
        Ok(self.map.data_groups())
    }

    async fn write(&self, group: GroupId, op: &Operation, consistency: Consistency) -> Result<Served<Response>, ClusterError> {
        self.write_as(group, op, consistency, crate::services::idempotency::request_id(group)).await
    }

    async fn write_as(&self, group: GroupId, op: &Operation, _: Consistency, request_id: String) -> Result<Served<Response>, ClusterError> {
        let g = self.group(group)?;
        let request_id = Some(request_id);
        let mut applied = g.applied.lock().expect("group write lock");
        let issued_at_ms = self.stamp();
        if g.reader.checks_before_propose(op)
            && let Some(rejection) = g.reader.check_before_propose(op, issued_at_ms)
        {
            return Ok(Served { value: Response::Rejected(rejection), group, node: NODE });
        }
        let cmd = Command { issued_at_ms, op: op.clone(), request_id };
        let value = g.state_machine.apply_at(*applied + 1, cmd).map_err(|e| ClusterError::Storage(e.to_string()))?;
        *applied += 1;
        Ok(Served { value, group, node: NODE })
    }

    async fn read(&self, group: GroupId, query: &Query, _: Consistency, _: Option<NodeId>) -> Result<Served<QueryResult>, ClusterError> {
        let g = self.group(group)?;
        let value = g.reader.query(query, self.stamp()).map_err(|e| ClusterError::Storage(e.to_string()))?;
        Ok(Served { value, group, node: NODE })
    }
}
