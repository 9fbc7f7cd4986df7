//! A tour of the routes no other in-process scenario calls, each with a valid
//! request: every answer must be a success, and its shape is checked against
//! (or, with `TESSERA_BLESS=1`, recorded into) the OpenAPI document.

use axum::http::Method;
use serde_json::{Value, json};

use super::harness::{Answer, TestRouter};

#[track_caller]
fn ok(what: &str, answer: Answer) -> Value {
    assert!(answer.status.is_success(), "{what}: {} {}", answer.status, answer.json);
    answer.json
}

#[tokio::test]
async fn a_tour_of_users_roles_security_and_the_cluster_views() {
    let router = TestRouter::new(2).await;
    ok("routes", router.get("/api/v1/admin/routes").await);
    ok("permissions", router.get("/api/v1/admin/permissions").await);
    ok("cluster", router.get("/api/v1/admin/cluster").await);
    ok("config", router.get("/api/v1/admin/config").await);
    let check = ok("consistency", router.get("/api/v1/admin/consistency").await);
    assert!(check["consistent"] == true && check["converged"] == true, "one in-process copy per group: {check}");
    ok("create role", router.post("/api/v1/admin/roles", &json!({"name": "auditor", "permissions": ["read:kv", "read:sql"]})).await);
    ok("roles", router.get("/api/v1/admin/roles").await);
    ok("update role", router.put("/api/v1/admin/roles/auditor", &json!({"permissions": ["read:kv"]})).await);
    let user = ok(
        "create user",
        router
            .post(
                "/api/v1/admin/users",
                &json!({"username": "tour", "email": "t@example.com", "password": "Tour-Pass-1234!", "role": "viewer"}),
            )
            .await,
    );
    let id = user["id"].as_str().or(user["user"]["id"].as_str()).expect("a user id").to_string();
    ok("users", router.get("/api/v1/admin/users").await);
    ok("user", router.get(&format!("/api/v1/admin/users/{id}")).await);
    ok("delete user", router.delete(&format!("/api/v1/admin/users/{id}")).await);
    ok("delete role", router.delete("/api/v1/admin/roles/auditor").await);
    ok(
        "block",
        router.post("/api/v1/admin/security/block-ip", &json!({"ip_address": "203.0.113.9", "reason": "tour", "duration_hours": 1})).await,
    );
    ok("blocked", router.get("/api/v1/admin/security/blocked-ips").await);
    ok("unblock", router.delete("/api/v1/admin/security/blocked-ips/203.0.113.9").await);
    ok("security alerts", router.get("/api/v1/admin/security/alerts").await);
    let resealed = ok("re-encrypt", router.post("/api/v1/admin/encryption/reencrypt", &json!({})).await);
    assert_eq!(resealed["complete"], true, "nothing in process needs a previous key: {resealed}");
    ok("compress", router.post("/api/v1/admin/compress", &json!({"older_than": "1d"})).await);
    let enabled = ok("mfa enable", router.post("/api/v1/auth/mfa/enable", &json!({})).await);
    let secret = tessera_api::security::totp::decode_secret(enabled["secret"].as_str().unwrap()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let code = tessera_api::security::totp::code_at(&secret, tessera_api::security::totp::DIGITS, now);
    ok("mfa disable", router.post("/api/v1/auth/mfa/disable", &json!({"code": code})).await);
    ok("logout", router.post("/api/v1/auth/logout", &json!({})).await);
}

#[tokio::test]
async fn a_tour_of_streams_graph_edges_documents_and_imports() {
    let router = TestRouter::new(2).await;
    ok("channel", router.post("/api/v1/streaming/channels", &json!({"name": "tour", "retention": "1h"})).await);
    ok("publish", router.post("/api/v1/streaming/publish", &json!({"channel": "tour", "event_type": "e", "data": {"n": 1}})).await);
    ok("channel info", router.get("/api/v1/streaming/channels/tour").await);
    ok("history", router.get("/api/v1/streaming/channels/tour/history").await);
    ok("poll", router.post("/api/v1/streaming/channels/tour/consumers/g1/poll", &json!({"max": 10})).await);
    ok("commit", router.post("/api/v1/streaming/channels/tour/consumers/g1/commit", &json!({"offset": 1})).await);
    ok("consumers", router.get("/api/v1/streaming/channels/tour/consumers").await);
    ok("retention", router.post("/api/v1/streaming/retention/enforce", &json!({})).await);
    ok("table", router.post("/api/v1/query", &json!({"sql": "CREATE TABLE tour (id INT PRIMARY KEY, name TEXT)"})).await);
    ok("cdc", router.post("/api/v1/streaming/cdc", &json!({"table": "tour"})).await);
    ok("cdc list", router.get("/api/v1/streaming/cdc").await);
    ok("cdc off", router.delete("/api/v1/streaming/cdc/default/tour").await);
    ok(
        "sql import",
        router.post("/api/v1/import/sql", &json!({"table": "tour", "format": "json", "data": [{"id": 1, "name": "a"}]})).await,
    );
    ok("kv import", router.post("/api/v1/import/kv", &json!({"pairs": [{"key": "tour/a", "value": 1}]})).await);
    ok("kv delete", router.delete("/api/v1/kv/keys/tour/a").await);
    for n in ["a", "b"] {
        ok("node", router.post("/api/v1/graph/nodes", &json!({"graph": "tour", "id": n, "label": "P"})).await);
    }
    ok(
        "edge",
        router.post("/api/v1/graph/edges", &json!({"graph": "tour", "id": "e1", "from_node": "a", "to_node": "b", "label": "K"})).await,
    );
    ok("get edge", router.get("/api/v1/graph/edges/e1?graph=tour").await);
    ok("delete edge", router.delete("/api/v1/graph/edges/e1?graph=tour").await);
    ok(
        "graph batch",
        router.post("/api/v1/graph/batch", &json!({"graph": "tour", "nodes": [{"id": "c", "label": "P"}], "edges": []})).await,
    );
    ok("collection", router.post("/api/v1/documents/collections", &json!({"name": "tour"})).await);
    let doc = ok("insert", router.post("/api/v1/documents/collections/tour/documents", &json!({"document": {"_id": "d1", "n": 1}})).await);
    let id = doc["_id"].as_str().or(doc["id"].as_str()).unwrap_or("d1").to_string();
    ok("replace", router.put(&format!("/api/v1/documents/collections/tour/documents/{id}"), &json!({"document": {"n": 2}})).await);
    let patch = json!({"update": {"$set": {"n": 3}}});
    ok("patch", router.call(Method::PATCH, &format!("/api/v1/documents/collections/tour/documents/{id}"), Some(&patch)).await);
    ok("update", router.post(&format!("/api/v1/documents/collections/tour/documents/{id}/update"), &patch).await);
    ok("documents", router.get("/api/v1/documents/collections/tour/documents").await);
    ok("bucket", router.post("/api/v1/objects/buckets", &json!({"name": "tourb"})).await);
    let (status, _) = router.call_bytes(Method::PUT, "/api/v1/objects/buckets/tourb/object/a.txt", b"tour object".to_vec()).await;
    assert!(status.is_success(), "object put: {status}");
    let (status, file) = router.call_bytes(Method::GET, "/api/v1/admin/objects/tourb/export", Vec::new()).await;
    assert!(status.is_success() && !file.is_empty(), "export: {status}");
    let (status, answer) = router.call_bytes(Method::POST, "/api/v1/admin/objects/tourc/import", file).await;
    assert!(status.is_success(), "import: {status} {}", String::from_utf8_lossy(&answer));
}

#[tokio::test]
async fn a_tour_of_the_vault_and_the_data_subject_aliases() {
    let router = TestRouter::with_config(2, |c| c.compliance.enabled = true).await;
    ok("unseal", router.post("/api/v1/admin/vault/unseal", &json!({"passphrase": "tour-passphrase-1"})).await);
    ok("status", router.get("/api/v1/admin/vault/status").await);
    ok("put secret", router.put("/api/v1/admin/vault/secrets/app/key", &json!({"value": "s3cret"})).await);
    ok("get secret", router.get("/api/v1/admin/vault/secrets/app/key").await);
    ok("secrets", router.get("/api/v1/admin/vault/secrets").await);
    let policy = json!({"role": "operator", "paths": ["app/*"], "capabilities": ["read"]});
    ok("put policy", router.put("/api/v1/admin/vault/policies/ops", &policy).await);
    ok("policy", router.get("/api/v1/admin/vault/policies/ops").await);
    ok("policies", router.get("/api/v1/admin/vault/policies").await);
    ok("delete policy", router.delete("/api/v1/admin/vault/policies/ops").await);
    ok("delete secret", router.delete("/api/v1/admin/vault/secrets/app/key").await);
    ok("vault audit", router.get("/api/v1/admin/vault/audit").await);
    let rekey = json!({"current_passphrase": "tour-passphrase-1", "new_passphrase": "tour-passphrase-2"});
    ok("rekey", router.post("/api/v1/admin/vault/rekey", &rekey).await);
    ok("seal", router.post("/api/v1/admin/vault/seal", &json!({})).await);

    ok("consent", router.post("/api/v1/gdpr/consent", &json!({"subject_id": "tourist", "purpose": "marketing"})).await);
    ok("consent status", router.get("/api/v1/gdpr/consent?subject_id=tourist").await);
    ok("kv", router.post("/api/v1/kv/keys", &json!({"key": "user:tourist", "value": {"user_id": "tourist"}})).await);
    ok("access", router.get("/api/v1/gdpr/access?subject_id=tourist").await);
    ok("export", router.get("/api/v1/gdpr/export?subject_id=tourist").await);
    ok("ccpa access", router.get("/api/v1/ccpa/access?subject_id=tourist").await);
    ok("ccpa delete", router.call(Method::DELETE, "/api/v1/ccpa/delete", Some(&json!({"consumer_id": "tourist"}))).await);
    let jobs = ok("erasure jobs", router.get("/api/v1/compliance/erasure-jobs").await);
    let job = jobs["jobs"][0]["job_id"].as_str().or(jobs["jobs"][0]["id"].as_str()).expect("the erasure's job").to_string();
    ok("erasure job", router.get(&format!("/api/v1/compliance/erasure-jobs/{job}")).await);
}
