//! More definitions held on several shards: document indexes, the document
//! collection drop that a retry finishes, object buckets and their copies,
//! vector collections whose create or drop meets a shard that is down.

use axum::http::Method;
use serde_json::{Value, json};
use tessera_api::command::{Operation, Query, QueryResult};
use tessera_api::document::{CollectionDef, DocOp, DocQuery, DocQueryResult};
use tessera_api::object::{ObjectOp, ObjectQuery, ObjectQueryResult};
use tessera_api::rpc::Consistency;

use super::harness::{Answer, TestRouter};
use crate::cluster::ClusterClient;

const C: &str = "/api/v1/documents/collections";
const BUCKETS: &str = "/api/v1/objects/buckets";
const VEC: &str = "/api/v1/vector/collections";

async fn definition(router: &TestRouter, group: u64, name: &str) -> Option<CollectionDef> {
    let q = Query::Document(DocQuery::Collection { name: name.into() });
    match router.cluster.read(group, &q, Consistency::Quorum, None).await.unwrap().value {
        QueryResult::Document(DocQueryResult::Collection(def)) => def,
        other => panic!("unexpected {other:?}"),
    }
}

async fn indexes_on(router: &TestRouter, group: u64, name: &str) -> Vec<String> {
    definition(router, group, name).await.map(|d| d.indexes).unwrap_or_default()
}

async fn drop_copy(router: &TestRouter, group: u64, name: &str) {
    let drop = Operation::Document(DocOp::DropCollection { name: name.into() });
    router.cluster.write(group, &drop, Consistency::Quorum).await.unwrap();
    assert!(definition(router, group, name).await.is_none());
}

/// Ids `d0`, `d1`, … with at least one document on every shard.
async fn insert_spread(router: &TestRouter, name: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        router.post(&format!("{C}/{name}/documents"), &json!({"id": id, "document": {"n": i}})).await.expect(201);
    }
    let shards: std::collections::BTreeSet<u64> = ids.iter().map(|id| router.cluster.shard_of(&format!("doc/{name}/{id}"))).collect();
    assert_eq!(shards.len(), 3, "the documents do not cover every shard; the test shows nothing");
    ids
}

// ---------------------------------------------------------------- document indexes

/// An index is created on every shard (and used by a query, whichever shard
/// holds the documents), listed once, refused a second time, and dropped from
/// every shard; dropping it again is a 404.
#[tokio::test]
async fn document_indexes_are_created_and_dropped_on_every_shard() {
    let router = TestRouter::new(3).await;
    router.post(C, &json!({"name": "people"})).await.expect(201);
    insert_spread(&router, "people", 15).await;
    let created = router.post(&format!("{C}/people/indexes"), &json!({"field": "n"})).await.expect(201);
    assert_eq!(created["field"], json!("n"));
    router.post(&format!("{C}/people/indexes"), &json!({"field": "city"})).await.expect(201);
    for g in 1..=3 {
        assert_eq!(indexes_on(&router, g, "people").await, ["n", "city"], "shard {g}");
    }
    router.post(&format!("{C}/people/indexes"), &json!({"field": "n"})).await.expect(409);
    let list = router.get(&format!("{C}/people/indexes")).await.expect(200);
    assert_eq!(list["indexes"], json!([{"field": "n"}, {"field": "city"}]), "{list}");
    assert_eq!(list["count"], json!(2));

    let found = router.post("/api/v1/documents/people/query", &json!({"filter": {"n": {"$gte": 10}}})).await.expect(200);
    assert_eq!(found["count"], json!(5), "{found}");
    assert!(!found["index_used"].is_null(), "the index was not used: {found}");

    router.delete(&format!("{C}/people/indexes/n")).await.expect(200);
    for g in 1..=3 {
        assert_eq!(indexes_on(&router, g, "people").await, ["city"], "shard {g}");
    }
    router.delete(&format!("{C}/people/indexes/n")).await.expect(404);
    let list = router.get(&format!("{C}/people/indexes")).await.expect(200);
    assert_eq!(list["indexes"], json!([{"field": "city"}]));
    let found = router.post("/api/v1/documents/people/query", &json!({"filter": {"n": {"$gte": 10}}})).await.expect(200);
    assert_eq!(found["count"], json!(5), "{found}");
    router.post(&format!("{C}/nobody/indexes"), &json!({"field": "n"})).await.expect(404);
}

