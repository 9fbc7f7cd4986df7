//! `tessera-router`: the stateless HTTP/JSON front end of a Tessera cluster.
//! Authenticates callers, maps each request to its shard, forwards it to the
//! right replica with the requested consistency, and merges fan-out results.

mod auth;
mod cluster;
mod config;
mod error;
mod handlers;
mod permissions;
mod ratelimit;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use clap::Parser;
use tracing::info;

use crate::cluster::Cluster;
use crate::config::RouterConfig;
use crate::error::ApiError;
use crate::state::{AppState, Inner, parse_consistency};

/// Command line of the router; everything else comes from the file and `SERVICE_*`.
#[derive(Parser)]
#[command(name = "tessera-router", version, about = "Tessera HTTP router")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "SERVICE_CONFIG")]
    config: Option<PathBuf>,
}

/// Every route of `/api/v1` and the probes.
fn routes(state: AppState) -> Router {
    use handlers::{admin, auth, health, kv, object};
    let body_limit = state.config.kv.max_value_bytes + state.config.kv.max_key_bytes + 64 * 1024;
    Router::new()
        .route("/health", get(health::health))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/api/v1/auth/login", post(auth::login))
        .route("/api/v1/auth/logout", post(auth::logout))
        .route("/api/v1/kv/keys", post(kv::put).get(kv::list).delete(kv::delete_prefix))
        .route("/api/v1/kv/keys/{*key}", get(kv::get).delete(kv::delete))
        .route("/api/v1/kv/count", get(kv::count))
        .route("/api/v1/admin/cluster", get(admin::cluster))
        .route("/api/v1/objects/buckets", get(object::list_buckets).post(object::create_bucket))
        .route("/api/v1/objects/buckets/{bucket}", get(object::bucket_stats).delete(object::drop_bucket))
        .route("/api/v1/objects/buckets/{bucket}/objects", get(object::list_objects))
        .route(
            "/api/v1/objects/buckets/{bucket}/object/{*key}",
            get(object::get_object).head(object::head_object).put(object::put_object).delete(object::delete_object),
        )
        .merge(handlers::sql::routes())
        .merge(handlers::document::routes())
        .merge(handlers::vector::routes())
        .merge(handlers::timeseries::routes())
        .merge(handlers::users::routes())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), permissions::authorize))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(state.clone(), ratelimit::limit))
        .with_state(state)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = RouterConfig::load(cli.config.as_deref())?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&config.log_level)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let default_consistency = parse_consistency(&config.replication.consistency_level)
        .ok_or_else(|| anyhow::anyhow!("replication.consistency_level must be one, quorum or all"))?;

    let cluster = Cluster::new(config.seeds(), Duration::from_secs(config.server.request_timeout.clamp(1, 300)));
    let addr: SocketAddr = format!("{}:{}", config.server.host, config.server.port).parse()?;
    let rate_limits = ratelimit::RateLimits::new(config.rate_limit.clone());
    let state = AppState {
        inner: Arc::new(Inner {
            config,
            cluster: cluster.clone(),
            started: Instant::now(),
            users_exist: AtomicBool::new(false),
            provisioning_done: AtomicBool::new(false),
            default_consistency,
            rate_limits,
        }),
    };

    // Keep the view of leaders and liveness fresh.
    tokio::spawn(async move {
        loop {
            cluster.refresh().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    tokio::spawn(auth::provision_admin(state.clone()));
    tokio::spawn(handlers::timeseries::retention_loop(state.clone()));

    let listener = tokio::net::TcpListener::bind(addr).await?;
    info!(%addr, "router listening");
    axum::serve(listener, routes(state).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    info!("stopped");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => info!("interrupt received"),
    }
}
