//! Monitoring: what this router measured of its requests (merged with what
//! the other routers published), the alerts the cluster's live state raises,
//! one summary of both for a UI, the bytes each model and node stores, the
//! effective configuration of every process, and the recorded activities.
//! Every figure is measured when asked.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::http::iso8601_ms;
use tessera_api::meta::{NodeInfo, NodeState};
use tessera_api::{GroupId, NodeId};

use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::services::alerts::{AlertInputs, Live};
use crate::services::request_stats::{LastMinuteView, MERGE_MAX_AGE_MS, Summary};
use crate::state::AppState;

/// Whose request figures a stats answer holds.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StatsScope {
    /// Every router that published within the last ten minutes.
    Cluster,
    /// This router's alone (the meta group did not answer).
    Router,
}

/// A router whose figures are in a `cluster` stats answer.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RouterFigures {
    /// Its `host:port` and instance id.
    pub router: String,
    pub this_router: bool,
    /// When it published them (absent for this router's live figures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    pub requests: u64,
}

/// `GET /api/v1/admin/stats`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Stats {
    #[serde(flatten)]
    pub figures: Summary,
    pub scope: StatsScope,
    /// With `scope: cluster`, the routers whose figures are in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routers: Option<Vec<RouterFigures>>,
    pub router_uptime_secs: u64,
    /// This router's last minute.
    pub last_minute: LastMinuteView,
}

/// Request counts and latency percentiles since each router started, in
/// total, by model and by route, merged across the routers (`cluster`): this
/// router's live figures and what every other router published to the meta
/// group within the last ten minutes; this router's alone (`router`) when the
/// meta group does not answer.
pub async fn stats(state: &AppState) -> Result<Stats, ApiError> {
    let published = match state.cluster.meta_read(MetaQuery::RouterStats).await {
        Ok(answer) => typed::pick(answer, shape!(MetaQueryResult::RouterStats)).ok(),
        Err(e) => {
            tracing::debug!("other routers' figures not read: {e}");
            None
        }
    };
    let now = tessera_api::command::now_ms();
    let (figures, scope, routers) = match &published {
        Some(records) => {
            let others: Vec<_> =
                records.iter().filter(|r| r.router != state.router_instance && now - r.at_ms <= MERGE_MAX_AGE_MS).cloned().collect();
            let mut routers = vec![RouterFigures {
                router: state.router_instance.clone(),
                this_router: true,
                published_at: None,
                requests: state.request_stats.requests(),
            }];
            routers.extend(others.iter().map(|r| RouterFigures {
                router: r.router.clone(),
                this_router: false,
                published_at: Some(iso8601_ms(r.at_ms)),
                requests: r.routes.iter().map(|x| x.requests).sum(),
            }));
            (state.request_stats.merged_snapshot(&others), StatsScope::Cluster, Some(routers))
        }
        None => (state.request_stats.snapshot(), StatsScope::Router, None),
    };
    Ok(Stats {
        figures,
        scope,
        routers,
        router_uptime_secs: state.started.elapsed().as_secs(),
        last_minute: state.request_stats.last_minute().view(),
    })
}

/// What the nodes say now, and the map they were asked from.
async fn live(state: &AppState) -> Result<Live, ApiError> {
    let statuses = state.cluster.node_statuses().await?;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    Ok(Live { map, statuses })
}

/// One raised alert, with since when this router has seen it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RaisedAlert {
    /// `type:subject`, the same while the alert stays raised.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `critical`, `warning` or `info`.
    pub severity: String,
    pub subject: String,
    pub message: String,
    pub since: String,
}

/// `GET /api/v1/admin/alerts`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RaisedAlerts {
    pub alerts: Vec<RaisedAlert>,
    pub count: usize,
}

