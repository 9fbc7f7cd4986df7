//! Calls a group's leader from a control-plane task: here when this node leads
//! the group, else through the member that answers as its leader, following
//! the leader a member names when the map does not list it.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use tessera_api::command::{Operation, Query, QueryResult, Response};
use tessera_api::meta::ClusterMap;
use tessera_api::{GroupId, NodeId};

use super::{ControlError, ControlHost, Reply};

/// How long a learner may take to catch up (a snapshot may ship first).
pub const LEARNER_CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a membership change may take to commit.
pub const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a read or write may take (a leader without a quorum must not stall
/// the splitter or the driver).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// A call to a group's leader.
#[derive(Debug, Clone)]
pub enum Call {
    Read(Query),
    Write(Operation),
    /// Add a learner and wait until it caught up (answers the membership's log
    /// index); fenced by the caller's meta term.
    AddLearner {
        node: NodeId,
        addr: String,
        meta_term: u64,
    },
    /// Commit `voters`, dropping every learner (answers the membership's log
    /// index), if the group's voters are `expected` (or `voters` already);
    /// fenced by the caller's meta term.
    ReplaceVoters {
        voters: Vec<NodeId>,
        expected: Vec<NodeId>,
        meta_term: u64,
    },
}

impl Call {
    /// How long the leader may take to answer.
    pub fn deadline(&self) -> Duration {
        match self {
            Call::Read(_) | Call::Write(_) => CALL_TIMEOUT,
            Call::AddLearner { .. } => LEARNER_CATCH_UP_TIMEOUT,
            Call::ReplaceVoters { .. } => MEMBERSHIP_TIMEOUT,
        }
    }
}

/// Its answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Read(QueryResult),
    Written(Response),
    /// A membership change's log index.
    Index(u64),
}

/// Runs `call` on the leader of `group`: here when this node leads it, else on
/// the member that answers as its leader.
pub async fn on_leader<H: ControlHost>(host: &H, map: &ClusterMap, group: GroupId, call: Call) -> Result<Answer, ControlError> {
    let after = call.deadline();
    match tokio::time::timeout(after + Duration::from_secs(1), call_leader(host, map, group, call)).await {
        Ok(answer) => answer,
        Err(_) => Err(ControlError::Timeout { group, after }),
    }
}

async fn call_leader<H: ControlHost>(host: &H, map: &ClusterMap, group: GroupId, call: Call) -> Result<Answer, ControlError> {
    if host.leads(group) {
        return host.call_here(group, call).await;
    }
    // The map's members first; then any leader they name that is not one of
    // them: mid-move the group may be led by the node a replica moves to (a
    // voter of the joint membership, elected while the old leader was cut off)
    // before the map lists it, and asking only the map's members would find no
    // leader for as long as that lasts.
    let members = map.groups.iter().find(|g| g.id == group).map(|g| g.members.clone()).unwrap_or_default();
    let mut to_ask: VecDeque<(NodeId, String)> =
        members.into_iter().filter(|m| *m != host.node_id()).filter_map(|m| map.addr_of(m).map(|a| (m, a.to_string()))).collect();
    // The leader this node's own replica follows goes first: the map's other
    // members may all be unable to name it (one left the group it led, one is
    // down) while the group is led by the node a replica moved to.
    if let Some(here) = host.leader_here(group) {
        to_ask.push_front(here);
    }
    let mut asked = BTreeSet::from([host.node_id()]);
    let mut last = format!("no member of group {group} answered as its leader");
    let mut answers: Vec<String> = Vec::new();
    while let Some((node, addr)) = to_ask.pop_front() {
        if !asked.insert(node) {
            continue;
        }
        match host.call_node(node, &addr, group, &call).await {
            Reply::Done(answer) => return Ok(answer),
            Reply::Failed(message) => last = format!("node {node}: {message}"),
            Reply::NotLeader { leader } => {
                answers.push(match &leader {
                    None => format!("node {node} knows no leader"),
                    Some((l, _)) => format!("node {node} names node {l}"),
                });
                if let Some((l, addr)) = leader.filter(|(l, addr)| !addr.is_empty() && !asked.contains(l)) {
                    to_ask.push_back((l, addr));
                }
            }
        }
    }
    if !answers.is_empty() {
        last = format!("{last} ({})", answers.join("; "));
    }
    Err(ControlError::NoLeader(last))
}
