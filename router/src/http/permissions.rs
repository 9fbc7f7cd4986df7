//! Access control: every route is declared with its decision in the route table
//! ([`crate::http::route_table`]), checked by one middleware before any handler runs. A
//! request whose route has no decision is refused (fail closed).
//!
//! Built-in roles: admin holds every permission; operator every `read:*` and
//! `write:*`; viewer every `read:*`. `manage:*` permissions (users, roles, node
//! lifecycle, security, vault, backup, compliance) belong to admins only.
//! Custom roles add any other permission to a user (`read:*`, `write:*`,
//! `access:classified`; `manage:*` ones are refused and ignored).

use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

pub use crate::route_access::Access;

/// The permission `Access::Metrics` asks of a logged-in caller.
pub const METRICS_PERMISSION: &str = "read:cluster";

use Access::Public;

/// What a session opened without a second factor may still do when
/// `auth.mfa_required` is on: turn MFA on, or log out (public routes need no
/// user at all). Every other route needs a session opened with a code.
const MFA_ENROLLMENT_ROUTES: [&str; 2] = ["/api/v1/auth/mfa/enable", "/api/v1/auth/logout"];

/// Whether the request's bearer is the configured metrics token.
fn presents_metrics_token(state: &AppState, req: &Request) -> bool {
    let Some(token) = &state.config.server.metrics_token else { return false };
    let offered =
        req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    offered.is_some_and(|o| token.matches(o))
}

/// The permission check of a request to the route `template` (run by the
/// route layer, [`crate::http::request_stats::record`]): authenticates, checks
/// the route's decision, and hands the caller on to the handler (`next`).
pub async fn authorize(state: &AppState, template: &str, req: Request, next: Next) -> Response {
    let Some(access) = crate::route_access::decision(state.decisions(), req.method().as_str(), template).map(|d| d.access) else {
        // A path of the table asked with a method it does not take: 405 naming
        // the ones it does. Anything else without a decision is refused.
        let allow = crate::route_access::methods_of(state.decisions(), template);
        if !allow.is_empty() {
            return ApiError::MethodNotAllowed { method: req.method().to_string(), path: template.to_string(), allow: allow.join(", ") }
                .into_response();
        }
        return ApiError::Forbidden(format!("no access decision for {} {template}", req.method())).into_response();
    };
    if access == Public {
        return next.run(req).await;
    }
    if access == Access::Metrics && presents_metrics_token(state, &req) {
        return next.run(req).await;
    }
    let access = if access == Access::Metrics { Access::Permission(METRICS_PERMISSION) } else { access };
    let (mut parts, body) = req.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, state).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    if state.config.auth.mfa_required
        && let Caller::User { user, mfa_verified: false, .. } = &caller
        && !MFA_ENROLLMENT_ROUTES.contains(&template)
    {
        let mut refused = ApiError::Forbidden(
            "this cluster requires a second factor (auth.mfa_required): turn it on with POST /api/v1/auth/mfa/enable if you have not, then log in again with a code".into(),
        )
        .into_response();
        refused.extensions_mut().insert(crate::services::activity::ActivityUser(user.username.clone()));
        return refused;
    }
    if let Access::Permission(p) = access
        && !caller.has(p)
    {
        let mut refused = ApiError::Forbidden(format!("this route needs the {p} permission")).into_response();
        if let Caller::User { user, .. } = &caller {
            // Names the caller in the security event a refusal records.
            refused.extensions_mut().insert(crate::services::activity::ActivityUser(user.username.clone()));
        }
        return refused;
    }
    let idempotency = match parts.headers.get(crate::services::idempotency::HEADER).map(|v| v.to_str()) {
        None => None,
        Some(Ok(key)) if crate::services::idempotency::valid_key(key) => match &caller {
            Caller::User { user, .. } => Some(crate::services::idempotency::Scope::new(&user.id, key)),
            Caller::Bootstrap => None,
        },
        Some(_) => {
            return ApiError::BadRequest("Idempotency-Key must be 1-255 visible ASCII characters".into()).into_response();
        }
    };
    let user = match &caller {
        Caller::User { user, .. } => user.username.clone(),
        Caller::Bootstrap => "bootstrap".to_string(),
    };
    parts.extensions.insert(caller);
    let req = Request::from_parts(parts, body);
    let mut response = match idempotency {
        Some(scope) => crate::services::idempotency::with_scope(scope, next.run(req)).await,
        None => next.run(req).await,
    };
    response.extensions_mut().insert(crate::services::activity::ActivityUser(user));
    response
}
