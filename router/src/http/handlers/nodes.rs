//! `GET /api/v1/admin/nodes` and `GET /api/v1/admin/nodes/{node_id}/logs`: every
//! node of the cluster map with the facts it reports about itself (asked when the
//! request comes), and the newest lines of one node's own log.
//!
//! `POST /api/v1/admin/nodes/{node_id}/restart` restarts a node's process and
//! reports, by consistency level, when it is back. `POST .../drain` moves every
//! leadership off a node; `DELETE /api/v1/admin/nodes/{node_id}` then takes a
//! drained node out of every group and out of the cluster map (see
//! `docs/operations.md`). `POST /api/v1/admin/nodes` adds a node and moves
//! data-group replicas to it. The work is the node lifecycle service's
//! (`services/nodes.rs`); these parse, call it and choose the status.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use tessera_api::rpc::Consistency;
use tessera_api::{GroupId, NodeId};

use super::{QueryParams, ReadPrefs};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::nodes::{self, Addition, Drain, NodeList, NodeLogs, PreferredLeader, Rebalance, Removal, Restart, Shutdown};
use crate::state::AppState;

/// `GET /api/v1/admin/nodes`: each node's address, state, the groups it hosts
/// and leads, how far its replicas trail their leaders, its disk and memory,
/// uptime and version; how evenly leadership and data replicas are spread
/// over the active nodes, and the replica move in flight (`replica_move`).
pub async fn list(State(state): State<AppState>, _caller: Caller) -> Result<Json<NodeList>, ApiError> {
    Ok(Json(nodes::list(&state).await?))
}

/// `?lines=` of the logs route.
#[derive(schemars::JsonSchema, Deserialize)]
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
) -> Result<Json<NodeLogs>, ApiError> {
    Ok(Json(nodes::logs(&state, &node_id, p.lines.unwrap_or(nodes::DEFAULT_LOG_LINES)).await?))
}

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
) -> Result<(StatusCode, Json<Restart>), ApiError> {
    lifecycle_body(&body)?;
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let answer = nodes::restart(&state, &node_id, consistency).await?;
    Ok((status_for(consistency), Json(answer)))
}

/// 202 for a call answered once recorded (`one`), 200 once done.
fn status_for(consistency: Consistency) -> StatusCode {
    if consistency == Consistency::One { StatusCode::ACCEPTED } else { StatusCode::OK }
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
) -> Result<(StatusCode, Json<Drain>), ApiError> {
    lifecycle_body(&body)?;
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let answer = nodes::drain(&state, &node_id, consistency).await?;
    Ok((status_for(consistency), Json(answer)))
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
) -> Result<(StatusCode, Json<Addition>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let usage = r#"the body names the node: {"node_id": 4, "address": "host:port"}"#;
    let fields = body_object(&body)?.ok_or_else(|| ApiError::BadRequest(usage.into()))?;
    let req: AddNodeBody = serde_json::from_value(Value::Object(fields)).map_err(|e| ApiError::BadRequest(format!("{e}; {usage}")))?;
    let answer = nodes::add(&state, req.node_id, &req.address, consistency).await?;
    Ok((status_for(consistency), Json(answer)))
}

/// `POST /api/v1/admin/rebalance`: moves data-group replicas until every active
/// node holds within one as many as any other (as the placement driver does),
/// then moves group leaderships until every active
/// node leads within one as many groups as any other (openraft 0.9 has no
/// leader transfer: the leader stops heartbeating for the group and the chosen
/// voter campaigns once the others' leases ran out, an election timeout). Each
/// move makes the group refuse writes for about that long; clients' retries
/// through the router do not see it. Answers the moves and the spread after them.
pub async fn rebalance(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Rebalance>, ApiError> {
    lifecycle_body(&body)?;
    Ok(Json(nodes::rebalance(&state).await?))
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
) -> Result<(StatusCode, Json<PreferredLeader>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let group: GroupId = group_id.parse().map_err(|_| ApiError::NotFound(format!("group {group_id} does not exist")))?;
    let usage = r#"the body names the node: {"node_id": 2}, or {"node_id": null} to clear the preference"#;
    let fields = body_object(&body)?.ok_or_else(|| ApiError::BadRequest(usage.into()))?;
    if !fields.contains_key("node_id") {
        return Err(ApiError::BadRequest(usage.into()));
    }
    let req: PreferredLeaderBody =
        serde_json::from_value(Value::Object(fields)).map_err(|e| ApiError::BadRequest(format!("{e}; {usage}")))?;
    let answer = nodes::set_preferred_leader(&state, group, req.node_id, consistency).await?;
    // Recorded only (`one`, or a cleared preference under `one`): 202.
    Ok((status_for(consistency), Json(answer)))
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
) -> Result<(StatusCode, Json<Removal>), ApiError> {
    let consistency = lifecycle_consistency(&p, &prefs)?;
    let answer = nodes::remove(&state, &node_id, consistency).await?;
    Ok((status_for(consistency), Json(answer)))
}

/// `POST /api/v1/admin/cluster/shutdown {"confirm": true}` (admins; without
/// the confirmation, or with any other field, 400 and nothing stops): every node of the map stops
/// as on SIGTERM (its groups shut down, its store flushed, the process exits 0;
/// nothing acknowledged is lost, and the next start comes back with all data),
/// then this router stops serving once this answer is sent. Other routers keep
/// running and answer 503 until nodes are back. 503 when no node took the
/// request; the answer lists the nodes that did and the ones that did not answer.
pub async fn shutdown_cluster(State(state): State<AppState>, _caller: Caller, body: axum::body::Bytes) -> Result<Json<Shutdown>, ApiError> {
    let confirmed = body_object(&body)?.is_some_and(|f| f.len() == 1 && f.get("confirm") == Some(&Value::Bool(true)));
    if !confirmed {
        return Err(ApiError::BadRequest(
            "this stops every node and this router: send {\"confirm\": true} (and nothing else) to shut the cluster down".into(),
        ));
    }
    Ok(Json(nodes::shutdown_cluster(&state).await?))
}
