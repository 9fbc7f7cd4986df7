//! The control plane's decisions over an in-memory cluster: [`FakeCluster`]
//! answers every call the driver, the splitter and the leader calls make, and
//! records them, so each scenario reads as the steps a meta leader took.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use tessera_api::command::{KvQuery, KvQueryResult, MetaOp, Operation, Query, QueryResult, RangeInfo, Response, SplitOp};
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::meta::{
    ClusterMap, GroupInfo, KeyRange, NodeInfo, NodeState, RangeDescriptor, ReplicaMove, ShardingStrategy, SplitRecord,
};
use tessera_api::rpc::{GroupStatus, StatusReply};
use tessera_api::{GroupId, META_GROUP, NodeId};

use super::splitter::{LastSeen, SplitThresholds, split_one};
use super::{Answer, Call, ControlError, ControlHost, Reply, driver, leader_call, strays};

/// A cluster held in memory, seen from node `me`.
struct FakeCluster {
    me: NodeId,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    map: Option<ClusterMap>,
    /// `Some(term)` while `me` leads the meta group (confirmed by a quorum).
    meta_term: Option<u64>,
    /// Who leads each group.
    leaders: BTreeMap<GroupId, NodeId>,
    /// What a node that does not lead a group names as its leader (default:
    /// the real one).
    hints: BTreeMap<(NodeId, GroupId), Option<NodeId>>,
    /// Nodes that answer nothing.
    down: BTreeSet<NodeId>,
    /// Nodes whose replicas never apply anything new.
    stuck: BTreeSet<NodeId>,
    /// Each replica's applied index, and each group's last index.
    applied: BTreeMap<(NodeId, GroupId), u64>,
    last_index: BTreeMap<GroupId, u64>,
    /// The replicas each node hosts (the map's members at the start).
    hosted: BTreeSet<(NodeId, GroupId)>,
    /// Nodes that refuse to drop a replica (they saw a newer meta term).
    refusing_drops: BTreeSet<NodeId>,
    /// A group's voters as its leader reports them, where they differ from
    /// the map's members.
    raft_voters: BTreeMap<GroupId, Vec<NodeId>>,
    /// Key-value range sizes and splits, per group.
    ranges: BTreeMap<GroupId, RangeInfo>,
    /// Every step asked of the cluster, in order.
    steps: Vec<String>,
}

fn addr(node: NodeId) -> String {
    format!("10.0.0.{node}:7000")
}

/// `nodes` active nodes; groups 0 (meta) and `1..=data_groups`, each on
/// `members`, led by its first member; range sharding with group 1 holding
/// every key.
fn cluster(me: NodeId, nodes: &[NodeId], data_groups: GroupId, members: &[NodeId]) -> FakeCluster {
    let groups: Vec<GroupInfo> = (0..=data_groups).map(|g| GroupInfo::new(g, members.to_vec())).collect();
    let map = ClusterMap {
        nodes: nodes.iter().map(|&n| NodeInfo::new(n, addr(n))).collect(),
        strategy: ShardingStrategy::Range,
        replication_factor: members.len(),
        groups,
        epoch: 1,
        ranges: vec![RangeDescriptor { range: KeyRange::full(), group: 1 }],
        moving: None,
        pending_splits: BTreeMap::new(),
        last_group_id: data_groups,
    };
    let mut state = State { meta_term: Some(7), ..State::default() };
    for g in 0..=data_groups {
        state.leaders.insert(g, members[0]);
        state.last_index.insert(g, 10);
        for &m in members {
            state.applied.insert((m, g), 10);
            state.hosted.insert((m, g));
        }
    }
    state.map = Some(map);
    FakeCluster { me, state: Mutex::new(state) }
}

impl FakeCluster {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    fn steps(&self) -> Vec<String> {
        self.with(|s| s.steps.clone())
    }

    fn map(&self) -> ClusterMap {
        self.with(|s| s.map.clone().unwrap())
    }
}

impl State {
    fn step(&mut self, step: String) {
        self.steps.push(step);
    }

