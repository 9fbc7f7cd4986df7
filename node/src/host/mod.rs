//! The groups a node hosts: one openraft `Raft` per replica, created at start
//! from the placement, initialized exactly once, and the operations the
//! services run on them (propose, read with a consistency mode, status).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use tessera_api::command::{Command, MetaOp, MetaQuery, MetaQueryResult, Operation, Query, QueryResult, Response, now_ms};
use tessera_api::meta::ClusterMap;
use tessera_api::rpc::{AppliedRequest, Consistency, FailureKind, GroupStatus};
use tessera_api::{GroupId, META_GROUP, NodeId};
use tessera_storage::{GroupReader, Store, TypeConfig};
use tracing::{info, warn};

use crate::config::NodeConfig;
use crate::network::{GroupNetwork, PeerPool};
use crate::placement;
use crate::query_pool::{PoolError, QueryPool};

mod leadership;
mod proposals;
mod replicas;
mod requests;
mod standing;
mod status;

use leadership::campaign_once_caught_up;
pub(crate) use leadership::{known_leader, leads_now};
pub use proposals::BatchLimits;
use replicas::{follow_lifecycle_state, follow_splits};
use standing::{learn_peer_incarnations, live_map_from_peers, settle_standing};
pub use status::{filesystem_space, machine_memory_bytes, resident_bytes};

/// How long a leader handing a group off waits for the successor's log to catch up.
const HAND_OFF_CATCH_UP: Duration = Duration::from_secs(2);

/// Campaigns of one last-resort attempt of a drained replica
/// ([`Host::campaign_as_last_resort`]), and the pause after each.
const LAST_RESORT_ATTEMPTS: usize = 3;
const LAST_RESORT_PAUSE: Duration = Duration::from_millis(300);

/// How long a learner added before may take to catch up when it is added again.
const LEARNER_CATCH_UP: Duration = Duration::from_secs(110);

/// How long a write or read with consistency `all` waits for every voter.
const ALL_APPLIED_TIMEOUT: Duration = Duration::from_secs(5);

/// One hosted replica.
pub struct Group {
    pub raft: Raft<TypeConfig>,
    pub reader: GroupReader,
    /// The last stamp this node gave a command of the group it proposed.
    last_stamp: std::sync::atomic::AtomicI64,
    /// While set, the log index this replica must apply before it grants votes:
    /// 0 ("anything") for a fresh replica joining an existing cluster, the purge
    /// mark for a replica found applied behind it. [`NO_VOTE_FLOOR`]: none.
    vote_floor: std::sync::atomic::AtomicU64,
    /// When a leader's append or snapshot chunk last reached this replica (ms
    /// since the node started).
    leader_heard_ms: std::sync::atomic::AtomicU64,
    /// When this (drained) replica last campaigned as a last resort (ms since
    /// the node started; 0: never).
    last_resort_ms: std::sync::atomic::AtomicU64,
    /// Writes waiting to be proposed together while this replica leads.
    proposals: proposals::Proposals,
}

/// [`Group::vote_floor`] when the replica may vote.
const NO_VOTE_FLOOR: u64 = u64::MAX;

