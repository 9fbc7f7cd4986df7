//! Document routes (spec 01 documents).
//!
//! A document lives in the data group that `doc/<collection>/<id>` hashes to.
//! Every data group keeps the collection definition (schema, indexes): it is
//! written to the collection's home group (`doccoll/<name>`, which decides
//! conflicts) and then to every other group. Listings and queries fan out to all
//! groups, each sorting and limiting locally; the merge orders the answers by
//! the engines' sort keys (ties by id), then skips and limits again.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tessera_api::GroupId;
use tessera_api::document::{
    CollectionDef, DocOp, DocQuery, DocQueryResult, DocRecord, DocResponse, FindSpec, FoundDoc, validate_collection_name, validate_doc_id,
    validate_index_field,
};
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::http::iso8601_ms;
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;

use super::{JsonBody, QueryParams, ReadPrefs, require_writer, served_headers};
use crate::cluster::Served;
use crate::cluster::typed::{self, Document, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id};
use crate::services::catalog::{Catalog, all_ok};
use crate::state::AppState;

/// The document routes, merged into the router's table.
pub fn routes() -> RouteTable {
    const C: &str = "/api/v1/documents/collections";
    RouteTable::new()
        .get(C, P("read:documents"), list_collections)
        .post(C, P("write:documents"), create_collection)
        .answers(&[201])
        .get(format!("{C}/{{name}}"), P("read:documents"), get_collection)
        .delete(format!("{C}/{{name}}"), P("write:documents"), drop_collection)
        .post(format!("{C}/{{name}}/documents"), P("write:documents"), insert)
        .answers(&[201])
        .get(format!("{C}/{{name}}/documents"), P("read:documents"), get_collection)
        .get(format!("{C}/{{name}}/documents/{{id}}"), P("read:documents"), get_document)
        .put(format!("{C}/{{name}}/documents/{{id}}"), P("write:documents"), replace)
        .patch(format!("{C}/{{name}}/documents/{{id}}"), P("write:documents"), update)
        .delete(format!("{C}/{{name}}/documents/{{id}}"), P("write:documents"), delete_document)
        .post(format!("{C}/{{name}}/documents/{{id}}/update"), P("write:documents"), update)
        .post(format!("{C}/{{name}}/query"), P("read:documents"), query)
        .get(format!("{C}/{{name}}/indexes"), P("read:documents"), list_indexes)
        .post(format!("{C}/{{name}}/indexes"), P("write:documents"), create_index)
        .answers(&[201])
        .delete(format!("{C}/{{name}}/indexes/{{field}}"), P("write:documents"), drop_index)
        .post("/api/v1/documents/{name}/query", P("read:documents"), query)
}

// ---------------------------------------------------------------- cluster calls

/// Collection `name`'s definition: homed where `doccoll/<name>` hashes, copied to every data group.
fn catalog<'a>(state: &'a AppState, name: &str) -> Result<Catalog<'a>, ApiError> {
    Catalog::everywhere(state, &RoutingKey::Collection(name))
}

fn home_group(state: &AppState, name: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Collection(name))?)
}

fn doc_group(state: &AppState, collection: &str, id: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Document { collection, id })?)
}

/// A write whose rejection is left to the caller.
async fn propose(state: &AppState, group: GroupId, op: DocOp, c: Consistency) -> Result<Served<Result<DocResponse, Rejection>>, ApiError> {
    typed::propose::<Document>(&*state.cluster, group, op, c).await
}

/// A write whose rejection becomes the matching error.
async fn write(state: &AppState, group: GroupId, op: DocOp, c: Consistency) -> Result<Served<DocResponse>, ApiError> {
    typed::write::<Document>(&*state.cluster, group, op, c).await
}

/// The same kind of write to several groups at once; rejections left to the caller.
async fn write_all(
    state: &AppState,
    groups: &[GroupId],
    op: impl Fn() -> DocOp,
    c: Consistency,
) -> Result<Vec<Result<DocResponse, Rejection>>, ApiError> {
    Ok(typed::propose_each::<Document>(&*state.cluster, groups, op, c).await?.into_iter().map(|(_, r)| r).collect())
}

/// A read whose rejection is left to the caller.
async fn read(
    state: &AppState,
    group: GroupId,
    q: DocQuery,
    prefs: &ReadPrefs,
) -> Result<Served<Result<DocQueryResult, Rejection>>, ApiError> {
    typed::ask::<Document>(&*state.cluster, group, q, prefs.consistency, prefs.replica).await
}

