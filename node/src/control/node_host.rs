//! [`ControlHost`] over this node's replicas and its peers' gRPC services.

use std::sync::Arc;
use std::time::Duration;

use tessera_api::meta::{ClusterMap, NodeInfo};
use tessera_api::rpc::data_reply::Outcome;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_api::rpc::{
    AddLearnerRequest, AppliedRequest, CampaignRequest, Consistency, DropGroupRequest, HandOffRequest, HostGroupRequest, ReadRequest,
    ReplaceVotersRequest, StatusReply, StatusRequest, WriteRequest,
};
use tessera_api::{GroupId, NodeId};
use tonic::transport::Channel;

use super::leader_call::{CALL_TIMEOUT, LEARNER_CATCH_UP_TIMEOUT, MEMBERSHIP_TIMEOUT};
use super::{Answer, Call, ControlError, ControlHost, Reply};
use crate::host::Host;

impl ControlHost for Arc<Host> {
    fn node_id(&self) -> NodeId {
        self.id
    }

    fn is_stopping(&self) -> bool {
        Host::is_stopping(self)
    }

    fn leads(&self, group: GroupId) -> bool {
        Host::leads(self, group)
    }

    fn leader_here(&self, group: GroupId) -> Option<(NodeId, String)> {
        let m = self.group(group).ok()?.raft.metrics().borrow().clone();
        let leader = crate::host::known_leader(&m, self.id).filter(|l| *l != self.id)?;
        m.membership_config.membership().get_node(&leader).map(|n| (leader, n.addr.clone()))
    }

    async fn confirm_meta_leadership(&self) -> Option<u64> {
        Host::confirm_meta_leadership(self).await
    }

    fn recorded_map(&self) -> Option<ClusterMap> {
        Host::recorded_map(self)
    }

    async fn call_here(&self, group: GroupId, call: Call) -> Result<Answer, ControlError> {
        let local = |e: crate::host::HostError| ControlError::Local(e.to_string());
        match call {
            Call::Read(q) => self.read(group, q, Consistency::Quorum).await.map(Answer::Read).map_err(local),
            Call::Write(op) => self.write(group, op, None, Consistency::Quorum).await.map(Answer::Written).map_err(local),
            Call::AddLearner { node, addr, meta_term } => {
                self.admit_control(meta_term, "adding a learner").map_err(local)?;
                self.add_learner(group, node, addr).await.map(Answer::Index).map_err(local)
            }
            Call::ReplaceVoters { voters, expected, meta_term } => {
                self.admit_control(meta_term, "replacing voters").map_err(local)?;
                self.replace_voters(group, voters.into_iter().collect(), Some(expected.into_iter().collect()))
                    .await
                    .map(Answer::Index)
                    .map_err(local)
            }
        }
    }