/// How long dropping a replica waits for the calls that still use it.
const DROP_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Whole-store compactions (secure-erasure purges, re-sealing after a key
/// rotation) run one at a time on a node.
static ONE_COMPACTION_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Group {
    fn new(raft: Raft<TypeConfig>, reader: GroupReader, vote_floor: std::sync::atomic::AtomicU64) -> Group {
        Group {
            raft,
            reader,
            last_stamp: Default::default(),
            vote_floor,
            leader_heard_ms: Default::default(),
            last_resort_ms: Default::default(),
            proposals: Default::default(),
        }
    }

    /// Whether this replica may grant votes: not while it has a vote floor it has
    /// not applied (a fresh replica's empty log, or a log that lost acknowledged
    /// entries, would grant any candidate its vote and could elect a leader that
    /// lacks committed entries). Its own campaigns cannot win meanwhile: its log
    /// is behind the majority that holds the floor's entries.
    pub fn may_vote(&self) -> bool {
        let floor = self.vote_floor.load(Ordering::Relaxed);
        if floor == NO_VOTE_FLOOR {
            return true;
        }
        let caught_up = self.reader.applied().ok().flatten().is_some_and(|a| a.index >= floor);
        if caught_up {
            self.vote_floor.store(NO_VOTE_FLOOR, Ordering::Relaxed);
            info!(floor, "replica caught up to its vote floor: it votes again");
        }
        caught_up
    }
}

/// Whether this node takes part in elections, as its peers' answers at its
/// start decided (see `incarnation`).
#[derive(Clone, Debug)]
pub enum Standing {
    /// Waiting for a majority of the cluster (this node included) to answer.
    Checking,
    /// A majority answered, and none knew a later state of this data directory.
    Confirmed,
    /// A peer knew this node under another incarnation (the directory was
    /// wiped) or heard a later generation from it (the directory was rolled
    /// back): the reason. It replicates, but never votes or campaigns, until it
    /// is removed and re-added.
    Lost(String),
}

/// Why an operation on a group did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("this node is not the leader of group {group}")]
    NotLeader { group: GroupId, leader: Option<(NodeId, String)> },
    #[error("group {0} is not hosted on this node")]
    UnknownGroup(GroupId),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Query(#[from] PoolError),
    #[error("committed, but not applied on every replica within {0:?}")]
    NotAppliedEverywhere(Duration),
    #[error("storage: {0}")]
    Storage(#[from] tessera_storage::StorageError),
}

impl HostError {
    /// The wire kind of a failure (not-leader is answered separately).
    pub fn kind(&self) -> FailureKind {
        match self {
            HostError::UnknownGroup(_) => FailureKind::UnknownGroup,
            HostError::NotAppliedEverywhere(_) => FailureKind::NotAppliedEverywhere,
            HostError::Storage(_) => FailureKind::Storage,
            HostError::NotLeader { .. } | HostError::Unavailable(_) | HostError::Query(_) => FailureKind::Unavailable,
        }
    }

    fn forward(group: GroupId, f: ForwardToLeader<NodeId, BasicNode>) -> Self {
        let leader = f.leader_id.zip(f.leader_node.map(|n| n.addr));
        HostError::NotLeader { group, leader }
    }
}

/// Everything a node runs: its store, peers and hosted groups.
pub struct Host {
    pub id: NodeId,
    pub store: Store,
    pub pool: Arc<PeerPool>,
    pub map: ClusterMap,
    /// The replicas this node hosts; replicas placed on it or moved away after
    /// its start come and go ([`Host::host_group`], [`Host::drop_group`]).
    groups: std::sync::RwLock<HashMap<GroupId, Arc<Group>>>,
    /// The Raft configuration every group of the node runs with.
    raft_config: Arc<Config>,
    /// Groups placed on this node that could not start (damaged replicas).
    failed_groups: Vec<GroupId>,
    /// When the node's cluster TLS certificate expires (Unix ms; 0: no TLS).
    /// (Updated when the certificate is reloaded.)
    pub cert_not_after_ms: std::sync::atomic::AtomicI64,
    /// Serializes [`Host::host_group`] and [`Host::drop_group`].
    placement_changes: tokio::sync::Mutex<()>,
    /// Where reads run: off the runtime threads that drive Raft.
    pub queries: QueryPool,
    /// The node's hybrid clock (wall clock, never behind what peers said).
    pub clock: Arc<tessera_api::clock::HybridClock>,
    /// Whether this node takes part in elections (peers confirmed at its start
    /// that its data directory is current; see [`Standing`]).
    standing: std::sync::RwLock<Standing>,
    /// Set when [`Host::shutdown`] begins: background tasks stop starting work.
    stopping: AtomicBool,
    /// When the node started.
    pub started: Instant,
    /// The address the node serves on, as configured.
    pub addr: String,
    /// Where the node runs (`cluster.locality`), told in its status.
    pub locality: String,
    /// The node's data directory.
    pub data_dir: std::path::PathBuf,
    /// The data directory's size and when it was measured (routers ask for the
    /// status twice a second; the directory is walked at most every few seconds).
    disk_usage: std::sync::Mutex<Option<(Instant, u64)>>,
    /// Set by [`Host::request_restart`] and [`Host::retire`]; `main` stops the node
    /// (and runs it again unless it retired).
    restart: tokio::sync::watch::Sender<bool>,
    /// The binary a requested update runs next ([`Host::request_update`]).
    next_binary: std::sync::Mutex<Option<std::path::PathBuf>>,
    /// The node was drained ([`Host::drain`]): it neither campaigns nor leads.
    drained: AtomicBool,
    /// The node was removed from the cluster ([`Host::retire`]): it stops for good.
    retired: AtomicBool,
    /// A cluster shutdown asked this node to stop ([`Host::request_shutdown`]).
    shut_down: AtomicBool,
    /// The highest meta-group term a fenced control-plane call carried here
    /// ([`Host::admit_control`]).
    control_fence: std::sync::atomic::AtomicU64,
    /// How this node's groups batch the writes they propose as leader.
    batch_limits: BatchLimits,
}

impl Host {
    /// Opens the store and starts every group placed on this node.
    pub async fn start(cfg: &NodeConfig) -> anyhow::Result<Arc<Host>> {
        let id = cfg.cluster.node_id;
        let peers = cfg.peers()?;
        let configured = placement::initial_map(
            &cfg.bootstrap_peers()?,
            cfg.sharding.shard_count,
            cfg.replication.replication_factor,
            cfg.sharding.strategy,
        );
        std::fs::create_dir_all(&cfg.storage.data_dir)?;
        let tuning = cfg.storage.tuning()?;
        if tuning.in_memory {
            warn!("storage.backend = memory: the data is kept in memory only; nothing survives a restart of this node");
        }
        if tuning.unsynced_commits && !tuning.in_memory {
            warn!(
                "storage.sync_on_commit = false: log entries and applied state are acknowledged before they are synced to \
                 disk (votes still are). A process crash loses nothing (the write-ahead log is in the OS's cache), but a \
                 power loss or OS crash of this node loses what it had not yet written back, and when its acknowledgement \
                 completed a write's quorum, the cluster can lose that acknowledged write"
            );
        }
        let store_dir = cfg.storage.data_dir.join("rocksdb");
        let mut store = Store::open_tuned(&store_dir, cfg.crypt()?, &tuning)?;
        let mut rejoining = false;
        if store.node_record(tessera_storage::NODE_REMOVED)?.is_some() {
            if !cfg.cluster.rejoin_when_removed {
                anyhow::bail!(
                    "node {id} was removed from the cluster (DELETE /api/v1/admin/nodes/{id}); it does not start on this \
                     data directory again. To bring the machine back, wipe the data directory and add it as a new node \
                     (or start it with SERVICE_REJOIN_WHEN_REMOVED=true, which does that)"
                );
            }
            // Its groups live on other nodes since its removal: the old data is
            // of no use, and is not kept (it may hold records erased since).
            warn!(
                "this node was removed from the cluster: cluster.rejoin_when_removed discards its old data; it starts empty and waits to be added again"
            );
            drop(store);
            std::fs::remove_dir_all(&store_dir)?;
            store = Store::open_tuned(&store_dir, cfg.crypt()?, &tuning)?;
            rejoining = true;
        }
        store.remove_leftover_exports()?;
        let drained = store.node_record(tessera_storage::NODE_DRAINED)?.is_some();
        if drained {
            info!("this node was drained: it neither campaigns nor leads");
        }
        if store.encrypted() {
            info!("encryption at rest is on (AES-256-GCM, HKDF-SHA256 keys)");
        }
        let existing = cfg.joins_existing() || rejoining;
        // A new (or wiped) data directory starting into an existing cluster takes
        // the cluster's current map and id from a peer: replicas may have moved
        // since bootstrap, and a node added later is in no bootstrap placement.
        if existing && store.recorded_placement()?.is_none() {
            let probe = PeerPool::with_dial_overrides(cfg.dial_overrides()?).with_tls(cfg.cluster_tls()?);
            match live_map_from_peers(&probe, &peers, id).await {
                Some((live, live_cluster_id)) => {
                    let mine: Vec<GroupId> = live.groups.iter().filter(|g| g.members.contains(&id)).map(|g| g.id).collect();
                    info!(epoch = live.epoch, groups = ?mine, "joining the existing cluster with its current map");
                    store.record_placement(&serde_json::to_vec(&live)?)?;
                    store.record_node_record(tessera_storage::NODE_CLUSTER_ID, &live_cluster_id.to_be_bytes())?;
                    store.record_node_record(tessera_storage::NODE_GROUPS, &serde_json::to_vec(&mine)?)?;
                }
                None => warn!("no peer answered with the cluster map: starting from the configured placement"),
            }
        }
        // Once replicas moved to or from this node (or it joined an existing
        // cluster), its recorded placement and groups rule, not the configured topology.
        let (map, cluster_id) = if store.node_record(tessera_storage::NODE_GROUPS)?.is_some() {
            placement::recorded_since_join(&store, &configured)?
        } else {
            let map = placement::recorded_or_configured(&store, configured)?;
            let cluster_id = placement::recorded_cluster_id(&store, placement::cluster_id(&cfg.cluster.name, &map))?;
            (map, cluster_id)
        };
        info!(cluster_id = format!("{cluster_id:016x}"), "cluster id");
        let clock =
            Arc::new(tessera_api::clock::HybridClock::new(cfg.test_clock_offset_ms).with_max_offset(cfg.cluster.max_clock_offset_ms));
        let pool = Arc::new(
            PeerPool::with_dial_overrides(cfg.dial_overrides()?)
                .with_tls(cfg.cluster_tls()?)
                .with_clock(id, clock.clone())
                .with_incarnations(Arc::new(crate::incarnation::Incarnations::open(&store)?))
                .with_cluster_id(cluster_id),
        );
        let raft_config = Arc::new(
            Config {
                cluster_name: cfg.cluster.name.clone(),
                heartbeat_interval: cfg.raft.heartbeat_ms,
                election_timeout_min: cfg.raft.election_min_ms,
                election_timeout_max: cfg.raft.election_max_ms,
                snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.raft.snapshot_logs),
                max_in_snapshot_log_to_keep: cfg.raft.keep_logs,
                snapshot_max_chunk_size: 1024 * 1024,
                // AppendEntries must finish within one heartbeat interval in openraft 0.9;
                // bound the payload (object chunks are 256 KiB each).
                max_payload_entries: 32,
                install_snapshot_timeout: 10_000,
                ..Default::default()
            }
            .validate()?,
        );

        // Fresh groups this start bootstraps: initialized once peers confirmed
        // this data directory (see `settle_standing`).
        let mut bootstrap = Vec::new();
        let mut groups = HashMap::new();
        let mut failed_groups = Vec::new();
        // The groups this node hosts: those it recorded once replicas moved to or
        // from it, else those the placement gives it.
        let recorded_groups: Option<Vec<GroupId>> = match store.node_record(tessera_storage::NODE_GROUPS)? {
            Some(bytes) => Some(serde_json::from_slice(&bytes)?),
            None => None,
        };
        let placed: Vec<tessera_api::meta::GroupInfo> = match &recorded_groups {
            Some(ids) => ids.iter().map(|&g| tessera_api::meta::GroupInfo::new(g, Vec::new())).collect(),
            None => map.groups.iter().filter(|g| g.members.contains(&id)).cloned().collect(),
        };
        for info in &placed {
            let fresh = store.group_is_fresh(info.id)?;
            if fresh && existing {
                info!(group = info.id, "fresh replica in an existing cluster: it will not vote until it has caught up");
            }
            let network = GroupNetwork { group: info.id, pool: pool.clone() };
            let started = Raft::new(id, raft_config.clone(), network, store.log_store(info.id), store.state_machine(info.id)).await;
            // One group that cannot start (a damaged replica) must not keep the
            // node's other groups down; this one answers "not hosted" until repaired.
            let raft = match started {
                Ok(raft) => raft,
                Err(e) => {
                    tracing::error!(group = info.id, "group failed to start; serving the other groups without it: {e}");
                    failed_groups.push(info.id);
                    continue;
                }
            };
            // The group's first member initializes it, once, on a fresh store, and
            // only when this start may bootstrap the cluster.
            if fresh && !existing && info.members.first() == Some(&id) {
                let members: BTreeMap<NodeId, BasicNode> =
                    info.members.iter().map(|m| (*m, BasicNode { addr: map.addr_of(*m).unwrap_or_default().to_string() })).collect();
                bootstrap.push((info.id, members));
            }
            let floor = if fresh && existing { Some(0) } else { store.vote_floor(info.id)? };
            if let Some(floor) = floor {
                info!(group = info.id, floor, "this replica does not vote until it has applied the floor");
            }
            // No replica campaigns before peers confirmed this data directory
            // (`settle_standing`); one that may not vote does not campaign either
            // (its campaigns would only raise terms and unseat the leader).
            raft.runtime_config().elect(false);
            if drained {
                raft.runtime_config().heartbeat(false);
            }
            let vote_floor = std::sync::atomic::AtomicU64::new(floor.unwrap_or(NO_VOTE_FLOOR));
            let group = Group::new(raft, store.reader(info.id), vote_floor);
            groups.insert(info.id, Arc::new(group));
        }
        info!(node = id, groups = groups.len(), "node started its groups");
        let queries = QueryPool::new(cfg.server.query_workers(), cfg.server.query_queue);
        tessera_storage::set_sql_memory_pool_mb(cfg.server.sql_memory_pool_mb);
        let host = Arc::new(Host {
            id,
            store,
            pool,
            map,
            groups: std::sync::RwLock::new(groups),
            raft_config,
            failed_groups,
            placement_changes: Default::default(),
            cert_not_after_ms: std::sync::atomic::AtomicI64::new(match &cfg.tls.cert {
                Some(path) => tessera_api::tls::not_after_ms("node certificate", path)?,
                None => 0,
            }),
            queries,
            clock,
            standing: std::sync::RwLock::new(Standing::Checking),
            stopping: AtomicBool::new(false),
            started: Instant::now(),
            batch_limits: BatchLimits { in_flight: cfg.raft.proposals_in_flight, max_commands: cfg.raft.batch_max_commands },
            addr: cfg.server.grpc_addr.clone(),
            locality: cfg.cluster.locality.clone(),
            data_dir: cfg.storage.data_dir.clone(),
            disk_usage: Default::default(),
            restart: tokio::sync::watch::Sender::new(false),
            next_binary: Default::default(),
            drained: AtomicBool::new(drained),
            retired: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            control_fence: Default::default(),
        });
        // Groups campaign (and fresh ones are initialized) once a majority of
        // the cluster confirmed this data directory is current.
        tokio::spawn(settle_standing(host.clone(), bootstrap));
        // Learn every peer's incarnation now, before a disk is lost: a peer first
        // heard from after its data directory was wiped would pass as itself.
        tokio::spawn(learn_peer_incarnations(host.clone()));
        // Vector indexes live in memory: rebuild them now, in the background on the
        // query pool, rather than inside the first searches after a start (a
        // 10 000-vector collection takes seconds to rebuild in a debug build).
        for (group, g) in host.hosted() {
            let (reader, host) = (g.reader.clone(), host.clone());
            tokio::spawn(async move {
                match host.queries.run(move || reader.warm_vector_indexes()).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(built)) => info!(group, built, "vector indexes rebuilt after start"),
                    Ok(Err(e)) => tracing::warn!(group, "rebuilding vector indexes after start failed: {e}"),
                    Err(e) => tracing::warn!(group, "vector index rebuild not run: {e}"),
                }
            });
        }
        // Link checkpoints of large vector indexes, so the next start restores
        // them instead of re-linking every node (also written at shutdown).
        tokio::spawn(checkpoint_vector_indexes_periodically(host.clone()));
        tokio::spawn(follow_splits(host.clone()));
        tokio::spawn(follow_lifecycle_state(host.clone()));
        Ok(host)
    }

    /// The hosted replica of `group`.
    pub fn group(&self, group: GroupId) -> Result<Arc<Group>, HostError> {
        self.groups.read().unwrap_or_else(|e| e.into_inner()).get(&group).cloned().ok_or(HostError::UnknownGroup(group))
    }

    /// Every hosted replica, in group order.
    pub fn hosted(&self) -> Vec<(GroupId, Arc<Group>)> {
        let mut out: Vec<(GroupId, Arc<Group>)> =
            self.groups.read().unwrap_or_else(|e| e.into_inner()).iter().map(|(&id, g)| (id, g.clone())).collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }

    /// Whether this node hosts a replica of `group`.
    pub fn hosts(&self, group: GroupId) -> bool {
        self.groups.read().unwrap_or_else(|e| e.into_inner()).contains_key(&group)
    }

    /// Whether [`Host::shutdown`] has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Stops every group and flushes the store.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for (id, g) in self.hosted() {
            if let Err(e) = g.raft.shutdown().await {
                warn!(group = id, "shutting down group: {e}");
            }
        }
        // Nothing applies any more: checkpoint every vector index that grew, so
        // the next start does not re-link it.
        for (group, g) in self.hosted() {
            match g.reader.checkpoint_vector_indexes(1) {
                Ok(0) => {}
                Ok(written) => info!(group, written, "vector index link checkpoints written"),
                Err(e) => warn!(group, "writing vector index link checkpoints: {e}"),
            }
        }
        if let Err(e) = self.store.flush() {
            warn!("flushing the store: {e}");
        }
    }
}

