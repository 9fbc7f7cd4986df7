//! `GET /api/v1/admin/nodes` and `GET /api/v1/admin/nodes/{node_id}/logs`: every
//! node of the cluster map with the facts it reports about itself (asked when the
//! request comes), and the newest lines of one node's own log.
//!
//! `POST /api/v1/admin/nodes/{node_id}/restart` restarts a node's process and
//! reports, by consistency level, when it is back. Drain and remove are not
//! served yet: the placement is fixed at bootstrap (see `docs/operations.md`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use axum::Json;
use axum::http::StatusCode;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::meta::NodeInfo;
use tessera_api::rpc::{Consistency, StatusReply};
use tessera_api::{GroupId, NodeId};

use super::{QueryParams, ReadPrefs};
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
    let leader_applied = leaders_applied(&statuses);
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
    let node = find_node(&state, &node_id)?;
    let lines = state.cluster.node_logs(&node, lines).await?;
    Ok(Json(json!({"node_id": node.id, "count": lines.len(), "lines": lines})))
}

/// Node `node_id` of the cluster map; 404 for any other id.
fn find_node(state: &AppState, node_id: &str) -> Result<NodeInfo, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    node_id
        .parse::<NodeId>()
        .ok()
        .and_then(|id| map.nodes.into_iter().find(|n| n.id == id))
        .ok_or_else(|| ApiError::NotFound(format!("node {node_id} does not exist")))
}

/// How long a restart call waits for the node to be back.
const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// `?consistency=` of lifecycle calls (the `X-Consistency` header works too).
#[derive(Deserialize)]
pub struct LifecycleParams {
    consistency: Option<String>,
}

/// `POST /api/v1/admin/nodes/{node_id}/restart`: the node stops its groups as
/// on SIGTERM and runs again (same binary, arguments and process). The answer
/// waits by consistency: `one` answers 202 once the node took the request;
/// `quorum` (the default) answers 200 once it is back and every group it hosts
/// has a leader it knows; `all` also waits until each of its replicas has
/// applied what its leader had. 504 `STILL_PENDING` names what is missing after
/// 60 s; 503 when the node does not answer before the restart.
pub async fn restart(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(node_id): Path<String>,
    QueryParams(p): QueryParams<LifecycleParams>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let consistency = match p.consistency.as_deref() {
        Some(c) => crate::state::parse_consistency(c)
            .ok_or_else(|| ApiError::BadRequest("consistency must be one of: one, quorum, all".into()))?,
        None => prefs.consistency,
    };
    let node = find_node(&state, &node_id)?;
    let asked = Instant::now();
    let before = status_of(&state, node.id).await?.map_err(|e| ApiError::Unavailable(format!("node {} does not answer: {e}", node.id)))?;
    state.cluster.restart_node(&node).await?;
    if consistency == Consistency::One {
        return Ok((StatusCode::ACCEPTED, Json(json!({"node_id": node.id, "restarting": true, "consistency": "one"}))));
    }
    // The new process started after the call began: its uptime is shorter than the time since then.
    let restarted = |s: &StatusReply| Duration::from_millis(s.uptime_ms) < asked.elapsed();
    // For `all`: what the leaders had applied when the node was first seen back.
    let mut targets: Option<HashMap<GroupId, u64>> = None;
    let mut pending;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let statuses = state.cluster.node_statuses().await?;
        pending = match statuses.iter().find(|(n, _)| n.id == node.id).map(|(_, s)| s) {
            Some(Ok(s)) if restarted(s) => {
                let targets = targets.get_or_insert_with(|| leaders_applied(&statuses));
                missing_after_restart(s, targets, consistency)
            }
            Some(Ok(_)) => vec!["the node has not stopped yet".to_string()],
            _ => vec!["the node is not answering yet".to_string()],
        };
        if pending.is_empty() {
            break;
        }
        if asked.elapsed() > RESTART_TIMEOUT {
            return Err(ApiError::StillPending(format!(
                "node {} restart: still pending after {}s: {}",
                node.id,
                RESTART_TIMEOUT.as_secs(),
                pending.join("; ")
            )));
        }
    }
    let level = if consistency == Consistency::All { "all" } else { "quorum" };
    Ok((
        StatusCode::OK,
        Json(json!({
            "node_id": node.id, "restarted": true, "consistency": level,
            "back_after_ms": asked.elapsed().as_millis() as u64, "uptime_before_secs": before.uptime_ms / 1000,
        })),
    ))
}

/// The status node `id` reports now.
async fn status_of(state: &AppState, id: NodeId) -> Result<Result<StatusReply, crate::cluster::ClusterError>, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let found = statuses.into_iter().find(|(n, _)| n.id == id).map(|(_, s)| s);
    found.ok_or_else(|| ApiError::NotFound(format!("node {id} does not exist")))
}

/// Each group's applied index on its leader, as the leaders report it.
fn leaders_applied(statuses: &[(NodeInfo, Result<StatusReply, crate::cluster::ClusterError>)]) -> HashMap<GroupId, u64> {
    statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .flat_map(|s| s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| (g.group_id, g.last_applied)))
        .collect()
}

/// What a restarted node still lacks for `consistency`: a known leader for each
/// of its groups (`quorum`), and for `all` its replicas applied as far as their
/// leaders had when it came back (`leader_applied`).
fn missing_after_restart(node: &StatusReply, leader_applied: &HashMap<GroupId, u64>, consistency: Consistency) -> Vec<String> {
    let mut missing = Vec::new();
    for g in &node.groups {
        if g.leader_id == 0 {
            missing.push(format!("group {} has no leader it knows", g.group_id));
        } else if consistency == Consistency::All
            && leader_applied.get(&g.group_id).is_some_and(|l| *l > g.last_applied)
        {
            missing.push(format!("group {} applied {} of {}", g.group_id, g.last_applied, leader_applied[&g.group_id]));
        }
    }
    missing
}
