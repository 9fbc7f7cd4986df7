//! The range splitter (range sharding), run by the meta group's leader: a
//! key-value range over a threshold (bytes, keys, or log entries per second)
//! splits at its middle key.
//!
//! A split is first a command of the parent group (the source of truth: the
//! parent records it with the child's id and members), then a record in the
//! meta group's map that routers follow. The splitter keeps no state: a split
//! the parent applied but the map lacks (the meta leader crashed or changed in
//! between) is found in the parent's records and recorded next period.

use std::time::Duration;

use tessera_api::command::{KvQuery, KvQueryResult, MetaOp, Operation, Query, QueryResult, RangeInfo, Response, SplitOp};
use tessera_api::meta::{ClusterMap, SplitRecord};
use tessera_api::{GroupId, META_GROUP};
use tracing::info;

use super::leader_call::on_leader;
use super::{Answer, Call, ControlError, ControlHost, meta_write};

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
pub(super) type LastSeen = std::collections::HashMap<GroupId, (u64, std::time::Instant)>;

/// Splits done in one period at most (each is planned from fresh sizes).
const SPLITS_PER_PERIOD: usize = 4;

/// Starts the range splitter: every `period`, if this node leads the meta
/// group, it asks each range's group for its size and write rate and splits a
/// range that crossed a threshold (bytes, keys, or log entries per second
/// between two checks) at its middle key (see `tessera_storage::range`).
pub fn spawn_range_splitter<H: ControlHost>(host: H, period: Duration, thresholds: SplitThresholds) {
    info!(period_secs = period.as_secs(), ?thresholds, "range splitter on while this node leads the meta group");
    tokio::spawn(split_ranges(host, period, thresholds));
}

async fn split_ranges<H: ControlHost>(host: H, period: Duration, thresholds: SplitThresholds) {
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
pub(super) async fn split_one<H: ControlHost>(
    host: &H,
    map: &ClusterMap,
    thresholds: SplitThresholds,
    last_seen: &mut LastSeen,
) -> Result<bool, ControlError> {
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
            Answer::Written(Response::Rejected(r)) => {
                return Err(ControlError::Refused { what: format!("group {parent}: the split"), message: r.message });
            }
            other => return Err(ControlError::unexpected("a split", other)),
        }
        let why = if hot { "write load" } else { "size" };
        info!(parent, child, at, keys = info.keys, bytes = info.bytes, writes_per_sec = rate as u64, why, "split a key-value range");
        // Both halves measure their rate anew.
        last_seen.remove(&parent);
        let info = range_info(host, map, parent).await?;
        let split = info
            .splits
            .iter()
            .find(|s| s.child == child)
            .ok_or_else(|| ControlError::Map(format!("group {parent} has no record of its split")))?;
        record_split(host, parent, split).await?;
        return Ok(true);
    }
    Ok(false)
}

/// Reserves (or finds reserved) the child id of `parent`'s next split in the
/// meta group, which this node leads: the write is applied here before it answers.
async fn reserve_child<H: ControlHost>(host: &H, parent: GroupId) -> Result<GroupId, ControlError> {
    meta_write(host, MetaOp::ReserveSplit { parent }, "a split reservation").await?;
    let map = host.recorded_map().ok_or_else(|| ControlError::Map("the cluster map is not readable".into()))?;
    map.pending_splits.get(&parent).copied().ok_or_else(|| ControlError::Map(format!("no split of group {parent} is reserved")))
}

async fn range_info<H: ControlHost>(host: &H, map: &ClusterMap, group: GroupId) -> Result<RangeInfo, ControlError> {
    match on_leader(host, map, group, Call::Read(Query::Kv(KvQuery::Range))).await? {
        Answer::Read(QueryResult::Kv(KvQueryResult::Range(info))) => Ok(info),
        other => Err(ControlError::unexpected("a range query", other)),
    }
}

async fn record_split<H: ControlHost>(host: &H, parent: GroupId, split: &SplitRecord) -> Result<(), ControlError> {
    let op = MetaOp::RecordSplit { parent, child: split.child, at: split.at.clone(), members: split.members.clone() };
    meta_write(host, op, "the split record").await?;
    info!(parent, child = split.child, at = split.at, "recorded a range split in the cluster map");
    Ok(())
}
