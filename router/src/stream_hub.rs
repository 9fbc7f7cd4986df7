//! WebSocket fan-out of channel events inside one router.
//!
//! The router keeps one *feed* per channel that has connected sockets: a task
//! that reads the channel's group for events after the last id it has seen
//! (every [`POLL_INTERVAL`], or at once when this router publishes to the
//! channel) and broadcasts them to the router's sockets of that channel. Each
//! socket tracks the last id it sent and fills any gap (a late subscription, a
//! slow socket that lagged behind the broadcast buffer) from the group's
//! history, so every socket gets every event once, in id order, whichever
//! router published it and whichever node leads the group.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tessera_api::GroupId;
use tessera_api::command::{Query, QueryResult};
use tessera_api::http::iso8601_ms;
use tessera_api::rpc::Consistency;
use tessera_api::stream::{StreamEvent, StreamQuery, StreamQueryResult};
use tokio::sync::{Notify, broadcast, watch};

use crate::cluster::ClusterClient;

/// How often a feed reads its channel's group for new events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How often an idle socket is pinged (a dead peer is noticed by the failed write).
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// Events per read.
const PAGE: usize = 1000;
/// Batches a feed buffers per socket before a slow socket must catch up from history.
const BROADCAST_CAPACITY: usize = 1024;

/// The JSON of an event, as sockets and history return it.
pub fn event_json(e: &StreamEvent) -> Value {
    serde_json::to_value(EventView::from(e)).unwrap_or(Value::Null)
}

/// An event as clients see it (in answers and WebSocket messages).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct EventView {
    pub id: u64,
    pub channel: String,
    pub event_type: String,
    /// What was published (a CDC event: the change, see docs).
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub data: Value,
    pub timestamp: String,
    pub timestamp_ms: i64,
}

impl From<&StreamEvent> for EventView {
    fn from(e: &StreamEvent) -> Self {
        EventView {
            id: e.id,
            channel: e.channel.clone(),
            event_type: e.event_type.clone(),
            data: e.data.clone(),
            timestamp: iso8601_ms(e.timestamp_ms),
            timestamp_ms: e.timestamp_ms,
        }
    }
}

struct Feed {
    tx: broadcast::Sender<Arc<Vec<StreamEvent>>>,
    poke: Notify,
}

/// The feeds of one router and its shutdown signal for sockets.
pub struct StreamHub {
    feeds: Mutex<HashMap<String, Arc<Feed>>>,
    shutdown: watch::Sender<bool>,
}

impl Default for StreamHub {
    fn default() -> Self {
        StreamHub { feeds: Mutex::default(), shutdown: watch::channel(false).0 }
    }
}

impl StreamHub {
    /// Wakes the channel's feed (if any) to read at once: called after this
    /// router published to it.
    pub fn poke(&self, channel: &str) {
        if let Some(f) = self.feeds.lock().expect("feeds lock").get(channel) {
            f.poke.notify_one();
        }
    }

    /// Closes every socket (router shutdown).
    pub fn close(&self) {
        self.shutdown.send_replace(true);
    }

    /// Subscribes to a channel's feed, starting one (reading after `after`) if needed.
    fn subscribe(
        self: &Arc<Self>,
        cluster: &Arc<dyn ClusterClient>,
        channel: &str,
        group: GroupId,
        after: u64,
    ) -> broadcast::Receiver<Arc<Vec<StreamEvent>>> {
        let mut feeds = self.feeds.lock().expect("feeds lock");
        if let Some(f) = feeds.get(channel) {
            return f.tx.subscribe();
        }
        let (tx, rx) = broadcast::channel(BROADCAST_CAPACITY);
        let feed = Arc::new(Feed { tx, poke: Notify::new() });
        feeds.insert(channel.to_string(), feed.clone());
        tokio::spawn(run_feed(self.clone(), cluster.clone(), channel.to_string(), group, feed, after));
        rx
    }
}

