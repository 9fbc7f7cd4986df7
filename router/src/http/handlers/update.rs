//! Rolling update ("over-the-air update plan/execute", spec 01):
//! `POST /api/v1/admin/update/plan` and `POST /api/v1/admin/update/execute`
//! (docs/operations.md "Rolling update").
//!
//! A node is updated by restarting it onto the new binary: it gives up its
//! leaderships, stops its groups gracefully and replaces its process with the
//! new binary (same arguments, environment and pid); the next node waits until
//! it is back and caught up. Followers of the meta group go first, the meta
//! leader last, one node at a time; the first failure stops the update.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use tessera_api::meta::{NodeInfo, NodeState};
use tessera_api::rpc::{Consistency, StatusReply};
use tessera_api::{GroupId, META_GROUP, NodeId};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The body of both calls.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateBody {
    /// Absolute path of the new `tessera-node` on the nodes' machines.
    #[schemars(pattern(r"^/"))]
    binary: Option<String>,
    /// The version the update is for (checked against what the nodes run).
    version: Option<String>,
}

/// One check an update must pass before it starts.
#[derive(Serialize, schemars::JsonSchema, Clone)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

/// One node's place in the update order.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PlannedStep {
    pub step: usize,
    pub node_id: NodeId,
    pub address: String,
    /// The version it runs now.
    pub version: String,
    pub leads_meta_group: bool,
    pub groups_led: Vec<GroupId>,
}

/// The answer of the plan call.
#[derive(Serialize, schemars::JsonSchema)]
pub struct UpdatePlan {
    pub ready: bool,
    pub binary: Option<String>,
    pub order: Vec<PlannedStep>,
    /// What is done to each node, in order.
    pub per_node: Vec<String>,
    pub checks: Vec<Check>,
}

/// A node updated.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeUpdated {
    pub node_id: NodeId,
    pub version_before: String,
    pub version_after: String,
    pub took_ms: u64,
}

/// The node whose update failed.
#[derive(Serialize, schemars::JsonSchema)]
pub struct UpdateFailure {
    pub node_id: NodeId,
    pub error: String,
}

/// The answer of the execute call.
#[derive(Serialize, schemars::JsonSchema)]
pub struct UpdateOutcome {
    pub completed: bool,
    pub binary: String,
    pub updated: Vec<NodeUpdated>,
    /// The first failure, which stopped the update (`null`: none).
    pub failed: Option<UpdateFailure>,
    /// Nodes the update did not reach (after a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_started: Option<Vec<NodeId>>,
    pub took_ms: u64,
}

/// What a plan found: the order, each node's facts, and the checks.
struct Plan {
    order: Vec<(NodeInfo, StatusReply)>,
    checks: Vec<Check>,
    ready: bool,
    binary: Option<String>,
}

fn parse_body(bytes: &[u8]) -> Result<UpdateBody, ApiError> {
    let usage = r#"the body names the new node binary: {"binary": "/opt/tessera/bin/tessera-node"} (and optionally "version")"#;
    let body: UpdateBody = serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(format!("{e}; {usage}")))?;
    if body.binary.as_deref().is_some_and(|b| !b.starts_with('/')) {
        return Err(ApiError::BadRequest("binary must be an absolute path on the nodes' machines".into()));
    }
    if body.binary.is_none() && body.version.is_none() {
        return Err(ApiError::BadRequest(usage.into()));
    }
    Ok(body)
}

/// Orders the nodes (meta followers by id, the meta leader last) and checks
/// that an update can start: every node active and answering, every group led,
/// no replica move in flight.
async fn plan(state: &AppState, body: &UpdateBody) -> Result<Plan, ApiError> {
    state.cluster.refresh().await;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let statuses = state.cluster.node_statuses().await?;
    let mut checks = Vec::new();
    let mut check = |name: &str, ok: bool, detail: String| checks.push(Check { check: name.into(), ok, detail });
    let silent: Vec<u64> = statuses.iter().filter(|(_, s)| s.is_err()).map(|(n, _)| n.id).collect();
    check("every node answers", silent.is_empty(), format!("not answering: {silent:?}"));
    let changing: Vec<String> =
        map.nodes.iter().filter(|n| n.state != NodeState::Active).map(|n| format!("{} {}", n.id, n.state.as_str())).collect();
    check("no node joins or leaves", changing.is_empty(), format!("{changing:?}"));
    check("no replica move in flight", map.moving.is_none(), format!("{:?}", map.moving));
    let led: std::collections::BTreeSet<u64> = statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .flat_map(|s| s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| g.group_id))
        .collect();
    let leaderless: Vec<u64> = map.groups.iter().map(|g| g.id).filter(|g| !led.contains(g)).collect();
    check("every group has a leader", leaderless.is_empty(), format!("without a leader: {leaderless:?}"));
    let meta_leader = statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .find(|s| s.groups.iter().any(|g| g.group_id == META_GROUP && g.leader_id == s.node_id))
        .map(|s| s.node_id);
    let mut order: Vec<(NodeInfo, StatusReply)> = statuses.into_iter().filter_map(|(n, s)| s.ok().map(|s| (n, s))).collect();
    order.sort_by_key(|(n, _)| (Some(n.id) == meta_leader, n.id));
    if let Some(version) = &body.version {
        let behind = order.iter().filter(|(_, s)| &s.version != version).count();
        if body.binary.is_none() {
            check(
                "the binary is given",
                behind == 0,
                format!(
                    "{behind} node(s) do not run {version}: give the path of that release's tessera-node as \"binary\" (this cluster does not download releases)"
                ),
            );
        }
    }
    let ready = checks.iter().all(|c| c.ok);
    Ok(Plan { order, checks, ready, binary: body.binary.clone() })
}

