//! Streaming routes (spec 01 streaming; `docs/streaming.md`): channels,
//! publish, history, the WebSocket feed, consumer groups and change data
//! capture. A channel lives in the data group `stream/<name>` hashes to; the
//! CDC channel `cdc.<database>.<table>` lives in the database's group
//! (`sql/<database>`), so change records are written in the SQL write's batch.

use axum::Json;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_api::GroupId;
use tessera_api::error::ErrorCode;
use tessera_api::http::iso8601_ms;
use tessera_api::meta::Role;
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;
use tessera_api::sql::{SqlQuery, SqlResult};
use tessera_api::stream::{
    CDC_PREFIX, ChannelEvents, ChannelInfo, StreamOp, StreamQuery, StreamQueryResult, StreamResponse, cdc_channel, parse_cdc_channel,
};

use super::{JsonBody, QueryParams, ReadPrefs, require_writer, served_headers};
use crate::cluster::typed::{self, Sql, Stream, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::state::AppState;
use crate::stream_hub::{self, EventView};

const MAX_NAME_BYTES: usize = 200;
const MAX_EVENT_TYPE_BYTES: usize = 128;
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 10_000;
/// Names that are routes under `/api/v1/streaming/`, so they cannot be socket paths.
const RESERVED: [&str; 4] = ["channels", "publish", "cdc", "retention"];
const DEFAULT_DATABASE: &str = "default";

/// The streaming routes, merged into the router's table.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .get("/api/v1/streaming/channels", P("read:streaming"), list_channels)
        .post("/api/v1/streaming/channels", P("write:streaming"), create_channel)
        .answers(&[201])
        .get("/api/v1/streaming/channels/{channel}", P("read:streaming"), get_channel)
        .get("/api/v1/streaming/channels/{channel}/history", P("read:streaming"), history)
        .get("/api/v1/streaming/channels/{channel}/consumers", P("read:streaming"), list_consumers)
        .post("/api/v1/streaming/channels/{channel}/consumers/{group}/poll", P("read:streaming"), poll)
        .post("/api/v1/streaming/channels/{channel}/consumers/{group}/commit", P("read:streaming"), commit)
        .post("/api/v1/streaming/publish", P("write:streaming"), publish)
        .get("/api/v1/streaming/cdc", P("read:streaming"), list_cdc)
        .post("/api/v1/streaming/cdc", P("write:streaming"), enable_cdc)
        .answers(&[201])
        .delete("/api/v1/streaming/cdc/{database}/{table}", P("write:streaming"), disable_cdc)
        .post("/api/v1/streaming/retention/enforce", P("manage:cluster"), enforce)
        .get("/api/v1/streaming/{channel}", P("read:streaming"), subscribe)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Any channel name, CDC ones included.
fn check_channel(name: &str) -> Result<(), ApiError> {
    if valid_name(name) && !RESERVED.contains(&name) {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "channel names are 1 to {MAX_NAME_BYTES} characters of A-Z a-z 0-9 _ . : - (and not {})",
            RESERVED.join(", ")
        )))
    }
}

fn check_group_name(name: &str) -> Result<(), ApiError> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!("consumer group names are 1 to {MAX_NAME_BYTES} characters of A-Z a-z 0-9 _ . : -")))
    }
}

fn check_database(name: &str) -> Result<(), ApiError> {
    if (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!("invalid database name {name:?}: use 1 to 64 letters, digits, '_' or '-'")))
    }
}

/// The group of a channel: the database's group for `cdc.<database>.<table>`.
fn group_of(state: &AppState, channel: &str) -> Result<GroupId, ApiError> {
    let key = match parse_cdc_channel(channel) {
        Some((database, _)) => RoutingKey::SqlDatabase(database),
        None => RoutingKey::Channel(channel),
    };
    Ok(state.cluster.group_for(&key)?)
}

