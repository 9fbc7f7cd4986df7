//! The consent part of the compliance interface (spec 02), over the meta
//! group's state machine: a subject's consents change, every change is kept,
//! withdrawals and checks follow, the do-not-sell list and statistics count
//! what is recorded, and erasure forgets the subject.

use serde_json::json;

use super::harness::TestRouter;

const C: &str = "/api/v1/compliance";

async fn enabled_router() -> TestRouter {
    TestRouter::with_config(2, |c| c.compliance.enabled = true).await
}

#[tokio::test]
async fn consent_lifecycle_keeps_every_change() {
    let router = enabled_router().await;
    let grant = json!({"subject_id": "alice", "purpose": "marketing", "granted": true, "source": "web_form", "version": "2.1", "metadata": {"ip": "10.0.0.1"}});
    let recorded = router.post(&format!("{C}/consent"), &grant).await.expect(200);
    assert_eq!((recorded["success"].clone(), recorded["granted"].clone()), (json!(true), json!(true)));
    assert!(recorded["consent_id"].as_str().is_some_and(|id| id.starts_with("con-")), "{recorded}");
    router.post(&format!("{C}/consent"), &json!({"subject_id": "alice", "purpose": "analytics", "granted": false})).await.expect(200);

    let check = router.get(&format!("{C}/consent/alice/check/marketing")).await.expect(200);
    assert_eq!(check, json!({"subject_id": "alice", "purpose": "marketing", "granted": true}));
    assert_eq!(router.get(&format!("{C}/consent/alice/check/analytics")).await.expect(200)["granted"], json!(false));
    assert_eq!(router.get(&format!("{C}/consent/alice/check/research")).await.expect(200)["granted"], json!(false));

    let withdrawn = router
        .call(axum::http::Method::DELETE, &format!("{C}/consent/alice/marketing"), Some(&json!({"reason": "asked by email"})))
        .await
        .expect(200);
    assert_eq!(withdrawn["granted"], json!(false));
    assert_eq!(router.get(&format!("{C}/consent/alice/check/marketing")).await.expect(200)["granted"], json!(false));
    router.delete(&format!("{C}/consent/alice/research")).await.expect(404);

    let history = router.get(&format!("{C}/consent/alice/history")).await.expect(200);
    let actions: Vec<(String, String)> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["purpose"].as_str().unwrap().to_string(), h["action"].as_str().unwrap().to_string()))
        .collect();
    let expected = [("marketing", "granted"), ("analytics", "denied"), ("marketing", "withdrawn")];
    assert_eq!(actions, expected.map(|(p, a)| (p.to_string(), a.to_string())));
    assert_eq!(history["history"][2]["reason"], json!("asked by email"));

    let status = router.get(&format!("{C}/consent/alice")).await.expect(200);
    assert_eq!(status["total"], json!(2));
    let marketing = status["consents"].as_array().unwrap().iter().find(|c| c["purpose"] == "marketing").cloned().unwrap();
    assert_eq!((marketing["source"].clone(), marketing["version"].clone()), (json!("web_form"), json!("2.1")));
    assert_eq!((marketing["granted"].clone(), marketing["withdrawal_reason"].clone()), (json!(false), json!("asked by email")));
    let export = router.get(&format!("{C}/consent/alice/export")).await.expect(200);
    assert_eq!(export["history"].as_array().map(Vec::len), Some(3));

    // Several purposes at once (the alternate shape), with an expiry in the past: not active.
    let alt = json!({"subject_id": "bob", "purposes": ["marketing_emails", "do_not_sell"], "lawful_basis": "consent", "expiry": "2020-01-01T00:00:00Z"});
    let both = router.post(&format!("{C}/consent"), &alt).await.expect(200);
    assert_eq!(both["consents"].as_array().map(Vec::len), Some(2));
    assert_eq!(router.get(&format!("{C}/consent/bob/check/marketing_emails")).await.expect(200)["granted"], json!(false), "lapsed");
    router.post("/api/v1/ccpa/opt-out", &json!({"consumer_id": "carol"})).await.expect(200);

    let list = router.get(&format!("{C}/do-not-sell?page=1&limit=10")).await.expect(200);
    let opted: Vec<&str> = list["subjects"].as_array().unwrap().iter().map(|s| s["subject_id"].as_str().unwrap()).collect();
    assert_eq!((opted, list["total"].clone()), (vec!["bob", "carol"], json!(2)));
    assert_eq!(router.get(&format!("{C}/do-not-sell?page=2&limit=1")).await.expect(200)["subjects"][0]["subject_id"], json!("carol"));

    let stats = router.get(&format!("{C}/consent/stats")).await.expect(200);
    assert_eq!((stats["total_subjects"].clone(), stats["total_records"].clone()), (json!(3), json!(5)));
    assert_eq!((stats["total_history_entries"].clone(), stats["do_not_sell_count"].clone()), (json!(6), json!(2)));
    assert_eq!(stats["consents_by_purpose"]["marketing"], json!([0, 1]));

    let erased = router.delete(&format!("{C}/consent/alice")).await.expect(200);
    assert_eq!(erased["deleted_records"], json!(2));
    assert_eq!(router.get(&format!("{C}/consent/alice/history")).await.expect(200)["total"], json!(0));
    assert_eq!(router.get(&format!("{C}/consent/stats")).await.expect(200)["total_subjects"], json!(2));
}

