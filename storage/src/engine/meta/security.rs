//! Security state of the meta group: TOTP second factors, MFA login challenges,
//! alerts, failed-login counters and IP blocks. Every time comes from the
//! command (`now` = `issued_at_ms`), so replicas agree.
//!
//! Keys: `sec/mfa/<user id>` → [`MfaRecord`]; `sec/chal/<token hash>` →
//! [`MfaChallenge`]; `sec/alert/sec-<12 digits>` → [`AlertRecord`] (the newest
//! [`ALERTS_KEEP`]), `sec/alertseq` → last alert number; `sec/block/<ip>` →
//! [`BlockRecord`]; `sec/fail/ip/<ip>` and `sec/fail/user/<username>` → the
//! failure times (ms) inside the counting window; `sec/event/evt-<12 digits>` →
//! [`SecurityEvent`] (the newest [`EVENTS_KEEP`]), `sec/eventseq` → last event number.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_api::command::Response;
use tessera_api::error::ErrorCode;
use tessera_api::meta::SessionRecord;
use tessera_api::security::{
    AlertRecord, BlockRecord, BruteForcePolicy, MfaChallenge, MfaOutcome, MfaRecord, NewAlert, NewSecurityEvent, SecurityEvent, SecurityOp,
    SecurityQuery, SecurityQueryResult, SecurityResponse, totp,
};

use super::{ReadView, Tx, name_key, session_key, user_by_id, user_key};
use crate::error::Result;

const MFA: &[u8] = b"sec/mfa/";
const CHALLENGE: &[u8] = b"sec/chal/";
const ALERT: &[u8] = b"sec/alert/";
const ALERT_SEQ: &[u8] = b"sec/alertseq";
const BLOCK: &[u8] = b"sec/block/";
const FAIL_IP: &[u8] = b"sec/fail/ip/";
const FAIL_USER: &[u8] = b"sec/fail/user/";
const EVENT: &[u8] = b"sec/event/";
const KNOWN_IPS: &[u8] = b"sec/ips/";
/// Addresses remembered per admin (the oldest are forgotten).
const KNOWN_IPS_KEEP: usize = 32;
const EVENT_SEQ: &[u8] = b"sec/eventseq";

/// How many security events are kept (the oldest are dropped).
pub const EVENTS_KEEP: u64 = 10_000;

/// How many alerts are kept (the oldest are dropped).
pub const ALERTS_KEEP: u64 = 10_000;
/// Failure times kept per IP or user (at least the thresholds).
const FAILURES_KEEP: usize = 100;

fn key(prefix: &[u8], s: &str) -> Vec<u8> {
    [prefix, s.as_bytes()].concat()
}