/// A write whose reply has the one shape named.
async fn stream_write<T>(
    state: &AppState,
    group: GroupId,
    op: StreamOp,
    c: Consistency,
    shape: impl FnOnce(StreamResponse) -> Result<T, StreamResponse>,
) -> Result<T, ApiError> {
    Ok(typed::write_as::<Stream, T>(&*state.cluster, group, op, c, shape).await?.value)
}

/// A write, with the headers naming the group and the leader that committed it.
async fn stream_write_served<T>(
    state: &AppState,
    group: GroupId,
    op: StreamOp,
    c: Consistency,
    shape: impl FnOnce(StreamResponse) -> Result<T, StreamResponse>,
) -> Result<(T, HeaderMap), ApiError> {
    let served = typed::write_as::<Stream, T>(&*state.cluster, group, op, c, shape).await?;
    let headers = served_headers(&served);
    Ok((served.value, headers))
}

/// A read whose answer has the one shape named.
async fn stream_read<T>(
    state: &AppState,
    group: GroupId,
    q: StreamQuery,
    consistency: Consistency,
    replica: Option<tessera_api::NodeId>,
    shape: impl FnOnce(StreamQueryResult) -> Result<T, StreamQueryResult>,
) -> Result<T, ApiError> {
    Ok(typed::read_as::<Stream, T>(&*state.cluster, group, q, consistency, replica, shape).await?.value)
}

// ---------------------------------------------------------------- answers

/// A channel with its retention and event ids.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ChannelView {
    name: String,
    /// The retention as given (`7d`), or null for none.
    retention: Option<String>,
    retention_ms: Option<i64>,
    max_events: Option<u64>,
    created_at: String,
    /// The oldest event id retained.
    first_id: u64,
    /// The newest event id (0 before the first).
    last_id: u64,
    /// Events retained.
    events: u64,
    /// The table a CDC channel captures, or null.
    cdc: Option<CdcView>,
}

/// The table a CDC channel captures.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CdcView {
    database: String,
    table: String,
    enabled: bool,
}

impl From<&ChannelInfo> for ChannelView {
    fn from(c: &ChannelInfo) -> Self {
        ChannelView {
            name: c.name.clone(),
            retention: c.retention.clone(),
            retention_ms: c.retention_ms,
            max_events: c.max_events,
            created_at: iso8601_ms(c.created_at_ms),
            first_id: c.first_id,
            last_id: c.last_id,
            events: c.retained(),
            cdc: c.cdc.as_ref().map(|s| CdcView { database: s.database.clone(), table: s.table.clone(), enabled: s.enabled }),
        }
    }
}

/// Answer of `GET /api/v1/streaming/channels`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ChannelList {
    channels: Vec<ChannelView>,
    count: usize,
}

/// Answer of a channel's history.
#[derive(Serialize, schemars::JsonSchema)]
pub struct History {
    channel: String,
    events: Vec<EventView>,
    count: usize,
    first_id: u64,
    last_id: u64,
}

/// Answer of a publish.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Published {
    success: bool,
    id: u64,
    channel: String,
    event_type: String,
    timestamp: String,
    timestamp_ms: i64,
}

/// Answer of a consumer poll.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Polled {
    channel: String,
    group: String,
    /// The group's committed offset, null before its first commit.
    committed_offset: Option<u64>,
    events: Vec<EventView>,
    count: usize,
    /// The offset to commit once these events are processed (null when none came).
    next_offset: Option<u64>,
    last_id: u64,
}

/// Answer of a consumer commit.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Committed {
    channel: String,
    group: String,
    committed_offset: u64,
    /// False when the offset was not beyond the committed one.
    advanced: bool,
}

/// A consumer group's committed offset.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsumerView {
    group: String,
    committed_offset: u64,
}

/// Answer of `GET …/channels/{channel}/consumers`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ConsumerList {
    channel: String,
    consumers: Vec<ConsumerView>,
    count: usize,
}

/// A table with a CDC channel.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CdcTable {
    database: String,
    table: String,
    enabled: bool,
    channel: String,
    last_id: u64,
}

