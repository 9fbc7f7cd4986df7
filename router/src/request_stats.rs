//! What this router measured of the requests it served: per route (method and
//! path template) counts by status class and a latency histogram since start,
//! and every request of the last minute. `GET /api/v1/admin/stats` and the
//! dashboard read it; the middleware [`record`] feeds it. [`publish_loop`]
//! writes the figures since start to the meta group every few seconds, so the
//! stats answer of any router merges every router's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::meta::{RouteStatsRecord, RouterStatsRecord};

use crate::state::AppState;

/// How often a router publishes its figures.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(5);
/// Published figures older than this are left out of the merge (their router is gone).
pub const MERGE_MAX_AGE_MS: i64 = 10 * 60 * 1000;

/// The window of the "last minute" figures.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Most requests the window keeps (beyond, the oldest are dropped early).
const WINDOW_CAP: usize = 200_000;
/// Latencies are recorded in microseconds, up to 10 minutes, 2 significant digits.
const MAX_MICROS: u64 = 600_000_000;

/// Counts and latencies of one route (or of a model, or of everything).
pub struct RouteFigures {
    pub requests: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    latency: Histogram<u64>,
}

impl RouteFigures {
    fn new() -> RouteFigures {
        RouteFigures {
            requests: 0,
            client_errors: 0,
            server_errors: 0,
            latency: Histogram::new_with_bounds(1, MAX_MICROS, 2).expect("valid histogram bounds"),
        }
    }

    fn add(&mut self, status: u16, micros: u64) {
        self.requests += 1;
        match status {
            400..=499 => self.client_errors += 1,
            500..=599 => self.server_errors += 1,
            _ => {}
        }
        let _ = self.latency.record(micros.clamp(1, MAX_MICROS));
    }

    fn merge(&mut self, other: &RouteFigures) {
        self.requests += other.requests;
        self.client_errors += other.client_errors;
        self.server_errors += other.server_errors;
        let _ = self.latency.add(&other.latency);
    }

    /// The figures as published.
    fn export(&self, method: &str, route: &str) -> RouteStatsRecord {
        RouteStatsRecord {
            method: method.to_string(),
            route: route.to_string(),
            requests: self.requests,
            client_errors: self.client_errors,
            server_errors: self.server_errors,
            latency_micros: self.latency.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect(),
        }
    }

    /// The figures another router published.
    fn import(record: &RouteStatsRecord) -> RouteFigures {
        let mut f = RouteFigures::new();
        f.requests = record.requests;
        f.client_errors = record.client_errors;
        f.server_errors = record.server_errors;
        for &(micros, count) in &record.latency_micros {
            let _ = f.latency.record_n(micros.clamp(1, MAX_MICROS), count);
        }
        f
    }

    /// `{requests, client_errors, server_errors, p50_ms, p90_ms, p99_ms, max_ms}`.
    pub fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "client_errors": self.client_errors,
            "server_errors": self.server_errors,
            "p50_ms": ms(self.latency.value_at_quantile(0.5)),
            "p90_ms": ms(self.latency.value_at_quantile(0.9)),
            "p99_ms": ms(self.latency.value_at_quantile(0.99)),
            "max_ms": ms(self.latency.max()),
        })
    }
}

fn ms(micros: u64) -> f64 {
    (micros as f64 / 10.0).round() / 100.0
}

/// One request of the last minute.
struct Recent {
    at: Instant,
    status: u16,
    micros: u64,
}

#[derive(Default)]
struct Inner {
    /// (method, route template) → figures since start.
    routes: BTreeMap<(String, String), RouteFigures>,
    recent: VecDeque<Recent>,
}

/// This router's request figures.
#[derive(Default)]
pub struct RequestStats {
    inner: Mutex<Inner>,
}

/// The last minute's figures.
pub struct LastMinute {
    pub requests: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl LastMinute {
    /// Server errors per request (0 without requests).
    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 { 0.0 } else { self.server_errors as f64 / self.requests as f64 }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "rate_per_sec": (self.requests as f64 / WINDOW.as_secs_f64() * 100.0).round() / 100.0,
            "client_errors": self.client_errors,
            "server_errors": self.server_errors,
            "error_rate": (self.error_rate() * 10_000.0).round() / 10_000.0,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
        })
    }
}

impl RequestStats {
    /// Records one served request.
    pub fn add(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let micros = elapsed.as_micros().min(u128::from(MAX_MICROS)) as u64;
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.routes.entry((method.to_string(), route.to_string())).or_insert_with(RouteFigures::new).add(status, micros);
        inner.recent.push_back(Recent { at: now, status, micros });
        Self::expire(&mut inner.recent, now);
    }

    fn expire(recent: &mut VecDeque<Recent>, now: Instant) {
        while recent.front().is_some_and(|r| now.duration_since(r.at) > WINDOW) || recent.len() > WINDOW_CAP {
            recent.pop_front();
        }
    }

