//! Many calls on one long-lived gRPC stream per peer: each message carries a
//! `call_id` its reply echoes, so one HTTP/2 stream carries thousands of calls.
//! A unary call costs a stream of its own (request and response headers,
//! trailers, a server task and a trace span); on a stream a call is one message
//! each way, and calls ready together leave in one write. Node to node this
//! carries AppendEntries (`RaftService.AppendStream`), router to node writes
//! and reads (`DataService.Calls`).
//!
//! A peer that does not serve the streaming call (a binary of an earlier
//! release, during a rolling update: it answers `Unimplemented`, or its access
//! layer refuses the unknown path) is called with unary calls for a minute,
//! then asked again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::{mpsc, oneshot};
use tonic::{Code, Status};

/// How long a peer that answered `Unimplemented` is called with unary calls.
const UNARY_FOR: Duration = Duration::from_secs(60);

/// A message of a streaming call: numbered by its sender, echoed by its reply.
pub trait Numbered: Send + 'static {
    fn call_id(&self) -> u64;
    fn set_call_id(&mut self, id: u64);
    /// Why the call failed, as the status of a unary call would have said.
    fn refused(&self) -> Option<&str>;
}

/// The stream of replies a streaming call's opening answers with.
pub type Replies<Reply> = Result<tonic::Response<tonic::Streaming<Reply>>, Status>;

/// The open streams of one caller, one per peer key (a node and a lane, an address).
pub struct CallStreams<K, Req, Reply> {
    open: Mutex<HashMap<K, Stream<Req, Reply>>>,
    next_call: AtomicU64,
    /// Peers that do not serve the streaming call, and since when.
    unary_only: Arc<Mutex<HashMap<K, Instant>>>,
}

impl<K, Req, Reply> Default for CallStreams<K, Req, Reply> {
    fn default() -> Self {
        CallStreams { open: Default::default(), next_call: AtomicU64::new(0), unary_only: Default::default() }
    }
}

/// One streaming call in progress.
struct Stream<Req, Reply> {
    /// The address the stream was opened to (a changed address opens another).
    addr: String,
    outgoing: mpsc::UnboundedSender<Req>,
    waiting: Arc<Waiting<Reply>>,
}

/// The calls sent on a stream and not yet answered; `closed` once the stream
/// ended (under the same lock: a call is either answered or told it ended).
struct Waiting<Reply> {
    calls: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    closed: AtomicBool,
    /// How the stream's opening failed (a refusal by name, say), told to its calls.
    refused: Mutex<Option<(Code, String)>>,
}

/// What became of a call sent on a stream.
pub enum Sent<Req, Reply> {
    /// The peer's reply, or why the call failed (as a unary call would have).
    Answered(Result<Reply, Status>),
    /// The peer does not serve the stream: make this call as a unary call.
    Unary(Req),
}

