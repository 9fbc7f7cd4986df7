//! Per-client-IP token buckets (governor, GCRA): `rate_limit.login_requests_per_minute`
//! on login and `rate_limit.requests_per_minute` on every other route but the
//! health probes. Buckets are per router process. The HTTP side (headers,
//! 429 answers) is the rate-limit middleware.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::{Quota, RateLimiter};

use crate::config::RateLimitSection;

type Limiter = RateLimiter<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock, StateInformationMiddleware>;

/// The router's two buckets per client IP.
pub struct RateLimits {
    config: RateLimitSection,
    login: Limiter,
    general: Limiter,
    clock: DefaultClock,
}

/// Which bucket a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Login,
    General,
}

/// A bucket's answer: the rate, the time one cell takes to refill, and either
/// the cells left or how long until the next one.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub per_minute: u32,
    pub refill: Duration,
    pub outcome: Result<u32, Duration>,
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

    /// Whether requests are limited at all (`rate_limit.enabled`).
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Takes one cell of `ip`'s `bucket`.
    pub fn check(&self, bucket: Bucket, ip: IpAddr) -> Verdict {
        let (limiter, per_minute) = match bucket {
            Bucket::Login => (&self.login, self.config.login_requests_per_minute.max(1)),
            Bucket::General => (&self.general, self.config.requests_per_minute.max(1)),
        };
        let refill = Duration::from_secs(60) / per_minute;
        let outcome = match limiter.check_key(&ip) {
            Ok(snapshot) => Ok(snapshot.remaining_burst_capacity()),
            Err(not_until) => Err(not_until.wait_time_from(self.clock.now())),
        };
        Verdict { per_minute, refill, outcome }
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

    /// The client IP: from the request header named by
    /// `rate_limit.client_ip_header` when configured (and only from there,
    /// its first address), else the peer address. `header` reads a request header.
    pub fn client_ip<'a>(&self, header: impl FnOnce(&str) -> Option<&'a str>, peer: Option<SocketAddr>) -> Option<IpAddr> {
        if let Some(name) = &self.config.client_ip_header {
            return header(name.as_str()).and_then(|v| v.split(',').next()).and_then(|v| v.trim().parse().ok());
        }
        peer.map(|p| p.ip())
    }

    /// Prunes idle buckets every minute (see [`RateLimits::prune`]).
    pub async fn prune_loop(self: std::sync::Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let remaining = self.prune();
            tracing::debug!(remaining, "pruned idle rate-limit buckets");
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
            let _ = limits.check(Bucket::General, ip);
        }
        assert_eq!(limits.general.len(), 200);
        // At 1000 per second a bucket that took one cell is full again after 1 ms.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(limits.prune(), 0);
    }
}
