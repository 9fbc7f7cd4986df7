//! Join benchmark: chain joins of N tables in Tessera's SQL engine, next to PostgreSQL.
//!
//! Builds, in an in-memory store, tables `t0..t{N-1}` of 100 rows each
//! (`id INTEGER PRIMARY KEY, ref INTEGER, label TEXT`, `ref` the id of a row of
//! the next table) and times the chain join
//! `SELECT t0.id, t{N-1}.label FROM t{N-1}, ..., t0 WHERE t0.ref = t1.id AND ...`
//! (tables listed in reverse, the worst written order) and the same join written
//! with `JOIN ... ON`. Each query runs `--reps` times; the median is printed with
//! the process's peak RSS. Then the same schema, data and queries run on a
//! throwaway PostgreSQL cluster (`/usr/lib/postgresql/*/bin`, timed by psql's
//! `\timing`), when it is installed.
//!
//! Run it with:
//!
//! ```text
//! cargo run --release -p tessera-sql --example join_bench
//! cargo run --release -p tessera-sql --example join_bench -- --tables 4,8 --reps 5 --no-postgres
//! ```
//!
//! Options: `--tables LIST` (default `4,8,16,32`; env `JOIN_BENCH_TABLES`),
//! `--reps N` (default 5; env `JOIN_BENCH_REPS`), `--queries comma,on` (which
//! of the two joins to run in Tessera, default both; env `JOIN_BENCH_QUERIES`),
//! `--no-postgres` (env `JOIN_BENCH_NO_POSTGRES=1`).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tessera_sql::mem::MemStore;
use tessera_sql::{ExecContext, execute};

const ROWS: usize = 100;

unsafe extern "C" {
    fn getrusage(who: i32, usage: *mut RUsage) -> i32;
    fn geteuid() -> u32;
}

/// `struct rusage` on 64-bit Linux: two `timeval`s, then 14 `long`s.
#[repr(C)]
#[derive(Default)]
struct RUsage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss: i64,
    rest: [i64; 13],
}

/// Peak resident set size in KiB: `VmHWM` from /proc/self/status (reset per
/// table count when the kernel allows it), else getrusage's `ru_maxrss`.
fn peak_rss_kib() -> u64 {
    if let Ok(s) = std::fs::read_to_string("/proc/self/status")
        && let Some(v) = s.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        && let Ok(k) = v.trim().trim_end_matches("kB").trim().parse()
    {
        return k;
    }
    let mut ru = RUsage::default();
    // RUSAGE_SELF = 0
    if unsafe { getrusage(0, &mut ru) } == 0 { ru.maxrss as u64 } else { 0 }
}

/// Resets the peak RSS mark (Linux ≥ 4.0: `5` to /proc/self/clear_refs), so each
/// table count reports its own peak; false when that is not possible.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

struct Opts {
    tables: Vec<usize>,
    reps: usize,
    comma: bool,
    on: bool,
    postgres: bool,
}

fn opts() -> Opts {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut tables = env("JOIN_BENCH_TABLES").unwrap_or_else(|| "4,8,16,32".into());
    let mut reps = env("JOIN_BENCH_REPS").unwrap_or_else(|| "5".into());
    let mut queries = env("JOIN_BENCH_QUERIES").unwrap_or_else(|| "comma,on".into());
    let mut postgres = env("JOIN_BENCH_NO_POSTGRES").is_none_or(|v| v == "0");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tables" => tables = args.next().expect("--tables needs a list, e.g. 4,8,16"),
            "--reps" => reps = args.next().expect("--reps needs a number"),
            "--queries" => queries = args.next().expect("--queries needs comma, on or comma,on"),
            "--no-postgres" => postgres = false,
            "-h" | "--help" => {
                println!("join_bench [--tables 4,8,16,32] [--reps 5] [--queries comma,on] [--no-postgres]");
                std::process::exit(0);
            }
            other => {
                eprintln!("unknown argument {other}; try --help");
                std::process::exit(2);
            }
        }
    }
    let tables: Vec<usize> = tables.split(',').map(|t| t.trim().parse().expect("--tables: numbers separated by commas")).collect();
    assert!(tables.iter().all(|&n| n >= 2), "--tables: at least 2 tables per join");
    let queries: Vec<&str> = queries.split(',').map(str::trim).collect();
    assert!(queries.iter().all(|q| *q == "comma" || *q == "on"), "--queries: comma, on or comma,on");
    Opts {
        tables,
        reps: reps.parse::<usize>().expect("--reps: a number").max(1),
        comma: queries.contains(&"comma"),
        on: queries.contains(&"on"),
        postgres,
    }
}

/// Schema and data: the same statements for Tessera and PostgreSQL.
fn setup(n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for t in 0..n {
        out.push(format!("CREATE TABLE t{t} (id INTEGER PRIMARY KEY, ref INTEGER, label TEXT)"));
        let values: Vec<String> = (0..ROWS).map(|i| format!("({i}, {}, 'r{t}-{i}')", (i * 7 + t) % ROWS)).collect();
        out.push(format!("INSERT INTO t{t} VALUES {}", values.join(", ")));
    }
    out
}