    fn members(&self, group: GroupId) -> Vec<NodeId> {
        self.map.as_ref().and_then(|m| m.groups.iter().find(|g| g.id == group)).map(|g| g.members.clone()).unwrap_or_default()
    }

    /// A new log entry of `group`, applied by `replicas` that are not stuck.
    fn commit(&mut self, group: GroupId, replicas: &[NodeId]) -> u64 {
        let index = self.last_index.entry(group).or_default();
        *index += 1;
        let index = *index;
        for &r in replicas.iter().filter(|r| !self.stuck.contains(r)) {
            self.applied.insert((r, group), index);
        }
        index
    }

    fn meta(&mut self, op: MetaOp) -> Response {
        self.step(format!("meta {}", describe(&op)));
        let map = self.map.as_mut().unwrap();
        let refused = |why: String| Response::Rejected(Rejection::new(ErrorCode::Conflict, why));
        match op {
            MetaOp::BeginMove(mv) => map.begin_move(mv).map_or_else(refused, Response::Applied),
            MetaOp::EndMove { group } => Response::Applied(map.end_move(group)),
            MetaOp::ReserveSplit { parent } => map.reserve_split(parent).map_or_else(refused, Response::Applied),
            MetaOp::RecordSplit { parent, child, at, members } => {
                let recorded = map.record_split(parent, child, &at, &members).map_or_else(refused, Response::Applied);
                // The child starts led by its parent's leader.
                if let Some(&leader) = self.leaders.get(&parent) {
                    self.leaders.entry(child).or_insert(leader);
                }
                recorded
            }
            MetaOp::SetNodeState { node, state } => {
                map.nodes.iter_mut().filter(|n| n.id == node).for_each(|n| n.state = state);
                Response::Applied(true)
            }
            MetaOp::SetGroupMembers { group, members, expected_move } => {
                if expected_move.is_some() && map.moving != expected_move {
                    return refused("stale move".into());
                }
                map.groups.iter_mut().filter(|g| g.id == group).for_each(|g| g.members = members.clone());
                map.end_move(group);
                Response::Applied(true)
            }
            other => panic!("the control plane sent an unexpected meta op {other:?}"),
        }
    }

    /// `call` run by `group`'s leader.
    fn run(&mut self, group: GroupId, call: &Call) -> Answer {
        match call {
            Call::Write(Operation::Meta(op)) => Answer::Written(self.meta(op.clone())),
            Call::Write(Operation::Split(SplitOp { child, at })) => {
                self.step(format!("group {group}: split at {at:?} into group {child}"));
                let members = self.members(group);
                let info = self.ranges.entry(group).or_insert_with(empty_range);
                info.splits.push(SplitRecord { child: *child, at: at.clone(), members });
                info.keys /= 2;
                info.middle_key = None;
                Answer::Written(Response::Applied(true))
            }
            Call::Read(Query::Kv(KvQuery::Range)) => {
                Answer::Read(QueryResult::Kv(KvQueryResult::Range(self.ranges.get(&group).cloned().unwrap_or_else(empty_range))))
            }
            Call::AddLearner { node, .. } => {
                self.step(format!("group {group}: add learner {node}"));
                let mut replicas = self.members(group);
                replicas.push(*node);
                Answer::Index(self.commit(group, &replicas))
            }
            Call::ReplaceVoters { voters, .. } => {
                self.step(format!("group {group}: voters {voters:?}"));
                Answer::Index(self.commit(group, voters))
            }
            other => panic!("unexpected call {other:?}"),
        }
    }
}

fn empty_range() -> RangeInfo {
    RangeInfo { range: KeyRange::full(), splits: Vec::new(), keys: 0, bytes: 0, middle_key: None, applied_index: 0 }
}

