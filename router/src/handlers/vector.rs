//! Vector store routes (spec 03 part B) under `/api/v1/vector/collections`.
//!
//! A collection lives in the data group `vector/<name>` hashes to; listing
//! fans out over every data group. A batch upsert is one Raft command.
//!
//! Bodies: create `{name, dim, metric: cosine|l2|dot, m?, ef_construction?}`;
//! upsert `{id, vector, metadata?}`; batch `{vectors: [{id, vector, metadata?}, …]}`;
//! search `{vector, k (default 10), ef?, filter?}` → `{hits: [{id, score,
//! distance, metadata}], count}`, nearest first. `filter` is an object of
//! `field: value` (equality), `field: {"$eq": v}` or `field: {"$in": [v, …]}`,
//! all of which must hold; it is applied during the graph search.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tessera_api::GroupId;
use tessera_api::command::{Operation, Query, QueryResult, Response as Reply};
use tessera_api::http::iso8601_ms;
use tessera_api::vector::{
    CollectionConfig, CollectionStats, DEFAULT_EF_CONSTRUCTION, DEFAULT_M, MAX_DIM, MAX_EF, MAX_K, MetadataFilter,
    SearchRequest, VectorHit, VectorMetric, VectorOp, VectorQuery, VectorQueryResult, VectorRecord, VectorResponse,
    validate_collection_name, validate_record_id,
};

use super::{JsonBody, ReadPrefs, require_writer};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Most records in one batch upsert.
const MAX_BATCH: usize = 10_000;
const DEFAULT_K: i64 = 10;

/// The vector routes, merged into the router's table.
pub fn routes() -> Router<AppState> {
    const C: &str = "/api/v1/vector/collections";
    Router::new()
        .route(C, get(list_collections).post(create_collection))
        .route(&format!("{C}/{{name}}"), get(collection_stats).delete(drop_collection))
        .route(&format!("{C}/{{name}}/upsert"), post(upsert))
        .route(&format!("{C}/{{name}}/batch"), post(batch_upsert))
        .route(&format!("{C}/{{name}}/search"), post(search))
        .route(&format!("{C}/{{name}}/vectors/{{*id}}"), get(get_record).delete(delete_record))
}

fn group(state: &AppState, name: &str) -> Result<GroupId, ApiError> {
    validate_collection_name(name).map_err(ApiError::BadRequest)?;
    Ok(state.cluster.group_for(&format!("vector/{name}"))?)
}

async fn write(state: &AppState, group: GroupId, op: VectorOp, prefs: &ReadPrefs) -> Result<VectorResponse, ApiError> {
    match state.cluster.write(group, &Operation::Vector(op), prefs.consistency).await?.value {
        Reply::Vector(r) => Ok(r),
        Reply::Rejected { kind, message } => Err(ApiError::rejected(kind, message)),
        other => Err(ApiError::unexpected(other)),
    }
}

async fn read(state: &AppState, group: GroupId, q: VectorQuery, prefs: &ReadPrefs) -> Result<VectorQueryResult, ApiError> {
    match state.cluster.read(group, &Query::Vector(q), prefs.consistency, prefs.replica).await?.value {
        QueryResult::Vector(VectorQueryResult::Rejected { kind, message }) => Err(ApiError::rejected(kind, message)),
        QueryResult::Vector(r) => Ok(r),
        other => Err(ApiError::unexpected(other)),
    }
}

fn collection_json(s: &CollectionStats) -> Value {
    let c = &s.config;
    json!({
        "name": c.name, "dim": c.dim, "metric": c.metric.as_str(), "m": c.m,
        "ef_construction": c.ef_construction, "count": s.count, "created_at": iso8601_ms(c.created_at_ms),
    })
}

/// A stored record as returned by GET (f32 components serialize exactly).
#[derive(Serialize)]
struct RecordView {
    id: String,
    vector: Vec<f32>,
    metadata: Value,
    created_at: String,
    updated_at: String,
}

/// Body of `POST /api/v1/vector/collections`.
#[derive(Deserialize)]
struct CreateCollection {
    name: String,
    dim: i64,
    metric: String,
    m: Option<i64>,
    ef_construction: Option<i64>,
}

