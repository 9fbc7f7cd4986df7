//! Webhooks: a user's HTTP endpoints told about their meetings' events, with a
//! delivery log kept in Tessera.
//!
//! # Routes
//!
//! - `GET /api/v1/webhooks`: the caller's webhooks, `{webhooks, total}`.
//! - `POST /api/v1/webhooks` `{url, events, secret}` → 201 with the webhook:
//!   `url` is http(s) and points at a public address (see below), `events` a
//!   non-empty list of [`EVENTS`], `secret` 16 to 256 characters. The secret
//!   is never shown again: every answer carries `secret_hint` (its last four
//!   characters) instead. Anything else answers 400 `validation_error`.
//! - `GET /api/v1/webhooks/{id}`, `DELETE /api/v1/webhooks/{id}` (204; its
//!   deliveries go with it): the caller's own only, others answer 404.
//! - `GET /api/v1/webhooks/{id}/deliveries?limit=&status=`: the delivery log,
//!   newest first: `event`, `status` (`pending`, `delivered`, `failed`),
//!   `attempts`, `last_status_code`, `last_error`, `next_attempt_at`,
//!   `created_at`, `delivered_at`.
//!
//! There is no update route: a webhook's URL is only ever set by `POST`.
//!
//! # Destinations (SSRF)
//!
//! A webhook makes the server send requests wherever its owner says, so by
//! default it may only point at public addresses ([`is_public_address`]):
//! not loopback (127/8, `::1`), private (10/8, 172.16/12, 192.168/16,
//! `fc00::/7`), link-local (169.254/16 with the cloud metadata address
//! 169.254.169.254, `fe80::/10`), unspecified (`0.0.0.0`, `::`), multicast,
//! shared (100.64/10), reserved or documentation ranges, nor IPv6 forms that
//! embed such an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64, 6to4).
//! This is checked twice:
//!
//! - at registration ([`valid_destination`]): an IP address in the URL must be
//!   public, and a host name must not resolve to any address that is not (a
//!   name that does not resolve yet is accepted: the delivery check below
//!   still applies);
//! - at every attempt, against the addresses actually connected to: an IP
//!   address in the URL is checked again, and host names are resolved by
//!   [`PublicOnlyResolver`], which refuses the name when any of its addresses
//!   is not public and otherwise hands exactly the checked addresses to the
//!   connection, so a name re-pointed at an internal address after
//!   registration (DNS rebinding) is refused too. Such an attempt fails with
//!   the reason in `last_error`, and is retried like any failure. Deliveries
//!   connect directly: `HTTP_PROXY`-style variables are not used for them.
//!
//! `MEETINGS_WEBHOOK_ALLOW_PRIVATE=true` (see [`crate::config`]) turns both
//! checks off, for tests and for receivers on a private network.
//!
//! # Deliveries
//!
//! [`emit`] records one `pending` delivery per webhook of the user subscribed
//! to the event, with the exact body to send, and wakes the delivery loop. The
//! body is fixed when the event happens, so every retry sends identical bytes:
//!
//! ```text
//! POST <url>
//! Content-Type: application/json
//! User-Agent: tessera-meetings-webhooks/<version>
//! X-Tessera-Event: meeting.started
//! X-Tessera-Delivery: <delivery id>            (the same on every retry)
//! X-Tessera-Timestamp: <t: Unix seconds of this attempt>
//! X-Tessera-Signature: t=<t>,v1=<hex HMAC-SHA256 of "<t>.<body bytes>", keyed with the webhook's secret>
//!
//! {"id":"<delivery id>","event":"meeting.started","created_at":"2026-11-29T10:00:00.000Z","data":{…}}
//! ```
//!
//! The signature covers the attempt's timestamp and the body (Stripe's
//! scheme), so a captured request cannot be replayed later with a fresh
//! timestamp. A receiver ([`verify_signature`] does exactly this):
//!
//! 1. takes `t` and every `v1` from `X-Tessera-Signature` (the same `t` as
//!    `X-Tessera-Timestamp`);
//! 2. refuses the request if `t` is more than [`SIGNATURE_TOLERANCE`] (5
//!    minutes) away from its own clock;
//! 3. computes HMAC-SHA256 over the bytes `t`, `.`, then the raw body as
//!    received, keyed with the secret, and compares its hex digest in constant
//!    time with a `v1`.
//!
//! Every retry is signed anew with its own timestamp. Within the tolerance a
//! receiver still refuses replays by remembering delivery ids (deliveries are
//! at least once, see below).
//!
//! An attempt succeeds on a 2xx answer within [`ATTEMPT_TIMEOUT`] (redirects
//! are not followed: a 3xx is a failure). A failed attempt is retried after
//! [`backoff`]: 1 s, 2 s, 4 s, … doubling, capped at [`MAX_BACKOFF`]; after
//! [`MAX_ATTEMPTS`] attempts the delivery is `failed`.
//!
//! Deliveries are rows of `webhook_deliveries`, so pending ones survive a
//! restart: every instance runs [`spawn_delivery_loop`], which looks for due
//! pending rows at start, every second, and when [`emit`] wakes it. With
//! several instances, a delivery is sent by one at a time: an instance first
//! claims it with one conditional UPDATE (`claimed_by`, a lease
//! `claim_until`), which only succeeds while no live lease exists, and goes on
//! only if that UPDATE changed the row. Its outcome is written only while it
//! still holds the claim. An instance that dies mid-attempt leaves a lease
//! that expires after [`CLAIM_LEASE`], and another instance then retries the
//! delivery: delivery is at least once, never concurrent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing;
use axum::{Json, Router};
use futures::StreamExt;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use crate::auth::Caller;
use crate::clock::{iso, now_ms};
use crate::db::{Db, DbError};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS webhook_deliveries (id TEXT PRIMARY KEY, webhook_id TEXT NOT NULL, user_id TEXT NOT NULL, event TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, last_status_code BIGINT, last_error TEXT, claimed_by TEXT, claim_until BIGINT, created_at BIGINT NOT NULL, delivered_at BIGINT)",
];