#[tokio::test]
async fn bad_consent_requests_are_refused_and_the_interface_can_be_off() {
    let router = enabled_router().await;
    router.post(&format!("{C}/consent"), &json!({"subject_id": "x"})).await.expect(400);
    router.post(&format!("{C}/consent"), &json!({"subject_id": "", "purpose": "marketing"})).await.expect(400);
    router.post(&format!("{C}/consent"), &json!({"subject_id": "x", "purpose": "Not A Purpose"})).await.expect(400);
    router.get(&format!("{C}/do-not-sell?limit=0")).await.expect(400);

    let off = TestRouter::new(1).await;
    let answer = off.get(&format!("{C}/consent/stats")).await.expect(404);
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("SERVICE_COMPLIANCE_ENABLED")), "{answer}");
}

/// Every consent change is appended to the audit trail's hash chain, which
/// verifies; a stored entry changed behind Raft's back breaks the chain at
/// that entry, and the verification says which.
#[tokio::test]
async fn the_audit_chain_records_consent_changes_and_detects_tampering() {
    let router = enabled_router().await;
    router.post(&format!("{C}/consent"), &json!({"subject_id": "dora", "purpose": "research"})).await.expect(200);
    router.post(&format!("{C}/consent"), &json!({"subject_id": "erik", "purpose": "profiling", "granted": false})).await.expect(200);
    router.delete(&format!("{C}/consent/dora/research")).await.expect(200);

    let trail = router.get(&format!("{C}/audit/dora")).await.expect(200);
    let kinds: Vec<&str> = trail["entries"].as_array().unwrap().iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["consent_granted", "consent_withdrawn"]);
    assert_eq!(trail["entries"][0]["actor"], json!("admin"));
    assert_eq!(trail["entries"][1]["prev_hash"].as_str().map(str::len), Some(64));
    let ok = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!((ok["valid"].clone(), ok["entries_verified"].clone()), (json!(true), json!(3)), "{ok}");

    // Entry 2 (erik's) is rewritten in storage: its details no longer match its hash.
    router.rewrite_audit_entry("erik", |e| e.details["granted"] = json!(true));
    let broken = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!((broken["valid"].clone(), broken["entries_verified"].clone()), (json!(false), json!(1)), "{broken}");
    assert!(broken["message"].as_str().is_some_and(|m| m.contains("aud-000000000002")), "{broken}");
}

