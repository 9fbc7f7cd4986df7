//! More reads that ask every shard and merge (time-series metric listings and
//! retention, object listings, vector listings and stats, document
//! collection listings, SQL databases, bulk document import), and the routes
//! that look like they could fan out but answer from one shard (a metric's
//! series, a graph): there the point is that only that shard is asked.

use std::collections::BTreeSet;

use axum::http::Method;
use serde_json::{Value, json};
use tessera_api::command::{Query, QueryResult};
use tessera_api::rpc::Consistency;
use tessera_api::vector::{VectorQuery, VectorQueryResult, shard_of};

use super::harness::{Answer, TestRouter};
use crate::cluster::ClusterClient;

const TS: &str = "/api/v1/timeseries";
const DOCS: &str = "/api/v1/documents/collections";
const VEC: &str = "/api/v1/vector/collections";
const BUCKETS: &str = "/api/v1/objects/buckets";

/// 2023-11-14T22:00:00Z.
const BASE: i64 = 1_699_999_200_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Names `prefix-0`, `prefix-1`, … until they land on at least two distinct
/// shards of `router` under `key(name)`, and at least `n` of them.
fn names_over_shards(router: &TestRouter, prefix: &str, n: usize, key: impl Fn(&str) -> String) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let shards: BTreeSet<u64> = names.iter().map(|m| router.cluster.shard_of(&key(m))).collect();
    assert!(shards.len() > 1, "every name of {names:?} on one shard; the test shows nothing");
    names
}

/// The first name `prefix-i` whose routing key lands on `group`.
fn name_on(router: &TestRouter, prefix: &str, group: u64, key: impl Fn(&str) -> String) -> String {
    (0..).map(|i| format!("{prefix}-{i}")).find(|n| router.cluster.shard_of(&key(n)) == group).unwrap()
}

async fn put(router: &TestRouter, path: &str, body: &Value) -> Answer {
    router.call(Method::PUT, path, Some(body)).await
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.as_array().unwrap().iter().map(|e| e[field].as_str().unwrap().to_string()).collect()
}

// ---------------------------------------------------------------- time-series

