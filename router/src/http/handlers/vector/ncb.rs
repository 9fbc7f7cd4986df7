//! Export and import of a vector collection as a `vectors.ncb` file (admin
//! routes; spec 03 names the file beside `objects.ncb`): the collection's
//! configuration and its live records. An import creates the collection and
//! upserts the records, so the HNSW index is rebuilt from them.
//!
//! The file is one gzip stream (RFC 1952, CRC-32 of the whole content in its
//! trailer) holding, little-endian throughout:
//!
//! ```text
//! magic    8 bytes  "TSRNCBV\0"
//! version  u32      1
//! config   str      JSON {name, dim, metric, m, ef_construction}
//! then per record, in each shard's insertion order, shard by shard:
//!   tag       u8  = 1
//!   id        str
//!   metadata  str  JSON text
//!   dim       u32
//!   vector    `dim` f32
//! and finally:
//!   tag       u8  = 0
//!   count     u64  records in the file
//! ```
//! where `str` is a `u32` byte length followed by UTF-8.
//!
//! The export is built in memory before it is sent; the import reads and
//! checks the whole file (gzip CRC, every record against the configuration,
//! the end record's count) before it creates anything, so a corrupt or
//! truncated file changes nothing.

use std::io::{Read, Write};

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Value, json};
use tessera_api::vector::{VectorQuery, VectorQueryResult, VectorRecord};

use super::{CreateCollection, MAX_BATCH, create, read, upsert_records, with_layout};
use crate::cluster::typed::shape;
use crate::error::ApiError;
use crate::http::handlers::ReadPrefs;
use crate::services::auth::Caller;
use crate::state::AppState;

const MAGIC: &[u8; 8] = b"TSRNCBV\0";
const VERSION: u32 = 1;
/// Largest file an import takes, compressed and unpacked.
pub const MAX_FILE_BYTES: usize = 256 * 1024 * 1024;
/// Records read from a shard per page of an export.
const PAGE: u32 = 512;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `GET /api/v1/admin/vectors/{name}/export`: the collection as `vectors.ncb`.
pub async fn export_collection(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let (config, records) = with_layout(&state, &name, &prefs, |l| {
        let (state, name, prefs) = (&state, &name, &prefs);
        async move {
            let home = l.shards[0];
            let stats = read(state, home, VectorQuery::Stats { name: name.clone() }, prefs, shape!(VectorQueryResult::Stats)).await?;
            let mut records = Vec::new();
            for &shard in &l.shards {
                let mut after = None;
                loop {
                    let q = VectorQuery::Scan { collection: name.clone(), uid: l.uid(), after, limit: PAGE };
                    let (page, next) = read(state, shard, q, prefs, shape!(VectorQueryResult::Page { records, next })).await?;
                    records.extend(page);
                    match next {
                        Some(n) => after = Some(n),
                        None => break,
                    }
                }
            }
            Ok((stats.config, records))
        }
    })
    .await?;
    let mut raw = Vec::new();
    raw.extend_from_slice(MAGIC);
    raw.extend_from_slice(&VERSION.to_le_bytes());
    let described = json!({
        "name": config.name, "dim": config.dim, "metric": config.metric.as_str(),
        "m": config.m, "ef_construction": config.ef_construction,
    });
    put_str(&mut raw, &described.to_string());
    for r in &records {
        raw.push(1);
        put_str(&mut raw, &r.id);
        put_str(&mut raw, &r.metadata.to_string());
        raw.extend_from_slice(&(r.vector.len() as u32).to_le_bytes());
        for x in &r.vector {
            raw.extend_from_slice(&x.to_le_bytes());
        }
    }
    raw.push(0);
    raw.extend_from_slice(&(records.len() as u64).to_le_bytes());
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(&raw).and_then(|_| enc.flush()).map_err(|e| ApiError::Internal(format!("compressing the export: {e}")))?;
    let file = enc.finish().map_err(|e| ApiError::Internal(format!("compressing the export: {e}")))?;
    let mut resp = Body::from(file).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    let disposition = format!("attachment; filename=\"{name}.vectors.ncb\"");
    headers.insert(header::CONTENT_DISPOSITION, HeaderValue::from_str(&disposition).unwrap_or(HeaderValue::from_static("attachment")));
    headers.insert("x-tessera-records", HeaderValue::from(records.len() as u64));
    Ok(resp)
}

/// What a file holds: the collection's configuration and its records.
struct Parsed {
    dim: i64,
    metric: String,
    m: i64,
    ef_construction: i64,
    records: Vec<VectorRecord>,
}

fn corrupt(what: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("not a valid vectors.ncb file: {what}"))
}

fn take<'a>(raw: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], ApiError> {
    if raw.len() < n {
        return Err(corrupt(format!("truncated in {what}")));
    }
    let (head, rest) = raw.split_at(n);
    *raw = rest;
    Ok(head)
}

