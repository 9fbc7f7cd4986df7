//! `GET /api/v1/admin/stats`, `/alerts` and `/dashboard`: what this router
//! measured of its requests, the alerts the cluster's live state raises, and one
//! summary of both for a UI. Every figure is measured when asked (node facts
//! from the nodes, request figures from [`crate::http::request_stats`]).

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::http::iso8601_ms;
use tessera_api::meta::{ClusterMap, NodeInfo, NodeState};
use tessera_api::rpc::StatusReply;
use tessera_api::{GroupId, NodeId};

use crate::auth::Caller;
use crate::cluster::ClusterError;
use crate::cluster::typed::{self, shape};
use crate::config::AlertsSection;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /api/v1/admin/stats`: request counts and latency percentiles since
/// each router started, in total, by model and by route, merged across the
/// routers (`scope: "cluster"`): this router's live figures and what every
/// other router published to the meta group within the last ten minutes
/// (each publishes every 5 s; `routers` lists whose figures are in). When the
/// meta group does not answer, this router's figures alone (`scope:
/// "router"`). `last_minute` is this router's.
pub async fn stats(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let published = match state.cluster.meta_read(MetaQuery::RouterStats).await {
        Ok(answer) => typed::pick(answer, shape!(MetaQueryResult::RouterStats)).ok(),
        Err(e) => {
            tracing::debug!("other routers' figures not read: {e}");
            None
        }
    };
    let now = tessera_api::command::now_ms();
    let mut body = match &published {
        Some(records) => {
            let others: Vec<_> = records
                .iter()
                .filter(|r| r.router != state.router_instance && now - r.at_ms <= crate::services::request_stats::MERGE_MAX_AGE_MS)
                .cloned()
                .collect();
            let mut body = state.request_stats.merged_snapshot(&others);
            body["scope"] = json!("cluster");
            let mut routers =
                vec![json!({"router": state.router_instance, "this_router": true, "requests": state.request_stats.requests()})];
            routers.extend(others.iter().map(|r| {
                json!({
                    "router": r.router, "this_router": false, "published_at": iso8601_ms(r.at_ms),
                    "requests": r.routes.iter().map(|x| x.requests).sum::<u64>(),
                })
            }));
            body["routers"] = json!(routers);
            body
        }
        None => {
            let mut body = state.request_stats.snapshot();
            body["scope"] = json!("router");
            body
        }
    };
    body["router_uptime_secs"] = json!(state.started.elapsed().as_secs());
    body["last_minute"] = state.request_stats.last_minute().to_json();
    Ok(Json(body))
}

/// One raised alert.
struct Alert {
    kind: &'static str,
    severity: &'static str,
    subject: String,
    message: String,
}

/// What the nodes said when asked, and the map they were asked from.
struct Live {
    map: ClusterMap,
    statuses: Vec<(NodeInfo, Result<StatusReply, ClusterError>)>,
}

impl Live {
    async fn ask(state: &AppState) -> Result<Live, ApiError> {
        let statuses = state.cluster.node_statuses().await?;
        let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
        Ok(Live { map, statuses })
    }

    fn answered(&self) -> impl Iterator<Item = &StatusReply> {
        self.statuses.iter().filter_map(|(_, s)| s.as_ref().ok())
    }

    /// Groups no answering node reports a leader for.
    fn groups_without_leader(&self) -> Vec<GroupId> {
        let led: BTreeSet<GroupId> =
            self.answered().flat_map(|s| s.groups.iter().filter(|g| g.leader_id != 0).map(|g| g.group_id)).collect();
        self.map.groups.iter().map(|g| g.id).filter(|g| !led.contains(g)).collect()
    }

    /// (node, group, entries behind the leader) for replicas trailing by at least `min`.
    fn lagging(&self, min: u64) -> Vec<(NodeId, GroupId, u64)> {
        let leader_applied: BTreeMap<GroupId, u64> = self
            .answered()
            .flat_map(|s| s.groups.iter().filter(|g| g.leader_id == s.node_id).map(|g| (g.group_id, g.last_applied)))
            .collect();
        self.answered()
            .flat_map(|s| {
                s.groups.iter().filter_map(|g| {
                    let behind = leader_applied.get(&g.group_id)?.saturating_sub(g.last_applied);
                    (behind >= min).then_some((s.node_id, g.group_id, behind))
                })
            })
            .collect()
    }

