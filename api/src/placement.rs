//! Placement decisions computed from what the nodes report, shared by the
//! router (`POST /api/v1/admin/rebalance`, node additions) and the nodes'
//! placement driver (`sharding.auto_rebalance`).

use std::collections::{BTreeMap, BTreeSet};

use crate::meta::{ClusterMap, NodeState, ReplicaMove};
use crate::{GroupId, NodeId};

/// One leadership move the planner chose: `group` from its leader `from` to its voter `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderMove {
    pub group: GroupId,
    pub from: NodeId,
    pub to: NodeId,
}

/// The next leadership move that evens out how many groups each of the
/// `eligible` nodes leads (`leaders`: group → leader; `voters`: group → its
/// voters): from a node leading at least two more than another to that node,
/// for a group the two share; the most loaded leader and the least loaded
/// voter first. `None` when the spread is even (within one) or no shared
/// group allows a move.
pub fn next_leader_move(
    leaders: &BTreeMap<GroupId, NodeId>,
    voters: &BTreeMap<GroupId, Vec<NodeId>>,
    eligible: &BTreeSet<NodeId>,
) -> Option<LeaderMove> {
    next_leader_move_with_preferences(leaders, voters, eligible, &BTreeMap::new())
}

/// As [`next_leader_move`], honouring each group's preferred leader
/// (`preferred`: group → node) first: a group led elsewhere moves to its
/// preferred leader while that node may lead and is one of its voters; a group
/// its preferred leader leads is never moved away to even the spread.
pub fn next_leader_move_with_preferences(
    leaders: &BTreeMap<GroupId, NodeId>,
    voters: &BTreeMap<GroupId, Vec<NodeId>>,
    eligible: &BTreeSet<NodeId>,
    preferred: &BTreeMap<GroupId, NodeId>,
) -> Option<LeaderMove> {
    for (&group, &to) in preferred {
        let Some(&from) = leaders.get(&group) else { continue };
        if from != to && eligible.contains(&to) && voters.get(&group).is_some_and(|v| v.contains(&to)) {
            return Some(LeaderMove { group, from, to });
        }
    }
    let pinned = |g: &GroupId, leader: &NodeId| preferred.get(g) == Some(leader);
    let mut led: BTreeMap<NodeId, usize> = eligible.iter().map(|n| (*n, 0)).collect();
    for leader in leaders.values() {
        if let Some(n) = led.get_mut(leader) {
            *n += 1;
        }
    }
    let mut by_load: Vec<(NodeId, usize)> = led.iter().map(|(n, l)| (*n, *l)).collect();
    by_load.sort_by_key(|(n, l)| (std::cmp::Reverse(*l), *n));
    for &(from, most) in &by_load {
        for &(to, fewest) in by_load.iter().rev() {
            if most < fewest + 2 {
                break;
            }
            let shared = leaders
                .iter()
                .find(|(g, leader)| **leader == from && !pinned(g, leader) && voters.get(g).is_some_and(|v| v.contains(&to)))
                .map(|(g, _)| *g);
            if let Some(group) = shared {
                return Some(LeaderMove { group, from, to });
            }
        }
    }
    None
}

/// Who leads what, as the planner reads it from the nodes' status replies.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LeadershipView {
    /// Group → the node that reports leading it.
    pub leaders: BTreeMap<GroupId, NodeId>,
    /// Group → its voters, as its leader reports them.
    pub voters: BTreeMap<GroupId, Vec<NodeId>>,
    /// The nodes that may lead (answering, and active or joining).
    pub eligible: BTreeSet<NodeId>,
    /// Group → its preferred leader, from the cluster map.
    pub preferred: BTreeMap<GroupId, NodeId>,
}

