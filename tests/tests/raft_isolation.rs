//! Scenario: heavy reads do not take leadership away. While SQL self-joins and
//! wide vector searches keep every core busy for 20 s, a KV writer keeps
//! writing: no write fails and no group changes its Raft term (no election),
//! because reads run on the nodes' low-priority query pool, never on the
//! threads that drive heartbeats. KV write latency idle vs loaded is printed
//! (a figure, not asserted: timing assertions flake on a shared machine).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Value, json};

const ROWS: usize = 1500;
const VECTORS: usize = 1500;
const DIM: usize = 32;
const LOAD: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_isolation() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("raft_isolation scenario failed: {e:?}");
    }
}

/// Group id → (term, leader) as the router reports them.
async fn terms(c: &Cluster) -> Result<BTreeMap<u64, (u64, u64)>> {
    let info = c.cluster_info().await?;
    let mut out = BTreeMap::new();
    for g in info["groups"].as_array().context("groups")? {
        let id = g["id"].as_u64().context("group id")?;
        let term = g["term"].as_u64().with_context(|| format!("no term in {g}"))?;
        out.insert(id, (term, g["leader"].as_u64().with_context(|| format!("no leader in {g}"))?));
    }
    Ok(out)
}

async fn sql(api: &Http, text: &str) -> Result<Value> {
    let r = api.post("/api/v1/query", &json!({"sql": text, "database": "iso"})).await?;
    ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
    Ok(r.json)
}

/// Sequential KV writes for `duration` (or `count` writes): latencies in ms,
/// writes that failed for good, and what went wrong on the way. Like a careful
/// client, each write carries an `Idempotency-Key` and is sent again (at most
/// three times) after a transport error or a 503, which cannot apply it twice.
async fn kv_writes(api: &Http, tag: &str, duration: Duration, count: usize) -> (Vec<f64>, u64, Vec<String>) {
    let (mut latencies, mut failures, mut retried) = (Vec::new(), 0, Vec::new());
    let start = Instant::now();
    while start.elapsed() < duration && latencies.len() < count {
        let key = format!("iso/{tag}/{}", latencies.len() + failures as usize);
        let client = api.header("Idempotency-Key", &key);
        let t = Instant::now();
        let mut outcome = Err(String::new());
        for _ in 0..3 {
            outcome = match client.kv_put(&key, json!(1), None).await {
                Ok(r) if r.status == 200 => Ok(()),
                Ok(r) if r.status == 503 => Err(format!("{key}: {r}")),
                Ok(r) => {
                    outcome = Err(format!("{key}: {r}"));
                    break;
                }
                Err(e) => Err(format!("{key}: {e:#}")),
            };
            match &outcome {
                Ok(()) => break,
                Err(why) => retried.push(why.clone()),
            }
        }
        match outcome {
            Ok(()) => latencies.push(t.elapsed().as_secs_f64() * 1000.0),
            Err(why) => {
                retried.push(why);
                failures += 1;
            }
        }
    }
    (latencies, failures, retried)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    sql(&api, "CREATE TABLE big (id INT PRIMARY KEY, v INT, s TEXT)").await?;
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(250) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, {}, 'row {i}')", (i * 7919) % 1000)).collect();
        sql(&api, &format!("INSERT INTO big VALUES {}", values.join(", "))).await?;
    }
    let coll = "/api/v1/vector/collections";
    api.post(coll, &json!({"name": "iso", "dim": DIM, "metric": "l2"})).await?.ensure_status(201)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 10_000) as f64 / 10_000.0
    };
    for start in (0..VECTORS).step_by(250) {
        let batch: Vec<Value> =
            (start..start + 250).map(|i| json!({"id": format!("v{i}"), "vector": (0..DIM).map(|_| next()).collect::<Vec<_>>()})).collect();
        api.post(&format!("{coll}/iso/batch"), &json!({"vectors": batch})).await?.ensure_status(200)?;
    }

    let (mut idle, idle_failures, idle_trouble) = kv_writes(&api, "idle", Duration::from_secs(10), 60).await;
    ensure!(idle_failures == 0 && !idle.is_empty(), "idle KV writes failed: {idle_trouble:?}");
    let before = terms(c).await?;

    // The load: self-joins and wide searches on every core, for LOAD.
    let stop = Arc::new(AtomicBool::new(false));
    let (queries, busy) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut load = Vec::new();
    for i in 0..4 {
        let (api, stop, queries, busy) = (api.clone(), stop.clone(), queries.clone(), busy.clone());
        let query: Vec<f64> = (0..DIM).map(|d| ((i * 31 + d) % 17) as f64 / 17.0).collect();
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = if i % 2 == 0 {
                    let join = "SELECT COUNT(*) FROM big a, big b WHERE a.v < b.v AND a.id < 500";
                    api.post("/api/v1/query", &json!({"sql": join, "database": "iso"})).await
                } else {
                    api.post(&format!("{coll}/iso/search"), &json!({"vector": query, "k": 50, "ef": 400})).await
                };
                match r {
                    Ok(r) if r.status == 200 => queries.fetch_add(1, Ordering::Relaxed),
                    _ => busy.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    let (mut loaded, failures, trouble) = kv_writes(&api, "loaded", LOAD, usize::MAX).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await?;
    }
    let after = terms(c).await?;

    idle.sort_by(f64::total_cmp);
    loaded.sort_by(f64::total_cmp);
    eprintln!(
        "kv_write_ms idle p50={:.1} p99={:.1}; under load p50={:.1} p99={:.1} ({} writes, {} heavy reads done, {} refused or failed)",
        percentile(&idle, 0.5),
        percentile(&idle, 0.99),
        percentile(&loaded, 0.5),
        percentile(&loaded, 0.99),
        loaded.len(),
        queries.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
    );
    if !trouble.is_empty() {
        eprintln!("KV writes sent again under load: {trouble:?}");
    }
    ensure!(failures == 0, "{failures} KV writes failed under read load: {trouble:?}");
    ensure!(queries.load(Ordering::Relaxed) > 0, "no heavy read completed");
    let changed: Vec<String> = before
        .iter()
        .filter(|(g, t)| after.get(g).map(|a| a.0) != Some(t.0))
        .map(|(g, t)| format!("group {g}: term {} -> {:?}", t.0, after.get(g)))
        .collect();
    ensure!(changed.is_empty(), "elections under read load: {changed:?}");
    Ok(())
}
