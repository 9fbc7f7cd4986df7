//! Scenario: the consent part of the compliance interface (spec 02) through
//! the router on a three-node cluster. Consents are recorded, checked and
//! withdrawn; the history keeps every change; with the meta group's leader
//! killed the records and history still read back and new changes commit;
//! every change is in the audit trail's hash chain, which verifies. Last,
//! five failed logins open a brute-force incident, which the router posts to
//! a webhook server run by the test, with the header named in
//! `SERVICE_BREACH_WEBHOOK_HEADER_X-Api-Key` and the HMAC-SHA256 signature
//! keyed by `SERVICE_BREACH_WEBHOOK_SECRET`.

use std::time::Duration;

use anyhow::{Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const C: &str = "/api/v1/compliance";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compliance_consent() {
    let webhook = WebhookServer::start().await.expect("webhook server");
    let options = ClusterOptions {
        shard_count: 2,
        router_env: vec![
            ("SERVICE_COMPLIANCE_ENABLED".into(), "true".into()),
            ("SERVICE_BREACH_WEBHOOK_URL".into(), webhook.url.clone()),
            ("SERVICE_BREACH_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()),
            ("SERVICE_BREACH_WEBHOOK_HEADER_X-Api-Key".into(), "k-42".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    let result = match scenario(&mut cluster).await {
        Ok(()) => match a_subject_is_erased_from_every_shard(&cluster).await {
            Ok(()) => a_breach_reaches_the_webhook(&cluster, &webhook).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        panic!("compliance scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

const WEBHOOK_SECRET: &str = "webhook-secret-1";

/// A subject's key-value entries spread over the shards, documents, SQL rows
/// and graph node are erased; the export then finds nothing, another
/// subject's data stays, and the certificate verifies.
async fn a_subject_is_erased_from_every_shard(c: &Cluster) -> Result<()> {
    let api = c.http.clone();
    for i in 0..12 {
        api.kv_put(&format!("orders/{i}"), json!({"customer_id": if i % 3 == 0 { "dave" } else { "carol" }, "n": i}), None)
            .await?
            .ensure_status(200)?;
    }
    api.kv_put("user:carol", json!({"plan": "pro"}), None).await?.ensure_status(200)?;
    api.post("/api/v1/documents/collections", &json!({"name": "people"})).await?;
    api.post("/api/v1/documents/collections/people/documents", &json!({"id": "carol", "document": {"city": "Lyon"}}))
        .await?
        .ensure_status(201)?;
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE payments (id INT PRIMARY KEY, user_id TEXT)"})).await?.ensure_status(200)?;
    api.post("/api/v1/query", &json!({"sql": "INSERT INTO payments VALUES (1, 'carol'), (2, 'dave')"})).await?.ensure_status(200)?;
    api.post("/api/v1/graph/nodes", &json!({"graph": "g", "id": "carol", "label": "User"})).await?.ensure_status(201)?;
    let before = api.post(&format!("{C}/export"), &json!({"subject_id": "carol"})).await?.ensure_status(200)?;
    ensure!(before.json["total_items"] == 12, "8 orders, user:carol, a document, a row, a node: {before}");
    let body = serde_json::to_vec(&json!({"requestor": "dpo", "reason": "erasure request", "secure_erase": true}))?;
    let erased = api
        .send(reqwest::Method::DELETE, &format!("{C}/data-subject/carol"), Some(body), Some("application/json"))
        .await?
        .ensure_status(200)?;
    let cert = &erased.json["certificate"];
    ensure!(cert["total_items"] == 12 && cert["signature_algorithm"] == "Ed25519", "{erased}");
    let after = api.post(&format!("{C}/export"), &json!({"subject_id": "carol"})).await?.ensure_status(200)?;
    ensure!(after.json["total_items"] == 0, "{after}");
    let dave = api.post(&format!("{C}/export"), &json!({"subject_id": "dave"})).await?.ensure_status(200)?;
    ensure!(dave.json["total_items"] == 5, "4 orders and a row of dave stay: {dave}");
    let id = cert["id"].as_str().unwrap_or_default();
    let verified = api.get(&format!("{C}/certificates/{id}/verify")).await?.ensure_status(200)?;
    ensure!(verified.json["valid"] == true, "{verified}");
    Ok(())
}

/// A webhook receiver on loopback: keeps each request's headers and body, answers 200.
struct WebhookServer {
    url: String,
    received: std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>,
}

impl WebhookServer {
    async fn start() -> Result<WebhookServer> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/breach", listener.local_addr()?);
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = received.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Ok(n) = conn.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            kept.lock().unwrap().push((head, buf[end + 4..end + 4 + length].to_vec()));
                            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                            return;
                        }
                    }
                });
            }
        });
        Ok(WebhookServer { url, received })
    }
}

async fn a_breach_reaches_the_webhook(c: &Cluster, webhook: &WebhookServer) -> Result<()> {
    use hmac::Mac;
    let api = c.http.clone();
    for _ in 0..5 {
        let r = api.anonymous().login("admin", "not-the-password").await?;
        ensure!(r.status == 401, "{r}");
    }
    let (head, body) = wait_for(Duration::from_secs(30), "the breach reaches the webhook", || async {
        Ok(webhook.received.lock().unwrap().first().cloned())
    })
    .await?;
    ensure!(head.starts_with("post /breach "), "{head}");
    ensure!(head.contains("\r\nx-api-key: k-42"), "the configured header: {head}");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes())?;
    mac.update(&body);
    let expected = format!("x-tessera-signature: sha256={}", hex::encode(mac.finalize().into_bytes()));
    ensure!(head.contains(&expected), "the signature ({expected}): {head}");
    let payload: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(payload["type"] == "brute_force_attack" && payload["severity"] == "critical", "{payload}");
    let id = payload["incident_id"].as_str().unwrap_or_default().to_string();
    wait_for(Duration::from_secs(30), "the incident records the delivery", || async {
        let r = api.get(&format!("{C}/breaches/{id}")).await?.ensure_status(200)?;
        Ok((r.json["webhook"]["status"] == "delivered").then_some(()))
    })
    .await?;
    Ok(())
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let grant = json!({"subject_id": "user-1234", "purpose": "marketing", "granted": true, "source": "signup_form", "version": "3"});
    let r = api.post(&format!("{C}/consent"), &grant).await?.ensure_status(200)?;
    ensure!(r.json["consent_id"].as_str().is_some_and(|id| id.starts_with("con-")), "{r}");
    api.post(&format!("{C}/consent"), &json!({"subject_id": "user-1234", "purpose": "do_not_sell", "granted": true}))
        .await?
        .ensure_status(200)?;
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
    let actions: Vec<&str> =
        history.json["history"].as_array().map(|h| h.iter().filter_map(|e| e["action"].as_str()).collect()).unwrap_or_default();
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