/// Answer of `GET /api/v1/streaming/cdc`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CdcList {
    tables: Vec<CdcTable>,
    count: usize,
}

/// What a retention run did, summed over every data group.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RetentionRun {
    groups: usize,
    channels_with_retention: u64,
    dropped_events: u64,
}

fn not_found(channel: &str) -> ApiError {
    ApiError::NotFound(format!("channel {channel} does not exist"))
}

async fn all_channels(state: &AppState, prefs: &ReadPrefs) -> Result<Vec<ChannelInfo>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups
        .iter()
        .map(|g| stream_read(state, *g, StreamQuery::ListChannels, prefs.consistency, None, shape!(StreamQueryResult::Channels)));
    let mut out = Vec::new();
    for r in futures::future::join_all(calls).await {
        out.extend(r?);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// `GET /api/v1/streaming/channels`.
pub async fn list_channels(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<ChannelList>, ApiError> {
    let channels: Vec<ChannelView> = all_channels(&state, &prefs).await?.iter().map(ChannelView::from).collect();
    Ok(Json(ChannelList { count: channels.len(), channels }))
}

/// Body of `POST /api/v1/streaming/channels`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateChannel {
    /// Not `cdc.…`: those are the CDC channels (`POST /api/v1/streaming/cdc`).
    #[schemars(pattern(crate::http::openapi::formats::STREAM_NAME), extend("not" = {"pattern": "^cdc\\."}))]
    name: String,
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::DURATION))]
    retention: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_events: Option<u64>,
}

/// `POST /api/v1/streaming/channels {name, retention?, max_events?}` → 201; 409 if it exists.
pub async fn create_channel(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateChannel>,
) -> Result<(StatusCode, HeaderMap, Json<ChannelView>), ApiError> {
    require_writer(&caller)?;
    check_channel(&req.name)?;
    if req.name.starts_with(CDC_PREFIX) {
        return Err(ApiError::BadRequest(format!(
            "channel names starting with {CDC_PREFIX:?} are CDC channels: enable CDC on the table (POST /api/v1/streaming/cdc)"
        )));
    }
    let group = group_of(&state, &req.name)?;
    let op = StreamOp::CreateChannel { name: req.name, retention: req.retention, max_events: req.max_events };
    let (c, headers) = stream_write_served(&state, group, op, prefs.consistency, shape!(StreamResponse::Channel)).await?;
    Ok((StatusCode::CREATED, headers, Json((&c).into())))
}

/// `GET /api/v1/streaming/channels/{channel}`.
pub async fn get_channel(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(channel): Path<String>,
) -> Result<Json<ChannelView>, ApiError> {
    check_channel(&channel)?;
    let group = group_of(&state, &channel)?;
    let q = StreamQuery::Channel { name: channel.clone() };
    let c = stream_read(&state, group, q, prefs.consistency, prefs.replica, shape!(StreamQueryResult::Channel)).await?;
    Ok(Json((&c.ok_or_else(|| not_found(&channel))?).into()))
}

/// Query of a channel's history.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct HistoryParams {
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<u64>,
    /// Events after this id.
    after: Option<u64>,
}

/// Query of a subscription: `after` or `from`, not both.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct SubscribeParams {
    /// Events after this id.
    after: Option<u64>,
    /// Events from this id on.
    from: Option<u64>,
}

fn parse_limit(v: Option<u64>, name: &str) -> Result<usize, ApiError> {
    match v {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => Ok(n as usize),
        Some(_) => Err(ApiError::BadRequest(format!("{name} must be between 1 and {MAX_LIMIT}"))),
    }
}

fn event_views(r: &ChannelEvents) -> Vec<EventView> {
    r.events.iter().map(EventView::from).collect()
}

