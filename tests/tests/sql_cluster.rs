//! Scenario: SQL end to end through the router on a three-node cluster —
//! sqllogictest files replayed over HTTP, concurrent bank transfers that keep
//! the total constant, concurrent single-row writes sharing log entries,
//! rollback on failure and on a missing COMMIT, replicas
//! that agree, isolated databases, result truncation, and a full restart.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, Value, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_cluster() {
    let opts = ClusterOptions { router_env: vec![("SERVICE_MAX_RESULT_ROWS".into(), "50".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("sql_cluster scenario failed: {e:?}");
    }
}

async fn sql(api: &Http, db: &str, sql: &str, params: Value) -> Result<Resp> {
    api.post("/api/v1/query", &json!({"sql": sql, "params": params, "database": db})).await
}

async fn sql_ok(api: &Http, db: &str, text: &str) -> Result<Resp> {
    let r = sql(api, db, text, json!([])).await?;
    ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
    Ok(r)
}

fn rows(r: &Resp) -> Vec<Vec<Value>> {
    serde_json::from_value(r.json["data"]["rows"].clone()).unwrap_or_default()
}

fn fmt(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::String(s) if s.is_empty() => "(empty)".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replays one `.slt` file of the SQL engine's suite through the router.
async fn run_slt(api: &Http, db: &str, path: &Path) -> Result<usize> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let (mut i, mut records) = (0, 0);
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let loc = format!("{}:{}", path.display(), i + 1);
        let header: Vec<&str> = line.split_whitespace().collect();
        i += 1;
        let mut sql_lines = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim() != "----" {
            sql_lines.push(lines[i]);
            i += 1;
        }
        let mut params = json!([]);
        if let Some(p) = sql_lines.first().and_then(|l| l.trim().strip_prefix("-- params:")) {
            params = serde_json::from_str(p.trim())?;
            sql_lines.remove(0);
        }
        let text = sql_lines.join("\n");
        let mut expected = Vec::new();
        if i < lines.len() && lines[i].trim() == "----" {
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() {
                expected.push(lines[i].trim().to_string());
                i += 1;
            }
        }
        records += 1;
        let r = sql(api, db, &text, params).await?;
        let ok = r.status == 200 && r.json["success"] == json!(true);
        match header.as_slice() {
            ["statement", "ok", ..] => ensure!(ok, "{loc}: expected ok: {r}\n{text}"),
            ["statement", "error", rest @ ..] => {
                ensure!(!ok && (400..500).contains(&r.status), "{loc}: expected a 4xx error: {r}\n{text}");
                if let Some(code) = rest.first() {
                    ensure!(r.json["error"]["code"] == json!(code), "{loc}: expected {code}: {r}");
                }
            }
            ["query", types, rest @ ..] => {
                ensure!(ok, "{loc}: query failed: {r}\n{text}");
                let mut got: Vec<String> = rows(&r).iter().map(|row| row.iter().map(fmt).collect::<Vec<_>>().join(" ")).collect();
                let mut exp = expected.clone();
                if rest.first() == Some(&"rowsort") {
                    got.sort();
                    exp.sort();
                }
                let cols = r.json["data"]["columns"].as_array().map_or(0, Vec::len);
                ensure!(cols == types.len(), "{loc}: {cols} columns, expected {}", types.len());
                ensure!(got == exp, "{loc}: rows differ\n{text}\nexpected {exp:?}\ngot      {got:?}");
            }
            _ => bail!("{loc}: unknown record {line}"),
        }
    }
    Ok(records)
}

/// The router's count of writes it sent to a leader together with others.
async fn coalesced_writes(api: &Http) -> Result<f64> {
    let metrics = api.get("/metrics").await?.ensure_status(200)?;
    metrics
        .text
        .lines()
        .find_map(|l| l.strip_prefix("tessera_router_coalesced_writes_total ").and_then(|v| v.trim().parse().ok()))
        .or_else(|| (!metrics.text.contains("tessera_router_coalesced_writes_total")).then_some(0.0))
        .with_context(|| format!("unreadable tessera_router_coalesced_writes_total in /metrics: {}", metrics.text))
}

