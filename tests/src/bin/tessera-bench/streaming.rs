//! `tessera-bench streaming [--seconds S] [--rows N]`: events published per
//! second through `POST /streaming/publish` with 1, 16 and 64 concurrent
//! publishers for S seconds each (ops/s and publish request latency), then the
//! publish-to-WebSocket latency: a subscriber on the same router
//! (`/api/v1/streaming/{channel}`) timestamps each event's arrival against the
//! instant its publish request was sent, for min(N, 5000) events from one
//! publisher and then from 16 concurrent publishers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{Client, header, load, row};

async fn publish(c: &Client, channel: &str, data: Value) -> Result<Value> {
    c.send(Method::POST, "/api/v1/streaming/publish", Some(&json!({"channel": channel, "event_type": "bench", "data": data})), "quorum")
        .await
}

/// Publish-to-receipt latency of `events` events from `publishers` tasks:
/// (events/s delivered, p50 ms, p99 ms).
async fn ws_latency(c: &Client, channel: &str, events: u64, publishers: u64) -> Result<(f64, f64, f64)> {
    let last =
        c.send(Method::GET, &format!("/api/v1/streaming/channels/{channel}"), None, "quorum").await?["last_id"].as_u64().unwrap_or(0);
    let url = format!("{}/api/v1/streaming/{channel}?after={last}", c.url.replacen("http://", "ws://", 1));
    let mut req = url.as_str().into_client_request()?;
    req.headers_mut().insert("authorization", format!("Bearer {}", c.token).parse()?);
    let (mut socket, _) = tokio_tungstenite::connect_async(req).await.context("WebSocket connect")?;

    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let receiver = {
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(events as usize);
            while (latencies.len() as u64) < events {
                let msg = tokio::time::timeout(Duration::from_secs(30), socket.next())
                    .await
                    .map_err(|_| anyhow!("no event within 30 s ({} of {events} received)", latencies.len()))?;
                let Some(msg) = msg else { return Err(anyhow!("the socket closed")) };
                if let Message::Text(t) = msg? {
                    let at = Instant::now();
                    let v: Value = serde_json::from_str(&t)?;
                    let seq = v["data"]["seq"].as_u64().context("event without seq")?;
                    // The publish call may not have recorded its send time yet only if
                    // the event outran the request's own bookkeeping; wait for it.
                    let t0 = loop {
                        if let Some(t0) = sent.lock().expect("sent lock").get(&seq).copied() {
                            break t0;
                        }
                        tokio::task::yield_now().await;
                    };
                    latencies.push(at.duration_since(t0).as_secs_f64() * 1000.0);
                }
            }
            Ok::<_, anyhow::Error>(latencies)
        })
    };
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..publishers {
        let (c, channel, sent) = (c.clone(), channel.to_string(), sent.clone());
        tasks.push(tokio::spawn(async move {
            let mut seq = p;
            while seq < events {
                sent.lock().expect("sent lock").insert(seq, Instant::now());
                publish(&c, &channel, json!({"seq": seq})).await?;
                seq += publishers;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let mut l = receiver.await??;
    let elapsed = started.elapsed().as_secs_f64();
    ensure!(l.len() as u64 == events, "received {} of {events}", l.len());
    l.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)];
    Ok((events as f64 / elapsed, pct(0.50), pct(0.99)))
}

pub async fn run(c: Client, secs: u64, rows: u64) -> Result<()> {
    let channel = format!("bench.stream.{}", std::process::id());
    c.send(Method::POST, "/api/v1/streaming/channels", Some(&json!({"name": channel, "max_events": 1_000_000})), "quorum").await?;
    header();
    for publishers in [1usize, 16, 64] {
        let (c2, ch) = (c.clone(), channel.clone());
        let r = load(publishers, secs, move |i, n| {
            let (c, ch) = (c2.clone(), ch.clone());
            async move { publish(&c, &ch, json!({"publisher": i, "n": n, "payload": "x".repeat(200)})).await.map(drop) }
        })
        .await?;
        row(&format!("publish, {publishers} publishers (request)"), r);
    }
    let events = rows.clamp(1, 5_000);
    for publishers in [1u64, 16] {
        let r = ws_latency(&c, &channel, events, publishers).await?;
        row(&format!("publish→WebSocket, {publishers} publishers"), r);
    }
    Ok(())
}
