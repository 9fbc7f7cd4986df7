//! Scenario: the time-series model end to end through the router — metrics,
//! batched writes of two tagged series, raw range + tag-filtered queries, every
//! aggregate function against values computed here, downsampling, rolling
//! windows, bad input, retention (drop and downsample) enforced through the
//! leader, compression statistics, the `max_result_rows` cut (a second router
//! with a small cap), a SIGKILLed group leader under writes (acknowledged points
//! all readable, the restarted node catches up and answers locally), and data
//! that survives a full restart.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use reqwest::Method;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, HDR_GROUP, HDR_NODE, Http, Value, json, wait_for};

const M: &str = "/api/v1/timeseries/metrics";
const W: &str = "/api/v1/timeseries/write";
const Q: &str = "/api/v1/timeseries/query";
/// 2023-11-14T22:00:00Z, hour aligned.
const BASE: i64 = 1_699_999_200_000;
const N: i64 = 240;
const STEP: i64 = 30_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeseries() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("timeseries scenario failed: {e:?}");
    }
}

fn val_a(i: i64) -> f64 {
    ((50.0 + 10.0 * (i as f64 / 7.0).sin()) * 100.0).round() / 100.0
}

fn val_b(i: i64) -> f64 {
    i as f64 * 1.5
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * (1.0 + a.abs().max(b.abs()))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// (tags, [(timestamp string, value)]) of every series of a query answer.
fn series(r: &Value) -> Vec<(Value, Vec<(String, f64)>)> {
    r["series"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let pts = s["points"]
                        .as_array()
                        .map(|p| {
                            p.iter()
                                .map(|p| (p["timestamp"].as_str().unwrap_or("").to_string(), p["value"].as_f64().unwrap_or(f64::NAN)))
                                .collect()
                        })
                        .unwrap_or_default();
                    (s["tags"].clone(), pts)
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn query(api: &Http, body: Value) -> Result<Vec<(Value, Vec<(String, f64)>)>> {
    let r = api.post(Q, &body).await?.ensure_status(200)?;
    ensure!(r.json["total_points"].is_u64() && r.json["execution_time_ms"].is_u64(), "query shape: {r}");
    Ok(series(&r.json))
}

/// Values of one series' aggregate over host=a, whole range.
async fn agg_a(api: &Http, aggregation: Value) -> Result<Vec<(String, f64)>> {
    let s = query(api, json!({"metric": "cpu.usage", "tags": {"host": "a"}, "aggregation": aggregation})).await?;
    ensure!(s.len() == 1, "one series expected for {aggregation}: {s:?}");
    Ok(s[0].1.clone())
}

async fn metric(api: &Http, name: &str) -> Result<Value> {
    Ok(api.get(&format!("{M}/{name}")).await?.ensure_status(200)?.json)
}

async fn put_json(api: &Http, path: &str, body: Value) -> Result<tessera_tests::Resp> {
    api.send(Method::PUT, path, Some(serde_json::to_vec(&body)?), Some("application/json")).await
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    metrics_are_created_once(&api).await?;
    batched_writes_store_two_series(&api).await?;
    raw_queries_filter_by_time_range_and_tags(&api).await?;
    every_aggregate_matches_values_computed_here(&api).await?;
    downsampling_averages_and_maxes_buckets(&api).await?;
    rolling_windows_sum_the_trailing_points(&api).await?;
    bad_input_is_refused(&api).await?;
    the_same_timestamp_overwrites(&api).await?;
    let m = statistics_count_points_and_compressed_bytes(&api).await?;
    retention_drops_and_downsamples_old_points(&api).await?;

    max_result_rows(c, &api).await?;
    let acked = leader_kill(c, &api).await?;

    everything_survives_a_full_restart(c, &m, &acked).await
}

/// Metrics: create, conflict, bad name, list.
async fn metrics_are_created_once(api: &Http) -> Result<()> {
    api.post(M, &json!({"name": "cpu.usage", "metric_type": "gauge", "description": "CPU", "unit": "percent"}))
        .await?
        .ensure_status(201)?;
    let r = api.post(M, &json!({"name": "cpu.usage", "metric_type": "gauge", "description": "", "unit": ""})).await?;
    ensure!(r.status == 409, "existing metric: {r}");
    api.post(M, &json!({"name": "bad name/x"})).await?.ensure_client_error()?;
    Ok(())
}

/// Batched writes: 60 points per request, both series in each request.
async fn batched_writes_store_two_series(api: &Http) -> Result<()> {
    for batch in 0..(N / 30) {
        let mut points = Vec::new();
        for i in batch * 30..(batch + 1) * 30 {
            points.push(json!({"timestamp": BASE + i * STEP, "value": val_a(i), "tags": {"host": "a", "region": "eu"}}));
            points.push(json!({"timestamp": BASE + i * STEP, "value": val_b(i), "tags": {"region": "eu", "host": "b"}}));
        }
        let r = api.post(W, &json!({"metric": "cpu.usage", "points": points})).await?.ensure_status(200)?;
        ensure!(r.json["points_written"] == json!(60), "write: {r}");
    }
    Ok(())
}

/// Raw query with a time range (inclusive) and a tag filter.
async fn raw_queries_filter_by_time_range_and_tags(api: &Http) -> Result<()> {
    let s = query(api, json!({"metric": "cpu.usage", "start": "2023-11-14T22:10:00Z", "end": BASE + 20 * 60_000, "tags": {"host": "a"}}))
        .await?;
    ensure!(s.len() == 1 && s[0].0 == json!({"host": "a", "region": "eu"}), "filtered series: {s:?}");
    let pts = &s[0].1;
    ensure!(pts.len() == 21, "21 points in [10m, 20m], got {}", pts.len());
    ensure!(pts[0].0 == "2023-11-14T22:10:00.000Z" && pts[20].0 == "2023-11-14T22:20:00.000Z", "timestamps {pts:?}");
    for (k, (_, v)) in pts.iter().enumerate() {
        ensure!(close(*v, val_a(20 + k as i64)), "raw value {k}: {v}");
    }
    let s = query(api, json!({"metric": "cpu.usage", "start_time": BASE, "end_time": BASE + 3_600_000, "tags": {"region": "eu"}})).await?;
    ensure!(s.len() == 2 && s.iter().all(|x| x.1.len() == 121), "both series over the first hour: {}", s.len());
    let s = query(api, json!({"metric": "cpu.usage", "tags": {"host": "zzz"}})).await?;
    ensure!(s.is_empty(), "no series for host=zzz");
    Ok(())
}

/// Every aggregate function, whole range, against values computed here.
async fn every_aggregate_matches_values_computed_here(api: &Http) -> Result<()> {
    let a: Vec<f64> = (0..N).map(val_a).collect();
    let n = a.len() as f64;
    let mean = a.iter().sum::<f64>() / n;
    let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let mut sorted = a.clone();
    sorted.sort_by(f64::total_cmp);
    let expected = [
        ("avg", mean),
        ("SUM", a.iter().sum()),
        ("min", sorted[0]),
        ("MAX", sorted[sorted.len() - 1]),
        ("count", n),
        ("first", a[0]),
        ("last", a[a.len() - 1]),
        ("stddev", var.sqrt()),
        ("variance", var),
        ("percentile_50", percentile(&sorted, 50.0)),
        ("percentile_90", percentile(&sorted, 90.0)),
        ("PERCENTILE_99", percentile(&sorted, 99.0)),
    ];
    for (f, want) in expected {
        let got = agg_a(api, json!({"function": f})).await?;
        ensure!(got.len() == 1 && close(got[0].1, want), "{f}: got {got:?}, want {want}");
    }
    Ok(())
}

/// Downsampling, both forms: 10 minute averages and hourly max of host=b.
async fn downsampling_averages_and_maxes_buckets(api: &Http) -> Result<()> {
    let s = query(
        api,
        json!({"metric": "cpu.usage", "tags": {"host": "b"}, "aggregation": {"type": "downsample", "interval": "10m", "function": "avg"}}),
    )
    .await?;
    let d = &s[0].1;
    ensure!(d.len() == 12, "12 buckets of 10m, got {}", d.len());
    for (k, (_, v)) in d.iter().enumerate() {
        let k = k as i64;
        let want = (k * 20..(k + 1) * 20).map(val_b).sum::<f64>() / 20.0;
        ensure!(close(*v, want), "bucket {k}: {v} vs {want}");
    }
    ensure!(d[1].0 == "2023-11-14T22:10:00.000Z", "bucket start {}", d[1].0);
    let s = query(api, json!({"metric": "cpu.usage", "tags": {"host": "b"}, "aggregation": {"function": "max", "interval": "1h"}})).await?;
    ensure!(s[0].1.len() == 2 && close(s[0].1[0].1, val_b(119)) && close(s[0].1[1].1, val_b(239)), "hourly max {:?}", s[0].1);
    Ok(())
}

/// Rolling window: trailing 2 minutes (4 points) sum over host=b.
async fn rolling_windows_sum_the_trailing_points(api: &Http) -> Result<()> {
    let s = query(
        api,
        json!({"metric": "cpu.usage", "tags": {"host": "b"}, "aggregation": {"type": "rolling", "window": "2m", "function": "sum"}}),
    )
    .await?;
    let r = &s[0].1;
    ensure!(r.len() == N as usize, "one rolling value per point");
    for (i, (_, v)) in r.iter().enumerate() {
        let i = i as i64;
        let want: f64 = ((i - 3).max(0)..=i).map(val_b).sum();
        ensure!(close(*v, want), "rolling {i}: {v} vs {want}");
    }
    Ok(())
}

/// Bad input: durations, timestamps, functions, unknown metric, bad points.
async fn bad_input_is_refused(api: &Http) -> Result<()> {
    for body in [
        json!({"metric": "cpu.usage", "aggregation": {"function": "avg", "interval": "5x"}}),
        json!({"metric": "cpu.usage", "aggregation": {"function": "median2"}}),
        json!({"metric": "cpu.usage", "start": "yesterday-ish"}),
        json!({"metric": "cpu.usage", "end": true}),
    ] {
        let r = api.post(Q, &body).await?;
        ensure!(r.status == 400, "{body} → {r}");
    }
    let r = api.post(Q, &json!({"metric": "no.such"})).await?;
    ensure!(r.status == 404, "unknown metric: {r}");
    let r = api.post(W, &json!({"metric": "cpu.usage", "points": [{"timestamp": "nope", "value": 1}]})).await?;
    ensure!(r.status == 400, "bad point timestamp: {r}");
    let r = api.post(W, &json!({"metric": "cpu.usage", "points": [{"timestamp": BASE, "value": "x"}]})).await?;
    ensure!(r.status == 400, "bad point value: {r}");
    Ok(())
}

/// Same timestamp overwrites.
async fn the_same_timestamp_overwrites(api: &Http) -> Result<()> {
    api.post(W, &json!({"metric": "cpu.usage", "points": [{"timestamp": BASE, "value": 999.0, "tags": {"host": "b", "region": "eu"}}]}))
        .await?
        .ensure_status(200)?;
    let s = query(api, json!({"metric": "cpu.usage", "tags": {"host": "b"}, "start": BASE, "end": BASE})).await?;
    ensure!(s[0].1.len() == 1 && close(s[0].1[0].1, 999.0), "overwrite: {s:?}");
    Ok(())
}

/// Statistics: points and compressed bytes; the metric is listed. Returns the
/// metric's statistics.
async fn statistics_count_points_and_compressed_bytes(api: &Http) -> Result<Value> {
    let m = metric(api, "cpu.usage").await?;
    ensure!(m["points"] == json!(2 * N) && m["series"] == json!(2), "stats {m}");
    let bytes = m["bytes"].as_u64().context("bytes")?;
    println!("cpu.usage: {} points in {bytes} bytes = {:.2} bytes/point", 2 * N, bytes as f64 / (2 * N) as f64);
    let list = api.get(M).await?.ensure_status(200)?;
    ensure!(list.json["metrics"].as_array().is_some_and(|a| a.iter().any(|m| m["name"] == "cpu.usage")), "list {list}");
    Ok(m)
}

/// Retention through the leader: old points are dropped (recent ones stay),
/// and old raw points are downsampled to 10 minute averages.
async fn retention_drops_and_downsamples_old_points(api: &Http) -> Result<()> {
    // Retention: drop. Old points (10 days ago) go, recent stay.
    let now = now_ms();
    let day = 86_400_000;
    let old: Vec<Value> = (0..50).map(|i| json!({"timestamp": now - 10 * day + i * 1000, "value": i})).collect();
    let recent: Vec<Value> = (0..5).map(|i| json!({"timestamp": now - 60_000 + i * 1000, "value": 100 + i})).collect();
    let r = api.post(W, &json!({"metric": "ret.drop", "points": old, "tags": {"k": "v"}})).await?.ensure_status(200)?;
    ensure!(r.json["metric_created"] == json!(true), "auto-create: {r}");
    api.post(W, &json!({"metric": "ret.drop", "points": recent, "tags": {"k": "v"}})).await?.ensure_status(200)?;
    let r = put_json(api, &format!("{M}/ret.drop/retention"), json!({"drop_after": "2x"})).await?;
    ensure!(r.status == 400, "bad retention: {r}");
    put_json(api, &format!("{M}/ret.drop/retention"), json!({"drop_after": "2d"})).await?.ensure_status(200)?;

    // Retention: downsample. One hour of 10 s points 5 days ago → 10 minute averages.
    let t0 = (now - 5 * day) / 3_600_000 * 3_600_000;
    let ds: Vec<Value> = (0..360).map(|i| json!({"timestamp": t0 + i * 10_000, "value": i})).collect();
    api.post(W, &json!({"metric": "ret.ds", "points": ds})).await?.ensure_status(200)?;
    put_json(
        api,
        &format!("{M}/ret.ds/retention"),
        json!({"drop_after": "30d", "downsample_after": "1d", "downsample_interval": "10m", "downsample_function": "avg"}),
    )
    .await?
    .ensure_status(200)?;

    let r = api.post("/api/v1/timeseries/retention/enforce", &json!({})).await?.ensure_status(200)?;
    ensure!(r.json["dropped_points"].as_u64() >= Some(50) && r.json["downsampled_chunks"].as_u64() >= Some(1), "enforce: {r}");
    let s = query(api, json!({"metric": "ret.drop"})).await?;
    ensure!(s.len() == 1 && s[0].1.len() == 5 && close(s[0].1[0].1, 100.0), "after drop: {s:?}");
    ensure!(metric(api, "ret.drop").await?["points"] == json!(5), "drop stats");
    let s = query(api, json!({"metric": "ret.ds"})).await?;
    let d = &s[0].1;
    ensure!(d.len() == 6, "6 downsampled points, got {d:?}");
    for (k, (_, v)) in d.iter().enumerate() {
        let want = (k * 60..(k + 1) * 60).sum::<usize>() as f64 / 60.0;
        ensure!(close(*v, want), "downsampled {k}: {v} vs {want}");
    }
    Ok(())
}

/// Restart keeps everything: the statistics `m` taken before, the data, the
/// downsampled points and every acknowledged failover point.
async fn everything_survives_a_full_restart(c: &mut Cluster, m: &Value, acked: &BTreeMap<(String, i64), f64>) -> Result<()> {
    c.stop_all().await?;
    c.start_all().await?;
    c.login().await?;
    let api = c.http.clone();
    let m2 = tessera_tests::wait_for(std::time::Duration::from_secs(30), "metric after restart", async || {
        Ok(metric(&api, "cpu.usage").await.ok())
    })
    .await?;
    ensure!(m2["points"] == m["points"] && m2["bytes"] == m["bytes"], "stats after restart {m2}");
    let s = query(&api, json!({"metric": "cpu.usage", "tags": {"host": "a"}})).await?;
    ensure!(s[0].1.len() == N as usize && close(s[0].1[5].1, val_a(5)), "data after restart");
    let s = query(&api, json!({"metric": "ret.ds"})).await?;
    ensure!(s[0].1.len() == 6, "downsampled after restart");
    wait_for(Duration::from_secs(30), "failover metric intact after the full restart", async || {
        fo_check(&api, acked, None).await.map(Some)
    })
    .await?;
    Ok(())
}

/// Queries through a second router started with `SERVICE_MAX_RESULT_ROWS=50`:
/// the answer is cut at 50 points and flagged; under the cap nothing is flagged.
async fn max_result_rows(c: &mut Cluster, api: &Http) -> Result<()> {
    let r = api.post(Q, &json!({"metric": "cpu.usage"})).await?.ensure_status(200)?;
    ensure!(r.json["truncated"] == json!(false) && r.json["total_points"] == json!(2 * N), "uncut answer: {}", r.json["total_points"]);
    let (idx, small) = c.start_router(&[("SERVICE_MAX_RESULT_ROWS", "50")]).await?;
    let small = small.login_as(ADMIN_USER, ADMIN_PASSWORD).await?;
    let r = small.post(Q, &json!({"metric": "cpu.usage"})).await?.ensure_status(200)?;
    ensure!(r.json["truncated"] == json!(true) && r.json["total_points"] == json!(50), "raw answer over the cap: {r}");
    let s = series(&r.json);
    ensure!(s.len() == 1 && s[0].1.len() == 50, "the first series' first 50 points: {s:?}");
    ensure!(s[0].1[0].0 == "2023-11-14T22:00:00.000Z" && close(s[0].1[49].1, val_a(49)), "cut points {:?}", s[0].1[49]);
    // Aggregated rows are computed over everything, then cut: 12 ten-minute
    // buckets per series, 24 rows, under the cap; 1-minute buckets are not.
    let r = small
        .post(Q, &json!({"metric": "cpu.usage", "aggregation": {"type": "downsample", "interval": "10m", "function": "count"}}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json["truncated"] == json!(false) && r.json["total_points"] == json!(24), "buckets under the cap: {r}");
    ensure!(series(&r.json).iter().all(|s| s.1.iter().all(|p| close(p.1, 20.0))), "every bucket counts 20: {r}");
    let r =
        small.post(Q, &json!({"metric": "cpu.usage", "aggregation": {"function": "avg", "interval": "1m"}})).await?.ensure_status(200)?;
    ensure!(r.json["truncated"] == json!(true) && r.json["total_points"] == json!(50), "buckets over the cap: {}", r.json["total_points"]);
    // Exactly at the cap is not truncated.
    let r = small.post(Q, &json!({"metric": "cpu.usage", "tags": {"host": "a"}, "end": BASE + 49 * STEP})).await?.ensure_status(200)?;
    ensure!(r.json["truncated"] == json!(false) && r.json["total_points"] == json!(50), "exactly 50: {r}");
    c.stop_router(idx).await?;
    Ok(())
}

const FO: &str = "ts.failover";
/// Batches the failover phase writes (and has acknowledged) after the kill.
const FO_BATCHES_AFTER_KILL: i64 = 10;

/// One 20-point batch of the failover metric (batch `b`, two series); returns
/// the node that served the write.
async fn fo_write(api: &Http, b: i64, acked: &mut BTreeMap<(String, i64), f64>) -> Result<(Option<u64>, Option<String>)> {
    let mut points = Vec::new();
    let mut batch = Vec::new();
    for i in 0..10 {
        let t = BASE + (b * 10 + i) * 1000;
        for host in ["x", "y"] {
            let v = (b * 10 + i) as f64 + if host == "y" { 0.5 } else { 0.0 };
            points.push(json!({"timestamp": t, "value": v, "tags": {"host": host}}));
            batch.push(((host.to_string(), t), v));
        }
    }
    let r = api.timeout(Duration::from_secs(5)).post(W, &json!({"metric": FO, "points": points})).await?;
    if r.status != 200 {
        return Err(anyhow!("write batch {b}: {r}"));
    }
    ensure!(r.json["points_written"] == json!(20), "write batch {b}: {r}");
    acked.extend(batch);
    Ok((r.served_by(), r.group()))
}

/// Every acknowledged point, read through `http`; `Err` names what is missing.
async fn fo_check(http: &Http, acked: &BTreeMap<(String, i64), f64>, node: Option<u64>) -> Result<()> {
    let r = http.timeout(Duration::from_secs(5)).post(Q, &json!({"metric": FO})).await?.ensure_status(200)?;
    if let Some(n) = node {
        ensure!(r.served_by() == Some(n), "answered by {:?}, not node {n}", r.header(HDR_NODE));
    }
    let mut found: BTreeMap<(String, i64), f64> = BTreeMap::new();
    for s in r.json["series"].as_array().context("series")? {
        let host = s["tags"]["host"].as_str().context("host tag")?.to_string();
        for p in s["points"].as_array().context("points")? {
            let ts = chrono_ms(p["timestamp"].as_str().context("timestamp")?)?;
            found.insert((host.clone(), ts), p["value"].as_f64().context("value")?);
        }
    }
    let missing: Vec<_> = acked.iter().filter(|(k, v)| found.get(*k).is_none_or(|f| !close(*f, **v))).collect();
    ensure!(missing.is_empty(), "{} of {} acknowledged points missing or wrong, e.g. {:?}", missing.len(), acked.len(), missing[0]);
    ensure!(found.len() == acked.len(), "{} points found, {} acknowledged", found.len(), acked.len());
    Ok(())
}

/// Milliseconds of an answer's `YYYY-MM-DDTHH:MM:SS.mmmZ` timestamp, relative
/// to `BASE`'s day (the failover points all fall on it).
fn chrono_ms(s: &str) -> Result<i64> {
    let day = s.get(..11).context("date")?;
    ensure!(day == "2023-11-14T", "unexpected day in {s}");
    let num = |a: usize, b: usize| -> Result<i64> { s.get(a..b).context("field")?.parse::<i64>().map_err(|e| anyhow!("{s}: {e}")) };
    let (h, m, sec, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    Ok(BASE - 22 * 3_600_000 + ((h * 60 + m) * 60 + sec) * 1000 + ms)
}

/// SIGKILLs the leader of the failover metric's group between writes: writes
/// resume on a new leader (never served by the dead node), every acknowledged
/// point stays readable, and the restarted node catches up and answers them
/// from its own state. Returns the acknowledged points.
async fn leader_kill(c: &mut Cluster, api: &Http) -> Result<BTreeMap<(String, i64), f64>> {
    let mut acked = BTreeMap::new();
    let (leader, group) = fo_write(api, 0, &mut acked).await?;
    let leader = leader.with_context(|| format!("no {HDR_NODE} on a time-series write"))?;
    let group = group.with_context(|| format!("no {HDR_GROUP} on a time-series write"))?;
    let r = api.post(Q, &json!({"metric": FO})).await?.ensure_status(200)?;
    ensure!(r.group().as_deref() == Some(group.as_str()) && r.served_by().is_some(), "query headers: {:?}", r.headers);
    eprintln!("{FO} lives in group {group}, led by node {leader}");
    fo_check(api, &acked, None).await?;

    c.kill_node(leader)?;
    // Each batch is retried until acknowledged: refusals and timeouts while the
    // group elects a new leader are "not yet" (a retried batch rewrites the
    // same timestamps with the same values).
    let mut b = 1;
    while b <= FO_BATCHES_AFTER_KILL {
        let (node, g) = wait_for(Duration::from_secs(30), &format!("write batch {b} after the kill"), async || {
            fo_write(api, b, &mut acked).await.map(Some)
        })
        .await?;
        ensure!(node.is_some() && node != Some(leader), "batch {b} served by {node:?} after node {leader} was killed");
        ensure!(g.as_deref() == Some(group.as_str()), "batch {b} in group {g:?}, not {group}");
        b += 1;
    }
    wait_for(Duration::from_secs(30), "every acknowledged point readable through the router", async || {
        fo_check(api, &acked, None).await.map(Some)
    })
    .await?;

    c.start_node(leader)?;
    let replica = api.replica(leader);
    wait_for(Duration::from_secs(90), "the restarted node answers every acknowledged point itself", async || {
        fo_check(&replica, &acked, Some(leader)).await.map(Some)
    })
    .await?;
    // Writes after the restart reach it too.
    fo_write(api, b, &mut acked).await?;
    wait_for(Duration::from_secs(30), "the restarted node has the newest batch", async || {
        fo_check(&replica, &acked, Some(leader)).await.map(Some)
    })
    .await?;
    let m = metric(&replica, FO).await?;
    ensure!(m["points"] == json!(acked.len()) && m["series"] == json!(2), "stats on the restarted node: {m}");
    fo_check(&api.consistency("all"), &acked, None).await?;
    Ok(acked)
}
