//! The placement driver (`sharding.auto_rebalance`): a node that comes back
//! after a crash leads nothing (its groups elected other leaders); the meta
//! leader's driver hands it its share again, with no client error and nothing
//! lost.

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_balance() {
    let options = ClusterOptions {
        // Five data groups and the meta group: two leaderships per node.
        shard_count: 5,
        node_env: vec![
            ("SERVICE_AUTO_REBALANCE".into(), "true".into()),
            ("SERVICE_REBALANCE_INTERVAL_SECS".into(), "1".into()),
        ],
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
    Ok(())
}

/// Waits until every node leads two of the six groups (and `node`, when
/// given, answers and leads some).
async fn the_spread_evens_out(api: &Http, node: Option<u64>) -> Result<()> {
    wait_for(Duration::from_secs(90), "every node leads two groups", || async {
        let nodes = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
        let led: Vec<(u64, usize)> = nodes["nodes"]
            .as_array()
            .map(|n| {
                n.iter()
                    .filter_map(|n| Some((n["id"].as_u64()?, n["groups_led"].as_array().map_or(0, Vec::len))))
                    .collect()
            })
            .unwrap_or_default();
        let even = led.len() == 3 && led.iter().all(|(_, n)| *n == 2);
        let back = node.is_none_or(|id| nodes["nodes"].as_array().is_some_and(|n| n.iter().any(|n| n["id"] == id && n["reachable"] == Value::Bool(true))));
        if even && back {
            eprintln!("[leader_balance] spread: {}", nodes["spread"]);
        }
        Ok((even && back).then_some(()))
    })
    .await
}
