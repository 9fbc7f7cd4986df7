//! The placement driver (`sharding.auto_rebalance`), run by the meta group's
//! leader. Every period it first evens out data-group replicas over the
//! active nodes (one move per period: a new node, or ranges split off onto
//! their parent's nodes, leave the spread uneven), then leaderships.
//!
//! A replica move is recorded in the meta group before its first step
//! (`MetaOp::BeginMove`); each step is idempotent, so a driver that takes over
//! after a crash mid-move (this node's or another's) finishes the recorded move
//! before planning anything else. Recording the group's new members ends it.

use std::sync::Arc;
use std::time::Duration;

use tessera_api::command::{MetaOp, Operation, Response};
use tessera_api::meta::{ClusterMap, NodeState, ReplicaMove};
use tessera_api::placement::{LeaderMove, LeadershipView, next_replica_move};
use tessera_api::rpc::{CampaignRequest, Consistency, DropGroupRequest, HandOffRequest, HostGroupRequest, StatusReply, StatusRequest};
use tessera_api::META_GROUP;
use tracing::{debug, info, warn};

use crate::host::Host;
use crate::leader_call::{Answer, Call, on_leader};

/// How long one leadership move may take: the old leader stays silent at most
/// this long, and the successor campaigns at most this long.
const LEADER_MOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the placement driver: every `period`, if this node leads the meta
/// group, it finishes the replica move in flight or makes the next one that
/// evens the spread, then moves group leaderships (one at a time, each planned
/// from fresh node statuses) until every active node leads within one as many
/// groups as any other. Leadership is not recorded anywhere: after a crash or
/// a change of meta leader the next period plans it anew.
pub fn spawn_placement_driver(host: Arc<Host>, period: Duration) {
    info!(period_secs = period.as_secs(), "placement driver on: replicas and leaderships are rebalanced while this node leads the meta group");
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
        if let Err(e) = move_one_replica(&host, &map).await {
            warn!("placement driver: replica move not finished this period: {e}");
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
    LeadershipView::from_statuses(statuses.iter().map(|(id, may_lead, s)| (*id, *may_lead, s))).with_preferences(map)
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


/// Finishes the replica move recorded in `map`, or plans, records and makes
/// the next one; nothing when the spread is even.
async fn move_one_replica(host: &Arc<Host>, map: &ClusterMap) -> Result<(), String> {
    let resumed = map.moving.is_some();
    let mv = match map.moving {
        Some(mv) => {
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: resuming the replica move recorded in the map");
            mv
        }
        None => {
            let Some(mv) = next_replica_move(map) else { return Ok(()) };
            match host.write(META_GROUP, Operation::Meta(MetaOp::BeginMove(mv)), None, Consistency::Quorum).await {
                Ok(Response::Applied(_)) => {}
                Ok(Response::Rejected(r)) => return Err(format!("the meta group refused the move: {}", r.message)),
                Ok(other) => return Err(format!("unexpected answer to a move record: {other:?}")),
                Err(e) => return Err(e.to_string()),
            }
            info!(group = mv.group, from = mv.from, to = mv.to, "placement driver: moving a replica to even the spread");
            mv
        }
    };
    let started = std::time::Instant::now();
    match move_replica(host, map, mv, resumed).await {
        Ok(index) => {
            info!(group = mv.group, from = mv.from, to = mv.to, index, took_ms = started.elapsed().as_millis() as u64, "placement driver moved a replica");
            Ok(())
        }
        Err(MoveError::Obsolete(why)) => {
            warn!(group = mv.group, from = mv.from, to = mv.to, "placement driver: the recorded move cannot go on ({why}); it is dropped");
            meta_write(host, MetaOp::EndMove { group: mv.group }).await
        }
        Err(MoveError::Failed(why)) => Err(why),
    }
}

/// Why a move stopped.
enum MoveError {
    /// The map changed under it (group or node gone): the record is dropped.
    Obsolete(String),
    /// A step failed (a node did not answer); the next period tries again.
    Failed(String),
}

/// The steps of `mv`, each idempotent: the receiving node hosts an empty
/// replica, the group's leader adds it as a learner and waits until it caught
/// up, the group commits voters with `to` in place of `from`, the meta group
/// records the members (which ends the move), and `from` drops its replica.
/// Answers the new membership's log index. (`resumed`: the move was recorded
/// by an earlier driver.)
async fn move_replica(host: &Arc<Host>, map: &ClusterMap, mv: ReplicaMove, resumed: bool) -> Result<u64, MoveError> {
    let group = map.groups.iter().find(|g| g.id == mv.group).ok_or_else(|| MoveError::Obsolete(format!("group {} is gone", mv.group)))?;
    let to = map
        .node(mv.to)
        .filter(|n| n.state == NodeState::Active)
        .ok_or_else(|| MoveError::Obsolete(format!("node {} is not an active node", mv.to)))?;
    if !group.members.contains(&mv.from) && !group.members.contains(&mv.to) {
        return Err(MoveError::Obsolete(format!("node {} no longer holds group {}", mv.from, mv.group)));
    }
    let members: Vec<u64> = group.members.iter().map(|&m| if m == mv.from { mv.to } else { m }).collect();
    let failed = |step: &str, e: String| MoveError::Failed(format!("{step} of group {}: {e}", mv.group));
    if to.id == host.id {
        host.host_group(mv.group).await.map_err(|e| failed("hosting a replica", e.to_string()))?;
    } else {
        let mut client = host.pool.data_client(to.id, &to.addr).map_err(|e| failed("reaching the new node", e.to_string()))?;
        let mut req = tonic::Request::new(HostGroupRequest { group_id: mv.group });
        req.set_timeout(Duration::from_secs(10));
        client.host_group(req).await.map_err(|s| failed("hosting a replica", format!("node {}: {}", to.id, s.message())))?;
    }
    let call = Call::AddLearner { node: to.id, addr: to.addr.clone() };
    on_leader(host, map, mv.group, call).await.map_err(|e| failed("adding the learner", e))?;
    if !resumed {
        // Tests stop the driver here: the next meta leader must finish this move.
        tessera_storage::crash_point::reached("replica-move-learner-added");
    }
    let index = match on_leader(host, map, mv.group, Call::ReplaceVoters(members.clone())).await {
        Ok(Answer::Index(index)) => index,
        Ok(other) => return Err(failed("replacing the voters", format!("unexpected answer {other:?}"))),
        Err(e) => return Err(failed("replacing the voters", e)),
    };
    meta_write(host, MetaOp::SetGroupMembers { group: mv.group, members: members.clone() }).await.map_err(MoveError::Failed)?;
    if let Some(old) = map.node(mv.from).filter(|_| !members.contains(&mv.from)) {
        let dropped = if old.id == host.id {
            host.drop_group(mv.group).await.map(|_| ()).map_err(|e| e.to_string())
        } else {
            match host.pool.data_client(old.id, &old.addr) {
                Ok(mut client) => {
                    let mut req = tonic::Request::new(DropGroupRequest { group_id: mv.group });
                    req.set_timeout(Duration::from_secs(15));
                    client.drop_group(req).await.map(|_| ()).map_err(|s| s.message().to_string())
                }
                Err(e) => Err(e.to_string()),
            }
        };
        // A node that does not answer keeps a stale replica the group no longer counts.
        if let Err(e) = dropped {
            warn!(group = mv.group, node = old.id, "the moved-away replica was not dropped: {e}");
        }
    }
    Ok(index)
}

/// Proposes `op` to the meta group (this node leads it).
async fn meta_write(host: &Arc<Host>, op: MetaOp) -> Result<(), String> {
    match host.write(META_GROUP, Operation::Meta(op), None, Consistency::Quorum).await {
        Ok(Response::Rejected(r)) => Err(format!("the meta group refused: {}", r.message)),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}
