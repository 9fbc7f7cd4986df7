//! `tessera-bench vectors [--rows N]`: batch upserts/s, then search QPS and
//! recall@10 at ef 16…256 on N × 128 uniform random vectors (l2), next to an
//! exact brute-force scan computed here and next to `hnswlib` (PyPI) built on
//! the same data in the same run (M = 16, ef_construction = 200: our defaults).
//!
//! The data, queries and exact answers go to a temporary directory as raw
//! little-endian f32 / u32; an embedded Python script loads them with numpy,
//! builds the hnswlib index single-threaded and prints build time, QPS
//! (single-threaded, one query at a time) and recall per ef. When
//! `import hnswlib` fails the bench runs `python3 -m pip install --user hnswlib`
//! and says so.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::Client;

const DIM: usize = 128;
const K: usize = 10;
const QUERIES: usize = 200;
const BATCH: usize = 250;
const WRITERS: usize = 4;
const SEARCHERS: usize = 8;
const EFS: [usize; 5] = [16, 32, 64, 128, 256];

/// The hnswlib side, run with `python3 script dir n dim q k ef…`.
const HNSWLIB_SCRIPT: &str = r#"
import sys, time
import numpy as np
import hnswlib
d = sys.argv[1]
n, dim, q, k = (int(x) for x in sys.argv[2:6])
efs = [int(x) for x in sys.argv[6:]]
data = np.fromfile(f"{d}/data.f32", dtype="<f4").reshape(n, dim)
queries = np.fromfile(f"{d}/queries.f32", dtype="<f4").reshape(q, dim)
truth = np.fromfile(f"{d}/truth.u32", dtype="<u4").reshape(q, k)
index = hnswlib.Index(space="l2", dim=dim)
t = time.perf_counter()
index.init_index(max_elements=n, M=16, ef_construction=200, random_seed=100)
index.add_items(data, np.arange(n), num_threads=1)
print(f"build {time.perf_counter() - t:.3f}", flush=True)
for ef in efs:
    index.set_ef(max(ef, k))
    t = time.perf_counter()
    found = [index.knn_query(queries[i:i + 1], k=k, num_threads=1)[0][0] for i in range(q)]
    elapsed = time.perf_counter() - t
    recall = sum(len(set(f.tolist()) & set(truth[i].tolist())) for i, f in enumerate(found)) / (q * k)
    print(f"ef {ef} {q / elapsed:.1f} {recall:.4f}", flush=True)
"#;

/// Deterministic uniform floats in [-1, 1) (xorshift).
struct Rng(u64);

