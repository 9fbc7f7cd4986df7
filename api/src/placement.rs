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
    let mut load: BTreeMap<NodeId, usize> =
        map.nodes.iter().filter(|n| n.state == NodeState::Active).map(|n| (n.id, 0)).collect();
    for g in map.groups.iter().filter(|g| g.id != crate::META_GROUP) {
        for m in &g.members {
            if let Some(n) = load.get_mut(m) {
                *n += 1;
            }
        }
    }
    load
}

/// The next replica move that evens out how many data-group replicas the
/// active nodes hold: from a node holding at least two more than another to
/// that node, of a group the receiver lacks; the most loaded giver and the
/// least loaded receiver first, and among their groups the newest (a range
/// just split off lands on its parent's nodes). `None` while a node joins or
/// leaves (those calls move replicas themselves), while a move is in flight,
/// or when the spread is even (within one).
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
            let group = map
                .groups
                .iter()
                .rev()
                .filter(|g| g.id != crate::META_GROUP)
                .find(|g| g.members.contains(&from) && !g.members.contains(&to));
            if let Some(g) = group {
                return Some(ReplicaMove { group: g.id, from, to });
            }
        }
    }
    None
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
        }
    }

    /// Moves `mv` in `map` as the driver would.
    fn apply(map: &mut ClusterMap, mv: ReplicaMove) {
        let g = map.groups.iter_mut().find(|g| g.id == mv.group).unwrap();
        g.members.iter_mut().filter(|m| **m == mv.from).for_each(|m| *m = mv.to);
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
}
