//! `tessera-bench graph [--rows E]`: builds a graph of E edges (default 100 000)
//! over E/10 nodes (each node links to 10 pseudo-random others) through
//! `POST /api/v1/graph/batch` (one Raft command per batch), then times 3-hop
//! traversals from 20 start nodes: `GET /graph/data?depth=3` (breadth-first) and
//! the pattern query `MATCH (a)-[:LINK*1..3]->(b) WHERE id(a) = $id RETURN
//! count(DISTINCT b)`, printing avg and p50 per traversal and the nodes reached.

use std::time::Instant;

use anyhow::{Context, Result};
use reqwest::Method;
use serde_json::{Value, json};

use super::Client;

/// Nodes or edges per batch request.
const BATCH: u64 = 5_000;
/// Out-degree of every node.
const DEGREE: u64 = 10;
/// Start nodes timed per workload.
const STARTS: u64 = 20;

/// splitmix64: deterministic pseudo-random targets.
pub(super) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn stats(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let avg = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    (avg, ms.get(ms.len() / 2).copied().unwrap_or(0.0))
}

fn print_row(name: &str, runs: usize, (avg, p50): (f64, f64), reached: f64) {
    println!("| {name:<44} | {runs:>5} | {avg:>9.2} | {p50:>9.2} | {reached:>13.0} |");
}

pub async fn run(c: Client, edges: u64) -> Result<()> {
    let graph = format!("bench_{}", std::process::id());
    let nodes = (edges / DEGREE).max(2);
    let started = Instant::now();
    let mut next = 0;
    while next < nodes {
        let end = (next + BATCH).min(nodes);
        let batch: Vec<Value> = (next..end).map(|i| json!({"id": format!("n{i}"), "label": "Item", "properties": {"n": i}})).collect();
        c.send(Method::POST, "/api/v1/graph/batch", Some(&json!({"graph": graph, "nodes": batch})), "quorum").await?;
        next = end;
    }
    let nodes_done = started.elapsed().as_secs_f64();
    let edge_start = Instant::now();
    let mut next = 0;
    while next < edges {
        let end = (next + BATCH).min(edges);
        let batch: Vec<Value> = (next..end)
            .map(|i| {
                let from = i / DEGREE % nodes;
                let mut to = mix(i) % nodes;
                if to == from {
                    to = (to + 1) % nodes;
                }
                json!({"id": format!("e{i}"), "from_node": format!("n{from}"), "to_node": format!("n{to}"), "label": "LINK"})
            })
            .collect();
        c.send(Method::POST, "/api/v1/graph/batch", Some(&json!({"graph": graph, "edges": batch})), "quorum").await?;
        next = end;
    }
    let edge_secs = edge_start.elapsed().as_secs_f64();
    println!(
        "graph {graph}: {nodes} nodes in {nodes_done:.1} s, {edges} edges in {edge_secs:.1} s ({:.0} edges/s, batches of {BATCH})\n",
        edges as f64 / edge_secs.max(1e-9)
    );

    println!("| {:<44} | {:>5} | {:>9} | {:>9} | {:>13} |", "3-hop traversal", "runs", "avg ms", "p50 ms", "nodes reached");
    println!("|{:-<46}|{:-<7}|{:-<11}|{:-<11}|{:-<15}|", "", "", "", "", "");
    let starts: Vec<String> = (0..STARTS).map(|i| format!("n{}", mix(i + 1_000_000) % nodes)).collect();
    for depth in [1u32, 2, 3] {
        let (mut ms, mut reached) = (Vec::new(), 0u64);
        for s in &starts {
            let t = Instant::now();
            let r = c
                .send(Method::GET, &format!("/api/v1/graph/data?graph={graph}&start_node={s}&depth={depth}&limit=100000"), None, "quorum")
                .await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            reached += r["node_count"].as_u64().context("node_count")?.saturating_sub(1);
        }
        print_row(&format!("GET /graph/data depth={depth} (BFS)"), ms.len(), stats(ms), reached as f64 / STARTS as f64);
    }
    for (name, query) in [
        ("pattern -[:LINK*1..3]-> count(DISTINCT b)", "MATCH (a)-[:LINK*1..3]->(b) WHERE id(a) = $id RETURN count(DISTINCT b)"),
        ("pattern -[:LINK*1..3]-> count(*) (paths)", "MATCH (a)-[:LINK*1..3]->(b) WHERE id(a) = $id RETURN count(*)"),
    ] {
        let (mut ms, mut reached) = (Vec::new(), 0u64);
        for s in &starts {
            let body = json!({"graph": graph, "query": query, "params": {"id": s}});
            let t = Instant::now();
            let r = c.send(Method::POST, "/api/v1/graph/query", Some(&body), "quorum").await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            reached += r["rows"][0][0].as_u64().context("count")?;
        }
        print_row(name, ms.len(), stats(ms), reached as f64 / STARTS as f64);
    }
    Ok(())
}
