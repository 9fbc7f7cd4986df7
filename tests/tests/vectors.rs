//! Scenario: the vector store end to end through the router — collections with
//! each metric split over every data group (and one over two), single and batch
//! upserts, gets, searches fanned out over the shards that match a brute-force
//! scan, recall@10 on 10,000 × 64 random vectors, metadata filters applied
//! during the search, soft deletes, dimension errors, one node restarted after
//! updates and deletes that still answers approximate searches exactly like
//! the replicas that never restarted, a collection recreated behind another
//! router's back, and a whole-cluster restart after which the indexes are
//! rebuilt from storage.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, NODE_IDS, Value, json, url_encode, wait_for};

const C: &str = "/api/v1/vector/collections";
const SMALL_N: usize = 200;
const SMALL_DIM: usize = 8;
const RECALL_N: usize = 10_000;
const RECALL_DIM: usize = 64;
const RECALL_QUERIES: usize = 25;
const BATCH: usize = 250;
const COLORS: [&str; 3] = ["red", "green", "blue"];
const METRICS: [&str; 3] = ["cosine", "l2", "dot"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("vectors scenario failed: {e:?}");
    }
}

/// A follower that was down while the leaders snapshotted and purged their
/// logs catches up by snapshot install; its index, built from the installed
/// records plus later entries, answers every change from its own state.
/// (Invalidation of a live replica's indexes on install is unit-tested in
/// storage: the harness can only lag a follower by stopping it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_snapshot_catchup() {
    let opts = ClusterOptions {
        node_env: vec![("SERVICE_RAFT_SNAPSHOT_LOGS".into(), "20".into()), ("SERVICE_RAFT_KEEP_LOGS".into(), "0".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = snapshot_scenario(&mut cluster).await {
        panic!("vectors_snapshot_catchup scenario failed: {e:?}");
    }
}

async fn snapshot_scenario(c: &mut Cluster) -> Result<()> {
    const N: usize = 80;
    let api = c.http.clone();
    // One shard, so that group's log grows past the snapshot threshold.
    api.post(C, &json!({"name": "snap", "dim": 4, "metric": "l2", "shards": 1})).await?.ensure_status(201)?;
    let point = |i: usize| json!([i as f32, 0.0, 0.0, 0.0]);
    for i in 0..10 {
        api.post(&format!("{C}/snap/upsert"), &json!({"id": format!("p{i}"), "vector": point(i)})).await?.ensure_status(200)?;
    }
    // Node 3 serves searches from its own index.
    let node3 = api.consistency("one").replica(3);
    wait_for(Duration::from_secs(30), "node 3 has the first records", async || {
        let got = search(&node3, "snap", json!({"vector": point(9), "k": 1})).await?;
        Ok(got.first().is_some_and(|h| h.0 == "p9").then_some(()))
    })
    .await?;

    c.stop_node(3).await?;
    for i in 10..N {
        api.post(&format!("{C}/snap/upsert"), &json!({"id": format!("p{i}"), "vector": point(i)})).await?.ensure_status(200)?;
    }
    api.delete(&format!("{C}/snap/vectors/p0")).await?.ensure_status(200)?;
    c.start_node(3)?;

    let node3 = c.http.consistency("one").replica(3);
    wait_for(Duration::from_secs(60), "node 3 caught up", async || {
        let r = node3.get(&format!("{C}/snap")).await?.ensure_status(200)?;
        Ok((r.json["count"] == json!(N - 1)).then_some(()))
    })
    .await?;
    for i in [1, 10, 45, N - 1] {
        let got = search(&node3, "snap", json!({"vector": point(i), "k": 1})).await?;
        ensure!(got.first().is_some_and(|h| h.0 == format!("p{i}")), "node 3 search for p{i}: {got:?}");
    }
    let got = search(&node3, "snap", json!({"vector": point(0), "k": 3})).await?;
    ensure!(got.iter().map(|h| h.0.as_str()).collect::<Vec<_>>() == ["p1", "p2", "p3"], "node 3 near p0: {got:?}");
    let log = std::fs::read_to_string(c.node_log(3)?)?;
    ensure!(log.contains("installed snapshot"), "node 3 caught up without installing a snapshot");
    Ok(())
}

/// Deterministic pseudo-random floats in [-1, 1) (xorshift).
struct Rng(u64);

impl Rng {
    fn f(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vec(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.f()).collect()
    }
}

/// Reference distance, in f64: cosine 1 − cos, l2 squared, dot −inner product.
fn distance(metric: &str, a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    match metric {
        "cosine" => {
            let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
            let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
            1.0 - dot / (na * nb)
        }
        "l2" => a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum(),
        _ => -dot,
    }
}

fn expected_score(metric: &str, d: f64) -> f64 {
    match metric {
        "cosine" => 1.0 - d,
        "l2" => 1.0 / (1.0 + d),
        _ => -d,
    }
}

/// Exact top-k ids and distances among `data` entries accepted by `keep`.
fn brute<'a>(
    metric: &str,
    data: &'a BTreeMap<String, (Vec<f32>, Value)>,
    q: &[f32],
    k: usize,
    keep: impl Fn(&Value) -> bool,
) -> Vec<(&'a str, f64)> {
    let mut all: Vec<(&str, f64)> =
        data.iter().filter(|(_, (_, m))| keep(m)).map(|(id, (v, _))| (id.as_str(), distance(metric, v, q))).collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1));
    all.truncate(k);
    all
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-4 * (1.0 + a.abs().max(b.abs()))
}

