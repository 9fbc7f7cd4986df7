//! `GET /api/v1/admin/cluster`: nodes, their reachability and WAL group-commit
//! counters, and each group's leader, term and members, freshly asked of every node.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use tessera_api::{GroupId, NodeId};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// A node's WAL group commits since it started.
#[derive(Serialize, schemars::JsonSchema)]
pub struct WalCounters {
    pub syncs: u64,
    pub log_entries_synced: u64,
}

/// A node of the cluster map, as this router reaches it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClusterNode {
    pub id: NodeId,
    pub addr: String,
    /// The cluster id it recorded at bootstrap (hex; `null` until heard).
    pub cluster_id: Option<String>,
    /// Its data directory's incarnation (hex; `null` until heard).
    pub incarnation: Option<String>,
    /// Where it runs (`cluster.locality`, e.g. `zone=a,rack=3`); absent when not configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locality: Option<String>,
    pub reachable: bool,
    pub wal: WalCounters,
}

/// A Raft group: its leader and term as last heard, and its members.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClusterGroup {
    pub id: GroupId,
    pub leader: Option<NodeId>,
    pub term: Option<u64>,
    pub members: Vec<NodeId>,
    pub preferred_leader: Option<NodeId>,
    /// Two of its replicas share a failure domain (the first tier of their
    /// nodes' localities): losing that zone could take its quorum.
    pub shares_a_zone: bool,
}

/// How the router reaches the nodes: mutual TLS, or plaintext asked for by name.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Transport {
    pub insecure: bool,
    pub mutual_tls: bool,
}

/// A key-value range and the group that holds it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RangeView {
    pub start: String,
    /// `null`: to the end of the key space.
    pub end: Option<String>,
    pub group: GroupId,
}

/// How keys map onto the data groups.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Sharding {
    /// `hash` or `range`.
    pub strategy: String,
    pub shard_count: usize,
    /// Range sharding: the key-value ranges in key order.
    pub ranges: Vec<RangeView>,
}

/// `GET /api/v1/admin/cluster`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClusterView {
    pub nodes: Vec<ClusterNode>,
    pub groups: Vec<ClusterGroup>,
    pub transport: Transport,
    pub sharding: Sharding,
    /// The cluster map's version.
    pub epoch: u64,
    pub replication_factor: usize,
}

/// The cluster as this router sees it.
pub async fn cluster(State(state): State<AppState>, _caller: Caller) -> Result<Json<ClusterView>, ApiError> {
    state.cluster.refresh().await;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let (leaders, reachable) = state.cluster.leaders_and_liveness();
    let wal = state.cluster.wal_stats();
    let terms = state.cluster.terms();
    let identities = state.cluster.identities();
    let hex = |v: u64| (v != 0).then(|| format!("{v:016x}"));
    let nodes = map
        .nodes
        .iter()
        .map(|n| {
            let (syncs, log_entries_synced) = wal.get(&n.id).copied().unwrap_or_default();
            let (cluster_id, incarnation) = identities.get(&n.id).copied().unwrap_or_default();
            ClusterNode {
                id: n.id,
                addr: n.addr.clone(),
                cluster_id: hex(cluster_id),
                incarnation: hex(incarnation),
                locality: Some(n.locality.clone()).filter(|l| !l.is_empty()),
                reachable: reachable.get(&n.id).copied().unwrap_or(false),
                wal: WalCounters { syncs, log_entries_synced },
            }
        })
        .collect();
    let groups = map
        .groups
        .iter()
        .map(|g| ClusterGroup {
            id: g.id,
            leader: leaders.get(&g.id).copied(),
            term: terms.get(&g.id).copied(),
            members: g.members.clone(),
            preferred_leader: g.preferred_leader,
            shares_a_zone: tessera_api::placement::crowding(&map, &g.members) > 0,
        })
        .collect();
    let strategy = serde_json::to_value(map.strategy).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    Ok(Json(ClusterView {
        nodes,
        groups,
        transport: Transport { insecure: state.config.cluster.insecure, mutual_tls: !state.config.cluster.insecure },
        sharding: Sharding {
            strategy,
            shard_count: map.data_groups().len(),
            ranges: map
                .ranges
                .iter()
                .map(|r| RangeView { start: r.range.start.clone(), end: r.range.end.clone(), group: r.group })
                .collect(),
        },
        epoch: map.epoch,
        replication_factor: map.replication_factor,
    }))
}