    fn alerts(&self, state: &AppState) -> Vec<Alert> {
        let mut alerts = Vec::new();
        for (node, status) in &self.statuses {
            if let Err(e) = status {
                alerts.push(Alert {
                    kind: "node_unreachable",
                    severity: "critical",
                    subject: format!("node {}", node.id),
                    message: format!("node {} ({}) does not answer: {e}", node.id, node.addr),
                });
            }
            if node.state != NodeState::Active {
                alerts.push(Alert {
                    kind: "node_leaving",
                    severity: "info",
                    subject: format!("node {}", node.id),
                    message: format!("node {} is {}", node.id, node.state.as_str()),
                });
            }
        }
        let thresholds = &state.config.alerts;
        for status in self.answered() {
            alerts.extend(resource_alerts(status, thresholds));
        }
        // Certificates: each node's cluster certificate, and this router's own.
        let mut certs: Vec<(String, String, i64)> = self
            .answered()
            .filter(|s| s.cert_not_after_ms > 0)
            .map(|s| (format!("node {}", s.node_id), format!("node {}'s cluster certificate", s.node_id), s.cert_not_after_ms))
            .collect();
        let tls = &state.config.tls;
        for (what, path) in [("HTTPS", &tls.cert), ("cluster client", &tls.client_cert)] {
            if let Some(path) = path {
                match tessera_api::tls::not_after_ms("certificate", path) {
                    Ok(at) => certs.push(("router".into(), format!("this router's {what} certificate"), at)),
                    Err(e) => tracing::warn!("reading {}: {e}", path.display()),
                }
            }
        }
        alerts.extend(certificate_alerts(tessera_api::command::now_ms(), &certs, thresholds));
        for group in self.groups_without_leader() {
            alerts.push(Alert {
                kind: "group_without_leader",
                severity: "critical",
                subject: format!("group {group}"),
                message: format!("no node reports a leader of group {group}: its writes wait"),
            });
        }
        for (node, group, behind) in self.lagging(thresholds.replication_lag_entries) {
            alerts.push(Alert {
                kind: "replication_lag",
                severity: "warning",
                subject: format!("node {node} group {group}"),
                message: format!("node {node}'s replica of group {group} is {behind} entries behind its leader"),
            });
        }
        let minute = state.request_stats.last_minute();
        if minute.requests >= thresholds.error_rate_min_requests && minute.error_rate() > thresholds.error_rate {
            alerts.push(Alert {
                kind: "error_rate",
                severity: "warning",
                subject: "router".into(),
                message: format!(
                    "{} of the last minute's {} requests to this router failed with a server error",
                    minute.server_errors, minute.requests
                ),
            });
        }
        alerts
    }
}

/// `certificate_expiry` alerts for `(subject, certificate, notAfter in Unix ms)`
/// at `now_ms`: a warning within `certificate_warning_days`, critical within
/// `certificate_critical_days` and once expired.
fn certificate_alerts(now_ms: i64, certs: &[(String, String, i64)], thresholds: &AlertsSection) -> Vec<Alert> {
    const DAY_MS: i64 = 86_400_000;
    let (warning, critical) = (i64::from(thresholds.certificate_warning_days), i64::from(thresholds.certificate_critical_days));
    certs
        .iter()
        .filter(|(_, _, at)| *at - now_ms < warning * DAY_MS)
        .map(|(subject, what, at)| {
            let left = at - now_ms;
            let message = if left <= 0 {
                format!("{what} expired {} days ago", -left / DAY_MS)
            } else {
                format!("{what} expires in {} days ({} hours)", left / DAY_MS, left / 3_600_000)
            };
            Alert {
                kind: "certificate_expiry",
                severity: if left < critical * DAY_MS { "critical" } else { "warning" },
                subject: subject.clone(),
                message,
            }
        })
        .collect()
}

/// Disk and memory alerts of one node, from what it reports (nothing when it
/// reports no totals): free space under `disk_free_ratio` raises `disk_space`
/// (critical under half of it), memory over `memory_used_ratio` raises `memory`.
fn resource_alerts(s: &StatusReply, thresholds: &AlertsSection) -> Vec<Alert> {
    let (disk_free_ratio, memory_used_ratio) = (thresholds.disk_free_ratio, thresholds.memory_used_ratio);
    let mut alerts = Vec::new();
    if s.disk_total_bytes > 0 {
        let free = s.disk_free_bytes as f64 / s.disk_total_bytes as f64;
        if free < disk_free_ratio {
            alerts.push(Alert {
                kind: "disk_space",
                severity: if free < disk_free_ratio / 2.0 { "critical" } else { "warning" },
                subject: format!("node {}", s.node_id),
                message: format!(
                    "node {}'s data filesystem has {} MiB free of {} MiB ({:.1} %)",
                    s.node_id,
                    s.disk_free_bytes >> 20,
                    s.disk_total_bytes >> 20,
                    free * 100.0
                ),
            });
        }
    }
    if s.memory_total_bytes > 0 && s.memory_bytes as f64 > s.memory_total_bytes as f64 * memory_used_ratio {
        alerts.push(Alert {
            kind: "memory",
            severity: "warning",
            subject: format!("node {}", s.node_id),
            message: format!(
                "node {} uses {} MiB of its machine's {} MiB of memory",
                s.node_id,
                s.memory_bytes >> 20,
                s.memory_total_bytes >> 20
            ),
        });
    }
    alerts
}

