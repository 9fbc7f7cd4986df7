//! Scenario (issue 35, defect 8): a replica that moves away leaves nothing of
//! itself on the node it left, even when its state machine was still applying.
//!
//! openraft runs applies on blocking threads that can outlive the replica's
//! `Raft::shutdown`. Every node of the three here applies slowly
//! (`SERVICE_TEST_APPLY_DELAY_MS`, held inside the apply as real work would
//! be) while writers keep every group busy, so when node 4 joins and the
//! placement driver moves a replica to it, the replica it drops is in the
//! middle of an apply. Before the fix that straggler wrote the group's records
//! (`SM_APPLIED` among them) after the group's data was deleted: orphan keys a
//! later split or re-hosting would read as the group's state. Now the deletion
//! waits for it, and later work on the dropped replica is refused. The node's
//! disk is opened once the node has stopped: no record of the moved group is
//! left but its vote floor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const NEW: u64 = 4;
const APPLY_DELAY_MS: &str = "300";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_dropped_while_it_applies_leaves_no_record_behind() {
    let options = ClusterOptions {
        shard_count: 2,
        node_env: vec![("SERVICE_TEST_APPLY_DELAY_MS".into(), APPLY_DELAY_MS.into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("dropped_replica failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// Each data group's members, as the router reports them.
async fn members(c: &Cluster) -> Result<Vec<(u64, Vec<u64>)>> {
    let info = c.cluster_info().await?;
    let groups = info["groups"].as_array().context("groups")?;
    Ok(groups
        .iter()
        .filter(|g| g["id"] != json!(0))
        .map(|g| {
            let ids = g["members"].as_array().map(|m| m.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
            (g["id"].as_u64().unwrap_or(0), ids)
        })
        .collect())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.timeout(Duration::from_secs(30));
    let before = members(c).await?;
    let writers = Writers::start(&api);
    wait_for(Duration::from_secs(60), "writes acknowledged in every group", async || {
        Ok((writers.acknowledged().await.len() >= 40).then_some(()))
    })
    .await?;

    let addr = c.start_new_node(NEW)?;
    let added = api
        .timeout(Duration::from_secs(180))
        .post("/api/v1/admin/nodes", &json!({"node_id": NEW, "address": addr}))
        .await?
        .ensure_status(200)?;
    ensure!(added.json["replicas_moved"] == 1, "{added}");
    let acknowledged = writers.stop().await?;

    let after = members(c).await?;
    let (group, source) = before
        .iter()
        .find_map(|(id, was)| {
            let now = &after.iter().find(|(g, _)| g == id)?.1;
            was.iter().find(|n| !now.contains(n)).map(|n| (*id, *n))
        })
        .with_context(|| format!("no replica moved: before {before:?}, after {after:?}"))?;
    let kept: Vec<u64> = after.iter().filter(|(_, m)| m.contains(&source)).map(|(g, _)| *g).collect();
    eprintln!("[dropped_replica] group {group} moved from node {source} to node {NEW}; {} writes acknowledged", acknowledged.len());
    let log = c.node_log(source)?;
    wait_for(Duration::from_secs(60), "the source node to drop its replica", async || {
        Ok(std::fs::read_to_string(&log)?.contains("dropped this node's replica").then_some(()))
    })
    .await?;

    // Every acknowledged write reads back.
    for key in &acknowledged {
        let r = api.kv_get(key).await?;
        ensure!(r.status == 200 && r.json["value"] == json!(key), "acknowledged write {key} lost: {r}");
    }

    // A clean stop lets any apply still running finish; then the disk is read.
    c.stop_node(source).await?;
    let store = tessera_storage::Store::open(c.node_data_dir(source)?.join("rocksdb"))?;
    let on_disk = store.groups_with_records()?;
    ensure!(
        !on_disk.contains(&group),
        "node {source} still holds records of group {group}, whose replica moved away (groups on its disk: {on_disk:?})"
    );
    for g in &kept {
        ensure!(on_disk.contains(g), "node {source} lost group {g}, which it still hosts (groups on its disk: {on_disk:?})");
    }
    Ok(())
}

/// Writers keeping every group's state machine busy until stopped.
struct Writers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
    acknowledged: Arc<tokio::sync::Mutex<Vec<String>>>,
}

impl Writers {
    fn start(api: &Http) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        let tasks = (0..6)
            .map(|w| {
                let (api, stop, acknowledged) = (api.clone(), stop.clone(), acknowledged.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("dropped/{w}/{i}");
                        i += 1;
                        // Writes that fail during the move are not acknowledged; only those that are count.
                        if let Ok(r) = api.kv_put(&key, json!(key), None).await
                            && r.status == 200
                        {
                            acknowledged.lock().await.push(key);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        Writers { stop, tasks, acknowledged }
    }

    async fn acknowledged(&self) -> Vec<String> {
        self.acknowledged.lock().await.clone()
    }

    async fn stop(self) -> Result<Vec<String>> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await??;
        }
        Ok(self.acknowledged.lock().await.clone())
    }
}
