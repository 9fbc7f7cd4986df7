//! Per-client-IP token buckets (governor, GCRA): `rate_limit.login_requests_per_minute`
//! (30) on login and `rate_limit.requests_per_minute` (1000) on every other route
//! but the health probes. Every limited response carries `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds when the bucket
//! is full again); a refused one is 429 with `Retry-After` and a JSON `error`.
//! Behind a trusted proxy, set `rate_limit.client_ip_header` and the client IP is
//! read from that header only. The buckets are `services::rate_limits`; this is
//! their HTTP side.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
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

/// The middleware.
pub async fn limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limits = &state.rate_limits;
    let path = req.uri().path();
    if !limits.enabled() || matches!(path, "/health" | "/livez" | "/readyz") {
        return next.run(req).await;
    }
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let Some(ip) = limits.client_ip(|name| req.headers().get(name).and_then(|v| v.to_str().ok()), peer) else {
        return next.run(req).await;
    };
    let bucket = if path == "/api/v1/auth/login" { Bucket::Login } else { Bucket::General };
    let Verdict { per_minute, refill, outcome } = limits.check(bucket, ip);
    match outcome {
        Ok(remaining) => {
            let mut resp = next.run(req).await;
            set_headers(resp.headers_mut(), per_minute, remaining, refill * (per_minute - remaining.min(per_minute)));
            resp
        }
        Err(wait) => {
            let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
            let message = format!("rate limit exceeded: {per_minute} requests per minute; retry in {retry_after} s");
            let mut resp = crate::error::ApiError::RateLimited(message).into_response();
            set_headers(resp.headers_mut(), per_minute, 0, refill * per_minute);
            resp.headers_mut().insert("retry-after", HeaderValue::from(retry_after));
            resp
        }
    }
}

/// Middleware: at most `server.max_connections` requests at once; one more
/// is answered 503 (`Retry-After: 1`) without waiting. Health probes are never refused.
pub async fn limit_concurrency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(slots) = state.request_slots.clone() else { return next.run(req).await };
    if matches!(req.uri().path(), "/health" | "/livez" | "/readyz") {
        return next.run(req).await;
    }
    match slots.try_acquire_owned() {
        Ok(_slot) => next.run(req).await,
        Err(_) => {
            let max = state.config.server.max_connections;
            let mut refused = crate::error::ApiError::Unavailable(format!(
                "this router serves at most {max} requests at once (server.max_connections); try again shortly"
            ))
            .into_response();
            refused.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
            refused
        }
    }
}