fn vector_json(v: &[f32]) -> Value {
    json!(v)
}

/// Hits as `(id, distance, score, metadata)`.
fn hits(r: &Value) -> Result<Vec<(String, f64, f64, Value)>> {
    let arr = r["hits"].as_array().with_context(|| format!("no hits array in {r}"))?;
    arr.iter()
        .map(|h| {
            Ok((
                h["id"].as_str().context("hit id")?.to_string(),
                h["distance"].as_f64().context("hit distance")?,
                h["score"].as_f64().context("hit score")?,
                h["metadata"].clone(),
            ))
        })
        .collect()
}

async fn search(api: &Http, coll: &str, body: Value) -> Result<Vec<(String, f64, f64, Value)>> {
    let r = api.post(&format!("{C}/{coll}/search"), &body).await?.ensure_status(200)?;
    hits(&r.json)
}

/// Upserts `records` in batches of [`BATCH`] (one Raft command each).
async fn batch_upsert(api: &Http, coll: &str, records: &[(String, Vec<f32>, Value)]) -> Result<()> {
    for chunk in records.chunks(BATCH) {
        let vectors: Vec<Value> = chunk.iter().map(|(id, v, m)| json!({"id": id, "vector": vector_json(v), "metadata": m})).collect();
        let r = api.post(&format!("{C}/{coll}/batch"), &json!({"vectors": vectors})).await?.ensure_status(200)?;
        ensure!(r.json["upserted"] == json!(chunk.len()), "batch reply {r}");
    }
    Ok(())
}

/// HNSW answers of `k` = 10 (exact-size data, wide `ef`) equal a brute-force
/// scan, with and without a metadata filter; scores follow the metric.
async fn check_exact(api: &Http, metric: &str, data: &BTreeMap<String, (Vec<f32>, Value)>, rng: &mut Rng) -> Result<()> {
    let coll = format!("small-{metric}");
    for qi in 0..10 {
        let q = rng.vec(SMALL_DIM);
        let got = search(api, &coll, json!({"vector": vector_json(&q), "k": 10, "ef": 256})).await?;
        let want = brute(metric, data, &q, 10, |_| true);
        ensure!(got.len() == 10, "{metric} query {qi}: {} hits", got.len());
        for (i, ((id, d, s, meta), (wid, wd))) in got.iter().zip(&want).enumerate() {
            ensure!(close(*d, *wd), "{metric} query {qi} rank {i}: distance {d} ({id}), brute force {wd} ({wid})");
            let (v, m) = data.get(id).with_context(|| format!("unknown hit {id}"))?;
            ensure!(close(*d, distance(metric, v, &q)), "{metric}: reported distance of {id} is {d}");
            ensure!(close(*s, expected_score(metric, *d)), "{metric}: score {s} for distance {d}");
            ensure!(meta == m, "{metric}: metadata of {id}: {meta} != {m}");
        }
        ensure!(got.windows(2).all(|w| w[0].1 <= w[1].1), "{metric}: hits not nearest first");

        // Filters: equality and $in, applied during the search; k hits when k match.
        let color = COLORS[qi % 3];
        let got = search(api, &coll, json!({"vector": vector_json(&q), "k": 10, "filter": {"color": color}})).await?;
        let want = brute(metric, data, &q, 10, |m| m["color"] == json!(color));
        ensure!(got.len() == 10 && want.len() == 10, "{metric} filter {color}: {} hits", got.len());
        for ((id, d, _, meta), (_, wd)) in got.iter().zip(&want) {
            ensure!(meta["color"] == json!(color), "{metric} filter {color} returned {id} {meta}");
            ensure!(close(*d, *wd), "{metric} filter {color}: distance {d}, brute force {wd}");
        }
        let filter = json!({"color": "blue", "n": {"$in": [1, 3]}});
        let got = search(api, &coll, json!({"vector": vector_json(&q), "k": 5, "filter": filter})).await?;
        let keep = |m: &Value| m["color"] == json!("blue") && (m["n"] == json!(1) || m["n"] == json!(3));
        let want = brute(metric, data, &q, 5, keep);
        ensure!(got.len() == want.len(), "{metric} $in filter: {} hits, want {}", got.len(), want.len());
        for ((id, d, _, meta), (_, wd)) in got.iter().zip(&want) {
            ensure!(keep(meta), "{metric} $in filter returned {id} {meta}");
            ensure!(close(*d, *wd), "{metric} $in filter: distance {d}, brute force {wd}");
        }
    }
    Ok(())
}