impl<K, Req, Reply> CallStreams<K, Req, Reply>
where
    K: Hash + Eq + Clone + std::fmt::Debug + Send + 'static,
    Req: Numbered,
    Reply: Numbered,
{
    /// Sends `message` to the peer `key` at `addr` on its stream (`open` starts
    /// one when none is open: it makes the streaming call with the requests it
    /// is given, `None` for a bad address) and waits up to `ttl` for its reply.
    pub async fn call<F, Fut>(&self, key: K, addr: &str, open: F, mut message: Req, ttl: Duration) -> Sent<Req, Reply>
    where
        F: FnOnce(mpsc::UnboundedReceiver<Req>) -> Option<Fut>,
        Fut: std::future::Future<Output = Replies<Reply>> + Send + 'static,
    {
        if self.unary_only(&key) {
            return Sent::Unary(message);
        }
        let call_id = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        message.set_call_id(call_id);
        let (answer, answered) = oneshot::channel();
        let waiting = {
            let mut open_streams = self.open.lock().expect("call streams lock");
            let reusable = open_streams.get(&key).is_some_and(|s| s.addr == addr && !s.waiting.closed.load(Ordering::Acquire));
            if !reusable {
                let (outgoing, requests) = mpsc::unbounded();
                let Some(replies) = open(requests) else {
                    return Sent::Answered(Err(Status::unavailable(format!("bad peer address {addr}"))));
                };
                open_streams.insert(key.clone(), self.read_replies(key.clone(), addr, outgoing, replies));
            }
            let stream = &open_streams[&key];
            let mut calls = stream.waiting.calls.lock().expect("stream calls lock");
            if stream.waiting.closed.load(Ordering::Acquire) || stream.outgoing.unbounded_send(message).is_err() {
                return Sent::Answered(Err(Status::unavailable("the call stream to the peer closed")));
            }
            calls.insert(call_id, answer);
            stream.waiting.clone()
        };
        match tokio::time::timeout(ttl, answered).await {
            Ok(Ok(reply)) => match reply.refused() {
                None => Sent::Answered(Ok(reply)),
                Some(why) => Sent::Answered(Err(Status::unavailable(why.to_string()))),
            },
            // A peer found not to serve streams gets the next call (the caller
            // retries) as a unary call.
            Ok(Err(_ended)) => Sent::Answered(Err(match waiting.refused.lock().expect("stream refusal lock").clone() {
                Some((code, message)) => Status::new(code, message),
                None => Status::unavailable("the call stream to the peer ended before the reply"),
            })),
            Err(_late) => {
                waiting.calls.lock().expect("stream calls lock").remove(&call_id);
                Sent::Answered(Err(Status::deadline_exceeded("no reply within the call's timeout")))
            }
        }
    }

    /// Ends every stream (certificates rotated): calls under way are still
    /// answered; the next call opens a stream on the new channels.
    pub fn close_all(&self) {
        self.open.lock().expect("call streams lock").clear();
    }

    fn unary_only(&self, key: &K) -> bool {
        let mut unary = self.unary_only.lock().expect("unary peers lock");
        match unary.get(key) {
            Some(since) if since.elapsed() < UNARY_FOR => true,
            Some(_) => {
                unary.remove(key);
                false
            }
            None => false,
        }
    }

    /// Hands each reply of the stream `replies` to its caller until it ends.
    fn read_replies<Fut>(&self, key: K, addr: &str, outgoing: mpsc::UnboundedSender<Req>, replies: Fut) -> Stream<Req, Reply>
    where
        Fut: std::future::Future<Output = Replies<Reply>> + Send + 'static,
    {
        let waiting = Arc::new(Waiting { calls: Mutex::new(HashMap::new()), closed: AtomicBool::new(false), refused: Mutex::new(None) });
        let (reader, unary_only) = (waiting.clone(), self.unary_only.clone());
        tokio::spawn(async move {
            match replies.await {
                Ok(replies) => {
                    let mut replies = replies.into_inner();
                    while let Ok(Some(reply)) = replies.message().await {
                        let answer = reader.calls.lock().expect("stream calls lock").remove(&reply.call_id());
                        if let Some(answer) = answer {
                            let _ = answer.send(reply);
                        }
                    }
                }
                Err(status) if not_served(&status) => {
                    tracing::info!(peer = ?key, "the peer does not serve the streaming call: unary calls instead");
                    unary_only.lock().expect("unary peers lock").insert(key, Instant::now());
                }
                Err(status) => *reader.refused.lock().expect("stream refusal lock") = Some((status.code(), status.message().to_string())),
            }
            // Every call still waiting learns the stream ended (its answer is dropped).
            let mut calls = reader.calls.lock().expect("stream calls lock");
            reader.closed.store(true, Ordering::Release);
            calls.clear();
        });
        Stream { addr: addr.to_string(), outgoing, waiting }
    }
}

/// Whether a stream's opening failed because the peer does not serve the call:
/// gRPC's `Unimplemented`, or a node's access layer refusing a path it does not know.
fn not_served(status: &Status) -> bool {
    status.code() == Code::Unimplemented || (status.code() == Code::PermissionDenied && status.message().contains(crate::rpc::NOT_SERVED))
}

/// `Numbered` for a message with a `call_id` field and, on replies, a `refused` one.
macro_rules! numbered {
    ($message:ty, $refused:expr) => {
        impl Numbered for $message {
            fn call_id(&self) -> u64 {
                self.call_id
            }
            fn set_call_id(&mut self, id: u64) {
                self.call_id = id;
            }
            fn refused(&self) -> Option<&str> {
                let refused: fn(&Self) -> Option<&str> = $refused;
                refused(self)
            }
        }
    };
}

