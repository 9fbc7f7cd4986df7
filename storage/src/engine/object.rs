//! The object engine: buckets, object metadata and chunked content.
//!
//! Keys: `b/<bucket>` → bucket; `o/<bucket>\0<key>` → object metadata (so a
//! bucket's objects are one range in key order); `c/<bucket>\0<blob>/<index BE>`
//! → one chunk of content; `u/<bucket>\0<blob>` → [`PendingUpload`], from an
//! upload's first chunk until it is committed, aborted or swept.

use tessera_api::command::Response;
use tessera_api::error::ErrorCode;
use tessera_api::object::{BucketInfo, BucketStats, ObjectMeta, ObjectOp, ObjectQuery, ObjectQueryResult, PendingUpload};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
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

fn uploads_prefix(bucket: &str) -> Vec<u8> {
    [b"u/".as_slice(), bucket.as_bytes(), b"\0"].concat()
}

fn upload_key(bucket: &str, blob: &str) -> Vec<u8> {
    [uploads_prefix(bucket).as_slice(), blob.as_bytes()].concat()
}

fn reject(kind: ErrorCode, message: String) -> Result<Response> {
    Ok(Response::rejected(kind, message))
}

fn bucket(view: &ReadView<'_>, name: &str) -> Result<Option<BucketInfo>> {
    Ok(view.get(&bucket_key(name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn meta(view: &ReadView<'_>, bucket: &str, key: &str) -> Result<Option<ObjectMeta>> {
    Ok(view.get(&object_key(bucket, key))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// Refuses (as not found) a write into a bucket that does not exist here, or
/// whose record here is of another incarnation than the writer's.
fn incarnation_refusal(view: &ReadView<'_>, name: &str, incarnation: Option<i64>) -> Result<Option<Response>> {
    let message = match (bucket(view, name)?, incarnation) {
        (None, _) => format!("bucket {name} does not exist"),
        (Some(b), Some(i)) if b.created_at_ms != i => {
            format!("bucket {name} was dropped during the upload (incarnation {i}, now {})", b.created_at_ms)
        }
        _ => return Ok(None),
    };
    Ok(Some(Response::rejected(ErrorCode::NotFound, message)))
}

impl Engine for ObjectEngine {
    const SPACE: u8 = super::space::OBJECT;
    type Op = ObjectOp;
    type Query = ObjectQuery;
    type Answer = ObjectQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &ObjectQuery) -> Result<Answer<ObjectQueryResult>> {
        Ok(Ok(self::query(&ctx.view::<Self>(), query)?))
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &ObjectOp) -> Result<Response> {
        match op {
            ObjectOp::CreateBucket { name, copy_of_created_at_ms } => {
                if let Some(existing) = bucket(tx.view(), name)? {
                    match copy_of_created_at_ms {
                        Some(at) if *at == existing.created_at_ms => return Ok(Response::Applied(false)),
                        // A copy of an older incarnation (a drop raced with a write):
                        // its objects belong to a bucket that no longer exists.
                        Some(_) => {
                            tx.delete_prefix(&objects_prefix(name));
                            tx.delete_prefix(&chunks_prefix(name));
                            tx.delete_prefix(&uploads_prefix(name));
                        }
                        None => return reject(ErrorCode::Conflict, format!("bucket {name} already exists")),
                    }
                }
                let info = BucketInfo { name: name.clone(), created_at_ms: copy_of_created_at_ms.unwrap_or(now) };
                tx.put(&bucket_key(name), &serde_json::to_vec(&info)?);
                Ok(Response::Applied(true))
            }
            ObjectOp::DropBucket { name, if_exists } => {
                if bucket(tx.view(), name)?.is_none() {
                    if *if_exists {
                        return Ok(Response::Applied(false));
                    }
                    return reject(ErrorCode::NotFound, format!("bucket {name} does not exist"));
                }
                tx.delete_prefix(&objects_prefix(name));
                tx.delete_prefix(&chunks_prefix(name));
                tx.delete_prefix(&uploads_prefix(name));
                tx.delete(&bucket_key(name));
                Ok(Response::Applied(true))
            }
            ObjectOp::PutChunk { bucket: b, blob_id, index, data, incarnation } => {
                if let Some(refusal) = incarnation_refusal(tx.view(), b, *incarnation)? {
                    return Ok(refusal);
                }
                if *index == 0 {
                    let pending = PendingUpload { bucket: b.clone(), blob_id: blob_id.clone(), started_at_ms: now };
                    tx.put(&upload_key(b, blob_id), &serde_json::to_vec(&pending)?);
                }
                tx.put(&chunk_key(b, blob_id, *index), data);
                Ok(Response::Applied(true))
            }
            ObjectOp::CommitObject(m) => {
                if let Some(refusal) = incarnation_refusal(tx.view(), &m.bucket, m.bucket_incarnation)? {
                    return Ok(refusal);
                }
                for i in 0..m.chunks {
                    if tx.view().get(&chunk_key(&m.bucket, &m.blob_id, i))?.is_none() {
                        return reject(ErrorCode::Invalid, format!("chunk {i} of the upload is missing"));
                    }
                }
                let mut stored = m.clone();
                stored.created_at_ms = now;
                stored.updated_at_ms = now;
                if let Some(old) = meta(tx.view(), &m.bucket, &m.key)? {
                    stored.created_at_ms = old.created_at_ms;
                    if old.blob_id != m.blob_id {
                        tx.delete_prefix(&blob_prefix(&old.bucket, &old.blob_id));
                    }
                }
                tx.put(&object_key(&m.bucket, &m.key), &serde_json::to_vec(&stored)?);
                tx.delete(&upload_key(&m.bucket, &m.blob_id));
                Ok(Response::Object(stored))
            }
            ObjectOp::AbortUpload { bucket, blob_id, .. } => {
                tx.delete_prefix(&blob_prefix(bucket, blob_id));
                tx.delete(&upload_key(bucket, blob_id));
                Ok(Response::Applied(true))
            }
            ObjectOp::SweepUploads { max_age_ms } => {
                let cutoff = now.saturating_sub(*max_age_ms);
                let mut stale = Vec::new();
                tx.view().scan_prefix(b"u/", |_, v| {
                    let p: PendingUpload = serde_json::from_slice(v)?;
                    if p.started_at_ms < cutoff {
                        stale.push(p);
                    }
                    Ok(true)
                })?;
                for p in &stale {
                    tx.delete_prefix(&blob_prefix(&p.bucket, &p.blob_id));
                    tx.delete(&upload_key(&p.bucket, &p.blob_id));
                }
                Ok(Response::Deleted(stale.len() as u64))
            }
            ObjectOp::DeleteObject { bucket, key } => match meta(tx.view(), bucket, key)? {
                Some(old) => {
                    tx.delete_prefix(&blob_prefix(bucket, &old.blob_id));
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
        ObjectQuery::Bucket { name } => ObjectQueryResult::Bucket(bucket(view, name)?),
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
                let mut pending_uploads = 0u64;
                view.scan_prefix(&uploads_prefix(name), |_, _| {
                    pending_uploads += 1;
                    Ok(true)
                })?;
                Some(BucketStats { name: info.name, created_at_ms: info.created_at_ms, object_count, total_bytes, pending_uploads })
            }
        }),
        ObjectQuery::Head { bucket, key } => ObjectQueryResult::Meta(meta(view, bucket, key)?),
        ObjectQuery::Chunk { bucket, blob_id, index } => ObjectQueryResult::Chunk(view.get(&chunk_key(bucket, blob_id, *index))?),
        ObjectQuery::List { bucket: b, prefix, after, limit } => {
            if bucket(view, b)?.is_none() {
                return Ok(ObjectQueryResult::List(None));
            }
            let mut out = Vec::new();
            if *limit == 0 {
                return Ok(ObjectQueryResult::List(Some(out)));
            }
            let base = objects_prefix(b);
            let start = [base.as_slice(), prefix.as_bytes()].concat();
            // (A UTF-8 prefix has no 0xff byte, so the end exists; the fallback is the space's end.)
            let end = crate::keys::prefix_end(&start).unwrap_or_else(|| b"o0".to_vec());
            // Seek straight past the marker: the first key after `after` is `after\0`.
            let from = match after {
                Some(a) => {
                    let past = [base.as_slice(), a.as_bytes(), b"\0"].concat();
                    if past > start { past } else { start }
                }
                None => start,
            };
            view.scan_range(&from, &end, |_, v| {
                out.push(serde_json::from_slice(v)?);
                Ok(out.len() < *limit)
            })?;
            ObjectQueryResult::List(Some(out))
        }
    })
}

/// Objects of a data subject: those whose key holds the subject id as a
/// segment (`users/alice/avatar.png`) or whose user metadata has a subject
/// field; the export lists their metadata (the content stays downloadable).
impl crate::subject::SubjectRecords for ObjectEngine {
    const STORE: &'static str = "object";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        let mut items = Vec::new();
        view.scan_prefix(b"o/", |k, v| {
            let m: ObjectMeta = serde_json::from_slice(v)?;
            if rule.matches_key(&m.key) || rule.matches_object(&m.metadata) {
                items.push(tessera_api::compliance::SubjectItem {
                    store: Self::STORE.into(),
                    location: m.bucket.clone(),
                    item_id: m.key.clone(),
                    data: serde_json::json!({"key": m.key, "size": m.size, "etag": m.etag, "content_type": m.content_type, "metadata": m.metadata}),
                    bytes: m.size + (k.len() + v.len()) as u64,
                    at_ms: Some(m.updated_at_ms),
                });
            }
            Ok(true)
        })?;
        Ok(items)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        for item in items {
            let delete = ObjectOp::DeleteObject { bucket: item.location.clone(), key: item.item_id.clone() };
            if let Some(r) = crate::subject::refusal(self.apply(tx, now, &delete)?) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::space;
    use crate::engine::test_support::{apply_op, open_group};
    use tessera_api::error::Rejection;

    fn apply(data: &crate::engine::GroupData, op: ObjectOp) -> Response {
        apply_op(&ObjectEngine, data, space::OBJECT, 7, &op)
    }

    fn list(data: &crate::engine::GroupData, prefix: &str, after: Option<&str>, limit: usize) -> Vec<String> {
        let q = ObjectQuery::List { bucket: "bk".into(), prefix: prefix.into(), after: after.map(String::from), limit };
        match query(&ReadView::new(&data.db, data.group, space::OBJECT), &q).unwrap() {
            ObjectQueryResult::List(Some(objects)) => objects.into_iter().map(|m| m.key).collect(),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn commit(data: &crate::engine::GroupData, key: &str) {
        let meta = ObjectMeta {
            bucket: "bk".into(),
            key: key.into(),
            size: 0,
            etag: "cbf29ce484222325".into(),
            content_type: "text/plain".into(),
            metadata: serde_json::Value::Null,
            blob_id: format!("blob-{key}"),
            chunks: 0,
            chunk_bytes: 4,
            created_at_ms: 0,
            updated_at_ms: 0,
            bucket_incarnation: None,
        };
        assert!(matches!(apply(data, ObjectOp::CommitObject(meta)), Response::Object(_)));
    }

    #[test]
    fn listing_pages_by_marker_within_a_prefix() {
        let (_dir, data) = open_group(1);
        apply(&data, ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: None });
        for key in ["a/1", "a/2", "a/2/x", "a/3", "b/1", "a"] {
            commit(&data, key);
        }
        assert_eq!(list(&data, "", None, 100), ["a", "a/1", "a/2", "a/2/x", "a/3", "b/1"]);
        assert_eq!(list(&data, "a/", None, 2), ["a/1", "a/2"]);
        assert_eq!(list(&data, "a/", Some("a/2"), 2), ["a/2/x", "a/3"]);
        assert_eq!(list(&data, "a/", Some("a/3"), 2), Vec::<String>::new());
        // A marker before the prefix starts at the prefix; one past it lists nothing.
        assert_eq!(list(&data, "b/", Some("a/9"), 10), ["b/1"]);
        assert_eq!(list(&data, "a/", Some("b"), 10), Vec::<String>::new());
        assert_eq!(list(&data, "", None, 0), Vec::<String>::new());
    }

    #[test]
    fn sweeping_frees_only_stale_uploads() {
        let (_dir, data) = open_group(1);
        let at = |now: i64, op: ObjectOp| apply_op(&ObjectEngine, &data, space::OBJECT, now, &op);
        at(0, ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: None });
        let chunk = |blob: &str, index| ObjectOp::PutChunk {
            bucket: "bk".into(),
            blob_id: blob.into(),
            index,
            data: vec![1, 2],
            incarnation: None,
        };
        // An upload whose router died at t=1000, one still running since t=9000,
        // and one committed at t=1000.
        at(1_000, chunk("dead", 0));
        at(1_100, chunk("dead", 1));
        at(9_000, chunk("live", 0));
        at(1_000, chunk("done", 0));
        let mut meta = ObjectMeta {
            bucket: "bk".into(),
            key: "k".into(),
            size: 2,
            etag: "x".into(),
            content_type: "t".into(),
            metadata: serde_json::Value::Null,
            blob_id: "done".into(),
            chunks: 1,
            chunk_bytes: 4,
            created_at_ms: 0,
            updated_at_ms: 0,
            bucket_incarnation: None,
        };
        assert!(matches!(at(1_200, ObjectOp::CommitObject(meta.clone())), Response::Object(_)));
        let view = ReadView::new(&data.db, data.group, space::OBJECT);
        let pending = |view: &ReadView<'_>| match query(view, &ObjectQuery::BucketStats { name: "bk".into() }).unwrap() {
            ObjectQueryResult::Stats(Some(s)) => s.pending_uploads,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(pending(&view), 2);
        assert_eq!(at(10_000, ObjectOp::SweepUploads { max_age_ms: 5_000 }), Response::Deleted(1));
        assert_eq!(pending(&view), 1);
        assert!(view.get(&chunk_key("bk", "dead", 0)).unwrap().is_none() && view.get(&chunk_key("bk", "dead", 1)).unwrap().is_none());
        assert!(view.get(&chunk_key("bk", "live", 0)).unwrap().is_some(), "a young upload is kept");
        assert!(view.get(&chunk_key("bk", "done", 0)).unwrap().is_some(), "a committed blob is kept");
        // The running upload completes later; nothing is left pending.
        meta.key = "k2".into();
        meta.blob_id = "live".into();
        assert!(matches!(at(20_000, ObjectOp::CommitObject(meta)), Response::Object(_)));
        assert_eq!(pending(&view), 0);
        assert_eq!(at(99_000, ObjectOp::SweepUploads { max_age_ms: 5_000 }), Response::Deleted(0));
    }

    #[test]
    fn bucket_copies_and_idempotent_drops() {
        let (_dir, data) = open_group(1);
        let copy = |at| ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: Some(at) };
        assert_eq!(apply(&data, copy(3)), Response::Applied(true));
        assert_eq!(apply(&data, copy(3)), Response::Applied(false));
        let view = ReadView::new(&data.db, data.group, space::OBJECT);
        match query(&view, &ObjectQuery::Bucket { name: "bk".into() }).unwrap() {
            ObjectQueryResult::Bucket(Some(info)) => assert_eq!(info.created_at_ms, 3, "a copy keeps the home record's time"),
            other => panic!("unexpected {other:?}"),
        }
        let exclusive = ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: None };
        assert!(matches!(apply(&data, exclusive), Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })));
        commit(&data, "k");
        assert_eq!(apply(&data, ObjectOp::DropBucket { name: "bk".into(), if_exists: true }), Response::Applied(true));
        assert_eq!(apply(&data, ObjectOp::DropBucket { name: "bk".into(), if_exists: true }), Response::Applied(false));
        let strict = ObjectOp::DropBucket { name: "bk".into(), if_exists: false };
        assert!(matches!(apply(&data, strict), Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        assert_eq!(query(&view, &ObjectQuery::Bucket { name: "bk".into() }).unwrap(), ObjectQueryResult::Bucket(None));
        assert!(view.get(&object_key("bk", "k")).unwrap().is_none(), "dropping removes the objects");
    }

    /// A drop that races with an upload: chunks and commits of the old
    /// incarnation are refused once the bucket is made again, and a copy of an
    /// old incarnation is emptied when the new one's copy arrives.
    #[test]
    fn writes_of_a_dropped_incarnation_are_refused() {
        let (_dir, data) = open_group(1);
        let at = |now: i64, op: ObjectOp| apply_op(&ObjectEngine, &data, space::OBJECT, now, &op);
        let chunk = |blob: &str, incarnation| ObjectOp::PutChunk {
            bucket: "bk".into(),
            blob_id: blob.into(),
            index: 0,
            data: vec![1],
            incarnation: Some(incarnation),
        };
        let commit = |key: &str, blob: &str, incarnation| {
            ObjectOp::CommitObject(ObjectMeta {
                bucket: "bk".into(),
                key: key.into(),
                size: 1,
                etag: "x".into(),
                content_type: "t".into(),
                metadata: serde_json::Value::Null,
                blob_id: blob.into(),
                chunks: 1,
                chunk_bytes: 4,
                created_at_ms: 0,
                updated_at_ms: 0,
                bucket_incarnation: Some(incarnation),
            })
        };
        // Incarnation 100 (a copy of the home record) gets an object.
        at(100, ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: Some(100) });
        assert!(matches!(at(110, chunk("a", 100)), Response::Applied(true)));
        assert!(matches!(at(120, commit("old", "a", 100)), Response::Object(_)));
        // Dropped and made again (incarnation 500): the old upload's writes are refused.
        at(200, ObjectOp::DropBucket { name: "bk".into(), if_exists: true });
        at(500, ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: Some(500) });
        assert!(matches!(at(510, chunk("b", 100)), Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        assert!(matches!(at(520, commit("late", "b", 100)), Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        assert!(matches!(at(530, chunk("c", 500)), Response::Applied(true)));
        assert!(matches!(at(540, commit("new", "c", 500)), Response::Object(_)));
        assert_eq!(list(&data, "", None, 10), ["new"]);

        // A copy of incarnation 500 left behind by a drop that raced with a write
        // is emptied when incarnation 900's copy arrives.
        at(900, ObjectOp::CreateBucket { name: "bk".into(), copy_of_created_at_ms: Some(900) });
        assert_eq!(list(&data, "", None, 10), Vec::<String>::new());
        assert!(matches!(at(910, chunk("d", 500)), Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
    }
}
