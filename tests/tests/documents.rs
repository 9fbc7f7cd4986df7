//! Scenario: the document store end to end through the router — collections
//! with schema validation, 300 documents spread over the shards, get, `$set` /
//! `$inc` / `$unset` updates and replacement, deletes, every filter operator with
//! nested paths, multi-key sort and limit after the fan-out merge, secondary
//! indexes (used and equivalent to a scan), a shard leader's death, and a full
//! cluster restart.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, stream};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, HDR_GROUP, HDR_NODE, Http, Resp, Value, json};

const C: &str = "/api/v1/documents/collections";
const N: usize = 300;
const CITIES: [&str; 4] = ["Oslo", "Paris", "Rome", "Lima"];

/// Expected documents: id → data.
type Docs = BTreeMap<String, Value>;
type Pred = Box<dyn Fn(&Value) -> bool>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("documents scenario failed: {e:?}");
    }
}

fn person(i: usize) -> Value {
    let mut tags = Vec::new();
    if i.is_multiple_of(2) {
        tags.push("even");
    }
    if i.is_multiple_of(5) {
        tags.push("five");
    }
    let mut d = json!({
        "name": format!("p{i:03}"),
        "age": (i * 7) % 60,
        "score": ((i * 13) % 100) as f64 / 4.0,
        "city": CITIES[i % 4],
        "address": {"zip": 1000 + (i % 10), "country": if i.is_multiple_of(3) { "NO" } else { "FR" }},
        "tags": tags,
    });
    if i.is_multiple_of(7) {
        d["vip"] = json!(true);
    }
    d
}

fn at<'a>(d: &'a Value, path: &str) -> &'a Value {
    d.pointer(&format!("/{}", path.replace('.', "/"))).unwrap_or(&Value::Null)
}

