//! `tessera-router`: the stateless HTTP/JSON front end of a Tessera cluster.
//! Authenticates callers, maps each request to its shard, forwards it to the
//! right replica with the requested consistency, and merges fan-out results.

mod cluster;
mod config;
mod console;
mod error;
mod http;
mod pgwire;
use http::handlers;
mod route_access;
mod secrets;
mod services;
mod state;
mod stream_hub;
#[cfg(test)]
mod tests;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use clap::Parser;
use tracing::info;

use crate::cluster::{ClusterClient, GrpcCluster};
use crate::config::RouterConfig;
use crate::error::ApiError;
use crate::http::permissions::Access::{Authenticated, Permission as P, Public};
use crate::http::request_stats;
use crate::http::route_table::RouteTable;
use crate::state::AppState;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line of the router; everything else comes from the file and `SERVICE_*`.
#[derive(Parser)]
#[command(name = "tessera-router", version, about = "Tessera HTTP router")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "SERVICE_CONFIG")]
    config: Option<PathBuf>,
}

/// Every route of `/api/v1` and the probes, with its access decision.
fn route_table() -> RouteTable {
    use handlers::{admin, auth, health, kv, object};
    RouteTable::new()
        .get("/health", Public, health::health)
        .get("/livez", Public, health::livez)
        .get("/readyz", Public, health::readyz)
        .answers(&[200, 503])
        .get("/metrics", crate::http::permissions::Access::Metrics, health::metrics)
        .get("/api/v1/openapi.json", Public, health::openapi)
        .post("/api/v1/auth/login", Public, auth::login)
        .returns::<auth::LoginAnswer>()
        .get("/api/v1/auth/oidc/login", Public, auth::oidc_login)
        .get("/api/v1/auth/oidc/callback", Public, auth::oidc_callback)
        .post("/api/v1/auth/logout", Authenticated, auth::logout)
        .get("/api/v1/auth/session", Authenticated, auth::session)
        .post("/api/v1/auth/mfa/enable", Authenticated, auth::mfa_enable)
        .post("/api/v1/auth/mfa/verify", Public, auth::mfa_verify)
        .post("/api/v1/auth/mfa/disable", Authenticated, auth::mfa_disable)
        .returns::<auth::MfaDisabled>()
        .post("/api/v1/kv/keys", P("write:kv"), kv::put)
        .get("/api/v1/kv/keys", P("read:kv"), kv::list)
        .delete("/api/v1/kv/keys", P("write:kv"), kv::delete_prefix)
        .get("/api/v1/kv/keys/{*key}", P("read:kv"), kv::get)
        .delete("/api/v1/kv/keys/{*key}", P("write:kv"), kv::delete)
        .get("/api/v1/kv/count", P("read:kv"), kv::count)
        .get("/api/v1/admin/cluster", P("read:cluster"), admin::cluster)
        .get("/api/v1/admin/nodes", P("read:cluster"), handlers::nodes::list)
        .post("/api/v1/admin/nodes", P("manage:cluster"), handlers::nodes::add)
        .body::<handlers::nodes::AddNodeBody>(true)
        .answers(&[200, 202])
        .get("/api/v1/admin/nodes/{node_id}/logs", P("manage:cluster"), handlers::nodes::logs)
        .post("/api/v1/admin/nodes/{node_id}/restart", P("manage:cluster"), handlers::nodes::restart)
        .body::<handlers::nodes::NoBody>(false)
        .answers(&[200, 202])
        .post("/api/v1/admin/cluster/shutdown", P("manage:cluster"), handlers::nodes::shutdown_cluster)
        .body::<handlers::nodes::ShutdownBody>(true)
        .post("/api/v1/admin/nodes/{node_id}/drain", P("manage:cluster"), handlers::nodes::drain)
        .body::<handlers::nodes::NoBody>(false)
        .answers(&[200, 202])
        .post("/api/v1/admin/rebalance", P("manage:cluster"), handlers::nodes::rebalance)
        .body::<handlers::nodes::NoBody>(false)
        .put("/api/v1/admin/groups/{group_id}/leader", P("manage:cluster"), handlers::nodes::set_preferred_leader)
        .body::<handlers::nodes::PreferredLeaderBody>(true)
        .answers(&[200, 202])
        .delete("/api/v1/admin/nodes/{node_id}", P("manage:cluster"), handlers::nodes::remove)
        .answers(&[200, 202])
        .post("/api/v1/admin/encryption/reencrypt", P("manage:cluster"), handlers::encryption::reencrypt)
        .body::<handlers::nodes::NoBody>(false)
        .answers(&[200, 503])
        .post("/api/v1/admin/compress", P("manage:cluster"), handlers::compress::compress)
        .body::<handlers::compress::CompressBody>(false)
        .get("/api/v1/admin/dashboard", P("read:cluster"), handlers::monitoring::dashboard)
        .get("/api/v1/admin/stats", P("read:cluster"), handlers::monitoring::stats)
        .get("/api/v1/admin/alerts", P("read:cluster"), handlers::monitoring::alerts)
        .get("/api/v1/admin/config", P("manage:cluster"), handlers::monitoring::config)
        .get("/api/v1/admin/storage", P("read:cluster"), handlers::monitoring::storage)
        .get("/api/v1/admin/consistency", P("read:cluster"), handlers::consistency::consistency)
        .get("/api/v1/admin/activities", P("read:cluster"), handlers::monitoring::activities)
        .get("/api/v1/objects/buckets", P("read:objects"), object::list_buckets)
        .post("/api/v1/objects/buckets", P("write:objects"), object::create_bucket)
        .answers(&[201])
        .get("/api/v1/objects/buckets/{bucket}", P("read:objects"), object::bucket_stats)
        .delete("/api/v1/objects/buckets/{bucket}", P("write:objects"), object::drop_bucket)
        .get("/api/v1/objects/buckets/{bucket}/objects", P("read:objects"), object::list_objects)
        .get("/api/v1/objects/buckets/{bucket}/object/{*key}", P("read:objects"), object::get_object)
        .answers_stored_bytes()
        .head("/api/v1/objects/buckets/{bucket}/object/{*key}", object::head_object)
        .put("/api/v1/objects/buckets/{bucket}/object/{*key}", P("write:objects"), object::put_object)
        .delete("/api/v1/objects/buckets/{bucket}/object/{*key}", P("write:objects"), object::delete_object)
        .post("/api/v1/admin/update/plan", P("manage:cluster"), handlers::update::plan_update)
        .body::<handlers::update::UpdateBody>(false)
        .post("/api/v1/admin/update/execute", P("manage:cluster"), handlers::update::execute_update)
        .body::<handlers::update::UpdateBody>(true)
        .post("/api/v1/admin/backup", P("manage:backup"), handlers::backup::create)
        .answers(&[201])
        .get("/api/v1/admin/backups", P("manage:backup"), handlers::backup::list)
        .get("/api/v1/admin/backups/{backup_id}", P("manage:backup"), handlers::backup::get)
        .delete("/api/v1/admin/backups/{backup_id}", P("manage:backup"), handlers::backup::delete)
        .post("/api/v1/admin/restore", P("manage:backup"), handlers::backup::restore)
        .get("/api/v1/admin/objects/{bucket}/export", P("manage:backup"), object::ncb::export_bucket)
        .post("/api/v1/admin/objects/{bucket}/import", P("manage:backup"), object::ncb::import_bucket)
        .merge(handlers::sql::routes())
        .merge(handlers::import::routes())
        .merge(handlers::document::routes())
        .merge(handlers::graph::routes())
        .merge(handlers::vector::routes())
        .merge(handlers::compliance::routes())
        .merge(handlers::timeseries::routes())
        .merge(handlers::stream::routes())
        .merge(handlers::users::routes())
        .merge(handlers::security::routes())
        .merge(handlers::vault::routes())
}

