//! Scenario: an operator takes node 3 out of a running three-node cluster while
//! a key-value writer and a SQL writer run. The refusals come first: an unknown
//! node is 404, removing an active node is 409. `POST …/nodes/3/drain` (quorum)
//! answers once no group is led by node 3 any more; a second node cannot start
//! draining meanwhile (409), draining node 3 again is harmless.
//! `DELETE …/nodes/3` with `all` answers once every remaining replica applied
//! the memberships without it; node 3 then stops by itself and refuses to start
//! on its data directory again — unless told to rejoin
//! (`SERVICE_REJOIN_WHEN_REMOVED`): then it discards that data, starts empty
//! and is added again, and every group, left two replicas by the removal,
//! gets its third back on it. No writer saw an error, every acknowledged write
//! reads back, and a write with `all` succeeds on the two remaining nodes (it
//! would time out if node 3 were still a voter).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const LEAVING: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lifecycle() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 4, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("node_lifecycle scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    sql_ok(&api, "CREATE TABLE IF NOT EXISTS ledger (id INT PRIMARY KEY, note TEXT)").await?;
    refusals_before_anything_changes(&api).await?;
    let writers = Writers::start(&api);
    tokio::time::sleep(Duration::from_millis(500)).await; // let the writers get going
    drain_moves_every_leadership_away(&api).await?;
    remove_takes_the_node_out(c).await?;
    let (kv, sql) = writers.stop().await?;
    nothing_acknowledged_is_lost(&api, &kv, &sql).await?;
    the_two_remaining_nodes_serve_everything(&api).await?;
    comes_back_on_its_old_volume(c).await
}

async fn refusals_before_anything_changes(api: &Http) -> Result<()> {
    api.post("/api/v1/admin/nodes/9/drain", &json!({})).await?.ensure_status(404)?;
    api.delete("/api/v1/admin/nodes/9").await?.ensure_status(404)?;
    let r = api.delete(&format!("/api/v1/admin/nodes/{LEAVING}")).await?.ensure_status(409)?;
    ensure!(r.json["error"].as_str().is_some_and(|e| e.contains("drain it first")), "{r}");
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    ensure!(nodes["nodes"].as_array().is_some_and(|n| n.iter().all(|n| n["state"] == "active")), "{nodes}");
    Ok(())
}

async fn drain_moves_every_leadership_away(api: &Http) -> Result<()> {
    let started = Instant::now();
    let r = api.post(&format!("/api/v1/admin/nodes/{LEAVING}/drain"), &json!({})).await?.ensure_status(200)?;
    ensure!(r.json["drained"] == true && r.json["node_reached"] == true, "{r}");
    eprintln!("[lifecycle] drain took {:?}: {}", started.elapsed(), r.json);
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let leaving = node_entry(&nodes, LEAVING)?;
    ensure!(leaving["state"] == "draining", "{leaving}");
    ensure!(leaving["groups_led"].as_array().is_some_and(Vec::is_empty), "node {LEAVING} leads nothing: {leaving}");
    // The operator's views say so: an `info` alert, a leaving node on the dashboard.
    let alerts = api.get("/api/v1/admin/alerts").await?.ensure_status(200)?.json;
    ensure!(
        alerts["alerts"].as_array().is_some_and(|a| a.iter().any(|a| a["type"] == "node_leaving" && a["subject"] == "node 3")),
        "{alerts}"
    );
    let dash = api.get("/api/v1/admin/dashboard").await?.ensure_status(200)?.json;
    ensure!(dash["nodes"]["leaving"] == 1 && dash["nodes"]["up"] == 3, "{dash}");
    ensure!(dash["health"] != "unavailable" && dash["alerts"]["critical"] == 0, "every group has a leader: {dash}");
    // One node leaves at a time; repeating the drain of the same node is harmless.
    let r = api.post("/api/v1/admin/nodes/2/drain", &json!({})).await?.ensure_status(409)?;
    ensure!(r.json["error"].as_str().is_some_and(|e| e.contains("one node leaves at a time")), "{r}");
    api.post(&format!("/api/v1/admin/nodes/{LEAVING}/drain?consistency=all"), &json!({})).await?.ensure_status(200)?;
    Ok(())
}

