//! Scenario: `storage.sync_on_commit = false` is honoured. Every node warns at
//! start what it trades away, acknowledges writes without syncing its WAL (the
//! WAL sync counters of `GET /api/v1/admin/cluster` stay at 0 while log entries
//! are appended; a default cluster's grow), and a crash of every node process
//! at once (SIGKILL) loses no acknowledged write: the WAL is in the OS's cache.
//! (What it does not survive, a power loss, is not simulated here.)

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsynced_commits_survive_a_crash_of_every_process() {
    let options =
        ClusterOptions { shard_count: 2, node_env: vec![("SERVICE_SYNC_ON_COMMIT".into(), "false".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("sync_on_commit scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    for i in 0..40 {
        c.http.kv_put(&format!("unsynced/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let cluster = c.http.get("/api/v1/admin/cluster").await?.ensure_status(200)?;
    for n in cluster.json["nodes"].as_array().into_iter().flatten() {
        let (syncs, entries) = (n["wal"]["syncs"].as_u64(), n["wal"]["log_entries_synced"].as_u64());
        ensure!(syncs == Some(0) && entries.is_some_and(|e| e > 0), "node {}: no WAL sync, log entries appended: {n}", n["id"]);
    }
    for id in 1..=3u64 {
        ensure!(c.node_log_text(id)?.contains("storage.sync_on_commit = false"), "node {id} warns at start");
    }
    for id in 1..=3u64 {
        c.kill_node(id)?;
    }
    for id in 1..=3u64 {
        c.start_node(id)?;
    }
    c.wait_ready().await?;
    for i in 0..40 {
        let r = c.http.kv_get(&format!("unsynced/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "unsynced/{i} after the crash: {r}");
    }
    Ok(())
}