/// The events a webhook may subscribe to.
pub const EVENTS: &[&str] = &["meeting.started", "meeting.ended", "transcript.completed", "participant.joined", "participant.left"];

/// Attempts of one delivery before it is `failed`.
pub const MAX_ATTEMPTS: u32 = 8;
/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long a claim keeps other instances off a delivery: well past an
/// attempt's timeout plus the database writes around it.
pub const CLAIM_LEASE: Duration = Duration::from_secs(60);
/// How often the loop looks for due deliveries when nothing wakes it.
const POLL: Duration = Duration::from_secs(1);
/// Deliveries claimed per round, and sent at once.
const BATCH: usize = 32;
const CONCURRENCY: usize = 8;
/// Webhooks one user may have.
const MAX_WEBHOOKS_PER_USER: u64 = 50;
/// The longest `last_error` kept.
const MAX_ERROR_LEN: usize = 500;
/// How long registration waits for a URL's host name to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How far from its own clock a receiver accepts a delivery's timestamp
/// (see the module documentation).
pub const SIGNATURE_TOLERANCE: Duration = Duration::from_secs(300);

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256, keyed with `secret`, of `<timestamp>.<body>`.
fn signed_payload_mac(secret: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The value of `X-Tessera-Signature` for an attempt at `timestamp` (Unix
/// seconds) sending `body` under `secret`: `t=<timestamp>,v1=<hex
/// HMAC-SHA256 of "<timestamp>.<body>">`.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let digest = signed_payload_mac(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(digest))
}

/// What a receiver does with a delivery (the reference for the documented
/// scheme): parses `t=…,v1=…` from the `X-Tessera-Signature` value `header`,
/// refuses a `t` more than [`SIGNATURE_TOLERANCE`] away from `now_secs`, and
/// checks in constant time that one `v1` is the HMAC of `<t>.<body>`.
pub fn verify_signature(secret: &str, header: &str, body: &[u8], now_secs: i64) -> Result<(), String> {
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse::<i64>().map_err(|_| format!("not a timestamp: {t:?}"))?),
            Some(("v1", v)) => candidates.push(v),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or("no t= in the signature")?;
    if timestamp.abs_diff(now_secs) > SIGNATURE_TOLERANCE.as_secs() {
        return Err(format!("timestamp {timestamp} is more than {} s from now ({now_secs})", SIGNATURE_TOLERANCE.as_secs()));
    }
    let mac = signed_payload_mac(secret, timestamp, body);
    let matches = |hex_digest: &&str| hex::decode(hex_digest).is_ok_and(|digest| mac.clone().verify_slice(&digest).is_ok());
    if candidates.iter().any(matches) { Ok(()) } else { Err("no v1 signature matches".into()) }
}

/// Whether a webhook may be sent to `ip` without `MEETINGS_WEBHOOK_ALLOW_PRIVATE`:
/// a public unicast address, not a loopback, private, link-local (cloud
/// metadata), unspecified, multicast, shared, reserved or documentation one.
/// IPv6 addresses that embed an IPv4 address (IPv4-mapped, NAT64, 6to4) are
/// judged by the IPv4 address.
pub fn is_public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let internal = a == 0 // 0.0.0.0/8 "this network", with the unspecified 0.0.0.0
        || a == 10 // 10/8 private
        || (a == 100 && (64..128).contains(&b)) // 100.64/10 shared (carrier-grade NAT)
        || a == 127 // 127/8 loopback
        || (a == 169 && b == 254) // 169.254/16 link-local, cloud metadata 169.254.169.254
        || (a == 172 && (16..32).contains(&b)) // 172.16/12 private
        || (a == 192 && b == 0 && (c == 0 || c == 2)) // 192.0.0/24 protocol assignments, 192.0.2/24 documentation
        || (a == 192 && b == 168) // 192.168/16 private
        || (a == 198 && (b == 18 || b == 19)) // 198.18/15 benchmarking
        || (a == 198 && b == 51 && c == 100) // 198.51.100/24 documentation
        || (a == 203 && b == 0 && c == 113) // 203.0.113/24 documentation
        || a >= 224; // 224/4 multicast, 240/4 reserved, 255.255.255.255 broadcast
    !internal
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // ::ffff:a.b.c.d (IPv4-mapped) and 64:ff9b::a.b.c.d (NAT64) reach the IPv4 address.
    if (s[..5] == [0; 5] && s[5] == 0xffff) || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(v4(s[6], s[7]));
    }
    // 2002:AABB:CCDD::/48 (6to4) routes to a.b.c.d.
    if s[0] == 0x2002 {
        return is_public_v4(v4(s[1], s[2]));
    }
    // Only 2000::/3 is global unicast: this leaves out ::/8 (unspecified
    // `::`, loopback `::1`, IPv4-compatible `::a.b.c.d`), 64:ff9b:1::/48
    // (local NAT64), 100::/64 (discard), fc00::/7 (unique local), fe80::/10
    // (link-local), fec0::/10 (site-local) and ff00::/8 (multicast).
    let global_unicast = (s[0] & 0xe000) == 0x2000;
    let special = match s[0] {
        // 2001::/23 protocol assignments (Teredo, benchmarking, ORCHID), 2001:db8::/32 documentation.
        0x2001 => s[1] < 0x0200 || s[1] == 0x0db8,
        // 3fff::/20 documentation.
        0x3fff => s[1] < 0x1000,
        _ => false,
    };
    global_unicast && !special
}

