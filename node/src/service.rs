//! The node's tonic services: Raft traffic between peers, and the data service
//! the router calls. Handlers decode, call the [`Host`], and encode.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_api::call_streams::Numbered;
use tessera_api::codec;
use tessera_api::rpc::data_reply::Outcome;
use tessera_api::rpc::data_service_server::DataService;
use tessera_api::rpc::raft_service_server::RaftService;
use tessera_api::rpc::{
    AddLearnerRequest, AppliedReply, AppliedRequest, CampaignReply, CampaignRequest, ConfigReply, ConfigRequest, Consistency, DataCall,
    DataCallReply, DataReply, DigestReply, DigestRequest, DrainReply, DrainRequest, DropGroupReply, DropGroupRequest, ExportGroupReply,
    ExportGroupRequest, Failure, FailureKind, FetchExportReply, FetchExportRequest, GroupDigest, GroupStorage, HandOffReply,
    HandOffRequest, HostGroupReply, HostGroupRequest, LogsReply, LogsRequest, ModelBytes, NotLeader, PurgeErasedReply, PurgeErasedRequest,
    RaftMessage, ReadRequest, ReleaseLeadershipReply, ReleaseLeadershipRequest, RemoveVoterRequest, ReplaceVotersRequest, ResealReply,
    ResealRequest, RestartReply, RestartRequest, RetireReply, RetireRequest, ShutdownReply, ShutdownRequest, StatusReply, StatusRequest,
    StorageReply, StorageRequest, WriteManyReply, WriteManyRequest, WriteRequest, data_call,
};
use tonic::{Request, Response, Status};

/// How long a streamed call that names no limit may take (a unary call without
/// `grpc-timeout` has none; a stream's calls are bounded all the same).
const STREAMED_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The replies of a streaming call, as this node sends them.
type Replies<Reply> = futures::channel::mpsc::UnboundedReceiver<Result<Reply, Status>>;

use crate::host::{Host, HostError};