async fn read_all(state: &AppState, q: DocQuery, prefs: &ReadPrefs) -> Result<Vec<Result<DocQueryResult, Rejection>>, ApiError> {
    Ok(read_each(state, q, prefs).await?.into_iter().map(|(_, r)| r).collect())
}

/// Every data group's answer to `q`, with the group.
async fn read_each(
    state: &AppState,
    q: DocQuery,
    prefs: &ReadPrefs,
) -> Result<Vec<(GroupId, Result<DocQueryResult, Rejection>)>, ApiError> {
    let groups = state.cluster.data_groups()?;
    super::within_query_timeout(state, typed::ask_each::<Document>(&*state.cluster, &groups, &q, prefs.consistency, prefs.replica)).await
}

fn no_collection(name: &str) -> ApiError {
    ApiError::NotFound(format!("collection {name} does not exist"))
}

/// Writes a collection definition (schema, then indexes) to every copy;
/// idempotent, so it also repairs a partly created collection.
async fn spread_definition(state: &AppState, def: &CollectionDef, c: Consistency) -> Result<(), ApiError> {
    let cat = catalog(state, &def.name)?;
    let create = || DocOp::CreateCollection { name: def.name.clone(), schema: def.schema.clone(), exclusive: false };
    all_ok(cat.write_copies::<Document>(create, c).await)?;
    for field in &def.indexes {
        let op = || DocOp::CreateIndex { collection: def.name.clone(), field: field.clone() };
        all_ok(cat.write_copies::<Document>(op, c).await)?;
    }
    Ok(())
}

/// The first refusal among fan-out replies, as an error.
fn check_all(replies: Vec<Result<DocResponse, Rejection>>) -> Result<Vec<DocResponse>, ApiError> {
    replies.into_iter().collect::<Result<Vec<_>, _>>().map_err(ApiError::from)
}

/// Creates collection `name` without schema on every group (idempotent, so it
/// also repairs a partly created one); its definition as the home group holds it.
async fn create_everywhere(state: &AppState, name: &str, c: Consistency) -> Result<CollectionDef, ApiError> {
    let home = home_group(state, name)?;
    write(state, home, DocOp::CreateCollection { name: name.into(), schema: None, exclusive: false }, c).await?;
    let def = home_definition(state, name).await?;
    spread_definition(state, &def, c).await?;
    Ok(def)
}

/// The collection's definition from its home group, held by every group
/// afterwards: the collection is created (without schema, on every group) when
/// it does not exist, as an insert does, and copied to any group that lost its
/// copy (an interrupted create). Bulk writes that reach many groups start here.
pub(crate) async fn ensure_collection(state: &AppState, name: &str, c: Consistency) -> Result<CollectionDef, ApiError> {
    let prefs = ReadPrefs::QUORUM;
    let home = home_group(state, name)?;
    let answer = read(state, home, DocQuery::Collection { name: name.into() }, &prefs).await?.value?;
    match typed::pick(answer, shape!(DocQueryResult::Collection))? {
        Some(def) => {
            repair_copies(state, &def, c).await?;
            Ok(def)
        }
        None => create_everywhere(state, name, c).await,
    }
}

