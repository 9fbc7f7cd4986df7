//! The audit trail of the meta group: a hash chain (spec 02). Each entry's
//! `hash` is the lower-case hex SHA-256 of the compact JSON array
//! `[seq, event_type, timestamp_ms, actor, subject_id, details, prev_hash]`,
//! `prev_hash` being the previous entry's hash (64 zeros for the first), so a
//! changed, removed or reordered entry breaks the chain at that entry.
//! Times are the command's (`now`), so replicas build the same chain.
//!
//! Keys: `aud/e/<seq, 16 hex digits>` → [`AuditEntry`]; `aud/s/<subject>\0<seq>`
//! → nothing (the subject's index); `aud/last` → `[seq, hash]` of the newest entry;
//! `aud/anchor` → `[seq, hash]` of the newest entry retention removed (the
//! chain verifies from it; absent: from the genesis).

use sha2::{Digest, Sha256};
use tessera_api::compliance::{AuditAnswer, AuditEntry, AuditEvent, AuditQuery};

use super::{ReadView, Tx};
use crate::error::Result;

const ENTRY: &[u8] = b"aud/e/";
const SUBJECT: &[u8] = b"aud/s/";
const LAST: &[u8] = b"aud/last";
const ANCHOR: &[u8] = b"aud/anchor";

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

/// Removes the entries recorded before `before_ms`, oldest first, keeping
/// the newest removed entry's `[seq, hash]` as the chain's anchor, and appends
/// an `audit_pruned` entry when any went; answers how many were removed.
pub fn prune(tx: &mut Tx<'_>, now: i64, before_ms: i64) -> Result<u64> {
    let mut doomed: Vec<AuditEntry> = Vec::new();
    tx.view().scan_prefix(ENTRY, |_, raw| {
        let e: AuditEntry = serde_json::from_slice(raw)?;
        if e.timestamp_ms >= before_ms {
            return Ok(false);
        }
        doomed.push(e);
        Ok(true)
    })?;
    let Some(newest) = doomed.last() else { return Ok(0) };
    tx.put(ANCHOR, &serde_json::to_vec(&(newest.seq, newest.hash.clone()))?);
    for e in &doomed {
        tx.delete(&entry_key(e.seq));
        if let Some(subject) = &e.subject_id {
            tx.delete(&[subject_prefix(subject).as_slice(), &e.seq.to_be_bytes()].concat());
        }
    }
    let details = serde_json::json!({"entries_removed": doomed.len(), "recorded_before_ms": before_ms, "anchor_seq": newest.seq});
    append(tx, now, vec![AuditEvent { event_type: "audit_pruned".into(), actor: "retention".into(), subject_id: None, details }])?;
    Ok(doomed.len() as u64)
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
        AuditQuery::Since { from_ms } => {
            let mut entries: Vec<AuditEntry> = Vec::new();
            view.scan_prefix(ENTRY, |_, raw| {
                let e: AuditEntry = serde_json::from_slice(raw)?;
                if e.timestamp_ms >= *from_ms {
                    entries.push(e);
                }
                Ok(true)
            })?;
            AuditAnswer::Entries(entries)
        }
    })
}

/// Walks the chain from the first entry (after the retention anchor, if
/// any); stops at the first break.
fn verify(view: &ReadView<'_>) -> Result<AuditAnswer> {
    let anchor: Option<(u64, String)> = view.get(ANCHOR)?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
    let (anchor_seq, anchor_hash) = anchor.clone().unwrap_or((0, GENESIS.to_string()));
    let (mut verified, mut prev, mut expected_seq) = (0u64, anchor_hash, anchor_seq + 1);
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
        && (seq != anchor_seq + verified || hash != prev)
    {
        broken = Some(format!("the chain breaks after entry {verified}: the newest recorded entry is {seq} (entries were removed)"));
    }
    Ok(match broken {
        Some(message) => AuditAnswer::Verified { valid: false, entries_verified: verified, message },
        None => {
            let message = match anchor {
                Some((seq, _)) => format!("all {verified} entries verified (from the retention anchor after entry {seq})"),
                None => format!("all {verified} entries verified"),
            };
            AuditAnswer::Verified { valid: true, entries_verified: verified, message }
        }
    })
}

#[cfg(test)]
mod tests {
    use tessera_api::command::{MetaOp, Response};
    use tessera_api::compliance::{AuditAnswer, AuditEvent, AuditQuery};

    use crate::engine::meta::MetaEngine;
    use crate::engine::{GroupData, space};

    fn apply(data: &GroupData, now: i64, op: MetaOp) -> Response {
        crate::engine::test_support::apply_op(&MetaEngine, data, space::META, now, &op)
    }

    fn event(n: u32) -> AuditEvent {
        AuditEvent {
            event_type: "consent_recorded".into(),
            actor: "t".into(),
            subject_id: Some("s".into()),
            details: serde_json::json!({"n": n}),
        }
    }

    fn verify(data: &GroupData) -> (bool, u64, String) {
        let view = data.space(space::META);
        match super::query(&view, &AuditQuery::Verify).unwrap() {
            AuditAnswer::Verified { valid, entries_verified, message } => (valid, entries_verified, message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retention_removes_old_entries_and_the_chain_still_verifies() {
        let (_dir, data) = crate::engine::test_support::open_group(0);
        for (n, at) in [(1, 1_000), (2, 2_000), (3, 3_000)] {
            apply(&data, at, MetaOp::Audit(vec![event(n)]));
        }
        assert_eq!(apply(&data, 4_000, MetaOp::PruneAudit { before_ms: 2_500 }), Response::Deleted(2));
        let (valid, verified, message) = verify(&data);
        assert!(valid, "{message}");
        assert_eq!(verified, 2, "entry 3 and the audit_pruned entry");
        assert!(message.contains("anchor after entry 2"), "{message}");
        assert_eq!(apply(&data, 5_000, MetaOp::PruneAudit { before_ms: 2_500 }), Response::Deleted(0), "nothing older left");
        // The subject's index lost the removed entries too.
        let view = data.space(space::META);
        let AuditAnswer::Entries(entries) = super::query(&view, &AuditQuery::Subject { subject_id: "s".into() }).unwrap() else { panic!() };
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn entries_since_a_time_oldest_first() {
        let (_dir, data) = crate::engine::test_support::open_group(0);
        for (n, at) in [(1, 1_000), (2, 2_000), (3, 3_000)] {
            apply(&data, at, MetaOp::Audit(vec![event(n)]));
        }
        let view = data.space(space::META);
        let AuditAnswer::Entries(entries) = super::query(&view, &AuditQuery::Since { from_ms: 2_000 }).unwrap() else { panic!() };
        let times: Vec<i64> = entries.iter().map(|e| e.timestamp_ms).collect();
        assert_eq!(times, vec![2_000, 3_000]);
    }
}