fn describe(op: &MetaOp) -> String {
    match op {
        MetaOp::BeginMove(mv) => format!("begin move of group {} from {} to {}", mv.group, mv.from, mv.to),
        MetaOp::EndMove { group } => format!("end move of group {group}"),
        MetaOp::SetGroupMembers { group, members, .. } => format!("group {group} members {members:?}"),
        MetaOp::SetNodeState { node, state } => format!("node {node} {}", state.as_str()),
        MetaOp::ReserveSplit { parent } => format!("reserve a split of group {parent}"),
        MetaOp::RecordSplit { parent, child, at, .. } => format!("record split of group {parent} at {at:?} into {child}"),
        other => format!("{other:?}"),
    }
}

impl ControlHost for FakeCluster {
    fn node_id(&self) -> NodeId {
        self.me
    }

    fn is_stopping(&self) -> bool {
        false
    }

    fn leads(&self, group: GroupId) -> bool {
        self.with(|s| s.leaders.get(&group) == Some(&self.me))
    }

    fn leader_here(&self, group: GroupId) -> Option<(NodeId, String)> {
        self.with(|s| {
            if !s.members(group).contains(&self.me) {
                return None;
            }
            let leader =
                s.hints.get(&(self.me, group)).copied().unwrap_or_else(|| s.leaders.get(&group).copied()).filter(|l| *l != self.me)?;
            Some((leader, format!("node-{leader}")))
        })
    }

    async fn confirm_meta_leadership(&self) -> Option<u64> {
        self.with(|s| s.meta_term.filter(|_| s.leaders.get(&META_GROUP) == Some(&self.me)))
    }

    fn recorded_map(&self) -> Option<ClusterMap> {
        self.with(|s| s.map.clone())
    }

    async fn call_here(&self, group: GroupId, call: Call) -> Result<Answer, ControlError> {
        self.with(|s| {
            if s.leaders.get(&group) != Some(&self.me) {
                return Err(ControlError::Local(format!("node {} does not lead group {group}", self.me)));
            }
            Ok(s.run(group, &call))
        })
    }

    async fn call_node(&self, node: NodeId, _addr: &str, group: GroupId, call: &Call) -> Reply {
        self.with(|s| {
            s.step(format!("ask node {node} for group {group}'s leader"));
            if s.down.contains(&node) {
                return Reply::Failed("unreachable".into());
            }
            if s.leaders.get(&group) == Some(&node) {
                return Reply::Done(s.run(group, call));
            }
            let named = s.hints.get(&(node, group)).copied().unwrap_or_else(|| s.leaders.get(&group).copied());
            Reply::NotLeader { leader: named.map(|l| (l, addr(l))) }
        })
    }

    async fn host_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> Result<(), ControlError> {
        self.with(|s| {
            s.step(format!("node {}: host group {group} (term {term})", node.id));
            s.hosted.insert((node.id, group));
        });
        Ok(())
    }

    async fn drop_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> Result<(), ControlError> {
        self.with(|s| {
            if s.refusing_drops.contains(&node.id) {
                s.step(format!("node {}: refused to drop group {group} (term {term})", node.id));
                return Err(ControlError::Node { node: node.id, message: "a newer meta term".into() });
            }
            s.step(format!("node {}: drop group {group} (term {term})", node.id));
            s.hosted.remove(&(node.id, group));
            Ok(())
        })
    }

    async fn applied_index(&self, node: &NodeInfo, group: GroupId) -> Option<u64> {
        self.with(|s| s.applied.get(&(node.id, group)).copied())
    }

    async fn status(&self, node: &NodeInfo) -> Option<StatusReply> {
        self.with(|s| {
            if s.down.contains(&node.id) {
                return None;
            }
            // Every group it hosts or leads, with the leader it believes in.
            let led = s.leaders.iter().filter(|(_, l)| **l == node.id).map(|(g, _)| *g);
            let hosted = s.hosted.iter().filter(|(n, _)| *n == node.id).map(|(_, g)| *g);
            let groups: BTreeSet<GroupId> = led.chain(hosted).collect();
            let groups = groups
                .into_iter()
                .map(|g| GroupStatus {
                    group_id: g,
                    leader_id: s.leaders.get(&g).copied().unwrap_or(0),
                    term: 7,
                    voters: s.raft_voters.get(&g).cloned().unwrap_or_else(|| s.members(g)),
                    ..Default::default()
                })
                .collect();
            Some(StatusReply { node_id: node.id, groups, ..Default::default() })
        })
    }

