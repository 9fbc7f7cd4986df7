//! Scenario: nodes configured with `storage.retention.default_duration = 1h`
//! (and an enforcement every second) drop old points of a metric that has no
//! retention policy of its own, keep its recent points, and leave a metric
//! whose own policy keeps more alone.

use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_points_of_metrics_without_a_policy_are_dropped() {
    let node_env = vec![
        ("SERVICE_RETENTION_DEFAULT_DURATION".to_string(), "1h".to_string()),
        ("SERVICE_RETENTION_ENFORCE_INTERVAL".to_string(), "1s".to_string()),
    ];
    let cluster = Cluster::start(ClusterOptions { shard_count: 2, node_env, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&cluster.http).await {
        panic!("default retention scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn points(api: &Http, metric: &str) -> Result<usize> {
    let r = api.post("/api/v1/timeseries/query", &json!({"metric": metric, "start": 0})).await?.ensure_status(200)?;
    let series = r.json["series"].as_array().cloned().unwrap_or_default();
    Ok(r.json["points"].as_array().map_or(0, Vec::len)
        + series.iter().map(|s: &Value| s["points"].as_array().map_or(0, Vec::len)).sum::<usize>())
}

async fn scenario(api: &Http) -> Result<()> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    let day = 86_400_000i64;
    let old_and_new = |metric: &str| {
        let pts: Vec<Value> = (0..30)
            .map(|i| json!({"timestamp": now - 2 * day + i * 60_000, "value": 1.0, "tags": {"host": "a"}}))
            .chain((0..5).map(|i| json!({"timestamp": now - i * 60_000, "value": 2.0, "tags": {"host": "a"}})))
            .collect();
        json!({"metric": metric, "points": pts})
    };
    api.post("/api/v1/timeseries/metrics", &json!({"name": "own", "type": "gauge"})).await?;
    api.put("/api/v1/timeseries/metrics/own/retention", &json!({"drop_after": "30d"})).await?.ensure_status(200)?;
    api.post("/api/v1/timeseries/write", &old_and_new("plain")).await?.ensure_status(200)?;
    api.post("/api/v1/timeseries/write", &old_and_new("own")).await?.ensure_status(200)?;
    wait_for(Duration::from_secs(30), "the default retention drops the old points of `plain`", || async {
        Ok((points(api, "plain").await? == 5).then_some(()))
    })
    .await?;
    anyhow::ensure!(points(api, "own").await? == 35, "a metric's own policy wins over the default");
    Ok(())
}
