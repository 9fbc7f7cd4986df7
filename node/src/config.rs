//! Node configuration: TOML file sections of spec 01 (`server`, `storage`,
//! `cluster`, `replication`, `sharding`) plus `raft` timings, overridden by
//! `SERVICE_*` environment variables.
//!
//! Nested keys use a double underscore (`SERVICE_CLUSTER__NODE_ID=2`); the common
//! ones also have flat names: `SERVICE_NODE_ID`, `SERVICE_PEERS`,
//! `SERVICE_CLUSTER_NAME`, `SERVICE_GRPC_ADDR`, `SERVICE_DATA_DIR`, `SERVICE_SHARD_COUNT`,
//! `SERVICE_REPLICATION_FACTOR`, `SERVICE_RAFT_HEARTBEAT_MS`,
//! `SERVICE_RAFT_ELECTION_MIN_MS`, `SERVICE_RAFT_ELECTION_MAX_MS`,
//! `SERVICE_RAFT_SNAPSHOT_LOGS`, `SERVICE_RAFT_KEEP_LOGS`, `SERVICE_RAFT_PROPOSALS_IN_FLIGHT`,
//! `SERVICE_RAFT_BATCH_MAX_COMMANDS`, `SERVICE_DIAL_OVERRIDES`,
//! `SERVICE_ADVERTISE_ADDR`.
//!
//! `SERVICE_ADVERTISE_ADDR` (`cluster.advertise_addr`) is the `host:port` other
//! nodes reach this one at. It matters only for a node that `SERVICE_PEERS`
//! does not list: such a node adds itself to its peers at that address
//! ([`NodeConfig::peers`]), takes part in no bootstrap and starts into the
//! existing cluster ([`NodeConfig::joins_existing`]). The Helm chart lists only
//! the bootstrap nodes in `SERVICE_PEERS` and gives every pod
//! `$(POD_NAME).<headless service>...:<port>`, so that its pod template does
//! not change when the StatefulSet grows.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tessera_api::NodeId;
use tessera_api::meta::{NodeInfo, ShardingStrategy};
use tessera_api::runtime::NodeList;

/// Everything a node reads at start.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeConfig {
    pub server: ServerSection,
    pub storage: StorageSection,
    pub cluster: ClusterSection,
    pub replication: ReplicationSection,
    pub sharding: ShardingSection,
    pub raft: RaftSection,
    /// Mutual TLS of the gRPC port (peers and routers).
    pub tls: TlsSection,
    /// Retention and sweeps the groups' leaders run (see `maintenance.rs`).
    pub maintenance: MaintenanceSection,
    /// Spec 01's `[encryption]` section (encryption at rest).
    pub encryption: EncryptionSection,
    pub log_level: String,
    /// OpenTelemetry traces over OTLP (off unless an endpoint is set).
    pub telemetry: tessera_api::telemetry::TelemetrySection,
    /// `text` (default) or `json` (`SERVICE_LOG_FORMAT`).
    pub log_format: tessera_api::runtime::LogFormat,
    /// Skews this node's wall clock by this many milliseconds. For tests of a
    /// leader whose clock is wrong (`SERVICE_TEST_CLOCK_OFFSET_MS`); leave at 0.
    pub test_clock_offset_ms: i64,
}

/// Spec 01's `[encryption]`: `enabled` as `storage.encryption_at_rest` (which
/// wins when both are set), `algorithm` AES-256-GCM (the only one: others are
/// refused), `key_rotation_days` 0 (the at-rest key is rotated by hand, with
/// `storage.encryption_previous_keys` and `POST /api/v1/admin/encryption/reencrypt`,
/// see docs/tls-encryption.md; scheduled rotation is not built, so other values
/// are refused).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct EncryptionSection {
    pub enabled: Option<bool>,
    pub algorithm: String,
    pub key_rotation_days: u64,
}

impl Default for EncryptionSection {
    fn default() -> Self {
        EncryptionSection { enabled: None, algorithm: "AES-256-GCM".into(), key_rotation_days: 0 }
    }
}

/// Mutual TLS for node-to-node and router-to-node gRPC: all three paths or none.
/// With them the node serves only TLS 1.2/1.3 to clients whose certificate was
/// issued by `cluster_ca`, and dials its peers with `cert`/`key`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsSection {
    /// PEM CA certificate(s) of the cluster (`SERVICE_CLUSTER_CA`).
    pub cluster_ca: Option<PathBuf>,
    /// PEM certificate chain of this node (`SERVICE_NODE_CERT`); used as server
    /// and as client certificate, so it must be valid for both.
    pub cert: Option<PathBuf>,
    /// PEM private key of this node (`SERVICE_NODE_KEY`).
    pub key: Option<PathBuf>,
    /// Name checked in peers' certificates instead of their address host
    /// (`SERVICE_CLUSTER_TLS_SERVER_NAME`).
    pub server_name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSection {
    /// gRPC listen address for peers and routers.
    pub grpc_addr: String,
    /// Reads (queries) that run at once on the node's blocking pool, off the
    /// threads that drive Raft (`SERVICE_QUERY_WORKERS`; 0: twice the cores).
    pub query_workers: usize,
    /// Reads that may wait for a worker; beyond it a read is refused as busy
    /// (the router answers 503 with Retry-After) (`SERVICE_QUERY_QUEUE`).
    pub query_queue: usize,
    /// MiB all SQL reads running on the node may hold for intermediate results
    /// together (`SERVICE_SQL_MEMORY_POOL_MB`); each query also has its own
    /// budget, sent by the router.
    pub sql_memory_pool_mb: u64,
    /// Plain-HTTP address of the health probes `GET /livez` and `GET /readyz`
    /// (`SERVICE_HEALTH_ADDR`, e.g. `0.0.0.0:9290`); unset: no health listener.
    pub health_addr: Option<String>,
    /// Bearer token `GET /metrics` of the health listener asks for
    /// (`SERVICE_METRICS_TOKEN`); unset: `/metrics` is refused (the probes stay open).
    pub metrics_token: Option<tessera_api::secret::SecretString>,
    /// Threads of the Tokio runtime that drives Raft and RPCs
    /// (`SERVICE_WORKER_THREADS`; 0: one per core).
    pub worker_threads: usize,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            grpc_addr: "0.0.0.0:9190".into(),
            query_workers: 0,
            query_queue: 256,
            sql_memory_pool_mb: 4096,
            health_addr: None,
            metrics_token: None,
            worker_threads: 0,
        }
    }
}

