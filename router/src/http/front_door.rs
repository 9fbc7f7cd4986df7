//! The front door: the one middleware every request passes before routing, in
//! this order — the block list (403, `/health` included), the concurrency bound
//! (503), the per-IP rate limit (429) — and, on the way out, error answers made
//! outside the handlers get the JSON error body. One layer rather than four:
//! each `from_fn` layer boxes and moves the request's future and clones the
//! service under it, a measurable share of a router's work per request
//! (docs/performance.md). The checks themselves live in their own modules.

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::http::{block_check, ratelimit};
use crate::services::security::ClientIp;
use crate::state::AppState;

/// Routes the concurrency bound and the rate limit never refuse.
pub fn is_probe(path: &str) -> bool {
    matches!(path, "/health" | "/livez" | "/readyz")
}

/// The middleware.
pub async fn front_door(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let shape = crate::error::RequestShape::of(&req);
    let peer = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
    let ip = state.rate_limits.client_ip(|name| req.headers().get(name).and_then(|v| v.to_str().ok()), peer);
    let response = match admit(&state, &req, ip) {
        Err(refused) => refused,
        Ok(admitted) => {
            req.extensions_mut().insert(ClientIp(ip));
            let changes_callers = block_check::changes_callers(&req);
            let mut response = next.run(req).await;
            drop(admitted.slot);
            if let Some(allowance) = admitted.allowance {
                allowance.set_headers(response.headers_mut());
            }
            if changes_callers && response.status().is_success() {
                // A user or role changed: this router's cached callers are stale.
                state.security.callers.clear();
            }
            response
        }
    };
    crate::error::with_json_error_body(response, shape).await
}

/// What an admitted request holds while it runs.
struct Admitted {
    /// Its place under `server.max_connections`, if bounded.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Its rate-limit bucket's state, for the answer's headers.
    allowance: Option<ratelimit::Allowance>,
}

/// The checks, in order; the first refusal is the answer.
fn admit(state: &AppState, req: &Request, ip: Option<std::net::IpAddr>) -> Result<Admitted, Response> {
    block_check::check(state, ip)?;
    let path = req.uri().path();
    if is_probe(path) {
        return Ok(Admitted { slot: None, allowance: None });
    }
    let slot = ratelimit::take_slot(state)?;
    let allowance = ratelimit::limit(state, path, ip)?;
    Ok(Admitted { slot, allowance })
}
