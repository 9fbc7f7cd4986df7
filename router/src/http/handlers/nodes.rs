//! `GET /api/v1/admin/nodes` and `GET /api/v1/admin/nodes/{node_id}/logs`: every
//! node of the cluster map with the facts it reports about itself (asked when the
//! request comes), and the newest lines of one node's own log.
//!
//! `POST /api/v1/admin/nodes/{node_id}/restart` restarts a node's process and
//! reports, by consistency level, when it is back. `POST .../drain` moves every
//! leadership off a node; `DELETE /api/v1/admin/nodes/{node_id}` then takes a
//! drained node out of every group and out of the cluster map (see
//! `docs/operations.md`). `POST /api/v1/admin/nodes` adds a node and moves
//! data-group replicas to it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::meta::{ClusterMap, NodeInfo, NodeState};
use tessera_api::placement::{LeadershipView, drain_done, join_moves, next_replica_move, replica_load};
use tessera_api::rpc::{Consistency, StatusReply};
use tessera_api::{GroupId, NodeId};

use super::{QueryParams, ReadPrefs};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// Lines `logs` returns when `lines` is not given.
const DEFAULT_LOG_LINES: u32 = 100;
/// Most lines one `logs` call returns (what a node keeps).
const MAX_LOG_LINES: u32 = 5_000;