async fn remove_takes_the_node_out(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let started = Instant::now();
    let r = api.consistency("all").delete(&format!("/api/v1/admin/nodes/{LEAVING}")).await?.ensure_status(200)?;
    ensure!(r.json["removed"] == true && r.json["node_stopped"] == true && r.json["consistency"] == "all", "{r}");
    eprintln!("[lifecycle] removal took {:?}: {}", started.elapsed(), r.json);
    let status = c.wait_node_exit(LEAVING, Duration::from_secs(30)).await?;
    ensure!(status.success(), "a removed node stops cleanly: {status}");
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let ids: Vec<u64> = nodes["nodes"].as_array().context("nodes")?.iter().filter_map(|n| n["id"].as_u64()).collect();
    ensure!(ids == [1, 2], "only nodes 1 and 2 are left: {nodes}");
    let cluster = c.cluster_info().await?;
    for g in cluster["groups"].as_array().context("groups")? {
        ensure!(!g["members"].as_array().context("members")?.contains(&json!(LEAVING)), "no group lists node {LEAVING}: {g}");
    }
    api.delete(&format!("/api/v1/admin/nodes/{LEAVING}")).await?.ensure_status(404)?;
    // Its data directory is a tombstone now: the node refuses to start on it.
    c.start_node(LEAVING)?;
    let status = c.wait_node_exit(LEAVING, Duration::from_secs(30)).await?;
    ensure!(!status.success(), "a removed node must not start again");
    let log = c.node_log_text(LEAVING)?;
    ensure!(log.contains("was removed from the cluster"), "the refusal says why");
    Ok(())
}

/// With `SERVICE_REJOIN_WHEN_REMOVED` (what a StatefulSet pod scaled back up on
/// its kept volume gets), the removed node discards its old data, starts empty
/// and is added again: it takes replicas and serves them.
async fn comes_back_on_its_old_volume(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    c.set_node_env(LEAVING, "SERVICE_REJOIN_WHEN_REMOVED", "true")?;
    c.start_node(LEAVING)?;
    let addr = c.node_addr(LEAVING)?;
    let added = api
        .consistency("all")
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": LEAVING, "address": addr}))
        .await?
        .ensure_status(200)?;
    ensure!(added.json["added"] == true && added.json["replicas_moved"].as_u64() > Some(0), "{added}");
    ensure!(c.node_running(LEAVING), "the node runs after its re-addition");
    let log = c.node_log_text(LEAVING)?;
    ensure!(log.contains("discards its old data"), "the node says it started anew");
    let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let back = node_entry(&nodes, LEAVING)?;
    ensure!(back["state"] == "active" && back["groups_hosted"].as_array().is_some_and(|g| !g.is_empty()), "{back}");
    // The removal left every group two replicas; the node's return gave each its third back.
    let cluster = c.cluster_info().await?;
    for g in cluster["groups"].as_array().context("groups")? {
        ensure!(g["members"].as_array().is_some_and(|m| m.len() == 3 && m.contains(&json!(LEAVING))), "three replicas again: {g}");
    }
    ensure!(
        added.json["moves"].as_array().is_some_and(|m| m.iter().all(|m| m["from"] == json!(LEAVING) && m["to"] == json!(LEAVING))),
        "replicas added, none taken from nodes 1 and 2: {added}"
    );
    nothing_acknowledged_is_lost_after(&api).await
}

