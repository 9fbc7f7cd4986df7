//! Scenario: a replica move resumed after its group's leader left the group.
//!
//! Node 3 leads the meta group and node 1 data group 1. Node 4 joins and takes
//! its share: one replica, group 1's from node 1 (the most loaded node with
//! the lowest id). Every node carries the crash point
//! `replica-move-voters-replaced`, so the meta leader kills itself right after
//! group 1's voters became {2, 3, 4}: node 1, which led the group, has left it
//! and stepped down, and the map does not say so yet. The next meta leader
//! resumes the move and asks the map's members of group 1 for their leader.
//! Node 1's replica keeps the vote it won (openraft names it the leader
//! still); it must not answer as the leader (it once did, and the resumed move
//! then waited 110 s on a leader that replicates nothing while the addition
//! answered 504 "no progress"). The addition completes, group 1 lives on nodes
//! 2-4, and every acknowledged write reads back.

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const CRASH_POINT: &str = "replica-move-voters-replaced";
const NEW: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_move_skips_the_leader_that_left_its_group() {
    let options = ClusterOptions {
        shard_count: 2,
        node_env: vec![("SERVICE_TEST_CRASH_POINTS".into(), CRASH_POINT.into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("resumed_move scenario failed: {e:?}\n{}", cluster.log_tails(80));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    lead(&api, 0, 3).await?;
    lead(&api, 1, 1).await?;
    for i in 0..30 {
        api.kv_put(&format!("moved/{i}"), json!(i), None).await?.ensure_status(200)?;
    }

    let addr = c.start_new_node(NEW)?;
    c.set_node_env(NEW, "SERVICE_TEST_CRASH_POINTS", "")?;
    // `quorum`: `all` would wait for the meta leader that kills itself.
    let added = api
        .consistency("quorum")
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": addr}))
        .await?
        .ensure_status(200)?;
    ensure!(added.json["replicas_moved"] == 1, "{added}");
    let crashed = c.reap_exited_nodes();
    ensure!(crashed == vec![3], "the meta leader (node 3) should have stopped at {CRASH_POINT}; stopped: {crashed:?}");

    c.set_node_env(3, "SERVICE_TEST_CRASH_POINTS", "")?;
    c.start_node(3)?;
    wait_for(Duration::from_secs(60), "group 1 on nodes 2, 3 and 4", || async {
        let (members, _) = group_view(&api, 1).await?;
        Ok((members == [2, 3, 4]).then_some(()))
    })
    .await?;
    for i in 0..30 {
        let r = api.kv_get(&format!("moved/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "moved/{i}: {r}");
    }
    Ok(())
}

/// Moves `group`'s leadership to `node`, then drops the preference again (so
/// nothing pins a leader on a node the group may leave).
async fn lead(api: &Http, group: u64, node: u64) -> Result<()> {
    let path = format!("/api/v1/admin/groups/{group}/leader");
    api.put(&path, &json!({"node_id": node})).await?.ensure_status(200)?;
    api.put(&path, &json!({"node_id": null})).await?.ensure_status(200)?;
    let (_, leader) = group_view(api, group).await?;
    ensure!(leader == Some(node), "group {group} is led by {leader:?}, not node {node}");
    Ok(())
}

/// The sorted members and the leader of `id` as `GET /api/v1/admin/cluster` reports them.
async fn group_view(api: &Http, id: u64) -> Result<(Vec<u64>, Option<u64>)> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let g = cluster["groups"].as_array().and_then(|g| g.iter().find(|g| g["id"] == id)).cloned().unwrap_or(Value::Null);
    let mut members: Vec<u64> = g["members"].as_array().map(|m| m.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
    members.sort_unstable();
    Ok((members, g["leader"].as_u64()))
}
