//! `tessera-bench`: throughput and latency through a running router, printed as
//! tables. Not a test: it measures, it asserts nothing.
//!
//! ```text
//! tessera-bench kv  --url http://127.0.0.1:9090 --user admin --password … [--seconds 5]
//! tessera-bench sql --url http://127.0.0.1:9090 --user admin --password … [--rows 100000]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use tokio::sync::Mutex;

struct Args {
    mode: String,
    url: String,
    user: String,
    password: String,
    seconds: u64,
    rows: u64,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let mode = it.next().ok_or_else(|| anyhow!("usage: tessera-bench kv|sql --url URL --user U --password P"))?;
    let mut a = Args {
        mode,
        url: "http://127.0.0.1:9090".into(),
        user: std::env::var("SERVICE_ADMIN_USERNAME").unwrap_or_else(|_| "admin".into()),
        password: std::env::var("SERVICE_ADMIN_PASSWORD").unwrap_or_default(),
        seconds: 5,
        rows: 100_000,
    };
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => a.url = v,
            "--user" => a.user = v,
            "--password" => a.password = v,
            "--seconds" => a.seconds = v.parse()?,
            "--rows" => a.rows = v.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Client {
    async fn login(url: &str, user: &str, password: &str) -> Result<Self> {
        let http = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
        let r: Value = http
            .post(format!("{url}/api/v1/auth/login"))
            .json(&json!({"username": user, "password": password}))
            .send()
            .await?
            .json()
            .await?;
        let token = r["token"].as_str().ok_or_else(|| anyhow!("login failed: {r}"))?.to_string();
        Ok(Client { http, url: url.to_string(), token })
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>, consistency: &str) -> Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header("X-Consistency", consistency);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        ensure!(status.is_success(), "{path}: {status} {v}");
        Ok(v)
    }
}

/// Runs `op(client_index, op_index)` from `clients` tasks for `secs`; returns
/// ops/s and p50/p99 latency in ms.
async fn load<F, Fut>(clients: usize, secs: u64, op: F) -> Result<(f64, f64, f64)>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let op = Arc::new(op);
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (op, latencies) = (op.clone(), latencies.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                op(c, n).await?;
                mine.push(t.elapsed().as_secs_f64() * 1000.0);
                n += 1;
            }
            latencies.lock().await.extend(mine);
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut l = latencies.lock().await.clone();
    l.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0.0);
    Ok((l.len() as f64 / elapsed, pct(0.50), pct(0.99)))
}

fn row(name: &str, (ops, p50, p99): (f64, f64, f64)) {
    println!("| {name:<40} | {ops:>10.0} | {p50:>8.2} | {p99:>8.2} |");
}

fn header() {
    println!("| {:<40} | {:>10} | {:>8} | {:>8} |", "workload", "ops/s", "p50 ms", "p99 ms");
    println!("|{:-<42}|{:-<12}|{:-<10}|{:-<10}|", "", "", "", "");
}

async fn bench_kv(c: Client, secs: u64) -> Result<()> {
    let value = "x".repeat(256);
    header();
    for clients in [1usize, 16, 64] {
        let (c2, v) = (c.clone(), value.clone());
        let r = load(clients, secs, move |i, n| {
            let (c, v) = (c2.clone(), v.clone());
            async move {
                c.send(reqwest::Method::POST, "/api/v1/kv/keys", Some(&json!({"key": format!("bench/{i}/{n}"), "value": v})), "quorum")
                    .await
                    .map(drop)
            }
        })
        .await?;
        row(&format!("kv write 256 B, {clients} clients"), r);
    }
    for consistency in ["quorum", "one"] {
        let c2 = c.clone();
        let r = load(16, secs, move |i, n| {
            let c = c2.clone();
            async move {
                c.send(reqwest::Method::GET, &format!("/api/v1/kv/keys/bench/{i}/{}", n % 50), None, consistency).await.map(drop)
            }
        })
        .await?;
        row(&format!("kv read ({consistency}), 16 clients"), r);
    }
    Ok(())
}

async fn sql(c: &Client, db: &str, sql: &str, consistency: &str) -> Result<Value> {
    c.send(reqwest::Method::POST, "/api/v1/query", Some(&json!({"sql": sql, "database": db})), consistency).await
}

async fn bench_sql(c: Client, secs: u64, rows: u64) -> Result<()> {
    let db = format!("bench_{}", std::process::id());
    sql(&c, &db, "CREATE TABLE single (id INT PRIMARY KEY, v TEXT)", "quorum").await?;
    header();
    let c2 = c.clone();
    let db2 = db.clone();
    let r = load(16, secs, move |i, n| {
        let (c, db) = (c2.clone(), db2.clone());
        async move {
            sql(&c, &db, &format!("INSERT INTO single VALUES ({}, 'v')", i as u64 * 10_000_000 + n), "quorum").await.map(drop)
        }
    })
    .await?;
    row("sql single-row INSERT, 16 clients", r);
    for consistency in ["quorum", "one"] {
        let (c2, db2) = (c.clone(), db.clone());
        let r = load(16, secs, move |i, n| {
            let (c, db) = (c2.clone(), db2.clone());
            async move {
                sql(&c, &db, &format!("SELECT v FROM single WHERE id = {}", i as u64 * 10_000_000 + n % 20), consistency)
                    .await
                    .map(drop)
            }
        })
        .await?;
        row(&format!("sql point SELECT by PK ({consistency}), 16 clients"), r);
    }

    // Range query on `rows` rows, without and then with an index on the column.
    sql(&c, &db, "CREATE TABLE big (id INT PRIMARY KEY, k INT, pad TEXT)", "quorum").await?;
    let load_started = Instant::now();
    let batch = 1000;
    let mut start = 0;
    while start < rows {
        let values: Vec<String> =
            (start..(start + batch).min(rows)).map(|i| format!("({i}, {}, 'row')", (i * 7919) % rows)).collect();
        sql(&c, &db, &format!("INSERT INTO big VALUES {}", values.join(",")), "quorum").await?;
        start += batch;
    }
    println!("\nloaded {rows} rows in {:.1} s", load_started.elapsed().as_secs_f64());
    let range = format!("SELECT COUNT(*) FROM big WHERE k BETWEEN 1000 AND {}", 1000 + rows / 100);
    let time = |label: &'static str| {
        let (c, db, range) = (c.clone(), db.clone(), range.clone());
        async move {
            let mut best = f64::MAX;
            let mut count = Value::Null;
            for _ in 0..3 {
                let t = Instant::now();
                let r = sql(&c, &db, &range, "quorum").await?;
                best = best.min(t.elapsed().as_secs_f64() * 1000.0);
                count = r["data"]["rows"][0][0].clone();
            }
            println!("range query ({label}): {best:.1} ms (best of 3), count = {count}");
            Ok::<_, anyhow::Error>(())
        }
    };
    time("no index, full scan").await?;
    sql(&c, &db, "CREATE INDEX big_k ON big (k)", "quorum").await.context("creating the index")?;
    time("B-tree index on k").await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let a = parse_args()?;
    let c = Client::login(&a.url, &a.user, &a.password).await?;
    match a.mode.as_str() {
        "kv" => bench_kv(c, a.seconds).await,
        "sql" => bench_sql(c, a.seconds, a.rows).await,
        other => bail!("unknown mode {other}: kv or sql"),
    }
}