/// The comma join, tables in reverse, join conditions in WHERE.
fn comma_query(n: usize) -> String {
    let from: Vec<String> = (0..n).rev().map(|t| format!("t{t}")).collect();
    let preds: Vec<String> = (0..n - 1).map(|t| format!("t{t}.ref = t{}.id", t + 1)).collect();
    format!("SELECT t0.id, t{}.label FROM {} WHERE {}", n - 1, from.join(", "), preds.join(" AND "))
}

/// The same join with `JOIN ... ON`, tables in the same (reverse) order.
fn on_query(n: usize) -> String {
    let mut q = format!("SELECT t0.id, t{}.label FROM t{}", n - 1, n - 1);
    for t in (0..n - 1).rev() {
        q.push_str(&format!(" JOIN t{t} ON t{t}.ref = t{}.id", t + 1));
    }
    q
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Median time of `reps` runs, or the error; checks the row count.
fn time_tessera(s: &MemStore, sql: &str, reps: usize) -> Result<Duration, String> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let started = Instant::now();
        let out = execute(s, sql, &[], &ExecContext::default()).map_err(|e| e.to_string())?;
        times.push(started.elapsed());
        if out.result.row_count != ROWS {
            return Err(format!("{} rows, expected {ROWS}", out.result.row_count));
        }
    }
    Ok(median(times))
}

struct Row {
    n: usize,
    comma: Option<Result<Duration, String>>,
    on: Option<Result<Duration, String>>,
    rss_kib: u64,
    pg: Option<(Result<f64, String>, Result<f64, String>)>,
}

fn main() {
    let o = opts();
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    println!("join_bench: {profile} build, {ROWS} rows per table, median of {} runs, tables {:?}", o.reps, o.tables);
    let per_n_rss = reset_peak_rss();
    let mut rows = Vec::new();
    for &n in &o.tables {
        reset_peak_rss();
        let mut s = MemStore::new();
        for stmt in setup(n) {
            s.exec(&stmt, &[]).unwrap_or_else(|e| panic!("setup failed: {e}: {stmt}"));
        }
        let comma = o.comma.then(|| time_tessera(&s, &comma_query(n), o.reps));
        let on = o.on.then(|| time_tessera(&s, &on_query(n), o.reps));
        drop(s);
        let rss_kib = peak_rss_kib();
        let show = |r: &Option<Result<Duration, String>>| match r {
            None => "not run".to_string(),
            Some(Ok(d)) => format!("{} ms", ms(*d)),
            Some(Err(e)) => format!("error: {e}"),
        };
        println!("  {n:>3} tables: comma {}, JOIN ON {}, peak RSS {:.1} MiB", show(&comma), show(&on), rss_kib as f64 / 1024.0);
        rows.push(Row { n, comma, on, rss_kib, pg: None });
    }

    if o.postgres {
        match Postgres::start() {
            Ok(pg) => {
                println!("PostgreSQL: {}", pg.version());
                for r in &mut rows {
                    r.pg = Some(pg.time(r.n, o.reps));
                    let (a, b) = r.pg.as_ref().unwrap();
                    let show = |x: &Result<f64, String>| x.as_ref().map(|m| format!("{m:.3} ms")).unwrap_or_else(|e| format!("error: {e}"));
                    println!("  {:>3} tables: comma {}, JOIN ON {}", r.n, show(a), show(b));
                }
            }
            Err(e) => println!("PostgreSQL not available ({e}); Tessera figures only"),
        }
    } else {
        println!("PostgreSQL skipped (--no-postgres)");
    }

    let rss_label = if per_n_rss { "peak RSS (this N)" } else { "peak RSS (so far)" };
    println!();
    println!("| tables | Tessera comma ms | Tessera JOIN ON ms | PostgreSQL comma ms | PostgreSQL JOIN ON ms | {rss_label} |");
    println!("|---|---|---|---|---|---|");
    let cell = |r: &Option<Result<Duration, String>>| match r {
        None => "-".to_string(),
        Some(Ok(d)) => ms(*d),
        Some(Err(e)) => format!("error: {e}"),
    };
    let pcell = |r: Option<&Result<f64, String>>| match r {
        None => "-".to_string(),
        Some(Ok(m)) => format!("{m:.3}"),
        Some(Err(e)) => format!("error: {e}"),
    };
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} MiB |",
            r.n,
            cell(&r.comma),
            cell(&r.on),
            pcell(r.pg.as_ref().map(|p| &p.0)),
            pcell(r.pg.as_ref().map(|p| &p.1)),
            r.rss_kib as f64 / 1024.0
        );
    }
}

/// A throwaway PostgreSQL cluster in a temp dir, reached over a Unix socket
/// (as storage/sql/tests/support/mod.rs does).
struct Postgres {
    dir: TempDir,
    bin: PathBuf,
    root: bool,
}

