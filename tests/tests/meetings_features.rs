//! Scenario: the meetings application's webhooks, organizations and privacy
//! operations on a real cluster (compliance on).
//!
//! - Webhooks: deliveries to a local receiver (allowed by the fixture's
//!   `MEETINGS_WEBHOOK_ALLOW_PRIVATE=true`) are signed (HMAC-SHA256 of
//!   `<timestamp>.<body>` under the webhook's secret, the timestamp fresh);
//!   a receiver that fails is retried with
//!   backoff; a delivery still pending when the app is killed is sent by the
//!   next instance; the delivery log says what happened.
//! - Organizations: unique slugs, invitations by role, mailed through a
//!   stand-in for the mail service (retried after a failure, one request per
//!   mail, the key as bearer token), usage computed from the meetings and
//!   transcripts.
//! - Privacy: consent and CCPA choices recorded in Tessera's compliance API,
//!   an export of the caller's data, and account deletion with an erasure
//!   certificate, after which the account's tokens and password fail.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tessera_tests::meetings::{MeetingsApp, register_and_login};
use tessera_tests::{Cluster, ClusterOptions, json, wait_for};

const PASSWORD: &str = "correct horse battery";
const SECRET: &str = "whsec-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_features() {
    let opts = ClusterOptions { router_env: vec![("SERVICE_COMPLIANCE_ENABLED".into(), "true".into())], ..ClusterOptions::default() };
    let cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("meetings_features scenario failed: {e:?}");
    }
}

/// What the receiver got: event, delivery id, body, and whether the signature
/// matched with a fresh timestamp.
#[derive(Clone, Debug)]
struct Received {
    event: String,
    delivery: String,
    body: Value,
    signed: bool,
}

#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    /// Requests to answer 500 before accepting.
    fail_first: Arc<Mutex<u32>>,
}

async fn receive(axum::extract::State(r): axum::extract::State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    {
        let mut fail = r.fail_first.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    }
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // `t=<t>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, `t` as in X-Tessera-Timestamp
    // and within five minutes of now.
    let t = header("x-tessera-timestamp");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    let fresh = t.parse::<u64>().is_ok_and(|t| t.abs_diff(now) <= 300);
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("any key length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(&body);
    let expected = format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()));
    let got = Received {
        event: header("x-tessera-event"),
        delivery: header("x-tessera-delivery"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        signed: fresh && header("x-tessera-signature") == expected,
    };
    r.got.lock().unwrap().push(got);
    StatusCode::NO_CONTENT
}

/// Serves the receiver on `addr` until the task is aborted.
async fn serve(receiver: Receiver, listener: tokio::net::TcpListener) {
    let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(receiver);
    let _ = axum::serve(listener, app).await;
}

const MAIL_KEY: &str = "re_test_0123456789";

/// A mail the stand-in mail service accepted.
#[derive(Clone, Debug)]
struct Mail {
    authorization: String,
    idempotency_key: String,
    body: Value,
}

#[derive(Clone, Default)]
struct Mailbox {
    got: Arc<Mutex<Vec<Mail>>>,
    attempts: Arc<Mutex<u32>>,
    /// Requests to answer 500 before accepting.
    fail_first: Arc<Mutex<u32>>,
}

