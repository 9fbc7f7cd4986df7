//! Key-value routes. A key's shard is found on the hash ring, or under range
//! sharding in the map's sorted ranges; prefix listing, counting and deletion
//! fan out to every data group (hash) or to the ranges the prefix covers, each
//! asked for its own range (range), and merge in key order.
//!
//! Under range sharding a group refuses a key or range that is no longer its
//! own (it split since the router learned the map) with `RANGE_MOVED`; the
//! call then runs again on a freshly learned map, so a split shows clients
//! nothing but a short wait.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant};

use tessera_api::GroupId;
use tessera_api::command::{KvEntry, KvOp, KvQuery, KvQueryResult, now_ms};
use tessera_api::http::{KvEntryView, KvListResponse, KvPutRequest};
use tessera_api::meta::KeyRange;
use tessera_api::routing::RoutingKey;

use super::{JsonBody, QueryParams, ReadPrefs, require_writer, served_headers};
use crate::cluster::typed::{self, Kv, KvReply, shape};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// Entries a list call returns without a `limit`.
const DEFAULT_LIST_LIMIT: usize = 1_000;

fn check_key(state: &AppState, key: &str) -> Result<(), ApiError> {
    check_key_bytes(state, key).map_err(ApiError::BadRequest)
}

fn check_key_bytes(state: &AppState, key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("key must not be empty".into());
    }
    let max = state.config.kv.max_key_bytes;
    if key.len() > max {
        return Err(format!("key is {} bytes; the limit is {max}", key.len()));
    }
    Ok(())
}

/// The limits a stored pair must meet (`kv.max_key_bytes`, and
/// `kv.max_value_bytes` of the value as JSON); shared with `POST /import/kv`.
pub(crate) fn check_pair(state: &AppState, key: &str, value: &Value) -> Result<(), String> {
    check_key_bytes(state, key)?;
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(usize::MAX);
    let max = state.config.kv.max_value_bytes;
    if size > max {
        return Err(format!("value is {size} bytes of JSON; the limit is {max}"));
    }
    Ok(())
}

/// `POST /api/v1/kv/keys {key, value, ttl?}`.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<KvPutRequest>,
) -> Result<(HeaderMap, Json<KvEntryView>), ApiError> {
    require_writer(&caller)?;
    check_pair(&state, &req.key, &req.value).map_err(ApiError::BadRequest)?;
    if req.ttl == Some(0) {
        return Err(ApiError::BadRequest("ttl must be at least 1 second (omit it for no expiry)".into()));
    }
    let served = on_current_ranges(&state, || async {
        let group = state.cluster.group_for(&RoutingKey::Kv(&req.key))?;
        let op = KvOp::Put { key: req.key.clone(), value: req.value.clone(), ttl_secs: req.ttl };
        typed::write_as::<Kv, _>(&*state.cluster, group, op, prefs.consistency, shape!(KvReply::Entry)).await
    })
    .await?;
    let headers = served_headers(&served);
    Ok((headers, Json(KvEntryView::from_entry(served.value, now_ms()))))
}

/// `GET /api/v1/kv/keys/{key}`.
pub async fn get(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(key): Path<String>,
) -> Result<(HeaderMap, Json<KvEntryView>), ApiError> {
    check_key(&state, &key)?;
    let served = on_current_ranges(&state, || async {
        let group = state.cluster.group_for(&RoutingKey::Kv(&key))?;
        let q = KvQuery::Get { key: key.clone() };
        let entry = shape!(KvQueryResult::Entry);
        typed::read_as::<Kv, _>(&*state.cluster, group, q, prefs.consistency, prefs.replica, entry).await
    })
    .await?;
    let headers = served_headers(&served);
    let e = served.value.ok_or_else(|| ApiError::NotFound(format!("key not found: {key}")))?;
    Ok((headers, Json(KvEntryView::from_entry(e, now_ms()))))
}

/// `DELETE /api/v1/kv/keys/{key}`: 404 when there was no live key.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(key): Path<String>,
) -> Result<(HeaderMap, Json<KvDeleted>), ApiError> {
    require_writer(&caller)?;
    check_key(&state, &key)?;
    let served = on_current_ranges(&state, || async {
        let group = state.cluster.group_for(&RoutingKey::Kv(&key))?;
        let op = KvOp::Delete { key: key.clone() };
        typed::write_as::<Kv, _>(&*state.cluster, group, op, prefs.consistency, shape!(KvReply::Deleted)).await
    })
    .await?;
    if served.value == 0 {
        return Err(ApiError::NotFound(format!("key not found: {key}")));
    }
    Ok((served_headers(&served), Json(KvDeleted { deleted: true, key })))
}

/// Query string of list, count and prefix deletion.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct PrefixParams {
    prefix: Option<String>,
    /// At most `query_limits.max_result_rows` entries come back, whatever is asked.
    limit: Option<usize>,
}

/// Query string of prefix deletion: the prefix is required (`prefix=` deletes every key).
#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct DeletePrefixParams {
    #[schemars(required, with = "String")]
    prefix: Option<String>,
}

