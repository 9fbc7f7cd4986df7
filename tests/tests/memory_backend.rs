//! Scenario: a cluster for tests or ephemeral use runs with
//! `storage.backend = memory`: every node keeps its RocksDB in memory, so it
//! writes no data files, and the cluster serves key-value and SQL through the
//! router as a disk-backed one does (nothing survives a node's restart). The
//! effective configuration of the router and of every node, secrets
//! redacted, shows the backend.

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_backed_cluster_serves_and_writes_no_data_files() {
    let options =
        ClusterOptions { shard_count: 2, node_env: vec![("SERVICE_STORAGE_BACKEND".into(), "memory".into())], ..ClusterOptions::default() };
    let cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("memory backend scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    for i in 0..30 {
        api.kv_put(&format!("mem/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    for i in 0..30 {
        let r = api.kv_get(&format!("mem/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "{r}");
    }
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"})).await?.ensure_status(200)?;
    api.post("/api/v1/query", &json!({"sql": "INSERT INTO t VALUES (1, 'a'), (2, 'b')"})).await?.ensure_status(200)?;
    let rows = api.post("/api/v1/query", &json!({"sql": "SELECT v FROM t ORDER BY id"})).await?.ensure_status(200)?;
    ensure!(rows.json["data"]["rows"] == json!([["a"], ["b"]]), "{rows}");
    for id in 1..=3u64 {
        let db = c.node_data_dir(id)?.join("rocksdb");
        let files: Vec<String> =
            std::fs::read_dir(&db).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
        ensure!(
            !files.iter().any(|f| f.ends_with(".sst") || f.ends_with(".log") || f == "CURRENT"),
            "node {id} wrote data files: {files:?}"
        );
        ensure!(c.node_log_text(id)?.contains("in memory"), "node {id} says its data is in memory");
    }
    let config = api.get("/api/v1/admin/config").await?.ensure_status(200)?;
    ensure!(!config.text.contains(tessera_tests::ADMIN_PASSWORD), "the admin password is redacted: {}", config.text);
    ensure!(config.json["router"]["config"]["server"]["port"].as_u64().is_some(), "{config}");
    for id in ["1", "2", "3"] {
        ensure!(config.json["nodes"][id]["config"]["storage"]["backend"] == "memory", "node {id}: {}", config.json["nodes"][id]);
    }
    Ok(())
}