impl ServerSection {
    /// The number of query workers, `query_workers` or twice the cores.
    pub fn query_workers(&self) -> usize {
        if self.query_workers > 0 { self.query_workers } else { 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageSection {
    pub data_dir: PathBuf,
    /// Encrypt values, log entries and snapshots at rest (`SERVICE_ENCRYPTION_AT_REST`);
    /// unset: on exactly when `encryption_key` is set (the key alone enables it).
    pub encryption_at_rest: Option<bool>,
    /// Master key: base64 of 32 bytes, or the path of a key file holding 32 raw
    /// bytes or their base64 (`SERVICE_ENCRYPTION_KEY`).
    pub encryption_key: Option<tessera_api::secret::SecretString>,
    /// Keys values may still be sealed with (a rotation): comma-separated key
    /// specs (`SERVICE_ENCRYPTION_PREVIOUS_KEYS`); they open values, never seal.
    pub encryption_previous_keys: tessera_api::secret::SecretString,
    /// `local` (data on disk under `data_dir`) or `memory` (RocksDB in memory:
    /// nothing survives a restart of the node; for tests and ephemeral use).
    pub backend: String,
    /// Block compression of the data files: `none`, `lz4` (default) or `zstd`
    /// (`snappy` is refused: not compiled in). Data blocks are compressed before encryption.
    pub compression: String,
    /// Block cache shared by the column families: bytes, or a size such as
    /// `256MB` (`SERVICE_BUFFER_POOL_SIZE`); empty: RocksDB's default.
    pub buffer_pool_size: String,
    /// The write-ahead log: always on; `false` is refused (acknowledged writes must survive a crash).
    pub wal_enabled: bool,
    /// Sync before acknowledging: always on; `false` is refused for the same reason.
    pub sync_on_commit: bool,
    /// Spec 01's `storage.retention`: time-series retention defaults.
    pub retention: RetentionSection,
}

/// `[storage.retention]`: `default_duration` (e.g. `30d`; empty: none) drops
/// points older than it from every time-series metric without a policy of its
/// own; `enforce_interval` (e.g. `1h`; empty: `maintenance.retention_interval_secs`)
/// is how often the groups' leaders enforce retention.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RetentionSection {
    pub default_duration: String,
    pub enforce_interval: String,
}

impl RetentionSection {
    /// The default retention in milliseconds and the enforcement period in
    /// seconds, when set; or why a value is refused.
    pub fn parsed(&self) -> Result<(Option<i64>, Option<u64>), ConfigError> {
        let parse = |key: &str, v: &str| -> Result<Option<i64>, ConfigError> {
            match v.trim() {
                "" => Ok(None),
                s => match tessera_timeseries::duration::parse_duration(s) {
                    Ok(ms) if ms > 0 => Ok(Some(ms)),
                    _ => Err(ConfigError::Invalid(format!("storage.retention.{key} must be a duration such as 30d or 1h, not {s:?}"))),
                },
            }
        };
        let default = parse("default_duration", &self.default_duration)?;
        let every = parse("enforce_interval", &self.enforce_interval)?.map(|ms| (ms as u64).div_ceil(1000).max(1));
        Ok((default, every))
    }
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            data_dir: PathBuf::from("./data"),
            encryption_at_rest: None,
            encryption_key: None,
            encryption_previous_keys: Default::default(),
            backend: "local".into(),
            compression: "lz4".into(),
            buffer_pool_size: String::new(),
            wal_enabled: true,
            sync_on_commit: true,
            retention: RetentionSection::default(),
        }
    }
}

impl StorageSection {
    /// The RocksDB tuning these settings ask for, or why they are refused.
    pub fn tuning(&self) -> Result<tessera_storage::Tuning, ConfigError> {
        let in_memory = match self.backend.trim().to_ascii_lowercase().as_str() {
            "local" => false,
            "memory" => true,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "storage.backend = {other:?} is not supported: local (data on disk under storage.data_dir) or memory (nothing survives a restart)"
                )));
            }
        };
        if !self.wal_enabled {
            return Err(ConfigError::Invalid(
                "storage.wal_enabled cannot be turned off: the Raft log and votes live in RocksDB, and without its write-ahead log a process crash would lose acknowledged writes; storage.sync_on_commit = false trades durability on power loss for speed instead".into(),
            ));
        }
        let compression = tessera_storage::Compression::parse(&self.compression).map_err(ConfigError::Invalid)?;
        let block_cache_bytes = match self.buffer_pool_size.trim() {
            "" => None,
            size => Some(parse_size(size).ok_or_else(|| {
                ConfigError::Invalid(format!("storage.buffer_pool_size must be bytes or a size such as 256MB, not {size:?}"))
            })?),
        };
        Ok(tessera_storage::Tuning { compression, block_cache_bytes, in_memory, unsynced_commits: !self.sync_on_commit })
    }
}

