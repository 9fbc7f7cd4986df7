//! Scenario: a cluster spread over three zones loses a whole zone and every
//! group keeps its quorum. Nodes 1–3 start in zones a, b and c
//! (`SERVICE_LOCALITY=zone=…,rack=…`); the placement driver records their
//! localities in the map. Nodes 4, 5 and 6 (zones a, b, c) are added one by
//! one: each takes its share of the 18 data replicas, and every group keeps
//! its three replicas in three zones (`/api/v1/admin/cluster` lists no group
//! sharing a zone). Then zone a goes down (nodes 1 and 4 killed): the router
//! stays ready, every group elects a reachable leader (`/readyz?groups=all`),
//! every acknowledged write reads back and new writes to every key succeed.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const ZONES: [&str; 6] = ["a", "b", "c", "a", "b", "c"];
const KEYS: usize = 60;

fn locality(id: u64) -> String {
    format!("zone={},rack={id}", ZONES[id as usize - 1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_zone_keeps_every_group() {
    let node_env_of: BTreeMap<u64, Vec<(String, String)>> =
        (1..=3).map(|id| (id, vec![("SERVICE_LOCALITY".to_string(), locality(id))])).collect();
    let mut cluster =
        Cluster::start(ClusterOptions { shard_count: 6, node_env_of, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("zones scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    recorded_localities(&api, 3).await?;
    for i in 0..KEYS {
        api.kv_put(&format!("zoned/{i}"), json!(i), None).await?.ensure_status(200)?;
    }

    for id in 4..=6 {
        let zone = locality(id);
        let addr = c.start_new_node_with(id, &[("SERVICE_LOCALITY", &zone)])?;
        let added = api
            .consistency("all")
            .timeout(Duration::from_secs(180))
            .post("/api/v1/admin/nodes", &json!({"node_id": id, "address": addr}))
            .await?
            .ensure_status(200)?;
        eprintln!("[zones] node {id} ({zone}) added: {}", added.json);
    }
    let nodes = recorded_localities(&api, 6).await?;
    for node in nodes.as_array().into_iter().flatten() {
        let hosted = node["groups_hosted"].as_array().map_or(0, |g| g.iter().filter(|g| g.as_u64() != Some(0)).count());
        ensure!(hosted == 3, "every node holds 3 of the 18 data replicas: {node}");
    }
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let groups = cluster["groups"].as_array().cloned().unwrap_or_default();
    ensure!(groups.len() == 7 && groups.iter().all(|g| g["shares_a_zone"] == false), "no group has two replicas in one zone: {groups:?}");
    let dashboard = api.get("/api/v1/admin/dashboard").await?.ensure_status(200)?.json;
    ensure!(dashboard["groups"]["sharing_a_zone"] == json!([]), "{}", dashboard["groups"]);

    eprintln!("[zones] zone a (nodes 1 and 4) goes down");
    c.kill_node(1)?;
    c.kill_node(4)?;
    let probe = api.anonymous();
    // The meta group's leader may have been in zone a: the router is ready again
    // once the meta group elects one outside it.
    wait_for(Duration::from_secs(90), "the router to be ready without zone a", async || {
        let ready = probe.get("/readyz").await?;
        ensure!(ready.status == 200, "{}", ready.json);
        Ok(Some(()))
    })
    .await?;
    wait_for(Duration::from_secs(90), "every group to elect a leader outside zone a", async || {
        let ready = probe.get("/readyz?groups=all").await?;
        ensure!(ready.status == 200, "{}", ready.json);
        Ok(Some(()))
    })
    .await?;
    for i in 0..KEYS {
        let key = format!("zoned/{i}");
        let got = api.consistency("quorum").kv_get(&key).await?.ensure_status(200)?;
        ensure!(got.json["value"] == json!(i), "{key} after losing zone a: {}", got.json);
        api.kv_put(&key, json!(i + 1000), None).await?.ensure_status(200)?;
    }
    Ok(())
}

/// Waits until `GET /api/v1/admin/nodes` shows `count` nodes, each with the
/// locality it was started with, and answers the nodes.
async fn recorded_localities(api: &Http, count: usize) -> Result<Value> {
    wait_for(Duration::from_secs(60), "the nodes' localities in the map", async || {
        let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json["nodes"].clone();
        let listed = nodes.as_array().cloned().unwrap_or_default();
        ensure!(listed.len() == count, "{count} nodes expected: {nodes}");
        for node in &listed {
            let id = node["id"].as_u64().unwrap_or(0);
            ensure!(node["locality"] == json!(locality(id)), "node {id}'s locality is not recorded yet: {node}");
        }
        Ok(Some(nodes))
    })
    .await
}
