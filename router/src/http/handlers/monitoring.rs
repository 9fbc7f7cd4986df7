//! `GET /api/v1/admin/stats`, `/alerts` and `/dashboard`: what this router
//! measured of its requests, the alerts the cluster's live state raises, and one
//! summary of both for a UI. Every figure is measured when asked (node facts
//! from the nodes, request figures from [`crate::http::request_stats`]).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::http::iso8601_ms;
use tessera_api::meta::{NodeInfo, NodeState};

use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::services::alerts::{AlertInputs, Live};
use crate::services::auth::Caller;
use crate::state::AppState;

/// `GET /api/v1/admin/stats`: request counts and latency percentiles since
/// each router started, in total, by model and by route, merged across the
/// routers (`scope: "cluster"`): this router's live figures and what every
/// other router published to the meta group within the last ten minutes
/// (each publishes every 5 s; `routers` lists whose figures are in). When the
/// meta group does not answer, this router's figures alone (`scope:
/// "router"`). `last_minute` is this router's.
pub async fn stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let published = match state.cluster.meta_read(MetaQuery::RouterStats).await {
        Ok(answer) => typed::pick(answer, shape!(MetaQueryResult::RouterStats)).ok(),
        Err(e) => {
            tracing::debug!("other routers' figures not read: {e}");
            None
        }
    };
    let now = tessera_api::command::now_ms();
    let mut body = match &published {
        Some(records) => {
            let others: Vec<_> = records
                .iter()
                .filter(|r| r.router != state.router_instance && now - r.at_ms <= crate::services::request_stats::MERGE_MAX_AGE_MS)
                .cloned()
                .collect();
            let mut body = state.request_stats.merged_snapshot(&others);
            body["scope"] = json!("cluster");
            let mut routers =
                vec![json!({"router": state.router_instance, "this_router": true, "requests": state.request_stats.requests()})];
            routers.extend(others.iter().map(|r| {
                json!({
                    "router": r.router, "this_router": false, "published_at": iso8601_ms(r.at_ms),
                    "requests": r.routes.iter().map(|x| x.requests).sum::<u64>(),
                })
            }));
            body["routers"] = json!(routers);
            body
        }
        None => {
            let mut body = state.request_stats.snapshot();
            body["scope"] = json!("router");
            body
        }
    };
    body["router_uptime_secs"] = json!(state.started.elapsed().as_secs());
    body["last_minute"] = state.request_stats.last_minute().to_json();
    Ok(Json(body))
}

/// What the nodes say now, and the map they were asked from.
async fn live(state: &AppState) -> Result<Live, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    Ok(Live { map, statuses })
}

/// The alerts raised now, as answered: each with its id and since when this
/// router has seen it.
fn raised(state: &AppState, live: &Live) -> Vec<Value> {
    let inputs = AlertInputs { thresholds: &state.config.alerts, tls: &state.config.tls, last_minute: state.request_stats.last_minute() };
    let alerts = live.alerts(&inputs);
    state
        .alerts
        .raise(alerts, tessera_api::command::now_ms())
        .into_iter()
        .map(|r| {
            json!({
                "id": r.id, "type": r.alert.kind, "severity": r.alert.severity, "subject": r.alert.subject,
                "message": r.alert.message, "since": iso8601_ms(r.since_ms),
            })
        })
        .collect()
}