/// `1048576`, `512KB`, `256MB`, `2GB` (binary multiples; `KiB`/`MiB`/`GiB` too).
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: usize = n.parse().ok()?;
    let multiple: usize = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(multiple).filter(|b| *b > 0)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterSection {
    pub node_id: NodeId,
    /// Take the node id from the host name's ordinal instead of `node_id`: a
    /// host named `tessera-node-2` (a StatefulSet's third pod) is node 3
    /// (`SERVICE_NODE_ID_FROM_HOSTNAME`; the name is read from `HOSTNAME`).
    pub node_id_from_hostname: bool,
    pub name: String,
    /// Every node of the cluster (this one included) as `id=host:port`; or
    /// the bootstrap nodes, when a node added later gives its own address in
    /// `advertise_addr`.
    pub peers: NodeList,
    /// `host:port` other nodes reach this node at (`SERVICE_ADVERTISE_ADDR`);
    /// used only when `peers` does not list this node: it then counts itself
    /// among the peers at this address and joins the existing cluster (see
    /// the module documentation).
    pub advertise_addr: Option<String>,
    /// Optional `id=host:port` entries: this node dials peer `id` at that address
    /// instead of the one in the membership (the chaos suite's per-link proxies).
    pub dial_overrides: NodeList,
    /// `new`: this start may bootstrap the cluster (a group's first member
    /// initializes it on a fresh store). `existing`: the cluster exists; a fresh
    /// store (a new or wiped data directory) initializes nothing and its groups
    /// do not vote until they have caught up from a leader, like etcd's
    /// `--initial-cluster-state` (`SERVICE_INITIAL_CLUSTER_STATE`).
    pub initial_state: InitialState,
    /// How many of the peers (ids 1..=n) bootstrap the cluster; a node with a
    /// higher id always starts as `existing` and waits to be added
    /// (`POST /api/v1/admin/nodes`). 0: every peer bootstraps
    /// (`SERVICE_INITIAL_NODES`; the Helm chart sets it so that its peer list
    /// can grow with the StatefulSet).
    pub initial_nodes: u64,
    /// How far apart (ms) the nodes' clocks may be: a peer time further ahead of
    /// the majority's is ignored, and a node whose clock the majority finds off
    /// by more corrects it (`SERVICE_MAX_CLOCK_OFFSET_MS`; CockroachDB's
    /// `--max-offset`).
    pub max_clock_offset_ms: i64,
    /// Serve and dial peers in plaintext, with no authentication of callers
    /// (`SERVICE_CLUSTER_INSECURE`). Off by default: without it the node needs
    /// the cluster's mutual TLS (`tls.cluster_ca`, `tls.cert`, `tls.key`) and
    /// refuses to start without. For a network that is trusted as a whole.
    pub insecure: bool,
    /// Where this node runs, as `key=value` tiers from the widest, e.g.
    /// `zone=a,rack=3` (`SERVICE_LOCALITY`; the Helm chart takes the zone from
    /// the pod's topology label). The placement driver records it in the map
    /// and spreads each group's replicas over distinct first tiers (zones)
    /// when it can. Empty: the node is a failure domain of its own.
    pub locality: String,
    /// A node that was removed from the cluster and starts again on its old
    /// data directory discards that data and starts empty, into the existing
    /// cluster, waiting to be added again (`SERVICE_REJOIN_WHEN_REMOVED`; the
    /// Helm chart sets it, as a StatefulSet keeps volumes across scale-downs).
    /// Off: such a node refuses to start.
    pub rejoin_when_removed: bool,
}

/// See [`ClusterSection::initial_state`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitialState {
    #[default]
    New,
    Existing,
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            node_id: 1,
            node_id_from_hostname: false,
            name: "tessera".into(),
            peers: NodeList::default(),
            advertise_addr: None,
            dial_overrides: NodeList::default(),
            initial_state: InitialState::New,
            initial_nodes: 0,
            max_clock_offset_ms: tessera_api::clock::DEFAULT_MAX_OFFSET_MS,
            insecure: false,
            locality: String::new(),
            rejoin_when_removed: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplicationSection {
    pub replication_factor: usize,
    pub consistency_level: String,
}