/// The router: the route table, the permission check its decisions drive, and
/// the layers every request passes.
/// Serves `app` on `listener` (over TLS when `https` is set) until `stop` turns true.
async fn serve(
    listener: tokio::net::TcpListener,
    https: Option<std::sync::Arc<tessera_api::tls::LiveServerConfig>>,
    app: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    match https {
        Some(tls_config) => {
            // `tap_io` is what gives a custom listener's SocketAddr to ConnectInfo.
            let listener = axum::serve::ListenerExt::tap_io(tls::HttpsListener::new(listener, tls_config)?, |_| {});
            axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
        }
        None => {
            // No Nagle delay: a response's head and body are separate writes.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
        }
    }
    Ok(())
}

fn routes(state: AppState) -> Router {
    let body_limit = state.config.request_body_limit();
    let (table, decisions) = route_table().build();
    state.set_decisions(decisions);
    table
        // The permission check and, around it, the request figures (refusals are counted too).
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), request_stats::record))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(body_limit))
        // The block list, the concurrency bound and the rate limit, and JSON error bodies.
        .layer(axum::middleware::from_fn_with_state(state.clone(), http::front_door::front_door))
        .with_state(state)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = RouterConfig::load(cli.config.as_deref())?;
    tessera_api::runtime::build_runtime(config.server.worker_threads, tessera_sql::REQUEST_THREAD_STACK_BYTES)?.block_on(run(config))
}

