//! WebSocket subscriber of a streaming channel (`/api/v1/streaming/{channel}`)
//! for the streaming and CDC scenarios: records every event it receives and,
//! when the socket closes (a router or node went away), reconnects after the
//! last id it holds, as a real client would.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How the subscriber presents its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenIn {
    /// `Authorization: Bearer …`.
    Header,
    /// `?token=…`.
    Query,
}

/// Opens a socket on `base` (`http://host:port`) for `channel`, receiving the
/// events after id `after`. Fails with the HTTP status when the upgrade is refused.
pub async fn connect(base: &str, token: Option<&str>, how: TokenIn, channel: &str, after: Option<u64>) -> Result<Socket> {
    let ws_base = base.replacen("http://", "ws://", 1);
    let mut query = Vec::new();
    if let Some(a) = after {
        query.push(format!("after={a}"));
    }
    if let (Some(t), TokenIn::Query) = (token, how) {
        query.push(format!("token={t}"));
    }
    let mut url = format!("{ws_base}/api/v1/streaming/{}", crate::url_encode(channel));
    if !query.is_empty() {
        url = format!("{url}?{}", query.join("&"));
    }
    let mut req = url.as_str().into_client_request()?;
    if let (Some(t), TokenIn::Header) = (token, how) {
        req.headers_mut().insert("authorization", format!("Bearer {t}").parse()?);
    }
    let (socket, _) = tokio::time::timeout(Duration::from_secs(20), tokio_tungstenite::connect_async(req))
        .await
        .context("WebSocket handshake timed out")?
        .with_context(|| format!("WebSocket connect to {channel}"))?;
    Ok(socket)
}

/// A running subscriber.
pub struct Subscriber {
    events: Arc<Mutex<Vec<Value>>>,
    reconnects: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Subscriber {
    /// Connects (the handshake has completed when this returns) and starts
    /// collecting events with id > `after`.
    pub async fn start(base: &str, token: &str, how: TokenIn, channel: &str, after: u64) -> Result<Subscriber> {
        let socket = connect(base, Some(token), how, channel, Some(after)).await?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let reconnects = Arc::new(AtomicUsize::new(0));
        let (ev, rc) = (events.clone(), reconnects.clone());
        let (base, token, channel) = (base.to_string(), token.to_string(), channel.to_string());
        let task = tokio::spawn(async move {
            let mut socket = Some(socket);
            let mut last = after;
            loop {
                let mut s = match socket.take() {
                    Some(s) => s,
                    None => {
                        let deadline = Instant::now() + Duration::from_secs(120);
                        loop {
                            match connect(&base, Some(&token), how, &channel, Some(last)).await {
                                Ok(s) => break s,
                                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
                                Err(_) => return,
                            }
                        }
                    }
                };
                while let Some(msg) = s.next().await {
                    match msg {
                        Ok(Message::Text(t)) => {
                            let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                            if let Some(id) = v["id"].as_u64() {
                                last = last.max(id);
                            }
                            ev.lock().expect("events lock").push(v);
                        }
                        Ok(Message::Close(_)) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                rc.fetch_add(1, Ordering::Relaxed);
            }
        });
        Ok(Subscriber { events, reconnects, task })
    }

    /// Every event received so far, in arrival order.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().expect("events lock").clone()
    }

    /// Ids received so far, in arrival order.
    pub fn ids(&self) -> Vec<u64> {
        self.events().iter().map(|e| e["id"].as_u64().unwrap_or(0)).collect()
    }

    /// How many times the socket closed and was reopened.
    pub fn reconnects(&self) -> usize {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// Waits until at least `n` events have arrived.
    pub async fn wait_count(&self, n: usize, timeout: Duration) -> Result<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        loop {
            let ev = self.events();
            if ev.len() >= n {
                return Ok(ev);
            }
            if Instant::now() >= deadline {
                bail!("received {} of {n} events within {timeout:?}: ids {:?}", ev.len(), self.ids());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}