/// The alerts raised now, as answered.
fn raised(state: &AppState, live: &Live) -> Vec<RaisedAlert> {
    let inputs = AlertInputs { thresholds: &state.config.alerts, tls: &state.config.tls, last_minute: state.request_stats.last_minute() };
    let alerts = live.alerts(&inputs);
    state
        .alerts
        .raise(alerts, tessera_api::command::now_ms())
        .into_iter()
        .map(|r| RaisedAlert {
            id: r.id,
            kind: r.alert.kind.into(),
            severity: r.alert.severity.into(),
            subject: r.alert.subject,
            message: r.alert.message,
            since: iso8601_ms(r.since_ms),
        })
        .collect()
}

/// The alerts the cluster's state raises now (see `services/alerts.rs`).
pub async fn alerts(state: &AppState) -> Result<RaisedAlerts, ApiError> {
    let live = live(state).await?;
    let alerts = raised(state, &live);
    Ok(RaisedAlerts { count: alerts.len(), alerts })
}

/// `healthy`, `degraded` (a warning or critical alert) or `unavailable` (a
/// group without a leader).
#[derive(Serialize, schemars::JsonSchema, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum ClusterHealth {
    Healthy,
    Degraded,
    Unavailable,
}

/// The dashboard's nodes.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeCounts {
    pub total: usize,
    pub up: usize,
    pub down: usize,
    /// Nodes joining, draining or being removed.
    pub leaving: usize,
}

/// The dashboard's groups.
#[derive(Serialize, schemars::JsonSchema)]
pub struct GroupCounts {
    pub total: usize,
    pub without_leader: Vec<GroupId>,
    /// Groups with two replicas in one failure domain (the first tier of the
    /// nodes' `cluster.locality`): one zone's loss could take their quorum.
    /// The placement driver spreads them when a node of another zone exists.
    pub sharing_a_zone: Vec<GroupId>,
}

/// The dashboard's storage.
#[derive(Serialize, schemars::JsonSchema)]
pub struct StorageUse {
    pub disk_used_bytes: u64,
    pub memory_used_bytes: u64,
}

/// The dashboard's alerts.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AlertCounts {
    pub active: usize,
    pub critical: usize,
    pub warning: usize,
    pub info: usize,
    pub items: Vec<RaisedAlert>,
}

/// `GET /api/v1/admin/dashboard`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Dashboard {
    pub health: ClusterHealth,
    pub nodes: NodeCounts,
    pub groups: GroupCounts,
    pub requests_last_minute: LastMinuteView,
    pub storage: StorageUse,
    pub alerts: AlertCounts,
    pub version: String,
    pub wire_version: u32,
    pub router_uptime_secs: u64,
}

/// One summary for a UI: health, nodes up of total, groups without a leader,
/// this router's last minute, storage and memory the nodes use, and the
/// active alerts.
pub async fn dashboard(state: &AppState) -> Result<Dashboard, ApiError> {
    let live = live(state).await?;
    let items = raised(state, &live);
    let count = |severity: &str| items.iter().filter(|a| a.severity == severity).count();
    let without_leader = live.groups_without_leader();
    let health = if !without_leader.is_empty() {
        ClusterHealth::Unavailable
    } else if count("critical") + count("warning") > 0 {
        ClusterHealth::Degraded
    } else {
        ClusterHealth::Healthy
    };
    let up = live.answered().count();
    Ok(Dashboard {
        health,
        nodes: NodeCounts {
            total: live.statuses.len(),
            up,
            down: live.statuses.len() - up,
            leaving: live.map.nodes.iter().filter(|n| n.state != NodeState::Active).count(),
        },
        groups: GroupCounts {
            total: live.map.groups.len(),
            without_leader,
            sharing_a_zone: tessera_api::placement::crowded_groups(&live.map),
        },
        requests_last_minute: state.request_stats.last_minute().view(),
        storage: StorageUse {
            disk_used_bytes: live.answered().map(|s| s.disk_bytes).sum(),
            memory_used_bytes: live.answered().map(|s| s.memory_bytes).sum(),
        },
        alerts: AlertCounts { active: items.len(), critical: count("critical"), warning: count("warning"), info: count("info"), items },
        version: env!("CARGO_PKG_VERSION").into(),
        wire_version: state.cluster.wire_version(),
        router_uptime_secs: state.started.elapsed().as_secs(),
    })
}

