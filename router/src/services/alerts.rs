//! Alerts (`GET /api/v1/admin/alerts`, the dashboard): raised from the
//! cluster's state when asked, so an alert clears as soon as its cause does;
//! [`AlertBook`] remembers since when each one has been seen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use tessera_api::meta::{ClusterMap, NodeInfo, NodeState};
use tessera_api::rpc::StatusReply;
use tessera_api::{GroupId, NodeId};

use crate::cluster::ClusterError;
use crate::config::{AlertsSection, TlsSection};
use crate::services::request_stats::LastMinute;

/// What alerts are judged against besides the nodes' answers.
pub struct AlertInputs<'a> {
    pub thresholds: &'a AlertsSection,
    /// This router's certificates.
    pub tls: &'a TlsSection,
    /// This router's requests in the last minute.
    pub last_minute: LastMinute,
}

/// One raised alert.
#[derive(Debug, Clone)]
pub struct Alert {
    pub kind: &'static str,
    pub severity: &'static str,
    pub subject: String,
    pub message: String,
}

/// What the nodes said when asked, and the map they were asked from.
pub struct Live {
    pub map: ClusterMap,
    pub statuses: Vec<(NodeInfo, Result<StatusReply, ClusterError>)>,
}

impl Live {
    pub fn answered(&self) -> impl Iterator<Item = &StatusReply> {
        self.statuses.iter().filter_map(|(_, s)| s.as_ref().ok())
    }

    /// Groups no answering node reports a leader for.
    pub fn groups_without_leader(&self) -> Vec<GroupId> {
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

    /// Every alert the answers, the map and `inputs` raise now.
    pub fn alerts(&self, inputs: &AlertInputs) -> Vec<Alert> {
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
        let thresholds = inputs.thresholds;
        for status in self.answered() {
            alerts.extend(resource_alerts(status, thresholds));
        }
        // Certificates: each node's cluster certificate, and this router's own.
        let mut certs: Vec<(String, String, i64)> = self
            .answered()
            .filter(|s| s.cert_not_after_ms > 0)
            .map(|s| (format!("node {}", s.node_id), format!("node {}'s cluster certificate", s.node_id), s.cert_not_after_ms))
            .collect();
        let tls = inputs.tls;
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
        let minute = &inputs.last_minute;
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

/// One alert as answered: its id (`kind:subject`) and since when it is seen.
pub struct Raised {
    pub id: String,
    pub alert: Alert,
    pub since_ms: i64,
}

/// Since when this router has seen each alert that is still raised.
#[derive(Default)]
pub struct AlertBook {
    seen: Mutex<HashMap<String, i64>>,
}

impl AlertBook {
    /// `alerts` (raised at `now_ms`), each with since when it has been seen;
    /// an alert no longer raised is forgotten.
    pub fn raise(&self, alerts: Vec<Alert>, now_ms: i64) -> Vec<Raised> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let ids: Vec<String> = alerts.iter().map(|a| format!("{}:{}", a.kind, a.subject)).collect();
        seen.retain(|id, _| ids.contains(id));
        alerts
            .into_iter()
            .zip(ids)
            .map(|(alert, id)| {
                let since_ms = *seen.entry(id.clone()).or_insert(now_ms);
                Raised { id, alert, since_ms }
            })
            .collect()
    }
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
    fn an_alert_is_seen_since_it_was_first_raised_and_forgotten_once_cleared() {
        let book = AlertBook::default();
        let alert = |subject: &str| Alert { kind: "memory", severity: "warning", subject: subject.into(), message: String::new() };
        let first = book.raise(vec![alert("node 1")], 1_000);
        assert_eq!((first[0].id.as_str(), first[0].since_ms), ("memory:node 1", 1_000));
        let later = book.raise(vec![alert("node 1"), alert("node 2")], 5_000);
        assert_eq!(later.iter().map(|r| r.since_ms).collect::<Vec<_>>(), [1_000, 5_000]);
        book.raise(vec![alert("node 2")], 6_000);
        assert_eq!(book.raise(vec![alert("node 1")], 9_000)[0].since_ms, 9_000, "cleared, then raised anew");
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