#[cfg(feature = "grpc")]
impl LeadershipView {
    /// The view from `(node, may lead, its status reply)` of every answering node.
    pub fn from_statuses<'a>(statuses: impl IntoIterator<Item = (NodeId, bool, &'a crate::rpc::StatusReply)>) -> Self {
        let mut view = LeadershipView::default();
        for (node, may_lead, status) in statuses {
            if may_lead {
                view.eligible.insert(node);
            }
            for g in status.groups.iter().filter(|g| g.leader_id == node) {
                view.leaders.insert(g.group_id, node);
                view.voters.insert(g.group_id, g.voters.clone());
            }
        }
        view
    }

    /// The view with the preferred leaders `map` records.
    pub fn with_preferences(mut self, map: &ClusterMap) -> Self {
        self.preferred = map.groups.iter().filter_map(|g| g.preferred_leader.map(|n| (g.id, n))).collect();
        self
    }

    /// The next move: to a group's preferred leader, else one that evens the
    /// spread, if any (see [`next_leader_move_with_preferences`]).
    pub fn next_move(&self) -> Option<LeaderMove> {
        next_leader_move_with_preferences(&self.leaders, &self.voters, &self.eligible, &self.preferred)
    }
}

/// How many data-group replicas each active node holds (active nodes only).
pub fn replica_load(map: &ClusterMap) -> BTreeMap<NodeId, usize> {
    let mut load: BTreeMap<NodeId, usize> = map.nodes.iter().filter(|n| n.state == NodeState::Active).map(|n| (n.id, 0)).collect();
    for g in map.groups.iter().filter(|g| g.id != crate::META_GROUP) {
        for m in &g.members {
            if let Some(n) = load.get_mut(m) {
                *n += 1;
            }
        }
    }
    load
}

/// How many of `members` share a failure domain with another member (the
/// first tier of their locality, [`crate::meta::NodeInfo::failure_domain`]):
/// 0 when every replica sits in a domain of its own. A node without a
/// locality is a domain of its own, so a cluster without localities is
/// always spread.
pub fn crowding(map: &ClusterMap, members: &[NodeId]) -> usize {
    let mut seen = BTreeSet::new();
    members
        .iter()
        .filter(|&&m| {
            let domain = map.node(m).and_then(|n| n.failure_domain()).map_or_else(|| format!("node {m}"), str::to_string);
            !seen.insert(domain)
        })
        .count()
}

/// [`crowding`] of `members` once `from`'s replica moved to `to`.
fn crowding_after(map: &ClusterMap, members: &[NodeId], from: NodeId, to: NodeId) -> usize {
    let after: Vec<NodeId> = members.iter().map(|&m| if m == from { to } else { m }).collect();
    crowding(map, &after)
}

/// The groups whose replicas share a failure domain (see [`crowding`]): the
/// ones that could lose a quorum with one zone. [`next_spread_move`] fixes
/// those it can; the rest are reported.
pub fn crowded_groups(map: &ClusterMap) -> Vec<GroupId> {
    map.groups.iter().filter(|g| crowding(map, &g.members) > 0).map(|g| g.id).collect()
}

/// The next replica move that puts a group's replicas in more distinct
/// failure domains: from a member whose domain another member shares to the
/// least loaded active node of a domain that makes the group less crowded
/// (the meta group first, then data groups newest first). `None` while a node
/// joins or leaves, while a move is in flight, or when no move helps (fewer
/// domains than replicas): the driver runs it whatever
/// `sharding.auto_rebalance` says, as configuring localities asks for it.
pub fn next_spread_move(map: &ClusterMap) -> Option<ReplicaMove> {
    if map.moving.is_some() || map.nodes.iter().any(|n| n.state != NodeState::Active) {
        return None;
    }
    let load = replica_load(map);
    let meta_first =
        map.groups.iter().filter(|g| g.id == crate::META_GROUP).chain(map.groups.iter().rev().filter(|g| g.id != crate::META_GROUP));
    for g in meta_first {
        let now = crowding(map, &g.members);
        if now == 0 {
            continue;
        }
        let mut givers = g.members.clone();
        givers.sort_by_key(|m| (std::cmp::Reverse(load.get(m).copied().unwrap_or(0)), *m));
        let mut takers: Vec<NodeId> =
            map.nodes.iter().filter(|n| n.state == NodeState::Active && !g.members.contains(&n.id)).map(|n| n.id).collect();
        takers.sort_by_key(|n| (load.get(n).copied().unwrap_or(0), *n));
        for &from in &givers {
            if let Some(&to) = takers.iter().find(|&&to| crowding_after(map, &g.members, from, to) < now) {
                return Some(ReplicaMove { group: g.id, from, to });
            }
        }
    }
    None
}

