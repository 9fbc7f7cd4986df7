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
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::META_GROUP;
use tessera_api::meta::{NodeInfo, NodeState};
use tessera_api::rpc::{Consistency, StatusReply};

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

/// What a plan found: the order, each node's facts, and the checks.
struct Plan {
    order: Vec<(NodeInfo, StatusReply)>,
    checks: Vec<Value>,
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
    let mut check = |name: &str, ok: bool, detail: String| checks.push(json!({"check": name, "ok": ok, "detail": detail}));
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
    let ready = checks.iter().all(|c| c["ok"] == true);
    Ok(Plan { order, checks, ready, binary: body.binary.clone() })
}

fn plan_json(p: &Plan) -> Value {
    let steps = [
        "give up leadership (ReleaseLeadership)",
        "stop the groups and run the new binary",
        "wait until back and caught up (consistency all)",
    ];
    json!({
        "ready": p.ready,
        "binary": p.binary,
        "order": p.order.iter().enumerate().map(|(i, (n, s))| json!({
            "step": i + 1, "node_id": n.id, "address": n.addr, "version": s.version,
            "leads_meta_group": s.groups.iter().any(|g| g.group_id == META_GROUP && g.leader_id == s.node_id),
            "groups_led": s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| g.group_id).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "per_node": steps,
        "checks": p.checks,
    })
}

/// `POST /api/v1/admin/update/plan` `{"binary": "/path/to/tessera-node", "version"?}`:
/// the order (meta followers first, one node at a time, the meta leader last),
/// the steps per node and the checks; changes nothing.
pub async fn plan_update(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let body = parse_body(&body)?;
    Ok(Json(plan_json(&plan(&state, &body).await?)))
}

/// `POST /api/v1/admin/update/execute` `{"binary": "/path/to/tessera-node"}`:
/// runs the plan (409 with the failed checks when it is not ready): per node,
/// it gives up leadership, restarts onto `binary`, and is waited for until it
/// answers as a new process with every replica caught up; the first failure
/// stops the update and is reported with what was done.
pub async fn execute_update(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let body = parse_body(&body)?;
    let Some(binary) = body.binary.clone() else {
        return Err(ApiError::BadRequest(r#"execute needs the new binary: {"binary": "/path/to/tessera-node"}"#.into()));
    };
    let plan = plan(&state, &body).await?;
    if !plan.ready {
        let failed: Vec<String> =
            plan.checks.iter().filter(|c| c["ok"] != true).map(|c| format!("{}: {}", c["check"], c["detail"])).collect();
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
            crate::http::handlers::nodes::wait_back(&state, node, asked, Consistency::All).await
        };
        match step.await {
            Ok(after) => {
                tracing::info!(node = node.id, binary, took_ms = asked.elapsed().as_millis() as u64, "update: node back on the new binary");
                updated.push(json!({
                    "node_id": node.id, "version_before": before.version, "version_after": after.version,
                    "took_ms": asked.elapsed().as_millis() as u64,
                }));
            }
            Err(e) => {
                return Ok(Json(json!({
                    "completed": false, "binary": binary, "updated": updated,
                    "failed": {"node_id": node.id, "error": e.to_string()},
                    "not_started": plan.order.iter().skip(updated.len() + 1).map(|(n, _)| n.id).collect::<Vec<_>>(),
                    "took_ms": started.elapsed().as_millis() as u64,
                })));
            }
        }
    }
    Ok(Json(json!({
        "completed": true, "binary": binary, "updated": updated, "failed": null,
        "took_ms": started.elapsed().as_millis() as u64,
    })))
}
