//! Scenario: a node whose data directory was wiped has forgotten its votes and
//! the entries it acknowledged, so it must not act as a voter again. Node 3
//! acknowledges a write node 2 never saw; then node 3 is wiped and node 1 goes
//! down. Started again with the default `new` state, the wiped node would
//! grant node 2 its vote, and node 2 (which lacks the write) would lead and
//! answer 404 for an acknowledged key. Its peers know it was wiped (its node
//! incarnation changed), so they ignore its votes: the group waits for node 1,
//! and the write is there when node 1 is back. The wiped node learns from node
//! 2 at its start that it was wiped and never campaigns; it still catches up as
//! a replica.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_node() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 1, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("wiped_node scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// The data group's leader as the router reports it.
async fn data_group_leader(c: &Cluster) -> Result<Option<u64>> {
    let info = c.cluster_info().await?;
    let g = info["groups"].as_array().context("groups")?.iter().find(|g| g["id"] == json!(1)).context("group 1")?.clone();
    Ok(g["leader"].as_u64())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.kv_put("wiped/before", json!(0), None).await?.ensure_status(200)?;
    // Every node has learned its peers' incarnations (at start, from their status).
    wait_for(Duration::from_secs(60), "every node to know its peers' incarnations", async || {
        for node in 1..=3 {
            let log = std::fs::read_to_string(c.node_log(node)?)?;
            if !log.contains("knows the incarnation of every peer") {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;

    // Node 2 misses a write that nodes 1 and 3 acknowledge.
    c.stop_node(2).await?;
    api.kv_put("wiped/acked", json!("acked"), None).await?.ensure_status(200)?;

    // Node 3 loses its disk, node 1 goes down; node 2 and the wiped node 3 come back.
    c.stop_node(3).await?;
    let dir = c.node_data_dir(3)?;
    std::fs::remove_dir_all(&dir)?;
    std::fs::create_dir_all(&dir)?;
    c.stop_node(1).await?;
    c.start_node(2)?;
    let node2 = c.node_addr(2)?;
    wait_for(Duration::from_secs(60), "node 2 to listen", async || Ok(tokio::net::TcpStream::connect(&node2).await.ok().map(|_| ())))
        .await?;
    c.start_node(3)?;

    // Node 2 campaigns again and again; the wiped node's vote must not elect it.
    // (A loss or a wrong leader ends the wait at once.)
    let quick = api.timeout(Duration::from_secs(3));
    let verdict = wait_for(Duration::from_secs(120), "node 2 to ask three times for votes that do not count", async || {
        if let Ok(r) = quick.kv_get("wiped/acked").await
            && r.status == 404
        {
            return Ok(Some(Err(format!(
                "an acknowledged write was lost: the wiped node's vote elected a leader without it (served by {:?}): {r}",
                r.served_by()
            ))));
        }
        if let Ok(leader) = data_group_leader(c).await
            && leader.is_some_and(|l| l != 1)
        {
            return Ok(Some(Err(format!("group 1 elected node {leader:?} while node 1 was down"))));
        }
        // Node 2's log names each vote of node 3 it did not count.
        let log = std::fs::read_to_string(c.node_log(2)?)?;
        let refused = log.lines().filter(|l| l.contains("requesting vote") && l.contains("data directory was replaced")).count();
        Ok((refused >= 3).then_some(Ok(())))
    })
    .await?;
    verdict.map_err(anyhow::Error::msg)?;

    // With node 1 back the group elects a leader that has the write.
    c.start_node(1)?;
    wait_for(Duration::from_secs(60), "the acknowledged write after node 1 is back", async || {
        let r = quick.kv_get("wiped/acked").await?;
        ensure!(r.status != 404, "an acknowledged write was lost: {r}");
        Ok((r.status == 200 && r.json["value"] == json!("acked")).then_some(()))
    })
    .await?;
    // The wiped node catches up as a replica, and the cluster takes writes.
    let replica = api.replica(3);
    wait_for(Duration::from_secs(60), "the wiped node serves the write from its own state", async || {
        let r = replica.kv_get("wiped/acked").await?;
        Ok((r.status == 200).then_some(()))
    })
    .await?;
    api.kv_put("wiped/after", json!(1), None).await?.ensure_status(200)?;
    // Node 3 learned from node 2 at its start that it was wiped: it said so, and
    // it never campaigned.
    let log = std::fs::read_to_string(c.node_log(3)?)?;
    ensure!(log.contains("this node's data directory was replaced"), "node 3's log does not say that it was wiped");
    ensure!(!log.contains("requesting vote"), "the wiped node campaigned");
    Ok(())
}
