//! The groups a node hosts: one openraft `Raft` per replica, created at start
//! from the placement, initialized exactly once, and the operations the
//! services run on them (propose, read with a consistency mode, status).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use tessera_api::command::{Command, MetaOp, Operation, Query, QueryResult, Response, now_ms, MetaQuery, MetaQueryResult};
use tessera_api::meta::ClusterMap;
use tessera_api::rpc::{AppliedRequest, Consistency, FailureKind, GroupStatus};
use tessera_api::{GroupId, META_GROUP, NodeId};
use tessera_storage::{GroupReader, Store, TypeConfig};
use tracing::{info, warn};

use crate::config::NodeConfig;
use crate::network::{GroupNetwork, PeerPool};
use crate::placement;
use crate::query_pool::{PoolError, QueryPool};

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

/// Asks the peers of `map` what they recorded for this node until a majority
/// of the cluster (this node included) has answered, retrying unreachable
/// peers every 500 ms: lost when one knew it under another incarnation or a
/// later generation, else confirmed. Peers of another cluster do not count.
async fn check_standing(pool: &PeerPool, map: &ClusterMap, id: NodeId) -> Standing {
    let inc = &pool.incarnations;
    let (own, at_open) = (inc.own(), inc.generation_at_open());
    let needed = map.nodes.len() / 2; // peers, besides this node, that make a majority
    let mut answered = std::collections::BTreeSet::new();
    let mut waited_long = false;
    let started = Instant::now();
    loop {
        let asks = map.nodes.iter().filter(|n| n.id != id && !answered.contains(&n.id)).map(|n| async move {
            let mut client = pool.data_client(n.id, &n.addr).ok()?;
            let ask = tessera_api::rpc::StatusRequest { from_node: id, from_incarnation: own, from_generation: 0 };
            let mut req = tonic::Request::new(ask);
            req.set_timeout(Duration::from_secs(2));
            let r = client.status(req).await.ok()?.into_inner();
            (r.cluster_id == pool.cluster_id || r.cluster_id == 0).then_some((n.id, r))
        });
        for (peer, r) in futures::future::join_all(asks).await.into_iter().flatten() {
            if r.your_incarnation != 0 && r.your_incarnation != own {
                return Standing::Lost(format!(
                    "this node's data directory was replaced: node {peer} knew it as incarnation {:016x}, it is now \
                     {own:016x}. It has lost the votes and entries it acknowledged, so it initializes no group, does \
                     not vote and does not campaign until it is removed and re-added; it still replicates",
                    r.your_incarnation
                ));
            }
            if r.your_generation > at_open {
                return Standing::Lost(format!(
                    "this node's data directory was rolled back to an older copy: node {peer} heard generation {} \
                     from it, the directory holds {at_open}. It may have lost votes and entries it acknowledged, so it \
                     does not vote and does not campaign until it is removed and re-added; it still replicates",
                    r.your_generation
                ));
            }
            answered.insert(peer);
        }
        if answered.len() >= needed {
            info!(answered = answered.len(), "peers confirmed this data directory is current: it takes part in elections");
            return Standing::Confirmed;
        }
        if !waited_long && started.elapsed() > Duration::from_secs(10) {
            waited_long = true;
            warn!(
                answered = answered.len(),
                needed, "waiting for a majority of the cluster to confirm this data directory before taking part in elections"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Settles the node's [`Standing`] with its peers; once confirmed, initializes
/// the fresh groups this start bootstraps (`bootstrap`: group and members) and
/// lets every hosted group campaign (or campaign once caught up).
async fn settle_standing(host: Arc<Host>, bootstrap: Vec<(GroupId, BTreeMap<NodeId, BasicNode>)>) {
    let standing = check_standing(&host.pool, &host.map, host.id).await;
    let _serial = host.placement_changes.lock().await;
    *host.standing.write().unwrap_or_else(|e| e.into_inner()) = standing.clone();
    if let Standing::Lost(reason) = standing {
        tracing::error!("{reason}");
        return;
    }
    // Told only now: a peer told before it answered would report the new
    // generation back as a later state of this directory.
    tokio::spawn(advance_generation_periodically(host.clone()));
    let initialized: Vec<GroupId> = bootstrap.iter().map(|(group, _)| *group).collect();
    for (group, members) in bootstrap {
        let Ok(g) = host.group(group) else { continue };
        match g.raft.initialize(members).await {
            Ok(()) => info!(group, "initialized group"),
            Err(RaftError::APIError(InitializeError::NotAllowed(e))) => info!(group, "group already initialized: {e}"),
            Err(e) => tracing::error!(group, "initializing the group failed: {e}"),
        }
    }
    if host.is_drained() {
        return;
    }
    // Replicas that hold something (or bootstrap their group) campaign now;
    // the others once they have caught up.
    for (group, g) in host.hosted() {
        let holds = g.reader.applied().ok().flatten().is_some() || initialized.contains(&group);
        if g.may_vote() && holds {
            g.raft.runtime_config().elect(true);
        } else {
            tokio::spawn(campaign_once_caught_up(host.clone(), group, g));
        }
    }
}

/// Every [`GENERATION_PERIOD`](crate::incarnation::GENERATION_PERIOD), raises
/// this data directory's generation (synced) and tells every peer, so that a
/// copy of the directory older than that is found out at its next start.
async fn advance_generation_periodically(host: Arc<Host>) {
    let inc = host.pool.incarnations.clone();
    let mut generation = inc.generation();
    let mut told_all_once = false;
    loop {
        if host.is_stopping() {
            return;
        }
        let map = host.recorded_map().unwrap_or_else(|| host.map.clone());
        let tells = map.nodes.iter().filter(|n| n.id != host.id).map(|n| {
            let pool = host.pool.clone();
            let (addr, peer, from_node, from_incarnation) = (n.addr.clone(), n.id, host.id, inc.own());
            async move {
                let mut client = pool.data_client(peer, &addr).ok()?;
                let tell = tessera_api::rpc::StatusRequest { from_node, from_incarnation, from_generation: generation };
                let mut req = tonic::Request::new(tell);
                req.set_timeout(Duration::from_secs(2));
                client.status(req).await.ok().map(|_| ())
            }
        });
        let told = futures::future::join_all(tells).await;
        if !told_all_once && told.iter().all(Option::is_some) {
            told_all_once = true;
            info!(generation, "told every peer this data directory's generation");
        }
        tokio::time::sleep(crate::incarnation::GENERATION_PERIOD).await;
        generation = match inc.advance_generation() {
            Ok(g) => g,
            Err(e) => {
                warn!("raising the data directory's generation failed: {e}");
                continue;
            }
        };
    }
}

/// The cluster map and id a peer holds (its meta replica's map), asking the
/// configured peers in turn for up to 30 s; `None` when none answers with one.
async fn live_map_from_peers(pool: &PeerPool, peers: &[tessera_api::meta::NodeInfo], id: NodeId) -> Option<(ClusterMap, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for peer in peers.iter().filter(|p| p.id != id) {
            let Ok(mut client) = pool.data_client(peer.id, &peer.addr) else { continue };
            let mut req = tonic::Request::new(tessera_api::rpc::StatusRequest { from_node: id, ..Default::default() });
            req.set_timeout(Duration::from_secs(2));
            let Ok(reply) = client.status(req).await.map(|r| r.into_inner()) else { continue };
            if reply.cluster_map.is_empty() || reply.cluster_id == 0 {
                continue;
            }
            match tessera_api::codec::decode::<ClusterMap>(&reply.cluster_map) {
                Ok(map) => return Some((map, reply.cluster_id)),
                Err(e) => warn!(peer = peer.id, "undecodable cluster map from a peer: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Asks every peer of the cluster map for its incarnation (`Status`), retrying
/// unreachable ones, until this node has one for each (see `incarnation`).
async fn learn_peer_incarnations(host: Arc<Host>) {
    let mut pending: Vec<(NodeId, String)> =
        host.map.nodes.iter().filter(|n| n.id != host.id).map(|n| (n.id, n.addr.clone())).collect();
    while !pending.is_empty() {
        let mut left = Vec::new();
        for (peer, addr) in pending {
            let reply = match host.pool.data_client(peer, &addr) {
                Ok(mut client) => {
                    let mut req = tonic::Request::new(tessera_api::rpc::StatusRequest { from_node: host.id, ..Default::default() });
                    req.set_timeout(std::time::Duration::from_secs(2));
                    client.status(req).await.ok().map(|r| r.into_inner())
                }
                Err(_) => None,
            };
            match reply {
                Some(r) if r.cluster_id != 0 && r.cluster_id != host.pool.cluster_id => {
                    warn!(peer, "the node at {addr} belongs to cluster {:016x}, not this one ({:016x})", r.cluster_id, host.pool.cluster_id);
                    left.push((peer, addr));
                }
                // A mismatch is reported (once) by the check itself.
                Some(r) if r.node_id == peer => {
                    let _ = host.pool.incarnations.check(peer, r.incarnation);
                }
                _ => left.push((peer, addr)),
            }
        }
        pending = left;
        if !pending.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    info!("this node knows the incarnation of every peer");
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
        let store = Store::open_tuned(cfg.storage.data_dir.join("rocksdb"), cfg.crypt()?, &tuning)?;
        if store.node_record(tessera_storage::NODE_REMOVED)?.is_some() {
            anyhow::bail!(
                "node {id} was removed from the cluster (DELETE /api/v1/admin/nodes/{id}); it does not start on this \
                 data directory again. To bring the machine back, wipe the data directory and add it as a new node"
            );
        }
        store.remove_leftover_exports()?;
        let drained = store.node_record(tessera_storage::NODE_DRAINED)?.is_some();
        if drained {
            info!("this node was drained: it neither campaigns nor leads");
        }
        if store.encrypted() {
            info!("encryption at rest is on (AES-256-GCM, HKDF-SHA256 keys)");
        }
        let existing = cfg.joins_existing();
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
        let clock = Arc::new(
            tessera_api::clock::HybridClock::new(cfg.test_clock_offset_ms).with_max_offset(cfg.cluster.max_clock_offset_ms),
        );
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
            let started = Raft::new(
                id,
                raft_config.clone(),
                network,
                store.log_store(info.id),
                store.state_machine(info.id),
            )
            .await;
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
                let members: BTreeMap<NodeId, BasicNode> = info
                    .members
                    .iter()
                    .map(|m| (*m, BasicNode { addr: map.addr_of(*m).unwrap_or_default().to_string() }))
                    .collect();
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
            addr: cfg.server.grpc_addr.clone(),
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
        let (default_retention_ms, enforce_every) = cfg.storage.retention.parsed()?;
        let mut maintenance = cfg.maintenance.clone();
        if let Some(secs) = enforce_every {
            maintenance.retention_interval_secs = secs;
        }
        crate::maintenance::spawn(host.clone(), &maintenance, default_retention_ms);
        tokio::spawn(follow_splits(host.clone()));
        if cfg.sharding.strategy == tessera_api::meta::ShardingStrategy::Range {
            let period = Duration::from_secs(cfg.sharding.split_check_interval_secs.max(1));
            let thresholds = crate::maintenance::SplitThresholds {
                bytes: cfg.sharding.split_threshold_bytes,
                keys: cfg.sharding.split_threshold_keys,
                writes_per_sec: cfg.sharding.split_threshold_writes_per_sec,
            };
            crate::maintenance::spawn_range_splitter(host.clone(), period, thresholds);
        }
        let rebalance_every =
            cfg.sharding.auto_rebalance.then(|| Duration::from_secs(cfg.sharding.rebalance_interval_secs.max(1)));
        crate::driver::spawn_placement_driver(host.clone(), rebalance_every);
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

    /// The time of a new command of `g`: the node's hybrid clock, but never at or
    /// before a stamp the group applied or this node gave, so the group's time
    /// only moves forward whatever the clocks of successive leaders say.
    fn stamp(&self, g: &Group) -> i64 {
        let applied = g.reader.applied_clock().ok().flatten().unwrap_or(i64::MIN);
        let floor = applied.saturating_add(1);
        let mut stamp = self.clock.now_ms().max(floor);
        let mut last = g.last_stamp.load(Ordering::SeqCst);
        loop {
            stamp = stamp.max(last.saturating_add(1));
            match g.last_stamp.compare_exchange(last, stamp, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return stamp,
                Err(current) => last = current,
            }
        }
    }

    /// The time reads of `g` judge expiry by: the hybrid clock, but never before
    /// the group's applied clock (a lagging clock must not bring an expired key back).
    fn read_time(&self, g: &Group) -> i64 {
        let applied = g.reader.applied_clock().ok().flatten().unwrap_or(i64::MIN);
        self.clock.now_ms().max(applied)
    }

    /// Stamps `op` with the group's next time (see [`Host::stamp`]) and proposes it; leader only.
    pub async fn write(
        &self,
        group: GroupId,
        op: Operation,
        request_id: Option<String>,
        consistency: Consistency,
    ) -> Result<Response, HostError> {
        let g = self.group(group)?;
        self.refuse_if_drained_leader(group)?;
        let issued_at_ms = self.stamp(&g);
        if g.reader.checks_before_propose(&op) && g.raft.metrics().borrow().current_leader == Some(self.id) {
            let (reader, checked) = (g.reader.clone(), op.clone());
            let refusal = self.queries.run(move || reader.check_before_propose(&checked, issued_at_ms)).await?;
            if let Some(refusal) = refusal {
                return Ok(Response::Rejected(refusal));
            }
        }
        let cmd = Command { issued_at_ms, op, request_id };
        let resp = g.raft.client_write(cmd).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(other.to_string()),
        })?;
        if consistency == Consistency::All {
            self.wait_all_applied(group, resp.log_id.index).await?;
        }
        Ok(resp.data)
    }

    /// Answers `query` with the requested consistency.
    pub async fn read(&self, group: GroupId, query: Query, consistency: Consistency) -> Result<QueryResult, HostError> {
        let g = self.group(group)?;
        if consistency != Consistency::One {
            self.refuse_if_drained_leader(group)?;
            let read_log_id = g.raft.ensure_linearizable().await.map_err(|e| match e {
                RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => HostError::forward(group, f),
                other => HostError::Unavailable(other.to_string()),
            })?;
            let read_index = read_log_id.map(|l| l.index);
            if consistency == Consistency::All
                && let Some(index) = read_index
            {
                self.wait_all_applied(group, index).await?;
            }
        }
        let reader = g.reader.clone();
        let now = self.read_time(&g);
        Ok(self.queries.run_cancellable(move |cancel| reader.query_cancellable(&query, now, Some(cancel))).await??)
    }

    /// Exports `group`'s records (this node must lead it) after a read-index
    /// barrier, so the export holds every write acknowledged before the call;
    /// answers the export's id and what it holds.
    pub async fn export_group(&self, group: GroupId) -> Result<(String, tessera_storage::backup::ExportInfo), HostError> {
        let g = self.group(group)?;
        self.refuse_if_drained_leader(group)?;
        g.raft.ensure_linearizable().await.map_err(|e| match e {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(other.to_string()),
        })?;
        let id = format!("{group}-{:016x}", rand::random::<u64>());
        let reader = g.reader.clone();
        let export_id = id.clone();
        let info = tokio::task::spawn_blocking(move || reader.export(&export_id))
            .await
            .map_err(|e| HostError::Unavailable(e.to_string()))??;
        info!(group, export = id, applied_index = info.applied_index, pairs = info.pairs, "exported the group for a backup");
        Ok((id, info))
    }

    /// One page of an export of `group` made by [`Host::export_group`].
    pub async fn read_export(
        &self,
        group: GroupId,
        id: String,
        offset: u64,
        frame: u64,
        max_bytes: usize,
    ) -> Result<tessera_storage::backup::ExportPage, HostError> {
        let reader = self.group(group)?.reader.clone();
        Ok(tokio::task::spawn_blocking(move || reader.read_export(&id, offset, frame, max_bytes))
            .await
            .map_err(|e| HostError::Unavailable(e.to_string()))??)
    }

    /// A drained node that still leads `group` serves nothing a leader serves
    /// (so no message of it renews its followers' leases): they elect another
    /// leader, and the caller retries there.
    fn refuse_if_drained_leader(&self, group: GroupId) -> Result<(), HostError> {
        if (self.is_drained() || self.is_handing_off(group)) && self.leads(group) {
            return Err(HostError::NotLeader { group, leader: None });
        }
        Ok(())
    }

    /// Drains the node (recorded, so it survives a restart): every group stops
    /// campaigning here and, where this node leads, stops its heartbeats; the
    /// followers elect another leader once their lease runs out (openraft 0.9 has
    /// no leader transfer). Returns the groups it led when asked.
    pub fn drain(&self) -> Result<Vec<GroupId>, HostError> {
        self.store.record_node_record(tessera_storage::NODE_DRAINED, &[])?;
        let led = self.stop_leading();
        info!(node = self.id, ?led, "drained: this node no longer campaigns or leads");
        Ok(led)
    }

    /// Every group stops campaigning here and, where this node leads, stops its
    /// heartbeats; leader work is refused from now on. Answers the groups led.
    fn stop_leading(&self) -> Vec<GroupId> {
        self.drained.store(true, Ordering::SeqCst);
        self.pool.leaving.leave_all();
        let mut led = Vec::new();
        for (id, g) in self.hosted() {
            g.raft.runtime_config().elect(false);
            g.raft.runtime_config().heartbeat(false);
            if self.leads(id) {
                led.push(id);
            }
        }
        led
    }

    /// Makes what a secure erasure deleted leave this node's files: for each
    /// hosted group of `groups`, a snapshot of the applied state and a purge of
    /// the log up to it (waiting for both until `timeout`); then every column
    /// family flushed and compacted (on a blocking thread), which also retires
    /// the WAL files that held the records. Answers the groups purged.
    pub async fn purge_erased(&self, groups: &[GroupId], timeout: Duration) -> Result<Vec<GroupId>, HostError> {
        // One purge at a time per node: each compacts the whole store.
        let _turn = ONE_COMPACTION_AT_A_TIME.lock().await;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut purged = Vec::new();
        for &id in groups {
            let Ok(g) = self.group(id) else { continue };
            // A replica applies what it holds first (the erasure itself, on a follower).
            let held = {
                let m = g.raft.metrics().borrow().clone();
                m.last_log_index.unwrap_or(0).max(m.last_applied.map_or(0, |l| l.index))
            };
            let applied = wait_metric(&g, deadline, |m| m.last_applied.map(|l| l.index).filter(|i| *i >= held))
                .await
                .ok_or_else(|| HostError::Unavailable(format!("group {id}: entries up to {held} not applied within {timeout:?}")))?;
            let fatal = |e: openraft::error::Fatal<NodeId>| HostError::Unavailable(format!("group {id}: {e}"));
            g.raft.trigger().snapshot().await.map_err(fatal)?;
            let snapshot = wait_metric(&g, deadline, |m| m.snapshot.map(|l| l.index).filter(|i| *i >= applied))
                .await
                .ok_or_else(|| HostError::Unavailable(format!("group {id}: no snapshot at index {applied} within {timeout:?}")))?;
            g.raft.trigger().purge_log(snapshot).await.map_err(fatal)?;
            wait_metric(&g, deadline, |m| m.purged.map(|l| l.index).filter(|i| *i >= snapshot)).await.ok_or_else(|| {
                HostError::Unavailable(format!("group {id}: its log was not purged up to {snapshot} within {timeout:?} (a replica behind?)"))
            })?;
            purged.push(id);
        }
        // A snapshot being received was built before the erasure and may hold
        // the erased records: the purge (and so the certificate) waits until
        // every transfer in progress has ended, installed or removed.
        loop {
            let receiving = self.store.snapshots_receiving(groups);
            if receiving.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::Unavailable(format!(
                    "snapshots of groups {receiving:?} are still being received after {timeout:?}; the erasure is not certified until they end"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // An unread backup export taken before the erasure still holds the erased
        // records: remove it (that backup fails and is taken again).
        let exports = self.store.remove_exports_of(groups)?;
        if exports > 0 {
            info!(exports, "removed unread backup exports of erased groups");
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.compact_everything())
            .await
            .map_err(|e| HostError::Unavailable(format!("compaction: {e}")))??;
        Ok(purged)
    }

    /// After an encryption key rotation, rewrites what this node stores under
    /// its current key (unless `count_only`): every stored snapshot file, then
    /// a full compaction whose filter re-seals old values
    /// ([`tessera_storage::reseal`]). Answers the values re-sealed since the
    /// node started and how many values or snapshot files still need a previous key.
    pub async fn reseal(&self, count_only: bool) -> Result<(u64, u64), HostError> {
        // One at a time per node (each compacts the whole store), shared with secure-erasure purges.
        let _turn = ONE_COMPACTION_AT_A_TIME.lock().await;
        let store = self.store.clone();
        let needing = tokio::task::spawn_blocking(move || {
            if !count_only {
                store.reseal_everything()?;
            }
            store.needing_previous_keys()
        })
        .await
        .map_err(|e| HostError::Unavailable(format!("re-sealing: {e}")))??;
        Ok((self.store.resealed(), needing))
    }

    /// Gives up every leadership before the node is stopped (not recorded: the
    /// next start campaigns again): as [`Host::drain`] in memory, then waits
    /// until no group is led here, at most `timeout`. Answers the groups led
    /// when asked and those still led at the end.
    pub async fn release_leadership(&self, timeout: Duration) -> (Vec<GroupId>, Vec<GroupId>) {
        let led = self.stop_leading();
        info!(node = self.id, ?led, "releasing leadership before stopping");
        let deadline = Instant::now() + timeout;
        loop {
            let still: Vec<GroupId> = self.hosted().into_iter().map(|(id, _)| id).filter(|&id| self.leads(id)).collect();
            if still.is_empty() || Instant::now() >= deadline {
                if still.is_empty() {
                    info!(node = self.id, "every group this node led has another leader");
                } else {
                    warn!(node = self.id, ?still, "still leading when the release timed out");
                }
                return (led, still);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether this node is handing `group`'s leadership off.
    fn is_handing_off(&self, group: GroupId) -> bool {
        self.pool.leaving.handing_off(group)
    }

    /// Hands the leadership of `group` off (openraft 0.9 has no leader
    /// transfer): this replica stops campaigning for the group and, while it
    /// leads, sends no heartbeats and refuses leader work, so the followers'
    /// leases run out and one of them (the one asked to [`Host::campaign`]) is
    /// elected. First it waits (at most [`HAND_OFF_CATCH_UP`]) until `to` holds
    /// its whole log, so the successor's votes are not refused for a short log.
    /// Once another node leads, or after `timeout`, the replica campaigns and
    /// heartbeats again (unless the node was drained meanwhile). Answers false
    /// when this node does not lead the group.
    pub async fn hand_off(self: &Arc<Self>, group: GroupId, to: NodeId, timeout: Duration) -> Result<bool, HostError> {
        let g = self.group(group)?;
        if !self.leads(group) {
            return Ok(false);
        }
        self.pool.leaving.insert(group);
        let caught_up_by = Instant::now() + HAND_OFF_CATCH_UP;
        loop {
            let m = g.raft.metrics().borrow().clone();
            let matched = m.replication.as_ref().and_then(|r| r.get(&to)).and_then(|l| l.map(|l| l.index));
            if matched >= m.last_log_index || Instant::now() >= caught_up_by {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        g.raft.runtime_config().elect(false);
        g.raft.runtime_config().heartbeat(false);
        info!(group, "handing the leadership off");
        let host = self.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + timeout;
            while host.leads(group) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            host.pool.leaving.remove(group);
            if !host.is_drained() {
                g.raft.runtime_config().elect(true);
                g.raft.runtime_config().heartbeat(true);
            }
            let leader = g.raft.metrics().borrow().current_leader;
            info!(group, ?leader, "leadership hand-off over");
        });
        Ok(true)
    }

    /// Campaigns for `group` until this replica leads it, another node than
    /// `previous` leads it, or `timeout` passes; answers the leader then (if
    /// known). Votes are granted once the voters' lease on the previous leader
    /// ran out (an election timeout after its last heartbeat).
    pub async fn campaign(&self, group: GroupId, previous: Option<NodeId>, timeout: Duration) -> Result<Option<NodeId>, HostError> {
        let g = self.group(group)?;
        if self.is_drained() {
            return Err(HostError::Unavailable(format!("node {} is drained: it does not campaign", self.id)));
        }
        if !g.raft.metrics().borrow().membership_config.voter_ids().any(|v| v == self.id) {
            return Err(HostError::Unavailable(format!("node {} is no voter of group {group}", self.id)));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let leader = g.raft.metrics().borrow().current_leader;
            if leader == Some(self.id) || (leader.is_some() && leader != previous) || Instant::now() >= deadline {
                return Ok(leader);
            }
            if let Err(e) = g.raft.trigger().elect().await {
                return Err(HostError::Unavailable(format!("group {group}: {e}")));
            }
            // Each attempt raises the term; voters refuse until their lease on the
            // previous leader ran out, so a few attempts per lease are enough.
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }

    /// Notes that a leader's append or snapshot chunk for `group` reached this replica.
    pub fn leader_heard(&self, group: GroupId) {
        if let Ok(g) = self.group(group) {
            g.leader_heard_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }

    /// A drained node neither campaigns nor leads, but it stays a voter of its
    /// groups, and when its log is longer than the live candidates' it may be
    /// the only replica that can be elected: without its campaign the group
    /// would stay leaderless with a majority of its voters up (the control-plane
    /// chaos profile found a drain waiting forever for such a group). So when it
    /// has just refused a candidate its vote because its own log is longer, and
    /// no leader has reached it for an election timeout, it campaigns (a few
    /// times in a row, at most once per two election timeouts). Once it leads, its heartbeats stay
    /// off and leader work is refused, as for any drained node, so the
    /// followers elect another leader as soon as they hold its log.
    pub fn campaign_as_last_resort(&self, group: GroupId, refused_for_longer_log: bool) {
        if !refused_for_longer_log || !self.is_drained() {
            return;
        }
        let Ok(g) = self.group(group) else { return };
        let now = self.started.elapsed().as_millis() as u64;
        let timeout = self.raft_config.election_timeout_max;
        let silent = now.saturating_sub(g.leader_heard_ms.load(Ordering::Relaxed)) > timeout;
        let last = g.last_resort_ms.load(Ordering::Relaxed);
        let rested = last == 0 || now.saturating_sub(last) > 2 * timeout;
        if !silent || !rested || self.leads(group) || !g.may_vote() {
            return;
        }
        g.last_resort_ms.store(now, Ordering::Relaxed);
        info!(group, "drained, but this replica's log is longer than the candidates': it campaigns as a last resort");
        let (raft, id) = (g.raft.clone(), self.id);
        tokio::spawn(async move {
            // The first campaign usually runs in a term the candidates passed
            // (this replica refused them without taking their term); its
            // answers carry their term, and the next campaign runs above it,
            // before the candidates' next election timeout.
            for _ in 0..LAST_RESORT_ATTEMPTS {
                if let Err(e) = raft.trigger().elect().await {
                    warn!(group, "last-resort campaign: {e}");
                    return;
                }
                tokio::time::sleep(LAST_RESORT_PAUSE).await;
                if raft.metrics().borrow().current_leader == Some(id) {
                    info!(group, "leads as a last resort: its heartbeats stay off, so the followers elect another leader");
                    return;
                }
            }
        });
    }

    /// Whether the node was drained.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::SeqCst)
    }

    /// On the leader of `group`: removes `node` from its voters and learners and
    /// returns the log index of the membership without it, once committed
    /// (at once when it is no member).
    pub async fn remove_voter(&self, group: GroupId, node: NodeId) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        if !membership.voter_ids().any(|v| v == node) && membership.get_node(&node).is_none() {
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        let change = openraft::ChangeMembers::RemoveVoters([node].into_iter().collect());
        let resp = g.raft.change_membership(change, false).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("removing node {node} from group {group}: {other}")),
        })?;
        info!(group, node, index = resp.log_id.index, "removed a voter");
        Ok(resp.log_id.index)
    }

    /// On the leader of `group`: adds `node` (at `addr`) as a learner and
    /// returns the log index of that membership once the learner has caught up
    /// with the leader's log (at once when it is a member already).
    pub async fn add_learner(&self, group: GroupId, node: NodeId, addr: String) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        if m.membership_config.membership().get_node(&node).is_some_and(|n| n.addr == addr) {
            // Added before (a resumed move, or a call that outlived its timeout):
            // answer once it holds what the group had now, as a first call would,
            // never while it is still empty.
            let target = m.last_log_index.unwrap_or(0);
            let caught_up = g
                .raft
                .wait(Some(LEARNER_CATCH_UP))
                .metrics(
                    |m| {
                        m.replication
                            .as_ref()
                            .and_then(|r| r.get(&node).cloned().flatten())
                            .is_some_and(|matched| matched.index >= target)
                    },
                    "the learner catches up",
                )
                .await;
            if let Err(e) = caught_up {
                return Err(HostError::Unavailable(format!("node {node} has not caught up with group {group} yet: {e}")));
            }
            info!(group, node, target, "the learner added before has caught up");
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        let resp = g.raft.add_learner(node, BasicNode { addr }, true).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("adding node {node} to group {group} as a learner: {other}")),
        })?;
        info!(group, node, index = resp.log_id.index, "added a learner; it has caught up");
        Ok(resp.log_id.index)
    }

    /// On the leader of `group`: makes exactly `voters` its voters (nodes left
    /// out leave the group) and returns the log index of the new membership once
    /// committed.
    ///
    /// With `expected` (a compare-and-set), refused unless the voters are
    /// `expected` now or `voters` already: a caller planning from a stale map
    /// cannot bring back a voter set the group has left.
    pub async fn replace_voters(
        &self,
        group: GroupId,
        voters: std::collections::BTreeSet<NodeId>,
        expected: Option<std::collections::BTreeSet<NodeId>>,
    ) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        let current: std::collections::BTreeSet<NodeId> = m.membership_config.voter_ids().collect();
        let learners = m.membership_config.membership().learner_ids().count();
        if current == voters && learners == 0 {
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        if let Some(expected) = expected.filter(|e| *e != current && current != voters) {
            return Err(HostError::Unavailable(format!(
                "group {group}'s voters are {current:?}, not the {expected:?} the caller planned from: it planned on stale data"
            )));
        }
        let change = openraft::ChangeMembers::ReplaceAllVoters(voters.clone());
        let resp = g.raft.change_membership(change, false).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("changing the voters of group {group} to {voters:?}: {other}")),
        })?;
        info!(group, ?voters, index = resp.log_id.index, "replaced the voters");
        Ok(resp.log_id.index)
    }

    /// The replica of `group`, when this node leads it (and is not drained).
    fn leader_group(&self, group: GroupId) -> Result<Arc<Group>, HostError> {
        let g = self.group(group)?;
        let m = g.raft.metrics().borrow().clone();
        if m.current_leader != Some(self.id) || self.is_drained() {
            let hint = m.current_leader.filter(|l| *l != self.id);
            let leader = hint.and_then(|l| m.membership_config.membership().get_node(&l).map(|n| (l, n.addr.clone())));
            return Err(HostError::NotLeader { group, leader });
        }
        Ok(g)
    }

    /// Starts an empty replica of `group` for its leader to fill as a learner
    /// (it votes once it has applied what the leader sent), and records it so a
    /// restart hosts it again. Answers false when the group is hosted already.
    pub async fn host_group(self: &Arc<Self>, group: GroupId) -> Result<bool, HostError> {
        let _serial = self.placement_changes.lock().await;
        if self.hosts(group) {
            return Ok(false);
        }
        let network = GroupNetwork { group, pool: self.pool.clone() };
        let raft = Raft::new(self.id, self.raft_config.clone(), network, self.store.log_store(group), self.store.state_machine(group))
            .await
            .map_err(|e| HostError::Unavailable(format!("starting a replica of group {group}: {e}")))?;
        // It campaigns only once it holds the group's state. A replica the group
        // never had here may vote at once: it acknowledged nothing, so its empty
        // log keeps no promise (a wiped node is caught by its incarnation), and a
        // floor would keep a group promoted onto it without a quorum of voters
        // while its leader is down. A replica of a group this node held before
        // (moved away, then back) votes only once it applied what the earlier one
        // held ([`Store::delete_group`] keeps that as its floor): a candidate of an
        // older membership still listing this node could otherwise win with its
        // vote without entries the earlier replica helped commit (the
        // `control-plane` chaos fault found that).
        raft.runtime_config().elect(false);
        let floor = self.store.vote_floor(group)?;
        if let Some(floor) = floor {
            info!(group, floor, "this node held the group before: the new replica votes once it applied that far");
        }
        let vote_floor = std::sync::atomic::AtomicU64::new(floor.unwrap_or(NO_VOTE_FLOOR));
        let g = Arc::new(Group::new(raft, self.store.reader(group), vote_floor));
        self.groups.write().unwrap_or_else(|e| e.into_inner()).insert(group, g.clone());
        self.record_hosted_groups()?;
        tokio::spawn(campaign_once_caught_up(self.clone(), group, g));
        info!(group, "hosting a new replica: it fills as a learner, then votes");
        Ok(true)
    }

    /// Stops this node's replica of `group` and deletes its data (the replica
    /// moved away), recorded so a restart does not bring it back. Answers false
    /// when the group was not hosted.
    pub async fn drop_group(&self, group: GroupId) -> Result<bool, HostError> {
        let _serial = self.placement_changes.lock().await;
        let Some(g) = self.groups.write().unwrap_or_else(|e| e.into_inner()).remove(&group) else {
            return Ok(false);
        };
        self.record_hosted_groups()?;
        let mut dropped = self.dropped_groups()?;
        if !dropped.contains(&group) {
            dropped.push(group);
            let bytes = serde_json::to_vec(&dropped).map_err(|e| HostError::Unavailable(e.to_string()))?;
            self.store.record_node_record(tessera_storage::NODE_DROPPED_GROUPS, &bytes)?;
        }
        if let Err(e) = g.raft.shutdown().await {
            warn!(group, "shutting down the dropped replica: {e}");
        }
        // Reads and writes that found the replica before it left the map hold
        // it until they answer: a read that passed its linearizable check here
        // (this node led the group until the move) must not find the data gone.
        let deadline = Instant::now() + DROP_DRAIN_TIMEOUT;
        while Arc::strong_count(&g) > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if Arc::strong_count(&g) > 1 {
            warn!(group, "calls to the dropped replica still run after {DROP_DRAIN_TIMEOUT:?}; deleting its data anyway");
        }
        let held = {
            let m = g.raft.metrics().borrow().clone();
            m.last_log_index.unwrap_or(0).max(m.last_applied.map_or(0, |l| l.index))
        };
        drop(g);
        self.store.delete_group(group, held)?;
        info!(group, "dropped this node's replica (it moved to another node); its data is deleted");
        Ok(true)
    }

    /// Starts the groups split off from the groups this node hosts that it does
    /// not host yet (see `tessera_storage::range`): from the starting state the
    /// split left here, or, for a replica that skipped the split through a
    /// snapshot, empty for the child's leader to fill. A child whose replica
    /// moved away from this node is not brought back. Answers the groups started.
    pub async fn adopt_split_children(self: &Arc<Self>) -> Result<Vec<GroupId>, HostError> {
        let dropped = self.dropped_groups()?;
        let mut started = Vec::new();
        for (parent, _) in self.hosted() {
            if parent == tessera_api::META_GROUP {
                continue;
            }
            for (split, seeded) in self.store.split_children(parent)? {
                let child = split.child;
                if self.hosts(child) || dropped.contains(&child) || !split.members.contains(&self.id) {
                    continue;
                }
                if seeded {
                    self.host_split_child(child, self.leads(parent)).await?;
                } else {
                    self.host_group(child).await?;
                }
                started.push(child);
            }
        }
        Ok(started)
    }

    /// Starts the replica of a group split off here from the state the split
    /// left; `campaign`: this node led the parent, so it asks for the child's
    /// leadership at once rather than after an election timeout.
    async fn host_split_child(self: &Arc<Self>, group: GroupId, campaign: bool) -> Result<(), HostError> {
        let _serial = self.placement_changes.lock().await;
        if self.hosts(group) {
            return Ok(());
        }
        let network = GroupNetwork { group, pool: self.pool.clone() };
        let raft = Raft::new(self.id, self.raft_config.clone(), network, self.store.log_store(group), self.store.state_machine(group))
            .await
            .map_err(|e| HostError::Unavailable(format!("starting split-off group {group}: {e}")))?;
        if self.is_drained() || self.election_bar().is_some() {
            raft.runtime_config().elect(false);
        }
        let vote_floor = std::sync::atomic::AtomicU64::new(NO_VOTE_FLOOR);
        let g = Arc::new(Group::new(raft, self.store.reader(group), vote_floor));
        self.groups.write().unwrap_or_else(|e| e.into_inner()).insert(group, g.clone());
        self.record_hosted_groups()?;
        if campaign && !self.is_drained() && self.election_bar().is_none() {
            if let Err(e) = g.raft.trigger().elect().await {
                warn!(group, "campaigning for the split-off group: {e}");
            }
        }
        info!(group, "hosting a group split off here (its state came with the split)");
        Ok(())
    }

    /// The groups whose replica this node dropped (moved away).
    fn dropped_groups(&self) -> Result<Vec<GroupId>, HostError> {
        Ok(match self.store.node_record(tessera_storage::NODE_DROPPED_GROUPS)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| HostError::Unavailable(e.to_string()))?,
            None => Vec::new(),
        })
    }

    fn record_hosted_groups(&self) -> Result<(), HostError> {
        let ids: Vec<GroupId> = self.hosted().into_iter().map(|(g, _)| g).collect();
        let bytes = serde_json::to_vec(&ids).map_err(|e| HostError::Unavailable(e.to_string()))?;
        self.store.record_node_record(tessera_storage::NODE_GROUPS, &bytes)?;
        Ok(())
    }

    /// The node was removed from the cluster: records a tombstone (it will not
    /// start on this data directory again) and asks `main` to stop for good.
    pub fn retire(&self) -> Result<(), HostError> {
        self.store.record_node_record(tessera_storage::NODE_REMOVED, &self.id.to_be_bytes())?;
        self.retired.store(true, Ordering::SeqCst);
        info!(node = self.id, "removed from the cluster: stopping for good");
        self.restart.send_replace(true);
        Ok(())
    }

    /// The index this node's replica of `group` has applied.
    pub fn applied_index(&self, group: GroupId) -> Result<u64, HostError> {
        Ok(self.group(group)?.reader.applied()?.map_or(0, |l| l.index))
    }

    /// Waits until every voter of `group` has applied `index`.
    async fn wait_all_applied(&self, group: GroupId, index: u64) -> Result<(), HostError> {
        let g = self.group(group)?;
        let voters: Vec<NodeId> = g.raft.metrics().borrow().membership_config.voter_ids().collect();
        let deadline = Instant::now() + ALL_APPLIED_TIMEOUT;
        let mut pending: Vec<NodeId> = voters;
        loop {
            let mut still = Vec::new();
            for node in pending {
                let applied = if node == self.id {
                    self.applied_index(group).ok()
                } else {
                    self.peer_applied(node, group).await
                };
                if applied.is_none_or(|a| a < index) {
                    still.push(node);
                }
            }
            if still.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                warn!(group, index, ?still, "not applied on every voter in time");
                return Err(HostError::NotAppliedEverywhere(ALL_APPLIED_TIMEOUT));
            }
            pending = still;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn peer_applied(&self, node: NodeId, group: GroupId) -> Option<u64> {
        let live = self.recorded_map().and_then(|m| m.addr_of(node).map(str::to_string));
        let addr = live.or_else(|| self.map.addr_of(node).map(str::to_string))?;
        let mut client = self.pool.data_client(node, &addr).ok()?;
        let mut req = tonic::Request::new(AppliedRequest { group_id: group });
        req.set_timeout(Duration::from_millis(500));
        let reply = client.applied(req).await.ok()?.into_inner();
        reply.hosted.then_some(reply.last_applied)
    }

    /// The status of every hosted group, in id order.
    pub fn group_statuses(&self) -> Vec<GroupStatus> {
        let mut out: Vec<GroupStatus> = self
            .hosted()
            .iter()
            .map(|(id, g)| {
                let m = g.raft.metrics().borrow().clone();
                GroupStatus {
                    group_id: *id,
                    leader_id: m.current_leader.unwrap_or(0),
                    term: m.current_term,
                    last_applied: m.last_applied.map_or(0, |l| l.index),
                    voters: m.membership_config.voter_ids().collect(),
                }
            })
            .collect();
        out.sort_by_key(|g| g.group_id);
        out
    }

    /// The cluster map recorded in this replica of the meta group, if any.
    pub fn recorded_map(&self) -> Option<ClusterMap> {
        let g = self.group(META_GROUP).ok()?;
        match g.reader.query(&Query::Meta(MetaQuery::ClusterMap), now_ms()) {
            Ok(QueryResult::Meta(MetaQueryResult::ClusterMap(m))) => m,
            _ => None,
        }
    }

    /// Records the cluster map in the meta group once: whichever node leads the
    /// meta group proposes it until a replica shows it recorded.
    pub async fn record_cluster_map(self: Arc<Self>) {
        if !self.hosts(META_GROUP) {
            return;
        }
        loop {
            if self.recorded_map().is_some() {
                return;
            }
            let is_leader = self.leads(META_GROUP);
            if is_leader {
                match self.write(META_GROUP, Operation::Meta(MetaOp::InitClusterMap(self.map.clone())), None, Consistency::Quorum).await {
                    Ok(_) => info!("recorded the cluster map in the meta group"),
                    Err(e) => warn!("recording the cluster map: {e}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Whether [`Host::shutdown`] has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Why this node takes no part in elections now (`None`: it does): peers
    /// have not yet confirmed its data directory, or it was wiped or rolled back.
    pub fn election_bar(&self) -> Option<String> {
        match &*self.standing.read().unwrap_or_else(|e| e.into_inner()) {
            Standing::Confirmed => None,
            Standing::Checking => Some(format!(
                "node {} is waiting for a majority of the cluster to confirm that its data directory is current",
                self.id
            )),
            Standing::Lost(reason) => Some(reason.clone()),
        }
    }

    /// Whether the node can take its share of the work: not stopping, and every
    /// group placed on it started, knows a leader and may vote (has caught up).
    pub fn readiness(&self) -> Result<(), String> {
        if self.is_stopping() {
            return Err("the node is shutting down".into());
        }
        if let Some(reason) = self.election_bar() {
            return Err(reason);
        }
        if let Some(failed) = self.failed_groups.first() {
            return Err(format!("group {failed} failed to start on this node (see its log)"));
        }
        for (id, g) in self.hosted() {
            if g.raft.metrics().borrow().current_leader.is_none() {
                return Err(format!("group {id} has no known leader yet"));
            }
            if !g.may_vote() {
                return Err(format!("group {id}'s replica is still catching up"));
            }
        }
        Ok(())
    }

    /// Fencing of the control plane: admits a call a placement driver made as
    /// the meta leader of term `meta_term` (0: an unfenced call, from a router),
    /// unless this node has seen a newer meta term — a fenced call's, or its own
    /// meta replica's (it heard of a newer election). A deposed meta leader that
    /// has not noticed yet is refused here.
    pub fn admit_control(&self, meta_term: u64, what: &str) -> Result<(), HostError> {
        if meta_term == 0 {
            return Ok(());
        }
        let own = self.group(META_GROUP).map_or(0, |g| g.raft.metrics().borrow().current_term);
        let seen = self.control_fence.fetch_max(meta_term, Ordering::SeqCst).max(own);
        if meta_term < seen {
            warn!(meta_term, newer = seen, what, "refused a control-plane call of a deposed meta leader");
            return Err(HostError::Unavailable(format!(
                "{what}: refused, the call comes from the meta leader of term {meta_term} but term {seen} is newer (a deposed leader)"
            )));
        }
        Ok(())
    }

    /// Confirms that this node leads the meta group with a read-index round (a
    /// quorum of the group acknowledges its leadership now; a leader cut off
    /// from its followers fails it) and answers the term of that leadership: the
    /// fence its control-plane calls carry. `None` when it does not lead.
    pub async fn confirm_meta_leadership(&self) -> Option<u64> {
        let g = self.group(META_GROUP).ok()?;
        if self.is_drained() || g.raft.metrics().borrow().current_leader != Some(self.id) {
            return None;
        }
        let confirmed = tokio::time::timeout(Duration::from_secs(5), g.raft.ensure_linearizable()).await;
        if !matches!(confirmed, Ok(Ok(_))) {
            return None;
        }
        let m = g.raft.metrics().borrow().clone();
        (m.current_leader == Some(self.id)).then_some(m.current_term)
    }

    /// Whether this node currently leads `group`.
    pub fn leads(&self, group: GroupId) -> bool {
        self.group(group).is_ok_and(|g| g.raft.metrics().borrow().current_leader == Some(self.id))
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

/// Lets a replica below its vote floor campaign again once it has caught up.
/// Starts split-off groups whenever a hosted group applied a split or
/// installed a snapshot (and once at start: a crash may have come between a
/// split's apply and the child's start).
async fn follow_splits(host: Arc<Host>) {
    let events = host.store.group_events();
    loop {
        if host.is_stopping() {
            return;
        }
        match host.adopt_split_children().await {
            Ok(started) if !started.is_empty() => info!(?started, "started split-off groups"),
            Ok(_) => {}
            Err(e) => warn!("starting split-off groups: {e}"),
        }
        tokio::select! {
            _ = events.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

async fn campaign_once_caught_up(host: Arc<Host>, group: GroupId, g: Arc<Group>) {
    // An empty replica may vote (see `host_group`) but campaigns only once it
    // holds something: its campaigns could not win and would only raise the
    // term. No replica campaigns before peers confirmed this data directory.
    while !g.may_vote() || g.reader.applied().ok().flatten().is_none() || host.election_bar().is_some() {
        if matches!(*host.standing.read().unwrap_or_else(|e| e.into_inner()), Standing::Lost(_)) {
            return;
        }
        if host.is_stopping() || !host.hosts(group) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if host.is_drained() {
        return;
    }
    g.raft.runtime_config().elect(true);
    info!(group, "replica caught up: it campaigns again");
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

/// Watches this node's state in the cluster map its meta replica holds: a node
/// the map marks as leaving drains itself, even when it did not answer the
/// router's drain call (it was down, or the router died half-way).
async fn follow_lifecycle_state(host: Arc<Host>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !host.is_stopping() && !host.is_drained() {
        tick.tick().await;
        let leaving = host.recorded_map().and_then(|m| {
            m.node(host.id).map(|n| matches!(n.state, tessera_api::meta::NodeState::Draining | tessera_api::meta::NodeState::Removing))
        });
        if leaving == Some(true)
            && let Err(e) = host.drain()
        {
            warn!("draining as the cluster map asks: {e}");
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

    /// Bytes of the files under the data directory, measured at most every 5 s.
    pub fn disk_bytes(&self) -> u64 {
        let mut cached = self.disk_usage.lock().unwrap_or_else(|e| e.into_inner());
        match *cached {
            Some((at, bytes)) if at.elapsed() < Duration::from_secs(5) => bytes,
            _ => {
                let bytes = tessera_storage::store::dir_bytes(&self.data_dir);
                *cached = Some((Instant::now(), bytes));
                bytes
            }
        }
    }
}

/// (bytes available to this process, total bytes) of the filesystem holding `dir`; zeros when unknown.
pub fn filesystem_space(dir: &std::path::Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return (0, 0) };
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stat` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return (0, 0);
    }
    let block = stat.f_frsize as u64;
    (stat.f_bavail as u64 * block, stat.f_blocks as u64 * block)
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`), 0 when unknown.
pub fn machine_memory_bytes() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// This process's resident memory (`VmRSS` of `/proc/self/status`; 0 where there is none).
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
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
