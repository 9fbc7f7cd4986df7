//! `tessera-bench`: throughput and latency through a running router, printed as
//! tables. Not a test: it measures, it asserts nothing.
//!
//! ```text
//! tessera-bench kv  --url http://127.0.0.1:9090 --user admin --password … [--seconds 5]
//! tessera-bench sql --url http://127.0.0.1:9090 --user admin --password … [--rows 100000]
//! tessera-bench compare --url … --password …   # the KV rows again, next to a 3-member etcd
//! tessera-bench objects --url … --password … [--seconds 5]   # PUT/GET MB/s, 1 KiB and 8 MiB
//! tessera-bench vectors --url … --password … [--rows 100000] # upserts/s, QPS and recall@10 vs hnswlib
//! tessera-bench documents --url … --password … [--rows 100000] # inserts/s, import, filtered query ± index
//! tessera-bench timeseries --url … --password … [--rows 1000000] # batched points/s, bytes/point ± compress
//! tessera-bench graph --url … --password … [--rows 100000]    # batch-built graph of N edges, 3-hop traversal time
//! tessera-bench streaming|memory|groupcommit …                # see streaming.rs, system.rs
//! tessera-bench meetings --url … --password … [--rows 100000] # the meetings app: list req/s, search latency, recognizer
//! tessera-bench --help
//! ```
//!
//! Without `--user`/`--password` (or `SERVICE_ADMIN_USERNAME`/`SERVICE_ADMIN_PASSWORD`),
//! the credentials come from the file `deploy/cluster.sh` writes:
//! `$TESSERA_DATA/admin-credentials`, else `data/cluster/admin-credentials` under the
//! current directory or the repository root.
//!
//! `compare` starts a three-member etcd (the `etcd` binary, Debian `etcd-server`) on
//! loopback ports 23790–23795 in a temporary directory, runs the same KV workload
//! through its HTTP JSON gateway, prints both with the ratio Tessera/etcd, and stops it.

mod documents;
mod graph;
mod meetings;
mod objects;
mod streaming;
mod system;
mod timeseries;
mod vectors;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use clap::{Parser, ValueEnum};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// Throughput and latency of a running Tessera cluster, printed as tables.
#[derive(Parser)]
#[command(name = "tessera-bench", version)]
struct Args {
    /// What to measure.
    #[arg(value_enum)]
    mode: Mode,
    /// Router URL.
    #[arg(long, default_value_t = String::from("http://127.0.0.1:9090"))]
    url: String,
    /// Admin user [default: from the cluster's admin-credentials file, else admin].
    #[arg(long, env = "SERVICE_ADMIN_USERNAME", hide_env_values = true)]
    user: Option<String>,
    /// Admin password [default: from the cluster's admin-credentials file].
    #[arg(long, env = "SERVICE_ADMIN_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Duration of each timed measurement, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Number of rows (records, points, edges) the data-loading modes write.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Size of the group the `snapshot` mode ships, in MiB.
    #[arg(long, default_value_t = 2048)]
    mib: u64,
    /// `snapshot` mode: restart node 3 with its data directory (a lagging
    /// follower) instead of wiping it.
    #[arg(long)]
    keep_follower_data: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// KV operations/s and p50/p99 latency.
    Kv,
    /// SQL inserts and queries/s.
    Sql,
    /// The KV rows again, next to a 3-member etcd on loopback.
    Compare,
    /// Object PUT/GET MB/s, 1 KiB and 8 MiB.
    Objects,
    /// Vector upserts/s, QPS and recall@10 vs hnswlib.
    Vectors,
    /// Document inserts/s, import, filtered query with and without index.
    Documents,
    /// Time-series batched points/s, bytes/point with and without compression.
    Timeseries,
    /// Batch-built graph of N edges, 3-hop traversal time.
    Graph,
    /// Streaming publishes/s and publish-to-WebSocket latency.
    Streaming,
    /// The meetings application: list requests/s over two instances, search
    /// latency at 10k and --rows segments, the recognizer's real-time factor.
    Meetings,
    /// Node RSS idle and under KV load (starts its own cluster).
    Memory,
    /// fsync latency and KV write rate with group commit (starts its own cluster).
    Groupcommit,
    /// RSS and time while a `--mib` group is snapshotted and shipped to a wiped
    /// follower (starts its own cluster).
    Snapshot,
}

