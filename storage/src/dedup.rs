//! Retry deduplication. A router gives every client write an id and keeps it
//! across its retries; a retry after a lost answer may reach a new leader while
//! the first attempt is committed too. The state machine remembers the ids it
//! applied, with their responses, and answers a repeated id with the first
//! response instead of applying it again — in the same batch as the write, so
//! replicas and snapshots agree.
//!
//! A record is forgotten only when it is both older than [`WINDOW_MS`] of the
//! group's time **and** more than [`MIN_KEPT_ENTRIES`] log entries old: a
//! leader whose clock jumps ahead cannot expire the records of retries still
//! in flight, and a quiet group keeps them as long as it needs to.
//!
//! Keys (space [`space::DEDUP`]): `r/<id>` → encoded response; `c/<id>` → a
//! compact KV put response (the entry without its value, and a hash of the
//! value: a retry carries the same value, so the first answer is rebuilt from
//! it); `p/<log index BE><id>` → issued-at BE, the expiry index in log order.
//! (`t/<issued_at BE><id>`: the time-ordered index of earlier versions, still
//! expired by time.)

use serde::{Deserialize, Serialize};
use tessera_api::codec;
use tessera_api::command::{Command, KvEntry, KvOp, Operation, Response};
use tessera_api::error::ErrorCode;

use crate::engine::{ReadView, Tx};
use crate::error::{Result, StorageError};

/// How long an applied request id is remembered at least: far beyond the
/// router's retry deadline (`server.request_timeout`, 30 s by default, at most 300 s).
pub const WINDOW_MS: i64 = 10 * 60 * 1000;

/// How many log entries a record outlives at least, whatever the clock says.
pub const MIN_KEPT_ENTRIES: u64 = 100_000;

/// Records are expired by the commands of every this-many-th log entry only:
/// a RocksDB iterator per applied write was about 6% of a node's CPU under
/// write load. Deterministic (the log index is the same on every replica).
const EXPIRE_EVERY_ENTRIES: u64 = 8;

/// Records one expiring pass forgets at most (a batch entry holds up to 64
/// commands, so this stays ahead of what eight entries remember).
const EXPIRED_PER_PASS: usize = 8 * 1024;

/// Responses larger than this are not kept whole: a KV put keeps a compact
/// record; others a conflict saying the request was applied.
const MAX_KEPT_RESPONSE: usize = 64 * 1024;

/// A KV put's response without its value, and the value's hash.
#[derive(Serialize, Deserialize)]
struct CompactPut {
    entry: KvEntry,
    value_hash: u64,
}

fn record_key(id: &str) -> Vec<u8> {
    [b"r/".as_slice(), id.as_bytes()].concat()
}

fn compact_key(id: &str) -> Vec<u8> {
    [b"c/".as_slice(), id.as_bytes()].concat()
}

fn position_key(log_index: u64, id: &str) -> Vec<u8> {
    [b"p/".as_slice(), &log_index.to_be_bytes(), id.as_bytes()].concat()
}

fn legacy_expiry_key(at_ms: i64, id: &str) -> Vec<u8> {
    [b"t/".as_slice(), &(at_ms.max(0) as u64).to_be_bytes(), id.as_bytes()].concat()
}

fn codec_error(e: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("deduplication record: {e}"))
}

