//! Scenario: bulk import through the router on a three-node cluster — SQL from
//! CSV (header, column order, types) and JSON (array and newline-delimited),
//! on_conflict skip / update / error, a bad row reported by its line with its
//! batch not applied, 100k rows in one call, documents and key-value pairs
//! spread over the shards, and 400s for bad bodies.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Value, json};

const IMPORT_SQL: &str = "/api/v1/import/sql";
const IMPORT_DOCS: &str = "/api/v1/import/documents";
const IMPORT_KV: &str = "/api/v1/import/kv";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import() {
    let cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("import scenario failed: {e:?}");
    }
}

async fn sql(api: &Http, q: &str) -> Result<Value> {
    let r = api.post("/api/v1/query", &json!({"sql": q, "database": "imp"})).await?.ensure_status(200)?;
    Ok(r.json)
}

async fn rows(api: &Http, q: &str) -> Result<Vec<Value>> {
    Ok(sql(api, q).await?["data"]["rows"].as_array().cloned().unwrap_or_default())
}

async fn count(api: &Http, table: &str) -> Result<i64> {
    let r = rows(api, &format!("SELECT COUNT(*) FROM {table}")).await?;
    Ok(r[0][0].as_i64().unwrap_or(-1))
}

fn csv_body(table: &str, data: &str, options: Value) -> Value {
    json!({"table": table, "database": "imp", "format": "csv", "data": data, "options": options})
}

