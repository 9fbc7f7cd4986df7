//! Scenario: `query_timeout_secs` cancels queries. A slow SELECT is stopped
//! by the replica that runs it; a slow write is stopped by the leader's trial
//! run before it is proposed, so nothing is written on any replica. Either way
//! the caller gets `{success: false, error}` and the cluster keeps serving.

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_timeout() {
    let opts = ClusterOptions { router_env: vec![("SERVICE_QUERY_TIMEOUT_SECS".into(), "1".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("sql_timeout scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn sql(api: &Http, text: &str) -> Result<Resp> {
    api.post("/api/v1/query", &json!({"sql": text, "database": "slow"})).await
}

async fn sql_ok(api: &Http, text: &str) -> Result<Resp> {
    let r = sql(api, text).await?;
    ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
    Ok(r)
}

fn ensure_timed_out(r: &Resp, what: &str) -> Result<()> {
    ensure!(r.status == 408, "{what}: expected 408, got {r}");
    ensure!(r.json["success"] == json!(false), "{what}: {r}");
    ensure!(r.json["error"].as_str().is_some_and(|e| e.contains("time limit")), "{what}: {r}");
    Ok(())
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let api = cluster.http.clone();
    sql_ok(&api, "CREATE TABLE big (id INT PRIMARY KEY, v INT)").await?;
    sql_ok(&api, "CREATE TABLE sink (id INT)").await?;
    let values: Vec<String> = (0..3000).map(|i| format!("({i}, {})", i % 97)).collect();
    sql_ok(&api, &format!("INSERT INTO big VALUES {}", values.join(", "))).await?;

    // A read that would examine nine million row pairs is cancelled, answers
    // within 2 s, and the nodes go idle (the query stopped on the node too).
    let slow_select = "SELECT COUNT(*) FROM big a CROSS JOIN big b WHERE a.v + b.v = -1";
    let started = std::time::Instant::now();
    ensure_timed_out(&sql(&api, slow_select).await?, "slow SELECT")?;
    let answered = started.elapsed();
    ensure!(answered < std::time::Duration::from_secs(2), "the 1 s query limit answered after {answered:?}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let before = cluster.nodes_cpu_secs()?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let used = cluster.nodes_cpu_secs()? - before;
    ensure!(used < 1.0, "the nodes kept working after the query's deadline: {used:.2} CPU s in 2 s");

    // The same work inside a write is refused before it is proposed.
    let slow_insert = "INSERT INTO sink SELECT a.id FROM big a CROSS JOIN big b WHERE a.v + b.v = -1";
    ensure_timed_out(&sql(&api, slow_insert).await?, "slow INSERT … SELECT")?;
    let slow_tx = "BEGIN; INSERT INTO sink VALUES (1); UPDATE big SET v = v + 1 WHERE id IN \
                   (SELECT a.id FROM big a CROSS JOIN big b WHERE a.v + b.v = -1); COMMIT";
    ensure_timed_out(&sql(&api, slow_tx).await?, "slow transaction")?;

    // Nothing of either write reached any replica.
    for node in 1..=3u64 {
        let r = sql_ok(&api.consistency("one").replica(node), "SELECT COUNT(*) FROM sink").await?;
        ensure!(r.json["data"]["rows"] == json!([[0]]), "node {node} has rows in sink: {r}");
        let r = sql_ok(&api.consistency("one").replica(node), "SELECT SUM(v) FROM big").await?;
        let expected: i64 = (0..3000).map(|i| i % 97).sum();
        ensure!(r.json["data"]["rows"] == json!([[expected]]), "node {node}: big changed: {r}");
    }

    // Quick writes and reads are unaffected.
    sql_ok(&api, "INSERT INTO sink SELECT id FROM big WHERE id < 10").await?;
    let r = sql_ok(&api, "SELECT COUNT(*) FROM sink").await?;
    ensure!(r.json["data"]["rows"] == json!([[10]]), "{r}");
    Ok(())
}