/// The next replica to add to a group that has fewer replicas than it should
/// ([`ClusterMap::target_replicas`]: a node it lived on was removed, in a
/// cluster that then had no other node to take it): on the node lacking the
/// group that crowds its failure domains least, then holds the fewest
/// replicas (the meta group first, then data groups in id order). While a
/// node joins, only that node takes replicas (it needs them anyway). `None`
/// while a move is in flight, while a node drains, or when every group has
/// its replicas or no node can take one.
pub fn next_repair_move(map: &ClusterMap) -> Option<ReplicaMove> {
    if map.moving.is_some() || map.nodes.iter().any(|n| n.state == NodeState::Draining) {
        return None;
    }
    let joining = map.nodes.iter().find(|n| n.state == NodeState::Joining).map(|n| n.id);
    let load = replica_load(map);
    let load_of = |id: NodeId| load.get(&id).copied().unwrap_or(0);
    map.groups.iter().filter(|g| g.members.len() < map.target_replicas(g.id)).find_map(|g| {
        map.nodes
            .iter()
            .filter(|n| !g.members.contains(&n.id))
            .filter(|n| match joining {
                Some(j) => n.id == j,
                None => n.state == NodeState::Active,
            })
            .min_by_key(|n| {
                let with: Vec<NodeId> = g.members.iter().copied().chain([n.id]).collect();
                (crowding(map, &with), load_of(n.id), n.id)
            })
            .map(|n| ReplicaMove::addition(g.id, n.id))
    })
}

/// The next replica move that evens out how many data-group replicas the
/// active nodes hold: from a node holding at least two more than another to
/// that node, of a group the receiver lacks; the most loaded giver and the
/// least loaded receiver first, and among their groups the newest (a range
/// just split off lands on its parent's nodes). `None` while a node joins or
/// leaves (those calls move replicas themselves), while a move is in flight,
/// or when the spread is even (within one). A move never crowds its group's
/// failure domains more ([`crowding`]).
pub fn next_replica_move(map: &ClusterMap) -> Option<ReplicaMove> {
    if map.moving.is_some() || map.nodes.iter().any(|n| n.state != NodeState::Active) {
        return None;
    }
    let load = replica_load(map);
    let mut by_load: Vec<(NodeId, usize)> = load.iter().map(|(n, l)| (*n, *l)).collect();
    by_load.sort_by_key(|(n, l)| (std::cmp::Reverse(*l), *n));
    for &(from, most) in &by_load {
        for &(to, fewest) in by_load.iter().rev() {
            if most < fewest + 2 {
                break;
            }
            let group = map.groups.iter().rev().filter(|g| g.id != crate::META_GROUP).find(|g| {
                g.members.contains(&from)
                    && !g.members.contains(&to)
                    && crowding_after(map, &g.members, from, to) <= crowding(map, &g.members)
            });
            if let Some(g) = group {
                return Some(ReplicaMove { group: g.id, from, to });
            }
        }
    }
    None
}

/// The next step of a node joining or leaving, which the placement driver
/// runs whatever `sharding.auto_rebalance` says (the operator asked for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleStep {
    /// Move one replica (to the joining node, or off the draining one).
    Move(ReplicaMove),
    /// The joining node holds its share: record it `active`.
    Activate(NodeId),
}

/// The next lifecycle step the map asks for, if any: a draining node's next
/// replica to move away ([`drain_move`]; groups in `led_by_draining` wait until
/// their leadership has left it), or a joining node's next replica
/// ([`join_moves`]), or its activation once it holds its share. `None` while a
/// move is in flight (it is finished first) or when no node joins or drains.
pub fn next_lifecycle_step(map: &ClusterMap, led_by_draining: &BTreeSet<GroupId>) -> Option<LifecycleStep> {
    if map.moving.is_some() {
        return None;
    }
    if let Some(node) = map.nodes.iter().find(|n| n.state == NodeState::Draining) {
        return drain_move(map, node.id, led_by_draining).map(LifecycleStep::Move);
    }
    let joining = map.nodes.iter().find(|n| n.state == NodeState::Joining)?;
    Some(match join_moves(map, joining.id).first() {
        Some(&(group, from)) => LifecycleStep::Move(ReplicaMove { group, from, to: joining.id }),
        None => LifecycleStep::Activate(joining.id),
    })
}

