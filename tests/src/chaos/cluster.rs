//! A three-node cluster and one router whose every link goes through a
//! [`Proxy`]: node i reaches node j through proxy(i→j) (the node's
//! `SERVICE_DIAL_OVERRIDES`), the router reaches node j through proxy(R→j)
//! (those are the addresses in `SERVICE_PEERS`/`SERVICE_NODES`, so they are the
//! addresses the cluster map and Raft membership record). Processes can be
//! SIGKILLed, restarted, SIGSTOPped and SIGCONTed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::lazyfs::{CutReport, DiskFault, LazyFs};
use super::proxy::{DirState, Proxy};
use crate::{ADMIN_PASSWORD, ADMIN_USER, Http, NODE_IDS, Value, bin_dir, pick_port, signal, spawn, tail, wait_for};

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    Node(u64),
    Router,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Node(n) => write!(f, "n{n}"),
            Peer::Router => write!(f, "router"),
        }
    }
}

/// Process state of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Running,
    Paused,
    Killed,
}

struct NodeProc {
    port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
    child: Option<Child>,
    paused: bool,
    starts: u32,
}

/// The cluster under test.
pub struct ChaosCluster {
    /// Admin client of the router.
    pub http: Http,
    root: PathBuf,
    tempdir: Option<tempfile::TempDir>,
    node_bin: PathBuf,
    nodes: BTreeMap<u64, NodeProc>,
    router: Option<Child>,
    router_log: PathBuf,
    router_port: u16,
    /// (from, to node) → proxy. `from` is a node or the router.
    proxies: BTreeMap<(Peer, u64), Proxy>,
    /// Each node's data directory is a power-loss filesystem when FUSE works here.
    disks: BTreeMap<u64, LazyFs>,
    /// Why there are no `disks`.
    no_disks: Option<String>,
    keep: bool,
    /// The id the next node added beyond the bootstrap three gets (4, 5, ...:
    /// a removed node's id is never used again).
    next_extra_id: u64,
}

