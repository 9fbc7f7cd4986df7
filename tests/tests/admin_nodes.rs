//! Scenario: an operator looks at the nodes. `GET /api/v1/admin/nodes` lists the
//! three nodes with what each reports about itself — reachable, the groups it
//! hosts and leads (every group led exactly once), its replicas' lag, disk and
//! memory in use, uptime and the version it runs — `/api/v1/admin/storage`
//! measures each node's bytes per model, `/api/v1/admin/activities` lists the
//! user creation and logins, and `…/{node_id}/logs` reads
//! the newest lines of that node's own log. An unknown node is 404, a bad
//! `lines` 400, a viewer may list but not read logs. `…/{node_id}/restart`
//! restarts a node's process while writes go on: with `quorum` it answers once
//! the node is back and knows every group's leader, with `all` once its
//! replicas caught up, with `one` at once (202); nothing written is lost. A
//! stopped node is listed as unreachable, its logs and restart are 503.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http, wait_for};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const STOPPED: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_nodes() {
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 4, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("admin_nodes scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    every_node_reports_itself(c).await?;
    storage_is_measured_on_every_node(c).await?;
    logs_come_from_the_node(c).await?;
    activities_are_recorded(c).await?;
    stats_merge_every_routers_figures(c).await?;
    a_node_restarts_and_comes_back(c).await?;
    a_stopped_node_is_listed_as_unreachable(c).await
}

async fn every_node_reports_itself(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    let body = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    let nodes = body["nodes"].as_array().context("nodes")?;
    ensure!(nodes.len() == 3, "three nodes: {body}");
    let groups = c.cluster_info().await?["groups"].as_array().context("groups")?.len();
    let mut led = 0;
    for n in nodes {
        ensure!(n["reachable"] == true && n["state"] == "active", "node not up: {n}");
        ensure!(n["version"] == VERSION, "version {} != {VERSION}", n["version"]);
        ensure!(n["groups_hosted"].as_array().map(Vec::len) == Some(groups), "every node hosts every group (rf 3): {n}");
        ensure!(n["disk_used_bytes"].as_u64().unwrap_or(0) > 0, "disk in use: {n}");
        ensure!(n["memory_used_bytes"].as_u64().unwrap_or(0) > 1 << 20, "memory in use: {n}");
        let (free, total) = (n["disk_free_bytes"].as_u64().unwrap_or(0), n["disk_total_bytes"].as_u64().unwrap_or(0));
        ensure!(free > 0 && total >= free, "the data filesystem's free space and size: {n}");
        ensure!(n["memory_total_bytes"].as_u64() > n["memory_used_bytes"].as_u64(), "the machine's memory: {n}");
        ensure!(n["uptime_secs"].as_u64().is_some() && n["applied_lag"].as_u64().is_some(), "uptime and lag: {n}");
        ensure!(n["address"].as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "address: {n}");
        led += n["groups_led"].as_array().map_or(0, Vec::len);
    }
    ensure!(led == groups, "each of the {groups} groups is led by one node, counted {led}: {body}");
    let spread = &body["spread"];
    ensure!(spread["max_led"].as_u64().unwrap_or(0) >= spread["min_led"].as_u64().unwrap_or(u64::MAX), "spread: {spread}");
    Ok(())
}

async fn storage_is_measured_on_every_node(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    let value = "v".repeat(2048);
    for i in 0..100 {
        api.kv_put(&format!("sized/{i}"), json!(format!("{value}{i}")), None).await?.ensure_status(200)?;
    }
    let body = api.get("/api/v1/admin/storage").await?.ensure_status(200)?.json;
    let nodes = body["nodes"].as_array().context("nodes")?;
    let groups = c.cluster_info().await?["groups"].as_array().context("groups")?.len();
    ensure!(nodes.len() == 3, "{body}");
    for n in nodes {
        ensure!(n["reachable"] == true && n["groups"].as_array().map(Vec::len) == Some(groups), "every replica measured: {n}");
        ensure!(n["models"]["kv"].as_u64().unwrap_or(0) > 0, "each node holds a replica of the KV data: {n}");
        ensure!(n["disk_used_bytes"].as_u64().unwrap_or(0) > 0, "{n}");
    }
    ensure!(body["models"]["kv"].as_u64().unwrap_or(0) >= 3 * 1024, "three copies of ~200 KiB, compressed: {body}");
    Ok(())
}

