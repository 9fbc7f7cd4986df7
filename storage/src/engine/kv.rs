//! The key-value engine: JSON values under string keys, with expiry fixed by the
//! leader at write time and enforced at read time.

use tessera_api::command::{KvEntry, KvOp, KvQuery, KvQueryResult, Response};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
use crate::error::Result;

/// Key-value engine.
pub struct KvEngine;

fn decode(raw: &[u8]) -> Result<KvEntry> {
    Ok(serde_json::from_slice(raw)?)
}

impl KvEngine {
    fn put(tx: &mut Tx<'_>, now: i64, key: &str, value: &serde_json::Value, ttl: Option<u64>) -> Result<KvEntry> {
        let created_at_ms = match tx.view().get(key.as_bytes())? {
            Some(raw) => {
                let old = decode(&raw)?;
                if old.is_live(now) { old.created_at_ms } else { now }
            }
            None => now,
        };
        let entry = KvEntry {
            key: key.to_string(),
            value: value.clone(),
            created_at_ms,
            updated_at_ms: now,
            expires_at_ms: ttl.map(|s| now.saturating_add((s as i64).saturating_mul(1000))),
        };
        tx.put(key.as_bytes(), &serde_json::to_vec(&entry)?);
        Ok(entry)
    }
}

impl Engine for KvEngine {
    const SPACE: u8 = super::space::KV;
    type Op = KvOp;
    type Query = KvQuery;
    type Answer = KvQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &KvQuery) -> Result<Answer<KvQueryResult>> {
        let (view, now) = (ctx.view::<Self>(), ctx.now_ms);
        Ok(Ok(match query {
            KvQuery::Get { key } => KvQueryResult::Entry(get(&view, key, now)?),
            KvQuery::List { prefix, limit, range } => {
                let (entries, total) = list_within(&view, prefix, range.as_ref(), *limit, now)?;
                KvQueryResult::List { entries, total }
            }
            KvQuery::Count { prefix, range } => KvQueryResult::Count(list_within(&view, prefix, range.as_ref(), 0, now)?.1),
            // Answered by the state machine from the group's own records.
            KvQuery::Range => KvQueryResult::Range(crate::range::info(ctx.data)?),
        }))
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &KvOp) -> Result<Response> {
        match op {
            KvOp::Put { key, value, ttl_secs } => Ok(Response::KvEntry(Self::put(tx, now, key, value, *ttl_secs)?)),
            KvOp::PutMany { pairs } => {
                for (key, value) in pairs {
                    Self::put(tx, now, key, value, None)?;
                }
                Ok(Response::Deleted(0))
            }
            KvOp::Delete { key } => {
                let live = match tx.view().get(key.as_bytes())? {
                    Some(raw) => decode(&raw)?.is_live(now),
                    None => false,
                };
                tx.delete(key.as_bytes());
                Ok(Response::Deleted(live as u64))
            }
            KvOp::DeletePrefix { prefix, range } => {
                let mut doomed = Vec::new();
                let mut live = 0;
                scan_within(tx.view(), prefix, range.as_ref(), |k, v| {
                    if decode(v)?.is_live(now) {
                        live += 1;
                    }
                    doomed.push(k.to_vec());
                    Ok(true)
                })?;
                for k in doomed {
                    tx.delete(&k);
                }
                Ok(Response::Deleted(live))
            }
        }
    }
}

/// The live entry under `key` at `now`.
pub fn get(view: &ReadView<'_>, key: &str, now: i64) -> Result<Option<KvEntry>> {
    Ok(view.get(key.as_bytes())?.map(|raw| decode(&raw)).transpose()?.filter(|e| e.is_live(now)))
}

/// Live entries with `prefix` in key order (at most `limit`) and how many match in all.
pub fn list(view: &ReadView<'_>, prefix: &str, limit: usize, now: i64) -> Result<(Vec<KvEntry>, u64)> {
    list_within(view, prefix, None, limit, now)
}

/// Visits the stored records with `prefix` in key order, only those in
/// `range` when one is given (range sharding: the part the router asked this group for).
fn scan_within(
    view: &ReadView<'_>,
    prefix: &str,
    range: Option<&tessera_api::meta::KeyRange>,
    f: impl FnMut(&[u8], &[u8]) -> Result<bool>,
) -> Result<()> {
    let Some(range) = range else { return view.scan_prefix(prefix.as_bytes(), f) };
    match range.with_prefix(prefix) {
        None => Ok(()),
        // Keys are UTF-8 and never hold the byte 0xff: 0xff bounds every key.
        Some((start, end)) => view.scan_range(&start, &end.unwrap_or_else(|| vec![0xff]), f),
    }
}

/// [`list`] within `range` (see [`scan_within`]).
pub fn list_within(
    view: &ReadView<'_>,
    prefix: &str,
    range: Option<&tessera_api::meta::KeyRange>,
    limit: usize,
    now: i64,
) -> Result<(Vec<KvEntry>, u64)> {
    let mut entries = Vec::new();
    let mut total = 0u64;
    scan_within(view, prefix, range, |_, v| {
        let e = decode(v)?;
        if e.is_live(now) {
            total += 1;
            if entries.len() < limit {
                entries.push(e);
            }
        }
        Ok(true)
    })?;
    Ok((entries, total))
}

/// How many live entries have `prefix`.
pub fn count(view: &ReadView<'_>, prefix: &str, now: i64) -> Result<u64> {
    Ok(list(view, prefix, 0, now)?.1)
}

/// The live entries of the data subject `rule` names (its key, or its
/// subject field in the JSON value): this engine's part of spec 02's export and erasure.
pub fn subject_items(
    view: &ReadView<'_>,
    rule: &tessera_api::compliance::SubjectRule,
    now: i64,
) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
    let mut items = Vec::new();
    view.scan_prefix(b"", |k, v| {
        let entry = decode(v)?;
        if entry.is_live(now) && (rule.matches_key(&entry.key) || rule.matches_object(&entry.value)) {
            items.push(tessera_api::compliance::SubjectItem {
                store: "kv".into(),
                location: "kv".into(),
                item_id: entry.key.clone(),
                data: entry.value,
                bytes: (k.len() + v.len()) as u64,
                at_ms: Some(entry.updated_at_ms),
            });
        }
        Ok(true)
    })?;
    Ok(items)
}

impl crate::subject::SubjectRecords for KvEngine {
    const STORE: &'static str = "kv";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        subject_items(view, rule, now)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        for item in items {
            if let Some(r) = crate::subject::refusal(self.apply(tx, now, &KvOp::Delete { key: item.item_id.clone() })?) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}
