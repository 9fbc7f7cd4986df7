//! The block list at the front door: every request is checked against this
//! router's copy of the active IP blocks before anything else runs, `/health`
//! included (the copy and its reload: `crate::services::block_list`).

use std::net::IpAddr;

use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use tessera_api::http::iso8601_ms;

use crate::state::AppState;

/// The 403 answer to a client whose address is blocked.
pub fn check(state: &AppState, ip: Option<IpAddr>) -> Result<(), Response> {
    if let Some(ip) = ip
        && let Some(until) = state.security.blocks.blocked_until(ip)
    {
        let message = format!("your address {ip} is blocked until {}", iso8601_ms(until));
        return Err(crate::error::ApiError::IpBlocked(message).into_response());
    }
    Ok(())
}

/// Whether `req` may change users or roles: once it succeeds, this router's
/// caller cache is cleared.
pub fn changes_callers(req: &Request) -> bool {
    let path = req.uri().path();
    req.method() != Method::GET
        && req.method() != Method::HEAD
        && (path.starts_with("/api/v1/admin/users") || path.starts_with("/api/v1/admin/roles"))
}
