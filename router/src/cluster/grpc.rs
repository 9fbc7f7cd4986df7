//! The cluster client over the nodes' gRPC: node clients, the cluster map read
//! from the meta group, the shard ring, a leader cache per group, and calls
//! that follow "not leader" answers and step over dead nodes until a deadline.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use tessera_api::call_streams::{CallStreams, Requests, Sent};
use tessera_api::command::{Operation, Query, QueryResult, Response};
use tessera_api::meta::{ClusterMap, NodeInfo};
use tessera_api::routing::{Ring, RoutingKey};
use tessera_api::rpc::data_call::Call;
use tessera_api::rpc::data_reply::Outcome;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_api::rpc::{
    CampaignRequest, Consistency, DataCall, DataCallReply, DataReply, DrainRequest, FailureKind, HandOffRequest, LogsRequest,
    MAX_MESSAGE_BYTES, ReadRequest, RemoveVoterRequest, RestartRequest, RetireRequest, ShutdownRequest, StatusReply, StatusRequest,
    StorageReply, StorageRequest, WriteManyRequest, WriteRequest,
};
use tessera_api::{GroupId, META_GROUP, NodeId, codec};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// A node's data-service client; every call carries the router's wire version
/// and the caller's trace context.
type NodeClient = DataServiceClient<InterceptedService<Channel, Outgoing>>;

/// What every call to a node carries in its metadata.
#[derive(Debug, Clone, Copy)]
struct Outgoing {
    /// The wire version sent; 1 sends none, as routers before version 2 did.
    wire_version: u32,
}

impl tonic::service::Interceptor for Outgoing {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if self.wire_version != 1 {
            request.metadata_mut().insert(tessera_api::rpc::WIRE_VERSION_KEY, self.wire_version.into());
        }
        tessera_api::telemetry::inject_trace(request.metadata_mut());
        Ok(request)
    }
}

/// Whether a node refused this router's wire version (no point retrying).
fn wire_refusal(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::FailedPrecondition && status.message().starts_with(tessera_api::rpc::WIRE_REFUSAL)
}

/// The wire version this router speaks: [`tessera_api::rpc::WIRE_VERSION`],
/// or, for the tests of mixed-version clusters only, `TESSERA_TEST_WIRE_VERSION`.
fn own_wire_version() -> u32 {
    std::env::var("TESSERA_TEST_WIRE_VERSION").ok().and_then(|v| v.parse().ok()).unwrap_or(tessera_api::rpc::WIRE_VERSION)
}
use tracing::{debug, info};

use super::lanes::Lanes;
use super::{ClusterClient, ClusterError, Served, build_ring};

/// Timeout of one RPC attempt.
/// How long one export call (a whole group written to a file) or page may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(300);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a leader stays silent for a hand-off, and its successor campaigns.
const LEADER_TRANSFER_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct View {
    map: Option<ClusterMap>,
    ring: Option<Ring>,
    /// Node id → address, from the map or learned from seeds.
    addrs: HashMap<NodeId, String>,
    leaders: HashMap<GroupId, NodeId>,
    /// The highest Raft term any node reported for each group.
    terms: HashMap<GroupId, u64>,
    reachable: HashMap<NodeId, bool>,
    /// Node id → (WAL syncs, log entries synced), from the node's status.
    wal: HashMap<NodeId, (u64, u64)>,
    /// Node id → (cluster id, incarnation), from the node's status.
    identity: HashMap<NodeId, (u64, u64)>,
    /// A node's refusal of this router's wire version, at the last refresh.
    refused: Option<String>,
}

/// `Ok` when `group` has a leader this router reached at its last refresh.
fn group_led(view: &View, group: GroupId) -> Result<(), String> {
    match view.leaders.get(&group) {
        Some(l) if view.reachable.get(l).copied().unwrap_or(false) => Ok(()),
        Some(l) => Err(format!("the leader ({l}) of group {group} is unreachable")),
        None => Err(format!("group {group} has no known leader")),
    }
}

/// The cluster client of one router, over the nodes' gRPC.
pub struct GrpcCluster {
    seeds: Vec<(Option<NodeId>, String)>,
    view: RwLock<View>,
    channels: RwLock<HashMap<String, Channel>>,
    deadline: Duration,
    /// Mutual TLS towards the nodes, or plaintext; replaced when the
    /// certificates rotate ([`GrpcCluster::replace_tls`]).
    tls: RwLock<Option<tessera_api::tls::ClusterTls>>,
    /// The wire contract version this router sends.
    wire_version: u32,
    /// Key-value and SQL writes waiting for their group's call in flight (see [`super::lanes`]).
    lanes: Lanes<WriteRequest, Option<Result<Served<Response>, ClusterError>>>,
    /// Writes and reads go on one stream per node (by address).
    streams: CallStreams<String, DataCall, DataCallReply>,
}

