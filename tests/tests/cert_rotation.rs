//! Scenario: every certificate of a running cluster is rotated, then its CA,
//! under a steady writer, with no restart. The processes re-read their files
//! when the contents change (as Kubernetes swaps a mounted Secret). First new
//! leaf certificates from the same CA; then a CA rollover: both CAs trusted,
//! leaves from the new CA, the old CA dropped. No acknowledged write is lost,
//! no write fails beyond its retries, and afterwards a certificate of the old
//! CA is refused while one of the new CA is let in.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_api::certs::{ClusterCa, Role, cert_files};
use tessera_api::rpc::StatusRequest;
use tessera_api::rpc::data_service_client::DataServiceClient;
use tessera_tests::{Cluster, ClusterOptions, Http, json, wait_for};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const HOSTS: [&str; 2] = ["127.0.0.1", "localhost"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_rotation() {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let mut cluster = Cluster::start(ClusterOptions { shard_count: 2, ..ClusterOptions::default() }).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("cert_rotation scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// How many times each process has reloaded its cluster certificates.
fn reloads(c: &Cluster) -> Result<Vec<usize>> {
    let mut counts = Vec::new();
    for id in 1..=3 {
        counts.push(c.node_log_text(id)?.matches("reloaded the cluster certificates").count());
    }
    let router = std::fs::read_to_string(c.root().join("router-0.log"))?;
    counts.push(router.matches("reloaded the cluster client certificates").count());
    Ok(counts)
}

/// Waits until every process reloaded once more than in `before`.
async fn every_process_reloaded(c: &Cluster, before: &[usize], step: &str) -> Result<Vec<usize>> {
    wait_for(Duration::from_secs(60), &format!("every process to reload its certificates ({step})"), async || {
        let now = reloads(c)?;
        Ok(now.iter().zip(before).all(|(n, b)| n > b).then_some(now))
    })
    .await
}

/// Writes new leaf certificates from `ca` for every process, key then certificate.
fn issue_all(dir: &Path, ca: &ClusterCa) -> Result<()> {
    let hosts: Vec<String> = HOSTS.iter().map(|h| h.to_string()).collect();
    for (role, name) in [(Role::Node, "node-1"), (Role::Node, "node-2"), (Role::Node, "node-3"), (Role::Router, "router")] {
        let (cert, key) = ca.issue(role, name, &hosts)?;
        let (cert_path, key_path) = cert_files(dir, name);
        std::fs::write(key_path, key)?;
        std::fs::write(cert_path, cert)?;
    }
    Ok(())
}

/// Whether node 1 answers `Status` to a router certificate of `ca`, trusting `trust`.
async fn status_with(c: &Cluster, trust: &str, ca: &ClusterCa) -> Result<(), String> {
    let (cert, key) = ca.issue(Role::Router, "probe", &["127.0.0.1".into()]).map_err(|e| e.to_string())?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(trust))
        .identity(Identity::from_pem(cert, key))
        .domain_name("127.0.0.1");
    let addr = c.node_addr(1).map_err(|e| e.to_string())?;
    let endpoint =
        Endpoint::from_shared(format!("https://{addr}")).map_err(|e| e.to_string())?.tls_config(tls).map_err(|e| e.to_string())?;
    let channel = endpoint.connect_timeout(Duration::from_secs(5)).connect().await.map_err(|e| format!("{e:?}"))?;
    DataServiceClient::new(channel).status(StatusRequest::default()).await.map(|_| ()).map_err(|s| format!("{s:?}"))
}

/// Puts keys one after another until told to stop, each retried up to 20 times
/// over about 10 s; answers the keys acknowledged and the writes that failed
/// every try.
async fn write_steadily(api: Http, stop: Arc<AtomicBool>, retried: Arc<AtomicU64>) -> (Vec<String>, Vec<String>) {
    let (mut acked, mut failed) = (Vec::new(), Vec::new());
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("rotation/{i}");
        let mut ok = false;
        for attempt in 0..20 {
            if attempt > 0 {
                retried.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            if let Ok(r) = api.kv_put(&key, json!(i), None).await
                && r.status == 200
            {
                ok = true;
                break;
            }
        }
        if ok {
            acked.push(key)
        } else {
            failed.push(key)
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (acked, failed)
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let dir = c.root().join("certs");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).with_context(|| name.to_string());
    let old_ca_pem = read("ca.pem")?;
    let old_ca = ClusterCa::from_pem(&old_ca_pem, &read("ca.key")?)?;
    let new_ca = ClusterCa::create("Tessera cluster CA 2")?;
    status_with(c, &old_ca_pem, &old_ca).await.map_err(anyhow::Error::msg).context("a certificate of the first CA before any rotation")?;

    let (stop, retried) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let writer = tokio::spawn(write_steadily(c.http.clone(), stop.clone(), retried.clone()));
    let mut seen = reloads(c)?;
    let written = |n| async move { tokio::time::sleep(Duration::from_millis(n)).await };

    // 1. New leaves from the same CA.
    issue_all(&dir, &old_ca)?;
    seen = every_process_reloaded(c, &seen, "new leaves").await?;
    written(1000).await;
    // 2. Both CAs trusted everywhere.
    std::fs::write(dir.join("ca.pem"), format!("{old_ca_pem}{}", new_ca.cert_pem()))?;
    seen = every_process_reloaded(c, &seen, "both CAs trusted").await?;
    written(1000).await;
    // 3. Leaves from the new CA.
    issue_all(&dir, &new_ca)?;
    seen = every_process_reloaded(c, &seen, "leaves of the new CA").await?;
    written(1000).await;
    // 4. The old CA dropped.
    std::fs::write(dir.join("ca.pem"), new_ca.cert_pem())?;
    every_process_reloaded(c, &seen, "the old CA dropped").await?;
    written(2000).await;

    stop.store(true, Ordering::SeqCst);
    let (acked, failed) = writer.await?;
    eprintln!("[cert_rotation] {} writes acknowledged, {} retries, {} failed", acked.len(), retried.load(Ordering::Relaxed), failed.len());
    ensure!(failed.is_empty(), "writes failed beyond their retries: {failed:?}");
    ensure!(acked.len() > 20, "the writer made little progress: {}", acked.len());
    for key in &acked {
        let r = c.http.kv_get(key).await?;
        ensure!(r.status == 200, "acknowledged {key} is lost: {r}");
    }

    // The old CA's certificates are refused now; the new CA's are let in.
    let refused = status_with(c, new_ca.cert_pem(), &old_ca).await;
    ensure!(refused.is_err(), "a certificate of the dropped CA was let in");
    status_with(c, new_ca.cert_pem(), &new_ca).await.map_err(anyhow::Error::msg).context("a certificate of the new CA")?;
    // And the cluster still writes through its rotated links.
    c.http.kv_put("rotation/after", json!(true), None).await?.ensure_status(200)?;
    Ok(())
}