    async fn hand_off(&self, node: &NodeInfo, group: GroupId, to: NodeId, _timeout: Duration) -> Result<bool, ControlError> {
        self.with(|s| {
            s.step(format!("node {}: hand group {group} off to {to}", node.id));
            Ok(s.leaders.get(&group) == Some(&node.id))
        })
    }

    async fn campaign(
        &self,
        node: &NodeInfo,
        group: GroupId,
        _previous: NodeId,
        _timeout: Duration,
    ) -> Result<Option<NodeId>, ControlError> {
        self.with(|s| {
            s.step(format!("node {}: campaign for group {group}", node.id));
            s.leaders.insert(group, node.id);
            Ok(Some(node.id))
        })
    }
}

/// Adds node `id` to the map as joining.
fn join(c: &FakeCluster, id: NodeId) {
    c.with(|s| {
        let map = s.map.as_mut().unwrap();
        map.nodes.push(NodeInfo::new(id, addr(id)).in_state(NodeState::Joining));
    });
}

fn position(steps: &[String], step: &str) -> usize {
    steps.iter().position(|s| s == step).unwrap_or_else(|| panic!("no step {step:?} in {steps:#?}"))
}

#[tokio::test]
async fn a_leader_the_members_name_is_asked_when_the_map_does_not_list_it() {
    // Mid-move, group 3 is led by node 7, the move's target, which the map
    // does not list yet: node 2 names it, node 3 and this node know no leader.
    let c = cluster(1, &[1, 2, 3, 7], 3, &[1, 2, 3]);
    c.with(|s| {
        s.leaders.insert(3, 7);
        s.hints.insert((1, 3), None);
        s.hints.insert((3, 3), None);
        s.ranges.insert(3, RangeInfo { keys: 42, ..empty_range() });
    });
    let map = c.map();
    let answer = leader_call::on_leader(&c, &map, 3, Call::Read(Query::Kv(KvQuery::Range))).await.expect("node 7 answers");
    assert!(matches!(answer, Answer::Read(QueryResult::Kv(KvQueryResult::Range(RangeInfo { keys: 42, .. })))), "{answer:?}");
    assert_eq!(c.steps(), ["ask node 2 for group 3's leader", "ask node 3 for group 3's leader", "ask node 7 for group 3's leader"]);
}

#[tokio::test]
async fn the_leader_this_node_follows_is_asked_first() {
    // Group 1 moved off node 2, which led it and still names itself; node 3 is
    // down; the map lists {1, 2, 3} still. This node's replica follows node 7.
    let c = cluster(1, &[1, 2, 3, 7], 3, &[1, 2, 3]);
    c.with(|s| {
        s.leaders.insert(1, 7);
        s.hints.insert((2, 1), None);
        s.down.insert(3);
        s.ranges.insert(1, RangeInfo { keys: 7, ..empty_range() });
    });
    let answer = leader_call::on_leader(&c, &c.map(), 1, Call::Read(Query::Kv(KvQuery::Range))).await.expect("node 7 answers");
    assert!(matches!(answer, Answer::Read(QueryResult::Kv(KvQueryResult::Range(RangeInfo { keys: 7, .. })))), "{answer:?}");
    assert_eq!(c.steps(), ["ask node 7 for group 1's leader"]);
}

#[tokio::test]
async fn no_leader_found_names_what_each_member_said() {
    let c = cluster(1, &[1, 2, 3], 2, &[1, 2, 3]);
    c.with(|s| {
        s.leaders.remove(&2);
        s.down.insert(3);
    });
    let err = leader_call::on_leader(&c, &c.map(), 2, Call::Read(Query::Kv(KvQuery::Range))).await.unwrap_err();
    assert_eq!(err.to_string(), "node 3: unreachable (node 2 knows no leader)");
}

