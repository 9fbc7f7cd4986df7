//! The node's health probes over plain HTTP (`server.health_addr`), for
//! orchestrators: `GET /livez` (the process serves) and `GET /readyz` (every
//! group placed here runs, knows its leader and has caught up far enough to vote).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use crate::host::Host;

/// Serves the probes on `addr` until the process ends.
pub async fn serve(host: Arc<Host>, addr: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving health probes (/livez, /readyz)");
    let app = axum::Router::new().route("/livez", get(livez)).route("/readyz", get(readyz)).with_state(host);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("health listener stopped: {e}");
        }
    });
    Ok(())
}

/// `GET /livez`: 200 while the process runs (its node id and version).
async fn livez(State(host): State<Arc<Host>>) -> Json<Value> {
    Json(json!({"status": "ok", "node_id": host.id, "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /readyz`: 200 once the node can take its share of the work, 503 with
/// the reason otherwise.
async fn readyz(State(host): State<Arc<Host>>) -> (StatusCode, Json<Value>) {
    match host.readiness() {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready", "node_id": host.id}))),
        Err(reason) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "not ready", "node_id": host.id, "reason": reason})))
        }
    }
}
