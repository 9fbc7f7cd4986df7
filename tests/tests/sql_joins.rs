//! Scenario: the joins reporting tools send, through the router on a real
//! three-node cluster. An 8-table comma join of 100-row tables (join
//! conditions in WHERE) answers with the right rows; a cross join that would
//! outgrow the query memory budget is refused with QUERY_MEMORY_EXCEEDED, as
//! is the same work inside a write (the leader's trial run refuses it before it
//! is proposed); meanwhile a KV writer sees no failed write and no group
//! changes its Raft term. A slow query whose client gives up stops on the
//! node: the nodes go idle instead of running it to its 30 s deadline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_joins() {
    let opts = ClusterOptions { router_env: vec![("SERVICE_QUERY_MAX_MEMORY_MB".into(), "32".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("sql_joins scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn sql(api: &Http, text: &str) -> Result<Resp> {
    api.post("/api/v1/query", &json!({"sql": text, "database": "reports"})).await
}

async fn sql_ok(api: &Http, text: &str) -> Result<Resp> {
    let r = sql(api, text).await?;
    ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
    Ok(r)
}

/// Group id → term, as the router reports them.
async fn terms(c: &Cluster) -> Result<BTreeMap<u64, u64>> {
    let info = c.cluster_info().await?;
    let mut out = BTreeMap::new();
    for g in info["groups"].as_array().context("groups")? {
        out.insert(g["id"].as_u64().context("group id")?, g["term"].as_u64().with_context(|| format!("no term in {g}"))?);
    }
    Ok(out)
}

fn ensure_memory_exceeded(r: &Resp, what: &str) -> Result<()> {
    ensure!(r.status == 400, "{what}: expected 400, got {r}");
    ensure!(r.json["error"]["code"] == json!("QUERY_MEMORY_EXCEEDED"), "{what}: {r}");
    Ok(())
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let api = cluster.http.clone();
    for t in 0..8 {
        sql_ok(&api, &format!("CREATE TABLE t{t} (id INTEGER PRIMARY KEY, ref INTEGER, label TEXT)")).await?;
        let values: Vec<String> = (0..100).map(|i| format!("({i}, {}, 'r{t}-{i}')", (i * 7 + t) % 100)).collect();
        sql_ok(&api, &format!("INSERT INTO t{t} VALUES {}", values.join(", "))).await?;
    }
    sql_ok(&api, "CREATE TABLE sink (n INTEGER)").await?;

    // The written order is the worst one; the join follows the equalities.
    let from: Vec<String> = (0..8).rev().map(|t| format!("t{t}")).collect();
    let preds: Vec<String> = (0..7).map(|t| format!("t{t}.ref = t{}.id", t + 1)).collect();
    let join = format!("SELECT t0.id, t7.label FROM {} WHERE {} ORDER BY t0.id", from.join(", "), preds.join(" AND "));
    let started = Instant::now();
    let r = sql_ok(&api, &join).await?;
    eprintln!("8-table join of 100-row tables through the router: {:?} (debug build)", started.elapsed());
    ensure!(r.json["data"]["row_count"] == json!(100), "{r}");
    ensure!(r.json["data"]["rows"][0][0] == json!(0), "{r}");

    // A KV writer runs while explosive joins are refused.
    let before = terms(cluster).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let writer = {
        let (api, stop, acked, failed) = (api.clone(), stop.clone(), acked.clone(), failed.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                match api.kv_put(&format!("writer/{i}"), json!(i), None).await {
                    Ok(r) if r.status == 200 => acked.fetch_add(1, Ordering::SeqCst),
                    _ => failed.fetch_add(1, Ordering::SeqCst),
                };
            }
        })
    };
    let cross = "SELECT count(*) FROM t0, t1, t2, t3";
    for _ in 0..3 {
        ensure_memory_exceeded(&sql(&api, cross).await?, "cross join")?;
    }
    let insert = "INSERT INTO sink SELECT t0.id FROM t0, t1, t2, t3";
    ensure_memory_exceeded(&sql(&api, insert).await?, "INSERT … SELECT over a cross join")?;
    stop.store(true, Ordering::SeqCst);
    writer.await?;
    let after = terms(cluster).await?;
    ensure!(failed.load(Ordering::SeqCst) == 0, "{} KV writes failed", failed.load(Ordering::SeqCst));
    ensure!(acked.load(Ordering::SeqCst) > 0, "the KV writer made no progress");
    ensure!(before == after, "group terms changed: {before:?} -> {after:?}");

    // Nothing of the refused write reached any replica.
    for node in 1..=3u64 {
        let r = sql_ok(&api.consistency("one").replica(node), "SELECT COUNT(*) FROM sink").await?;
        ensure!(r.json["data"]["rows"] == json!([[0]]), "node {node} has rows in sink: {r}");
    }
    client_that_goes_away_stops_its_query(cluster).await
}

async fn client_that_goes_away_stops_its_query(cluster: &Cluster) -> Result<()> {
    let api = cluster.http.clone();
    sql_ok(&api, "CREATE TABLE big (id INTEGER PRIMARY KEY, v INTEGER)").await?;
    let values: Vec<String> = (0..3000).map(|i| format!("({i}, {})", i % 97)).collect();
    sql_ok(&api, &format!("INSERT INTO big VALUES {}", values.join(", "))).await?;
    // Nine million row pairs, none matching: seconds of work, no memory.
    let slow = "SELECT COUNT(*) FROM big a CROSS JOIN big b WHERE a.v + b.v = -1";
    let impatient = api.timeout(std::time::Duration::from_millis(1500));
    let gave_up = sql(&impatient, slow).await;
    ensure!(gave_up.is_err(), "the slow query answered within 1.5 s: {gave_up:?}");
    // Give the cancellation a moment to travel router → node, then measure.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let before = cluster.nodes_cpu_secs()?;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let used = cluster.nodes_cpu_secs()? - before;
    eprintln!("CPU used by the three nodes in the 3 s after the client went away: {used:.2} s");
    ensure!(used < 1.5, "the nodes kept working for a client that went away: {used:.2} CPU s in 3 s");
    Ok(())
}