impl Default for ReplicationSection {
    fn default() -> Self {
        ReplicationSection { replication_factor: 3, consistency_level: "quorum".into() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardingSection {
    pub strategy: ShardingStrategy,
    pub shard_count: u64,
    /// The placement driver: the meta leader evens out group leaderships over
    /// the nodes by itself (off: only `POST /api/v1/admin/rebalance` and node
    /// additions move leaderships).
    pub auto_rebalance: bool,
    /// How often the placement driver looks at the spread, seconds (at least 1).
    pub rebalance_interval_secs: u64,
    /// Range sharding: a key-value range splits in two once its keys and
    /// values take more than this many bytes...
    pub split_threshold_bytes: u64,
    /// ... or once it holds more than this many keys...
    pub split_threshold_keys: u64,
    /// ... or once its group commits more than this many log entries per
    /// second, measured between two checks (0: no split on write load).
    pub split_threshold_writes_per_sec: u64,
    /// Range sharding: how often the meta leader checks the ranges' sizes, seconds (at least 1).
    pub split_check_interval_secs: u64,
}

impl Default for ShardingSection {
    fn default() -> Self {
        ShardingSection {
            strategy: ShardingStrategy::Hash,
            shard_count: 8,
            auto_rebalance: false,
            rebalance_interval_secs: 30,
            split_threshold_bytes: 64 * 1024 * 1024,
            split_threshold_keys: 1_000_000,
            split_threshold_writes_per_sec: 0,
            split_check_interval_secs: 10,
        }
    }
}

/// Raft timings; the defaults suit small machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RaftSection {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// Build a snapshot after this many applied entries since the last one.
    pub snapshot_logs: u64,
    /// Log entries kept behind a snapshot for slow followers before purging.
    pub keep_logs: u64,
    /// Entries of one group a leader proposes before it holds further key-value
    /// writes back to propose them together in one entry.
    pub proposals_in_flight: usize,
    /// Key-value writes in one such entry at most; 1 proposes every write alone.
    pub batch_max_commands: usize,
}

impl Default for RaftSection {
    fn default() -> Self {
        RaftSection {
            heartbeat_ms: 200,
            election_min_ms: 1000,
            election_max_ms: 2000,
            snapshot_logs: 5000,
            keep_logs: 500,
            proposals_in_flight: 1,
            batch_max_commands: 64,
        }
    }
}

const FLAT_ALIASES: &[(&str, &str)] = &[
    ("node_id", "cluster.node_id"),
    ("node_id_from_hostname", "cluster.node_id_from_hostname"),
    ("health_addr", "server.health_addr"),
    ("metrics_token", "server.metrics_token"),
    ("peers", "cluster.peers"),
    ("advertise_addr", "cluster.advertise_addr"),
    ("locality", "cluster.locality"),
    ("rejoin_when_removed", "cluster.rejoin_when_removed"),
    ("dial_overrides", "cluster.dial_overrides"),
    ("initial_cluster_state", "cluster.initial_state"),
    ("initial_nodes", "cluster.initial_nodes"),
    ("cluster_name", "cluster.name"),
    ("grpc_addr", "server.grpc_addr"),
    ("worker_threads", "server.worker_threads"),
    ("query_workers", "server.query_workers"),
    ("query_queue", "server.query_queue"),
    ("sql_memory_pool_mb", "server.sql_memory_pool_mb"),
    ("data_dir", "storage.data_dir"),
    ("encryption_at_rest", "storage.encryption_at_rest"),
    ("storage_backend", "storage.backend"),
    ("storage_compression", "storage.compression"),
    ("compression", "storage.compression"),
    ("buffer_pool_size", "storage.buffer_pool_size"),
    ("wal_enabled", "storage.wal_enabled"),
    ("sync_on_commit", "storage.sync_on_commit"),
    ("retention_default_duration", "storage.retention.default_duration"),
    ("retention_enforce_interval", "storage.retention.enforce_interval"),
    ("encryption_key", "storage.encryption_key"),
    ("encryption_previous_keys", "storage.encryption_previous_keys"),
    ("cluster_ca", "tls.cluster_ca"),
    ("node_cert", "tls.cert"),
    ("node_key", "tls.key"),
    ("cluster_tls_server_name", "tls.server_name"),
    ("shard_count", "sharding.shard_count"),
    ("sharding_strategy", "sharding.strategy"),
    ("auto_rebalance", "sharding.auto_rebalance"),
    ("sharding_auto_rebalance", "sharding.auto_rebalance"),
    ("rebalance_interval_secs", "sharding.rebalance_interval_secs"),
    ("split_threshold_bytes", "sharding.split_threshold_bytes"),
    ("split_threshold_keys", "sharding.split_threshold_keys"),
    ("split_threshold_writes_per_sec", "sharding.split_threshold_writes_per_sec"),
    ("split_check_interval_secs", "sharding.split_check_interval_secs"),
    ("replication_factor", "replication.replication_factor"),
    ("consistency_level", "replication.consistency_level"),
    ("raft_heartbeat_ms", "raft.heartbeat_ms"),
    ("raft_election_min_ms", "raft.election_min_ms"),
    ("raft_election_max_ms", "raft.election_max_ms"),
    ("raft_snapshot_logs", "raft.snapshot_logs"),
    ("raft_keep_logs", "raft.keep_logs"),
    ("raft_proposals_in_flight", "raft.proposals_in_flight"),
    ("raft_batch_max_commands", "raft.batch_max_commands"),
    ("retention_interval_secs", "maintenance.retention_interval_secs"),
    ("stream_retention_interval_secs", "maintenance.stream_retention_interval_secs"),
    ("upload_sweep_interval_secs", "maintenance.upload_sweep_interval_secs"),
    ("upload_max_age_secs", "maintenance.upload_max_age_secs"),
    ("log_level", "log_level"),
    ("otlp_endpoint", "telemetry.otlp_endpoint"),
    ("trace_sample_ratio", "telemetry.sample_ratio"),
    ("test_clock_offset_ms", "test_clock_offset_ms"),
    ("max_clock_offset_ms", "cluster.max_clock_offset_ms"),
    ("cluster_insecure", "cluster.insecure"),
];

/// The node id of a host named `<anything>-<ordinal>`: the ordinal plus one (a
/// StatefulSet's pods count from 0, node ids from 1).
pub fn node_id_of_host(host: &str) -> Option<NodeId> {
    let (_, ordinal) = host.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    ordinal.parse::<NodeId>().ok()?.checked_add(1)
}

/// Errors reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Figment(#[from] Box<figment::Error>),
    #[error("peer entry {0:?} is not of the form id=host:port")]
    BadPeer(String),
    #[error(
        "cluster.peers (SERVICE_PEERS) does not list this node ({0}): list it, or give its own address in cluster.advertise_addr (SERVICE_ADVERTISE_ADDR)"
    )]
    SelfNotInPeers(NodeId),
    #[error("{0}")]
    Invalid(String),
}

