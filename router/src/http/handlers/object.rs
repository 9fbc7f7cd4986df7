//! Object store routes (spec 03 part A). A bucket's objects are spread over
//! the data groups by a hash of bucket and key, as MinIO spreads objects over its
//! erasure sets: the bucket's record lives in its home group (the hash of its
//! name) with a copy in every other group, and listings merge every group's
//! key-ordered page. PUT streams the body into 256 KiB chunk commands in the
//! object's group and then commits; GET streams the chunks back (with
//! single-range support).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_api::GroupId;
use tessera_api::http::iso8601_ms;
use tessera_api::object::{BucketInfo, CHUNK_BYTES, Fnv1a64, ObjectMeta, ObjectOp, ObjectQuery, ObjectQueryResult, validate_bucket_name};
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;

use super::{JsonBody, QueryParams, ReadPrefs, require_writer, served_headers};
use crate::cluster::Served;
use crate::cluster::typed::{self, ObjectReply, Objects, shape};
use crate::error::ApiError;
use crate::services::auth::{Caller, new_id};
use crate::services::catalog::Catalog;
use crate::state::AppState;

pub mod ncb;

const MAX_OBJECT_KEY_BYTES: usize = 1024;
const DEFAULT_LIST_LIMIT: usize = 1000;
const MAX_LIST_LIMIT: usize = 10_000;

// ---------------------------------------------------------------- answers

/// An object's description (its bytes are served by `GET …/object/{key}`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct ObjectView {
    bucket: String,
    key: String,
    size: u64,
    /// A quoted hash of the content, as HTTP entity tags are.
    etag: String,
    content_type: String,
    /// What `X-Service-Meta` carried at upload, or null.
    metadata: Value,
    created_at: String,
    updated_at: String,
}

impl From<&ObjectMeta> for ObjectView {
    fn from(m: &ObjectMeta) -> Self {
        ObjectView {
            bucket: m.bucket.clone(),
            key: m.key.clone(),
            size: m.size,
            etag: format!("\"{}\"", m.etag),
            content_type: m.content_type.clone(),
            metadata: m.metadata.clone(),
            created_at: iso8601_ms(m.created_at_ms),
            updated_at: iso8601_ms(m.updated_at_ms),
        }
    }
}

/// Answer of a bucket's creation.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CreatedBucket {
    name: String,
    created: bool,
}

/// A bucket in the listing.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BucketView {
    name: String,
    created_at: String,
}

/// Answer of `GET /api/v1/objects/buckets`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BucketList {
    buckets: Vec<BucketView>,
    count: usize,
}

/// A bucket's figures over every group.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BucketStats {
    name: String,
    created_at: String,
    object_count: u64,
    total_bytes: u64,
    /// Uploads begun and not committed yet.
    pending_uploads: u64,
}

/// Answer of a bucket's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DroppedBucket {
    name: String,
    deleted: bool,
}

/// Answer of an object listing.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ObjectList {
    bucket: String,
    objects: Vec<ObjectView>,
    count: usize,
    is_truncated: bool,
    /// The `marker` that lists the next page, when truncated.
    next_marker: Option<String>,
}

/// Answer of an object's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedObject {
    bucket: String,
    key: String,
    deleted: bool,
}

fn check_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() || key.len() > MAX_OBJECT_KEY_BYTES {
        return Err(ApiError::BadRequest(format!("object keys are 1 to {MAX_OBJECT_KEY_BYTES} bytes")));
    }
    Ok(())
}

async fn object_read(state: &AppState, group: GroupId, q: ObjectQuery, prefs: &ReadPrefs) -> Result<ObjectQueryResult, ApiError> {
    Ok(typed::read::<Objects>(&*state.cluster, group, q, prefs.consistency, prefs.replica).await?.value)
}

/// Bucket `bucket`'s record: homed where the bucket name hashes, copied to every data group.
fn catalog<'a>(state: &'a AppState, bucket: &str) -> Result<Catalog<'a>, ApiError> {
    Catalog::everywhere(state, &RoutingKey::Bucket(bucket))
}

/// The group holding `bucket`'s own record, which decides whether it exists.
fn home_group(state: &AppState, bucket: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Bucket(bucket))?)
}

