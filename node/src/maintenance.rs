//! Background maintenance of the data groups, run by each group's leader:
//! time-series retention, channel retention and the sweep of abandoned object
//! uploads. One command per group and period from whichever node leads the
//! group, however many routers there are; the command carries the leader's
//! time like every write, so replicas apply the same cut.
//!
//! The range splitter runs on the meta group's leader (range sharding).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tessera_api::command::MetaOp;
use tessera_api::command::{KvQuery, KvQueryResult, Operation, Query, QueryResult, RangeInfo, Response, SplitOp};
use tessera_api::meta::{ClusterMap, SplitRecord};
use tessera_api::object::ObjectOp;
use tessera_api::rpc::Consistency;
use tessera_api::stream::StreamOp;
use tessera_api::timeseries::TsOp;
use tessera_api::{GroupId, META_GROUP};
use tracing::{debug, info, warn};

use crate::host::Host;
use crate::leader_call::{Answer, Call, on_leader};

/// How long one maintenance write may wait for its commit at least.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Starts the maintenance tasks of this node's groups; `default_retention_ms`
/// (`storage.retention.default_duration`) applies to metrics without a policy.
pub fn spawn(host: Arc<Host>, cfg: &MaintenanceSection, default_retention_ms: Option<i64>) {
    let max_age_ms = i64::try_from(cfg.upload_max_age_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let retention = move || match default_retention_ms {
        Some(drop_after_ms) => Operation::TimeSeries(TsOp::EnforceRetentionWithDefault { drop_after_ms }),
        None => Operation::TimeSeries(TsOp::EnforceRetention),
    };
    tokio::spawn(run_as_leader(host.clone(), "time-series retention", Duration::from_secs(cfg.retention_interval_secs.max(1)), retention));
    let tasks: [(&'static str, u64, fn(i64) -> Operation); 2] = [
        ("channel retention", cfg.stream_retention_interval_secs, |_| Operation::Stream(StreamOp::EnforceRetention)),
        ("upload sweep", cfg.upload_sweep_interval_secs, |max_age_ms| {
            Operation::Object(ObjectOp::SweepUploads { max_age_ms })
        }),
    ];
    for (task, secs, op) in tasks {
        tokio::spawn(run_as_leader(host.clone(), task, Duration::from_secs(secs.max(1)), move || op(max_age_ms)));
    }
}

/// Every `period`, proposes `op()` to each data group this node leads.
async fn run_as_leader(host: Arc<Host>, task: &'static str, period: Duration, op: impl Fn() -> Operation) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        for group in host.hosted().into_iter().map(|(g, _)| g).filter(|&g| g != META_GROUP) {
            if !host.leads(group) {
                continue;
            }
            // Bounded: a leader cut off from its quorum must not stall the other groups' turns.
            let bounded = tokio::time::timeout(period.max(WRITE_TIMEOUT), host.write(group, op(), None, Consistency::Quorum));
            let Ok(result) = bounded.await else {
                info!(group, task, "maintenance not committed in time; the next period tries again");
                continue;
            };
            match result {
                Ok(Response::Rejected(r)) => warn!(group, task, "refused: {}", r.message),
                Ok(Response::Deleted(n)) if n > 0 => info!(group, task, freed = n, "maintenance freed abandoned uploads"),
                Ok(done) => debug!(group, task, ?done, "maintenance applied"),
                // Leadership moved between the check and the write: the new leader runs it.
                Err(e) => info!(group, task, "maintenance not applied: {e}"),
            }
        }
    }
}

/// When a key-value range splits (range sharding; `sharding.split_threshold_*`).
#[derive(Debug, Clone, Copy)]
pub struct SplitThresholds {
    pub bytes: u64,
    pub keys: u64,
    /// Log entries committed per second (0: off).
    pub writes_per_sec: u64,
}

/// Each group's applied index when the splitter last looked, to measure its
/// write rate (kept in memory: a new meta leader measures anew).
type LastSeen = std::collections::HashMap<GroupId, (u64, std::time::Instant)>;

/// Splits done in one period at most (each is planned from fresh sizes).
const SPLITS_PER_PERIOD: usize = 4;

/// Starts the range splitter: every `period`, if this node leads the meta
/// group, it asks each range's group for its size and write rate and splits a
/// range that crossed a threshold (bytes, keys, or log entries per second
/// between two checks) at its middle key (see `tessera_storage::range`).
///
/// A split is first a command of the parent group (the source of truth: the
/// parent records it with the child's id and members), then a record in the
/// meta group's map that routers follow. The splitter keeps no state: a split
/// the parent applied but the map lacks (the meta leader crashed or changed in
/// between) is found in the parent's records and recorded next period.
pub fn spawn_range_splitter(host: Arc<Host>, period: Duration, thresholds: SplitThresholds) {
    info!(period_secs = period.as_secs(), ?thresholds, "range splitter on while this node leads the meta group");
    tokio::spawn(split_ranges(host, period, thresholds));
}

