//! Range sharding (`sharding.strategy = range`): a key-value workload over
//! sorted keys makes its range split at least twice while writers run; no
//! write fails or is lost, prefix lists stay complete and in key order across
//! the splits, and a split-off group survives the loss of a node.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const KEYS: usize = 600;
const WRITERS: usize = 2;

/// Range sharding with small thresholds, so a few hundred keys split the range
/// twice or more; `extra` node settings on top.
fn range_options(extra: &[(&str, &str)]) -> ClusterOptions {
    let mut node_env: Vec<(String, String)> = vec![
        ("SERVICE_SHARDING_STRATEGY".into(), "range".into()),
        ("SERVICE_SPLIT_THRESHOLD_KEYS".into(), "150".into()),
        ("SERVICE_SPLIT_CHECK_INTERVAL_SECS".into(), "1".into()),
    ];
    node_env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    ClusterOptions { shard_count: 2, node_env, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_split() {
    let mut cluster = Cluster::start(range_options(&[])).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("range_split scenario failed: {e:?}\n{}", cluster.log_tails(60));
    }
}

/// A node down while the range splits comes back to a log purged past the
/// splits: it installs a snapshot of the parent (which records the splits but
/// not the children's data), starts empty replicas of the split-off groups,
/// and their leaders fill them with snapshots; then it serves every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_the_splits_catches_up() {
    // Purge the log soon, so the returning node cannot replay the splits.
    let options = range_options(&[("SERVICE_RAFT_SNAPSHOT_LOGS", "40"), ("SERVICE_RAFT_KEEP_LOGS", "5")]);
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = missed_splits(&mut cluster).await {
        panic!("a_node_that_missed_the_splits_catches_up failed: {e:?}\n{}", cluster.log_tails(60));
    }
}