/// Every 30 s, stores a link checkpoint of each vector index that grew by at
/// least 1 000 nodes (and a quarter of its last checkpoint) since its last one
/// (on the query pool), so a node that crashes re-links little on its next
/// start. Stops once the host shuts down (which writes the last ones itself).
async fn checkpoint_vector_indexes_periodically(host: Arc<Host>) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        for (group, g) in host.hosted() {
            if host.is_stopping() {
                return;
            }
            let reader = g.reader.clone();
            match host.queries.run(move || reader.checkpoint_vector_indexes(1000)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warn!(group, "writing vector index link checkpoints: {e}"),
                Err(e) => warn!(group, "vector index link checkpoints not written: {e}"),
            }
        }
    }
}

impl Host {
    /// Asks `main` to stop the node gracefully and run `binary` in its place
    /// (a rolling update: same arguments, environment and pid).
    pub fn request_update(&self, binary: std::path::PathBuf) {
        info!(node = self.id, binary = %binary.display(), "update requested: stopping the groups, then running the new binary");
        *self.next_binary.lock().unwrap_or_else(|e| e.into_inner()) = Some(binary);
        self.restart.send_replace(true);
    }

    /// The binary the next run uses, when an update named one.
    pub fn next_binary(&self) -> Option<std::path::PathBuf> {
        self.next_binary.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks `main` to stop the node gracefully and run it again.
    pub fn request_restart(&self) {
        info!(node = self.id, "restart requested: stopping the groups, then running again");
        self.restart.send_replace(true);
    }

    /// Resolves once a restart has been requested.
    pub async fn restart_requested(&self) {
        let mut rx = self.restart.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Whether a restart was requested (and the node did not retire or shut down).
    pub fn restart_pending(&self) -> bool {
        *self.restart.borrow() && !self.retired.load(Ordering::SeqCst) && !self.shut_down.load(Ordering::SeqCst)
    }

    /// Asks `main` to stop the node gracefully, as on SIGTERM, without running
    /// it again (`POST /api/v1/admin/cluster/shutdown`).
    pub fn request_shutdown(&self) {
        info!(node = self.id, "cluster shutdown requested: stopping the groups");
        self.shut_down.store(true, Ordering::SeqCst);
        self.restart.send_replace(true);
    }
}

/// Polls `g`'s Raft metrics until `ready` answers, or `deadline` passes.
async fn wait_metric<T>(
    g: &Group,
    deadline: tokio::time::Instant,
    ready: impl Fn(&openraft::RaftMetrics<NodeId, openraft::BasicNode>) -> Option<T>,
) -> Option<T> {
    loop {
        if let Some(v) = ready(&g.raft.metrics().borrow()) {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