/// The next replica of the draining `node` to move: to the active node with
/// the fewest data replicas among those its group lacks (among them, one that
/// crowds the group's failure domains least first), while there is one
/// (in a three-node cluster there is none: the replicas stay until the node is
/// removed, and the groups shrink). Data groups first, the meta group last, so
/// the meta group keeps its size too when a node outside it can take its
/// replica. Groups in `skip` (the node still leads them) are passed over.
pub fn drain_move(map: &ClusterMap, node: NodeId, skip: &BTreeSet<GroupId>) -> Option<ReplicaMove> {
    let data = || map.groups.iter().filter(|g| g.id != crate::META_GROUP);
    let load = |id: NodeId| data().filter(|g| g.members.contains(&id)).count();
    let meta_last = data().chain(map.groups.iter().filter(|g| g.id == crate::META_GROUP));
    meta_last.filter(|g| g.members.contains(&node) && !skip.contains(&g.id)).find_map(|g| {
        map.nodes
            .iter()
            .filter(|n| n.state == NodeState::Active && n.id != node && !g.members.contains(&n.id))
            .min_by_key(|n| (crowding_after(map, &g.members, node, n.id), load(n.id), n.id))
            .map(|target| ReplicaMove { group: g.id, from: node, to: target.id })
    })
}

/// Whether the draining `node` has nothing left to move (no replica of it has
/// a node to go to, and no move is in flight).
pub fn drain_done(map: &ClusterMap, node: NodeId) -> bool {
    map.moving.is_none() && drain_move(map, node, &BTreeSet::new()).is_none()
}