/// `GET /api/v1/kv/keys?prefix=&limit=`: entries of every shard merged in key order.
pub async fn list(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<PrefixParams>,
) -> Result<Json<KvListResponse>, ApiError> {
    // At most `max_result_rows` keys (spec 01 §Limits): a larger `limit` is
    // cut to it and the answer says `truncated` when more matched.
    let limit = p.limit.unwrap_or(DEFAULT_LIST_LIMIT).min(state.config.query_limits.max_result_rows);
    let prefix = p.prefix.unwrap_or_default();
    let query = |range| KvQuery::List { prefix: prefix.clone(), limit, range };
    let mut entries: Vec<KvEntry> = Vec::new();
    let mut total = 0;
    for (e, t) in fan_out_read(&state, &prefix, query, &prefs, shape!(KvQueryResult::List { entries, total })).await? {
        entries.extend(e);
        total += t;
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries.truncate(limit);
    let truncated = total > entries.len() as u64 && p.limit.is_none_or(|asked| asked > limit);
    let now = now_ms();
    let keys = entries.into_iter().map(|e| KvEntryView::from_entry(e, now)).collect();
    Ok(Json(KvListResponse { keys, total, truncated }))
}

/// Answer of a key's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct KvDeleted {
    deleted: bool,
    key: String,
}

/// Answer of `GET /api/v1/kv/count`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct KvCount {
    count: u64,
    prefix: String,
}

/// Answer of a prefix's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct KvPrefixDeleted {
    /// Keys removed.
    deleted: u64,
    prefix: String,
}

/// `GET /api/v1/kv/count?prefix=`.
pub async fn count(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<PrefixParams>,
) -> Result<Json<KvCount>, ApiError> {
    let prefix = p.prefix.unwrap_or_default();
    let query = |range| KvQuery::Count { prefix: prefix.clone(), range };
    let count: u64 = fan_out_read(&state, &prefix, query, &prefs, shape!(KvQueryResult::Count)).await?.into_iter().sum();
    Ok(Json(KvCount { count, prefix }))
}

/// `DELETE /api/v1/kv/keys?prefix=`: removes every key with the prefix on every shard.
pub async fn delete_prefix(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<DeletePrefixParams>,
) -> Result<Json<KvPrefixDeleted>, ApiError> {
    require_writer(&caller)?;
    let prefix =
        p.prefix.ok_or_else(|| ApiError::BadRequest("the prefix query parameter is required (prefix= deletes every key)".into()))?;
    let deleted: u64 = on_current_ranges(&state, || async {
        let targets = prefix_targets(&state, &prefix)?;
        let deletes = targets.into_iter().map(|(group, range)| {
            let op = KvOp::DeletePrefix { prefix: prefix.clone(), range };
            typed::write_as::<Kv, _>(&*state.cluster, group, op, prefs.consistency, shape!(KvReply::Deleted))
        });
        let served = futures::future::try_join_all(deletes).await?;
        Ok(served.into_iter().map(|s| s.value).sum())
    })
    .await?;
    crate::services::security::watch_volume(
        &state,
        &caller,
        crate::services::security::Volume::Deleted,
        deleted,
        &format!("DELETE /api/v1/kv/keys?prefix={prefix}"),
    );
    Ok(Json(KvPrefixDeleted { deleted, prefix }))
}

/// How long a call keeps retrying while its key's range moves (a split).
const RANGE_MOVE_RETRY: Duration = Duration::from_secs(10);

/// Runs `call` until no group answers `RANGE_MOVED`, learning the map anew
/// before each retry, for at most [`RANGE_MOVE_RETRY`].
pub(crate) async fn on_current_ranges<T, F, Fut>(state: &AppState, call: F) -> Result<T, ApiError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = Instant::now() + RANGE_MOVE_RETRY;
    let mut pause = Duration::from_millis(20);
    loop {
        match call().await {
            Err(ApiError::RangeMoved(why)) if Instant::now() < deadline => {
                tracing::debug!("retrying on a fresh map: {why}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
                state.cluster.refresh().await;
            }
            other => return other,
        }
    }
}

/// The groups a prefix call goes to, each with the range it is asked for:
/// under range sharding the ranges the prefix covers, in key order; under
/// hash sharding every data group, whole (`None`).
fn prefix_targets(state: &AppState, prefix: &str) -> Result<Vec<(GroupId, Option<KeyRange>)>, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    Ok(match map.kv_ranges_with_prefix(prefix) {
        Some(ranges) => ranges.into_iter().map(|r| (r.group, Some(r.range.clone()))).collect(),
        None => map.data_groups().into_iter().map(|g| (g, None)).collect(),
    })
}

/// The answers of every group holding keys with `prefix` to `query(range)`,
/// each of the one shape named (see [`prefix_targets`]).
async fn fan_out_read<T>(
    state: &AppState,
    prefix: &str,
    query: impl Fn(Option<KeyRange>) -> KvQuery,
    prefs: &ReadPrefs,
    shape: impl Fn(KvQueryResult) -> Result<T, KvQueryResult> + Copy,
) -> Result<Vec<T>, ApiError> {
    on_current_ranges(state, || async {
        let targets = prefix_targets(state, prefix)?;
        let reads = targets
            .into_iter()
            .map(|(group, range)| typed::read_as::<Kv, T>(&*state.cluster, group, query(range), prefs.consistency, prefs.replica, shape));
        Ok(futures::future::try_join_all(reads).await?.into_iter().map(|s| s.value).collect())
    })
    .await
}
