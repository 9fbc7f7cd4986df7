//! Scenario: the leader of a shard crashes (SIGKILL) under a steady write load.
//!
//! Writes to that shard must succeed again within a bounded time (the measured
//! time is printed as `failover_ms=...`), no acknowledged write may be lost,
//! and once restarted the crashed node must catch up on every acknowledged key.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, stream};
use tessera_tests::{Cluster, ClusterOptions, Http, Value, as_id, json, wait_for};

/// Bound on the time until the killed leader's shard accepts writes again.
const FAILOVER_BOUND: Duration = Duration::from_secs(30);
/// Concurrent writer loops.
const WRITERS: usize = 3;
/// Hard caps so the writers stop by themselves whatever happens.
const MAX_WRITES: u64 = 20_000;
const MAX_WRITE_TIME: Duration = Duration::from_secs(180);

/// One acknowledged (HTTP 200) write.
#[derive(Clone, Debug)]
struct Ack {
    key: String,
    value: Value,
    group: Option<String>,
    node: Option<u64>,
    sent: Instant,
    acked: Instant,
}

#[derive(Default)]
struct Load {
    stop: AtomicBool,
    next: AtomicU64,
    failures: AtomicU64,
    acks: Mutex<Vec<Ack>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_failover() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("kv_failover scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();

    // The leader of the probe key's shard is the node that served its write.
    let r = api.kv_put("fo-probe", json!({"probe": 1}), None).await?.ensure_status(200)?;
    let group = r.group().with_context(|| format!("no X-Tessera-Group on {r}"))?;
    let leader = r.served_by().with_context(|| format!("no X-Tessera-Node on {r}"))?;
    eprintln!("probe key is in group {group}, led by node {leader}");

    // Steady write load of distinct keys.
    let load = Arc::new(Load::default());
    let writers: Vec<_> = (0..WRITERS).map(|_| tokio::spawn(writer(api.timeout(Duration::from_secs(5)), load.clone()))).collect();
    wait_for(Duration::from_secs(30), "writers warm up", async || {
        let n = load.acks.lock().unwrap().len();
        Ok((n >= 100).then_some(()))
    })
    .await?;

    // Crash the leader.
    let kill_at = Instant::now();
    c.kill_node(leader)?;
    let killed = Instant::now();

    // First write into the same group that was sent after the kill and acknowledged.
    let failover = wait_for(FAILOVER_BOUND, "a write to the crashed leader's shard succeeds", async || {
        let acks = load.acks.lock().unwrap();
        Ok(acks.iter().filter(|a| a.group.as_deref() == Some(group.as_str()) && a.sent >= killed).map(|a| a.acked - kill_at).min())
    })
    .await?;
    println!("failover_ms={}", failover.as_millis());

    // Keep writing a little longer, then stop the writers.
    let acked_at_failover = load.acks.lock().unwrap().len();
    wait_for(Duration::from_secs(30), "writes continue after failover", async || {
        Ok((load.acks.lock().unwrap().len() >= acked_at_failover + 200).then_some(()))
    })
    .await?;
    load.stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await?;
    }
    let acks = load.acks.lock().unwrap().clone();
    eprintln!("writers: {} acknowledged, {} failed or timed out", acks.len(), load.failures.load(Ordering::SeqCst));

    // After the kill nobody may report the dead node as the leader that served a write.
    if let Some(a) = acks.iter().find(|a| a.sent >= killed && a.node == Some(leader)) {
        return Err(anyhow!("write {} sent after the kill claims to be served by dead node {leader}", a.key));
    }

    // The admin view notices the crash.
    let http = c.http.clone();
    wait_for(Duration::from_secs(30), "admin/cluster reports the killed node unreachable", async || {
        node_reachable(&http, leader).await.map(|r| (!r).then_some(()))
    })
    .await?;