fn plan_view(p: &Plan) -> UpdatePlan {
    let steps = [
        "give up leadership (ReleaseLeadership)",
        "stop the groups and run the new binary",
        "wait until back and caught up (consistency all)",
    ];
    UpdatePlan {
        ready: p.ready,
        binary: p.binary.clone(),
        order: p
            .order
            .iter()
            .enumerate()
            .map(|(i, (n, s))| PlannedStep {
                step: i + 1,
                node_id: n.id,
                address: n.addr.clone(),
                version: s.version.clone(),
                leads_meta_group: s.groups.iter().any(|g| g.group_id == META_GROUP && g.leader_id == s.node_id),
                groups_led: s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| g.group_id).collect(),
            })
            .collect(),
        per_node: steps.iter().map(|s| s.to_string()).collect(),
        checks: p.checks.clone(),
    }
}

/// `POST /api/v1/admin/update/plan` `{"binary": "/path/to/tessera-node", "version"?}`:
/// the order (meta followers first, one node at a time, the meta leader last),
/// the steps per node and the checks; changes nothing.
pub async fn plan_update(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<UpdatePlan>, ApiError> {
    let body = parse_body(&body)?;
    Ok(Json(plan_view(&plan(&state, &body).await?)))
}

/// `POST /api/v1/admin/update/execute` `{"binary": "/path/to/tessera-node"}`:
/// runs the plan (409 with the failed checks when it is not ready): per node,
/// it gives up leadership, restarts onto `binary`, and is waited for until it
/// answers as a new process with every replica caught up; the first failure
/// stops the update and is reported with what was done.
pub async fn execute_update(
    State(state): State<AppState>,
    _caller: Caller,
    body: axum::body::Bytes,
) -> Result<Json<UpdateOutcome>, ApiError> {
    let body = parse_body(&body)?;
    let Some(binary) = body.binary.clone() else {
        return Err(ApiError::BadRequest(r#"execute needs the new binary: {"binary": "/path/to/tessera-node"}"#.into()));
    };
    let plan = plan(&state, &body).await?;
    if !plan.ready {
        let failed: Vec<String> = plan.checks.iter().filter(|c| !c.ok).map(|c| format!("{:?}: {:?}", c.check, c.detail)).collect();
        return Err(ApiError::Conflict(format!("the update cannot start: {}", failed.join("; "))));
    }
    let started = Instant::now();
    let mut updated = Vec::new();
    for (node, before) in &plan.order {
        let asked = Instant::now();
        let step = async {
            let still_leading = state.cluster.release_leadership(node, 20_000).await?;
            if !still_leading.is_empty() {
                tracing::warn!(node = node.id, ?still_leading, "update: the node still leads groups; restarting it anyway");
            }
            state.cluster.restart_node(node, Some(&binary)).await?;
            crate::services::nodes::wait_back(&state, node, asked, Consistency::All).await
        };
        match step.await {
            Ok(after) => {
                tracing::info!(node = node.id, binary, took_ms = asked.elapsed().as_millis() as u64, "update: node back on the new binary");
                updated.push(NodeUpdated {
                    node_id: node.id,
                    version_before: before.version.clone(),
                    version_after: after.version,
                    took_ms: asked.elapsed().as_millis() as u64,
                });
            }
            Err(e) => {
                let not_started = plan.order.iter().skip(updated.len() + 1).map(|(n, _)| n.id).collect();
                return Ok(Json(UpdateOutcome {
                    completed: false,
                    binary,
                    updated,
                    failed: Some(UpdateFailure { node_id: node.id, error: e.to_string() }),
                    not_started: Some(not_started),
                    took_ms: started.elapsed().as_millis() as u64,
                }));
            }
        }
    }
    Ok(Json(UpdateOutcome {
        completed: true,
        binary,
        updated,
        failed: None,
        not_started: None,
        took_ms: started.elapsed().as_millis() as u64,
    }))
}
