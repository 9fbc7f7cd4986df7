//! Per-client-IP token buckets (governor, GCRA): `rate_limit.login_requests_per_minute`
//! (30) on login and `rate_limit.requests_per_minute` (1000) on every other route
//! but the health probes. Every limited response carries `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds when the bucket
//! is full again); a refused one is 429 with `Retry-After` and a JSON `error`.
//! Behind a trusted proxy, set `rate_limit.client_ip_header` and the client IP is
//! read from that header only. The buckets are `services::rate_limits`; this is
//! their HTTP side, checked by the front door (`crate::http::front_door`).

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::services::rate_limits::{Bucket, Verdict};
use crate::state::AppState;

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn set_headers(h: &mut HeaderMap, limit: u32, remaining: u32, reset_in: Duration) {
    h.insert("x-ratelimit-limit", HeaderValue::from(limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(unix_now() + reset_in.as_secs_f64().ceil() as u64));
}

/// A request's standing in its rate-limit bucket, told in the answer's headers.
pub struct Allowance {
    per_minute: u32,
    remaining: u32,
    refill: Duration,
}

impl Allowance {
    pub fn set_headers(&self, h: &mut HeaderMap) {
        let Allowance { per_minute, remaining, refill } = *self;
        set_headers(h, per_minute, remaining, refill * (per_minute - remaining.min(per_minute)));
    }
}

/// The rate limit of `path` for the client at `ip` (the front door skips the
/// health probes): `Ok(None)` when limiting is off or the client IP unknown,
/// `Err` the 429 answer.
pub fn limit(state: &AppState, path: &str, ip: Option<IpAddr>) -> Result<Option<Allowance>, Response> {
    let limits = &state.rate_limits;
    let Some(ip) = ip.filter(|_| limits.enabled()) else { return Ok(None) };
    let bucket = if path == "/api/v1/auth/login" { Bucket::Login } else { Bucket::General };
    let Verdict { per_minute, refill, outcome } = limits.check(bucket, ip);
    match outcome {
        Ok(remaining) => Ok(Some(Allowance { per_minute, remaining, refill })),
        Err(wait) => {
            let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
            let message = format!("rate limit exceeded: {per_minute} requests per minute; retry in {retry_after} s");
            let mut resp = crate::error::ApiError::RateLimited(message).into_response();
            set_headers(resp.headers_mut(), per_minute, 0, refill * per_minute);
            resp.headers_mut().insert("retry-after", HeaderValue::from(retry_after));
            Err(resp)
        }
    }
}

/// A place under `server.max_connections` requests at once (`None`: no bound);
/// one more is answered 503 (`Retry-After: 1`) without waiting. The front door
/// never asks for the health probes.
pub fn take_slot(state: &AppState) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Response> {
    let Some(slots) = state.request_slots.clone() else { return Ok(None) };
    match slots.try_acquire_owned() {
        Ok(slot) => Ok(Some(slot)),
        Err(_) => {
            let max = state.config.server.max_connections;
            let mut refused = crate::error::ApiError::Unavailable(format!(
                "this router serves at most {max} requests at once (server.max_connections); try again shortly"
            ))
            .into_response();
            refused.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
            Err(refused)
        }
    }
}
