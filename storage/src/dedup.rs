//! Retry deduplication. A router gives every client write an id and keeps it
//! across its retries; a retry after a lost answer may reach a new leader while
//! the first attempt is committed too. The state machine remembers the ids it
//! applied, with their responses, for [`WINDOW_MS`] of leader time, and answers
//! a repeated id with the first response instead of applying it again — in the
//! same batch as the write, so replicas and snapshots agree.
//!
//! Keys (space [`space::DEDUP`]): `r/<id>` → encoded response, and
//! `t/<issued_at_ms BE><id>` → empty, the expiry index scanned in time order.

use tessera_api::codec;
use tessera_api::command::{RejectKind, Response};

use crate::engine::{ReadView, Tx};
use crate::error::{Result, StorageError};

/// How long an applied request id is remembered: far beyond the router's retry
/// deadline (`server.request_timeout`, 30 s by default, at most 300 s).
pub const WINDOW_MS: i64 = 10 * 60 * 1000;

/// Responses larger than this are not kept; a repeat then gets a conflict
/// saying the request was applied.
const MAX_KEPT_RESPONSE: usize = 64 * 1024;

fn record_key(id: &str) -> Vec<u8> {
    [b"r/".as_slice(), id.as_bytes()].concat()
}

fn expiry_key(at_ms: i64, id: &str) -> Vec<u8> {
    [b"t/".as_slice(), &(at_ms.max(0) as u64).to_be_bytes(), id.as_bytes()].concat()
}

fn codec_error(e: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("deduplication record: {e}"))
}

/// The response recorded for `id`, when it was applied within the window.
pub fn seen(view: &ReadView<'_>, id: &str) -> Result<Option<Response>> {
    match view.get(&record_key(id))? {
        Some(bytes) => Ok(Some(codec::decode(&bytes).map_err(codec_error)?)),
        None => Ok(None),
    }
}

/// Records that `id` was applied at `issued_at_ms` with `response`, and forgets
/// the ids applied before the window.
pub fn remember(tx: &mut Tx<'_>, issued_at_ms: i64, id: &str, response: &Response) -> Result<()> {
    let mut stored = codec::encode(response).map_err(codec_error)?;
    if stored.len() > MAX_KEPT_RESPONSE {
        let marker = Response::Rejected {
            kind: RejectKind::Conflict,
            message: format!("request {id} was applied already; its response was too large to keep for a retry"),
        };
        stored = codec::encode(&marker).map_err(codec_error)?;
    }
    tx.put(&record_key(id), &stored);
    tx.put(&expiry_key(issued_at_ms, id), b"");
    let mut expired = Vec::new();
    tx.view().scan_range(b"t/", &expiry_key(issued_at_ms - WINDOW_MS, ""), |k, _| {
        expired.push(k.to_vec());
        Ok(expired.len() < 1024)
    })?;
    for k in expired {
        let old_id = String::from_utf8_lossy(&k[10..]).into_owned();
        tx.delete(&record_key(&old_id));
        tx.delete(&k);
    }
    Ok(())
}

/// Whether `id` is a well-formed request id (1–64 ASCII alphanumerics).
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}
