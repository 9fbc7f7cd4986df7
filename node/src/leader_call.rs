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

/// A call to a group's leader.
pub enum Call {
    Read(Query),
    Write(Operation),
    /// Add a learner and wait until it caught up (answers the membership's log index).
    AddLearner { node: NodeId, addr: String },
    /// Commit these voters, dropping every learner (answers the membership's log index).
    ReplaceVoters(Vec<NodeId>),
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
    if host.leads(group) {
        return match call {
            Call::Read(q) => host.read(group, q, Consistency::Quorum).await.map(Answer::Read),
            Call::Write(op) => host.write(group, op, None, Consistency::Quorum).await.map(Answer::Written),
            Call::AddLearner { node, addr } => host.add_learner(group, node, addr).await.map(Answer::Index),
            Call::ReplaceVoters(voters) => host.replace_voters(group, voters.into_iter().collect()).await.map(Answer::Index),
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
            Call::AddLearner { node: learner, addr } => {
                let mut req = tonic::Request::new(AddLearnerRequest { group_id: group, node_id: *learner, node_addr: addr.clone() });
                // The answer comes once the learner caught up (a snapshot may ship first).
                req.set_timeout(LEARNER_CATCH_UP_TIMEOUT);
                client.add_learner(req).await
            }
            Call::ReplaceVoters(voters) => {
                let mut req = tonic::Request::new(ReplaceVotersRequest { group_id: group, voters: voters.clone() });
                req.set_timeout(MEMBERSHIP_TIMEOUT);
                client.replace_voters(req).await
            }
        };
        match reply.map(|r| r.into_inner().outcome) {
            Ok(Some(Outcome::Ok(bytes))) => {
                return match call {
                    Call::Read(_) => tessera_api::codec::decode(&bytes).map(Answer::Read),
                    Call::Write(_) => tessera_api::codec::decode(&bytes).map(Answer::Written),
                    Call::AddLearner { .. } | Call::ReplaceVoters(_) => tessera_api::codec::decode(&bytes).map(Answer::Index),
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