/// `GET /api/v1/streaming/channels/{channel}/history?limit=&after=`: the newest
/// `limit` events (default 100, at most 10000), or the first `limit` after the
/// event id `after`; oldest first either way.
pub async fn history(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(channel): Path<String>,
    QueryParams(params): QueryParams<HistoryParams>,
) -> Result<Json<History>, ApiError> {
    check_channel(&channel)?;
    let limit = parse_limit(params.limit, "limit")?;
    let after = params.after;
    let group = group_of(&state, &channel)?;
    let q = StreamQuery::Events { channel: channel.clone(), after, limit };
    let r = stream_read(&state, group, q, prefs.consistency, prefs.replica, shape!(StreamQueryResult::Events))
        .await?
        .ok_or_else(|| not_found(&channel))?;
    let events = event_views(&r);
    Ok(Json(History { channel, count: events.len(), events, first_id: r.channel.first_id, last_id: r.channel.last_id }))
}

/// Body of `POST /api/v1/streaming/publish`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct PublishRequest {
    /// Not `cdc.…`: only SQL commits write to a CDC channel.
    #[schemars(pattern(crate::http::openapi::formats::STREAM_NAME), extend("not" = {"pattern": "^cdc\\."}))]
    channel: String,
    /// 1 to 128 bytes, not only white space.
    #[schemars(pattern(r"\S"))]
    event_type: String,
    #[schemars(with = "serde_json::Map<String, Value>")]
    data: Value,
}

/// `POST /api/v1/streaming/publish {channel, event_type, data}` → the event's id and timestamp.
pub async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<PublishRequest>,
) -> Result<(HeaderMap, Json<Published>), ApiError> {
    require_writer(&caller)?;
    check_channel(&req.channel)?;
    if req.event_type.trim().is_empty() || req.event_type.len() > MAX_EVENT_TYPE_BYTES {
        return Err(ApiError::BadRequest(format!("event_type must be 1 to {MAX_EVENT_TYPE_BYTES} bytes")));
    }
    if !req.data.is_object() {
        return Err(ApiError::BadRequest("data must be a JSON object".into()));
    }
    let size = serde_json::to_vec(&req.data).map(|v| v.len()).unwrap_or(usize::MAX);
    let max = state.config.kv.max_value_bytes;
    if size > max {
        return Err(ApiError::BadRequest(format!("data is {size} bytes of JSON; the limit is {max}")));
    }
    let group = group_of(&state, &req.channel)?;
    let op = StreamOp::Publish { channel: req.channel.clone(), event_type: req.event_type, data: req.data };
    let (e, headers) = stream_write_served(&state, group, op, prefs.consistency, shape!(StreamResponse::Published)).await?;
    state.streams.poke(&e.channel);
    Ok((
        headers,
        Json(Published {
            success: true,
            id: e.id,
            channel: e.channel,
            event_type: e.event_type,
            timestamp: iso8601_ms(e.timestamp_ms),
            timestamp_ms: e.timestamp_ms,
        }),
    ))
}

/// `GET /api/v1/streaming/{channel}` with a WebSocket upgrade: pushes
/// `{id, channel, event_type, data, timestamp, timestamp_ms}` text messages.
/// Without `after`/`from`, events published after the handshake; with
/// `after=<id>`, every event with a greater id; with `from=<id>`, from that id on.
pub async fn subscribe(
    State(state): State<AppState>,
    _caller: Caller,
    Path(channel): Path<String>,
    QueryParams(params): QueryParams<SubscribeParams>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let ws = ws.map_err(|e| ApiError::BadRequest(format!("this route is a WebSocket: {e}")))?;
    check_channel(&channel)?;
    let SubscribeParams { after, from } = params;
    if after.is_some() && from.is_some() {
        return Err(ApiError::BadRequest("give after or from, not both".into()));
    }
    let group = group_of(&state, &channel)?;
    let q = StreamQuery::Channel { name: channel.clone() };
    let info = stream_read(&state, group, q, Consistency::Quorum, None, shape!(StreamQueryResult::Channel))
        .await?
        .ok_or_else(|| not_found(&channel))?;
    let start_after = match (after, from) {
        (Some(a), _) => a,
        (None, Some(f)) => f.saturating_sub(1),
        (None, None) => info.last_id,
    };
    let (hub, cluster) = (state.streams.clone(), state.cluster.clone());
    Ok(ws.on_upgrade(move |socket| stream_hub::serve(hub, cluster, socket, channel, group, start_after)).into_response())
}

