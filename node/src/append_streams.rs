//! AppendEntries to peers over long-lived `AppendStream` calls: one HTTP/2 stream
//! per peer and lane carries every group's appends, each matched to its reply by
//! a `call_id`. A unary call costs a stream of its own (request and response
//! headers, trailers, a server task and a trace span); on a stream an append is
//! one message each way, and appends of several groups ready together leave in
//! one write.
//!
//! A peer that does not serve `AppendStream` (a binary of an earlier release,
//! during a rolling update) is called with unary `AppendEntries` for a minute,
//! then asked again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::{mpsc, oneshot};
use tessera_api::NodeId;
use tessera_api::rpc::RaftMessage;
use tessera_api::rpc::raft_service_client::RaftServiceClient;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::network::Lane;

/// How long a peer that answered `Unimplemented` is called with unary calls.
const UNARY_FOR: Duration = Duration::from_secs(60);

/// The open streams of a node to its peers.
#[derive(Default)]
pub struct AppendStreams {
    open: Mutex<HashMap<(NodeId, Lane), Stream>>,
    next_call: AtomicU64,
    /// Peers that do not serve `AppendStream`, and since when.
    unary_only: Arc<Mutex<HashMap<NodeId, Instant>>>,
}

/// One `AppendStream` call in progress.
struct Stream {
    /// The address the stream was opened to (a changed address opens another).
    addr: String,
    outgoing: mpsc::UnboundedSender<RaftMessage>,
    waiting: Arc<Waiting>,
}

/// The calls sent on a stream and not yet answered; `closed` once the stream
/// ended (under the same lock: a call is either answered or told it ended).
#[derive(Default)]
struct Waiting {
    calls: Mutex<HashMap<u64, oneshot::Sender<RaftMessage>>>,
    closed: AtomicBool,
}

/// What became of an append sent on a stream.
pub enum Sent {
    /// The peer's reply (or why the call failed, as a unary call would have).
    Answered(Result<RaftMessage, Status>),
    /// The peer does not serve streams: call it with unary `AppendEntries`.
    Unary(RaftMessage),
}

impl AppendStreams {
    /// Sends `message` to `node` on `lane`'s stream (opening one when none is
    /// open) and waits up to `ttl` for its reply.
    pub async fn call(
        &self,
        node: NodeId,
        addr: &str,
        lane: Lane,
        client: impl FnOnce() -> Option<RaftServiceClient<Channel>>,
        mut message: RaftMessage,
        ttl: Duration,
    ) -> Sent {
        if self.unary_only(node) {
            return Sent::Unary(message);
        }
        let call_id = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        message.call_id = call_id;
        let (answer, answered) = oneshot::channel();
        let waiting = {
            let mut open = self.open.lock().expect("append streams lock");
            let reusable = open.get(&(node, lane)).is_some_and(|s| s.addr == addr && !s.waiting.closed.load(Ordering::Acquire));
            if !reusable {
                let Some(client) = client() else {
                    return Sent::Answered(Err(Status::unavailable("bad peer address")));
                };
                open.insert((node, lane), self.open_stream(node, addr, client));
            }
            let stream = &open[&(node, lane)];
            let mut calls = stream.waiting.calls.lock().expect("append stream calls lock");
            if stream.waiting.closed.load(Ordering::Acquire) || stream.outgoing.unbounded_send(message).is_err() {
                return Sent::Answered(Err(Status::unavailable("the append stream to the peer closed")));
            }
            calls.insert(call_id, answer);
            stream.waiting.clone()
        };
        match tokio::time::timeout(ttl, answered).await {
            Ok(Ok(reply)) if reply.refused.is_empty() => Sent::Answered(Ok(reply)),
            Ok(Ok(reply)) => Sent::Answered(Err(Status::unavailable(reply.refused))),
            // A peer found not to serve streams gets its next append (openraft
            // retries) as a unary call.
            Ok(Err(_ended)) => Sent::Answered(Err(Status::unavailable("the append stream to the peer ended before the reply"))),
            Err(_late) => {
                waiting.calls.lock().expect("append stream calls lock").remove(&call_id);
                Sent::Answered(Err(Status::deadline_exceeded("no reply to the append within its timeout")))
            }
        }
    }

    /// Ends every stream (certificates rotated): calls under way are still
    /// answered; the next call opens a stream on the new channels.
    pub fn close_all(&self) {
        self.open.lock().expect("append streams lock").clear();
    }

    fn unary_only(&self, node: NodeId) -> bool {
        let mut unary = self.unary_only.lock().expect("unary peers lock");
        match unary.get(&node) {
            Some(since) if since.elapsed() < UNARY_FOR => true,
            Some(_) => {
                unary.remove(&node);
                false
            }
            None => false,
        }
    }

