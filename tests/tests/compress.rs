//! Scenario: `POST /api/v1/admin/compress` on a three-node cluster — time-series
//! points of past days and documents are written, compressed through Raft, and
//! the report shows real work (fewer stored bytes); every point and document
//! reads back identical before and after, writes into compressed data behave
//! as before, replicas agree, and everything survives a full restart.

use std::time::Duration;

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Value, json, wait_until};

const COMPRESS: &str = "/api/v1/admin/compress";
const DAY: i64 = 86_400_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("compress scenario failed: {e:?}");
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Every point of the metric, per series, in a stable order.
async fn points(api: &Http) -> Result<Value> {
    let r = api.post("/api/v1/timeseries/query", &json!({"metric": "temp", "start": 0})).await?.ensure_status(200)?;
    let mut series = r.json["series"].as_array().cloned().unwrap_or_default();
    series.sort_by_key(|s| s["tags"].to_string());
    Ok(json!(series))
}

/// Every document of the collection, by id.
async fn documents(api: &Http) -> Result<Value> {
    let r = api.post("/api/v1/documents/collections/cold/query", &json!({"filter": {}})).await?.ensure_status(200)?;
    let mut docs = r.json["documents"].as_array().cloned().unwrap_or_default();
    docs.sort_by_key(|d| d["id"].as_str().unwrap_or("").to_string());
    Ok(json!(docs))
}