/// A directory under the system temp dir, removed on drop (std only, so the
/// example also builds against older trees of this crate).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let p = std::env::temp_dir().join(format!("join_bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&p)?;
        Ok(TempDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Postgres {
    fn as_pg(&self, prog: &str) -> Command {
        as_pg(self.root, &self.bin.join(prog))
    }

    fn start() -> Result<Postgres, String> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|_| "no /usr/lib/postgresql".to_string())?
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("initdb").exists())
            .max()
            .ok_or("no initdb under /usr/lib/postgresql/*/bin")?;
        let dir = TempDir::new().map_err(|e| e.to_string())?;
        let root = unsafe { geteuid() } == 0;
        if root {
            // The cluster runs as `postgres`, which must reach the temp dir.
            Command::new("chown").args(["-R", "postgres"]).arg(dir.path()).status().map_err(|e| e.to_string())?;
        }
        let data = dir.path().join("data");
        let out = as_pg(root, &bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let opts = format!("-c listen_addresses='' -c unix_socket_directories={} -c fsync=off", dir.path().display());
        let out = as_pg(root, &bin.join("pg_ctl"))
            .args(["-w", "-D"])
            .arg(&data)
            .args(["-o", &opts, "-l"])
            .arg(dir.path().join("log"))
            .arg("start")
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("pg_ctl start failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Postgres { dir, bin, root })
    }

    /// Runs a psql script; returns its stdout (errors and all).
    fn psql(&self, script: &str) -> String {
        let path = self.dir.path().join("script.sql");
        std::fs::write(&path, script).unwrap();
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-U", "postgres", "-d", "postgres", "-h"])
            .arg(self.dir.path())
            .arg("-f")
            .arg(&path)
            .output()
            .expect("psql");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text
    }

    fn version(&self) -> String {
        self.psql("SELECT version();").lines().next().unwrap_or("?").to_string()
    }

    /// Median client-side time (psql `\timing`, so parse and plan included) of
    /// the comma join and the JOIN ON join over `n` tables, `reps` runs each.
    fn time(&self, n: usize, reps: usize) -> (Result<f64, String>, Result<f64, String>) {
        let mut script = String::from("\\set ON_ERROR_STOP 1\nDROP SCHEMA public CASCADE;\nCREATE SCHEMA public;\n");
        for s in setup(n) {
            script.push_str(&s);
            script.push_str(";\n");
        }
        script.push_str("ANALYZE;\n\\set ON_ERROR_STOP 0\n");
        // Result rows go to /dev/null; the row count is checked once per query.
        let queries = [comma_query(n), on_query(n)];
        for (i, q) in queries.iter().enumerate() {
            script.push_str(&format!("\\echo ===COUNT{i}\nSELECT count(*) FROM ({q}) s;\n"));
        }
        script.push_str("\\o /dev/null\n\\timing on\n");
        for (i, q) in queries.iter().enumerate() {
            script.push_str(&format!("\\echo ===Q{i}\n"));
            for _ in 0..reps {
                script.push_str(q);
                script.push_str(";\n");
            }
        }
        script.push_str("\\echo ===END\n");
        let text = self.psql(&script);
        let mut times: [Vec<f64>; 2] = [vec![], vec![]];
        let mut counts: [Option<String>; 2] = [None, None];
        let mut errors: [Option<String>; 2] = [None, None];
        let mut cur: Option<(bool, usize)> = None;
        for line in text.lines() {
            if let Some(i) = line.strip_prefix("===COUNT") {
                cur = Some((true, i.parse().unwrap()));
            } else if let Some(i) = line.strip_prefix("===Q") {
                cur = Some((false, i.parse().unwrap()));
            } else if line == "===END" {
                cur = None;
            } else if line.contains("ERROR") {
                match cur {
                    Some((_, i)) => errors[i] = errors[i].clone().or(Some(line.to_string())),
                    None => return (Err(format!("setup failed: {line}")), Err(format!("setup failed: {line}"))),
                }
            } else if let Some((is_count, i)) = cur {
                if is_count {
                    counts[i].get_or_insert_with(|| line.trim().to_string());
                } else if let Some(t) = line.strip_prefix("Time: ")
                    && let Some(m) = t.split_whitespace().next().and_then(|m| m.parse::<f64>().ok())
                {
                    times[i].push(m);
                }
            }
        }
        let result = |i: usize| -> Result<f64, String> {
            if let Some(e) = &errors[i] {
                return Err(e.clone());
            }
            if counts[i].as_deref() != Some(&ROWS.to_string()) {
                return Err(format!("row count {:?}, expected {ROWS}", counts[i]));
            }
            let mut t = times[i].clone();
            if t.is_empty() {
                return Err("no timing lines".into());
            }
            t.sort_by(f64::total_cmp);
            Ok(t[t.len() / 2])
        };
        (result(0), result(1))
    }
}

fn as_pg(root: bool, prog: &Path) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(prog);
        c
    } else {
        Command::new(prog)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self.as_pg("pg_ctl").args(["-m", "immediate", "-D"]).arg(&data).arg("stop").output();
    }
}
