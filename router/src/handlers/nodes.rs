//! `GET /api/v1/admin/nodes` and `GET /api/v1/admin/nodes/{node_id}/logs`: every
//! node of the cluster map with the facts it reports about itself (asked when the
//! request comes), and the newest lines of one node's own log.
//!
//! The lifecycle calls of the same resource (restart, drain, remove) are not
//! served yet: the placement is fixed at bootstrap (see `docs/operations.md`).

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::meta::NodeInfo;
use tessera_api::{GroupId, NodeId};

use super::QueryParams;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Lines `logs` returns when `lines` is not given.
const DEFAULT_LOG_LINES: u32 = 100;
/// Most lines one `logs` call returns (what a node keeps).
const MAX_LOG_LINES: u32 = 5_000;

/// `GET /api/v1/admin/nodes`: each node's address, state, the groups it hosts
/// and leads, how far its replicas trail their leaders, its disk and memory,
/// uptime and version; and how evenly leadership is spread.
pub async fn list(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let map = state.cluster.map();
    // Each group's applied index on its leader, as the leader reported it.
    let leader_applied: HashMap<GroupId, u64> = statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .flat_map(|s| s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| (g.group_id, g.last_applied)))
        .collect();
    let mut led_by: BTreeMap<NodeId, usize> = BTreeMap::new();
    let nodes: Vec<Value> = statuses
        .iter()
        .map(|(node, status)| match status {
            Ok(s) => {
                let hosted: Vec<GroupId> = s.groups.iter().map(|g| g.group_id).collect();
                let led: Vec<GroupId> = s.groups.iter().filter(|g| g.leader_id == node.id).map(|g| g.group_id).collect();
                let lag = s
                    .groups
                    .iter()
                    .filter_map(|g| leader_applied.get(&g.group_id).map(|l| l.saturating_sub(g.last_applied)))
                    .max()
                    .unwrap_or(0);
                led_by.insert(node.id, led.len());
                json!({
                    "id": node.id, "address": node.addr, "state": "active", "reachable": true,
                    "groups_hosted": hosted, "groups_led": led, "applied_lag": lag,
                    "disk_used_bytes": s.disk_bytes, "memory_used_bytes": s.memory_bytes,
                    "uptime_secs": s.uptime_ms / 1000, "version": s.version,
                })
            }
            Err(e) => {
                led_by.insert(node.id, 0);
                json!({
                    "id": node.id, "address": node.addr, "state": "active", "reachable": false,
                    "error": e.to_string(), "groups_hosted": placed_groups(map.as_ref(), node), "groups_led": [],
                    "applied_lag": null, "disk_used_bytes": null, "memory_used_bytes": null,
                    "uptime_secs": null, "version": null,
                })
            }
        })
        .collect();
    let spread = json!({
        "groups_led": led_by.iter().map(|(id, n)| (id.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "max_led": led_by.values().max(), "min_led": led_by.values().min(),
    });
    Ok(Json(json!({"nodes": nodes, "count": nodes.len(), "spread": spread})))
}

/// The groups the cluster map places on `node` (for a node that did not answer).
fn placed_groups(map: Option<&tessera_api::meta::ClusterMap>, node: &NodeInfo) -> Vec<GroupId> {
    map.map(|m| m.groups.iter().filter(|g| g.members.contains(&node.id)).map(|g| g.id).collect()).unwrap_or_default()
}

/// `?lines=` of the logs route.
#[derive(Deserialize)]
pub struct LogsParams {
    lines: Option<u32>,
}

/// `GET /api/v1/admin/nodes/{node_id}/logs?lines=`: the newest lines (100 by
/// default, at most 5000) of that node's log, read from the node; 404 for a
/// node the cluster does not have, 503 when it does not answer.
pub async fn logs(
    State(state): State<AppState>,
    _caller: Caller,
    Path(node_id): Path<String>,
    QueryParams(p): QueryParams<LogsParams>,
) -> Result<Json<Value>, ApiError> {
    let lines = p.lines.unwrap_or(DEFAULT_LOG_LINES);
    if !(1..=MAX_LOG_LINES).contains(&lines) {
        return Err(ApiError::BadRequest(format!("lines must be 1 to {MAX_LOG_LINES}")));
    }
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let node = node_id
        .parse::<NodeId>()
        .ok()
        .and_then(|id| map.nodes.iter().find(|n| n.id == id))
        .ok_or_else(|| ApiError::NotFound(format!("node {node_id} does not exist")))?;
    let lines = state.cluster.node_logs(node, lines).await?;
    Ok(Json(json!({"node_id": node.id, "count": lines.len(), "lines": lines})))
}