/// Mean recall@10 of the HNSW index over [`RECALL_QUERIES`] random queries.
async fn recall(api: &Http, coll: &str, data: &BTreeMap<String, (Vec<f32>, Value)>, rng: &mut Rng) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..RECALL_QUERIES {
        let q = rng.vec(RECALL_DIM);
        let got = search(api, coll, json!({"vector": vector_json(&q), "k": 10})).await?;
        let want: BTreeSet<&str> = brute("l2", data, &q, 10, |_| true).into_iter().map(|(id, _)| id).collect();
        total += got.iter().filter(|(id, ..)| want.contains(id.as_str())).count() as f64 / 10.0;
    }
    Ok(total / RECALL_QUERIES as f64)
}

async fn stats_count(api: &Http, coll: &str) -> Result<u64> {
    let r = api.get(&format!("{C}/{coll}")).await?.ensure_status(200)?;
    r.json["count"].as_u64().with_context(|| format!("stats of {coll}: {r}"))
}

/// The collection's shards and how many of them hold records; the per-shard
/// counts must add up to the total.
async fn spread(api: &Http, coll: &str) -> Result<(usize, usize)> {
    let r = api.get(&format!("{C}/{coll}")).await?.ensure_status(200)?;
    let shards = r.json["shards"].as_array().with_context(|| format!("no shards in {r}"))?;
    let counts = r.json["shard_counts"].as_array().with_context(|| format!("no shard_counts in {r}"))?;
    let groups: BTreeSet<u64> = shards.iter().filter_map(Value::as_u64).collect();
    ensure!(groups.len() == shards.len() && counts.len() == shards.len(), "shards of {coll}: {r}");
    let sum: u64 = counts.iter().filter_map(|c| c["count"].as_u64()).sum();
    ensure!(Some(sum) == r.json["count"].as_u64(), "{coll}: shard counts do not add up: {r}");
    Ok((shards.len(), counts.iter().filter(|c| c["count"].as_u64() > Some(0)).count()))
}

/// Inserts, updates with new vectors, deletes and more inserts into a sparse
/// graph (small `m`, `ef_construction`), restarts node 2, then requires every
/// replica to give the leader's answers to approximate searches (small `ef`,
/// with and without a filter). Drops the collection afterwards.
async fn churn_then_restart_one(c: &mut Cluster, api: &Http) -> Result<()> {
    const DIM: usize = 16;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    api.post(C, &json!({"name": "churn", "dim": DIM, "metric": "cosine", "m": 4, "ef_construction": 16})).await?.ensure_status(201)?;
    let record = |i: usize, v: Vec<f32>| (format!("c{i}"), v, json!({"bucket": i % 4}));
    let first: Vec<_> = (0..1500).map(|i| record(i, rng.vec(DIM))).collect();
    batch_upsert(api, "churn", &first).await?;
    let updates: Vec<_> = (0..1500).step_by(4).map(|i| record(i, rng.vec(DIM))).collect();
    batch_upsert(api, "churn", &updates).await?;
    let mut deleted = 0;
    for i in (1..1500).step_by(9) {
        api.delete(&format!("{C}/churn/vectors/c{i}")).await?.ensure_status(200)?;
        deleted += 1;
    }
    let again: Vec<_> = (0..1500).step_by(6).map(|i| record(i, rng.vec(DIM))).collect();
    batch_upsert(api, "churn", &again).await?;
    let more: Vec<_> = (1500..1800).map(|i| record(i, rng.vec(DIM))).collect();
    batch_upsert(api, "churn", &more).await?;
    let count = 1800 - deleted;
    ensure!(stats_count(api, "churn").await? == count, "churn count");
    let queries: Vec<Value> = (0..12)
        .map(|q| {
            let mut body = json!({"vector": vector_json(&rng.vec(DIM)), "k": 10, "ef": 10});
            if q % 2 == 1 {
                body["filter"] = json!({"bucket": q % 4});
            }
            body
        })
        .collect();
    same_answers_everywhere(api, &queries, "before the restart").await?;

    c.stop_node(2).await?;
    c.start_node(2)?;
    let node2 = api.consistency("one").replica(2);
    wait_for(Duration::from_secs(60), "node 2 is back with every churn record", async || {
        let Ok(r) = node2.get(&format!("{C}/churn")).await else { return Ok(None) };
        Ok((r.status == 200 && r.json["count"] == json!(count)).then_some(()))
    })
    .await?;

    same_answers_everywhere(api, &queries, "after node 2 restarted").await?;
    api.delete(&format!("{C}/churn")).await?.ensure_status(200)?;
    Ok(())
}

