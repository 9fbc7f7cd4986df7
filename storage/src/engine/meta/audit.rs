//! The audit trail of the meta group: a hash chain (spec 02). Each entry's
//! `hash` is the lower-case hex SHA-256 of the compact JSON array
//! `[seq, event_type, timestamp_ms, actor, subject_id, details, prev_hash]`,
//! `prev_hash` being the previous entry's hash (64 zeros for the first), so a
//! changed, removed or reordered entry breaks the chain at that entry.
//! Times are the command's (`now`), so replicas build the same chain.
//!
//! Keys: `aud/e/<seq, 16 hex digits>` → [`AuditEntry`]; `aud/s/<subject>\0<seq>`
//! → nothing (the subject's index); `aud/last` → `[seq, hash]` of the newest entry.

use sha2::{Digest, Sha256};
use tessera_api::compliance::{AuditAnswer, AuditEntry, AuditEvent, AuditQuery};

use super::{ReadView, Tx};
use crate::error::Result;

const ENTRY: &[u8] = b"aud/e/";
const SUBJECT: &[u8] = b"aud/s/";
const LAST: &[u8] = b"aud/last";

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn entry_key(seq: u64) -> Vec<u8> {
    [ENTRY, format!("{seq:016x}").as_bytes()].concat()
}

fn subject_prefix(subject: &str) -> Vec<u8> {
    [SUBJECT, subject.as_bytes(), b"\0"].concat()
}

/// The hash an entry must carry (see the module docs).
pub fn hash_of(e: &AuditEntry) -> String {
    let canonical = serde_json::json!([e.seq, e.event_type, e.timestamp_ms, e.actor, e.subject_id, e.details, e.prev_hash]);
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

/// Appends `events` at `now` (in order) into `tx`; answers the entries.
pub fn append(tx: &mut Tx<'_>, now: i64, events: Vec<AuditEvent>) -> Result<Vec<AuditEntry>> {
    let (mut seq, mut prev): (u64, String) = match tx.view().get(LAST)? {
        Some(raw) => serde_json::from_slice(&raw)?,
        None => (0, GENESIS.to_string()),
    };
    let mut out = Vec::with_capacity(events.len());
    for ev in events {
        seq += 1;
        let mut e = AuditEntry {
            id: format!("aud-{seq:012}"),
            seq,
            event_type: ev.event_type,
            timestamp_ms: now,
            actor: ev.actor,
            subject_id: ev.subject_id,
            details: ev.details,
            prev_hash: prev.clone(),
            hash: String::new(),
        };
        e.hash = hash_of(&e);
        tx.put(&entry_key(seq), &serde_json::to_vec(&e)?);
        if let Some(subject) = &e.subject_id {
            tx.put(&[subject_prefix(subject).as_slice(), &seq.to_be_bytes()].concat(), b"");
        }
        prev = e.hash.clone();
        out.push(e);
    }
    tx.put(LAST, &serde_json::to_vec(&(seq, prev))?);
    Ok(out)
}

/// Answers an audit read.
pub fn query(view: &ReadView<'_>, q: &AuditQuery) -> Result<AuditAnswer> {
    Ok(match q {
        AuditQuery::Subject { subject_id } => {
            let prefix = subject_prefix(subject_id);
            let mut seqs = Vec::new();
            view.scan_prefix(&prefix, |k, _| {
                let b: [u8; 8] = k[prefix.len()..].try_into().map_err(|_| crate::error::StorageError::Corrupt("audit index key".into()))?;
                seqs.push(u64::from_be_bytes(b));
                Ok(true)
            })?;
            let mut entries = Vec::with_capacity(seqs.len());
            for seq in seqs {
                if let Some(raw) = view.get(&entry_key(seq))? {
                    entries.push(serde_json::from_slice(&raw)?);
                }
            }
            AuditAnswer::Entries(entries)
        }
        AuditQuery::Verify => verify(view)?,
    })
}

/// Walks the chain from the first entry; stops at the first break.
fn verify(view: &ReadView<'_>) -> Result<AuditAnswer> {
    let (mut verified, mut prev, mut expected_seq) = (0u64, GENESIS.to_string(), 1u64);
    let mut broken: Option<String> = None;
    view.scan_prefix(ENTRY, |k, raw| {
        let at = String::from_utf8_lossy(&k[ENTRY.len()..]).into_owned();
        let e: AuditEntry = match serde_json::from_slice(raw) {
            Ok(e) => e,
            Err(e) => {
                broken = Some(format!("the chain breaks at entry {at}: its record is unreadable ({e})"));
                return Ok(false);
            }
        };
        let why = if e.seq != expected_seq || at != format!("{:016x}", e.seq) {
            Some(format!("entry {} is not where the chain expects entry {expected_seq}", e.id))
        } else if e.prev_hash != prev {
            Some(format!("entry {} does not link to the entry before it (prev_hash differs)", e.id))
        } else if hash_of(&e) != e.hash {
            Some(format!("entry {} was changed: its content does not match its hash", e.id))
        } else {
            None
        };
        if let Some(why) = why {
            broken = Some(format!("the chain breaks at {why}"));
            return Ok(false);
        }
        verified += 1;
        expected_seq += 1;
        prev = e.hash;
        Ok(true)
    })?;
    let last: Option<(u64, String)> = view.get(LAST)?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
    if broken.is_none()
        && let Some((seq, hash)) = last
        && (seq != verified || hash != prev)
    {
        broken = Some(format!("the chain breaks after entry {verified}: the newest recorded entry is {seq} (entries were removed)"));
    }
    Ok(match broken {
        Some(message) => AuditAnswer::Verified { valid: false, entries_verified: verified, message },
        None => AuditAnswer::Verified { valid: true, entries_verified: verified, message: format!("all {verified} entries verified") },
    })
}