/// Body of a consumer poll.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct PollRequest {
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    max: Option<u64>,
}

/// `POST …/channels/{channel}/consumers/{group}/poll {max}`: events after the
/// group's committed offset (default 100, at most 10000). Polling commits
/// nothing: the same events come back until they are committed.
pub async fn poll(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((channel, consumer)): Path<(String, String)>,
    JsonBody(req): JsonBody<PollRequest>,
) -> Result<Json<Polled>, ApiError> {
    check_channel(&channel)?;
    check_group_name(&consumer)?;
    let max = parse_limit(req.max, "max")?;
    let group = group_of(&state, &channel)?;
    let q = StreamQuery::Poll { channel: channel.clone(), group: consumer.clone(), max };
    let r = stream_read(&state, group, q, prefs.consistency, prefs.replica, shape!(StreamQueryResult::Events))
        .await?
        .ok_or_else(|| not_found(&channel))?;
    let events = event_views(&r);
    let next_offset = r.events.last().map(|e| e.id);
    Ok(Json(Polled {
        channel,
        group: consumer,
        committed_offset: r.committed,
        count: events.len(),
        events,
        next_offset,
        last_id: r.channel.last_id,
    }))
}

/// Body of a consumer commit.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CommitRequest {
    offset: u64,
}

/// `POST …/channels/{channel}/consumers/{group}/commit {offset}`: the group has
/// processed every event up to `offset`. Offsets only move forward (a lower
/// one is ignored); beyond the newest event is 409 (a conflict with the
/// channel's state, as a commit of a consumer group ahead of the log).
pub async fn commit(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((channel, consumer)): Path<(String, String)>,
    JsonBody(req): JsonBody<CommitRequest>,
) -> Result<(HeaderMap, Json<Committed>), ApiError> {
    check_channel(&channel)?;
    check_group_name(&consumer)?;
    let group = group_of(&state, &channel)?;
    let op = StreamOp::CommitOffset { channel: channel.clone(), group: consumer.clone(), offset: req.offset };
    let committed = shape!(StreamResponse::Committed { offset, advanced });
    let ((offset, advanced), headers) = stream_write_served(&state, group, op, prefs.consistency, committed).await?;
    Ok((headers, Json(Committed { channel, group: consumer, committed_offset: offset, advanced })))
}

/// `GET …/channels/{channel}/consumers`: every consumer group's committed offset.
pub async fn list_consumers(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(channel): Path<String>,
) -> Result<Json<ConsumerList>, ApiError> {
    check_channel(&channel)?;
    let group = group_of(&state, &channel)?;
    let q = StreamQuery::Offsets { channel: channel.clone() };
    let list = stream_read(&state, group, q, prefs.consistency, prefs.replica, shape!(StreamQueryResult::Offsets))
        .await?
        .ok_or_else(|| not_found(&channel))?;
    let consumers: Vec<ConsumerView> = list.iter().map(|(g, o)| ConsumerView { group: g.clone(), committed_offset: *o }).collect();
    Ok(Json(ConsumerList { channel, count: consumers.len(), consumers }))
}

/// Body of `POST /api/v1/streaming/cdc`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct EnableCdc {
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::DATABASE))]
    database: Option<String>,
    #[schemars(length(min = 1))]
    table: String,
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::DURATION))]
    retention: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_events: Option<u64>,
}