/// The JSON total order restricted to the types of the test data.
fn cmp_values(a: &Value, b: &Value) -> Ordering {
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Number(_) => 1,
        Value::String(_) => 2,
        _ => 3,
    };
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().partial_cmp(&y.as_f64()).unwrap_or(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Ids of `docs` ordered by `keys` (path, 1 | -1), then by id.
fn sorted_ids(docs: &Docs, keys: &[(&str, i32)], pred: &dyn Fn(&Value) -> bool) -> Vec<String> {
    let mut v: Vec<(&String, &Value)> = docs.iter().filter(|(_, d)| pred(d)).collect();
    v.sort_by(|(ia, a), (ib, b)| {
        for (path, dir) in keys {
            let o = cmp_values(at(a, path), at(b, path));
            let o = if *dir < 0 { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        ia.cmp(ib)
    });
    v.into_iter().map(|(id, _)| id.clone()).collect()
}

fn ids_of(r: &Resp) -> Result<Vec<String>> {
    r.json["documents"]
        .as_array()
        .ok_or_else(|| anyhow!("no documents array: {r}"))?
        .iter()
        .map(|d| d["id"].as_str().map(str::to_string).ok_or_else(|| anyhow!("document without id: {d}")))
        .collect()
}

async fn query(api: &Http, coll: &str, body: &Value) -> Result<Resp> {
    api.post(&format!("/api/v1/documents/{coll}/query"), body).await
}

/// A query sent as raw JSON text, so the sort object keeps its key order.
async fn query_raw(api: &Http, coll: &str, body: &str) -> Result<Resp> {
    api.post_raw(&format!("/api/v1/documents/{coll}/query"), body.as_bytes().to_vec(), Some("application/json")).await
}

async fn send_json(api: &Http, method: Method, path: &str, body: &Value) -> Result<Resp> {
    api.send(method, path, Some(serde_json::to_vec(body)?), Some("application/json")).await
}

fn doc_path(coll: &str, id: &str) -> String {
    format!("{C}/{coll}/documents/{id}")
}

fn filter_cases() -> Vec<(Value, Pred)> {
    let num = |d: &Value, p: &str| at(d, p).as_f64().unwrap_or(f64::NAN);
    let s = |d: &Value, p: &str| at(d, p).as_str().unwrap_or("").to_string();
    let has_tag = |d: &Value, t: &str| d["tags"].as_array().is_some_and(|a| a.iter().any(|x| x == t));
    vec![
        (json!({"city": "Oslo"}), Box::new(move |d| s(d, "city") == "Oslo")),
        (json!({"city": {"$eq": "Paris"}}), Box::new(move |d| s(d, "city") == "Paris")),
        (json!({"city": {"$ne": "Oslo"}}), Box::new(move |d| s(d, "city") != "Oslo")),
        (json!({"age": {"$gt": 40}}), Box::new(move |d| num(d, "age") > 40.0)),
        (json!({"age": {"$gte": 20, "$lt": 30}}), Box::new(move |d| (20.0..30.0).contains(&num(d, "age")))),
        (json!({"score": {"$gt": 5, "$lte": 12.5}}), Box::new(move |d| num(d, "score") > 5.0 && num(d, "score") <= 12.5)),
        (json!({"city": {"$in": ["Rome", "Lima"]}}), Box::new(move |d| ["Rome", "Lima"].contains(&s(d, "city").as_str()))),
        (json!({"city": {"$nin": ["Rome", "Oslo"]}}), Box::new(move |d| !["Rome", "Oslo"].contains(&s(d, "city").as_str()))),
        (
            json!({"$and": [{"address.country": "NO"}, {"score": {"$gte": 10.0}}]}),
            Box::new(move |d| s(d, "address.country") == "NO" && num(d, "score") >= 10.0),
        ),
        (json!({"$or": [{"city": "Lima"}, {"age": {"$lt": 5}}]}), Box::new(move |d| s(d, "city") == "Lima" || num(d, "age") < 5.0)),
        (json!({"$not": {"city": "Oslo"}}), Box::new(move |d| s(d, "city") != "Oslo")),
        (json!({"age": {"$not": {"$gt": 30}}}), Box::new(move |d| num(d, "age") <= 30.0)),
        (json!({"vip": {"$exists": true}}), Box::new(|d| d.get("vip").is_some())),
        (json!({"vip": {"$exists": false}}), Box::new(|d| d.get("vip").is_none())),
        (json!({"tags": {"$contains": "five"}}), Box::new(move |d| has_tag(d, "five"))),
        (json!({"tags": "even"}), Box::new(move |d| has_tag(d, "even"))),
        (json!({"name": {"$regex": "^p0[0-4]"}}), Box::new(move |d| s(d, "name").starts_with("p0") && s(d, "name").as_bytes()[2] <= b'4')),
        (
            json!({"name": {"$regex": "^P1[0-2]", "$options": "i"}}),
            Box::new(move |d| ["p10", "p11", "p12"].iter().any(|p| s(d, "name").starts_with(p))),
        ),
        (json!({"address.zip": {"$gte": 1005}}), Box::new(move |d| num(d, "address.zip") >= 1005.0)),
        (
            json!({"address.zip": {"$in": [1001, 1003]}, "city": {"$ne": "Lima"}}),
            Box::new(move |d| [1001.0, 1003.0].contains(&num(d, "address.zip")) && s(d, "city") != "Lima"),
        ),
    ]
}

/// Every filter case returns exactly the expected documents; `unindexed` also
/// requires a full scan (no index used).
async fn check_filters(api: &Http, docs: &Docs, unindexed: bool) -> Result<()> {
    for (filter, pred) in filter_cases() {
        let r = query(api, "people", &json!({"filter": filter})).await?.ensure_status(200)?;
        let got: BTreeSet<String> = ids_of(&r)?.into_iter().collect();
        let want: BTreeSet<String> = docs.iter().filter(|(_, d)| pred(d)).map(|(id, _)| id.clone()).collect();
        ensure!(!want.is_empty(), "filter {filter} expects no documents (a weak case)");
        ensure!(got == want, "filter {filter}: got {} documents, expected {}", got.len(), want.len());
        if unindexed {
            ensure!(r.json["index_used"].is_null(), "filter {filter} used an index: {}", r.json["index_used"]);
            ensure!(r.json["total_scanned"] == json!(docs.len()), "filter {filter}: total_scanned {}", r.json["total_scanned"]);
        }
    }
    Ok(())
}

/// Every expected document reads back by id; the collection listing has exactly them.
async fn verify(api: &Http, docs: &Docs) -> Result<()> {
    let wrong: Vec<String> = stream::iter(docs.iter())
        .map(|(id, d)| async move {
            match api.get(&doc_path("people", id)).await {
                Ok(r) if r.status == 200 && r.json["data"] == *d && r.json["id"] == json!(id) => None,
                Ok(r) => Some(format!("{id}: {r}")),
                Err(e) => Some(format!("{id}: {e:#}")),
            }
        })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await;
    ensure!(wrong.is_empty(), "{} of {} documents wrong, e.g. {:?}", wrong.len(), docs.len(), &wrong[..wrong.len().min(3)]);
    let r = api.get(&format!("{C}/people")).await?.ensure_status(200)?;
    let listed: Vec<String> = ids_of(&r)?;
    ensure!(listed == docs.keys().cloned().collect::<Vec<_>>(), "listing has {} documents, expected {}", listed.len(), docs.len());
    ensure!(
        r.json["total_scanned"] == json!(docs.len()) && r.json["execution_time_ms"].is_u64(),
        "listing shape: {}",
        r.json["total_scanned"]
    );
    Ok(())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    collections_are_created_with_a_schema(&api).await?;
    let ins = format!("{C}/people/documents");
    schema_validation_refuses_bad_documents(&api, &ins).await?;
    let (mut docs, by_index) = documents_spread_over_the_shards(&api, &ins).await?;
    documents_are_read_by_id(&api, &by_index).await?;
    updates_change_documents_within_the_schema(&api, &mut docs, &by_index).await?;
    deleted_documents_are_gone(&api, &mut docs, &by_index).await?;

    // Every operator, nested paths, without indexes (full scans).
    check_filters(&api, &docs, true).await.context("filters without indexes")?;

    sort_and_limit_apply_after_the_merge(&api, &docs).await?;
    malformed_queries_are_refused(&api).await?;
    indexes_are_created_and_kept_in_step(&api, &ins, &mut docs, &by_index).await?;
    indexed_queries_match_scans(&api, &docs).await?;
    collections_are_listed_auto_created_and_dropped(&api, &docs).await?;
    documents_survive_a_shard_leader_kill(c, &api, &ins, &mut docs).await?;
    documents_survive_a_full_restart(c, &ins, &docs).await
}

/// Collections: creation with a schema, conflict, bad names, listing.
async fn collections_are_created_with_a_schema(api: &Http) -> Result<()> {
    let schema = json!({
        "type": "object",
        "required": ["name", "age"],
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    });
    api.post(C, &json!({"name": "people", "schema": schema})).await?.ensure_status(201)?;
    let r = api.post(C, &json!({"name": "people"})).await?;
    ensure!(r.status == 409, "creating an existing collection: {r}");
    api.post(C, &json!({"name": "bad/name"})).await?.ensure_status(400)?;
    api.post(C, &json!({"name": "badschema", "schema": {"type": "nonsense"}})).await?.ensure_status(400)?;
    api.post(C, &json!({"name": "scratch"})).await?.ensure_status(201)?;
    Ok(())
}

/// Schema validation: bad documents are refused with the validation messages.
async fn schema_validation_refuses_bad_documents(api: &Http, ins: &str) -> Result<()> {
    for (bad, needle) in [
        (json!({"name": "x"}), "$.age"),
        (json!({"name": 5, "age": 3}), "$.name"),
        (json!({"name": "x", "age": -1}), "minimum"),
        (json!({"name": "x", "age": 1, "tags": [1]}), "$.tags[0]"),
    ] {
        let r = api.post(ins, &json!({"document": bad})).await?.ensure_status(400)?;
        ensure!(r.error().is_some_and(|e| e.contains(needle)), "schema error for {bad} lacks {needle:?}: {r}");
    }
    api.post(ins, &json!({"document": [1, 2]})).await?.ensure_status(400)?;
    api.post(ins, &json!({"nodocument": {}})).await?.ensure_status(400)?;
    Ok(())
}

/// 300 documents, spread over the shards; returns the expected documents and
/// their ids by insertion index.
async fn documents_spread_over_the_shards(api: &Http, ins: &str) -> Result<(Docs, Vec<String>)> {
    let inserted: Vec<Result<(String, Value, String)>> = stream::iter(0..N)
        .map(|i| {
            let (api, ins) = (api.clone(), ins.to_string());
            async move {
                let d = person(i);
                let r = api.post(&ins, &json!({"document": d})).await?.ensure_status(201)?;
                let id = r.json["id"].as_str().with_context(|| format!("no id: {r}"))?.to_string();
                ensure!(r.json["data"] == d && r.json["collection"] == "people", "insert reply {r}");
                ensure!(r.json["created_at"].is_string() && r.json["updated_at"].is_string(), "timestamps {r}");
                Ok((id, d, r.group().unwrap_or_default()))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut docs = Docs::new();
    let mut by_index: Vec<String> = vec![String::new(); N];
    let mut groups = BTreeSet::new();
    for r in inserted {
        let (id, d, g) = r?;
        let i: usize = d["name"].as_str().unwrap_or("p0")[1..].parse()?;
        by_index[i] = id.clone();
        docs.insert(id, d);
        groups.insert(g);
    }
    ensure!(docs.len() == N, "ids are not unique");
    ensure!(groups.len() >= 4, "documents landed in only {} groups: {groups:?}", groups.len());
    Ok((docs, by_index))
}

/// Get by id; a missing id and a missing collection are 404.
async fn documents_are_read_by_id(api: &Http, by_index: &[String]) -> Result<()> {
    for i in [0, 17, 299] {
        let r = api.get(&doc_path("people", &by_index[i])).await?.ensure_status(200)?;
        ensure!(r.json["data"] == person(i), "get {i}: {r}");
    }
    api.get(&doc_path("people", "nope")).await?.ensure_status(404)?;
    api.get(&doc_path("nosuch", "nope")).await?.ensure_status(404)?;
    Ok(())
}

/// Updates: $set (with a dotted path), $inc, $unset, replacement; schema still enforced.
async fn updates_change_documents_within_the_schema(api: &Http, docs: &mut Docs, by_index: &[String]) -> Result<()> {
    for i in [1, 2, 3] {
        let id = &by_index[i];
        let r = send_json(api, Method::PATCH, &doc_path("people", id), &json!({"$set": {"age": 59, "address.zip": 1999}}))
            .await?
            .ensure_status(200)?;
        let d = docs.get_mut(id).context("doc")?;
        d["age"] = json!(59);
        d["address"]["zip"] = json!(1999);
        ensure!(r.json["data"] == *d, "$set reply {r}");
    }
    let r = api.post(&format!("{}/update", doc_path("people", &by_index[4])), &json!({"$inc": {"age": 1}})).await?.ensure_status(200)?;
    let d = docs.get_mut(&by_index[4]).context("doc")?;
    d["age"] = json!(d["age"].as_i64().unwrap_or(0) + 1);
    ensure!(r.json["data"] == *d, "$inc reply {r}");
    send_json(api, Method::PATCH, &doc_path("people", &by_index[7]), &json!({"$unset": {"vip": ""}})).await?.ensure_status(200)?;
    docs.get_mut(&by_index[7]).and_then(Value::as_object_mut).context("doc")?.remove("vip");
    let replacement =
        json!({"name": "p005", "age": 33, "city": "Quito", "address": {"zip": 1005, "country": "EC"}, "tags": ["replaced"], "score": 1.5});
    let r = send_json(api, Method::PUT, &doc_path("people", &by_index[5]), &json!({"document": replacement})).await?.ensure_status(200)?;
    ensure!(r.json["data"] == replacement && r.json["created_at"] != json!(null), "replace reply {r}");
    docs.insert(by_index[5].clone(), replacement);
    send_json(api, Method::PATCH, &doc_path("people", &by_index[6]), &json!({"$set": {"age": "old"}})).await?.ensure_status(400)?;
    send_json(api, Method::PUT, &doc_path("people", &by_index[6]), &json!({"document": {"name": "no age"}})).await?.ensure_status(400)?;
    send_json(api, Method::PATCH, &doc_path("people", &by_index[6]), &json!({"$inc": {"name": 1}})).await?.ensure_status(400)?;
    send_json(api, Method::PATCH, &doc_path("people", "nope"), &json!({"$set": {"age": 1}})).await?.ensure_status(404)?;
    let r = api.get(&doc_path("people", &by_index[6])).await?.ensure_status(200)?;
    ensure!(r.json["data"] == person(6), "refused updates changed the document: {r}");
    Ok(())
}

/// Deletes: a deleted document is 404, and so is deleting it again.
async fn deleted_documents_are_gone(api: &Http, docs: &mut Docs, by_index: &[String]) -> Result<()> {
    for i in (29..N).step_by(30) {
        api.delete(&doc_path("people", &by_index[i])).await?.ensure_status(200)?;
        docs.remove(&by_index[i]);
        api.get(&doc_path("people", &by_index[i])).await?.ensure_status(404)?;
    }
    api.delete(&doc_path("people", &by_index[29])).await?.ensure_status(404)?;
    Ok(())
}

/// Multi-key sort and limit after the merge; key order of the sort object matters.
async fn sort_and_limit_apply_after_the_merge(api: &Http, docs: &Docs) -> Result<()> {
    let all = |_: &Value| true;
    let r =
        query_raw(api, "people", r#"{"filter": {}, "sort": {"city": 1, "age": -1, "name": 1}, "limit": 25}"#).await?.ensure_status(200)?;
    ensure!(ids_of(&r)? == sorted_ids(docs, &[("city", 1), ("age", -1), ("name", 1)], &all)[..25], "sort city,-age,name");
    let r = query_raw(api, "people", r#"{"sort": {"age": -1, "city": 1, "name": -1}, "limit": 40}"#).await?.ensure_status(200)?;
    ensure!(ids_of(&r)? == sorted_ids(docs, &[("age", -1), ("city", 1), ("name", -1)], &all)[..40], "sort -age,city,-name");
    let r = query(
        api,
        "people",
        &json!({"filter": {"age": {"$gte": 30}}, "sort": [["address.zip", -1], ["score", 1], ["name", 1]], "limit": 30}),
    )
    .await?
    .ensure_status(200)?;
    let ge30 = |d: &Value| at(d, "age").as_f64().is_some_and(|a| a >= 30.0);
    ensure!(ids_of(&r)? == sorted_ids(docs, &[("address.zip", -1), ("score", 1), ("name", 1)], &ge30)[..30], "sort nested zip");
    let r = query(api, "people", &json!({"sort": {"name": 1}, "limit": 10, "skip": 5})).await?.ensure_status(200)?;
    ensure!(ids_of(&r)? == sorted_ids(docs, &[("name", 1)], &all)[5..15], "skip + limit");
    let r = api.get(&format!("{C}/people?limit=5")).await?.ensure_status(200)?;
    ensure!(ids_of(&r)?.len() == 5, "collection GET with limit: {r}");
    Ok(())
}

/// Malformed queries are 400; a missing collection is 404.
async fn malformed_queries_are_refused(api: &Http) -> Result<()> {
    for bad in [
        json!({"filter": {"age": {"$bogus": 1}}}),
        json!({"filter": {"$and": 5}}),
        json!({"filter": {"name": {"$regex": "("}}}),
        json!({"filter": [1]}),
        json!({"sort": {"age": 2}}),
        json!({"limit": -1}),
    ] {
        let r = query(api, "people", &bad).await?;
        ensure!(r.status == 400 && r.error().is_some(), "malformed query {bad}: {r}");
    }
    query(api, "nosuch", &json!({"filter": {}})).await?.ensure_status(404)?;
    Ok(())
}

/// Secondary indexes are created once and listed; writes after their creation
/// (an update, an insert, a delete) keep them in step.
async fn indexes_are_created_and_kept_in_step(api: &Http, ins: &str, docs: &mut Docs, by_index: &[String]) -> Result<()> {
    for field in ["city", "age", "tags", "address.zip"] {
        api.post(&format!("{C}/people/indexes"), &json!({"field": field})).await?.ensure_status(201)?;
    }
    let r = api.post(&format!("{C}/people/indexes"), &json!({"field": "city"})).await?;
    ensure!(r.status == 409, "creating an existing index: {r}");
    let r = api.get(&format!("{C}/people/indexes")).await?.ensure_status(200)?;
    ensure!(r.json["count"] == json!(4), "index list {r}");
    // Writes after index creation keep the indexes in step.
    let moved = by_index[8].clone();
    send_json(api, Method::PATCH, &doc_path("people", &moved), &json!({"$set": {"city": "Oslo", "tags": ["five"]}}))
        .await?
        .ensure_status(200)?;
    if let Some(d) = docs.get_mut(&moved) {
        d["city"] = json!("Oslo");
        d["tags"] = json!(["five"]);
    }
    let extra = json!({"name": "p900", "age": 21, "city": "Oslo", "score": 2.0, "address": {"zip": 1002, "country": "NO"}, "tags": ["even", "five"]});
    let r = api.post(ins, &json!({"document": extra})).await?.ensure_status(201)?;
    docs.insert(r.json["id"].as_str().context("id")?.to_string(), extra);
    api.delete(&doc_path("people", &by_index[12])).await?.ensure_status(200)?;
    docs.remove(&by_index[12]);
    Ok(())
}

/// Secondary indexes: used by equality and range filters, same results as a
/// scan, also sorted and limited; a dropped index is no longer used.
async fn indexed_queries_match_scans(api: &Http, docs: &Docs) -> Result<()> {
    for (filter, field) in [
        (json!({"city": "Oslo"}), "city"),
        (json!({"city": {"$in": ["Rome", "Quito"]}}), "city"),
        (json!({"age": {"$gte": 20, "$lt": 25}}), "age"),
        (json!({"age": {"$gt": 55}, "city": {"$ne": "Lima"}}), "age"),
        (json!({"tags": "five"}), "tags"),
        (json!({"address.zip": {"$lte": 1001}}), "address.zip"),
    ] {
        let r = query(api, "people", &json!({"filter": filter})).await?.ensure_status(200)?;
        ensure!(r.json["index_used"] == json!(field), "filter {filter} did not use index {field}: {}", r.json["index_used"]);
        let scanned = r.json["total_scanned"].as_u64().unwrap_or(u64::MAX);
        ensure!(scanned < docs.len() as u64 / 2, "filter {filter} scanned {scanned} of {} documents", docs.len());
        let pred = filter_cases().into_iter().find(|(f, _)| *f == filter).map(|(_, p)| p);
        let got: BTreeSet<String> = ids_of(&r)?.into_iter().collect();
        // Same answer as the same filter under `$or`, which no index serves.
        let s = query(api, "people", &json!({"filter": {"$or": [filter]}})).await?.ensure_status(200)?;
        ensure!(s.json["index_used"].is_null(), "$or query used index {}", s.json["index_used"]);
        let scanned_ids: BTreeSet<String> = ids_of(&s)?.into_iter().collect();
        ensure!(got == scanned_ids, "filter {filter}: index gives {} documents, scan {}", got.len(), scanned_ids.len());
        if let Some(p) = pred {
            let want: BTreeSet<String> = docs.iter().filter(|(_, d)| p(d)).map(|(id, _)| id.clone()).collect();
            ensure!(got == want, "filter {filter}: got {} documents, expected {}", got.len(), want.len());
        }
        ensure!(!got.is_empty(), "filter {filter} matched nothing");
    }
    check_filters(api, docs, false).await.context("filters with indexes")?;
    let r = query_raw(api, "people", r#"{"filter": {"city": "Oslo"}, "sort": {"age": -1, "name": 1}, "limit": 7}"#)
        .await?
        .ensure_status(200)?;
    let oslo = |d: &Value| d["city"] == "Oslo";
    ensure!(ids_of(&r)? == sorted_ids(docs, &[("age", -1), ("name", 1)], &oslo)[..7], "indexed query with sort + limit");
    api.delete(&format!("{C}/people/indexes/address.zip")).await?.ensure_status(200)?;
    api.delete(&format!("{C}/people/indexes/address.zip")).await?.ensure_status(404)?;
    let r = query(api, "people", &json!({"filter": {"address.zip": 1001}})).await?.ensure_status(200)?;
    ensure!(r.json["index_used"].is_null(), "dropped index still used: {r}");
    Ok(())
}

/// Collection listing, auto-creation on insert, drop.
async fn collections_are_listed_auto_created_and_dropped(api: &Http, docs: &Docs) -> Result<()> {
    api.post(&format!("{C}/scratch/documents"), &json!({"document": {"x": 1}})).await?.ensure_status(201)?;
    api.post(&format!("{C}/auto/documents"), &json!({"document": {"y": 2}})).await?.ensure_status(201)?;
    let r = api.get(C).await?.ensure_status(200)?;
    let list = r.json["collections"].as_array().context("collections")?;
    let count_of = |n: &str| list.iter().find(|c| c["name"] == n).map(|c| c["document_count"].clone());
    ensure!(count_of("people") == Some(json!(docs.len())), "people in listing: {r}");
    ensure!(count_of("auto") == Some(json!(1)) && count_of("scratch") == Some(json!(1)), "listing {r}");
    let r = api.delete(&format!("{C}/scratch")).await?.ensure_status(200)?;
    ensure!(r.json["documents_deleted"] == json!(1), "drop reply {r}");
    api.get(&format!("{C}/scratch")).await?.ensure_status(404)?;
    api.delete(&format!("{C}/scratch")).await?.ensure_status(404)?;
    verify(api, docs).await.context("before failures")?;
    Ok(())
}

/// The leader of one document's shard dies: everything is still there and writable.
async fn documents_survive_a_shard_leader_kill(c: &mut Cluster, api: &Http, ins: &str, docs: &mut Docs) -> Result<()> {
    let probe = json!({"name": "probe", "age": 1});
    let r = api.post(ins, &json!({"document": probe})).await?.ensure_status(201)?;
    docs.insert(r.json["id"].as_str().context("id")?.to_string(), probe);
    let leader: u64 = r.header(HDR_NODE).and_then(|v| v.parse().ok()).context("no serving node header")?;
    eprintln!("killing node {leader}, leader of group {:?}", r.header(HDR_GROUP));
    c.kill_node(leader)?;
    verify(api, docs).await.context("after leader kill")?;
    let after = json!({"name": "after-kill", "age": 2, "city": "Oslo"});
    let r = api.post(ins, &json!({"document": after})).await?.ensure_status(201)?;
    docs.insert(r.json["id"].as_str().context("id")?.to_string(), after);
    check_filters(api, docs, false).await.context("filters after leader kill")?;
    Ok(())
}

/// Full restart on the same data: documents, collections and indexes survive.
async fn documents_survive_a_full_restart(c: &mut Cluster, ins: &str, docs: &Docs) -> Result<()> {
    c.stop_all().await?;
    c.start_all().await?;
    c.login().await?;
    let api = c.http.clone();
    verify(&api, docs).await.context("after restart")?;
    let r = query(&api, "people", &json!({"filter": {"city": "Oslo"}})).await?.ensure_status(200)?;
    ensure!(r.json["index_used"] == json!("city"), "index after restart: {r}");
    let oslo = |d: &Value| d["city"] == "Oslo";
    let oslo_ids: BTreeSet<String> = docs.iter().filter(|(_, d)| oslo(d)).map(|(id, _)| id.clone()).collect();
    ensure!(ids_of(&r)?.into_iter().collect::<BTreeSet<_>>() == oslo_ids, "indexed query after restart");
    check_filters(&api, docs, false).await.context("filters after restart")?;
    api.post(C, &json!({"name": "people"})).await?.ensure_status(409)?;
    api.post(ins, &json!({"document": {"name": "post-restart", "age": 3}})).await?.ensure_status(201)?;
    Ok(())
}