/// The group holding object `key` of `bucket`.
pub(crate) fn object_group(state: &AppState, bucket: &str, key: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Object { bucket, key })?)
}

/// The bucket's record from its home group.
pub(crate) async fn bucket_record(state: &AppState, bucket: &str, prefs: &ReadPrefs) -> Result<Option<BucketInfo>, ApiError> {
    let answer = object_read(state, home_group(state, bucket)?, ObjectQuery::Bucket { name: bucket.into() }, prefs).await?;
    typed::pick(answer, shape!(ObjectQueryResult::Bucket))
}

/// Creates `bucket` in its home group (409 when it exists), then copies the
/// record to the other groups. A copy that cannot be written now is made by
/// the first write of an object into its group ([`write_in_bucket`]).
pub(crate) async fn create_bucket_everywhere(state: &AppState, bucket: &str, c: Consistency) -> Result<(), ApiError> {
    let cat = catalog(state, bucket)?;
    object_write(state, cat.home, ObjectOp::CreateBucket { name: bucket.into(), copy_of_created_at_ms: None }, c).await?;
    let Some(info) = bucket_record(state, bucket, &ReadPrefs::QUORUM).await? else {
        return Err(ApiError::Unavailable(format!("bucket {bucket} was dropped while it was being created")));
    };
    let copy = || ObjectOp::CreateBucket { name: bucket.into(), copy_of_created_at_ms: Some(info.created_at_ms) };
    for (g, r) in cat.write_copies::<Objects>(copy, c).await {
        if let Err(e) = r {
            tracing::warn!(bucket, group = g, "copying the bucket record failed (made on first write): {e}");
        }
    }
    Ok(())
}

/// Drops `bucket` (404 when it does not exist): its objects in every other
/// group first, then the home record, so an interrupted drop leaves the bucket
/// in place and can be repeated.
pub(crate) async fn drop_bucket_everywhere(state: &AppState, bucket: &str, c: Consistency) -> Result<(), ApiError> {
    let cat = catalog(state, bucket)?;
    if bucket_record(state, bucket, &ReadPrefs::QUORUM).await?.is_none() {
        return Err(ApiError::NotFound(format!("bucket {bucket} does not exist")));
    }
    let drop_copy = || ObjectOp::DropBucket { name: bucket.into(), if_exists: true };
    for (_, r) in cat.write_copies::<Objects>(drop_copy, c).await {
        r.map_err(|e| ApiError::Unavailable(format!("dropping bucket {bucket} did not finish (repeat it): {e}")))?;
    }
    object_write(state, cat.home, ObjectOp::DropBucket { name: bucket.into(), if_exists: false }, c).await?;
    // A write that found its group's copy gone while the drop ran may have made
    // the copy again from the home record; remove such copies now that the home
    // record is gone (one made later still is of this incarnation and is emptied
    // when the bucket is made again).
    for (g, r) in cat.write_copies::<Objects>(drop_copy, c).await {
        if let Err(e) = r {
            tracing::warn!(bucket, group = g, "removing a bucket copy after the drop failed: {e}");
        }
    }
    Ok(())
}

/// Writes `op` for an object of `bucket` into `group`; when that group lacks
/// its copy of the bucket record but the home group has the bucket, makes
/// the copy and writes again.
pub(crate) async fn write_in_bucket(
    state: &AppState,
    bucket: &str,
    group: GroupId,
    op: ObjectOp,
    c: Consistency,
) -> Result<Served<ObjectReply>, ApiError> {
    match object_write_served(state, group, op.clone(), c).await {
        Err(ApiError::NotFound(m)) if group != home_group(state, bucket)? => {
            let Some(info) = bucket_record(state, bucket, &ReadPrefs::QUORUM).await? else {
                return Err(ApiError::NotFound(m));
            };
            if op_incarnation(&op).is_some_and(|i| i != info.created_at_ms) {
                return Err(ApiError::NotFound(m)); // the bucket was made again since the write began
            }
            let copy = ObjectOp::CreateBucket { name: bucket.into(), copy_of_created_at_ms: Some(info.created_at_ms) };
            object_write(state, group, copy, c).await?;
            object_write_served(state, group, op, c).await
        }
        other => other,
    }
}

