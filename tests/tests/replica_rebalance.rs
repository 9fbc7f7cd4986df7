//! The placement driver (`sharding.auto_rebalance`) evens out data-group
//! replicas: under range sharding a range splits into new groups on its
//! parent's three nodes, so a fourth node holds fewer and fewer replicas; the
//! driver on the meta leader moves split-off replicas to it (learner, catch-up,
//! voters replaced, old copy deleted) until every node holds within one as
//! many as any other, while writers run.
//!
//! Nodes 1-3 carry the crash point `replica-move-learner-added`: a meta
//! leader that makes a move it planned kills itself between the learner's
//! catch-up and the voter change (the first such move is node 4's addition,
//! which the driver runs). The move is recorded in the meta group before its
//! first step, and the addition as node 4's state, so the next meta leader
//! finishes that same move and the addition before planning another; the test
//! starts every crashed node again (with the crash point disarmed, and a
//! configuration that lists node 4). Nothing acknowledged is lost, and node 4
//! serves the ranges that moved to it from its own replicas.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const NEW: u64 = 4;
/// Sorted keys written: with splits at 120 keys, four splits or more.
const KEYS: u64 = 720;
const CRASH_POINT: &str = "replica-move-learner-added";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_rebalance() {
    let node_env = [
        ("SERVICE_SHARDING_STRATEGY", "range"),
        ("SERVICE_SPLIT_THRESHOLD_KEYS", "120"),
        ("SERVICE_SPLIT_CHECK_INTERVAL_SECS", "1"),
        ("SERVICE_AUTO_REBALANCE", "true"),
        ("SERVICE_REBALANCE_INTERVAL_SECS", "1"),
        ("SERVICE_TEST_CRASH_POINTS", CRASH_POINT),
    ];
    let options = ClusterOptions {
        shard_count: 2,
        node_env: node_env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("replica_rebalance scenario failed: {e:?}\n{}", cluster.log_tails(60));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    // Node 4 joins the three-node cluster and takes its share (6 replicas over
    // 4 nodes: 1); the meta leader dies making that move, the next finishes it
    // (`quorum`: `all` would wait for the dead node).
    let addr = c.start_new_node(NEW)?;
    c.set_node_env(NEW, "SERVICE_TEST_CRASH_POINTS", "")?;
    let added = api
        .consistency("quorum")
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": addr}))
        .await?
        .ensure_status(200)?;
    ensure!(added.json["replicas_moved"] == 1, "{added}");

    // Sorted keys make the range split again and again; each split-off group
    // starts on its parent's nodes, and the driver spreads them.
    let writer = Writer::start(&api);
    let started = Instant::now();
    let mut crashed: Vec<u64> = Vec::new();
    // The placement counts as settled once it is even, no move is in flight,
    // and the map's epoch held still for 3 s (the splitter and the driver run
    // every second, so a split or move would have changed it).
    let mut still_since: Option<(u64, Instant)> = None;
    let spread = loop {
        for id in c.reap_exited_nodes() {
            eprintln!("[replica_rebalance] node {id} stopped (crash point) after {:?}; starting it again", started.elapsed());
            crashed.push(id);
            c.set_node_env(id, "SERVICE_TEST_CRASH_POINTS", "")?;
            c.start_node(id)?;
        }
        let nodes = api.get("/api/v1/admin/nodes").await?;
        let groups = data_groups(&api).await.unwrap_or(0);
        if nodes.status == 200 && groups >= 5 && !crashed.is_empty() && writer.done() {
            let spread = &nodes.json["spread"];
            let (max, min) = (spread["max_replicas"].as_u64(), spread["min_replicas"].as_u64());
            let even = nodes.json["replica_move"].is_null() && max.zip(min).is_some_and(|(max, min)| max <= min + 1);
            let epoch = map_epoch(&api).await.unwrap_or(0);
            match still_since {
                Some((e, since)) if e == epoch => {
                    if even && since.elapsed() >= Duration::from_secs(3) {
                        break nodes.json.clone();
                    }
                }
                _ => still_since = Some((epoch, Instant::now())),
            }
        }
        ensure!(started.elapsed() < Duration::from_secs(240), "the replicas were not spread in 240 s: {}", nodes.json);
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let acked = writer.stop().await?;
    eprintln!(
        "[replica_rebalance] even after {:?}: {} acknowledged writes, crashed {crashed:?}, spread {}",
        started.elapsed(),
        acked.len(),
        spread["spread"]
    );
    let resumed = (1..=3u64).any(|id| c.node_log_text(id).is_ok_and(|log| log.contains("resuming the replica move recorded in the map")));
    ensure!(resumed, "no meta leader resumed the move recorded before the crash");
    let moved = (1..=NEW).any(|id| c.node_log_text(id).is_ok_and(|log| log.contains("placement driver moved a replica")));
    ensure!(moved, "the driver moved no replica");

    // Every acknowledged write reads back, through the router and from node 4's own replicas.
    for i in &acked {
        let k = key(*i);
        let r = api.kv_get(&k).await?;
        ensure!(r.status == 200 && r.json["value"] == json!(i), "acknowledged write {k} lost: {r}");
    }
    // Ranges may still split and move for a few seconds after the writer stopped
    // (a split range's halves are checked again): node 4's ranges are read anew
    // each round, and a read of a range that just moved away counts as "not yet".
    let from_node_4 = api.consistency("one").replica(NEW).timeout(Duration::from_secs(5));
    wait_for(Duration::from_secs(90), "node 4 serves the keys of its ranges from its own replicas", || async {
        let ranges = ranges_on(&api, NEW).await?;
        if ranges.len() < 2 {
            return Ok(None);
        }
        for i in &acked {
            let k = key(*i);
            if ranges.iter().any(|(start, end)| k.as_str() >= start.as_str() && end.as_ref().is_none_or(|e| k < *e)) {
                match from_node_4.kv_get(&k).await {
                    Ok(r) if r.status == 200 && r.json["value"] == json!(i) => {}
                    _ => return Ok(None),
                }
            }
        }
        Ok(Some(()))
    })
    .await
}

/// The cluster map's epoch.
async fn map_epoch(api: &Http) -> Result<u64> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    Ok(cluster["epoch"].as_u64().unwrap_or(0))
}

fn key(i: u64) -> String {
    format!("acct:{i:06}")
}

/// How many data groups the cluster map has.
async fn data_groups(api: &Http) -> Result<usize> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    Ok(cluster["sharding"]["ranges"].as_array().map_or(0, Vec::len) + 1)
}