impl ChaosCluster {
    /// Starts the proxies, three nodes (with `node_env` on top of the defaults)
    /// and a router, waits for `/readyz` and logs in as admin.
    pub async fn start(node_env: &[(&str, &str)], ready_timeout: Duration) -> Result<ChaosCluster> {
        let dir = bin_dir()?;
        let node_bin = dir.join("tessera-node");
        let router_bin = dir.join("tessera-router");
        for b in [&node_bin, &router_bin] {
            ensure!(
                b.is_file(),
                "{} not found; build it first (`cargo build -p tessera-node -p tessera-router`) or set TESSERA_BIN_DIR",
                b.display()
            );
        }
        let tempdir = tempfile::Builder::new().prefix("tessera-chaos-").tempdir()?;
        let root = tempdir.path().to_path_buf();
        let ports: BTreeMap<u64, u16> = NODE_IDS.iter().map(|id| Ok((*id, pick_port()?))).collect::<Result<_>>()?;
        let mut proxies = BTreeMap::new();
        for &j in &NODE_IDS {
            let target: SocketAddr = format!("127.0.0.1:{}", ports[&j]).parse()?;
            proxies.insert((Peer::Router, j), Proxy::start(target).await?);
            for &i in &NODE_IDS {
                if i != j {
                    proxies.insert((Peer::Node(i), j), Proxy::start(target).await?);
                }
            }
        }
        // Every node lists every node at its router-facing proxy: that is what the
        // cluster map and the Raft membership record, so routers use those.
        let peers = NODE_IDS.iter().map(|j| format!("{j}={}", proxies[&(Peer::Router, *j)].listen)).collect::<Vec<_>>().join(",");
        let level = std::env::var("TESSERA_TEST_LOG_LEVEL").unwrap_or_else(|_| "info".into());
        // Data directories on power-loss filesystems (node-i over node-i.disk).
        let mut disks = BTreeMap::new();
        let no_disks = match LazyFs::probe(&root) {
            Ok(()) => {
                for &i in &NODE_IDS {
                    let disk = LazyFs::mount(&root.join(format!("node-{i}.disk")), &root.join(format!("node-{i}")))?;
                    disks.insert(i, disk);
                }
                None
            }
            Err(e) if super::lazyfs::fuse_required() => {
                bail!("{}=1 but the power-loss filesystem cannot be mounted here: {e:#}", super::lazyfs::REQUIRE_FUSE_ENV)
            }
            Err(e) => {
                let why = format!("{e:#}");
                eprintln!("[chaos] SKIPPING the power-loss and disk faults: FUSE is not available here ({why})");
                Some(why)
            }
        };
        let mut nodes = BTreeMap::new();
        for &i in &NODE_IDS {
            let dial = NODE_IDS
                .iter()
                .filter(|j| **j != i)
                .map(|j| format!("{j}={}", proxies[&(Peer::Node(i), *j)].listen))
                .collect::<Vec<_>>()
                .join(",");
            let mut env: Vec<(String, String)> = vec![
                ("SERVICE_NODE_ID".into(), i.to_string()),
                ("SERVICE_PEERS".into(), peers.clone()),
                ("SERVICE_DIAL_OVERRIDES".into(), dial),
                ("SERVICE_GRPC_ADDR".into(), format!("127.0.0.1:{}", ports[&i])),
                ("SERVICE_DATA_DIR".into(), root.join(format!("node-{i}")).display().to_string()),
                ("SERVICE_SHARD_COUNT".into(), "8".into()),
                ("SERVICE_RAFT_HEARTBEAT_MS".into(), "200".into()),
                ("SERVICE_RAFT_ELECTION_MIN_MS".into(), "1000".into()),
                ("SERVICE_RAFT_ELECTION_MAX_MS".into(), "2000".into()),
                ("SERVICE_LOG_LEVEL".into(), level.clone()),
            ];
            env.extend(crate::certs::node_env(&root, i)?);
            env.extend(node_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            nodes.insert(
                i,
                NodeProc {
                    port: ports[&i],
                    data_dir: root.join(format!("node-{i}")),
                    log: root.join(format!("node-{i}.log")),
                    env,
                    child: None,
                    paused: false,
                    starts: 0,
                },
            );
        }
        let router_port = pick_port()?;
        let mut c = ChaosCluster {
            http: Http::new(format!("http://127.0.0.1:{router_port}")),
            root: root.clone(),
            tempdir: Some(tempdir),
            node_bin,
            nodes,
            router: None,
            router_log: root.join("router.log"),
            router_port,
            proxies,
            disks,
            no_disks,
            keep: std::env::var_os("TESSERA_TEST_KEEP").is_some_and(|v| v == "1"),
            next_extra_id: NODE_IDS.iter().max().copied().unwrap_or(0) + 1,
        };
        eprintln!("[chaos] cluster dir {}", root.display());
        for id in NODE_IDS {
            c.start_node(id)?;
        }
        let mut env: Vec<(String, String)> = crate::certs::router_env(&root)?;
        env.extend::<Vec<(String, String)>>(vec![
            ("SERVICE_HOST".into(), "127.0.0.1".into()),
            ("SERVICE_PORT".into(), router_port.to_string()),
            ("SERVICE_NODES".into(), peers),
            ("SERVICE_LOG_LEVEL".into(), level),
            ("SERVICE_REQUESTS_PER_MINUTE".into(), "100000000".into()),
            ("SERVICE_LOGIN_REQUESTS_PER_MINUTE".into(), "1000000".into()),
            ("SERVICE_ADMIN_USERNAME".into(), ADMIN_USER.into()),
            ("SERVICE_ADMIN_PASSWORD".into(), ADMIN_PASSWORD.into()),
        ]);
        c.router = Some(spawn(&router_bin, &env, &c.router_log, &root, "router")?);
        if let Err(e) = c.boot(ready_timeout).await {
            c.keep = true;
            bail!("chaos cluster did not start: {e:#}\n{}", c.log_tails(40));
        }
        Ok(c)
    }

    async fn boot(&mut self, ready_timeout: Duration) -> Result<()> {
        self.wait_ready(ready_timeout).await?;
        let anon = self.http.timeout(Duration::from_secs(10));
        let token = wait_for(Duration::from_secs(60), "admin login", async || {
            let r = anon.login(ADMIN_USER, ADMIN_PASSWORD).await?.ensure_status(200)?;
            Ok(r.json["token"].as_str().map(str::to_string))
        })
        .await?;
        self.http = self.http.renewing_session(ADMIN_USER, ADMIN_PASSWORD, &token);
        Ok(())
    }

    /// Waits for the router's `/readyz` (every group has a reachable leader).
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let http = self.http.anonymous().timeout(Duration::from_secs(3));
        let started = Instant::now();
        let mut last: String;
        loop {
            self.check_children()?;
            match http.get("/readyz?groups=all").await {
                Ok(r) if r.status == 200 => return Ok(()),
                Ok(r) => last = r.to_string(),
                Err(e) => last = format!("{e:#}"),
            }
            if started.elapsed() >= timeout {
                bail!("router not ready after {timeout:?}; last /readyz: {last}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Fails if a process that should be running has exited.
    pub fn check_children(&mut self) -> Result<()> {
        for (id, n) in self.nodes.iter_mut() {
            if let Some(status) = n.child.as_mut().map(Child::try_wait).transpose()?.flatten() {
                n.child = None;
                bail!("node {id} exited unexpectedly ({status}); log {}:\n{}", n.log.display(), tail(&n.log, 40));
            }
        }
        if let Some(status) = self.router.as_mut().map(Child::try_wait).transpose()?.flatten() {
            self.router = None;
            bail!("router exited unexpectedly ({status}):\n{}", tail(&self.router_log, 40));
        }
        Ok(())
    }

    /// The temp dir (data dirs, logs, saved histories).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Base URL of the router.
    pub fn router_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.router_port)
    }

    /// Keeps the temp dir after drop.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Log file of a node.
    pub fn node_log(&self, id: u64) -> PathBuf {
        self.nodes[&id].log.clone()
    }

    /// `Err(why)` when the data directories are not power-loss filesystems.
    pub fn disks_available(&self) -> Result<(), String> {
        match &self.no_disks {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    /// Loses node `id`'s unsynced writes, as a power cut would. The node must
    /// be killed first.
    pub fn power_cut(&mut self, id: u64) -> Result<CutReport> {
        ensure!(self.nodes[&id].child.is_none(), "node {id} must be down for a power cut");
        self.disks.get(&id).with_context(|| format!("node {id} has no power-loss disk"))?.power_cut()
    }

    /// Starts or ends a disk fault on node `id`'s data directory.
    pub fn set_disk_fault(&self, id: u64, fault: Option<DiskFault>) -> Result<()> {
        self.disks.get(&id).with_context(|| format!("node {id} has no power-loss disk"))?.set_fault(fault);
        Ok(())
    }

    /// Ids of the nodes whose processes run (or are paused).
    pub fn running_nodes(&self) -> Vec<u64> {
        self.nodes.iter().filter(|(_, n)| n.child.is_some()).map(|(id, _)| *id).collect()
    }

    /// Data directory of node `id`.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.nodes[&id].data_dir.clone()
    }

    /// Process state of a node.
    pub fn node_state(&self, id: u64) -> NodeState {
        let n = &self.nodes[&id];
        match (&n.child, n.paused) {
            (None, _) => NodeState::Killed,
            (Some(_), true) => NodeState::Paused,
            (Some(_), false) => NodeState::Running,
        }
    }

    /// Spawns node `id` (same port, data dir, env).
    pub fn start_node(&mut self, id: u64) -> Result<()> {
        self.start_node_with(id, &[])
    }

    /// Spawns node `id` with `extra` added to its environment for this start only.
    pub fn start_node_with(&mut self, id: u64, extra: &[(&str, &str)]) -> Result<()> {
        let (root, bin) = (self.root.clone(), self.node_bin.clone());
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        ensure!(n.child.is_none(), "node {id} is already running");
        std::fs::create_dir_all(&n.data_dir)?;
        n.starts += 1;
        let label = format!("node {id} (start #{}) on 127.0.0.1:{}", n.starts, n.port);
        let mut env = n.env.clone();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        n.child = Some(spawn(&bin, &env, &n.log, &root, &label)?);
        n.paused = false;
        Ok(())
    }

    /// Starts a node beyond the bootstrap three (its id is new) with
    /// `existing` cluster state, reachable directly (no proxy) and dialing the
    /// bootstrap nodes at their router-facing proxies; answers its id and
    /// address once it listens, ready for `POST /api/v1/admin/nodes`.
    pub async fn start_extra_node(&mut self) -> Result<(u64, String)> {
        let id = self.next_extra_id;
        self.next_extra_id += 1;
        let port = pick_port()?;
        let template = self.nodes.get(&NODE_IDS[0]).context("node 1")?.env.clone();
        let peers = template.iter().find(|(k, _)| k == "SERVICE_PEERS").map(|(_, v)| v.clone()).context("peers")?;
        let data_dir = self.root.join(format!("node-{id}"));
        let mut env: Vec<(String, String)> = template
            .into_iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "SERVICE_NODE_ID"
                        | "SERVICE_PEERS"
                        | "SERVICE_DIAL_OVERRIDES"
                        | "SERVICE_GRPC_ADDR"
                        | "SERVICE_DATA_DIR"
                        | "SERVICE_NODE_CERT"
                        | "SERVICE_NODE_KEY"
                )
            })
            .collect();
        env.extend(crate::certs::node_env(&self.root, id)?);
        env.extend([
            ("SERVICE_NODE_ID".to_string(), id.to_string()),
            ("SERVICE_PEERS".to_string(), format!("{peers},{id}=127.0.0.1:{port}")),
            ("SERVICE_GRPC_ADDR".to_string(), format!("127.0.0.1:{port}")),
            ("SERVICE_DATA_DIR".to_string(), data_dir.display().to_string()),
            ("SERVICE_INITIAL_CLUSTER_STATE".to_string(), "existing".to_string()),
        ]);
        let log = self.root.join(format!("node-{id}.log"));
        self.nodes.insert(id, NodeProc { port, data_dir, log, env, child: None, paused: false, starts: 0 });
        self.start_node(id)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(Instant::now() < deadline, "node {id} did not listen on 127.0.0.1:{port} within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((id, format!("127.0.0.1:{port}")))
    }

    /// Waits until node `id` (one removed from the cluster, which stops for
    /// good) has exited, and forgets it.
    pub async fn forget_removed_node(&mut self, id: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.reap_if_exited(id)?.is_some() || self.node_state(id) == NodeState::Killed {
                self.nodes.remove(&id);
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "removed node {id} still runs after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILLs node `id` and reaps it.
    pub fn kill_node(&mut self, id: u64) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        let mut child = n.child.take().with_context(|| format!("node {id} is not running"))?;
        signal(&child, libc::SIGKILL);
        child.wait()?;
        n.paused = false;
        Ok(())
    }

    /// If node `id` has exited by itself, reaps it and says how it ended.
    pub fn reap_if_exited(&mut self, id: u64) -> Result<Option<String>> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        if let Some(status) = n.child.as_mut().map(Child::try_wait).transpose()?.flatten() {
            n.child = None;
            return Ok(Some(status.to_string()));
        }
        Ok(None)
    }

    /// SIGSTOPs node `id`.
    pub fn pause_node(&mut self, id: u64) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        let child = n.child.as_ref().with_context(|| format!("node {id} is not running"))?;
        signal(child, libc::SIGSTOP);
        n.paused = true;
        Ok(())
    }