async fn read_events(
    cluster: &dyn ClusterClient,
    group: GroupId,
    channel: &str,
    after: u64,
    consistency: Consistency,
) -> Result<Option<Vec<StreamEvent>>, String> {
    let q = Query::Stream(StreamQuery::Events { channel: channel.to_string(), after: Some(after), limit: PAGE });
    match cluster.read(group, &q, consistency, None).await {
        Ok(s) => match s.value {
            QueryResult::Stream(StreamQueryResult::Events(r)) => Ok(r.map(|r| r.events)),
            other => Err(format!("unexpected reply {other:?}")),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// One channel's feed: reads new events from any replica (the leader first)
/// and broadcasts them, until no socket listens.
async fn run_feed(hub: Arc<StreamHub>, cluster: Arc<dyn ClusterClient>, channel: String, group: GroupId, feed: Arc<Feed>, mut cursor: u64) {
    loop {
        if feed.tx.receiver_count() == 0 {
            let mut feeds = hub.feeds.lock().expect("feeds lock");
            if feed.tx.receiver_count() == 0 {
                if feeds.get(&channel).is_some_and(|f| Arc::ptr_eq(f, &feed)) {
                    feeds.remove(&channel);
                }
                return;
            }
        }
        match read_events(&*cluster, group, &channel, cursor, Consistency::One).await {
            Ok(Some(events)) if !events.is_empty() => {
                let full = events.len() >= PAGE;
                cursor = events.last().map_or(cursor, |e| e.id);
                let _ = feed.tx.send(Arc::new(events));
                if full {
                    continue;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%channel, "stream feed read failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
            _ = feed.poke.notified() => {}
        }
    }
}

type Sink = futures::stream::SplitSink<WebSocket, Message>;

async fn send_event(sink: &mut Sink, e: &StreamEvent) -> Result<(), ()> {
    sink.send(Message::Text(event_json(e).to_string().into())).await.map_err(drop)
}

/// Sends every event after `*last` from the group's history (quorum reads, so
/// nothing committed is missed), up to `until` when given.
async fn catch_up(
    cluster: &dyn ClusterClient,
    group: GroupId,
    channel: &str,
    last: &mut u64,
    until: Option<u64>,
    sink: &mut Sink,
) -> Result<(), String> {
    loop {
        let events = read_events(cluster, group, channel, *last, Consistency::Quorum)
            .await?
            .ok_or_else(|| format!("channel {channel} no longer exists"))?;
        let n = events.len();
        for e in events {
            if until.is_some_and(|u| e.id > u) {
                return Ok(());
            }
            send_event(sink, &e).await.map_err(|_| "socket closed".to_string())?;
            *last = e.id;
        }
        if n < PAGE || until.is_some_and(|u| *last >= u) {
            return Ok(());
        }
    }
}

/// Serves one socket: events after `last` (history first, then live), each
/// once and in id order, until the client or the router closes it.
pub async fn serve(
    hub: Arc<StreamHub>,
    cluster: Arc<dyn ClusterClient>,
    socket: WebSocket,
    channel: String,
    group: GroupId,
    mut last: u64,
) {
    let mut rx = hub.subscribe(&cluster, &channel, group, last);
    let mut shutdown = hub.shutdown.subscribe();
    let (mut sink, mut incoming) = socket.split();
    let mut failure = catch_up(&*cluster, group, &channel, &mut last, None, &mut sink).await.err();
    shutdown.mark_unchanged();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    while failure.is_none() {
        tokio::select! {
            _ = ping.tick() => {
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
            batch = rx.recv() => match batch {
                Ok(batch) => {
                    for e in batch.iter() {
                        if e.id <= last {
                            continue;
                        }
                        if e.id > last + 1 {
                            // A gap: fill it from history before going on.
                            if let Err(m) = catch_up(&*cluster, group, &channel, &mut last, Some(e.id - 1), &mut sink).await {
                                failure = Some(m);
                                break;
                            }
                        }
                        if e.id > last {
                            if send_event(&mut sink, e).await.is_err() {
                                return;
                            }
                            last = e.id;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    failure = catch_up(&*cluster, group, &channel, &mut last, None, &mut sink).await.err();
                }
                Err(broadcast::error::RecvError::Closed) => {
                    rx = hub.subscribe(&cluster, &channel, group, last);
                }
            },
            msg = incoming.next() => match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
            _ = shutdown.changed() => {
                let frame = CloseFrame { code: 1001, reason: "router shutting down".into() };
                let _ = sink.send(Message::Close(Some(frame))).await;
                return;
            }
        }
    }
    if let Some(m) = failure {
        tracing::info!(%channel, "closing a stream socket: {m}");
        let reason: String = m.chars().take(100).collect();
        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1011, reason: reason.into() }))).await;
    }
}