/// The key ranges `[start, end)` whose group has a replica on `node`.
async fn ranges_on(api: &Http, node: u64) -> Result<Vec<(String, Option<String>)>> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let hosted: Vec<u64> = nodes["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["id"] == node))
        .and_then(|n| n["groups_hosted"].as_array())
        .map(|g| g.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for r in cluster["sharding"]["ranges"].as_array().cloned().unwrap_or_default() {
        if r["group"].as_u64().is_some_and(|g| hosted.contains(&g)) {
            out.push((r["start"].as_str().unwrap_or_default().to_string(), r["end"].as_str().map(str::to_string)));
        }
    }
    Ok(out)
}

/// One key-value writer of [`KEYS`] sorted keys, one put at a time.
struct Writer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<(Vec<u64>, BTreeMap<&'static str, Duration>)>>,
}

impl Writer {
    fn start(api: &Http) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (api, flag) = (api.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let (mut acked, mut worst) = (Vec::new(), Duration::ZERO);
            for i in 0..KEYS {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                let r = api.kv_put(&key(i), json!(i), None).await?;
                ensure!(r.status == 200, "kv write {} failed while replicas moved: {r}", key(i));
                worst = worst.max(sent.elapsed());
                acked.push(i);
            }
            Ok((acked, BTreeMap::from([("slowest", worst)])))
        });
        Writer { stop, task }
    }

    fn done(&self) -> bool {
        self.task.is_finished()
    }

    async fn stop(self) -> Result<Vec<u64>> {
        self.stop.store(true, Ordering::Relaxed);
        let (acked, figures) = self.task.await??;
        eprintln!("[replica_rebalance] writer: {} puts acknowledged, {figures:?}", acked.len());
        Ok(acked)
    }
}
