//! `tessera-node`: a Tessera data node. Hosts one Raft group per shard replica
//! placed on it and serves peers and routers over one gRPC port.

mod access;
mod config;
mod control;
mod health;
mod host;
mod incarnation;
mod log_ring;
mod maintenance;
mod network;
mod placement;
mod query_pool;
mod service;

use std::path::PathBuf;

use clap::Parser;
use tessera_api::rpc::MAX_MESSAGE_BYTES;
use tessera_api::rpc::data_service_server::DataServiceServer;
use tessera_api::rpc::raft_service_server::RaftServiceServer;
use tracing::info;

use crate::config::NodeConfig;
use crate::host::Host;
use crate::service::NodeService;

/// Starts the node's periodic duties beside its replicas' own: maintenance of
/// the groups it leads, and the control plane it runs while it leads the meta
/// group (range splitter, placement driver).
fn start_duties(cfg: &NodeConfig, host: &std::sync::Arc<Host>) -> anyhow::Result<()> {
    use std::time::Duration;
    let (default_retention_ms, enforce_every) = cfg.storage.retention.parsed()?;
    let mut maintenance = cfg.maintenance.clone();
    if let Some(secs) = enforce_every {
        maintenance.retention_interval_secs = secs;
    }
    maintenance::spawn(host.clone(), &maintenance, default_retention_ms);
    if cfg.sharding.strategy == tessera_api::meta::ShardingStrategy::Range {
        let period = Duration::from_secs(cfg.sharding.split_check_interval_secs.max(1));
        let thresholds = control::splitter::SplitThresholds {
            bytes: cfg.sharding.split_threshold_bytes,
            keys: cfg.sharding.split_threshold_keys,
            writes_per_sec: cfg.sharding.split_threshold_writes_per_sec,
        };
        control::splitter::spawn_range_splitter(host.clone(), period, thresholds);
    }
    let rebalance_every = cfg.sharding.auto_rebalance.then(|| Duration::from_secs(cfg.sharding.rebalance_interval_secs.max(1)));
    control::driver::spawn_placement_driver(host.clone(), rebalance_every);
    Ok(())
}

/// Streams a peer may reset before the gRPC server accepted them (see the
/// server's builder in `main`).
const PEER_PENDING_RESETS: usize = 4096;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line of the node; everything else comes from the file and `SERVICE_*`.
#[derive(Parser)]
#[command(name = "tessera-node", version, about = "Tessera data node")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "SERVICE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Asks the node running with this configuration (same file and
    /// environment) to give up every leadership, and waits until it did or the
    /// timeout passed; for a Kubernetes preStop hook. Exits 0 either way.
    ReleaseLeadership {
        /// Seconds to wait for other nodes to take over.
        #[arg(long, default_value_t = 20)]
        timeout_secs: u64,
    },
    /// Makes a cluster CA and a certificate per process in a directory (what
    /// exists is kept): `ca.pem`/`ca.key`, `node-N.pem`/`.key`, `router-N.pem`/`.key`.
    /// Needs no configuration.
    Certs {
        /// Where the files go.
        #[arg(long)]
        dir: PathBuf,
        /// Node ids to issue node certificates for (`--node 1 --node 2 ...`).
        #[arg(long = "node")]
        nodes: Vec<u64>,
        /// How many router certificates to issue (router-1, router-2, ...).
        #[arg(long, default_value_t = 1)]
        routers: u32,
        /// Host names and IP addresses every certificate is valid for.
        #[arg(long = "host", default_values_t = ["127.0.0.1".to_string(), "localhost".to_string()])]
        hosts: Vec<String>,
    },
    /// Prints, for every group with records in a stopped node's data directory,
    /// its applied index, a digest of its replicated state and the Raft
    /// membership that state reflects (voters, learners; one JSON object per line), as `GET /api/v1/admin/consistency` reports them for running
    /// nodes: replicas at one applied index must print the same digest. For
    /// comparing the replicas of nodes that cannot answer the endpoint (older
    /// builds, a cluster that is down). Unencrypted stores only.
    Digest {
        /// The node's `storage.data_dir` (its store is `<dir>/rocksdb`).
        #[arg(long)]
        data_dir: PathBuf,
    },
}

