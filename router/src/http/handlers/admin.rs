//! `GET /api/v1/admin/cluster`: nodes, their reachability and WAL group-commit
//! counters, and each group's leader, term and members, freshly asked of every node.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The cluster as this router sees it.
pub async fn cluster(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    state.cluster.refresh().await;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let (leaders, reachable) = state.cluster.leaders_and_liveness();
    let wal = state.cluster.wal_stats();
    let terms = state.cluster.terms();
    let identities = state.cluster.identities();
    let nodes: Vec<Value> = map
        .nodes
        .iter()
        .map(|n| {
            let (syncs, entries) = wal.get(&n.id).copied().unwrap_or_default();
            let hex = |v: u64| (v != 0).then(|| format!("{v:016x}"));
            let (cluster_id, incarnation) = identities.get(&n.id).copied().unwrap_or_default();
            json!({
                "id": n.id,
                "addr": n.addr,
                "cluster_id": hex(cluster_id),
                "incarnation": hex(incarnation),
                "reachable": reachable.get(&n.id).copied().unwrap_or(false),
                "wal": {"syncs": syncs, "log_entries_synced": entries},
            })
        })
        .collect();
    let groups: Vec<Value> = map
        .groups
        .iter()
        .map(|g| {
            json!({
                "id": g.id, "leader": leaders.get(&g.id), "term": terms.get(&g.id), "members": g.members,
                "preferred_leader": g.preferred_leader,
            })
        })
        .collect();
    Ok(Json(json!({
        "nodes": nodes,
        "groups": groups,
        // How the router reaches the nodes: mutual TLS, or plaintext asked for by name.
        "transport": {"insecure": state.config.cluster.insecure, "mutual_tls": !state.config.cluster.insecure},
        "sharding": {
            "strategy": map.strategy,
            "shard_count": map.data_groups().len(),
            // Range sharding: the key-value ranges in key order (`end` null: to the end).
            "ranges": map.ranges.iter().map(|r| json!({"start": r.range.start, "end": r.range.end, "group": r.group})).collect::<Vec<_>>(),
        },
        "epoch": map.epoch,
        "replication_factor": map.replication_factor,
    })))
}
