//! The document engine (spec 01 documents): collections with optional schema
//! validation, JSON documents, and secondary indexes on dotted field paths.
//!
//! Keys:
//! - `c/<collection>` → JSON [`CollectionDef`];
//! - `d/<collection>\0<id>` → [`DocRecord`]: JSON as written, or the compact form
//!   (`0x00`, codec, MessagePack, optionally LZ4) once `admin/compress` rewrote
//!   it ([`DocOp::Compress`]); [`decode_doc`] reads both;
//! - `x/<collection>\0<field>\0<enc(value)>\0<id>` → id, one entry per distinct
//!   value the field reaches (an array field also indexes each element);
//! - `m/<collection>\0<field>` → marker: some document reaches several values
//!   through `field` (a multikey index, scanned with one side of a range only).
//!
//! `enc` is the order-preserving, prefix-free encoding of [`encode_value`]: its
//! byte order is the JSON total order of `tessera_document::compare_values`. Query
//! results carry the same encoding of their sort values so that the router can
//! merge the groups' answers without understanding documents.

use std::collections::BTreeSet;

use serde_json::Value;
use tessera_api::command::Response;
use tessera_api::document::{
    CollectionDef, CollectionInfo, DocOp, DocQuery, DocQueryResult, DocRecord, DocResponse, FindSpec, Found, FoundDoc,
    validate_collection_name, validate_doc_id, validate_index_field,
};
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::import::{ImportDoc, ImportFailure, ImportResult};
use tessera_document::encoding::{encoded, index_values, sort_key};
use tessera_document::{Bound, Filter, Schema, SortSpec, apply_update};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
use crate::error::{Result, StorageError};

/// Document engine.
pub struct DocumentEngine;

// ---------------------------------------------------------------- keys

fn coll_key(name: &str) -> Vec<u8> {
    [b"c/".as_slice(), name.as_bytes()].concat()
}

fn docs_prefix(coll: &str) -> Vec<u8> {
    [b"d/".as_slice(), coll.as_bytes(), b"\0"].concat()
}

fn doc_key(coll: &str, id: &str) -> Vec<u8> {
    [docs_prefix(coll).as_slice(), id.as_bytes()].concat()
}

fn coll_index_prefix(coll: &str) -> Vec<u8> {
    [b"x/".as_slice(), coll.as_bytes(), b"\0"].concat()
}

fn field_prefix(coll: &str, field: &str) -> Vec<u8> {
    [coll_index_prefix(coll).as_slice(), field.as_bytes(), b"\0"].concat()
}

fn index_key(field_prefix: &[u8], enc: &[u8], id: &str) -> Vec<u8> {
    [field_prefix, enc, b"\0", id.as_bytes()].concat()
}

fn coll_multikey_prefix(coll: &str) -> Vec<u8> {
    [b"m/".as_slice(), coll.as_bytes(), b"\0"].concat()
}

fn multikey_key(coll: &str, field: &str) -> Vec<u8> {
    [coll_multikey_prefix(coll).as_slice(), field.as_bytes()].concat()
}

// ---------------------------------------------------------------- records

fn reject(kind: ErrorCode, message: String) -> Result<Response> {
    Ok(Response::rejected(kind, message))
}

