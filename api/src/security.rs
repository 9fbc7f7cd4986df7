//! Security state kept by the meta group (group 0): TOTP second factors, MFA
//! login challenges, security alerts (events), failed-login counters and IP
//! blocks; plus the TOTP (RFC 6238) helpers the router and the meta engine share.
//!
//! Every decision that depends on time (code windows, challenge expiry, counting
//! windows, block expiry) is taken by the meta engine with the command's
//! `issued_at_ms`, so every replica and every router sees the same result.

use serde::{Deserialize, Serialize};

use crate::meta::{SessionRecord, UserRecord};

/// A user's TOTP second factor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MfaRecord {
    /// The shared secret, base32 (RFC 4648, no padding).
    pub secret_b32: String,
    pub enabled_at_ms: i64,
    /// The last time step a code was accepted for: a code is accepted only for a
    /// later step, so each code works once.
    pub last_step: Option<u64>,
}

/// A pending MFA login (after the password, before the code), stored under the
/// SHA-256 of its temporary token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MfaChallenge {
    pub user_id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Wrong codes given so far; the challenge is dropped at the limit.
    pub failures: u32,
}

/// A security alert (security event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertRecord {
    /// `sec-<12 digits>`, increasing.
    pub id: String,
    /// `brute_force_attack`, `ip_auto_banned`, `sql_injection`, `mfa_failure`.
    pub kind: String,
    /// `low`, `medium`, `high` or `critical`.
    pub severity: String,
    pub source_ip: Option<String>,
    pub username: Option<String>,
    pub message: String,
    pub created_at_ms: i64,
    pub acknowledged: bool,
    pub acknowledged_by: Option<String>,
    pub acknowledged_at_ms: Option<i64>,
}

/// A security event (spec 02 "Security events"): each failed login, each
/// permission refused, and every alert raised, kept in the meta group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityEvent {
    /// `evt-<12 digits>`, increasing.
    pub id: String,
    /// One of spec 02's event types (`failed_login`, `unauthorized_access`,
    /// `brute_force_attack`, `sql_injection`, …) or another alert kind.
    pub event_type: String,
    /// `low`, `medium`, `high` or `critical` (spec 02's for its types).
    pub severity: String,
    pub at_ms: i64,
    pub source_ip: Option<String>,
    pub username: Option<String>,
    pub description: String,
}

/// A security event as a router notes it (the engine assigns id and time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSecurityEvent {
    /// When the router saw it (events are written in batches); `None`: the command's time.
    #[serde(default)]
    pub at_ms: Option<i64>,
    pub event_type: String,
    pub severity: String,
    pub source_ip: Option<String>,
    pub username: Option<String>,
    pub description: String,
}

/// An alert as a router raises it (the engine assigns id and time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAlert {
    pub kind: String,
    pub severity: String,
    pub source_ip: Option<String>,
    pub username: Option<String>,
    pub message: String,
}

/// A blocked client IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRecord {
    /// Canonical textual form of the address.
    pub ip: String,
    pub reason: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// The admin who blocked it, or `auto` for a brute-force ban.
    pub created_by: String,
    pub automatic: bool,
}

/// The brute-force detector's settings, carried in each failure command so all
/// replicas decide alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BruteForcePolicy {
    /// Failures in the window that raise an alert (5).
    pub alert_threshold: u32,
    pub window_ms: i64,
    /// Failures per IP in the window that ban the IP; 0 disables bans.
    pub ban_threshold: u32,
    pub ban_duration_ms: i64,
}

/// Security writes of the meta group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SecurityOp {
    /// Turn on MFA with a fresh secret: `Applied(true)`; refused (conflict) when on.
    EnableMfa {
        user_id: String,
        secret_b32: String,
    },
    /// Turn MFA off after checking a current code: `Mfa(Verified)` or `Mfa(WrongCode|Replayed)`.
    DisableMfa {
        user_id: String,
        code: String,
        dev_code: Option<String>,
    },
    /// Open an MFA login challenge for `ttl_ms`.
    BeginMfaLogin {
        challenge_hash: String,
        user_id: String,
        ttl_ms: i64,
    },
    /// Check the code of a challenge; on success drop the challenge, record the
    /// code's step and open the session.
    CompleteMfaLogin {
        challenge_hash: String,
        code: String,
        /// The development code, only when the proposing router runs in development mode.
        dev_code: Option<String>,
        session_token_hash: String,
        session_ttl_ms: i64,
        /// Wrong codes after which the challenge is dropped.
        max_failures: u32,
        /// The client the session is opened for (see `SessionRecord`).
        #[serde(default)]
        client_ip: Option<String>,
        #[serde(default)]
        user_agent: Option<String>,
    },
    /// Count a failed login of `ip` / `username`; may raise alerts and ban the IP.
    RecordLoginFailure {
        ip: Option<String>,
        username: String,
        policy: BruteForcePolicy,
    },
    RaiseAlert(NewAlert),
    AcknowledgeAlert {
        id: String,
        by: String,
    },
    /// Block (or re-block) an IP until `issued_at + duration_ms`.
    BlockIp {
        ip: String,
        reason: String,
        duration_ms: i64,
        by: String,
    },
    UnblockIp {
        ip: String,
    },
    /// Append security events a router noted (permissions refused).
    RecordEvents(Vec<NewSecurityEvent>),
}

/// The outcome of checking a TOTP code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MfaOutcome {
    /// The code was right; for a login, the session that was opened.
    Verified { user: UserRecord, session: Option<SessionRecord> },
    /// The code was wrong; `attempts_left` for a login challenge (0: dropped).
    WrongCode { username: String, attempts_left: u32 },
    /// The code was right but its time step was already used.
    Replayed { username: String },
    /// The temporary token is unknown, used or expired.
    NoChallenge,
    /// The user has no MFA enabled (or no longer exists).
    NotEnabled,
}