/// Refuses `url` when its host is an IP address that is not public, or
/// `localhost` or a name under it (RFC 6761, with or without a final dot);
/// other host names are checked where they are resolved.
fn check_literal_host(url: &url::Url) -> Result<(), String> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if name == "localhost" || name.ends_with(".localhost") {
                return Err(private_address(&name, IpAddr::V4(Ipv4Addr::LOCALHOST)));
            }
            return Ok(());
        }
        None => return Err("url: names no host".into()),
    };
    if is_public_address(ip) { Ok(()) } else { Err(private_address(&ip.to_string(), ip)) }
}

fn private_address(host: &str, ip: IpAddr) -> String {
    let via = if host == ip.to_string() { String::new() } else { format!(" ({host} resolves to it)") };
    format!(
        "url: {ip}{via} is a private, internal or reserved address; webhooks must point at public addresses \
         (MEETINGS_WEBHOOK_ALLOW_PRIVATE=true allows them)"
    )
}

/// Refuses `host` when any of `addrs` is not public.
fn check_resolved(host: &str, addrs: &[SocketAddr]) -> Result<(), String> {
    match addrs.iter().find(|a| !is_public_address(a.ip())) {
        Some(a) => Err(private_address(host, a.ip())),
        None => Ok(()),
    }
}

/// Resolves the host names of webhook deliveries (when private destinations
/// are not allowed): refuses a name if any of its addresses is not public,
/// and otherwise answers exactly the addresses it checked, which are the ones
/// the connection then uses: a name re-pointed at an internal address after
/// its webhook was registered (DNS rebinding) cannot reach it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicOnlyResolver;

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            // reqwest puts the URL's port on the addresses answered.
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(format!("{host} resolves to no address").into());
            }
            check_resolved(&host, &addrs)?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The wait before the next attempt after `attempts` failed ones (1 → 1 s,
/// 2 → 2 s, 3 → 4 s, …), capped at [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(30);
    Duration::from_secs(1u64 << exponent).min(MAX_BACKOFF)
}

/// What an attempt's outcome makes of a delivery that has had `attempts`
/// attempts (this one included): delivered, pending again at a later time, or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Delivered,
    RetryAt(i64),
    Failed,
}

pub fn next_step(success: bool, attempts: u32, now_ms: i64) -> Next {
    if success {
        Next::Delivered
    } else if attempts >= MAX_ATTEMPTS {
        Next::Failed
    } else {
        Next::RetryAt(now_ms + backoff(attempts).as_millis() as i64)
    }
}

