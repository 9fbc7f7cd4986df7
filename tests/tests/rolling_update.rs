//! Scenario: an operator updates a running three-node cluster to a new node
//! binary, one node at a time, while a key-value writer runs. The plan lists
//! the meta group's followers first and its leader last; a binary the nodes
//! do not have stops the update at the first node and is reported; then the
//! update runs: each node gives up its leaderships, restarts onto the new
//! binary (its process now runs that file) and is caught up before the next
//! one. No acknowledged write is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions, Http};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_onto_a_new_binary() {
    let cluster = Cluster::start(ClusterOptions { shard_count: 2, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("rolling_update scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    // The "new release": a copy of the node binary at another path.
    let next = c.root().join("release-next");
    std::fs::create_dir_all(&next)?;
    let binary = next.join("tessera-node");
    std::fs::copy(tessera_tests::binary("tessera-node")?, &binary)?;
    let binary = binary.canonicalize()?;
    let path = binary.display().to_string();

    api.post("/api/v1/admin/update/plan", &json!({})).await?.ensure_status(400)?;
    api.post("/api/v1/admin/update/plan", &json!({"binary": "relative/tessera-node"})).await?.ensure_status(400)?;
    let plan = api.post("/api/v1/admin/update/plan", &json!({"binary": path})).await?.ensure_status(200)?;
    eprintln!("[rolling_update] plan: {}", plan.json);
    ensure!(plan.json["ready"] == true, "{plan}");
    let order = plan.json["order"].as_array().cloned().unwrap_or_default();
    ensure!(order.len() == 3 && order[2]["leads_meta_group"] == true, "the meta leader goes last: {plan}");

    let missing = api.post("/api/v1/admin/update/execute", &json!({"binary": "/nonexistent/tessera-node"})).await?.ensure_status(200)?;
    ensure!(missing.json["completed"] == false && missing.json["updated"].as_array().is_some_and(Vec::is_empty), "{missing}");
    ensure!(missing.json["failed"]["error"].as_str().is_some_and(|e| e.contains("/nonexistent/tessera-node")), "{missing}");

    let writer = Writer::start(&api);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let done =
        api.timeout(Duration::from_secs(300)).post("/api/v1/admin/update/execute", &json!({"binary": path})).await?.ensure_status(200)?;
    eprintln!("[rolling_update] execute: {}", done.json);
    let acked = writer.stop().await?;
    ensure!(done.json["completed"] == true && done.json["updated"].as_array().is_some_and(|u| u.len() == 3), "{done}");
    for id in 1..=3u64 {
        let pid = c.node_pid(id).ok_or_else(|| anyhow::anyhow!("node {id} is not running"))?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
        ensure!(exe == binary, "node {id} runs {} (pid {pid}), not the new binary", exe.display());
    }
    for i in &acked {
        let r = api.kv_get(&format!("upd/{i}")).await?;
        ensure!(r.status == 200 && r.json["value"] == json!(i), "acknowledged write upd/{i} lost: {r}");
    }
    eprintln!("[rolling_update] {} writes acknowledged during the update, none lost", acked.len());
    ensure!(acked.len() > 10, "the writer ran through the update");
    Ok(())
}

/// One KV writer, one put at a time; a put that fails is retried (the router
/// retries too), and only acknowledged puts are checked.
struct Writer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<u64>>,
}

impl Writer {
    fn start(api: &Http) -> Self {
        let (api, stop) = (api.timeout(Duration::from_secs(30)), Arc::new(AtomicBool::new(false)));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !flag.load(Ordering::SeqCst) {
                if let Ok(r) = api.kv_put(&format!("upd/{i}"), json!(i), None).await
                    && r.status == 200
                {
                    acked.push(i);
                }
                i += 1;
            }
            acked
        });
        Writer { stop, task }
    }

    async fn stop(self) -> Result<Vec<u64>> {
        self.stop.store(true, Ordering::SeqCst);
        Ok(self.task.await?)
    }
}
