//! The [`Caller`] extractor every authenticated route takes: it reads what the
//! request presents (bearer token, client address, User-Agent) and asks the
//! auth service who that is.

use axum::extract::FromRequestParts;
use axum::http::Method;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::services::auth::{Caller, Presented, SessionClient, resolve};
use crate::state::AppState;

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// `?token=` of a WebSocket upgrade request (browsers cannot set headers on
/// WebSockets); other requests must use the header.
fn websocket_query_token(parts: &Parts) -> Option<String> {
    let upgrade = parts.headers.get(axum::http::header::UPGRADE)?.to_str().ok()?;
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return None;
    }
    let axum::extract::Query(q) = axum::extract::Query::<std::collections::HashMap<String, String>>::try_from_uri(&parts.uri).ok()?;
    q.get("token").filter(|t| !t.is_empty()).cloned()
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let ip = parts.extensions.get::<crate::services::security::ClientIp>().and_then(|c| c.0);
        let presented = Presented {
            token: bearer(parts).map(str::to_string).or_else(|| websocket_query_token(parts)),
            client: SessionClient { ip: ip.map(|i| i.to_string()), agent: user_agent(&parts.headers) },
            ip,
            read_only: parts.method == Method::GET,
            path: parts.uri.path(),
        };
        resolve(state, presented).await
    }
}

/// A request's User-Agent (at most 256 characters), if any.
pub fn user_agent(headers: &axum::http::HeaderMap) -> Option<String> {
    let agent = headers.get(axum::http::header::USER_AGENT)?.to_str().ok()?;
    Some(agent.chars().take(256).collect())
}
