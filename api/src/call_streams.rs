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
//! layer refuses the unknown path) is called with unary calls for ten minutes,
//! then asked again. So is a call too large for one message (it fails alone,
//! as a unary call, instead of ending the stream for every call on it).
//!
//! Each call says how long its caller waits (`timeout_ms`): the receiver drops
//! its handling past that, as a unary call's `grpc-timeout` would. A call whose
//! caller gave up (timed out, or its future dropped) is forgotten and, if still
//! queued, not sent.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::channel::{mpsc, oneshot};
use tonic::{Code, Status};

/// How long a peer that does not serve the streaming call is called with unary
/// calls: a rolling update is over by then (each probe fails the calls sent on it).
const UNARY_FOR: Duration = Duration::from_secs(600);

/// A message of a streaming call: numbered by its sender, echoed by its reply.
pub trait Numbered: prost::Message + Send + 'static {
    fn call_id(&self) -> u64;
    fn set_call_id(&mut self, id: u64);
    /// How long the caller waits for the reply, in ms (0: not said; replies carry none).
    fn timeout_ms(&self) -> u32;
    fn set_timeout_ms(&mut self, ms: u32);
    /// Why the call failed, as the status of a unary call would have said.
    fn refused(&self) -> Option<&str>;
    /// The message telling the receiver to stop the call `call_id` whose caller
    /// went away (`None`: calls of this kind are not stopped, only bounded).
    fn cancel(_call_id: u64) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Whether this message stops another call rather than being one.
    fn cancels(&self) -> bool {
        false
    }
}

/// The requests a streaming call sends: those queued whose caller still waits.
pub struct Requests<Req> {
    queued: mpsc::UnboundedReceiver<Req>,
    awaited: Arc<dyn Fn(u64) -> bool + Send + Sync>,
}

