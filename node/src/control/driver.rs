//! The placement driver, run by the meta group's leader: the one place where
//! replicas move.
//!
//! - Every half second it runs what the map asks for: a recorded replica move
//!   in flight is finished (whoever recorded it: this driver before a crash,
//!   another node's, or a router's `POST /api/v1/admin/rebalance`); a node
//!   `joining` (`POST /api/v1/admin/nodes`) receives its share of replicas one
//!   move at a time and is then recorded `active`, and the leaderships are
//!   evened; a node `draining` (`POST /api/v1/admin/nodes/{id}/drain`) sees
//!   each of its replicas moved to a node its group lacks, once its
//!   leadership of that group has left it. These run whatever
//!   `sharding.auto_rebalance` says: an operator asked for them.
//! - With `sharding.auto_rebalance`, every `rebalance_interval_secs` it also
//!   evens out data-group replicas over the active nodes (one move per period:
//!   ranges split off onto their parent's nodes leave the spread uneven), then
//!   leaderships.
//!
//! - A group with fewer replicas than the replication factor (a node it lived
//!   on was removed when no other node could take its replica) gets a new one
//!   on the node that crowds its zones least and holds the fewest replicas,
//!   as soon as there is one ([`tessera_api::placement::next_repair_move`]):
//!   a move from a node to itself, recorded and resumed like any move.
//! - Every 5 s it records the locality each node reports (`cluster.locality`,
//!   [`localities`]), and once no node joins or drains it moves replicas that
//!   share a failure domain (zone) with another of their group's to a node of
//!   a zone the group lacks, one move at a time
//!   ([`tessera_api::placement::next_spread_move`]); additions, drains and the
//!   rebalancer never crowd a group into fewer zones.
//!
//! A replica move is recorded in the meta group before its first step
//! (`MetaOp::BeginMove`); each step is idempotent, so a driver that takes over
//! after a crash mid-move finishes the recorded move before anything else.
//! Recording the group's new members ends it. Node states are recorded too,
//! so an addition or drain goes on under the next meta leader. A source
//! replica whose drop failed at a move's end is dropped by a later sweep
//! ([`strays`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tessera_api::META_GROUP;
use tessera_api::command::MetaOp;
use tessera_api::meta::{ClusterMap, NodeInfo, NodeState, ReplicaMove};
use tessera_api::placement::{
    LeaderMove, LeadershipView, LifecycleStep, next_lifecycle_step, next_repair_move, next_replica_move, next_spread_move,
};
use tracing::{debug, info, warn};

use super::leader_call::on_leader;
use super::{Answer, Call, ControlError, ControlHost, localities, meta_write, strays};

/// How long one leadership move may take: the old leader stays silent at most
/// this long, and the successor campaigns at most this long.
const LEADER_MOVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the driver looks for recorded moves and nodes joining or leaving.
const LIFECYCLE_TICK: Duration = Duration::from_millis(500);
/// How often it looks for replicas the map no longer lists ([`strays`]) and
/// for node localities to record ([`localities`]).
const STRAY_SWEEP_PERIOD: Duration = Duration::from_secs(5);

/// Starts the placement driver (see the module documentation); `rebalance_every`
/// is `Some` with `sharding.auto_rebalance`.
pub fn spawn_placement_driver<H: ControlHost>(host: H, rebalance_every: Option<Duration>) {
    match rebalance_every {
        Some(period) => info!(
            period_secs = period.as_secs(),
            "placement driver: node additions and drains, and replicas and leaderships rebalanced, while this node leads the meta group"
        ),
        None => info!("placement driver: node additions and drains while this node leads the meta group (sharding.auto_rebalance is off)"),
    }
    tokio::spawn(drive_placement(host, rebalance_every));
}

