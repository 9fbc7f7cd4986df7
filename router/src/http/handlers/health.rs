//! `/health`, `/livez`, `/readyz` (no authentication).

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tessera_api::http::Health;

use crate::http::handlers::QueryParams;
use crate::state::AppState;

/// `GET /health`: status, version and uptime in seconds.
pub async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health { status: "ok".into(), version: tessera_api::VERSION.into(), uptime: state.started.elapsed().as_secs() })
}

/// `GET /metrics` (Prometheus text format, no authentication, as the probes):
/// this router's requests by route and status (`tessera_http_requests_total`,
/// `tessera_http_request_duration_seconds`), and what it sees of the cluster,
/// asked at scrape time: each node up or not, each group's leader and term and
/// each replica's applied index and lag.
pub async fn metrics(State(state): State<AppState>) -> (StatusCode, [(axum::http::HeaderName, &'static str); 1], String) {
    let statuses = state.cluster.node_statuses().await.unwrap_or_default();
    let mut leader_applied: std::collections::HashMap<u64, u64> = Default::default();
    for s in statuses.iter().filter_map(|(_, s)| s.as_ref().ok()) {
        for g in s.groups.iter().filter(|g| g.leader_id == s.node_id) {
            leader_applied.insert(g.group_id, g.last_applied);
        }
    }
    for (node, status) in &statuses {
        let id = node.id.to_string();
        metrics::gauge!("tessera_node_up", "node" => id.clone()).set(if status.is_ok() { 1.0 } else { 0.0 });
        let Ok(s) = status else { continue };
        for g in &s.groups {
            let group = g.group_id.to_string();
            metrics::gauge!("tessera_raft_applied_index", "node" => id.clone(), "group" => group.clone()).set(g.last_applied as f64);
            let lag = leader_applied.get(&g.group_id).map_or(0, |l| l.saturating_sub(g.last_applied));
            metrics::gauge!("tessera_raft_replication_lag_entries", "node" => id.clone(), "group" => group.clone()).set(lag as f64);
            if g.leader_id == s.node_id {
                metrics::gauge!("tessera_raft_leader", "group" => group.clone()).set(g.leader_id as f64);
                metrics::gauge!("tessera_raft_term", "group" => group).set(g.term as f64);
            }
        }
    }
    let (leaders, reachable) = state.cluster.leaders_and_liveness();
    let groups = state.cluster.map().map(|m| m.groups).unwrap_or_default();
    let leaderless = groups.iter().filter(|g| !leaders.get(&g.id).is_some_and(|l| reachable.get(l).copied().unwrap_or(false))).count();
    metrics::gauge!("tessera_router_groups_without_leader").set(leaderless as f64);
    let text = tessera_api::runtime::prometheus().render();
    (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The answer of `/livez` and `/readyz`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Probe {
    /// `ok` (live), `ready` or `not ready`.
    pub status: String,
    /// Why the router is not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /livez`: the process is up.
pub async fn livez() -> Json<Probe> {
    Json(Probe { status: "ok".into(), reason: None })
}

/// What `/readyz` checks: `?groups=all` waits for the whole cluster.
#[derive(serde::Deserialize, schemars::JsonSchema, Default)]
pub struct ReadyzParams {
    /// `all`: ready only once every group has a reachable leader too.
    groups: Option<ReadyzGroups>,
}

/// The groups `/readyz` waits for besides the meta group.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyzGroups {
    All,
}

/// `GET /readyz`: 200 once this router can serve (it knows the map, reaches the
/// meta group's leader and start-up provisioning is done); with `?groups=all`
/// also once every data group has a reachable leader. 503 with the reason
/// otherwise. A group without quorum leaves the router ready: its requests
/// answer 503, and `/api/v1/admin/cluster`, alerts and `/metrics` report it.
pub async fn readyz(State(state): State<AppState>, QueryParams(params): QueryParams<ReadyzParams>) -> (StatusCode, Json<Probe>) {
    let checked = match params.groups {
        Some(ReadyzGroups::All) => state.cluster.every_group_led(),
        None => state.cluster.readiness(),
    };
    let reason = match checked {
        Err(reason) => Some(reason),
        Ok(()) if !state.provisioning_done.load(Ordering::Relaxed) => Some("provisioning the admin user from the environment".to_string()),
        Ok(()) => None,
    };
    match reason {
        None => (StatusCode::OK, Json(Probe { status: "ready".into(), reason: None })),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, Json(Probe { status: "not ready".into(), reason: Some(reason) })),
    }
}

/// `GET /api/v1/openapi.json`: the OpenAPI description of every route (see [`crate::http::openapi`]).
pub async fn openapi(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(crate::http::openapi::document(state.decisions()))
}
