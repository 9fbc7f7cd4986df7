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
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
        .answers(&[201])
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

// ---------------------------------------------------------------- answers

/// A metric with its storage figures.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MetricView {
    name: String,
    metric_type: String,
    description: String,
    unit: String,
    created_at: String,
    /// Its retention policy, or null for none.
    #[schemars(with = "Option<RetentionView>")]
    retention: Value,
    /// Distinct series (tag sets).
    series: u64,
    points: u64,
    /// Bytes of its compressed chunks.
    bytes: u64,
    chunks: u64,
    /// Null while it holds no point.
    bytes_per_point: Option<f64>,
}

/// A retention policy, durations as given (`30d`).
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // describes the engine's policy JSON in the document
struct RetentionView {
    drop_after: Option<String>,
    downsample_after: Option<String>,
    downsample_interval: Option<String>,
    downsample_function: Option<String>,
}

impl From<&MetricInfo> for MetricView {
    fn from(m: &MetricInfo) -> Self {
        MetricView {
            name: m.name.clone(),
            metric_type: m.metric_type.clone(),
            description: m.description.clone(),
            unit: m.unit.clone(),
            created_at: iso8601_ms(m.created_at_ms),
            retention: m.retention.clone(),
            series: m.series,
            points: m.points,
            bytes: m.bytes,
            chunks: m.chunks,
            bytes_per_point: (m.points > 0).then(|| m.bytes as f64 / m.points as f64),
        }
    }
}

/// Answer of `GET /api/v1/timeseries/metrics`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MetricList {
    metrics: Vec<MetricView>,
    count: usize,
}

/// Answer of a write.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Written {
    metric: String,
    points_written: u64,
    /// Series the points fell in.
    series: u64,
    /// The write created the metric.
    metric_created: bool,
}

/// One point of a query's answer.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PointView {
    timestamp: String,
    /// Null where an aggregate is not a finite number (a sum or variance beyond f64).
    value: Option<f64>,
}

/// One series of a query's answer.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SeriesView {
    metric: String,
    tags: BTreeMap<String, String>,
    points: Vec<PointView>,
}

/// Answer of a query.
#[derive(Serialize, schemars::JsonSchema)]
pub struct QueryAnswer {
    metric: String,
    series: Vec<SeriesView>,
    total_points: usize,
    /// More points matched than the router's row limit let through.
    truncated: bool,
    execution_time_ms: u64,
}

/// What a retention run did, summed over every data group.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RetentionRun {
    groups: usize,
    metrics_with_retention: u64,
    dropped_chunks: u64,
    dropped_points: u64,
    downsampled_chunks: u64,
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
) -> Result<(StatusCode, HeaderMap, Json<MetricView>), ApiError> {
    require_writer(&caller)?;
    check_name(&req.name)?;
    let group = group_of(&state, &req.name)?;
    let op = TsOp::CreateMetric { name: req.name, metric_type: req.metric_type, description: req.description, unit: req.unit };
    let served = ts_write(&state, group, op, prefs.consistency, shape!(TsResponse::Metric)).await?;
    Ok((StatusCode::CREATED, served_headers(&served), Json((&served.value).into())))
}

/// `GET /api/v1/timeseries/metrics`: every group's metrics, by name, with storage statistics.
pub async fn list_metrics(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<MetricList>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| ts_read(&state, *g, TsQuery::ListMetrics, &prefs, shape!(TsQueryResult::Metrics)));
    let mut metrics = Vec::new();
    for r in futures::future::join_all(calls).await {
        metrics.extend(r?.value);
    }
    metrics.sort_by(|a, b| a.name.cmp(&b.name));
    let metrics: Vec<MetricView> = metrics.iter().map(MetricView::from).collect();
    Ok(Json(MetricList { count: metrics.len(), metrics }))
}

/// `GET /api/v1/timeseries/metrics/{name}`.
pub async fn get_metric(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<(HeaderMap, Json<MetricView>), ApiError> {
    check_name(&name)?;
    let group = group_of(&state, &name)?;
    let q = TsQuery::GetMetric { name: name.clone() };
    let served = ts_read(&state, group, q, &prefs, shape!(TsQueryResult::Metric)).await?;
    match served.value {
        Some(ref m) => Ok((served_headers(&served), Json(m.into()))),
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
) -> Result<(HeaderMap, Json<MetricView>), ApiError> {
    require_writer(&caller)?;
    check_name(&name)?;
    let group = group_of(&state, &name)?;
    let op = TsOp::SetRetention { metric: name, policy };
    let served = ts_write(&state, group, op, prefs.consistency, shape!(TsResponse::Metric)).await?;
    Ok((served_headers(&served), Json((&served.value).into())))
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
) -> Result<(HeaderMap, Json<Written>), ApiError> {
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
    Ok((served_headers(&served), Json(Written { metric: req.metric, points_written: points, series, metric_created: created_metric })))
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
) -> Result<(HeaderMap, Json<QueryAnswer>), ApiError> {
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
    let list: Vec<SeriesView> = series
        .iter()
        .map(|s| SeriesView {
            metric: req.metric.clone(),
            tags: s.tags.clone(),
            points: s.points.iter().map(|(t, v)| PointView { timestamp: iso8601_ms(*t), value: v.is_finite().then_some(*v) }).collect(),
        })
        .collect();
    Ok((
        headers,
        Json(QueryAnswer {
            metric: req.metric,
            series: list,
            total_points: total,
            truncated,
            execution_time_ms: began.elapsed().as_millis() as u64,
        }),
    ))
}

/// Runs `EnforceRetention` on every data group; returns the summed outcome.
pub async fn enforce_all(state: &AppState) -> Result<RetentionRun, ApiError> {
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
    Ok(RetentionRun {
        groups: groups.len(),
        metrics_with_retention: metrics,
        dropped_chunks: dc,
        dropped_points: dp,
        downsampled_chunks: ds,
    })
}

/// `POST /api/v1/timeseries/retention/enforce` (admin): applies retention now.
pub async fn enforce(State(state): State<AppState>, caller: Caller) -> Result<Json<RetentionRun>, ApiError> {
    if caller.role() != Role::Admin {
        return Err(ApiError::Forbidden("enforcing retention needs the admin role".into()));
    }
    Ok(Json(enforce_all(&state).await?))
}