impl<Req: Numbered + Unpin> futures::Stream for Requests<Req> {
    type Item = Req;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Req>> {
        loop {
            match futures::ready!(self.queued.poll_next_unpin(cx)) {
                Some(request) if request.cancels() || (self.awaited)(request.call_id()) => return std::task::Poll::Ready(Some(request)),
                Some(_forgotten) => continue,
                None => return std::task::Poll::Ready(None),
            }
        }
    }
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
    /// Requests queue here until the stream sends them.
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
    Req: Numbered + Unpin,
    Reply: Numbered,
{
    /// Sends `message` to the peer `key` at `addr` on its stream (`open` starts
    /// one when none is open: it makes the streaming call with the requests it
    /// is given, `None` for a bad address) and waits up to `ttl` for its reply.
    pub async fn call<F, Fut>(&self, key: K, addr: &str, open: F, mut message: Req, ttl: Duration) -> Sent<Req, Reply>
    where
        F: FnOnce(Requests<Req>) -> Option<Fut>,
        Fut: std::future::Future<Output = Replies<Reply>> + Send + 'static,
    {
        if self.unary_only(&key) || message.encoded_len() > crate::rpc::MAX_MESSAGE_BYTES {
            return Sent::Unary(message);
        }
        let call_id = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        message.set_call_id(call_id);
        message.set_timeout_ms(u32::try_from(ttl.as_millis()).unwrap_or(u32::MAX));
        let (answer, answered) = oneshot::channel();
        let (waiting, outgoing) = {
            let mut open_streams = self.open.lock().expect("call streams lock");
            let reusable = open_streams.get(&key).is_some_and(|s| s.addr == addr && !s.waiting.closed.load(Ordering::Acquire));
            if !reusable {
                let waiting =
                    Arc::new(Waiting { calls: Mutex::new(HashMap::new()), closed: AtomicBool::new(false), refused: Mutex::new(None) });
                let (outgoing, queued) = mpsc::unbounded::<Req>();
                // A request whose caller stopped waiting is not sent.
                let awaited = waiting.clone();
                let awaited = Arc::new(move |call_id| awaited.calls.lock().expect("stream calls lock").contains_key(&call_id));
                let Some(replies) = open(Requests { queued, awaited }) else {
                    return Sent::Answered(Err(Status::unavailable(format!("bad peer address {addr}"))));
                };
                self.read_replies(key.clone(), waiting.clone(), replies);
                open_streams.insert(key.clone(), Stream { addr: addr.to_string(), outgoing, waiting });
            }
            let stream = &open_streams[&key];
            let mut calls = stream.waiting.calls.lock().expect("stream calls lock");
            if stream.waiting.closed.load(Ordering::Acquire) || stream.outgoing.unbounded_send(message).is_err() {
                return Sent::Answered(Err(Status::unavailable("the call stream to the peer closed")));
            }
            calls.insert(call_id, answer);
            (stream.waiting.clone(), stream.outgoing.clone())
        };
        // However this future ends (answered, timed out, dropped by its caller),
        // the call is forgotten, and stopped on the peer if it was not answered.
        let _forget = Forget { waiting: waiting.clone(), call_id, outgoing };
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
            Err(_late) => Sent::Answered(Err(Status::deadline_exceeded("no reply within the call's timeout"))),
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
    fn read_replies<Fut>(&self, key: K, reader: Arc<Waiting<Reply>>, replies: Fut)
    where
        Fut: std::future::Future<Output = Replies<Reply>> + Send + 'static,
    {
        let unary_only = self.unary_only.clone();
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
    }
}

/// Removes a call from its stream's waiting calls when its caller stops
/// waiting; a call not answered by then is stopped on the peer.
struct Forget<Req: Numbered, Reply> {
    waiting: Arc<Waiting<Reply>>,
    call_id: u64,
    outgoing: mpsc::UnboundedSender<Req>,
}

impl<Req: Numbered, Reply> Drop for Forget<Req, Reply> {
    fn drop(&mut self) {
        let unanswered = self.waiting.calls.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.call_id).is_some();
        if unanswered && let Some(cancel) = Req::cancel(self.call_id) {
            let _ = self.outgoing.unbounded_send(cancel);
        }
    }
}

/// Whether a stream's opening failed because the peer does not serve the call:
/// gRPC's `Unimplemented`, or a node's access layer refusing a path it does not know.
fn not_served(status: &Status) -> bool {
    status.code() == Code::Unimplemented || (status.code() == Code::PermissionDenied && status.message().contains(crate::rpc::NOT_SERVED))
}

/// `Numbered` for a message with a `call_id` field, on replies a `refused` one,
/// on requests a `timeout_ms` one.
macro_rules! numbered {
    ($message:ty, $refused:expr $(, $timeout:ident)?) => {
        impl Numbered for $message {
            fn call_id(&self) -> u64 {
                self.call_id
            }
            fn set_call_id(&mut self, id: u64) {
                self.call_id = id;
            }
            fn timeout_ms(&self) -> u32 {
                $(return self.$timeout;)?
                #[allow(unreachable_code)]
                0
            }
            fn set_timeout_ms(&mut self, _ms: u32) {
                $(self.$timeout = _ms;)?
            }
            fn refused(&self) -> Option<&str> {
                let refused: fn(&Self) -> Option<&str> = $refused;
                refused(self)
            }
        }
    };
}

numbered!(crate::rpc::RaftMessage, |m| Some(m.refused.as_str()).filter(|r| !r.is_empty()), timeout_ms);
numbered!(crate::rpc::DataCallReply, |m| Some(m.refused.as_str()).filter(|r| !r.is_empty()));
/// A router's calls are also stopped when their caller goes away (the query of
/// a client that disconnected stops, as it did when the dropped unary call
/// dropped its handler).
impl Numbered for crate::rpc::DataCall {
    fn call_id(&self) -> u64 {
        self.call_id
    }
    fn set_call_id(&mut self, id: u64) {
        self.call_id = id;
    }
    fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }
    fn set_timeout_ms(&mut self, ms: u32) {
        self.timeout_ms = ms;
    }
    fn refused(&self) -> Option<&str> {
        None
    }
    fn cancel(call_id: u64) -> Option<Self> {
        Some(crate::rpc::DataCall { call_id, cancel: true, ..Default::default() })
    }
    fn cancels(&self) -> bool {
        self.cancel
    }
}

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

    /// The reply to `m`: its group, payload and number, and in `sent_at_ms` how
    /// long its sender said it waits.
    fn echo(m: &RaftMessage) -> RaftMessage {
        RaftMessage {
            group_id: m.group_id,
            payload: m.payload.clone(),
            call_id: m.call_id,
            sent_at_ms: i64::from(m.timeout_ms),
            ..Default::default()
        }
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
        let open = |requests: super::Requests<RaftMessage>| {
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
                Sent::Answered(Ok(reply)) => {
                    assert_eq!((reply.group_id, reply.payload), (group, vec![group as u8; 3]));
                    assert_eq!(reply.sent_at_ms, 10_000, "each call says how long its caller waits");
                }
                Sent::Answered(Err(status)) => panic!("the call of group {group} failed: {status}"),
                Sent::Unary(_) => panic!("a peer that serves streams was called with a unary call"),
            }
        }
        assert_eq!(streams.open.lock().unwrap().len(), 1, "both calls went on one stream");
        // A call the peer never answers (it holds an odd one) fails at its timeout.
        let late = call(&streams, &addr, 11, Duration::from_millis(200)).await;
        assert!(matches!(late, Sent::Answered(Err(ref s)) if s.code() == tonic::Code::DeadlineExceeded));
        let stream = streams.open.lock().unwrap().values().next().map(|s| s.waiting.clone()).unwrap();
        assert!(stream.calls.lock().unwrap().is_empty(), "a call its caller gave up on is forgotten");
        // A call too large for one message is not sent on the stream (it would end
        // it for every call on it): it is handed back for a unary call.
        let huge = RaftMessage { group_id: 1, payload: vec![0; crate::rpc::MAX_MESSAGE_BYTES + 1], ..Default::default() };
        let open = |_: super::Requests<RaftMessage>| None::<std::future::Ready<super::Replies<RaftMessage>>>;
        assert!(matches!(streams.call(2, &addr, open, huge, ttl).await, Sent::Unary(_)));
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