/// `GET /api/v1/admin/alerts`: node unreachable, group without a leader (both
/// critical), replica lagging by 1000+ entries, this router's 5xx rate over 5 %
/// in the last minute, a data filesystem under 10 % free (critical under 5 %),
/// a node using over 90 % of its machine's memory (warnings), a node leaving (info); raised from the
/// cluster's state when asked, so an alert clears as soon as its cause does.
/// `GET /api/v1/admin/config` (admins): the effective configuration — file,
/// environment and defaults merged — of this router and of every node of the
/// map, every secret (password, secret, passphrase, token, key) redacted. A
/// node that does not answer is listed with its error.
pub async fn config(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let router = serde_json::to_value(&state.config).map_err(|e| ApiError::Internal(e.to_string()))?;
    let nodes: Vec<NodeInfo> = state.cluster.map().map(|m| m.nodes).unwrap_or_default();
    let answers = futures::future::join_all(nodes.iter().map(|n| state.cluster.node_config(n))).await;
    let mut by_node = serde_json::Map::new();
    for (node, answer) in nodes.iter().zip(answers) {
        let shown = match answer.map(|text| serde_json::from_str::<Value>(&text)) {
            Ok(Ok(config)) => json!({"address": node.addr, "config": config}),
            Ok(Err(e)) => json!({"address": node.addr, "error": format!("unreadable answer: {e}")}),
            Err(e) => json!({"address": node.addr, "error": e.to_string()}),
        };
        by_node.insert(node.id.to_string(), shown);
    }
    Ok(Json(json!({
        "router": {"address": state.router_name, "config": tessera_api::runtime::redacted(router)},
        "nodes": by_node,
    })))
}

pub async fn alerts(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let live = live(&state).await?;
    let alerts = raised(&state, &live);
    Ok(Json(json!({"alerts": alerts, "count": alerts.len()})))
}

/// `GET /api/v1/admin/dashboard`: one summary for a UI — health (`unavailable`
/// when a group has no leader, `degraded` with any other warning or critical
/// alert, else `healthy`), nodes up of total, groups without a leader, the last
/// minute's request rate, error rate and latency on this router, storage and
/// memory the nodes use, and the active alerts.
pub async fn dashboard(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let live = live(&state).await?;
    let alerts = raised(&state, &live);
    let count = |severity: &str| alerts.iter().filter(|a| a["severity"] == severity).count();
    let without_leader = live.groups_without_leader();
    let health = if !without_leader.is_empty() {
        "unavailable"
    } else if count("critical") + count("warning") > 0 {
        "degraded"
    } else {
        "healthy"
    };
    let up = live.answered().count();
    let disk: u64 = live.answered().map(|s| s.disk_bytes).sum();
    let memory: u64 = live.answered().map(|s| s.memory_bytes).sum();
    Ok(Json(json!({
        "health": health,
        "nodes": {
            "total": live.statuses.len(), "up": up, "down": live.statuses.len() - up,
            "leaving": live.map.nodes.iter().filter(|n| n.state != NodeState::Active).count(),
        },
        "groups": {"total": live.map.groups.len(), "without_leader": without_leader},
        "requests_last_minute": state.request_stats.last_minute().to_json(),
        "storage": {"disk_used_bytes": disk, "memory_used_bytes": memory},
        "alerts": {
            "active": alerts.len(), "critical": count("critical"), "warning": count("warning"), "info": count("info"),
            "items": alerts,
        },
        "version": env!("CARGO_PKG_VERSION"),
        "wire_version": state.cluster.wire_version(),
        "router_uptime_secs": state.started.elapsed().as_secs(),
    })))
}

