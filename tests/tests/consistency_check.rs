//! Scenario: the replica consistency check (`GET /api/v1/admin/consistency`) on
//! a healthy 3-node cluster. After key-value writes every group reports its
//! three replicas at one applied index with one digest; more writes move the
//! applied indexes and the digests of the groups they landed in. Many writes at
//! once share log entries (a leader batches what arrives while its earlier
//! proposals are in flight), every one of them is acknowledged and readable,
//! and the replicas still agree.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, stream};
use tessera_tests::chaos::convergence::assert_converged;
use tessera_tests::{Cluster, ClusterOptions, Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistency_check() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("consistency_check scenario failed: {e:?}");
    }
}

/// Group id → (applied index, digest), after checking every group has three
/// member replicas that agree.
fn agreed(report: &Value) -> Result<BTreeMap<u64, (u64, String)>> {
    ensure!(report["consistent"] == true && report["converged"] == true, "{report:#}");
    ensure!(report["checked_at"].is_string(), "{report:#}");
    let groups = report["groups"].as_array().context("groups")?;
    ensure!(groups.len() > 1, "the meta group and the data groups: {report:#}");
    let mut out = BTreeMap::new();
    for g in groups {
        let id = g["group_id"].as_u64().context("group_id")?;
        ensure!(g["consistent"] == true && g["converged"] == true && g["divergent_at"] == json!([]), "group {id}: {g:#}");
        let members: Vec<&Value> = g["replicas"].as_array().context("replicas")?.iter().filter(|r| r["member"] == true).collect();
        ensure!(members.len() == 3, "group {id} has {} member replicas: {g:#}", members.len());
        let index = members[0]["applied_index"].as_u64().context("applied_index")?;
        let digest = members[0]["digest"].as_str().context("digest")?.to_string();
        ensure!(index > 0 && digest.len() == 64, "group {id}: {g:#}");
        for r in &members {
            ensure!(r["error"].is_null() && r["records"].as_u64().is_some_and(|n| n > 0), "group {id}: {g:#}");
            ensure!(r["applied_index"] == index && r["digest"] == digest.as_str(), "group {id}'s replicas differ: {g:#}");
        }
        out.insert(id, (index, digest));
    }
    Ok(out)
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    // An admin route: an anonymous caller is refused.
    api.anonymous().get("/api/v1/admin/consistency").await?.ensure_status(401)?;

    for i in 0..40 {
        api.kv_put(&format!("cc-{i:03}"), json!({"i": i}), None).await?.ensure_status(200)?;
    }
    let first = agreed(&assert_converged(&api, Duration::from_secs(60)).await?)?;

    for i in 0..40 {
        api.kv_put(&format!("cc-{i:03}"), json!({"i": i, "again": true}), None).await?.ensure_status(200)?;
    }
    let second = agreed(&assert_converged(&api, Duration::from_secs(60)).await?)?;
    let moved: Vec<u64> = second
        .iter()
        .filter(|(id, (index, digest))| first.get(id).is_some_and(|(i, d)| i < index && d != digest))
        .map(|(id, _)| *id)
        .collect();
    ensure!(!moved.is_empty(), "no group's applied index and digest moved with the writes: {first:?} → {second:?}");

    // 600 writes, 64 in flight: they take fewer log entries than there are writes.
    const CONCURRENT: usize = 600;
    let answers: Vec<Result<tessera_tests::Resp>> = stream::iter(0..CONCURRENT)
        .map(|i| {
            let api = api.clone();
            async move { api.kv_put(&format!("cc-many-{i:04}"), json!({"i": i}), None).await }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for (i, answer) in answers.into_iter().enumerate() {
        answer.with_context(|| format!("write {i}"))?.ensure_status(200)?;
    }
    let third = agreed(&assert_converged(&api, Duration::from_secs(60)).await?)?;
    let entries: u64 = third.iter().map(|(id, (index, _))| index - second.get(id).map_or(0, |(i, _)| *i)).sum();
    ensure!(entries < CONCURRENT as u64, "{CONCURRENT} concurrent writes took {entries} log entries: none were batched");
    for i in (0..CONCURRENT).step_by(37) {
        let got = api.consistency("quorum").get(&format!("/api/v1/kv/keys/cc-many-{i:04}")).await?.ensure_status(200)?;
        ensure!(got.json["value"] == json!({"i": i}), "cc-many-{i:04}: {got}");
    }
    println!("{CONCURRENT} concurrent writes took {entries} log entries");
    Ok(())
}