async fn metric_stats(api: &Http) -> Result<Value> {
    Ok(api.get("/api/v1/timeseries/metrics/temp").await?.ensure_status(200)?.json)
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.timeout(Duration::from_secs(300));
    // Two series, one point a minute over the two whole days before yesterday
    // (48 hourly chunks each), plus a few points now (hot, never sealed).
    let day0 = (now_ms() / DAY - 3) * DAY;
    for host in ["a", "b"] {
        let pts: Vec<Value> = (0..2 * 24 * 60)
            .map(|i| {
                let v = if host == "a" { 20.0 + ((i % 37) as f64) * 0.25 } else { (i / 60) as f64 };
                json!({"timestamp": day0 + i * 60_000, "value": v, "tags": {"host": host}})
            })
            .collect();
        api.post("/api/v1/timeseries/write", &json!({"metric": "temp", "points": pts})).await?.ensure_status(200)?;
    }
    let hot = json!({"metric": "temp", "points": [{"timestamp": "now", "value": 1.5, "tags": {"host": "a"}}]});
    api.post("/api/v1/timeseries/write", &hot).await?.ensure_status(200)?;

    let schema = json!({"type": "object", "required": ["name"]});
    api.post("/api/v1/documents/collections", &json!({"name": "cold", "schema": schema})).await?.ensure_status(201)?;
    api.post("/api/v1/documents/collections/cold/indexes", &json!({"field": "kind"})).await?;
    let docs: Vec<Value> = (0..300)
        .map(|i| {
            let kind = ["red", "green", "blue"][i % 3];
            json!({"name": format!("document number {i}"), "kind": kind, "n": i,
                   "text": "lorem ipsum dolor sit amet, consectetur adipiscing elit ".repeat(1 + i % 4),
                   "nested": {"a": [1, 2, 3], "b": {"c": i as f64 / 8.0}}})
        })
        .collect();
    let r = api.post("/api/v1/import/documents", &json!({"collection": "cold", "documents": docs})).await?.ensure_status(200)?;
    let ids: Vec<String> =
        r.json["ids"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
    ensure!(ids.len() == 300, "300 ids: {r}");

    let points_before = points(&api).await?;
    let docs_before = documents(&api).await?;
    ensure!(docs_before.as_array().map(Vec::len) == Some(300), "300 documents before");
    let stats_before = metric_stats(&api).await?;
    ensure!(stats_before["points"] == json!(2 * 2 * 24 * 60 + 1), "points before: {stats_before}");

    // Bad requests and access.
    let r = api.post(COMPRESS, &json!({"older_than": "soon"})).await?;
    ensure!(r.status == 400, "bad older_than: {r}");
    let r = api.post(COMPRESS, &json!({"bogus": 1})).await?;
    ensure!(r.status == 400, "unknown field: {r}");
    let r = api.anonymous().post(COMPRESS, &json!({})).await?;
    ensure!(r.status == 401, "anonymous compress: {r}");

    // Compress everything cold (documents written up to now, days that ended).
    let r = api.post(COMPRESS, &json!({"older_than": "0s"})).await?.ensure_status(200)?;
    eprintln!("[compress] {}", r.json);
    let ts = &r.json["timeseries"];
    ensure!(ts["series_compacted"] == json!(2) && ts["blocks_merged"] == json!(2 * 48), "time-series work: {}", r.json);
    let (tb, ta) = (ts["bytes_before"].as_u64().unwrap_or(0), ts["bytes_after"].as_u64().unwrap_or(u64::MAX));
    ensure!(ta < tb, "time-series bytes shrink: {}", r.json);
    let d = &r.json["documents"];
    ensure!(d["documents_compressed"] == json!(300) && d["collections"] == json!(1), "document work: {}", r.json);
    let (db, da) = (d["bytes_before"].as_u64().unwrap_or(0), d["bytes_after"].as_u64().unwrap_or(u64::MAX));
    ensure!(da < db, "document bytes shrink: {}", r.json);
    ensure!(r.json["duration_ms"].is_u64(), "duration: {}", r.json);

    ensure!(points(&api).await? == points_before, "points identical after compress");
    ensure!(documents(&api).await? == docs_before, "documents identical after compress");
    let stats = metric_stats(&api).await?;
    ensure!(stats["points"] == stats_before["points"], "point count kept: {stats}");
    ensure!(stats["bytes"].as_u64() < stats_before["bytes"].as_u64(), "stored bytes shrink: {stats} vs {stats_before}");
    ensure!(stats["chunks"].as_u64() < stats_before["chunks"].as_u64(), "fewer chunks: {stats}");
    // Every replica holds the same data (the work was a replicated command).
    for node in [1u64, 2, 3] {
        let one = api.consistency("one").replica(node);
        let want = docs_before.clone();
        wait_until(Duration::from_secs(30), &format!("node {node} serves the same documents"), async || {
            documents(&one).await.is_ok_and(|d| d == want)
        })
        .await?;
    }
    // A second run finds nothing more to do.
    let r = api.post(COMPRESS, &json!({"older_than": "0s"})).await?.ensure_status(200)?;
    ensure!(r.json["timeseries"]["blocks_merged"] == json!(0), "idempotent ts: {}", r.json);
    ensure!(r.json["documents"]["documents_compressed"] == json!(0), "idempotent documents: {}", r.json);

    // Indexed queries still find compressed documents; writes to them work.
    let red = api.post("/api/v1/documents/collections/cold/query", &json!({"filter": {"kind": "red"}})).await?.ensure_status(200)?;
    ensure!(red.json["total_matched"] == json!(100), "red documents: {}", red.json["total_matched"]);
    let id = &ids[4];
    let u = api
        .post(&format!("/api/v1/documents/collections/cold/documents/{id}/update"), &json!({"$set": {"n": -4}}))
        .await?
        .ensure_status(200)?;
    ensure!(u.json["data"]["n"] == json!(-4) && u.json["data"]["kind"] == json!("green"), "update of a compressed document: {u}");
    // A point overwritten inside a sealed day, and one added to it.
    let w = json!({"metric": "temp", "points": [
        {"timestamp": day0 + 60_000, "value": -1.0, "tags": {"host": "a"}},
        {"timestamp": day0 + 30_000, "value": -2.0, "tags": {"host": "a"}}]});
    api.post("/api/v1/timeseries/write", &w).await?.ensure_status(200)?;
    let r = api
        .post("/api/v1/timeseries/query", &json!({"metric": "temp", "tags": {"host": "a"}, "start": day0, "end": day0 + 120_000}))
        .await?
        .ensure_status(200)?;
    let vals: Vec<f64> =
        r.json["series"][0]["points"].as_array().map(|p| p.iter().filter_map(|p| p["value"].as_f64()).collect()).unwrap_or_default();
    ensure!(vals == vec![20.0, -2.0, -1.0, 20.5], "points of a sealed day after writes: {vals:?}");
    // A range starting inside a sealed day still finds its points.
    let r = api
        .post(
            "/api/v1/timeseries/query",
            &json!({"metric": "temp", "tags": {"host": "b"}, "start": day0 + 5 * 3_600_000, "end": day0 + 5 * 3_600_000 + 120_000}),
        )
        .await?
        .ensure_status(200)?;
    ensure!(r.json["total_points"] == json!(3), "mid-day range: {r}");

    // Full restart: the compressed forms are read back from disk.
    let points_after = points(&api).await?;
    let docs_after = documents(&api).await?;
    c.stop_all().await?;
    c.start_all().await?;
    c.login().await?;
    let api = c.http.timeout(Duration::from_secs(300));
    ensure!(points(&api).await? == points_after, "points identical after restart");
    ensure!(documents(&api).await? == docs_after, "documents identical after restart");
    Ok(())
}
