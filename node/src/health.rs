//! The node's health probes over plain HTTP (`server.health_addr`), for
//! orchestrators: `GET /livez` (the process serves) and `GET /readyz` (every
//! group placed here runs, knows its leader and has caught up far enough to
//! vote), and `GET /metrics` for Prometheus, which answers only a caller
//! presenting the metrics token (`Authorization: Bearer <server.metrics_token>`):
//! its group and storage figures are not for anyone who can reach the port.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use tessera_api::secret::SecretString;

use crate::host::Host;

/// What the health listener's handlers share.
#[derive(Clone)]
struct Probes {
    host: Arc<Host>,
    metrics_token: Option<SecretString>,
}

/// Serves the probes on `addr` until the process ends.
pub async fn serve(host: Arc<Host>, addr: &str, metrics_token: Option<SecretString>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving health probes (/livez, /readyz)");
    let app = axum::Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_if_allowed))
        .with_state(Probes { host, metrics_token });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("health listener stopped: {e}");
        }
    });
    Ok(())
}

/// `GET /livez`: 200 while the process runs (its node id and version).
async fn livez(State(Probes { host, .. }): State<Probes>) -> Json<Value> {
    Json(json!({"status": "ok", "node_id": host.id, "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /metrics` for a caller with the metrics token: 401 without a token or
/// with another one, 403 when the node has none configured.
async fn metrics_if_allowed(State(probes): State<Probes>, headers: axum::http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(token) = &probes.metrics_token else {
        let message = "metrics are served only with a token: set server.metrics_token (SERVICE_METRICS_TOKEN)";
        return (StatusCode::FORBIDDEN, Json(json!({"error": "FORBIDDEN", "message": message}))).into_response();
    };
    let offered = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !offered.is_some_and(|o| token.matches(o)) {
        let message = "GET /metrics needs Authorization: Bearer <metrics token>";
        return (
            StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({"error": "UNAUTHORIZED", "message": message})),
        )
            .into_response();
    }
    metrics(probes.host).await.into_response()
}

/// `GET /metrics` (Prometheus text format): per hosted group its term, leader,
/// last log, committed and applied indexes and snapshot index; WAL group
/// commits; RocksDB sizes, running compactions and write stalls; the data
/// directory's bytes and its filesystem's free bytes; resident memory.
async fn metrics(host: Arc<Host>) -> (StatusCode, [(axum::http::HeaderName, &'static str); 1], String) {
    use metrics::{counter, gauge};
    for (group, g) in host.hosted() {
        let m = g.raft.metrics().borrow().clone();
        let group = group.to_string();
        gauge!("tessera_raft_term", "group" => group.clone()).set(m.current_term as f64);
        gauge!("tessera_raft_leader", "group" => group.clone()).set(crate::host::known_leader(&m, host.id).unwrap_or(0) as f64);
        gauge!("tessera_raft_is_leader", "group" => group.clone()).set(if crate::host::leads_now(&m, host.id) { 1.0 } else { 0.0 });
        gauge!("tessera_raft_last_log_index", "group" => group.clone()).set(m.last_log_index.unwrap_or(0) as f64);
        gauge!("tessera_raft_applied_index", "group" => group.clone()).set(m.last_applied.map_or(0, |l| l.index) as f64);
        gauge!("tessera_raft_snapshot_index", "group" => group.clone()).set(m.snapshot.map_or(0, |l| l.index) as f64);
        gauge!("tessera_raft_voters", "group" => group).set(m.membership_config.voter_ids().count() as f64);
    }
    let wal = host.store.wal_stats();
    counter!("tessera_wal_syncs_total").absolute(wal.syncs);
    counter!("tessera_wal_entries_synced_total").absolute(wal.entries);
    for (name, property) in [
        ("tessera_rocksdb_sst_bytes", "rocksdb.total-sst-files-size"),
        ("tessera_rocksdb_live_data_bytes", "rocksdb.estimate-live-data-size"),
        ("tessera_rocksdb_memtable_bytes", "rocksdb.cur-size-all-mem-tables"),
        ("tessera_rocksdb_running_compactions", "rocksdb.num-running-compactions"),
        ("tessera_rocksdb_pending_compaction_bytes", "rocksdb.estimate-pending-compaction-bytes"),
    ] {
        gauge!(name).set(host.store.int_property(property) as f64);
    }
    for (name, property) in [
        ("tessera_rocksdb_write_stopped", "rocksdb.is-write-stopped"),
        ("tessera_rocksdb_delayed_write_rate", "rocksdb.actual-delayed-write-rate"),
    ] {
        gauge!(name).set(host.store.db_int_property(property) as f64);
    }
    let (free, total) = crate::host::filesystem_space(&host.data_dir);
    gauge!("tessera_data_dir_bytes").set(host.disk_bytes() as f64);
    gauge!("tessera_filesystem_free_bytes").set(free as f64);
    gauge!("tessera_filesystem_total_bytes").set(total as f64);
    gauge!("tessera_process_resident_memory_bytes").set(crate::host::resident_bytes() as f64);
    gauge!("tessera_process_uptime_seconds").set(host.started.elapsed().as_secs_f64());
    let text = tessera_api::runtime::prometheus().render();
    (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// `GET /readyz`: 200 once the node can take its share of the work, 503 with
/// the reason otherwise.
async fn readyz(State(Probes { host, .. }): State<Probes>) -> (StatusCode, Json<Value>) {
    match host.readiness() {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready", "node_id": host.id}))),
        Err(reason) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "not ready", "node_id": host.id, "reason": reason.to_string()})))
        }
    }
}