async fn split_ranges(host: Arc<Host>, period: Duration, thresholds: SplitThresholds) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut last_seen = LastSeen::new();
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        for _ in 0..SPLITS_PER_PERIOD {
            // Confirmed with a quorum, not read from a metric: a meta leader cut off
            // from its followers does not step down by itself in openraft 0.9.
            if !host.leads(META_GROUP) || host.confirm_meta_leadership().await.is_none() {
                break;
            }
            let Some(map) = host.recorded_map() else { break };
            match split_one(&host, &map, thresholds, &mut last_seen).await {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    info!("range split not done this period: {e}");
                    break;
                }
            }
        }
    }
}

/// Records one split a parent applied and the map lacks, or splits one range
/// over a threshold; false when there was nothing to do.
///
/// The child's id is reserved in the meta group first (a compare-and-set there,
/// never "one more than the groups this replica sees", which a new or deposed
/// meta leader may not see all of), and a parent's reserved split is recorded
/// before any new split of any parent is planned.
async fn split_one(host: &Arc<Host>, map: &ClusterMap, thresholds: SplitThresholds, last_seen: &mut LastSeen) -> Result<bool, String> {
    let mut parents: Vec<GroupId> = map.ranges.iter().map(|r| r.group).collect();
    parents.dedup();
    let mut infos = Vec::with_capacity(parents.len());
    for &parent in &parents {
        let info = range_info(host, map, parent).await?;
        if let Some(split) = info.splits.iter().find(|s| map.groups.iter().all(|g| g.id != s.child)) {
            record_split(host, parent, split).await?;
            return Ok(true);
        }
        infos.push((parent, info));
    }
    for (parent, info) in infos {
        let now = std::time::Instant::now();
        let rate = match last_seen.insert(parent, (info.applied_index, now)) {
            Some((index, at)) if info.applied_index >= index && now > at => {
                (info.applied_index - index) as f64 / now.duration_since(at).as_secs_f64()
            }
            _ => 0.0,
        };
        let hot = thresholds.writes_per_sec > 0 && rate > thresholds.writes_per_sec as f64;
        if info.bytes <= thresholds.bytes && info.keys <= thresholds.keys && !hot {
            continue;
        }
        let Some(at) = info.middle_key else { continue };
        let child = reserve_child(host, parent).await?;
        let op = Operation::Split(SplitOp { child, at: at.clone() });
        match on_leader(host, map, parent, Call::Write(op)).await? {
            Answer::Written(Response::Applied(_)) => {}
            Answer::Written(Response::Rejected(r)) => return Err(format!("group {parent} refused the split: {}", r.message)),
            other => return Err(format!("unexpected answer to a split: {other:?}")),
        }
        let why = if hot { "write load" } else { "size" };
        info!(parent, child, at, keys = info.keys, bytes = info.bytes, writes_per_sec = rate as u64, why, "split a key-value range");
        // Both halves measure their rate anew.
        last_seen.remove(&parent);
        let info = range_info(host, map, parent).await?;
        let split = info.splits.iter().find(|s| s.child == child).ok_or_else(|| format!("group {parent} has no record of its split"))?;
        record_split(host, parent, split).await?;
        return Ok(true);
    }
    Ok(false)
}

/// Reserves (or finds reserved) the child id of `parent`'s next split in the
/// meta group, which this node leads: the write is applied here before it answers.
async fn reserve_child(host: &Arc<Host>, parent: GroupId) -> Result<GroupId, String> {
    let op = Operation::Meta(MetaOp::ReserveSplit { parent });
    match host.write(META_GROUP, op, None, Consistency::Quorum).await.map_err(|e| e.to_string())? {
        Response::Applied(_) => {}
        Response::Rejected(r) => return Err(format!("the meta group refused a split reservation: {}", r.message)),
        other => return Err(format!("unexpected answer to a split reservation: {other:?}")),
    }
    let map = host.recorded_map().ok_or("the cluster map is not readable")?;
    map.pending_splits.get(&parent).copied().ok_or_else(|| format!("no split of group {parent} is reserved"))
}

async fn range_info(host: &Arc<Host>, map: &ClusterMap, group: GroupId) -> Result<RangeInfo, String> {
    match on_leader(host, map, group, Call::Read(Query::Kv(KvQuery::Range))).await? {
        Answer::Read(QueryResult::Kv(KvQueryResult::Range(info))) => Ok(info),
        other => Err(format!("unexpected answer to a range query: {other:?}")),
    }
}

async fn record_split(host: &Arc<Host>, parent: GroupId, split: &SplitRecord) -> Result<(), String> {
    let op = MetaOp::RecordSplit { parent, child: split.child, at: split.at.clone(), members: split.members.clone() };
    match host.write(META_GROUP, Operation::Meta(op), None, Consistency::Quorum).await.map_err(|e| e.to_string())? {
        Response::Applied(_) => {
            info!(parent, child = split.child, at = split.at, "recorded a range split in the cluster map");
            Ok(())
        }
        Response::Rejected(r) => Err(format!("the meta group refused the split record: {}", r.message)),
        other => Err(format!("unexpected answer to a split record: {other:?}")),
    }
}
