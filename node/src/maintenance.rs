//! Background maintenance of the data groups, run by each group's leader:
//! time-series retention, channel retention and the sweep of abandoned object
//! uploads. One command per group and period from whichever node leads the
//! group, however many routers there are; the command carries the leader's
//! time like every write, so replicas apply the same cut.
//!
//! The placement driver (`sharding.auto_rebalance`) runs on the meta group's
//! leader: it evens out how many groups each node leads.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tessera_api::command::{KvQuery, KvQueryResult, Operation, Query, QueryResult, RangeInfo, Response, SplitOp};
use tessera_api::command::MetaOp;
use tessera_api::meta::SplitRecord;
use tessera_api::rpc::data_reply::Outcome;
use tessera_api::rpc::{ReadRequest, WriteRequest};
use tessera_api::GroupId;
use tessera_api::object::ObjectOp;
use tessera_api::meta::{ClusterMap, NodeState};
use tessera_api::placement::{LeaderMove, LeadershipView};
use tessera_api::rpc::{CampaignRequest, Consistency, HandOffRequest, StatusReply, StatusRequest};
use tessera_api::stream::StreamOp;
use tessera_api::timeseries::TsOp;
use tessera_api::META_GROUP;
use tracing::{debug, info, warn};

use crate::host::Host;

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

