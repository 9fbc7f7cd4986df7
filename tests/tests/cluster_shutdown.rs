//! Scenario: an admin shuts the whole cluster down. A viewer may not (403);
//! without `{"confirm": true}` it is 400 and nothing stops.
//! `POST /api/v1/admin/cluster/shutdown {"confirm": true}` answers, then every node and the router
//! exit cleanly (status 0) on their own; started again on the same data
//! directories, the cluster serves every key and row written before.

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions, NODE_IDS};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_shutdown() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 4, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("cluster_shutdown scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    for i in 0..50 {
        api.kv_put(&format!("before/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let sql = |text: &str| json!({"sql": text, "database": "shut"});
    api.post("/api/v1/query", &sql("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")).await?.ensure_status(200)?;
    api.post("/api/v1/query", &sql("INSERT INTO t VALUES (1, 'one'), (2, 'two')")).await?.ensure_status(200)?;

    api.post(
        "/api/v1/admin/users",
        &json!({
            "username": "vic", "email": "vic@example.com", "password": "Viewer-Pass-123!", "role": "viewer"
        }),
    )
    .await?
    .ensure_status(201)?;
    let viewer = api.anonymous().login_as("vic", "Viewer-Pass-123!").await?;
    viewer.post("/api/v1/admin/cluster/shutdown", &json!({"confirm": true})).await?.ensure_status(403)?;
    // Without the confirmation nothing stops.
    for body in [json!({}), json!({"confirm": false}), json!({"confirm": true, "also": 1})] {
        api.post("/api/v1/admin/cluster/shutdown", &body).await?.ensure_status(400)?;
    }
    api.kv_get("before/0").await?.ensure_status(200)?;

    let r = api.post("/api/v1/admin/cluster/shutdown", &json!({"confirm": true})).await?.ensure_status(200)?;
    ensure!(r.json["nodes_stopping"] == json!([1, 2, 3]) && r.json["router_stopping"] == true, "{r}");
    for id in NODE_IDS {
        let status = c.wait_node_exit(id, Duration::from_secs(60)).await?;
        ensure!(status.success(), "node {id} stops cleanly: {status}");
    }
    let status = c.wait_router_exit(0, Duration::from_secs(30)).await?;
    ensure!(status.success(), "the router stops cleanly: {status}");

    c.start_all().await?;
    let api = c.http.clone();
    for i in 0..50 {
        let r = api.kv_get(&format!("before/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "before/{i}: {r}");
    }
    let rows = api.post("/api/v1/query", &sql("SELECT v FROM t ORDER BY id")).await?.ensure_status(200)?;
    ensure!(rows.json["data"]["rows"] == json!([["one"], ["two"]]), "{rows}");
    Ok(())
}