/// The alerts raised now, each with when this router first saw it (an alert
/// that is no longer true is cleared and forgotten).
fn raised(state: &AppState, live: &Live) -> Vec<Value> {
    let alerts = live.alerts(state);
    let now = tessera_api::command::now_ms();
    let mut seen = state.alerts_seen.lock().unwrap_or_else(|e| e.into_inner());
    let ids: Vec<String> = alerts.iter().map(|a| format!("{}:{}", a.kind, a.subject)).collect();
    seen.retain(|id, _| ids.contains(id));
    alerts
        .iter()
        .zip(ids)
        .map(|(a, id)| {
            let since = *seen.entry(id.clone()).or_insert(now);
            json!({
                "id": id, "type": a.kind, "severity": a.severity, "subject": a.subject,
                "message": a.message, "since": iso8601_ms(since),
            })
        })
        .collect()
}

/// `GET /api/v1/admin/alerts`: node unreachable, group without a leader (both
/// critical), replica lagging by 1000+ entries, this router's 5xx rate over 5 %
/// in the last minute, a data filesystem under 10 % free (critical under 5 %),
/// a node using over 90 % of its machine's memory (warnings), a node leaving (info); raised from the
/// cluster's state when asked, so an alert clears as soon as its cause does.
/// `GET /api/v1/admin/config` (admins): the effective configuration — file,
/// environment and defaults merged — of this router and of every node of the
/// map, every secret (password, secret, passphrase, token, key) redacted. A
/// node that does not answer is listed with its error.
pub async fn config(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let router = serde_json::to_value(&state.config).map_err(|e| ApiError::Internal(e.to_string()))?;
    let nodes: Vec<NodeInfo> = state.cluster.map().map(|m| m.nodes).unwrap_or_default();
    let answers = futures::future::join_all(nodes.iter().map(|n| state.cluster.node_config(n))).await;
    let mut by_node = serde_json::Map::new();
    for (node, answer) in nodes.iter().zip(answers) {
        let shown = match answer.map(|text| serde_json::from_str::<Value>(&text)) {
            Ok(Ok(config)) => json!({"address": node.addr, "config": config}),
            Ok(Err(e)) => json!({"address": node.addr, "error": format!("unreadable answer: {e}")}),
            Err(e) => json!({"address": node.addr, "error": e.to_string()}),
        };
        by_node.insert(node.id.to_string(), shown);
    }
    Ok(Json(json!({
        "router": {"address": state.router_name, "config": tessera_api::runtime::redacted(router)},
        "nodes": by_node,
    })))
}

pub async fn alerts(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let live = Live::ask(&state).await?;
    let alerts = raised(&state, &live);
    Ok(Json(json!({"alerts": alerts, "count": alerts.len()})))
}

/// `GET /api/v1/admin/dashboard`: one summary for a UI — health (`unavailable`
/// when a group has no leader, `degraded` with any other warning or critical
/// alert, else `healthy`), nodes up of total, groups without a leader, the last
/// minute's request rate, error rate and latency on this router, storage and
/// memory the nodes use, and the active alerts.
pub async fn dashboard(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let live = Live::ask(&state).await?;
    let alerts = raised(&state, &live);
    let count = |severity: &str| alerts.iter().filter(|a| a["severity"] == severity).count();
    let without_leader = live.groups_without_leader();
    let health = if !without_leader.is_empty() {
        "unavailable"
    } else if count("critical") + count("warning") > 0 {
        "degraded"
    } else {
        "healthy"
    };
    let up = live.answered().count();
    let disk: u64 = live.answered().map(|s| s.disk_bytes).sum();
    let memory: u64 = live.answered().map(|s| s.memory_bytes).sum();
    Ok(Json(json!({
        "health": health,
        "nodes": {
            "total": live.statuses.len(), "up": up, "down": live.statuses.len() - up,
            "leaving": live.map.nodes.iter().filter(|n| n.state != NodeState::Active).count(),
        },
        "groups": {"total": live.map.groups.len(), "without_leader": without_leader},
        "requests_last_minute": state.request_stats.last_minute().to_json(),
        "storage": {"disk_used_bytes": disk, "memory_used_bytes": memory},
        "alerts": {
            "active": alerts.len(), "critical": count("critical"), "warning": count("warning"), "info": count("info"),
            "items": alerts,
        },
        "version": env!("CARGO_PKG_VERSION"),
        "wire_version": state.cluster.wire_version(),
        "router_uptime_secs": state.started.elapsed().as_secs(),
    })))
}