/// Columns are classified one at a time or in a batch, by level name (any
/// case) or number; listings filter by table; every change is audited.
#[tokio::test]
async fn columns_are_classified_listed_and_audited() {
    let router = enabled_router().await;
    let one = json!({"table": "patients", "column": "diagnosis", "classification": "PHI", "reason": "health data"});
    let answer = router.post(&format!("{C}/classify"), &one).await.expect(200);
    assert_eq!(
        (answer["success"].clone(), answer["level"].clone(), answer["classification"].clone()),
        (json!(true), json!(3), json!("PHI"))
    );
    let batch = json!({"classifications": [
        {"table": "patients", "column": "email", "classification": "pii"},
        {"table": "orders", "column": "total", "classification": 1},
    ]});
    assert_eq!(router.post(&format!("{C}/classify"), &batch).await.expect(200)["classified"], json!(2));
    router.post(&format!("{C}/classify"), &json!({"table": "t", "column": "c", "classification": "Secretish"})).await.expect(400);
    router.post(&format!("{C}/classify"), &json!({"table": "t", "column": "c", "classification": 6})).await.expect(400);
    router.post(&format!("{C}/classify"), &json!({"classifications": []})).await.expect(400);

    let all = router.get(&format!("{C}/classifications")).await.expect(200);
    assert_eq!(all["total_count"], json!(3));
    let patients = router.get(&format!("{C}/classifications?table=patients")).await.expect(200);
    let columns: Vec<(&str, &str)> = patients["classifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["column"].as_str().unwrap(), c["classification"].as_str().unwrap()))
        .collect();
    assert_eq!(columns, [("diagnosis", "PHI"), ("email", "PII")]);
    let verified = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!((verified["valid"].clone(), verified["entries_verified"].clone()), (json!(true), json!(3)));
}

/// Five failed logins (real ones, through the login route) raise a brute-force
/// alert, which opens a critical breach incident; acknowledging and resolving
/// follow the state machine and refuse the moves it does not allow.
#[tokio::test]
async fn failed_logins_open_an_incident_that_follows_its_state_machine() {
    let router = enabled_router().await;
    for _ in 0..5 {
        router.post("/api/v1/auth/login", &json!({"username": "admin", "password": "not the password"})).await.expect(401);
    }
    let list = router.get(&format!("{C}/breaches")).await.expect(200);
    assert_eq!((list["total_count"].clone(), list["open_count"].clone()), (json!(1), json!(1)), "{list}");
    let incident = list["incidents"][0].clone();
    assert_eq!((incident["type"].clone(), incident["severity"].clone()), (json!("brute_force_attack"), json!("critical")));
    let id = incident["incident_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("inc-") && id.len() == 16, "{id}");
    assert_eq!(incident["involved_ips"], json!(["127.0.0.1"]));

    // Resolving needs nothing first; acknowledging after the end is refused.
    let acked = router
        .post(&format!("{C}/breaches/{id}/acknowledge"), &json!({"acknowledged_by": "sec-team", "notes": "looking"}))
        .await
        .expect(200);
    assert_eq!(acked["status"], json!("acknowledged"));
    router.post(&format!("{C}/breaches/{id}/acknowledge"), &json!({"acknowledged_by": "sec-team"})).await.expect(409);
    let resolved = router
        .post(&format!("{C}/breaches/{id}/resolve"), &json!({"resolution_notes": "password reset", "false_positive": false}))
        .await
        .expect(200);
    assert_eq!(resolved["status"], json!("resolved"));
    router.post(&format!("{C}/breaches/{id}/resolve"), &json!({"false_positive": true})).await.expect(409);
    router.post(&format!("{C}/breaches/{id}/acknowledge"), &json!({})).await.expect(409);
    router.post(&format!("{C}/breaches/inc-000000000099/resolve"), &json!({})).await.expect(404);

    let got = router.get(&format!("{C}/breaches/{id}")).await.expect(200);
    assert_eq!((got["acknowledged_by"].clone(), got["resolution_notes"].clone()), (json!("sec-team"), json!("password reset")));
    let stats = router.get(&format!("{C}/breaches/stats")).await.expect(200);
    assert_eq!((stats["total_incidents"].clone(), stats["resolved_incidents"].clone()), (json!(1), json!(1)));
    assert_eq!((stats["by_severity"]["critical"].clone(), stats["by_type"]["brute_force_attack"].clone()), (json!(1), json!(1)));
    assert_eq!(router.get(&format!("{C}/breaches?status=open")).await.expect(200)["total_count"], json!(0));
    router.get(&format!("{C}/breaches?status=closed")).await.expect(400);
    // Detected just now: a cleanup keeps it (ended incidents are kept 30 days).
    assert_eq!(router.post(&format!("{C}/breaches/cleanup"), &json!({})).await.expect(200)["removed"], json!(0));
    let verified = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!(
        (verified["valid"].clone(), verified["entries_verified"].clone()),
        (json!(true), json!(3)),
        "detected, acknowledged, resolved"
    );
}

/// A breach from real failed logins is posted to the webhook: the first
/// request fails (500), the retry after a backoff is taken; it carries the
/// configured header and the HMAC-SHA256 signature of its body; the incident
/// records the delivery, and a second pass sends nothing more.
#[tokio::test]
async fn a_breach_reaches_the_webhook_signed_after_a_retry() {
    use std::sync::{Arc, Mutex};

    type Seen = Arc<Mutex<Vec<(axum::http::HeaderMap, Vec<u8>)>>>;
    let seen: Seen = Arc::default();
    let hook = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(|axum::extract::State(seen): axum::extract::State<Seen>, headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                let mut seen = seen.lock().unwrap();
                seen.push((headers, body.to_vec()));
                if seen.len() == 1 { axum::http::StatusCode::INTERNAL_SERVER_ERROR } else { axum::http::StatusCode::NO_CONTENT }
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, hook).await });

    let router = TestRouter::with_config(2, |c| {
        c.compliance.enabled = true;
        c.compliance.breach_webhook_url = Some(url.clone());
        c.compliance.breach_webhook_secret = Some("hook-secret".into());
    })
    .await;
    for _ in 0..5 {
        router.post("/api/v1/auth/login", &json!({"username": "admin", "password": "not the password"})).await.expect(401);
    }
    let webhook =
        crate::services::compliance::webhooks::Webhook::new(url, Some("hook-secret".into()), vec![("X-Api-Key".into(), "k-123".into())])
            .unwrap();
    assert_eq!(crate::services::compliance::webhooks::deliver_due(&router.state, &webhook).await.unwrap(), 1);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one failed request, one retry");
    let (headers, body) = &seen[1];
    assert_eq!(headers["x-api-key"], "k-123");
    assert_eq!(headers["x-tessera-signature"].to_str().unwrap(), crate::services::compliance::webhooks::signature("hook-secret", body));
    let payload: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        (payload["type"].clone(), payload["severity"].clone(), payload["status"].clone()),
        (json!("brute_force_attack"), json!("critical"), json!("open"))
    );
    assert_eq!(payload["involved_ips"], json!(["127.0.0.1"]));
    // The alternate payload's fields ride in the same body.
    assert_eq!((payload["event_type"].clone(), payload["breach_type"].clone()), (json!("security_breach"), json!("brute_force_attack")));
    assert_eq!(payload["timestamp"], payload["detected_at"]);
    assert!(payload["recommended_action"].as_str().is_some_and(|a| a.contains("block the source")), "{payload}");
    assert_eq!(payload["instance_id"], json!(router.state.router_instance));
    assert_eq!(payload["details"]["incident_id"], payload["incident_id"]);
    let id = payload["incident_id"].as_str().unwrap().to_string();
    let incident = router.get(&format!("{C}/breaches/{id}")).await.expect(200);
    assert_eq!(incident["affected_records_estimate"], json!(1), "{incident}");
    assert_eq!(incident["hipaa_notification_deadline"], json!(null), "fewer than 500 affected: no HIPAA media notice");
    assert_eq!(
        (incident["webhook"]["status"].clone(), incident["webhook"]["attempts"].clone()),
        (json!("delivered"), json!(2)),
        "{incident}"
    );
    assert_eq!(crate::services::compliance::webhooks::deliver_due(&router.state, &webhook).await.unwrap(), 0, "delivered once");
}