/// Copies the home definition to the groups that lack their copy (an
/// interrupted create), found by one read of every other group. Then checks
/// that the home group still holds the same collection and takes the new
/// copies back if it was dropped meanwhile: a concurrent drop is never undone.
/// A group that cannot be reached is left to fail its own part of the caller's
/// write.
async fn repair_copies(state: &AppState, def: &CollectionDef, c: Consistency) -> Result<(), ApiError> {
    let prefs = ReadPrefs::QUORUM;
    let cat = catalog(state, &def.name)?;
    let q = || DocQuery::Collection { name: def.name.clone() };
    let mut missing = Vec::new();
    for (group, r) in cat.ask_copies::<Document>(&q(), &prefs).await {
        match r.and_then(|answer| typed::pick(answer, shape!(DocQueryResult::Collection))) {
            Ok(None) => missing.push(group),
            Ok(Some(_)) => {}
            Err(ApiError::Unavailable(e)) => tracing::warn!(collection = def.name, group, "cannot check the collection's copy: {e}"),
            Err(e) => return Err(e),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let create = || DocOp::CreateCollection { name: def.name.clone(), schema: def.schema.clone(), exclusive: false };
    let created: Vec<GroupId> = all_ok(cat.write_to::<Document>(&missing, create, c).await)?
        .into_iter()
        .filter(|(_, r)| matches!(r, DocResponse::Created(true)))
        .map(|(g, _)| g)
        .collect();
    for field in &def.indexes {
        let op = || DocOp::CreateIndex { collection: def.name.clone(), field: field.clone() };
        all_ok(cat.write_to::<Document>(&created, op, c).await)?;
    }
    let still = read(state, cat.home, q(), &prefs).await?.value;
    if matches!(&still, Ok(DocQueryResult::Collection(Some(d))) if d.created_at_ms == def.created_at_ms) {
        tracing::info!(collection = def.name, groups = ?created, "copied the collection to groups that lacked it");
        return Ok(());
    }
    let drop = || DocOp::DropCollection { name: def.name.clone() };
    for (group, r) in cat.write_to::<Document>(&created, drop, c).await {
        if let Err(e) = r {
            tracing::warn!(collection = def.name, group, "taking back a copy of a dropped collection failed: {e}");
        }
    }
    Err(no_collection(&def.name))
}

/// The home group's definition of a collection, read from its leader.
async fn home_definition(state: &AppState, name: &str) -> Result<CollectionDef, ApiError> {
    let prefs = ReadPrefs::QUORUM;
    let answer = read(state, home_group(state, name)?, DocQuery::Collection { name: name.into() }, &prefs).await?.value?;
    typed::pick(answer, shape!(DocQueryResult::Collection))?.ok_or_else(|| no_collection(name))
}

// ---------------------------------------------------------------- answers

/// A stored document as clients see it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DocumentView {
    id: String,
    collection: String,
    /// The document's content.
    #[schemars(with = "Map<String, Value>")]
    data: Value,
    created_at: String,
    updated_at: String,
}

impl From<&DocRecord> for DocumentView {
    fn from(d: &DocRecord) -> Self {
        DocumentView {
            id: d.id.clone(),
            collection: d.collection.clone(),
            data: d.data.clone(),
            created_at: iso8601_ms(d.created_at_ms),
            updated_at: iso8601_ms(d.updated_at_ms),
        }
    }
}

/// A collection's definition.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CollectionView {
    name: String,
    /// The JSON Schema its documents must meet, or null for none.
    #[schemars(schema_with = "json_schema_document")]
    schema: Option<Value>,
    /// The fields it keeps indexes on.
    indexes: Vec<String>,
    created_at: String,
}

impl From<&CollectionDef> for CollectionView {
    fn from(def: &CollectionDef) -> Self {
        CollectionView {
            name: def.name.clone(),
            schema: def.schema.clone(),
            indexes: def.indexes.clone(),
            created_at: iso8601_ms(def.created_at_ms),
        }
    }
}

/// Answer of a collection's creation.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CreatedCollection {
    #[serde(flatten)]
    collection: CollectionView,
    created: bool,
}

/// A collection in the listing, with its documents counted over every group.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ListedCollection {
    #[serde(flatten)]
    collection: CollectionView,
    document_count: u64,
}

/// Answer of `GET /api/v1/documents/collections`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CollectionList {
    collections: Vec<ListedCollection>,
    count: usize,
}

/// Answer of a dropped collection.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DroppedCollection {
    name: String,
    deleted: bool,
    documents_deleted: u64,
}

/// Answer of a deleted document.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedDocument {
    id: String,
    collection: String,
    deleted: bool,
}

/// The documents a query or listing found, merged over every group.
#[derive(Serialize, schemars::JsonSchema)]
pub struct FoundDocuments {
    collection: String,
    /// The collection, as the listing routes name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    documents: Vec<DocumentView>,
    count: usize,
    total_matched: u64,
    total_scanned: u64,
    /// The index a group's engine used, or null for a scan.
    index_used: Option<String>,
    /// More documents matched than the router's row limit let through.
    truncated: bool,
    execution_time_ms: u64,
}

/// An index of a collection.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IndexField {
    field: String,
}

/// Answer of `GET …/collections/{name}/indexes`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IndexList {
    collection: String,
    indexes: Vec<IndexField>,
    count: usize,
}

