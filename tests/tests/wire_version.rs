//! Scenario: routers and nodes of different releases share a cluster during a
//! rolling update. The router-to-node contract is versioned
//! (`tessera_api::rpc::WIRE_VERSION`, sent as `tessera-wire-version` metadata):
//! a router of an older version the nodes still serve (version 1, which sends
//! no version, as every router before the versioning did) keeps reading and
//! writing; a router newer than the nodes, or older than they serve, is refused
//! at once and by name: its `/readyz` and its requests answer 503 saying which
//! side to upgrade, instead of misreading replies. The nodes report the
//! versions they serve in `GET /api/v1/admin/nodes`.

use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use serde_json::json;
use tessera_api::rpc::{MIN_WIRE_VERSION, WIRE_VERSION};
use tessera_tests::{ADMIN_PASSWORD, Cluster, ClusterOptions, Http};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_router_is_served_and_an_unserved_one_is_refused_by_name() {
    let options = ClusterOptions { shard_count: 2, ..ClusterOptions::default() };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("wire version scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let nodes = c.http.get("/api/v1/admin/nodes").await?.ensure_status(200)?;
    for node in nodes.json["nodes"].as_array().into_iter().flatten() {
        ensure!(node["wire_version"] == json!({"current": WIRE_VERSION, "min": MIN_WIRE_VERSION}), "{node}");
    }

    // A router of the oldest served version: reads and writes as before.
    let older_version = MIN_WIRE_VERSION.to_string();
    let (_, older) = c.start_router(&[("TESSERA_TEST_WIRE_VERSION", older_version.as_str())]).await?;
    let older = older.login_as("admin", ADMIN_PASSWORD).await?;
    for i in 0..10 {
        older.kv_put(&format!("wire/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    for i in 0..10 {
        let r = c.http.kv_get(&format!("wire/{i}")).await?.ensure_status(200)?;
        ensure!(r.json["value"] == json!(i), "written by the older router, read by the current one: {r}");
    }
    let dashboard = older.get("/api/v1/admin/dashboard").await?.ensure_status(200)?;
    ensure!(dashboard.json["wire_version"] == json!(MIN_WIRE_VERSION), "{dashboard}");

    // A router newer than the nodes: refused, naming the nodes as what to upgrade.
    let newer_version = (WIRE_VERSION + 1).to_string();
    let (_, newer) = c.spawn_extra_router(&[("TESSERA_TEST_WIRE_VERSION", newer_version.as_str())])?;
    let readyz = refused_readyz(&newer).await?;
    ensure!(readyz.contains("upgrade the nodes first"), "{readyz}");
    let started = Instant::now();
    let token = c.http.token().unwrap_or_default().to_string();
    let write = newer.with_token(&token).kv_put("wire/newer", json!(1), None).await?;
    ensure!(write.status == 503 && write.text.contains("incompatible wire version"), "{write}");
    ensure!(started.elapsed() < Duration::from_secs(10), "refused at once, not after the retry deadline: {:?}", started.elapsed());

    // A router older than the nodes serve: refused, naming the router.
    let (_, ancient) = c.spawn_extra_router(&[("TESSERA_TEST_WIRE_VERSION", "0")])?;
    let readyz = refused_readyz(&ancient).await?;
    ensure!(readyz.contains("upgrade the router"), "{readyz}");
    // Nothing the refused routers tried was written.
    c.http.kv_get("wire/newer").await?.ensure_status(404)?;
    Ok(())
}

/// Waits until the router answers `/readyz` with the nodes' refusal; returns it.
async fn refused_readyz(router: &Http) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(r) = router.get("/readyz").await {
            ensure!(r.status != 200, "a router the nodes do not serve must not be ready: {r}");
            if r.text.contains("incompatible wire version") {
                ensure!(r.status == 503, "{r}");
                return Ok(r.text);
            }
            last = r.to_string();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the router's /readyz never named the refusal; last: {last}")
}