/// Failed logins, a refused permission and the alert the failures raise are
/// security events, newest first, filtered by type.
#[tokio::test]
async fn security_events_record_failed_logins_refusals_and_alerts() {
    let router = enabled_router().await;
    router
        .post("/api/v1/admin/users", &json!({"username": "vic", "email": "v@example.com", "password": "Vic-Pass-1234!", "role": "viewer"}))
        .await
        .expect(201);
    let login = router.post("/api/v1/auth/login", &json!({"username": "vic", "password": "Vic-Pass-1234!"})).await.expect(200);
    let viewer = router.with_token(login["token"].as_str().unwrap());
    viewer
        .post("/api/v1/admin/users", &json!({"username": "x", "email": "x@example.com", "password": "Xx-Pass-1234!", "role": "admin"}))
        .await
        .expect(403);
    for _ in 0..5 {
        router.post("/api/v1/auth/login", &json!({"username": "vic", "password": "wrong"})).await.expect(401);
    }
    let all = router.get(&format!("{C}/security-events")).await.expect(200);
    let types: Vec<&str> = all["events"].as_array().unwrap().iter().filter_map(|e| e["event_type"].as_str()).collect();
    assert_eq!(types.iter().filter(|t| **t == "failed_login").count(), 5, "{all}");
    assert_eq!(types.iter().filter(|t| **t == "brute_force_attack").count(), 1, "{all}");
    assert_eq!(types.last(), Some(&"unauthorized_access"), "oldest last: {all}");
    let refused = router.get(&format!("{C}/security-events?event_type=unauthorized_access")).await.expect(200);
    let e = &refused["events"][0];
    assert_eq!(
        (e["severity"].clone(), e["user_id"].clone(), e["source_ip"].clone()),
        (json!("medium"), json!("vic"), json!("127.0.0.1")),
        "{refused}"
    );
    assert!(e["description"].as_str().unwrap().contains("POST /api/v1/admin/users"), "{e}");
    let brute = router.get(&format!("{C}/security-events?event_type=brute_force_attack&limit=1")).await.expect(200);
    assert_eq!((brute["count"].clone(), brute["events"][0]["severity"].clone()), (json!(1), json!("critical")));
    router.get(&format!("{C}/security-events?limit=0")).await.expect(400);
}

/// An incident's report: JSON with the timeline, the notification duties and
/// the failed logins that led to it; the same as a real PDF document.
#[tokio::test]
async fn an_incident_report_comes_as_json_and_as_pdf() {
    let router = enabled_router().await;
    for _ in 0..5 {
        router.post("/api/v1/auth/login", &json!({"username": "admin", "password": "not the password"})).await.expect(401);
    }
    let id = router.get(&format!("{C}/breaches")).await.expect(200)["incidents"][0]["incident_id"].as_str().unwrap().to_string();
    router.post(&format!("{C}/breaches/{id}/acknowledge"), &json!({"acknowledged_by": "sec-team"})).await.expect(200);
    let report = router.get(&format!("{C}/breaches/{id}/report")).await.expect(200);
    assert_eq!(report["report_id"], json!(format!("RPT-{id}")));
    let events: Vec<&str> = report["timeline"].as_array().unwrap().iter().filter_map(|t| t["event"].as_str()).collect();
    assert_eq!(events, ["detected", "acknowledged"], "{report}");
    assert_eq!(report["notification"]["overdue"], json!(false));
    let related = report["related_security_events"].as_array().unwrap();
    assert_eq!(related.iter().filter(|e| e["event_type"] == "failed_login").count(), 5, "{report}");
    router.get(&format!("{C}/breaches/{id}/report?format=xml")).await.expect(400);
    router.get(&format!("{C}/breaches/inc-000000000099/report")).await.expect(404);

    let (status, headers, body) = router.raw(axum::http::Method::GET, &format!("{C}/breaches/{id}/report?format=pdf")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/pdf");
    assert!(body.starts_with(b"%PDF-") && body.trim_ascii_end().ends_with(b"%%EOF"), "a PDF document");
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(&format!("Breach incident report RPT-{id}")) && text.contains("brute_force_attack"),
        "the report's text is on the page"
    );
}

/// The framework status is judged from the real state: with nothing
/// configured, encryption and MFA are not met; classifying a column and
/// verifying the audit chain show in the evidence.
#[tokio::test]
async fn framework_status_and_soc2_evidence_come_from_the_clusters_state() {
    let router = enabled_router().await;
    // Restricted (level 5) columns are encrypted at rest: refused while the node does not encrypt.
    let refused = router.post(&format!("{C}/classify"), &json!({"table": "patients", "column": "ssn", "level": 5})).await.expect(409);
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("encrypt at rest")), "{refused}");
    router.post(&format!("{C}/classify"), &json!({"table": "patients", "column": "ssn", "level": 4})).await.expect(200);
    router.post(&format!("{C}/consent"), &json!({"subject_id": "pat", "purpose": "research"})).await.expect(200);
    let status = router.get("/api/v1/admin/compliance/status").await.expect(200);
    let frameworks = status["frameworks"].as_array().unwrap();
    let names: Vec<&str> = frameworks.iter().filter_map(|f| f["framework"].as_str()).collect();
    assert_eq!(names, ["GDPR", "CCPA", "HIPAA", "FERPA", "SOC2"]);
    let control = |fw: &str, c: &str| {
        frameworks.iter().find(|f| f["framework"] == fw).unwrap()["controls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["control"] == c)
            .unwrap()
            .clone()
    };
    assert_eq!(control("HIPAA", "encryption_in_transit")["status"], "not_met", "no TLS configured");
    assert_eq!(control("HIPAA", "data_classification")["status"], "met", "{status}");
    assert_eq!(control("SOC2", "audit_trail")["status"], "met");
    assert_eq!(control("SOC2", "admin_mfa")["evidence"], "0 of 1 admins use MFA");
    assert_eq!(control("GDPR", "right_to_erasure")["status"], "met");
    let ferpa = frameworks.iter().find(|f| f["framework"] == "FERPA").unwrap();
    assert_eq!(ferpa["status"], "compliant", "{ferpa}");
    let soc2 = router.get("/api/v1/admin/compliance/soc2-report").await.expect(200);
    assert_eq!((soc2["access"]["users"].clone(), soc2["access"]["admins"].clone()), (json!(1), json!(1)), "{soc2}");
    assert_eq!(soc2["incident_response"]["incidents"]["total_incidents"], 0);
}