/// `POST /api/v1/streaming/cdc {database?, table, retention?, max_events?}`:
/// captures the table's changes into `cdc.<database>.<table>` from the next
/// SQL write on. Needs `read:sql` as well (the channel carries the rows).
pub async fn enable_cdc(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<EnableCdc>,
) -> Result<(StatusCode, Json<ChannelView>), ApiError> {
    require_writer(&caller)?;
    caller.require("read:sql")?;
    let database = req.database.unwrap_or_else(|| DEFAULT_DATABASE.to_string());
    check_database(&database)?;
    if req.table.is_empty() {
        return Err(ApiError::BadRequest("table must not be empty".into()));
    }
    let group = state.cluster.group_for(&RoutingKey::SqlDatabase(&database))?;
    let describe = SqlQuery::DescribeTable { database: database.clone(), name: req.table.clone() };
    let schema = match typed::ask::<Sql>(&*state.cluster, group, describe, Consistency::Quorum, None).await?.value {
        Ok(answer) => typed::pick(answer, shape!(SqlResult::Catalog))?,
        Err(r) if r.code == ErrorCode::TableNotFound => {
            return Err(ApiError::NotFound(format!("table {} does not exist in database {database}", req.table)));
        }
        Err(r) => return Err(ApiError::BadRequest(r.message)),
    };
    let table = schema["name"].as_str().map(str::to_string).unwrap_or_else(|| req.table.clone());
    if !valid_name(&cdc_channel(&database, &table)) || table.contains('.') {
        return Err(ApiError::BadRequest(format!(
            "CDC needs a table name of A-Z a-z 0-9 _ - (channel {}); {table:?} is not",
            cdc_channel(&database, "<table>")
        )));
    }
    let op = StreamOp::EnableCdc { database, table, retention: req.retention, max_events: req.max_events };
    let c = stream_write(&state, group, op, prefs.consistency, shape!(StreamResponse::Channel)).await?;
    Ok((StatusCode::CREATED, Json((&c).into())))
}

/// `GET /api/v1/streaming/cdc`: every table with a CDC channel, enabled or not.
pub async fn list_cdc(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<CdcList>, ApiError> {
    let tables: Vec<CdcTable> = all_channels(&state, &prefs)
        .await?
        .iter()
        .filter_map(|c| {
            c.cdc.as_ref().map(|s| CdcTable {
                database: s.database.clone(),
                table: s.table.clone(),
                enabled: s.enabled,
                channel: c.name.clone(),
                last_id: c.last_id,
            })
        })
        .collect();
    Ok(Json(CdcList { count: tables.len(), tables }))
}

/// `DELETE /api/v1/streaming/cdc/{database}/{table}`: stops capturing (the
/// channel and its events stay).
pub async fn disable_cdc(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((database, table)): Path<(String, String)>,
) -> Result<Json<ChannelView>, ApiError> {
    require_writer(&caller)?;
    check_database(&database)?;
    let group = state.cluster.group_for(&RoutingKey::SqlDatabase(&database))?;
    let op = StreamOp::DisableCdc { database, table };
    let c = stream_write(&state, group, op, prefs.consistency, shape!(StreamResponse::Channel)).await?;
    Ok(Json((&c).into()))
}

/// Runs `EnforceRetention` on every data group; returns the summed outcome.
pub async fn enforce_all(state: &AppState) -> Result<RetentionRun, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| {
        let retention = shape!(StreamResponse::Retention { channels, dropped_events });
        stream_write(state, *g, StreamOp::EnforceRetention, Consistency::Quorum, retention)
    });
    let (mut channels, mut dropped) = (0, 0);
    for r in futures::future::join_all(calls).await {
        let (c, dropped_events) = r?;
        channels += c;
        dropped += dropped_events;
    }
    Ok(RetentionRun { groups: groups.len(), channels_with_retention: channels, dropped_events: dropped })
}

/// `POST /api/v1/streaming/retention/enforce` (admin): applies retention now.
pub async fn enforce(State(state): State<AppState>, caller: Caller) -> Result<Json<RetentionRun>, ApiError> {
    if caller.role() != Role::Admin {
        return Err(ApiError::Forbidden("enforcing retention needs the admin role".into()));
    }
    Ok(Json(enforce_all(&state).await?))
}
