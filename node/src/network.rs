//! openraft networking over tonic: two lazily connected channels per peer (control
//! and bulk), shared by every group; each call names its group.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_api::clock::HybridClock;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_api::rpc::raft_service_client::RaftServiceClient;
use tessera_api::rpc::{MAX_MESSAGE_BYTES, RaftMessage};
use tessera_api::{GroupId, NodeId, codec};

use tessera_api::call_streams::{CallStreams, Requests, Sent};
use tessera_storage::TypeConfig;
use tonic::transport::Channel;

/// Which of the two connections to a peer a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Votes, heartbeats and small data calls: never queued behind bulk bytes.
    Control,
    /// AppendEntries that carry entries, and snapshots.
    Bulk,
}

/// Two tonic channels per peer (one per [`Lane`]), created on first use and
/// reconnecting by themselves.
#[derive(Default)]
pub struct PeerPool {
    channels: Mutex<HashMap<(NodeId, Lane), (String, Channel)>>,
    /// Peer id → address dialed instead of the one passed in (`cluster.dial_overrides`).
    dial_overrides: HashMap<NodeId, String>,
    /// Mutual TLS towards peers (`tls` section), or plaintext; replaced when
    /// the certificates rotate ([`PeerPool::replace_tls`]).
    tls: std::sync::RwLock<Option<tessera_api::tls::ClusterTls>>,
    /// Sent with every Raft message and advanced by every reply.
    clock: Arc<HybridClock>,
    /// This node's id, sent with every Raft message.
    node_id: NodeId,
    /// This node's incarnation (sent) and its peers' (checked on replies).
    pub incarnations: Arc<crate::incarnation::Incarnations>,
    /// The cluster this node belongs to (sent; replies of another are refused).
    pub cluster_id: u64,
    /// The leaderships this node is giving up: their snapshot transfers pause.
    pub leaving: LeavingGroups,
    /// AppendEntries go on one stream per peer and lane.
    appends: CallStreams<(NodeId, Lane), RaftMessage, RaftMessage>,
}

/// The groups whose leadership this node is handing off, or all of them once
/// it is drained. A leader giving up its leadership sends no heartbeats; it
/// must send no snapshot chunks either: each chunk renews the follower's lease
/// on it, so its successor could not win a vote until the transfer ended, while
/// it refuses every call (writes would stall for the whole transfer).
#[derive(Default)]
pub struct LeavingGroups {
    groups: Mutex<std::collections::HashSet<GroupId>>,
    all: std::sync::atomic::AtomicBool,
}

impl LeavingGroups {
    pub fn insert(&self, group: GroupId) {
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).insert(group);
    }

    pub fn remove(&self, group: GroupId) {
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).remove(&group);
    }

    /// Every leadership goes (a drain): for good.
    pub fn leave_all(&self) {
        self.all.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether `group`'s leadership is being given up (a hand-off of it).
    pub fn handing_off(&self, group: GroupId) -> bool {
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).contains(&group)
    }

    /// Whether `group`'s leadership is being given up, by a hand-off or a drain.
    pub fn contains(&self, group: GroupId) -> bool {
        self.all.load(std::sync::atomic::Ordering::SeqCst) || self.handing_off(group)
    }
}

impl PeerPool {
    /// A pool that dials the peers in `overrides` at the given addresses.
    pub fn with_dial_overrides(overrides: HashMap<NodeId, String>) -> Self {
        PeerPool { dial_overrides: overrides, ..PeerPool::default() }
    }

    /// The same pool carrying this node's id and `clock` in its Raft messages.
    pub fn with_clock(self, node_id: NodeId, clock: Arc<HybridClock>) -> Self {
        PeerPool { clock, node_id, ..self }
    }

    /// The same pool sending this node's incarnation and checking its peers'.
    pub fn with_incarnations(self, incarnations: Arc<crate::incarnation::Incarnations>) -> Self {
        PeerPool { incarnations, ..self }
    }

    /// The same pool sending `cluster_id` and refusing replies of another cluster.
    pub fn with_cluster_id(self, cluster_id: u64) -> Self {
        PeerPool { cluster_id, ..self }
    }

