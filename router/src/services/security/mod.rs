//! Attack detection and IP blocking (see docs/security.md).
//!
//! - IP blocks: the list each router caches from the meta group
//!   (`crate::services::block_list`, refreshed every `security.block_refresh_ms`)
//!   and the middleware that answers 403 to a blocked client on every route
//!   (`crate::http::block_check`).
//! - Brute force: every failed login (and wrong MFA code) is counted per client IP
//!   and per user in the meta group ([`record_login_failure`]), so all routers
//!   count together; the meta engine raises the alert and the automatic ban.
//! - [`injection`]: screens user SQL; a finding is recorded as an alert and
//!   flagged in the response, never blocked.

pub mod injection;

use std::net::IpAddr;
use std::time::Instant;

use tessera_api::command::{MetaOp, Response};
use tessera_api::security::{BruteForcePolicy, NewAlert, SecurityOp, SecurityResponse};
use tracing::warn;

use crate::config::SecuritySection;
use crate::services::sessions::Caller;
use crate::state::AppState;

/// The client IP of a request, as resolved by the block-list middleware
/// (`None` when a trusted-proxy header is configured but absent).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub Option<IpAddr>);

/// The brute-force policy from the configuration.
pub fn policy(config: &SecuritySection) -> BruteForcePolicy {
    BruteForcePolicy {
        alert_threshold: config.failed_login_threshold.max(1),
        window_ms: (config.failed_login_window_secs.max(1) * 1000) as i64,
        ban_threshold: config.auto_ban_threshold,
        ban_duration_ms: (config.auto_ban_duration_secs.max(1) * 1000) as i64,
    }
}

/// Counts a failed login in the meta group; a resulting ban is enforced by this
/// router at once (the others pick it up on their next refresh). Failures to
/// record are logged, never shown to the client.
pub async fn record_login_failure(state: &AppState, ip: Option<IpAddr>, username: &str) {
    let op = SecurityOp::RecordLoginFailure {
        ip: ip.map(|i| i.to_string()),
        username: username.to_string(),
        policy: policy(&state.config.security),
    };
    match state.cluster.meta_write(MetaOp::Security(op)).await {
        Ok(Response::Security(SecurityResponse::LoginFailure { alerts, banned })) => {
            for a in alerts {
                warn!(alert = %a.id, kind = %a.kind, ip = ?a.source_ip, "SECURITY: {}", a.message);
            }
            if let Some(b) = banned {
                state.security.blocks.insert(&b);
            }
        }
        Ok(other) => warn!("recording a failed login: unexpected reply {other:?}"),
        Err(e) => warn!("recording a failed login: {e}"),
    }
}

/// Records an alert; failures are logged.
pub async fn raise(state: &AppState, alert: NewAlert) {
    warn!(kind = %alert.kind, ip = ?alert.source_ip, user = ?alert.username, "SECURITY: {}", alert.message);
    if let Err(e) = state.cluster.meta_write(MetaOp::Security(SecurityOp::RaiseAlert(alert))).await {
        warn!("recording a security alert: {e}");
    }
}

/// The caller's user name and address, as an alert names them.
pub(crate) fn identity(caller: &Caller) -> (Option<String>, Option<IpAddr>) {
    match caller {
        Caller::User { user, client_ip, .. } => (Some(user.username.clone()), *client_ip),
        Caller::Bootstrap => (None, None),
    }
}

/// Whether an alert keyed `dedupe` (caller and kind) may be raised now: at
/// most one per [`crate::services::security_state::SQL_ALERT_INTERVAL`]; records it when so.
fn first_in_interval(state: &AppState, dedupe: String) -> bool {
    let now = Instant::now();
    let mut seen = state.security.sql_alerts();
    if seen.get(&dedupe).is_some_and(|at| now.duration_since(*at) < crate::services::security_state::SQL_ALERT_INTERVAL) {
        return false;
    }
    if seen.len() > 10_000 {
        seen.retain(|_, at| now.duration_since(*at) < crate::services::security_state::SQL_ALERT_INTERVAL);
    }
    seen.insert(dedupe, now);
    true
}

/// Records `alert` without making the request wait for it.
fn raise_in_background(state: &AppState, alert: NewAlert) {
    let state = state.clone();
    tokio::spawn(async move { raise(&state, alert).await });
}

/// Screens user SQL: returns the names of the rules it matches (empty for clean
/// SQL) and records an `sql_injection` alert in the background. Never blocks.
pub fn screen_sql(state: &AppState, caller: &Caller, sql: &str) -> Vec<String> {
    if !state.config.security.injection_detection {
        return Vec::new();
    }
    let findings = injection::screen(sql);
    if findings.is_empty() {
        return Vec::new();
    }
    let rules: Vec<String> = findings.iter().map(|f| f.rule.to_string()).collect();
    let (username, ip) = identity(caller);
    let dedupe = format!("{}|{}", username.as_deref().unwrap_or(""), rules.join(","));
    if !first_in_interval(state, dedupe) {
        return rules;
    }
    let excerpt: String = sql.chars().take(200).collect();
    let details: Vec<String> = findings.iter().map(|f| format!("{}: {}", f.rule, f.detail)).collect();
    let alert = NewAlert {
        kind: "sql_injection".into(),
        severity: "high".into(),
        source_ip: ip.map(|i| i.to_string()),
        username,
        message: format!("possible SQL injection ({}) in: {excerpt}", details.join("; ")),
    };
    raise_in_background(state, alert);
    rules
}