/// `locality` without its tiers of empty value: `zone=,region=eu` (a
/// topology label the platform did not set) is `region=eu`.
fn without_empty_tiers(locality: &str) -> String {
    locality.split(',').map(str::trim).filter(|t| !t.is_empty() && !t.ends_with('=')).collect::<Vec<_>>().join(",")
}

impl NodeConfig {
    /// Loads defaults, then the TOML file (if any), then the environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let defaults = NodeConfig { log_level: "info".into(), ..NodeConfig::default() };
        let mut cfg: NodeConfig = tessera_api::runtime::load_config(&defaults, file, FLAT_ALIASES)?;
        if cfg.cluster.node_id_from_hostname {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            cfg.cluster.node_id = node_id_of_host(&host).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "SERVICE_NODE_ID_FROM_HOSTNAME is set but the host name {host:?} (HOSTNAME) does not end in -<ordinal>"
                ))
            })?;
        }
        cfg.cluster.locality = without_empty_tiers(&cfg.cluster.locality);
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.storage.tuning()?;
        tessera_api::meta::check_locality(&self.cluster.locality).map_err(ConfigError::Invalid)?;
        self.validate_advertise_addr()?;
        let peers = self.peers()?;
        if !peers.iter().any(|p| p.id == self.cluster.node_id) {
            return Err(ConfigError::SelfNotInPeers(self.cluster.node_id));
        }
        let bootstrap = self.bootstrap_peers()?;
        if self.cluster.initial_nodes > 0 && (bootstrap.len() as u64) < self.cluster.initial_nodes {
            return Err(ConfigError::Invalid(format!(
                "cluster.initial_nodes is {} but cluster.peers lists only {} of the ids 1..={}",
                self.cluster.initial_nodes,
                bootstrap.len(),
                self.cluster.initial_nodes
            )));
        }
        if self.sharding.shard_count == 0 {
            return Err(ConfigError::Invalid("sharding.shard_count must be at least 1".into()));
        }
        if self.replication.replication_factor == 0 {
            return Err(ConfigError::Invalid("replication.replication_factor must be at least 1".into()));
        }
        if self.raft.election_min_ms <= self.raft.heartbeat_ms || self.raft.election_max_ms <= self.raft.election_min_ms {
            return Err(ConfigError::Invalid("raft timings need heartbeat < election_min < election_max".into()));
        }
        self.validate_security()?;
        Ok(())
    }

    /// The nodes that bootstrap the cluster (ids up to `cluster.initial_nodes`,
    /// or every configured peer), in id order: never a node that is not in
    /// `cluster.peers` and only advertises itself.
    pub fn bootstrap_peers(&self) -> Result<Vec<NodeInfo>, ConfigError> {
        let peers = self.configured_peers()?;
        Ok(match self.cluster.initial_nodes {
            0 => peers,
            n => peers.into_iter().filter(|p| p.id <= n).collect(),
        })
    }

    /// Whether this node starts into an existing cluster (configured so, or
    /// added after bootstrap: an id past `cluster.initial_nodes`, or a node
    /// `cluster.peers` does not list that advertises itself).
    pub fn joins_existing(&self) -> bool {
        self.cluster.initial_state == InitialState::Existing
            || (self.cluster.initial_nodes > 0 && self.cluster.node_id > self.cluster.initial_nodes)
            || self.configured_peers().is_ok_and(|peers| self.advertised_self(&peers).is_some())
    }

    /// The cluster's nodes in id order: `cluster.peers` (this node alone at
    /// its gRPC address when empty), and this node at `cluster.advertise_addr`
    /// when they do not list it.
    pub fn peers(&self) -> Result<Vec<NodeInfo>, ConfigError> {
        let mut peers = self.configured_peers()?;
        if let Some(addr) = self.advertised_self(&peers) {
            peers.push(NodeInfo::new(self.cluster.node_id, addr.to_string()));
            peers.sort_by_key(|p| p.id);
        }
        Ok(peers)
    }

    /// `cluster.peers` in id order (this node alone at its gRPC address when empty).
    fn configured_peers(&self) -> Result<Vec<NodeInfo>, ConfigError> {
        let mut peers = parse_peers(&self.cluster.peers)?;
        if peers.is_empty() {
            peers.push(NodeInfo::new(self.cluster.node_id, self.server.grpc_addr.clone()));
        }
        peers.sort_by_key(|p| p.id);
        Ok(peers)
    }

    /// This node's advertised address, when `configured` (the configured
    /// peers) does not list it and `cluster.advertise_addr` is set.
    fn advertised_self<'a>(&'a self, configured: &[NodeInfo]) -> Option<&'a str> {
        let addr = self.cluster.advertise_addr.as_deref().map(str::trim).filter(|a| !a.is_empty())?;
        (!configured.iter().any(|p| p.id == self.cluster.node_id)).then_some(addr)
    }

    /// `cluster.advertise_addr`, when set, is `host:port` with every `$(VAR)`
    /// expanded (Kubernetes leaves a reference to an undefined variable as written).
    fn validate_advertise_addr(&self) -> Result<(), ConfigError> {
        let Some(addr) = self.cluster.advertise_addr.as_deref().map(str::trim).filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        if addr.contains("$(") {
            return Err(ConfigError::Invalid(format!(
                "cluster.advertise_addr (SERVICE_ADVERTISE_ADDR) {addr:?} holds an unexpanded $(VAR) reference: define the variable before it in the pod's environment"
            )));
        }
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => Ok(()),
            _ => Err(ConfigError::Invalid(format!("cluster.advertise_addr (SERVICE_ADVERTISE_ADDR) {addr:?} is not host:port"))),
        }
    }

    /// Peer id → address this node dials instead of the membership's address.
    pub fn dial_overrides(&self) -> Result<std::collections::HashMap<NodeId, String>, ConfigError> {
        Ok(parse_peers(&self.cluster.dial_overrides)?.into_iter().map(|p| (p.id, p.addr)).collect())
    }
}