/// Serves both services over one [`Host`].
#[derive(Clone)]
pub struct NodeService {
    pub host: Arc<Host>,
    /// The effective configuration, secrets redacted (JSON), for `Config`.
    pub config_json: Arc<String>,
    /// Turns true when the node stops serving: every stream it serves ends (its peers' appends, the routers' calls).
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Status> {
    codec::decode(bytes).map_err(|e| Status::invalid_argument(format!("undecodable payload: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, Status> {
    codec::encode(value).map_err(|e| Status::internal(format!("encoding reply: {e}")))
}

impl NodeService {
    fn raft(&self, group: u64) -> Result<openraft::Raft<tessera_storage::TypeConfig>, Status> {
        self.host.group(group).map(|g| g.raft.clone()).map_err(|_| Status::not_found(format!("group {group} is not hosted here")))
    }

    /// A peer's Raft message, its clock taken in, and whether the sender's
    /// incarnation is the one recorded for it (`Err`: its data directory was
    /// replaced; see `incarnation`).
    fn received(&self, req: Request<RaftMessage>) -> Result<(RaftMessage, Result<(), crate::incarnation::DataReplaced>), Status> {
        self.received_message(req.into_inner())
    }

    /// [`NodeService::received`] for a message that came on a stream.
    fn received_message(&self, m: RaftMessage) -> Result<(RaftMessage, Result<(), crate::incarnation::DataReplaced>), Status> {
        if let Some(reason) = crate::network::other_cluster(self.host.pool.cluster_id, m.cluster_id) {
            return Err(Status::failed_precondition(reason));
        }
        crate::network::observe_peer_clock(&self.host.clock, m.from_node, m.sent_at_ms);
        let same = self.host.pool.incarnations.check(m.from_node, m.from_incarnation);
        Ok((m, same))
    }

    /// The reply to a peer's Raft message, carrying this node's clock.
    fn raft_reply<T: Serialize>(&self, group_id: u64, result: &T) -> Result<Response<RaftMessage>, Status> {
        self.raft_message(group_id, result).map(Response::new)
    }

    fn raft_message<T: Serialize>(&self, group_id: u64, result: &T) -> Result<RaftMessage, Status> {
        Ok(RaftMessage {
            group_id,
            payload: encode(result)?,
            sent_at_ms: self.host.clock.now_ms(),
            from_node: self.host.id,
            from_incarnation: self.host.pool.incarnations.own(),
            cluster_id: self.host.pool.cluster_id,
            ..Default::default()
        })
    }

    /// Serves a streaming call: each message is handled as its own task, as a
    /// unary call would be (one group's slow log write holds no other group's
    /// call), given up past the time its caller waits (as a unary call's
    /// `grpc-timeout`), and answered with its `call_id` as soon as it is done; a
    /// failed one, or an answer too large for one message, with `refuse`. The
    /// stream ends when the caller ends it and its calls are answered, or at
    /// once when this node stops serving (the server's graceful shutdown would
    /// wait for it): the calls under way are then dropped.
    fn serve_stream<Req, Reply, H, Fut>(
        &self,
        mut incoming: tonic::Streaming<Req>,
        handle: H,
        refuse: fn(&NodeService, Status) -> Reply,
    ) -> Replies<Reply>
    where
        Req: Numbered,
        Reply: Numbered,
        H: Fn(NodeService, Req) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Reply, Status>> + Send + 'static,
    {
        let (replies, stream) = futures::channel::mpsc::unbounded();
        let service = self.clone();
        let mut stopping = self.stopping.clone();
        tokio::spawn(async move {
            let mut calls = tokio::task::JoinSet::new();
            // The calls under way by number, to stop one whose caller went away.
            let mut under_way = std::collections::HashMap::new();
            let mut open = true;
            while open || !calls.is_empty() {
                tokio::select! {
                    m = incoming.message(), if open => match m {
                        Ok(Some(message)) if message.cancels() => {
                            if let Some(call) = under_way.remove(&message.call_id()) {
                                tokio::task::AbortHandle::abort(&call);
                            }
                        }
                        Ok(Some(message)) => {
                            let call_id = message.call_id();
                            let limit = match message.timeout_ms() {
                                0 => STREAMED_CALL_LIMIT,
                                ms => std::time::Duration::from_millis(u64::from(ms)),
                            };
                            let (service, replies) = (service.clone(), replies.clone());
                            let answered = handle(service.clone(), message);
                            let call = calls.spawn(async move {
                                let mut reply = match tokio::time::timeout(limit, answered).await {
                                    Ok(Ok(reply)) => reply,
                                    Ok(Err(status)) => refuse(&service, status),
                                    Err(_late) => refuse(&service, Status::deadline_exceeded("the call outlived the time its caller waits")),
                                };
                                if reply.encoded_len() > tessera_api::rpc::MAX_MESSAGE_BYTES {
                                    let why = format!("the answer is {} bytes, more than one message may hold ({})", reply.encoded_len(), tessera_api::rpc::MAX_MESSAGE_BYTES);
                                    reply = refuse(&service, Status::resource_exhausted(why));
                                }
                                reply.set_call_id(call_id);
                                let _ = replies.unbounded_send(Ok(reply));
                                call_id
                            });
                            under_way.insert(call_id, call);
                        }
                        Ok(None) | Err(_) => open = false,
                    },
                    Some(done) = calls.join_next(), if !calls.is_empty() => {
                        if let Ok(call_id) = done {
                            under_way.remove(&call_id);
                        }
                    }
                    _ = stopping.wait_for(|stopping| *stopping) => break,
                }
            }
            // Dropping the set aborts the calls still under way (a stop).
        });
        stream
    }

    /// A peer's AppendEntries (unary or streamed): checked, handed to the group's
    /// Raft, answered with this node's clock.
    async fn append(&self, m: RaftMessage) -> Result<RaftMessage, Status> {
        let (m, _) = self.received_message(m)?;
        self.host.leader_heard(m.group_id);
        let raft = self.raft(m.group_id)?;
        let append: openraft::raft::AppendEntriesRequest<tessera_storage::TypeConfig> = decode(&m.payload)?;
        // Appends with no entries are heartbeats and commit notices: fewer of them per
        // entry is less work per write (third_party/README.md).
        let carrying = if append.entries.is_empty() { "nothing" } else { "entries" };
        metrics::counter!("tessera_raft_appends_received_total", "carrying" => carrying).increment(1);
        let sent = append.prev_log_id.into_iter().chain(append.entries.iter().map(|e| e.log_id));
        if let Err(e) = self.host.store.check_leader_log(m.group_id, &append.vote, sent) {
            return Err(Status::failed_precondition(e.to_string()));
        }
        let received = std::time::Instant::now();
        let res = raft.append_entries(append).await;
        if carrying == "entries" {
            metrics::histogram!("tessera_raft_append_handled_seconds").record(received.elapsed().as_secs_f64());
        }
        self.raft_message(m.group_id, &res)
    }

    fn reply<T: Serialize>(&self, result: Result<T, HostError>) -> Result<Response<DataReply>, Status> {
        Ok(Response::new(self.data_reply(result)?))
    }

    fn data_reply<T: Serialize>(&self, result: Result<T, HostError>) -> Result<DataReply, Status> {
        let outcome = match result {
            Ok(value) => Outcome::Ok(encode(&value)?),
            Err(HostError::NotLeader { leader, .. }) => {
                let (leader_id, leader_addr) = leader.unwrap_or((0, String::new()));
                Outcome::NotLeader(NotLeader { leader_id, leader_addr })
            }
            Err(e) => Outcome::Failure(Failure::new(e.kind(), e.to_string())),
        };
        Ok(DataReply { served_by: self.host.id, outcome: Some(outcome) })
    }
}

fn bad_request(e: codec::CodecError) -> Outcome {
    Outcome::Failure(Failure::new(FailureKind::BadRequest, format!("undecodable request: {e}")))
}

#[tonic::async_trait]
impl RaftService for NodeService {
    async fn vote(&self, req: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        let (m, same) = self.received(req)?;
        // A candidate whose data directory was replaced does not campaign.
        if let Err(replaced) = same {
            return Err(Status::failed_precondition(replaced.to_string()));
        }
        if let Some(reason) = self.host.election_bar() {
            return Err(Status::failed_precondition(reason));
        }
        // A node removed from the cluster (it was down when it was told) must not
        // unseat anyone with its campaigns.
        if let Some(map) = self.host.recorded_map()
            && map.node(m.from_node).is_none()
            && m.from_node != 0
        {
            return Err(Status::failed_precondition(format!("node {} was removed from the cluster", m.from_node)));
        }
        if let Ok(g) = self.host.group(m.group_id)
            && !g.may_vote()
        {
            return Err(Status::unavailable(format!("node {} is catching up on group {} and does not vote yet", self.host.id, m.group_id)));
        }
        let vote: openraft::raft::VoteRequest<tessera_api::NodeId> = decode(&m.payload)?;
        let candidate_log = vote.last_log_id;
        let res = self.raft(m.group_id)?.vote(vote).await;
        if let Ok(resp) = &res {
            let refused_for_longer_log = !resp.vote_granted && resp.last_log_id > candidate_log;
            self.host.campaign_as_last_resort(m.group_id, refused_for_longer_log);
        }
        self.raft_reply(m.group_id, &res)
    }

    async fn append_entries(&self, req: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        self.append(req.into_inner()).await.map(Response::new)
    }

    type AppendStreamStream = Replies<RaftMessage>;

    /// A refused append is answered with `refused` (the status a unary call
    /// would have failed with); the stream goes on.
    async fn append_stream(&self, req: Request<tonic::Streaming<RaftMessage>>) -> Result<Response<Self::AppendStreamStream>, Status> {
        let refuse = |service: &NodeService, status: Status| RaftMessage {
            sent_at_ms: service.host.clock.now_ms(),
            from_node: service.host.id,
            from_incarnation: service.host.pool.incarnations.own(),
            cluster_id: service.host.pool.cluster_id,
            refused: format!("{:?}: {}", status.code(), status.message()),
            ..Default::default()
        };
        Ok(Response::new(self.serve_stream(req.into_inner(), |service, m: RaftMessage| async move { service.append(m).await }, refuse)))
    }

    async fn install_snapshot(&self, req: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        let (m, _) = self.received(req)?;
        let raft = self.raft(m.group_id)?;
        let chunk: openraft::raft::InstallSnapshotRequest<tessera_storage::TypeConfig> = decode(&m.payload)?;
        // openraft 0.9 sends no heartbeats to a follower while a snapshot is in
        // flight to it, and the chunks do not reach the follower's Raft core, so
        // a snapshot that takes longer than the election timeout made the
        // follower campaign, unseat the leader and restart the transfer, forever.
        // Each chunk therefore counts as a heartbeat of the leader that sends it:
        // an empty AppendEntries with its vote (no previous entry, no commit
        // index, so it changes nothing but the leader's lease on this node).
        let heartbeat = openraft::raft::AppendEntriesRequest::<tessera_storage::TypeConfig> {
            vote: chunk.vote,
            prev_log_id: None,
            leader_commit: None,
            entries: Vec::new(),
        };
        if chunk.vote.is_committed() {
            self.host.leader_heard(m.group_id);
            let _ = raft.append_entries(heartbeat).await;
        }
        let res = raft.install_snapshot(chunk).await;
        self.raft_reply(m.group_id, &res)
    }
}

#[tonic::async_trait]
impl DataService for NodeService {
    async fn write(&self, req: Request<WriteRequest>) -> Result<Response<DataReply>, Status> {
        let w = req.into_inner();
        let consistency = Consistency::try_from(w.consistency).unwrap_or(Consistency::Quorum);
        match codec::decode(&w.operation) {
            Ok(op) => {
                let request_id = Some(w.request_id).filter(|id| !id.is_empty());
                self.reply(self.host.write(w.group_id, op, request_id, consistency).await)
            }
            Err(e) => Ok(Response::new(DataReply { served_by: self.host.id, outcome: Some(bad_request(e)) })),
        }
    }

    async fn write_many(&self, req: Request<WriteManyRequest>) -> Result<Response<WriteManyReply>, Status> {
        let req = req.into_inner();
        let mut replies = vec![None; req.writes.len()];
        let mut writes = Vec::with_capacity(req.writes.len());
        for (i, w) in req.writes.into_iter().enumerate() {
            match codec::decode(&w.operation) {
                Ok(op) => {
                    let consistency = Consistency::try_from(w.consistency).unwrap_or(Consistency::Quorum);
                    writes.push((i, op, Some(w.request_id).filter(|id| !id.is_empty()), consistency));
                }
                Err(e) => replies[i] = Some(DataReply { served_by: self.host.id, outcome: Some(bad_request(e)) }),
            }
        }
        let (slots, writes): (Vec<usize>, Vec<_>) = writes.into_iter().map(|(i, op, id, c)| (i, (op, id, c))).unzip();
        for (i, result) in slots.into_iter().zip(self.host.write_many(req.group_id, writes).await) {
            replies[i] = Some(self.data_reply(result)?);
        }
        Ok(Response::new(WriteManyReply { replies: replies.into_iter().map(|r| r.unwrap_or_default()).collect() }))
    }

    type CallsStream = Replies<DataCallReply>;

    /// Each call is answered as `Write` or `Read` would answer it; a failed one
    /// with `refused` (the failed status), and the stream goes on.
    async fn calls(&self, req: Request<tonic::Streaming<DataCall>>) -> Result<Response<Self::CallsStream>, Status> {
        let refuse = |_: &NodeService, status: Status| DataCallReply {
            refused: format!("{:?}: {}", status.code(), status.message()),
            ..Default::default()
        };
        let answer = |service: NodeService, call: DataCall| async move {
            let answered = match call.call {
                Some(data_call::Call::Write(w)) => service.write(Request::new(w)).await?,
                Some(data_call::Call::Read(r)) => service.read(Request::new(r)).await?,
                None => return Err(Status::invalid_argument("a call names neither a write nor a read")),
            };
            Ok(DataCallReply { reply: Some(answered.into_inner()), ..Default::default() })
        };
        Ok(Response::new(self.serve_stream(req.into_inner(), answer, refuse)))
    }

    async fn read(&self, req: Request<ReadRequest>) -> Result<Response<DataReply>, Status> {
        let r = req.into_inner();
        let consistency = Consistency::try_from(r.consistency).unwrap_or(Consistency::Quorum);
        match codec::decode(&r.query) {
            Ok(q) => self.reply(self.host.read(r.group_id, q, consistency).await),
            Err(e) => Ok(Response::new(DataReply { served_by: self.host.id, outcome: Some(bad_request(e)) })),
        }
    }

    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
        let ask = req.into_inner();
        let map = self.host.recorded_map();
        // A node the map no longer lists was removed: what was recorded of its
        // data directory is forgotten, so that it can come back on a new one
        // (a removed node rejoining asks this before anything else).
        if ask.from_node != 0 && map.as_ref().is_some_and(|m| m.node(ask.from_node).is_none()) {
            self.host.pool.incarnations.forget(ask.from_node);
        }
        let cluster_map = match map {
            Some(map) => encode(&map)?,
            None => Vec::new(),
        };
        let wal = self.host.store.wal_stats();
        let disk = crate::host::filesystem_space(&self.host.data_dir);
        Ok(Response::new(StatusReply {
            node_id: self.host.id,
            groups: self.host.group_statuses(),
            cluster_map,
            wal_syncs: wal.syncs,
            log_entries_synced: wal.entries,
            incarnation: self.host.pool.incarnations.own(),
            cluster_id: self.host.pool.cluster_id,
            your_incarnation: self.host.pool.incarnations.recorded(ask.from_node),
            your_generation: self.host.pool.incarnations.note_generation(ask.from_node, ask.from_incarnation, ask.from_generation),
            version: env!("CARGO_PKG_VERSION").to_string(),
            wire_version: tessera_api::rpc::WIRE_VERSION,
            min_wire_version: tessera_api::rpc::MIN_WIRE_VERSION,
            uptime_ms: self.host.started.elapsed().as_millis() as u64,
            disk_bytes: self.host.disk_bytes(),
            memory_bytes: crate::host::resident_bytes(),
            disk_free_bytes: disk.0,
            disk_total_bytes: disk.1,
            memory_total_bytes: crate::host::machine_memory_bytes(),
            cert_not_after_ms: self.host.cert_not_after_ms.load(std::sync::atomic::Ordering::Relaxed),
            encrypted_at_rest: self.host.store.encrypted(),
            addr: self.host.addr.clone(),
            locality: self.host.locality.clone(),
        }))
    }

    async fn restart(&self, req: Request<RestartRequest>) -> Result<Response<RestartReply>, Status> {
        let binary = req.into_inner().binary;
        if binary.is_empty() {
            self.host.request_restart();
            return Ok(Response::new(RestartReply {}));
        }
        let path = std::path::PathBuf::from(&binary);
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {}
            Ok(_) => return Err(Status::invalid_argument(format!("{binary} on node {} is not an executable file", self.host.id))),
            Err(e) => return Err(Status::invalid_argument(format!("{binary} on node {}: {e}", self.host.id))),
        }
        self.host.request_update(path);
        Ok(Response::new(RestartReply {}))
    }

    async fn drain(&self, _req: Request<DrainRequest>) -> Result<Response<DrainReply>, Status> {
        let led = self.host.drain().map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(DrainReply { led }))
    }

    async fn remove_voter(&self, req: Request<RemoveVoterRequest>) -> Result<Response<DataReply>, Status> {
        let r = req.into_inner();
        self.reply(self.host.remove_voter(r.group_id, r.node_id).await)
    }

    async fn add_learner(&self, req: Request<AddLearnerRequest>) -> Result<Response<DataReply>, Status> {
        let r = req.into_inner();
        if let Err(e) = self.host.admit_control(r.meta_term, "adding a learner") {
            return self.reply::<u64>(Err(e));
        }
        self.reply(self.host.add_learner(r.group_id, r.node_id, r.node_addr).await)
    }

    async fn replace_voters(&self, req: Request<ReplaceVotersRequest>) -> Result<Response<DataReply>, Status> {
        let r = req.into_inner();
        if let Err(e) = self.host.admit_control(r.meta_term, "replacing voters") {
            return self.reply::<u64>(Err(e));
        }
        let expected = (!r.expected_voters.is_empty()).then(|| r.expected_voters.into_iter().collect());
        self.reply(self.host.replace_voters(r.group_id, r.voters.into_iter().collect(), expected).await)
    }

    async fn host_group(&self, req: Request<HostGroupRequest>) -> Result<Response<HostGroupReply>, Status> {
        let r = req.into_inner();
        self.host.admit_control(r.meta_term, "hosting a replica").map_err(|e| Status::unavailable(e.to_string()))?;
        let created = self.host.host_group(r.group_id).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(HostGroupReply { created }))
    }

