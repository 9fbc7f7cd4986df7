//! Vector store routes (spec 03 part B) under `/api/v1/vector/collections`.
//!
//! A collection is split over `shards` data groups (default: every data
//! group), starting at its home group (where `vector/<name>` hashes) and going
//! on in group order; each shard holds the collection's definition and its own
//! HNSW index. A record lives on shard `fnv1a64(id) mod shards`: upsert, get
//! and delete go to that shard, a batch is validated whole and then sent as one
//! Raft command per shard, a search asks every shard (each runs its own filtered
//! graph search) and merges their top-k by distance, stats sum the shards.
//! The router caches each collection's layout (uid and shards); a shard refuses
//! a command naming another uid, upon which the layout is read again.
//!
//! Bodies: create `{name, dim, metric: cosine|l2|dot, m?, ef_construction?, shards?}`;
//! upsert `{id, vector, metadata?}`; batch `{vectors: [{id, vector, metadata?}, …]}`;
//! search `{vector, k (default 10), ef?, filter?}` → `{hits: [{id, score,
//! distance, metadata}], count}`, nearest first. `filter` is an object of
//! `field: value` (equality), `field: {"$eq": v}` or `field: {"$in": [v, …]}`,
//! all of which must hold; it is applied during the graph search.

pub mod ncb;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tessera_api::GroupId;
use tessera_api::http::iso8601_ms;
use tessera_api::routing::RoutingKey;
use tessera_api::vector::{
    CollectionConfig, CollectionStats, DEFAULT_EF_CONSTRUCTION, DEFAULT_M, MAX_DIM, MAX_EF, MAX_K, MetadataFilter, SearchRequest,
    VectorHit, VectorMetric, VectorOp, VectorQuery, VectorQueryResult, VectorRecord, VectorResponse, check_vector,
    validate_collection_name, validate_record_id,
};

use std::collections::HashMap;

use super::{JsonBody, ReadPrefs, require_writer};
use crate::cluster::typed::{self, Vector, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id};
use crate::services::catalog::Catalog;
use crate::services::vector_layouts::Layout;
use crate::state::AppState;

/// Most records in one batch upsert.
const MAX_BATCH: usize = 10_000;
const DEFAULT_K: i64 = 10;

/// The vector routes, merged into the router's table.
pub fn routes() -> RouteTable {
    const C: &str = "/api/v1/vector/collections";
    RouteTable::new()
        .get(C, P("read:vectors"), list_collections)
        .post(C, P("write:vectors"), create_collection)
        .answers(&[201])
        .get(format!("{C}/{{name}}"), P("read:vectors"), collection_stats)
        .delete(format!("{C}/{{name}}"), P("write:vectors"), drop_collection)
        .post(format!("{C}/{{name}}/upsert"), P("write:vectors"), upsert)
        .post(format!("{C}/{{name}}/batch"), P("write:vectors"), batch_upsert)
        .post(format!("{C}/{{name}}/search"), P("read:vectors"), search)
        .get(format!("{C}/{{name}}/vectors/{{*id}}"), P("read:vectors"), get_record)
        .delete(format!("{C}/{{name}}/vectors/{{*id}}"), P("write:vectors"), delete_record)
        .get("/api/v1/admin/vectors/{name}/export", P("manage:backup"), ncb::export_collection)
        .post("/api/v1/admin/vectors/{name}/import", P("manage:backup"), ncb::import_collection)
        .answers(&[201])
}

/// The home group of a collection: where its name hashes.
fn home(state: &AppState, name: &str) -> Result<GroupId, ApiError> {
    validate_collection_name(name).map_err(ApiError::BadRequest)?;
    Ok(state.cluster.group_for(&RoutingKey::VectorCollection(name))?)
}

