//! The request-statistics middleware: records the method, route template,
//! status and latency of every request into this router's figures
//! (`services::request_stats`), notes its activity, and with
//! `TESSERA_RECORD_API_SHAPES` records the shapes of JSON answers.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::services::request_stats::PROBES;
use crate::state::AppState;

/// With `TESSERA_RECORD_API_SHAPES`: the shape of a successful JSON answer is
/// merged into that file (see [`crate::http::openapi::observed::RECORDING`]).
async fn record_shape(path: &std::path::Path, method: &str, route: &str, response: Response) -> Response {
    let json = response.headers().get(axum::http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    // The document itself is not described by its own shape.
    if !json || !response.status().is_success() || response.status().as_u16() == 204 || route == "/api/v1/openapi.json" {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        let key = crate::http::openapi::observed::route_key(method, route);
        if let Err(e) = crate::http::openapi::observed::record_into(path, &key, parts.status.as_u16(), &value) {
            tracing::warn!("recording the shape of {key}: {e}");
        }
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Middleware (on matched routes): runs the permission check
/// ([`crate::http::permissions::authorize`]) and the handler, and records the
/// method, route template, status and latency of every request but the health
/// probes, refusals included. One layer for both: each layer boxes and moves
/// the request's future.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    if PROBES.contains(&route.as_str()) {
        let mut response = crate::http::permissions::authorize(&state, &route, req, next).await;
        response.extensions_mut().insert(crate::http::openapi::RouteTemplate(route));
        return response;
    }
    let kind = crate::services::activity::kind_of(req.method().as_str(), &route);
    // Resolved once, by the front door.
    let client_ip = req.extensions().get::<crate::services::security::ClientIp>().and_then(|c| c.0);
    // The request's span: the root of its trace (exported when `telemetry` is on),
    // carried into the nodes by the gRPC client. Made only when something reads
    // it (an exporter, or debug logs naming the request): the log layer formats
    // a span's fields when it is made.
    let span = if tessera_api::telemetry::exporting() || tracing::enabled!(tracing::Level::DEBUG) {
        tracing::info_span!("http_request", http.method = %method, http.route = %route, http.status_code = tracing::field::Empty)
    } else {
        tracing::Span::none()
    };
    let handled = crate::http::permissions::authorize(&state, &route, req, next);
    let mut response = tracing::Instrument::instrument(handled, span.clone()).await;
    response.extensions_mut().insert(crate::http::openapi::RouteTemplate(route.clone()));
    let typed = || crate::route_access::decision(state.decisions(), &method, &route).is_some_and(|d| d.doc.response.is_some());
    if let Some(path) = crate::http::openapi::observed::RECORDING.as_deref()
        && !typed()
    {
        response = record_shape(path, &method, &route, response).await;
    }
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    span.record("http.status_code", status);
    if status == 403 {
        // A refused permission is a security event (spec 02 `unauthorized_access`).
        let user = response.extensions().get::<crate::services::activity::ActivityUser>().map(|u| u.0.clone());
        state.activities.note_event(tessera_api::security::NewSecurityEvent {
            at_ms: Some(tessera_api::command::now_ms()),
            event_type: "unauthorized_access".into(),
            severity: "medium".into(),
            source_ip: client_ip.map(|ip| ip.to_string()),
            username: user.clone(),
            description: format!("permission denied: {method} {route} for {}", user.as_deref().unwrap_or("an anonymous caller")),
        });
    }
    state.request_stats.add(&method, &route, status, elapsed);
    let route_label = if route.is_empty() { "unmatched".to_string() } else { route.clone() };
    metrics::counter!("tessera_http_requests_total", "method" => method.clone(), "route" => route_label.clone(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("tessera_http_request_duration_seconds", "method" => method.clone(), "route" => route_label)
        .record(elapsed.as_secs_f64());
    if let Some(kind) = kind {
        let ext = response.extensions();
        state.activities.note(tessera_api::meta::ActivityRecord {
            id: crate::services::auth::new_id(),
            at_ms: tessera_api::command::now_ms(),
            kind: kind.to_string(),
            user: ext.get::<crate::services::activity::ActivityUser>().map_or_else(|| "anonymous".to_string(), |u| u.0.clone()),
            method,
            route,
            status: response.status().as_u16(),
            duration_ms: elapsed.as_millis() as u64,
            detail: ext.get::<crate::services::activity::ActivityDetail>().map(|d| d.0.clone()).unwrap_or_default(),
            router: state.router_name.clone(),
        });
    }
    response
}