#[tokio::test]
async fn a_joining_node_receives_its_share_one_recorded_move_at_a_time_then_is_active() {
    // Three nodes hold three data groups; node 4 joins: it gets 2 of the 9
    // data replicas (9 / 4 rounded down), each move recorded before its steps.
    let c = cluster(1, &[1, 2, 3], 3, &[1, 2, 3]);
    join(&c, 4);
    let activated = driver::run_lifecycle(&c).await.expect("lifecycle");
    assert!(activated, "the joining node is activated");
    let steps = c.steps();
    let moves: Vec<&String> = steps.iter().filter(|s| s.starts_with("meta begin move")).collect();
    assert_eq!(moves.len(), 2, "{steps:#?}");
    for mv in moves {
        // "meta begin move of group G from F to 4"
        let words: Vec<&str> = mv.split(' ').collect();
        let (group, from) = (words[5], words[7]);
        let begin = position(&steps, mv);
        let host = position(&steps, &format!("node 4: host group {group} (term 7)"));
        let learner = position(&steps, &format!("group {group}: add learner 4"));
        let voters = steps.iter().position(|s| s.starts_with(&format!("group {group}: voters"))).unwrap();
        let recorded = steps.iter().position(|s| s.starts_with(&format!("meta group {group} members"))).unwrap();
        let dropped = position(&steps, &format!("node {from}: drop group {group} (term 7)"));
        assert!(begin < host && host < learner && learner < voters && voters < recorded && recorded < dropped, "{steps:#?}");
    }
    assert_eq!(steps.last().map(String::as_str), Some("meta node 4 active"));
    let map = c.map();
    assert_eq!(map.groups.iter().filter(|g| g.members.contains(&4)).count(), 2);
    assert!(map.moving.is_none());
}

#[tokio::test]
async fn a_group_short_of_a_replica_gets_one_on_the_node_added_back() {
    // Node 3 of three was removed when no node could take its replicas: every
    // group kept two. Added back, it receives one of each, nothing taken away.
    let c = cluster(1, &[1, 2], 2, &[1, 2]);
    c.with(|s| s.map.as_mut().unwrap().replication_factor = 3);
    join(&c, 3);
    assert!(driver::run_lifecycle(&c).await.expect("lifecycle"), "the node is activated");
    let steps = c.steps();
    for group in 0..=2 {
        let begin = position(&steps, &format!("meta begin move of group {group} from 3 to 3"));
        let learner = position(&steps, &format!("group {group}: add learner 3"));
        let voters = position(&steps, &format!("group {group}: voters [1, 2, 3]"));
        assert!(begin < learner && learner < voters, "{steps:#?}");
    }
    assert!(!steps.iter().any(|s| s.contains("drop group")), "{steps:#?}");
    assert_eq!(steps.last().map(String::as_str), Some("meta node 3 active"));
    assert!(c.map().groups.iter().all(|g| g.members == [1, 2, 3]), "{:?}", c.map().groups);
}

#[tokio::test]
async fn a_recorded_move_is_finished_before_anything_else() {
    // A driver crashed after recording the move of group 2 from node 3 to
    // node 4; a node is draining meanwhile. The next driver finishes the move
    // first, with the calls fenced by its own term.
    let c = cluster(1, &[1, 2, 3, 4], 2, &[1, 2, 3]);
    c.with(|s| s.map.as_mut().unwrap().moving = Some(ReplicaMove { group: 2, from: 3, to: 4 }));
    driver::run_lifecycle(&c).await.expect("lifecycle");
    let steps = c.steps();
    assert_eq!(steps[0], "node 4: host group 2 (term 7)", "{steps:#?}");
    assert_eq!(steps[1], "group 2: add learner 4");
    assert_eq!(steps[2], "group 2: voters [1, 2, 4]");
    assert_eq!(steps[3], "meta group 2 members [1, 2, 4]");
    assert_eq!(steps[4], "node 3: drop group 2 (term 7)");
    assert!(c.map().moving.is_none());
}

