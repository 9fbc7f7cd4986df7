//! Node lifecycle: listing the nodes, a node's log tail, restarts, drains,
//! additions, removals, rebalancing, preferred leaders and the cluster's
//! shutdown. Every call records what it changes in the meta group and waits,
//! by the caller's consistency level, until the cluster shows it done; the
//! placement driver on the meta leader makes the replica moves (see
//! `docs/operations.md`). No HTTP here: the handlers (`http/handlers/nodes.rs`)
//! parse, call one of these and choose the status.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;
use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::meta::{ClusterMap, NodeInfo, NodeState};
use tessera_api::placement::{LeadershipView, drain_done, join_moves, next_replica_move, replica_load};
use tessera_api::rpc::{Consistency, StatusReply};
use tessera_api::{GroupId, NodeId};

use crate::cluster::ClusterError;
use crate::error::ApiError;
use crate::state::AppState;

/// Lines `logs` returns when `lines` is not given.
pub const DEFAULT_LOG_LINES: u32 = 100;
/// Most lines one `logs` call returns (what a node keeps).
pub const MAX_LOG_LINES: u32 = 5_000;
/// How long a restart call waits for the node to be back.
const RESTART_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an added node may take to answer at its address.
const NEW_NODE_GRACE: Duration = Duration::from_secs(5);
/// How long drain and remove calls wait for what their consistency asks.
const LIFECYCLE_TIMEOUT: Duration = Duration::from_secs(60);

type Statuses = [(NodeInfo, Result<StatusReply, ClusterError>)];

/// The consistency level a lifecycle call answered at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    One,
    Quorum,
    All,
}

impl From<Consistency> for Level {
    fn from(c: Consistency) -> Level {
        match c {
            Consistency::One => Level::One,
            Consistency::All => Level::All,
            _ => Level::Quorum,
        }
    }
}

/// The router-to-node wire contract versions a node serves.
#[derive(Serialize, schemars::JsonSchema)]
pub struct WireVersions {
    pub current: u32,
    pub min: u32,
}

/// One node of `GET /api/v1/admin/nodes`. A node that does not answer has
/// `reachable: false`, its `error`, the groups the map places on it, and
/// `null` for what only it could tell.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeStatus {
    pub id: NodeId,
    pub address: String,
    /// `joining`, `active`, `draining` or `removing`.
    pub state: String,
    /// Where the node runs as the map records it (`cluster.locality`, e.g.
    /// `zone=a,rack=3`); absent when not configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locality: Option<String>,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub groups_hosted: Vec<GroupId>,
    pub groups_led: Vec<GroupId>,
    /// How far its most lagging replica trails its leader (entries).
    pub applied_lag: Option<u64>,
    pub disk_used_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_free_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_total_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<u64>,
    pub uptime_secs: Option<u64>,
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire_version: Option<WireVersions>,
}

/// How evenly leaderships and data replicas are spread (by node id).
#[derive(Serialize, schemars::JsonSchema)]
pub struct Spread {
    pub groups_led: BTreeMap<String, usize>,
    pub max_led: Option<usize>,
    pub min_led: Option<usize>,
    pub data_replicas: BTreeMap<String, usize>,
    pub max_replicas: Option<usize>,
    pub min_replicas: Option<usize>,
}

impl Spread {
    fn of(led_by: &BTreeMap<NodeId, usize>, replicas: &BTreeMap<NodeId, usize>) -> Spread {
        Spread {
            groups_led: led_by.iter().map(|(id, n)| (id.to_string(), *n)).collect(),
            max_led: led_by.values().max().copied(),
            min_led: led_by.values().min().copied(),
            data_replicas: replicas.iter().map(|(id, n)| (id.to_string(), *n)).collect(),
            max_replicas: replicas.values().max().copied(),
            min_replicas: replicas.values().min().copied(),
        }
    }
}