/// Parses `id=host:port` entries.
fn parse_peers(peers: &NodeList) -> Result<Vec<NodeInfo>, ConfigError> {
    Ok(peers.with_ids().map_err(ConfigError::BadPeer)?.into_iter().map(|(id, addr)| NodeInfo::new(id, addr)).collect())
}

/// TLS and encryption at rest.
impl NodeConfig {
    fn validate_security(&self) -> Result<(), ConfigError> {
        let t = &self.tls;
        let set = [t.cluster_ca.is_some(), t.cert.is_some(), t.key.is_some()];
        if set.iter().any(|s| *s) && !set.iter().all(|s| *s) {
            return Err(ConfigError::Invalid(
                "cluster TLS needs all of SERVICE_CLUSTER_CA, SERVICE_NODE_CERT and SERVICE_NODE_KEY \
                 (tls.cluster_ca, tls.cert, tls.key)"
                    .into(),
            ));
        }
        match (set[0], self.cluster.insecure) {
            (false, false) => {
                return Err(ConfigError::Invalid(
                    "the node's gRPC port serves mutual TLS only: set SERVICE_CLUSTER_CA, SERVICE_NODE_CERT and \
                     SERVICE_NODE_KEY (tls.cluster_ca, tls.cert, tls.key; `tessera-node certs --dir DIR --node N` \
                     makes a CA and certificates), or SERVICE_CLUSTER_INSECURE=true (cluster.insecure) to serve \
                     plaintext with no authentication of callers"
                        .into(),
                ));
            }
            (true, true) => {
                return Err(ConfigError::Invalid(
                    "SERVICE_CLUSTER_INSECURE=true (cluster.insecure) and cluster TLS are both set: unset one".into(),
                ));
            }
            _ => {}
        }
        self.storage.retention.parsed()?;
        let algorithm: String = self.encryption.algorithm.chars().filter(char::is_ascii_alphanumeric).collect();
        if !algorithm.eq_ignore_ascii_case("aes256gcm") {
            return Err(ConfigError::Invalid(format!(
                "encryption.algorithm = {:?} is not supported: data at rest is sealed with AES-256-GCM",
                self.encryption.algorithm
            )));
        }
        if self.encryption.key_rotation_days != 0 {
            return Err(ConfigError::Invalid(
                "encryption.key_rotation_days is not supported: scheduled rotation is not built; rotate the at-rest key by hand (storage.encryption_previous_keys, then POST /api/v1/admin/encryption/reencrypt; docs/tls-encryption.md) and set 0".into(),
            ));
        }
        let has_key = self.storage.encryption_key.as_ref().is_some_and(|k| !k.is_blank());
        match (self.storage.encryption_at_rest.or(self.encryption.enabled), has_key) {
            (Some(true), false) => Err(ConfigError::Invalid(
                "SERVICE_ENCRYPTION_AT_REST=true needs SERVICE_ENCRYPTION_KEY (base64 of 32 bytes, or a key file)".into(),
            )),
            (Some(false), true) => Err(ConfigError::Invalid(
                "SERVICE_ENCRYPTION_KEY is set but encryption at rest is turned off (SERVICE_ENCRYPTION_AT_REST=false or encryption.enabled = false); unset one of them".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Whether values are encrypted at rest: as configured, else when a key is set.
    pub fn encryption_on(&self) -> bool {
        let has_key = self.storage.encryption_key.as_ref().is_some_and(|k| !k.is_blank());
        self.storage.encryption_at_rest.or(self.encryption.enabled).unwrap_or(has_key)
    }

    /// The server side of the cluster's mutual TLS, when configured.
    pub fn server_tls(&self) -> anyhow::Result<Option<std::sync::Arc<tessera_api::tls::rustls::ServerConfig>>> {
        let t = &self.tls;
        let (Some(ca), Some(cert), Some(key)) = (&t.cluster_ca, &t.cert, &t.key) else {
            return Ok(None);
        };
        let alpn = [tessera_api::tls::ALPN_H2];
        Ok(Some(tessera_api::tls::server_config(cert, key, Some(ca), &alpn)?))
    }

    /// The client side of the cluster's mutual TLS (dialing peers), when configured.
    pub fn cluster_tls(&self) -> anyhow::Result<Option<tessera_api::tls::ClusterTls>> {
        let t = &self.tls;
        let (Some(ca), Some(cert), Some(key)) = (&t.cluster_ca, &t.cert, &t.key) else {
            return Ok(None);
        };
        Ok(Some(tessera_api::tls::ClusterTls::new(ca, cert, key, t.server_name.as_deref())?))
    }

    /// The cipher of encryption at rest, when turned on.
    pub fn crypt(&self) -> anyhow::Result<Option<tessera_storage::Crypt>> {
        match (&self.storage.encryption_key, self.encryption_on()) {
            (Some(spec), true) => {
                let previous: Vec<String> = self.storage.encryption_previous_keys.expose().split(',').map(str::to_string).collect();
                Ok(Some(tessera_storage::Crypt::from_key_spec(spec.expose())?.with_previous(&previous)?))
            }
            _ => Ok(None),
        }
    }
}

/// How often each task runs (`maintenance.*`; flat `SERVICE_*` aliases in `config.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MaintenanceSection {
    /// Time-series retention and downsampling, seconds (at least 1).
    pub retention_interval_secs: u64,
    /// Channel retention (age and event count), seconds (at least 1).
    pub stream_retention_interval_secs: u64,
    /// Sweep of abandoned object uploads, seconds (at least 1).
    pub upload_sweep_interval_secs: u64,
    /// An upload neither committed nor aborted this long after its first chunk
    /// (its router died mid-upload) has its chunks freed by the sweep.
    pub upload_max_age_secs: u64,
}

impl Default for MaintenanceSection {
    fn default() -> Self {
        MaintenanceSection {
            retention_interval_secs: 60,
            stream_retention_interval_secs: 30,
            upload_sweep_interval_secs: 300,
            upload_max_age_secs: 3600,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ClusterSection, EncryptionSection, NodeConfig, StorageSection, TlsSection, node_id_of_host, parse_size};

    fn insecure() -> ClusterSection {
        ClusterSection { insecure: true, ..ClusterSection::default() }
    }

    /// Issue 36, item 6: at-rest key specs (current and previous, during a
    /// rotation) never appear in the configuration a node serializes (its
    /// `Config` reply, shown by `GET /api/v1/admin/config`).
    #[test]
    fn no_key_spec_leaves_in_the_serialized_configuration() {
        let (current, previous) = (
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
            "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM=,MjM0NTY3ODk6Ozw9Pj9AQUJDREVGR0hJSktMTU5PUFE=",
        );
        let cfg = NodeConfig {
            storage: StorageSection {
                encryption_key: Some(current.into()),
                encryption_previous_keys: previous.into(),
                ..StorageSection::default()
            },
            cluster: insecure(),
            ..NodeConfig::default()
        };
        assert!(cfg.crypt().unwrap().is_some(), "the keys are usable");
        let shown = serde_json::to_string(&cfg).unwrap();
        for secret in [current, "ZGVmZ2hpamtsbW5v", "MjM0NTY3ODk6Ozw9"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains(r#""encryption_previous_keys":"<redacted>""#), "{shown}");
    }

    #[test]
    fn plaintext_grpc_must_be_asked_for_by_name() {
        let refused = NodeConfig::default().validate_security().unwrap_err().to_string();
        assert!(refused.contains("mutual TLS only") && refused.contains("SERVICE_CLUSTER_INSECURE"), "{refused}");
        assert!(NodeConfig { cluster: insecure(), ..NodeConfig::default() }.validate_security().is_ok());
        let tls = TlsSection {
            cluster_ca: Some("ca.pem".into()),
            cert: Some("n.pem".into()),
            key: Some("n.key".into()),
            ..TlsSection::default()
        };
        assert!(NodeConfig { tls: tls.clone(), ..NodeConfig::default() }.validate_security().is_ok());
        let both = NodeConfig { tls, cluster: insecure(), ..NodeConfig::default() }.validate_security().unwrap_err();
        assert!(both.to_string().contains("both set"));
    }

    #[test]
    fn the_encryption_key_alone_turns_encryption_at_rest_on() {
        let key = Some(tessera_api::secret::SecretString::from("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="));
        let with = |at_rest: Option<bool>, encryption: EncryptionSection| NodeConfig {
            storage: StorageSection { encryption_key: key.clone(), encryption_at_rest: at_rest, ..StorageSection::default() },
            encryption,
            cluster: insecure(),
            ..NodeConfig::default()
        };
        let alone = with(None, EncryptionSection::default());
        assert!(alone.validate_security().is_ok() && alone.encryption_on() && alone.crypt().unwrap().is_some());
        let section = with(None, EncryptionSection { enabled: Some(true), algorithm: "aes-256-gcm".into(), key_rotation_days: 0 });
        assert!(section.validate_security().is_ok() && section.encryption_on());
        let off = with(Some(false), EncryptionSection::default());
        assert!(off.validate_security().unwrap_err().to_string().contains("turned off"));
        let other = with(None, EncryptionSection { algorithm: "ChaCha20".into(), ..EncryptionSection::default() });
        assert!(other.validate_security().unwrap_err().to_string().contains("not supported"));
        let rotation = with(None, EncryptionSection { key_rotation_days: 90, ..EncryptionSection::default() });
        assert!(rotation.validate_security().unwrap_err().to_string().contains("key_rotation_days"));
        assert!(!NodeConfig::default().encryption_on(), "no key, nothing set: off");
    }

    #[test]
    fn storage_settings_are_honoured_or_refused_with_a_reason() {
        let tuned =
            StorageSection { compression: "zstd".into(), buffer_pool_size: "256MB".into(), ..StorageSection::default() }.tuning().unwrap();
        assert_eq!((tuned.compression, tuned.block_cache_bytes), (tessera_storage::Compression::Zstd, Some(256 << 20)));
        assert_eq!(StorageSection::default().tuning().unwrap().block_cache_bytes, None);
        let refused = |s: StorageSection| s.tuning().unwrap_err().to_string();
        assert!(refused(StorageSection { backend: "s3".into(), ..StorageSection::default() }).contains("not supported"));
        let memory = StorageSection { backend: "Memory".into(), ..StorageSection::default() }.tuning().expect("memory backend");
        assert!(memory.in_memory);
        let retention = |d: &str, e: &str| super::RetentionSection { default_duration: d.into(), enforce_interval: e.into() }.parsed();
        assert_eq!(retention("30d", "90s").unwrap(), (Some(30 * 86_400_000), Some(90)));
        assert_eq!(retention("", "").unwrap(), (None, None));
        assert!(retention("soon", "").unwrap_err().to_string().contains("default_duration"));
        assert!(refused(StorageSection { wal_enabled: false, ..StorageSection::default() }).contains("cannot be turned off"));
        let unsynced = StorageSection { sync_on_commit: false, ..StorageSection::default() }.tuning().unwrap();
        assert!(unsynced.unsynced_commits, "sync_on_commit = false is honoured");
        assert!(!StorageSection::default().tuning().unwrap().unsynced_commits);
        assert!(refused(StorageSection { compression: "snappy".into(), ..StorageSection::default() }).contains("snappy"));
        assert!(refused(StorageSection { buffer_pool_size: "lots".into(), ..StorageSection::default() }).contains("buffer_pool_size"));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("2 GiB"), Some(2 << 30));
        assert_eq!(parse_size("0"), None);
    }

    /// Issue item 5a: the chart lists only the bootstrap nodes in
    /// SERVICE_PEERS; a pod added later (node 5 of 3 bootstrap nodes) counts
    /// itself among the peers at its advertised address, bootstraps nothing
    /// and joins the existing cluster. A listed node ignores the address.
    #[test]
    fn a_locality_tier_without_a_value_is_ignored() {
        assert_eq!(super::without_empty_tiers("zone=,region=eu"), "region=eu");
        assert_eq!(super::without_empty_tiers("zone="), "");
        assert_eq!(super::without_empty_tiers("zone=a, rack=3"), "zone=a,rack=3");
        assert!(tessera_api::meta::check_locality("zone=a,rack").is_err());
        assert!(tessera_api::meta::check_locality("zone=a b").is_err());
    }

    #[test]
    fn a_node_the_peers_do_not_list_adds_itself_at_its_advertised_address() {
        let bootstrap = "1=db-node-0.h:9191,2=db-node-1.h:9191,3=db-node-2.h:9191";
        let node = |id: u64, advertise: Option<&str>| NodeConfig {
            cluster: ClusterSection {
                node_id: id,
                peers: tessera_api::runtime::NodeList::Csv(bootstrap.into()),
                advertise_addr: advertise.map(str::to_string),
                ..insecure()
            },
            ..NodeConfig::default()
        };
        let added = node(5, Some("db-node-4.h:9191"));
        added.validate().expect("an added node with its own address is valid");
        let peers: Vec<(u64, String)> = added.peers().unwrap().into_iter().map(|p| (p.id, p.addr)).collect();
        assert_eq!(peers.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2, 3, 5]);
        assert_eq!(peers[3].1, "db-node-4.h:9191");
        assert_eq!(added.bootstrap_peers().unwrap().iter().map(|p| p.id).collect::<Vec<_>>(), [1, 2, 3], "it bootstraps nothing");
        assert!(added.joins_existing(), "without SERVICE_INITIAL_NODES too, it starts into the existing cluster");
        // A bootstrap node keeps its listed address and bootstraps.
        let listed = node(2, Some("db-node-1.h:9191"));
        listed.validate().unwrap();
        assert_eq!(listed.peers().unwrap().len(), 3);
        assert!(!listed.joins_existing());
        // Neither listed nor advertised: refused, naming the way out.
        let lost = node(5, None).validate().unwrap_err().to_string();
        assert!(lost.contains("SERVICE_ADVERTISE_ADDR"), "{lost}");
        // A reference Kubernetes could not expand, or no port: refused.
        let unexpanded = node(5, Some("$(POD_NAME).h:9191")).validate().unwrap_err().to_string();
        assert!(unexpanded.contains("unexpanded"), "{unexpanded}");
        assert!(node(5, Some("db-node-4.h")).validate().unwrap_err().to_string().contains("host:port"));
    }

    #[test]
    fn a_statefulset_pod_is_its_ordinal_plus_one() {
        assert_eq!(node_id_of_host("tessera-node-0"), Some(1));
        assert_eq!(node_id_of_host("my-release-tessera-node-11"), Some(12));
        assert_eq!(node_id_of_host("tessera-node"), None);
        assert_eq!(node_id_of_host("node-"), None);
        assert_eq!(node_id_of_host("node-1a"), None);
        assert_eq!(node_id_of_host(""), None);
    }
}

/// Every `SERVICE_*` variable this binary reads is documented: in
/// `docs/configuration.md` or the topic document it points to.
#[cfg(test)]
mod documented {
    #[test]
    fn every_environment_variable_is_documented() {
        let docs_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let missing = tessera_api::runtime::undocumented_env_vars(super::FLAT_ALIASES, &docs_dir).unwrap();
        assert!(missing.is_empty(), "not documented in docs/*.md: {missing:?}");
    }

    /// The checked-in key list that lets either binary accept the other's keys
    /// and refuse the rest is this binary's configuration, key for key.
    #[test]
    fn every_key_is_listed() {
        let config = super::NodeConfig::default();
        let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/src/config_keys/node.txt");
        let json = serde_json::to_value(&config).unwrap();
        if let Err(e) = tessera_api::runtime::compare_key_list(&json, &[], tessera_api::runtime::NODE_KEYS, &list) {
            panic!("{e}");
        }
    }
}
