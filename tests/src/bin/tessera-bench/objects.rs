//! `tessera-bench objects`: object PUT and GET throughput (MB/s) through the
//! router for 1 KiB and 8 MiB objects, in a scratch bucket dropped afterwards.

use anyhow::{Result, ensure};
use serde_json::json;

use super::{Client, load};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Deterministic pseudo-random bytes (xorshift): incompressible content.
fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub(super) async fn put(c: &Client, path: &str, body: Vec<u8>) -> Result<()> {
    let r = c
        .http
        .put(format!("{}{path}", c.url))
        .bearer_auth(&c.token)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await?;
    ensure!(r.status().is_success(), "PUT {path}: {} {}", r.status(), r.text().await.unwrap_or_default());
    Ok(())
}

async fn get(c: &Client, path: &str, expect: usize) -> Result<()> {
    let r = c.http.get(format!("{}{path}", c.url)).bearer_auth(&c.token).send().await?;
    ensure!(r.status().is_success(), "GET {path}: {}", r.status());
    let n = r.bytes().await?.len();
    ensure!(n == expect, "GET {path}: {n} bytes, {expect} expected");
    Ok(())
}

fn row(name: &str, size: usize, (ops, p50, p99): (f64, f64, f64)) {
    let mbs = ops * size as f64 / MIB as f64;
    println!("| {name:<34} | {ops:>9.1} | {mbs:>8.2} | {p50:>9.2} | {p99:>9.2} |");
}

/// Runs the object workloads for `secs` seconds each.
pub async fn run(c: Client, secs: u64) -> Result<()> {
    let bucket = format!("bench-objects-{}", std::process::id());
    c.send(reqwest::Method::POST, "/api/v1/objects/buckets", Some(&json!({"name": bucket})), "quorum").await?;
    println!("| {:<34} | {:>9} | {:>8} | {:>9} | {:>9} |", "workload", "ops/s", "MB/s", "p50 ms", "p99 ms");
    println!("|{:-<36}|{:-<11}|{:-<10}|{:-<11}|{:-<11}|", "", "", "", "", "");
    for (label, size, clients) in [("1 KiB", KIB, 16usize), ("8 MiB", 8 * MIB, 2)] {
        let body = std::sync::Arc::new(content(size, size as u64));
        let (c2, b2, bucket2) = (c.clone(), body.clone(), bucket.clone());
        let r = load(clients, secs, move |i, n| {
            let (c, body, path) = (c2.clone(), b2.clone(), format!("/api/v1/objects/buckets/{bucket2}/object/{label}/{i}/{n}"));
            async move { put(&c, &path, body.to_vec()).await }
        })
        .await?;
        row(&format!("PUT {label}, {clients} clients"), size, r);
        let (c2, bucket2) = (c.clone(), bucket.clone());
        let r = load(clients, secs, move |i, _| {
            let (c, path) = (c2.clone(), format!("/api/v1/objects/buckets/{bucket2}/object/{label}/{i}/0"));
            async move { get(&c, &path, size).await }
        })
        .await?;
        row(&format!("GET {label} (quorum), {clients} clients"), size, r);
    }
    c.send(reqwest::Method::DELETE, &format!("/api/v1/objects/buckets/{bucket}"), None, "quorum").await?;
    Ok(())
}
