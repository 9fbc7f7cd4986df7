//! Scenario: followers learn that an entry is committed without waiting for a
//! heartbeat. A leader tells its followers the commit index in its next append
//! or, when no write follows, a tenth of a heartbeat interval later
//! (third_party/README.md); it no longer sends a round of its own per entry.
//! With heartbeats 6 s apart, every replica applies a lone write well within
//! the interval, and a write at `consistency: all` (which waits for every
//! replica to apply it) is answered without waiting for a heartbeat.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions, wait_until};

const HEARTBEAT: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_apply_a_lone_write_long_before_the_next_heartbeat() {
    let env = |k: &str, v: String| (k.to_string(), v);
    let options = ClusterOptions {
        shard_count: 2,
        node_env: vec![
            env("SERVICE_RAFT_HEARTBEAT_MS", HEARTBEAT.as_millis().to_string()),
            env("SERVICE_RAFT_ELECTION_MIN_MS", "20000".into()),
            env("SERVICE_RAFT_ELECTION_MAX_MS", "30000".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("commit notice scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// The largest applied-index lag of any replica, as `GET /api/v1/admin/nodes` reports it.
async fn largest_lag(c: &Cluster) -> Result<u64> {
    let listed = c.http.get("/api/v1/admin/nodes").await?.ensure_status(200)?;
    let nodes = listed.json["nodes"].as_array().cloned().unwrap_or_default();
    ensure!(nodes.len() == 3, "three nodes: {}", listed.json);
    Ok(nodes.iter().map(|n| n["applied_lag"].as_u64().unwrap_or(u64::MAX)).max().unwrap_or(u64::MAX))
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    for round in 0..3 {
        c.http.kv_put(&format!("notice/{round}"), json!(round), None).await?.ensure_status(200)?;
        let waited =
            wait_until(HEARTBEAT / 3, "every replica applies the lone write", async || largest_lag(c).await.is_ok_and(|lag| lag == 0))
                .await;
        if let Err(e) = waited {
            let listed = c.http.get("/api/v1/admin/nodes").await?;
            anyhow::bail!("{e}: {}", listed.json["nodes"]);
        }
    }
    let started = Instant::now();
    let all = c.http.consistency("all").kv_put("notice/all", json!("everywhere"), None).await?.ensure_status(200)?;
    ensure!(started.elapsed() < HEARTBEAT / 2, "a write at `all` waited {:?} for its replicas: {all}", started.elapsed());
    Ok(())
}
