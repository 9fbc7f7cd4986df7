//! Time-series routes (spec 01). A metric and all its series live in the data
//! group `ts/<name>` hashes to. Timestamps, aggregations and retention
//! policies are parsed by the engine; its refusals become 400s.
//!
//! Writing to an unknown metric creates it as a `gauge` (no description/unit).
//! Retention runs on each group's leader as the `EnforceRetention` command, on
//! demand (`POST /api/v1/timeseries/retention/enforce`, admin) and from the
//! node's maintenance every `SERVICE_RETENTION_INTERVAL_SECS` (default 60; set
//! on the nodes).

use std::collections::BTreeMap;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::GroupId;
use tessera_api::http::iso8601_ms;
use tessera_api::meta::Role;
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;
use tessera_api::timeseries::{MetricInfo, SeriesSet, TsOp, TsPointIn, TsQuery, TsQueryResult, TsResponse};

use super::{JsonBody, ReadPrefs, require_writer, served_headers};
use crate::cluster::Served;
use crate::cluster::typed::{self, TimeSeries, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::state::AppState;

const MAX_NAME_BYTES: usize = 200;
const MAX_POINTS_PER_WRITE: usize = 100_000;

/// The timeseries routes, merged into the router's table.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .get("/api/v1/timeseries/metrics", P("read:timeseries"), list_metrics)
        .post("/api/v1/timeseries/metrics", P("write:timeseries"), create_metric)
        .get("/api/v1/timeseries/metrics/{name}", P("read:timeseries"), get_metric)
        .put("/api/v1/timeseries/metrics/{name}/retention", P("write:timeseries"), set_retention)
        .post("/api/v1/timeseries/write", P("write:timeseries"), write)
        .post("/api/v1/timeseries/query", P("read:timeseries"), query)
        .post("/api/v1/timeseries/retention/enforce", P("manage:cluster"), enforce)
}

fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if ok { Ok(()) } else { Err(ApiError::BadRequest(format!("metric names are 1 to {MAX_NAME_BYTES} characters of A-Z a-z 0-9 _ . : -"))) }
}

fn group_of(state: &AppState, metric: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Metric(metric))?)
}

/// Proposes `op` to `group`; the reply of the one shape named, with the group and node that served it.
async fn ts_write<T>(
    state: &AppState,
    group: GroupId,
    op: TsOp,
    c: Consistency,
    shape: impl FnOnce(TsResponse) -> Result<T, TsResponse>,
) -> Result<Served<T>, ApiError> {
    typed::write_as::<TimeSeries, T>(&*state.cluster, group, op, c, shape).await
}

/// Asks `group` with the caller's consistency; the answer of the one shape named, with who served it.
async fn ts_read<T>(
    state: &AppState,
    group: GroupId,
    q: TsQuery,
    prefs: &ReadPrefs,
    shape: impl FnOnce(TsQueryResult) -> Result<T, TsQueryResult>,
) -> Result<Served<T>, ApiError> {
    super::within_query_timeout(state, typed::read_as::<TimeSeries, T>(&*state.cluster, group, q, prefs.consistency, prefs.replica, shape))
        .await
}

fn metric_json(m: &MetricInfo) -> Value {
    json!({
        "name": m.name, "metric_type": m.metric_type, "description": m.description, "unit": m.unit,
        "created_at": iso8601_ms(m.created_at_ms), "retention": m.retention,
        "series": m.series, "points": m.points, "bytes": m.bytes, "chunks": m.chunks,
        "bytes_per_point": if m.points > 0 { json!(m.bytes as f64 / m.points as f64) } else { Value::Null },
    })
}

/// Body of `POST /api/v1/timeseries/metrics`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateMetric {
    #[schemars(pattern(crate::http::openapi::formats::STREAM_NAME))]
    name: String,
    #[serde(default = "gauge", alias = "type")]
    metric_type: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    unit: String,
}

fn gauge() -> String {
    "gauge".into()
}

/// `POST /api/v1/timeseries/metrics` → 201, 409 if it exists.
pub async fn create_metric(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateMetric>,
) -> Result<(StatusCode, HeaderMap, Json<Value>), ApiError> {
    require_writer(&caller)?;
    check_name(&req.name)?;
    let group = group_of(&state, &req.name)?;
    let op = TsOp::CreateMetric { name: req.name, metric_type: req.metric_type, description: req.description, unit: req.unit };
    let served = ts_write(&state, group, op, prefs.consistency, shape!(TsResponse::Metric)).await?;
    Ok((StatusCode::CREATED, served_headers(&served), Json(metric_json(&served.value))))
}

/// `GET /api/v1/timeseries/metrics`: every group's metrics, by name, with storage statistics.
pub async fn list_metrics(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<Value>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| ts_read(&state, *g, TsQuery::ListMetrics, &prefs, shape!(TsQueryResult::Metrics)));
    let mut metrics = Vec::new();
    for r in futures::future::join_all(calls).await {
        metrics.extend(r?.value);
    }
    metrics.sort_by(|a, b| a.name.cmp(&b.name));
    let list: Vec<Value> = metrics.iter().map(metric_json).collect();
    Ok(Json(json!({"metrics": list, "count": list.len()})))
}