/// Metrics living on different shards come back from one listing, sorted by
/// name, each with its own series and point counts, and the count of them all.
#[tokio::test]
async fn timeseries_metric_listing_merges_every_shard_by_name() {
    let router = TestRouter::new(3).await;
    let names = names_over_shards(&router, "temp", 9, |m| format!("ts/{m}"));
    for (i, m) in names.iter().enumerate().rev() {
        let points: Vec<Value> = (0..=i as i64).map(|j| json!({"timestamp": BASE + j * 1000, "value": j})).collect();
        let written = router.post(&format!("{TS}/write"), &json!({"metric": m, "points": points, "tags": {"host": "a"}})).await;
        assert_eq!(written.expect(200)["metric_created"], json!(true));
    }
    router.post(&format!("{TS}/metrics"), &json!({"name": "empty", "metric_type": "counter", "unit": "req"})).await.expect(201);

    let list = router.get(&format!("{TS}/metrics")).await.expect(200);
    let mut expected: Vec<String> = names.clone();
    expected.push("empty".into());
    expected.sort();
    assert_eq!(strings(&list["metrics"], "name"), expected);
    assert_eq!(list["count"], json!(10));
    for m in list["metrics"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let want = names.iter().position(|n| n == name).map_or(0, |i| i + 1);
        assert_eq!(m["points"], json!(want), "points of {name}: {m}");
        assert_eq!(m["series"], json!(if want == 0 { 0 } else { 1 }), "series of {name}: {m}");
    }
    let empty = list["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "empty").unwrap();
    assert_eq!((empty["metric_type"].clone(), empty["unit"].clone()), (json!("counter"), json!("req")));
}

/// A metric and all its series live on one shard: a query (raw or
/// aggregated) is answered from it alone, so it works while another shard is
/// down, and fails with 503 only when its own shard is; the listing, which
/// needs every shard, is a 503 meanwhile.
#[tokio::test]
async fn timeseries_queries_are_answered_by_the_metric_shard_alone() {
    let router = TestRouter::new(3).await;
    let (down, up) = (1, 2);
    let on_down = name_on(&router, "cpu", down, |m| format!("ts/{m}"));
    let on_up = name_on(&router, "cpu", up, |m| format!("ts/{m}"));
    for m in [&on_down, &on_up] {
        let mut points = Vec::new();
        for i in 0..10i64 {
            points.push(json!({"timestamp": BASE + i * 60_000, "value": i, "tags": {"host": "a"}}));
            points.push(json!({"timestamp": BASE + i * 60_000, "value": 10 * i, "tags": {"host": "b"}}));
        }
        router.post(&format!("{TS}/write"), &json!({"metric": m, "points": points})).await.expect(200);
    }

    let agg = json!({"metric": on_up, "aggregation": {"function": "sum"}});
    let answer = router.post(&format!("{TS}/query"), &agg).await.expect(200);
    let mut sums: Vec<(String, f64)> = answer["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["tags"]["host"].as_str().unwrap().to_string(), s["points"][0]["value"].as_f64().unwrap()))
        .collect();
    sums.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(sums, [("a".to_string(), 45.0), ("b".to_string(), 450.0)], "{answer}");

    router.cluster.set_down(down, true);
    let raw = json!({"metric": on_up, "tags": {"host": "b"}});
    let answer = router.post(&format!("{TS}/query"), &raw).await.expect(200);
    assert_eq!(answer["total_points"], json!(10), "{answer}");
    let failed = router.post(&format!("{TS}/query"), &json!({"metric": on_down})).await.expect(503);
    assert!(failed["error"].is_string(), "{failed}");
    router.get(&format!("{TS}/metrics/{on_down}")).await.expect(503);
    router.get(&format!("{TS}/metrics/{on_up}")).await.expect(200);
    router.get(&format!("{TS}/metrics")).await.expect(503);
    router.cluster.set_down(down, false);
    assert_eq!(router.get(&format!("{TS}/metrics")).await.expect(200)["count"], json!(2));
}

/// Enforcing retention runs on every shard and reports the sum: metrics with a
/// policy on different shards all lose their old points and keep the recent ones.
#[tokio::test]
async fn timeseries_retention_enforcement_sums_every_shard() {
    let router = TestRouter::new(3).await;
    let names = names_over_shards(&router, "ret", 6, |m| format!("ts/{m}"));
    let (now, day) = (now_ms(), 86_400_000i64);
    for m in &names {
        let old: Vec<Value> = (0..50).map(|i| json!({"timestamp": now - 10 * day + i * 1000, "value": i})).collect();
        let recent: Vec<Value> = (0..5).map(|i| json!({"timestamp": now - 60_000 + i * 1000, "value": 100 + i})).collect();
        router.post(&format!("{TS}/write"), &json!({"metric": m, "points": old, "tags": {"k": "v"}})).await.expect(200);
        router.post(&format!("{TS}/write"), &json!({"metric": m, "points": recent, "tags": {"k": "v"}})).await.expect(200);
        put(&router, &format!("{TS}/metrics/{m}/retention"), &json!({"drop_after": "2d"})).await.expect(200);
    }
    router
        .post(&format!("{TS}/write"), &json!({"metric": "kept", "points": [{"timestamp": now - 10 * day, "value": 1}]}))
        .await
        .expect(200);

    let report = router.post(&format!("{TS}/retention/enforce"), &json!({})).await.expect(200);
    assert_eq!(report["groups"], json!(3), "{report}");
    assert_eq!(report["metrics_with_retention"], json!(6), "{report}");
    assert_eq!(report["dropped_points"], json!(300), "{report}");
    for m in &names {
        let left = router.post(&format!("{TS}/query"), &json!({"metric": m})).await.expect(200);
        assert_eq!(left["total_points"], json!(5), "{m}: {left}");
    }
    let kept = router.post(&format!("{TS}/query"), &json!({"metric": "kept"})).await.expect(200);
    assert_eq!(kept["total_points"], json!(1), "a metric without a policy lost points: {kept}");
}

// ---------------------------------------------------------------- graph

/// A graph lives whole on the shard of its name: graphs on different shards
/// keep their own nodes and edges (data, pattern queries), an edge cannot join
/// nodes of two graphs, and a shard that is down takes only its graphs away.
#[tokio::test]
async fn graphs_on_different_shards_are_separate_and_answer_alone() {
    let router = TestRouter::new(3).await;
    let (down, up) = (1, 3);
    let g_down = name_on(&router, "social", down, |g| format!("graph/{g}"));
    let g_up = name_on(&router, "social", up, |g| format!("graph/{g}"));
    for (g, n) in [(&g_down, 3), (&g_up, 5)] {
        for i in 0..n {
            let node = json!({"graph": g, "id": format!("u{i}"), "label": "User", "properties": {"n": i}});
            router.post("/api/v1/graph/nodes", &node).await.expect(201);
        }
        for i in 1..n {
            let edge = json!({"graph": g, "id": format!("e{i}"), "from_node": "u0", "to_node": format!("u{i}"), "label": "FOLLOWS"});
            router.post("/api/v1/graph/edges", &edge).await.expect(201);
        }
    }
    // u4 exists only in the graph on `up`: an edge to it in the other graph is refused.
    let cross = json!({"graph": g_down, "from_node": "u0", "to_node": "u4", "label": "FOLLOWS"});
    router.post("/api/v1/graph/edges", &cross).await.expect(404);
    router.get(&format!("/api/v1/graph/nodes/u4?graph={g_down}")).await.expect(404);
    router.get(&format!("/api/v1/graph/nodes/u4?graph={g_up}")).await.expect(200);

    let data = router.get(&format!("/api/v1/graph/data?graph={g_up}")).await.expect(200);
    assert_eq!((data["node_count"].clone(), data["edge_count"].clone()), (json!(5), json!(4)), "{data}");
    let data = router.get(&format!("/api/v1/graph/data?graph={g_down}&start_node=u0&depth=2")).await.expect(200);
    assert_eq!((data["node_count"].clone(), data["edge_count"].clone()), (json!(3), json!(2)), "{data}");
    let q = json!({"graph": g_up, "query": "MATCH (a:User)-[:FOLLOWS]->(b:User) RETURN count(*)"});
    let counted = router.post("/api/v1/graph/query", &q).await.expect(200);
    assert_eq!(counted["rows"], json!([[4]]), "{counted}");

    router.cluster.set_down(down, true);
    router.get(&format!("/api/v1/graph/data?graph={g_down}")).await.expect(503);
    router.post("/api/v1/graph/nodes", &json!({"graph": g_down, "label": "User"})).await.expect(503);
    router.get(&format!("/api/v1/graph/data?graph={g_up}")).await.expect(200);
    router.post("/api/v1/graph/nodes", &json!({"graph": g_up, "id": "u9", "label": "User"})).await.expect(201);
    router.delete(&format!("/api/v1/graph/nodes/u0?graph={g_up}")).await.expect(200);
    let data = router.get(&format!("/api/v1/graph/data?graph={g_up}")).await.expect(200);
    assert_eq!((data["node_count"].clone(), data["edge_count"].clone()), (json!(5), json!(0)), "{data}");
}

// ---------------------------------------------------------------- objects

/// Objects of one bucket spread over every shard are listed in key order a
/// page at a time (limit, is_truncated, next_marker) with nothing lost or
/// repeated at the page seams; a prefix narrows the merge; the bucket's stats
/// add up every shard's objects and bytes.
#[tokio::test]
async fn object_listing_pages_through_every_shard_in_key_order() {
    let router = TestRouter::new(3).await;
    router.post(BUCKETS, &json!({"name": "photos"})).await.expect(201);
    let keys: Vec<String> = (0..25).map(|i| format!("{}/img-{i:02}.jpg", if i % 2 == 0 { "even" } else { "odd" })).collect();
    let shards: BTreeSet<u64> = keys.iter().map(|k| router.cluster.shard_of(&format!("obj/photos/{k}"))).collect();
    assert_eq!(shards.len(), 3, "the objects do not cover every shard; the test shows nothing");
    let mut bytes = 0;
    for (i, k) in keys.iter().enumerate().rev() {
        let body = json!({"i": i, "pad": "x".repeat(i)});
        bytes += serde_json::to_vec(&body).unwrap().len();
        let stored = put(&router, &format!("{BUCKETS}/photos/object/{k}"), &body).await.expect(200);
        assert_eq!(stored["key"], json!(k));
    }
    let mut sorted = keys.clone();
    sorted.sort();

    let (mut listed, mut marker, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let path = match &marker {
            None => format!("{BUCKETS}/photos/objects?limit=7"),
            Some(m) => format!("{BUCKETS}/photos/objects?limit=7&marker={m}"),
        };
        let page = router.get(&path).await.expect(200);
        pages += 1;
        let got = strings(&page["objects"], "key");
        assert_eq!(page["count"], json!(got.len()));
        listed.extend(got.clone());
        if page["is_truncated"] == json!(true) {
            assert_eq!(page["next_marker"], json!(got.last().unwrap()), "{page}");
            marker = Some(got.last().unwrap().clone());
        } else {
            assert!(page["next_marker"].is_null(), "{page}");
            break;
        }
    }
    assert_eq!(listed, sorted);
    assert_eq!(pages, 4);

    let odd = router.get(&format!("{BUCKETS}/photos/objects?prefix=odd/&limit=100")).await.expect(200);
    let odd_keys: Vec<String> = sorted.iter().filter(|k| k.starts_with("odd/")).cloned().collect();
    assert_eq!(strings(&odd["objects"], "key"), odd_keys);
    assert_eq!(odd["is_truncated"], json!(false));

    let stats = router.get(&format!("{BUCKETS}/photos")).await.expect(200);
    assert_eq!(stats["object_count"], json!(25), "{stats}");
    assert_eq!(stats["total_bytes"], json!(bytes), "{stats}");
    for k in keys.iter().take(5) {
        router.delete(&format!("{BUCKETS}/photos/object/{k}")).await.expect(200);
    }
    let stats = router.get(&format!("{BUCKETS}/photos")).await.expect(200);
    assert_eq!(stats["object_count"], json!(20), "{stats}");
}

/// Buckets whose home records sit on different shards are each listed once
/// (every shard holds a copy of every bucket), by name, and each keeps its
/// own objects and statistics.
#[tokio::test]
async fn buckets_are_listed_once_though_every_shard_holds_a_copy() {
    let router = TestRouter::new(3).await;
    let names = names_over_shards(&router, "bkt", 6, |b| b.to_string());
    for b in names.iter().rev() {
        let created = router.post(BUCKETS, &json!({"name": b})).await.expect(201);
        assert_eq!(created["name"], json!(b));
    }
    router.post(BUCKETS, &json!({"name": names[0]})).await.expect(409);
    for (i, b) in names.iter().enumerate() {
        for j in 0..i {
            put(&router, &format!("{BUCKETS}/{b}/object/o{j}"), &json!(j)).await.expect(200);
        }
    }
    let list = router.get(BUCKETS).await.expect(200);
    assert_eq!(strings(&list["buckets"], "name"), names);
    assert_eq!(list["count"], json!(6));
    for (i, b) in names.iter().enumerate() {
        let stats = router.get(&format!("{BUCKETS}/{b}")).await.expect(200);
        assert_eq!(stats["object_count"], json!(i), "{b}: {stats}");
        let objects = router.get(&format!("{BUCKETS}/{b}/objects")).await.expect(200);
        assert_eq!(objects["count"], json!(i), "{b}: {objects}");
    }
}

// ---------------------------------------------------------------- vectors

async fn vector_on(router: &TestRouter, group: u64, collection: &str, id: &str) -> bool {
    let q = Query::Vector(VectorQuery::Get { collection: collection.into(), id: id.into(), uid: None });
    matches!(
        router.cluster.read(group, &q, Consistency::Quorum, None).await.unwrap().value,
        QueryResult::Vector(VectorQueryResult::Record(_))
    )
}

/// A record is stored on, read from and deleted on exactly the shard its id
/// hashes to: a shard that is down takes only its records away; the stats sum
/// every shard's count and show each shard's own.
#[tokio::test]
async fn vector_records_are_read_and_deleted_on_their_own_shard() {
    let router = TestRouter::new(3).await;
    let name = "fom-routing";
    let created = router.post(VEC, &json!({"name": name, "dim": 2, "metric": "l2"})).await.expect(201);
    let shards: Vec<u64> = created["shards"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!(shards.len(), 3);
    let ids: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let body = json!({"id": id, "vector": [i, 1], "metadata": {"i": i}});
        assert_eq!(router.post(&format!("{VEC}/{name}/upsert"), &body).await.expect(200)["created"], json!(true));
    }
    let home_of = |id: &str| shards[shard_of(id, shards.len())];
    let used: BTreeSet<u64> = ids.iter().map(|id| home_of(id)).collect();
    assert_eq!(used.len(), 3, "the records do not cover every shard; the test shows nothing");
    for id in &ids {
        for g in &shards {
            assert_eq!(vector_on(&router, *g, name, id).await, *g == home_of(id), "record {id} on shard {g}");
        }
    }

    let stats = router.get(&format!("{VEC}/{name}")).await.expect(200);
    assert_eq!(stats["count"], json!(12), "{stats}");
    for sc in stats["shard_counts"].as_array().unwrap() {
        let g = sc["group"].as_u64().unwrap();
        assert_eq!(sc["count"], json!(ids.iter().filter(|id| home_of(id) == g).count()), "{stats}");
    }

    // Take down a shard that is not the home one (the home one holds the layout).
    let down = shards[1];
    let on_down = ids.iter().find(|id| home_of(id) == down).unwrap();
    let elsewhere = ids.iter().find(|id| home_of(id) != down).unwrap();
    router.get(&format!("{VEC}/{name}/vectors/{elsewhere}")).await.expect(200);
    router.cluster.set_down(down, true);
    router.get(&format!("{VEC}/{name}/vectors/{on_down}")).await.expect(503);
    let got = router.get(&format!("{VEC}/{name}/vectors/{elsewhere}")).await.expect(200);
    assert_eq!(got["id"], json!(elsewhere));
    router.delete(&format!("{VEC}/{name}/vectors/{elsewhere}")).await.expect(200);
    router.cluster.set_down(down, false);

    router.get(&format!("{VEC}/{name}/vectors/{elsewhere}")).await.expect(404);
    router.get(&format!("{VEC}/{name}/vectors/{on_down}")).await.expect(200);
    let stats = router.get(&format!("{VEC}/{name}")).await.expect(200);
    assert_eq!(stats["count"], json!(11), "{stats}");
    let g = home_of(elsewhere);
    let sc = stats["shard_counts"].as_array().unwrap().iter().find(|s| s["group"] == json!(g)).unwrap();
    assert_eq!(sc["count"], json!(ids.iter().filter(|id| home_of(id) == g).count() - 1), "{stats}");
    let hits = router.post(&format!("{VEC}/{name}/search"), &json!({"vector": [0, 1], "k": 12})).await.expect(200);
    assert_eq!(hits["count"], json!(11), "a deleted record is still found: {hits}");
}

/// The collection listing shows each collection once (from its home shard's
/// copy), with its shards, the count of each and their sum, for collections
/// spread over all or only some of the shards.
#[tokio::test]
async fn vector_listing_shows_each_collection_once_with_summed_counts() {
    let router = TestRouter::new(3).await;
    let (wide, narrow) = ("fom-list-wide", "fom-list-narrow");
    router.post(VEC, &json!({"name": wide, "dim": 2, "metric": "l2"})).await.expect(201);
    router.post(VEC, &json!({"name": narrow, "dim": 3, "metric": "cosine", "shards": 2})).await.expect(201);
    let batch = |n: usize, dim: usize| -> Value {
        let vectors: Vec<Value> = (0..n).map(|i| json!({"id": format!("x{i}"), "vector": vec![i as f32 + 1.0; dim]})).collect();
        json!({"vectors": vectors})
    };
    let w = router.post(&format!("{VEC}/{wide}/batch"), &batch(30, 2)).await.expect(200);
    assert_eq!(w["inserted"], json!(30), "{w}");
    router.post(&format!("{VEC}/{narrow}/batch"), &batch(17, 3)).await.expect(200);

    let list = router.get(VEC).await.expect(200);
    let mine: Vec<&Value> =
        list["collections"].as_array().unwrap().iter().filter(|c| c["name"] == json!(wide) || c["name"] == json!(narrow)).collect();
    assert_eq!(mine.len(), 2, "{list}");
    assert_eq!((mine[0]["name"].clone(), mine[1]["name"].clone()), (json!(narrow), json!(wide)), "not sorted by name: {list}");
    for (c, n, shards) in [(mine[0], 17, 2), (mine[1], 30, 3)] {
        assert_eq!(c["count"], json!(n), "{c}");
        assert_eq!(c["shards"].as_array().unwrap().len(), shards, "{c}");
        let per: Vec<u64> = c["shard_counts"].as_array().unwrap().iter().map(|s| s["count"].as_u64().unwrap()).collect();
        assert_eq!(per.len(), shards, "{c}");
        assert_eq!(per.iter().sum::<u64>(), n as u64, "{c}");
        assert!(per.iter().filter(|n| **n > 0).count() > 1, "every record on one shard: {c}");
    }
    let stats = router.get(&format!("{VEC}/{narrow}")).await.expect(200);
    assert_eq!(stats["shard_counts"], mine[0]["shard_counts"]);
}

// ---------------------------------------------------------------- documents

/// The collection listing shows every collection once, though each shard holds
/// a copy, with the documents of every shard counted, and a collection without
/// documents with 0.
#[tokio::test]
async fn document_collection_listing_counts_every_shard_once() {
    let router = TestRouter::new(3).await;
    router.post(DOCS, &json!({"name": "orders"})).await.expect(201);
    router.post(DOCS, &json!({"name": "empty"})).await.expect(201);
    for i in 0..20 {
        router.post(&format!("{DOCS}/orders/documents"), &json!({"id": format!("o{i}"), "document": {"n": i}})).await.expect(201);
    }
    // A collection made by its first insert is listed too.
    for i in 0..7 {
        router.post(&format!("{DOCS}/auto/documents"), &json!({"id": format!("a{i}"), "document": {"n": i}})).await.expect(201);
    }
    let shards: BTreeSet<u64> = (0..20).map(|i| router.cluster.shard_of(&format!("doc/orders/o{i}"))).collect();
    assert_eq!(shards.len(), 3, "the documents do not cover every shard; the test shows nothing");

    let list = router.get(DOCS).await.expect(200);
    assert_eq!(strings(&list["collections"], "name"), ["auto", "empty", "orders"]);
    assert_eq!(list["count"], json!(3));
    let counts: Vec<Value> = list["collections"].as_array().unwrap().iter().map(|c| c["document_count"].clone()).collect();
    assert_eq!(counts, [json!(7), json!(0), json!(20)]);
    router.delete(&format!("{DOCS}/orders/documents/o3")).await.expect(200);
    let list = router.get(DOCS).await.expect(200);
    assert_eq!(list["collections"][2]["document_count"], json!(19));
}

/// A collection's document listing pages through every shard in id order:
/// `skip` and `limit` apply to the merge, not to each shard, and
/// `total_scanned` counts every shard's documents.
#[tokio::test]
async fn document_listing_pages_in_id_order_across_shards() {
    let router = TestRouter::new(3).await;
    router.post(DOCS, &json!({"name": "items"})).await.expect(201);
    let ids: Vec<String> = (0..20).map(|i| format!("i{i:02}")).collect();
    for id in ids.iter().rev() {
        router.post(&format!("{DOCS}/items/documents"), &json!({"id": id, "document": {"id": id}})).await.expect(201);
    }
    let shards: BTreeSet<u64> = ids.iter().map(|id| router.cluster.shard_of(&format!("doc/items/{id}"))).collect();
    assert_eq!(shards.len(), 3, "the documents do not cover every shard; the test shows nothing");
    let mut seen = Vec::new();
    for page in 0..4 {
        let listed = router.get(&format!("{DOCS}/items?limit=6&skip={}", page * 6)).await.expect(200);
        assert_eq!(listed["total_scanned"], json!(20), "{listed}");
        assert!(listed["execution_time_ms"].is_u64(), "{listed}");
        seen.extend(strings(&listed["documents"], "id"));
    }
    assert_eq!(seen, ids);
    let all = router.get(&format!("{DOCS}/items")).await.expect(200);
    assert_eq!(strings(&all["documents"], "id"), ids);
}

/// The listing describes a collection as it was created: its creation time
/// is the one the create answered (the home shard's), whichever shard's copy
/// the listing met first.
#[tokio::test]
async fn document_collection_listing_shows_the_home_definition() {
    let router = TestRouter::new(3).await;
    // A collection whose home is not the first shard: the first copy met is not the home's.
    let name = name_on(&router, "ledger", 3, |c| format!("doccoll/{c}"));
    let schema = json!({"type": "object", "required": ["n"]});
    let created = router.post(DOCS, &json!({"name": name, "schema": schema})).await.expect(201);
    let list = router.get(DOCS).await.expect(200);
    let listed = &list["collections"][0];
    assert_eq!(listed["name"], json!(name));
    assert_eq!(listed["schema"], schema);
    assert_eq!(listed["created_at"], created["created_at"], "listing {listed} vs create {created}");
}

// ---------------------------------------------------------------- SQL

/// Databases live on the shard of their name; the database listing names every
/// one that was written to, once and sorted, and each database's table listing
/// shows only its own tables.
#[tokio::test]
async fn sql_database_listing_merges_every_shard() {
    let router = TestRouter::new(3).await;
    let dbs = names_over_shards(&router, "shop", 12, |d| format!("sql/{d}"));
    let shards: BTreeSet<u64> = dbs.iter().map(|d| router.cluster.shard_of(&format!("sql/{d}"))).collect();
    assert_eq!(shards.len(), 3, "the databases do not cover every shard");
    for (i, d) in dbs.iter().enumerate().rev() {
        let create = json!({"sql": format!("CREATE TABLE t{i} (id INT PRIMARY KEY)"), "database": d});
        router.post("/api/v1/query", &create).await.expect(200);
        let insert = json!({"sql": format!("INSERT INTO t{i} VALUES (1), (2)"), "database": d});
        router.post("/api/v1/query", &insert).await.expect(200);
    }
    // Only reading a database does not create it.
    let read = json!({"sql": "SELECT 1", "database": "onlyread"});
    router.post("/api/v1/query", &read).await.expect(200);

    let list = router.get("/api/v1/databases").await.expect(200);
    let mut sorted = dbs.clone();
    sorted.sort();
    assert_eq!(list["databases"], json!(sorted), "{list}");
    for (i, d) in dbs.iter().enumerate() {
        let tables = router.get(&format!("/api/v1/tables?database={d}")).await.expect(200);
        assert_eq!(tables["database"], json!(d));
        assert_eq!(strings(&tables["tables"], "name"), [format!("t{i}")], "{tables}");
        router.get(&format!("/api/v1/tables/t{i}?database={d}")).await.expect(200);
        let other = (i + 1) % dbs.len();
        assert!(router.get(&format!("/api/v1/tables/t{other}?database={d}")).await.status.is_client_error());
    }
    router.cluster.set_down(1, true);
    router.get("/api/v1/databases").await.expect(503);
}

// ---------------------------------------------------------------- bulk import

/// A bulk import spreads the documents over the shards by their assigned ids,
/// batch by batch; every id it returns can be read back, the query and the
/// listing count them all, and a document against the schema stops the import
/// before anything is written.
#[tokio::test]
async fn document_import_spreads_over_every_shard() {
    let router = TestRouter::new(3).await;
    let schema = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
    router.post(DOCS, &json!({"name": "events", "schema": schema})).await.expect(201);
    let docs: Vec<Value> = (0..40).map(|i| json!({"n": i, "kind": if i % 4 == 0 { "rare" } else { "common" }})).collect();
    let report = router.post("/api/v1/import/documents", &json!({"collection": "events", "documents": docs, "batch_size": 3})).await;
    let report = report.expect(200);
    assert_eq!((report["success"].clone(), report["rows_imported"].clone()), (json!(true), json!(40)), "{report}");
    let ids: Vec<String> = report["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 40);
    let shards: BTreeSet<u64> = ids.iter().map(|id| router.cluster.shard_of(&format!("doc/events/{id}"))).collect();
    assert_eq!(shards.len(), 3, "the imported documents do not cover every shard");
    for (i, id) in ids.iter().enumerate().step_by(7) {
        let doc = router.get(&format!("{DOCS}/events/documents/{id}")).await.expect(200);
        assert_eq!(doc["data"]["n"], json!(i), "ids are not in request order: {doc}");
    }
    let rare = router.post("/api/v1/documents/events/query", &json!({"filter": {"kind": "rare"}, "sort": {"n": 1}})).await.expect(200);
    let ns: Vec<i64> = rare["documents"].as_array().unwrap().iter().map(|d| d["data"]["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, (0..40).step_by(4).collect::<Vec<_>>());
    assert_eq!(router.get(DOCS).await.expect(200)["collections"][0]["document_count"], json!(40));

    let bad = json!({"collection": "events", "documents": [{"n": 100}, {"n": "x"}, {"n": 101}]});
    let report = router.post("/api/v1/import/documents", &bad).await;
    assert_eq!(report.status.as_u16(), 400, "{}", report.json);
    assert_eq!(report.json["errors"][0]["index"], json!(1), "{}", report.json);
    assert_eq!(report.json["rows_imported"], json!(0));
    assert_eq!(router.get(DOCS).await.expect(200)["collections"][0]["document_count"], json!(40), "a refused import wrote");
}

/// An import into a missing collection creates it on every shard first, and a
/// shard that is down stops the import with a 503 whose count is what the
/// other shards confirmed, and which is exactly what can be read.
#[tokio::test]
async fn document_import_with_a_shard_down_reports_what_was_confirmed() {
    let router = TestRouter::new(3).await;
    let docs: Vec<Value> = (0..30).map(|i| json!({"n": i})).collect();
    let report = router.post("/api/v1/import/documents", &json!({"collection": "fresh", "documents": docs})).await.expect(200);
    assert_eq!(report["rows_imported"], json!(30));
    let list = router.get(DOCS).await.expect(200);
    assert_eq!(list["collections"][0]["name"], json!("fresh"));

    let home = router.cluster.shard_of("doccoll/fresh");
    let down = (1..=3).find(|g| *g != home).unwrap();
    router.cluster.set_down(down, true);
    let docs: Vec<Value> = (0..30).map(|i| json!({"n": 100 + i})).collect();
    let partial = router.post("/api/v1/import/documents", &json!({"collection": "fresh", "documents": docs})).await;
    assert_eq!(partial.status.as_u16(), 503, "{}", partial.json);
    assert_eq!(partial.json["success"], json!(false));
    let ids: Vec<String> = partial.json["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect();
    let confirmed = ids.iter().filter(|id| router.cluster.shard_of(&format!("doc/fresh/{id}")) != down).count();
    assert!(confirmed > 0 && confirmed < 30, "all ids on one side; the test shows nothing");
    assert_eq!(partial.json["rows_imported"], json!(confirmed), "{}", partial.json);
    router.cluster.set_down(down, false);
    let all = router.post("/api/v1/documents/fresh/query", &json!({"filter": {"n": {"$gte": 100}}})).await.expect(200);
    assert_eq!(all["total_matched"], json!(confirmed));
}

/// A vector collection exported as `vectors.ncb` (every shard's records) and
/// imported under another name holds the same records and answers the same
/// search; a damaged or truncated file is refused and creates nothing.
#[tokio::test]
async fn a_vector_collection_round_trips_through_vectors_ncb() {
    use axum::http::{Method, StatusCode};
    let router = TestRouter::new(3).await;
    let c = "/api/v1/vector/collections";
    router.post(c, &json!({"name": "emb", "dim": 3, "metric": "cosine"})).await.expect(201);
    let vectors: Vec<Value> =
        (0..40).map(|i| json!({"id": format!("v{i}"), "vector": [i as f32, 1.0, (i % 7) as f32], "metadata": {"i": i}})).collect();
    router.post(&format!("{c}/emb/batch"), &json!({"vectors": vectors})).await.expect(200);

    let (status, file) = router.call_bytes(Method::GET, "/api/v1/admin/vectors/emb/export", Vec::new()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = router.call_bytes(Method::POST, "/api/v1/admin/vectors/copy/import", file.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
    let copy = router.get(&format!("{c}/copy")).await.expect(200);
    assert_eq!((copy["count"].clone(), copy["dim"].clone(), copy["metric"].clone()), (json!(40), json!(3), json!("cosine")));
    for i in [0, 17, 39] {
        let a = router.get(&format!("{c}/emb/vectors/v{i}")).await.expect(200);
        let b = router.get(&format!("{c}/copy/vectors/v{i}")).await.expect(200);
        assert_eq!((a["vector"].clone(), a["metadata"].clone()), (b["vector"].clone(), b["metadata"].clone()));
    }
    let query = json!({"vector": [5.0, 1.0, 5.0], "k": 5});
    let hits = |r: Value| r["hits"].as_array().map(|h| h.iter().map(|x| x["id"].clone()).collect::<Vec<_>>());
    let a = hits(router.post(&format!("{c}/emb/search"), &query).await.expect(200));
    assert_eq!(a.as_ref().map(Vec::len), Some(5), "five hits");
    assert_eq!(a, hits(router.post(&format!("{c}/copy/search"), &query).await.expect(200)));

    // Importing onto an existing name is a conflict.
    let (status, _) = router.call_bytes(Method::POST, "/api/v1/admin/vectors/copy/import", file.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // A flipped byte fails the gzip check; a cut file is truncated: nothing is created.
    let mut damaged = file.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x55;
    let truncated = file[..file.len() - 9].to_vec();
    for (name, bad) in [("damaged", damaged), ("truncated", truncated)] {
        let (status, body) = router.call_bytes(Method::POST, &format!("/api/v1/admin/vectors/{name}/import"), bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {}", String::from_utf8_lossy(&body));
        router.get(&format!("{c}/{name}")).await.expect(404);
    }
}

/// An aggregate beyond f64 (the sum of two values near f64::MAX) answers
/// null, as the document states, not a number the JSON cannot carry (found
/// by schemathesis: the answer said `null` where the type said number).
#[tokio::test]
async fn an_aggregate_beyond_f64_answers_null() {
    let router = TestRouter::new(1).await;
    let points = json!([{"timestamp": BASE, "value": 1e308}, {"timestamp": BASE + 1, "value": 1e308}]);
    router.post(&format!("{TS}/write"), &json!({"metric": "huge", "points": points})).await.expect(200);
    let answer = router.post(&format!("{TS}/query"), &json!({"metric": "huge", "start": 0, "aggregation": "sum"})).await.expect(200);
    assert_eq!(answer["series"][0]["points"][0]["value"], Value::Null, "{answer}");
}