/// Creating an index also repairs a shard that lost its copy of the
/// collection: the copy comes back with the new index and the old ones.
#[tokio::test]
async fn an_index_create_repairs_a_shard_without_the_collection() {
    let router = TestRouter::new(3).await;
    let schema = json!({"type": "object", "required": ["n"]});
    router.post(C, &json!({"name": "people", "schema": schema})).await.expect(201);
    router.post(&format!("{C}/people/indexes"), &json!({"field": "a"})).await.expect(201);
    let home = router.cluster.shard_of("doccoll/people");
    let lost = (1..=3).find(|g| *g != home).unwrap();
    drop_copy(&router, lost, "people").await;

    router.post(&format!("{C}/people/indexes"), &json!({"field": "b"})).await.expect(201);
    for g in 1..=3 {
        let def = definition(&router, g, "people").await.unwrap_or_else(|| panic!("shard {g} lacks the collection"));
        assert_eq!(def.indexes, ["a", "b"], "shard {g}");
        assert_eq!(def.schema, Some(schema.clone()), "shard {g}");
    }
}

/// Dropping an index while one shard has lost its copy of the collection: the
/// other shards drop it and the client is told the index is gone.
#[tokio::test]
async fn an_index_drop_finishes_while_a_shard_lacks_the_collection() {
    let router = TestRouter::new(3).await;
    router.post(C, &json!({"name": "people"})).await.expect(201);
    router.post(&format!("{C}/people/indexes"), &json!({"field": "a"})).await.expect(201);
    let home = router.cluster.shard_of("doccoll/people");
    let lost = (1..=3).find(|g| *g != home).unwrap();
    drop_copy(&router, lost, "people").await;

    let dropped = router.delete(&format!("{C}/people/indexes/a")).await;
    let list = router.get(&format!("{C}/people/indexes")).await.expect(200);
    assert_eq!(list["count"], json!(0), "{list}");
    assert_eq!(dropped.status.as_u16(), 200, "the index is gone but the drop answered {}: {}", dropped.status, dropped.json);
}

// ---------------------------------------------------------------- document drop

/// A drop that stopped after removing the collection from the other shards
/// (the home shard goes last) is finished by the next DELETE, which reports
/// the documents it still found; a further DELETE is a 404.
#[tokio::test]
async fn a_collection_drop_interrupted_before_the_home_shard_is_finished_by_a_retry() {
    let router = TestRouter::new(3).await;
    router.post(C, &json!({"name": "people"})).await.expect(201);
    let ids = insert_spread(&router, "people", 20).await;
    let home = router.cluster.shard_of("doccoll/people");
    for g in (1..=3).filter(|g| *g != home) {
        drop_copy(&router, g, "people").await;
    }
    let on_home = ids.iter().filter(|id| router.cluster.shard_of(&format!("doc/people/{id}")) == home).count();

    // Meanwhile the collection is still there, with the home shard's documents.
    let listed = router.get(&format!("{C}/people")).await.expect(200);
    assert_eq!(listed["documents"].as_array().unwrap().len(), on_home, "{listed}");

    let dropped = router.delete(&format!("{C}/people")).await.expect(200);
    assert_eq!(dropped["documents_deleted"], json!(on_home), "{dropped}");
    for g in 1..=3 {
        assert!(definition(&router, g, "people").await.is_none(), "shard {g} kept the collection");
    }
    router.get(&format!("{C}/people")).await.expect(404);
    router.delete(&format!("{C}/people")).await.expect(404);
    assert_eq!(router.get(C).await.expect(200)["count"], json!(0));
}

