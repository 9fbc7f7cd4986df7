//! Per-client-IP token buckets (governor, GCRA): `rate_limit.login_requests_per_minute`
//! (30) on login and `rate_limit.requests_per_minute` (1000) on every other route
//! but the health probes. Every limited response carries `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds when the bucket
//! is full again); a refused one is 429 with `Retry-After` and a JSON `error`.
//! Behind a trusted proxy, set `rate_limit.client_ip_header` and the client IP is
//! read from that header only. Buckets are per router process.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::{Quota, RateLimiter};

use crate::config::RateLimitSection;
use crate::state::AppState;

type Limiter = RateLimiter<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock, StateInformationMiddleware>;

/// The router's two buckets per client IP.
pub struct RateLimits {
    config: RateLimitSection,
    login: Limiter,
    general: Limiter,
    clock: DefaultClock,
}

fn limiter(per_minute: u32) -> Limiter {
    let n = NonZeroU32::new(per_minute.max(1)).expect("at least one");
    RateLimiter::keyed(Quota::per_minute(n)).with_middleware::<StateInformationMiddleware>()
}

impl RateLimits {
    /// Buckets with the configured rates.
    pub fn new(config: RateLimitSection) -> Self {
        RateLimits {
            login: limiter(config.login_requests_per_minute),
            general: limiter(config.requests_per_minute),
            clock: DefaultClock::default(),
            config,
        }
    }

    /// Forgets the buckets of clients that are full again (idle long enough that
    /// they would start afresh anyway), so memory follows the active clients,
    /// not every address ever seen. Returns how many buckets remain.
    pub fn prune(&self) -> usize {
        for limiter in [&self.login, &self.general] {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        self.login.len() + self.general.len()
    }

    /// The client IP: from `rate_limit.client_ip_header` when configured (and only
    /// from there), else the peer address.
    pub fn client_ip(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Option<IpAddr> {
        if let Some(name) = &self.config.client_ip_header {
            return headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.trim().parse().ok());
        }
        peer.map(|p| p.ip())
    }
}

/// Prunes idle buckets every minute (see [`RateLimits::prune`]).
pub async fn prune_loop(state: AppState) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let remaining = state.rate_limits.prune();
        tracing::debug!(remaining, "pruned idle rate-limit buckets");
    }
}

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
    if !limits.config.enabled || matches!(path, "/health" | "/livez" | "/readyz") {
        return next.run(req).await;
    }
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let Some(ip) = limits.client_ip(req.headers(), peer) else {
        return next.run(req).await;
    };
    let (bucket, per_minute) = if path == "/api/v1/auth/login" {
        (&limits.login, limits.config.login_requests_per_minute.max(1))
    } else {
        (&limits.general, limits.config.requests_per_minute.max(1))
    };
    let refill = Duration::from_secs(60) / per_minute;
    match bucket.check_key(&ip) {
        Ok(snapshot) => {
            let remaining = snapshot.remaining_burst_capacity();
            let mut resp = next.run(req).await;
            set_headers(resp.headers_mut(), per_minute, remaining, refill * (per_minute - remaining.min(per_minute)));
            resp
        }
        Err(not_until) => {
            let wait = not_until.wait_time_from(limits.clock.now());
            let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
            let message = format!("rate limit exceeded: {per_minute} requests per minute; retry in {retry_after} s");
            let mut resp = crate::error::ApiError::RateLimited(message).into_response();
            set_headers(resp.headers_mut(), per_minute, 0, refill * per_minute);
            resp.headers_mut().insert("retry-after", HeaderValue::from(retry_after));
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets of clients that went quiet are dropped once full again.
    #[test]
    fn idle_buckets_are_pruned() {
        let limits = RateLimits::new(RateLimitSection { requests_per_minute: 60_000, ..RateLimitSection::default() });
        for i in 0..200u32 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = limits.general.check_key(&ip);
        }
        assert_eq!(limits.general.len(), 200);
        // At 1000 per second a bucket that took one cell is full again after 1 ms.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(limits.prune(), 0);
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