#[tokio::test]
async fn a_deposed_meta_leader_takes_no_step() {
    let c = cluster(1, &[1, 2, 3], 2, &[1, 2, 3]);
    join(&c, 4);
    c.with(|s| s.meta_term = None);
    assert!(!driver::run_lifecycle(&c).await.expect("lifecycle"));
    assert!(c.steps().is_empty(), "{:#?}", c.steps());
}

#[tokio::test(start_paused = true)]
async fn the_source_replica_stays_until_the_target_applied_the_new_membership() {
    let c = cluster(1, &[1, 2, 3, 4], 2, &[1, 2, 3]);
    c.with(|s| {
        s.map.as_mut().unwrap().moving = Some(ReplicaMove { group: 2, from: 3, to: 4 });
        s.stuck.insert(4);
    });
    driver::run_lifecycle(&c).await.expect("the move is recorded; the drop waits");
    let steps = c.steps();
    assert!(steps.contains(&"meta group 2 members [1, 2, 4]".to_string()), "{steps:#?}");
    assert!(!steps.iter().any(|s| s.contains("drop group")), "the source replica was dropped: {steps:#?}");
}

#[tokio::test]
async fn a_moved_away_replica_whose_drop_failed_is_dropped_by_a_later_sweep() {
    // The move of group 2 from node 3 to node 4 ends, but node 3 refuses the
    // drop (it saw a newer meta term while cut off): the move is over all the same.
    let c = cluster(1, &[1, 2, 3, 4], 2, &[1, 2, 3]);
    c.with(|s| {
        s.map.as_mut().unwrap().moving = Some(ReplicaMove { group: 2, from: 3, to: 4 });
        s.refusing_drops.insert(3);
    });
    driver::run_lifecycle(&c).await.expect("the move ends though the drop is refused");
    assert!(c.map().moving.is_none());
    assert!(c.with(|s| s.hosted.contains(&(3, 2))), "node 3 still hosts group 2");
    // Node 3 answers again: the next sweep drops the replica the map no longer lists.
    c.with(|s| s.refusing_drops.clear());
    assert_eq!(strays::drop_stray_replicas(&c, &c.map(), 7).await, 1, "{:#?}", c.steps());
    assert_eq!(c.steps().last().map(String::as_str), Some("node 3: drop group 2 (term 7)"));
    assert!(!c.with(|s| s.hosted.contains(&(3, 2))));
    // Nothing is left to sweep.
    assert_eq!(strays::drop_stray_replicas(&c, &c.map(), 7).await, 0);
}

#[tokio::test]
async fn a_replica_the_group_may_still_need_is_never_swept() {
    let c = cluster(1, &[1, 2, 3, 4], 3, &[1, 2, 3]);
    c.with(|s| {
        // A split's child the map has not recorded yet.
        s.hosted.insert((3, 9));
        // Group 2's leader still counts node 4 as a voter.
        s.hosted.insert((4, 2));
        s.raft_voters.insert(2, vec![1, 2, 3, 4]);
    });
    assert_eq!(strays::drop_stray_replicas(&c, &c.map(), 7).await, 0, "{:#?}", c.steps());
    // While a move is in flight its source and target hold unlisted replicas: no sweep.
    c.with(|s| {
        s.raft_voters.clear();
        s.map.as_mut().unwrap().moving = Some(ReplicaMove { group: 3, from: 3, to: 4 });
    });
    assert_eq!(strays::drop_stray_replicas(&c, &c.map(), 7).await, 0, "{:#?}", c.steps());
    assert!(!c.steps().iter().any(|s| s.contains("drop group")), "{:#?}", c.steps());
}

#[tokio::test]
async fn leaderships_are_evened_one_hand_off_at_a_time() {
    // Node 2 leads the three data groups; node 1 leads the meta group.
    let c = cluster(1, &[1, 2, 3], 3, &[1, 2, 3]);
    c.with(|s| {
        for g in 1..=3 {
            s.leaders.insert(g, 2);
        }
    });
    driver::balance_leaderships(&c).await;
    let led = c.with(|s| {
        let mut count = BTreeMap::<NodeId, usize>::new();
        s.leaders.values().for_each(|l| *count.entry(*l).or_default() += 1);
        count
    });
    assert!(led.values().max().unwrap() - led.values().min().unwrap() <= 1 && led.len() == 3, "{led:?}: {:#?}", c.steps());
    for pair in c.steps().chunks(2) {
        assert!(pair[0].starts_with("node 2: hand group") && pair[1].contains("campaign"), "{pair:?}");
    }
}