async fn nothing_acknowledged_is_lost(api: &Http, kv: &[u64], sql: &[u64]) -> Result<()> {
    ensure!(kv.len() > 20 && sql.len() > 20, "the writers made progress during the moves: kv {} sql {}", kv.len(), sql.len());
    for i in kv {
        let r = api.kv_get(&format!("lifecycle/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "key lifecycle/{i}: {r}");
    }
    let r = sql_ok(api, "SELECT id FROM ledger ORDER BY id").await?;
    let stored: Vec<u64> = r.json["data"]["rows"].as_array().context("rows")?.iter().filter_map(|row| row[0].as_u64()).collect();
    let missing: Vec<&u64> = sql.iter().filter(|i| !stored.contains(i)).collect();
    ensure!(missing.is_empty(), "acknowledged SQL rows missing: {missing:?}");
    Ok(())
}

/// The writes made while node 3 was out read back at `all` (node 3 included).
async fn nothing_acknowledged_is_lost_after(api: &Http) -> Result<()> {
    for i in 0..8 {
        let r = api.consistency("all").kv_get(&format!("after/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "after/{i}: {r}");
    }
    Ok(())
}

async fn the_two_remaining_nodes_serve_everything(api: &Http) -> Result<()> {
    let all = api.consistency("all");
    for i in 0..8 {
        all.kv_put(&format!("after/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    wait_for(Duration::from_secs(20), "the router is ready", || async {
        Ok(api.anonymous().get("/readyz").await.ok().filter(|r| r.status == 200))
    })
    .await?;
    Ok(())
}

fn node_entry(nodes: &Value, id: u64) -> Result<Value> {
    nodes["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == id)).cloned().with_context(|| format!("node {id}: {nodes}"))
}

async fn sql_ok(api: &Http, text: &str) -> Result<tessera_tests::Resp> {
    let r = api.post("/api/v1/query", &json!({"sql": text, "params": [], "database": "lifecycle"})).await?;
    ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
    Ok(r)
}

/// A key-value writer and a SQL writer, each recording what was acknowledged
/// and failing on the first error a client would see.
struct Writers {
    stop: Arc<AtomicBool>,
    kv: tokio::task::JoinHandle<Result<(Vec<u64>, Vec<Duration>)>>,
    sql: tokio::task::JoinHandle<Result<Vec<u64>>>,
}

impl Writers {
    fn start(api: &Http) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let (api_kv, stop_kv) = (api.clone(), stop.clone());
        let kv = tokio::spawn(async move {
            let (mut acked, mut latencies) = (Vec::new(), Vec::new());
            for i in 0u64.. {
                if stop_kv.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                let r = api_kv.kv_put(&format!("lifecycle/{i}"), json!(i), None).await?;
                ensure!(r.status == 200, "kv write {i} failed during the moves: {r}");
                latencies.push(sent.elapsed());
                acked.push(i);
            }
            Ok((acked, latencies))
        });
        let (api_sql, stop_sql) = (api.clone(), stop.clone());
        let sql = tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0u64.. {
                if stop_sql.load(Ordering::Relaxed) {
                    break;
                }
                sql_ok(&api_sql, &format!("INSERT INTO ledger (id, note) VALUES ({i}, 'row {i}')"))
                    .await
                    .with_context(|| format!("sql insert {i} during the moves"))?;
                acked.push(i);
            }
            Ok(acked)
        });
        Writers { stop, kv, sql }
    }

    /// Stops both writers; prints the KV write latencies (p50, p99, max) seen
    /// across the drain and the removal.
    async fn stop(self) -> Result<(Vec<u64>, Vec<u64>)> {
        self.stop.store(true, Ordering::Relaxed);
        let (kv, mut latencies) = self.kv.await??;
        latencies.sort();
        let at = |q: f64| latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1))).copied();
        eprintln!(
            "[lifecycle] kv writes during the moves: {} acknowledged, p50 {:?}, p99 {:?}, max {:?}",
            kv.len(),
            at(0.5).unwrap_or_default(),
            at(0.99).unwrap_or_default(),
            latencies.last().copied().unwrap_or_default()
        );
        Ok((kv, self.sql.await??))
    }
}
