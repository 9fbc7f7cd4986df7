//! Scenario: a healthy 3-node cluster serves a bulk key-value workload.
//!
//! 1,000 keys are written with 16 requests in flight (the router sends the
//! writes that meet one of their group in flight to the leader together), read back with quorum
//! reads, listed by prefix (merged across shards, in key order, with limits),
//! counted, deleted one by one and by prefix.

use std::collections::BTreeSet;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, stream};
use tessera_tests::{Cluster, ClusterOptions, EXPECTED_VERSION, Http, NODE_IDS, Value, as_id, json};

const N: usize = 1000;
const PREFIX: &str = "kvc-";
const IN_FLIGHT: usize = 16;

fn key(i: usize) -> String {
    format!("{PREFIX}{i:04}")
}

fn value(i: usize) -> Value {
    json!({"i": i, "name": format!("item {i}"), "tags": ["a", i % 7], "nested": {"even": i & 1 == 0}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_cluster() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("kv_cluster scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let quorum = api.consistency("quorum");

    // Health and topology.
    let health = api.anonymous().get("/health").await?.ensure_status(200)?;
    ensure!(health.json["version"] == EXPECTED_VERSION, "unexpected /health: {health}");
    api.anonymous().get("/livez").await?.ensure_status(200)?;
    check_topology(c).await?;

    // Write 1,000 keys, 16 in flight.
    let puts: Vec<(usize, Result<tessera_tests::Resp>)> = stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            async move { (i, api.kv_put(&key(i), value(i), None).await) }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut groups = BTreeSet::new();
    for (i, r) in puts {
        let r = r.with_context(|| format!("put {}", key(i)))?.ensure_status(200)?;
        ensure!(r.json["key"] == key(i), "put {}: wrong entry {r}", key(i));
        ensure!(r.json["value"] == value(i), "put {}: wrong value in entry {r}", key(i));
        for field in ["created_at", "updated_at"] {
            ensure!(!r.json[field].is_null(), "put {}: entry lacks {field}: {r}", key(i));
        }
        let node = r.served_by().with_context(|| format!("put {}: no X-Tessera-Node: {r}", key(i)))?;
        ensure!(NODE_IDS.contains(&node), "put {}: served by unknown node {node}", key(i));
        groups.insert(r.group().with_context(|| format!("put {}: no X-Tessera-Group: {r}", key(i)))?);
    }
    eprintln!("wrote {N} keys across groups {groups:?}");
    // Writes that met an earlier write of their group in flight went to its
    // leader together, many in one call, each still answered with its own entry.
    let metrics = api.get("/metrics").await?.ensure_status(200)?;
    let coalesced: f64 = metrics
        .text
        .lines()
        .find_map(|l| l.strip_prefix("tessera_router_coalesced_writes_total ").and_then(|v| v.trim().parse().ok()))
        .with_context(|| format!("no tessera_router_coalesced_writes_total in /metrics: {}", metrics.text))?;
    eprintln!("{coalesced} of the {N} writes went to a leader with others in one call");
    ensure!(coalesced > 0.0, "{IN_FLIGHT} writers in flight never shared a call to a leader");
    ensure!(groups.len() >= 2, "all keys landed in one group ({groups:?}); the list test would not merge shards");

    // Keys just outside the prefix must never show up in its list/count.
    let outside = ["kvb-9999", "kvc", "kvc.0000", "kvd-0000", "kvd-0001", "kvd-0002"];
    for k in outside {
        api.kv_put(k, json!(k), None).await?.ensure_status(200)?;
    }

    // Read every key back with quorum reads.
    let gets: Vec<(usize, Result<tessera_tests::Resp>)> = stream::iter(0..N)
        .map(|i| {
            let q = quorum.clone();
            async move { (i, q.kv_get(&key(i)).await) }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut bad = Vec::new();
    for (i, r) in gets {
        match r {
            Ok(r) if r.status == 200 && r.json["key"] == key(i) && r.json["value"] == value(i) => {}
            Ok(r) => bad.push(format!("{}: {r}", key(i))),
            Err(e) => bad.push(format!("{}: {e:#}", key(i))),
        }
    }
    ensure!(bad.is_empty(), "{} of {N} quorum reads wrong, e.g. {:?}", bad.len(), &bad[..bad.len().min(5)]);

    // List by prefix: merged across shards, sorted, exact set.
    let expected: Vec<String> = (0..N).map(key).collect();
    let r = quorum.kv_list(PREFIX, Some(N)).await?.ensure_status(200)?;
    let entries = r.json["keys"].as_array().context("no keys array")?;
    let listed: Vec<String> = entries.iter().map(|e| e["key"].as_str().unwrap_or_default().to_string()).collect();
    check_sorted(&listed)?;
    ensure!(listed == expected, "list {PREFIX}: got {} keys, first difference at {:?}", listed.len(), first_diff(&listed, &expected));
    ensure!(r.json["total"] == json!(N), "list {PREFIX}: total {} != {N}", r.json["total"]);
    for (i, e) in entries.iter().enumerate() {
        ensure!(e["value"] == value(i), "list entry {} has wrong value {e}", key(i));
    }

    // With a limit: the first keys in global order, total still counts all.
    let (first, total) = quorum.kv_list_keys(PREFIX, Some(25)).await?;
    ensure!(first == expected[..25], "list limit=25 returned {first:?}");
    ensure!(total == N as u64, "list limit=25: total {total} != {N}");

    // A narrower prefix.
    let (sub, total) = quorum.kv_list_keys("kvc-07", Some(N)).await?;
    ensure!(sub == expected[700..800], "list kvc-07 returned {} keys: {:?}…", sub.len(), &sub[..sub.len().min(5)]);
    ensure!(total == 100, "list kvc-07: total {total} != 100");

    // Count by prefix.
    ensure!(quorum.kv_count(PREFIX).await? == N as u64, "count {PREFIX}");
    ensure!(quorum.kv_count("kvc-07").await? == 100, "count kvc-07");
    ensure!(quorum.kv_count("kvd-").await? == 3, "count kvd-");

    // A key that needs URL-encoding in the path.
    odd_key(&api, &quorum).await?;

    // Delete one key.
    let victim = key(500);
    api.kv_delete(&victim).await?.ensure_status(200)?;
    quorum.kv_get(&victim).await?.ensure_status(404)?.ensure_error_body()?;
    api.kv_delete(&victim).await?.ensure_status(404)?.ensure_error_body()?;
    ensure!(quorum.kv_count(PREFIX).await? == N as u64 - 1, "count after single delete");
    let (listed, total) = quorum.kv_list_keys(PREFIX, Some(N)).await?;
    ensure!(!listed.contains(&victim) && listed.len() == N - 1 && total == N as u64 - 1, "list after single delete");

    // Delete by prefix.
    let r = api.kv_delete_prefix(PREFIX).await?.ensure_status(200)?;
    ensure!(r.json["deleted"] == json!(N - 1), "delete by prefix: {r}");
    ensure!(quorum.kv_count(PREFIX).await? == 0, "count after prefix delete");
    let (listed, total) = quorum.kv_list_keys(PREFIX, Some(N)).await?;
    ensure!(listed.is_empty() && total == 0, "list after prefix delete: {listed:?} total {total}");
    quorum.kv_get(&key(1)).await?.ensure_status(404)?;

    // Neighbours of the prefix survive.
    for k in outside {
        let r = quorum.kv_get(k).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(k), "{k} changed: {r}");
    }

    idempotent_retries(&api).await
}

/// A client that sends a write again with the same `Idempotency-Key` (after a
/// timeout, say) gets the first answer and the write does not apply twice: a
/// delete made between the two sends is not undone by the retry. Another key,
/// or no key, applies anew; a malformed key is refused.
async fn idempotent_retries(api: &Http) -> Result<()> {
    let once = api.header("Idempotency-Key", "put-order-7");
    let first = once.kv_put("idem/order", json!({"n": 7}), None).await?.ensure_status(200)?;
    api.kv_delete("idem/order").await?.ensure_status(200)?;
    let retry = once.kv_put("idem/order", json!({"n": 7}), None).await?.ensure_status(200)?;
    ensure!(retry.json == first.json, "the retry answered {retry}, the first send {first}");
    let q = api.consistency("quorum");
    q.kv_get("idem/order").await?.ensure_status(404)?;
    api.header("Idempotency-Key", "put-order-8").kv_put("idem/order", json!({"n": 8}), None).await?.ensure_status(200)?;
    let r = q.kv_get("idem/order").await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!({"n": 8}), "a new key did not apply: {r}");
    api.header("Idempotency-Key", "bad key").kv_put("idem/x", json!(1), None).await?.ensure_status(400)?;
    Ok(())
}

/// `GET /api/v1/admin/cluster`: three reachable nodes, every group led.
async fn check_topology(c: &Cluster) -> Result<()> {
    let info = c.cluster_info().await?;
    let nodes = info["nodes"].as_array().with_context(|| format!("no nodes in {info}"))?;
    let ids: BTreeSet<u64> = nodes.iter().filter_map(|n| as_id(&n["id"])).collect();
    ensure!(ids == NODE_IDS.into_iter().collect(), "cluster nodes {info}");
    ensure!(nodes.iter().all(|n| n["reachable"] == json!(true)), "unreachable node in {info}");
    // Every node reports the log entries its WAL syncs made durable.
    for n in nodes {
        let (syncs, entries) = (n["wal"]["syncs"].as_u64(), n["wal"]["log_entries_synced"].as_u64());
        ensure!(matches!((syncs, entries), (Some(s), Some(e)) if s > 0 && e > 0), "WAL counters of {n}");
    }
    let groups = info["groups"].as_array().with_context(|| format!("no groups in {info}"))?;
    ensure!(groups.len() >= c.options().shard_count as usize, "expected >= {} groups: {info}", c.options().shard_count);
    for g in groups {
        let leader = as_id(&g["leader"]).with_context(|| format!("group without leader: {g}"))?;
        ensure!(NODE_IDS.contains(&leader), "group led by unknown node: {g}");
        ensure!(g["members"].as_array().is_some_and(|m| m.len() == 3), "group members: {g}");
    }
    Ok(())
}

async fn odd_key(api: &Http, quorum: &Http) -> Result<()> {
    let odd = "kvo/odd key ?&#%+ü";
    let r = api.kv_put(odd, json!({"odd": true}), None).await?.ensure_status(200)?;
    ensure!(r.json["key"] == odd, "odd key put: {r}");
    let r = quorum.kv_get(odd).await?.ensure_status(200)?;
    ensure!(r.json["key"] == odd && r.json["value"] == json!({"odd": true}), "odd key get: {r}");
    let (listed, _) = quorum.kv_list_keys("kvo/odd", None).await?;
    ensure!(listed == [odd], "odd key list: {listed:?}");
    api.kv_delete(odd).await?.ensure_status(200)?;
    quorum.kv_get(odd).await?.ensure_status(404)?;
    Ok(())
}

fn check_sorted(keys: &[String]) -> Result<()> {
    if let Some(w) = keys.windows(2).find(|w| w[0] >= w[1]) {
        anyhow::bail!("keys not in strictly ascending order: {:?} then {:?}", w[0], w[1]);
    }
    Ok(())
}

fn first_diff(a: &[String], b: &[String]) -> Option<(usize, Option<String>, Option<String>)> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)).map(|i| (i, a.get(i).cloned(), b.get(i).cloned()))
}