    /// The same pool dialing its peers over mutual TLS when `tls` is given.
    pub fn with_tls(self, tls: Option<tessera_api::tls::ClusterTls>) -> Self {
        PeerPool { tls: std::sync::RwLock::new(tls), ..self }
    }

    /// Dials with `tls` from now on: every cached channel is dropped, so the
    /// next call to a peer connects with the new certificates (calls under way
    /// finish on the channels they hold).
    pub fn replace_tls(&self, tls: Option<tessera_api::tls::ClusterTls>) {
        *self.tls.write().unwrap_or_else(|e| e.into_inner()) = tls;
        self.channels.lock().expect("peer pool lock").clear();
        self.appends.close_all();
    }

    /// The shared channel of `lane` to `node` at `addr` (or at its dial override).
    pub fn channel(&self, node: NodeId, addr: &str, lane: Lane) -> Result<Channel, tonic::transport::Error> {
        let addr = self.dial_overrides.get(&node).map_or(addr, String::as_str);
        let mut channels = self.channels.lock().expect("peer pool lock");
        if let Some((known, ch)) = channels.get(&(node, lane))
            && known == addr
        {
            return Ok(ch.clone());
        }
        let tls = self.tls.read().unwrap_or_else(|e| e.into_inner()).clone();
        let ch = tessera_api::tls::node_endpoint(addr, tls.as_ref())?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5))
            .connect_lazy();
        channels.insert((node, lane), (addr.to_string(), ch.clone()));
        Ok(ch)
    }

    /// A Raft client to a peer on `lane`.
    pub fn raft_client(&self, node: NodeId, addr: &str, lane: Lane) -> Result<RaftServiceClient<Channel>, tonic::transport::Error> {
        Ok(RaftServiceClient::new(self.channel(node, addr, lane)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// A data-service client to a peer.
    pub fn data_client(&self, node: NodeId, addr: &str) -> Result<DataServiceClient<Channel>, tonic::transport::Error> {
        Ok(DataServiceClient::new(self.channel(node, addr, Lane::Control)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }
}

/// Why a message of cluster `theirs` is refused by a node of cluster `ours`
/// (`None`: the same cluster, or a sender that names none).
pub fn other_cluster(ours: u64, theirs: u64) -> Option<String> {
    (ours != 0 && theirs != 0 && ours != theirs)
        .then(|| format!("the message is from cluster {theirs:016x}; this node belongs to cluster {ours:016x}"))
}

/// Takes a peer's time into the node's clock; a time too far ahead of the
/// majority's is ignored and logged (at most every 10 s).
pub fn observe_peer_clock(clock: &HybridClock, peer: NodeId, sent_at_ms: i64) {
    static LAST_WARNING_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    if let Some(ignored) = clock.observe(peer, sent_at_ms) {
        let now = tessera_api::command::now_ms();
        let last = LAST_WARNING_MS.load(std::sync::atomic::Ordering::Relaxed);
        if now - last >= 10_000
            && LAST_WARNING_MS
                .compare_exchange(last, now, std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                peer = ignored.peer,
                ahead_ms = ignored.ahead_ms,
                correction_ms = clock.correction_ms(),
                "a peer's clock is ahead of the majority's by more than cluster.max_clock_offset_ms; its time is ignored"
            );
        }
    }
}

/// Creates per-target Raft clients for one group.
pub struct GroupNetwork {
    pub group: GroupId,
    pub pool: Arc<PeerPool>,
}

/// The Raft clients of one group to one peer, one per lane.
pub struct PeerLink {
    group: GroupId,
    pool: Arc<PeerPool>,
    target: NodeId,
    addr: String,
    control: Option<RaftServiceClient<Channel>>,
    bulk: Option<RaftServiceClient<Channel>>,
    clock: Arc<HybridClock>,
    node_id: NodeId,
    incarnations: Arc<crate::incarnation::Incarnations>,
    cluster_id: u64,
}

impl RaftNetworkFactory<TypeConfig> for GroupNetwork {
    type Network = PeerLink;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerLink {
        let control = self.pool.raft_client(target, &node.addr, Lane::Control).ok();
        let bulk = self.pool.raft_client(target, &node.addr, Lane::Bulk).ok();
        PeerLink {
            group: self.group,
            pool: self.pool.clone(),
            target,
            addr: node.addr.clone(),
            control,
            bulk,
            clock: self.pool.clock.clone(),
            node_id: self.pool.node_id,
            incarnations: self.pool.incarnations.clone(),
            cluster_id: self.pool.cluster_id,
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerLink {
    async fn call<Req, Resp, E>(&mut self, kind: Kind, lane: Lane, rpc: Req, option: &RPCOption) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload = codec::encode(&rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let message = RaftMessage {
            group_id: self.group,
            payload,
            sent_at_ms: self.clock.now_ms(),
            from_node: self.node_id,
            from_incarnation: self.incarnations.own(),
            cluster_id: self.cluster_id,
            ..Default::default()
        };
        let sent = std::time::Instant::now();
        let carries_entries = matches!(kind, Kind::Append) && matches!(lane, Lane::Bulk);
        let answer = match kind {
            Kind::Append => {
                let (pool, target, addr) = (self.pool.clone(), self.target, self.addr.clone());
                let open = |requests: Requests<RaftMessage>| {
                    let mut client = pool.raft_client(target, &addr, lane).ok()?;
                    Some(async move { client.append_stream(requests).await })
                };
                match self.pool.appends.call((self.target, lane), &self.addr, open, message, option.hard_ttl()).await {
                    Sent::Answered(reply) => reply,
                    Sent::Unary(message) => self.unary(kind, lane, message, option).await,
                }
            }
            Kind::Vote | Kind::Snapshot => self.unary(kind, lane, message, option).await,
        };
        let reply = answer.map_err(|status| RPCError::Unreachable(Unreachable::new(&status)))?;
        if carries_entries {
            metrics::histogram!("tessera_raft_peer_append_seconds").record(sent.elapsed().as_secs_f64());
        }
        if let Some(reason) = other_cluster(self.cluster_id, reply.cluster_id) {
            return Err(RPCError::Unreachable(Unreachable::new(&std::io::Error::other(reason))));
        }
        observe_peer_clock(&self.clock, self.target, reply.sent_at_ms);
        // A vote from a peer whose data directory was replaced is not counted:
        // it has forgotten the entries it acknowledged (see `incarnation`).
        if let Err(replaced) = self.incarnations.check(self.target, reply.from_incarnation)
            && matches!(kind, Kind::Vote)
        {
            return Err(RPCError::Unreachable(Unreachable::new(&replaced)));
        }
        let result: Result<Resp, RaftError<NodeId, E>> =
            codec::decode(&reply.payload).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl PeerLink {
    async fn unary(&mut self, kind: Kind, lane: Lane, message: RaftMessage, option: &RPCOption) -> Result<RaftMessage, tonic::Status> {
        let client = match lane {
            Lane::Control => self.control.as_mut(),
            Lane::Bulk => self.bulk.as_mut(),
        };
        let client = client.ok_or_else(|| tonic::Status::unavailable("bad peer address"))?;
        let mut req = tonic::Request::new(message);
        req.set_timeout(option.hard_ttl());
        let reply = match kind {
            Kind::Vote => client.vote(req).await,
            Kind::Append => client.append_entries(req).await,
            Kind::Snapshot => client.install_snapshot(req).await,
        };
        reply.map(tonic::Response::into_inner)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Vote,
    Append,
    Snapshot,
}

impl RaftNetwork<TypeConfig> for PeerLink {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        let lane = if rpc.entries.is_empty() { Lane::Control } else { Lane::Bulk };
        self.call(Kind::Append, lane, rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        if self.pool.leaving.contains(self.group) {
            let why = std::io::Error::other("this node is giving up its leadership: snapshot transfers pause");
            return Err(RPCError::Unreachable(Unreachable::new(&why)));
        }
        self.call(Kind::Snapshot, Lane::Bulk, rpc, &option).await
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call(Kind::Vote, Lane::Control, rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use super::other_cluster;

    #[test]
    fn raft_traffic_of_another_cluster_is_refused() {
        assert_eq!(other_cluster(7, 7), None);
        // Senders that name no cluster (older binaries) pass.
        assert_eq!(other_cluster(7, 0), None);
        let reason = other_cluster(7, 9).unwrap();
        assert!(reason.contains("cluster 0000000000000009") && reason.contains("0000000000000007"), "{reason}");
    }
}