/// `GET /api/v1/admin/storage`: bytes per model and per node, measured by each
/// node from RocksDB (approximate sizes of each model's key ranges, compressed
/// as stored, memtables flushed first), with each group's Raft log and stored
/// snapshot, and the files under each node's data directory. Every replica
/// counts on its own node, so `models` sums all copies.
pub async fn storage(State(state): State<AppState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let calls = map.nodes.iter().map(|n| async { (n.clone(), state.cluster.node_storage(n).await) });
    let replies = futures::future::join_all(calls).await;
    let mut models: BTreeMap<String, u64> = BTreeMap::new();
    let (mut data, mut log, mut snapshots, mut disk) = (0u64, 0u64, 0u64, 0u64);
    let mut nodes = Vec::new();
    for (node, reply) in replies {
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                nodes.push(json!({"node_id": node.id, "reachable": false, "error": e.to_string()}));
                continue;
            }
        };
        let mut node_models: BTreeMap<String, u64> = BTreeMap::new();
        let (mut node_log, mut node_snapshots) = (0u64, 0u64);
        let groups: Vec<Value> = reply
            .groups
            .iter()
            .map(|g| {
                for m in &g.models {
                    *node_models.entry(m.model.clone()).or_default() += m.bytes;
                }
                node_log += g.log_bytes;
                node_snapshots += g.snapshot_bytes;
                let by_model: BTreeMap<&str, u64> = g.models.iter().map(|m| (m.model.as_str(), m.bytes)).collect();
                json!({"group_id": g.group_id, "models": by_model, "raft_log_bytes": g.log_bytes, "snapshot_bytes": g.snapshot_bytes})
            })
            .collect();
        let node_data: u64 = node_models.values().sum();
        for (m, b) in &node_models {
            *models.entry(m.clone()).or_default() += b;
        }
        data += node_data;
        log += node_log;
        snapshots += node_snapshots;
        disk += reply.disk_bytes;
        nodes.push(json!({
            "node_id": node.id, "reachable": true, "data_bytes": node_data, "models": node_models,
            "raft_log_bytes": node_log, "snapshot_bytes": node_snapshots, "disk_used_bytes": reply.disk_bytes,
            "groups": groups,
        }));
    }
    Ok(Json(json!({
        "models": models,
        "nodes": nodes,
        "totals": {"data_bytes": data, "raft_log_bytes": log, "snapshot_bytes": snapshots, "disk_used_bytes": disk},
        "measured_at": iso8601_ms(tessera_api::command::now_ms()),
    })))
}

/// `?limit=&type=` of the activities route.
#[derive(schemars::JsonSchema, serde::Deserialize)]
pub struct ActivitiesParams {
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<usize>,
    #[serde(rename = "type")]
    #[schemars(pattern(r"^(query|login|config|admin)$"))]
    kind: Option<String>,
}

/// Activities `limit` gives when it is not given, and the most it may ask.
const DEFAULT_ACTIVITIES: usize = 100;