/// A data-group replica that moved (or is moving) between two nodes; `from`
/// = `to` is a replica added to a group short of its replication factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ReplicaMove {
    pub group: GroupId,
    pub from: NodeId,
    pub to: NodeId,
}

/// `GET /api/v1/admin/nodes`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeList {
    pub nodes: Vec<NodeStatus>,
    pub count: usize,
    pub spread: Spread,
    /// The replica move in flight, if any.
    pub replica_move: Option<ReplicaMove>,
}

/// The newest lines of a node's log.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeLogs {
    pub node_id: NodeId,
    pub count: usize,
    /// Oldest first.
    pub lines: Vec<String>,
}

/// A restart: taken (`one`) or done.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Restart {
    /// The node took the request (`one`, 202).
    Taken { node_id: NodeId, restarting: bool, consistency: Level },
    /// The node is back with what the consistency level asks.
    Done { node_id: NodeId, restarted: bool, consistency: Level, back_after_ms: u64, uptime_before_secs: u64 },
}

/// A drain: recorded (`one`, 202) or done.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Drain {
    pub node_id: NodeId,
    /// Always `draining`.
    pub state: String,
    /// Whether the node answered the drain request (a node that does not
    /// drains itself when it is back).
    pub node_reached: bool,
    pub groups_led_when_asked: Option<Vec<GroupId>>,
    pub consistency: Level,
    pub drained: bool,
    pub replicas_moved: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves: Option<Vec<ReplicaMove>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}

/// An addition: recorded as `joining` (`one`, 202) or done (`active`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct Addition {
    pub node_id: NodeId,
    pub address: String,
    /// `joining` (`one`) or `active`.
    pub state: String,
    pub added: bool,
    pub consistency: Level,
    /// Replicas the node received: moved from another node, or added to a
    /// group short of its replication factor (a move `from` the node itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas_moved: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves: Option<Vec<ReplicaMove>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}

/// A leadership moved by rebalancing.
#[derive(Serialize, schemars::JsonSchema)]
pub struct LeaderMove {
    pub group: GroupId,
    pub from: NodeId,
    pub to: NodeId,
    /// The node that leads the group after the move (another voter may have won).
    pub leader: Option<NodeId>,
}

/// A replica move made by rebalancing.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReplicaMoveMade {
    pub group: GroupId,
    pub from: NodeId,
    pub to: NodeId,
    /// Whether the map shows it done.
    pub moved: bool,
}

/// `POST /api/v1/admin/rebalance`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Rebalance {
    pub leaders_moved: usize,
    pub moves: Vec<LeaderMove>,
    pub replicas_moved: usize,
    pub replica_moves: Vec<ReplicaMoveMade>,
    pub spread: Spread,
    pub took_ms: u64,
}

/// A preferred leader recorded (and, unless `one` or cleared, in place).
#[derive(Serialize, schemars::JsonSchema)]
pub struct PreferredLeader {
    pub group: GroupId,
    pub preferred_leader: Option<NodeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<NodeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves: Option<Vec<LeaderMove>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}

/// A removal: recorded as `removing` (`one`, 202, going on in the background) or done.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Removal {
    pub node_id: NodeId,
    pub removed: bool,
    pub consistency: Level,
    /// `removing` while it goes on (`one`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Whether the node was told to stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_stopped: Option<bool>,
    /// The groups that committed a membership without the node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupId>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}

/// A node that did not take the shutdown request.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Unreachable {
    pub node_id: NodeId,
    pub error: String,
}

/// `POST /api/v1/admin/cluster/shutdown`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Shutdown {
    pub shutting_down: bool,
    pub nodes_stopping: Vec<NodeId>,
    pub nodes_unreachable: Vec<Unreachable>,
    pub router_stopping: bool,
}