/// A drop whose home shard is unreachable fails with a 503 after the other
/// shards dropped their part; the collection stays listed (the home shard
/// still knows it) and a retry once the shard is back finishes the drop.
#[tokio::test]
async fn a_collection_drop_with_the_home_shard_down_is_finished_by_a_retry() {
    let router = TestRouter::new(3).await;
    router.post(C, &json!({"name": "people"})).await.expect(201);
    let ids = insert_spread(&router, "people", 20).await;
    let home = router.cluster.shard_of("doccoll/people");
    let on_home = ids.iter().filter(|id| router.cluster.shard_of(&format!("doc/people/{id}")) == home).count();

    router.cluster.set_down(home, true);
    router.delete(&format!("{C}/people")).await.expect(503);
    for g in (1..=3).filter(|g| *g != home) {
        assert!(definition(&router, g, "people").await.is_none(), "shard {g} kept the collection");
    }
    router.cluster.set_down(home, false);
    let list = router.get(C).await.expect(200);
    assert_eq!(list["collections"][0]["name"], json!("people"), "{list}");
    assert_eq!(list["collections"][0]["document_count"], json!(on_home), "{list}");

    let dropped = router.delete(&format!("{C}/people")).await.expect(200);
    assert_eq!(dropped["documents_deleted"], json!(on_home));
    assert_eq!(router.get(C).await.expect(200)["count"], json!(0));
    // The name is free again, on every shard.
    router.post(C, &json!({"name": "people"})).await.expect(201);
    for g in 1..=3 {
        assert!(definition(&router, g, "people").await.is_some(), "shard {g} lacks the new collection");
    }
    assert_eq!(router.get(&format!("{C}/people")).await.expect(200)["documents"], json!([]));
}

/// A bulk import into an existing collection whose copy one shard lost (an
/// interrupted create) imports every document, as single inserts do by
/// repairing the copy.
#[tokio::test]
async fn a_document_import_repairs_a_shard_without_the_collection() {
    let router = TestRouter::new(3).await;
    router.post(C, &json!({"name": "people"})).await.expect(201);
    let home = router.cluster.shard_of("doccoll/people");
    let lost = (1..=3).find(|g| *g != home).unwrap();
    drop_copy(&router, lost, "people").await;

    let docs: Vec<Value> = (0..30).map(|i| json!({"n": i})).collect();
    let report = router.post("/api/v1/import/documents", &json!({"collection": "people", "documents": docs})).await;
    let all = router.post("/api/v1/documents/people/query", &json!({})).await.expect(200);
    let (imported, stored) = (&report.json["rows_imported"], &all["total_matched"]);
    assert_eq!(report.status.as_u16(), 200, "rows_imported {imported}, stored {stored}, error {}", report.json["error"]);
    assert_eq!((imported.clone(), stored.clone()), (json!(30), json!(30)));
}

// ---------------------------------------------------------------- buckets

async fn bucket_on(router: &TestRouter, group: u64, name: &str) -> bool {
    let q = Query::Object(ObjectQuery::Bucket { name: name.into() });
    match router.cluster.read(group, &q, Consistency::Quorum, None).await.unwrap().value {
        QueryResult::Object(ObjectQueryResult::Bucket(b)) => b.is_some(),
        other => panic!("unexpected {other:?}"),
    }
}

async fn put(router: &TestRouter, path: &str, body: &Value) -> Answer {
    router.call(Method::PUT, path, Some(body)).await
}

/// The first key `k0`, `k1`, … of `bucket` whose object lands on `group`.
fn key_on(router: &TestRouter, bucket: &str, group: u64) -> String {
    (0..).map(|i| format!("k{i}")).find(|k| router.cluster.shard_of(&format!("obj/{bucket}/{k}")) == group).unwrap()
}