async fn missed_splits(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    c.kill_node(3)?;
    for i in 0..KEYS {
        api.kv_put(&key(i), json!({"n": i}), None).await?.ensure_status(200)?;
    }
    let split = wait_for(Duration::from_secs(90), "the range splits twice with node 3 down", || async {
        let r = ranges(&api).await?;
        Ok((r.len() >= 3).then_some(r))
    })
    .await?;
    eprintln!("[range_split] ranges while node 3 was down: {}", Value::Array(split));
    // Every range takes writes after its split, so each group snapshots and
    // purges its log past the split records.
    for round in 0..2 {
        for i in 0..KEYS {
            api.kv_put(&key(i), json!({"n": i, "round": round}), None).await?.ensure_status(200)?;
        }
    }
    c.start_node(3)?;
    let from_node_3 = api.consistency("one").replica(3);
    wait_for(Duration::from_secs(90), "node 3 serves every key from its own replicas", || async {
        for i in (0..KEYS).step_by(7) {
            let r = from_node_3.kv_get(&key(i)).await?;
            if r.status != 200 || r.json["value"] != json!({"n": i, "round": 1}) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    let (keys, total) = from_node_3.kv_list_keys("user:", Some(10_000)).await?;
    ensure!(total == KEYS as u64 && keys == (0..KEYS).map(key).collect::<Vec<_>>(), "node 3's listing: {total}");
    Ok(())
}

/// Write load alone splits a range: twenty keys (far under the size
/// thresholds) written over and over at more log entries per second than
/// `sharding.split_threshold_writes_per_sec`; every key reads back its last
/// value and the prefix list stays complete and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_range_splits_on_write_load() {
    let options = range_options(&[("SERVICE_SPLIT_THRESHOLD_KEYS", "1000000"), ("SERVICE_SPLIT_THRESHOLD_WRITES_PER_SEC", "20")]);
    let cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = hot_range(&cluster).await {
        panic!("a_hot_range_splits_on_write_load failed: {e:?}\n{}", cluster.log_tails(60));
    }
}

async fn hot_range(c: &Cluster) -> Result<()> {
    const HOT_KEYS: usize = 20;
    let api = c.http.clone();
    let mut last = BTreeMap::new();
    let started = Instant::now();
    let mut round = 0;
    let split = loop {
        for i in 0..HOT_KEYS {
            api.kv_put(&key(i), json!({"round": round}), None).await?.ensure_status(200)?;
            last.insert(key(i), round);
        }
        round += 1;
        let r = ranges(&api).await?;
        if r.len() >= 2 {
            break r;
        }
        ensure!(started.elapsed() < Duration::from_secs(90), "no split on write load in 90 s ({round} rounds)");
    };
    eprintln!("[range_split] split on write load after {:?} ({round} rounds of {HOT_KEYS} puts): {split:?}", started.elapsed());
    let why = (1..=3u64).any(|id| c.node_log_text(id).is_ok_and(|log| log.contains("write load")));
    ensure!(why, "the splitter logs the write load as the reason");
    for (k, round) in &last {
        let r = api.kv_get(k).await?.ensure_status(200)?;
        ensure!(r.json["value"]["round"] == json!(round), "{k}: {r}");
    }
    let (keys, _) = api.kv_list_keys("user:", Some(1_000)).await?;
    let wanted: Vec<String> = last.keys().cloned().collect();
    ensure!(keys == wanted, "prefix list across the split: {keys:?}");
    Ok(())
}

fn key(i: usize) -> String {
    format!("user:{i:05}")
}

async fn ranges(api: &Http) -> Result<Vec<Value>> {
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    ensure!(cluster["sharding"]["strategy"] == "range", "strategy: {}", cluster["sharding"]);
    Ok(cluster["sharding"]["ranges"].as_array().cloned().unwrap_or_default())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let start = ranges(&api).await?;
    ensure!(start.len() == 1 && start[0]["start"] == "" && start[0]["end"].is_null(), "one range at start: {start:?}");

    // Writers put sorted keys (each its own slice, in order); every write must succeed.
    let t0 = Instant::now();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            let mut worst = Duration::ZERO;
            for i in (w..KEYS).step_by(WRITERS) {
                let began = Instant::now();
                let r = api.kv_put(&key(i), json!({"n": i}), None).await?;
                ensure!(r.status == 200, "put {} failed during splits: {r}", key(i));
                worst = worst.max(began.elapsed());
            }
            anyhow::Ok(worst)
        }));
    }
    let mut worst = Duration::ZERO;
    for w in writers {
        worst = worst.max(w.await??);
    }
    eprintln!("[range_split] {KEYS} puts in {:?}, slowest {worst:?}", t0.elapsed());

    // The range splits at least twice (three ranges or more), in key order, covering every key.
    let split = wait_for(Duration::from_secs(90), "the key-value range splits at least twice", || async {
        let r = ranges(&api).await?;
        Ok((r.len() >= 3).then_some(r))
    })
    .await?;
    eprintln!("[range_split] ranges: {}", Value::Array(split.clone()));
    ensure!(split[0]["start"] == "", "the first range starts at the first key: {split:?}");
    ensure!(split.last().is_some_and(|r| r["end"].is_null()), "the last range runs to the end: {split:?}");
    for pair in split.windows(2) {
        ensure!(pair[0]["end"] == pair[1]["start"], "ranges leave no gap: {split:?}");
    }
    let groups: std::collections::BTreeSet<u64> = split.iter().filter_map(|r| r["group"].as_u64()).collect();
    ensure!(groups.len() == split.len(), "each range has its own group: {split:?}");

    // Writes go on while it splits further, then everything reads back.
    for i in KEYS..KEYS + 100 {
        api.kv_put(&key(i), json!({"n": i}), None).await?.ensure_status(200)?;
    }
    let total = KEYS + 100;
    every_key_reads_back(&api, total).await?;

    // A prefix spanning several ranges lists in key order; a narrow one too.
    let (keys, count) = api.kv_list_keys("user:", Some(10_000)).await?;
    ensure!(count == total as u64, "list total {count}, expected {total}");
    let expected: Vec<String> = (0..total).map(key).collect();
    ensure!(keys == expected, "listing across ranges is complete and in key order");
    let (some, n) = api.kv_list_keys("user:002", Some(1_000)).await?;
    ensure!(n == 100 && some == (200..300).map(key).collect::<Vec<_>>(), "user:002* lists 200..300: {n}");
    let (first, n) = api.kv_list_keys("user:", Some(7)).await?;
    ensure!(n == total as u64 && first == (0..7).map(key).collect::<Vec<_>>(), "a limited list is the first keys: {first:?}");
    ensure!(api.kv_count("user:").await? == total as u64, "count across ranges");

    // A prefix delete reaches every range it covers.
    let r = api.kv_delete_prefix("user:003").await?.ensure_status(200)?;
    ensure!(r.json["deleted"] == 100, "deleted: {r}");
    ensure!(api.kv_count("user:").await? == total as u64 - 100, "count after the prefix delete");
    api.kv_get(&key(350)).await?.ensure_status(404)?;

    // The other models are hash-placed over the bootstrap groups, unchanged by splits.
    api.post("/api/v1/documents/collections/notes/documents", &json!({"document": {"text": "still hashed"}})).await?.ensure_status(201)?;

    // A bulk import spanning every range lands in each (routed by range).
    let bulk_key = |i: usize| format!("user:{:05}-bulk", i * 13);
    let pairs: Vec<Value> = (0..50).map(|i| json!({"key": bulk_key(i), "value": i})).collect();
    let r = api.post("/api/v1/import/kv", &json!({"pairs": pairs, "batch_size": 20})).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == 50, "import: {r}");
    for i in 0..50 {
        let r = api.kv_get(&bulk_key(i)).await?.ensure_status(200)?;
        ensure!(r.json["value"] == i, "{}: {r}", bulk_key(i));
    }

    // A split-off group keeps its replicas: losing a node loses nothing.
    c.kill_node(3)?;
    let survivors: BTreeMap<usize, Value> = (0..total).filter(|i| !(300..400).contains(i)).map(|i| (i, json!({"n": i}))).collect();
    wait_for(Duration::from_secs(60), "every key reads back with node 3 down", || async {
        for (i, value) in &survivors {
            let r = api.kv_get(&key(*i)).await?;
            if r.status != 200 || r.json["value"] != *value {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    api.kv_put("user:99999", json!("after the loss"), None).await?.ensure_status(200)?;

    // Back, node 3 restarts its split-off groups from its own records and
    // catches up: its replica of the last range serves the write it missed.
    c.start_node(3)?;
    let from_node_3 = api.consistency("one").replica(3);
    wait_for(Duration::from_secs(60), "node 3 serves the write it missed", || async {
        let r = from_node_3.kv_get("user:99999").await?;
        Ok((r.status == 200 && r.json["value"] == "after the loss").then_some(()))
    })
    .await?;
    let r = from_node_3.kv_get(&key(10)).await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!({"n": 10}), "node 3's replica of the first range: {r}");
    Ok(())
}

async fn every_key_reads_back(api: &Http, total: usize) -> Result<()> {
    for i in 0..total {
        let r = api.kv_get(&key(i)).await?;
        ensure!(r.status == 200 && r.json["value"] == json!({"n": i}), "{} after the splits: {r}", key(i));
    }
    Ok(())
}