/// Every node of the map with the facts it reports about itself (asked now),
/// how evenly leadership and data replicas are spread over the active nodes,
/// and the replica move in flight.
pub async fn list(state: &AppState) -> Result<NodeList, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let map = state.cluster.map();
    let leader_applied = leaders_applied(&statuses);
    let mut led_by: BTreeMap<NodeId, usize> = BTreeMap::new();
    let nodes: Vec<NodeStatus> = statuses
        .iter()
        .map(|(node, status)| match status {
            Ok(s) => {
                let led: Vec<GroupId> = s.groups.iter().filter(|g| g.leader_id == node.id).map(|g| g.group_id).collect();
                let lag = s
                    .groups
                    .iter()
                    .filter_map(|g| leader_applied.get(&g.group_id).map(|l| l.saturating_sub(g.last_applied)))
                    .max()
                    .unwrap_or(0);
                led_by.insert(node.id, led.len());
                NodeStatus {
                    id: node.id,
                    address: node.addr.clone(),
                    state: node.state.as_str().into(),
                    locality: Some(node.locality.clone()).filter(|l| !l.is_empty()),
                    reachable: true,
                    error: None,
                    groups_hosted: s.groups.iter().map(|g| g.group_id).collect(),
                    groups_led: led,
                    applied_lag: Some(lag),
                    disk_used_bytes: Some(s.disk_bytes),
                    memory_used_bytes: Some(s.memory_bytes),
                    disk_free_bytes: Some(s.disk_free_bytes),
                    disk_total_bytes: Some(s.disk_total_bytes),
                    memory_total_bytes: Some(s.memory_total_bytes),
                    uptime_secs: Some(s.uptime_ms / 1000),
                    version: Some(s.version.clone()),
                    wire_version: Some(WireVersions { current: s.wire_version, min: s.min_wire_version }),
                }
            }
            Err(e) => {
                led_by.insert(node.id, 0);
                NodeStatus {
                    id: node.id,
                    address: node.addr.clone(),
                    state: node.state.as_str().into(),
                    locality: Some(node.locality.clone()).filter(|l| !l.is_empty()),
                    reachable: false,
                    error: Some(e.to_string()),
                    groups_hosted: placed_groups(map.as_ref(), node),
                    groups_led: Vec::new(),
                    applied_lag: None,
                    disk_used_bytes: None,
                    memory_used_bytes: None,
                    disk_free_bytes: None,
                    disk_total_bytes: None,
                    memory_total_bytes: None,
                    uptime_secs: None,
                    version: None,
                    wire_version: None,
                }
            }
        })
        .collect();
    let replicas = map.as_ref().map(replica_load).unwrap_or_default();
    let replica_move = map.as_ref().and_then(|m| m.moving).map(|mv| ReplicaMove { group: mv.group, from: mv.from, to: mv.to });
    Ok(NodeList { count: nodes.len(), nodes, spread: Spread::of(&led_by, &replicas), replica_move })
}

/// The groups the cluster map places on `node` (for a node that did not answer).
fn placed_groups(map: Option<&ClusterMap>, node: &NodeInfo) -> Vec<GroupId> {
    map.map(|m| m.groups.iter().filter(|g| g.members.contains(&node.id)).map(|g| g.id).collect()).unwrap_or_default()
}

/// The newest `lines` lines (1 to [`MAX_LOG_LINES`]) of node `node_id`'s log,
/// read from the node; 404 for a node the cluster does not have, 503 when it
/// does not answer.
pub async fn logs(state: &AppState, node_id: &str, lines: u32) -> Result<NodeLogs, ApiError> {
    if !(1..=MAX_LOG_LINES).contains(&lines) {
        return Err(ApiError::BadRequest(format!("lines must be 1 to {MAX_LOG_LINES}")));
    }
    let node = find_node(state, node_id)?;
    let lines = state.cluster.node_logs(&node, lines).await?;
    Ok(NodeLogs { node_id: node.id, count: lines.len(), lines })
}