/// Starts the maintenance tasks of this node's groups.
pub fn spawn(host: Arc<Host>, cfg: &MaintenanceSection) {
    let max_age_ms = i64::try_from(cfg.upload_max_age_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let tasks: [(&'static str, u64, fn(i64) -> Operation); 3] = [
        ("time-series retention", cfg.retention_interval_secs, |_| Operation::TimeSeries(TsOp::EnforceRetention)),
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

/// How long one leadership move may take: the old leader stays silent at most
/// this long, and the successor campaigns at most this long.
const LEADER_MOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the placement driver: every `period`, if this node leads the meta
/// group, it moves group leaderships (one at a time, each planned from fresh
/// node statuses) until every active node leads within one as many groups as
/// any other. Leadership is not recorded anywhere, so the driver has no state:
/// after a crash or a change of meta leader the next period plans anew.
pub fn spawn_placement_driver(host: Arc<Host>, period: Duration) {
    info!(period_secs = period.as_secs(), "placement driver on: leaderships are rebalanced while this node leads the meta group");
    tokio::spawn(drive_placement(host, period));
}

async fn drive_placement(host: Arc<Host>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        if !host.leads(META_GROUP) || host.is_drained() {
            continue;
        }
        let Some(map) = host.recorded_map() else { continue };
        for _ in 0..map.groups.len() {
            let view = leadership_view(&host, &map).await;
            if view.leaders.len() < map.groups.len() {
                debug!(?view, "placement driver: a group has no known leader; waiting for the next period");
                break;
            }
            let Some(mv) = view.next_move() else { break };
            match move_leadership(&host, &map, mv).await {
                Ok(leader) => info!(group = mv.group, from = mv.from, to = mv.to, ?leader, "placement driver moved a leadership"),
                Err(e) => {
                    warn!(group = mv.group, from = mv.from, to = mv.to, "placement driver could not move the leadership: {e}");
                    break;
                }
            }
            if !host.leads(META_GROUP) {
                break;
            }
        }
    }
}

/// Who leads what, from every node of `map` that answers (this node answers itself).
async fn leadership_view(host: &Host, map: &ClusterMap) -> LeadershipView {
    let calls = map.nodes.iter().map(|n| async move {
        let may_lead = matches!(n.state, NodeState::Active | NodeState::Joining);
        if n.id == host.id {
            let own = StatusReply { node_id: host.id, groups: host.group_statuses(), ..Default::default() };
            return Some((n.id, may_lead, own));
        }
        let mut client = host.pool.data_client(n.id, &n.addr).ok()?;
        let mut req = tonic::Request::new(StatusRequest { from_node: host.id });
        req.set_timeout(Duration::from_secs(1));
        let reply = client.status(req).await.ok()?.into_inner();
        Some((n.id, may_lead, reply))
    });
    let statuses: Vec<_> = futures::future::join_all(calls).await.into_iter().flatten().collect();
    LeadershipView::from_statuses(statuses.iter().map(|(id, may_lead, s)| (*id, *may_lead, s)))
}

/// One leadership move: `from` hands the group off, `to` campaigns (locally
/// when either is this node). Answers the group's leader afterwards.
async fn move_leadership(host: &Arc<Host>, map: &ClusterMap, mv: LeaderMove) -> Result<Option<u64>, String> {
    let addr = |id: u64| map.addr_of(id).map(str::to_string).ok_or_else(|| format!("node {id} is not in the map"));
    let was_leader = if mv.from == host.id {
        host.hand_off(mv.group, mv.to, LEADER_MOVE_TIMEOUT).await.map_err(|e| e.to_string())?
    } else {
        let mut client = host.pool.data_client(mv.from, &addr(mv.from)?).map_err(|e| e.to_string())?;
        let req = HandOffRequest { group_id: mv.group, timeout_ms: LEADER_MOVE_TIMEOUT.as_millis() as u64, to: mv.to };
        client.hand_off(req).await.map_err(|s| s.message().to_string())?.into_inner().was_leader
    };
    if !was_leader {
        return Err(format!("node {} no longer leads group {}", mv.from, mv.group));
    }
    if mv.to == host.id {
        return host.campaign(mv.group, Some(mv.from), LEADER_MOVE_TIMEOUT).await.map_err(|e| e.to_string());
    }
    let mut client = host.pool.data_client(mv.to, &addr(mv.to)?).map_err(|e| e.to_string())?;
    let req = CampaignRequest { group_id: mv.group, previous_leader: mv.from, timeout_ms: LEADER_MOVE_TIMEOUT.as_millis() as u64 };
    let leader = client.campaign(req).await.map_err(|s| s.message().to_string())?.into_inner().leader;
    Ok((leader != 0).then_some(leader))
}

/// When a key-value range splits (range sharding; `sharding.split_threshold_*`).
#[derive(Debug, Clone, Copy)]
pub struct SplitThresholds {
    pub bytes: u64,
    pub keys: u64,
}

/// Splits done in one period at most (each is planned from fresh sizes).
const SPLITS_PER_PERIOD: usize = 4;

/// Starts the range splitter: every `period`, if this node leads the meta
/// group, it asks each range's group for its size and splits a range that
/// crossed a threshold at its middle key (see `tessera_storage::range`).
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
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        for _ in 0..SPLITS_PER_PERIOD {
            if !host.leads(META_GROUP) || host.is_drained() {
                break;
            }
            let Some(map) = host.recorded_map() else { break };
            match split_one(&host, &map, thresholds).await {
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
async fn split_one(host: &Arc<Host>, map: &ClusterMap, thresholds: SplitThresholds) -> Result<bool, String> {
    let mut parents: Vec<GroupId> = map.ranges.iter().map(|r| r.group).collect();
    parents.dedup();
    for parent in parents {
        let info = range_info(host, map, parent).await?;
        if let Some(split) = info.splits.iter().find(|s| map.groups.iter().all(|g| g.id != s.child)) {
            record_split(host, parent, split).await?;
            return Ok(true);
        }
        if info.bytes <= thresholds.bytes && info.keys <= thresholds.keys {
            continue;
        }
        let Some(at) = info.middle_key else { continue };
        let child = map.next_group_id();
        let op = Operation::Split(SplitOp { child, at: at.clone() });
        match on_leader(host, map, parent, Call::Write(op)).await? {
            Answer::Written(Response::Applied(_)) => {}
            Answer::Written(Response::Rejected(r)) => return Err(format!("group {parent} refused the split: {}", r.message)),
            other => return Err(format!("unexpected answer to a split: {other:?}")),
        }
        info!(parent, child, at, keys = info.keys, bytes = info.bytes, "split a key-value range");
        let info = range_info(host, map, parent).await?;
        let split = info.splits.iter().find(|s| s.child == child).ok_or_else(|| format!("group {parent} has no record of its split"))?;
        record_split(host, parent, split).await?;
        return Ok(true);
    }
    Ok(false)
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

/// A call to a group's leader.
enum Call {
    Read(Query),
    Write(Operation),
}

/// Its answer.
#[derive(Debug)]
enum Answer {
    Read(QueryResult),
    Written(Response),
}

/// Runs `call` on the leader of `group`: here when this node leads it, else on
/// the member that answers as its leader.
async fn on_leader(host: &Arc<Host>, map: &ClusterMap, group: GroupId, call: Call) -> Result<Answer, String> {
    if host.leads(group) {
        return match call {
            Call::Read(q) => host.read(group, q, Consistency::Quorum).await.map(Answer::Read),
            Call::Write(op) => host.write(group, op, None, Consistency::Quorum).await.map(Answer::Written),
        }
        .map_err(|e| e.to_string());
    }
    let members = map.groups.iter().find(|g| g.id == group).map(|g| g.members.clone()).unwrap_or_default();
    let mut last = format!("no member of group {group} answered as its leader");
    for node in members.into_iter().filter(|m| *m != host.id) {
        let Some(addr) = map.addr_of(node) else { continue };
        let Ok(mut client) = host.pool.data_client(node, addr) else { continue };
        let reply = match &call {
            Call::Read(q) => {
                let query = tessera_api::codec::encode(q).map_err(|e| e.to_string())?;
                let req = ReadRequest { group_id: group, query, consistency: Consistency::Quorum as i32 };
                client.read(req).await
            }
            Call::Write(op) => {
                let operation = tessera_api::codec::encode(op).map_err(|e| e.to_string())?;
                let req = WriteRequest { group_id: group, operation, consistency: Consistency::Quorum as i32, request_id: String::new() };
                client.write(req).await
            }
        };
        match reply.map(|r| r.into_inner().outcome) {
            Ok(Some(Outcome::Ok(bytes))) => {
                return match call {
                    Call::Read(_) => tessera_api::codec::decode(&bytes).map(Answer::Read),
                    Call::Write(_) => tessera_api::codec::decode(&bytes).map(Answer::Written),
                }
                .map_err(|e| e.to_string());
            }
            Ok(Some(Outcome::Failure(f))) => last = f.message,
            Ok(_) => {}
            Err(status) => last = format!("node {node}: {}", status.message()),
        }
    }
    Err(last)
}