async fn run(config: RouterConfig) -> anyhow::Result<()> {
    config.alerts.check().map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
    if !matches!(config.security.session_binding.as_str(), "off" | "alert" | "end") {
        anyhow::bail!(
            "configuration: security.session_binding (SERVICE_SESSION_BINDING) is {:?}; it is off, alert or end",
            config.security.session_binding
        );
    }
    config.query_limits.check().map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
    config.check_access().map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
    let telemetry = tessera_api::telemetry::init(
        "tessera-router",
        format!("{}:{}", config.server.host, config.server.port),
        &config.log_level,
        config.log_format,
        Vec::new(),
        &config.telemetry,
    )?;
    // Requests are counted from the first one on (`GET /metrics`).
    tessera_api::runtime::prometheus();
    // The router's own secrets: secrets manager, then environment, then defaults.
    let path_default = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let configured = |s: Option<&tessera_api::secret::SecretString>| s.map(|s| s.expose().to_string());
    let defaults = [
        ("tls_cert_path", path_default(&config.tls.cert)),
        ("tls_key_path", path_default(&config.tls.key)),
        ("ldap_bind_password", configured(config.auth.ldap.as_ref().and_then(|l| l.bind_password.as_ref()))),
        ("oauth2_client_secret", configured(config.auth.oauth2.as_ref().and_then(|o| o.client_secret.as_ref()))),
    ];
    let resolved = secrets::resolve_all(&config, &defaults).await?;
    resolved.log_sources();
    // The directory's and the provider's secrets: secrets manager, then environment, then the file.
    let mut config = config;
    if let (Some(ldap), Some(v)) = (config.auth.ldap.as_mut(), &resolved.ldap_bind_password.value) {
        ldap.bind_password = Some(v.clone());
    }
    if let (Some(oidc), Some(v)) = (config.auth.oauth2.as_mut(), &resolved.oauth2_client_secret.value) {
        oidc.client_secret = Some(v.clone());
    }

    // TLS: the certificate paths resolved above (secrets manager, then environment)
    // win over the `tls` section of the file.
    let mut tls_settings = config.tls.clone();
    if let Some(v) = &resolved.tls_cert_path.value {
        tls_settings.cert = Some(PathBuf::from(v.expose()));
    }
    if let Some(v) = &resolved.tls_key_path.value {
        tls_settings.key = Some(PathBuf::from(v.expose()));
    }
    let https = tls::https_config(&tls_settings)?;
    let cluster_tls = tls::cluster_tls(&tls_settings)?;
    match (&cluster_tls, config.cluster.insecure) {
        (None, false) => anyhow::bail!(
            "the nodes serve mutual TLS only: set SERVICE_CLUSTER_CA, SERVICE_CLUSTER_CLIENT_CERT and \
             SERVICE_CLUSTER_CLIENT_KEY (a router certificate of the cluster CA; `tessera-node certs` makes them), \
             or SERVICE_CLUSTER_INSECURE=true (cluster.insecure) for nodes serving plaintext"
        ),
        (Some(_), true) => anyhow::bail!("SERVICE_CLUSTER_INSECURE=true (cluster.insecure) and cluster TLS are both set: unset one"),
        (None, true) => tracing::warn!(
            "INSECURE: cluster.insecure is set: the router talks to the nodes in plaintext, and the nodes \
             authenticate no caller (anyone who reaches their port can read and change every group)"
        ),
        (Some(_), false) => {}
    }
    let cluster = GrpcCluster::new(config.seeds()?, Duration::from_secs(config.server.request_timeout.clamp(1, 300)), cluster_tls.clone());
    // Certificates rotate without a restart (files watched, SIGHUP re-reads).
    if cluster_tls.is_some() {
        let t = tls_settings.clone();
        let files: Vec<PathBuf> = [&t.cluster_ca, &t.client_cert, &t.client_key].into_iter().flatten().cloned().collect();
        let reloading = cluster.clone();
        tessera_api::tls::watch_files("cluster client certificates", files, move || {
            let tls = tls::cluster_tls(&t).map_err(|e| e.to_string())?;
            reloading.replace_tls(tls);
            Ok(())
        });
    }
    let https = https.map(tessera_api::tls::LiveServerConfig::new);
    if let Some(live) = &https {
        let t = tls_settings.clone();
        let files: Vec<PathBuf> = [&t.cert, &t.key].into_iter().flatten().cloned().collect();
        let live = live.clone();
        tessera_api::tls::watch_files("HTTPS certificate", files, move || {
            let config = tls::https_config(&t).map_err(|e| e.to_string())?.ok_or("HTTPS is no longer configured")?;
            live.replace(config);
            Ok(())
        });
    }
    let addr: SocketAddr = format!("{}:{}", config.server.host, config.server.port).parse()?;
    let state = AppState::new(config, cluster.clone())?;
    if !state.config.rbac.enabled {
        tracing::warn!(
            "rbac.enabled = false: every authenticated user has every permission (acts as an admin); logging in is still required"
        );
    }
    for moved in [
        "SERVICE_RETENTION_INTERVAL_SECS",
        "SERVICE_STREAM_RETENTION_INTERVAL_SECS",
        "SERVICE_UPLOAD_SWEEP_INTERVAL_SECS",
        "SERVICE_UPLOAD_MAX_AGE_SECS",
    ] {
        if std::env::var_os(moved).is_some() {
            tracing::warn!("{moved} is a node setting (the groups' leaders run retention and sweeps); the router ignores it");
        }
    }

    // Keep the view of leaders and liveness fresh.
    tokio::spawn(async move {
        loop {
            cluster.refresh().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    tokio::spawn(services::auth::provision_admin(state.clone()));
    tokio::spawn(services::vault::unseal::unseal_at_start(state.clone()));
    let blocks_of = state.clone();
    tokio::spawn(services::block_list::refresh_loop(state.cluster.clone(), state.config.security.block_refresh_ms, move |list| {
        blocks_of.security.blocks.replace(list)
    }));
    tokio::spawn(state.rate_limits.clone().prune_loop());
    tokio::spawn(state.activities.clone().flush_loop(state.cluster.clone()));
    tokio::spawn(state.request_stats.clone().publish_loop(state.cluster.clone(), state.router_instance.clone()));
    tokio::spawn(services::compliance::webhooks::deliver_loop(state.clone()));
    tokio::spawn(services::compliance::audit::retention_loop(state.clone()));
    tokio::spawn(services::compliance::expiry::expiry_loop(state.clone()));
    let streams = state.streams.clone();
    let mut asked_to_stop = state.shutdown.subscribe();

    let listener = tokio::net::TcpListener::bind(addr).await?;
    let console = state.config.console.clone();
    let pgwire = state.config.pgwire.clone();
    let pg_state = state.clone();
    let api = routes(state);
    // One stop for every listener: a signal, or the cluster's shutdown.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = tessera_api::runtime::shutdown_signal() => {}
            _ = asked_to_stop.wait_for(|stop| *stop) => info!("cluster shutdown: this router stops"),
        }
        streams.close(); // WebSockets end with 1001 instead of holding the shutdown
        let _ = stop.send(true);
    });
    let console_server = if console.enabled {
        let console_addr: SocketAddr = format!("{}:{}", addr.ip(), console.port).parse()?;
        let console_listener = tokio::net::TcpListener::bind(console_addr)
            .await
            .map_err(|e| anyhow::anyhow!("console.port {console_addr}: {e} (SERVICE_CONSOLE_PORT moves it)"))?;
        info!(addr = %console_addr, https = https.is_some(), "web console listening");
        let app = console::routes().merge(api.clone());
        Some(tokio::spawn(serve(console_listener, https.clone(), app, stopped.clone())))
    } else {
        None
    };
    let pgwire_server = if pgwire.enabled {
        let pg_addr: SocketAddr = format!("{}:{}", addr.ip(), pgwire.port).parse()?;
        let pg_listener = tokio::net::TcpListener::bind(pg_addr)
            .await
            .map_err(|e| anyhow::anyhow!("pgwire.port {pg_addr}: {e} (SERVICE_PGWIRE_PORT moves it)"))?;
        info!(addr = %pg_addr, tls = https.is_some(), "PostgreSQL wire protocol listening");
        Some(tokio::spawn(pgwire::serve(pg_state, pg_listener, https.clone(), stopped.clone())))
    } else {
        None
    };
    info!(%addr, https = https.is_some(), "router listening{}", if https.is_some() { " (HTTPS only)" } else { "" });
    serve(listener, https, api, stopped).await?;
    if let Some(console) = console_server {
        console.await??;
    }
    if let Some(pgwire) = pgwire_server {
        pgwire.await??;
    }
    info!("stopped");
    // Buffered spans are exported before the process ends.
    drop(telemetry);
    Ok(())
}