/// Puts data of subject `alice` (and of `bob`) in every store: key-value
/// entries by key and by value field, documents by id and by field, SQL rows in
/// two databases, graph nodes with an edge.
async fn seed_subjects(router: &TestRouter) {
    for (key, value) in [
        ("user:alice", json!({"plan": "pro"})),
        ("orders/1", json!({"user_id": "alice", "total": 5})),
        ("user:bob", json!({"plan": "free"})),
    ] {
        router.post("/api/v1/kv/keys", &json!({"key": key, "value": value})).await.expect(200);
    }
    let docs = "/api/v1/documents/collections";
    router.post(docs, &json!({"name": "profiles"})).await;
    router.post(&format!("{docs}/profiles/documents"), &json!({"id": "alice", "document": {"city": "Oslo"}})).await.expect(201);
    router
        .post(&format!("{docs}/profiles/documents"), &json!({"id": "p2", "document": {"email": "alice", "city": "Rome"}}))
        .await
        .expect(201);
    router.post(&format!("{docs}/profiles/documents"), &json!({"id": "p3", "document": {"email": "bob"}})).await.expect(201);
    for (db, sql) in [
        ("default", "CREATE TABLE accounts (id INT PRIMARY KEY, customer_id TEXT, balance INT)"),
        ("default", "INSERT INTO accounts VALUES (1, 'alice', 10), (2, 'bob', 20), (3, 'alice', 30)"),
        ("billing", "CREATE TABLE invoices (id INT PRIMARY KEY, user_id TEXT)"),
        ("billing", "INSERT INTO invoices VALUES (7, 'alice')"),
    ] {
        router.post("/api/v1/query", &json!({"sql": sql, "database": db})).await.expect(200);
    }
    router.post("/api/v1/graph/nodes", &json!({"graph": "social", "id": "alice", "label": "User"})).await.expect(201);
    router.post("/api/v1/graph/nodes", &json!({"graph": "social", "id": "bob", "label": "User"})).await.expect(201);
    router
        .post("/api/v1/graph/edges", &json!({"graph": "social", "id": "f1", "from_node": "bob", "to_node": "alice", "label": "FOLLOWS"}))
        .await
        .expect(201);
}