/// Answer of an index's creation.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CreatedIndex {
    collection: String,
    field: String,
    created: bool,
}

/// Answer of an index's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DroppedIndex {
    collection: String,
    field: String,
    deleted: bool,
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

// ---------------------------------------------------------------- collections

/// Body of `POST /api/v1/documents/collections`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateCollection {
    #[schemars(pattern(crate::http::openapi::formats::DOCUMENT_COLLECTION), extend("not" = {"enum": ["collections"]}))]
    name: String,
    /// A JSON Schema the collection's documents must meet, or null for none.
    #[serde(default)]
    #[schemars(schema_with = "json_schema_document")]
    schema: Option<Value>,
}

/// A JSON Schema: an object, or `true`/`false`; null for none.
fn json_schema_document(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"nullable": true, "anyOf": [{"type": "object"}, {"type": "boolean"}]})
}

/// `POST /api/v1/documents/collections {name, schema?}` → 201; 409 if it exists.
pub async fn create_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateCollection>,
) -> Result<(StatusCode, Json<CreatedCollection>), ApiError> {
    require_writer(&caller)?;
    validate_collection_name(&req.name).map_err(ApiError::BadRequest)?;
    let schema = req.schema.filter(|s| !s.is_null());
    let home = home_group(&state, &req.name)?;
    let op = DocOp::CreateCollection { name: req.name.clone(), schema: schema.clone(), exclusive: true };
    match propose(&state, home, op, prefs.consistency).await?.value {
        Err(Rejection { code: ErrorCode::Conflict, message, .. }) => {
            // Finish a creation that failed half-way before reporting the conflict.
            let def = home_definition(&state, &req.name).await?;
            spread_definition(&state, &def, prefs.consistency).await?;
            return Err(ApiError::Conflict(message));
        }
        Err(r) => return Err(r.into()),
        Ok(_) => {}
    }
    let def = home_definition(&state, &req.name).await?;
    spread_definition(&state, &def, prefs.consistency).await?;
    Ok((StatusCode::CREATED, Json(CreatedCollection { collection: (&def).into(), created: true })))
}

/// `GET /api/v1/documents/collections`: every collection with its document count.
pub async fn list_collections(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<CollectionList>, ApiError> {
    // Counts add up every group's copy; the definition shown is the home group's.
    let mut merged: std::collections::BTreeMap<String, (CollectionDef, u64)> = Default::default();
    for (group, r) in read_each(&state, DocQuery::ListCollections, &prefs).await? {
        let list = typed::pick(r?, shape!(DocQueryResult::Collections))?;
        for info in list {
            let is_home = home_group(&state, &info.def.name)? == group;
            let e = merged.entry(info.def.name.clone()).or_insert_with(|| (info.def.clone(), 0));
            if is_home {
                e.0 = info.def;
            }
            e.1 += info.documents;
        }
    }
    let collections: Vec<ListedCollection> =
        merged.values().map(|(def, n)| ListedCollection { collection: def.into(), document_count: *n }).collect();
    Ok(Json(CollectionList { count: collections.len(), collections }))
}

/// Query of `GET …/collections/{name}`: `limit` and `skip`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct ListParams {
    limit: Option<usize>,
    #[serde(alias = "offset")]
    skip: Option<usize>,
}