async fn scenario(c: &Cluster) -> Result<()> {
    let api = c.http.timeout(Duration::from_secs(600));
    sql(
        &api,
        "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, email VARCHAR(40) UNIQUE, \
         joined DATE, score DOUBLE, active BOOLEAN)",
    )
    .await?;

    // CSV with a header in another order than the table; empty field = NULL.
    let data = "name,id,age,email,joined,score,active\n\
                Ada,1,36,ada@x.org,2020-01-02,9.5,true\n\
                \"Grace, H\",2,45,grace@x.org,2019-05-06,8.25,false\n\
                Linus,3,,linus@x.org,2021-07-08,7,true\n";
    let r = api.post(IMPORT_SQL, &csv_body("people", data, json!({}))).await?.ensure_status(200)?;
    ensure!(r.json["success"] == json!(true) && r.json["rows_imported"] == json!(3), "csv import: {r}");
    ensure!(r.json["rows_skipped"] == json!(0) && r.json["errors"] == json!([]), "csv import: {r}");
    ensure!(r.json["duration_ms"].is_u64(), "duration_ms: {r}");
    let got = rows(&api, "SELECT id, name, age, joined, score, active FROM people ORDER BY id").await?;
    ensure!(
        got == vec![
            json!([1, "Ada", 36, "2020-01-02", 9.5, true]),
            json!([2, "Grace, H", 45, "2019-05-06", 8.25, false]),
            json!([3, "Linus", null, "2021-07-08", 7.0, true]),
        ],
        "typed rows after the csv import: {got:?}"
    );

    // JSON: an array of objects, then newline-delimited objects.
    let arr = r#"[{"id": 4, "name": "Barbara", "age": 81, "email": "b@x.org"}, {"id": 5, "name": "Ken", "age": "79"}]"#;
    let r =
        api.post(IMPORT_SQL, &json!({"table": "people", "database": "imp", "format": "json", "data": arr})).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(2), "json array import: {r}");
    let nd = "{\"id\": 6, \"name\": \"Dennis\"}\n\n{\"id\": 7, \"name\": \"Ken T\", \"active\": false}\n";
    let r = api.post(IMPORT_SQL, &json!({"table": "people", "database": "imp", "format": "json", "data": nd})).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(2), "ndjson import: {r}");
    ensure!(count(&api, "people").await? == 7, "7 people");
    ensure!(rows(&api, "SELECT age FROM people WHERE id = 5").await? == vec![json!([79])], "'79' became an integer");

    // on_conflict=error (the default): the batch with the duplicate is not applied.
    let dup = "id,name\n8,New\n2,Dup\n9,Other\n";
    let r = api.post(IMPORT_SQL, &csv_body("people", dup, json!({"on_conflict": "error"}))).await?;
    ensure!(r.status == 409 && r.json["success"] == json!(false), "duplicate with error: {r}");
    ensure!(r.json["errors"][0]["line"] == json!(3) && r.json["rows_imported"] == json!(0), "line 3 reported: {r}");
    ensure!(count(&api, "people").await? == 7, "nothing of the failing batch applied");
    // With one row per batch the earlier batch stays and the import stops at the bad one.
    let r = api.post(IMPORT_SQL, &csv_body("people", dup, json!({"on_conflict": "error", "batch_size": 1}))).await?;
    ensure!(r.status == 409 && r.json["rows_imported"] == json!(1), "stop at the failing batch: {r}");
    ensure!(r.json["errors"][0]["line"] == json!(3), "line 3: {r}");
    ensure!(rows(&api, "SELECT id FROM people WHERE id >= 8").await? == vec![json!([8])], "8 in, 9 not");

    // skip: an existing primary key and a taken unique email are skipped.
    let skip = "id,name,email\n2,Dup,\n10,Ten,ada@x.org\n11,Eleven,e@x.org\n";
    let r = api.post(IMPORT_SQL, &csv_body("people", skip, json!({"on_conflict": "skip"}))).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(1) && r.json["rows_skipped"] == json!(2), "skip counts: {r}");
    ensure!(rows(&api, "SELECT name FROM people WHERE id = 2").await? == vec![json!(["Grace, H"])], "2 untouched");

    // update: upsert by primary key.
    let upd = "id,name,age\n2,Grace Hopper,85\n12,Twelve,12\n";
    let r = api.post(IMPORT_SQL, &csv_body("people", upd, json!({"on_conflict": "update"}))).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(2) && r.json["rows_skipped"] == json!(0), "update counts: {r}");
    let got = rows(&api, "SELECT name, age, email FROM people WHERE id IN (2, 12) ORDER BY id").await?;
    ensure!(got == vec![json!(["Grace Hopper", 85, null]), json!(["Twelve", 12, null])], "upserted rows: {got:?}");
    // update still refuses a unique conflict with another row.
    let r = api.post(IMPORT_SQL, &csv_body("people", "id,name,email\n3,L,ada@x.org\n", json!({"on_conflict": "update"}))).await?;
    ensure!(r.status == 409 && r.json["errors"][0]["line"] == json!(2), "unique conflict on update: {r}");

    // A type error is reported by line, with the SQL code, and its batch is not applied.
    let before = count(&api, "people").await?;
    let bad = "id,name,age\n20,A,1\n21,B,2\n22,C,abc\n23,D,4\n";
    let r = api.post(IMPORT_SQL, &csv_body("people", bad, json!({}))).await?;
    ensure!(r.status == 400 && r.json["errors"][0]["line"] == json!(4), "type error line: {r}");
    ensure!(r.json["errors"][0]["code"] == json!("TYPE_MISMATCH"), "type error code: {r}");
    ensure!(count(&api, "people").await? == before, "nothing applied after a type error");
    // NOT NULL violation, unknown column in a JSON row.
    let r = api.post(IMPORT_SQL, &csv_body("people", "id,age\n30,1\n", json!({}))).await?;
    ensure!(r.status == 409 && r.json["errors"][0]["line"] == json!(2), "not null: {r}");
    let r = api
        .post(
            IMPORT_SQL,
            &json!({"table": "people", "database": "imp", "format": "json", "data": "{\"id\":31,\"name\":\"x\"}\n{\"id\":32,\"nope\":1}"}),
        )
        .await?;
    ensure!(r.status == 400 && r.json["errors"][0]["line"] == json!(2), "unknown column line: {r}");
    ensure!(count(&api, "people").await? == before, "nothing applied");

    // Bad bodies.
    for (body, status) in [
        (json!({"database": "imp", "format": "csv", "data": "id\n1\n"}), 400),
        (json!({"table": "people", "database": "imp", "format": "xml", "data": "x"}), 400),
        (json!({"table": "people", "database": "imp", "format": "csv", "data": 5}), 400),
        (json!({"table": "missing", "database": "imp", "format": "csv", "data": "id\n1\n"}), 404),
        (csv_body("people", "id,bogus\n1,2\n", json!({})), 400),
        (csv_body("people", "id,name\n1,a,extra\n", json!({})), 400),
        (csv_body("people", "id,name\n40,a\n", json!({"on_conflict": "merge"})), 400),
        (csv_body("people", "id,name\n40,a\n", json!({"batch_size": 0})), 400),
        (csv_body("people", "id,name\n40,a\n", json!({"batch_size": 1_000_000})), 400),
        (json!({"table": "people", "database": "imp", "format": "json", "data": "[1, 2]"}), 400),
        (json!({"table": "people", "database": "bad name!", "format": "csv", "data": "id\n1\n"}), 400),
    ] {
        let r = api.post(IMPORT_SQL, &body).await?;
        ensure!(r.status == status, "expected {status} for {body}: {r}");
        ensure!(r.error().is_some_and(|e| !e.is_empty()), "error message for {body}: {r}");
    }
    let r = api.post_raw(IMPORT_SQL, b"[1,2]".to_vec(), Some("application/json")).await?;
    ensure!(r.status == 400, "array body: {r}");
    let r = api.post_raw(IMPORT_SQL, b"{not json".to_vec(), Some("application/json")).await?;
    ensure!(r.status == 400, "broken body: {r}");
    ensure!(count(&api, "people").await? == before, "bad bodies import nothing");

    // 100k rows in one call.
    sql(&api, "CREATE TABLE big (id INTEGER PRIMARY KEY, label TEXT, n DOUBLE)").await?;
    let mut big = String::from("id,label,n\n");
    for i in 0..100_000 {
        big.push_str(&format!("{i},row-{i},{}\n", i as f64 / 4.0));
    }
    let r = api.post(IMPORT_SQL, &csv_body("big", &big, json!({}))).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(100_000), "100k import: {}", r.json);
    eprintln!("[import] 100k rows in {} ms", r.json["duration_ms"]);
    ensure!(count(&api, "big").await? == 100_000, "SELECT COUNT(*) after 100k");
    ensure!(rows(&api, "SELECT label, n FROM big WHERE id = 99999").await? == vec![json!(["row-99999", 24999.75])], "last row");

    documents(&api).await?;
    kv(&api).await?;
    Ok(())
}