/// The bucket incarnation an object write was made for.
fn op_incarnation(op: &ObjectOp) -> Option<i64> {
    match op {
        ObjectOp::PutChunk { incarnation, .. } => *incarnation,
        ObjectOp::CommitObject(m) => m.bucket_incarnation,
        _ => None,
    }
}

/// Up to `limit` objects of `bucket` under `prefix`, after `after`, in key
/// order across every group; `None` when the bucket does not exist.
pub(crate) async fn list_merged(
    state: &AppState,
    bucket: &str,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    prefs: &ReadPrefs,
) -> Result<Option<Vec<ObjectMeta>>, ApiError> {
    let home = home_group(state, bucket)?;
    let groups = state.cluster.data_groups()?;
    let q = || ObjectQuery::List { bucket: bucket.into(), prefix: prefix.into(), after: after.map(String::from), limit };
    let pages = futures::future::join_all(groups.iter().map(|g| object_read(state, *g, q(), prefs))).await;
    let mut merged = Vec::new();
    for (g, page) in groups.iter().zip(pages) {
        match typed::pick(page?, shape!(ObjectQueryResult::List))? {
            Some(objects) => merged.extend(objects),
            None if *g == home => return Ok(None),
            None => {} // no copy of the record yet, so no objects there
        }
    }
    merged.sort_by(|a, b| a.key.cmp(&b.key));
    merged.truncate(limit);
    Ok(Some(merged))
}

async fn object_write(state: &AppState, group: GroupId, op: ObjectOp, c: Consistency) -> Result<ObjectReply, ApiError> {
    Ok(object_write_served(state, group, op, c).await?.value)
}

async fn object_write_served(state: &AppState, group: GroupId, op: ObjectOp, c: Consistency) -> Result<Served<ObjectReply>, ApiError> {
    typed::write::<Objects>(&*state.cluster, group, op, c).await
}

/// Body of `POST /api/v1/objects/buckets`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateBucket {
    #[schemars(pattern(crate::http::openapi::formats::BUCKET), length(min = 3, max = 63))]
    name: String,
}

/// `POST /api/v1/objects/buckets {name}` → 201.
pub async fn create_bucket(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<CreateBucket>,
) -> Result<(StatusCode, Json<CreatedBucket>), ApiError> {
    require_writer(&caller)?;
    validate_bucket_name(&req.name).map_err(ApiError::BadRequest)?;
    create_bucket_everywhere(&state, &req.name, prefs.consistency).await?;
    Ok((StatusCode::CREATED, Json(CreatedBucket { name: req.name, created: true })))
}

/// `GET /api/v1/objects/buckets`: the buckets of every group, by name.
pub async fn list_buckets(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<BucketList>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| object_read(&state, *g, ObjectQuery::ListBuckets, &prefs));
    let mut buckets = Vec::new();
    for r in futures::future::join_all(calls).await {
        buckets.extend(typed::pick(r?, shape!(ObjectQueryResult::Buckets))?);
    }
    // Every group holds a copy of each bucket's record.
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    buckets.dedup_by(|a, b| a.name == b.name);
    let buckets: Vec<BucketView> =
        buckets.iter().map(|b| BucketView { name: b.name.clone(), created_at: iso8601_ms(b.created_at_ms) }).collect();
    Ok(Json(BucketList { count: buckets.len(), buckets }))
}

/// `GET /api/v1/objects/buckets/{bucket}`: object count and bytes over every group.
pub async fn bucket_stats(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(bucket): Path<String>,
) -> Result<Json<BucketStats>, ApiError> {
    let home = home_group(&state, &bucket)?;
    let groups = state.cluster.data_groups()?;
    let q = || ObjectQuery::BucketStats { name: bucket.clone() };
    let answers = futures::future::join_all(groups.iter().map(|g| object_read(&state, *g, q(), &prefs))).await;
    let (mut home_stats, mut object_count, mut total_bytes, mut pending_uploads) = (None, 0u64, 0u64, 0u64);
    for (g, answer) in groups.iter().zip(answers) {
        if let Some(s) = typed::pick(answer?, shape!(ObjectQueryResult::Stats))? {
            object_count += s.object_count;
            total_bytes += s.total_bytes;
            pending_uploads += s.pending_uploads;
            if *g == home {
                home_stats = Some(s);
            }
        }
    }
    let s = home_stats.ok_or_else(|| ApiError::NotFound(format!("bucket {bucket} does not exist")))?;
    Ok(Json(BucketStats { name: s.name, created_at: iso8601_ms(s.created_at_ms), object_count, total_bytes, pending_uploads }))
}