/// The layout of `name`: from the cache unless `fresh`, else read from its home
/// group. The flag says whether it came from the cache.
async fn layout(state: &AppState, name: &str, prefs: &ReadPrefs, fresh: bool) -> Result<(Layout, bool), ApiError> {
    let home = home(state, name)?;
    if !fresh && let Some(l) = state.vector_layouts.read().expect("layouts lock").get(name) {
        return Ok((l.clone(), true));
    }
    match read(state, home, VectorQuery::Stats { name: name.into() }, prefs, shape!(VectorQueryResult::Stats)).await {
        Ok(s) => {
            let l = Layout::of(&s.config, home);
            state.vector_layouts.write().expect("layouts lock").insert(name.into(), l.clone());
            Ok((l, false))
        }
        Err(e) => {
            forget(state, name);
            Err(e)
        }
    }
}

fn forget(state: &AppState, name: &str) {
    state.vector_layouts.write().expect("layouts lock").remove(name);
}

/// Runs `f` with the collection's layout; when a cached layout meets "not found"
/// (the collection may have been recreated), reads the layout again and retries once.
async fn with_layout<T, F, Fut>(state: &AppState, name: &str, prefs: &ReadPrefs, f: F) -> Result<T, ApiError>
where
    F: Fn(Layout) -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let (l, cached) = layout(state, name, prefs, false).await?;
    match f(l).await {
        Err(ApiError::NotFound(_)) if cached => {
            let (l, _) = layout(state, name, prefs, true).await?;
            f(l).await
        }
        r => r,
    }
}

/// A write whose reply has the one shape named.
async fn write<T>(
    state: &AppState,
    group: GroupId,
    op: VectorOp,
    prefs: &ReadPrefs,
    shape: impl FnOnce(VectorResponse) -> Result<T, VectorResponse>,
) -> Result<T, ApiError> {
    Ok(typed::write_as::<Vector, T>(&*state.cluster, group, op, prefs.consistency, shape).await?.value)
}

/// A read whose answer has the one shape named.
async fn read<T>(
    state: &AppState,
    group: GroupId,
    q: VectorQuery,
    prefs: &ReadPrefs,
    shape: impl FnOnce(VectorQueryResult) -> Result<T, VectorQueryResult>,
) -> Result<T, ApiError> {
    let read = typed::read_as::<Vector, T>(&*state.cluster, group, q, prefs.consistency, prefs.replica, shape);
    Ok(super::within_query_timeout(state, read).await?.value)
}

/// A collection as returned: configuration, live count, and its shards (each
/// with its own count when known).
fn collection_view(c: &CollectionConfig, home: GroupId, per_shard: &[(GroupId, u64)]) -> CollectionView {
    CollectionView {
        name: c.name.clone(),
        dim: c.dim,
        metric: c.metric.as_str().to_string(),
        m: c.m,
        ef_construction: c.ef_construction,
        count: per_shard.iter().map(|(_, n)| n).sum(),
        created_at: iso8601_ms(c.created_at_ms),
        shards: Layout::of(c, home).shards,
        shard_counts: per_shard.iter().map(|(group, count)| ShardCount { group: *group, count: *count }).collect(),
    }
}

/// A collection: its configuration, live count, and shards.
#[derive(schemars::JsonSchema, Serialize)]
pub(crate) struct CollectionView {
    name: String,
    dim: u32,
    #[schemars(pattern(crate::http::openapi::formats::VECTOR_METRIC))]
    metric: String,
    m: u32,
    ef_construction: u32,
    /// Records over every shard.
    count: u64,
    created_at: String,
    /// The data groups holding its shards, the first its home.
    shards: Vec<GroupId>,
    /// Each shard's records, when known.
    shard_counts: Vec<ShardCount>,
}

/// One shard's record count.
#[derive(schemars::JsonSchema, Serialize)]
struct ShardCount {
    group: GroupId,
    count: u64,
}

/// Answer of `GET /api/v1/vector/collections`.
#[derive(schemars::JsonSchema, Serialize)]
struct CollectionList {
    collections: Vec<CollectionView>,
    count: usize,
}

/// Answer of a dropped collection.
#[derive(schemars::JsonSchema, Serialize)]
struct DroppedCollection {
    name: String,
    dropped: bool,
    /// Records deleted with it.
    deleted_count: u64,
}

/// Answer of one record's upsert.
#[derive(schemars::JsonSchema, Serialize)]
struct Upserted {
    collection: String,
    id: String,
    upserted: bool,
    /// True when no record had the id before.
    created: bool,
}