/// `GET /api/v1/admin/nodes`: each node's address, state, the groups it hosts
/// and leads, how far its replicas trail their leaders, its disk and memory,
/// uptime and version; how evenly leadership and data replicas are spread
/// over the active nodes, and the replica move in flight (`replica_move`).
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
                    "id": node.id, "address": node.addr, "state": node.state.as_str(), "reachable": true,
                    "groups_hosted": hosted, "groups_led": led, "applied_lag": lag,
                    "disk_used_bytes": s.disk_bytes, "memory_used_bytes": s.memory_bytes,
                    "disk_free_bytes": s.disk_free_bytes, "disk_total_bytes": s.disk_total_bytes,
                    "memory_total_bytes": s.memory_total_bytes,
                    "uptime_secs": s.uptime_ms / 1000, "version": s.version,
                    "wire_version": {"current": s.wire_version, "min": s.min_wire_version},
                })
            }
            Err(e) => {
                led_by.insert(node.id, 0);
                json!({
                    "id": node.id, "address": node.addr, "state": node.state.as_str(), "reachable": false,
                    "error": e.to_string(), "groups_hosted": placed_groups(map.as_ref(), node), "groups_led": [],
                    "applied_lag": null, "disk_used_bytes": null, "memory_used_bytes": null,
                    "uptime_secs": null, "version": null,
                })
            }
        })
        .collect();
    let replicas = map.as_ref().map(replica_load).unwrap_or_default();
    let spread = json!({
        "groups_led": led_by.iter().map(|(id, n)| (id.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "max_led": led_by.values().max(), "min_led": led_by.values().min(),
        "data_replicas": replicas.iter().map(|(id, n)| (id.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "max_replicas": replicas.values().max(), "min_replicas": replicas.values().min(),
    });
    let moving = map.as_ref().and_then(|m| m.moving).map(|mv| json!({"group": mv.group, "from": mv.from, "to": mv.to}));
    Ok(Json(json!({"nodes": nodes, "count": nodes.len(), "spread": spread, "replica_move": moving})))
}

/// The groups the cluster map places on `node` (for a node that did not answer).
fn placed_groups(map: Option<&tessera_api::meta::ClusterMap>, node: &NodeInfo) -> Vec<GroupId> {
    map.map(|m| m.groups.iter().filter(|g| g.members.contains(&node.id)).map(|g| g.id).collect()).unwrap_or_default()
}

/// `?lines=` of the logs route.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct LogsParams {
    lines: Option<u32>,
}

/// Answer of a node's log tail.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct NodeLogs {
    node_id: u64,
    count: usize,
    /// Oldest first.
    lines: Vec<String>,
}

/// `GET /api/v1/admin/nodes/{node_id}/logs?lines=`: the newest lines (100 by
/// default, at most 5000) of that node's log, read from the node; 404 for a
/// node the cluster does not have, 503 when it does not answer.
pub async fn logs(
    State(state): State<AppState>,
    _caller: Caller,
    Path(node_id): Path<String>,
    QueryParams(p): QueryParams<LogsParams>,
) -> Result<Json<NodeLogs>, ApiError> {
    let lines = p.lines.unwrap_or(DEFAULT_LOG_LINES);
    if !(1..=MAX_LOG_LINES).contains(&lines) {
        return Err(ApiError::BadRequest(format!("lines must be 1 to {MAX_LOG_LINES}")));
    }
    let node = find_node(&state, &node_id)?;
    let lines = state.cluster.node_logs(&node, lines).await?;
    Ok(Json(NodeLogs { node_id: node.id, count: lines.len(), lines }))
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
#[derive(schemars::JsonSchema, Deserialize)]
pub struct LifecycleParams {
    #[schemars(pattern(r"^\s*([Oo][Nn][Ee]|[Qq][Uu][Oo][Rr][Uu][Mm]|[Aa][Ll][Ll])\s*$"))]
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
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    lifecycle_body(&body)?;
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let node = find_node(&state, &node_id)?;
    let asked = Instant::now();
    let before = status_of(&state, node.id).await?.map_err(|e| ApiError::Unavailable(format!("node {} does not answer: {e}", node.id)))?;
    state.cluster.restart_node(&node, None).await?;
    if consistency == Consistency::One {
        return Ok((StatusCode::ACCEPTED, Json(json!({"node_id": node.id, "restarting": true, "consistency": "one"}))));
    }
    wait_back(&state, &node, asked, consistency).await?;
    let level = if consistency == Consistency::All { "all" } else { "quorum" };
    Ok((
        StatusCode::OK,
        Json(json!({
            "node_id": node.id, "restarted": true, "consistency": level,
            "back_after_ms": asked.elapsed().as_millis() as u64, "uptime_before_secs": before.uptime_ms / 1000,
        })),
    ))
}

/// Waits until `node`, asked to restart at `asked`, answers as a new process
/// (its uptime is shorter than the time since then) and has what
/// `consistency` asks (see [`restart`]); answers its status then. 504
/// `STILL_PENDING` after [`RESTART_TIMEOUT`].
pub(crate) async fn wait_back(
    state: &AppState,
    node: &NodeInfo,
    asked: Instant,
    consistency: Consistency,
) -> Result<StatusReply, ApiError> {
    let restarted = |s: &StatusReply| Duration::from_millis(s.uptime_ms) < asked.elapsed();
    // For `all`: what the leaders had applied when the node was first seen back.
    let mut targets: Option<HashMap<GroupId, u64>> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let statuses = state.cluster.node_statuses().await?;
        let (pending, back) = match statuses.iter().find(|(n, _)| n.id == node.id).map(|(_, s)| s) {
            Some(Ok(s)) if restarted(s) => {
                let targets = targets.get_or_insert_with(|| leaders_applied(&statuses));
                (missing_after_restart(s, targets, consistency), Some(s.clone()))
            }
            Some(Ok(_)) => (vec!["the node has not stopped yet".to_string()], None),
            _ => (vec!["the node is not answering yet".to_string()], None),
        };
        if let (true, Some(status)) = (pending.is_empty(), back) {
            return Ok(status);
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
}

/// The consistency of a lifecycle call: `?consistency=`, else `X-Consistency`, else quorum.
fn lifecycle_consistency(p: &LifecycleParams, prefs: &ReadPrefs) -> Result<Consistency, ApiError> {
    match p.consistency.as_deref() {
        Some(c) => {
            crate::state::parse_consistency(c).ok_or_else(|| ApiError::BadRequest("consistency must be one of: one, quorum, all".into()))
        }
        None => Ok(prefs.consistency),
    }
}

/// A lifecycle call's body: none or `{}` (any field is refused). The body is
/// read whole before the answer, so a refused call does not cut the client's
/// connection while it is still sending.
pub(crate) fn lifecycle_body(body: &[u8]) -> Result<(), ApiError> {
    match body_object(body)? {
        Some(fields) if !fields.is_empty() => {
            let name = fields.keys().next().map(String::as_str).unwrap_or_default();
            Err(ApiError::BadRequest(format!("unknown field {name:?}: this call takes no body, or {{}}")))
        }
        _ => Ok(()),
    }
}

/// The JSON object of a body (`None` for an empty body); 400 for anything else.
fn body_object(body: &[u8]) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => Ok(Some(fields)),
        Ok(_) => Err(ApiError::BadRequest("the request body must be a JSON object".into())),
        Err(e) => Err(ApiError::BadRequest(format!("invalid JSON body: {e}"))),
    }
}

/// How long an added node may take to answer at its address.
const NEW_NODE_GRACE: Duration = Duration::from_secs(5);

/// How long drain and remove calls wait for what their consistency asks.
const LIFECYCLE_TIMEOUT: Duration = Duration::from_secs(60);

/// `POST /api/v1/admin/nodes/{node_id}/drain`: records the node as `draining` in
/// the meta group (one node leaves at a time: 409 while another is leaving, or
/// for the only node), then tells the node, which stops campaigning and stops
/// serving as leader; each group it led elects another leader once its
/// followers' leader lease runs out (about two election timeouts). `one`
/// answers 202 once the meta group recorded the drain; `quorum` (the default)
/// once no node reports it as the leader of any group and each of those groups
/// has another leader; `all` once every replica of those groups knows the new
/// leader. Draining a node that does not answer is allowed (it drains itself
/// when it comes back: nodes follow their state in the map). The placement
/// driver on the meta leader then moves each data replica the node holds (the
/// meta group's last) to the active node with the fewest replicas among those
/// its group lacks, once the node no longer leads that group; in a three-node
/// cluster none can move, and the groups shrink when the node is removed. The
/// drain is recorded, so it goes on after a router or meta leader crash.
/// `one` answers 202 once `draining` is recorded; `quorum` (the default) once
/// the leaderships left and every replica that can move has moved (504
/// naming what is pending when nothing moves for a minute); `all` also waits
/// until every member of every moved group applied its new membership.
pub async fn drain(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(node_id): Path<String>,
    QueryParams(p): QueryParams<LifecycleParams>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    lifecycle_body(&body)?;
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let node = find_node(&state, &node_id)?;
    if node.state == NodeState::Removing {
        return Err(ApiError::Conflict(format!("node {} is being removed", node.id)));
    }
    let asked = Instant::now();
    let before = known_map(&state)?;
    record_state(&state, node.id, NodeState::Draining).await?;
    let reached = state.cluster.drain_node(&node).await;
    let led_when_asked = reached.as_ref().ok().cloned();
    let base = json!({
        "node_id": node.id, "state": "draining", "node_reached": reached.is_ok(),
        "groups_led_when_asked": led_when_asked,
    });
    if consistency == Consistency::One {
        return Ok((StatusCode::ACCEPTED, Json(with(base, json!({"consistency": "one", "drained": false, "replicas_moved": 0})))));
    }
    let what = format!("drain of node {}", node.id);
    settle(&state, &what, asked, |statuses| drain_pending(statuses, node.id, consistency)).await?;
    let after = await_driver(&state, &what, |map| {
        if map.node(node.id).is_none_or(|n| n.state != NodeState::Draining) {
            return vec![format!("node {} is no longer draining", node.id)];
        }
        if drain_done(map, node.id) {
            return Vec::new();
        }
        let left: Vec<String> = map.groups.iter().filter(|g| g.members.contains(&node.id)).map(|g| g.id.to_string()).collect();
        vec![format!("node {} still holds replicas of groups {} that can move", node.id, left.join(", "))]
    })
    .await?;
    let moves = moves_between(&before, &after, node.id);
    if consistency == Consistency::All && !moves.is_empty() {
        let groups: BTreeMap<GroupId, u64> = moves.iter().map(|(g, _, _)| (*g, 0)).collect();
        settle(&state, &what, asked, |statuses| move_pending(statuses, &after, &groups)).await?;
    }
    let level = if consistency == Consistency::All { "all" } else { "quorum" };
    Ok((
        StatusCode::OK,
        Json(with(
            base,
            json!({
                "consistency": level, "drained": true, "replicas_moved": moves.len(),
                "moves": moves.iter().map(|(g, from, to)| json!({"group": g, "from": from, "to": to})).collect::<Vec<_>>(),
                "took_ms": asked.elapsed().as_millis() as u64,
            }),
        )),
    ))
}

/// The replica moves that took `before` to `after` and involved `node`, as
/// `(group, from, to)`: groups it joined (from the member that left) or left
/// (to the member that joined).
fn moves_between(before: &ClusterMap, after: &ClusterMap, node: NodeId) -> Vec<(GroupId, NodeId, NodeId)> {
    let mut moves = Vec::new();
    for g in &after.groups {
        let Some(old) = before.groups.iter().find(|b| b.id == g.id) else { continue };
        let (was, is) = (old.members.contains(&node), g.members.contains(&node));
        if was == is {
            continue;
        }
        let other =
            if is { old.members.iter().find(|m| !g.members.contains(m)) } else { g.members.iter().find(|m| !old.members.contains(m)) };
        let Some(&other) = other else { continue };
        moves.push(if is { (g.id, other, node) } else { (g.id, node, other) });
    }
    moves
}

/// The cluster map this router knows, or 503.
fn known_map(state: &AppState) -> Result<ClusterMap, ApiError> {
    state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))
}

