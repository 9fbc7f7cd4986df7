//! Placement decisions computed from what the nodes report, shared by the
//! router (`POST /api/v1/admin/rebalance`, node additions) and the nodes'
//! placement driver (`sharding.auto_rebalance`).

use std::collections::{BTreeMap, BTreeSet};

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
                .find(|(g, leader)| **leader == from && voters.get(g).is_some_and(|v| v.contains(&to)))
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

    /// The next move that evens the spread, if any (see [`next_leader_move`]).
    pub fn next_move(&self) -> Option<LeaderMove> {
        next_leader_move(&self.leaders, &self.voters, &self.eligible)
    }
}
