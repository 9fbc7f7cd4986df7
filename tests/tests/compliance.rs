//! Scenario: the consent part of the compliance interface (spec 02) through
//! the router on a three-node cluster. Consents are recorded, checked and
//! withdrawn; the history keeps every change; with the meta group's leader
//! killed the records and history still read back and new changes commit;
//! every change is in the audit trail's hash chain, which verifies.

use std::time::Duration;

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const C: &str = "/api/v1/compliance";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compliance_consent() {
    let options = ClusterOptions {
        shard_count: 2,
        router_env: vec![("SERVICE_COMPLIANCE_ENABLED".into(), "true".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("compliance scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let grant = json!({"subject_id": "user-1234", "purpose": "marketing", "granted": true, "source": "signup_form", "version": "3"});
    let r = api.post(&format!("{C}/consent"), &grant).await?.ensure_status(200)?;
    ensure!(r.json["consent_id"].as_str().is_some_and(|id| id.starts_with("con-")), "{r}");
    api.post(&format!("{C}/consent"), &json!({"subject_id": "user-1234", "purpose": "do_not_sell", "granted": true})).await?.ensure_status(200)?;
    let check = api.get(&format!("{C}/consent/user-1234/check/marketing")).await?.ensure_status(200)?;
    ensure!(check.json["granted"] == true, "{check}");

    // The meta group's leader dies: consent records are in the meta group and survive.
    let cluster = api.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json;
    let meta_leader = cluster["groups"].as_array().and_then(|g| g.iter().find(|g| g["id"] == 0)).and_then(|g| g["leader"].as_u64());
    let victim = meta_leader.unwrap_or(1);
    c.kill_node(victim)?;
    // Once the meta group answers again (a read, safe to repeat), one withdrawal.
    wait_for(Duration::from_secs(60), "the meta group answers without its old leader", || async {
        let r = api.get(&format!("{C}/consent/user-1234")).await?;
        Ok((r.status == 200 && r.json["total"] == 2).then_some(()))
    })
    .await?;
    let body = serde_json::to_vec(&json!({"reason": "unsubscribed"}))?;
    let path = format!("{C}/consent/user-1234/marketing");
    api.send(reqwest::Method::DELETE, &path, Some(body), Some("application/json")).await?.ensure_status(200)?;
    let history = api.get(&format!("{C}/consent/user-1234/history")).await?.ensure_status(200)?;
    let actions: Vec<&str> = history.json["history"].as_array().map(|h| h.iter().filter_map(|e| e["action"].as_str()).collect()).unwrap_or_default();
    ensure!(actions == ["granted", "granted", "withdrawn"], "history: {history}");
    let check = api.get(&format!("{C}/consent/user-1234/check/marketing")).await?.ensure_status(200)?;
    ensure!(check.json["granted"] == false, "{check}");
    let dns = api.get(&format!("{C}/do-not-sell")).await?.ensure_status(200)?;
    ensure!(dns.json["total"] == 1 && dns.json["subjects"][0]["subject_id"] == "user-1234", "{dns}");
    c.start_node(victim)?;

    let stats = api.get(&format!("{C}/consent/stats")).await?.ensure_status(200)?;
    ensure!(stats.json["total_history_entries"] == 3 && stats.json["do_not_sell_count"] == 1, "{stats}");

    // Each change is in the audit trail's hash chain, which verifies.
    let trail = api.get(&format!("{C}/audit/user-1234")).await?.ensure_status(200)?;
    ensure!(trail.json["total"] == 3, "{trail}");
    let verified = api.get(&format!("{C}/audit/verify")).await?.ensure_status(200)?;
    ensure!(verified.json["valid"] == true && verified.json["entries_verified"] == 3, "{verified}");
    Ok(())
}
