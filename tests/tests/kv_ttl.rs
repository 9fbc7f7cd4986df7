//! Scenario: a key written with `ttl: 1` is visible at first and then
//! disappears from get (404), list and count, while keys with a long TTL or
//! no TTL stay.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_ttl() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("kv_ttl scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let q = c.http.consistency("quorum");

    let r = c.http.kv_put("ttl-long", json!("long"), Some(3600)).await?.ensure_status(200)?;
    ensure!(r.json["ttl"].is_number(), "entry with ttl 3600 lacks a numeric ttl: {r}");
    c.http.kv_put("ttl-none", json!("none"), None).await?.ensure_status(200)?;

    // Short TTL: visible right away (only checkable while the second lasts).
    let put_started = Instant::now();
    let r = c.http.kv_put("ttl-short", json!({"v": "short"}), Some(1)).await?.ensure_status(200)?;
    ensure!(r.json["ttl"].is_number(), "entry with ttl 1 lacks a numeric ttl: {r}");
    let got = q.kv_get("ttl-short").await?;
    if put_started.elapsed() < Duration::from_millis(800) {
        ensure!(got.status == 200 && got.json["value"] == json!({"v": "short"}), "ttl-short not visible right after put: {got}");
    } else {
        eprintln!("put+get took {:?}; skipping the visibility check of ttl-short", put_started.elapsed());
    }

    // Then it expires everywhere.
    let gone = wait_for(Duration::from_secs(20), "ttl-short expires from get, list and count", async || {
        let r = q.kv_get("ttl-short").await?;
        if r.status != 404 {
            return Err(anyhow!("get still answers {r}"));
        }
        r.ensure_error_body()?;
        let (listed, total) = q.kv_list_keys("ttl-", Some(100)).await?;
        if listed.iter().any(|k| k == "ttl-short") || total != 2 {
            return Err(anyhow!("list still shows {listed:?} (total {total})"));
        }
        let n = q.kv_count("ttl-").await?;
        if n != 2 {
            return Err(anyhow!("count ttl- is still {n}"));
        }
        Ok(Some(put_started.elapsed()))
    })
    .await?;
    eprintln!("ttl-short gone from get/list/count {gone:?} after its put");
    ensure!(gone >= Duration::from_millis(900), "ttl-short vanished after only {gone:?}");

    // The others stay.
    let (listed, total) = q.kv_list_keys("ttl-", None).await?;
    ensure!(listed == ["ttl-long", "ttl-none"] && total == 2, "list ttl-: {listed:?} total {total}");
    for (k, v) in [("ttl-long", json!("long")), ("ttl-none", json!("none"))] {
        let r = q.kv_get(k).await?.ensure_status(200)?;
        ensure!(r.json["value"] == v, "{k}: {r}");
    }

    // Re-putting an expired key brings it back.
    c.http.kv_put("ttl-short", json!("again"), None).await?.ensure_status(200)?;
    let r = q.kv_get("ttl-short").await?.ensure_status(200)?;
    ensure!(r.json["value"] == json!("again"), "ttl-short re-put: {r}");
    Ok(())
}