/// A subject's export finds their records in the key-value, document, SQL and
/// graph stores of every shard, and nobody else's; scope and format are honoured.
#[tokio::test]
async fn an_export_finds_the_subject_in_every_store() {
    let router = enabled_router().await;
    seed_subjects(&router).await;
    let export = router.post(&format!("{C}/export"), &json!({"subject_id": "alice", "format": "json"})).await.expect(200);
    assert!(export["export_id"].as_str().unwrap().starts_with("EXP-"), "{export}");
    let ids = |store: &str| {
        let mut v: Vec<String> = export["data"][store]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| format!("{}:{}", i["location"].as_str().unwrap(), i["item_id"].as_str().unwrap()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("kv"), ["kv:orders/1", "kv:user:alice"]);
    assert_eq!(ids("document"), ["profiles:alice", "profiles:p2"]);
    assert_eq!(ids("sql"), ["billing.invoices:7", "default.accounts:1", "default.accounts:3"]);
    assert_eq!(ids("graph"), ["social:edge:f1", "social:node:alice"]);
    assert_eq!(export["total_items"], 9);
    let scoped = router
        .post(
            &format!("{C}/export"),
            &json!({"subject_id": "alice", "scope": {"type": "specific_collections", "collections": ["profiles", "billing"]}}),
        )
        .await
        .expect(200);
    assert_eq!(scoped["total_items"], 3, "{scoped}");
    let (status, headers, body) = router.raw(axum::http::Method::GET, "/api/v1/gdpr/export?subject_id=alice&format=csv").await;
    assert_eq!((status.as_u16(), headers["content-type"].to_str().unwrap()), (200, "text/csv"));
    assert_eq!(String::from_utf8(body).unwrap().lines().count(), 10, "a header and nine items");
    router.post(&format!("{C}/export"), &json!({"format": "json"})).await.expect(400);
    router.post(&format!("{C}/export"), &json!({"subject_id": "alice", "format": "yaml"})).await.expect(400);
}

/// Erasure removes the subject from every store and nobody else; the
/// deletion certificate is signed with the cluster's Ed25519 key, listed,
/// verifies (also with the public key alone), and fails once altered.
#[tokio::test]
async fn erasure_removes_the_subject_everywhere_and_certifies_it() {
    use base64::Engine as _;
    let router = enabled_router().await;
    seed_subjects(&router).await;
    let body = json!({"subject_id": "alice", "requestor": "dpo@example.com", "reason": "GDPR art. 17 request", "scope": {"type": "all"}, "secure_erase": true});
    let erased = router.call(axum::http::Method::DELETE, &format!("{C}/data-subject/alice"), Some(&body)).await.expect(200);
    let cert = erased["certificate"].clone();
    let id = cert["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("DEL-") && id.ends_with("-alice") && id.len() == "DEL-20261127081500-alice".len(), "{cert}");
    assert_eq!((cert["total_items"].clone(), cert["secure_erase_performed"].clone()), (json!(9), json!(true)), "{cert}");
    assert_eq!(
        cert["items_by_store"],
        json!({"kv": 2, "document": 2, "sql": 3, "graph": 2, "object": 0, "vector": 0, "timeseries": 0, "stream": 0})
    );
    assert!(cert["total_bytes"].as_u64().unwrap() > 0 && cert["verification_hash"].as_str().unwrap().len() == 64);

    // Nothing of alice is left; bob's records are untouched, indexes included.
    let after = router.post(&format!("{C}/export"), &json!({"subject_id": "alice"})).await.expect(200);
    assert_eq!(after["total_items"], 0, "{after}");
    let bob = router.post(&format!("{C}/export"), &json!({"subject_id": "bob"})).await.expect(200);
    assert_eq!(bob["total_items"], 4, "user:bob, p3, accounts row 2, node bob (its edge went with alice): {bob}");
    let found = router.post("/api/v1/documents/collections/profiles/query", &json!({"filter": {"email": "bob"}})).await.expect(200);
    assert_eq!(found["documents"].as_array().map(Vec::len), Some(1), "{found}");
    let rows = router.post("/api/v1/query", &json!({"sql": "SELECT id FROM accounts ORDER BY id"})).await.expect(200);
    assert_eq!(rows["data"]["rows"], json!([[2]]));

    // Listed, read and verified; the public key alone verifies it too.
    let list = router.get(&format!("{C}/certificates")).await.expect(200);
    assert_eq!(list["total_count"], 1);
    assert_eq!(router.get(&format!("{C}/certificates/{id}")).await.expect(200)["signature"], cert["signature"]);
    let verified = router.get(&format!("{C}/certificates/{id}/verify")).await.expect(200);
    assert_eq!(verified["valid"], json!(true), "{verified}");
    let key = router.get(&format!("{C}/certificates/public-key")).await.expect(200);
    assert!(key["public_key_pem"].as_str().unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));
    let pk: [u8; 32] = base64::engine::general_purpose::STANDARD.decode(key["public_key"].as_str().unwrap()).unwrap().try_into().unwrap();
    let pk = ed25519_dalek::VerifyingKey::from_bytes(&pk).unwrap();
    assert!(crate::services::compliance::erasure::check(&cert, &pk).0, "offline verification");

    // An altered certificate fails.
    let mut forged = cert.clone();
    forged["total_items"] = json!(1);
    let stored_key = format!("cert/r/{id}");
    router
        .cluster
        .store()
        .overwrite_record(tessera_api::META_GROUP, 2, stored_key.as_bytes(), &serde_json::to_vec(&forged).unwrap())
        .unwrap();
    let broken = router.get(&format!("{C}/certificates/{id}/verify")).await.expect(200);
    assert_eq!(broken["valid"], json!(false), "{broken}");
    router.get(&format!("{C}/certificates/DEL-none/verify")).await.expect(404);

    // The GDPR alias takes the subject in the body; a mismatch is refused.
    router.call(axum::http::Method::DELETE, &format!("{C}/data-subject/bob"), Some(&json!({"subject_id": "carol"}))).await.expect(400);
    let bob_erased = router.call(axum::http::Method::DELETE, "/api/v1/gdpr/erasure", Some(&json!({"subject_id": "bob"}))).await.expect(200);
    assert_eq!(bob_erased["certificate"]["total_items"], 4, "{bob_erased}");
    let trail = router.get(&format!("{C}/audit/alice")).await.expect(200);
    assert!(trail["entries"].as_array().unwrap().iter().any(|e| e["event_type"] == "data_erased"), "{trail}");
}

/// A request that deletes or reads out at least `security.mass_data_rows` rows
/// raises `mass_data_deletion` (critical) or `mass_data_export` (high), each
/// opening a breach incident.
#[tokio::test]
async fn mass_deletion_and_export_open_incidents() {
    let router = TestRouter::with_config(2, |c| {
        c.compliance.enabled = true;
        c.security.mass_data_rows = 5;
    })
    .await;
    router.post("/api/v1/query", &json!({"sql": "CREATE TABLE t (id INT PRIMARY KEY)"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "INSERT INTO t VALUES (1), (2), (3), (4), (5), (6)"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "SELECT id FROM t WHERE id < 3"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "SELECT id FROM t"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "DELETE FROM t"})).await.expect(200);
    // The alerts are recorded in the background.
    let mut types = Vec::new();
    for _ in 0..100 {
        let list = router.get(&format!("{C}/breaches")).await.expect(200);
        types = list["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["type"].as_str().unwrap().to_string(), i["severity"].as_str().unwrap().to_string()))
            .collect();
        if types.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    types.sort();
    assert_eq!(types, [("mass_data_deletion".to_string(), "critical".to_string()), ("mass_data_export".to_string(), "high".to_string())]);
    let events = router.get(&format!("{C}/security-events?event_type=mass_data_deletion")).await.expect(200);
    assert!(events["events"][0]["description"].as_str().unwrap().contains("deleted 6 rows"), "{events}");
}

/// `TRUNCATE` counts as a deletion of every row it empties: past
/// `security.mass_data_rows` it raises `mass_data_deletion`, as `DELETE` does.
#[tokio::test]
async fn a_mass_truncate_opens_a_deletion_incident() {
    let router = TestRouter::with_config(2, |c| {
        c.compliance.enabled = true;
        c.security.mass_data_rows = 5;
    })
    .await;
    router.post("/api/v1/query", &json!({"sql": "CREATE TABLE t (id INT PRIMARY KEY)"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "INSERT INTO t VALUES (1), (2), (3), (4), (5), (6)"})).await.expect(200);
    let emptied = router.post("/api/v1/query", &json!({"sql": "TRUNCATE TABLE t"})).await.expect(200);
    assert_eq!(emptied["rows_affected"], 6, "{emptied}");
    let mut events = json!(null);
    for _ in 0..100 {
        events = router.get(&format!("{C}/security-events?event_type=mass_data_deletion")).await.expect(200);
        if events["events"].as_array().is_some_and(|e| !e.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(events["events"][0]["description"].as_str().is_some_and(|d| d.contains("deleted 6 rows")), "{events}");
}

/// An admin logging in from an address never seen for them raises
/// `admin_from_unknown_ip` (high), which opens an incident; a known address does not.
#[tokio::test]
async fn an_admin_login_from_an_unknown_address_opens_an_incident() {
    let router = TestRouter::with_config(1, |c| {
        c.compliance.enabled = true;
        c.rate_limit.client_ip_header = Some("x-forwarded-for".into());
    })
    .await;
    let login = json!({"username": "admin", "password": super::harness::ADMIN_PASSWORD});
    // The harness logged in from 127.0.0.1 already: that address is known.
    router.post_with_header("/api/v1/auth/login", &login, ("x-forwarded-for", "127.0.0.1")).await.expect(200);
    assert_eq!(router.get(&format!("{C}/breaches")).await.expect(200)["total_count"], 0);
    router.post_with_header("/api/v1/auth/login", &login, ("x-forwarded-for", "198.51.100.9")).await.expect(200);
    let list = router.get(&format!("{C}/breaches")).await.expect(200);
    let incident = &list["incidents"][0];
    assert_eq!((incident["type"].clone(), incident["severity"].clone()), (json!("admin_from_unknown_ip"), json!("high")), "{list}");
    assert_eq!(incident["involved_ips"], json!(["198.51.100.9"]));
    // Known from now on.
    router.post_with_header("/api/v1/auth/login", &login, ("x-forwarded-for", "198.51.100.9")).await.expect(200);
    assert_eq!(router.get(&format!("{C}/breaches")).await.expect(200)["total_count"], 1);
}

/// Raising a user's role to admin raises `privilege_escalation` (critical),
/// which opens an incident naming who did it; other role changes do not.
#[tokio::test]
async fn a_promotion_to_admin_opens_a_privilege_escalation_incident() {
    let router = TestRouter::with_config(1, |c| c.compliance.enabled = true).await;
    let made = router
        .post("/api/v1/admin/users", &json!({"username": "eve", "email": "eve@x.org", "password": "Correct-Horse-42", "role": "viewer"}))
        .await
        .expect(201);
    let id = made["id"].as_str().unwrap().to_string();
    router.put(&format!("/api/v1/admin/users/{id}"), &json!({"role": "operator"})).await.expect(200);
    router.put(&format!("/api/v1/admin/users/{id}"), &json!({"role": "admin"})).await.expect(200);
    let incidents = incidents_once_raised(&router).await;
    assert_eq!(incidents.len(), 1, "only the promotion to admin: {incidents:?}");
    assert_eq!((incidents[0]["type"].as_str(), incidents[0]["severity"].as_str()), (Some("privilege_escalation"), Some("critical")));
    let events = router.get(&format!("{C}/security-events?event_type=privilege_escalation")).await.expect(200);
    assert!(events["events"][0]["description"].as_str().unwrap().contains("raised eve's role from operator to admin"), "{events}");
}

/// One SQL response of at least `security.data_exfiltration_threshold_mb` MiB
/// (spec 02's `breach_detection.data_exfiltration_threshold_mb`) raises
/// `mass_data_export`, whatever its row count.
#[tokio::test]
async fn a_response_over_the_exfiltration_threshold_opens_an_incident() {
    let router = TestRouter::with_config(1, |c| {
        c.compliance.enabled = true;
        c.security.mass_data_rows = 1_000_000;
        c.security.data_exfiltration_threshold_mb = 1;
    })
    .await;
    router.post("/api/v1/query", &json!({"sql": "CREATE TABLE blobs (id INT PRIMARY KEY, body TEXT)"})).await.expect(200);
    let big = "x".repeat(60_000);
    for i in 0..20 {
        router.post("/api/v1/query", &json!({"sql": "INSERT INTO blobs VALUES ($1, $2)", "params": [i, big]})).await.expect(200);
    }
    router.post("/api/v1/query", &json!({"sql": "SELECT id FROM blobs"})).await.expect(200);
    router.post("/api/v1/query", &json!({"sql": "SELECT * FROM blobs"})).await.expect(200);
    let incidents = incidents_once_raised(&router).await;
    assert_eq!(incidents.len(), 1, "only the 1.2 MB answer: {incidents:?}");
    assert_eq!(incidents[0]["type"], "mass_data_export");
    let events = router.get(&format!("{C}/security-events?event_type=mass_data_export")).await.expect(200);
    assert!(events["events"][0]["description"].as_str().unwrap().contains("MiB in one request"), "{events}");
}

/// The breach incidents, once the first one is recorded (alerts are raised in
/// the background), or none after two seconds.
async fn incidents_once_raised(router: &TestRouter) -> Vec<serde_json::Value> {
    for _ in 0..100 {
        let incidents = router.get(&format!("{C}/breaches")).await.expect(200)["incidents"].as_array().unwrap().clone();
        if !incidents.is_empty() {
            return incidents;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Vec::new()
}

/// Spec 02's retention with `auto_delete_expired`: records of any data subject
/// last written more than `pii_retention_days` ago are erased by the expiry
/// round; records younger than that, and records of no subject, stay.
#[tokio::test]
async fn personal_data_past_its_retention_is_erased_and_the_rest_stays() {
    let router = TestRouter::with_config(2, |c| {
        c.compliance.enabled = true;
        c.retention.auto_delete_expired = true;
        c.retention.pii_retention_days = Some(30);
    })
    .await;
    router.post("/api/v1/kv/keys", &json!({"key": "orders/1", "value": {"user_id": "u1", "n": 1}})).await.expect(200);
    router.post("/api/v1/kv/keys", &json!({"key": "settings/theme", "value": {"color": "blue"}})).await.expect(200);
    router.post("/api/v1/documents/collections", &json!({"name": "leads"})).await.expect(201);
    router
        .post("/api/v1/documents/collections/leads/documents", &json!({"id": "l1", "document": {"email": "ann@example.com"}}))
        .await
        .expect(201);
    const DAY: i64 = 86_400_000;
    let now = tessera_api::command::now_ms();

    let young = crate::services::compliance::expiry::expire_once(&router.state, now + 29 * DAY).await.unwrap();
    assert!(young.is_empty(), "nothing is 30 days old yet: {young:?}");
    router.get("/api/v1/kv/keys/orders/1").await.expect(200);

    let expired = crate::services::compliance::expiry::expire_once(&router.state, now + 31 * DAY).await.unwrap();
    assert_eq!(expired.get("kv"), Some(&1), "{expired:?}");
    assert_eq!(expired.get("document"), Some(&1), "{expired:?}");
    router.get("/api/v1/kv/keys/orders/1").await.expect(404);
    router.get("/api/v1/documents/collections/leads/documents/l1").await.expect(404);
    router.get("/api/v1/kv/keys/settings/theme").await.expect(200);
    let audit = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!(audit["valid"], json!(true), "{audit}");
}

/// Spec 02's `data_classification`: a viewer reading a PHI column gets it
/// masked, a Restricted column refused; an admin (who holds
/// `access:classified`) reads them as stored; every classified read is in the
/// audit trail; too many in a minute raise `unusual_access_pattern`.
#[tokio::test]
async fn classified_columns_are_masked_or_refused_for_lower_roles_and_audited() {
    let router = TestRouter::with_config(1, |c| {
        c.compliance.enabled = true;
        c.data_classification.enabled = true;
        c.data_classification.unusual_access_per_minute = 3;
    })
    .await;
    router
        .post("/api/v1/query", &json!({"sql": "CREATE TABLE patients (id INT PRIMARY KEY, name TEXT, diagnosis TEXT, ssn TEXT)"}))
        .await
        .expect(200);
    router.post("/api/v1/query", &json!({"sql": "INSERT INTO patients VALUES (1, 'Ann', 'asthma', '123-45-6789')"})).await.expect(200);
    router.post(&format!("{C}/classify"), &json!({"table": "patients", "column": "diagnosis", "classification": "PHI"})).await.expect(200);
    // Level 5 needs encryption at rest, which the in-process node lacks: recorded directly here.
    let restricted = tessera_api::compliance::ColumnClassification {
        table: "patients".into(),
        column: "ssn".into(),
        level: 5,
        reason: None,
        classified_by: "test".into(),
        classified_at_ms: 0,
    };
    router
        .state
        .cluster
        .meta_write(tessera_api::command::MetaOp::Classify(tessera_api::compliance::ClassifyOp { columns: vec![restricted] }))
        .await
        .unwrap();
    router.state.classification.invalidate().await;
    let audited_before = router.get(&format!("{C}/audit/verify")).await.expect(200)["entries_verified"].as_u64().unwrap();

    router
        .post(
            "/api/v1/admin/users",
            &json!({"username": "vera", "email": "vera@example.com", "password": "Vera-Pass-1234!", "role": "viewer"}),
        )
        .await
        .expect(201);
    let login = router.post("/api/v1/auth/login", &json!({"username": "vera", "password": "Vera-Pass-1234!"})).await.expect(200);
    let viewer = router.with_token(login["token"].as_str().unwrap());
    let masked = viewer.post("/api/v1/query", &json!({"sql": "SELECT id, name, diagnosis FROM patients"})).await.expect(200);
    assert_eq!(masked["data"]["rows"], json!([[1, "Ann", "***"]]), "{masked}");
    assert_eq!(masked["masked_columns"], json!(["diagnosis"]));
    let refused = viewer.post("/api/v1/query", &json!({"sql": "SELECT ssn FROM patients"})).await.expect(403);
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("Restricted") && e.contains("access:classified")), "{refused}");
    // Renamed or computed, a classified column is still masked or refused.
    let renamed =
        viewer.post("/api/v1/query", &json!({"sql": "SELECT id, diagnosis AS d, upper(diagnosis) FROM patients"})).await.expect(200);
    assert_eq!(renamed["data"]["rows"][0][0], json!(1), "{renamed}");
    assert_eq!(renamed["data"]["rows"][0][1], json!("***"), "{renamed}");
    assert_eq!(renamed["data"]["rows"][0][2], json!("***"), "{renamed}");
    viewer.post("/api/v1/query", &json!({"sql": "SELECT ssn AS x FROM patients"})).await.expect(403);
    // Not classified: another table's column of the same name, or a level below 3.
    let plain = viewer.post("/api/v1/query", &json!({"sql": "SELECT name FROM patients"})).await.expect(200);
    assert!(plain.get("masked_columns").is_none(), "{plain}");

    let admin = router.post("/api/v1/query", &json!({"sql": "SELECT diagnosis, ssn FROM patients"})).await.expect(200);
    assert_eq!(admin["data"]["rows"], json!([["asthma", "123-45-6789"]]), "{admin}");

    let audited = router.get(&format!("{C}/audit/verify")).await.expect(200);
    assert_eq!(
        audited["entries_verified"].as_u64().unwrap(),
        audited_before + 5,
        "two masked, two refused and the admin's read: {audited}"
    );
    assert_eq!(audited["valid"], json!(true));

    // The viewer's further classified reads within the minute (refused ones
    // count) pass the threshold of 3.
    viewer.post("/api/v1/query", &json!({"sql": "SELECT diagnosis FROM patients"})).await.expect(200);
    viewer.post("/api/v1/query", &json!({"sql": "SELECT diagnosis FROM patients WHERE id = 1"})).await.expect(200);
    let mut found = false;
    for _ in 0..50 {
        let events = router.get(&format!("{C}/security-events?event_type=unusual_access_pattern")).await.expect(200);
        if events["count"] == json!(1) {
            assert_eq!(events["events"][0]["user_id"], json!("vera"), "{events}");
            found = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(found, "unusual access raised once");
}
