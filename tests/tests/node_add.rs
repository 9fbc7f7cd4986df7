//! Scenario: an operator grows a running three-node cluster (4 data groups,
//! 3 replicas each) by a fourth node while a key-value writer runs. Node 4 is
//! started with `SERVICE_INITIAL_CLUSTER_STATE=existing` (it takes the cluster's
//! map from a peer and hosts nothing), then `POST /api/v1/admin/nodes` with
//! `all` adds it: three replicas move to it (its share of 12 over 4 nodes), each
//! as a learner that catches up, then a voter in place of a replica on the most
//! loaded node, whose old copy is deleted. The refusals come first (bad body,
//! nothing answering at the address, another node's id). Afterwards every node
//! holds three data replicas, no writer saw an error, every acknowledged write
//! reads back; with node 4 killed everything still reads and writes, and started
//! again it hosts its three groups from its own records and catches up.
//! Finally node 1 is drained: with four nodes its three data replicas and its
//! meta replica move to the nodes their groups lack, and its removal leaves
//! every group, the meta group included, at three;
//! a new node 5 then takes its place (its share moves to it while writes run).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const NEW: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_add() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 4, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("node_add scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    for i in 0..40 {
        api.kv_put(&format!("before/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let bad = api.post("/api/v1/admin/nodes", &json!({"node_id": NEW})).await?.ensure_status(400)?;
    ensure!(bad.json["error"].as_str().is_some_and(|e| e.contains("address")), "{bad}");
    api.post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": "not an address"})).await?.ensure_status(400)?;
    let silent = api.post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": "127.0.0.1:1"})).await?.ensure_status(409)?;
    ensure!(silent.json["error"].as_str().is_some_and(|e| e.contains("does not answer")), "{silent}");

    let addr = c.start_new_node(NEW)?;
    let taken = api.post("/api/v1/admin/nodes", &json!({"node_id": 2, "address": addr})).await?.ensure_status(409)?;
    ensure!(taken.json["error"].as_str().is_some_and(|e| e.contains("already")), "{taken}");

    // Idle figures first, for comparison (a measurement window, not a wait).
    let idle = Writer::start(&api, "idle, before the addition");
    tokio::time::sleep(Duration::from_secs(2)).await;
    idle.stop().await?;
    let writer = Writer::start(&api, "while node 4 was added");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let added = api
        .consistency("all")
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": addr}))
        .await?
        .ensure_status(200)?;
    eprintln!("[node_add] adding node {NEW} took {:?}: {}", started.elapsed(), added.json);
    ensure!(added.json["added"] == true && added.json["replicas_moved"] == 3, "{added}");
    let acked = writer.stop().await?;
    the_new_node_leads_its_share(&api, NEW).await?;

    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let data_replicas = |id: u64| -> Result<usize> {
        let node = nodes["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == id)).cloned().unwrap_or(Value::Null);
        ensure!(node["state"] == "active", "node {id}: {node}");
        Ok(node["groups_hosted"].as_array().map_or(0, |g| g.iter().filter(|g| g.as_u64() != Some(0)).count()))
    };
    for id in 1..=NEW {
        ensure!(data_replicas(id)? == 3, "node {id} should hold 3 of the 12 data replicas: {nodes}");
    }
    nothing_lost(&api, &acked).await?;

    // The new node is a full member: losing it loses nothing.
    c.kill_node(NEW)?;
    nothing_lost(&api, &acked).await?;
    for i in 0..20 {
        api.kv_put(&format!("after/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    // Started again, it hosts its groups from its own records and catches up.
    c.start_node(NEW)?;
    wait_for(Duration::from_secs(60), "node 4 back with its 3 replicas, caught up", || async {
        let nodes = api.get("/api/v1/admin/nodes").await?.json;
        let node = nodes["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == NEW)).cloned().unwrap_or(Value::Null);
        let hosted = node["groups_hosted"].as_array().map_or(0, Vec::len);
        let lag = node["applied_lag"].as_u64();
        Ok((hosted == 3 && lag == Some(0)).then_some(()))
    })
    .await?;
    let r = api.replica(NEW).kv_get("after/19").await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!(19), "{r}");
    // A read pinned to node 4 of a group it does not hold is refused at once
    // (node 4 holds three of the four data groups).
    let mut refused = 0;
    for i in 0..40 {
        let asked = Instant::now();
        let r = api.replica(NEW).timeout(Duration::from_secs(5)).kv_get(&format!("before/{i}")).await?;
        match r.status {
            200 => ensure!(r.json["value"] == json!(i), "{r}"),
            400 => {
                ensure!(r.json["error"].as_str().is_some_and(|e| e.contains("holds no replica")), "{r}");
                ensure!(asked.elapsed() < Duration::from_secs(2), "refused only after {:?}", asked.elapsed());
                refused += 1;
            }
            _ => anyhow::bail!("before/{i} pinned to node {NEW}: {r}"),
        }
    }
    ensure!(refused > 0, "some of 40 keys fall in the group node {NEW} lacks");
    draining_node_1_moves_its_replicas_away(c, &api, &acked).await
}

/// Five groups over four nodes: after the addition's leader moves the new
/// node leads at least one group, and `POST /api/v1/admin/rebalance` evens any
/// spread left (elections under load may have moved a leadership since).
async fn the_new_node_leads_its_share(api: &Http, new: u64) -> Result<()> {
    let led = |nodes: &Value, id: u64| -> usize {
        nodes["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["id"] == id))
            .and_then(|n| n["groups_led"].as_array())
            .map_or(0, Vec::len)
    };
    wait_for(Duration::from_secs(60), "the new node leads a group and the leadership spread is even", || async {
        let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
        let (max, min) = (nodes["spread"]["max_led"].as_u64(), nodes["spread"]["min_led"].as_u64());
        if led(&nodes, new) >= 1 && max.zip(min).is_some_and(|(max, min)| max <= min + 1) {
            eprintln!("[node_add] leadership spread: {}", nodes["spread"]);
            return Ok(Some(()));
        }
        let rebalanced = api.post("/api/v1/admin/rebalance", &json!({})).await?.ensure_status(200)?;
        eprintln!("[node_add] rebalance: {}", rebalanced.json);
        Ok(None)
    })
    .await
}

/// With four nodes a drained node's replicas have somewhere to go: each moves
/// to the one node its group lacks (node 4 for the meta group), so every group
/// keeps three replicas; the removal then only takes the node out of the map.
async fn draining_node_1_moves_its_replicas_away(c: &mut Cluster, api: &Http, acked: &[u64]) -> Result<()> {
    let writer = Writer::start(api, "while node 1 was drained");
    let started = Instant::now();
    let drained = api.consistency("all").post("/api/v1/admin/nodes/1/drain", &json!({})).await?.ensure_status(200)?;
    eprintln!("[node_add] drain of node 1 took {:?}: {}", started.elapsed(), drained.json);
    let acked_during_drain = writer.stop().await?;
    nothing_lost(api, &acked_during_drain).await?;
    // Its three data replicas and its meta replica move to the nodes lacking them.
    ensure!(drained.json["drained"] == true && drained.json["replicas_moved"] == 4, "{drained}");
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let hosted = |id: u64| -> Vec<u64> {
        nodes["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["id"] == id))
            .and_then(|n| n["groups_hosted"].as_array())
            .map(|g| g.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    ensure!(hosted(1).is_empty(), "node 1 hosts nothing any more: {nodes}");
    for id in 2..=NEW {
        ensure!(hosted(id).iter().filter(|g| **g != 0).count() == 4, "node {id} holds every data group now: {nodes}");
        ensure!(hosted(id).contains(&0), "node {id} holds a meta replica (the meta group kept three): {nodes}");
    }
    api.consistency("all").delete("/api/v1/admin/nodes/1").await?.ensure_status(200)?;
    c.wait_node_exit(1, Duration::from_secs(30)).await?;
    nothing_lost(api, acked).await?;
    api.consistency("all").kv_put("after/removal", json!(true), None).await?.ensure_status(200)?;
    a_new_machine_takes_node_1s_place(c, api).await
}

/// Node 1's replacement gets a new id (5): node ids are not reused, as peers
/// remember each id's data directory. Added while a writer runs, it takes its
/// share from the three nodes that hold every group.
async fn a_new_machine_takes_node_1s_place(c: &mut Cluster, api: &Http) -> Result<()> {
    let addr = c.start_new_node(5)?;
    let writer = Writer::start(api, "while node 5 was added");
    let started = Instant::now();
    let added = api
        .consistency("all")
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": 5, "address": addr}))
        .await?
        .ensure_status(200)?;
    eprintln!("[node_add] adding node 5 took {:?}: {}", started.elapsed(), added.json);
    ensure!(added.json["replicas_moved"] == 3, "{added}");
    let acked = writer.stop().await?;
    nothing_lost(api, &acked).await?;
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let ids: Vec<u64> = nodes["nodes"].as_array().map(|n| n.iter().filter_map(|n| n["id"].as_u64()).collect()).unwrap_or_default();
    ensure!(ids == vec![2, 3, 4, 5], "{nodes}");
    the_new_node_leads_its_share(api, 5).await
}

async fn nothing_lost(api: &Http, acked: &[u64]) -> Result<()> {
    for i in 0..40 {
        let r = api.kv_get(&format!("before/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "before/{i}: {r}");
    }
    for i in acked {
        let r = api.kv_get(&format!("during/{i}")).await?;
        ensure!(r.status == 200 && r.json["value"] == json!(i), "acknowledged write during/{i} lost: {r}");
    }
    Ok(())
}

/// One KV writer, one put at a time, noting each put's latency.
struct Writer {
    label: &'static str,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<(Vec<u64>, Vec<Duration>)>>,
}

impl Writer {
    fn start(api: &Http, label: &'static str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (api, flag) = (api.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let (mut acked, mut latencies) = (Vec::new(), Vec::new());
            for i in 0u64.. {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                let r = api.kv_put(&format!("during/{i}"), json!(i), None).await?;
                ensure!(r.status == 200, "kv write {i} failed ({label}): {r}");
                latencies.push(sent.elapsed());
                acked.push(i);
            }
            Ok((acked, latencies))
        });
        Writer { label, stop, task }
    }

    /// Stops the writer; prints its latency figures (p50, p99, max).
    async fn stop(self) -> Result<Vec<u64>> {
        self.stop.store(true, Ordering::Relaxed);
        let (acked, mut latencies) = self.task.await??;
        latencies.sort();
        let at = |q: f64| latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1))).copied();
        eprintln!(
            "[node_add] {}: {} kv writes acknowledged; latency p50 {:?} p99 {:?} max {:?}",
            self.label,
            acked.len(),
            at(0.5).unwrap_or_default(),
            at(0.99).unwrap_or_default(),
            latencies.last().copied().unwrap_or_default()
        );
        Ok(acked)
    }
}
