//! Definitions that every shard holds a copy of: created everywhere, repaired
//! when a copy is missing, dropped everywhere.

use serde_json::json;
use tessera_api::command::{Operation, Query, QueryResult};
use tessera_api::document::{DocOp, DocQuery, DocQueryResult};
use tessera_api::rpc::Consistency;

use super::harness::TestRouter;
use crate::cluster::ClusterClient;

const C: &str = "/api/v1/documents/collections";

async fn holds_collection(router: &TestRouter, group: u64, name: &str) -> bool {
    let q = Query::Document(DocQuery::Collection { name: name.into() });
    match router.cluster.read(group, &q, Consistency::Quorum, None).await.unwrap().value {
        QueryResult::Document(DocQueryResult::Collection(def)) => def.is_some(),
        other => panic!("unexpected {other:?}"),
    }
}

/// A created collection (schema and indexes) is on every shard; a shard that
/// lost its copy gets it back from the next insert that lands there, with the
/// schema still enforced; a drop removes every copy.
#[tokio::test]
async fn document_collections_are_defined_repaired_and_dropped_on_every_shard() {
    let router = TestRouter::new(3).await;
    let schema = json!({"type": "object", "required": ["age"], "properties": {"age": {"type": "integer"}}});
    router.post(C, &json!({"name": "people", "schema": schema})).await.expect(201);
    router.post(&format!("{C}/people/indexes"), &json!({"field": "age"})).await.expect(201);
    for g in 1..=3 {
        assert!(holds_collection(&router, g, "people").await, "shard {g} lacks the collection");
    }

    // A shard other than the home one loses its copy (as if the router that
    // created the collection stopped before reaching it).
    let home = router.cluster.shard_of("doccoll/people");
    let id = (0..).map(|i| format!("d{i}")).find(|id| router.cluster.shard_of(&format!("doc/people/{id}")) != home).unwrap();
    let lost = router.cluster.shard_of(&format!("doc/people/{id}"));
    let drop = Operation::Document(DocOp::DropCollection { name: "people".into() });
    router.cluster.write(lost, &drop, Consistency::Quorum).await.unwrap();
    assert!(!holds_collection(&router, lost, "people").await);

    let bad = router.post(&format!("{C}/people/documents"), &json!({"id": id, "document": {"age": "old"}})).await;
    assert_eq!(bad.status.as_u16(), 400, "the repaired copy lost the schema: {}", bad.json);
    router.post(&format!("{C}/people/documents"), &json!({"id": id, "document": {"age": 40}})).await.expect(201);
    assert!(holds_collection(&router, lost, "people").await, "the insert did not repair shard {lost}");
    let indexes = router.get(&format!("{C}/people/indexes")).await.expect(200);
    assert!(indexes.to_string().contains("age"), "{indexes}");

    router.delete(&format!("{C}/people")).await.expect(200);
    for g in 1..=3 {
        assert!(!holds_collection(&router, g, "people").await, "shard {g} kept the collection");
    }
    router.get(&format!("{C}/people")).await.expect(404);
}

/// A vector collection spread over two of three shards: records and searches
/// use exactly those; dropping it removes it from both.
#[tokio::test]
async fn vector_collections_live_on_their_shards_only() {
    let router = TestRouter::new(3).await;
    let v = "/api/v1/vector/collections";
    let created = router.post(v, &json!({"name": "two", "dim": 2, "metric": "l2", "shards": 2})).await.expect(201);
    let shards: Vec<u64> = created["shards"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!(shards.len(), 2);
    for i in 0..10 {
        router.post(&format!("{v}/two/upsert"), &json!({"id": format!("r{i}"), "vector": [i, 1]})).await.expect(200);
    }
    assert_eq!(router.get(&format!("{v}/two")).await.expect(200)["count"], json!(10));
    router.delete(&format!("{v}/two")).await.expect(200);
    router.get(&format!("{v}/two")).await.expect(404);
    router.post(&format!("{v}/two/search"), &json!({"vector": [1, 1], "k": 1})).await.expect(404);
}
