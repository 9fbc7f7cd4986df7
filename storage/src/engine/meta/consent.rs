//! Consent records of the meta group (spec 02). Every time comes from the
//! command (`now` = `issued_at_ms`), so replicas agree.
//!
//! Keys: `con/r/<subject>\0<purpose>` → [`ConsentRecord`] (the current one);
//! `con/h/<subject>\0<seq, 16 hex digits>` → [`ConsentChange`]; `con/seq` → the
//! last history number.

use tessera_api::command::Response;
use tessera_api::compliance::{
    AuditEvent, ConsentAnswer, ConsentChange, ConsentOp, ConsentQuery, ConsentRecord, ConsentStats, DO_NOT_SELL, DoNotSellEntry,
};
use tessera_api::error::ErrorCode;

use super::{ReadView, Tx};
use crate::error::Result;

const RECORD: &[u8] = b"con/r/";
const HISTORY: &[u8] = b"con/h/";
const SEQ: &[u8] = b"con/seq";

fn subject_prefix(prefix: &[u8], subject: &str) -> Vec<u8> {
    [prefix, subject.as_bytes(), b"\0"].concat()
}

fn record_key(subject: &str, purpose: &str) -> Vec<u8> {
    [subject_prefix(RECORD, subject).as_slice(), purpose.as_bytes()].concat()
}

fn history_key(subject: &str, seq: u64) -> Vec<u8> {
    [subject_prefix(HISTORY, subject).as_slice(), format!("{seq:016x}").as_bytes()].concat()
}

fn all<T: serde::de::DeserializeOwned>(view: &ReadView<'_>, prefix: &[u8]) -> Result<Vec<T>> {
    let mut out = Vec::new();
    view.scan_prefix(prefix, |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// Applies a consent write at `now`, and appends what changed to the audit
/// trail in the same batch.
pub fn apply(tx: &mut Tx<'_>, now: i64, op: &ConsentOp) -> Result<Response> {
    let mut audited: Vec<AuditEvent> = Vec::new();
    let response = apply_consent(tx, now, op, &mut audited)?;
    if !audited.is_empty() {
        super::audit::append(tx, now, audited)?;
    }
    Ok(response)
}

fn apply_consent(tx: &mut Tx<'_>, now: i64, op: &ConsentOp, audited: &mut Vec<AuditEvent>) -> Result<Response> {
    let actor_of = |op: &ConsentOp| match op {
        ConsentOp::Record { actor, .. } | ConsentOp::Withdraw { actor, .. } | ConsentOp::Erase { actor, .. } => actor.clone(),
    };
    let actor = actor_of(op);
    let mut seq: u64 = match tx.view().get(SEQ)? {
        Some(raw) => serde_json::from_slice(&raw)?,
        None => 0,
    };
    let mut change = |tx: &mut Tx<'_>, r: &ConsentRecord, action: &str, reason: Option<String>| -> Result<()> {
        seq += 1;
        let c = ConsentChange {
            seq,
            consent_id: r.consent_id.clone(),
            subject_id: r.subject_id.clone(),
            purpose: r.purpose.clone(),
            action: action.to_string(),
            granted: r.granted,
            source: r.source.clone(),
            version: r.version.clone(),
            reason,
            at_ms: now,
        };
        tx.put(&history_key(&r.subject_id, seq), &serde_json::to_vec(&c)?);
        audited.push(AuditEvent {
            event_type: format!("consent_{action}"),
            actor: actor.clone(),
            subject_id: Some(r.subject_id.clone()),
            details: serde_json::json!({"purpose": r.purpose, "granted": r.granted, "consent_id": r.consent_id, "source": r.source, "version": r.version, "reason": c.reason}),
        });
        Ok(())
    };
    let response = match op {
        ConsentOp::Record { records, .. } => {
            let mut stored = Vec::with_capacity(records.len());
            for r in records {
                let r = ConsentRecord { recorded_at_ms: now, withdrawal_reason: None, ..r.clone() };
                tx.put(&record_key(&r.subject_id, &r.purpose), &serde_json::to_vec(&r)?);
                change(tx, &r, if r.granted { "granted" } else { "denied" }, None)?;
                stored.push(r);
            }
            Response::Consent(stored)
        }
        ConsentOp::Withdraw { subject_id, purpose, reason, .. } => {
            let key = record_key(subject_id, purpose);
            let Some(raw) = tx.view().get(&key)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("subject {subject_id} has no consent recorded for {purpose}")));
            };
            let old: ConsentRecord = serde_json::from_slice(&raw)?;
            let r = ConsentRecord { granted: false, recorded_at_ms: now, withdrawal_reason: reason.clone(), ..old };
            tx.put(&key, &serde_json::to_vec(&r)?);
            change(tx, &r, "withdrawn", reason.clone())?;
            Response::Consent(vec![r])
        }
        ConsentOp::Erase { subject_id, .. } => {
            let mut n = 0u64;
            for prefix in [subject_prefix(RECORD, subject_id), subject_prefix(HISTORY, subject_id)] {
                let mut keys = Vec::new();
                tx.view().scan_prefix(&prefix, |k, _| {
                    keys.push(k.to_vec());
                    Ok(true)
                })?;
                if prefix.starts_with(RECORD) {
                    n = keys.len() as u64;
                }
                for k in keys {
                    tx.delete(&k);
                }
            }
            audited.push(AuditEvent {
                event_type: "consent_erased".into(),
                actor: actor.clone(),
                subject_id: Some(subject_id.clone()),
                details: serde_json::json!({"records_deleted": n}),
            });
            return Ok(Response::Deleted(n));
        }
    };
    tx.put(SEQ, &serde_json::to_vec(&seq)?);
    Ok(response)
}

