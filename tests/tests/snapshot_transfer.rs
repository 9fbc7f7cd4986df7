//! Scenario: a follower whose snapshot takes longer to ship than the election
//! timeout catches up without an election. openraft 0.9 sends no heartbeats to
//! a follower while a snapshot is in flight to it; before each snapshot chunk
//! counted as the leader's heartbeat, the follower campaigned a few seconds
//! into the transfer, unseated the leader, and the transfer started over (a
//! 256 MiB group never reached its follower).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const OBJECTS: u64 = 6;
const OBJECT_BYTES: usize = 4 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_transfer() {
    let opts = ClusterOptions {
        shard_count: 1,
        // Snapshot every 16 entries and keep no log behind it (the follower can only
        // catch up by snapshot), with an election timeout well below the transfer time.
        node_env: vec![
            ("SERVICE_RAFT_SNAPSHOT_LOGS".into(), "16".into()),
            ("SERVICE_RAFT_KEEP_LOGS".into(), "0".into()),
            ("SERVICE_RAFT_ELECTION_MIN_MS".into(), "1000".into()),
            ("SERVICE_RAFT_ELECTION_MAX_MS".into(), "1500".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("snapshot_transfer scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// The data group's highest term as the router reports it.
async fn data_group_term(c: &Cluster) -> Result<u64> {
    let info = c.cluster_info().await?;
    let g = info["groups"].as_array().context("groups")?.iter().find(|g| g["id"] == json!(1)).context("group 1")?.clone();
    g["term"].as_u64().context("term")
}

fn object(i: u64) -> Vec<u8> {
    let mut body: Vec<u8> = (0..OBJECT_BYTES).map(|b| (b % 251) as u8).collect();
    body[..8].copy_from_slice(&i.to_be_bytes());
    body
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.post("/api/v1/objects/buckets", &json!({"name": "snap"})).await?.ensure_status(201)?;

    c.stop_node(3).await?;
    for i in 0..OBJECTS {
        let path = format!("/api/v1/objects/buckets/snap/object/o{i}");
        api.send(Method::PUT, &path, Some(object(i)), Some("application/octet-stream")).await?.ensure_status(200)?;
    }
    let term = data_group_term(c).await?;

    c.start_node(3)?;
    wait_for(Duration::from_secs(240), "node 3 to install the data group's snapshot", async || {
        let text = c.node_log_text(3)?;
        Ok(text.lines().any(|l| l.contains("installed snapshot group=1 ")).then_some(()))
    })
    .await?;
    // Node 3 serves every object from its own state.
    let replica = api.replica(3);
    wait_for(Duration::from_secs(60), "node 3 to serve every object from its own state", async || {
        for i in 0..OBJECTS {
            let r = replica.send(Method::GET, &format!("/api/v1/objects/buckets/snap/object/o{i}"), None, None).await?;
            ensure!(r.status == 200, "object o{i} on node 3: {}", r.status);
            ensure!(r.body == object(i), "object o{i} on node 3 differs");
        }
        Ok(Some(()))
    })
    .await?;
    let after = data_group_term(c).await?;
    ensure!(after == term, "the data group held elections while node 3 caught up: term {term} -> {after}");
    Ok(())
}