fn collection(view: &ReadView<'_>, name: &str) -> Result<Option<CollectionDef>> {
    Ok(view.get(&coll_key(name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn document(view: &ReadView<'_>, coll: &str, id: &str) -> Result<Option<DocRecord>> {
    view.get(&doc_key(coll, id))?.map(|raw| decode_doc(&raw)).transpose()
}

// ---------------------------------------------------------------- stored form

/// First byte of a compact document record (a JSON record starts with `{`).
const COMPACT_MAGIC: u8 = 0;
/// Compact codecs: MessagePack of the record (fields by position), and the same
/// compressed with LZ4 (block format, uncompressed size prepended).
const CODEC_MSGPACK: u8 = 1;
const CODEC_MSGPACK_LZ4: u8 = 2;

/// Reads a stored document record in either form: JSON (as written) or compact
/// (after `admin/compress`).
pub fn decode_doc(raw: &[u8]) -> Result<DocRecord> {
    let corrupt = |m: String| StorageError::Corrupt(format!("document record: {m}"));
    match raw {
        [COMPACT_MAGIC, CODEC_MSGPACK, body @ ..] => rmp_serde::from_slice(body).map_err(|e| corrupt(e.to_string())),
        [COMPACT_MAGIC, CODEC_MSGPACK_LZ4, body @ ..] => {
            let plain = lz4_flex::decompress_size_prepended(body).map_err(|e| corrupt(e.to_string()))?;
            rmp_serde::from_slice(&plain).map_err(|e| corrupt(e.to_string()))
        }
        [COMPACT_MAGIC, ..] => Err(corrupt("unknown codec".into())),
        _ => Ok(serde_json::from_slice(raw)?),
    }
}

/// The compact form of a record: MessagePack, LZ4-compressed when that is smaller.
pub fn encode_doc_compact(d: &DocRecord) -> Result<Vec<u8>> {
    let packed = rmp_serde::to_vec(d).map_err(|e| StorageError::Corrupt(format!("document record: {e}")))?;
    let squeezed = lz4_flex::compress_prepend_size(&packed);
    Ok(if squeezed.len() < packed.len() {
        [&[COMPACT_MAGIC, CODEC_MSGPACK_LZ4][..], &squeezed].concat()
    } else {
        [&[COMPACT_MAGIC, CODEC_MSGPACK][..], &packed].concat()
    })
}

/// Re-encodes every JSON document record last written at or before `cutoff` in
/// the compact form when that is smaller (indexes are unchanged: the data is).
fn compress(tx: &mut Tx<'_>, cutoff: i64) -> Result<Response> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut collections = BTreeSet::new();
    let (mut before, mut after) = (0u64, 0u64);
    tx.view().scan_prefix(b"d/", |k, raw| {
        if raw.first() == Some(&COMPACT_MAGIC) {
            return Ok(true);
        }
        let d: DocRecord = serde_json::from_slice(raw)?;
        if d.updated_at_ms > cutoff {
            return Ok(true);
        }
        let compact = encode_doc_compact(&d)?;
        if compact.len() < raw.len() {
            before += raw.len() as u64;
            after += compact.len() as u64;
            collections.insert(d.collection.clone());
            out.push((k.to_vec(), compact));
        }
        Ok(true)
    })?;
    let documents = out.len() as u64;
    for (k, v) in out {
        tx.put(&k, &v);
    }
    Ok(Response::Document(DocResponse::Compressed {
        collections: collections.into_iter().collect(),
        documents,
        bytes_before: before,
        bytes_after: after,
    }))
}

/// Inserts a batch of new documents all or nothing; the first bad one (schema,
/// id, taken id) fails the batch with its index.
fn insert_many(tx: &mut Tx<'_>, now: i64, name: &str, docs: &[ImportDoc]) -> Result<Response> {
    let fail = |line: u64, kind: ErrorCode, message: String| {
        Ok(Response::Import(ImportResult {
            imported: 0,
            skipped: 0,
            failure: Some(ImportFailure { line, rejection: Rejection::new(kind, message) }),
        }))
    };
    let Some(def) = collection(tx.view(), name)? else {
        return fail(0, ErrorCode::NotFound, format!("collection {name} does not exist"));
    };
    let mut seen = std::collections::HashSet::new();
    for d in docs {
        if let Err(e) = validate_doc_id(&d.id) {
            return fail(d.index, ErrorCode::Invalid, e);
        }
        if let Some(msg) = schema_violation(&def, &d.data) {
            return fail(d.index, ErrorCode::Invalid, msg);
        }
        if !seen.insert(d.id.as_str()) || tx.view().get(&doc_key(name, &d.id))?.is_some() {
            return fail(d.index, ErrorCode::Conflict, format!("document {} already exists in collection {name}", d.id));
        }
    }
    for d in docs {
        let rec =
            DocRecord { id: d.id.clone(), collection: name.to_string(), data: d.data.clone(), created_at_ms: now, updated_at_ms: now };
        write_doc(tx, &def, None, Some(&rec))?;
    }
    Ok(Response::Import(ImportResult { imported: docs.len() as u64, skipped: 0, failure: None }))
}

fn delete_prefix(tx: &mut Tx<'_>, prefix: &[u8]) -> Result<u64> {
    let mut doomed = Vec::new();
    tx.view().scan_prefix(prefix, |k, _| {
        doomed.push(k.to_vec());
        Ok(true)
    })?;
    for k in &doomed {
        tx.delete(k);
    }
    Ok(doomed.len() as u64)
}

/// Checks a document against the collection's schema; `Some(message)` when it fails.
fn schema_violation(def: &CollectionDef, data: &Value) -> Option<String> {
    if !data.is_object() {
        return Some("a document must be a JSON object".into());
    }
    let schema = def.schema.as_ref()?;
    match Schema::parse(schema) {
        Err(e) => Some(format!("the schema of collection {} is invalid: {e}", def.name)),
        Ok(s) => s
            .validate(data)
            .err()
            .map(|errors| format!("document does not match the schema of collection {}: {}", def.name, errors.join("; "))),
    }
}

/// Writes `new` over `old` (either may be absent) and keeps every index in step.
fn write_doc(tx: &mut Tx<'_>, def: &CollectionDef, old: Option<&DocRecord>, new: Option<&DocRecord>) -> Result<()> {
    for field in &def.indexes {
        let fp = field_prefix(&def.name, field);
        let (before, _) = old.map(|d| index_values(&d.data, field)).unwrap_or_default();
        let (after, multi) = new.map(|d| index_values(&d.data, field)).unwrap_or_default();
        if let Some(d) = old {
            for enc in before.difference(&after) {
                tx.delete(&index_key(&fp, enc, &d.id));
            }
        }
        if let Some(d) = new {
            for enc in after.difference(&before) {
                tx.put(&index_key(&fp, enc, &d.id), d.id.as_bytes());
            }
            if multi {
                tx.put(&multikey_key(&def.name, field), b"");
            }
        }
    }
    match (old, new) {
        (_, Some(d)) => tx.put(&doc_key(&def.name, &d.id), &serde_json::to_vec(d)?),
        (Some(d), None) => tx.delete(&doc_key(&def.name, &d.id)),
        (None, None) => {}
    }
    Ok(())
}

fn no_collection(name: &str) -> Result<Response> {
    reject(ErrorCode::NotFound, format!("collection {name} does not exist"))
}

fn no_document(coll: &str, id: &str) -> Result<Response> {
    reject(ErrorCode::NotFound, format!("document {id} does not exist in collection {coll}"))
}

impl Engine for DocumentEngine {
    const SPACE: u8 = super::space::DOCUMENT;
    type Op = DocOp;
    type Query = DocQuery;
    type Answer = DocQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &DocQuery) -> Result<Answer<DocQueryResult>> {
        self::query(&ctx.view::<Self>(), query)
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &DocOp) -> Result<Response> {
        match op {
            DocOp::CreateCollection { name, schema, exclusive } => {
                if let Err(e) = validate_collection_name(name) {
                    return reject(ErrorCode::Invalid, e);
                }
                let schema = schema.clone().filter(|s| !s.is_null());
                if let Some(Err(e)) = schema.as_ref().map(Schema::parse) {
                    return reject(ErrorCode::Invalid, e.to_string());
                }
                if collection(tx.view(), name)?.is_some() {
                    if *exclusive {
                        return reject(ErrorCode::Conflict, format!("collection {name} already exists"));
                    }
                    return Ok(Response::Document(DocResponse::Created(false)));
                }
                let def = CollectionDef { name: name.clone(), schema, indexes: Vec::new(), created_at_ms: now };
                tx.put(&coll_key(name), &serde_json::to_vec(&def)?);
                Ok(Response::Document(DocResponse::Created(true)))
            }
            DocOp::DropCollection { name } => {
                if collection(tx.view(), name)?.is_none() {
                    return no_collection(name);
                }
                let docs = delete_prefix(tx, &docs_prefix(name))?;
                delete_prefix(tx, &coll_index_prefix(name))?;
                delete_prefix(tx, &coll_multikey_prefix(name))?;
                tx.delete(&coll_key(name));
                Ok(Response::Document(DocResponse::Deleted(docs)))
            }
            DocOp::CreateIndex { collection: name, field } => {
                if let Err(e) = validate_index_field(field) {
                    return reject(ErrorCode::Invalid, e);
                }
                let Some(mut def) = collection(tx.view(), name)? else { return no_collection(name) };
                if def.indexes.contains(field) {
                    return Ok(Response::Document(DocResponse::Created(false)));
                }
                let fp = field_prefix(name, field);
                let mut entries: Vec<(Vec<u8>, String)> = Vec::new();
                let mut any_multi = false;
                tx.view().scan_prefix(&docs_prefix(name), |_, raw| {
                    let d: DocRecord = decode_doc(raw)?;
                    let (encs, multi) = index_values(&d.data, field);
                    any_multi |= multi;
                    entries.extend(encs.into_iter().map(|e| (index_key(&fp, &e, &d.id), d.id.clone())));
                    Ok(true)
                })?;
                for (k, id) in entries {
                    tx.put(&k, id.as_bytes());
                }
                if any_multi {
                    tx.put(&multikey_key(name, field), b"");
                }
                def.indexes.push(field.clone());
                tx.put(&coll_key(name), &serde_json::to_vec(&def)?);
                Ok(Response::Document(DocResponse::Created(true)))
            }
            DocOp::DropIndex { collection: name, field } => {
                let Some(mut def) = collection(tx.view(), name)? else { return no_collection(name) };
                if !def.indexes.contains(field) {
                    return Ok(Response::Document(DocResponse::Deleted(0)));
                }
                delete_prefix(tx, &field_prefix(name, field))?;
                tx.delete(&multikey_key(name, field));
                def.indexes.retain(|f| f != field);
                tx.put(&coll_key(name), &serde_json::to_vec(&def)?);
                Ok(Response::Document(DocResponse::Deleted(1)))
            }
            DocOp::Insert { collection: name, id, data } => {
                if let Err(e) = validate_doc_id(id) {
                    return reject(ErrorCode::Invalid, e);
                }
                let Some(def) = collection(tx.view(), name)? else { return no_collection(name) };
                if let Some(msg) = schema_violation(&def, data) {
                    return reject(ErrorCode::Invalid, msg);
                }
                if document(tx.view(), name, id)?.is_some() {
                    return reject(ErrorCode::Conflict, format!("document {id} already exists in collection {name}"));
                }
                let rec =
                    DocRecord { id: id.clone(), collection: name.clone(), data: data.clone(), created_at_ms: now, updated_at_ms: now };
                write_doc(tx, &def, None, Some(&rec))?;
                Ok(Response::Document(DocResponse::Document(rec)))
            }
            DocOp::Replace { collection: name, id, data } => {
                let Some(def) = collection(tx.view(), name)? else { return no_collection(name) };
                let Some(old) = document(tx.view(), name, id)? else { return no_document(name, id) };
                if let Some(msg) = schema_violation(&def, data) {
                    return reject(ErrorCode::Invalid, msg);
                }
                let rec = DocRecord { data: data.clone(), updated_at_ms: now, ..old.clone() };
                write_doc(tx, &def, Some(&old), Some(&rec))?;
                Ok(Response::Document(DocResponse::Document(rec)))
            }
            DocOp::Update { collection: name, id, update } => {
                let Some(def) = collection(tx.view(), name)? else { return no_collection(name) };
                let Some(old) = document(tx.view(), name, id)? else { return no_document(name, id) };
                let mut data = old.data.clone();
                if let Err(e) = apply_update(&mut data, update) {
                    return reject(ErrorCode::Invalid, e.to_string());
                }
                if let Some(msg) = schema_violation(&def, &data) {
                    return reject(ErrorCode::Invalid, msg);
                }
                let rec = DocRecord { data, updated_at_ms: now, ..old.clone() };
                write_doc(tx, &def, Some(&old), Some(&rec))?;
                Ok(Response::Document(DocResponse::Document(rec)))
            }
            DocOp::InsertMany { collection: name, docs } => insert_many(tx, now, name, docs),
            DocOp::Compress { older_than_ms } => compress(tx, now.saturating_sub(*older_than_ms)),
            DocOp::Delete { collection: name, id } => {
                let Some(def) = collection(tx.view(), name)? else { return no_collection(name) };
                match document(tx.view(), name, id)? {
                    Some(old) => {
                        write_doc(tx, &def, Some(&old), None)?;
                        Ok(Response::Document(DocResponse::Deleted(1)))
                    }
                    None => Ok(Response::Document(DocResponse::Deleted(0))),
                }
            }
        }
    }
}

// ---------------------------------------------------------------- queries

/// Answers a document query.
pub fn query(view: &ReadView<'_>, q: &DocQuery) -> Result<Answer<DocQueryResult>> {
    Ok(Ok(match q {
        DocQuery::ListCollections => {
            let mut defs: Vec<CollectionDef> = Vec::new();
            view.scan_prefix(b"c/", |_, v| {
                defs.push(serde_json::from_slice(v)?);
                Ok(true)
            })?;
            let mut out = Vec::with_capacity(defs.len());
            for def in defs {
                let mut documents = 0u64;
                view.scan_prefix(&docs_prefix(&def.name), |_, _| {
                    documents += 1;
                    Ok(true)
                })?;
                out.push(CollectionInfo { def, documents });
            }
            DocQueryResult::Collections(out)
        }
        DocQuery::Collection { name } => DocQueryResult::Collection(collection(view, name)?),
        DocQuery::Get { collection: name, id } => match collection(view, name)? {
            None => return Ok(no_collection_read(name)),
            Some(_) => DocQueryResult::Document(document(view, name, id)?),
        },
        DocQuery::Find(spec) => return find(view, spec),
    }))
}

/// The rejection of a read of a collection this group does not hold.
fn no_collection_read<T>(name: &str) -> Answer<T> {
    Err(Rejection::not_found(format!("collection {name} does not exist")))
}

fn find(view: &ReadView<'_>, spec: &FindSpec) -> Result<Answer<DocQueryResult>> {
    let Some(def) = collection(view, &spec.collection)? else { return Ok(no_collection_read(&spec.collection)) };
    let filter = match Filter::parse(&spec.filter) {
        Ok(f) => f,
        Err(e) => return Ok(Err(Rejection::invalid(e.to_string()))),
    };
    let sort = match SortSpec::parse(&spec.sort) {
        Ok(s) => s,
        Err(e) => return Ok(Err(Rejection::invalid(e.to_string()))),
    };
    let (mut scanned, mut matched) = (0u64, Vec::new());
    let mut consider = |d: DocRecord| {
        scanned += 1;
        if filter.matches(&d.data) {
            matched.push(d);
        }
    };
    let index = pick_index(&def, &filter);
    match &index {
        Some((field, bound)) => {
            for id in index_candidates(view, &def.name, field, bound)? {
                if let Some(d) = document(view, &def.name, &id)? {
                    consider(d);
                }
            }
        }
        None => view.scan_prefix(&docs_prefix(&def.name), |_, raw| {
            consider(decode_doc(raw)?);
            Ok(true)
        })?,
    }
    let total = matched.len() as u64;
    let mut docs: Vec<FoundDoc> = matched.into_iter().map(|doc| FoundDoc { sort_key: sort_key(&doc.data, &sort), doc }).collect();
    docs.sort_by(|a, b| a.sort_key.cmp(&b.sort_key).then_with(|| a.doc.id.cmp(&b.doc.id)));
    if let Some(limit) = spec.limit {
        docs.truncate(limit);
    }
    Ok(Ok(DocQueryResult::Found(Found { docs, scanned, matched: total, index_used: index.map(|(f, _)| f) })))
}

/// The indexed field to scan for `filter`: an equality or `$in` constraint first,
/// then a range.
fn pick_index(def: &CollectionDef, filter: &Filter) -> Option<(String, Bound)> {
    let hints: Vec<(String, Bound)> = filter.index_hint().into_iter().filter(|(p, _)| def.indexes.contains(p)).collect();
    let exact = hints.iter().position(|(_, b)| matches!(b, Bound::Eq(_) | Bound::In(_)));
    let pick = exact.or(if hints.is_empty() { None } else { Some(0) })?;
    hints.into_iter().nth(pick)
}

/// Ids of documents that may satisfy `bound` on `field`, in id order. A superset:
/// exclusive bounds are scanned inclusively, and a multikey index with one side.
fn index_candidates(view: &ReadView<'_>, coll: &str, field: &str, bound: &Bound) -> Result<BTreeSet<String>> {
    let fp = field_prefix(coll, field);
    let mut ids = BTreeSet::new();
    let mut collect = |prefix: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>| {
        view.scan_prefix(prefix, |k, v| {
            let id = String::from_utf8_lossy(v);
            let Some(enc) = k.get(fp.len()..k.len().saturating_sub(id.len() + 1)) else { return Ok(true) };
            if lower.is_some_and(|lo| enc < lo) {
                return Ok(true);
            }
            if upper.is_some_and(|hi| enc > hi) {
                return Ok(false);
            }
            ids.insert(id.into_owned());
            Ok(true)
        })
    };
    match bound {
        Bound::Eq(v) => collect(&[fp.as_slice(), &encoded(v)].concat(), None, None)?,
        Bound::In(vs) => {
            for v in vs {
                collect(&[fp.as_slice(), &encoded(v)].concat(), None, None)?;
            }
        }
        Bound::Range { lower, upper } => {
            let (lo, hi) = (lower.as_ref().map(|(v, _)| encoded(v)), upper.as_ref().map(|(v, _)| encoded(v)));
            let Some(tag) = lo.as_ref().or(hi.as_ref()).and_then(|e| e.first().copied()) else { return Ok(ids) };
            let multikey = view.get(&multikey_key(coll, field))?.is_some();
            let hi = if multikey && lo.is_some() { None } else { hi };
            collect(&[fp.as_slice(), &[tag]].concat(), lo.as_deref(), hi.as_deref())?;
        }
    }
    Ok(ids)
}

/// The documents of the data subject `rule` names (its `_id`, or a subject
/// field): this engine's part of spec 02's export and erasure.
pub fn subject_items(
    view: &ReadView<'_>,
    rule: &tessera_api::compliance::SubjectRule,
) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
    let mut items = Vec::new();
    view.scan_prefix(b"d/", |k, v| {
        let doc = decode_doc(v)?;
        if doc.id == rule.subject_id || rule.matches_object(&doc.data) {
            items.push(tessera_api::compliance::SubjectItem {
                store: "document".into(),
                location: doc.collection.clone(),
                item_id: doc.id.clone(),
                data: doc.data,
                bytes: (k.len() + v.len()) as u64,
                at_ms: Some(doc.updated_at_ms),
            });
        }
        Ok(true)
    })?;
    Ok(items)
}

impl crate::subject::SubjectRecords for DocumentEngine {
    const STORE: &'static str = "document";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        subject_items(view, rule)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        for item in items {
            let delete = DocOp::Delete { collection: item.location.clone(), id: item.item_id.clone() };
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
    use serde_json::json;

    #[test]
    fn compact_records_decode_like_json_ones() {
        let big = "lorem ipsum dolor sit amet ".repeat(20);
        for data in [json!({"a": 1, "b": [1.5, "x", null], "c": {"d": true}}), json!({"text": big, "n": u64::MAX, "f": 1.0})] {
            let rec = DocRecord { id: "id1".into(), collection: "c".into(), data, created_at_ms: 1, updated_at_ms: 2 };
            let json = serde_json::to_vec(&rec).unwrap();
            let compact = encode_doc_compact(&rec).unwrap();
            assert!(compact.len() < json.len());
            assert_eq!(decode_doc(&json).unwrap(), rec);
            assert_eq!(decode_doc(&compact).unwrap(), rec);
        }
        assert!(decode_doc(&[COMPACT_MAGIC, 9, 1]).is_err());
        assert!(decode_doc(&[COMPACT_MAGIC, CODEC_MSGPACK_LZ4, 1, 2]).is_err());
    }
}

/// Engine-level tests over a real group (RocksDB): bulk insert, index upkeep on
/// every write, and index use giving the same answers as a full scan.
#[cfg(test)]
mod engine_tests {
    use super::*;
    use crate::engine::test_support::{apply_op, open_group};
    use crate::engine::{GroupData, space};
    use serde_json::json;

    fn apply(data: &GroupData, op: DocOp) -> Response {
        apply_op(&DocumentEngine, data, space::DOCUMENT, 1_000, &op)
    }

    fn create(data: &GroupData, name: &str, schema: Option<Value>, indexes: &[&str]) {
        assert_eq!(
            apply(data, DocOp::CreateCollection { name: name.into(), schema, exclusive: true }),
            Response::Document(DocResponse::Created(true))
        );
        for f in indexes {
            assert_eq!(
                apply(data, DocOp::CreateIndex { collection: name.into(), field: (*f).into() }),
                Response::Document(DocResponse::Created(true))
            );
        }
    }

    fn insert(data: &GroupData, coll: &str, id: &str, doc: Value) {
        let r = apply(data, DocOp::Insert { collection: coll.into(), id: id.into(), data: doc });
        assert!(matches!(r, Response::Document(DocResponse::Document(_))), "{r:?}");
    }

    fn find(data: &GroupData, coll: &str, filter: Value) -> Found {
        let spec = FindSpec { collection: coll.into(), filter, sort: Value::Null, limit: None };
        match query(&data.space(space::DOCUMENT), &DocQuery::Find(spec)).unwrap() {
            Ok(DocQueryResult::Found(f)) => f,
            other => panic!("find: {other:?}"),
        }
    }

    /// Ids found (in id order) and the index the scan used.
    fn ids(data: &GroupData, coll: &str, filter: Value) -> (Vec<String>, Option<String>) {
        let f = find(data, coll, filter);
        let mut ids: Vec<String> = f.docs.into_iter().map(|d| d.doc.id).collect();
        ids.sort();
        (ids, f.index_used)
    }

    fn count(data: &GroupData, coll: &str) -> usize {
        find(data, coll, json!({})).docs.len()
    }

    /// Every index entry of `field`, as (id) strings, in key order.
    fn index_entries(data: &GroupData, coll: &str, field: &str) -> Vec<String> {
        let mut out = Vec::new();
        data.space(space::DOCUMENT)
            .scan_prefix(&field_prefix(coll, field), |_, v| {
                out.push(String::from_utf8_lossy(v).into_owned());
                Ok(true)
            })
            .unwrap();
        out
    }

    fn doc(index: u64, id: &str, data: Value) -> ImportDoc {
        ImportDoc { index, id: id.into(), data }
    }

    fn failure(r: Response) -> ImportFailure {
        match r {
            Response::Import(ImportResult { failure: Some(f), imported: 0, .. }) => f,
            other => panic!("expected a failed batch: {other:?}"),
        }
    }

    #[test]
    fn insert_many_is_all_or_nothing() {
        let (_dir, data) = open_group(1);
        let schema =
            json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}});
        create(&data, "people", Some(schema), &["age"]);
        insert(&data, "people", "taken", json!({"name": "T", "age": 1}));

        // A schema violation at index 2: neither earlier nor later documents are written.
        let batch = vec![
            doc(0, "a", json!({"name": "A", "age": 30})),
            doc(1, "b", json!({"name": "B"})),
            doc(2, "c", json!({"name": "C", "age": "old"})),
            doc(3, "d", json!({"name": "D"})),
        ];
        let f = failure(apply(&data, DocOp::InsertMany { collection: "people".into(), docs: batch.clone() }));
        assert_eq!((f.line, f.rejection.code), (2, ErrorCode::Invalid), "{f:?}");
        let f = failure(apply(&data, DocOp::InsertMany { collection: "people".into(), docs: vec![doc(0, "e", json!({"age": 1}))] }));
        assert_eq!((f.line, f.rejection.code), (0, ErrorCode::Invalid), "required field: {f:?}");
        // A taken id, and an id twice in the batch, are conflicts.
        let taken = vec![doc(0, "x", json!({"name": "X"})), doc(1, "taken", json!({"name": "T2"}))];
        let f = failure(apply(&data, DocOp::InsertMany { collection: "people".into(), docs: taken }));
        assert_eq!((f.line, f.rejection.code), (1, ErrorCode::Conflict), "{f:?}");
        let twice = vec![doc(0, "y", json!({"name": "Y"})), doc(1, "y", json!({"name": "Y2"}))];
        let f = failure(apply(&data, DocOp::InsertMany { collection: "people".into(), docs: twice }));
        assert_eq!((f.line, f.rejection.code), (1, ErrorCode::Conflict), "{f:?}");
        let f =
            failure(apply(&data, DocOp::InsertMany { collection: "people".into(), docs: vec![doc(0, "bad/id", json!({"name": "Z"}))] }));
        assert_eq!(f.rejection.code, ErrorCode::Invalid);
        let f = failure(apply(&data, DocOp::InsertMany { collection: "nobody".into(), docs: vec![doc(0, "z", json!({}))] }));
        assert_eq!(f.rejection.code, ErrorCode::NotFound);
        assert_eq!(count(&data, "people"), 1, "no failed batch wrote anything");
        assert_eq!(index_entries(&data, "people", "age"), vec!["taken"], "nor any index entry");

        // A good batch writes every document, indexed.
        let mut good = batch;
        good[2].data = json!({"name": "C", "age": 41});
        let r = apply(&data, DocOp::InsertMany { collection: "people".into(), docs: good });
        assert_eq!(r, Response::Import(ImportResult { imported: 4, skipped: 0, failure: None }));
        assert_eq!(count(&data, "people"), 5);
        assert_eq!(ids(&data, "people", json!({"age": {"$gte": 30}})), (vec!["a".into(), "c".into()], Some("age".into())));
        let got = query(&data.space(space::DOCUMENT), &DocQuery::Get { collection: "people".into(), id: "d".into() }).unwrap();
        let Ok(DocQueryResult::Document(Some(d))) = got else { panic!("{got:?}") };
        assert_eq!((d.data, d.created_at_ms), (json!({"name": "D"}), 1_000));
    }

    #[test]
    fn indexes_follow_inserts_updates_replaces_and_deletes() {
        let (_dir, data) = open_group(1);
        create(&data, "c", None, &["city", "tags", "addr.zip"]);
        insert(&data, "c", "d1", json!({"city": "Oslo", "tags": ["x", "y"], "addr": {"zip": 100}}));
        insert(&data, "c", "d2", json!({"city": "Rome", "tags": [], "addr": {"zip": 200}}));
        insert(&data, "c", "d3", json!({"city": "Oslo", "addr": {"zip": 300}}));
        let city = |v: &str| ids(&data, "c", json!({"city": v}));
        assert_eq!(city("Oslo"), (vec!["d1".into(), "d3".into()], Some("city".into())));

        // $set: the new value is found through the index, the old one no longer.
        let upd = json!({"$set": {"city": "Rome", "tags": ["y", "z"], "addr.zip": 150}});
        apply(&data, DocOp::Update { collection: "c".into(), id: "d1".into(), update: upd });
        assert_eq!(city("Oslo").0, vec!["d3"]);
        assert_eq!(city("Rome").0, vec!["d1", "d2"]);
        assert_eq!(ids(&data, "c", json!({"tags": "x"})), (vec![], Some("tags".into())));
        assert_eq!(ids(&data, "c", json!({"tags": "z"})).0, vec!["d1"]);
        assert_eq!(ids(&data, "c", json!({"addr.zip": {"$lt": 160}})), (vec!["d1".into()], Some("addr.zip".into())));
        assert!(ids(&data, "c", json!({"addr.zip": 100})).0.is_empty());

        // Replace drops the fields the new content lacks from their indexes.
        apply(&data, DocOp::Replace { collection: "c".into(), id: "d3".into(), data: json!({"city": "Paris"}) });
        assert!(city("Oslo").0.is_empty());
        assert_eq!(city("Paris").0, vec!["d3"]);
        assert_eq!(ids(&data, "c", json!({"addr.zip": {"$gt": 0}})).0, vec!["d1", "d2"]);

        // A deleted document disappears from every index.
        assert_eq!(apply(&data, DocOp::Delete { collection: "c".into(), id: "d2".into() }), Response::Document(DocResponse::Deleted(1)));
        assert_eq!(city("Rome").0, vec!["d1"]);
        assert_eq!(ids(&data, "c", json!({"addr.zip": {"$gt": 0}})).0, vec!["d1"]);

        // No stale entries: one per (document, value) still held.
        assert_eq!(index_entries(&data, "c", "city"), vec!["d3", "d1"], "Paris < Rome");
        assert_eq!(index_entries(&data, "c", "tags"), vec!["d1", "d1", "d1"], "the array and each element");
        assert_eq!(index_entries(&data, "c", "addr.zip"), vec!["d1"]);

        // A rejected update leaves the indexes as they were.
        let bad = apply(&data, DocOp::Update { collection: "c".into(), id: "d1".into(), update: json!({"$inc": {"city": 1}}) });
        assert!(matches!(bad, Response::Rejected(_)), "{bad:?}");
        assert_eq!(city("Rome").0, vec!["d1"]);

        // Dropping the collection removes its index entries too.
        assert_eq!(apply(&data, DocOp::DropCollection { name: "c".into() }), Response::Document(DocResponse::Deleted(2)));
        assert!(index_entries(&data, "c", "city").is_empty() && index_entries(&data, "c", "tags").is_empty());
    }

    #[test]
    fn indexed_filters_answer_like_full_scans() {
        let (_dir, data) = open_group(1);
        let fields = ["v", "tags", "n.x"];
        create(&data, "plain", None, &[]);
        create(&data, "idx", None, &fields);
        let values =
            [json!(1), json!(2.5), json!(3), json!(-4), json!("a"), json!("b"), json!(null), json!(true), json!([3, "a"]), json!({"k": 1})];
        for i in 0..120u64 {
            let mut d = serde_json::Map::new();
            if i % 11 != 0 {
                d.insert("v".into(), values[(i % values.len() as u64) as usize].clone());
            }
            d.insert("w".into(), json!(i));
            d.insert("tags".into(), json!([format!("t{}", i % 4), format!("t{}", i % 7)]));
            d.insert("n".into(), json!({"x": (i as f64) / 4.0 - 5.0}));
            for coll in ["plain", "idx"] {
                insert(&data, coll, &format!("id{i:03}"), Value::Object(d.clone()));
            }
        }
        // (filter, the index it is expected to use)
        let cases = [
            (json!({"v": 3}), Some("v")),
            (json!({"v": 2.5}), Some("v")),
            (json!({"v": "a"}), Some("v")),
            (json!({"v": {"$eq": 1.0}}), Some("v")),
            (json!({"v": {"$in": [1, "b", true]}}), Some("v")),
            (json!({"v": {"$gt": 1}}), Some("v")),
            (json!({"v": {"$gte": 1, "$lt": 3}}), Some("v")),
            (json!({"v": {"$lte": 2.5}}), Some("v")),
            (json!({"v": {"$gt": "a"}}), Some("v")),
            (json!({"v": {"$lt": "b"}}), Some("v")),
            (json!({"v": {"k": 1}}), Some("v")),
            (json!({"v": [3, "a"]}), Some("v")),
            (json!({"tags": "t3"}), Some("tags")),
            (json!({"tags": {"$gte": "t5"}}), Some("tags")),
            (json!({"tags": {"$gt": "t1", "$lt": "t3"}}), Some("tags")),
            (json!({"n.x": {"$gte": -1.5, "$lte": 2}}), Some("n.x")),
            (json!({"n.x": {"$lt": -4}}), Some("n.x")),
            (json!({"$and": [{"v": {"$gte": 1}}, {"w": {"$lt": 60}}]}), Some("v")),
            (json!({"v": {"$gt": 1}, "tags": "t2"}), Some("tags")),
            (json!({"v": 3, "n.x": {"$gt": 0}}), Some("v")),
            // Not served by an index: null (matches missing fields), $ne, $or, $exists.
            (json!({"v": null}), None),
            (json!({"v": {"$ne": 3}}), None),
            (json!({"$or": [{"v": 3}, {"tags": "t1"}]}), None),
            (json!({"v": {"$exists": false}}), None),
        ];
        for (filter, index) in cases {
            let (want, none) = ids(&data, "plain", filter.clone());
            assert_eq!(none, None);
            let f = find(&data, "idx", filter.clone());
            let (got, used) = ids(&data, "idx", filter.clone());
            assert_eq!(got, want, "filter {filter}");
            assert_eq!(used.as_deref(), index, "index for {filter}");
            if index.is_some() {
                assert!(f.scanned < 120, "the index narrowed the scan for {filter}: {}", f.scanned);
            }
        }
        // Unknown index hints: an index on another field is not used.
        assert_eq!(ids(&data, "idx", json!({"w": 5})).1, None);
    }
}