/// `GET /api/v1/admin/storage`: bytes per model and per node, measured by each
/// node from RocksDB (approximate sizes of each model's key ranges, compressed
/// as stored, memtables flushed first), with each group's Raft log and stored
/// snapshot, and the files under each node's data directory. Every replica
/// counts on its own node, so `models` sums all copies.
pub async fn storage(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let calls = map.nodes.iter().map(|n| async { (n.clone(), state.cluster.node_storage(n).await) });
    let replies = futures::future::join_all(calls).await;
    let mut models: BTreeMap<String, u64> = BTreeMap::new();
    let (mut data, mut log, mut snapshots, mut disk) = (0u64, 0u64, 0u64, 0u64);
    let mut nodes = Vec::new();
    for (node, reply) in replies {
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                nodes.push(json!({"node_id": node.id, "reachable": false, "error": e.to_string()}));
                continue;
            }
        };
        let mut node_models: BTreeMap<String, u64> = BTreeMap::new();
        let (mut node_log, mut node_snapshots) = (0u64, 0u64);
        let groups: Vec<Value> = reply
            .groups
            .iter()
            .map(|g| {
                for m in &g.models {
                    *node_models.entry(m.model.clone()).or_default() += m.bytes;
                }
                node_log += g.log_bytes;
                node_snapshots += g.snapshot_bytes;
                let by_model: BTreeMap<&str, u64> = g.models.iter().map(|m| (m.model.as_str(), m.bytes)).collect();
                json!({"group_id": g.group_id, "models": by_model, "raft_log_bytes": g.log_bytes, "snapshot_bytes": g.snapshot_bytes})
            })
            .collect();
        let node_data: u64 = node_models.values().sum();
        for (m, b) in &node_models {
            *models.entry(m.clone()).or_default() += b;
        }
        data += node_data;
        log += node_log;
        snapshots += node_snapshots;
        disk += reply.disk_bytes;
        nodes.push(json!({
            "node_id": node.id, "reachable": true, "data_bytes": node_data, "models": node_models,
            "raft_log_bytes": node_log, "snapshot_bytes": node_snapshots, "disk_used_bytes": reply.disk_bytes,
            "groups": groups,
        }));
    }
    Ok(Json(json!({
        "models": models,
        "nodes": nodes,
        "totals": {"data_bytes": data, "raft_log_bytes": log, "snapshot_bytes": snapshots, "disk_used_bytes": disk},
        "measured_at": iso8601_ms(tessera_api::command::now_ms()),
    })))
}

/// `?limit=&type=` of the activities route.
#[derive(schemars::JsonSchema, serde::Deserialize)]
pub struct ActivitiesParams {
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<usize>,
    #[serde(rename = "type")]
    #[schemars(pattern(r"^(query|login|config|admin)$"))]
    kind: Option<String>,
}

/// One recorded activity.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ActivityView {
    id: String,
    /// `query`, `login`, `config` or `admin`.
    #[serde(rename = "type")]
    kind: String,
    timestamp: String,
    user: String,
    method: String,
    route: String,
    status: u16,
    duration_ms: u64,
    detail: String,
    /// The router that served it.
    router: String,
}

/// Answer of `GET /api/v1/admin/activities`, newest first.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ActivityList {
    activities: Vec<ActivityView>,
    count: usize,
}

/// Activities `limit` gives when it is not given, and the most it may ask.
const DEFAULT_ACTIVITIES: usize = 100;

/// `GET /api/v1/admin/activities?limit=&type=`: the newest recorded activities
/// (100 by default, at most the 10 000 the meta group keeps), newest first,
/// of one `type` (`query`, `login`, `config`, `admin`) or all. Every router
/// records what it serves into the meta group; this router writes what it
/// noted before reading, so its own latest requests are listed.
pub async fn activities(
    State(state): State<AppState>,
    _caller: Caller,
    super::QueryParams(p): super::QueryParams<ActivitiesParams>,
) -> Result<Json<ActivityList>, ApiError> {
    let limit = p.limit.unwrap_or(DEFAULT_ACTIVITIES);
    if !(1..=tessera_api::meta::ACTIVITIES_KEEP).contains(&limit) {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {}", tessera_api::meta::ACTIVITIES_KEEP)));
    }
    if let Some(kind) = &p.kind
        && !["query", "login", "config", "admin"].contains(&kind.as_str())
    {
        return Err(ApiError::BadRequest("type must be one of: query, login, config, admin".into()));
    }
    state.activities.flush(&*state.cluster).await?;
    let answer = state.cluster.meta_read(MetaQuery::Activities { limit, kind: p.kind }).await?;
    let records = typed::pick(answer, shape!(MetaQueryResult::Activities))?;
    let activities: Vec<ActivityView> = records
        .iter()
        .map(|r| ActivityView {
            id: r.id.clone(),
            kind: r.kind.clone(),
            timestamp: iso8601_ms(r.at_ms),
            user: r.user.clone(),
            method: r.method.clone(),
            route: r.route.clone(),
            status: r.status,
            duration_ms: r.duration_ms,
            detail: r.detail.clone(),
            router: r.router.clone(),
        })
        .collect();
    Ok(Json(ActivityList { count: activities.len(), activities }))
}