/// Every replica, pinned, answers each of `queries` on `churn` alike (and as
/// the leaders do), hits and distances.
async fn same_answers_everywhere(api: &Http, queries: &[Value], when: &str) -> Result<()> {
    for (q, body) in queries.iter().enumerate() {
        wait_for(Duration::from_secs(30), &format!("every replica answers churn query {q} alike {when}"), async || {
            let leader = search(api, "churn", body.clone()).await?;
            ensure!(leader.len() == 10, "churn search {body}: {leader:?}");
            for node in NODE_IDS {
                let got = search(&api.consistency("one").replica(node), "churn", body.clone()).await?;
                ensure!(got == leader, "node {node}, query {q}: {got:?} != leaders' {leader:?}");
            }
            Ok(Some(()))
        })
        .await?;
    }
    Ok(())
}

/// Expected records of one collection: id → (vector, metadata).
type Records = BTreeMap<String, (Vec<f32>, Value)>;

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let groups = collections_are_validated_and_created(c, &api).await?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut small = small_collections_are_loaded_per_metric(&api, &mut rng).await?;
    each_collection_spans_every_data_group(&api, groups).await?;
    get_returns_the_vector_as_given(&api, &small).await?;
    bad_input_is_refused_and_changes_nothing(&api, &mut rng).await?;

    for metric in METRICS {
        check_exact(&api, metric, &small[metric], &mut rng).await.with_context(|| format!("{metric} before deletes"))?;
    }

    an_upsert_moves_a_record(&api, &mut small).await?;
    let deleted = soft_deleted_records_are_gone(&api, &mut small).await?;
    for metric in METRICS {
        check_exact(&api, metric, &small[metric], &mut rng).await.with_context(|| format!("{metric} after deletes"))?;
    }

    a_two_shard_collection_answers_exactly(&api, &mut rng).await?;
    let big = recall_at_10_meets_the_bar(&api, groups, &mut rng).await?;
    every_replica_answers_like_the_leader(&api, &mut rng).await?;

    // After updates and deletes, a replica that restarts rebuilds the graph the
    // others built live: pinned to any replica, approximate searches agree.
    churn_then_restart_one(c, &api).await?;

    a_dropped_collections_name_can_be_reused(&api).await?;
    a_collection_recreated_behind_a_routers_back_is_found(c, &api).await?;
    indexes_are_rebuilt_after_a_whole_cluster_restart(c, groups, &big, &small, &deleted, &mut rng).await
}

