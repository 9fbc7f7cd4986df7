//! The IP block list: each router keeps a copy of the meta group's active blocks,
//! reloaded every `security.block_refresh_ms` (so a check costs no quorum read),
//! and checks every request against it before anything else runs, `/health`
//! included. A block ends at its expiry on this router's clock even between
//! reloads; a block made through this router applies here at once, through
//! another router within one reload.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::http::iso8601_ms;
use tessera_api::security::{SecurityQuery, SecurityQueryResult};
use tracing::debug;

use super::ClientIp;
use crate::state::AppState;

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
