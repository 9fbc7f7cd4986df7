//! Scenario: a node's data directory is rolled back to an older copy (a
//! restored volume, a VM snapshot). Like a wiped one, it has forgotten votes
//! and entries it acknowledged, but it keeps its incarnation. Node 3's
//! directory is copied; node 3 runs again on it and acknowledges a write node 2
//! never saw; then node 3's directory is put back to the copy and node 1 goes
//! down. Node 3's vote would let node 2 (which lacks the write) lead and answer
//! 404 for an acknowledged key. Node 2 heard a later generation from node 3
//! than the copy holds, so node 3 learns at its start that it went back in
//! time: it neither votes nor campaigns. The group waits for node 1, and the
//! write is there when node 1 is back.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_node() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 1, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("rolled_back_node scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// Copies a directory tree (the "snapshot" of a stopped node's volume).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Node `id`'s log since its latest start.
fn log_of_this_start(c: &Cluster, id: u64) -> Result<String> {
    let log = c.node_log_text(id)?;
    let marker = format!("starting node {id} (start #");
    Ok(log.rfind(&marker).map_or(log.clone(), |at| log[at..].to_string()))
}

async fn data_group_leader(c: &Cluster) -> Result<Option<u64>> {
    let info = c.cluster_info().await?;
    let g = info["groups"].as_array().context("groups")?.iter().find(|g| g["id"] == json!(1)).context("group 1")?.clone();
    Ok(g["leader"].as_u64())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.kv_put("rolled/before", json!(0), None).await?.ensure_status(200)?;

    // A copy of node 3's volume, taken while it is stopped.
    c.stop_node(3).await?;
    let dir = c.node_data_dir(3)?;
    let copy = dir.with_file_name("node3-copy");
    copy_tree(&dir, &copy)?;
    c.start_node(3)?;
    // Node 3 runs on: it tells its peers a later generation of its directory.
    wait_for(Duration::from_secs(60), "node 3 to tell its peers its generation", async || {
        Ok(log_of_this_start(c, 3)?.contains("told every peer this data directory's generation").then_some(()))
    })
    .await?;
    wait_for(Duration::from_secs(60), "node 3 to vote again", async || {
        Ok(log_of_this_start(c, 3)?.contains("peers confirmed this data directory is current").then_some(()))
    })
    .await?;

    // Node 2 misses a write that nodes 1 and 3 acknowledge.
    c.stop_node(2).await?;
    api.kv_put("rolled/acked", json!("acked"), None).await?.ensure_status(200)?;

    // Node 3's volume goes back to the copy; node 1 goes down; nodes 2 and 3 come back.
    c.stop_node(3).await?;
    std::fs::remove_dir_all(&dir)?;
    std::fs::rename(&copy, &dir)?;
    c.stop_node(1).await?;
    c.start_node(2)?;
    let node2 = c.node_addr(2)?;
    wait_for(Duration::from_secs(60), "node 2 to listen", async || Ok(tokio::net::TcpStream::connect(&node2).await.ok().map(|_| ())))
        .await?;
    c.start_node(3)?;

    // Node 2 campaigns again and again; the rolled-back node must not vote for it.
    let quick = api.timeout(Duration::from_secs(3));
    let verdict = wait_for(Duration::from_secs(120), "node 2 to be refused three votes by the rolled-back node", async || {
        if let Ok(r) = quick.kv_get("rolled/acked").await
            && r.status == 404
        {
            return Ok(Some(Err(format!(
                "an acknowledged write was lost: the rolled-back node's vote elected a leader without it (served by {:?}): {r}",
                r.served_by()
            ))));
        }
        if let Ok(leader) = data_group_leader(c).await
            && leader.is_some_and(|l| l != 1)
        {
            return Ok(Some(Err(format!("group 1 elected node {leader:?} while node 1 was down"))));
        }
        let log = c.node_log_text(2)?;
        let refused = log.lines().filter(|l| l.contains("vote") && l.contains("rolled back")).count();
        Ok((refused >= 3).then_some(Ok(())))
    })
    .await?;
    verdict.map_err(anyhow::Error::msg)?;
    ensure!(
        c.node_log_text(3)?.contains("this node's data directory was rolled back to an older copy"),
        "node 3's log does not say that its directory was rolled back"
    );

    // With node 1 back the group elects a leader that has the write, and the
    // rolled-back node catches up as a replica.
    c.start_node(1)?;
    wait_for(Duration::from_secs(60), "the acknowledged write after node 1 is back", async || {
        let r = quick.kv_get("rolled/acked").await?;
        ensure!(r.status != 404, "an acknowledged write was lost: {r}");
        Ok((r.status == 200 && r.json["value"] == json!("acked")).then_some(()))
    })
    .await?;
    let replica = api.replica(3);
    wait_for(Duration::from_secs(60), "the rolled-back node serves the write from its own state", async || {
        let r = replica.kv_get("rolled/acked").await?;
        Ok((r.status == 200).then_some(()))
    })
    .await?;
    api.kv_put("rolled/after", json!(1), None).await?.ensure_status(200)?;
    Ok(())
}