async fn total(api: &Http) -> Result<i64> {
    let r = sql_ok(api, "bank", "SELECT SUM(balance) FROM accounts").await?;
    rows(&r).first().and_then(|row| row.first()).and_then(Value::as_i64).ok_or_else(|| anyhow!("no sum in {r}"))
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();

    // The engine's own logic tests, replayed through the router, one database each.
    let slt = tessera_tests::manifest_dir().join("../storage/sql/tests/slt");
    let mut replayed = 0;
    for file in ["01_basic.slt", "05_joins.slt", "07_transactions.slt", "09_constraints.slt"] {
        let db = format!("slt_{}", &file[..2]);
        replayed += run_slt(&api, &db, &slt.join(file)).await?;
    }
    eprintln!("replayed {replayed} sqllogictest records through the router");

    // Bank: 10 accounts of 1000; concurrent transfers, some of which overdraw
    // and must roll back whole. The total never changes, even mid-flight.
    sql_ok(&api, "bank", "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL CHECK (balance >= 0))").await?;
    let values: Vec<String> = (0..10).map(|i| format!("({i}, 1000)")).collect();
    sql_ok(&api, "bank", &format!("INSERT INTO accounts VALUES {}", values.join(", "))).await?;
    let committed = Arc::new(AtomicU64::new(0));
    let rejected = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..6u64 {
        let (api, committed, rejected) = (api.clone(), committed.clone(), rejected.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..15u64 {
                let from = (t * 7 + n * 3) % 10;
                let to = (from + 1 + n % 9) % 10;
                let amount = 50 + (t * 131 + n * 97) % 700;
                let r = sql(
                    &api,
                    "bank",
                    "BEGIN; UPDATE accounts SET balance = balance - $1 WHERE id = $2; \
                     UPDATE accounts SET balance = balance + $1 WHERE id = $3; COMMIT",
                    json!([amount, from, to]),
                )
                .await?;
                match (r.status, r.json["error"]["code"].as_str()) {
                    (200, _) => committed.fetch_add(1, Ordering::Relaxed),
                    (409, Some("CONSTRAINT_VIOLATION")) => rejected.fetch_add(1, Ordering::Relaxed),
                    _ => bail!("transfer failed unexpectedly: {r}"),
                };
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    let reader = {
        let api = api.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                let t = total(&api).await?;
                ensure!(t == 10_000, "a reader saw a total of {t} mid-flight");
            }
            Ok::<_, anyhow::Error>(())
        })
    };
    for t in tasks {
        t.await??;
    }
    reader.await??;
    ensure!(total(&api).await? == 10_000, "the total changed");
    eprintln!("bank: {} transfers committed, {} rolled back", committed.load(Ordering::Relaxed), rejected.load(Ordering::Relaxed));
    ensure!(committed.load(Ordering::Relaxed) > 0, "no transfer committed");

    // Single-row writes that meet others of their database in flight go to the
    // leader together and share log entries; each is answered and applied once.
    let before = coalesced_writes(&api).await?;
    sql_ok(&api, "bank", "CREATE TABLE ledger (id INT PRIMARY KEY, writer INT, n INT)").await?;
    let writers: Vec<_> = (0..16u64)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                for n in 0..20u64 {
                    let r = sql(&api, "bank", "INSERT INTO ledger VALUES ($1, $2, $3)", json!([w * 100 + n, w, n])).await?;
                    ensure!(r.status == 200 && r.json["rows_affected"] == json!(1), "ledger insert {w}/{n}: {r}");
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    for w in writers {
        w.await??;
    }
    let r = sql_ok(&api.consistency("all"), "bank", "SELECT COUNT(*), COUNT(DISTINCT id), SUM(n) FROM ledger").await?;
    ensure!(rows(&r) == vec![vec![json!(320), json!(320), json!(16 * 190)]], "ledger after 320 concurrent inserts: {r}");
    let shared = coalesced_writes(&api).await? - before;
    eprintln!("{shared} of 320 concurrent SQL writes went to the leader with others");
    ensure!(shared > 0.0, "16 SQL writers in flight never shared a call to the leader");

    // A failing statement rolls back everything since BEGIN; so does a missing COMMIT.
    let r =
        sql(&api, "bank", "BEGIN; UPDATE accounts SET balance = balance + 1 WHERE id = 0; SELECT * FROM nope; COMMIT", json!([])).await?;
    ensure!(r.status == 404, "failing transaction: {r}");
    let r = sql(&api, "bank", "BEGIN; UPDATE accounts SET balance = balance + 1 WHERE id = 0", json!([])).await?;
    ensure!((400..500).contains(&r.status), "transaction without COMMIT: {r}");
    let r = sql(&api, "bank", "BEGIN; UPDATE accounts SET balance = balance + 5 WHERE id = 0; ROLLBACK", json!([])).await?;
    ensure!(r.status == 200, "explicit rollback: {r}");
    ensure!(total(&api).await? == 10_000, "a rolled-back change leaked");

    // Every replica returns identical results from its own state.
    let query = "SELECT id, balance FROM accounts ORDER BY id";
    let reference = rows(&sql_ok(&api.consistency("all"), "bank", query).await?);
    for node in [1, 2, 3] {
        let got = rows(&sql_ok(&api.replica(node), "bank", query).await?);
        ensure!(got == reference, "replica {node} differs: {got:?} vs {reference:?}");
    }

    // Databases are isolated.
    sql_ok(&api, "tenant_a", "CREATE TABLE t (v INT)").await?;
    sql_ok(&api, "tenant_a", "INSERT INTO t VALUES (1)").await?;
    sql_ok(&api, "tenant_b", "CREATE TABLE t (v INT)").await?;
    let r = sql_ok(&api, "tenant_b", "SELECT COUNT(*) FROM t").await?;
    ensure!(rows(&r) == vec![vec![json!(0)]], "tenant_b sees tenant_a's row: {r}");
    let r = sql(&api, "tenant_c", "SELECT * FROM t", json!([])).await?;
    ensure!(r.json["error"]["code"] == "TABLE_NOT_FOUND", "tenant_c: {r}");

    // Results are cut at max_result_rows (50 here) and flagged.
    sql_ok(&api, "big", "CREATE TABLE n (i INT PRIMARY KEY)").await?;
    let values: Vec<String> = (0..120).map(|i| format!("({i})")).collect();
    sql_ok(&api, "big", &format!("INSERT INTO n VALUES {}", values.join(","))).await?;
    let r = sql_ok(&api, "big", "SELECT i FROM n ORDER BY i").await?;
    ensure!(r.json["metadata"]["truncated"] == json!(true) && r.json["metadata"]["rows_returned"] == json!(50), "truncation: {r}");

    // VACUUM compacts a table's (or the database's) key range on every replica.
    sql_ok(&api, "big", "DELETE FROM n WHERE i < 100").await?;
    sql_ok(&api, "big", "VACUUM n").await?;
    sql_ok(&api, "big", "VACUUM").await?;
    let r = sql(&api, "big", "VACUUM nope", json!([])).await?;
    ensure!(r.json["error"]["code"] == "TABLE_NOT_FOUND", "VACUUM of a missing table: {r}");
    let r = sql_ok(&api, "big", "SELECT COUNT(*) FROM n").await?;
    ensure!(rows(&r) == vec![vec![json!(20)]], "rows after DELETE and VACUUM: {r}");
    // The compaction runs after the apply, off its thread, on every replica.
    for node in [1, 2, 3] {
        let log_path = c.node_log(node)?;
        wait_for(Duration::from_secs(30), &format!("node {node} finishes the VACUUM compaction"), async || {
            Ok(std::fs::read_to_string(&log_path)?.contains("VACUUM compaction finished").then_some(()))
        })
        .await?;
    }

    // Catalog routes.
    let r = api.get("/api/v1/tables?database=bank").await?.ensure_status(200)?;
    ensure!(r.json["tables"][0]["name"] == "accounts", "tables: {r}");
    let r = api.get("/api/v1/tables/accounts?database=bank").await?.ensure_status(200)?;
    ensure!(r.json["columns"].as_array().map_or(0, Vec::len) == 2, "schema: {r}");

    // Everything survives a full restart.
    c.stop_all().await?;
    c.start_all().await?;
    let api = c.http.clone();
    ensure!(total(&api).await? == 10_000, "total after restart");
    let r = sql_ok(&api, "tenant_a", "SELECT v FROM t").await?;
    ensure!(rows(&r) == vec![vec![json!(1)]], "tenant_a after restart: {r}");
    Ok(())
}