    async fn drop_group(&self, req: Request<DropGroupRequest>) -> Result<Response<DropGroupReply>, Status> {
        let r = req.into_inner();
        self.host.admit_control(r.meta_term, "dropping a replica").map_err(|e| Status::unavailable(e.to_string()))?;
        let dropped = self.host.drop_group(r.group_id).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(DropGroupReply { dropped }))
    }

    async fn purge_erased(&self, req: Request<PurgeErasedRequest>) -> Result<Response<PurgeErasedReply>, Status> {
        let started = std::time::Instant::now();
        let req = req.into_inner();
        let timeout = std::time::Duration::from_millis(req.timeout_ms.clamp(1_000, 300_000));
        let purged = self.host.purge_erased(&req.group_ids, timeout).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(PurgeErasedReply { purged, took_ms: started.elapsed().as_millis() as u64 }))
    }

    async fn reseal(&self, req: Request<ResealRequest>) -> Result<Response<ResealReply>, Status> {
        let started = std::time::Instant::now();
        let (resealed, needing_previous_keys) =
            self.host.reseal(req.into_inner().count_only).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(ResealReply {
            resealed,
            needing_previous_keys,
            previous_keys: self.host.store.previous_keys(),
            encrypted: self.host.store.encrypted(),
            took_ms: started.elapsed().as_millis() as u64,
        }))
    }

    async fn release_leadership(&self, req: Request<ReleaseLeadershipRequest>) -> Result<Response<ReleaseLeadershipReply>, Status> {
        let started = std::time::Instant::now();
        let timeout = std::time::Duration::from_millis(req.into_inner().timeout_ms.clamp(100, 120_000));
        let (led, still_leading) = self.host.release_leadership(timeout).await;
        Ok(Response::new(ReleaseLeadershipReply { led, still_leading, took_ms: started.elapsed().as_millis() as u64 }))
    }

    async fn hand_off(&self, req: Request<HandOffRequest>) -> Result<Response<HandOffReply>, Status> {
        let req = req.into_inner();
        let timeout = std::time::Duration::from_millis(req.timeout_ms.clamp(100, 60_000));
        let was_leader = self.host.hand_off(req.group_id, req.to, timeout).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(HandOffReply { was_leader }))
    }

    async fn campaign(&self, req: Request<CampaignRequest>) -> Result<Response<CampaignReply>, Status> {
        let started = std::time::Instant::now();
        let req = req.into_inner();
        let timeout = std::time::Duration::from_millis(req.timeout_ms.clamp(100, 60_000));
        let previous = (req.previous_leader != 0).then_some(req.previous_leader);
        let leader = self.host.campaign(req.group_id, previous, timeout).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(CampaignReply { leader: leader.unwrap_or(0), took_ms: started.elapsed().as_millis() as u64 }))
    }

    async fn retire(&self, _req: Request<RetireRequest>) -> Result<Response<RetireReply>, Status> {
        self.host.retire().map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(RetireReply {}))
    }

    async fn storage(&self, _req: Request<StorageRequest>) -> Result<Response<StorageReply>, Status> {
        let host = self.host.clone();
        let usage = tokio::task::spawn_blocking(move || {
            let mut groups: Vec<u64> = host.hosted().into_iter().map(|(g, _)| g).collect();
            groups.sort_unstable();
            host.store.usage(&groups)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::internal(format!("measuring storage: {e}")))?;
        let groups = usage
            .into_iter()
            .map(|u| GroupStorage {
                group_id: u.group,
                models: u.models.into_iter().map(|(model, bytes)| ModelBytes { model: model.to_string(), bytes }).collect(),
                log_bytes: u.log_bytes,
                snapshot_bytes: u.snapshot_bytes,
            })
            .collect();
        Ok(Response::new(StorageReply { groups, disk_bytes: self.host.disk_bytes() }))
    }

    async fn digest(&self, req: Request<DigestRequest>) -> Result<Response<DigestReply>, Status> {
        let wanted = req.into_inner().group_ids;
        let host = self.host.clone();
        let groups = tokio::task::spawn_blocking(move || {
            host.hosted()
                .into_iter()
                .map(|(g, _)| g)
                .filter(|g| wanted.is_empty() || wanted.contains(g))
                .map(|g| match host.store.digest(g) {
                    Ok(d) => GroupDigest {
                        group_id: g,
                        applied_index: d.applied_index,
                        records: d.records,
                        digest: d.digest,
                        error: String::new(),
                        voters: d.voters,
                        learners: d.learners,
                    },
                    Err(e) => GroupDigest { group_id: g, error: format!("digesting group {g}: {e}"), ..Default::default() },
                })
                .collect()
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(DigestReply { groups }))
    }

    async fn config(&self, _req: Request<ConfigRequest>) -> Result<Response<ConfigReply>, Status> {
        Ok(Response::new(ConfigReply { json: self.config_json.as_str().to_string() }))
    }

    async fn export_group(&self, req: Request<ExportGroupRequest>) -> Result<Response<ExportGroupReply>, Status> {
        let group = req.into_inner().group_id;
        match self.host.export_group(group).await {
            Ok((export_id, info)) => {
                Ok(Response::new(ExportGroupReply { export_id, applied_index: info.applied_index, pairs: info.pairs, bytes: info.bytes }))
            }
            Err(HostError::NotLeader { leader, .. }) => Err(Status::failed_precondition(format!(
                "not the leader of group {group}{}",
                leader.map(|(id, _)| format!("; node {id} leads it")).unwrap_or_default()
            ))),
            Err(e) => Err(Status::unavailable(e.to_string())),
        }
    }

    async fn fetch_export(&self, req: Request<FetchExportRequest>) -> Result<Response<FetchExportReply>, Status> {
        let r = req.into_inner();
        let max_bytes = (r.max_bytes as usize).clamp(64 * 1024, 2 * 1024 * 1024);
        let page = self
            .host
            .read_export(r.group_id, r.export_id, r.offset, r.frame, max_bytes)
            .await
            .map_err(|e| Status::not_found(e.to_string()))?;
        Ok(Response::new(FetchExportReply { pairs: page.pairs, next_offset: page.next_offset, next_frame: page.next_frame, end: page.end }))
    }

    async fn shutdown(&self, _req: Request<ShutdownRequest>) -> Result<Response<ShutdownReply>, Status> {
        self.host.request_shutdown();
        Ok(Response::new(ShutdownReply {}))
    }

    async fn logs(&self, req: Request<LogsRequest>) -> Result<Response<LogsReply>, Status> {
        let lines = req.into_inner().lines.clamp(1, crate::log_ring::CAPACITY as u32) as usize;
        Ok(Response::new(LogsReply { lines: crate::log_ring::LogRing::global().tail(lines) }))
    }

    async fn applied(&self, req: Request<AppliedRequest>) -> Result<Response<AppliedReply>, Status> {
        let group = req.into_inner().group_id;
        Ok(Response::new(match self.host.applied_index(group) {
            Ok(last_applied) => AppliedReply { last_applied, hosted: true },
            Err(_) => AppliedReply { last_applied: 0, hosted: false },
        }))
    }
}