impl GrpcCluster {
    /// A client over the seed nodes, dialing them over mutual TLS when `tls` is
    /// given; call [`ClusterClient::refresh`] to learn the map.
    pub fn new(seeds: Vec<(Option<NodeId>, String)>, deadline: Duration, tls: Option<tessera_api::tls::ClusterTls>) -> Arc<Self> {
        let mut view = View::default();
        for (id, addr) in &seeds {
            if let Some(id) = id {
                view.addrs.insert(*id, addr.clone());
            }
        }
        let wire_version = own_wire_version();
        Arc::new(GrpcCluster {
            seeds,
            view: RwLock::new(view),
            channels: RwLock::default(),
            deadline,
            tls: RwLock::new(tls),
            wire_version,
            lanes: Lanes::default(),
            streams: CallStreams::default(),
        })
    }

    /// Dials the nodes with `tls` from now on: the cached channels are dropped,
    /// so the next call connects with the new certificates.
    pub fn replace_tls(&self, tls: Option<tessera_api::tls::ClusterTls>) {
        *self.tls.write().unwrap_or_else(|e| e.into_inner()) = tls;
        self.channels.write().expect("channels lock").clear();
        self.streams.close_all();
    }

    fn client(&self, addr: &str) -> Result<NodeClient, ClusterError> {
        if let Some(ch) = self.channels.read().expect("channels lock").get(addr) {
            return Ok(self.wrap(ch.clone()));
        }
        let tls = self.tls.read().unwrap_or_else(|e| e.into_inner()).clone();
        let ch = tessera_api::tls::node_endpoint(addr, tls.as_ref())
            .map_err(|e| ClusterError::Unavailable(format!("bad node address {addr}: {e}")))?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5))
            .connect_lazy();
        self.channels.write().expect("channels lock").insert(addr.to_string(), ch.clone());
        Ok(self.wrap(ch))
    }

    fn wrap(&self, ch: Channel) -> NodeClient {
        DataServiceClient::with_interceptor(ch, Outgoing { wire_version: self.wire_version })
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Candidate nodes for a group: only the preferred node when one is named,
    /// otherwise the cached leader first, then the members.
    fn candidates(&self, group: GroupId, preferred: Option<NodeId>) -> Vec<(NodeId, String)> {
        let view = self.view.read().expect("view lock");
        if let Some(node) = preferred {
            return view.addrs.get(&node).map(|a| vec![(node, a.clone())]).unwrap_or_default();
        }
        let mut order: Vec<NodeId> = Vec::new();
        order.extend(view.leaders.get(&group).copied());
        match view.map.as_ref().and_then(|m| m.groups.iter().find(|g| g.id == group)) {
            Some(g) => order.extend(g.members.iter().copied()),
            None => order.extend(view.addrs.keys().copied()),
        }
        let mut seen = Vec::new();
        order
            .into_iter()
            .filter(|id| {
                let fresh = !seen.contains(id);
                seen.push(*id);
                fresh
            })
            .filter_map(|id| view.addrs.get(&id).map(|a| (id, a.clone())))
            .collect()
    }

    /// Refuses a read pinned to `node` (`X-Tessera-Replica`) when the map says
    /// the node is not in the cluster or holds no replica of `group` (it may
    /// have moved away): retrying could not help.
    fn pinned_holds(&self, group: GroupId, node: NodeId) -> Result<(), ClusterError> {
        let view = self.view.read().expect("view lock");
        let Some(map) = view.map.as_ref() else { return Ok(()) };
        if map.node(node).is_none() {
            return Err(ClusterError::BadRequest(format!("X-Tessera-Replica: node {node} is not in the cluster")));
        }
        match map.groups.iter().find(|g| g.id == group) {
            Some(g) if !g.members.contains(&node) => Err(ClusterError::BadRequest(format!(
                "X-Tessera-Replica: node {node} holds no replica of group {group} (its replicas are on nodes {:?}); \
                 read from one of those, or without X-Tessera-Replica",
                g.members
            ))),
            _ => Ok(()),
        }
    }

    fn note_leader(&self, group: GroupId, node: NodeId) {
        let mut view = self.view.write().expect("view lock");
        if view.leaders.get(&group) != Some(&node) {
            view.leaders.insert(group, node);
        }
    }

    /// One write or read on the node at `addr`: on this router's stream to it,
    /// or as a unary call (a node that does not serve the stream; every node
    /// while traces are exported, so that each call carries its trace context).
    async fn data_call(&self, mut client: NodeClient, addr: String, call: Call) -> Result<tonic::Response<DataReply>, tonic::Status> {
        let timeout = ATTEMPT_TIMEOUT + Duration::from_secs(5);
        let call = if tessera_api::telemetry::exporting() {
            call
        } else {
            // The stream outlives this call: it is opened on the channel of now
            // (certificates may have rotated since `client` was taken).
            let open = |requests: Requests<DataCall>| {
                let mut client = self.client(&addr).ok()?;
                Some(async move { client.calls(requests).await })
            };
            match self.streams.call(addr.clone(), &addr, open, DataCall { call: Some(call), ..Default::default() }, timeout).await {
                Sent::Answered(Ok(answer)) => {
                    return answer
                        .reply
                        .map(tonic::Response::new)
                        .ok_or_else(|| tonic::Status::internal("a streamed reply without its answer"));
                }
                Sent::Answered(Err(status)) => return Err(status),
                Sent::Unary(DataCall { call, .. }) => call.expect("the call sent"),
            }
        };
        match call {
            Call::Write(write) => {
                let mut req = tonic::Request::new(write);
                req.set_timeout(timeout);
                client.write(req).await
            }
            Call::Read(read) => {
                let mut req = tonic::Request::new(read);
                req.set_timeout(timeout);
                client.read(req).await
            }
        }
    }

    /// Sends one write to its group's leader, following leader hints and
    /// stepping over dead nodes until the deadline.
    async fn write_alone(&self, write: WriteRequest) -> Result<Served<Response>, ClusterError> {
        self.call(write.group_id, None, false, |client, addr| self.data_call(client, addr, Call::Write(write.clone()))).await
    }

    /// One attempt at `writes` of `group` (a lane's batch, see [`super::lanes`])
    /// on the leader this router knows: a lone write as `Write`, several in one
    /// `WriteMany` call. A write it does not answer (no leader known, not the
    /// leader, a failure, a node without the call) comes back `None`: its writer
    /// sends it alone, with its request id, following leader hints and stepping
    /// over dead nodes as any write, so the lane's turn is held for one attempt.
    async fn write_together(&self, group: GroupId, writes: Vec<WriteRequest>) -> Vec<Option<Result<Served<Response>, ClusterError>>> {
        let mut answers: Vec<Option<Result<Served<Response>, ClusterError>>> = (0..writes.len()).map(|_| None).collect();
        let leader = {
            let view = self.view.read().expect("view lock");
            view.leaders.get(&group).and_then(|id| view.addrs.get(id).map(|addr| (*id, addr.clone())))
        };
        let Some((leader, addr)) = leader else { return answers };
        let Ok(mut client) = self.client(&addr) else { return answers };
        let count = writes.len();
        let replies = if count == 1 {
            let write = writes.into_iter().next().expect("one write");
            self.data_call(client, addr, Call::Write(write)).await.map(|reply| vec![reply.into_inner()])
        } else {
            let mut req = tonic::Request::new(WriteManyRequest { group_id: group, writes });
            req.set_timeout(ATTEMPT_TIMEOUT + Duration::from_secs(5));
            client.write_many(req).await.map(|reply| reply.into_inner().replies)
        };
        let replies = match replies {
            Ok(replies) => replies,
            Err(status) => {
                if status.code() != tonic::Code::Unimplemented {
                    // Unreachable or slow: the next writers do not wait on it again.
                    let mut view = self.view.write().expect("view lock");
                    if view.leaders.get(&group) == Some(&leader) {
                        view.leaders.remove(&group);
                    }
                }
                return answers;
            }
        };
        for (answer, reply) in answers.iter_mut().zip(replies) {
            if let Some(Outcome::Ok(bytes)) = reply.outcome {
                *answer = Some(
                    codec::decode(&bytes)
                        .map(|value| Served { value, group, node: reply.served_by })
                        .map_err(|e| ClusterError::UnexpectedReply(e.to_string())),
                );
            }
        }
        let answered = answers.iter().filter(|a| a.is_some()).count();
        if count > 1 && answered > 0 {
            metrics::counter!("tessera_router_coalesced_writes_total").increment(answered as u64);
        }
        answers
    }

    /// Runs `attempt` against candidates until one answers, following leader hints,
    /// until the router's deadline.
    async fn call<T, F, Fut>(
        &self,
        group: GroupId,
        preferred: Option<NodeId>,
        any_replica: bool,
        attempt: F,
    ) -> Result<Served<T>, ClusterError>
    where
        T: DeserializeOwned,
        F: Fn(NodeClient, String) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<DataReply>, tonic::Status>>,
    {
        let deadline = Instant::now() + self.deadline;
        let mut last_error = String::from("no node answered");
        let mut round = 0u32;
        let mut refreshed_for_move = false;
        loop {
            if let Some(node) = preferred {
                self.pinned_holds(group, node)?;
            }
            for target in self.candidates(group, preferred) {
                let client = self.client(&target.1)?;
                match attempt(client, target.1.clone()).await {
                    Ok(reply) => {
                        let reply = reply.into_inner();
                        match reply.outcome {
                            Some(Outcome::Ok(bytes)) => {
                                if !any_replica {
                                    self.note_leader(group, reply.served_by);
                                }
                                let value = codec::decode(&bytes).map_err(|e| ClusterError::UnexpectedReply(e.to_string()))?;
                                return Ok(Served { value, group, node: reply.served_by });
                            }
                            Some(Outcome::NotLeader(nl)) => {
                                last_error = format!("group {group} is electing a leader");
                                if nl.leader_id != 0 && nl.leader_id != target.0 {
                                    self.note_leader(group, nl.leader_id);
                                    // Go straight to the hinted leader on the next attempt.
                                    if let Ok(Some(next)) = self.try_hint(group, nl.leader_id, &nl.leader_addr, &attempt).await {
                                        return Ok(next);
                                    }
                                }
                            }
                            Some(Outcome::Failure(f)) => match f.failure_kind() {
                                FailureKind::NotAppliedEverywhere => {
                                    return Err(ClusterError::NotAppliedEverywhere(f.message));
                                }
                                FailureKind::BadRequest => return Err(ClusterError::BadRequest(f.message)),
                                FailureKind::Storage => return Err(ClusterError::Storage(f.message)),
                                FailureKind::UnknownGroup => {
                                    // The replica moved away: forget it as the leader and
                                    // learn the map anew (once per call), so the next
                                    // round's candidates include the group's new members.
                                    {
                                        let mut view = self.view.write().expect("view lock");
                                        if view.leaders.get(&group) == Some(&target.0) {
                                            view.leaders.remove(&group);
                                        }
                                    }
                                    if !refreshed_for_move {
                                        refreshed_for_move = true;
                                        self.refresh().await;
                                    }
                                    last_error = f.message;
                                }
                                FailureKind::Unavailable | FailureKind::Unspecified => last_error = f.message,
                            },
                            None => last_error = "empty reply".into(),
                        }
                    }
                    Err(status) if wire_refusal(&status) => {
                        return Err(ClusterError::Unavailable(format!("node {} refused this router: {}", target.0, status.message())));
                    }
                    Err(status) => {
                        last_error = format!("node {} unreachable: {}", target.0, status.message());
                        let mut view = self.view.write().expect("view lock");
                        view.reachable.insert(target.0, false);
                        if view.leaders.get(&group) == Some(&target.0) {
                            view.leaders.remove(&group);
                        }
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::Unavailable(format!("group {group} did not answer within {:?}: {last_error}", self.deadline)));
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis((50 * round as u64).min(300))).await;
        }
    }

    /// One attempt at a hinted leader; `Ok(None)` when it did not serve.
    async fn try_hint<T, F, Fut>(&self, group: GroupId, leader: NodeId, addr: &str, attempt: &F) -> Result<Option<Served<T>>, ClusterError>
    where
        T: DeserializeOwned,
        F: Fn(NodeClient, String) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<DataReply>, tonic::Status>>,
    {
        let addr = {
            let view = self.view.read().expect("view lock");
            view.addrs.get(&leader).cloned().unwrap_or_else(|| addr.to_string())
        };
        let Ok(reply) = attempt(self.client(&addr)?, addr).await else { return Ok(None) };
        let reply = reply.into_inner();
        match reply.outcome {
            Some(Outcome::Ok(bytes)) => {
                let value = codec::decode(&bytes).map_err(|e| ClusterError::UnexpectedReply(e.to_string()))?;
                Ok(Some(Served { value, group, node: reply.served_by }))
            }
            Some(Outcome::Failure(f)) if f.failure_kind() == FailureKind::NotAppliedEverywhere => {
                Err(ClusterError::NotAppliedEverywhere(f.message))
            }
            Some(Outcome::Failure(f)) if f.failure_kind() == FailureKind::BadRequest => Err(ClusterError::BadRequest(f.message)),
            _ => Ok(None),
        }
    }
}

#[async_trait::async_trait]
impl ClusterClient for GrpcCluster {
    /// Asks every known node for its status: learns the map, leaders and liveness.
    async fn refresh(&self) {
        let mut targets: Vec<String> = self.seeds.iter().map(|(_, a)| a.clone()).collect();
        for addr in self.view.read().expect("view lock").addrs.values() {
            if !targets.contains(addr) {
                targets.push(addr.clone());
            }
        }
        let calls = targets.into_iter().map(|addr| async move {
            let result = async {
                let mut client = self.client(&addr)?;
                let mut req = tonic::Request::new(StatusRequest { from_node: 0, ..Default::default() });
                req.set_timeout(Duration::from_secs(1));
                client.status(req).await.map_err(|s| {
                    if wire_refusal(&s) {
                        ClusterError::Incompatible(s.message().to_string())
                    } else {
                        ClusterError::Unavailable(s.to_string())
                    }
                })
            }
            .await;
            (addr, result.map(|r| r.into_inner()))
        });
        let replies = futures::future::join_all(calls).await;

        let mut view = self.view.write().expect("view lock");
        // Highest term wins when nodes disagree about a group's leader.
        let mut best: HashMap<GroupId, (u64, NodeId)> = HashMap::new();
        let mut reachable = HashMap::new();
        let mut refused = None;
        for (addr, reply) in replies {
            let reply = reply.and_then(|status| {
                if status.wire_version < tessera_api::rpc::MIN_NODE_WIRE_VERSION {
                    return Err(ClusterError::Incompatible(format!(
                        "{}: node {} speaks wire version {} (an earlier release), this router needs {} or later; upgrade the nodes first",
                        tessera_api::rpc::WIRE_REFUSAL,
                        status.node_id,
                        status.wire_version,
                        tessera_api::rpc::MIN_NODE_WIRE_VERSION
                    )));
                }
                Ok(status)
            });
            match reply {
                Ok(status) => {
                    reachable.insert(status.node_id, true);
                    view.wal.insert(status.node_id, (status.wal_syncs, status.log_entries_synced));
                    view.identity.insert(status.node_id, (status.cluster_id, status.incarnation));
                    view.addrs.entry(status.node_id).or_insert(addr);
                    if !status.cluster_map.is_empty()
                        && let Ok(map) = codec::decode::<ClusterMap>(&status.cluster_map)
                        && view.map.as_ref().is_none_or(|known| map.epoch > known.epoch)
                    {
                        info!(groups = map.groups.len(), nodes = map.nodes.len(), epoch = map.epoch, "learned the cluster map");
                        view.ring = Some(build_ring(&map));
                        for n in &map.nodes {
                            view.addrs.insert(n.id, n.addr.clone());
                        }
                        view.map = Some(map);
                    }
                    for g in status.groups {
                        let term = view.terms.entry(g.group_id).or_default();
                        *term = (*term).max(g.term);
                        if g.leader_id != 0 && best.get(&g.group_id).is_none_or(|(t, _)| g.term > *t) {
                            best.insert(g.group_id, (g.term, g.leader_id));
                        }
                    }
                }
                Err(ClusterError::Incompatible(message)) => {
                    let refusal = format!("node at {addr} refuses this router: {message}");
                    if view.refused.is_none() {
                        tracing::error!("{refusal}");
                    }
                    refused = Some(refusal);
                }
                Err(e) => {
                    if let Some(id) = view.addrs.iter().find(|(_, a)| **a == addr).map(|(id, _)| *id) {
                        reachable.insert(id, false);
                    }
                    debug!(%addr, "status failed: {e}");
                }
            }
        }
        for (group, (_, leader)) in best {
            view.leaders.insert(group, leader);
        }
        view.reachable = reachable;
        view.refused = refused;
    }
    async fn node_statuses(&self) -> Result<Vec<(NodeInfo, Result<StatusReply, ClusterError>)>, ClusterError> {
        let map = self.map().ok_or_else(|| ClusterError::Unavailable("the cluster map is not known yet".into()))?;
        let calls = map.nodes.into_iter().map(|node| async move {
            let status = async {
                let mut client = self.client(&node.addr)?;
                let mut req = tonic::Request::new(StatusRequest { from_node: 0, ..Default::default() });
                req.set_timeout(Duration::from_secs(2));
                Ok(client.status(req).await.map_err(|s| ClusterError::Unavailable(s.message().to_string()))?.into_inner())
            }
            .await;
            (node, status)
        });
        Ok(futures::future::join_all(calls).await)
    }

    async fn release_leadership(&self, node: &NodeInfo, timeout_ms: u64) -> Result<Vec<GroupId>, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(tessera_api::rpc::ReleaseLeadershipRequest { timeout_ms });
        req.set_timeout(Duration::from_millis(timeout_ms) + ATTEMPT_TIMEOUT);
        let reply =
            client.release_leadership(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner().still_leading)
    }

    async fn restart_node(&self, node: &NodeInfo, binary: Option<&str>) -> Result<(), ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(RestartRequest { binary: binary.unwrap_or_default().to_string() });
        req.set_timeout(ATTEMPT_TIMEOUT);
        client.restart(req).await.map_err(|s| match s.code() {
            tonic::Code::InvalidArgument => ClusterError::BadRequest(s.message().to_string()),
            _ => ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())),
        })?;
        Ok(())
    }

    async fn purge_erased(&self, node: &NodeInfo, groups: &[GroupId], timeout: Duration) -> Result<Vec<GroupId>, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let body = tessera_api::rpc::PurgeErasedRequest { group_ids: groups.to_vec(), timeout_ms: timeout.as_millis() as u64 };
        let mut req = tonic::Request::new(body);
        req.set_timeout(timeout + Duration::from_secs(60));
        let reply = client.purge_erased(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner().purged)
    }

    async fn reseal(&self, node: &NodeInfo, count_only: bool, timeout: Duration) -> Result<tessera_api::rpc::ResealReply, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(tessera_api::rpc::ResealRequest { timeout_ms: timeout.as_millis() as u64, count_only });
        req.set_timeout(timeout + Duration::from_secs(60));
        let reply = client.reseal(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner())
    }

    async fn drain_node(&self, node: &NodeInfo) -> Result<Vec<GroupId>, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(DrainRequest {});
        req.set_timeout(ATTEMPT_TIMEOUT);
        let reply = client.drain(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner().led)
    }

    async fn remove_voter(&self, group: GroupId, node: NodeId) -> Result<u64, ClusterError> {
        let served = self
            .call(group, None, false, |mut client, _| async move {
                let mut req = tonic::Request::new(RemoveVoterRequest { group_id: group, node_id: node });
                req.set_timeout(ATTEMPT_TIMEOUT + Duration::from_secs(5));
                client.remove_voter(req).await
            })
            .await?;
        Ok(served.value)
    }

    async fn status_at(&self, node: &NodeInfo) -> Result<StatusReply, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(StatusRequest { from_node: 0, ..Default::default() });
        req.set_timeout(ATTEMPT_TIMEOUT);
        let reply = client
            .status(req)
            .await
            .map_err(|s| ClusterError::Unavailable(format!("node {} at {}: {}", node.id, node.addr, s.message())))?;
        Ok(reply.into_inner())
    }

    async fn retire_node(&self, node: &NodeInfo) -> Result<(), ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(RetireRequest {});
        req.set_timeout(ATTEMPT_TIMEOUT);
        client.retire(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(())
    }

    async fn transfer_leader(&self, group: GroupId, from: &NodeInfo, to: &NodeInfo) -> Result<Option<NodeId>, ClusterError> {
        let unavailable = |node: &NodeInfo, s: tonic::Status| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message()));
        let mut req =
            tonic::Request::new(HandOffRequest { group_id: group, timeout_ms: LEADER_TRANSFER_TIMEOUT.as_millis() as u64, to: to.id });
        req.set_timeout(ATTEMPT_TIMEOUT + Duration::from_secs(2));
        let was_leader = self.client(&from.addr)?.hand_off(req).await.map_err(|s| unavailable(from, s))?.into_inner().was_leader;
        if !was_leader {
            return Err(ClusterError::Unavailable(format!("node {} does not lead group {group}", from.id)));
        }
        let mut req = tonic::Request::new(CampaignRequest {
            group_id: group,
            previous_leader: from.id,
            timeout_ms: LEADER_TRANSFER_TIMEOUT.as_millis() as u64,
        });
        req.set_timeout(LEADER_TRANSFER_TIMEOUT + ATTEMPT_TIMEOUT);
        let leader = self.client(&to.addr)?.campaign(req).await.map_err(|s| unavailable(to, s))?.into_inner().leader;
        self.refresh().await;
        Ok((leader != 0).then_some(leader))
    }

    async fn shutdown_node(&self, node: &NodeInfo) -> Result<(), ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(ShutdownRequest {});
        req.set_timeout(ATTEMPT_TIMEOUT);
        client.shutdown(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(())
    }

    async fn node_storage(&self, node: &NodeInfo) -> Result<StorageReply, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(StorageRequest {});
        req.set_timeout(ATTEMPT_TIMEOUT + Duration::from_secs(5));
        let reply = client.storage(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner())
    }

    async fn node_digests(&self, node: &NodeInfo) -> Result<tessera_api::rpc::DigestReply, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(tessera_api::rpc::DigestRequest { group_ids: Vec::new() });
        // Each group's whole range is read: as long as a storage measurement.
        req.set_timeout(ATTEMPT_TIMEOUT + Duration::from_secs(5));
        let reply = client.digest(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner())
    }

    async fn export_group(&self, group: GroupId) -> Result<(NodeInfo, tessera_api::rpc::ExportGroupReply), ClusterError> {
        let deadline = Instant::now() + self.deadline;
        let mut last_error = String::from("no member answered");
        loop {
            for (id, addr) in self.candidates(group, None) {
                let mut client = self.client(&addr)?;
                let mut req = tonic::Request::new(tessera_api::rpc::ExportGroupRequest { group_id: group });
                req.set_timeout(EXPORT_TIMEOUT);
                match client.export_group(req).await {
                    Ok(reply) => {
                        let state = self.map().and_then(|m| m.node(id).map(|n| n.state)).unwrap_or(tessera_api::meta::NodeState::Active);
                        return Ok((NodeInfo::new(id, addr).in_state(state), reply.into_inner()));
                    }
                    Err(s) => last_error = format!("node {id}: {}", s.message()),
                }
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::Unavailable(format!("group {group} could not be exported: {last_error}")));
            }
            self.refresh().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    async fn fetch_export(
        &self,
        node: &NodeInfo,
        req: tessera_api::rpc::FetchExportRequest,
    ) -> Result<tessera_api::rpc::FetchExportReply, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(req);
        req.set_timeout(EXPORT_TIMEOUT);
        let reply = client.fetch_export(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner())
    }

    async fn node_config(&self, node: &NodeInfo) -> Result<String, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(tessera_api::rpc::ConfigRequest {});
        req.set_timeout(ATTEMPT_TIMEOUT);
        let reply = client.config(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner().json)
    }

    async fn node_logs(&self, node: &NodeInfo, lines: u32) -> Result<Vec<String>, ClusterError> {
        let mut client = self.client(&node.addr)?;
        let mut req = tonic::Request::new(LogsRequest { lines });
        req.set_timeout(ATTEMPT_TIMEOUT);
        let reply = client.logs(req).await.map_err(|s| ClusterError::Unavailable(format!("node {}: {}", node.id, s.message())))?;
        Ok(reply.into_inner().lines)
    }

    fn readiness(&self) -> Result<(), String> {
        let view = self.view.read().expect("view lock");
        if let Some(refused) = &view.refused {
            return Err(refused.clone());
        }
        view.map.as_ref().ok_or("the cluster map is not known yet")?;
        group_led(&view, META_GROUP)
    }
    fn every_group_led(&self) -> Result<(), String> {
        self.readiness()?;
        let view = self.view.read().expect("view lock");
        let map = view.map.as_ref().ok_or("the cluster map is not known yet")?;
        map.groups.iter().try_for_each(|g| group_led(&view, g.id))
    }
    fn map(&self) -> Option<ClusterMap> {
        self.view.read().expect("view lock").map.clone()
    }
    fn wal_stats(&self) -> HashMap<NodeId, (u64, u64)> {
        self.view.read().expect("view lock").wal.clone()
    }
    fn identities(&self) -> HashMap<NodeId, (u64, u64)> {
        self.view.read().expect("view lock").identity.clone()
    }
    fn wire_version(&self) -> u32 {
        self.wire_version
    }
    fn terms(&self) -> HashMap<GroupId, u64> {
        self.view.read().expect("view lock").terms.clone()
    }
    fn leaders_and_liveness(&self) -> (HashMap<GroupId, NodeId>, HashMap<NodeId, bool>) {
        let view = self.view.read().expect("view lock");
        (view.leaders.clone(), view.reachable.clone())
    }
    fn group_for(&self, key: &RoutingKey<'_>) -> Result<GroupId, ClusterError> {
        let view = self.view.read().expect("view lock");
        super::route(view.map.as_ref(), view.ring.as_ref(), key)
    }

    fn data_groups(&self) -> Result<Vec<GroupId>, ClusterError> {
        self.map().map(|m| m.data_groups()).ok_or_else(|| ClusterError::Unavailable("the cluster map is not known yet".into()))
    }
    async fn write(&self, group: GroupId, op: &Operation, consistency: Consistency) -> Result<Served<Response>, ClusterError> {
        // One id for every attempt: a retry after a lost answer cannot apply twice
        // (and with an Idempotency-Key, neither can the client's own retry).
        self.write_as(group, op, consistency, crate::services::idempotency::request_id(group)).await
    }
    async fn write_as(
        &self,
        group: GroupId,
        op: &Operation,
        consistency: Consistency,
        request_id: String,
    ) -> Result<Served<Response>, ClusterError> {
        let bytes = codec::encode(&*super::outgoing_op(group, op)).map_err(|e| ClusterError::BadRequest(e.to_string()))?;
        let write = WriteRequest { group_id: group, operation: bytes, consistency: consistency as i32, request_id };
        if op.batchable()
            && let Some(Some(answer)) =
                self.lanes.submit(group, write.clone(), write.operation.len(), |writes| self.write_together(group, writes)).await
        {
            return answer;
        }
        self.write_alone(write).await
    }
    async fn read(
        &self,
        group: GroupId,
        query: &Query,
        consistency: Consistency,
        replica: Option<NodeId>,
    ) -> Result<Served<QueryResult>, ClusterError> {
        let bytes = codec::encode(&*super::outgoing_query(group, query)).map_err(|e| ClusterError::BadRequest(e.to_string()))?;
        let any_replica = consistency == Consistency::One;
        self.call(group, replica.filter(|_| any_replica), any_replica, |client, addr| {
            let read = ReadRequest { group_id: group, query: bytes.clone(), consistency: consistency as i32 };
            self.data_call(client, addr, Call::Read(read))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use tessera_api::meta::{GroupInfo, ShardingStrategy};

    use super::*;

    /// A router that reached nodes 1 and 2 but not 3, and learned the leaders
    /// `leaders` (group → node) of a map with the meta group and groups 1–3.
    fn router_seeing(leaders: &[(GroupId, NodeId)]) -> Arc<GrpcCluster> {
        let cluster = GrpcCluster::new(vec![(Some(1), "127.0.0.1:1".into())], Duration::from_secs(1), None);
        {
            let mut view = cluster.view.write().unwrap();
            view.map = Some(ClusterMap {
                nodes: (1..=3).map(|id| NodeInfo::new(id, format!("127.0.0.1:{id}"))).collect(),
                strategy: ShardingStrategy::Hash,
                replication_factor: 3,
                groups: (0..=3).map(|g| GroupInfo::new(g, vec![1, 2, 3])).collect(),
                epoch: 1,
                ranges: vec![],
                moving: None,
                pending_splits: Default::default(),
                last_group_id: 3,
            });
            view.leaders = leaders.iter().copied().collect();
            view.reachable = [(1, true), (2, true), (3, false)].into_iter().collect();
        }
        cluster
    }

    #[test]
    fn a_group_without_quorum_leaves_the_router_ready_but_not_the_whole_cluster() {
        let cluster = router_seeing(&[(0, 1), (1, 2), (2, 3)]); // group 2's leader unreachable, group 3 leaderless
        assert_eq!(cluster.readiness(), Ok(()));
        let whole = cluster.every_group_led().unwrap_err();
        assert!(whole.contains("group 2"), "{whole}");
    }

    #[test]
    fn a_router_that_cannot_reach_the_meta_leader_is_not_ready() {
        let cluster = router_seeing(&[(0, 3), (1, 1), (2, 1), (3, 1)]);
        let reason = cluster.readiness().unwrap_err();
        assert!(reason.contains("group 0"), "{reason}");
        assert!(router_seeing(&[(1, 1)]).readiness().unwrap_err().contains("group 0 has no known leader"));
        assert_eq!(router_seeing(&[(0, 1), (1, 1), (2, 2), (3, 2)]).every_group_led(), Ok(()));
    }
}