    async fn call_node(&self, node: NodeId, addr: &str, group: GroupId, call: &Call) -> Reply {
        let Ok(mut client) = self.pool.data_client(node, addr) else {
            return Reply::Failed("no channel".into());
        };
        let encoded = match call {
            Call::Read(q) => tessera_api::codec::encode(q),
            Call::Write(op) => tessera_api::codec::encode(op),
            Call::AddLearner { .. } | Call::ReplaceVoters { .. } => Ok(Vec::new()),
        };
        let payload = match encoded {
            Ok(bytes) => bytes,
            Err(e) => return Reply::Failed(format!("encoding the call: {e}")),
        };
        let reply = match call {
            Call::Read(_) => {
                let mut req = tonic::Request::new(ReadRequest { group_id: group, query: payload, consistency: Consistency::Quorum as i32 });
                req.set_timeout(CALL_TIMEOUT);
                client.read(req).await
            }
            Call::Write(_) => {
                let mut req = tonic::Request::new(WriteRequest {
                    group_id: group,
                    operation: payload,
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
                let answer = match call {
                    Call::Read(_) => tessera_api::codec::decode(&bytes).map(Answer::Read),
                    Call::Write(_) => tessera_api::codec::decode(&bytes).map(Answer::Written),
                    Call::AddLearner { .. } | Call::ReplaceVoters { .. } => tessera_api::codec::decode(&bytes).map(Answer::Index),
                };
                match answer {
                    Ok(answer) => Reply::Done(answer),
                    Err(e) => Reply::Failed(format!("undecodable answer: {e}")),
                }
            }
            Ok(Some(Outcome::Failure(f))) => Reply::Failed(f.message),
            Ok(Some(Outcome::NotLeader(hint))) => {
                Reply::NotLeader { leader: (hint.leader_id != 0).then_some((hint.leader_id, hint.leader_addr)) }
            }
            Ok(None) => Reply::Failed("an empty answer".into()),
            Err(status) => Reply::Failed(status.message().to_string()),
        }
    }

    async fn host_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> Result<(), ControlError> {
        if node.id == self.id {
            let local = |e: crate::host::HostError| ControlError::Local(e.to_string());
            self.admit_control(term, "hosting a replica").map_err(local)?;
            return Host::host_group(self, group).await.map(|_| ()).map_err(local);
        }
        let mut client = self.client(node)?;
        let mut req = tonic::Request::new(HostGroupRequest { group_id: group, meta_term: term });
        req.set_timeout(Duration::from_secs(10));
        client.host_group(req).await.map(|_| ()).map_err(|s| remote(node, s))
    }

    async fn drop_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> Result<(), ControlError> {
        if node.id == self.id {
            let local = |e: crate::host::HostError| ControlError::Local(e.to_string());
            self.admit_control(term, "dropping a replica").map_err(local)?;
            return Host::drop_group(self, group).await.map(|_| ()).map_err(local);
        }
        let mut client = self.client(node)?;
        let mut req = tonic::Request::new(DropGroupRequest { group_id: group, meta_term: term });
        req.set_timeout(Duration::from_secs(15));
        client.drop_group(req).await.map(|_| ()).map_err(|s| remote(node, s))
    }

    async fn applied_index(&self, node: &NodeInfo, group: GroupId) -> Option<u64> {
        if node.id == self.id {
            return Host::applied_index(self, group).ok();
        }
        let mut client = self.client(node).ok()?;
        let mut req = tonic::Request::new(AppliedRequest { group_id: group });
        req.set_timeout(Duration::from_secs(2));
        client.applied(req).await.ok().map(|r| r.into_inner()).filter(|r| r.hosted).map(|r| r.last_applied)
    }

    async fn status(&self, node: &NodeInfo) -> Option<StatusReply> {
        if node.id == self.id {
            return Some(StatusReply {
                node_id: self.id,
                groups: self.group_statuses(),
                locality: self.locality.clone(),
                ..Default::default()
            });
        }
        let mut client = self.client(node).ok()?;
        let mut req = tonic::Request::new(StatusRequest { from_node: self.id, ..Default::default() });
        req.set_timeout(Duration::from_secs(1));
        Some(client.status(req).await.ok()?.into_inner())
    }

    async fn hand_off(&self, node: &NodeInfo, group: GroupId, to: NodeId, timeout: Duration) -> Result<bool, ControlError> {
        if node.id == self.id {
            return Host::hand_off(self, group, to, timeout).await.map_err(|e| ControlError::Local(e.to_string()));
        }
        let mut client = self.client(node)?;
        let req = HandOffRequest { group_id: group, timeout_ms: timeout.as_millis() as u64, to };
        Ok(client.hand_off(req).await.map_err(|s| remote(node, s))?.into_inner().was_leader)
    }

    async fn campaign(&self, node: &NodeInfo, group: GroupId, previous: NodeId, timeout: Duration) -> Result<Option<NodeId>, ControlError> {
        if node.id == self.id {
            return Host::campaign(self, group, Some(previous), timeout).await.map_err(|e| ControlError::Local(e.to_string()));
        }
        let mut client = self.client(node)?;
        let req = CampaignRequest { group_id: group, previous_leader: previous, timeout_ms: timeout.as_millis() as u64 };
        let leader = client.campaign(req).await.map_err(|s| remote(node, s))?.into_inner().leader;
        Ok((leader != 0).then_some(leader))
    }
}

trait Peers {
    fn client(&self, node: &NodeInfo) -> Result<DataServiceClient<Channel>, ControlError>;
}

impl Peers for Arc<Host> {
    /// A client of `node`'s data service over the control lane.
    fn client(&self, node: &NodeInfo) -> Result<DataServiceClient<Channel>, ControlError> {
        self.pool.data_client(node.id, &node.addr).map_err(|e| ControlError::Node { node: node.id, message: e.to_string() })
    }
}

fn remote(node: &NodeInfo, status: tonic::Status) -> ControlError {
    ControlError::Node { node: node.id, message: status.message().to_string() }
}
