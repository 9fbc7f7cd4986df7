//! Scenario: the whole cluster is shut down gracefully (SIGTERM) and started
//! again on the same data dirs and ports; every write survives, deletes stay
//! deleted, and the cluster accepts new writes.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, stream};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, Http, Value, json};

const N: usize = 300;
const DELETED: usize = 20;

fn key(i: usize) -> String {
    format!("rs-{i:04}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_restart() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("kv_restart scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();

    // Data: N keys (some with a long TTL, some overwritten), the first DELETED removed.
    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    let puts: Vec<Result<(String, Value)>> = stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            async move {
                let (k, v) = (key(i), json!({"i": i, "gen": 1}));
                let ttl = (i % 10 == 0).then_some(3600);
                api.kv_put(&k, v.clone(), ttl).await?.ensure_status(200)?;
                Ok((k, v))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for p in puts {
        let (k, v) = p?;
        expected.insert(k, v);
    }
    for i in (0..N).step_by(7) {
        let v = json!({"i": i, "gen": 2});
        api.kv_put(&key(i), v.clone(), None).await?.ensure_status(200)?;
        expected.insert(key(i), v);
    }
    for i in 0..DELETED {
        api.kv_delete(&key(i)).await?.ensure_status(200)?;
        expected.remove(&key(i));
    }
    verify(&api.consistency("quorum"), &expected).await.context("before restart")?;
    let old_token = c.http.token().map(str::to_string);

    // Graceful full stop, then start on the same dirs and ports.
    c.stop_all().await?;
    ensure!(c.http.anonymous().get("/health").await.is_err(), "router still answers after stop_all");
    c.start_all().await?;
    c.login().await?;

    // Sessions are meant to live in the cluster; report (do not require) it.
    if let Some(t) = old_token {
        let r = c.http.with_token(&t).kv_count("rs-").await;
        eprintln!("pre-restart token after restart: {}", if r.is_ok() { "still valid" } else { "rejected" });
    }

    let api = c.http.clone();
    verify(&api.consistency("quorum"), &expected).await.context("after restart")?;
    for i in 0..DELETED {
        api.consistency("quorum").kv_get(&key(i)).await?.ensure_status(404)?;
    }

    // The restarted cluster takes writes and logins.
    let v = json!({"after": "restart"});
    api.kv_put("rs-new", v.clone(), None).await?.ensure_status(200)?;
    let r = api.consistency("quorum").kv_get("rs-new").await?.ensure_status(200)?;
    ensure!(r.json["value"] == v, "rs-new after restart: {r}");
    api.anonymous().login_as(ADMIN_USER, ADMIN_PASSWORD).await?;
    Ok(())
}

/// Every expected key reads back with its value; list and count agree exactly.
async fn verify(q: &Http, expected: &BTreeMap<String, Value>) -> Result<()> {
    let wrong: Vec<String> = stream::iter(expected.iter())
        .map(|(k, v)| async move {
            match q.kv_get(k).await {
                Ok(r) if r.status == 200 && r.json["value"] == *v => None,
                Ok(r) => Some(format!("{k}: {r}")),
                Err(e) => Some(format!("{k}: {e:#}")),
            }
        })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await;
    ensure!(wrong.is_empty(), "{} of {} keys wrong, e.g. {:?}", wrong.len(), expected.len(), &wrong[..wrong.len().min(5)]);
    let (listed, total) = q.kv_list_keys("rs-", Some(N)).await?;
    let want: Vec<&String> = expected.keys().collect();
    ensure!(listed.iter().collect::<Vec<_>>() == want, "list rs- returned {} keys, expected {}", listed.len(), want.len());
    ensure!(total == expected.len() as u64, "list total {total} != {}", expected.len());
    ensure!(q.kv_count("rs-").await? == expected.len() as u64, "count rs-");
    Ok(())
}