/// A bucket's record is copied to every shard; a shard that lost its copy
/// still lists (no objects there) and gets the copy back from the first object
/// written there; a drop removes every copy and every object, and a bucket
/// made again under the name starts empty.
#[tokio::test]
async fn buckets_are_copied_repaired_and_dropped_on_every_shard() {
    let router = TestRouter::new(3).await;
    router.post(BUCKETS, &json!({"name": "media"})).await.expect(201);
    for g in 1..=3 {
        assert!(bucket_on(&router, g, "media").await, "shard {g} lacks the bucket");
    }
    let home = router.cluster.shard_of("media");
    let lost = (1..=3).find(|g| *g != home).unwrap();
    let drop = Operation::Object(ObjectOp::DropBucket { name: "media".into(), if_exists: false });
    router.cluster.write(lost, &drop, Consistency::Quorum).await.unwrap();
    assert!(!bucket_on(&router, lost, "media").await);

    let other = (1..=3).find(|g| *g != lost).unwrap();
    put(&router, &format!("{BUCKETS}/media/object/{}", key_on(&router, "media", other)), &json!("a")).await.expect(200);
    let listed = router.get(&format!("{BUCKETS}/media/objects")).await.expect(200);
    assert_eq!(listed["count"], json!(1), "{listed}");
    assert_eq!(router.get(BUCKETS).await.expect(200)["count"], json!(1));

    let key = key_on(&router, "media", lost);
    put(&router, &format!("{BUCKETS}/media/object/{key}"), &json!("b")).await.expect(200);
    assert!(bucket_on(&router, lost, "media").await, "the put did not repair shard {lost}");
    let got = router.get(&format!("{BUCKETS}/media/object/{key}?meta=1")).await.expect(200);
    assert_eq!(got["size"], json!(3));
    let stats = router.get(&format!("{BUCKETS}/media")).await.expect(200);
    assert_eq!((stats["object_count"].clone(), stats["total_bytes"].clone()), (json!(2), json!(6)), "{stats}");

    router.delete(&format!("{BUCKETS}/media")).await.expect(200);
    for g in 1..=3 {
        assert!(!bucket_on(&router, g, "media").await, "shard {g} kept the bucket");
    }
    router.get(&format!("{BUCKETS}/media")).await.expect(404);
    router.get(&format!("{BUCKETS}/media/objects")).await.expect(404);
    router.delete(&format!("{BUCKETS}/media")).await.expect(404);
    assert_eq!(router.get(BUCKETS).await.expect(200)["count"], json!(0));
    put(&router, &format!("{BUCKETS}/media/object/{key}"), &json!("c")).await.expect(404);

    router.post(BUCKETS, &json!({"name": "media"})).await.expect(201);
    let stats = router.get(&format!("{BUCKETS}/media")).await.expect(200);
    assert_eq!(stats["object_count"], json!(0), "the new bucket holds the old objects: {stats}");
    router.get(&format!("{BUCKETS}/media/object/{key}")).await.expect(404);
}

/// A bucket drop that cannot reach a shard other than the home one fails with
/// a 503 and leaves the bucket in place (its home record goes last); the
/// objects the other shards held are gone, and a retry finishes the drop.
#[tokio::test]
async fn a_bucket_drop_with_a_shard_down_is_finished_by_a_retry() {
    let router = TestRouter::new(3).await;
    router.post(BUCKETS, &json!({"name": "media"})).await.expect(201);
    let home = router.cluster.shard_of("media");
    let down = (1..=3).find(|g| *g != home).unwrap();
    let on_home = key_on(&router, "media", home);
    let on_down = key_on(&router, "media", down);
    for k in [&on_home, &on_down] {
        put(&router, &format!("{BUCKETS}/media/object/{k}"), &json!(k)).await.expect(200);
    }

    router.cluster.set_down(down, true);
    router.delete(&format!("{BUCKETS}/media")).await.expect(503);
    router.cluster.set_down(down, false);
    assert!(bucket_on(&router, home, "media").await, "the home record went before the copies");
    router.get(&format!("{BUCKETS}/media")).await.expect(200);
    router.get(&format!("{BUCKETS}/media/object/{on_down}")).await.expect(200);

    router.delete(&format!("{BUCKETS}/media")).await.expect(200);
    for g in 1..=3 {
        assert!(!bucket_on(&router, g, "media").await, "shard {g} kept the bucket");
    }
    router.get(&format!("{BUCKETS}/media/object/{on_down}")).await.expect(404);
    router.get(&format!("{BUCKETS}/media/object/{on_home}")).await.expect(404);
}