impl Rng {
    fn f(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn l2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Exact top-k row numbers of each query.
fn brute_force(data: &[f32], queries: &[f32]) -> Vec<Vec<u32>> {
    queries
        .chunks(DIM)
        .map(|q| {
            let mut all: Vec<(f32, u32)> = data.chunks(DIM).enumerate().map(|(i, v)| (l2(v, q), i as u32)).collect();
            all.select_nth_unstable_by(K, |a, b| a.0.total_cmp(&b.0));
            all.truncate(K);
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            all.into_iter().map(|(_, i)| i).collect()
        })
        .collect()
}

fn le_bytes<T: Copy>(values: &[T], to: impl Fn(T) -> [u8; 4]) -> Vec<u8> {
    values.iter().flat_map(|v| to(*v)).collect()
}

/// `(ef, QPS, recall@10)` of one row.
type Row = (usize, f64, f64);

/// Runs hnswlib on the files in `dir`; `(build seconds, rows)`.
fn hnswlib(dir: &std::path::Path, n: usize) -> Result<(f64, Vec<Row>)> {
    let py = |args: &[&str]| std::process::Command::new("python3").args(args).output();
    let ok = py(&["-c", "import hnswlib, numpy"]).map(|o| o.status.success());
    match ok {
        Err(e) => bail!("python3 is not available ({e}); install Python 3 and run: python3 -m pip install --user hnswlib"),
        Ok(true) => {}
        Ok(false) => {
            println!("hnswlib is not installed: running `python3 -m pip install --user hnswlib` (compiles C++, needs g++)");
            let out = py(&["-m", "pip", "install", "--user", "hnswlib"])?;
            if !out.status.success() {
                bail!(
                    "pip failed; install it yourself with: python3 -m pip install --user hnswlib\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    let script = dir.join("hnswlib_bench.py");
    std::fs::write(&script, HNSWLIB_SCRIPT)?;
    let mut args: Vec<String> = vec![script.to_string_lossy().into(), dir.to_string_lossy().into()];
    args.extend([n, DIM, QUERIES, K].iter().map(|x| x.to_string()));
    args.extend(EFS.iter().map(|x| x.to_string()));
    let out = std::process::Command::new("python3").args(&args).output()?;
    if !out.status.success() {
        bail!("the hnswlib script failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (mut build, mut rows) = (0.0, Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["build", s] => build = s.parse()?,
            ["ef", ef, qps, recall] => rows.push((ef.parse()?, qps.parse()?, recall.parse()?)),
            _ => {}
        }
    }
    Ok((build, rows))
}

/// Runs the vector workloads on `n` random vectors.
pub async fn run(c: Client, n: u64) -> Result<()> {
    let n = n as usize;
    if n <= K {
        bail!("--rows must be more than {K}");
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let data: Vec<f32> = (0..n * DIM).map(|_| rng.f()).collect();
    let queries: Vec<f32> = (0..QUERIES * DIM).map(|_| rng.f()).collect();
    let name = format!("bench_vectors_{}", std::process::id());
    let created = c
        .send(reqwest::Method::POST, "/api/v1/vector/collections", Some(&json!({"name": name, "dim": DIM, "metric": "l2"})), "quorum")
        .await?;
    let shards = created["shards"].as_array().map_or(1, Vec::len);
    println!(
        "{n} × {DIM} uniform random vectors in [-1, 1), l2, {QUERIES} queries, k = {K}; collection over {shards} shards, m = 16, ef_construction = 200"
    );

    // Batch upserts from WRITERS concurrent clients.
    let data = Arc::new(data);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (c, data, name) = (c.clone(), data.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            for (b, rows) in data.chunks(BATCH * DIM).enumerate().filter(|(b, _)| b % WRITERS == w) {
                let vectors: Vec<Value> =
                    rows.chunks(DIM).enumerate().map(|(i, v)| json!({"id": (b * BATCH + i).to_string(), "vector": v})).collect();
                c.send(
                    reqwest::Method::POST,
                    &format!("/api/v1/vector/collections/{name}/batch"),
                    Some(&json!({"vectors": vectors})),
                    "quorum",
                )
                .await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let load_secs = started.elapsed().as_secs_f64();
    println!("upserts: {:.0}/s ({n} in {load_secs:.1} s, batches of {BATCH}, {WRITERS} clients)\n", n as f64 / load_secs);

    // Exact answers.
    let started = Instant::now();
    let truth = brute_force(&data, &queries);
    let brute_qps = QUERIES as f64 / started.elapsed().as_secs_f64();

    // hnswlib on the same data, in the same run.
    let dir = tempfile::tempdir()?;
    std::fs::File::create(dir.path().join("data.f32"))?.write_all(&le_bytes(&data, f32::to_le_bytes))?;
    std::fs::File::create(dir.path().join("queries.f32"))?.write_all(&le_bytes(&queries, f32::to_le_bytes))?;
    let flat: Vec<u32> = truth.iter().flatten().copied().collect();
    std::fs::File::create(dir.path().join("truth.u32"))?.write_all(&le_bytes(&flat, u32::to_le_bytes))?;

    // Our searches: SEARCHERS concurrent clients share the queries.
    let queries = Arc::new(queries);
    let mut ours = Vec::new();
    for ef in EFS {
        let started = Instant::now();
        let mut tasks = Vec::new();
        for s in 0..SEARCHERS {
            let (c, queries, name) = (c.clone(), queries.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                for (qi, q) in queries.chunks(DIM).enumerate().filter(|(qi, _)| qi % SEARCHERS == s) {
                    let body = json!({"vector": q, "k": K, "ef": ef});
                    let r =
                        c.send(reqwest::Method::POST, &format!("/api/v1/vector/collections/{name}/search"), Some(&body), "quorum").await?;
                    let ids: Vec<u32> = r["hits"]
                        .as_array()
                        .context("hits")?
                        .iter()
                        .filter_map(|h| h["id"].as_str().and_then(|s| s.parse().ok()))
                        .collect();
                    got.push((qi, ids));
                }
                Ok::<_, anyhow::Error>(got)
            }));
        }
        let mut found = 0usize;
        for t in tasks {
            for (qi, ids) in t.await?? {
                let want: HashSet<u32> = truth[qi].iter().copied().collect();
                found += ids.iter().filter(|i| want.contains(i)).count();
            }
        }
        let qps = QUERIES as f64 / started.elapsed().as_secs_f64();
        ours.push((ef, qps, found as f64 / (QUERIES * K) as f64));
    }
    // hnswlib after ours, so the two do not share the CPU.
    let theirs = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || hnswlib(&dir, n)
    })
    .await?;

    println!("| {:<6} | {:>14} | {:>10} | {:>14} | {:>10} |", "ef", "tessera QPS", "recall@10", "hnswlib QPS", "recall@10");
    println!("|{:-<8}|{:-<16}|{:-<12}|{:-<16}|{:-<12}|", "", "", "", "", "");
    for (i, (ef, qps, recall)) in ours.iter().enumerate() {
        let (hq, hr) = match &theirs {
            Ok((_, rows)) => rows.get(i).map_or(("-".into(), "-".into()), |r| (format!("{:.0}", r.1), format!("{:.3}", r.2))),
            Err(_) => ("-".into(), "-".into()),
        };
        println!("| {ef:<6} | {qps:>14.0} | {recall:>10.3} | {hq:>14} | {hr:>10} |");
    }
    println!("| {:<6} | {brute_qps:>14.0} | {:>10.3} | {:>14} | {:>10} |", "exact", 1.0, "", "");
    println!(
        "\ntessera: through the router over HTTP, {SEARCHERS} concurrent clients, each search fanned out to {shards} shards; build = the upserts above ({load_secs:.1} s)"
    );
    println!("exact: brute-force scan in this process, one thread");
    match theirs {
        Ok((build, _)) => {
            println!("hnswlib: in-process, one thread, one query per call; build {build:.1} s (M = 16, ef_construction = 200)")
        }
        Err(e) => println!("hnswlib: not run: {e:#}"),
    }
    c.send(reqwest::Method::DELETE, &format!("/api/v1/vector/collections/{name}"), None, "quorum").await?;
    Ok(())
}
