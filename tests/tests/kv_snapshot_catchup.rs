//! Scenario: a follower that was down while the leaders snapshotted and purged
//! their logs catches up by snapshot install, and then answers every key from
//! its own state. Also: `X-Consistency: all` waits for every voter, and fails
//! clearly (the write is committed, not yet everywhere) while a voter is down.

use std::time::Duration;

use anyhow::{Result, anyhow, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const KEYS: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_snapshot_catchup() {
    let opts = ClusterOptions {
        // Snapshot every 20 entries and keep no log behind it, so a lagging
        // follower can only catch up through a snapshot.
        node_env: vec![("SERVICE_RAFT_SNAPSHOT_LOGS".into(), "20".into()), ("SERVICE_RAFT_KEEP_LOGS".into(), "0".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("kv_snapshot_catchup scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    // With every node up, `all` succeeds for writes and reads.
    c.http.consistency("all").kv_put("all-up", json!(1), None).await?.ensure_status(200)?;
    c.http.consistency("all").kv_get("all-up").await?.ensure_status(200)?;

    c.stop_node(3).await?;

    // `all` cannot be met with a voter down: a clear error, yet the write is committed.
    let r = c.http.consistency("all").kv_put("all-down", json!(2), None).await?;
    ensure!(r.status == 504, "expected 504 for an `all` write with a voter down, got {r}");
    ensure!(r.json["code"] == "NOT_APPLIED_EVERYWHERE", "unexpected error body {r}");
    c.http.consistency("quorum").kv_get("all-down").await?.ensure_status(200)?;

    for i in 0..KEYS {
        c.http.kv_put(&format!("snap/{i:04}"), json!({"i": i}), None).await?.ensure_status(200)?;
    }

    c.start_node(3)?;
    let replica = c.http.replica(3);
    wait_for(Duration::from_secs(60), "node 3 serves every key from its own state", async || {
        let n = replica.kv_count("snap/").await?;
        if n != KEYS as u64 {
            return Err(anyhow!("node 3 count so far: {n}"));
        }
        Ok(Some(()))
    })
    .await?;
    for i in (0..KEYS).step_by(37) {
        let r = replica.kv_get(&format!("snap/{i:04}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!({"i": i}), "node 3 has a wrong value for {i}: {r}");
        ensure!(r.served_by() == Some(3), "read was not served by node 3: {r}");
    }
    let log = std::fs::read_to_string(c.node_log(3)?)?;
    ensure!(log.contains("installed snapshot"), "node 3 caught up without installing a snapshot");
    Ok(())
}
