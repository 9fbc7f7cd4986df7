//! Export and import of a bucket as an `objects.ncb` file (admin routes).
//!
//! The file is one gzip stream (RFC 1952, CRC-32 of the whole content in its
//! trailer) holding, little-endian throughout:
//!
//! ```text
//! magic    8 bytes  "TSRNCBO\0"
//! version  u32      1
//! bucket   str      the exported bucket's name (informational)
//! then per object, in key order:
//!   tag          u8  = 1
//!   key          str
//!   content_type str
//!   metadata     str  JSON text ("null" when the object has none)
//!   etag         str  FNV-1a 64 of the content, 16 lower-case hex digits
//!   size         u64
//!   content      `size` bytes
//! and finally:
//!   tag          u8  = 0
//!   count        u64  objects in the file
//!   bytes        u64  sum of their sizes
//! ```
//! where `str` is a `u32` byte length followed by UTF-8.
//!
//! Export streams: objects are listed page by page and their chunks read one at a
//! time into the compressor, whose output goes straight to the response. Import
//! stages: every object's content is written as uncommitted chunks (the same
//! `PutChunk` path as PUT) while the file is checked (ETag of each object, the
//! end record, the gzip CRC); only when the whole file is valid are the objects
//! committed. A corrupt or truncated file aborts the staged chunks (and drops the
//! bucket if this import created it): nothing becomes visible.

use std::io::{Read, Write};

use crate::http::handlers::QueryParams;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tessera_api::object::{CHUNK_BYTES, Fnv1a64, ObjectMeta, ObjectOp, ObjectQuery, ObjectQueryResult, validate_bucket_name};
use tessera_api::rpc::Consistency;
use tokio::sync::mpsc;

use super::{
    MAX_OBJECT_KEY_BYTES, bucket_record, create_bucket_everywhere, drop_bucket_everywhere, list_merged, object_group, object_read,
    object_write, write_in_bucket,
};
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::http::handlers::ReadPrefs;
use crate::services::auth::{Caller, new_id};
use crate::state::AppState;

/// First bytes of the decompressed file.
pub const MAGIC: &[u8; 8] = b"TSRNCBO\0";
/// The format version written and accepted.
pub const VERSION: u32 = 1;
const TAG_END: u8 = 0;
const TAG_OBJECT: u8 = 1;
/// Longest content type and metadata text accepted on import.
const MAX_CONTENT_TYPE_BYTES: usize = 1024;
const MAX_METADATA_BYTES: usize = 1 << 20;
/// Objects listed per page while exporting.
const EXPORT_PAGE: usize = 256;
/// Compressed bytes gathered before they are sent on.
const EXPORT_FLUSH_BYTES: usize = 64 * 1024;

fn put_str(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    out.write_all(&(s.len() as u32).to_le_bytes())?;
    out.write_all(s.as_bytes())
}

fn object_header(out: &mut impl Write, m: &ObjectMeta) -> std::io::Result<()> {
    out.write_all(&[TAG_OBJECT])?;
    put_str(out, &m.key)?;
    put_str(out, &m.content_type)?;
    put_str(out, &m.metadata.to_string())?;
    put_str(out, &m.etag)?;
    out.write_all(&m.size.to_le_bytes())
}