/// Waits until the cluster map (refreshed every 200 ms) leaves `pending` with
/// nothing to name, and answers it: the placement driver on the meta leader
/// does the work. 504 `STILL_PENDING` naming what is missing once the map has
/// not changed for [`LIFECYCLE_TIMEOUT`] (no move made progress).
async fn await_driver(state: &AppState, what: &str, pending: impl Fn(&ClusterMap) -> Vec<String>) -> Result<ClusterMap, ApiError> {
    let mut still: Option<(u64, Instant)> = None;
    loop {
        state.cluster.refresh().await;
        let map = known_map(state)?;
        let missing = pending(&map);
        if missing.is_empty() {
            return Ok(map);
        }
        match still {
            Some((epoch, since)) if epoch == map.epoch => {
                if since.elapsed() > LIFECYCLE_TIMEOUT {
                    return Err(ApiError::StillPending(format!(
                        "{what}: no progress for {}s: {}",
                        LIFECYCLE_TIMEOUT.as_secs(),
                        missing.join("; ")
                    )));
                }
            }
            _ => still = Some((map.epoch, Instant::now())),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The body of the node lifecycle calls (restart, drain, rebalance): none, or `{}`
/// (documentation only: the handlers refuse any field with their own message).
#[derive(schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NoBody {}

/// The body of `POST /api/v1/admin/cluster/shutdown` (documentation only).
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
pub struct ShutdownBody {
    /// Must be `true`: the call stops every node and this router.
    confirm: bool,
}

/// The body of `POST /api/v1/admin/nodes`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddNodeBody {
    node_id: NodeId,
    address: String,
}

/// `POST /api/v1/admin/nodes` `{"node_id": 4, "address": "host:port"}`: adds a
/// node to the cluster, as etcd's `member add`. The node must run already,
/// started with `SERVICE_INITIAL_CLUSTER_STATE=existing` (it takes the cluster's
/// map from a peer and hosts nothing yet); 409 when it does not answer at that
/// address as that id, when the id is taken, or while another node joins or
/// leaves. The meta group records it as `joining`; then the placement driver
/// on the meta leader moves data-group replicas to it one at a time until it
/// holds its share (total replicas / nodes): the new node starts an empty
/// replica, the group's leader adds it as a learner and waits until it caught
/// up, the group commits voters with the new node in place of the most loaded
/// node's replica, the map records the members, and the old replica is
/// stopped and deleted. Last the driver records the node `active` and evens
/// out the leaderships. Every step is recorded, so an addition goes on after a
/// router or meta leader crash. `one` answers 202 once `joining` is recorded;
/// `quorum` (the default) once the node is `active` (504 naming what is
/// pending when nothing moves for a minute); `all` also waits until every
/// member of every moved group applied its new membership and no old replica
/// remains.
pub async fn add(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<LifecycleParams>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let usage = r#"the body names the node: {"node_id": 4, "address": "host:port"}"#;
    let fields = body_object(&body)?.ok_or_else(|| ApiError::BadRequest(usage.into()))?;
    let req: AddNodeBody = serde_json::from_value(Value::Object(fields)).map_err(|e| ApiError::BadRequest(format!("{e}; {usage}")))?;
    if req.node_id == 0 || req.node_id > (1 << 53) {
        return Err(ApiError::BadRequest("node_id must be a positive integer".into()));
    }
    let valid_address =
        req.address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !valid_address || req.address.chars().any(char::is_whitespace) {
        return Err(ApiError::BadRequest(format!("address {:?} is not of the form host:port", req.address)));
    }
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    if let Some(existing) = map.node(req.node_id) {
        if existing.addr != req.address {
            return Err(ApiError::Conflict(format!("node {} is already in the cluster at {}", existing.id, existing.addr)));
        }
        if existing.state != NodeState::Joining {
            return Err(ApiError::Conflict(format!("node {} is already in the cluster ({})", existing.id, existing.state.as_str())));
        }
    }
    let node = NodeInfo { id: req.node_id, addr: req.address.clone(), state: NodeState::Joining };
    // A node started a moment ago may still be taking the map from its peers.
    let deadline = Instant::now() + NEW_NODE_GRACE;
    let status = loop {
        match state.cluster.status_at(&node).await {
            Ok(status) => break status,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(e) => {
                return Err(ApiError::Conflict(format!(
                    "node {} does not answer at {}: start it first with SERVICE_INITIAL_CLUSTER_STATE=existing ({e})",
                    node.id, node.addr
                )));
            }
        }
    };
    if status.node_id != node.id {
        return Err(ApiError::Conflict(format!("the node at {} is node {}, not node {}", node.addr, status.node_id, node.id)));
    }
    let cluster_ids: std::collections::BTreeSet<u64> =
        state.cluster.node_statuses().await?.iter().filter_map(|(_, s)| s.as_ref().ok().map(|s| s.cluster_id)).collect();
    if status.cluster_id != 0 && !cluster_ids.is_empty() && !cluster_ids.contains(&status.cluster_id) {
        return Err(ApiError::Conflict(format!(
            "the node at {} belongs to cluster {:016x}, not this one: start it on an empty data directory",
            node.addr, status.cluster_id
        )));
    }
    let asked = Instant::now();
    if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::AddNode { node: node.clone() }).await? {
        return Err(r.into());
    }
    if consistency == Consistency::One {
        return Ok((
            StatusCode::ACCEPTED,
            Json(json!({"node_id": node.id, "address": node.addr, "state": "joining", "consistency": "one", "added": false})),
        ));
    }
    let what = format!("addition of node {}", node.id);
    let after = await_driver(&state, &what, |map| match map.node(node.id).map(|n| n.state) {
        Some(NodeState::Active) => Vec::new(),
        Some(NodeState::Joining) => {
            let held = map.groups.iter().filter(|g| g.id != tessera_api::META_GROUP && g.members.contains(&node.id)).count();
            vec![format!(
                "node {} is still joining: it holds {held} data replicas, {} more to move",
                node.id,
                join_moves(map, node.id).len()
            )]
        }
        other => vec![format!("node {} is {} now", node.id, other.map_or("gone", |s| s.as_str()))],
    })
    .await?;
    let moves = moves_between(&map, &after, node.id);
    if consistency == Consistency::All {
        let groups: BTreeMap<GroupId, u64> = moves.iter().map(|(g, _, _)| (*g, 0)).collect();
        settle(&state, &what, asked, |statuses| move_pending(statuses, &after, &groups)).await?;
    }
    let level = if consistency == Consistency::All { "all" } else { "quorum" };
    Ok((
        StatusCode::OK,
        Json(json!({
            "node_id": node.id, "address": node.addr, "state": "active", "added": true, "consistency": level,
            "replicas_moved": moves.len(),
            "moves": moves.iter().map(|(g, from, to)| json!({"group": g, "from": from, "to": to})).collect::<Vec<_>>(),
            "took_ms": asked.elapsed().as_millis() as u64,
        })),
    ))
}

/// Leadership moves until the spread is even: each planned from fresh
/// statuses (active or joining, reachable nodes only), at most `2 × groups` attempts; a
/// move whose election another voter won still counts as made. Answers the
/// moves made (with the leader each ended with).
async fn rebalance_leaders(state: &AppState) -> Result<Vec<Value>, ApiError> {
    let mut made = Vec::new();
    let mut attempts = 0;
    // The map as the meta group has it now (a node just added is active there).
    state.cluster.refresh().await;
    let settle_by = Instant::now() + Duration::from_secs(10);
    loop {
        let statuses = state.cluster.node_statuses().await?;
        // A joining node leads only groups it is a voter of already (and the
        // map may not show a node just added as active yet).
        let view = LeadershipView::from_statuses(statuses.iter().filter_map(|(n, s)| {
            let may_lead = matches!(n.state, NodeState::Active | NodeState::Joining);
            s.as_ref().ok().map(|s| (n.id, may_lead, s))
        }));
        let view = match state.cluster.map() {
            Some(map) => view.with_preferences(&map),
            None => view,
        };
        // Groups between leaders (a membership change just moved one) are
        // waited for: a plan without them would count their leaders' load wrong.
        let groups = state.cluster.map().map_or(0, |m| m.groups.len());
        if view.leaders.len() < groups && Instant::now() < settle_by {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let next = view.next_move();
        tracing::debug!(?view, ?next, "leadership spread");
        let Some(mv) = next else { return Ok(made) };
        attempts += 1;
        if attempts > 2 * view.leaders.len().max(1) {
            tracing::warn!(?mv, "leader rebalancing stopped after {} attempts", attempts - 1);
            return Ok(made);
        }
        let node = |id: NodeId| statuses.iter().find(|(n, _)| n.id == id).map(|(n, _)| n.clone());
        let (Some(from), Some(to)) = (node(mv.from), node(mv.to)) else { return Ok(made) };
        match state.cluster.transfer_leader(mv.group, &from, &to).await {
            Ok(leader) => {
                tracing::info!(group = mv.group, from = mv.from, to = mv.to, ?leader, "moved a group's leadership");
                made.push(json!({"group": mv.group, "from": mv.from, "to": mv.to, "leader": leader}));
            }
            Err(e) => tracing::warn!(group = mv.group, from = mv.from, to = mv.to, "moving the leadership failed: {e}"),
        }
    }
}

/// Replica moves until every active node holds within one as many data-group
/// replicas as any other (`tessera_api::placement::next_replica_move`): each
/// planned from the map and recorded in the meta group (`MetaOp::BeginMove`);
/// the placement driver on the meta leader makes the steps of a recorded move,
/// and this call waits until the map shows it done. A move in flight (the
/// driver's own, or one a crash interrupted) is waited for first. Answers the
/// moves made.
async fn rebalance_replicas(state: &AppState) -> Result<Vec<Value>, ApiError> {
    let mut made = Vec::new();
    for _ in 0..64 {
        state.cluster.refresh().await;
        let map = known_map(state)?;
        let mv = match map.moving {
            Some(mv) => mv,
            None => {
                let Some(mv) = next_replica_move(&map) else { break };
                if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::BeginMove(mv)).await? {
                    return Err(r.into());
                }
                mv
            }
        };
        let what = format!("move of group {}'s replica from node {} to node {}", mv.group, mv.from, mv.to);
        let after = await_driver(state, &what, |map| match map.moving {
            Some(m) if m == mv => vec![format!("the placement driver has not finished it (is a meta leader elected?)")],
            _ => Vec::new(),
        })
        .await?;
        let done = after.groups.iter().any(|g| g.id == mv.group && g.members.contains(&mv.to) && !g.members.contains(&mv.from));
        made.push(json!({"group": mv.group, "from": mv.from, "to": mv.to, "moved": done}));
    }
    Ok(made)
}

/// `POST /api/v1/admin/rebalance`: moves data-group replicas until every active
/// node holds within one as many as any other (as the placement driver does),
/// then moves group leaderships until every active
/// node leads within one as many groups as any other (openraft 0.9 has no
/// leader transfer: the leader stops heartbeating for the group and the chosen
/// voter campaigns once the others' leases ran out, an election timeout). Each
/// move makes the group refuse writes for about that long; clients' retries
/// through the router do not see it. Answers the moves and the spread after them.
pub async fn rebalance(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    lifecycle_body(&body)?;
    let started = Instant::now();
    let replica_moves = rebalance_replicas(&state).await?;
    let moves = rebalance_leaders(&state).await?;
    let statuses = state.cluster.node_statuses().await?;
    let mut led_by: BTreeMap<NodeId, usize> = BTreeMap::new();
    for (node, status) in statuses.iter().filter(|(n, _)| n.state == NodeState::Active) {
        let led = status.iter().flat_map(|s| &s.groups).filter(|g| g.leader_id == node.id).count();
        led_by.insert(node.id, led);
    }
    let replicas = state.cluster.map().as_ref().map(replica_load).unwrap_or_default();
    Ok(Json(json!({
        "leaders_moved": moves.len(), "moves": moves,
        "replicas_moved": replica_moves.len(), "replica_moves": replica_moves,
        "spread": {
            "groups_led": led_by.iter().map(|(id, n)| (id.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "max_led": led_by.values().max(), "min_led": led_by.values().min(),
            "data_replicas": replicas.iter().map(|(id, n)| (id.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "max_replicas": replicas.values().max(), "min_replicas": replicas.values().min(),
        },
        "took_ms": started.elapsed().as_millis() as u64,
    })))
}

/// The body of `PUT /api/v1/admin/groups/{group_id}/leader`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreferredLeaderBody {
    /// The node that should lead the group, or `null` to clear the preference.
    #[schemars(required, extend("nullable" = true))]
    node_id: Option<NodeId>,
}

/// `PUT /api/v1/admin/groups/{group_id}/leader` `{"node_id": 2}` (or `null` to
/// clear): records the group's preferred leader in the cluster map (404 for an
/// unknown group, 409 for a node that holds no replica of it). Leadership
/// rebalancing (this call, `POST /api/v1/admin/rebalance`, the placement
/// driver) then moves the group's leadership to that node whenever it is an
/// active voter, and never moves it away to even the spread. `one` answers 202
/// once the preference is recorded; `quorum` (the default) and `all` once the
/// node leads the group (504 `STILL_PENDING` after 60 s, e.g. while it is down).
pub async fn set_preferred_leader(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(group_id): Path<String>,
    QueryParams(p): QueryParams<LifecycleParams>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let group: GroupId = group_id.parse().map_err(|_| ApiError::NotFound(format!("group {group_id} does not exist")))?;
    let usage = r#"the body names the node: {"node_id": 2}, or {"node_id": null} to clear the preference"#;
    let fields = body_object(&body)?.ok_or_else(|| ApiError::BadRequest(usage.into()))?;
    if !fields.contains_key("node_id") {
        return Err(ApiError::BadRequest(usage.into()));
    }
    let req: PreferredLeaderBody =
        serde_json::from_value(Value::Object(fields)).map_err(|e| ApiError::BadRequest(format!("{e}; {usage}")))?;
    let asked = Instant::now();
    if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::SetPreferredLeader { group, node: req.node_id }).await? {
        return Err(r.into());
    }
    state.cluster.refresh().await;
    let answer = json!({"group": group, "preferred_leader": req.node_id});
    let Some(node) = req.node_id.filter(|_| consistency != Consistency::One) else {
        let status = if consistency == Consistency::One { StatusCode::ACCEPTED } else { StatusCode::OK };
        return Ok((status, Json(answer)));
    };
    let mut moves = Vec::new();
    loop {
        let statuses = state.cluster.node_statuses().await?;
        let leads = statuses
            .iter()
            .any(|(n, s)| n.id == node && s.as_ref().is_ok_and(|s| s.groups.iter().any(|g| g.group_id == group && g.leader_id == node)));
        if leads {
            break;
        }
        if asked.elapsed() > LIFECYCLE_TIMEOUT {
            return Err(ApiError::StillPending(format!(
                "moving group {group}'s leadership to node {node}: still pending after {}s (the preference is recorded; \
                 rebalancing moves it once node {node} can lead)",
                LIFECYCLE_TIMEOUT.as_secs()
            )));
        }
        moves.extend(rebalance_leaders(&state).await?);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((StatusCode::OK, Json(with(answer, json!({"leader": node, "moves": moves, "took_ms": asked.elapsed().as_millis() as u64})))))
}

/// What an addition still lacks for `all`: a member of a moved group that has
/// not applied its new membership, or a node still hosting a moved-away replica.
fn move_pending(
    statuses: &[(NodeInfo, Result<StatusReply, crate::cluster::ClusterError>)],
    map: &tessera_api::meta::ClusterMap,
    indexes: &BTreeMap<GroupId, u64>,
) -> Vec<String> {
    let mut pending = Vec::new();
    for (&group, &index) in indexes {
        let members: Vec<NodeId> = map.groups.iter().find(|g| g.id == group).map(|g| g.members.clone()).unwrap_or_default();
        for (info, status) in statuses {
            let Ok(s) = status else {
                if members.contains(&info.id) {
                    pending.push(format!("node {} does not answer", info.id));
                }
                continue;
            };
            let hosted = s.groups.iter().find(|g| g.group_id == group);
            match hosted {
                Some(g) if members.contains(&s.node_id) => {
                    let mut voters = g.voters.clone();
                    voters.sort_unstable();
                    let mut wanted = members.clone();
                    wanted.sort_unstable();
                    if g.last_applied < index || voters != wanted {
                        pending.push(format!("node {} has not applied group {group}'s new membership", s.node_id));
                    }
                }
                Some(_) => pending.push(format!("node {} still hosts a replica of group {group}", s.node_id)),
                None if members.contains(&s.node_id) => pending.push(format!("node {} does not host group {group}", s.node_id)),
                None => {}
            }
        }
    }
    pending
}

/// Asks the nodes for their status until `pending` finds nothing missing; 504
/// `STILL_PENDING` naming what is missing once [`LIFECYCLE_TIMEOUT`] has passed since `asked`.
async fn settle(
    state: &AppState,
    what: &str,
    asked: Instant,
    pending: impl Fn(&[(NodeInfo, Result<StatusReply, crate::cluster::ClusterError>)]) -> Vec<String>,
) -> Result<(), ApiError> {
    loop {
        let missing = pending(&state.cluster.node_statuses().await?);
        if missing.is_empty() {
            return Ok(());
        }
        if asked.elapsed() > LIFECYCLE_TIMEOUT {
            return Err(ApiError::StillPending(format!(
                "{what}: still pending after {}s: {}",
                LIFECYCLE_TIMEOUT.as_secs(),
                missing.join("; ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a drain of `node` still lacks: groups a node reports it leads, groups
/// without a leader; for `all`, replicas that do not know their new leader yet.
fn drain_pending(
    statuses: &[(NodeInfo, Result<StatusReply, crate::cluster::ClusterError>)],
    node: NodeId,
    consistency: Consistency,
) -> Vec<String> {
    let mut pending = Vec::new();
    let mut led_elsewhere: BTreeMap<GroupId, bool> = BTreeMap::new();
    for s in statuses.iter().filter_map(|(_, s)| s.as_ref().ok()) {
        for g in &s.groups {
            let known = led_elsewhere.entry(g.group_id).or_default();
            *known |= g.leader_id != 0 && g.leader_id != node;
            if s.node_id == node && g.leader_id == node {
                pending.push(format!("node {node} still leads group {}", g.group_id));
            }
        }
    }
    pending.extend(led_elsewhere.iter().filter(|(_, known)| !**known).map(|(g, _)| format!("group {g} has no leader yet")));
    if consistency == Consistency::All {
        for s in statuses.iter().filter_map(|(_, s)| s.as_ref().ok()) {
            for g in s.groups.iter().filter(|g| g.leader_id == 0 || g.leader_id == node) {
                pending.push(format!("node {} does not know a new leader of group {}", s.node_id, g.group_id));
            }
        }
    }
    pending
}

/// `DELETE /api/v1/admin/nodes/{node_id}`: takes a drained node out of the
/// cluster. 409 when the node was not drained, still leads a group, when
/// another node is leaving, or when a group would lose its last replica or
/// could not commit the change (a remaining member does not answer). The node
/// is marked `removing`, each group it is in commits a membership without it
/// (joint consensus, through the group's leader), the map drops it, and the
/// node records a tombstone and stops (it will not start on that data
/// directory again). `one` answers 202 once `removing` is recorded and goes on
/// in the background (repeating the call resumes it); `quorum` (the default)
/// once every group committed its new membership and the map dropped the node;
/// `all` once every remaining replica of those groups applied it.
pub async fn remove(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(node_id): Path<String>,
    QueryParams(p): QueryParams<LifecycleParams>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let node = find_node(&state, &node_id)?;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    if node.state == NodeState::Active {
        return Err(ApiError::Conflict(format!("node {0} is active: drain it first (POST /api/v1/admin/nodes/{0}/drain)", node.id)));
    }
    let statuses = state.cluster.node_statuses().await?;
    let answering: Vec<NodeId> = statuses.iter().filter(|(_, s)| s.is_ok()).map(|(n, _)| n.id).collect();
    let led: Vec<GroupId> = statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .flat_map(|s| s.groups.iter().filter(|g| g.leader_id == node.id && s.node_id == node.id).map(|g| g.group_id))
        .collect();
    if !led.is_empty() {
        return Err(ApiError::Conflict(format!("node {} still leads groups {led:?}: wait until its drain finished", node.id)));
    }
    let affected: Vec<(GroupId, Vec<NodeId>)> = map
        .groups
        .iter()
        .filter(|g| g.members.contains(&node.id))
        .map(|g| (g.id, g.members.iter().copied().filter(|m| *m != node.id).collect()))
        .collect();
    for (group, rest) in &affected {
        if rest.is_empty() {
            return Err(ApiError::Conflict(format!("node {} holds the last replica of group {group}", node.id)));
        }
        if let Some(silent) = rest.iter().find(|m| !answering.contains(m)) {
            return Err(ApiError::Conflict(format!(
                "group {group} would keep members {rest:?}, and node {silent} does not answer: the group could not commit \
                 a membership without node {}; bring node {silent} back first",
                node.id
            )));
        }
    }
    let asked = Instant::now();
    record_state(&state, node.id, NodeState::Removing).await?;
    if consistency == Consistency::One {
        let (state, leaving) = (state.clone(), node.clone());
        tokio::spawn(async move {
            if let Err(e) = remove_from_groups(&state, &leaving, &affected).await {
                tracing::warn!(node = leaving.id, "removing the node: {e}; repeat DELETE /api/v1/admin/nodes/{} to resume", leaving.id);
            }
        });
        return Ok((StatusCode::ACCEPTED, Json(json!({"node_id": node.id, "state": "removing", "consistency": "one", "removed": false}))));
    }
    let (indexes, retired) = remove_from_groups(&state, &node, &affected).await?;
    if consistency == Consistency::All {
        let what = format!("removal of node {}", node.id);
        settle(&state, &what, asked, |statuses| removal_pending(statuses, node.id, &indexes)).await?;
    }
    let level = if consistency == Consistency::All { "all" } else { "quorum" };
    Ok((
        StatusCode::OK,
        Json(json!({
            "node_id": node.id, "removed": true, "consistency": level, "node_stopped": retired,
            "groups": indexes.keys().collect::<Vec<_>>(), "took_ms": asked.elapsed().as_millis() as u64,
        })),
    ))
}

/// Commits a membership without `node` in each affected group (data groups
/// first, the meta group last), drops it from the map, and tells it to stop.
/// Answers each group's membership log index and whether the node was told.
async fn remove_from_groups(
    state: &AppState,
    node: &NodeInfo,
    affected: &[(GroupId, Vec<NodeId>)],
) -> Result<(BTreeMap<GroupId, u64>, bool), ApiError> {
    let mut order: Vec<GroupId> = affected.iter().map(|(g, _)| *g).collect();
    order.sort_by_key(|g| (*g == tessera_api::META_GROUP, *g));
    let mut indexes = BTreeMap::new();
    for group in order {
        indexes.insert(group, state.cluster.remove_voter(group, node.id).await?);
    }
    if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::RemoveNode { node: node.id }).await? {
        return Err(r.into());
    }
    let retired = state.cluster.retire_node(node).await.is_ok();
    state.cluster.refresh().await;
    tracing::info!(node = node.id, retired, "node removed from the cluster");
    Ok((indexes, retired))
}

/// What a removal still lacks for `all`: a remaining replica that has not
/// applied its group's membership without `node`.
fn removal_pending(
    statuses: &[(NodeInfo, Result<StatusReply, crate::cluster::ClusterError>)],
    node: NodeId,
    indexes: &BTreeMap<GroupId, u64>,
) -> Vec<String> {
    let mut pending = Vec::new();
    for (info, status) in statuses.iter().filter(|(n, _)| n.id != node) {
        let Ok(s) = status else {
            pending.push(format!("node {} does not answer", info.id));
            continue;
        };
        for g in s.groups.iter().filter(|g| indexes.contains_key(&g.group_id)) {
            if g.voters.contains(&node) || g.last_applied < indexes[&g.group_id] {
                pending.push(format!("node {} has not applied group {}'s membership without node {node}", s.node_id, g.group_id));
            }
        }
    }
    pending
}

/// Records `node`'s lifecycle state in the meta group and refreshes the view.
async fn record_state(state: &AppState, node: NodeId, to: NodeState) -> Result<(), ApiError> {
    if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::SetNodeState { node, state: to }).await? {
        return Err(r.into());
    }
    state.cluster.refresh().await;
    Ok(())
}

/// `base` with the fields of `more` added.
fn with(mut base: Value, more: Value) -> Value {
    if let (Some(b), Value::Object(m)) = (base.as_object_mut(), more) {
        b.extend(m);
    }
    base
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
        } else if consistency == Consistency::All && leader_applied.get(&g.group_id).is_some_and(|l| *l > g.last_applied) {
            missing.push(format!("group {} applied {} of {}", g.group_id, g.last_applied, leader_applied[&g.group_id]));
        }
    }
    missing
}

/// `POST /api/v1/admin/cluster/shutdown {"confirm": true}` (admins; without
/// the confirmation, or with any other field, 400 and nothing stops): every node of the map stops
/// as on SIGTERM (its groups shut down, its store flushed, the process exits 0;
/// nothing acknowledged is lost, and the next start comes back with all data),
/// then this router stops serving once this answer is sent. Other routers keep
/// running and answer 503 until nodes are back. 503 when no node took the
/// request; the answer lists the nodes that did and the ones that did not answer.
pub async fn shutdown_cluster(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let confirmed = body_object(&body)?.is_some_and(|f| f.len() == 1 && f.get("confirm") == Some(&Value::Bool(true)));
    if !confirmed {
        return Err(ApiError::BadRequest(
            "this stops every node and this router: send {\"confirm\": true} (and nothing else) to shut the cluster down".into(),
        ));
    }
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    // Flush what this router noted (this call included) while the meta group still answers.
    let _ = state.activities.flush(&*state.cluster).await;
    let calls = map.nodes.iter().map(|n| async { (n.id, state.cluster.shutdown_node(n).await) });
    let mut stopping = Vec::new();
    let mut unreachable = Vec::new();
    for (id, result) in futures::future::join_all(calls).await {
        match result {
            Ok(()) => stopping.push(json!(id)),
            Err(e) => unreachable.push(json!({"node_id": id, "error": e.to_string()})),
        }
    }
    if stopping.is_empty() {
        return Err(ApiError::Unavailable("no node took the shutdown request".into()));
    }
    tracing::warn!(?stopping, "cluster shutdown requested: the nodes stop, then this router");
    // A graceful stop: this request (in flight) is answered before the router exits.
    state.shutdown.send_replace(true);
    Ok(Json(json!({"shutting_down": true, "nodes_stopping": stopping, "nodes_unreachable": unreachable, "router_stopping": true})))
}
