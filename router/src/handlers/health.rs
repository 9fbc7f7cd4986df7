//! `/health`, `/livez`, `/readyz` (no authentication).

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use tessera_api::http::Health;

use crate::state::AppState;

/// `GET /health`: status, version and uptime in seconds.
pub async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: tessera_api::VERSION.into(),
        uptime: state.started.elapsed().as_secs(),
    })
}

/// `GET /livez`: the process is up.
pub async fn livez() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: 200 once every group has a reachable leader and start-up
/// provisioning is done; 503 with the reason otherwise.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let reason = match state.cluster.readiness() {
        Err(reason) => Some(reason),
        Ok(()) if !state.provisioning_done.load(Ordering::Relaxed) => {
            Some("provisioning the admin user from the environment".to_string())
        }
        Ok(()) => None,
    };
    match reason {
        None => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "not ready", "reason": reason}))),
    }
}