type Chunks = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// `GET /api/v1/admin/objects/{bucket}/export`: the bucket as a streamed `objects.ncb`.
pub async fn export_bucket(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(bucket): Path<String>,
) -> Result<Response, ApiError> {
    validate_bucket_name(&bucket).map_err(ApiError::BadRequest)?;
    if bucket_record(&state, &bucket, &prefs).await?.is_none() {
        return Err(ApiError::NotFound(format!("bucket {bucket} does not exist")));
    }
    let (tx, rx) = mpsc::channel(4);
    let name = bucket.clone();
    tokio::spawn(async move {
        if let Err(e) = export_into(&state, &name, &prefs, &tx).await {
            // The response ends without the gzip trailer, so an import refuses it.
            tracing::warn!(bucket = %name, "export aborted: {e}");
            let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/gzip"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{bucket}.objects.ncb\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok((h, Body::from_stream(stream)).into_response())
}

async fn flush(enc: &mut GzEncoder<Vec<u8>>, tx: &Chunks, at_least: usize) -> Result<(), ApiError> {
    if enc.get_ref().len() >= at_least {
        let out = std::mem::take(enc.get_mut());
        tx.send(Ok(Bytes::from(out))).await.map_err(|_| ApiError::BadRequest("the client went away".into()))?;
    }
    Ok(())
}

async fn export_into(state: &AppState, bucket: &str, prefs: &ReadPrefs, tx: &Chunks) -> Result<(), ApiError> {
    let io = |e: std::io::Error| ApiError::Internal(format!("compressing the export: {e}"));
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(MAGIC).map_err(io)?;
    enc.write_all(&VERSION.to_le_bytes()).map_err(io)?;
    put_str(&mut enc, bucket).map_err(io)?;
    let (mut count, mut bytes) = (0u64, 0u64);
    let mut after: Option<String> = None;
    loop {
        let page = list_merged(state, bucket, "", after.as_deref(), EXPORT_PAGE, prefs)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("bucket {bucket} was dropped during the export")))?;
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        for m in &page {
            object_header(&mut enc, m).map_err(io)?;
            let group = object_group(state, bucket, &m.key)?;
            let mut written = 0u64;
            for index in 0..m.chunks {
                let q = ObjectQuery::Chunk { bucket: bucket.into(), blob_id: m.blob_id.clone(), index };
                let chunk = typed::pick(object_read(state, group, q, prefs).await?, shape!(ObjectQueryResult::Chunk))?;
                let Some(data) = chunk else {
                    return Err(ApiError::Conflict(format!("object {} changed during the export", m.key)));
                };
                written += data.len() as u64;
                enc.write_all(&data).map_err(io)?;
                flush(&mut enc, tx, EXPORT_FLUSH_BYTES).await?;
            }
            if written != m.size {
                return Err(ApiError::Internal(format!("object {}: {written} bytes stored, {} expected", m.key, m.size)));
            }
            count += 1;
            bytes += m.size;
        }
        flush(&mut enc, tx, EXPORT_FLUSH_BYTES).await?;
    }
    enc.write_all(&[TAG_END]).map_err(io)?;
    enc.write_all(&count.to_le_bytes()).map_err(io)?;
    enc.write_all(&bytes.to_le_bytes()).map_err(io)?;
    let rest = enc.finish().map_err(io)?;
    if !rest.is_empty() {
        tx.send(Ok(Bytes::from(rest))).await.map_err(|_| ApiError::BadRequest("the client went away".into()))?;
    }
    Ok(())
}

/// One object's header in a file being imported.
struct Header {
    key: String,
    content_type: String,
    metadata: Value,
    etag: String,
    size: u64,
}

/// What the parser hands to the importer, in file order.
enum Event {
    Object(Header),
    /// Content of the current object: full [`CHUNK_BYTES`] pieces, the last one shorter.
    Chunk(Vec<u8>),
    /// The whole file was read and checked.
    Done,
}

/// Why a file was refused.
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error("not a valid objects.ncb file: {0}")]
    Corrupt(String),
    #[error("{0}")]
    TooLarge(String),
}

fn corrupt(e: impl std::fmt::Display) -> FileError {
    FileError::Corrupt(e.to_string())
}

/// A blocking reader over the request body's pieces.
struct BodyReader {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    current: Bytes,
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(Ok(b)) => self.current = b,
                Some(Err(e)) => return Err(std::io::Error::other(format!("reading the request body: {e}"))),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

fn get_u64(r: &mut impl Read) -> Result<u64, FileError> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).map_err(corrupt)?;
    Ok(u64::from_le_bytes(b))
}

fn get_str(r: &mut impl Read, what: &str, max: usize) -> Result<String, FileError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(corrupt)?;
    let len = u32::from_le_bytes(b) as usize;
    if len > max {
        return Err(corrupt(format!("{what} of {len} bytes (at most {max})")));
    }
    let mut s = vec![0u8; len];
    r.read_exact(&mut s).map_err(corrupt)?;
    String::from_utf8(s).map_err(|_| corrupt(format!("{what} is not UTF-8")))
}

