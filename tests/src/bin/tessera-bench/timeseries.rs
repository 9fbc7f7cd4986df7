//! `tessera-bench timeseries [--rows N]`: N points written through
//! `POST /timeseries/write` in batches of 1000 (4 concurrent writers, 10 series,
//! one point every 10 s per series starting 10 days ago), then the stored bytes
//! per point as the engine reports them (`GET /timeseries/metrics/{name}`:
//! compressed chunk bytes / points), before and after `POST /admin/compress`
//! (which seals the cold days into one chunk per series and day).
//!
//! Values: a CPU-like gauge (random walk clamped to 0–100, one decimal) for the
//! first half of the series and a full-precision random walk for the rest.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::{Client, header, row};

const BATCH: u64 = 1_000;
const SERIES: u64 = 10;
const WRITERS: u64 = 4;
const STEP_MS: i64 = 10_000;
const DAY_MS: i64 = 86_400_000;

/// A small deterministic generator (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The points of series `s` (values for indices `0..per_series`).
fn series_values(s: u64, per_series: u64) -> Vec<f64> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (s + 1));
    let mut level = 50.0f64;
    (0..per_series)
        .map(|_| {
            level += rng.next() * 2.0 - 1.0;
            if s < SERIES / 2 {
                level = level.clamp(0.0, 100.0);
                (level * 10.0).round() / 10.0
            } else {
                level
            }
        })
        .collect()
}

pub async fn run(c: Client, rows: u64) -> Result<()> {
    let metric = format!("bench.cpu.{}", std::process::id());
    let per_series = rows.div_ceil(SERIES);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    let start = (now / DAY_MS - 10) * DAY_MS;
    // Batches: each one series' consecutive points, so writes land in few chunks.
    let mut batches: Vec<Value> = Vec::new();
    for s in 0..SERIES {
        let vals = series_values(s, per_series);
        for chunk in (0..per_series).collect::<Vec<_>>().chunks(BATCH as usize) {
            let pts: Vec<Value> = chunk
                .iter()
                .map(|i| json!({"timestamp": start + *i as i64 * STEP_MS, "value": vals[*i as usize], "tags": {"host": format!("h{s}")}}))
                .collect();
            batches.push(json!({"metric": metric, "points": pts}));
        }
    }
    let total: u64 = batches.iter().map(|b| b["points"].as_array().map_or(0, |p| p.len() as u64)).sum();
    let queue = Arc::new(Mutex::new(batches));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let (c, queue, latencies) = (c.clone(), queue.clone(), latencies.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(body) = queue.lock().await.pop() else { break };
                let t = Instant::now();
                c.send(Method::POST, "/api/v1/timeseries/write", Some(&body), "quorum").await?;
                latencies.lock().await.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let mut l = latencies.lock().await.clone();
    l.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0.0);
    header();
    row(&format!("ts write, {BATCH}-pt batches, {WRITERS} writers (pts)"), (total as f64 / secs, pct(0.5), pct(0.99)));
    println!();

    let stats = |c: Client, metric: String| async move {
        c.send(Method::GET, &format!("/api/v1/timeseries/metrics/{metric}"), None, "quorum").await
    };
    let before = stats(c.clone(), metric.clone()).await?;
    let report = c.send(Method::POST, "/api/v1/admin/compress", Some(&json!({"older_than": "0s"})), "quorum").await?;
    let after = stats(c.clone(), metric.clone()).await?;
    println!("| {:<40} | {:>10} | {:>12} | {:>8} | {:>12} |", "time-series storage", "points", "bytes", "chunks", "bytes/point");
    println!("|{:-<42}|{:-<12}|{:-<14}|{:-<10}|{:-<14}|", "", "", "", "", "");
    for (label, s) in [("as written (hourly chunks)", &before), ("after admin/compress (day chunks)", &after)] {
        println!(
            "| {label:<40} | {:>10} | {:>12} | {:>8} | {:>12.3} |",
            s["points"].as_u64().unwrap_or(0),
            s["bytes"].as_u64().unwrap_or(0),
            s["chunks"].as_u64().unwrap_or(0),
            s["bytes_per_point"].as_f64().unwrap_or(f64::NAN)
        );
    }
    println!("\n(raw point = 16 bytes; compress report: {})", report["timeseries"]);
    Ok(())
}