/// Collection validation and creation. Returns the number of data groups.
async fn collections_are_validated_and_created(c: &mut Cluster, api: &Http) -> Result<usize> {
    for bad in [
        json!({"name": "bad/name", "dim": 4, "metric": "l2"}),
        json!({"name": "ok", "dim": 0, "metric": "l2"}),
        json!({"name": "ok", "dim": 4, "metric": "manhattan"}),
        json!({"name": "ok", "dim": "four", "metric": "l2"}),
    ] {
        api.post(C, &bad).await?.ensure_status(400)?.ensure_error_body()?;
    }
    for metric in METRICS {
        let r = api.post(C, &json!({"name": format!("small-{metric}"), "dim": SMALL_DIM, "metric": metric})).await?;
        let r = r.ensure_status(201)?;
        ensure!(r.json["dim"] == json!(SMALL_DIM) && r.json["metric"] == json!(metric), "created {r}");
    }
    let r = api.post(C, &json!({"name": "recall", "dim": RECALL_DIM, "metric": "L2", "m": 16, "ef_construction": 100})).await?;
    r.ensure_status(201)?;
    api.post(C, &json!({"name": "small-l2", "dim": 3, "metric": "l2"})).await?.ensure_status(409)?.ensure_error_body()?;
    let r = api.get(C).await?.ensure_status(200)?;
    let names: Vec<&str> = r.json["collections"].as_array().context("list")?.iter().filter_map(|c| c["name"].as_str()).collect();
    ensure!(names == ["recall", "small-cosine", "small-dot", "small-l2"], "collections {names:?}");
    api.get(&format!("{C}/nope")).await?.ensure_status(404)?.ensure_error_body()?;
    let groups = c.cluster_info().await?["groups"].as_array().context("groups")?.len() - 1;
    for bad in [json!(0), json!(groups + 1), json!("two")] {
        api.post(C, &json!({"name": "badshards", "dim": 2, "metric": "l2", "shards": bad})).await?.ensure_status(400)?;
    }
    Ok(groups)
}

/// Small data per metric: the first 10 records by single upsert, the rest in
/// batches. Returns the records by metric.
async fn small_collections_are_loaded_per_metric(api: &Http, rng: &mut Rng) -> Result<BTreeMap<String, Records>> {
    let mut small: BTreeMap<String, BTreeMap<String, (Vec<f32>, Value)>> = BTreeMap::new();
    for metric in METRICS {
        let coll = format!("small-{metric}");
        let records: Vec<(String, Vec<f32>, Value)> =
            (0..SMALL_N).map(|i| (format!("doc-{i}"), rng.vec(SMALL_DIM), json!({"color": COLORS[i % 3], "n": i % 5}))).collect();
        for (id, v, m) in &records[..10] {
            let r = api.post(&format!("{C}/{coll}/upsert"), &json!({"id": id, "vector": vector_json(v), "metadata": m})).await?;
            ensure!(r.clone().ensure_status(200)?.json["created"] == json!(true), "upsert {r}");
        }
        batch_upsert(api, &coll, &records[10..]).await?;
        ensure!(stats_count(api, &coll).await? == SMALL_N as u64, "{coll} count");
        small.insert(metric.to_string(), records.into_iter().map(|(id, v, m)| (id, (v, m))).collect());
    }
    Ok(small)
}

/// Each collection spans every data group (the default), and its records are spread over them.
async fn each_collection_spans_every_data_group(api: &Http, groups: usize) -> Result<()> {
    for metric in METRICS {
        let (shards, used) = spread(api, &format!("small-{metric}")).await?;
        ensure!(shards == groups && used >= 2, "small-{metric} spans {shards} groups, {used} with records");
    }
    Ok(())
}

/// Get returns the vector as given (not normalized) and the metadata.
async fn get_returns_the_vector_as_given(api: &Http, small: &BTreeMap<String, Records>) -> Result<()> {
    let (v, m) = &small["cosine"]["doc-7"];
    let r = api.get(&format!("{C}/small-cosine/vectors/doc-7")).await?.ensure_status(200)?;
    let got: Vec<f32> = r.json["vector"].as_array().context("vector")?.iter().filter_map(|x| x.as_f64()).map(|x| x as f32).collect();
    ensure!(&got == v && &r.json["metadata"] == m && r.json["id"] == json!("doc-7"), "get {r}");
    api.get(&format!("{C}/small-cosine/vectors/missing")).await?.ensure_status(404)?.ensure_error_body()?;
    api.get(&format!("{C}/nope/vectors/doc-1")).await?.ensure_status(404)?;
    Ok(())
}