/// Reads and checks a whole file, sending events as it goes (blocking).
fn parse(reader: BodyReader, max_object: u64, events: &mpsc::Sender<Result<Event, FileError>>) -> Result<(), FileError> {
    let send = |e: Event| events.blocking_send(Ok(e)).map_err(|_| corrupt("the import was abandoned"));
    let mut r = GzDecoder::new(reader);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).map_err(corrupt)?;
    if &magic != MAGIC {
        return Err(corrupt("wrong magic bytes"));
    }
    let mut v = [0u8; 4];
    r.read_exact(&mut v).map_err(corrupt)?;
    let version = u32::from_le_bytes(v);
    if version != VERSION {
        return Err(corrupt(format!("format version {version} (this server reads {VERSION})")));
    }
    get_str(&mut r, "bucket name", 63)?;
    let (mut count, mut bytes) = (0u64, 0u64);
    loop {
        let mut tag = [0u8; 1];
        r.read_exact(&mut tag).map_err(corrupt)?;
        match tag[0] {
            TAG_OBJECT => {}
            TAG_END => {
                let (n, b) = (get_u64(&mut r)?, get_u64(&mut r)?);
                if (n, b) != (count, bytes) {
                    return Err(corrupt(format!("the end record says {n} objects of {b} bytes, the file holds {count} of {bytes}")));
                }
                // Reading to the end makes the decoder check the gzip CRC and length.
                let mut rest = [0u8; 1];
                if r.read(&mut rest).map_err(corrupt)? != 0 {
                    return Err(corrupt("data after the end record"));
                }
                send(Event::Done)?;
                return Ok(());
            }
            t => return Err(corrupt(format!("unknown record tag {t}"))),
        }
        let key = get_str(&mut r, "key", MAX_OBJECT_KEY_BYTES)?;
        if key.is_empty() {
            return Err(corrupt("an empty object key"));
        }
        let content_type = get_str(&mut r, "content type", MAX_CONTENT_TYPE_BYTES)?;
        let metadata = get_str(&mut r, "metadata", MAX_METADATA_BYTES)?;
        let metadata: Value = serde_json::from_str(&metadata).map_err(|e| corrupt(format!("metadata of {key}: {e}")))?;
        let etag = get_str(&mut r, "etag", 16)?;
        let size = get_u64(&mut r)?;
        if size > max_object {
            return Err(FileError::TooLarge(format!("object {key} has {size} bytes; this cluster stores at most {max_object}")));
        }
        send(Event::Object(Header { key: key.clone(), content_type, metadata, etag: etag.clone(), size }))?;
        let (mut left, mut fnv) = (size, Fnv1a64::default());
        while left > 0 {
            let mut piece = vec![0u8; left.min(CHUNK_BYTES as u64) as usize];
            r.read_exact(&mut piece).map_err(corrupt)?;
            fnv.update(&piece);
            left -= piece.len() as u64;
            send(Event::Chunk(piece))?;
        }
        if fnv.hex() != etag {
            return Err(corrupt(format!("the content of {key} does not match its ETag")));
        }
        count += 1;
        bytes += size;
    }
}

/// Query of an import: what to do with keys that already exist.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct ImportParams {
    #[schemars(pattern(r"^(skip|overwrite)$"))]
    on_conflict: Option<String>,
}

