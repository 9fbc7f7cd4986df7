//! Scenario: a data subject has records in every store of a cluster of four
//! shards: key-value entries, a document, a SQL row, a graph node with an
//! edge, an object, a vector record, a time-series series tagged with the
//! subject and stream events. The export finds each of them; an erasure whose
//! job started (it records what it found, not the data) and then lost two of
//! the three nodes answers 503 naming the job and what is pending, and issues
//! no certificate; once the nodes are back the same request finishes the job
//! and returns a signed certificate counting each store's items;
//! the export then finds nothing, another subject's records stay, the stream
//! keeps its ids with the erased events' data removed, the vector search and
//! the time-series query no longer return the subject, and the certificate
//! verifies.

use std::time::Duration;

use anyhow::{Result, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json, wait_for};

const C: &str = "/api/v1/compliance";
const SUBJECT: &str = "subj-7f3e";
const OTHER: &str = "subj-0b2d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_is_erased_from_every_store_and_a_failed_erasure_finishes_on_retry() {
    let options = ClusterOptions {
        shard_count: 4,
        // Uncompressed files: a marker is in them as plain bytes wherever it is stored.
        node_env: vec![("SERVICE_STORAGE_COMPRESSION".into(), "none".into())],
        router_env: vec![
            ("SERVICE_COMPLIANCE_ENABLED".into(), "true".into()),
            // A group without quorum is given up after 5 s (the erasure answers 503).
            ("SERVICE_SERVER__REQUEST_TIMEOUT".into(), "5".into()),
            // Time to kill nodes between the job's start and its erasing.
            ("TESSERA_TEST_ERASURE_PAUSE_MS".into(), "3000".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("erasure scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

/// One subject's records in every store (`who` in every subject field,
/// `mark` in a field of each record's data).
async fn seed(api: &Http, who: &str, mark: &str) -> Result<()> {
    for i in 0..6 {
        api.kv_put(&format!("orders/{who}-{i}"), json!({"customer_id": who, "n": i, "note": format!("{mark}-kv")}), None)
            .await?
            .ensure_status(200)?;
    }
    api.kv_put(&format!("profile:{who}"), json!({"plan": "pro"}), None).await?.ensure_status(200)?;
    api.post(
        "/api/v1/documents/collections/patients/documents",
        &json!({"id": format!("doc-{who}"), "document": {"patient_id": who, "note": format!("{mark}-doc")}}),
    )
    .await?
    .ensure_status(201)?;
    api.post("/api/v1/query", &json!({"sql": format!("INSERT INTO payments VALUES ('{who}-p', '{who}', 12.5, '{mark}-sql')")}))
        .await?
        .ensure_status(200)?;
    api.post(
        "/api/v1/graph/nodes",
        &json!({"graph": "social", "id": who, "label": "User", "properties": {"note": format!("{mark}-node")}}),
    )
    .await?
    .ensure_status(201)?;
    api.post("/api/v1/graph/edges", &json!({"graph": "social", "from_node": who, "to_node": "shop", "label": "BUYS"}))
        .await?
        .ensure_status(201)?;
    let meta = json!({"user_id": who}).to_string();
    api.clone()
        .header("X-Service-Meta", &meta)
        .send(
            Method::PUT,
            &format!("/api/v1/objects/buckets/avatars/object/img/{who}.png"),
            Some(format!("png bytes {mark}-object").into_bytes()),
            Some("image/png"),
        )
        .await?
        .ensure_status(200)?;
    api.post(
        "/api/v1/vector/collections/faces/upsert",
        &json!({"id": format!("face-{who}"), "vector": vector_of(who), "metadata": {"user_id": who, "note": format!("{mark}-vector")}}),
    )
    .await?
    .ensure_status(200)?;
    let points: Vec<_> = (0..5).map(|i| json!({"timestamp": 1_700_000_000_000i64 + i * 1000, "value": 60 + i, "tags": {"patient_id": who, "ward": format!("{mark}-ts")}})).collect();
    api.post("/api/v1/timeseries/write", &json!({"metric": "heart.rate", "points": points})).await?.ensure_status(200)?;
    for step in ["signup", "checkout"] {
        api.post(
            "/api/v1/streaming/publish",
            &json!({"channel": "activity", "event_type": step, "data": {"user_id": who, "step": step, "note": format!("{mark}-stream")}}),
        )
        .await?
        .ensure_status(200)?;
    }
    Ok(())
}

/// Each subject's own vector (its bytes are looked for on disk).
fn vector_of(who: &str) -> [f32; 4] {
    if who == SUBJECT { [0.123_456_7, 0.765_432_1, 0.314_159_2, 0.271_828_1] } else { [0.5, 0.6, 0.7, 0.8] }
}

/// A vector as the node stores it: little-endian `f32`s.
fn vector_bytes(v: [f32; 4]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

async fn export(api: &Http, who: &str) -> Result<Resp> {
    api.post(&format!("{C}/export"), &json!({"subject_id": who})).await?.ensure_status(200)
}

fn store_counts(export: &Resp) -> Vec<(String, usize)> {
    ["kv", "document", "sql", "graph", "object", "vector", "timeseries", "stream"]
        .iter()
        .map(|s| (s.to_string(), export.json["data"][s].as_array().map_or(0, Vec::len)))
        .collect()
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.post("/api/v1/documents/collections", &json!({"name": "patients"})).await?.ensure_status(201)?;
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE payments (id TEXT PRIMARY KEY, user_id TEXT, amount FLOAT, note TEXT)"}))
        .await?
        .ensure_status(200)?;
    api.post("/api/v1/graph/nodes", &json!({"graph": "social", "id": "shop", "label": "Shop"})).await?.ensure_status(201)?;
    api.post("/api/v1/objects/buckets", &json!({"name": "avatars"})).await?.ensure_status(201)?;
    api.post("/api/v1/vector/collections", &json!({"name": "faces", "dim": 4, "metric": "cosine"})).await?.ensure_status(201)?;
    api.post("/api/v1/streaming/channels", &json!({"name": "activity"})).await?.ensure_status(201)?;
    // Markers unique to this run: each store's record of the subject carries one.
    let run = format!("{:08x}", std::process::id() ^ (tessera_api::command::now_ms() as u32));
    let (mark, other_mark) = (format!("ERASE-ME-{run}"), format!("KEEP-ME-{run}"));
    seed(&api, SUBJECT, &mark).await?;
    seed(&api, OTHER, &other_mark).await?;

    // Every store holds the subject: 7 entries, a document, a row, a node and
    // its edge, an object, a vector, a series, 2 events.
    let before = export(&api, SUBJECT).await?;
    let counts = store_counts(&before);
    let expected: Vec<(String, usize)> =
        [("kv", 7), ("document", 1), ("sql", 1), ("graph", 2), ("object", 1), ("vector", 1), ("timeseries", 1), ("stream", 2)]
            .iter()
            .map(|(s, n)| (s.to_string(), *n))
            .collect();
    ensure!(counts == expected, "export before the erasure: {counts:?}\n{before}");
    let series = &before.json["data"]["timeseries"][0]["data"];
    ensure!(series["points"].as_array().map_or(0, Vec::len) == 5, "the export carries the series' points: {series}");

    // The erasure starts (its job records what it found), then two nodes die
    // before it erases: no group has a quorum. It answers 503 naming the job
    // and what is pending, and issues no certificate.
    let erase = || {
        let body = serde_json::to_vec(&json!({"requestor": "dpo", "reason": "article 17", "secure_erase": true})).unwrap();
        let api = api.timeout(Duration::from_secs(90));
        async move { api.send(Method::DELETE, &format!("{C}/data-subject/{SUBJECT}"), Some(body), Some("application/json")).await }
    };
    let first = tokio::spawn(erase());
    let job = wait_for(Duration::from_secs(30), "the erasure job is recorded", async || {
        let r = api.get(&format!("{C}/erasure-jobs")).await?.ensure_status(200)?;
        Ok(r.json["jobs"].as_array().and_then(|j| j.first().cloned()))
    })
    .await?;
    ensure!(job["state"] == "running" && job["total_items"] == 16 && job["subject_id"] == SUBJECT, "{job}");
    ensure!(!job.to_string().contains("checkout"), "the job keeps where the items are, not their data: {job}");
    c.kill_node(2)?;
    c.kill_node(3)?;
    let failed = first.await??;
    ensure!(failed.status == 503 && failed.text.contains("pending") && failed.text.contains("send the same request again"), "{failed}");
    ensure!(failed.text.contains(job["id"].as_str().unwrap_or("?")), "the answer names the job: {failed}");
    c.start_node(2)?;
    c.start_node(3)?;
    c.wait_ready().await?;
    let certificates = wait_for(Duration::from_secs(60), "the certificates list answers", async || {
        let r = api.get(&format!("{C}/certificates")).await?;
        Ok((r.status == 200).then_some(r))
    })
    .await?;
    ensure!(certificates.json["total_count"] == 0, "a failed erasure issued a certificate: {certificates}");

    // The same request again finishes it.
    let erased = wait_for(Duration::from_secs(60), "the erasure completes", async || {
        let r = erase().await?;
        Ok((r.status == 200).then_some(r))
    })
    .await?;
    let cert = &erased.json["certificate"];
    let by_store = &cert["items_by_store"];
    for (store, n) in &expected {
        ensure!(by_store[store] == json!(n), "certificate counts {store}: {cert}");
    }
    ensure!(cert["total_items"] == json!(16) && cert["secure_erase_performed"] == true, "{cert}");

    let after = export(&api, SUBJECT).await?;
    ensure!(after.json["total_items"] == 0, "the export finds nothing after the erasure: {after}");
    let other = store_counts(&export(&api, OTHER).await?);
    ensure!(other == expected, "another subject's records stay: {other:?}");

    // The stream keeps its ids; the erased events carry no data any more.
    let history = api.get("/api/v1/streaming/channels/activity/history").await?.ensure_status(200)?;
    let events = history.json["events"].as_array().cloned().unwrap_or_default();
    let ids: Vec<u64> = events.iter().filter_map(|e| e["id"].as_u64()).collect();
    ensure!(ids == [1, 2, 3, 4], "ids stay dense: {history}");
    ensure!(events[..2].iter().all(|e| e["data"].is_null()) && events[2]["data"]["user_id"] == OTHER, "{history}");
    // The vector search and the time-series query no longer return the subject.
    let hits =
        api.post("/api/v1/vector/collections/faces/search", &json!({"vector": [0.1, 0.2, 0.3, 0.4], "k": 10})).await?.ensure_status(200)?;
    ensure!(!hits.text.contains(SUBJECT) && hits.text.contains(OTHER), "{hits}");
    let q = json!({"metric": "heart.rate", "start": 0, "end": 1_800_000_000_000i64, "tags": {"patient_id": SUBJECT}});
    let points = api.post("/api/v1/timeseries/query", &q).await?.ensure_status(200)?;
    ensure!(points.json["total_points"] == 0, "{points}");
    let object = api.get(&format!("/api/v1/objects/buckets/avatars/object/img/{SUBJECT}.png")).await?;
    ensure!(object.status == 404, "{object}");

    let job_now = api.get(&format!("{C}/erasure-jobs/{}", job["id"].as_str().unwrap_or_default())).await?.ensure_status(200)?;
    ensure!(job_now.json["state"] == "complete" && job_now.json["certificate_id"] == cert["id"], "{job_now}");
    // (The failed attempt could not record itself: the meta group had no quorum either.)
    ensure!(job_now.json["attempts"].as_u64().is_some_and(|n| n >= 1), "{job_now}");
    // secure_erase: no node's data directory holds a marker of the erased
    // records (log, SSTs, WAL, snapshots); the other subject's are still
    // there, so the scan sees plaintext where it exists.
    for store in ["kv", "doc", "sql", "node", "object", "vector", "ts", "stream"] {
        let marker = format!("{mark}-{store}");
        let mut found = Vec::new();
        for id in 1..=3 {
            found.extend(tessera_tests::files_containing(&c.node_data_dir(id)?, marker.as_bytes())?);
        }
        ensure!(found.is_empty(), "the erased {store} marker is still on disk in {found:?}");
    }
    // The erased record's vector is gone too (the index's node log included).
    let mut found = Vec::new();
    for id in 1..=3 {
        found.extend(tessera_tests::files_containing(&c.node_data_dir(id)?, &vector_bytes(vector_of(SUBJECT)))?);
    }
    ensure!(found.is_empty(), "the erased vector's values are still on disk in {found:?}");
    let kept = tessera_tests::files_containing(&c.node_data_dir(1)?, &vector_bytes(vector_of(OTHER)))?;
    ensure!(!kept.is_empty(), "the other subject's vector is on disk");
    for store in ["kv", "doc", "sql", "node", "object", "vector", "ts", "stream"] {
        let kept = tessera_tests::files_containing(&c.node_data_dir(1)?, format!("{other_mark}-{store}").as_bytes())?;
        ensure!(!kept.is_empty(), "the other subject's {store} marker is on disk (the scan sees plaintext)");
    }

    let id = cert["id"].as_str().unwrap_or_default();
    let verified = api.get(&format!("{C}/certificates/{id}/verify")).await?.ensure_status(200)?;
    ensure!(verified.json["valid"] == true, "{verified}");
    Ok(())
}