async fn receive_mail(axum::extract::State(m): axum::extract::State<Mailbox>, headers: HeaderMap, body: Bytes) -> StatusCode {
    *m.attempts.lock().unwrap() += 1;
    {
        let mut fail = m.fail_first.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    m.got.lock().unwrap().push(Mail { authorization: header("authorization"), idempotency_key: header("idempotency-key"), body });
    StatusCode::OK
}

async fn serve_mail(mailbox: Mailbox, listener: tokio::net::TcpListener) {
    let app = axum::Router::new().route("/emails", axum::routing::post(receive_mail)).with_state(mailbox);
    let _ = axum::serve(listener, app).await;
}

fn refused(resp: tessera_tests::Resp, status: u16, code: &str) -> Result<()> {
    ensure!(resp.status == status && resp.json["error"] == code, "expected {status} {code}, got {resp}");
    Ok(())
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    let mut a = MeetingsApp::start(cluster, "meetings", "a", &[]).await?;
    let api = a.http();
    let ada = register_and_login(&api, "ada@example.com", PASSWORD, "Ada").await?;

    // --- Webhooks -------------------------------------------------------
    let port = tessera_tests::pick_port()?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let receiver = Receiver::default();
    *receiver.fail_first.lock().unwrap() = 1;
    let server = tokio::spawn(serve(receiver.clone(), tokio::net::TcpListener::bind(addr).await?));
    let url = format!("http://{addr}/hook");
    let hook = ada
        .http
        .post(
            "/api/v1/webhooks",
            &json!({"url": url, "events": ["meeting.started", "meeting.ended", "transcript.completed"], "secret": SECRET}),
        )
        .await?
        .ensure_status(201)?;
    let hook_id = hook.json["id"].as_str().context("webhook id")?.to_string();
    ensure!(!hook.to_string().contains(SECRET), "the secret is not answered back: {hook}");
    refused(
        ada.http.post("/api/v1/webhooks", &json!({"url": "ftp://x", "events": ["meeting.started"], "secret": SECRET})).await?,
        400,
        "validation_error",
    )?;
    refused(
        ada.http.post("/api/v1/webhooks", &json!({"url": url, "events": ["meeting.exploded"], "secret": SECRET})).await?,
        400,
        "validation_error",
    )?;
    refused(
        ada.http.post("/api/v1/webhooks", &json!({"url": url, "events": ["meeting.started"], "secret": "short"})).await?,
        400,
        "validation_error",
    )?;
    let listed = ada.http.get("/api/v1/webhooks").await?.ensure_status(200)?;
    ensure!(listed.json["total"] == 1, "{listed}");

    let m = ada.http.post("/api/v1/meetings", &json!({"title": "Hooked"})).await?.ensure_status(201)?;
    let meeting = m.json["id"].as_str().context("meeting id")?.to_string();
    ada.http.post(&format!("/api/v1/meetings/{meeting}/start"), &json!({})).await?.ensure_status(200)?;
    // The first attempt is answered 500; the retry is accepted and signed.
    let started = wait_for(Duration::from_secs(30), "meeting.started delivered", async || {
        Ok(receiver.got.lock().unwrap().iter().find(|r| r.event == "meeting.started").cloned())
    })
    .await?;
    ensure!(started.signed, "the signature matches the body: {started:?}");
    ensure!(started.body["data"]["meeting"]["id"] == meeting.as_str() && started.body["event"] == "meeting.started", "{started:?}");
    let log = ada.http.get(&format!("/api/v1/webhooks/{hook_id}/deliveries")).await?.ensure_status(200)?;
    let first = log.json["deliveries"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["id"] == started.delivery.as_str()).cloned())
        .context("in the log")?;
    ensure!(first["status"] == "delivered" && first["attempts"] == 2, "one failed attempt then delivered: {first}");

    // The receiver goes away; the meeting ends; the app is killed while the deliveries are pending.
    server.abort();
    let _ = server.await;
    ada.http.post(&format!("/api/v1/meetings/{meeting}/stop"), &json!({})).await?.ensure_status(200)?;
    let deliveries = format!("/api/v1/webhooks/{hook_id}/deliveries");
    wait_for(Duration::from_secs(30), "a failed attempt of meeting.ended is logged", async || {
        let log = ada.http.get(&deliveries).await?;
        let failed_once = |d: &Value| d["event"] == "meeting.ended" && d["status"] == "pending" && d["attempts"].as_u64() >= Some(1);
        Ok(log.json["deliveries"].as_array().is_some_and(|all| all.iter().any(failed_once)).then_some(()))
    })
    .await?;
    a.kill();
    let server = tokio::spawn(serve(receiver.clone(), tokio::net::TcpListener::bind(addr).await?));
    // Instance b sends mail, to a local stand-in for the mail service that fails once.
    let mail_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mail_url = format!("http://{}/emails", mail_listener.local_addr()?);
    let mailbox = Mailbox::default();
    *mailbox.fail_first.lock().unwrap() = 1;
    let mail_server = tokio::spawn(serve_mail(mailbox.clone(), mail_listener));
    let b = MeetingsApp::start(cluster, "meetings", "b", &[("EMAIL_SERVICE_API_KEY", MAIL_KEY), ("EMAIL_SERVICE_URL", &mail_url)]).await?;
    for event in ["meeting.ended", "transcript.completed"] {
        let got = wait_for(Duration::from_secs(60), &format!("{event} delivered by the next instance"), async || {
            Ok(receiver.got.lock().unwrap().iter().find(|r| r.event == event).cloned())
        })
        .await?;
        ensure!(got.signed, "{got:?}");
    }
    let ids: Vec<String> = receiver.got.lock().unwrap().iter().map(|r| r.delivery.clone()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ensure!(unique.len() == ids.len(), "no delivery arrived twice: {ids:?}");
    server.abort();
    let api = b.http();
    let ada_http = ada.on(&api);

    // --- Organizations --------------------------------------------------
    let bob = register_and_login(&api, "bob@example.com", PASSWORD, "Bob").await?;
    let org = ada_http.post("/api/v1/organizations", &json!({"name": "Acme", "slug": "acme"})).await?.ensure_status(201)?;
    let org_id = org.json["id"].as_str().context("org id")?.to_string();
    refused(bob.http.post("/api/v1/organizations", &json!({"name": "Acme 2", "slug": "acme"})).await?, 409, "conflict")?;
    refused(bob.http.post("/api/v1/organizations", &json!({"name": "Bad", "slug": "Not A Slug"})).await?, 400, "validation_error")?;
    refused(bob.http.get(&format!("/api/v1/organizations/{org_id}")).await?, 404, "not_found")?;
    let invited = ada_http
        .post(&format!("/api/v1/organizations/{org_id}/members"), &json!({"email": "bob@example.com", "role": "viewer"}))
        .await?
        .ensure_status(201)?;
    ensure!(invited.json["member_added"] == true && invited.json["delivery"] == "queued", "{invited}");
    let pending = ada_http
        .post(&format!("/api/v1/organizations/{org_id}/members"), &json!({"email": "carol@example.com", "role": "editor"}))
        .await?
        .ensure_status(201)?;
    ensure!(pending.json["member_added"] == false && pending.json["delivery"] == "queued", "{pending}");
    // Both invitations are mailed (the service's first answer, a 500, is retried), once each.
    let mails = wait_for(Duration::from_secs(30), "both invitations mailed", async || {
        let got = mailbox.got.lock().unwrap().clone();
        Ok((got.len() >= 2).then_some(got))
    })
    .await?;
    ensure!(*mailbox.attempts.lock().unwrap() == 3 && mails.len() == 2, "one failed attempt, then one request per mail: {mails:?}");
    for mail in &mails {
        ensure!(mail.authorization == format!("Bearer {MAIL_KEY}") && !mail.idempotency_key.is_empty(), "{mail:?}");
        ensure!(mail.body["subject"].as_str().is_some_and(|s| s.contains("Acme") && s.contains("Ada")), "{mail:?}");
    }
    let to = |addr: &str| mails.iter().find(|m| m.body["to"][0] == addr).cloned();
    let bob_mail = to("bob@example.com").context("bob's mail")?;
    ensure!(bob_mail.body["text"].as_str().is_some_and(|t| t.contains("as viewer") && t.contains("member already")), "{bob_mail:?}");
    let carol_mail = to("carol@example.com").context("carol's mail")?;
    ensure!(carol_mail.body["text"].as_str().is_some_and(|t| t.contains("as editor") && t.contains("register")), "{carol_mail:?}");
    ensure!(!b.log_text().contains(MAIL_KEY), "the mail key is never logged");
    mail_server.abort();
    refused(
        bob.http.post(&format!("/api/v1/organizations/{org_id}/members"), &json!({"email": "dan@example.com", "role": "editor"})).await?,
        403,
        "forbidden",
    )?;
    // Carol registers after her invitation: she is a member with the invited role.
    let carol = register_and_login(&api, "carol@example.com", PASSWORD, "Carol").await?;
    let seen = carol.http.get(&format!("/api/v1/organizations/{org_id}")).await?.ensure_status(200)?;
    ensure!(seen.json["role"] == "editor", "{seen}");
    bob.http.get(&format!("/api/v1/organizations/{org_id}")).await?.ensure_status(200)?;
    // An organization's meeting is visible to its members; usage counts it.
    let shared = ada_http
        .post("/api/v1/meetings", &json!({"title": "All hands", "description": "twelve bytes", "organization_id": org_id}))
        .await?
        .ensure_status(201)?;
    let shared_id = shared.json["id"].as_str().context("meeting id")?.to_string();
    bob.http.get(&format!("/api/v1/meetings/{shared_id}")).await?.ensure_status(200)?;
    let usage = ada_http.get(&format!("/api/v1/organizations/{org_id}/usage")).await?.ensure_status(200)?;
    ensure!(usage.json["meetings"] == 1 && usage.json["members"] == 3, "{usage}");
    ensure!(usage.json["storage_bytes"] == ("All hands".len() + "twelve bytes".len()) as u64, "{usage}");
    ensure!(usage.json["minutes_transcribed"].as_f64() == Some(0.0), "{usage}");

    // --- Privacy --------------------------------------------------------
    let consent = ada_http.get("/api/v1/privacy/consent").await?.ensure_status(200)?;
    ensure!(consent.json["marketing"] == false && consent.json["analytics"] == false, "{consent}");
    let set = ada_http.put("/api/v1/privacy/consent", &json!({"marketing": true, "analytics": false})).await?.ensure_status(200)?;
    ensure!(set.json["marketing"] == true, "{set}");
    refused(ada_http.put("/api/v1/privacy/consent", &json!({"marketing": "yes"})).await?, 400, "validation_error")?;
    let ccpa = ada_http.put("/api/v1/privacy/ccpa", &json!({"do_not_sell": true, "ca_resident": true})).await?.ensure_status(200)?;
    ensure!(ccpa.json["do_not_sell"] == true, "{ccpa}");
    // Tessera's compliance API holds the consent.
    let records = cluster.http.get(&format!("/api/v1/compliance/consent/{}", ada.id)).await?.ensure_status(200)?;
    ensure!(records.json.to_string().contains("\"purpose\":\"marketing\""), "{records}");
    let export = ada_http.post("/api/v1/privacy/export", &json!({})).await?.ensure_status(200)?;
    ensure!(export.json["user"]["email"] == "ada@example.com", "{export}");
    ensure!(export.json["meetings"].as_array().map(Vec::len) == Some(2) && export.json["consent"]["marketing"] == true, "{export}");
    ensure!(!export.to_string().contains(SECRET), "no webhook secret in the export");
    refused(ada_http.post("/api/v1/privacy/delete", &json!({"confirm": false})).await?, 400, "validation_error")?;
    refused(ada_http.post("/api/v1/privacy/delete", &json!({})).await?, 400, "validation_error")?;
    let deleted = ada_http.post("/api/v1/privacy/delete", &json!({"confirm": true})).await?.ensure_status(200)?;
    ensure!(deleted.json["deleted"] == true && deleted.json["erasure_certificate_id"].is_string(), "{deleted}");
    refused(ada_http.get("/api/v1/users/me").await?, 401, "unauthorized")?;
    refused(api.post("/api/v1/auth/login", &json!({"email": "ada@example.com", "password": PASSWORD})).await?, 401, "unauthorized")?;
    refused(bob.http.get(&format!("/api/v1/meetings/{shared_id}")).await?, 404, "not_found")?;
    // The email is free again.
    register_and_login(&api, "ada@example.com", PASSWORD, "Ada again").await?;
    Ok(())
}
