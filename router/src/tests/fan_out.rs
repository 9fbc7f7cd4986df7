//! Reads that ask every shard and merge: the merge, not one shard's answer,
//! is what the client sees.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::harness::TestRouter;

/// Keys spread over every shard come back from one list in key order, cut at
/// the limit; total, count and a prefix delete add up every shard.
#[tokio::test]
async fn kv_list_count_and_prefix_delete_span_every_shard() {
    let router = TestRouter::new(3).await;
    let keys: Vec<String> = (0..30).map(|i| format!("user/{i:02}")).collect();
    for k in keys.iter().rev() {
        router.post("/api/v1/kv/keys", &json!({"key": k, "value": {"k": k}})).await.expect(200);
    }
    router.post("/api/v1/kv/keys", &json!({"key": "other/1", "value": 1})).await.expect(200);
    let shards: BTreeSet<u64> = keys.iter().map(|k| router.cluster.shard_of(k)).collect();
    assert_eq!(shards.len(), 3, "the keys do not cover every shard; the test shows nothing");

    let list = router.get("/api/v1/kv/keys?prefix=user/&limit=7").await.expect(200);
    let listed: Vec<&str> = list["keys"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(listed, keys[..7].iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(list["total"], json!(30));
    assert_eq!(router.get("/api/v1/kv/count?prefix=user/").await.expect(200)["count"], json!(30));

    let deleted = router.delete("/api/v1/kv/keys?prefix=user/").await.expect(200);
    assert_eq!(deleted["deleted"], json!(30));
    assert_eq!(router.get("/api/v1/kv/count").await.expect(200)["count"], json!(1));
}

/// A list holds at most `max_result_rows` keys: without a limit, or with a
/// larger one, the answer is cut there and says `truncated`; a smaller limit
/// is not truncation.
#[tokio::test]
async fn kv_lists_are_cut_at_max_result_rows() {
    let router = TestRouter::with_config(3, |c| c.query_limits.max_result_rows = 10).await;
    for i in 0..30 {
        router.post("/api/v1/kv/keys", &json!({"key": format!("row/{i:02}"), "value": i})).await.expect(200);
    }
    let page = |q: &str| {
        let q = q.to_string();
        let router = &router;
        async move {
            let list = router.get(&format!("/api/v1/kv/keys?prefix=row/{q}")).await.expect(200);
            (list["keys"].as_array().unwrap().len(), list["total"].as_u64().unwrap(), list["truncated"].as_bool().unwrap())
        }
    };
    assert_eq!(page("").await, (10, 30, true));
    assert_eq!(page("&limit=50").await, (10, 30, true));
    assert_eq!(page("&limit=7").await, (7, 30, false));
    assert_eq!(page("&limit=10").await, (10, 30, false));
}

/// A document query sorts and limits over the union of the shards (skip
/// included), and counts what every shard scanned and matched.
#[tokio::test]
async fn document_queries_sort_skip_and_limit_across_shards() {
    let router = TestRouter::new(3).await;
    let c = "/api/v1/documents/collections";
    router.post(c, &json!({"name": "people"})).await.expect(201);
    for i in 0..24 {
        let doc = json!({"id": format!("p{i:02}"), "document": {"age": (i * 7) % 24, "even": i % 2 == 0}});
        router.post(&format!("{c}/people/documents"), &doc).await.expect(201);
    }
    let shards: BTreeSet<u64> = (0..24).map(|i| router.cluster.shard_of(&format!("doc/people/p{i:02}"))).collect();
    assert!(shards.len() > 1, "every document on one shard; the test shows nothing");

    let q = json!({"filter": {"even": true}, "sort": {"age": -1}, "skip": 2, "limit": 3});
    let found = router.post(&format!("{c}/people/query"), &q).await.expect(200);
    let mut even_ages: Vec<i64> = (0..24).filter(|i| i % 2 == 0).map(|i| (i * 7) % 24).collect();
    even_ages.sort_unstable_by(|a, b| b.cmp(a));
    let ages: Vec<i64> = found["documents"].as_array().unwrap().iter().map(|d| d["data"]["age"].as_i64().unwrap()).collect();
    assert_eq!(ages, even_ages[2..5]);
    assert_eq!((found["total_matched"].clone(), found["total_scanned"].clone()), (json!(12), json!(24)));
}

/// A vector search asks every shard of the collection and keeps the global
/// top k by distance.
#[tokio::test]
async fn vector_search_merges_the_top_k_of_every_shard() {
    let router = TestRouter::new(3).await;
    let c = "/api/v1/vector/collections";
    let created = router.post(c, &json!({"name": "points", "dim": 2, "metric": "l2"})).await.expect(201);
    assert_eq!(created["shards"].as_array().map(Vec::len), Some(3));
    let vectors: Vec<Value> = (0..40).map(|i| json!({"id": format!("v{i}"), "vector": [i as f32, 0.0]})).collect();
    router.post(&format!("{c}/points/batch"), &json!({"vectors": vectors})).await.expect(200);

    let hits = router.post(&format!("{c}/points/search"), &json!({"vector": [20.2, 0.0], "k": 5})).await.expect(200);
    let ids: Vec<&str> = hits["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["v20", "v21", "v19", "v22", "v18"]);
    let stats = router.get(&format!("{c}/points")).await.expect(200);
    assert_eq!(stats["count"], json!(40), "{stats}");
}

/// Channels live on the shard of their name; the listing shows all of them.
#[tokio::test]
async fn stream_channels_are_listed_from_every_shard() {
    let router = TestRouter::new(3).await;
    let names: Vec<String> = (0..9).map(|i| format!("orders-{i}")).collect();
    for n in &names {
        router.post("/api/v1/streaming/channels", &json!({"name": n, "retention": "1h"})).await.expect(201);
    }
    let list = router.get("/api/v1/streaming/channels").await.expect(200);
    let mut listed: Vec<String> = list["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
    listed.sort();
    assert_eq!(listed, names);
    assert_eq!(list["count"], json!(9));
}