/// `GET /api/v1/admin/activities?limit=&type=`: the newest recorded activities
/// (100 by default, at most the 10 000 the meta group keeps), newest first,
/// of one `type` (`query`, `login`, `config`, `admin`) or all. Every router
/// records what it serves into the meta group; this router writes what it
/// noted before reading, so its own latest requests are listed.
pub async fn activities(
    State(state): State<AppState>,
    _caller: Caller,
    super::QueryParams(p): super::QueryParams<ActivitiesParams>,
) -> Result<Json<Value>, ApiError> {
    let limit = p.limit.unwrap_or(DEFAULT_ACTIVITIES);
    if !(1..=tessera_api::meta::ACTIVITIES_KEEP).contains(&limit) {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {}", tessera_api::meta::ACTIVITIES_KEEP)));
    }
    if let Some(kind) = &p.kind
        && !["query", "login", "config", "admin"].contains(&kind.as_str())
    {
        return Err(ApiError::BadRequest("type must be one of: query, login, config, admin".into()));
    }
    state.activities.flush(&*state.cluster).await?;
    let answer = state.cluster.meta_read(MetaQuery::Activities { limit, kind: p.kind }).await?;
    let records = typed::pick(answer, shape!(MetaQueryResult::Activities))?;
    let items: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "id": r.id, "type": r.kind, "timestamp": iso8601_ms(r.at_ms), "user": r.user,
                "method": r.method, "route": r.route, "status": r.status, "duration_ms": r.duration_ms,
                "detail": r.detail, "router": r.router,
            })
        })
        .collect();
    Ok(Json(json!({"activities": items, "count": items.len()})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filling_disk_and_a_memory_hog_raise_alerts() {
        let gib = 1u64 << 30;
        let defaults = AlertsSection::default();
        let status = |free, rss| StatusReply {
            node_id: 2,
            disk_free_bytes: free,
            disk_total_bytes: 100 * gib,
            memory_bytes: rss,
            memory_total_bytes: 16 * gib,
            ..Default::default()
        };
        assert!(resource_alerts(&status(50 * gib, gib), &defaults).is_empty());
        let low = resource_alerts(&status(8 * gib, gib), &defaults);
        assert_eq!((low[0].kind, low[0].severity), ("disk_space", "warning"));
        let full = resource_alerts(&status(gib, 15 * gib), &defaults);
        assert_eq!((full[0].kind, full[0].severity), ("disk_space", "critical"));
        assert_eq!((full[1].kind, full[1].severity), ("memory", "warning"));
        assert!(full[0].message.contains("1024 MiB free"), "{}", full[0].message);
        // A node that reports no totals raises nothing.
        assert!(resource_alerts(&StatusReply::default(), &defaults).is_empty());
        // Thresholds are configuration: at 60 % free and 50 % memory, a stricter
        // operator is told; the defaults say nothing.
        let strict = AlertsSection { disk_free_ratio: 0.7, memory_used_ratio: 0.4, ..AlertsSection::default() };
        assert!(resource_alerts(&status(60 * gib, 8 * gib), &defaults).is_empty());
        let told: Vec<(&str, &str)> = resource_alerts(&status(60 * gib, 8 * gib), &strict).iter().map(|a| (a.kind, a.severity)).collect();
        assert_eq!(told, [("disk_space", "warning"), ("memory", "warning")]);
    }

    #[test]
    fn certificates_warn_a_month_ahead_and_turn_critical_in_the_last_week() {
        const DAY: i64 = 86_400_000;
        let now = 1_800_000_000_000;
        let cert = |subject: &str, at: i64| (subject.to_string(), format!("{subject}'s certificate"), at);
        let certs =
            [cert("node 1", now + 90 * DAY), cert("node 2", now + 20 * DAY), cert("router", now + 2 * DAY), cert("node 3", now - 3 * DAY)];
        let alerts = certificate_alerts(now, &certs, &AlertsSection::default());
        let seen: Vec<(&str, &str)> = alerts.iter().map(|a| (a.subject.as_str(), a.severity)).collect();
        assert_eq!(seen, [("node 2", "warning"), ("router", "critical"), ("node 3", "critical")]);
        assert!(alerts.iter().all(|a| a.kind == "certificate_expiry"));
        assert!(alerts[2].message.contains("expired 3 days ago"), "{}", alerts[2].message);
        // A 120-day warning and a 30-day critical window, as configured.
        let early = AlertsSection { certificate_warning_days: 120, certificate_critical_days: 30, ..AlertsSection::default() };
        let seen: Vec<(String, &str)> = certificate_alerts(now, &certs, &early).into_iter().map(|a| (a.subject, a.severity)).collect();
        assert_eq!(seen[0], ("node 1".to_string(), "warning"));
        assert_eq!(seen[1], ("node 2".to_string(), "critical"));
    }

    #[test]
    fn thresholds_that_mean_nothing_are_refused() {
        assert!(AlertsSection::default().check().is_ok());
        let ratio = AlertsSection { disk_free_ratio: 1.5, ..AlertsSection::default() };
        assert!(ratio.check().unwrap_err().contains("alerts.disk_free_ratio"));
        let days = AlertsSection { certificate_critical_days: 40, ..AlertsSection::default() };
        assert!(days.check().unwrap_err().contains("certificate_critical_days"));
    }
}
