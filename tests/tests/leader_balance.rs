//! The placement driver (`sharding.auto_rebalance`): a node that comes back
//! after a crash leads nothing (its groups elected other leaders); the meta
//! leader's driver hands it its share again, with no client error and nothing
//! lost. An operator then pins group 1's leadership on another node
//! (`PUT /api/v1/admin/groups/1/leader`): the call answers once that node leads
//! it, and after that node crashes and comes back the driver gives the group
//! back to it.

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_balance() {
    let options = ClusterOptions {
        // Five data groups and the meta group: two leaderships per node.
        shard_count: 5,
        node_env: vec![("SERVICE_AUTO_REBALANCE".into(), "true".into()), ("SERVICE_REBALANCE_INTERVAL_SECS".into(), "1".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("leader_balance scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    the_spread_evens_out(&api, None).await?;
    for i in 0..30 {
        api.kv_put(&format!("balance/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    // Node 3 crashes: its groups elect other leaders and keep serving.
    c.kill_node(3)?;
    for i in 30..40 {
        api.kv_put(&format!("balance/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    // Back, it follows everywhere; the driver gives it its share again.
    c.start_node(3)?;
    the_spread_evens_out(&api, Some(3)).await?;
    for i in 0..40 {
        let r = api.kv_get(&format!("balance/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "balance/{i}: {r}");
    }
    a_preferred_leader_keeps_its_group(c, &api).await
}

/// The leader of group `group` as `GET /api/v1/admin/cluster` reports it.
async fn group_leader(api: &Http, group: u64) -> Result<(Option<u64>, Value)> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let g = cluster["groups"].as_array().and_then(|g| g.iter().find(|g| g["id"] == group)).cloned().unwrap_or(Value::Null);
    Ok((g["leader"].as_u64(), g))
}

async fn a_preferred_leader_keeps_its_group(c: &mut Cluster, api: &Http) -> Result<()> {
    let path = "/api/v1/admin/groups/1/leader";
    api.put("/api/v1/admin/groups/99/leader", &json!({"node_id": 1})).await?.ensure_status(404)?;
    api.put(path, &json!({"node_id": 9})).await?.ensure_status(409)?;
    api.put(path, &json!({})).await?.ensure_status(400)?;
    let (leader, _) = group_leader(api, 1).await?;
    let preferred = (1..=3).find(|n| Some(*n) != leader).unwrap_or(1);
    let set = api.put(path, &json!({"node_id": preferred})).await?.ensure_status(200)?;
    ensure!(set.json["leader"] == preferred, "{set}");
    let (now, group) = group_leader(api, 1).await?;
    ensure!(now == Some(preferred) && group["preferred_leader"] == preferred, "{group}");
    eprintln!("[leader_balance] group 1 pinned on node {preferred} (was led by {leader:?}): {}", set.json);

    // The preferred node crashes: another leads group 1 meanwhile; back, it leads it again.
    c.kill_node(preferred)?;
    api.kv_put("balance/pinned", json!(1), None).await?.ensure_status(200)?;
    c.start_node(preferred)?;
    wait_for(Duration::from_secs(90), "the preferred node leads group 1 again", || async {
        Ok((group_leader(api, 1).await?.0 == Some(preferred)).then_some(()))
    })
    .await?;
    let cleared = api.put(path, &json!({"node_id": null})).await?.ensure_status(200)?;
    ensure!(cleared.json["preferred_leader"].is_null(), "{cleared}");
    ensure!(group_leader(api, 1).await?.1["preferred_leader"].is_null(), "the preference is cleared");
    let r = api.kv_get("balance/pinned").await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!(1), "{r}");
    Ok(())
}

/// Waits until every node leads two of the six groups (and `node`, when
/// given, answers and leads some).
async fn the_spread_evens_out(api: &Http, node: Option<u64>) -> Result<()> {
    wait_for(Duration::from_secs(90), "every node leads two groups", || async {
        let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
        let led: Vec<(u64, usize)> = nodes["nodes"]
            .as_array()
            .map(|n| n.iter().filter_map(|n| Some((n["id"].as_u64()?, n["groups_led"].as_array().map_or(0, Vec::len)))).collect())
            .unwrap_or_default();
        let even = led.len() == 3 && led.iter().all(|(_, n)| *n == 2);
        let back = node.is_none_or(|id| {
            nodes["nodes"].as_array().is_some_and(|n| n.iter().any(|n| n["id"] == id && n["reachable"] == Value::Bool(true)))
        });
        if even && back {
            eprintln!("[leader_balance] spread: {}", nodes["spread"]);
        }
        Ok((even && back).then_some(()))
    })
    .await
}