/// `GET /api/v1/timeseries/metrics/{name}`.
pub async fn get_metric(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<(HeaderMap, Json<Value>), ApiError> {
    check_name(&name)?;
    let group = group_of(&state, &name)?;
    let q = TsQuery::GetMetric { name: name.clone() };
    let served = ts_read(&state, group, q, &prefs, shape!(TsQueryResult::Metric)).await?;
    match served.value {
        Some(ref m) => Ok((served_headers(&served), Json(metric_json(m)))),
        None => Err(ApiError::NotFound(format!("metric {name} does not exist"))),
    }
}

/// `PUT /api/v1/timeseries/metrics/{name}/retention {drop_after, downsample_after,
/// downsample_interval, downsample_function}` (durations like `30d`).
pub async fn set_retention(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(policy): JsonBody<Value>,
) -> Result<(HeaderMap, Json<Value>), ApiError> {
    require_writer(&caller)?;
    check_name(&name)?;
    let group = group_of(&state, &name)?;
    let op = TsOp::SetRetention { metric: name, policy };
    let served = ts_write(&state, group, op, prefs.consistency, shape!(TsResponse::Metric)).await?;
    Ok((served_headers(&served), Json(metric_json(&served.value))))
}

/// Body of `POST /api/v1/timeseries/write`; top-level `tags` apply to every point.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct WriteRequest {
    #[schemars(pattern(crate::http::openapi::formats::STREAM_NAME))]
    metric: String,
    #[schemars(length(min = 1, max = 100000))]
    points: Vec<TsPointIn>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

/// `POST /api/v1/timeseries/write {metric, points: [{timestamp, value, tags}]}`: one command.
pub async fn write(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<WriteRequest>,
) -> Result<(HeaderMap, Json<Value>), ApiError> {
    require_writer(&caller)?;
    check_name(&req.metric)?;
    if req.points.is_empty() || req.points.len() > MAX_POINTS_PER_WRITE {
        return Err(ApiError::BadRequest(format!("a write carries 1 to {MAX_POINTS_PER_WRITE} points")));
    }
    let mut points = req.points;
    if !req.tags.is_empty() {
        for p in &mut points {
            for (k, v) in &req.tags {
                p.tags.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    let group = group_of(&state, &req.metric)?;
    let op = TsOp::Write { metric: req.metric.clone(), points };
    let written = shape!(TsResponse::Written { points, series, created_metric });
    let served = ts_write(&state, group, op, prefs.consistency, written).await?;
    let (points, series, created_metric) = served.value;
    Ok((
        served_headers(&served),
        Json(json!({
            "metric": req.metric, "points_written": points, "series": series, "metric_created": created_metric,
        })),
    ))
}

/// Body of `POST /api/v1/timeseries/query`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct QueryRequest {
    #[schemars(pattern(crate::http::openapi::formats::STREAM_NAME))]
    metric: String,
    #[serde(default, alias = "start_time")]
    #[schemars(schema_with = "crate::http::openapi::formats::optional_timestamp")]
    start: Value,
    #[serde(default, alias = "end_time")]
    #[schemars(schema_with = "crate::http::openapi::formats::optional_timestamp")]
    end: Value,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    #[schemars(schema_with = "crate::http::openapi::formats::ts_aggregation")]
    aggregation: Value,
}

/// `POST /api/v1/timeseries/query {metric, start, end, tags, aggregation}`: points in
/// `[start, end]` of series whose tags include `tags`, per series, at most
/// `max_result_rows` points in all (`truncated: true` when more matched).
pub async fn query(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<QueryRequest>,
) -> Result<(HeaderMap, Json<Value>), ApiError> {
    let began = Instant::now();
    check_name(&req.metric)?;
    let group = group_of(&state, &req.metric)?;
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let q = TsQuery::Query {
        metric: req.metric.clone(),
        start: req.start,
        end: req.end,
        tags: req.tags,
        aggregation: req.aggregation,
        now_ms,
        max_rows: state.config.query_limits.max_result_rows,
    };
    let served = ts_read(&state, group, q, &prefs, shape!(TsQueryResult::Series)).await?;
    let headers = served_headers(&served);
    let SeriesSet { series, truncated } =
        served.value.ok_or_else(|| ApiError::NotFound(format!("metric {} does not exist", req.metric)))?;
    let total: usize = series.iter().map(|s| s.points.len()).sum();
    let list: Vec<Value> = series
        .iter()
        .map(|s| {
            let pts: Vec<Value> = s.points.iter().map(|(t, v)| json!({"timestamp": iso8601_ms(*t), "value": v})).collect();
            json!({"metric": req.metric, "tags": s.tags, "points": pts})
        })
        .collect();
    Ok((
        headers,
        Json(json!({
            "metric": req.metric, "series": list, "total_points": total, "truncated": truncated,
            "execution_time_ms": began.elapsed().as_millis() as u64,
        })),
    ))
}

/// Runs `EnforceRetention` on every data group; returns the summed outcome.
pub async fn enforce_all(state: &AppState) -> Result<Value, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| {
        let retention = shape!(TsResponse::Retention { metrics, dropped_chunks, dropped_points, downsampled_chunks });
        ts_write(state, *g, TsOp::EnforceRetention, Consistency::Quorum, retention)
    });
    let (mut metrics, mut dc, mut dp, mut ds) = (0, 0, 0, 0);
    for r in futures::future::join_all(calls).await {
        let (m, dropped_chunks, dropped_points, downsampled_chunks) = r?.value;
        metrics += m;
        dc += dropped_chunks;
        dp += dropped_points;
        ds += downsampled_chunks;
    }
    Ok(json!({
        "groups": groups.len(), "metrics_with_retention": metrics,
        "dropped_chunks": dc, "dropped_points": dp, "downsampled_chunks": ds,
    }))
}

/// `POST /api/v1/timeseries/retention/enforce` (admin): applies retention now.
pub async fn enforce(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    if caller.role() != Role::Admin {
        return Err(ApiError::Forbidden("enforcing retention needs the admin role".into()));
    }
    Ok(Json(enforce_all(&state).await?))
}