/// A process's effective configuration (every secret redacted), or why a
/// node's could not be read.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ProcessConfig {
    pub address: String,
    /// The configuration as the process holds it (sections as in its file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /api/v1/admin/config`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct EffectiveConfig {
    pub router: ProcessConfig,
    /// By node id.
    pub nodes: BTreeMap<String, ProcessConfig>,
}

/// The effective configuration (file, environment and defaults merged) of this
/// router and of every node of the map, every secret redacted; a node that
/// does not answer is listed with its error.
pub async fn config(state: &AppState) -> Result<EffectiveConfig, ApiError> {
    let router = serde_json::to_value(&state.config).map_err(|e| ApiError::Internal(e.to_string()))?;
    let nodes: Vec<NodeInfo> = state.cluster.map().map(|m| m.nodes).unwrap_or_default();
    let answers = futures::future::join_all(nodes.iter().map(|n| state.cluster.node_config(n))).await;
    let mut by_node = BTreeMap::new();
    for (node, answer) in nodes.iter().zip(answers) {
        let (config, error) = match answer.map(|text| serde_json::from_str::<Value>(&text)) {
            Ok(Ok(config)) => (Some(config), None),
            Ok(Err(e)) => (None, Some(format!("unreadable answer: {e}"))),
            Err(e) => (None, Some(e.to_string())),
        };
        by_node.insert(node.id.to_string(), ProcessConfig { address: node.addr.clone(), config, error });
    }
    Ok(EffectiveConfig {
        router: ProcessConfig { address: state.router_name.clone(), config: Some(tessera_api::runtime::redacted(router)), error: None },
        nodes: by_node,
    })
}

/// One group's bytes on one node.
#[derive(Serialize, schemars::JsonSchema)]
pub struct GroupBytes {
    pub group_id: GroupId,
    /// Bytes by model.
    pub models: BTreeMap<String, u64>,
    pub raft_log_bytes: u64,
    pub snapshot_bytes: u64,
}

/// One node's bytes, or why it did not answer.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeBytes {
    pub node_id: NodeId,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<BTreeMap<String, u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raft_log_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupBytes>>,
}

/// The storage answer's sums over the nodes that answered.
#[derive(Serialize, schemars::JsonSchema)]
pub struct StorageTotals {
    pub data_bytes: u64,
    pub raft_log_bytes: u64,
    pub snapshot_bytes: u64,
    pub disk_used_bytes: u64,
}

/// `GET /api/v1/admin/storage`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct StorageReport {
    /// Bytes by model, every replica counted.
    pub models: BTreeMap<String, u64>,
    pub nodes: Vec<NodeBytes>,
    pub totals: StorageTotals,
    pub measured_at: String,
}