/// Answers a consent read.
pub fn query(view: &ReadView<'_>, q: &ConsentQuery) -> Result<ConsentAnswer> {
    Ok(match q {
        ConsentQuery::Subject { subject_id } => ConsentAnswer::Records(all(view, &subject_prefix(RECORD, subject_id))?),
        ConsentQuery::History { subject_id } => ConsentAnswer::History(all(view, &subject_prefix(HISTORY, subject_id))?),
        ConsentQuery::Stats => {
            let records: Vec<ConsentRecord> = all(view, RECORD)?;
            let mut history = 0u64;
            view.scan_prefix(HISTORY, |_, _| {
                history += 1;
                Ok(true)
            })?;
            let mut subjects: Vec<&str> = records.iter().map(|r| r.subject_id.as_str()).collect();
            subjects.dedup();
            let mut by_purpose = std::collections::BTreeMap::new();
            for r in &records {
                let e: &mut (u64, u64) = by_purpose.entry(r.purpose.clone()).or_default();
                if r.granted { e.0 += 1 } else { e.1 += 1 }
            }
            ConsentAnswer::Stats(ConsentStats {
                total_subjects: subjects.len() as u64,
                total_records: records.len() as u64,
                total_history_entries: history,
                do_not_sell_count: records.iter().filter(|r| r.purpose == DO_NOT_SELL && r.granted).count() as u64,
                consents_by_purpose: by_purpose,
            })
        }
        ConsentQuery::DoNotSell { offset, limit } => {
            let listed: Vec<DoNotSellEntry> = all::<ConsentRecord>(view, RECORD)?
                .into_iter()
                .filter(|r| r.purpose == DO_NOT_SELL && r.granted)
                .map(|r| DoNotSellEntry { subject_id: r.subject_id, opted_out_at_ms: r.recorded_at_ms, verification_method: r.source })
                .collect();
            let total = listed.len() as u64;
            ConsentAnswer::DoNotSell { subjects: listed.into_iter().skip(*offset).take(*limit).collect(), total }
        }
    })
}