/// Sends recorded deliveries; one per instance, in [`AppState`].
pub struct Dispatcher {
    /// Wakes the delivery loop when new deliveries are recorded.
    pub wake: tokio::sync::Notify,
    /// Resolves host names through [`PublicOnlyResolver`].
    http: reqwest::Client,
    /// Resolves host names as the system does: used only with
    /// `MEETINGS_WEBHOOK_ALLOW_PRIVATE=true`.
    http_any_address: reqwest::Client,
    /// This instance, as `claimed_by` names it.
    instance: String,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Dispatcher {
    pub fn new() -> Self {
        let builder = || {
            reqwest::Client::builder()
                .timeout(ATTEMPT_TIMEOUT)
                .connect_timeout(ATTEMPT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                // Through a proxy, the address check would only ever see the proxy's address.
                .no_proxy()
                .user_agent(concat!("tessera-meetings-webhooks/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder().dns_resolver(Arc::new(PublicOnlyResolver)).build().unwrap_or_default();
        let http_any_address = builder().build().unwrap_or_default();
        Dispatcher { wake: tokio::sync::Notify::new(), http, http_any_address, instance: uuid::Uuid::new_v4().to_string() }
    }

    /// The client of an attempt: unless `allow_private`, one that refuses
    /// names resolving to non-public addresses.
    fn client(&self, allow_private: bool) -> &reqwest::Client {
        if allow_private { &self.http_any_address } else { &self.http }
    }
}

/// Checks a webhook's URL: absolute http or https with a host, at most 2048
/// characters (where it points is [`valid_destination`]'s business).
pub fn valid_url(text: &str) -> Result<(), String> {
    if text.len() > 2048 {
        return Err("url: at most 2048 characters".into());
    }
    let url = url::Url::parse(text).map_err(|e| format!("url: not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("url: the scheme must be http or https, not {}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("url: names no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url: must not carry credentials".into());
    }
    Ok(())
}

/// Checks a webhook's URL ([`valid_url`]) and, unless `allow_private`, where
/// it points: an IP address must be public ([`is_public_address`]), a host
/// name must not resolve to any address that is not. A name that does not
/// resolve (within a few seconds) is accepted: every delivery checks again.
pub async fn valid_destination(text: &str, allow_private: bool) -> Result<(), String> {
    valid_url(text)?;
    if allow_private {
        return Ok(());
    }
    let url = url::Url::parse(text).map_err(|e| format!("url: not a URL ({e})"))?;
    check_literal_host(&url)?;
    if let Some(url::Host::Domain(name)) = url.host() {
        let port = url.port_or_known_default().unwrap_or(80);
        match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, port))).await {
            Ok(Ok(addrs)) => check_resolved(name, &addrs.collect::<Vec<_>>())?,
            Ok(Err(e)) => tracing::debug!(host = name, "webhook host does not resolve at registration: {e}"),
            Err(_) => tracing::debug!(host = name, "webhook host did not resolve within {RESOLVE_TIMEOUT:?} at registration"),
        }
    }
    Ok(())
}

/// Checks the subscribed events: at least one, each one of [`EVENTS`];
/// answers them without duplicates, in the order given.
pub fn valid_events(events: &[String]) -> Result<Vec<String>, String> {
    if events.is_empty() {
        return Err(format!("events: at least one of {}", EVENTS.join(", ")));
    }
    let mut out: Vec<String> = Vec::new();
    for e in events {
        if !EVENTS.contains(&e.as_str()) {
            return Err(format!("events: {e:?} is not one of {}", EVENTS.join(", ")));
        }
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    Ok(out)
}

/// Checks a secret: 16 to 256 characters, no control characters.
pub fn valid_secret(secret: &str) -> Result<(), String> {
    let n = secret.chars().count();
    if !(16..=256).contains(&n) || secret.chars().any(char::is_control) {
        return Err("secret: 16 to 256 characters, no control characters".into());
    }
    Ok(())
}

/// What answers show of a secret: its last four characters.
fn secret_hint(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
    format!("…{tail}")
}

/// A webhook as the API shows it (never its secret).
#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    /// The secret's last four characters.
    pub secret_hint: String,
    pub created_at: String,
}

impl Webhook {
    fn from_row(row: &Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Webhook {
            id: text("id"),
            url: text("url"),
            events: serde_json::from_str(&text("events")).unwrap_or_default(),
            secret_hint: secret_hint(&text("secret")),
            created_at: iso(row.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
        }
    }
}

/// Body of `POST /api/v1/webhooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
}

/// The caller's webhooks.
#[derive(Debug, Serialize)]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
    pub total: usize,
}

const WEBHOOK_COLUMNS: &str = "id, user_id, url, events, secret, created_at";

/// Checks a new webhook (400 `validation_error` when invalid); answers its
/// trimmed URL and its events without duplicates. `allow_private` is
/// `MEETINGS_WEBHOOK_ALLOW_PRIVATE`.
pub async fn validate_new(w: &NewWebhook, allow_private: bool) -> AppResult<(String, Vec<String>)> {
    let url = w.url.trim().to_string();
    valid_destination(&url, allow_private).await.map_err(AppError::Validation)?;
    let events = valid_events(&w.events).map_err(AppError::Validation)?;
    valid_secret(&w.secret).map_err(AppError::Validation)?;
    Ok((url, events))
}

/// Records a new webhook of the caller; `allow_private` is `MEETINGS_WEBHOOK_ALLOW_PRIVATE`.
pub async fn create(db: &Db, caller: &Caller, w: NewWebhook, allow_private: bool) -> AppResult<Webhook> {
    let (url, events) = validate_new(&w, allow_private).await?;
    let count = db.sql("SELECT COUNT(*) AS n FROM webhooks WHERE user_id = $1", &[json!(caller.user.id)]).await?;
    if count.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0) >= MAX_WEBHOOKS_PER_USER {
        return Err(AppError::Validation(format!("at most {MAX_WEBHOOKS_PER_USER} webhooks per user: delete one first")));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let now = now_ms();
    let events_text = serde_json::to_string(&events).map_err(|e| AppError::Internal(e.to_string()))?;
    db.sql(
        &format!("INSERT INTO webhooks ({WEBHOOK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"),
        &[json!(id), json!(caller.user.id), json!(url), json!(events_text), json!(w.secret), json!(now)],
    )
    .await?;
    Ok(Webhook { id, url, events, secret_hint: secret_hint(&w.secret), created_at: iso(now) })
}

pub async fn list(db: &Db, caller: &Caller) -> AppResult<WebhookList> {
    let rows = db
        .sql(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE user_id = $1 ORDER BY created_at, id"), &[json!(caller.user.id)])
        .await?;
    let webhooks: Vec<Webhook> = rows.objects().iter().map(Webhook::from_row).collect();
    Ok(WebhookList { total: webhooks.len(), webhooks })
}

/// The caller's webhook `id`; another's, or none, answers 404.
pub async fn get(db: &Db, caller: &Caller, id: &str) -> AppResult<Webhook> {
    let not_found = || AppError::NotFound(format!("webhook {id} does not exist"));
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(not_found());
    }
    let rows = db
        .sql(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1 AND user_id = $2"), &[json!(id), json!(caller.user.id)])
        .await?;
    rows.first().map(|r| Webhook::from_row(&r)).ok_or_else(not_found)
}

/// Deletes the caller's webhook `id` and its deliveries (one transaction).
pub async fn delete(db: &Db, caller: &Caller, id: &str) -> AppResult<()> {
    get(db, caller, id).await?;
    db.sql(
        "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND user_id = $2; DELETE FROM webhooks WHERE id = $1 AND user_id = $2",
        &[json!(id), json!(caller.user.id)],
    )
    .await?;
    Ok(())
}

/// One delivery of the log.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub event: String,
    pub status: String,
    pub attempts: u64,
    pub last_status_code: Option<u64>,
    pub last_error: Option<String>,
    /// When the next attempt is due; null once delivered or failed.
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub delivered_at: Option<String>,
}

impl Delivery {
    fn from_row(row: &Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let status = text("status");
        Delivery {
            id: text("id"),
            webhook_id: text("webhook_id"),
            event: text("event"),
            attempts: row.get("attempts").and_then(Value::as_u64).unwrap_or(0),
            last_status_code: row.get("last_status_code").and_then(Value::as_u64),
            last_error: row.get("last_error").and_then(Value::as_str).map(str::to_string),
            next_attempt_at: if status == "pending" { row.get("next_attempt_at").and_then(Value::as_i64).map(iso) } else { None },
            created_at: iso(row.get("created_at").and_then(Value::as_i64).unwrap_or(0)),
            delivered_at: row.get("delivered_at").and_then(Value::as_i64).map(iso),
            status,
        }
    }
}

/// `GET /api/v1/webhooks/{id}/deliveries` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    pub limit: Option<u64>,
    pub status: Option<String>,
}

/// A webhook's delivery log, newest first.
#[derive(Debug, Serialize)]
pub struct DeliveryLog {
    pub webhook_id: String,
    pub deliveries: Vec<Delivery>,
    /// Deliveries of the webhook (with the status filter), beyond the page too.
    pub total: u64,
}

pub const DELIVERY_STATUSES: &[&str] = &["pending", "delivered", "failed"];

pub async fn deliveries(db: &Db, caller: &Caller, id: &str, q: DeliveryQuery) -> AppResult<DeliveryLog> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(AppError::Validation("limit: 1 to 500".into()));
    }
    let webhook = get(db, caller, id).await?;
    let mut filter = "webhook_id = $1".to_string();
    let mut params = vec![json!(webhook.id)];
    if let Some(status) = &q.status {
        if !DELIVERY_STATUSES.contains(&status.as_str()) {
            return Err(AppError::Validation(format!("status: one of {}", DELIVERY_STATUSES.join(", "))));
        }
        filter.push_str(" AND status = $2");
        params.push(json!(status));
    }
    let rows = db
        .sql(
            &format!(
                "SELECT id, webhook_id, event, status, attempts, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
                 FROM webhook_deliveries WHERE {filter} ORDER BY created_at DESC, id LIMIT {limit}"
            ),
            &params,
        )
        .await?;
    let total = db.sql(&format!("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE {filter}"), &params).await?;
    let total = total.rows.first().and_then(|r| r.first()).and_then(Value::as_u64).unwrap_or(0);
    Ok(DeliveryLog { webhook_id: webhook.id, deliveries: rows.objects().iter().map(Delivery::from_row).collect(), total })
}