    /// SIGCONTs node `id`.
    pub fn resume_node(&mut self, id: u64) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        let child = n.child.as_ref().with_context(|| format!("node {id} is not running"))?;
        signal(child, libc::SIGCONT);
        n.paused = false;
        Ok(())
    }

    /// The proxy carrying connections dialed by `from` to node `to`.
    pub fn proxy(&self, from: Peer, to: u64) -> Option<&Proxy> {
        self.proxies.get(&(from, to))
    }

    /// Applies `f` to the direction that carries bytes sent by `from` to `to`:
    /// requests on `from`'s connections to `to`, and replies on `to`'s
    /// connections to `from` (nodes never dial the router).
    pub fn set_direction(&self, from: Peer, to: Peer, f: impl Fn(&mut DirState)) {
        if let Peer::Node(j) = to
            && let Some(p) = self.proxies.get(&(from, j))
        {
            p.update(|s| f(&mut s.up));
        }
        if let Peer::Node(i) = from
            && let Some(p) = self.proxies.get(&(to, i))
        {
            p.update(|s| f(&mut s.down));
        }
    }

    /// Blocks (or unblocks) everything `from` sends to `to`.
    pub fn cut(&self, from: Peer, to: Peer, blocked: bool) {
        self.set_direction(from, to, |d| d.blocked = blocked);
    }

    /// Adds latency to everything `from` sends to `to`.
    pub fn delay(&self, from: Peer, to: Peer, delay: Duration) {
        self.set_direction(from, to, |d| d.delay = delay);
    }

    /// Every link back to plain forwarding.
    pub fn heal_network(&self) {
        for p in self.proxies.values() {
            p.heal();
        }
    }

    /// Bytes delivered to node `to` over all its inbound node links so far.
    pub fn bytes_into(&self, to: u64) -> u64 {
        let mut total = 0;
        for ((from, j), p) in &self.proxies {
            if *j == to && matches!(from, Peer::Node(_)) {
                total += p.bytes().0;
            }
            if *from == Peer::Node(to) {
                total += p.bytes().1;
            }
        }
        total
    }

    /// Heals the network, resumes paused nodes, restarts killed ones, and waits
    /// for readiness.
    pub async fn heal_all(&mut self, timeout: Duration) -> Result<()> {
        self.heal_network();
        for disk in self.disks.values() {
            disk.set_fault(None);
        }
        for id in NODE_IDS {
            match self.node_state(id) {
                NodeState::Paused => self.resume_node(id)?,
                NodeState::Killed => self.start_node(id)?,
                NodeState::Running => {}
            }
        }
        self.wait_ready(timeout).await
    }

    /// `GET /api/v1/admin/cluster`: group id → leader, as the router sees it.
    pub async fn leaders(&self) -> Result<BTreeMap<u64, u64>> {
        let r = self.http.timeout(Duration::from_secs(5)).get("/api/v1/admin/cluster").await?.ensure_status(200)?;
        let groups = r.json["groups"].as_array().with_context(|| format!("no groups in {r}"))?;
        Ok(groups.iter().filter_map(|g| Some((crate::as_id(&g["id"])?, g["leader"].as_u64()?))).collect())
    }

    /// Last lines of every log.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        let logs = self
            .nodes
            .iter()
            .map(|(id, n)| (format!("node {id}"), n.log.clone()))
            .chain(std::iter::once(("router".to_string(), self.router_log.clone())));
        for (label, path) in logs {
            out.push_str(&format!("----- {label}: {} -----\n{}\n", path.display(), tail(&path, lines)));
        }
        out
    }

    /// Writes `value` as pretty JSON under the cluster dir and keeps the dir.
    pub fn save_json(&mut self, name: &str, value: &Value) -> Result<PathBuf> {
        let path = self.root.join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(value)?)?;
        self.keep = true;
        Ok(path)
    }
}

impl Drop for ChaosCluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        for n in self.nodes.values_mut() {
            if let Some(mut c) = n.child.take() {
                signal(&c, libc::SIGKILL);
                let _ = c.wait();
            }
        }
        if let Some(mut r) = self.router.take() {
            signal(&r, libc::SIGKILL);
            let _ = r.wait();
        }
        for (_, disk) in std::mem::take(&mut self.disks) {
            disk.set_fault(None);
            drop(disk);
        }
        if failed {
            eprintln!("[chaos] failed; logs:\n{}", self.log_tails(40));
        }
        if (failed || self.keep)
            && let Some(dir) = self.tempdir.take()
        {
            eprintln!("[chaos] kept cluster dir {}", dir.keep().display());
        }
    }
}