    // No acknowledged write is lost: every one is readable with quorum. A 404
    // or a wrong value is a lost write at once; other errors (say, a group the
    // dead node also led is still electing) are retried until the deadline.
    let expected: BTreeMap<String, Value> = acks.iter().map(|a| (a.key.clone(), a.value.clone())).collect();
    let quorum = api.consistency("quorum");
    let mut pending = expected.clone();
    let mut lost: BTreeMap<String, String> = BTreeMap::new();
    let verified = wait_for(Duration::from_secs(30), "every acknowledged key readable with quorum", async || {
        let wrong = check_keys(&quorum, &pending, None).await;
        pending.retain(|k, _| wrong.contains_key(k));
        lost.extend(wrong.iter().filter(|(_, why)| why.starts_with(LOST)).map(|(k, w)| (k.clone(), w.clone())));
        if !lost.is_empty() {
            return Ok(Some(false));
        }
        match wrong.iter().next() {
            None => Ok(Some(true)),
            Some((k, why)) => Err(anyhow!("{} keys not readable yet, e.g. {k}: {why}", wrong.len())),
        }
    })
    .await?;
    ensure!(verified, "{} of {} acknowledged writes lost, e.g. {:?}", lost.len(), expected.len(), lost.iter().take(5).collect::<Vec<_>>());

    // Restart the crashed node; it must catch up on every acknowledged key.
    c.start_node(leader)?;
    let restarted = Instant::now();
    let replica = api.replica(leader).timeout(Duration::from_secs(5));
    let mut pending = expected.clone();
    wait_for(Duration::from_secs(90), "restarted node serves every acknowledged key locally", async || {
        let wrong = check_keys(&replica, &pending, Some(leader)).await;
        pending.retain(|k, _| wrong.contains_key(k));
        match wrong.iter().next() {
            None => Ok(Some(())),
            Some((k, why)) => Err(anyhow!("{} keys not yet on node {leader}, e.g. {k}: {why}", wrong.len())),
        }
    })
    .await?;
    eprintln!("node {leader} caught up {} keys in {:?}", expected.len(), restarted.elapsed());

    wait_for(Duration::from_secs(30), "admin/cluster reports the restarted node reachable", async || {
        node_reachable(&http, leader).await.map(|r| r.then_some(()))
    })
    .await?;
    Ok(())
}

/// Writes distinct keys until told to stop (or a hard cap), recording acks.
async fn writer(api: Http, load: Arc<Load>) {
    let started = Instant::now();
    while !load.stop.load(Ordering::SeqCst) && started.elapsed() < MAX_WRITE_TIME {
        let i = load.next.fetch_add(1, Ordering::SeqCst);
        if i >= MAX_WRITES {
            break;
        }
        let key = format!("fo-{i:06}");
        let value = json!({"i": i});
        let sent = Instant::now();
        match api.kv_put(&key, value.clone(), None).await {
            Ok(r) if r.status == 200 => {
                let ack = Ack { key, value, group: r.group(), node: r.served_by(), sent, acked: Instant::now() };
                load.acks.lock().unwrap().push(ack);
            }
            _ => {
                load.failures.fetch_add(1, Ordering::SeqCst);
                // Avoid a hot loop while the shard has no leader.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Prefix of a [`check_keys`] reason that means the data is wrong, not unavailable.
const LOST: &str = "missing or wrong";

/// Reads every key in `expected` (16 in flight) and returns the ones that are
/// wrong, with the reason. With `served_by`, the response must also carry
/// `X-Tessera-Node: served_by`.
async fn check_keys(http: &Http, expected: &BTreeMap<String, Value>, served_by: Option<u64>) -> BTreeMap<String, String> {
    stream::iter(expected.iter())
        .map(|(k, v)| async move {
            let why = match http.kv_get(k).await {
                Ok(r) if r.status == 404 => Some(format!("{LOST}: {r}")),
                Ok(r) if r.status != 200 => Some(r.to_string()),
                Ok(r) if r.json["value"] != *v => Some(format!("{LOST}: value {} != {v}", r.json["value"])),
                Ok(r) if served_by.is_some() && r.served_by() != served_by => {
                    Some(format!("served by {:?}, not {served_by:?}", r.served_by()))
                }
                Ok(_) => None,
                Err(e) => Some(format!("{e:#}")),
            };
            why.map(|w| (k.clone(), w))
        })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await
}

/// `reachable` of node `id` in `GET /api/v1/admin/cluster`.
async fn node_reachable(http: &Http, id: u64) -> Result<bool> {
    let r = http.get("/api/v1/admin/cluster").await?.ensure_status(200)?;
    let nodes = r.json["nodes"].as_array().with_context(|| format!("no nodes in {r}"))?;
    let node = nodes.iter().find(|n| as_id(&n["id"]) == Some(id)).with_context(|| format!("node {id} missing in {r}"))?;
    node["reachable"].as_bool().with_context(|| format!("no reachable flag in {node}"))
}
