//! Scenario: a node hosts the placement and cluster id it recorded at bootstrap.
//! Restarted with a configuration whose topology differs (another shard count)
//! or that names another cluster it refuses to start with a clear message; with its data directory wiped it rejoins with
//! `initial_cluster_state=existing`, initializes nothing, and catches up on
//! every acknowledged key from the leaders.

use std::time::Duration;

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const NODE: u64 = 3;
const KEYS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_bootstrap() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 4, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("node_bootstrap scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    // Every node reports the one cluster id and an incarnation of its own.
    let info = c.cluster_info().await?;
    let nodes = info["nodes"].as_array().cloned().unwrap_or_default();
    let ids: std::collections::BTreeSet<String> = nodes.iter().filter_map(|n| n["cluster_id"].as_str().map(String::from)).collect();
    let incarnations: std::collections::BTreeSet<String> =
        nodes.iter().filter_map(|n| n["incarnation"].as_str().map(String::from)).collect();
    ensure!(ids.len() == 1 && incarnations.len() == 3, "cluster ids {ids:?}, incarnations {incarnations:?} in {info}");
    for i in 0..KEYS {
        api.kv_put(&format!("boot/{i}"), json!(i), None).await?.ensure_status(200)?;
    }

    // Another shard count than the one recorded: the node refuses to start.
    c.stop_node(NODE).await?;
    c.set_node_env(NODE, "SERVICE_SHARD_COUNT", "6")?;
    c.start_node(NODE)?;
    let status = c.wait_node_exit(NODE, Duration::from_secs(30)).await?;
    ensure!(!status.success(), "node {NODE} started with a disagreeing configuration");
    let log = std::fs::read_to_string(c.node_log(NODE)?)?;
    ensure!(
        log.contains("disagrees with the placement this node recorded at bootstrap") && log.contains("data groups"),
        "no clear refusal in node {NODE}'s log"
    );
    c.unset_node_env(NODE, "SERVICE_SHARD_COUNT")?;

    // Another cluster name gives another cluster id than the one recorded: refused too.
    c.set_node_env(NODE, "SERVICE_CLUSTER_NAME", "another")?;
    c.start_node(NODE)?;
    let status = c.wait_node_exit(NODE, Duration::from_secs(30)).await?;
    ensure!(!status.success(), "node {NODE} started with another cluster name");
    let log = std::fs::read_to_string(c.node_log(NODE)?)?;
    ensure!(log.contains("cluster id") && log.contains("recorded at bootstrap"), "no clear cluster id refusal in node {NODE}'s log");
    c.unset_node_env(NODE, "SERVICE_CLUSTER_NAME")?;

    // Wiped: it rejoins as a fresh replica of an existing cluster and catches up.
    let dir = c.node_data_dir(NODE)?;
    std::fs::remove_dir_all(&dir)?;
    std::fs::create_dir_all(&dir)?;
    c.set_node_env(NODE, "SERVICE_INITIAL_CLUSTER_STATE", "existing")?;
    c.start_node(NODE)?;
    let replica = api.replica(NODE);
    wait_for(Duration::from_secs(60), "the wiped node serves every key from its own state", async || {
        for i in 0..KEYS {
            let r = replica.kv_get(&format!("boot/{i}")).await?;
            ensure!(r.status == 200 && r.json["value"] == json!(i), "boot/{i} on node {NODE}: {r}");
        }
        Ok(Some(()))
    })
    .await?;
    c.wait_ready().await?;
    // And the cluster takes writes with it.
    api.kv_put("boot/after", json!("after"), None).await?.ensure_status(200)?;
    wait_for(Duration::from_secs(30), "the wiped node applies new writes", async || {
        let r = replica.kv_get("boot/after").await?;
        Ok((r.status == 200).then_some(()))
    })
    .await
}