/// `DELETE /api/v1/objects/buckets/{bucket}`: drops the bucket and its objects.
pub async fn drop_bucket(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(bucket): Path<String>,
) -> Result<Json<DroppedBucket>, ApiError> {
    require_writer(&caller)?;
    drop_bucket_everywhere(&state, &bucket, prefs.consistency).await?;
    Ok(Json(DroppedBucket { name: bucket, deleted: true }))
}

/// Query of object listing: `prefix`, `limit`, and `marker` (list after this key).
#[derive(schemars::JsonSchema, Deserialize)]
pub struct ListParams {
    prefix: Option<String>,
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<usize>,
    #[serde(alias = "after", alias = "continuation_token")]
    marker: Option<String>,
}

/// `GET /api/v1/objects/buckets/{bucket}/objects?prefix=&limit=&marker=`.
pub async fn list_objects(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(bucket): Path<String>,
    QueryParams(p): QueryParams<ListParams>,
) -> Result<Json<ObjectList>, ApiError> {
    let limit = p.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if limit == 0 || limit > MAX_LIST_LIMIT {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {MAX_LIST_LIMIT}")));
    }
    let prefix = p.prefix.unwrap_or_default();
    let mut objects = list_merged(&state, &bucket, &prefix, p.marker.as_deref(), limit + 1, &prefs)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("bucket {bucket} does not exist")))?;
    let is_truncated = objects.len() > limit;
    objects.truncate(limit);
    let next_marker = if is_truncated { objects.last().map(|o| o.key.clone()) } else { None };
    let objects: Vec<ObjectView> = objects.iter().map(ObjectView::from).collect();
    Ok(Json(ObjectList { bucket, count: objects.len(), objects, is_truncated, next_marker }))
}

/// `PUT /api/v1/objects/buckets/{bucket}/object/{*key}`: streams the raw body in.
pub async fn put_object(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((bucket, key)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<(HeaderMap, Json<ObjectView>), ApiError> {
    require_writer(&caller)?;
    check_key(&key)?;
    let max = state.config.objects.max_object_bytes;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(ApiError::PayloadTooLarge(format!("objects may be at most {max} bytes")));
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/octet-stream").to_string();
    let metadata = match headers.get("x-service-meta") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .ok_or_else(|| ApiError::BadRequest("X-Service-Meta must be a JSON value".into()))?,
        None => Value::Null,
    };
    let group = object_group(&state, &bucket, &key)?;
    // The upload belongs to the bucket's current incarnation: if the bucket is
    // dropped (and perhaps made again) meanwhile, its chunks and commit are refused.
    let incarnation = match bucket_record(&state, &bucket, &ReadPrefs::QUORUM).await? {
        Some(info) => info.created_at_ms,
        None => return Err(ApiError::NotFound(format!("bucket {bucket} does not exist"))),
    };
    let blob_id = new_id();
    let mut upload =
        Upload { state: &state, group, bucket: &bucket, blob_id: &blob_id, incarnation, chunks: 0, consistency: prefs.consistency };
    let mut stream = body.into_data_stream();
    let (mut buf, mut size, mut etag) = (Vec::with_capacity(CHUNK_BYTES), 0u64, Fnv1a64::default());
    let result: Result<(), ApiError> = async {
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?;
            size += piece.len() as u64;
            if size > max {
                return Err(ApiError::PayloadTooLarge(format!("objects may be at most {max} bytes")));
            }
            etag.update(&piece);
            buf.extend_from_slice(&piece);
            while buf.len() >= CHUNK_BYTES {
                let rest = buf.split_off(CHUNK_BYTES);
                upload.send(std::mem::replace(&mut buf, rest)).await?;
            }
        }
        if !buf.is_empty() {
            upload.send(std::mem::take(&mut buf)).await?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        upload.abort().await;
        return Err(e);
    }
    let meta = ObjectMeta {
        bucket: bucket.clone(),
        key,
        size,
        etag: etag.hex(),
        content_type,
        metadata,
        blob_id: blob_id.clone(),
        chunks: upload.chunks,
        chunk_bytes: CHUNK_BYTES as u32,
        created_at_ms: 0,
        updated_at_ms: 0,
        bucket_incarnation: Some(incarnation),
    };
    let served = match write_in_bucket(&state, &bucket, group, ObjectOp::CommitObject(meta), prefs.consistency).await {
        Ok(s) => s,
        Err(e) => {
            upload.abort().await;
            return Err(e);
        }
    };
    let mut h = served_headers(&served);
    let stored = typed::pick(served.value, shape!(ObjectReply::Stored))?;
    h.insert(header::ETAG, quoted(&stored.etag));
    Ok((h, Json(ObjectView::from(&stored))))
}

/// The chunks of one upload in flight.
struct Upload<'a> {
    state: &'a AppState,
    group: GroupId,
    bucket: &'a str,
    blob_id: &'a str,
    incarnation: i64,
    chunks: u32,
    consistency: Consistency,
}