/// What a request did in bulk, for the mass-data detectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volume {
    Deleted,
    ReadOut,
}

/// Raises `mass_data_deletion` (critical) or `mass_data_export` (high) when
/// one request deleted or read out at least `security.mass_data_rows` rows
/// (at most one alert per caller and kind a minute); `what` names the request.
/// Spec 02 makes both breach event types, so each opens an incident. Never blocks.
pub fn watch_volume(state: &AppState, caller: &Caller, volume: Volume, rows: u64, what: &str) {
    let threshold = state.config.security.mass_data_rows;
    if threshold == 0 || rows < threshold {
        return;
    }
    let (username, ip) = identity(caller);
    let (kind, severity, verb) = match volume {
        Volume::Deleted => ("mass_data_deletion", "critical", "deleted"),
        Volume::ReadOut => ("mass_data_export", "high", "read out"),
    };
    let dedupe = format!("{}|{kind}", username.as_deref().unwrap_or(""));
    if !first_in_interval(state, dedupe) {
        return;
    }
    let who = username.clone().unwrap_or_else(|| "an anonymous caller".into());
    let alert = NewAlert {
        kind: kind.into(),
        severity: severity.into(),
        source_ip: ip.map(|i| i.to_string()),
        username,
        message: format!("{who} {verb} {rows} rows in one request ({what}; threshold {threshold})"),
    };
    raise_in_background(state, alert);
}

/// Raises `mass_data_export` (high) when one response carried at least
/// `security.data_exfiltration_threshold_mb` MiB (at most one alert per caller
/// a minute); `what` names the request. Never blocks.
pub fn watch_bytes(state: &AppState, caller: &Caller, bytes: u64, what: &str) {
    let threshold_mb = state.config.security.data_exfiltration_threshold_mb;
    if threshold_mb == 0 || bytes < threshold_mb.saturating_mul(1 << 20) {
        return;
    }
    let (username, ip) = identity(caller);
    let dedupe = format!("{}|mass_data_export_bytes", username.as_deref().unwrap_or(""));
    if !first_in_interval(state, dedupe) {
        return;
    }
    let who = username.clone().unwrap_or_else(|| "an anonymous caller".into());
    let alert = NewAlert {
        kind: "mass_data_export".into(),
        severity: "high".into(),
        source_ip: ip.map(|i| i.to_string()),
        username,
        message: format!("{who} read out {:.1} MiB in one request ({what}; threshold {threshold_mb} MiB)", bytes as f64 / (1 << 20) as f64),
    };
    raise_in_background(state, alert);
}

/// Raises `privilege_escalation` (critical; spec 02 makes it a breach event
/// type, so it opens an incident) when `user`'s role was raised from `before`
/// to admin, naming who did it and from where. Never blocks.
pub fn watch_role_change(state: &AppState, caller: &Caller, user: &str, before: tessera_api::meta::Role, after: tessera_api::meta::Role) {
    use tessera_api::meta::Role;
    if before == Role::Admin || after != Role::Admin {
        return;
    }
    let (actor, ip) = identity(caller);
    let who = actor.clone().unwrap_or_else(|| "an anonymous caller".into());
    let alert = NewAlert {
        kind: "privilege_escalation".into(),
        severity: "critical".into(),
        source_ip: ip.map(|i| i.to_string()),
        username: actor,
        message: format!("{who} raised {user}'s role from {} to admin", before.as_str()),
    };
    raise_in_background(state, alert);
}

/// Raises `session_hijacking` (spec 02: high) for the caller, at most once per
/// `dedupe` key a minute. Never blocks.
pub fn raise_session_hijacking(state: &AppState, caller: &Caller, message: &str, dedupe: String) {
    if !first_in_interval(state, dedupe) {
        return;
    }
    let (username, ip) = identity(caller);
    let alert = NewAlert {
        kind: "session_hijacking".into(),
        severity: "high".into(),
        source_ip: ip.map(|i| i.to_string()),
        username,
        message: message.to_string(),
    };
    raise_in_background(state, alert);
}

/// Raises `unusual_access_pattern` (spec 02: medium) for the caller, with `message`. Never blocks.
pub fn raise_unusual_access(state: &AppState, caller: &Caller, message: &str) {
    let (username, ip) = identity(caller);
    let alert = NewAlert {
        kind: "unusual_access_pattern".into(),
        severity: "medium".into(),
        source_ip: ip.map(|i| i.to_string()),
        username,
        message: message.to_string(),
    };
    raise_in_background(state, alert);
}