/// The replica moves that give node `new` its share of the data groups'
/// replicas (total / nodes, rounded down), as `(group, from)`: each takes a
/// group from the most loaded node among those the new node is not in yet,
/// never one that would crowd the group's failure domains more ([`crowding`]:
/// a node of zone `a` takes replicas from nodes of zone `a`, or of a zone the
/// group holds twice).
pub fn join_moves(map: &ClusterMap, new: NodeId) -> Vec<(GroupId, NodeId)> {
    let data: Vec<&crate::meta::GroupInfo> = map.groups.iter().filter(|g| g.id != crate::META_GROUP).collect();
    let hosts: Vec<NodeId> = map.nodes.iter().filter(|n| matches!(n.state, NodeState::Active | NodeState::Joining)).map(|n| n.id).collect();
    if hosts.is_empty() {
        return Vec::new();
    }
    let total: usize = data.iter().map(|g| g.members.len()).sum();
    let target = total / hosts.len();
    let mut load: BTreeMap<NodeId, usize> = hosts.iter().map(|n| (*n, 0)).collect();
    for m in data.iter().flat_map(|g| &g.members) {
        *load.entry(*m).or_default() += 1;
    }
    let mut moves = Vec::new();
    let mut taken = BTreeSet::new();
    while load.get(&new).copied().unwrap_or(0) < target {
        let mut donors: Vec<(NodeId, usize)> = load.iter().filter(|(n, _)| **n != new).map(|(n, l)| (*n, *l)).collect();
        donors.sort_by_key(|(n, l)| (std::cmp::Reverse(*l), *n));
        let mine = load.get(&new).copied().unwrap_or(0);
        // A donor gives only while it keeps at least as many as the new node
        // (with zones, the new node may take from its own zone's nodes alone).
        let found = donors.iter().filter(|(_, l)| *l >= mine + 2).find_map(|(from, _)| {
            data.iter()
                .find(|g| {
                    g.members.contains(from)
                        && !g.members.contains(&new)
                        && !taken.contains(&g.id)
                        && crowding_after(map, &g.members, *from, new) <= crowding(map, &g.members)
                })
                .map(|g| (g.id, *from))
        });
        let Some((group, from)) = found else { break };
        taken.insert(group);
        moves.push((group, from));
        *load.entry(from).or_default() -= 1;
        *load.entry(new).or_default() += 1;
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{GroupInfo, NodeInfo, ShardingStrategy};

    fn map(nodes: &[NodeId], groups: &[(GroupId, &[NodeId])]) -> ClusterMap {
        ClusterMap {
            nodes: nodes.iter().map(|&n| NodeInfo::new(n, format!("n{n}"))).collect(),
            strategy: ShardingStrategy::Range,
            replication_factor: 3,
            groups: groups.iter().map(|(g, m)| GroupInfo::new(*g, m.to_vec())).collect(),
            epoch: 0,
            ranges: Vec::new(),
            moving: None,
            pending_splits: Default::default(),
            last_group_id: 0,
        }
    }

    /// Moves `mv` in `map` as the driver would.
    fn apply(map: &mut ClusterMap, mv: ReplicaMove) {
        let g = map.groups.iter_mut().find(|g| g.id == mv.group).unwrap();
        if mv.is_addition() {
            g.members.push(mv.to);
        } else {
            g.members.iter_mut().filter(|m| **m == mv.from).for_each(|m| *m = mv.to);
        }
    }

    #[test]
    fn a_node_added_back_gets_the_replicas_its_removal_took() {
        // Node 3 of three was drained (nothing could take its replicas) and removed.
        let mut m = map(&[1, 2], &[(0, &[1, 2]), (1, &[1, 2]), (2, &[2, 1])]);
        assert_eq!(next_repair_move(&m), None, "no node to add a replica to");
        m.nodes.push(NodeInfo::new(3, "n3").in_state(NodeState::Joining));
        let mut added = Vec::new();
        while let Some(mv) = next_repair_move(&m) {
            assert!(mv.is_addition() && mv.to == 3, "{mv:?}");
            m.begin_move(mv).unwrap();
            m.end_move(mv.group);
            apply(&mut m, mv);
            added.push(mv.group);
        }
        assert_eq!(added, vec![0, 1, 2], "the meta group first, then the data groups");
        assert!(m.groups.iter().all(|g| g.members.len() == 3));
        assert_eq!(join_moves(&m, 3), Vec::new(), "the node holds its share already");
    }

    #[test]
    fn a_missing_replica_goes_to_the_least_loaded_node_of_a_zone_the_group_lacks() {
        let mut m = map(&[1, 2, 3, 4, 5], &[(0, &[1, 2, 3]), (1, &[1, 2]), (2, &[3, 4, 5]), (3, &[3, 4, 5])]);
        assert_eq!(next_repair_move(&m), Some(ReplicaMove::addition(1, 3)), "nodes 3-5 hold two replicas each: the lowest id");
        m.nodes[0].locality = "zone=a".into();
        m.nodes[2].locality = "zone=a".into();
        assert_eq!(next_repair_move(&m), Some(ReplicaMove::addition(1, 4)), "node 3 would put two replicas in zone a");
        m.nodes[1].state = NodeState::Draining;
        assert_eq!(next_repair_move(&m), None, "a drain first");
        m.nodes[1].state = NodeState::Active;
        m.moving = Some(ReplicaMove { group: 2, from: 3, to: 1 });
        assert_eq!(next_repair_move(&m), None, "one move at a time");
        m.moving = None;
        m.groups[1].members.push(3);
        assert_eq!(next_repair_move(&m), None, "every group has its replicas");
        let addition = ReplicaMove::addition(1, 4);
        assert!(m.begin_move(addition).unwrap_err().contains("has its 3 replicas"));
    }

    #[test]
    fn split_children_on_three_of_four_nodes_spread_to_the_fourth() {
        // Groups 3 and 4 were split off group 1 (nodes 1-3); node 4 holds one replica.
        let mut m = map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[2, 3, 4]), (3, &[1, 2, 3]), (4, &[1, 2, 3])]);
        let mut moves = Vec::new();
        while let Some(mv) = next_replica_move(&m) {
            assert!(moves.len() < 10, "the planner does not converge: {moves:?}");
            apply(&mut m, mv);
            moves.push(mv);
        }
        let load = replica_load(&m);
        assert_eq!(load.values().sum::<usize>(), 12, "the replication factor is kept");
        assert!(load.values().all(|l| *l == 3), "{load:?}");
        assert_eq!(moves[0], ReplicaMove { group: 4, from: 2, to: 4 }, "the newest group of the most loaded node moves first");
        assert_eq!(moves.len(), 2);
    }

    #[test]
    fn nothing_moves_while_even_in_flight_or_a_node_changes() {
        let even = map(&[1, 2, 3], &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3])]);
        assert_eq!(next_replica_move(&even), None, "every node holds every group");
        let mut uneven = map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3])]);
        assert!(next_replica_move(&uneven).is_some());
        uneven.moving = Some(ReplicaMove { group: 1, from: 1, to: 4 });
        assert_eq!(next_replica_move(&uneven), None, "one move at a time");
        uneven.moving = None;
        uneven.nodes[3].state = NodeState::Joining;
        assert_eq!(next_replica_move(&uneven), None, "an addition moves its own replicas");
    }

    #[test]
    fn a_preferred_leader_takes_its_group_and_keeps_it() {
        let leaders = BTreeMap::from([(1, 1), (2, 1), (3, 2)]);
        let voters: BTreeMap<GroupId, Vec<NodeId>> = (1..=3).map(|g| (g, vec![1, 2, 3])).collect();
        let eligible = BTreeSet::from([1, 2, 3]);
        let preferred = BTreeMap::from([(3, 3)]);
        assert_eq!(
            next_leader_move_with_preferences(&leaders, &voters, &eligible, &preferred),
            Some(LeaderMove { group: 3, from: 2, to: 3 }),
            "the preference comes before the spread"
        );
        // Node 1 leads two, node 3 none: the even-spread move must not take group 3 from node 3.
        let leaders = BTreeMap::from([(1, 1), (2, 1), (3, 3)]);
        let preferred = BTreeMap::from([(1, 1), (2, 1)]);
        assert_eq!(next_leader_move_with_preferences(&leaders, &voters, &eligible, &preferred), None, "both of node 1's groups are pinned");
        let absent = BTreeMap::from([(3, 4)]);
        assert_eq!(
            next_leader_move_with_preferences(&leaders, &voters, &eligible, &absent),
            Some(LeaderMove { group: 1, from: 1, to: 2 }),
            "a preferred node that is no voter is ignored"
        );
    }

    #[test]
    fn a_move_is_recorded_once_and_cleared_by_the_new_members() {
        let mut m = map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3])]);
        let mv = ReplicaMove { group: 1, from: 1, to: 4 };
        assert_eq!(m.begin_move(mv), Ok(true));
        assert_eq!(m.begin_move(mv), Ok(false), "recorded already");
        assert!(m.begin_move(ReplicaMove { group: 1, from: 2, to: 4 }).is_err(), "one at a time");
        assert!(m.end_move(1) && m.moving.is_none());
        assert!(m.begin_move(ReplicaMove { group: 1, from: 4, to: 1 }).is_err(), "node 4 holds no replica");
        assert!(m.begin_move(ReplicaMove { group: 1, from: 1, to: 2 }).is_err(), "node 2 holds one already");
        assert!(m.begin_move(ReplicaMove { group: 9, from: 1, to: 4 }).is_err(), "no group 9");
    }

    #[test]
    fn a_joining_node_takes_its_share_then_is_activated() {
        let mut m = map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3]), (3, &[1, 2, 3]), (4, &[1, 2, 3])]);
        m.nodes[3].state = NodeState::Joining;
        let mut moves = Vec::new();
        loop {
            match next_lifecycle_step(&m, &BTreeSet::new()) {
                Some(LifecycleStep::Move(mv)) => {
                    assert!(moves.len() < 10 && mv.to == 4, "{moves:?} then {mv:?}");
                    assert!(m.begin_move(mv).is_ok(), "the map accepts a joining node's move");
                    apply(&mut m, mv);
                    m.end_move(mv.group);
                    moves.push(mv);
                }
                Some(LifecycleStep::Activate(4)) => break,
                other => panic!("unexpected step {other:?}"),
            }
        }
        assert_eq!(moves.len(), 3, "node 4's share of 12 replicas over 4 nodes: {moves:?}");
        let froms: BTreeSet<NodeId> = moves.iter().map(|mv| mv.from).collect();
        assert_eq!(froms.len(), 3, "one replica from each node: {moves:?}");
    }

    #[test]
    fn a_draining_node_empties_data_groups_first_and_waits_for_its_leaderships() {
        let mut m = map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 4]), (3, &[2, 3, 4])]);
        m.nodes[0].state = NodeState::Draining;
        let led = BTreeSet::from([1]);
        let first = next_lifecycle_step(&m, &led);
        assert_eq!(first, Some(LifecycleStep::Move(ReplicaMove { group: 2, from: 1, to: 3 })), "group 1 waits: node 1 leads it");
        assert!(m.begin_move(ReplicaMove { group: 3, from: 2, to: 1 }).is_err(), "no spread move while a node drains");
        let mut moved = Vec::new();
        while let Some(LifecycleStep::Move(mv)) = next_lifecycle_step(&m, &BTreeSet::new()) {
            assert!(m.begin_move(mv).is_ok());
            apply(&mut m, mv);
            m.end_move(mv.group);
            moved.push(mv.group);
        }
        assert_eq!(moved, vec![1, 2, 0], "data groups first, the meta group last");
        assert!(drain_done(&m, 1));
        let three = map(&[1, 2, 3], &[(0, &[1, 2, 3]), (1, &[1, 2, 3])]);
        assert!(drain_done(&three, 1), "with three nodes nothing can move");
    }

    /// `map` with node `n` in zone `zones[n - 1]`.
    fn zoned(mut m: ClusterMap, zones: &[&str]) -> ClusterMap {
        for n in &mut m.nodes {
            n.locality = format!("zone={},rack={}", zones[n.id as usize - 1], n.id);
        }
        m
    }

    #[test]
    fn nodes_joining_in_three_zones_keep_every_group_in_three_zones() {
        let groups: Vec<(GroupId, &[NodeId])> = (0..=6).map(|g| (g, &[1, 2, 3][..])).collect();
        let mut m = zoned(map(&[1, 2, 3], &groups), &["a", "b", "c", "a", "b", "c"]);
        for new in 4..=6 {
            m.nodes.push(NodeInfo::new(new, format!("n{new}")).in_state(NodeState::Joining));
            m = zoned(m, &["a", "b", "c", "a", "b", "c"]);
            let moves = join_moves(&m, new);
            assert_eq!(moves.len(), 3, "node {new} takes its share, from its own zone: {moves:?}");
            for (group, from) in moves {
                apply(&mut m, ReplicaMove { group, from, to: new });
            }
            m.nodes.iter_mut().for_each(|n| n.state = NodeState::Active);
        }
        assert_eq!(crowded_groups(&m), Vec::<GroupId>::new(), "{:?}", m.groups);
        assert!(replica_load(&m).values().all(|l| *l == 3), "{:?}", replica_load(&m));
        assert_eq!(next_replica_move(&m), None, "even already");
    }

    #[test]
    fn a_group_crowded_into_one_zone_is_spread_when_a_node_of_another_zone_exists() {
        // Group 1 sits on nodes 1 and 4 (both zone a); node 6 (zone c) holds none of it.
        let mut m = zoned(map(&[1, 2, 3, 4, 5, 6], &[(0, &[1, 2, 3]), (1, &[1, 4, 5]), (2, &[2, 3, 4])]), &["a", "b", "c", "a", "b", "c"]);
        assert_eq!(crowded_groups(&m), vec![1]);
        let mv = next_spread_move(&m).expect("a move");
        assert_eq!(mv, ReplicaMove { group: 1, from: 4, to: 6 }, "from the most loaded of zone a to the least loaded of zone c");
        apply(&mut m, mv);
        assert_eq!(crowded_groups(&m), Vec::<GroupId>::new());
        assert_eq!(next_spread_move(&m), None);
        // Two zones for three replicas: nothing helps, the group is reported.
        let two = zoned(map(&[1, 2, 3, 4], &[(0, &[1, 2, 3]), (1, &[1, 2, 3])]), &["a", "b", "a", "b"]);
        assert_eq!(crowded_groups(&two), vec![0, 1]);
        assert_eq!(next_spread_move(&two), None);
        // Without localities every node is its own domain.
        assert_eq!(crowded_groups(&map(&[1, 2, 3], &[(0, &[1, 2, 3])])), Vec::<GroupId>::new());
    }

    #[test]
    fn a_draining_node_hands_its_replicas_to_its_own_zone_first() {
        let m = zoned(map(&[1, 2, 3, 4, 5], &[(0, &[1, 2, 3]), (1, &[1, 2, 3])]), &["a", "b", "c", "b", "a"]);
        let mv = drain_move(&m, 1, &BTreeSet::new()).expect("a move");
        assert_eq!(mv.to, 5, "node 5 is in zone a like node 1: {mv:?}");
    }
}
