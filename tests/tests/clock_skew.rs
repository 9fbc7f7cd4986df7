//! Scenarios of a node whose wall clock is wrong by ten minutes.
//!
//! Behind: when it leads a shard, the shard's time still moves forward only: a
//! key that expired stays expired under quorum reads, and a key it writes with
//! a TTL does not expire at once when a node with a right clock takes over.
//!
//! Ahead: it cannot drag the cluster's time forward (keys with a TTL do not
//! expire early when it joins), and when it leads, what it writes with a TTL
//! lives for that TTL of the majority's time, not ten minutes longer.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, json, wait_for};

/// The skewed node and how far its clock is behind.
const SKEWED: u64 = 3;
const SKEW_MS: i64 = -10 * 60 * 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew() {
    let opts = ClusterOptions { shard_count: 1, ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("clock_skew scenario failed: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_running_ahead() {
    let opts = ClusterOptions { shard_count: 1, ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = ahead_scenario(&mut cluster).await {
        panic!("a_clock_running_ahead scenario failed: {e:?}");
    }
}

async fn ahead_scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.kv_put("ahead/probe", json!(0), None).await?.ensure_status(200)?;
    api.kv_put("ahead/two-minutes", json!("two"), Some(120)).await?.ensure_status(200)?;
    c.stop_node(SKEWED).await?;
    c.set_node_env(SKEWED, "SERVICE_TEST_CLOCK_OFFSET_MS", &(-SKEW_MS).to_string())?;
    c.start_node(SKEWED)?;
    c.wait_ready().await?;
    // The fast node has exchanged heartbeats once it serves the probe itself.
    wait_for(Duration::from_secs(30), "the fast node serves the probe from its own replica", async || {
        let r = api.replica(SKEWED).kv_get("ahead/probe").await?;
        Ok((r.status == 200).then_some(()))
    })
    .await?;
    for _ in 0..10 {
        let r = api.consistency("quorum").kv_get("ahead/two-minutes").await?;
        ensure!(r.status == 200, "a two-minute key expired when a node ten minutes ahead joined: {r}");
        let ttl = r.json["ttl"].as_i64().context("ttl")?;
        ensure!((60..=120).contains(&ttl), "the two-minute key has ttl {ttl}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Hand it the lead; what it writes with a one-minute TTL has at most a minute
    // left when a right clock reads it.
    let mut led = false;
    for round in 0..16 {
        let leader = leader_of(&api, "ahead/probe").await?;
        eprintln!("round {round}: node {leader} leads the shard");
        if leader == SKEWED {
            led = true;
            break;
        }
        c.stop_node(leader).await?;
        leader_of(&api, "ahead/probe").await?;
        c.start_node(leader)?;
        c.wait_ready().await?;
    }
    ensure!(led, "node {SKEWED} never took the lead");
    let w = api.kv_put("ahead/minute", json!("minute"), Some(60)).await?.ensure_status(200)?;
    if w.served_by() != Some(SKEWED) {
        eprintln!("the lead moved to node {:?} before the write; the write check is weaker", w.served_by());
    }
    c.stop_node(SKEWED).await?;
    let r = wait_for(Duration::from_secs(30), "a right-clock leader answers", async || {
        let r = api.consistency("quorum").kv_get("ahead/minute").await?;
        ensure!(r.served_by().is_some_and(|n| n != SKEWED), "served by {:?}", r.served_by());
        Ok(Some(r))
    })
    .await?;
    ensure!(r.status == 200, "the one-minute key written by the fast leader is gone: {r}");
    let ttl = r.json["ttl"].as_i64().context("ttl")?;
    ensure!((1..=60).contains(&ttl), "the one-minute key written by the fast leader has ttl {ttl}");
    c.start_node(SKEWED)?;
    c.wait_ready().await.map_err(|e| anyhow!("restart of node {SKEWED}: {e:#}"))?;
    Ok(())
}

/// The node leading the shard of `key`: the one that serves its quorum read.
async fn leader_of(api: &Http, key: &str) -> Result<u64> {
    wait_for(Duration::from_secs(30), "the key's shard answers a quorum read", async || {
        let r = api.consistency("quorum").kv_get(key).await?;
        ensure!(r.status == 200 || r.status == 404, "read answered {r}");
        Ok(r.served_by())
    })
    .await
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    c.stop_node(SKEWED).await?;
    c.set_node_env(SKEWED, "SERVICE_TEST_CLOCK_OFFSET_MS", &SKEW_MS.to_string())?;
    c.start_node(SKEWED)?;
    c.wait_ready().await?;

    // A short-lived key, written while a node with a right clock leads, expires.
    api.kv_put("skew/probe", json!(0), None).await?.ensure_status(200)?;
    let mut leader = leader_of(&api, "skew/probe").await?;
    for _ in 0..10 {
        if leader != SKEWED {
            break;
        }
        c.stop_node(SKEWED).await?;
        leader = leader_of(&api, "skew/probe").await?;
        c.start_node(SKEWED)?;
        c.wait_ready().await?;
    }
    ensure!(leader != SKEWED, "node {SKEWED} keeps leading");
    api.kv_put("skew/short", json!("short"), Some(1)).await?.ensure_status(200)?;
    wait_for(Duration::from_secs(20), "skew/short expires", async || {
        let r = api.consistency("quorum").kv_get("skew/short").await?;
        Ok((r.status == 404).then_some(()))
    })
    .await?;

    // Hand the shard to the skewed node: stop whichever other node leads it until
    // it does. Its clock says the short key is ten minutes from expiring; the
    // shard's says it expired.
    let mut checked = false;
    for round in 0..16 {
        let leader = leader_of(&api, "skew/probe").await?;
        eprintln!("round {round}: node {leader} leads the shard");
        if leader != SKEWED {
            c.stop_node(leader).await?;
            leader_of(&api, "skew/probe").await?;
            c.start_node(leader)?;
            c.wait_ready().await?;
            continue;
        }
        // A 404 names no serving node: the probe read after it shows the lead stayed.
        let r = api.consistency("quorum").kv_get("skew/short").await?;
        if leader_of(&api, "skew/probe").await? != SKEWED {
            continue; // the lead moved on meanwhile
        }
        ensure!(r.status == 404, "an expired key came back under the skewed leader: {r}");
        checked = true;
        break;
    }
    ensure!(checked, "node {SKEWED} never took the lead");

    // A key it writes with a one-minute TTL lives on after a right clock takes over.
    let w = api.kv_put("skew/minute", json!("minute"), Some(60)).await?.ensure_status(200)?;
    if w.served_by() != Some(SKEWED) {
        eprintln!("the lead moved to node {:?} before the write; the write check is weaker", w.served_by());
    }
    c.stop_node(SKEWED).await?;
    let r = wait_for(Duration::from_secs(30), "a right-clock leader answers", async || {
        let r = api.consistency("quorum").kv_get("skew/minute").await?;
        ensure!(r.served_by().is_some_and(|n| n != SKEWED), "served by {:?}", r.served_by());
        Ok(Some(r))
    })
    .await?;
    ensure!(r.status == 200 && r.json["value"] == json!("minute"), "the one-minute key expired at once: {r}");
    let ttl = r.json["ttl"].as_i64().context("ttl")?;
    ensure!((1..=60).contains(&ttl), "the one-minute key has ttl {ttl}");
    c.start_node(SKEWED)?;
    c.wait_ready().await.map_err(|e| anyhow!("restart of node {SKEWED}: {e:#}"))?;
    Ok(())
}