// ---------------------------------------------------------------- vector collections

/// A vector collection whose create cannot reach one of its shards is refused
/// with a 503 and leaves nothing behind: not listed, not found, and the name
/// can be created once the shard is back.
#[tokio::test]
async fn a_vector_create_that_misses_a_shard_leaves_nothing_behind() {
    let router = TestRouter::new(3).await;
    let name = "cam-create";
    let home = router.cluster.shard_of(&format!("vector/{name}"));
    let down = (1..=3).find(|g| *g != home).unwrap();
    router.cluster.set_down(down, true);
    router.post(VEC, &json!({"name": name, "dim": 2, "metric": "l2"})).await.expect(503);
    router.cluster.set_down(down, false);
    let stats = router.get(&format!("{VEC}/{name}")).await;
    let list = router.get(VEC).await.expect(200);
    let again = router.post(VEC, &json!({"name": name, "dim": 2, "metric": "l2"})).await;
    assert_eq!(stats.status.as_u16(), 404, "{}", stats.json);
    assert_eq!(again.status.as_u16(), 201, "creating the name again: {}", again.json);
    assert!(!list.to_string().contains(name), "listed after the refused create: {list}");
    let created = again.json;
    assert_eq!(created["shards"].as_array().map(Vec::len), Some(3));
    router.post(&format!("{VEC}/{name}/upsert"), &json!({"id": "a", "vector": [1, 2]})).await.expect(200);
    assert_eq!(router.get(&format!("{VEC}/{name}")).await.expect(200)["count"], json!(1));
}

/// A vector collection drop that cannot reach a shard fails with a 503 and
/// leaves the collection listed (its home shard goes last); a retry drops it
/// and reports the records of every shard it still found.
#[tokio::test]
async fn a_vector_drop_with_a_shard_down_is_finished_by_a_retry() {
    let router = TestRouter::new(3).await;
    let name = "cam-drop";
    let created = router.post(VEC, &json!({"name": name, "dim": 2, "metric": "l2"})).await.expect(201);
    let shards: Vec<u64> = created["shards"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    let vectors: Vec<Value> = (0..20).map(|i| json!({"id": format!("v{i}"), "vector": [i, 0]})).collect();
    router.post(&format!("{VEC}/{name}/batch"), &json!({"vectors": vectors})).await.expect(200);

    router.cluster.set_down(shards[2], true);
    router.delete(&format!("{VEC}/{name}")).await.expect(503);
    router.cluster.set_down(shards[2], false);
    let list = router.get(VEC).await.expect(200);
    let listed = list["collections"].as_array().unwrap().iter().find(|c| c["name"] == json!(name));
    assert!(listed.is_some(), "the collection vanished before its home shard dropped it: {list}");

    let dropped = router.delete(&format!("{VEC}/{name}")).await.expect(200);
    let left = listed.unwrap()["count"].as_u64().unwrap();
    assert_eq!(dropped["deleted_count"], json!(left), "{dropped}");
    router.get(&format!("{VEC}/{name}")).await.expect(404);
    router.post(&format!("{VEC}/{name}/search"), &json!({"vector": [1, 0], "k": 1})).await.expect(404);
    router.delete(&format!("{VEC}/{name}")).await.expect(404);
}