/// Wrong dimension and bad input: 400, and a bad batch changes nothing.
async fn bad_input_is_refused_and_changes_nothing(api: &Http, rng: &mut Rng) -> Result<()> {
    let short = json!({"id": "x", "vector": [1.0, 2.0]});
    api.post(&format!("{C}/small-l2/upsert"), &short).await?.ensure_status(400)?.ensure_error_body()?;
    let mixed = json!({"vectors": [{"id": "ok-1", "vector": vector_json(&rng.vec(SMALL_DIM))}, short]});
    api.post(&format!("{C}/small-l2/batch"), &mixed).await?.ensure_status(400)?;
    api.get(&format!("{C}/small-l2/vectors/ok-1")).await?.ensure_status(404)?;
    api.post(&format!("{C}/small-l2/search"), &json!({"vector": [1.0], "k": 3})).await?.ensure_status(400)?;
    api.post(&format!("{C}/small-l2/search"), &json!({"vector": vector_json(&rng.vec(SMALL_DIM)), "k": 0})).await?.ensure_status(400)?;
    let zero = json!({"id": "z", "vector": vec![0.0; SMALL_DIM]});
    api.post(&format!("{C}/small-cosine/upsert"), &zero).await?.ensure_status(400)?;
    let bad_meta = json!({"id": "z", "vector": vector_json(&rng.vec(SMALL_DIM)), "metadata": [1]});
    api.post(&format!("{C}/small-l2/upsert"), &bad_meta).await?.ensure_status(400)?;
    let bad_filter = json!({"vector": vector_json(&rng.vec(SMALL_DIM)), "filter": {"n": {"$gt": 1}}});
    api.post(&format!("{C}/small-l2/search"), &bad_filter).await?.ensure_status(400)?;
    api.post(&format!("{C}/nope/search"), &json!({"vector": [1.0], "k": 1})).await?.ensure_status(404)?;
    ensure!(stats_count(api, "small-l2").await? == SMALL_N as u64, "a rejected batch changed the count");
    Ok(())
}

/// Upsert replaces: a record moved far away is found at its new place.
async fn an_upsert_moves_a_record(api: &Http, small: &mut BTreeMap<String, Records>) -> Result<()> {
    let far = vec![50.0f32; SMALL_DIM];
    let r = api.post(&format!("{C}/small-l2/upsert"), &json!({"id": "doc-3", "vector": far, "metadata": {"color": "red", "n": 3}})).await?;
    ensure!(r.clone().ensure_status(200)?.json["created"] == json!(false), "re-upsert {r}");
    small.get_mut("l2").context("l2")?.insert("doc-3".into(), (far.clone(), json!({"color": "red", "n": 3})));
    let got = search(api, "small-l2", json!({"vector": far, "k": 1})).await?;
    ensure!(got.first().is_some_and(|h| h.0 == "doc-3" && h.1 == 0.0), "moved record: {got:?}");
    Ok(())
}

/// Soft deletes: gone from get and from every search, count drops, delete
/// again is 404. Returns the deleted ids.
async fn soft_deleted_records_are_gone(api: &Http, small: &mut BTreeMap<String, Records>) -> Result<Vec<String>> {
    let deleted: Vec<String> = (0..SMALL_N).step_by(9).map(|i| format!("doc-{i}")).collect();
    for metric in METRICS {
        let coll = format!("small-{metric}");
        for id in &deleted {
            api.delete(&format!("{C}/{coll}/vectors/{}", url_encode(id))).await?.ensure_status(200)?;
            small.get_mut(metric).context("metric")?.remove(id);
        }
        api.delete(&format!("{C}/{coll}/vectors/{}", deleted[0])).await?.ensure_status(404)?.ensure_error_body()?;
        ensure!(stats_count(api, &coll).await? == (SMALL_N - deleted.len()) as u64, "{coll} count after deletes");
    }
    api.get(&format!("{C}/small-dot/vectors/{}", deleted[1])).await?.ensure_status(404)?;
    Ok(deleted)
}

/// A collection over two shards: exact answers, records on both.
async fn a_two_shard_collection_answers_exactly(api: &Http, rng: &mut Rng) -> Result<()> {
    api.post(C, &json!({"name": "two", "dim": SMALL_DIM, "metric": "l2", "shards": 2})).await?.ensure_status(201)?;
    let two: BTreeMap<String, (Vec<f32>, Value)> =
        (0..60).map(|i| (format!("t{i}"), (rng.vec(SMALL_DIM), json!({"color": COLORS[i % 3], "n": i % 5})))).collect();
    let recs: Vec<(String, Vec<f32>, Value)> = two.iter().map(|(id, (v, m))| (id.clone(), v.clone(), m.clone())).collect();
    batch_upsert(api, "two", &recs).await?;
    ensure!(spread(api, "two").await? == (2, 2), "two: {:?}", spread(api, "two").await?);
    for _ in 0..5 {
        let q = rng.vec(SMALL_DIM);
        let got = search(api, "two", json!({"vector": vector_json(&q), "k": 7})).await?;
        let want = brute("l2", &two, &q, 7, |_| true);
        let got_ids: Vec<&str> = got.iter().map(|h| h.0.as_str()).collect();
        let want_ids: Vec<&str> = want.iter().map(|h| h.0).collect();
        ensure!(got_ids == want_ids, "two-shard search {got_ids:?} != brute force {want_ids:?}");
    }
    Ok(())
}