fn in_range(what: &str, v: i64, lo: u32, hi: u32) -> Result<u32, ApiError> {
    u32::try_from(v)
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| ApiError::BadRequest(format!("{what} must be {lo} to {hi}")))
}

/// `POST /api/v1/vector/collections` → 201 with the collection.
async fn create_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateCollection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    require_writer(&caller)?;
    let g = group(&state, &req.name)?;
    let config = CollectionConfig {
        dim: in_range("dim", req.dim, 1, MAX_DIM)?,
        metric: VectorMetric::parse(&req.metric).map_err(ApiError::BadRequest)?,
        m: in_range("m", req.m.unwrap_or(DEFAULT_M.into()), 2, 256)?,
        ef_construction: in_range("ef_construction", req.ef_construction.unwrap_or(DEFAULT_EF_CONSTRUCTION.into()), 1, MAX_EF)?,
        name: req.name,
        created_at_ms: 0,
    };
    match write(&state, g, VectorOp::CreateCollection(config), &prefs).await? {
        VectorResponse::Created(config) => {
            Ok((StatusCode::CREATED, Json(collection_json(&CollectionStats { config, count: 0 }))))
        }
        other => Err(ApiError::unexpected(other)),
    }
}

/// `GET /api/v1/vector/collections`: every group's collections, by name.
async fn list_collections(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<Value>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| read(&state, *g, VectorQuery::ListCollections, &prefs));
    let mut all = Vec::new();
    for r in futures::future::join_all(calls).await {
        match r? {
            VectorQueryResult::Collections(c) => all.extend(c),
            other => return Err(ApiError::unexpected(other)),
        }
    }
    all.sort_by(|a, b| a.config.name.cmp(&b.config.name));
    let list: Vec<Value> = all.iter().map(collection_json).collect();
    Ok(Json(json!({"collections": list, "count": list.len()})))
}

/// `GET /api/v1/vector/collections/{name}`: configuration and live record count.
async fn collection_stats(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let g = group(&state, &name)?;
    match read(&state, g, VectorQuery::Stats { name }, &prefs).await? {
        VectorQueryResult::Stats(s) => Ok(Json(collection_json(&s))),
        other => Err(ApiError::unexpected(other)),
    }
}

/// `DELETE /api/v1/vector/collections/{name}`: drops the collection and its records.
async fn drop_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_writer(&caller)?;
    let g = group(&state, &name)?;
    match write(&state, g, VectorOp::DropCollection { name: name.clone() }, &prefs).await? {
        VectorResponse::Dropped { count } => Ok(Json(json!({"name": name, "dropped": true, "deleted_count": count}))),
        other => Err(ApiError::unexpected(other)),
    }
}

/// One record of an upsert: `{id, vector, metadata?}`.
#[derive(Deserialize)]
struct RecordBody {
    id: Value,
    vector: Vec<f32>,
    metadata: Option<Value>,
}

impl RecordBody {
    /// Checks the id and metadata; absent or null metadata becomes `{}`.
    fn into_record(self) -> Result<VectorRecord, ApiError> {
        let id = match self.id {
            Value::String(s) => s,
            Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
            _ => return Err(ApiError::BadRequest("id must be a string".into())),
        };
        validate_record_id(&id).map_err(ApiError::BadRequest)?;
        let metadata = match self.metadata {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(m @ Value::Object(_)) => m,
            Some(_) => return Err(ApiError::BadRequest(format!("record {id}: metadata must be a JSON object"))),
        };
        Ok(VectorRecord { id, vector: self.vector, metadata, created_at_ms: 0, updated_at_ms: 0 })
    }
}

async fn upsert_records(
    state: &AppState,
    prefs: &ReadPrefs,
    collection: &str,
    records: Vec<VectorRecord>,
) -> Result<(u64, u64), ApiError> {
    let g = group(state, collection)?;
    let op = VectorOp::Upsert { collection: collection.to_string(), records };
    match write(state, g, op, prefs).await? {
        VectorResponse::Upserted { inserted, updated } => Ok((inserted, updated)),
        other => Err(ApiError::unexpected(other)),
    }
}