#[tokio::test]
async fn the_driver_stops_balancing_once_it_handed_the_meta_leadership_off() {
    // Node 1 leads every group, the meta group included: the meta group's
    // leadership may move first, and the next meta leader plans the rest.
    let c = cluster(1, &[1, 2, 3], 3, &[1, 2, 3]);
    driver::balance_leaderships(&c).await;
    let steps = c.steps();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert!(steps[0].starts_with("node 1: hand group") && steps[1].contains("campaign"), "{steps:#?}");
}

fn thresholds() -> SplitThresholds {
    SplitThresholds { bytes: u64::MAX, keys: 1_000, writes_per_sec: 0 }
}

#[tokio::test]
async fn a_range_over_its_threshold_splits_at_its_middle_key_into_a_reserved_child() {
    let c = cluster(1, &[1, 2, 3], 1, &[1, 2, 3]);
    c.with(|s| s.ranges.insert(1, RangeInfo { keys: 5_000, middle_key: Some("m".into()), ..empty_range() }));
    assert!(split_one(&c, &c.map(), thresholds(), &mut LastSeen::new()).await.expect("split"));
    assert_eq!(
        c.steps(),
        ["meta reserve a split of group 1", "group 1: split at \"m\" into group 2", "meta record split of group 1 at \"m\" into 2",]
    );
    let map = c.map();
    assert_eq!(map.ranges.iter().map(|r| (r.group, r.range.start.as_str())).collect::<Vec<_>>(), [(1, ""), (2, "m")]);
    assert!(map.pending_splits.is_empty());
}

#[tokio::test]
async fn a_split_the_parent_applied_is_recorded_before_any_new_one() {
    // The parent applied a split into group 5 (reserved by an earlier meta
    // leader, which then crashed); the range is over its threshold again.
    let c = cluster(1, &[1, 2, 3], 1, &[1, 2, 3]);
    c.with(|s| {
        let map = s.map.as_mut().unwrap();
        map.pending_splits.insert(1, 5);
        map.last_group_id = 5;
        let split = SplitRecord { child: 5, at: "k".into(), members: vec![1, 2, 3] };
        s.ranges.insert(1, RangeInfo { keys: 5_000, middle_key: Some("d".into()), splits: vec![split], ..empty_range() });
    });
    assert!(split_one(&c, &c.map(), thresholds(), &mut LastSeen::new()).await.expect("record"));
    assert_eq!(c.steps(), ["meta record split of group 1 at \"k\" into 5"]);
    // The next split gets a fresh id, never 5 again.
    assert!(split_one(&c, &c.map(), thresholds(), &mut LastSeen::new()).await.expect("split"));
    assert!(c.steps().contains(&"group 1: split at \"d\" into group 6".to_string()), "{:#?}", c.steps());
}

#[tokio::test]
async fn no_split_is_reserved_while_the_parent_has_no_reachable_leader() {
    let c = cluster(1, &[1, 2, 3], 1, &[1, 2, 3]);
    c.with(|s| s.ranges.insert(1, RangeInfo { keys: 5_000, middle_key: Some("m".into()), ..empty_range() }));
    // Group 1 is led elsewhere and its leader is unreachable.
    c.with(|s| {
        s.leaders.insert(1, 2);
        s.down.insert(2);
        s.hints.insert((3, 1), Some(2));
    });
    let err = split_one(&c, &c.map(), thresholds(), &mut LastSeen::new()).await.unwrap_err();
    assert!(matches!(err, ControlError::NoLeader(_)), "{err}");
    assert!(!c.steps().iter().any(|s| s.starts_with("meta")), "{:#?}", c.steps());
}