/// `POST /api/v1/admin/objects/{bucket}/import?on_conflict=skip|overwrite`: loads an
/// `objects.ncb` file into `bucket` (created when missing). `skip` (the default)
/// leaves existing keys alone; `overwrite` replaces them.
pub async fn import_bucket(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(bucket): Path<String>,
    QueryParams(p): QueryParams<ImportParams>,
    body: Body,
) -> Result<Json<BucketImport>, ApiError> {
    let overwrite = match p.on_conflict.as_deref().unwrap_or("skip") {
        "skip" => false,
        "overwrite" => true,
        other => return Err(ApiError::BadRequest(format!("on_conflict must be skip or overwrite, not {other:?}"))),
    };
    validate_bucket_name(&bucket).map_err(ApiError::BadRequest)?;
    let c = prefs.consistency;
    let created = bucket_record(&state, &bucket, &prefs).await?.is_none()
        && match create_bucket_everywhere(&state, &bucket, c).await {
            Ok(_) => true,
            Err(ApiError::Conflict(_)) => false,
            Err(e) => return Err(e),
        };

    // Body pieces → blocking parser → events, each through a short channel.
    let (body_tx, body_rx) = mpsc::channel::<Result<Bytes, String>>(4);
    let pump = tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| e.to_string());
            let failed = piece.is_err();
            if body_tx.send(piece).await.is_err() || failed {
                break;
            }
        }
    });
    let (ev_tx, mut ev_rx) = mpsc::channel::<Result<Event, FileError>>(2);
    let max = state.config.objects.max_object_bytes;
    let parser = tokio::task::spawn_blocking(move || {
        let reader = BodyReader { rx: body_rx, current: Bytes::new() };
        if let Err(e) = parse(reader, max, &ev_tx) {
            let _ = ev_tx.blocking_send(Err(e));
        }
    });

    // Objects whose content is staged (the last one possibly still being read).
    let mut staged: Vec<ObjectMeta> = Vec::new();
    let mut skipped = 0u64;
    let outcome: Result<(), ApiError> = async {
        let mut skipping = false;
        loop {
            let event = match ev_rx.recv().await {
                Some(Ok(e)) => e,
                Some(Err(FileError::TooLarge(m))) => return Err(ApiError::PayloadTooLarge(format!("{m}; nothing was imported"))),
                Some(Err(e)) => return Err(ApiError::BadRequest(format!("{e}; nothing was imported"))),
                None => return Err(ApiError::BadRequest("not a valid objects.ncb file; nothing was imported".into())),
            };
            match event {
                Event::Object(h) => {
                    let group = object_group(&state, &bucket, &h.key)?;
                    skipping = !overwrite
                        && matches!(
                            object_read(&state, group, ObjectQuery::Head { bucket: bucket.clone(), key: h.key.clone() }, &prefs).await?,
                            ObjectQueryResult::Meta(Some(_))
                        );
                    if skipping {
                        skipped += 1;
                        continue;
                    }
                    staged.push(ObjectMeta {
                        bucket: bucket.clone(),
                        key: h.key,
                        size: h.size,
                        etag: h.etag,
                        content_type: h.content_type,
                        metadata: h.metadata,
                        blob_id: new_id(),
                        chunks: 0,
                        chunk_bytes: CHUNK_BYTES as u32,
                        created_at_ms: 0,
                        updated_at_ms: 0,
                        bucket_incarnation: None,
                    });
                }
                Event::Chunk(data) => {
                    if skipping {
                        continue;
                    }
                    let Some(m) = staged.last_mut() else { return Err(ApiError::Internal("content before a header".into())) };
                    let op =
                        ObjectOp::PutChunk { bucket: bucket.clone(), blob_id: m.blob_id.clone(), index: m.chunks, data, incarnation: None };
                    // Counted first: a chunk whose write failed may still have been applied.
                    m.chunks += 1;
                    write_in_bucket(&state, &bucket, object_group(&state, &bucket, &m.key)?, op, c).await?;
                }
                Event::Done => return Ok(()),
            }
        }
    }
    .await;
    drop(ev_rx);
    pump.abort();
    let _ = parser.await;

    if let Err(e) = outcome {
        for m in &staged {
            abort_blob(&state, &bucket, &m.key, &m.blob_id, m.chunks).await;
        }
        if created && let Err(e) = drop_bucket_everywhere(&state, &bucket, Consistency::Quorum).await {
            tracing::warn!(bucket = %bucket, "dropping the bucket of a failed import failed: {e}");
        }
        return Err(e);
    }
    let (mut imported, mut bytes) = (0u64, 0u64);
    let mut pending = staged.into_iter();
    while let Some(m) = pending.next() {
        let (size, key, blob_id, chunks) = (m.size, m.key.clone(), m.blob_id.clone(), m.chunks);
        let group = object_group(&state, &bucket, &key)?;
        if let Err(e) = write_in_bucket(&state, &bucket, group, ObjectOp::CommitObject(m), c).await {
            abort_blob(&state, &bucket, &key, &blob_id, chunks).await;
            for rest in pending {
                abort_blob(&state, &bucket, &rest.key, &rest.blob_id, rest.chunks).await;
            }
            return Err(ApiError::Unavailable(format!(
                "the file was valid but committing stopped after {imported} objects ({bytes} bytes): {e}"
            )));
        }
        imported += 1;
        bytes += size;
    }
    Ok(Json(BucketImport { bucket, objects_imported: imported, bytes, skipped, bucket_created: created }))
}

/// The answer of a bucket import.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct BucketImport {
    pub bucket: String,
    pub objects_imported: u64,
    /// Bytes of the imported objects.
    pub bytes: u64,
    /// Objects left as they were (`on_conflict=skip`).
    pub skipped: u64,
    pub bucket_created: bool,
}

async fn abort_blob(state: &AppState, bucket: &str, key: &str, blob_id: &str, chunks: u32) {
    if chunks == 0 {
        return;
    }
    let Ok(group) = object_group(state, bucket, key) else { return };
    let op = ObjectOp::AbortUpload { bucket: bucket.into(), blob_id: blob_id.into(), chunks };
    if let Err(e) = object_write(state, group, op, Consistency::Quorum).await {
        tracing::warn!(bucket, blob = blob_id, "freeing a staged import object failed: {e}");
    }
}