/// Recall@10 on 10,000 × 64 random vectors, loaded in batches of BATCH, over
/// every data group and in one shard. Returns the records.
async fn recall_at_10_meets_the_bar(api: &Http, groups: usize, rng: &mut Rng) -> Result<Records> {
    let records: Vec<(String, Vec<f32>, Value)> =
        (0..RECALL_N).map(|i| (format!("r{i}"), rng.vec(RECALL_DIM), json!({"bucket": i % 10}))).collect();
    batch_upsert(api, "recall", &records).await?;
    let big: BTreeMap<String, (Vec<f32>, Value)> = records.into_iter().map(|(id, v, m)| (id, (v, m))).collect();
    ensure!(stats_count(api, "recall").await? == RECALL_N as u64, "recall count");
    let (shards, used) = spread(api, "recall").await?;
    ensure!(shards == groups && used == groups, "recall spans {shards} groups, {used} with records");
    let r = recall(api, "recall", &big, rng).await?;
    eprintln!("[vectors] recall@10 = {r:.3} (over {groups} shards)");
    ensure!(r >= 0.95, "recall@10 {r} < 0.95");
    // The same data in one shard: one HNSW graph of 10,000 nodes meets the bar on its own.
    api.post(C, &json!({"name": "recall-one", "dim": RECALL_DIM, "metric": "l2", "shards": 1})).await?.ensure_status(201)?;
    batch_upsert(api, "recall-one", &big.iter().map(|(id, (v, m))| (id.clone(), v.clone(), m.clone())).collect::<Vec<_>>()).await?;
    ensure!(spread(api, "recall-one").await? == (1, 1), "recall-one is not a single shard");
    let r = recall(api, "recall-one", &big, rng).await?;
    eprintln!("[vectors] recall@10 = {r:.3} (one shard)");
    ensure!(r >= 0.95, "single-shard recall@10 {r} < 0.95");
    Ok(big)
}

/// Every replica built the same graph from the same commands: identical answers.
async fn every_replica_answers_like_the_leader(api: &Http, rng: &mut Rng) -> Result<()> {
    let body = json!({"vector": vector_json(&rng.vec(RECALL_DIM)), "k": 10, "filter": {"bucket": 3}});
    let leader = search(api, "recall", body.clone()).await?;
    ensure!(leader.len() == 10, "filtered recall search: {leader:?}");
    for node in NODE_IDS {
        let replica = api.consistency("one").replica(node);
        wait_for(Duration::from_secs(30), &format!("node {node} answers like the leader"), async || {
            let got = search(&replica, "recall", body.clone()).await?;
            ensure!(got == leader, "node {node}: {got:?} != {leader:?}");
            Ok(Some(()))
        })
        .await?;
    }
    Ok(())
}

/// A dropped collection is gone; its name can be reused.
async fn a_dropped_collections_name_can_be_reused(api: &Http) -> Result<()> {
    api.post(C, &json!({"name": "scratch", "dim": 2, "metric": "dot"})).await?.ensure_status(201)?;
    api.post(&format!("{C}/scratch/upsert"), &json!({"id": "a", "vector": [1.0, 0.0]})).await?.ensure_status(200)?;
    let r = api.delete(&format!("{C}/scratch")).await?.ensure_status(200)?;
    ensure!(r.json["deleted_count"] == json!(1), "drop {r}");
    api.get(&format!("{C}/scratch")).await?.ensure_status(404)?;
    api.post(&format!("{C}/scratch/search"), &json!({"vector": [1.0, 0.0]})).await?.ensure_status(404)?;
    api.delete(&format!("{C}/scratch")).await?.ensure_status(404)?;
    api.post(C, &json!({"name": "scratch", "dim": 2, "metric": "dot"})).await?.ensure_status(201)?;
    ensure!(search(api, "scratch", json!({"vector": [1.0, 0.0]})).await?.is_empty(), "recreated collection is not empty");
    Ok(())
}