/// `GET /api/v1/documents/collections/{name}?limit=&skip=`: the documents in id
/// order, `{documents, total_scanned, execution_time_ms, ...}`.
pub async fn get_collection(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Json<FoundDocuments>, ApiError> {
    let started = Instant::now();
    let req = FindRequest { filter: None, sort: None, limit: p.limit, skip: p.skip };
    let mut found = find(&state, &prefs, &name, req).await?;
    found.name = Some(name);
    found.execution_time_ms = elapsed_ms(started);
    Ok(Json(found))
}

/// `DELETE /api/v1/documents/collections/{name}`: the collection and its documents.
pub async fn drop_collection(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Json<DroppedCollection>, ApiError> {
    require_writer(&caller)?;
    let op = || DocOp::DropCollection { name: name.clone() };
    let (copies, home) = catalog(&state, &name)?.drop_home_last::<Document>(op, prefs.consistency).await?;
    let (mut found, mut documents) = (false, 0u64);
    let home = match home {
        Ok(reply) => Some(reply),
        Err(ApiError::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    for reply in copies.into_iter().chain(home) {
        documents += typed::pick(reply, shape!(DocResponse::Deleted))?;
        found = true;
    }
    if !found {
        return Err(no_collection(&name));
    }
    Ok(Json(DroppedCollection { name, deleted: true, documents_deleted: documents }))
}

// ---------------------------------------------------------------- documents

/// Body of an insert: `{document, id?}` (an id is assigned when none is given).
#[derive(schemars::JsonSchema, Deserialize)]
pub struct InsertBody {
    #[schemars(with = "Map<String, Value>")]
    document: Value,
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::SLASHLESS_ID))]
    id: Option<String>,
}

/// `POST …/collections/{name}/documents {document}` → 201 with the stored document.
/// A missing collection is created (without schema) on first insert.
pub async fn insert(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(req): JsonBody<InsertBody>,
) -> Result<(StatusCode, HeaderMap, Json<DocumentView>), ApiError> {
    require_writer(&caller)?;
    validate_collection_name(&name).map_err(ApiError::BadRequest)?;
    if !req.document.is_object() {
        return Err(ApiError::BadRequest("document must be a JSON object".into()));
    }
    let id = req.id.unwrap_or_else(new_id);
    validate_doc_id(&id).map_err(ApiError::BadRequest)?;
    let group = doc_group(&state, &name, &id)?;
    let op = || DocOp::Insert { collection: name.clone(), id: id.clone(), data: req.document.clone() };
    let mut served = propose(&state, group, op(), prefs.consistency).await?;
    if matches!(served.value, Err(Rejection { code: ErrorCode::NotFound, .. })) {
        create_everywhere(&state, &name, prefs.consistency).await?;
        served = propose(&state, group, op(), prefs.consistency).await?;
    }
    let (headers, rec) = stored(served)?;
    Ok((StatusCode::CREATED, headers, Json((&rec).into())))
}

/// The document a write stored, with the headers naming who served it.
fn stored(served: Served<Result<DocResponse, Rejection>>) -> Result<(HeaderMap, DocRecord), ApiError> {
    let headers = served_headers(&served);
    Ok((headers, typed::pick(served.value?, shape!(DocResponse::Document))?))
}

/// `GET …/collections/{name}/documents/{id}`.
pub async fn get_document(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<(HeaderMap, Json<DocumentView>), ApiError> {
    validate_doc_id(&id).map_err(ApiError::NotFound)?;
    let group = doc_group(&state, &name, &id)?;
    let served = read(&state, group, DocQuery::Get { collection: name.clone(), id: id.clone() }, &prefs).await?;
    let headers = served_headers(&served);
    match served.value {
        Ok(answer) => match typed::pick(answer, shape!(DocQueryResult::Document))? {
            Some(d) => Ok((headers, Json((&d).into()))),
            None => Err(ApiError::NotFound(format!("document {id} does not exist in collection {name}"))),
        },
        Err(r) if r.code == ErrorCode::NotFound => Err(no_collection(&name)),
        Err(r) => Err(r.into()),
    }
}

/// Body of a replace: `{document}`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct ReplaceBody {
    #[schemars(with = "Map<String, Value>")]
    document: Value,
}

/// `PUT …/documents/{id} {document}`: replaces the whole content.
pub async fn replace(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
    JsonBody(req): JsonBody<ReplaceBody>,
) -> Result<(HeaderMap, Json<DocumentView>), ApiError> {
    require_writer(&caller)?;
    validate_doc_id(&id).map_err(ApiError::NotFound)?;
    if !req.document.is_object() {
        return Err(ApiError::BadRequest("document must be a JSON object".into()));
    }
    let group = doc_group(&state, &name, &id)?;
    let op = DocOp::Replace { collection: name, id, data: req.document };
    let (headers, rec) = stored(propose(&state, group, op, prefs.consistency).await?)?;
    Ok((headers, Json((&rec).into())))
}

/// `PATCH …/documents/{id}` (or `POST …/documents/{id}/update`) with an update
/// document (`$set`, `$unset`, `$inc`), also accepted as `{update: {...}}`; a body
/// without operators is taken as `$set`.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<(HeaderMap, Json<DocumentView>), ApiError> {
    require_writer(&caller)?;
    validate_doc_id(&id).map_err(ApiError::NotFound)?;
    let update = match body.get("update") {
        Some(u @ Value::Object(_)) if body.len() == 1 => u.clone(),
        _ if body.keys().any(|k| k.starts_with('$')) => Value::Object(body),
        _ => json!({"$set": body}),
    };
    let group = doc_group(&state, &name, &id)?;
    let op = DocOp::Update { collection: name, id, update };
    let (headers, rec) = stored(propose(&state, group, op, prefs.consistency).await?)?;
    Ok((headers, Json((&rec).into())))
}