impl Upload<'_> {
    async fn send(&mut self, data: Vec<u8>) -> Result<(), ApiError> {
        let op = ObjectOp::PutChunk {
            bucket: self.bucket.into(),
            blob_id: self.blob_id.into(),
            index: self.chunks,
            data,
            incarnation: Some(self.incarnation),
        };
        write_in_bucket(self.state, self.bucket, self.group, op, self.consistency).await?;
        self.chunks += 1;
        Ok(())
    }

    /// Frees the chunks written so far (best effort: a failure leaves them for a later sweep).
    async fn abort(&self) {
        if self.chunks == 0 {
            return;
        }
        let op = ObjectOp::AbortUpload { bucket: self.bucket.into(), blob_id: self.blob_id.into(), chunks: self.chunks };
        if let Err(e) = object_write(self.state, self.group, op, Consistency::Quorum).await {
            tracing::warn!(bucket = self.bucket, blob = self.blob_id, "aborting an upload failed: {e}");
        }
    }
}

fn quoted(etag: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{etag}\"")).unwrap_or(HeaderValue::from_static("\"\""))
}

/// Query of object GET: `meta=1` answers the JSON metadata instead of the content.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct GetParams {
    meta: Option<String>,
}

async fn head_meta(state: &AppState, prefs: &ReadPrefs, bucket: &str, key: &str) -> Result<(GroupId, ObjectMeta), ApiError> {
    check_key(key)?;
    let group = object_group(state, bucket, key)?;
    let answer = object_read(state, group, ObjectQuery::Head { bucket: bucket.into(), key: key.into() }, prefs).await?;
    match typed::pick(answer, shape!(ObjectQueryResult::Meta))? {
        Some(m) => Ok((group, m)),
        None => Err(ApiError::NotFound(format!("object {bucket}/{key} does not exist"))),
    }
}

fn content_headers(m: &ObjectMeta) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(&m.content_type).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    h.insert(header::ETAG, quoted(&m.etag));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if !m.metadata.is_null()
        && let Ok(v) = HeaderValue::from_str(&m.metadata.to_string())
    {
        h.insert("x-service-meta", v);
    }
    h
}

/// `HEAD …/object/{*key}`: the headers of GET without the content.
pub async fn head_object(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((bucket, key)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (_, m) = head_meta(&state, &prefs, &bucket, &key).await?;
    let mut h = content_headers(&m);
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(m.size));
    Ok((StatusCode::OK, h).into_response())
}