    /// Requests of the last minute: counts and latency percentiles.
    pub fn last_minute(&self) -> LastMinute {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Self::expire(&mut inner.recent, Instant::now());
        let mut latency = Histogram::<u64>::new_with_bounds(1, MAX_MICROS, 2).expect("valid histogram bounds");
        let (mut client_errors, mut server_errors) = (0, 0);
        for r in &inner.recent {
            let _ = latency.record(r.micros.clamp(1, MAX_MICROS));
            match r.status {
                400..=499 => client_errors += 1,
                500..=599 => server_errors += 1,
                _ => {}
            }
        }
        LastMinute {
            requests: inner.recent.len() as u64,
            client_errors,
            server_errors,
            p50_ms: ms(latency.value_at_quantile(0.5)),
            p99_ms: ms(latency.value_at_quantile(0.99)),
        }
    }

    /// Figures since start: in total, by model and by route.
    pub fn snapshot(&self) -> Value {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        summary(&inner.routes)
    }

    /// How many requests this router counted since start.
    pub fn requests(&self) -> u64 {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.routes.values().map(|f| f.requests).sum()
    }

    /// This router's figures since start, as published.
    pub fn export(&self) -> Vec<RouteStatsRecord> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.routes.iter().map(|((method, route), f)| f.export(method, route)).collect()
    }

    /// This router's figures merged with the `others` routers published: in
    /// total, by model and by route (as [`RequestStats::snapshot`]).
    pub fn merged_snapshot(&self, others: &[RouterStatsRecord]) -> Value {
        let mut merged: BTreeMap<(String, String), RouteFigures> = BTreeMap::new();
        {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            for (key, f) in &inner.routes {
                merged.entry(key.clone()).or_insert_with(RouteFigures::new).merge(f);
            }
        }
        for record in others {
            for r in &record.routes {
                let f = RouteFigures::import(r);
                merged.entry((r.method.clone(), r.route.clone())).or_insert_with(RouteFigures::new).merge(&f);
            }
        }
        summary(&merged)
    }
}

/// In total, by model and by route, of `routes`.
fn summary(routes_figures: &BTreeMap<(String, String), RouteFigures>) -> Value {
    let mut total = RouteFigures::new();
    let mut models: BTreeMap<&'static str, RouteFigures> = BTreeMap::new();
    let mut routes = Vec::new();
    for ((method, route), figures) in routes_figures {
        total.merge(figures);
        models.entry(model_of(route)).or_insert_with(RouteFigures::new).merge(figures);
        let mut entry = figures.to_json();
        entry["method"] = json!(method);
        entry["route"] = json!(route);
        entry["model"] = json!(model_of(route));
        routes.push(entry);
    }
    let by_model: Vec<Value> = models
        .iter()
        .map(|(model, f)| {
            let mut entry = f.to_json();
            entry["model"] = json!(model);
            entry
        })
        .collect();
    json!({"totals": total.to_json(), "by_model": by_model, "by_route": routes})
}

/// The data model (or area) a route template belongs to.
pub fn model_of(route: &str) -> &'static str {
    let rest = route.strip_prefix("/api/v1/").unwrap_or(route);
    let first = rest.split('/').next().unwrap_or_default();
    match first {
        "kv" => "kv",
        "query" | "databases" | "tables" => "sql",
        "documents" => "documents",
        "timeseries" => "timeseries",
        "streaming" => "streaming",
        "graph" => "graph",
        "objects" => "objects",
        "vector" => "vectors",
        "import" => "import",
        "auth" => "auth",
        "admin" if rest.starts_with("admin/objects/") => "objects",
        "admin" => "admin",
        "compliance" => "compliance",
        _ => "other",
    }
}

/// Publishes this router's figures to the meta group every
/// [`PUBLISH_INTERVAL`] when they changed, for the router's life.
pub async fn publish_loop(state: AppState) {
    let mut tick = tokio::time::interval(PUBLISH_INTERVAL);
    let mut published = 0;
    loop {
        tick.tick().await;
        let requests = state.request_stats.requests();
        if requests == published {
            continue;
        }
        if publish(&state).await.is_ok() {
            published = requests;
        }
    }
}

/// Writes this router's figures since start to the meta group.
pub async fn publish(state: &AppState) -> Result<(), crate::error::ApiError> {
    let record = RouterStatsRecord { router: state.router_instance.clone(), at_ms: 0, routes: state.request_stats.export() };
    match state.cluster.meta_write(MetaOp::PutRouterStats(record)).await {
        Ok(Reply::Rejected(r)) => Err(r.into()),
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::debug!("request figures not published yet: {e}");
            Err(e.into())
        }
    }
}

