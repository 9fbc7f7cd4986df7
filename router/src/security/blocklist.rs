//! The IP block list: each router keeps a copy of the meta group's active blocks,
//! reloaded every `security.block_refresh_ms` (so a check costs no quorum read),
//! and checks every request against it before anything else runs, `/health`
//! included. A block ends at its expiry on this router's clock even between
//! reloads; a block made through this router applies here at once, through
//! another router within one reload.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tessera_api::command::{MetaQuery, MetaQueryResult, now_ms};
use tessera_api::http::iso8601_ms;
use tessera_api::security::{BlockRecord, SecurityQuery, SecurityQueryResult};
use tracing::debug;

use super::ClientIp;
use crate::state::AppState;

/// How long a block or unblock made through this router wins over reloads that
/// may have been read before it was committed.
const LOCAL_GRACE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Inner {
    /// Blocked IP → expiry (Unix ms).
    blocked: HashMap<IpAddr, i64>,
    /// Local changes not yet certainly visible in a reload: IP → (expiry or None for unblocked, when).
    local: HashMap<IpAddr, (Option<i64>, Instant)>,
}

/// This router's copy of the active blocks.
#[derive(Default)]
pub struct BlockList {
    inner: RwLock<Inner>,
}

impl BlockList {
    /// When `ip` is blocked now, the block's expiry (Unix ms).
    pub fn blocked_until(&self, ip: IpAddr) -> Option<i64> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.blocked.get(&ip).copied().filter(|until| *until > now_ms())
    }

    /// Applies a block made through this router at once.
    pub fn insert(&self, block: &BlockRecord) {
        let Ok(ip) = block.ip.parse::<IpAddr>() else { return };
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.blocked.insert(ip, block.expires_at_ms);
        inner.local.insert(ip, (Some(block.expires_at_ms), Instant::now()));
    }

    /// Lifts a block through this router at once.
    pub fn remove(&self, ip: IpAddr) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.blocked.remove(&ip);
        inner.local.insert(ip, (None, Instant::now()));
    }

    /// Replaces the list with a reload from the meta group.
    pub fn replace(&self, blocks: Vec<BlockRecord>) {
        let mut blocked: HashMap<IpAddr, i64> = blocks.iter().filter_map(|b| Some((b.ip.parse().ok()?, b.expires_at_ms))).collect();
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.local.retain(|_, (_, at)| at.elapsed() < LOCAL_GRACE);
        for (ip, (until, _)) in &inner.local {
            match until {
                Some(until) => {
                    blocked.insert(*ip, *until);
                }
                None => {
                    blocked.remove(ip);
                }
            }
        }
        inner.blocked = blocked;
    }
}

/// Reloads the block list forever.
pub async fn refresh_loop(state: AppState) {
    let every = Duration::from_millis(state.config.security.block_refresh_ms.clamp(100, 60_000));
    loop {
        match state.cluster.meta_read(MetaQuery::Security(SecurityQuery::Blocks)).await {
            Ok(MetaQueryResult::Security(SecurityQueryResult::Blocks(list))) => state.security.blocks.replace(list),
            Ok(other) => debug!("block list reload: unexpected reply {other:?}"),
            Err(e) => debug!("block list reload: {e}"),
        }
        tokio::time::sleep(every).await;
    }
}

/// The middleware: resolves the client IP (as the rate limiter does), answers
/// 403 to a blocked one, and hands the IP on to handlers as [`ClientIp`].
/// A successful user or role mutation clears this router's caller cache.
pub async fn check(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let ip = state.rate_limits.client_ip(|name| req.headers().get(name).and_then(|v| v.to_str().ok()), peer);
    if let Some(ip) = ip
        && let Some(until) = state.security.blocks.blocked_until(ip)
    {
        let message = format!("your address {ip} is blocked until {}", iso8601_ms(until));
        return crate::error::ApiError::IpBlocked(message).into_response();
    }
    req.extensions_mut().insert(ClientIp(ip));
    let path = req.uri().path();
    let changes_callers = req.method() != Method::GET
        && req.method() != Method::HEAD
        && (path.starts_with("/api/v1/admin/users") || path.starts_with("/api/v1/admin/roles"));
    let resp = next.run(req).await;
    if changes_callers && resp.status().is_success() {
        state.security.callers.clear();
    }
    resp
}