/// `tessera-node digest`: see [`Command::Digest`].
fn print_digests(data_dir: &std::path::Path) -> anyhow::Result<()> {
    let store = tessera_storage::Store::open(data_dir.join("rocksdb"))?;
    for group in store.groups_with_records()? {
        let d = store.digest(group)?;
        let line = serde_json::json!({"group": d.group, "applied_index": d.applied_index, "records": d.records, "digest": d.digest, "voters": d.voters, "learners": d.learners});
        println!("{line}");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Certs { dir, nodes, routers, hosts }) = &cli.command {
        use tessera_api::certs::Role;
        let mut processes: Vec<(Role, String)> = nodes.iter().map(|n| (Role::Node, format!("node-{n}"))).collect();
        processes.extend((1..=*routers).map(|r| (Role::Router, format!("router-{r}"))));
        for path in tessera_api::certs::init_dir(dir, &processes, hosts)? {
            println!("{}", path.display());
        }
        return Ok(());
    }
    if let Some(Command::Digest { data_dir }) = &cli.command {
        return print_digests(data_dir);
    }
    let cfg = NodeConfig::load(cli.config.as_deref())?;
    tessera_api::runtime::build_runtime(cfg.server.worker_threads, tessera_sql::REQUEST_THREAD_STACK_BYTES)?.block_on(run(cli, cfg))
}