/// Probes, not requests: a starting router answers `/readyz` 503 by design.
pub(crate) const PROBES: [&str; 4] = ["/health", "/livez", "/readyz", "/metrics"];

/// With `TESSERA_RECORD_API_SHAPES`: the shape of a successful JSON answer is
/// merged into that file (see [`crate::openapi::observed::RECORDING`]).
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
        let key = crate::openapi::observed::route_key(method, route);
        if let Err(e) = crate::openapi::observed::record_into(path, &key, parts.status.as_u16(), &value) {
            tracing::warn!("recording the shape of {key}: {e}");
        }
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Middleware (on matched routes): records the method, route template, status
/// and latency of every request but the health probes.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    if PROBES.contains(&route.as_str()) {
        let mut response = next.run(req).await;
        response.extensions_mut().insert(crate::openapi::RouteTemplate(route));
        return response;
    }
    let kind = crate::activity::kind_of(req.method(), &route);
    let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
    let client_ip = state.rate_limits.client_ip(|name| req.headers().get(name).and_then(|v| v.to_str().ok()), peer);
    // The request's span: the root of its trace (exported when `telemetry` is on),
    // carried into the nodes by the gRPC client.
    let span = tracing::info_span!("http_request", http.method = %method, http.route = %route, http.status_code = tracing::field::Empty);
    let mut response = tracing::Instrument::instrument(next.run(req), span.clone()).await;
    response.extensions_mut().insert(crate::openapi::RouteTemplate(route.clone()));
    if let Some(path) = crate::openapi::observed::RECORDING.as_deref() {
        response = record_shape(path, &method, &route, response).await;
    }
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    span.record("http.status_code", status);
    if status == 403 {
        // A refused permission is a security event (spec 02 `unauthorized_access`).
        let user = response.extensions().get::<crate::activity::ActivityUser>().map(|u| u.0.clone());
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
            id: crate::auth::new_id(),
            at_ms: tessera_api::command::now_ms(),
            kind: kind.to_string(),
            user: ext.get::<crate::activity::ActivityUser>().map_or_else(|| "anonymous".to_string(), |u| u.0.clone()),
            method,
            route,
            status: response.status().as_u16(),
            duration_ms: elapsed.as_millis() as u64,
            detail: ext.get::<crate::activity::ActivityDetail>().map(|d| d.0.clone()).unwrap_or_default(),
            router: state.router_name.clone(),
        });
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_add_up_by_route_and_model() {
        let stats = RequestStats::default();
        stats.add("POST", "/api/v1/kv/keys", 200, Duration::from_millis(2));
        stats.add("POST", "/api/v1/kv/keys", 400, Duration::from_millis(4));
        stats.add("GET", "/api/v1/kv/keys/{*key}", 503, Duration::from_millis(40));
        stats.add("POST", "/api/v1/query", 200, Duration::from_millis(10));
        let snap = stats.snapshot();
        assert_eq!(snap["totals"]["requests"], 4);
        assert_eq!(snap["totals"]["client_errors"], 1);
        assert_eq!(snap["totals"]["server_errors"], 1);
        let kv = snap["by_model"].as_array().unwrap().iter().find(|m| m["model"] == "kv").unwrap();
        assert_eq!(kv["requests"], 3);
        assert!(kv["max_ms"].as_f64().unwrap() >= 39.0, "{kv}");
        let minute = stats.last_minute();
        assert_eq!((minute.requests, minute.server_errors), (4, 1));
        assert!((minute.error_rate() - 0.25).abs() < 1e-9);
        assert!(minute.p50_ms >= 2.0 && minute.p99_ms >= 39.0, "{}", minute.to_json());
    }

    #[test]
    fn published_figures_merge_with_this_routers() {
        let other = RequestStats::default();
        other.add("POST", "/api/v1/kv/keys", 200, Duration::from_millis(100));
        other.add("POST", "/api/v1/kv/keys", 503, Duration::from_millis(300));
        let published = RouterStatsRecord { router: "b".into(), at_ms: 1, routes: other.export() };
        let this = RequestStats::default();
        this.add("POST", "/api/v1/kv/keys", 200, Duration::from_millis(2));
        this.add("POST", "/api/v1/query", 200, Duration::from_millis(10));
        let merged = this.merged_snapshot(&[published]);
        assert_eq!(merged["totals"]["requests"], 4);
        assert_eq!(merged["totals"]["server_errors"], 1);
        let kv = merged["by_route"].as_array().unwrap().iter().find(|r| r["route"] == "/api/v1/kv/keys").unwrap();
        assert_eq!(kv["requests"], 3);
        let max = kv["max_ms"].as_f64().unwrap();
        assert!((295.0..=305.0).contains(&max), "the other router's slowest request counts: {kv}");
        assert_eq!(this.snapshot()["totals"]["requests"], 2, "this router's own figures are unchanged");
    }
}