/// Where `deploy/cluster.sh` keeps the generated admin credentials:
/// `$TESSERA_DATA/admin-credentials` if `TESSERA_DATA` is set, else
/// `data/cluster/admin-credentials` under the current directory or the repository root.
fn credentials_file() -> Option<PathBuf> {
    const FILE: &str = "admin-credentials";
    if let Some(dir) = std::env::var_os("TESSERA_DATA").filter(|d| !d.is_empty()) {
        let f = PathBuf::from(dir).join(FILE);
        return f.is_file().then_some(f);
    }
    [PathBuf::from("data/cluster"), Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/cluster")]
        .into_iter()
        .map(|d| d.join(FILE))
        .find(|f| f.is_file())
}

/// Parses the file `cluster.sh` writes with `printf 'ADMIN_USER=%q\nADMIN_PASS=%q\n'`:
/// returns (user, password).
fn read_credentials(path: &Path) -> Result<(Option<String>, Option<String>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (mut user, mut pass) = (None, None);
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once('=') else { continue };
        match key {
            "ADMIN_USER" => user = Some(shell_unquote(value)),
            "ADMIN_PASS" => pass = Some(shell_unquote(value)),
            _ => {}
        }
    }
    Ok((user, pass))
}

/// Undoes bash's `printf %q` quoting: backslash escapes, '…' and $'…'.
fn shell_unquote(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '\'' => out.extend(chars.by_ref().take_while(|&c| c != '\'')),
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '\'' => break,
                        '\\' => match chars.next() {
                            Some('n') => out.push('\n'),
                            Some('t') => out.push('\t'),
                            Some('r') => out.push('\r'),
                            Some('e' | 'E') => out.push('\x1b'),
                            Some('a') => out.push('\x07'),
                            Some('b') => out.push('\x08'),
                            Some('f') => out.push('\x0c'),
                            Some('v') => out.push('\x0b'),
                            Some(other) => out.push(other),
                            None => {}
                        },
                        c => out.push(c),
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The user and password: flags or environment first, then the cluster's credentials file.
fn credentials(a: &Args) -> Result<(String, String)> {
    let (mut user, mut password) = (a.user.clone(), a.password.clone());
    if (user.is_none() || password.is_none())
        && let Some(f) = credentials_file()
    {
        let (u, p) = read_credentials(&f)?;
        user = user.or(u);
        password = password.or(p);
    }
    let password = password.ok_or_else(|| {
        anyhow!(
            "no admin password: pass --password (or set SERVICE_ADMIN_PASSWORD), or start the cluster with deploy/cluster.sh so $TESSERA_DATA/admin-credentials exists"
        )
    })?;
    Ok((user.unwrap_or_else(|| "admin".into()), password))
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
            .await
            .with_context(|| format!("login at {url}"))?
            .json()
            .await
            .with_context(|| format!("login at {url}"))?;
        let token = r["token"].as_str().ok_or_else(|| anyhow!("login failed: {r}"))?.to_string();
        Ok(Client { http, url: url.to_string(), token })
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>, consistency: &str) -> Result<Value> {
        let mut req =
            self.http.request(method, format!("{}{path}", self.url)).bearer_auth(&self.token).header("X-Consistency", consistency);
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
    // The read phase reads keys that exist whatever the write rate was.
    for i in 0..16 {
        for n in 0..50 {
            c.send(reqwest::Method::POST, "/api/v1/kv/keys", Some(&json!({"key": format!("bench/{i}/{n}"), "value": value})), "quorum")
                .await?;
        }
    }
    for consistency in ["quorum", "one"] {
        let c2 = c.clone();
        let r = load(16, secs, move |i, n| {
            let c = c2.clone();
            async move { c.send(reqwest::Method::GET, &format!("/api/v1/kv/keys/bench/{i}/{}", n % 50), None, consistency).await.map(drop) }
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
        async move { sql(&c, &db, &format!("INSERT INTO single VALUES ({}, 'v')", i as u64 * 10_000_000 + n), "quorum").await.map(drop) }
    })
    .await?;
    row("sql single-row INSERT, 16 clients", r);
    for consistency in ["quorum", "one"] {
        let (c2, db2) = (c.clone(), db.clone());
        let r = load(16, secs, move |i, n| {
            let (c, db) = (c2.clone(), db2.clone());
            async move {
                sql(&c, &db, &format!("SELECT v FROM single WHERE id = {}", i as u64 * 10_000_000 + n % 20), consistency).await.map(drop)
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
        let values: Vec<String> = (start..(start + batch).min(rows)).map(|i| format!("({i}, {}, 'row')", (i * 7919) % rows)).collect();
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

/// A three-member etcd on loopback, stopped on drop.
struct Etcd {
    children: Vec<std::process::Child>,
    dir: std::path::PathBuf,
    endpoints: Vec<String>,
}

impl Etcd {
    async fn start() -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("tessera-bench-etcd-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let cluster: Vec<String> = (0..3).map(|i| format!("e{i}=http://127.0.0.1:{}", 23791 + 2 * i)).collect();
        let mut children = Vec::new();
        let mut endpoints = Vec::new();
        for i in 0..3 {
            let (client, peer) = (23790 + 2 * i, 23791 + 2 * i);
            let log = std::fs::File::create(dir.join(format!("e{i}.log")))?;
            children.push(
                std::process::Command::new("etcd")
                    .args(["--name", &format!("e{i}")])
                    .args(["--data-dir", &dir.join(format!("e{i}")).to_string_lossy()])
                    .args(["--listen-client-urls", &format!("http://127.0.0.1:{client}")])
                    .args(["--advertise-client-urls", &format!("http://127.0.0.1:{client}")])
                    .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
                    .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
                    .args(["--initial-cluster", &cluster.join(",")])
                    .args(["--initial-cluster-state", "new", "--initial-cluster-token", "tessera-bench"])
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .spawn()
                    .context("starting etcd (install the Debian package etcd-server)")?,
            );
            endpoints.push(format!("http://127.0.0.1:{client}"));
        }
        let etcd = Etcd { children, dir, endpoints };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = http.get(format!("{}/health", etcd.endpoints[0])).send().await.ok().map(|r| r.status().is_success());
            if ok == Some(true) {
                break;
            }
            ensure!(Instant::now() < deadline, "etcd did not become healthy");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(etcd)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

async fn etcd_call(http: reqwest::Client, url: String, body: Value) -> Result<()> {
    let r = http.post(url).json(&body).send().await?;
    ensure!(r.status().is_success(), "etcd: {}", r.status());
    Ok(())
}

/// CPU time (user + system) spent so far by every process on this machine whose
/// command name is one of `names`, in milliseconds (from `/proc/<pid>/stat`).
fn cpu_ms(names: &[&str]) -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid … utime(14) stime(15): comm may hold spaces, so split after ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        if !names.contains(&&stat[open + 1..close]) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        ticks += field(11) + field(12);
    }
    ticks as f64 * 1000.0 / ticks_per_s
}

/// [`load`], and the CPU milliseconds the processes named `names` spent per operation meanwhile.
async fn load_with_cpu<F, Fut>(names: &[&str], clients: usize, secs: u64, op: F) -> Result<((f64, f64, f64), f64)>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let before = cpu_ms(names);
    let started = Instant::now();
    let r = load(clients, secs, op).await?;
    let ops = r.0 * started.elapsed().as_secs_f64();
    Ok((r, (cpu_ms(names) - before) / ops.max(1.0)))
}

/// Tessera's processes, whose CPU a Tessera operation costs (the nodes and the router).
const TESSERA_PROCESSES: &[&str] = &["tessera-node", "tessera-router"];

/// The KV rows on Tessera and on etcd, side by side, with the CPU each spends per
/// operation (all nodes and the router; all etcd members, gateway included).
async fn compare(c: Client, secs: u64) -> Result<()> {
    let etcd = Etcd::start().await?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    let value = "x".repeat(256);
    println!(
        "| {:<34} | {:>10} | {:>8} | {:>8} | {:>10} | {:>8} | {:>8} | {:>8} |",
        "workload", "tessera/s", "p99 ms", "CPU ms", "etcd/s", "p99 ms", "CPU ms", "ratio"
    );
    println!("|{:-<36}|{:-<12}|{:-<10}|{:-<10}|{:-<12}|{:-<10}|{:-<10}|{:-<10}|", "", "", "", "", "", "", "", "");
    let print = |name: &str, (t, tc): ((f64, f64, f64), f64), (e, ec): ((f64, f64, f64), f64)| {
        println!(
            "| {name:<34} | {:>10.0} | {:>8.2} | {tc:>8.3} | {:>10.0} | {:>8.2} | {ec:>8.3} | {:>8.2} |",
            t.0,
            t.2,
            e.0,
            e.2,
            t.0 / e.0.max(1e-9)
        );
    };
    for clients in [1usize, 16, 64] {
        let (c2, v) = (c.clone(), value.clone());
        let t = load_with_cpu(TESSERA_PROCESSES, clients, secs, move |i, n| {
            let (c, v) = (c2.clone(), v.clone());
            async move {
                c.send(reqwest::Method::POST, "/api/v1/kv/keys", Some(&json!({"key": format!("cmp/{i}/{n}"), "value": v})), "quorum")
                    .await
                    .map(drop)
            }
        })
        .await?;
        let (h, eps, v) = (http.clone(), etcd.endpoints.clone(), value.clone());
        let e = load_with_cpu(&["etcd"], clients, secs, move |i, n| {
            let url = format!("{}/v3/kv/put", eps[i % eps.len()]);
            etcd_call(h.clone(), url, json!({"key": b64(&format!("cmp/{i}/{n}")), "value": b64(&v)}))
        })
        .await?;
        print(&format!("write 256 B, {clients} clients"), t, e);
    }
    for clients in [16usize, 64] {
        for (label, consistency, serializable) in [("read linearizable", "quorum", false), ("read one/serializable", "one", true)] {
            let c2 = c.clone();
            let t = load_with_cpu(TESSERA_PROCESSES, clients, secs, move |i, n| {
                let c = c2.clone();
                async move {
                    c.send(reqwest::Method::GET, &format!("/api/v1/kv/keys/cmp/{}/{}", i % 16, n % 50), None, consistency).await.map(drop)
                }
            })
            .await?;
            let (h, eps) = (http.clone(), etcd.endpoints.clone());
            let e = load_with_cpu(&["etcd"], clients, secs, move |i, n| {
                let url = format!("{}/v3/kv/range", eps[i % eps.len()]);
                etcd_call(h.clone(), url, json!({"key": b64(&format!("cmp/{}/{}", i % 16, n % 50)), "serializable": serializable}))
            })
            .await?;
            print(&format!("{label}, {clients} clients"), t, e);
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    if let Err(err) = run(a).await {
        let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
        if backtrace {
            eprintln!("tessera-bench: {err:?}");
        } else {
            eprintln!("tessera-bench: {err:#}");
        }
        std::process::exit(1);
    }
}

async fn run(a: Args) -> Result<()> {
    // Modes that start clusters of their own.
    match a.mode {
        Mode::Memory => return system::memory(a.seconds).await,
        Mode::Groupcommit => return system::group_commit(a.seconds).await,
        Mode::Snapshot => return system::snapshot(a.mib, a.keep_follower_data).await,
        _ => {}
    }
    let (user, password) = credentials(&a)?;
    let c = Client::login(&a.url, &user, &password).await?;
    match a.mode {
        Mode::Kv => bench_kv(c, a.seconds).await,
        Mode::Sql => bench_sql(c, a.seconds, a.rows).await,
        Mode::Compare => compare(c, a.seconds).await,
        Mode::Objects => objects::run(c, a.seconds).await,
        Mode::Vectors => vectors::run(c, a.rows).await,
        Mode::Documents => documents::run(c, a.seconds, a.rows).await,
        Mode::Timeseries => timeseries::run(c, a.rows).await,
        Mode::Graph => graph::run(c, a.rows).await,
        Mode::Streaming => streaming::run(c, a.seconds, a.rows).await,
        Mode::Meetings => meetings::run(c, &user, &password, a.seconds, a.rows).await,
        Mode::Memory | Mode::Groupcommit | Mode::Snapshot => unreachable!("handled above"),
    }
}
