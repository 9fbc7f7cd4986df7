//! The block-list middleware: every request is checked against this router's
//! copy of the active IP blocks before anything else runs, `/health` included
//! (the copy and its reload: `crate::services::block_list`).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tessera_api::http::iso8601_ms;

use crate::services::security::ClientIp;
use crate::state::AppState;

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
