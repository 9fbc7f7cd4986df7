//! `GET /api/v1/admin/stats`, `/alerts`, `/dashboard`, `/storage`, `/config`
//! and `/activities`: the monitoring service's answers (`services/monitoring.rs`).

use axum::Json;
use axum::extract::State;

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::monitoring::{self, ActivityList, Dashboard, EffectiveConfig, RaisedAlerts, Stats, StorageReport};
use crate::state::AppState;

/// `GET /api/v1/admin/stats`: request counts and latency percentiles since
/// each router started, in total, by model and by route, merged across the
/// routers (`scope: "cluster"`): this router's live figures and what every
/// other router published to the meta group within the last ten minutes
/// (each publishes every 5 s; `routers` lists whose figures are in). When the
/// meta group does not answer, this router's figures alone (`scope:
/// "router"`). `last_minute` is this router's.
pub async fn stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<Stats>, ApiError> {
    Ok(Json(monitoring::stats(&state).await?))
}

/// `GET /api/v1/admin/alerts`: node unreachable, group without a leader (both
/// critical), replica lagging by 1000+ entries, this router's 5xx rate over 5 %
/// in the last minute, a data filesystem under 10 % free (critical under 5 %),
/// a node using over 90 % of its machine's memory (warnings), a node leaving (info); raised from the
/// cluster's state when asked, so an alert clears as soon as its cause does.
pub async fn alerts(State(state): State<AppState>, _caller: Caller) -> Result<Json<RaisedAlerts>, ApiError> {
    Ok(Json(monitoring::alerts(&state).await?))
}

/// `GET /api/v1/admin/config` (admins): the effective configuration — file,
/// environment and defaults merged — of this router and of every node of the
/// map, every secret (password, secret, passphrase, token, key) redacted. A
/// node that does not answer is listed with its error.
pub async fn config(State(state): State<AppState>, _caller: Caller) -> Result<Json<EffectiveConfig>, ApiError> {
    Ok(Json(monitoring::config(&state).await?))
}

/// `GET /api/v1/admin/dashboard`: one summary for a UI — health (`unavailable`
/// when a group has no leader, `degraded` with any other warning or critical
/// alert, else `healthy`), nodes up of total, groups without a leader, the last
/// minute's request rate, error rate and latency on this router, storage and
/// memory the nodes use, and the active alerts.
pub async fn dashboard(State(state): State<AppState>, _caller: Caller) -> Result<Json<Dashboard>, ApiError> {
    Ok(Json(monitoring::dashboard(&state).await?))
}

/// `GET /api/v1/admin/storage`: bytes per model and per node, measured by each
/// node from RocksDB (approximate sizes of each model's key ranges, compressed
/// as stored, memtables flushed first), with each group's Raft log and stored
/// snapshot, and the files under each node's data directory. Every replica
/// counts on its own node, so `models` sums all copies.
pub async fn storage(State(state): State<AppState>, _caller: Caller) -> Result<Json<StorageReport>, ApiError> {
    Ok(Json(monitoring::storage(&state).await?))
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
    Ok(Json(monitoring::activities(&state, p.limit.unwrap_or(monitoring::DEFAULT_ACTIVITIES), p.kind).await?))
}