/// Replies to [`SecurityOp`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SecurityResponse {
    Mfa(MfaOutcome),
    /// Alerts raised by a failure and the block it caused, if any.
    LoginFailure {
        alerts: Vec<AlertRecord>,
        banned: Option<BlockRecord>,
    },
    Alert(AlertRecord),
    Block(BlockRecord),
    /// Whether an unblock removed an active block.
    Unblocked(bool),
}

/// Security reads of the meta group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SecurityQuery {
    /// Newest first, at most `limit`, optionally only (un)acknowledged ones.
    Alerts { acknowledged: Option<bool>, limit: usize },
    /// Blocks still active at the reader's clock.
    Blocks,
    /// Whether a user has MFA on.
    Mfa { user_id: String },
    /// Security events, newest first, at most `limit`, optionally of one type.
    Events { event_type: Option<String>, limit: usize },
}

/// Answers to [`SecurityQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SecurityQueryResult {
    Alerts { alerts: Vec<AlertRecord>, total: u64, unacknowledged: u64 },
    Blocks(Vec<BlockRecord>),
    Mfa(Option<i64>),
    Events { events: Vec<SecurityEvent>, total: u64 },
}

/// TOTP (RFC 6238) with HMAC-SHA-1, 30 s steps, 6 digits, ±1 step of skew.
pub mod totp {
    use totp_rs::{Algorithm, Secret, TOTP};

    /// Seconds per time step.
    pub const STEP_SECS: u64 = 30;
    /// Digits of a code.
    pub const DIGITS: usize = 6;
    /// Steps before/after the current one that are accepted.
    pub const SKEW: u64 = 1;

    fn totp(secret: Vec<u8>, digits: usize) -> TOTP {
        TOTP::new_unchecked(Algorithm::SHA1, digits, 1, STEP_SECS, secret)
    }

    /// Encodes raw secret bytes as base32 (no padding).
    pub fn encode_secret(raw: &[u8]) -> String {
        match Secret::Raw(raw.to_vec()).to_encoded() {
            Secret::Encoded(s) => s,
            Secret::Raw(_) => unreachable!("to_encoded returns the encoded form"),
        }
    }

    /// Decodes a base32 secret.
    pub fn decode_secret(b32: &str) -> Option<Vec<u8>> {
        Secret::Encoded(b32.to_string()).to_bytes().ok()
    }

    /// The `digits`-digit code of `secret` at Unix time `time_secs`.
    pub fn code_at(secret: &[u8], digits: usize, time_secs: u64) -> String {
        totp(secret.to_vec(), digits).generate(time_secs)
    }

    fn same(a: &[u8], b: &[u8]) -> bool {
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// The time step (current ±1) whose 6-digit code equals `code`, if any.
    pub fn matching_step(secret_b32: &str, code: &str, now_ms: i64) -> Option<u64> {
        let code = code.trim();
        if code.len() != DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let secret = decode_secret(secret_b32)?;
        let t = totp(secret, DIGITS);
        let now = (now_ms.max(0) / 1000) as u64 / STEP_SECS;
        (now.saturating_sub(SKEW)..=now + SKEW).filter(|step| same(t.generate(step * STEP_SECS).as_bytes(), code.as_bytes())).max()
    }

    fn encode_component(s: &str) -> String {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'@') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// The `otpauth://totp/...` URI authenticator apps scan.
    pub fn otpauth_uri(secret_b32: &str, issuer: &str, account: &str) -> String {
        format!(
            "otpauth://totp/{}:{}?secret={secret_b32}&issuer={}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECS}",
            encode_component(issuer),
            encode_component(account),
            encode_component(issuer)
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// RFC 6238 appendix B, SHA-1, 8 digits, secret "12345678901234567890".
        #[test]
        fn rfc6238_sha1_vectors() {
            let secret = b"12345678901234567890";
            for (time, code) in [
                (59u64, "94287082"),
                (1_111_111_109, "07081804"),
                (1_111_111_111, "14050471"),
                (1_234_567_890, "89005924"),
                (2_000_000_000, "69279037"),
                (20_000_000_000, "65353130"),
            ] {
                assert_eq!(code_at(secret, 8, time), code, "T = {time}");
            }
        }

        #[test]
        fn matching_step_window_and_format() {
            let b32 = encode_secret(b"12345678901234567890");
            assert_eq!(decode_secret(&b32).as_deref(), Some(&b"12345678901234567890"[..]));
            let now_ms = 1_111_111_109_000i64;
            let step = 1_111_111_109 / 30;
            let code = code_at(b"12345678901234567890", 6, 1_111_111_109);
            assert_eq!(matching_step(&b32, &code, now_ms), Some(step));
            // One step late or early is accepted; two are not.
            assert_eq!(matching_step(&b32, &code, now_ms + 30_000), Some(step));
            assert_eq!(matching_step(&b32, &code, now_ms - 30_000), Some(step));
            assert_eq!(matching_step(&b32, &code, now_ms + 90_000), None);
            assert_eq!(matching_step(&b32, "12345", now_ms), None);
            assert_eq!(matching_step(&b32, "abcdef", now_ms), None);
        }

        #[test]
        fn uri() {
            let uri = otpauth_uri("GEZDGNBV", "Tessera", "ann smith");
            assert_eq!(uri, "otpauth://totp/Tessera:ann%20smith?secret=GEZDGNBV&issuer=Tessera&algorithm=SHA1&digits=6&period=30");
        }
    }
}