/// `POST …/{name}/upsert {id, vector, metadata?}`: inserts or replaces one record.
async fn upsert(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<RecordBody>,
) -> Result<Json<Value>, ApiError> {
    require_writer(&caller)?;
    let record = body.into_record()?;
    let id = record.id.clone();
    let (inserted, _) = upsert_records(&state, &prefs, &name, vec![record]).await?;
    Ok(Json(json!({"collection": name, "id": id, "upserted": true, "created": inserted > 0})))
}

/// Body of a batch upsert.
#[derive(Deserialize)]
struct BatchBody {
    #[serde(alias = "records", alias = "items")]
    vectors: Vec<RecordBody>,
}

/// `POST …/{name}/batch {vectors: [{id, vector, metadata?}, …]}`: one atomic command.
async fn batch_upsert(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Json<Value>, ApiError> {
    require_writer(&caller)?;
    if body.vectors.is_empty() || body.vectors.len() > MAX_BATCH {
        return Err(ApiError::BadRequest(format!("a batch holds 1 to {MAX_BATCH} records")));
    }
    let records = body.vectors.into_iter().map(RecordBody::into_record).collect::<Result<Vec<_>, _>>()?;
    let n = records.len();
    let (inserted, updated) = upsert_records(&state, &prefs, &name, records).await?;
    Ok(Json(json!({"collection": name, "upserted": n, "inserted": inserted, "updated": updated})))
}

/// `GET …/{name}/vectors/{id}`.
async fn get_record(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<RecordView>, ApiError> {
    let g = group(&state, &name)?;
    match read(&state, g, VectorQuery::Get { collection: name, id }, &prefs).await? {
        VectorQueryResult::Record(r) => Ok(Json(RecordView {
            id: r.id,
            vector: r.vector,
            metadata: r.metadata,
            created_at: iso8601_ms(r.created_at_ms),
            updated_at: iso8601_ms(r.updated_at_ms),
        })),
        other => Err(ApiError::unexpected(other)),
    }
}

/// `DELETE …/{name}/vectors/{id}`: a soft delete inside the index.
async fn delete_record(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    require_writer(&caller)?;
    let g = group(&state, &name)?;
    match write(&state, g, VectorOp::Delete { collection: name.clone(), id: id.clone() }, &prefs).await? {
        VectorResponse::Deleted => Ok(Json(json!({"collection": name, "id": id, "deleted": true}))),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Body of a search.
#[derive(Deserialize)]
struct SearchBody {
    vector: Vec<f32>,
    k: Option<i64>,
    ef: Option<i64>,
    filter: Option<Value>,
}

/// A search hit as returned (f32 fields serialize exactly).
#[derive(Serialize)]
struct HitView {
    id: String,
    score: f32,
    distance: f32,
    metadata: Value,
}

/// The search response.
#[derive(Serialize)]
struct SearchView {
    collection: String,
    hits: Vec<HitView>,
    count: usize,
}

/// `POST …/{name}/search {vector, k, ef?, filter?}`: up to `k` hits, nearest first.
async fn search(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<SearchBody>,
) -> Result<Json<SearchView>, ApiError> {
    let g = group(&state, &name)?;
    let k = in_range("k", body.k.unwrap_or(DEFAULT_K), 1, MAX_K)?;
    let ef = body.ef.map(|e| in_range("ef", e, 1, MAX_EF)).transpose()?;
    let filter = match body.filter {
        None | Some(Value::Null) => None,
        Some(f) => Some(MetadataFilter::parse(&f).map_err(ApiError::BadRequest)?).filter(|f| !f.clauses.is_empty()),
    };
    let q = VectorQuery::Search(SearchRequest { collection: name.clone(), vector: body.vector, k, ef, filter });
    match read(&state, g, q, &prefs).await? {
        VectorQueryResult::Hits(hits) => {
            let hits: Vec<HitView> = hits
                .into_iter()
                .map(|VectorHit { id, score, distance, metadata }| HitView { id, score, distance, metadata })
                .collect();
            Ok(Json(SearchView { collection: name, count: hits.len(), hits }))
        }
        other => Err(ApiError::unexpected(other)),
    }
}