/// Bytes per model and per node, measured by each node from RocksDB
/// (approximate sizes of each model's key ranges, compressed as stored,
/// memtables flushed first), with each group's Raft log and stored snapshot,
/// and the files under each node's data directory. Every replica counts on
/// its own node, so `models` sums all copies.
pub async fn storage(state: &AppState) -> Result<StorageReport, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let calls = map.nodes.iter().map(|n| async { (n.clone(), state.cluster.node_storage(n).await) });
    let replies = futures::future::join_all(calls).await;
    let mut models: BTreeMap<String, u64> = BTreeMap::new();
    let mut totals = StorageTotals { data_bytes: 0, raft_log_bytes: 0, snapshot_bytes: 0, disk_used_bytes: 0 };
    let mut nodes = Vec::new();
    for (node, reply) in replies {
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                nodes.push(NodeBytes {
                    node_id: node.id,
                    reachable: false,
                    error: Some(e.to_string()),
                    data_bytes: None,
                    models: None,
                    raft_log_bytes: None,
                    snapshot_bytes: None,
                    disk_used_bytes: None,
                    groups: None,
                });
                continue;
            }
        };
        let mut node_models: BTreeMap<String, u64> = BTreeMap::new();
        let (mut node_log, mut node_snapshots) = (0u64, 0u64);
        let groups: Vec<GroupBytes> = reply
            .groups
            .iter()
            .map(|g| {
                for m in &g.models {
                    *node_models.entry(m.model.clone()).or_default() += m.bytes;
                }
                node_log += g.log_bytes;
                node_snapshots += g.snapshot_bytes;
                GroupBytes {
                    group_id: g.group_id,
                    models: g.models.iter().map(|m| (m.model.clone(), m.bytes)).collect(),
                    raft_log_bytes: g.log_bytes,
                    snapshot_bytes: g.snapshot_bytes,
                }
            })
            .collect();
        let node_data: u64 = node_models.values().sum();
        for (m, b) in &node_models {
            *models.entry(m.clone()).or_default() += b;
        }
        totals.data_bytes += node_data;
        totals.raft_log_bytes += node_log;
        totals.snapshot_bytes += node_snapshots;
        totals.disk_used_bytes += reply.disk_bytes;
        nodes.push(NodeBytes {
            node_id: node.id,
            reachable: true,
            error: None,
            data_bytes: Some(node_data),
            models: Some(node_models),
            raft_log_bytes: Some(node_log),
            snapshot_bytes: Some(node_snapshots),
            disk_used_bytes: Some(reply.disk_bytes),
            groups: Some(groups),
        });
    }
    Ok(StorageReport { models, nodes, totals, measured_at: iso8601_ms(tessera_api::command::now_ms()) })
}

/// One recorded activity.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ActivityView {
    pub id: String,
    /// `query`, `login`, `config` or `admin`.
    #[serde(rename = "type")]
    pub kind: String,
    pub timestamp: String,
    pub user: String,
    pub method: String,
    pub route: String,
    pub status: u16,
    pub duration_ms: u64,
    pub detail: String,
    /// The router that served it.
    pub router: String,
}

/// `GET /api/v1/admin/activities`, newest first.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ActivityList {
    pub activities: Vec<ActivityView>,
    pub count: usize,
}

/// Activities `limit` gives when it is not given.
pub const DEFAULT_ACTIVITIES: usize = 100;
/// The kinds of activities.
const ACTIVITY_KINDS: [&str; 4] = ["query", "login", "config", "admin"];

/// The newest `limit` recorded activities (at most the 10 000 the meta group
/// keeps), newest first, of one `kind` or all. Every router records what it
/// serves into the meta group; this router writes what it noted before
/// reading, so its own latest requests are listed.
pub async fn activities(state: &AppState, limit: usize, kind: Option<String>) -> Result<ActivityList, ApiError> {
    if !(1..=tessera_api::meta::ACTIVITIES_KEEP).contains(&limit) {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {}", tessera_api::meta::ACTIVITIES_KEEP)));
    }
    if kind.as_deref().is_some_and(|k| !ACTIVITY_KINDS.contains(&k)) {
        return Err(ApiError::BadRequest("type must be one of: query, login, config, admin".into()));
    }
    state.activities.flush(&*state.cluster).await?;
    let answer = state.cluster.meta_read(MetaQuery::Activities { limit, kind }).await?;
    let records = typed::pick(answer, shape!(MetaQueryResult::Activities))?;
    let activities: Vec<ActivityView> = records
        .iter()
        .map(|r| ActivityView {
            id: r.id.clone(),
            kind: r.kind.clone(),
            timestamp: iso8601_ms(r.at_ms),
            user: r.user.clone(),
            method: r.method.clone(),
            route: r.route.clone(),
            status: r.status,
            duration_ms: r.duration_ms,
            detail: r.detail.clone(),
            router: r.router.clone(),
        })
        .collect();
    Ok(ActivityList { count: activities.len(), activities })
}