fn get<T: DeserializeOwned>(view: &ReadView<'_>, k: &[u8]) -> Result<Option<T>> {
    Ok(view.get(k)?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn put<T: Serialize>(tx: &mut Tx<'_>, k: &[u8], v: &T) -> Result<()> {
    tx.put(k, &serde_json::to_vec(v)?);
    Ok(())
}

fn alert_id(seq: u64) -> String {
    format!("sec-{seq:012}")
}

fn event_id(seq: u64) -> String {
    format!("evt-{seq:012}")
}

fn read_seq(view: &ReadView<'_>, k: &[u8]) -> Result<u64> {
    Ok(view.get(k)?.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok()).map(u64::from_be_bytes).unwrap_or(0))
}

/// Appends alerts and security events within one command (the batch does not
/// read its own writes, so the sequences are carried here and stored once).
struct AlertLog {
    seq: u64,
    start: u64,
    event_seq: u64,
    event_start: u64,
}

impl AlertLog {
    fn open(view: &ReadView<'_>) -> Result<Self> {
        let seq = read_seq(view, ALERT_SEQ)?;
        let event_seq = read_seq(view, EVENT_SEQ)?;
        Ok(AlertLog { seq, start: seq, event_seq, event_start: event_seq })
    }

    /// Appends a security event.
    fn event(&mut self, tx: &mut Tx<'_>, now: i64, e: NewSecurityEvent) -> Result<()> {
        self.event_seq += 1;
        let record = SecurityEvent {
            id: event_id(self.event_seq),
            event_type: e.event_type,
            severity: e.severity,
            at_ms: e.at_ms.unwrap_or(now),
            source_ip: e.source_ip,
            username: e.username,
            description: e.description,
        };
        put(tx, &key(EVENT, &record.id), &record)?;
        if self.event_seq > EVENTS_KEEP {
            tx.delete(&key(EVENT, &event_id(self.event_seq - EVENTS_KEEP)));
        }
        Ok(())
    }

    fn add(&mut self, tx: &mut Tx<'_>, now: i64, a: NewAlert) -> Result<AlertRecord> {
        self.seq += 1;
        let record = AlertRecord {
            id: alert_id(self.seq),
            kind: a.kind,
            severity: a.severity,
            source_ip: a.source_ip,
            username: a.username,
            message: a.message,
            created_at_ms: now,
            acknowledged: false,
            acknowledged_by: None,
            acknowledged_at_ms: None,
        };
        put(tx, &key(ALERT, &record.id), &record)?;
        // Every alert is a security event too, with spec 02's severity for its type.
        let severity = tessera_api::compliance::breach_severity(&record.kind).map_or_else(|| record.severity.clone(), str::to_string);
        self.event(
            tx,
            now,
            NewSecurityEvent {
                at_ms: None,
                event_type: record.kind.clone(),
                severity,
                source_ip: record.source_ip.clone(),
                username: record.username.clone(),
                description: record.message.clone(),
            },
        )?;
        // A breach event type opens a breach incident in the same apply (spec 02).
        super::incidents::open_from_alert(tx, now, &record)?;
        if self.seq > ALERTS_KEEP {
            tx.delete(&key(ALERT, &alert_id(self.seq - ALERTS_KEEP)));
        }
        Ok(record)
    }

    fn close(self, tx: &mut Tx<'_>) {
        if self.seq != self.start {
            tx.put(ALERT_SEQ, &self.seq.to_be_bytes());
        }
        if self.event_seq != self.event_start {
            tx.put(EVENT_SEQ, &self.event_seq.to_be_bytes());
        }
    }
}

enum CodeCheck {
    /// Right; the step to record (`None` for the development code).
    Ok(Option<u64>),
    Wrong,
    Replayed,
}

fn check_code(rec: &MfaRecord, code: &str, dev_code: Option<&str>, now: i64) -> CodeCheck {
    if let Some(dev) = dev_code.filter(|d| !d.is_empty())
        && code.trim() == dev
    {
        return CodeCheck::Ok(None);
    }
    match totp::matching_step(&rec.secret_b32, code, now) {
        None => CodeCheck::Wrong,
        Some(step) if rec.last_step.is_some_and(|last| step <= last) => CodeCheck::Replayed,
        Some(step) => CodeCheck::Ok(Some(step)),
    }
}

fn record_step(tx: &mut Tx<'_>, user_id: &str, mut rec: MfaRecord, step: Option<u64>) -> Result<()> {
    if let Some(step) = step {
        rec.last_step = Some(step);
        put(tx, &key(MFA, user_id), &rec)?;
    }
    Ok(())
}

fn mfa(outcome: MfaOutcome) -> Result<Response> {
    Ok(Response::Security(SecurityResponse::Mfa(outcome)))
}

/// Counts one failure under `k`: returns how many fall inside the window.
fn count_failure(tx: &mut Tx<'_>, k: &[u8], now: i64, policy: &BruteForcePolicy) -> Result<u32> {
    let mut times: Vec<i64> = get(tx.view(), k)?.unwrap_or_default();
    times.retain(|t| *t > now - policy.window_ms);
    times.push(now);
    let keep = FAILURES_KEEP.max(policy.alert_threshold as usize).max(policy.ban_threshold as usize);
    if times.len() > keep {
        times.drain(..times.len() - keep);
    }
    put(tx, k, &times)?;
    Ok(times.len() as u32)
}

fn active_block(view: &ReadView<'_>, ip: &str, now: i64) -> Result<Option<BlockRecord>> {
    Ok(get::<BlockRecord>(view, &key(BLOCK, ip))?.filter(|b| b.expires_at_ms > now))
}

/// Deletes blocks that have expired.
fn purge_blocks(tx: &mut Tx<'_>, now: i64) -> Result<()> {
    let mut expired = Vec::new();
    tx.view().scan_prefix(BLOCK, |k, v| {
        if serde_json::from_slice::<BlockRecord>(v).map_or(true, |b| b.expires_at_ms <= now) {
            expired.push(k.to_vec());
        }
        Ok(true)
    })?;
    for k in expired {
        tx.delete(&k);
    }
    Ok(())
}

/// Applies one security operation.
/// At an admin's login from `ip`: raises `admin_from_unknown_ip` (high, so a
/// breach incident) when the admin logged in before and never from `ip`, and
/// remembers `ip`. The first address of an admin is trusted (nothing to compare with).
pub fn note_login(tx: &mut Tx<'_>, now: i64, user_id: &str, ip: &str) -> Result<()> {
    let Some(user) = user_by_id(tx.view(), user_id)? else { return Ok(()) };
    if user.role != tessera_api::meta::Role::Admin {
        return Ok(());
    }
    let k = key(KNOWN_IPS, user_id);
    let mut known: Vec<String> = get(tx.view(), &k)?.unwrap_or_default();
    if known.iter().any(|i| i == ip) {
        return Ok(());
    }
    if !known.is_empty() {
        let mut log = AlertLog::open(tx.view())?;
        log.add(
            tx,
            now,
            NewAlert {
                kind: "admin_from_unknown_ip".into(),
                severity: "high".into(),
                source_ip: Some(ip.to_string()),
                username: Some(user.username.clone()),
                message: format!(
                    "admin {:?} logged in from {ip}, an address not seen for them before ({} known)",
                    user.username,
                    known.len()
                ),
            },
        )?;
        log.close(tx);
    }
    known.push(ip.to_string());
    if known.len() > KNOWN_IPS_KEEP {
        known.remove(0);
    }
    put(tx, &k, &known)
}

pub fn apply(tx: &mut Tx<'_>, now: i64, op: &SecurityOp) -> Result<Response> {
    match op {
        SecurityOp::EnableMfa { user_id, secret_b32 } => {
            let Some(mut user) = user_by_id(tx.view(), user_id)? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("user {user_id} does not exist")));
            };
            if user.mfa_enabled || tx.view().get(&key(MFA, user_id))?.is_some() {
                return Ok(Response::rejected(ErrorCode::Conflict, "MFA is already enabled; disable it first to get a new secret"));
            }
            put(tx, &key(MFA, user_id), &MfaRecord { secret_b32: secret_b32.clone(), enabled_at_ms: now, last_step: None })?;
            user.mfa_enabled = true;
            put(tx, &user_key(user_id), &user)?;
            Ok(Response::Applied(true))
        }
        SecurityOp::DisableMfa { user_id, code, dev_code } => {
            let (Some(mut user), Some(rec)) = (user_by_id(tx.view(), user_id)?, get::<MfaRecord>(tx.view(), &key(MFA, user_id))?) else {
                return mfa(MfaOutcome::NotEnabled);
            };
            match check_code(&rec, code, dev_code.as_deref(), now) {
                CodeCheck::Wrong => mfa(MfaOutcome::WrongCode { username: user.username, attempts_left: 0 }),
                CodeCheck::Replayed => mfa(MfaOutcome::Replayed { username: user.username }),
                CodeCheck::Ok(_) => {
                    tx.delete(&key(MFA, user_id));
                    user.mfa_enabled = false;
                    put(tx, &user_key(user_id), &user)?;
                    mfa(MfaOutcome::Verified { user, session: None })
                }
            }
        }
        SecurityOp::BeginMfaLogin { challenge_hash, user_id, ttl_ms } => {
            // Drop abandoned challenges on the way.
            let mut expired = Vec::new();
            tx.view().scan_prefix(CHALLENGE, |k, v| {
                if serde_json::from_slice::<MfaChallenge>(v).map_or(true, |c| c.expires_at_ms <= now) {
                    expired.push(k.to_vec());
                }
                Ok(true)
            })?;
            for k in expired {
                tx.delete(&k);
            }
            let challenge = MfaChallenge { user_id: user_id.clone(), created_at_ms: now, expires_at_ms: now + ttl_ms, failures: 0 };
            put(tx, &key(CHALLENGE, challenge_hash), &challenge)?;
            Ok(Response::Applied(true))
        }
        SecurityOp::CompleteMfaLogin {
            challenge_hash,
            code,
            dev_code,
            session_token_hash,
            session_ttl_ms,
            max_failures,
            client_ip,
            user_agent,
        } => {
            let ck = key(CHALLENGE, challenge_hash);
            let Some(mut challenge) = get::<MfaChallenge>(tx.view(), &ck)? else {
                return mfa(MfaOutcome::NoChallenge);
            };
            if challenge.expires_at_ms <= now {
                tx.delete(&ck);
                return mfa(MfaOutcome::NoChallenge);
            }
            let user_id = challenge.user_id.clone();
            let (Some(user), Some(rec)) = (user_by_id(tx.view(), &user_id)?, get::<MfaRecord>(tx.view(), &key(MFA, &user_id))?) else {
                tx.delete(&ck);
                return mfa(MfaOutcome::NotEnabled);
            };
            let failed = |tx: &mut Tx<'_>, mut challenge: MfaChallenge| -> Result<u32> {
                challenge.failures += 1;
                let left = max_failures.saturating_sub(challenge.failures);
                if left == 0 {
                    tx.delete(&ck);
                } else {
                    put(tx, &ck, &challenge)?;
                }
                Ok(left)
            };
            match check_code(&rec, code, dev_code.as_deref(), now) {
                CodeCheck::Wrong => {
                    let attempts_left = failed(tx, challenge)?;
                    mfa(MfaOutcome::WrongCode { username: user.username, attempts_left })
                }
                CodeCheck::Replayed => {
                    failed(tx, challenge)?;
                    mfa(MfaOutcome::Replayed { username: user.username })
                }
                CodeCheck::Ok(step) => {
                    challenge.failures = 0;
                    tx.delete(&ck);
                    record_step(tx, &user_id, rec, step)?;
                    let session = SessionRecord {
                        user_id,
                        created_at_ms: now,
                        expires_at_ms: now + session_ttl_ms,
                        client_ip: client_ip.clone(),
                        user_agent: user_agent.clone(),
                        mfa_verified: true,
                    };
                    put(tx, &session_key(session_token_hash), &session)?;
                    mfa(MfaOutcome::Verified { user, session: Some(session) })
                }
            }
        }
        SecurityOp::RecordLoginFailure { ip, username, policy } => {
            let mut log = AlertLog::open(tx.view())?;
            let mut alerts = Vec::new();
            let mut banned = None;
            log.event(
                tx,
                now,
                NewSecurityEvent {
                    at_ms: None,
                    event_type: "failed_login".into(),
                    severity: "medium".into(),
                    source_ip: ip.clone(),
                    username: Some(username.clone()),
                    description: format!("failed login for user {username:?}"),
                },
            )?;
            if let Some(ip) = ip {
                let n = count_failure(tx, &key(FAIL_IP, ip), now, policy)?;
                let window_s = policy.window_ms / 1000;
                if n == policy.alert_threshold {
                    alerts.push(log.add(
                        tx,
                        now,
                        NewAlert {
                            kind: "brute_force_attack".into(),
                            severity: "critical".into(),
                            source_ip: Some(ip.clone()),
                            username: Some(username.clone()),
                            message: format!("{n} failed logins from {ip} within {window_s} s (last for user {username:?})"),
                        },
                    )?);
                }
                if policy.ban_threshold > 0 && n >= policy.ban_threshold && active_block(tx.view(), ip, now)?.is_none() {
                    purge_blocks(tx, now)?;
                    let block = BlockRecord {
                        ip: ip.clone(),
                        reason: format!("automatic ban: {n} failed logins within {window_s} s"),
                        created_at_ms: now,
                        expires_at_ms: now + policy.ban_duration_ms,
                        created_by: "auto".into(),
                        automatic: true,
                    };
                    put(tx, &key(BLOCK, ip), &block)?;
                    alerts.push(log.add(
                        tx,
                        now,
                        NewAlert {
                            kind: "ip_auto_banned".into(),
                            severity: "critical".into(),
                            source_ip: Some(ip.clone()),
                            username: Some(username.clone()),
                            message: format!("{ip} banned for {} s after {n} failed logins", policy.ban_duration_ms / 1000),
                        },
                    )?);
                    banned = Some(block);
                }
            }
            // Per username only for existing users (unknown names would grow state without bound).
            if tx.view().get(&name_key(username))?.is_some() {
                let n = count_failure(tx, &key(FAIL_USER, username), now, policy)?;
                if n == policy.alert_threshold && alerts.is_empty() {
                    alerts.push(log.add(
                        tx,
                        now,
                        NewAlert {
                            kind: "brute_force_attack".into(),
                            severity: "high".into(),
                            source_ip: ip.clone(),
                            username: Some(username.clone()),
                            message: format!("{n} failed logins for user {username:?} within {} s", policy.window_ms / 1000),
                        },
                    )?);
                }
            }
            log.close(tx);
            Ok(Response::Security(SecurityResponse::LoginFailure { alerts, banned }))
        }
        SecurityOp::RecordEvents(events) => {
            let mut log = AlertLog::open(tx.view())?;
            for e in events {
                log.event(tx, now, e.clone())?;
            }
            log.close(tx);
            Ok(Response::Applied(true))
        }
        SecurityOp::RaiseAlert(a) => {
            let mut log = AlertLog::open(tx.view())?;
            let record = log.add(tx, now, a.clone())?;
            log.close(tx);
            Ok(Response::Security(SecurityResponse::Alert(record)))
        }
        SecurityOp::AcknowledgeAlert { id, by } => {
            let Some(mut alert) = get::<AlertRecord>(tx.view(), &key(ALERT, id))? else {
                return Ok(Response::rejected(ErrorCode::NotFound, format!("alert {id} does not exist")));
            };
            if !alert.acknowledged {
                alert.acknowledged = true;
                alert.acknowledged_by = Some(by.clone());
                alert.acknowledged_at_ms = Some(now);
                put(tx, &key(ALERT, id), &alert)?;
            }
            Ok(Response::Security(SecurityResponse::Alert(alert)))
        }
        SecurityOp::BlockIp { ip, reason, duration_ms, by } => {
            purge_blocks(tx, now)?;
            let block = BlockRecord {
                ip: ip.clone(),
                reason: reason.clone(),
                created_at_ms: now,
                expires_at_ms: now + duration_ms,
                created_by: by.clone(),
                automatic: false,
            };
            put(tx, &key(BLOCK, ip), &block)?;
            Ok(Response::Security(SecurityResponse::Block(block)))
        }
        SecurityOp::UnblockIp { ip } => {
            let active = active_block(tx.view(), ip, now)?.is_some();
            tx.delete(&key(BLOCK, ip));
            purge_blocks(tx, now)?;
            Ok(Response::Security(SecurityResponse::Unblocked(active)))
        }
    }
}