/// `DELETE …/documents/{id}`.
pub async fn delete_document(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<DeletedDocument>, ApiError> {
    require_writer(&caller)?;
    validate_doc_id(&id).map_err(ApiError::NotFound)?;
    let group = doc_group(&state, &name, &id)?;
    let op = DocOp::Delete { collection: name.clone(), id: id.clone() };
    match typed::pick(write(&state, group, op, prefs.consistency).await?.value, shape!(DocResponse::Deleted))? {
        0 => Err(ApiError::NotFound(format!("document {id} does not exist in collection {name}"))),
        _ => Ok(Json(DeletedDocument { id, collection: name, deleted: true })),
    }
}

// ---------------------------------------------------------------- queries

/// A sort specification as sent, with an object's keys kept in the client's
/// order (as `[[path, direction], ...]`); the engines parse and check it.
pub struct SortArg(Value);

impl schemars::JsonSchema for SortArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SortArg".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "a sort: an object of field → 1 (ascending) or -1 (descending), in the client's order; or [[field, direction], …]; or a field name",
            "anyOf": [
                {"type": "object", "additionalProperties": {"type": "integer", "enum": [1, -1]}},
                {"type": "array", "items": {"anyOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 2, "maxItems": 2, "items": {}},
                    {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": {"type": "integer", "enum": [1, -1]}},
                ]}},
                {"type": "string"},
            ],
        })
    }
}