/// Node `node_id` of the cluster map; 404 for any other id.
pub fn find_node(state: &AppState, node_id: &str) -> Result<NodeInfo, ApiError> {
    let map = known_map(state)?;
    node_id
        .parse::<NodeId>()
        .ok()
        .and_then(|id| map.nodes.into_iter().find(|n| n.id == id))
        .ok_or_else(|| ApiError::NotFound(format!("node {node_id} does not exist")))
}

/// Restarts node `node_id`'s process (its groups stop as on SIGTERM) and
/// waits by `consistency` (see the handler's doc); 503 when the node does not
/// answer before the restart.
pub async fn restart(state: &AppState, node_id: &str, consistency: Consistency) -> Result<Restart, ApiError> {
    let node = find_node(state, node_id)?;
    let asked = Instant::now();
    let before = status_of(state, node.id).await?.map_err(|e| ApiError::Unavailable(format!("node {} does not answer: {e}", node.id)))?;
    state.cluster.restart_node(&node, None).await?;
    if consistency == Consistency::One {
        return Ok(Restart::Taken { node_id: node.id, restarting: true, consistency: Level::One });
    }
    wait_back(state, &node, asked, consistency).await?;
    Ok(Restart::Done {
        node_id: node.id,
        restarted: true,
        consistency: consistency.into(),
        back_after_ms: asked.elapsed().as_millis() as u64,
        uptime_before_secs: before.uptime_ms / 1000,
    })
}