async fn drive_placement<H: ControlHost>(host: H, rebalance_every: Option<Duration>) {
    let mut tick = tokio::time::interval(LIFECYCLE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut last_rebalance = Instant::now();
    // The first pass records the nodes' localities before any move is planned.
    let mut last_sweep = Instant::now().checked_sub(STRAY_SWEEP_PERIOD).unwrap_or_else(Instant::now);
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        // A metric says "leader" to a leader cut off from its followers too (openraft
        // 0.9 does not step down by itself): confirm with a quorum first.
        if !host.leads(META_GROUP) || host.confirm_meta_leadership().await.is_none() {
            continue;
        }
        if last_sweep.elapsed() >= STRAY_SWEEP_PERIOD
            && let Some(map) = host.recorded_map()
        {
            localities::record_localities(&host, &map).await;
        }
        match run_lifecycle(&host).await {
            Ok(true) => balance_leaderships(&host).await,
            Ok(false) => {}
            Err(e) => {
                warn!("placement driver: {e}; trying again");
                continue;
            }
        }
        if last_sweep.elapsed() >= STRAY_SWEEP_PERIOD {
            last_sweep = Instant::now();
            if let Some(term) = host.confirm_meta_leadership().await
                && let Some(map) = host.recorded_map()
            {
                strays::drop_stray_replicas(&host, &map, term).await;
            }
        }
        let Some(period) = rebalance_every else { continue };
        if last_rebalance.elapsed() < period {
            continue;
        }
        last_rebalance = Instant::now();
        let Some(term) = host.confirm_meta_leadership().await else { continue };
        let Some(map) = host.recorded_map() else { continue };
        if let Err(e) = move_one_replica(&host, &map, term).await {
            warn!("placement driver: replica move not finished this period: {e}");
            continue;
        }
        balance_leaderships(&host).await;
    }
}

/// Finishes the recorded move, if any, then runs the steps of a node joining
/// or draining back to back while this node leads the meta group. Answers
/// whether a joining node was activated (its leaderships are evened next).
pub(super) async fn run_lifecycle<H: ControlHost>(host: &H) -> Result<bool, ControlError> {
    loop {
        if host.is_stopping() {
            return Ok(false);
        }
        // Each step is planned from a map read after a read-index round, and its
        // calls carry that leadership's term (nodes refuse a deposed leader's).
        let Some(term) = host.confirm_meta_leadership().await else { return Ok(false) };
        let Some(map) = host.recorded_map() else { return Ok(false) };
        if let Some(mv) = map.moving {
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: resuming the replica move recorded in the map");
            finish_move(host, &map, mv, true, term).await?;
            continue;
        }
        // A group left short of replicas (its node removed with nowhere to
        // move them) gets them back as soon as a node can take them.
        if let Some(mv) = next_repair_move(&map) {
            begin_move(host, mv).await?;
            info!(group = mv.group, to = mv.to, "placement driver: adding a replica to a group below its replication factor");
            finish_move(host, &map, mv, false, term).await?;
            continue;
        }
        let draining = map.nodes.iter().find(|n| n.state == NodeState::Draining).map(|n| n.id);
        if draining.is_none() && !map.nodes.iter().any(|n| n.state == NodeState::Joining) {
            // Replicas sharing a failure domain move apart once nothing else moves.
            let Some(mv) = next_spread_move(&map) else { return Ok(false) };
            begin_move(host, mv).await?;
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: moving a replica to spread its group over more zones");
            finish_move(host, &map, mv, false, term).await?;
            continue;
        }
        // A draining node's groups move once their leadership has left it.
        let led_by_draining: BTreeSet<u64> = match draining {
            Some(node) => leadership_view(host, &map).await.leaders.iter().filter(|(_, l)| **l == node).map(|(g, _)| *g).collect(),
            None => BTreeSet::new(),
        };
        match next_lifecycle_step(&map, &led_by_draining) {
            None => return Ok(false),
            Some(LifecycleStep::Activate(node)) => {
                meta_write(host, MetaOp::SetNodeState { node, state: NodeState::Active }, "a node state").await?;
                info!(node, "placement driver: the new node holds its share of replicas; it is active");
                return Ok(true);
            }
            Some(LifecycleStep::Move(mv)) => {
                begin_move(host, mv).await?;
                info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: moving a replica of a node joining or draining");
                finish_move(host, &map, mv, false, term).await?;
            }
        }
    }
}