async fn run(cli: Cli, cfg: NodeConfig) -> anyhow::Result<()> {
    if let Some(Command::ReleaseLeadership { timeout_secs }) = cli.command {
        return release_leadership(&cfg, timeout_secs).await;
    }
    // The node's log goes to stderr and, for `GET /api/v1/admin/nodes/{id}/logs`, to its ring.
    let ring = {
        use tracing_subscriber::Layer;
        tracing_subscriber::fmt::layer().with_ansi(false).with_writer(log_ring::LogRing::global().clone()).boxed()
    };
    let telemetry = tessera_api::telemetry::init(
        "tessera-node",
        format!("node-{}", cfg.cluster.node_id),
        &format!("{},openraft=warn", cfg.log_level),
        cfg.log_format,
        vec![ring],
        &cfg.telemetry,
    )?;

    // Certificates are read before the store opens: a bad path fails at once.
    let server_tls = cfg.server_tls()?;
    let host = Host::start(&cfg).await?;
    tokio::spawn(host.clone().record_cluster_map());
    start_duties(&cfg, &host)?;
    tessera_api::runtime::prometheus();
    if let Some(addr) = &cfg.server.health_addr {
        health::serve(host.clone(), addr, cfg.server.metrics_token.clone()).await?;
    }

    let addr = cfg.server.grpc_addr.parse()?;
    let config_json = serde_json::to_value(&cfg).map(tessera_api::runtime::redacted).unwrap_or_default().to_string();
    let (stopping, stopping_seen) = tokio::sync::watch::channel(false);
    let service = NodeService { host: host.clone(), config_json: std::sync::Arc::new(config_json), stopping: stopping_seen };
    if cfg.cluster.insecure {
        tracing::warn!(
            "INSECURE: cluster.insecure is set: this node serves gRPC in plaintext and authenticates no caller; \
             anyone who reaches {addr} can read, change and delete every group it hosts"
        );
    }
    let server = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        // One HTTP/2 connection carries every group's Raft traffic from a peer,
        // and openraft drops (resets) each RPC that outlives its timeout. h2's
        // default of 20 pending resets answered a burst of them (a node's
        // restart, a partition healing) with GOAWAY `too_many_resets`, cutting
        // every group's replication and votes at once (1 269 times on one node
        // in a 20-minute chaos run). The limit guards against the rapid-reset
        // attack; callers are cluster peers, by certificate unless insecure.
        .http2_max_pending_accept_reset_streams(Some(PEER_PENDING_RESETS))
        // Who may call which RPC, by the role the caller's certificate names.
        .layer(access::AccessLayer { enforce: server_tls.is_some() })
        .trace_fn(tessera_api::telemetry::grpc_server_span)
        .add_service(
            RaftServiceServer::new(service.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            // Routers of a wire version this node does not serve are refused by name.
            tonic::service::interceptor::InterceptedService::new(
                DataServiceServer::new(service).max_decoding_message_size(MAX_MESSAGE_BYTES).max_encoding_message_size(MAX_MESSAGE_BYTES),
                tessera_api::rpc::check_wire_version,
            ),
        );
    match server_tls {
        Some(tls) => {
            // Certificates rotate without a restart: the files are watched (and
            // re-read on SIGHUP); new handshakes and new peer connections use them.
            let live = tessera_api::tls::LiveServerConfig::new(tls);
            let t = &cfg.tls;
            let files: Vec<PathBuf> = [&t.cluster_ca, &t.cert, &t.key].into_iter().flatten().cloned().collect();
            let (reload_cfg, reload_live, reload_host) = (cfg.clone(), live.clone(), host.clone());
            tessera_api::tls::watch_files("cluster certificates", files, move || {
                let server = reload_cfg.server_tls().map_err(|e| e.to_string())?.ok_or("cluster TLS is no longer configured")?;
                let client = reload_cfg.cluster_tls().map_err(|e| e.to_string())?;
                reload_live.replace(server);
                reload_host.pool.replace_tls(client);
                if let Some(cert) = &reload_cfg.tls.cert
                    && let Ok(ms) = tessera_api::tls::not_after_ms("node certificate", cert)
                {
                    reload_host.cert_not_after_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            });
            // Mutual TLS only: no plaintext listener; clients without a certificate
            // issued by the cluster CA fail the handshake.
            let listener = tokio::net::TcpListener::bind(addr).await?;
            info!(node = host.id, %addr, "serving gRPC over mutual TLS");
            let incoming = tessera_api::tls::TlsIncoming::new(listener, live)?.into_stream();
            server.serve_with_incoming_shutdown(incoming, stop(&host, stopping)).await?;
        }
        None => {
            info!(node = host.id, %addr, "serving gRPC");
            server.serve_with_shutdown(addr, stop(&host, stopping)).await?;
        }
    }

    info!("shutting down groups");
    host.shutdown().await;
    if host.restart_pending() {
        info!("stopped; running again");
        telemetry.flush();
        return Err(run_again(host.next_binary()));
    }
    info!("stopped");
    // Buffered spans are exported before the process ends.
    drop(telemetry);
    Ok(())
}

/// `tessera-node release-leadership`: calls the local node's `ReleaseLeadership`.
async fn release_leadership(cfg: &NodeConfig, timeout_secs: u64) -> anyhow::Result<()> {
    let addr = match cfg.server.grpc_addr.rsplit_once(':') {
        Some(("0.0.0.0" | "[::]", port)) => format!("127.0.0.1:{port}"),
        _ => cfg.server.grpc_addr.clone(),
    };
    let pool = network::PeerPool::with_dial_overrides(Default::default()).with_tls(cfg.cluster_tls()?);
    let mut client = pool.data_client(cfg.cluster.node_id, &addr)?;
    let mut req = tonic::Request::new(tessera_api::rpc::ReleaseLeadershipRequest { timeout_ms: timeout_secs * 1000 });
    req.set_timeout(std::time::Duration::from_secs(timeout_secs + 5));
    match client.release_leadership(req).await {
        Ok(reply) => {
            let r = reply.into_inner();
            println!(
                "node {} released leadership of {:?} in {} ms; still leading {:?}",
                cfg.cluster.node_id, r.led, r.took_ms, r.still_leading
            );
        }
        // The node may be down already: nothing to release, and the stop goes on.
        Err(status) => println!("node {} at {addr} did not release leadership: {}", cfg.cluster.node_id, status.message()),
    }
    Ok(())
}

/// Resolves on SIGTERM/SIGINT or a restart request (`POST /api/v1/admin/nodes/{id}/restart`).
async fn stop(host: &std::sync::Arc<Host>, stopping: tokio::sync::watch::Sender<bool>) {
    let host = host.clone();
    tokio::select! {
        _ = tessera_api::runtime::shutdown_signal() => {}
        _ = host.restart_requested() => {}
    }
    // Peers' append streams never end by themselves; the server's graceful
    // shutdown waits for them, so they are ended here.
    let _ = stopping.send(true);
}

/// Replaces this process with a new run of the node binary (same path, or the
/// one a rolling update named; same arguments, environment and pid, so a
/// supervisor or the cluster script sees one process go on). Returns only if
/// that fails.
fn run_again(binary: Option<std::path::PathBuf>) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let exe = match binary.map(Ok).unwrap_or_else(std::env::current_exe) {
        // A binary replaced on disk while running reads as "<path> (deleted)": run the new one.
        Ok(p) => std::path::PathBuf::from(p.to_string_lossy().trim_end_matches(" (deleted)").to_string()),
        Err(e) => return anyhow::anyhow!("cannot find the node binary to run again: {e}"),
    };
    let err = std::process::Command::new(&exe).args(std::env::args_os().skip(1)).exec();
    anyhow::anyhow!("running {} again failed: {err}", exe.display())
}