/// Another router drops and recreates a collection with one shard: this
/// router's cached layout is refused by the shards and read again, so nothing
/// is misplaced.
async fn a_collection_recreated_behind_a_routers_back_is_found(c: &mut Cluster, api: &Http) -> Result<()> {
    let ids: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    let vectors: Vec<Value> = ids.iter().enumerate().map(|(i, id)| json!({"id": id, "vector": [i as f32 + 1.0, 1.0]})).collect();
    api.post(&format!("{C}/scratch/batch"), &json!({"vectors": vectors})).await?.ensure_status(200)?;
    let (_, other) = c.start_router(&[]).await?;
    let other = other.with_token(api.token().context("token")?);
    other.delete(&format!("{C}/scratch")).await?.ensure_status(200)?;
    other.post(C, &json!({"name": "scratch", "dim": 3, "metric": "l2", "shards": 1})).await?.ensure_status(201)?;
    api.post(&format!("{C}/scratch/batch"), &json!({"vectors": [{"id": "s1", "vector": [1.0, 2.0]}]})).await?.ensure_status(400)?;
    let vectors: Vec<Value> = ids.iter().enumerate().map(|(i, id)| json!({"id": id, "vector": [i as f32, 0.0, 0.0]})).collect();
    api.post(&format!("{C}/scratch/batch"), &json!({"vectors": vectors})).await?.ensure_status(200)?;
    ensure!(spread(&other, "scratch").await? == (1, 1), "recreated scratch: {:?}", spread(&other, "scratch").await?);
    for (i, id) in ids.iter().enumerate().step_by(7) {
        other.get(&format!("{C}/scratch/vectors/{id}")).await?.ensure_status(200)?;
        let got = search(api, "scratch", json!({"vector": [i as f32, 0.0, 0.0], "k": 1})).await?;
        ensure!(got.first().is_some_and(|h| &h.0 == id), "search for {id} through the stale router: {got:?}");
    }
    Ok(())
}

/// Whole-cluster restart: records persist and the indexes are rebuilt (the
/// 10,000-node graph restored from its checkpoint); writes after the restart
/// go into the rebuilt index.
async fn indexes_are_rebuilt_after_a_whole_cluster_restart(
    c: &mut Cluster,
    groups: usize,
    big: &Records,
    small: &BTreeMap<String, Records>,
    deleted: &[String],
    rng: &mut Rng,
) -> Result<()> {
    c.stop_all().await?;
    c.start_all().await?;
    let api = c.http.clone();
    let r = api.get(C).await?.ensure_status(200)?;
    ensure!(r.json["count"] == json!(7), "collections after restart {r}");
    let (shards, used) = spread(&api, "recall").await?;
    ensure!(shards == groups && used == groups, "recall after restart spans {shards} groups, {used} with records");
    ensure!(stats_count(&api, "recall").await? == RECALL_N as u64, "recall count after restart");
    for coll in ["recall", "recall-one"] {
        let r = recall(&api, coll, big, rng).await?;
        eprintln!("[vectors] {coll} recall@10 after restart = {r:.3}");
        ensure!(r >= 0.95, "{coll} recall@10 after restart {r} < 0.95");
    }
    // The nodes checkpointed the 10 000-node graph when they stopped, so the
    // replica that answered restored it instead of re-linking every node.
    let restored = (1..=3).filter_map(|n| c.node_log_text(n).ok()).any(|log| {
        let this_start = log.rsplit("===== [harness] starting").next().unwrap_or_default();
        this_start.lines().any(|l| l.contains("vector index built") && l.contains("recall-one") && l.contains("restored=10000 linked=0"))
    });
    ensure!(restored, "no node restored recall-one from its link checkpoint after the restart");
    for metric in METRICS {
        let coll = format!("small-{metric}");
        ensure!(stats_count(&api, &coll).await? == (SMALL_N - deleted.len()) as u64, "{coll} count after restart");
        api.get(&format!("{C}/{coll}/vectors/{}", deleted[2])).await?.ensure_status(404)?;
        api.get(&format!("{C}/{coll}/vectors/doc-1")).await?.ensure_status(200)?;
        check_exact(&api, metric, &small[metric], rng).await.with_context(|| format!("{metric} after restart"))?;
    }
    // Writes after the restart go into the rebuilt index.
    let v = rng.vec(SMALL_DIM);
    api.post(&format!("{C}/small-l2/upsert"), &json!({"id": "late", "vector": vector_json(&v)})).await?.ensure_status(200)?;
    let got = search(&api, "small-l2", json!({"vector": vector_json(&v), "k": 1})).await?;
    ensure!(got.first().is_some_and(|h| h.0 == "late" && h.3 == json!({})), "late upsert: {got:?}");
    Ok(())
}
