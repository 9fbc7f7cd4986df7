//! Calls a group's leader from a background task of this node (the range
//! splitter, the placement driver): here when this node leads the group, else
//! through the member that answers as its leader.

use std::sync::Arc;
use std::time::Duration;

use tessera_api::command::{Operation, Query, QueryResult, Response};
use tessera_api::meta::ClusterMap;
use tessera_api::rpc::data_reply::Outcome;
use tessera_api::rpc::{AddLearnerRequest, Consistency, ReadRequest, ReplaceVotersRequest, WriteRequest};
use tessera_api::{GroupId, NodeId};

use crate::host::Host;

/// How long a learner may take to catch up (a snapshot may ship first).
const LEARNER_CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a membership change may take to commit.
const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a read or write may take (a leader without a quorum must not stall
/// the splitter or the driver).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// A call to a group's leader.
pub enum Call {
    Read(Query),
    Write(Operation),
    /// Add a learner and wait until it caught up (answers the membership's log
    /// index); fenced by the caller's meta term.
    AddLearner { node: NodeId, addr: String, meta_term: u64 },
    /// Commit `voters`, dropping every learner (answers the membership's log
    /// index), if the group's voters are `expected` (or `voters` already);
    /// fenced by the caller's meta term.
    ReplaceVoters { voters: Vec<NodeId>, expected: Vec<NodeId>, meta_term: u64 },
}

/// Its answer.
#[derive(Debug)]
pub enum Answer {
    Read(QueryResult),
    Written(Response),
    /// A membership change's log index.
    Index(u64),
}

/// Runs `call` on the leader of `group`: here when this node leads it, else on
/// the member that answers as its leader.
pub async fn on_leader(host: &Arc<Host>, map: &ClusterMap, group: GroupId, call: Call) -> Result<Answer, String> {
    let deadline = match &call {
        Call::Read(_) | Call::Write(_) => CALL_TIMEOUT,
        Call::AddLearner { .. } => LEARNER_CATCH_UP_TIMEOUT,
        Call::ReplaceVoters { .. } => MEMBERSHIP_TIMEOUT,
    };
    match tokio::time::timeout(deadline + Duration::from_secs(1), call_leader(host, map, group, call)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("group {group}'s leader did not answer within {deadline:?}")),
    }
}

async fn call_leader(host: &Arc<Host>, map: &ClusterMap, group: GroupId, call: Call) -> Result<Answer, String> {
    if host.leads(group) {
        return match call {
            Call::Read(q) => host.read(group, q, Consistency::Quorum).await.map(Answer::Read),
            Call::Write(op) => host.write(group, op, None, Consistency::Quorum).await.map(Answer::Written),
            Call::AddLearner { node, addr, meta_term } => match host.admit_control(meta_term, "adding a learner") {
                Ok(()) => host.add_learner(group, node, addr).await.map(Answer::Index),
                Err(e) => Err(e),
            },
            Call::ReplaceVoters { voters, expected, meta_term } => match host.admit_control(meta_term, "replacing voters") {
                Ok(()) => host
                    .replace_voters(group, voters.into_iter().collect(), Some(expected.into_iter().collect()))
                    .await
                    .map(Answer::Index),
                Err(e) => Err(e),
            },
        }
        .map_err(|e| e.to_string());
    }
    // The map's members first; then any leader they name that is not one of
    // them: mid-move the group may be led by the node a replica moves to (a
    // voter of the joint membership, elected while the old leader was cut off)
    // before the map lists it, and asking only the map's members would find no
    // leader for as long as that lasts.
    let members = map.groups.iter().find(|g| g.id == group).map(|g| g.members.clone()).unwrap_or_default();
    let mut to_ask: std::collections::VecDeque<(NodeId, String)> = members
        .into_iter()
        .filter(|m| *m != host.id)
        .filter_map(|m| map.addr_of(m).map(|a| (m, a.to_string())))
        .collect();
    let mut asked: std::collections::BTreeSet<NodeId> = std::collections::BTreeSet::from([host.id]);
    let mut last = format!("no member of group {group} answered as its leader");
    let mut answers: Vec<String> = Vec::new();
    while let Some((node, addr)) = to_ask.pop_front() {
        if !asked.insert(node) {
            continue;
        }
        let Ok(mut client) = host.pool.data_client(node, &addr) else { continue };
        let reply = match &call {
            Call::Read(q) => {
                let query = tessera_api::codec::encode(q).map_err(|e| e.to_string())?;
                let mut req = tonic::Request::new(ReadRequest { group_id: group, query, consistency: Consistency::Quorum as i32 });
                req.set_timeout(CALL_TIMEOUT);
                client.read(req).await
            }
            Call::Write(op) => {
                let operation = tessera_api::codec::encode(op).map_err(|e| e.to_string())?;
                let mut req = tonic::Request::new(WriteRequest {
                    group_id: group,
                    operation,
                    consistency: Consistency::Quorum as i32,
                    request_id: String::new(),
                });
                req.set_timeout(CALL_TIMEOUT);
                client.write(req).await
            }
            Call::AddLearner { node: learner, addr, meta_term } => {
                let mut req = tonic::Request::new(AddLearnerRequest {
                    group_id: group,
                    node_id: *learner,
                    node_addr: addr.clone(),
                    meta_term: *meta_term,
                });
                // The answer comes once the learner caught up (a snapshot may ship first).
                req.set_timeout(LEARNER_CATCH_UP_TIMEOUT);
                client.add_learner(req).await
            }
            Call::ReplaceVoters { voters, expected, meta_term } => {
                let mut req = tonic::Request::new(ReplaceVotersRequest {
                    group_id: group,
                    voters: voters.clone(),
                    meta_term: *meta_term,
                    expected_voters: expected.clone(),
                });
                req.set_timeout(MEMBERSHIP_TIMEOUT);
                client.replace_voters(req).await
            }
        };
        match reply.map(|r| r.into_inner().outcome) {
            Ok(Some(Outcome::Ok(bytes))) => {
                return match call {
                    Call::Read(_) => tessera_api::codec::decode(&bytes).map(Answer::Read),
                    Call::Write(_) => tessera_api::codec::decode(&bytes).map(Answer::Written),
                    Call::AddLearner { .. } | Call::ReplaceVoters { .. } => tessera_api::codec::decode(&bytes).map(Answer::Index),
                }
                .map_err(|e| e.to_string());
            }
            Ok(Some(Outcome::Failure(f))) => last = f.message,
            Ok(Some(Outcome::NotLeader(hint))) => {
                answers.push(match hint.leader_id {
                    0 => format!("node {node} knows no leader"),
                    l => format!("node {node} names node {l}"),
                });
                if hint.leader_id != 0 && !hint.leader_addr.is_empty() && !asked.contains(&hint.leader_id) {
                    to_ask.push_back((hint.leader_id, hint.leader_addr));
                }
            }
            Ok(None) => {}
            Err(status) => last = format!("node {node}: {}", status.message()),
        }
    }
    if !answers.is_empty() {
        last = format!("{last} ({})", answers.join("; "));
    }
    Err(last)
}