/// The user creation and the viewer's login of the step before are listed as
/// activities, newest first, by type.
async fn activities_are_recorded(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    let config = api.get("/api/v1/admin/activities?type=config&limit=5").await?.ensure_status(200)?.json;
    ensure!(
        config["activities"].as_array().is_some_and(|a| a.iter().any(|a| a["route"] == "/api/v1/admin/users" && a["status"] == 201)),
        "the user creation: {config}"
    );
    let logins = api.get("/api/v1/admin/activities?type=login").await?.ensure_status(200)?.json;
    ensure!(
        logins["activities"].as_array().is_some_and(|a| a.iter().any(|a| a["user"] == "vera" && a["status"] == 200)),
        "vera's login: {logins}"
    );
    api.get("/api/v1/admin/activities?type=nothing").await?.ensure_status(400)?;
    Ok(())
}

/// A second router serves requests; the stats of the first count them too
/// (each router publishes its figures to the meta group every 5 s).
async fn stats_merge_every_routers_figures(c: &mut Cluster) -> Result<()> {
    let (_, second) = c.start_router(&[]).await?;
    let second = second.login_as("admin", tessera_tests::ADMIN_PASSWORD).await?;
    for i in 0..25 {
        second.kv_put(&format!("stats/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let api = c.http.clone();
    let merged = wait_for(Duration::from_secs(30), "router 0's stats count router 1's puts", || async {
        let stats = api.get("/api/v1/admin/stats").await?.ensure_status(200)?.json;
        let other = stats["routers"].as_array().and_then(|r| r.iter().find(|r| r["this_router"] == false).cloned());
        Ok(other.filter(|o| o["requests"].as_u64() >= Some(25)).map(|_| stats))
    })
    .await?;
    ensure!(merged["scope"] == "cluster", "{merged}");
    let puts = merged["by_route"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["method"] == "POST" && r["route"] == "/api/v1/kv/keys").cloned())
        .unwrap_or_default();
    ensure!(puts["requests"].as_u64() >= Some(25) && puts["p99_ms"].as_f64().is_some_and(|p| p > 0.0), "{puts}");
    eprintln!("[admin_nodes] merged stats: routers {}, kv puts {puts}", merged["routers"]);
    Ok(())
}

async fn logs_come_from_the_node(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    let body = api.get("/api/v1/admin/nodes/2/logs?lines=500").await?.ensure_status(200)?.json;
    let lines: Vec<&str> = body["lines"].as_array().context("lines")?.iter().filter_map(Value::as_str).collect();
    ensure!(!lines.is_empty() && lines.len() <= 500 && body["count"] == lines.len(), "lines: {body}");
    ensure!(lines.iter().any(|l| l.contains("node=2")), "node 2's own log (its start names node=2): {lines:?}");
    ensure!(lines.iter().all(|l| !l.contains('\u{1b}')), "no colour codes");
    let few = api.get("/api/v1/admin/nodes/2/logs?lines=2").await?.ensure_status(200)?.json;
    ensure!(few["lines"].as_array().map(Vec::len) == Some(2), "two lines: {few}");

    api.get("/api/v1/admin/nodes/9/logs").await?.ensure_status(404)?;
    api.get("/api/v1/admin/nodes/not-a-node/logs").await?.ensure_status(404)?;
    for bad in ["0", "5001", "many"] {
        api.get(&format!("/api/v1/admin/nodes/2/logs?lines={bad}")).await?.ensure_status(400)?;
    }

    // A viewer may list the nodes but not read their logs.
    api.post(
        "/api/v1/admin/users",
        &serde_json::json!({
            "username": "vera", "email": "vera@example.com", "password": "Viewer-Pass-123!", "role": "viewer"
        }),
    )
    .await?
    .ensure_status(201)?;
    let viewer = api.anonymous().login_as("vera", "Viewer-Pass-123!").await?;
    viewer.get("/api/v1/admin/nodes").await?.ensure_status(200)?;
    viewer.get("/api/v1/admin/nodes/2/logs").await?.ensure_status(403)?;
    Ok(())
}

async fn a_node_restarts_and_comes_back(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    for i in 0..20 {
        api.kv_put(&format!("restart/before/{i}"), json!(i), None).await?.ensure_status(200)?;
    }
    let starts = |log: &str| log.matches("node started its groups").count();
    let before = starts(&c.node_log_text(1)?);

    // quorum (the default): back, every group's leader known; writes go on meanwhile.
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0..30 {
                api.kv_put(&format!("restart/during/{i}"), json!(i), None).await?.ensure_status(200)?;
            }
            anyhow::Ok(())
        })
    };
    let r = api.post("/api/v1/admin/nodes/1/restart", &json!({})).await?.ensure_status(200)?.json;
    ensure!(r["restarted"] == true && r["consistency"] == "quorum", "{r}");
    writer.await??;
    ensure!(starts(&c.node_log_text(1)?) == before + 1, "node 1 ran once more (same process, same log)");
    let node = node_view(&api, 1).await?;
    ensure!(node["reachable"] == true && node["uptime_secs"].as_u64().is_some_and(|u| u < 60), "{node}");

    // all: its replicas caught up as well.
    let r = api.post("/api/v1/admin/nodes/2/restart?consistency=all", &json!({})).await?.ensure_status(200)?.json;
    ensure!(r["consistency"] == "all", "{r}");
    let node = node_view(&api, 2).await?;
    ensure!(node["applied_lag"] == 0, "after `all` node 2 trails no leader: {node}");

    // one: accepted at once; the node is back soon after.
    let r = api.consistency("one").post("/api/v1/admin/nodes/3/restart", &json!({})).await?.ensure_status(202)?.json;
    ensure!(r["restarting"] == true, "{r}");
    wait_for(Duration::from_secs(60), "node 3 back after its restart", async || {
        Ok((node_view(&api, 3).await?["reachable"] == true).then_some(()))
    })
    .await?;
    c.wait_ready().await?;

    api.post("/api/v1/admin/nodes/9/restart", &json!({})).await?.ensure_status(404)?;
    api.post("/api/v1/admin/nodes/1/restart?consistency=most", &json!({})).await?.ensure_status(400)?;
    for (prefix, n) in [("before", 20), ("during", 30)] {
        for i in 0..n {
            let got = api.kv_get(&format!("restart/{prefix}/{i}")).await?.ensure_status(200)?;
            ensure!(got.json["value"] == i, "restart/{prefix}/{i}: {got}");
        }
    }
    Ok(())
}

/// Node `id` as `GET /api/v1/admin/nodes` shows it.
async fn node_view(api: &Http, id: u64) -> Result<Value> {
    let body = api.get("/api/v1/admin/nodes").await?.ensure_status(200)?.json;
    body["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == id)).cloned().context("node listed")
}

async fn a_stopped_node_is_listed_as_unreachable(c: &mut Cluster) -> Result<()> {
    c.stop_node(STOPPED).await?;
    let api = c.http.clone();
    let node = wait_for(Duration::from_secs(30), "the stopped node listed as unreachable", async || {
        let body = api.get("/api/v1/admin/nodes").await?.json;
        let node = body["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == STOPPED)).cloned();
        Ok(node.filter(|n| n["reachable"] == false))
    })
    .await?;
    ensure!(node["groups_hosted"].as_array().is_some_and(|g| !g.is_empty()) && node["version"].is_null(), "{node}");
    api.get(&format!("/api/v1/admin/nodes/{STOPPED}/logs")).await?.ensure_status(503)?;
    api.post(&format!("/api/v1/admin/nodes/{STOPPED}/restart"), &json!({})).await?.ensure_status(503)?;
    Ok(())
}
