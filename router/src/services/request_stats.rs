//! What this router measured of the requests it served: per route (method and
//! path template) counts by status class and a latency histogram since start,
//! and every request of the last minute. `GET /api/v1/admin/stats` and the
//! dashboard read it; the request middleware feeds it. [`RequestStats::publish_loop`]
//! writes the figures since start to the meta group every few seconds, so the
//! stats answer of any router merges every router's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::Serialize;
use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::meta::{RouteStatsRecord, RouterStatsRecord};

use crate::cluster::ClusterClient;
use crate::error::ApiError;

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

    /// Counts and latency percentiles.
    pub fn view(&self) -> Figures {
        Figures {
            requests: self.requests,
            client_errors: self.client_errors,
            server_errors: self.server_errors,
            p50_ms: ms(self.latency.value_at_quantile(0.5)),
            p90_ms: ms(self.latency.value_at_quantile(0.9)),
            p99_ms: ms(self.latency.value_at_quantile(0.99)),
            max_ms: ms(self.latency.max()),
        }
    }
}

/// Counts and latencies (milliseconds) of a route, a model or everything.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Figures {
    pub requests: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One route's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RouteSummary {
    pub method: String,
    /// The route's template (`/api/v1/kv/keys/{*key}`).
    pub route: String,
    pub model: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// One model's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModelSummary {
    pub model: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// Figures in total, by model and by route.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Summary {
    pub totals: Figures,
    pub by_model: Vec<ModelSummary>,
    pub by_route: Vec<RouteSummary>,
}

/// The last minute's figures, as answered.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LastMinuteView {
    pub requests: u64,
    pub rate_per_sec: f64,
    pub client_errors: u64,
    pub server_errors: u64,
    /// Server errors per request.
    pub error_rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
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

    pub fn view(&self) -> LastMinuteView {
        LastMinuteView {
            requests: self.requests,
            rate_per_sec: (self.requests as f64 / WINDOW.as_secs_f64() * 100.0).round() / 100.0,
            client_errors: self.client_errors,
            server_errors: self.server_errors,
            error_rate: (self.error_rate() * 10_000.0).round() / 10_000.0,
            p50_ms: self.p50_ms,
            p99_ms: self.p99_ms,
        }
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
    pub fn snapshot(&self) -> Summary {
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
    pub fn merged_snapshot(&self, others: &[RouterStatsRecord]) -> Summary {
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
fn summary(routes_figures: &BTreeMap<(String, String), RouteFigures>) -> Summary {
    let mut total = RouteFigures::new();
    let mut models: BTreeMap<&'static str, RouteFigures> = BTreeMap::new();
    let mut by_route = Vec::new();
    for ((method, route), figures) in routes_figures {
        total.merge(figures);
        models.entry(model_of(route)).or_insert_with(RouteFigures::new).merge(figures);
        by_route.push(RouteSummary {
            method: method.clone(),
            route: route.clone(),
            model: model_of(route).into(),
            figures: figures.view(),
        });
    }
    let by_model = models.iter().map(|(model, f)| ModelSummary { model: (*model).into(), figures: f.view() }).collect();
    Summary { totals: total.view(), by_model, by_route }
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

/// Probes, not requests: a starting router answers `/readyz` 503 by design.
pub(crate) const PROBES: [&str; 4] = ["/health", "/livez", "/readyz", "/metrics"];

impl RequestStats {
    /// Publishes this router's figures (as `router`) to the meta group every
    /// [`PUBLISH_INTERVAL`] when they changed, for the router's life.
    pub async fn publish_loop(self: Arc<Self>, cluster: Arc<dyn ClusterClient>, router: String) {
        let mut tick = tokio::time::interval(PUBLISH_INTERVAL);
        let mut published = 0;
        loop {
            tick.tick().await;
            let requests = self.requests();
            if requests == published {
                continue;
            }
            if self.publish(&*cluster, &router).await.is_ok() {
                published = requests;
            }
        }
    }

    /// Writes this router's figures since start to the meta group.
    pub async fn publish(&self, cluster: &dyn ClusterClient, router: &str) -> Result<(), ApiError> {
        let record = RouterStatsRecord { router: router.to_string(), at_ms: 0, routes: self.export() };
        match cluster.meta_write(MetaOp::PutRouterStats(record)).await {
            Ok(Reply::Rejected(r)) => Err(r.into()),
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::debug!("request figures not published yet: {e}");
                Err(e.into())
            }
        }
    }
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
        let snap = serde_json::to_value(stats.snapshot()).unwrap();
        assert_eq!(snap["totals"]["requests"], 4);
        assert_eq!(snap["totals"]["client_errors"], 1);
        assert_eq!(snap["totals"]["server_errors"], 1);
        let kv = snap["by_model"].as_array().unwrap().iter().find(|m| m["model"] == "kv").unwrap();
        assert_eq!(kv["requests"], 3);
        assert!(kv["max_ms"].as_f64().unwrap() >= 39.0, "{kv}");
        let minute = stats.last_minute();
        assert_eq!((minute.requests, minute.server_errors), (4, 1));
        assert!((minute.error_rate() - 0.25).abs() < 1e-9);
        assert!(minute.p50_ms >= 2.0 && minute.p99_ms >= 39.0, "{:?}", minute.view());
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
        let merged = serde_json::to_value(this.merged_snapshot(&[published])).unwrap();
        assert_eq!(merged["totals"]["requests"], 4);
        assert_eq!(merged["totals"]["server_errors"], 1);
        let kv = merged["by_route"].as_array().unwrap().iter().find(|r| r["route"] == "/api/v1/kv/keys").unwrap();
        assert_eq!(kv["requests"], 3);
        let max = kv["max_ms"].as_f64().unwrap();
        assert!((295.0..=305.0).contains(&max), "the other router's slowest request counts: {kv}");
        assert_eq!(this.snapshot().totals.requests, 2, "this router's own figures are unchanged");
    }
}