/// The body sent for delivery `id`: compact JSON, fixed when the event happens.
pub fn delivery_body(id: &str, event: &str, created_at_ms: i64, data: &Value) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        id: &'a str,
        event: &'a str,
        created_at: String,
        data: &'a Value,
    }
    serde_json::to_string(&Body { id, event, created_at: iso(created_at_ms), data }).unwrap_or_default()
}

/// Records a delivery of `event` with `data` to every webhook of `user_id`
/// subscribed to it; the delivery loop sends them. Never fails the caller:
/// a database error is logged.
pub async fn emit(state: &AppState, user_id: &str, event: &str, data: Value) {
    match record(&state.db, user_id, event, &data).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::debug!(user_id, event, deliveries = n, "webhook deliveries recorded");
            state.webhooks.wake.notify_one();
        }
        Err(e) => tracing::error!(user_id, event, "webhook deliveries were not recorded: {e}"),
    }
}

async fn record(db: &Db, user_id: &str, event: &str, data: &Value) -> Result<usize, DbError> {
    let hooks = db.sql("SELECT id, events FROM webhooks WHERE user_id = $1", &[json!(user_id)]).await?;
    let subscribed: Vec<String> = hooks
        .objects()
        .iter()
        .filter(|h| {
            let events: Vec<String> =
                h.get("events").and_then(Value::as_str).and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
            events.iter().any(|e| e == event)
        })
        .filter_map(|h| h.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    if subscribed.is_empty() {
        return Ok(0);
    }
    let now = now_ms();
    let mut values = Vec::new();
    let mut params = vec![json!(user_id), json!(event), json!(now)];
    for hook in &subscribed {
        let id = uuid::Uuid::new_v4().to_string();
        let body = delivery_body(&id, event, now, data);
        let n = params.len();
        values.push(format!("(${}, ${}, $1, $2, ${}, 'pending', 0, $3, NULL, NULL, NULL, NULL, $3, NULL)", n + 1, n + 2, n + 3));
        params.extend([json!(id), json!(hook), json!(body)]);
    }
    db.sql(
        &format!(
            "INSERT INTO webhook_deliveries (id, webhook_id, user_id, event, body, status, attempts, next_attempt_at, last_status_code, last_error, claimed_by, claim_until, created_at, delivered_at) VALUES {}",
            values.join(", ")
        ),
        &params,
    )
    .await?;
    Ok(subscribed.len())
}

/// Starts the loop that sends recorded deliveries (see the module documentation).
pub fn spawn_delivery_loop(state: AppState) {
    tokio::spawn(async move {
        loop {
            match deliver_due(&state).await {
                // A full batch sent: more may be due at once.
                Ok(n) if n >= BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!("webhook deliveries: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = state.webhooks.wake.notified() => {}
            }
        }
    });
}

/// A delivery this instance claimed.
struct Claimed {
    id: String,
    url: String,
    secret: String,
    event: String,
    body: String,
    attempts: u32,
}

/// Claims the due pending deliveries (up to a batch) and sends them; answers
/// how many this instance claimed and sent.
async fn deliver_due(state: &AppState) -> Result<usize, DbError> {
    let now = now_ms();
    let due = state
        .db
        .sql(
            &format!(
                "SELECT d.id AS id, d.event AS event, d.body AS body, d.attempts AS attempts, w.url AS url, w.secret AS secret \
                 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id \
                 WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.claim_until IS NULL OR d.claim_until < $1) \
                 ORDER BY d.next_attempt_at, d.id LIMIT {BATCH}"
            ),
            &[json!(now)],
        )
        .await?;
    let rows = due.objects();
    let text = |row: &Map<String, Value>, k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let candidates: Vec<Claimed> = rows
        .iter()
        .map(|r| Claimed {
            id: text(r, "id"),
            url: text(r, "url"),
            secret: text(r, "secret"),
            event: text(r, "event"),
            body: text(r, "body"),
            attempts: r.get("attempts").and_then(Value::as_u64).unwrap_or(0) as u32,
        })
        .collect();
    let outcomes: Vec<Result<bool, DbError>> =
        futures::stream::iter(candidates).map(|d| claim_and_send(state, d)).buffer_unordered(CONCURRENCY).collect().await;
    let mut sent = 0;
    for outcome in outcomes {
        match outcome {
            Ok(true) => sent += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!("webhook delivery: {e}"),
        }
    }
    Ok(sent)
}

/// Claims delivery `d` (one conditional UPDATE; another instance's live claim
/// wins), sends it once and records the outcome while still holding the claim.
/// Answers whether this instance claimed it.
async fn claim_and_send(state: &AppState, d: Claimed) -> Result<bool, DbError> {
    let me = &state.webhooks.instance;
    let now = now_ms();
    let lease_until = now + CLAIM_LEASE.as_millis() as i64;
    let claimed = state
        .db
        .sql(
            "UPDATE webhook_deliveries SET claimed_by = $2, claim_until = $3 \
             WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $4 AND (claim_until IS NULL OR claim_until < $4)",
            &[json!(d.id), json!(me), json!(lease_until), json!(now)],
        )
        .await?;
    if claimed.affected != 1 {
        return Ok(false);
    }
    let outcome = send(&state.webhooks, state.config.webhook_allow_private, &d).await;
    let attempts = d.attempts + 1;
    let done = now_ms();
    let (success, code, error) = match &outcome {
        Ok(status) if (200..300).contains(status) => (true, Some(*status), None),
        Ok(status) => (false, Some(*status), Some(format!("the endpoint answered HTTP {status}"))),
        Err(e) => (false, None, Some(truncate(e, MAX_ERROR_LEN))),
    };
    let (status, next_at, delivered_at) = match next_step(success, attempts, done) {
        Next::Delivered => ("delivered", done, Some(done)),
        Next::RetryAt(at) => ("pending", at, None),
        Next::Failed => ("failed", done, None),
    };
    let recorded = state
        .db
        .sql(
            "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, last_status_code = $6, last_error = $7, \
             delivered_at = $8, claimed_by = NULL, claim_until = NULL WHERE id = $1 AND claimed_by = $2",
            &[json!(d.id), json!(me), json!(status), json!(attempts), json!(next_at), json!(code), json!(error), json!(delivered_at)],
        )
        .await?;
    if recorded.affected != 1 {
        tracing::warn!(delivery = %d.id, "the delivery's claim was lost before its outcome was recorded (it may be sent again)");
    }
    match status {
        "delivered" => tracing::debug!(delivery = %d.id, event = %d.event, attempts, "webhook delivered"),
        "failed" => tracing::warn!(delivery = %d.id, event = %d.event, attempts, error = ?error, "webhook delivery failed for good"),
        _ => tracing::debug!(delivery = %d.id, event = %d.event, attempts, error = ?error, "webhook attempt failed; retrying"),
    }
    Ok(true)
}

/// One attempt: the HTTP status the endpoint answered, or why there was none.
/// Unless `allow_private`, an IP address in the URL is checked again and host
/// names resolve through [`PublicOnlyResolver`] (see the module documentation).
async fn send(dispatcher: &Dispatcher, allow_private: bool, d: &Claimed) -> Result<u16, String> {
    if !allow_private {
        let url = url::Url::parse(&d.url).map_err(|e| format!("url: not a URL ({e})"))?;
        check_literal_host(&url)?;
    }
    let timestamp = now_ms() / 1000;
    let response = dispatcher
        .client(allow_private)
        .post(&d.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Tessera-Event", &d.event)
        .header("X-Tessera-Delivery", &d.id)
        .header("X-Tessera-Timestamp", timestamp.to_string())
        .header("X-Tessera-Signature", signature(&d.secret, timestamp, d.body.as_bytes()))
        .body(d.body.clone())
        .send()
        .await
        .map_err(|e| if e.is_timeout() { format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()) } else { error_chain(&e) })?;
    Ok(response.status().as_u16())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `text` cut to at most `max` bytes (on a character boundary), with an ellipsis when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/webhooks", routing::get(list_route).post(create_route))
        .route("/api/v1/webhooks/{id}", routing::get(get_route).delete(delete_route))
        .route("/api/v1/webhooks/{id}/deliveries", routing::get(deliveries_route))
}

async fn list_route(State(state): State<AppState>, caller: Caller) -> AppResult<Json<WebhookList>> {
    Ok(Json(list(&state.db, &caller).await?))
}

async fn create_route(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<NewWebhook>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Webhook>)> {
    let Json(w) = body?;
    Ok((StatusCode::CREATED, Json(create(&state.db, &caller, w, state.config.webhook_allow_private).await?)))
}

async fn get_route(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Webhook>> {
    Ok(Json(get(&state.db, &caller, &id).await?))
}

async fn delete_route(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<StatusCode> {
    delete(&state.db, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn deliveries_route(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Result<Query<DeliveryQuery>, QueryRejection>,
) -> AppResult<Json<DeliveryLog>> {
    let Query(q) = q?;
    Ok(Json(deliveries(&state.db, &caller, &id, q).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        // HMAC-SHA256("Jefe", "1790000000.what do ya want for nothing?"), computed independently.
        assert_eq!(
            signature("Jefe", 1_790_000_000, b"what do ya want for nothing?"),
            "t=1790000000,v1=79368d676f0012602ea15029a7cad98cbcca320c179f8dfbfb27122c189b86d4"
        );
        let body = delivery_body("d1", "meeting.started", 1_790_000_000_123, &json!({"meeting": {"id": "m1"}}));
        assert_eq!(body, r#"{"id":"d1","event":"meeting.started","created_at":"2026-09-21T14:13:20.123Z","data":{"meeting":{"id":"m1"}}}"#);
        let (secret, t) = ("0123456789abcdef", 1_790_000_000);
        let header = signature(secret, t, body.as_bytes());
        assert_eq!(header, signature(secret, t, body.as_bytes()));
        assert_ne!(header, signature("0123456789abcdeg", t, body.as_bytes()));
        assert_ne!(header, signature(secret, t, body.replace("m1", "m2").as_bytes()));
        assert_ne!(header, signature(secret, t + 1, body.as_bytes()), "the timestamp is signed");

        // What a receiver accepts: the signature within five minutes of its clock, either way.
        assert_eq!(verify_signature(secret, &header, body.as_bytes(), t), Ok(()));
        assert_eq!(verify_signature(secret, &header, body.as_bytes(), t + 300), Ok(()));
        assert_eq!(verify_signature(secret, &header, body.as_bytes(), t - 300), Ok(()));
        // A captured delivery replayed later is refused...
        assert!(verify_signature(secret, &header, body.as_bytes(), t + 301).unwrap_err().contains("more than 300 s"));
        assert!(verify_signature(secret, &header, body.as_bytes(), t - 301).is_err());
        // ...and so is its old digest under a fresh timestamp.
        let v1 = header.split_once(",v1=").unwrap().1;
        let forged = format!("t={},v1={v1}", t + 3600);
        assert!(verify_signature(secret, &forged, body.as_bytes(), t + 3600).unwrap_err().contains("no v1"));
        // A changed body, another secret, or a malformed header fail.
        assert!(verify_signature(secret, &header, body.replace("m1", "m2").as_bytes(), t).is_err());
        assert!(verify_signature("0123456789abcdeg", &header, body.as_bytes(), t).is_err());
        for bad in ["", "v1=00", &format!("t={t}"), &format!("t=soon,v1={v1}"), &format!("t={t},v1=zz")] {
            assert!(verify_signature(secret, bad, body.as_bytes(), t).is_err(), "{bad}");
        }
        // Several v1 values (as during a secret rotation): one matching is enough.
        assert_eq!(verify_signature(secret, &format!("t={t},v1=00ff,v1={v1}"), body.as_bytes(), t), Ok(()));
        // The digest is over "<t>.<body>", as an independent receiver computes it.
        let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.{body}").as_bytes());
        assert_eq!(v1, hex::encode(mac.finalize().into_bytes()));
    }

    #[test]
    fn retries_back_off_exponentially_then_fail() {
        let waits: Vec<u64> = (1..=MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128]);
        assert_eq!(backoff(20), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(next_step(true, 1, 1000), Next::Delivered);
        assert_eq!(next_step(true, MAX_ATTEMPTS, 1000), Next::Delivered);
        assert_eq!(next_step(false, 1, 1000), Next::RetryAt(2000));
        assert_eq!(next_step(false, 3, 1000), Next::RetryAt(5000));
        assert_eq!(next_step(false, MAX_ATTEMPTS - 1, 0), Next::RetryAt(64_000));
        assert_eq!(next_step(false, MAX_ATTEMPTS, 1000), Next::Failed);
        // Every attempt and wait of a delivery that never succeeds: about four minutes.
        let total: u64 = (1..MAX_ATTEMPTS).map(|n| backoff(n).as_secs()).sum();
        assert_eq!(total, 127);
    }

    #[test]
    fn urls_events_and_secrets_are_checked() {
        for good in ["http://127.0.0.1:8080/hook", "https://example.com/a?b=c"] {
            assert!(valid_url(good).is_ok(), "{good}");
        }
        for bad in ["", "example.com/hook", "ftp://example.com/", "https://user:pw@example.com/", "http://", "javascript:alert(1)"] {
            assert!(valid_url(bad).is_err(), "{bad}");
        }
        assert!(valid_url(&format!("https://example.com/{}", "a".repeat(2100))).is_err());
        let events = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            valid_events(&events(&["meeting.ended", "meeting.started", "meeting.ended"])).unwrap(),
            events(&["meeting.ended", "meeting.started"])
        );
        assert!(valid_events(&[]).is_err());
        assert!(valid_events(&events(&["meeting.started", "meeting.deleted"])).is_err());
        assert!(valid_secret(&"s".repeat(16)).is_ok() && valid_secret(&"s".repeat(256)).is_ok());
        assert!(valid_secret(&"s".repeat(15)).is_err() && valid_secret(&"s".repeat(257)).is_err());
        assert!(valid_secret("0123456789abcdef\n").is_err());
        assert_eq!(secret_hint("0123456789abcdef"), "…cdef");
        assert_eq!(secret_hint("ab"), "…ab");
    }

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééééé", 3), "é…");
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn private_internal_and_reserved_addresses_are_not_public() {
        let internal = [
            // IPv4: this network and unspecified, private, loopback, link-local with cloud metadata.
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.0",
            "10.255.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.0.1",
            "169.254.169.254",
            "172.16.0.0",
            "172.31.255.255",
            "192.168.0.1",
            "192.168.255.255",
            // Shared, protocol assignments, documentation, benchmarking.
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            // Multicast, reserved, broadcast.
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            // IPv6: unspecified, loopback, IPv4-compatible, unique local, link-local, site-local, multicast.
            "::",
            "::1",
            "::127.0.0.1",
            "::8.8.8.8",
            "fc00::1",
            "fd12:3456:789a::1",
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
            // Discard, protocol assignments (Teredo), documentation, local NAT64.
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "64:ff9b:1::1",
            // IPv4-mapped, NAT64 and 6to4 forms of internal IPv4 addresses.
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:172.16.0.1",
            "::ffff:192.168.1.1",
            "::ffff:0.0.0.0",
            "::ffff:224.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
        ];
        for text in internal {
            assert!(!is_public_address(ip(text)), "{text} is not public");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            // The neighbours of the internal ranges.
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.167.255.255",
            "192.169.0.0",
            "223.255.255.255",
            "2001:4860:4860::8888",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "2001:200::1",
            "3fff:1000::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ];
        for text in public {
            assert!(is_public_address(ip(text)), "{text} is public");
        }
        // A name is refused when any of its addresses is internal.
        let addrs = |v: &[&str]| v.iter().map(|a| SocketAddr::new(ip(a), 443)).collect::<Vec<_>>();
        assert!(check_resolved("hooks.example", &addrs(&["8.8.8.8", "2606:4700:4700::1111"])).is_ok());
        let mixed = check_resolved("rebind.example", &addrs(&["8.8.8.8", "169.254.169.254"])).unwrap_err();
        assert!(mixed.contains("169.254.169.254 (rebind.example resolves to it)"), "{mixed}");
    }

    fn new_webhook(url: &str) -> NewWebhook {
        NewWebhook { url: url.to_string(), events: vec!["meeting.started".to_string()], secret: "0123456789abcdef".to_string() }
    }

    #[tokio::test]
    async fn private_destinations_are_refused_at_registration_unless_allowed() {
        let refused = [
            "http://127.0.0.1:9/x",
            "http://169.254.169.254/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.5/hook",
            "http://172.20.1.1/hook",
            "http://192.168.1.1/hook",
            "http://0.0.0.0:8080/",
            "http://224.0.0.1/",
            "http://[::1]:8080/",
            "http://[::]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            // Other spellings of 127.0.0.1 that URL parsing normalizes.
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            // Host names resolving to loopback.
            "http://localhost:8080/hook",
            "https://LOCALHOST./",
            "http://api.localhost/",
        ];
        for url in refused {
            let err = validate_new(&new_webhook(url), false).await.expect_err(url);
            assert_eq!((err.status(), err.code()), (StatusCode::BAD_REQUEST, "validation_error"), "{url}");
            assert!(err.to_string().contains("MEETINGS_WEBHOOK_ALLOW_PRIVATE"), "{url}: {err}");
            // What the client sees: spec 03's validation error.
            let response = axum::response::IntoResponse::into_response(err);
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{url}");
            let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"], "validation_error", "{url}: {body}");
            assert!(body["message"].as_str().is_some_and(|m| m.contains("private")), "{url}: {body}");
            // With MEETINGS_WEBHOOK_ALLOW_PRIVATE=true, it is accepted.
            let (kept, events) = validate_new(&new_webhook(url), true).await.unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!((kept.as_str(), events.as_slice()), (url, ["meeting.started".to_string()].as_slice()));
        }
        // Public addresses are accepted without the opt-out.
        for url in ["https://93.184.216.34/hook", "http://8.8.8.8:8080/x", "https://[2606:4700:4700::1111]/hook"] {
            assert!(validate_new(&new_webhook(url), false).await.is_ok(), "{url}");
        }
        // The opt-out allows addresses, not other schemes or bad URLs.
        for url in ["ftp://127.0.0.1/", "file:///etc/passwd", "gopher://127.0.0.1:6379/_", "http://user:pw@127.0.0.1/"] {
            let err = validate_new(&new_webhook(url), true).await.expect_err(url);
            assert_eq!(err.status(), StatusCode::BAD_REQUEST, "{url}");
        }
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_internal_addresses() {
        let refused = reqwest::dns::Resolve::resolve(&PublicOnlyResolver, "localhost".parse().unwrap()).await;
        let err = refused.err().expect("localhost is refused").to_string();
        assert!(err.contains("localhost resolves to it"), "{err}");
    }

    /// A receiver on loopback that records each request's headers and body.
    async fn receiver() -> (SocketAddr, Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, axum::body::Bytes)>>>) {
        let got: Arc<std::sync::Mutex<Vec<_>>> = Arc::default();
        let seen = got.clone();
        let app = Router::new().route(
            "/hook",
            routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push((headers, body));
                    StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr, got)
    }

    #[tokio::test]
    async fn deliveries_check_the_address_they_connect_to_and_are_signed() {
        let (addr, got) = receiver().await;
        let dispatcher = Dispatcher::new();
        let secret = "whsec-0123456789abcdef";
        let body = delivery_body("d1", "meeting.started", now_ms(), &json!({"meeting": {"id": "m1"}}));
        let claimed = |url: String| Claimed {
            id: "d1".into(),
            url,
            secret: secret.into(),
            event: "meeting.started".into(),
            body: body.clone(),
            attempts: 0,
        };
        // Without the opt-out, neither the address nor a name resolving to it is reached.
        for url in [format!("http://{addr}/hook"), format!("http://localhost:{}/hook", addr.port())] {
            let err = send(&dispatcher, false, &claimed(url.clone())).await.expect_err(&url);
            assert!(err.contains("private, internal or reserved address"), "{url}: {err}");
        }
        // The client itself resolves names through PublicOnlyResolver (`localhost`
        // is refused before, by name: this is the path of any other name).
        let err = dispatcher.client(false).post(format!("http://localhost:{}/hook", addr.port())).send().await.unwrap_err();
        assert!(error_chain(&err).contains("localhost resolves to it"), "{}", error_chain(&err));
        assert!(got.lock().unwrap().is_empty(), "nothing reached the receiver");

        // With it, the delivery arrives, signed with its timestamp.
        assert_eq!(send(&dispatcher, true, &claimed(format!("http://{addr}/hook"))).await, Ok(204));
        let (headers, received) = got.lock().unwrap().pop().expect("one request");
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert_eq!(received, body.as_bytes());
        let t: i64 = header("x-tessera-timestamp").parse().unwrap();
        assert!(t.abs_diff(now_ms() / 1000) <= 5);
        let signed = header("x-tessera-signature");
        assert!(signed.starts_with(&format!("t={t},v1=")), "{signed}");
        assert_eq!(verify_signature(secret, &signed, &received, now_ms() / 1000), Ok(()));
        // Replayed six minutes later, the receiver refuses it.
        assert!(verify_signature(secret, &signed, &received, t + 360).is_err());
    }
}