/// Answer of a batch upsert.
#[derive(schemars::JsonSchema, Serialize)]
struct BatchUpserted {
    collection: String,
    upserted: usize,
    inserted: u64,
    updated: u64,
}

/// Answer of a record's removal.
#[derive(schemars::JsonSchema, Serialize)]
struct DeletedRecord {
    collection: String,
    id: String,
    deleted: bool,
}

/// A stored record as returned by GET (f32 components serialize exactly).
#[derive(schemars::JsonSchema, Serialize)]
struct RecordView {
    id: String,
    vector: Vec<f32>,
    metadata: Value,
    created_at: String,
    updated_at: String,
}

/// Body of `POST /api/v1/vector/collections`.
#[derive(schemars::JsonSchema, Deserialize)]
struct CreateCollection {
    #[schemars(pattern(crate::http::openapi::formats::VECTOR_COLLECTION))]
    name: String,
    #[schemars(range(min = 1, max = 4096))]
    dim: i64,
    #[schemars(pattern(crate::http::openapi::formats::VECTOR_METRIC))]
    metric: String,
    #[schemars(range(min = 2, max = 256))]
    m: Option<i64>,
    #[schemars(range(min = 1, max = 10000))]
    ef_construction: Option<i64>,
    /// How many data groups to split over (default: all of them; at most their number).
    #[schemars(range(min = 1))]
    shards: Option<i64>,
}

fn in_range(what: &str, v: i64, lo: u32, hi: u32) -> Result<u32, ApiError> {
    u32::try_from(v).ok().filter(|v| (lo..=hi).contains(v)).ok_or_else(|| ApiError::BadRequest(format!("{what} must be {lo} to {hi}")))
}

/// `POST /api/v1/vector/collections` → 201 with the collection. The definition
/// is written to the home group first (which decides a name conflict), then to
/// the other shards; a failure there drops what was created.
async fn create_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateCollection>,
) -> Result<(StatusCode, Json<CollectionView>), ApiError> {
    require_writer(&caller)?;
    create(&state, &prefs, req).await
}

/// Creates a collection (see [`create_collection`]).
async fn create(state: &AppState, prefs: &ReadPrefs, req: CreateCollection) -> Result<(StatusCode, Json<CollectionView>), ApiError> {
    let home = home(state, &req.name)?;
    let mut groups = state.cluster.data_groups()?;
    groups.sort_unstable();
    let n = in_range("shards", req.shards.unwrap_or(groups.len() as i64), 1, groups.len() as u32)? as usize;
    let start = groups.iter().position(|g| *g == home).unwrap_or(0);
    let shards: Vec<GroupId> = (0..n).map(|i| groups[(start + i) % groups.len()]).collect();
    let config = CollectionConfig {
        dim: in_range("dim", req.dim, 1, MAX_DIM)?,
        metric: VectorMetric::parse(&req.metric).map_err(ApiError::BadRequest)?,
        m: in_range("m", req.m.unwrap_or(DEFAULT_M.into()), 2, 256)?,
        ef_construction: in_range("ef_construction", req.ef_construction.unwrap_or(DEFAULT_EF_CONSTRUCTION.into()), 1, MAX_EF)?,
        name: req.name.clone(),
        created_at_ms: 0,
        shards: shards.clone(),
        uid: new_id(),
    };
    let created = write(state, home, VectorOp::CreateCollection(config.clone()), prefs, shape!(VectorResponse::Created)).await?;
    let others = shards[1..].iter().map(|g| create_on_shard(state, *g, &config, prefs));
    let results = futures::future::join_all(others).await;
    if let Some(e) = results.into_iter().find_map(Result::err) {
        undo_create(state, &config, home, prefs).await;
        return Err(e);
    }
    forget(state, &req.name);
    let per_shard: Vec<(GroupId, u64)> = shards.iter().map(|g| (*g, 0)).collect();
    Ok((StatusCode::CREATED, Json(collection_view(&created, home, &per_shard))))
}