impl<'de> Deserialize<'de> for SortArg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SortArg;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sort object such as {\"field\": 1, \"other\": -1}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SortArg, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    pairs.push(json!([k, v]));
                }
                Ok(SortArg(Value::Array(pairs)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SortArg, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = seq.next_element::<Value>()? {
                    items.push(v);
                }
                Ok(SortArg(Value::Array(items)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SortArg, E> {
                Ok(SortArg(Value::String(s.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<SortArg, E> {
                Ok(SortArg(Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

/// Body of `POST /api/v1/documents/{collection}/query`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct FindRequest {
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    filter: Option<Value>,
    #[serde(default)]
    sort: Option<SortArg>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default, alias = "offset")]
    skip: Option<usize>,
}

/// `POST /api/v1/documents/{collection}/query {filter, sort, limit, skip}`:
/// `{documents, count, total_scanned, index_used, execution_time_ms, ...}`.
pub async fn query(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(req): JsonBody<FindRequest>,
) -> Result<Json<FoundDocuments>, ApiError> {
    let started = Instant::now();
    let mut found = find(&state, &prefs, &name, req).await?;
    found.execution_time_ms = elapsed_ms(started);
    Ok(Json(found))
}

/// Fans a find out to every group and merges the answers.
async fn find(state: &AppState, prefs: &ReadPrefs, name: &str, req: FindRequest) -> Result<FoundDocuments, ApiError> {
    let filter = req.filter.filter(|f| !f.is_null()).unwrap_or_else(|| json!({}));
    let skip = req.skip.unwrap_or(0);
    // Rows a query returns at most (spec limit `max_result_rows`).
    let max_rows = state.config.query_limits.max_result_rows;
    let limit = req.limit.unwrap_or(max_rows).min(max_rows);
    let spec = FindSpec {
        collection: name.to_string(),
        filter,
        sort: req.sort.map(|s| s.0).unwrap_or(Value::Null),
        limit: Some(skip.saturating_add(limit)),
    };
    let (mut docs, mut scanned, mut matched, mut index_used, mut known) = (Vec::<FoundDoc>::new(), 0u64, 0u64, None, false);
    let mut invalid = None;
    for r in read_all(state, DocQuery::Find(spec), prefs).await? {
        match r.map(|answer| typed::pick(answer, shape!(DocQueryResult::Found))) {
            Ok(found) => {
                let f = found?;
                known = true;
                docs.extend(f.docs);
                scanned += f.scanned;
                matched += f.matched;
                index_used = index_used.or(f.index_used);
            }
            Err(r) if r.code == ErrorCode::NotFound => {}
            Err(r) => invalid = Some(r),
        }
    }
    if let Some(r) = invalid {
        return Err(r.into());
    }
    if !known {
        return Err(no_collection(name));
    }
    docs.sort_by(|a, b| a.sort_key.cmp(&b.sort_key).then_with(|| a.doc.id.cmp(&b.doc.id)));
    let documents: Vec<DocumentView> = docs.iter().skip(skip).take(limit).map(|d| (&d.doc).into()).collect();
    let truncated = req.limit.is_none() && (matched as usize).saturating_sub(skip) > documents.len();
    Ok(FoundDocuments {
        collection: name.to_string(),
        name: None,
        count: documents.len(),
        documents,
        total_matched: matched,
        total_scanned: scanned,
        index_used,
        truncated,
        execution_time_ms: 0,
    })
}

// ---------------------------------------------------------------- indexes

/// Body of `POST …/collections/{name}/indexes`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateIndex {
    #[schemars(pattern(crate::http::openapi::formats::FIELD_PATH))]
    field: String,
}

/// `POST …/collections/{name}/indexes {field}` → 201; 409 if it exists.
pub async fn create_index(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    JsonBody(req): JsonBody<CreateIndex>,
) -> Result<(StatusCode, Json<CreatedIndex>), ApiError> {
    require_writer(&caller)?;
    validate_index_field(&req.field).map_err(ApiError::BadRequest)?;
    let home = home_group(&state, &name)?;
    let op = DocOp::CreateIndex { collection: name.clone(), field: req.field.clone() };
    let created = matches!(write(&state, home, op, prefs.consistency).await?.value, DocResponse::Created(true));
    let def = home_definition(&state, &name).await?;
    spread_definition(&state, &def, prefs.consistency).await?;
    if !created {
        return Err(ApiError::Conflict(format!("collection {name} already has an index on {}", req.field)));
    }
    Ok((StatusCode::CREATED, Json(CreatedIndex { collection: name, field: req.field, created: true })))
}

/// `GET …/collections/{name}/indexes`.
pub async fn list_indexes(State(state): State<AppState>, _caller: Caller, Path(name): Path<String>) -> Result<Json<IndexList>, ApiError> {
    let def = home_definition(&state, &name).await?;
    let indexes: Vec<IndexField> = def.indexes.iter().map(|f| IndexField { field: f.clone() }).collect();
    Ok(Json(IndexList { collection: name, count: indexes.len(), indexes }))
}

/// `DELETE …/collections/{name}/indexes/{field}`.
pub async fn drop_index(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((name, field)): Path<(String, String)>,
) -> Result<Json<DroppedIndex>, ApiError> {
    require_writer(&caller)?;
    let groups = state.cluster.data_groups()?;
    let op = || DocOp::DropIndex { collection: name.clone(), field: field.clone() };
    // A group without its copy of the collection (an interrupted create) has no index to drop.
    let replies = write_all(&state, &groups, op, prefs.consistency).await?;
    let replies: Vec<_> = replies.into_iter().filter(|r| !matches!(r, Err(Rejection { code: ErrorCode::NotFound, .. }))).collect();
    if replies.is_empty() {
        return Err(no_collection(&name));
    }
    let replies = check_all(replies)?;
    if !replies.iter().any(|r| matches!(r, DocResponse::Deleted(n) if *n > 0)) {
        return Err(ApiError::NotFound(format!("collection {name} has no index on {field}")));
    }
    Ok(Json(DroppedIndex { collection: name, field, deleted: true }))
}

#[cfg(test)]
mod tests {
    use super::SortArg;
    use serde_json::json;

    #[test]
    fn sort_objects_keep_the_client_key_order() {
        let s: SortArg = serde_json::from_str(r#"{"b": 1, "a": -1, "c.d": "desc"}"#).unwrap();
        assert_eq!(s.0, json!([["b", 1], ["a", -1], ["c.d", "desc"]]));
        let s: SortArg = serde_json::from_str(r#""-age,name""#).unwrap();
        assert_eq!(s.0, json!("-age,name"));
        let s: SortArg = serde_json::from_str(r#"[["x", 1]]"#).unwrap();
        assert_eq!(s.0, json!([["x", 1]]));
    }
}