    fn open_stream(&self, node: NodeId, addr: &str, mut client: RaftServiceClient<Channel>) -> Stream {
        let (outgoing, requests) = mpsc::unbounded();
        let waiting = Arc::new(Waiting::default());
        let (reader, unary_only) = (waiting.clone(), self.unary_only.clone());
        tokio::spawn(async move {
            match client.append_stream(requests).await {
                Ok(replies) => {
                    let mut replies = replies.into_inner();
                    while let Ok(Some(reply)) = replies.message().await {
                        let answer = reader.calls.lock().expect("append stream calls lock").remove(&reply.call_id);
                        if let Some(answer) = answer {
                            let _ = answer.send(reply);
                        }
                    }
                }
                Err(status) if status.code() == Code::Unimplemented => {
                    tracing::info!(peer = node, "the peer does not serve AppendStream: appends go as unary calls");
                    unary_only.lock().expect("unary peers lock").insert(node, Instant::now());
                }
                Err(_) => {}
            }
            // Every call still waiting learns the stream ended (its answer is dropped).
            let mut calls = reader.calls.lock().expect("append stream calls lock");
            reader.closed.store(true, Ordering::Release);
            calls.clear();
        });
        Stream { addr: addr.to_string(), outgoing, waiting }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tessera_api::rpc::RaftMessage;
    use tessera_api::rpc::raft_service_client::RaftServiceClient;
    use tessera_api::rpc::raft_service_server::{RaftService, RaftServiceServer};
    use tonic::{Request, Response, Status};

    use super::{AppendStreams, Sent};
    use crate::network::Lane;

    /// A peer that echoes each append's group and payload: unary calls always,
    /// streams only when `streams` (an older binary does not serve them), and on a
    /// stream it answers each pair of appends in reverse order.
    #[derive(Clone)]
    struct Peer {
        streams: bool,
    }

    fn echo(m: &RaftMessage) -> RaftMessage {
        RaftMessage { group_id: m.group_id, payload: m.payload.clone(), call_id: m.call_id, ..Default::default() }
    }

    #[tonic::async_trait]
    impl RaftService for Peer {
        async fn vote(&self, _: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
            Err(Status::unimplemented("vote"))
        }
        async fn install_snapshot(&self, _: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
            Err(Status::unimplemented("install_snapshot"))
        }
        async fn append_entries(&self, req: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
            Ok(Response::new(echo(req.get_ref())))
        }
        type AppendStreamStream = futures::channel::mpsc::UnboundedReceiver<Result<RaftMessage, Status>>;
        async fn append_stream(&self, req: Request<tonic::Streaming<RaftMessage>>) -> Result<Response<Self::AppendStreamStream>, Status> {
            if !self.streams {
                return Err(Status::unimplemented("AppendStream"));
            }
            let mut incoming = req.into_inner();
            let (replies, stream) = futures::channel::mpsc::unbounded();
            tokio::spawn(async move {
                let mut held: Option<RaftMessage> = None;
                while let Ok(Some(m)) = incoming.message().await {
                    match held.take() {
                        None => held = Some(m),
                        Some(first) => {
                            let _ = replies.unbounded_send(Ok(echo(&m)));
                            let _ = replies.unbounded_send(Ok(echo(&first)));
                        }
                    }
                }
            });
            Ok(Response::new(stream))
        }
    }

    async fn serve(peer: Peer) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address").to_string();
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(RaftServiceServer::new(peer))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
        });
        (addr, server)
    }

    fn client(addr: &str) -> Option<RaftServiceClient<tonic::transport::Channel>> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).ok()?.connect_lazy();
        Some(RaftServiceClient::new(channel))
    }

    fn append(group: u64) -> RaftMessage {
        RaftMessage { group_id: group, payload: vec![group as u8; 3], ..Default::default() }
    }

    #[tokio::test]
    async fn appends_of_several_groups_share_a_stream_and_each_gets_its_own_reply() {
        let (addr, server) = serve(Peer { streams: true }).await;
        let streams = AppendStreams::default();
        let ttl = Duration::from_secs(10);
        // The peer answers the second append before the first: each caller still
        // gets the reply to its own append.
        let (a, b) = tokio::join!(
            streams.call(2, &addr, Lane::Bulk, || client(&addr), append(7), ttl),
            streams.call(2, &addr, Lane::Bulk, || client(&addr), append(9), ttl),
        );
        for (sent, group) in [(a, 7u64), (b, 9)] {
            match sent {
                Sent::Answered(Ok(reply)) => assert_eq!((reply.group_id, reply.payload), (group, vec![group as u8; 3])),
                Sent::Answered(Err(status)) => panic!("append of group {group} failed: {status}"),
                Sent::Unary(_) => panic!("a peer that serves streams was called with a unary call"),
            }
        }
        assert_eq!(streams.open.lock().unwrap().len(), 1, "both appends went on one stream");
        // An append the peer never answers (it holds an odd one) fails at its timeout.
        let late = streams.call(2, &addr, Lane::Bulk, || client(&addr), append(11), Duration::from_millis(200)).await;
        assert!(matches!(late, Sent::Answered(Err(ref s)) if s.code() == tonic::Code::DeadlineExceeded));
        server.abort();
    }

    #[tokio::test]
    async fn a_peer_without_streams_is_called_with_unary_appends() {
        let (addr, server) = serve(Peer { streams: false }).await;
        let streams = AppendStreams::default();
        let ttl = Duration::from_secs(10);
        // The first append learns the peer serves no streams and fails (openraft
        // retries it); the next ones are handed back for a unary call.
        let first = streams.call(3, &addr, Lane::Control, || client(&addr), append(1), ttl).await;
        assert!(matches!(first, Sent::Answered(Err(_))));
        let next = streams.call(3, &addr, Lane::Control, || client(&addr), append(1), ttl).await;
        match next {
            Sent::Unary(message) => assert_eq!(message.group_id, 1),
            _ => panic!("a peer without streams was not called with a unary call"),
        }
        server.abort();
    }
}