/// Undoes a create that did not reach every shard: drops the copies it can
/// reach, then the home definition, so the name is free again. A copy left on
/// a shard that did not answer is an orphan with this create's uid; the next
/// create of the name replaces it (see [`create_on_shard`]).
async fn undo_create(state: &AppState, config: &CollectionConfig, home: GroupId, prefs: &ReadPrefs) {
    let op = || VectorOp::DropCollection { name: config.name.clone(), uid: Some(config.uid.clone()) };
    // The layout starts at the home group (see `create_collection`).
    let Some(cat) = Catalog::on_shards(state, &config.shards) else { return };
    for (group, r) in cat.write_copies::<Vector>(op, prefs.consistency).await {
        match r {
            Ok(_) | Err(ApiError::NotFound(_)) => {}
            Err(e) => tracing::warn!(collection = config.name, group, "undoing a failed create on a shard: {e}"),
        }
    }
    if let Err(e) = write(state, home, op(), prefs, Ok).await {
        tracing::warn!(collection = config.name, "undoing a failed create at its home: {e}");
    }
}

/// Writes the definition to a non-home shard. The home group accepted the name,
/// so a definition already there is an orphan of an interrupted create or drop:
/// it is dropped and the write retried.
async fn create_on_shard(state: &AppState, group: GroupId, config: &CollectionConfig, prefs: &ReadPrefs) -> Result<(), ApiError> {
    let op = || VectorOp::CreateCollection(config.clone());
    match write(state, group, op(), prefs, Ok).await {
        Err(ApiError::Conflict(_)) => {
            tracing::warn!(collection = config.name, group, "dropping an orphaned collection definition");
            let _ = write(state, group, VectorOp::DropCollection { name: config.name.clone(), uid: None }, prefs, Ok).await;
            write(state, group, op(), prefs, Ok).await.map(|_| ())
        }
        r => r.map(|_| ()),
    }
}

/// Drops the collection from its shards, home last (so it stays listed, and can
/// be dropped again, until every shard is done); the sum of records dropped.
async fn drop_everywhere(state: &AppState, name: &str, l: &Layout, prefs: &ReadPrefs) -> Result<u64, ApiError> {
    let Some(cat) = Catalog::on_shards(state, &l.shards) else { return Ok(0) };
    let op = || VectorOp::DropCollection { name: name.into(), uid: l.uid() };
    let (copies, home) = cat.drop_home_last::<Vector>(op, prefs.consistency).await?;
    copies.into_iter().chain([home?]).try_fold(0, |total, reply| Ok(total + typed::pick(reply, shape!(VectorResponse::Dropped { count }))?))
}