numbered!(crate::rpc::RaftMessage, |m| Some(m.refused.as_str()).filter(|r| !r.is_empty()));
numbered!(crate::rpc::DataCallReply, |m| Some(m.refused.as_str()).filter(|r| !r.is_empty()));
numbered!(crate::rpc::DataCall, |_| None);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::{Request, Response, Status};

    use super::{CallStreams, Sent};
    use crate::rpc::RaftMessage;
    use crate::rpc::raft_service_client::RaftServiceClient;
    use crate::rpc::raft_service_server::{RaftService, RaftServiceServer};

    /// A peer that echoes each message's group and payload: unary calls always,
    /// streams unless it `refuses` them as an older binary does, and on a stream
    /// it answers each pair of messages in reverse order.
    #[derive(Clone)]
    struct Peer {
        refuses: Option<(tonic::Code, &'static str)>,
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
            if let Some((code, message)) = self.refuses {
                return Err(Status::new(code, message));
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

    type Streams = CallStreams<u64, RaftMessage, RaftMessage>;

    async fn call(streams: &Streams, addr: &str, group: u64, ttl: Duration) -> Sent<RaftMessage, RaftMessage> {
        let open = |requests| {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).ok()?.connect_lazy();
            let mut client = RaftServiceClient::new(channel);
            Some(async move { client.append_stream(requests).await })
        };
        let message = RaftMessage { group_id: group, payload: vec![group as u8; 3], ..Default::default() };
        streams.call(2, addr, open, message, ttl).await
    }

    #[tokio::test]
    async fn calls_of_several_groups_share_a_stream_and_each_gets_its_own_reply() {
        let (addr, server) = serve(Peer { refuses: None }).await;
        let streams = Streams::default();
        let ttl = Duration::from_secs(10);
        // The peer answers the second message before the first: each caller still
        // gets the reply to its own.
        let (a, b) = tokio::join!(call(&streams, &addr, 7, ttl), call(&streams, &addr, 9, ttl));
        for (sent, group) in [(a, 7u64), (b, 9)] {
            match sent {
                Sent::Answered(Ok(reply)) => assert_eq!((reply.group_id, reply.payload), (group, vec![group as u8; 3])),
                Sent::Answered(Err(status)) => panic!("the call of group {group} failed: {status}"),
                Sent::Unary(_) => panic!("a peer that serves streams was called with a unary call"),
            }
        }
        assert_eq!(streams.open.lock().unwrap().len(), 1, "both calls went on one stream");
        // A call the peer never answers (it holds an odd one) fails at its timeout.
        let late = call(&streams, &addr, 11, Duration::from_millis(200)).await;
        assert!(matches!(late, Sent::Answered(Err(ref s)) if s.code() == tonic::Code::DeadlineExceeded));
        server.abort();
    }

    #[tokio::test]
    async fn a_peer_without_streams_is_called_with_unary_calls() {
        // An older binary answers `Unimplemented`, or its access layer refuses
        // the path it does not know.
        let not_served = format!("/tessera.v1.RaftService/AppendStream {}", crate::rpc::NOT_SERVED);
        let not_served: &'static str = Box::leak(not_served.into_boxed_str());
        for refusal in [(tonic::Code::Unimplemented, "AppendStream"), (tonic::Code::PermissionDenied, not_served)] {
            let (addr, server) = serve(Peer { refuses: Some(refusal) }).await;
            let streams = Streams::default();
            let ttl = Duration::from_secs(10);
            // The first call learns the peer serves no streams and fails (the caller
            // retries it); the next ones are handed back for a unary call.
            let first = call(&streams, &addr, 1, ttl).await;
            assert!(matches!(first, Sent::Answered(Err(_))));
            match call(&streams, &addr, 1, ttl).await {
                Sent::Unary(message) => assert_eq!(message.group_id, 1),
                _ => panic!("a peer refusing streams with {refusal:?} was not called with a unary call"),
            }
            server.abort();
        }
    }

    #[tokio::test]
    async fn a_refused_stream_tells_its_calls_why() {
        let (addr, server) = serve(Peer { refuses: Some((tonic::Code::FailedPrecondition, "incompatible wire version: upgrade")) }).await;
        let streams = Streams::default();
        match call(&streams, &addr, 1, Duration::from_secs(10)).await {
            Sent::Answered(Err(status)) => {
                assert_eq!((status.code(), status.message()), (tonic::Code::FailedPrecondition, "incompatible wire version: upgrade"))
            }
            _ => panic!("a refused stream's call did not fail with the refusal"),
        }
        // Not a peer without streams: the next call tries a stream again.
        assert!(matches!(call(&streams, &addr, 1, Duration::from_secs(10)).await, Sent::Answered(Err(_))));
        server.abort();
    }
}
