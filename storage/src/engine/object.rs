//! The object engine: buckets, object metadata and chunked content.
//!
//! Keys: `b/<bucket>` → bucket; `o/<bucket>\0<key>` → object metadata (so a
//! bucket's objects are one range in key order); `c/<bucket>\0<blob>/<index BE>`
//! → one chunk of content.

use tessera_api::command::{RejectKind, Response};
use tessera_api::object::{BucketInfo, BucketStats, ObjectMeta, ObjectOp, ObjectQuery, ObjectQueryResult};

use super::{Engine, ReadView, Tx};
use crate::error::Result;

/// Object engine.
pub struct ObjectEngine;

fn bucket_key(bucket: &str) -> Vec<u8> {
    [b"b/".as_slice(), bucket.as_bytes()].concat()
}

fn objects_prefix(bucket: &str) -> Vec<u8> {
    [b"o/".as_slice(), bucket.as_bytes(), b"\0"].concat()
}

fn object_key(bucket: &str, key: &str) -> Vec<u8> {
    [objects_prefix(bucket).as_slice(), key.as_bytes()].concat()
}

fn chunks_prefix(bucket: &str) -> Vec<u8> {
    [b"c/".as_slice(), bucket.as_bytes(), b"\0"].concat()
}

fn blob_prefix(bucket: &str, blob: &str) -> Vec<u8> {
    [chunks_prefix(bucket).as_slice(), blob.as_bytes(), b"/"].concat()
}

fn chunk_key(bucket: &str, blob: &str, index: u32) -> Vec<u8> {
    [blob_prefix(bucket, blob).as_slice(), &index.to_be_bytes()].concat()
}

fn reject(kind: RejectKind, message: String) -> Result<Response> {
    Ok(Response::Rejected { kind, message })
}

fn bucket(view: &ReadView<'_>, name: &str) -> Result<Option<BucketInfo>> {
    Ok(view.get(&bucket_key(name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn meta(view: &ReadView<'_>, bucket: &str, key: &str) -> Result<Option<ObjectMeta>> {
    Ok(view.get(&object_key(bucket, key))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// Deletes every key under `prefix`.
fn delete_prefix(tx: &mut Tx<'_>, prefix: &[u8]) -> Result<()> {
    let mut doomed = Vec::new();
    tx.view().scan_prefix(prefix, |k, _| {
        doomed.push(k.to_vec());
        Ok(true)
    })?;
    for k in doomed {
        tx.delete(&k);
    }
    Ok(())
}

impl Engine for ObjectEngine {
    type Op = ObjectOp;

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &ObjectOp) -> Result<Response> {
        match op {
            ObjectOp::CreateBucket { name } => {
                if bucket(tx.view(), name)?.is_some() {
                    return reject(RejectKind::Conflict, format!("bucket {name} already exists"));
                }
                let info = BucketInfo { name: name.clone(), created_at_ms: now };
                tx.put(&bucket_key(name), &serde_json::to_vec(&info)?);
                Ok(Response::Applied(true))
            }
            ObjectOp::DropBucket { name } => {
                if bucket(tx.view(), name)?.is_none() {
                    return reject(RejectKind::NotFound, format!("bucket {name} does not exist"));
                }
                delete_prefix(tx, &objects_prefix(name))?;
                delete_prefix(tx, &chunks_prefix(name))?;
                tx.delete(&bucket_key(name));
                Ok(Response::Applied(true))
            }
            ObjectOp::PutChunk { bucket: b, blob_id, index, data } => {
                if bucket(tx.view(), b)?.is_none() {
                    return reject(RejectKind::NotFound, format!("bucket {b} does not exist"));
                }
                tx.put(&chunk_key(b, blob_id, *index), data);
                Ok(Response::Applied(true))
            }
            ObjectOp::CommitObject(m) => {
                if bucket(tx.view(), &m.bucket)?.is_none() {
                    return reject(RejectKind::NotFound, format!("bucket {} does not exist", m.bucket));
                }
                for i in 0..m.chunks {
                    if tx.view().get(&chunk_key(&m.bucket, &m.blob_id, i))?.is_none() {
                        return reject(RejectKind::Invalid, format!("chunk {i} of the upload is missing"));
                    }
                }
                let mut stored = m.clone();
                stored.created_at_ms = now;
                stored.updated_at_ms = now;
                if let Some(old) = meta(tx.view(), &m.bucket, &m.key)? {
                    stored.created_at_ms = old.created_at_ms;
                    if old.blob_id != m.blob_id {
                        delete_prefix(tx, &blob_prefix(&old.bucket, &old.blob_id))?;
                    }
                }
                tx.put(&object_key(&m.bucket, &m.key), &serde_json::to_vec(&stored)?);
                Ok(Response::Object(stored))
            }
            ObjectOp::AbortUpload { bucket, blob_id, .. } => {
                delete_prefix(tx, &blob_prefix(bucket, blob_id))?;
                Ok(Response::Applied(true))
            }
            ObjectOp::DeleteObject { bucket, key } => match meta(tx.view(), bucket, key)? {
                Some(old) => {
                    delete_prefix(tx, &blob_prefix(bucket, &old.blob_id))?;
                    tx.delete(&object_key(bucket, key));
                    Ok(Response::Deleted(1))
                }
                None => Ok(Response::Deleted(0)),
            },
        }
    }
}

/// Answers an object query from a replica's state.
pub fn query(view: &ReadView<'_>, q: &ObjectQuery) -> Result<ObjectQueryResult> {
    Ok(match q {
        ObjectQuery::ListBuckets => {
            let mut out = Vec::new();
            view.scan_prefix(b"b/", |_, v| {
                out.push(serde_json::from_slice(v)?);
                Ok(true)
            })?;
            ObjectQueryResult::Buckets(out)
        }
        ObjectQuery::BucketStats { name } => ObjectQueryResult::Stats(match bucket(view, name)? {
            None => None,
            Some(info) => {
                let (mut object_count, mut total_bytes) = (0u64, 0u64);
                view.scan_prefix(&objects_prefix(name), |_, v| {
                    let m: ObjectMeta = serde_json::from_slice(v)?;
                    object_count += 1;
                    total_bytes += m.size;
                    Ok(true)
                })?;
                Some(BucketStats { name: info.name, created_at_ms: info.created_at_ms, object_count, total_bytes })
            }
        }),
        ObjectQuery::Head { bucket, key } => ObjectQueryResult::Meta(meta(view, bucket, key)?),
        ObjectQuery::Chunk { bucket, blob_id, index } => {
            ObjectQueryResult::Chunk(view.get(&chunk_key(bucket, blob_id, *index))?)
        }
        ObjectQuery::List { bucket: b, prefix, after, limit } => {
            if bucket(view, b)?.is_none() {
                return Ok(ObjectQueryResult::List(None));
            }
            let mut out = Vec::new();
            let base = objects_prefix(b);
            view.scan_prefix(&[base.as_slice(), prefix.as_bytes()].concat(), |k, v| {
                if out.len() >= *limit {
                    return Ok(false);
                }
                let key = &k[base.len()..];
                if after.as_ref().is_none_or(|a| key > a.as_bytes()) {
                    out.push(serde_json::from_slice(v)?);
                }
                Ok(true)
            })?;
            ObjectQueryResult::List(Some(out))
        }
    })
}