/// Answers one security read at the reader's clock `now`.
pub fn query(view: &ReadView<'_>, q: &SecurityQuery, now: i64) -> Result<SecurityQueryResult> {
    Ok(match q {
        SecurityQuery::Alerts { acknowledged, limit } => {
            let mut all: Vec<AlertRecord> = Vec::new();
            view.scan_prefix(ALERT, |_, v| {
                all.push(serde_json::from_slice(v)?);
                Ok(true)
            })?;
            let total = all.len() as u64;
            let unacknowledged = all.iter().filter(|a| !a.acknowledged).count() as u64;
            let alerts = all.into_iter().rev().filter(|a| acknowledged.is_none_or(|want| a.acknowledged == want)).take(*limit).collect();
            SecurityQueryResult::Alerts { alerts, total, unacknowledged }
        }
        SecurityQuery::Blocks => {
            let mut out = Vec::new();
            view.scan_prefix(BLOCK, |_, v| {
                let b: BlockRecord = serde_json::from_slice(v)?;
                if b.expires_at_ms > now {
                    out.push(b);
                }
                Ok(true)
            })?;
            SecurityQueryResult::Blocks(out)
        }
        SecurityQuery::Events { event_type, limit } => {
            let mut all: Vec<SecurityEvent> = Vec::new();
            view.scan_prefix(EVENT, |_, v| {
                let e: SecurityEvent = serde_json::from_slice(v)?;
                if event_type.as_ref().is_none_or(|t| *t == e.event_type) {
                    all.push(e);
                }
                Ok(true)
            })?;
            // Newest first by when they happened (a router writes its events in batches).
            all.sort_by(|a, b| (b.at_ms, &b.id).cmp(&(a.at_ms, &a.id)));
            let total = all.len() as u64;
            SecurityQueryResult::Events { events: all.into_iter().take(*limit).collect(), total }
        }
        SecurityQuery::Mfa { user_id } => SecurityQueryResult::Mfa(get::<MfaRecord>(view, &key(MFA, user_id))?.map(|r| r.enabled_at_ms)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_single_use_and_dev_code_only_when_given() {
        let secret = totp::encode_secret(b"12345678901234567890");
        let now = 1_700_000_000_000i64;
        let code = totp::code_at(b"12345678901234567890", 6, (now / 1000) as u64);
        let mut rec = MfaRecord { secret_b32: secret, enabled_at_ms: 0, last_step: None };
        let CodeCheck::Ok(Some(step)) = check_code(&rec, &code, None, now) else { panic!("valid code refused") };
        rec.last_step = Some(step);
        assert!(matches!(check_code(&rec, &code, None, now), CodeCheck::Replayed));
        assert!(matches!(check_code(&rec, "000000", None, now), CodeCheck::Wrong) || code == "000000");
        assert!(matches!(check_code(&rec, "000000", Some("000000"), now), CodeCheck::Ok(None)));
        assert!(matches!(check_code(&rec, "", Some(""), now), CodeCheck::Wrong));
    }
}