/// Parses a single `bytes=` range against `size` into an inclusive `(start, end)`.
fn parse_range(value: &str, size: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None; // several ranges: serve the whole object, as RFC 9110 allows
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let range = match (a.is_empty(), b.is_empty()) {
        (true, false) => {
            let n: u64 = b.parse().ok()?;
            if n == 0 || size == 0 {
                return Some(Err(()));
            }
            (size.saturating_sub(n), size - 1)
        }
        (false, _) => {
            let start: u64 = a.parse().ok()?;
            let end = if b.is_empty() { size.saturating_sub(1) } else { b.parse::<u64>().ok()?.min(size.saturating_sub(1)) };
            if start >= size || end < start {
                return Some(Err(()));
            }
            (start, end)
        }
        (true, true) => return None,
    };
    Some(Ok(range))
}

/// `GET …/object/{*key}`: the raw content with its Content-Type and quoted ETag,
/// or (`?meta=1`) the JSON metadata; honours a single `Range`.
pub async fn get_object(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path((bucket, key)): Path<(String, String)>,
    QueryParams(p): QueryParams<GetParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (group, m) = head_meta(&state, &prefs, &bucket, &key).await?;
    if p.meta.as_deref().is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        return Ok(Json(ObjectView::from(&m)).into_response());
    }
    let mut h = content_headers(&m);
    let (status, start, end) = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()).and_then(|v| parse_range(v, m.size)) {
        Some(Ok((s, e))) => {
            h.insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes {s}-{e}/{}", m.size)).expect("ascii"));
            (StatusCode::PARTIAL_CONTENT, s, e + 1)
        }
        Some(Err(())) => {
            let mut err = ApiError::RangeNotSatisfiable(format!("the object is {} bytes", m.size)).into_response();
            err.headers_mut().insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{}", m.size)).expect("ascii"));
            return Ok(err);
        }
        None => (StatusCode::OK, 0, m.size),
    };
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    let chunk = m.chunk_bytes.max(1) as u64;
    let (first, last) = (start / chunk, if end == 0 { 0 } else { (end - 1) / chunk });
    let consistency = prefs.consistency;
    let replica = prefs.replica;
    let stream = futures::stream::iter(first..=last).take_while(move |_| std::future::ready(end > start)).then(move |index| {
        let (state, m) = (state.clone(), m.clone());
        async move {
            let q = ObjectQuery::Chunk { bucket: m.bucket.clone(), blob_id: m.blob_id.clone(), index: index as u32 };
            let prefs = ReadPrefs { consistency, replica };
            let data = match object_read(&state, group, q, &prefs).await {
                Ok(ObjectQueryResult::Chunk(Some(d))) => d,
                Ok(_) => return Err(std::io::Error::other("the object changed while it was being read")),
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            };
            let base = index * chunk;
            let from = start.saturating_sub(base) as usize;
            let to = ((end - base) as usize).min(data.len());
            Ok(axum::body::Bytes::from(data).slice(from.min(to)..to))
        }
    });
    Ok((status, h, Body::from_stream(stream)).into_response())
}

/// `DELETE …/object/{*key}`.
pub async fn delete_object(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path((bucket, key)): Path<(String, String)>,
) -> Result<Json<DeletedObject>, ApiError> {
    require_writer(&caller)?;
    check_key(&key)?;
    let group = object_group(&state, &bucket, &key)?;
    let op = ObjectOp::DeleteObject { bucket: bucket.clone(), key: key.clone() };
    match typed::pick(object_write(&state, group, op, prefs.consistency).await?, shape!(ObjectReply::Deleted))? {
        0 => Err(ApiError::NotFound(format!("object {bucket}/{key} does not exist"))),
        _ => Ok(Json(DeletedObject { bucket, key, deleted: true })),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-99", 1000), Some(Ok((0, 99))));
        assert_eq!(parse_range("bytes=900-", 1000), Some(Ok((900, 999))));
        assert_eq!(parse_range("bytes=-100", 1000), Some(Ok((900, 999))));
        assert_eq!(parse_range("bytes=990-2000", 1000), Some(Ok((990, 999))));
        assert_eq!(parse_range("bytes=1000-", 1000), Some(Err(())));
        assert_eq!(parse_range("bytes=0-1,5-6", 1000), None);
        assert_eq!(parse_range("items=0-1", 1000), None);
    }
}
