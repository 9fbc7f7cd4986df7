//! `tessera-bench documents [--rows N] [--seconds S]`: documents inserted/s one
//! at a time (1 and 16 clients) and through `POST /import/documents`, then the
//! time of a filtered query over the N imported documents (equality on a field
//! that 1 % of them match, and a range matching 1 %) without and with a
//! secondary index on the filtered field. Documents: ~200 bytes of JSON each.

use std::time::Instant;

use anyhow::{Result, ensure};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, header, load, row};

/// Documents per import request (the router cuts them into batches of 1000).
const IMPORT_CHUNK: u64 = 10_000;

fn doc(i: u64) -> Value {
    json!({
        "name": format!("user-{i}"),
        "category": format!("c{}", i % 100),
        "n": i,
        "score": (i % 1000) as f64 / 10.0,
        "active": i.is_multiple_of(2),
        "address": {"city": format!("city-{}", i % 50), "zip": format!("{:05}", i % 99_999)},
        "tags": ["alpha", "beta", format!("t{}", i % 7)],
    })
}

pub async fn run(c: Client, secs: u64, rows: u64) -> Result<()> {
    let run_id = std::process::id();
    let single = format!("bench_single_{run_id}");
    let bulk = format!("bench_bulk_{run_id}");
    for name in [&single, &bulk] {
        c.send(Method::POST, "/api/v1/documents/collections", Some(&json!({"name": name})), "quorum").await?;
    }
    header();
    for clients in [1usize, 16] {
        let (c2, coll) = (c.clone(), single.clone());
        let r = load(clients, secs, move |i, n| {
            let (c, coll) = (c2.clone(), coll.clone());
            async move {
                let body = json!({"document": doc(i as u64 * 1_000_000 + n)});
                c.send(Method::POST, &format!("/api/v1/documents/collections/{coll}/documents"), Some(&body), "quorum").await.map(drop)
            }
        })
        .await?;
        row(&format!("document insert, {clients} clients"), r);
    }

    // Bulk import of `rows` documents, sequential requests.
    let started = Instant::now();
    let mut lat = Vec::new();
    let mut next = 0u64;
    while next < rows {
        let end = (next + IMPORT_CHUNK).min(rows);
        let docs: Vec<Value> = (next..end).map(doc).collect();
        let t = Instant::now();
        let r = c.send(Method::POST, "/api/v1/import/documents", Some(&json!({"collection": bulk, "documents": docs})), "quorum").await?;
        ensure!(r["rows_imported"] == json!(end - next), "import: {r}");
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        next = end;
    }
    let secs_taken = started.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0.0);
    row(&format!("document import, {IMPORT_CHUNK}/request (docs)"), (rows as f64 / secs_taken, pct(0.5), pct(0.99)));

    // Filtered queries over the imported collection, without then with an index.
    let path = format!("/api/v1/documents/collections/{bulk}/query");
    let range_hi = rows / 100;
    let filters = [("category = c42", json!({"category": "c42"}), "category"), ("n < 1 % of rows", json!({"n": {"$lt": range_hi}}), "n")];
    for (label, filter, _) in &filters {
        let r = query_load(&c, &path, filter.clone(), secs, rows, false).await?;
        row(&format!("query {label}, {rows} docs, no index"), r);
    }
    for (_, _, field) in &filters {
        c.send(Method::POST, &format!("/api/v1/documents/collections/{bulk}/indexes"), Some(&json!({"field": field})), "quorum").await?;
    }
    for (label, filter, _) in &filters {
        let r = query_load(&c, &path, filter.clone(), secs, rows, true).await?;
        row(&format!("query {label}, {rows} docs, indexed"), r);
    }
    Ok(())
}

/// One client querying for `secs`; checks the match count and the index use.
async fn query_load(c: &Client, path: &str, filter: Value, secs: u64, rows: u64, indexed: bool) -> Result<(f64, f64, f64)> {
    let (c2, path) = (c.clone(), path.to_string());
    let want = (rows / 100).max(1);
    load(1, secs, move |_, _| {
        let (c, path, filter) = (c2.clone(), path.clone(), filter.clone());
        async move {
            let r = c.send(Method::POST, &path, Some(&json!({"filter": filter})), "one").await?;
            ensure!(r["total_matched"].as_u64().is_some_and(|m| m.abs_diff(want) <= 1), "matches: {}", r["total_matched"]);
            ensure!(r["index_used"].is_null() != indexed, "index use: {}", r["index_used"]);
            Ok(())
        }
    })
    .await
}