/// Moves group leaderships (one at a time, each planned from fresh node
/// statuses) until every node that may lead leads within one as many groups
/// as any other, preferred leaders first. Leadership is not recorded anywhere:
/// after a crash or a change of meta leader the next pass plans it anew.
pub(super) async fn balance_leaderships<H: ControlHost>(host: &H) {
    let Some(map) = host.recorded_map() else { return };
    for _ in 0..map.groups.len() {
        let view = leadership_view(host, &map).await;
        if view.leaders.len() < map.groups.len() {
            debug!(?view, "placement driver: a group has no known leader; waiting for the next pass");
            break;
        }
        let Some(mv) = view.next_move() else { break };
        match move_leadership(host, &map, mv).await {
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

/// Who leads what, from every node of `map` that answers (this node answers itself).
async fn leadership_view<H: ControlHost>(host: &H, map: &ClusterMap) -> LeadershipView {
    let calls = map.nodes.iter().map(|n| async move {
        let may_lead = matches!(n.state, NodeState::Active | NodeState::Joining);
        host.status(n).await.map(|status| (n.id, may_lead, status))
    });
    let statuses: Vec<_> = futures::future::join_all(calls).await.into_iter().flatten().collect();
    LeadershipView::from_statuses(statuses.iter().map(|(id, may_lead, s)| (*id, *may_lead, s))).with_preferences(map)
}

/// One leadership move: `from` hands the group off, `to` campaigns. Answers
/// the group's leader afterwards.
async fn move_leadership<H: ControlHost>(host: &H, map: &ClusterMap, mv: LeaderMove) -> Result<Option<u64>, ControlError> {
    let node = |id: u64| map.node(id).ok_or_else(|| ControlError::Map(format!("node {id} is not in the map")));
    if !host.hand_off(node(mv.from)?, mv.group, mv.to, LEADER_MOVE_TIMEOUT).await? {
        return Err(ControlError::Map(format!("node {} no longer leads group {}", mv.from, mv.group)));
    }
    host.campaign(node(mv.to)?, mv.group, mv.from, LEADER_MOVE_TIMEOUT).await
}

/// With `sharding.auto_rebalance`: finishes the replica move recorded in
/// `map`, or plans, records and makes the next one that evens the spread;
/// nothing when the spread is even.
pub(super) async fn move_one_replica<H: ControlHost>(host: &H, map: &ClusterMap, term: u64) -> Result<(), ControlError> {
    let mv = match map.moving {
        Some(mv) => {
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: resuming the replica move recorded in the map");
            return finish_move(host, map, mv, true, term).await;
        }
        None => {
            let Some(mv) = next_replica_move(map) else { return Ok(()) };
            begin_move(host, mv).await?;
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: moving a replica to even the spread");
            mv
        }
    };
    finish_move(host, map, mv, false, term).await
}

/// Records `mv` in the meta group as the move in flight.
async fn begin_move<H: ControlHost>(host: &H, mv: ReplicaMove) -> Result<(), ControlError> {
    meta_write(host, MetaOp::BeginMove(mv), "the move record").await.map(|_| ())
}

/// Makes the steps of the recorded move `mv`; a move the map no longer allows
/// (its group or node gone) is dropped from the record.
async fn finish_move<H: ControlHost>(host: &H, map: &ClusterMap, mv: ReplicaMove, resumed: bool, term: u64) -> Result<(), ControlError> {
    let started = Instant::now();
    match move_replica(host, map, mv, resumed, term).await {
        Ok(index) => {
            info!(
                group = mv.group,
                from = mv.from,
                to = mv.to,
                index,
                took_ms = started.elapsed().as_millis() as u64,
                "placement driver moved a replica"
            );
            Ok(())
        }
        Err(MoveError::Obsolete(why)) => {
            warn!(group = mv.group, from = mv.from, to = mv.to, "placement driver: the recorded move cannot go on ({why}); it is dropped");
            meta_write(host, MetaOp::EndMove { group: mv.group }, "the end of a move").await.map(|_| ())
        }
        Err(MoveError::Failed(why)) => Err(why),
    }
}

/// Why a move stopped.
enum MoveError {
    /// The map changed under it (group or node gone): the record is dropped.
    Obsolete(String),
    /// A step failed (a node did not answer); the next period tries again.
    Failed(ControlError),
}

/// The steps of `mv`, each idempotent: the receiving node hosts an empty
/// replica, the group's leader adds it as a learner and waits until it caught
/// up (also when it was added before), the group commits voters with `to` in
/// place of `from` (if its voters are still the map's), the meta group records
/// the members if the move is still the recorded one (which ends it), and once
/// `to` has applied the new membership `from` drops its replica. Answers the
/// new membership's log index. (`resumed`: the move was recorded by an earlier
/// driver; `term`: this driver's meta leadership, the fence of its calls.)
async fn move_replica<H: ControlHost>(host: &H, map: &ClusterMap, mv: ReplicaMove, resumed: bool, term: u64) -> Result<u64, MoveError> {
    let group = map.groups.iter().find(|g| g.id == mv.group).ok_or_else(|| MoveError::Obsolete(format!("group {} is gone", mv.group)))?;
    let to = map
        .node(mv.to)
        .filter(|n| matches!(n.state, NodeState::Active | NodeState::Joining))
        .ok_or_else(|| MoveError::Obsolete(format!("node {} is not an active or joining node", mv.to)))?;
    if !mv.is_addition() && !group.members.contains(&mv.from) && !group.members.contains(&mv.to) {
        return Err(MoveError::Obsolete(format!("node {} no longer holds group {}", mv.from, mv.group)));
    }
    let mut members = group.members.clone();
    if !mv.is_addition() {
        members.iter_mut().filter(|m| **m == mv.from).for_each(|m| *m = mv.to);
    } else if !members.contains(&mv.to) {
        members.push(mv.to);
    }
    let failed = |step: &str, e: ControlError| MoveError::Failed(ControlError::Map(format!("{step} of group {}: {e}", mv.group)));
    host.host_group(to, mv.group, term).await.map_err(|e| failed("hosting a replica", e))?;
    let call = Call::AddLearner { node: to.id, addr: to.addr.clone(), meta_term: term };
    on_leader(host, map, mv.group, call).await.map_err(|e| failed("adding the learner", e))?;
    if !resumed {
        // Tests stop the driver here: the next meta leader must finish this move.
        tessera_storage::crash_point::reached("replica-move-learner-added");
    }
    let replace = Call::ReplaceVoters { voters: members.clone(), expected: group.members.clone(), meta_term: term };
    let index = match on_leader(host, map, mv.group, replace).await {
        Ok(Answer::Index(index)) => index,
        Ok(other) => return Err(failed("replacing the voters", ControlError::unexpected("a voter change", other))),
        Err(e) => return Err(failed("replacing the voters", e)),
    };
    if !resumed {
        // Tests stop the driver here: the group left `from` (its leader, when
        // it led), the map does not say so yet; the next meta leader finishes.
        tessera_storage::crash_point::reached("replica-move-voters-replaced");
    }
    let record = MetaOp::SetGroupMembers { group: mv.group, members: members.clone(), expected_move: Some(mv) };
    meta_write(host, record, "the group's new members").await.map_err(MoveError::Failed)?;
    if let Some(old) = map.node(mv.from).filter(|_| !members.contains(&mv.from)) {
        // The source's full replica goes only once the new one holds the new
        // membership: until then it may be the copy the group needs.
        if let Err(e) = wait_applied(host, to, mv.group, index).await {
            warn!(group = mv.group, node = old.id, "the moved-away replica is kept for now: {e}");
            return Ok(index);
        }
        // A node that does not answer keeps a replica the group no longer
        // counts, until the stray sweep drops it.
        if let Err(e) = host.drop_group(old, mv.group, term).await {
            warn!(group = mv.group, node = old.id, "the moved-away replica was not dropped (the stray sweep will): {e}");
        }
    }
    Ok(index)
}

/// How long a moved replica's new node may take to apply the new membership.
const NEW_REPLICA_APPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until `node`'s replica of `group` has applied log index `index`.
async fn wait_applied<H: ControlHost>(host: &H, node: &NodeInfo, group: u64, index: u64) -> Result<(), ControlError> {
    // Tokio's clock (paused in the unit tests), not the system's.
    let deadline = tokio::time::Instant::now() + NEW_REPLICA_APPLY_TIMEOUT;
    loop {
        let applied = host.applied_index(node, group).await;
        if applied.is_some_and(|a| a >= index) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ControlError::Map(format!("node {} has not applied index {index} of group {group} (at {applied:?})", node.id)));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