/// Waits until `node`, asked to restart at `asked`, answers as a new process
/// (its uptime is shorter than the time since then) and has what
/// `consistency` asks: a known leader for each of its groups, and for `all`
/// each replica applied as far as its leader had when the node came back.
/// Answers its status then. 504 `STILL_PENDING` after [`RESTART_TIMEOUT`].
pub async fn wait_back(state: &AppState, node: &NodeInfo, asked: Instant, consistency: Consistency) -> Result<StatusReply, ApiError> {
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

/// Records node `node_id` as `draining` (409 while it is being removed), tells
/// it, and waits by `consistency`: `one` once recorded; `quorum` once its
/// leaderships left and every replica that can move has moved (the placement
/// driver moves them); `all` also until every member of every moved group
/// applied its new membership.
pub async fn drain(state: &AppState, node_id: &str, consistency: Consistency) -> Result<Drain, ApiError> {
    let node = find_node(state, node_id)?;
    if node.state == NodeState::Removing {
        return Err(ApiError::Conflict(format!("node {} is being removed", node.id)));
    }
    let asked = Instant::now();
    let before = known_map(state)?;
    record_state(state, node.id, NodeState::Draining).await?;
    let reached = state.cluster.drain_node(&node).await;
    let mut answer = Drain {
        node_id: node.id,
        state: "draining".into(),
        node_reached: reached.is_ok(),
        groups_led_when_asked: reached.ok(),
        consistency: Level::One,
        drained: false,
        replicas_moved: 0,
        moves: None,
        took_ms: None,
    };
    if consistency == Consistency::One {
        return Ok(answer);
    }
    let what = format!("drain of node {}", node.id);
    settle(state, &what, asked, |statuses| drain_pending(statuses, node.id, consistency)).await?;
    let after = await_driver(state, &what, |map| {
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
        let groups: BTreeSet<GroupId> = moves.iter().map(|m| m.group).collect();
        settle(state, &what, asked, |statuses| move_pending(statuses, &after, &groups)).await?;
    }
    answer.consistency = consistency.into();
    answer.drained = true;
    answer.replicas_moved = moves.len();
    answer.moves = Some(moves);
    answer.took_ms = Some(asked.elapsed().as_millis() as u64);
    Ok(answer)
}

/// The replica moves that took `before` to `after` and involved `node`: groups
/// it joined (from the member that left, or from itself when the group gained
/// a replica) or left (to the member that joined).
fn moves_between(before: &ClusterMap, after: &ClusterMap, node: NodeId) -> Vec<ReplicaMove> {
    let mut moves = Vec::new();
    for g in &after.groups {
        let Some(old) = before.groups.iter().find(|b| b.id == g.id) else { continue };
        let (was, is) = (old.members.contains(&node), g.members.contains(&node));
        if was == is {
            continue;
        }
        let other =
            if is { old.members.iter().find(|m| !g.members.contains(m)) } else { g.members.iter().find(|m| !old.members.contains(m)) };
        let Some(&other) = other else {
            // A replica the group was short of, added on the node (nothing moved away).
            if is {
                moves.push(ReplicaMove { group: g.id, from: node, to: node });
            }
            continue;
        };
        moves.push(if is {
            ReplicaMove { group: g.id, from: other, to: node }
        } else {
            ReplicaMove { group: g.id, from: node, to: other }
        });
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

/// Adds node `node_id` at `address` (it must run already, started to join an
/// existing cluster; 409 when it does not answer there as that id, belongs to
/// another cluster, the id is taken, or another node joins or leaves) and
/// waits by `consistency`: `one` once `joining` is recorded; `quorum` once the
/// placement driver moved its share of replicas to it and recorded it
/// `active`; `all` also until every member of every moved group applied its
/// new membership and no old replica remains.
pub async fn add(state: &AppState, node_id: NodeId, address: &str, consistency: Consistency) -> Result<Addition, ApiError> {
    if node_id == 0 || node_id > (1 << 53) {
        return Err(ApiError::BadRequest("node_id must be a positive integer".into()));
    }
    let valid_address = address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !valid_address || address.chars().any(char::is_whitespace) {
        return Err(ApiError::BadRequest(format!("address {address:?} is not of the form host:port")));
    }
    let map = known_map(state)?;
    if let Some(existing) = map.node(node_id) {
        if existing.addr != address {
            return Err(ApiError::Conflict(format!("node {} is already in the cluster at {}", existing.id, existing.addr)));
        }
        if existing.state != NodeState::Joining {
            return Err(ApiError::Conflict(format!("node {} is already in the cluster ({})", existing.id, existing.state.as_str())));
        }
    }
    let mut node = NodeInfo::new(node_id, address).in_state(NodeState::Joining);
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
    // Placed by its failure domain from its first replica on.
    node.locality = status.locality.clone();
    if status.node_id != node.id {
        return Err(ApiError::Conflict(format!("the node at {} is node {}, not node {}", node.addr, status.node_id, node.id)));
    }
    let cluster_ids: BTreeSet<u64> =
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
    let mut answer = Addition {
        node_id: node.id,
        address: node.addr.clone(),
        state: "joining".into(),
        added: false,
        consistency: Level::One,
        replicas_moved: None,
        moves: None,
        took_ms: None,
    };
    if consistency == Consistency::One {
        return Ok(answer);
    }
    let what = format!("addition of node {}", node.id);
    let after = await_driver(state, &what, |map| match map.node(node.id).map(|n| n.state) {
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
        let groups: BTreeSet<GroupId> = moves.iter().map(|m| m.group).collect();
        settle(state, &what, asked, |statuses| move_pending(statuses, &after, &groups)).await?;
    }
    answer.state = "active".into();
    answer.added = true;
    answer.consistency = consistency.into();
    answer.replicas_moved = Some(moves.len());
    answer.moves = Some(moves);
    answer.took_ms = Some(asked.elapsed().as_millis() as u64);
    Ok(answer)
}

/// Leadership moves until the spread is even: each planned from fresh
/// statuses (active or joining, reachable nodes only), at most `2 × groups` attempts; a
/// move whose election another voter won still counts as made. Answers the
/// moves made (with the leader each ended with).
async fn rebalance_leaders(state: &AppState) -> Result<Vec<LeaderMove>, ApiError> {
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
                made.push(LeaderMove { group: mv.group, from: mv.from, to: mv.to, leader });
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
async fn rebalance_replicas(state: &AppState) -> Result<Vec<ReplicaMoveMade>, ApiError> {
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
            Some(m) if m == mv => vec!["the placement driver has not finished it (is a meta leader elected?)".to_string()],
            _ => Vec::new(),
        })
        .await?;
        let moved = after.groups.iter().any(|g| g.id == mv.group && g.members.contains(&mv.to) && !g.members.contains(&mv.from));
        made.push(ReplicaMoveMade { group: mv.group, from: mv.from, to: mv.to, moved });
    }
    Ok(made)
}

/// Moves data-group replicas until every active node holds within one as many
/// as any other, then leaderships likewise; answers the moves and the spread after them.
pub async fn rebalance(state: &AppState) -> Result<Rebalance, ApiError> {
    let started = Instant::now();
    let replica_moves = rebalance_replicas(state).await?;
    let moves = rebalance_leaders(state).await?;
    let statuses = state.cluster.node_statuses().await?;
    let mut led_by: BTreeMap<NodeId, usize> = BTreeMap::new();
    for (node, status) in statuses.iter().filter(|(n, _)| n.state == NodeState::Active) {
        let led = status.iter().flat_map(|s| &s.groups).filter(|g| g.leader_id == node.id).count();
        led_by.insert(node.id, led);
    }
    let replicas = state.cluster.map().as_ref().map(replica_load).unwrap_or_default();
    Ok(Rebalance {
        leaders_moved: moves.len(),
        moves,
        replicas_moved: replica_moves.len(),
        replica_moves,
        spread: Spread::of(&led_by, &replicas),
        took_ms: started.elapsed().as_millis() as u64,
    })
}

/// Records `node` (or none) as `group`'s preferred leader; unless `one` or
/// cleared, waits until that node leads the group, rebalancing leaderships
/// meanwhile (504 `STILL_PENDING` after [`LIFECYCLE_TIMEOUT`]).
pub async fn set_preferred_leader(
    state: &AppState,
    group: GroupId,
    node: Option<NodeId>,
    consistency: Consistency,
) -> Result<PreferredLeader, ApiError> {
    let asked = Instant::now();
    if let Reply::Rejected(r) = state.cluster.meta_write(MetaOp::SetPreferredLeader { group, node }).await? {
        return Err(r.into());
    }
    state.cluster.refresh().await;
    let mut answer = PreferredLeader { group, preferred_leader: node, leader: None, moves: None, took_ms: None };
    let Some(node) = node.filter(|_| consistency != Consistency::One) else {
        return Ok(answer);
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
        moves.extend(rebalance_leaders(state).await?);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    answer.leader = Some(node);
    answer.moves = Some(moves);
    answer.took_ms = Some(asked.elapsed().as_millis() as u64);
    Ok(answer)
}

/// What an addition or drain still lacks for `all`: a member of a moved group
/// that has not applied its new membership, or a node still hosting a
/// moved-away replica.
fn move_pending(statuses: &Statuses, map: &ClusterMap, groups: &BTreeSet<GroupId>) -> Vec<String> {
    let mut pending = Vec::new();
    for &group in groups {
        let members: Vec<NodeId> = map.groups.iter().find(|g| g.id == group).map(|g| g.members.clone()).unwrap_or_default();
        for (info, status) in statuses {
            let Ok(s) = status else {
                if members.contains(&info.id) {
                    pending.push(format!("node {} does not answer", info.id));
                }
                continue;
            };
            match s.groups.iter().find(|g| g.group_id == group) {
                Some(g) if members.contains(&s.node_id) => {
                    let mut voters = g.voters.clone();
                    voters.sort_unstable();
                    let mut wanted = members.clone();
                    wanted.sort_unstable();
                    if voters != wanted {
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
async fn settle(state: &AppState, what: &str, asked: Instant, pending: impl Fn(&Statuses) -> Vec<String>) -> Result<(), ApiError> {
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
fn drain_pending(statuses: &Statuses, node: NodeId, consistency: Consistency) -> Vec<String> {
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

/// Takes drained node `node_id` out of every group and out of the map (409
/// when it is active, still leads a group, holds a group's last replica, or a
/// remaining member does not answer) and waits by `consistency`: `one` once
/// `removing` is recorded (the rest goes on in the background; repeating the
/// call resumes it); `quorum` once every group committed its membership
/// without it and the map dropped it; `all` once every remaining replica
/// applied it.
pub async fn remove(state: &AppState, node_id: &str, consistency: Consistency) -> Result<Removal, ApiError> {
    let node = find_node(state, node_id)?;
    let map = known_map(state)?;
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
    record_state(state, node.id, NodeState::Removing).await?;
    if consistency == Consistency::One {
        let (state, leaving) = (state.clone(), node.clone());
        tokio::spawn(async move {
            if let Err(e) = remove_from_groups(&state, &leaving, &affected).await {
                tracing::warn!(node = leaving.id, "removing the node: {e}; repeat DELETE /api/v1/admin/nodes/{} to resume", leaving.id);
            }
        });
        return Ok(Removal {
            node_id: node.id,
            removed: false,
            consistency: Level::One,
            state: Some("removing".into()),
            node_stopped: None,
            groups: None,
            took_ms: None,
        });
    }
    let (indexes, retired) = remove_from_groups(state, &node, &affected).await?;
    if consistency == Consistency::All {
        let what = format!("removal of node {}", node.id);
        settle(state, &what, asked, |statuses| removal_pending(statuses, node.id, &indexes)).await?;
    }
    Ok(Removal {
        node_id: node.id,
        removed: true,
        consistency: consistency.into(),
        state: None,
        node_stopped: Some(retired),
        groups: Some(indexes.keys().copied().collect()),
        took_ms: Some(asked.elapsed().as_millis() as u64),
    })
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
fn removal_pending(statuses: &Statuses, node: NodeId, indexes: &BTreeMap<GroupId, u64>) -> Vec<String> {
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

/// The status node `id` reports now.
async fn status_of(state: &AppState, id: NodeId) -> Result<Result<StatusReply, ClusterError>, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let found = statuses.into_iter().find(|(n, _)| n.id == id).map(|(_, s)| s);
    found.ok_or_else(|| ApiError::NotFound(format!("node {id} does not exist")))
}

/// Each group's applied index on its leader, as the leaders report it.
fn leaders_applied(statuses: &Statuses) -> HashMap<GroupId, u64> {
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

/// Asks every node of the map to stop as on SIGTERM (after this router's
/// noted activities are flushed) and then this router (its shutdown signal);
/// 503 when no node took the request.
pub async fn shutdown_cluster(state: &AppState) -> Result<Shutdown, ApiError> {
    let map = known_map(state)?;
    // Flush what this router noted (this call included) while the meta group still answers.
    let _ = state.activities.flush(&*state.cluster).await;
    let calls = map.nodes.iter().map(|n| async { (n.id, state.cluster.shutdown_node(n).await) });
    let mut nodes_stopping = Vec::new();
    let mut nodes_unreachable = Vec::new();
    for (id, result) in futures::future::join_all(calls).await {
        match result {
            Ok(()) => nodes_stopping.push(id),
            Err(e) => nodes_unreachable.push(Unreachable { node_id: id, error: e.to_string() }),
        }
    }
    if nodes_stopping.is_empty() {
        return Err(ApiError::Unavailable("no node took the shutdown request".into()));
    }
    tracing::warn!(?nodes_stopping, "cluster shutdown requested: the nodes stop, then this router");
    // A graceful stop: this request (in flight) is answered before the router exits.
    state.shutdown.send_replace(true);
    Ok(Shutdown { shutting_down: true, nodes_stopping, nodes_unreachable, router_stopping: true })
}