/// `GET /api/v1/vector/collections`: every collection (found through its home
/// group's copy), counts summed over its shards, by name.
async fn list_collections(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<CollectionList>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups
        .iter()
        .map(|g| async { (*g, read(&state, *g, VectorQuery::ListCollections, &prefs, shape!(VectorQueryResult::Collections)).await) });
    // name → (home copy, per-shard counts of copies with the same uid)
    let mut copies: Vec<(GroupId, CollectionStats)> = Vec::new();
    for (g, r) in futures::future::join_all(calls).await {
        copies.extend(r?.into_iter().map(|s| (g, s)));
    }
    let mut out: Vec<(String, CollectionView)> = Vec::new();
    for (g, s) in &copies {
        let c = &s.config;
        let is_home = c.shards.first().is_none_or(|h| h == g);
        if !is_home {
            continue;
        }
        let l = Layout::of(c, *g);
        let per_shard: Vec<(GroupId, u64)> = l
            .shards
            .iter()
            .map(|shard| {
                let n = copies
                    .iter()
                    .find(|(cg, cs)| cg == shard && cs.config.name == c.name && cs.config.uid == c.uid)
                    .map_or(0, |(_, cs)| cs.count);
                (*shard, n)
            })
            .collect();
        out.push((c.name.clone(), collection_view(c, *g, &per_shard)));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let collections: Vec<CollectionView> = out.into_iter().map(|(_, v)| v).collect();
    Ok(Json(CollectionList { count: collections.len(), collections }))
}

/// `GET /api/v1/vector/collections/{name}`: configuration, live record count
/// (the sum of the shards) and each shard's count.
async fn collection_stats(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Json<CollectionView>, ApiError> {
    let home = home(&state, &name)?;
    let config = read(&state, home, VectorQuery::Stats { name: name.clone() }, &prefs, shape!(VectorQueryResult::Stats)).await?.config;
    let l = Layout::of(&config, home);
    let calls =
        l.shards.iter().map(|g| read(&state, *g, VectorQuery::Stats { name: name.clone() }, &prefs, shape!(VectorQueryResult::Stats)));
    let mut per_shard = Vec::with_capacity(l.shards.len());
    for (g, r) in l.shards.iter().zip(futures::future::join_all(calls).await) {
        match r? {
            s if s.config.uid == config.uid => per_shard.push((*g, s.count)),
            _ => return Err(ApiError::Conflict(format!("collection {name} is being recreated"))),
        }
    }
    Ok(Json(collection_view(&config, home, &per_shard)))
}

/// `DELETE /api/v1/vector/collections/{name}`: drops the collection and its records on every shard.
async fn drop_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Json<DroppedCollection>, ApiError> {
    require_writer(&caller)?;
    let (l, _) = layout(&state, &name, &prefs, true).await?;
    let count = drop_everywhere(&state, &name, &l, &prefs).await;
    forget(&state, &name);
    let count = count?;
    Ok(Json(DroppedCollection { name, dropped: true, deleted_count: count }))
}

/// One record of an upsert: `{id, vector, metadata?}`.
#[derive(schemars::JsonSchema, Deserialize)]
struct RecordBody {
    #[schemars(schema_with = "crate::http::openapi::formats::vector_record_id")]
    id: Value,
    /// As many components as the collection's `dim`.
    vector: Vec<f32>,
    /// An object, or null for none.
    metadata: Option<Map<String, Value>>,
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
        let metadata = Value::Object(self.metadata.unwrap_or_default());
        Ok(VectorRecord { id, vector: self.vector, metadata, created_at_ms: 0, updated_at_ms: 0 })
    }
}

/// Validates every record against the collection, then sends one command per
/// shard (in parallel); each shard's part applies atomically.
async fn upsert_records(state: &AppState, prefs: &ReadPrefs, collection: &str, records: Vec<VectorRecord>) -> Result<(u64, u64), ApiError> {
    with_layout(state, collection, prefs, |l| {
        let records = records.clone();
        async move {
            let mut parts: HashMap<GroupId, Vec<VectorRecord>> = HashMap::new();
            for r in records {
                check_vector(l.metric, l.dim, &r.vector).map_err(|e| ApiError::BadRequest(format!("record {}: {e}", r.id)))?;
                parts.entry(l.shard(&r.id)).or_default().push(r);
            }
            let calls = parts.into_iter().map(|(g, records)| {
                let op = VectorOp::Upsert { collection: collection.to_string(), records, uid: l.uid() };
                write(state, g, op, prefs, shape!(VectorResponse::Upserted { inserted, updated }))
            });
            let (mut inserted, mut updated) = (0, 0);
            for r in futures::future::join_all(calls).await {
                let (i, u) = r?;
                inserted += i;
                updated += u;
            }
            Ok((inserted, updated))
        }
    })
    .await
}

/// `POST …/{name}/upsert {id, vector, metadata?}`: inserts or replaces one record.
async fn upsert(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<RecordBody>,
) -> Result<Json<Upserted>, ApiError> {
    require_writer(&caller)?;
    let record = body.into_record()?;
    let id = record.id.clone();
    let (inserted, _) = upsert_records(&state, &prefs, &name, vec![record]).await?;
    Ok(Json(Upserted { collection: name, id, upserted: true, created: inserted > 0 }))
}

/// Body of a batch upsert.
#[derive(schemars::JsonSchema, Deserialize)]
struct BatchBody {
    #[serde(alias = "records", alias = "items")]
    #[schemars(length(min = 1, max = 10000))]
    vectors: Vec<RecordBody>,
}

/// `POST …/{name}/batch {vectors: [{id, vector, metadata?}, …]}`: one atomic command.
async fn batch_upsert(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Json<BatchUpserted>, ApiError> {
    require_writer(&caller)?;
    if body.vectors.is_empty() || body.vectors.len() > MAX_BATCH {
        return Err(ApiError::BadRequest(format!("a batch holds 1 to {MAX_BATCH} records")));
    }
    let records = body.vectors.into_iter().map(RecordBody::into_record).collect::<Result<Vec<_>, _>>()?;
    let n = records.len();
    let (inserted, updated) = upsert_records(&state, &prefs, &name, records).await?;
    Ok(Json(BatchUpserted { collection: name, upserted: n, inserted, updated }))
}

/// `GET …/{name}/vectors/{id}`.
async fn get_record(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<RecordView>, ApiError> {
    let got = with_layout(&state, &name, &prefs, |l| {
        let q = VectorQuery::Get { collection: name.clone(), id: id.clone(), uid: l.uid() };
        read(&state, l.shard(&id), q, &prefs, shape!(VectorQueryResult::Record))
    })
    .await?;
    Ok(Json(RecordView {
        id: got.id,
        vector: got.vector,
        metadata: got.metadata,
        created_at: iso8601_ms(got.created_at_ms),
        updated_at: iso8601_ms(got.updated_at_ms),
    }))
}

/// `DELETE …/{name}/vectors/{id}`: a soft delete inside the index.
async fn delete_record(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<DeletedRecord>, ApiError> {
    require_writer(&caller)?;
    with_layout(&state, &name, &prefs, |l| {
        let op = VectorOp::Delete { collection: name.clone(), id: id.clone(), uid: l.uid() };
        let deleted = |reply| match reply {
            VectorResponse::Deleted => Ok(()),
            other => Err(other),
        };
        write(&state, l.shard(&id), op, &prefs, deleted)
    })
    .await?;
    Ok(Json(DeletedRecord { collection: name, id, deleted: true }))
}

/// Body of a search.
#[derive(schemars::JsonSchema, Deserialize)]
struct SearchBody {
    vector: Vec<f32>,
    #[schemars(range(min = 1, max = 1000))]
    k: Option<i64>,
    #[schemars(range(min = 1, max = 10000))]
    ef: Option<i64>,
    #[schemars(with = "Option<Map<String, Value>>")]
    filter: Option<Value>,
}

/// A search hit as returned (f32 fields serialize exactly).
#[derive(schemars::JsonSchema, Serialize)]
struct HitView {
    id: String,
    score: f32,
    distance: f32,
    metadata: Value,
}

/// The search response.
#[derive(schemars::JsonSchema, Serialize)]
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
    let k = in_range("k", body.k.unwrap_or(DEFAULT_K), 1, MAX_K)?;
    let ef = body.ef.map(|e| in_range("ef", e, 1, MAX_EF)).transpose()?;
    let filter = match body.filter {
        None | Some(Value::Null) => None,
        Some(f) => Some(MetadataFilter::parse(&f).map_err(ApiError::BadRequest)?).filter(|f| !f.clauses.is_empty()),
    };
    let vector = body.vector;
    let hits = with_layout(&state, &name, &prefs, |l| {
        let req = SearchRequest { collection: name.clone(), vector: vector.clone(), k, ef, filter: filter.clone(), uid: l.uid() };
        let (state, prefs) = (&state, &prefs);
        async move {
            check_vector(l.metric, l.dim, &req.vector).map_err(|e| ApiError::BadRequest(format!("query vector: {e}")))?;
            let calls = l.shards.iter().map(|g| read(state, *g, VectorQuery::Search(req.clone()), prefs, shape!(VectorQueryResult::Hits)));
            let mut all: Vec<VectorHit> = Vec::new();
            for r in futures::future::join_all(calls).await {
                all.extend(r?);
            }
            // Each shard's hits are its nearest first; the merged top-k is the k nearest of all.
            all.sort_by(|a, b| a.distance.total_cmp(&b.distance).then_with(|| a.id.cmp(&b.id)));
            all.truncate(k as usize);
            Ok(all)
        }
    })
    .await?;
    let hits: Vec<HitView> =
        hits.into_iter().map(|VectorHit { id, score, distance, metadata }| HitView { id, score, distance, metadata }).collect();
    Ok(Json(SearchView { collection: name, count: hits.len(), hits }))
}
