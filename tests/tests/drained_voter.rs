//! Scenario (issue 35, found by the control-plane chaos profile): a drained
//! node is still a voter of its groups, and when its log is the longest among
//! the live voters it is the only replica that can be elected. It must then
//! campaign as a last resort (and hand the leadership on once its entries are
//! replicated) rather than leave the group without a leader.
//!
//! Groups of three voters: L leads, D is drained, S is stopped. A write is
//! acknowledged by L and D; then L dies and S comes back. S lacks the write, so
//! D refuses S its vote; before the fix D never campaigned (drained), and the
//! group stayed leaderless while two of its three voters were up (the chaos
//! run's drain of node 4 waited 60 s for a leader of group 2 that never came).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_voter_with_the_longest_log_still_lets_its_group_elect_a_leader() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 2, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("drained_voter failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// Leader of `group` as the router reports it.
async fn leader_of(c: &Cluster, group: u64) -> Result<Option<u64>> {
    let info = c.cluster_info().await?;
    let g = info["groups"].as_array().context("groups")?.iter().find(|g| g["id"] == json!(group)).context("group")?.clone();
    Ok(g["leader"].as_u64())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.timeout(Duration::from_secs(20));
    let put = api.kv_put("drained/k", json!("before"), None).await?.ensure_status(200)?;
    let group: u64 = put.group().context("group header")?.parse()?;
    let leader = wait_for(Duration::from_secs(30), "a leader of the key's group", async || leader_of(c, group).await).await?;
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|n| *n != leader).collect();
    let (drained, stopped) = (others[0], others[1]);

    api.post(&format!("/api/v1/admin/nodes/{drained}/drain"), &json!({})).await?.ensure_status(200)?;
    ensure!(leader_of(c, group).await? == Some(leader), "the drain moved group {group}'s leadership off node {leader}");
    c.kill_node(stopped)?;
    // Acknowledged by the leader and the drained node only.
    api.kv_put("drained/k", json!("acknowledged"), None).await?.ensure_status(200)?;
    c.kill_node(leader)?;
    c.start_node(stopped)?;

    // Two of three voters are up: the group must serve again, with the write.
    let quorum = api.consistency("quorum").timeout(Duration::from_secs(5));
    wait_for(Duration::from_secs(90), "a quorum read of the acknowledged write", async || {
        let r = quorum.kv_get("drained/k").await?;
        Ok((r.status == 200 && r.json["value"] == json!("acknowledged")).then_some(()))
    })
    .await?;
    api.kv_put("drained/k", json!("after"), None).await?.ensure_status(200)?;
    // The drained node does not keep the leadership it took as a last resort.
    let what = format!("node {stopped} to lead group {group}");
    wait_for(Duration::from_secs(60), &what, async || Ok((leader_of(c, group).await? == Some(stopped)).then_some(()))).await?;
    let r = quorum.kv_get("drained/k").await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!("after"), "read {r}");
    Ok(())
}