/// FNV-1a of the value's JSON text (stable across builds and replicas).
fn value_hash(value: &serde_json::Value) -> u64 {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

fn put_value(cmd: &Command) -> Option<&serde_json::Value> {
    match &cmd.op {
        Operation::Kv(KvOp::Put { value, .. }) => Some(value),
        _ => None,
    }
}

/// The response recorded for `id`, when it was applied and is still
/// remembered; `cmd` is the repeat (a compact put record takes its value).
pub fn seen(view: &ReadView<'_>, id: &str, cmd: &Command) -> Result<Option<Response>> {
    if let Some(bytes) = view.get(&record_key(id))? {
        // A record in a response shape this version no longer reads (written
        // before an upgrade) cannot be replayed, and the request must not be
        // applied twice: the repeat is answered with a conflict, as for a
        // response too large to keep. Never an error: that would halt the
        // group on every replica.
        return Ok(Some(codec::decode(&bytes).unwrap_or_else(|e| {
            tracing::warn!(request_id = id, "a remembered response no longer decodes: {e}");
            unreadable(id)
        })));
    }
    let Some(bytes) = view.get(&compact_key(id))? else { return Ok(None) };
    let Ok(CompactPut { mut entry, value_hash: hash }) = codec::decode(&bytes) else { return Ok(Some(unreadable(id))) };
    Ok(Some(match put_value(cmd) {
        Some(value) if value_hash(value) == hash => {
            entry.value = value.clone();
            Response::KvEntry(entry)
        }
        _ => Response::rejected(ErrorCode::Conflict, format!("request {id} was applied already with another body")),
    }))
}

/// The answer to a repeat whose first response is kept in a shape this
/// version cannot read.
fn unreadable(id: &str) -> Response {
    Response::rejected(
        ErrorCode::Conflict,
        format!("request {id} was applied already; its response was kept by an earlier version and cannot be replayed"),
    )
}

/// Records that `id` was applied at `log_index` (stamped `issued_at_ms`) with
/// `response`, and forgets records past both the window and the entry count.
pub fn remember(tx: &mut Tx<'_>, log_index: u64, issued_at_ms: i64, id: &str, cmd: &Command, response: &Response) -> Result<()> {
    let stored = codec::encode(response).map_err(codec_error)?;
    if stored.len() <= MAX_KEPT_RESPONSE {
        tx.put(&record_key(id), &stored);
    } else if let (Response::KvEntry(entry), Some(value)) = (response, put_value(cmd)) {
        let compact = CompactPut { entry: KvEntry { value: serde_json::Value::Null, ..entry.clone() }, value_hash: value_hash(value) };
        tx.put(&compact_key(id), &codec::encode(&compact).map_err(codec_error)?);
    } else {
        let marker = Response::rejected(
            ErrorCode::Conflict,
            format!("request {id} was applied already; its response was too large to keep for a retry"),
        );
        tx.put(&record_key(id), &codec::encode(&marker).map_err(codec_error)?);
    }
    tx.put(&position_key(log_index, id), &issued_at_ms.to_be_bytes());
    if !log_index.is_multiple_of(EXPIRE_EVERY_ENTRIES) {
        return Ok(());
    }

    // Expire in log order; group times grow with the log, so the first record
    // still wanted ends the scan.
    let mut expired = Vec::new();
    tx.view().scan_range(b"p/", b"p0", |k, v| {
        let index = k.get(2..10).and_then(|b| b.try_into().ok()).map_or(u64::MAX, u64::from_be_bytes);
        let at = v.try_into().map_or(i64::MAX, i64::from_be_bytes);
        let gone = index.saturating_add(MIN_KEPT_ENTRIES) <= log_index && at < issued_at_ms - WINDOW_MS;
        if gone {
            expired.push((k.to_vec(), String::from_utf8_lossy(&k[10..]).into_owned()));
        }
        Ok(gone && expired.len() < EXPIRED_PER_PASS)
    })?;
    tx.view().scan_range(b"t/", &legacy_expiry_key(issued_at_ms - WINDOW_MS, ""), |k, _| {
        expired.push((k.to_vec(), String::from_utf8_lossy(&k[10..]).into_owned()));
        Ok(expired.len() < 2 * EXPIRED_PER_PASS)
    })?;
    for (k, old_id) in expired {
        tx.delete(&record_key(&old_id));
        tx.delete(&compact_key(&old_id));
        tx.delete(&k);
    }
    Ok(())
}

/// Withdraws the remembered answers that show a data subject's records (a
/// secure erasure; `rule` as [`tessera_api::compliance::SubjectRule`] matches
/// them: a string naming the subject, an object with a subject field). Each is
/// replaced by a conflict saying so: a late retry is still not applied twice,
/// but no answer keeps the erased data. Answers how many were withdrawn.
pub fn withdraw_answers(tx: &mut Tx<'_>, rule: &tessera_api::compliance::SubjectRule) -> Result<u64> {
    fn mentions(rule: &tessera_api::compliance::SubjectRule, v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => rule.matches_key(s),
            serde_json::Value::Array(a) => a.iter().any(|x| mentions(rule, x)),
            serde_json::Value::Object(m) => rule.matches_object(v) || m.values().any(|x| mentions(rule, x)),
            _ => false,
        }
    }
    // An answer that does not decode cannot be shown not to name the subject:
    // it is withdrawn wholesale, never skipped (a retry of its request then
    // gets the conflict below instead of a replay).
    let mut hits = Vec::new();
    tx.view().scan_prefix(b"r/", |k, v| {
        let names_subject = match codec::decode::<Response>(v).ok().and_then(|r| serde_json::to_value(&r).ok()) {
            Some(json) => mentions(rule, &json),
            None => true,
        };
        if names_subject {
            hits.push((k.to_vec(), String::from_utf8_lossy(&k[2..]).into_owned()));
        }
        Ok(true)
    })?;
    // Compact KV put records keep the entry's key (not its value); one that does
    // not decode goes too.
    let mut compact = Vec::new();
    tx.view().scan_prefix(b"c/", |k, v| {
        let names_subject = codec::decode::<CompactPut>(v).map_or(true, |CompactPut { entry, .. }| rule.matches_key(&entry.key));
        if names_subject {
            let id = String::from_utf8_lossy(&k[2..]).into_owned();
            compact.push((k.to_vec(), id));
        }
        Ok(true)
    })?;
    for (key, id) in compact {
        tx.delete(&key);
        hits.push((record_key(&id), id));
    }
    for (key, id) in &hits {
        let withdrawn = Response::rejected(
            ErrorCode::Conflict,
            format!("request {id} was applied already; its answer was withdrawn by a secure erasure of the data it showed"),
        );
        tx.put(key, &codec::encode(&withdrawn).map_err(codec_error)?);
    }
    Ok(hits.len() as u64)
}

/// Whether `id` is a well-formed request id (1–64 ASCII alphanumerics).
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}