fn take_u32(raw: &mut &[u8], what: &str) -> Result<u32, ApiError> {
    Ok(u32::from_le_bytes(take(raw, 4, what)?.try_into().expect("4 bytes")))
}

fn take_str(raw: &mut &[u8], what: &str) -> Result<String, ApiError> {
    let n = take_u32(raw, what)? as usize;
    String::from_utf8(take(raw, n, what)?.to_vec()).map_err(|_| corrupt(format!("{what} is not UTF-8")))
}

/// Unpacks and checks a whole file.
fn parse(file: &[u8]) -> Result<Parsed, ApiError> {
    let mut raw = Vec::new();
    GzDecoder::new(file).take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut raw).map_err(|e| corrupt(format!("gzip: {e}")))?;
    if raw.len() > MAX_FILE_BYTES {
        return Err(ApiError::PayloadTooLarge(format!("the unpacked file is over {MAX_FILE_BYTES} bytes")));
    }
    let mut r = raw.as_slice();
    if take(&mut r, 8, "the magic")? != MAGIC {
        return Err(corrupt("wrong magic"));
    }
    let version = take_u32(&mut r, "the version")?;
    if version != VERSION {
        return Err(corrupt(format!("version {version}; this router reads version {VERSION}")));
    }
    let config: Value =
        serde_json::from_str(&take_str(&mut r, "the configuration")?).map_err(|e| corrupt(format!("configuration: {e}")))?;
    let int = |k: &str| config[k].as_i64().ok_or_else(|| corrupt(format!("configuration lacks {k}")));
    let (dim, m, ef_construction) = (int("dim")?, int("m")?, int("ef_construction")?);
    let metric = config["metric"].as_str().ok_or_else(|| corrupt("configuration lacks metric"))?.to_string();
    let mut records = Vec::new();
    loop {
        match take(&mut r, 1, "a record tag")?[0] {
            1 => {
                let id = take_str(&mut r, "a record id")?;
                let metadata: Value = serde_json::from_str(&take_str(&mut r, "record metadata")?)
                    .map_err(|e| corrupt(format!("record {id}: metadata: {e}")))?;
                let n = take_u32(&mut r, "a vector length")? as i64;
                if n != dim {
                    return Err(corrupt(format!("record {id} has {n} components; the collection has dim {dim}")));
                }
                let bytes = take(&mut r, 4 * n as usize, "a vector")?;
                let vector = bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                records.push(VectorRecord { id, vector, metadata, created_at_ms: 0, updated_at_ms: 0 });
            }
            0 => {
                let count = u64::from_le_bytes(take(&mut r, 8, "the record count")?.try_into().expect("8 bytes"));
                if count != records.len() as u64 {
                    return Err(corrupt(format!("the end record counts {count} records; the file holds {}", records.len())));
                }
                if !r.is_empty() {
                    return Err(corrupt("bytes after the end record"));
                }
                return Ok(Parsed { dim, metric, m, ef_construction, records });
            }
            tag => return Err(corrupt(format!("unknown record tag {tag}"))),
        }
    }
}

/// `POST /api/v1/admin/vectors/{name}/import` with a `vectors.ncb` body: creates
/// collection `name` with the file's configuration (409 when it exists) and
/// upserts every record; 400 with nothing created for a corrupt file.
pub async fn import_collection(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    body: Body,
) -> Result<(StatusCode, Json<CollectionImport>), ApiError> {
    let file = axum::body::to_bytes(body, MAX_FILE_BYTES)
        .await
        .map_err(|_| ApiError::PayloadTooLarge(format!("a vectors.ncb import is at most {MAX_FILE_BYTES} bytes")))?;
    let parsed =
        tokio::task::spawn_blocking(move || parse(&file)).await.map_err(|e| ApiError::Internal(format!("reading the file: {e}")))??;
    let req = CreateCollection {
        name: name.clone(),
        dim: parsed.dim,
        metric: parsed.metric,
        m: Some(parsed.m),
        ef_construction: Some(parsed.ef_construction),
        shards: None,
    };
    let (_, created) = create(&state, &prefs, req).await?;
    let mut imported = 0usize;
    let mut records = parsed.records;
    while !records.is_empty() {
        let rest = records.split_off(records.len().min(MAX_BATCH));
        let batch = std::mem::replace(&mut records, rest);
        imported += batch.len();
        upsert_records(&state, &prefs, &name, batch).await?;
    }
    Ok((StatusCode::CREATED, Json(CollectionImport { collection: created.0, imported })))
}

/// The answer of a collection import: the collection created, and how many
/// records it holds.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct CollectionImport {
    collection: super::CollectionView,
    imported: usize,
}