async fn documents(api: &Http) -> Result<()> {
    let schema = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}});
    api.post("/api/v1/documents/collections", &json!({"name": "imported", "schema": schema})).await?.ensure_status(201)?;
    let docs: Vec<Value> = (0..600).map(|i| json!({"name": format!("doc-{i}"), "n": i, "tags": ["t", i % 3]})).collect();
    let r = api.post(IMPORT_DOCS, &json!({"collection": "imported", "documents": docs, "batch_size": 250})).await?.ensure_status(200)?;
    ensure!(r.json["success"] == json!(true) && r.json["rows_imported"] == json!(600), "document import: {r}");
    let ids: Vec<String> =
        r.json["ids"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
    ensure!(ids.len() == 600 && ids.iter().collect::<BTreeSet<_>>().len() == 600, "600 distinct ids");
    let mut groups = BTreeSet::new();
    for (i, id) in ids.iter().enumerate().step_by(37) {
        let g = api.get(&format!("/api/v1/documents/collections/imported/documents/{id}")).await?.ensure_status(200)?;
        ensure!(g.json["data"]["n"] == json!(i) && g.json["data"]["name"] == json!(format!("doc-{i}")), "doc {i}: {g}");
        groups.insert(g.group());
    }
    ensure!(groups.len() > 1, "documents spread over several shards: {groups:?}");
    let q = api.post("/api/v1/documents/collections/imported/query", &json!({"filter": {"n": {"$gte": 0}}})).await?.ensure_status(200)?;
    ensure!(q.json["total_matched"] == json!(600), "600 documents found: {}", q.json["total_matched"]);

    // A schema violation at index 3: reported by index, nothing written.
    let bad = vec![json!({"name": "a"}), json!({"name": "b"}), json!({"name": "c"}), json!({"name": 4}), json!({"name": "e"})];
    let r = api.post(IMPORT_DOCS, &json!({"collection": "imported", "documents": bad})).await?;
    ensure!(r.status == 400 && r.json["errors"][0]["index"] == json!(3) && r.json["rows_imported"] == json!(0), "schema violation: {r}");
    let r = api.post(IMPORT_DOCS, &json!({"collection": "imported", "documents": [{"name": "ok"}, 7]})).await?;
    ensure!(r.status == 400 && r.json["errors"][0]["index"] == json!(1), "non-object document: {r}");
    let q = api.post("/api/v1/documents/collections/imported/query", &json!({"filter": {}})).await?.ensure_status(200)?;
    ensure!(q.json["total_matched"] == json!(600), "still 600 documents: {}", q.json["total_matched"]);

    // A missing collection is created, as an insert does.
    let r = api.post(IMPORT_DOCS, &json!({"collection": "fresh", "documents": [{"a": 1}, {"a": 2}]})).await?.ensure_status(200)?;
    ensure!(r.json["rows_imported"] == json!(2), "fresh collection: {r}");
    for body in [json!({"documents": []}), json!({"collection": "bad/name", "documents": []}), json!({"collection": "x", "documents": {}})]
    {
        let r = api.post(IMPORT_DOCS, &body).await?;
        ensure!(r.status == 400, "bad document import body {body}: {r}");
    }
    Ok(())
}

async fn kv(api: &Http) -> Result<()> {
    let pairs: Vec<Value> = (0..700).map(|i| json!({"key": format!("imp/k{i:04}"), "value": {"i": i}})).collect();
    let r = api.post(IMPORT_KV, &json!({"pairs": pairs, "batch_size": 200})).await?.ensure_status(200)?;
    ensure!(r.json["success"] == json!(true) && r.json["rows_imported"] == json!(700), "kv import: {r}");
    ensure!(api.kv_count("imp/").await? == 700, "700 keys");
    let mut groups = BTreeSet::new();
    for i in (0..700).step_by(53) {
        let g = api.kv_get(&format!("imp/k{i:04}")).await?.ensure_status(200)?;
        ensure!(g.json["value"] == json!({"i": i}), "kv value {i}: {g}");
        groups.insert(g.group());
    }
    ensure!(groups.len() > 1, "pairs spread over several shards: {groups:?}");
    // An empty key at index 2: nothing of the request is written.
    let bad = json!({"pairs": [{"key": "bad/a", "value": 1}, {"key": "bad/b", "value": 2}, {"key": "", "value": 3}]});
    let r = api.post(IMPORT_KV, &bad).await?;
    ensure!(r.status == 400 && r.json["errors"][0]["index"] == json!(2), "bad key: {r}");
    ensure!(api.kv_count("bad/").await? == 0, "nothing written");
    for body in [json!({}), json!({"pairs": [{"key": "x"}]}), json!({"pairs": "x"})] {
        let r = api.post(IMPORT_KV, &body).await?;
        ensure!(r.status == 400, "bad kv import body {body}: {r}");
    }
    Ok(())
}
