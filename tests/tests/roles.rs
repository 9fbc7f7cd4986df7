//! Scenario: access control. The admin creates an operator and a viewer; the
//! whole route table (as the router reports it) is walked with no token and with
//! each role, checking the 401/403 matrix; custom roles widen a viewer; the
//! password policy, the last-admin rule, and deleted users losing access.

use anyhow::{Context, Result, ensure};
use reqwest::Method;
use tessera_tests::{ADMIN_PASSWORD, Cluster, ClusterOptions, Http, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("roles scenario failed: {e:?}");
    }
}

const PASSWORD: &str = "Sturdy-Passw0rd!";

async fn create_user(admin: &Http, name: &str, role: &str) -> Result<String> {
    let r = admin
        .post("/api/v1/admin/users", &json!({"username": name, "email": format!("{name}@example.com"), "password": PASSWORD, "role": role}))
        .await?
        .ensure_status(201)?;
    ensure!(r.json["role"] == json!(role.to_lowercase()), "created user: {r}");
    Ok(r.json["id"].as_str().context("user id")?.to_string())
}

/// A concrete path for a route template.
fn concrete(template: &str) -> String {
    template
        .replace("{*key}", "matrix-key")
        .replace("{*path}", "matrix/path")
        .replace("{*id}", "matrix-id")
        .replace("{bucket}", "matrix-bucket")
        .replace("{name}", "matrix_name")
        .replace("{id}", "matrix-id")
        .replace("{field}", "matrix-field")
        .replace("{alert_id}", "sec-000000000000")
        .replace("{ip}", "192.0.2.1")
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let admin = c.http.clone();

    // Password policy.
    let r = admin
        .post("/api/v1/admin/users", &json!({"username": "weak", "email": "w@example.com", "password": "short", "role": "viewer"}))
        .await?;
    ensure!(r.status == 400, "a weak password was accepted: {r}");

    let operator_id = create_user(&admin, "olga", "operator").await?;
    let viewer_id = create_user(&admin, "victor", "Viewer").await?;
    let r = admin
        .post("/api/v1/admin/users", &json!({"username": "olga", "email": "o@example.com", "password": PASSWORD, "role": "viewer"}))
        .await?;
    ensure!(r.status == 409, "duplicate username: {r}");
    let anon = admin.anonymous();
    let operator = anon.with_token(anon.login("olga", PASSWORD).await?.ensure_status(200)?.json["token"].as_str().context("token")?);
    let viewer = anon.with_token(anon.login("victor", PASSWORD).await?.ensure_status(200)?.json["token"].as_str().context("token")?);

    // Walk the route table with every role.
    let table = admin.get("/api/v1/admin/routes").await?.ensure_status(200)?;
    let routes = table.json["routes"].as_array().context("routes")?.clone();
    ensure!(routes.len() > 40, "suspiciously short route table: {}", routes.len());
    let mut checked = 0;
    for route in &routes {
        let (method, template, access) = (
            route["method"].as_str().unwrap_or_default(),
            route["path"].as_str().unwrap_or_default(),
            route["access"].as_str().unwrap_or_default(),
        );
        if access == "public" || template == "/api/v1/auth/logout" {
            continue;
        }
        let method: Method = method.parse()?;
        let path = concrete(template);
        let body = matches!(method, Method::POST | Method::PUT | Method::PATCH).then(|| b"{}".to_vec());
        let call = |who: &Http| {
            let (who, method, path, body) = (who.clone(), method.clone(), path.clone(), body.clone());
            async move { who.send(method, &path, body, Some("application/json")).await }
        };
        let r = call(&anon).await?;
        ensure!(r.status == 401, "{method} {path} without a token: {r}");
        // Self-service routes (`authenticated`, e.g. MFA) are open to every role.
        let expect_viewer = access.starts_with("read:") || access == "authenticated";
        let expect_operator = !access.starts_with("manage:");
        for (who, allowed, label) in [(&viewer, expect_viewer, "viewer"), (&operator, expect_operator, "operator"), (&admin, true, "admin")]
        {
            let r = call(who).await?;
            if allowed {
                ensure!(r.status != 401 && r.status != 403, "{label} refused on {method} {path} ({access}): {r}");
            } else {
                ensure!(r.status == 403, "{label} allowed on {method} {path} ({access}): {r}");
            }
        }
        checked += 1;
    }
    eprintln!("checked the access matrix of {checked} routes");

    // A viewer cannot write data; a custom role grants exactly write:kv.
    let r = viewer.kv_put("matrix/v", json!(1), None).await?;
    ensure!(r.status == 403, "viewer wrote: {r}");
    let r = admin.post("/api/v1/admin/roles", &json!({"name": "admins-too", "permissions": ["manage:users"]})).await?;
    ensure!(r.status == 400, "a custom role got a manage permission: {r}");
    admin.post("/api/v1/admin/roles", &json!({"name": "kv-writer", "permissions": ["write:kv"]})).await?.ensure_status(201)?;
    admin
        .send(
            Method::PUT,
            &format!("/api/v1/admin/users/{viewer_id}"),
            Some(serde_json::to_vec(&json!({"roles": ["kv-writer"]}))?),
            Some("application/json"),
        )
        .await?
        .ensure_status(200)?;
    viewer.kv_put("matrix/v", json!(1), None).await?.ensure_status(200)?;
    let r = viewer.post("/api/v1/objects/buckets", &json!({"name": "viewer-bucket"})).await?;
    ensure!(r.status == 403, "the custom role granted more than write:kv: {r}");
    let r = viewer.post("/api/v1/query", &json!({"sql": "CREATE TABLE v (a INT)"})).await?;
    ensure!(r.status == 403, "viewer ran DDL: {r}");
    viewer.post("/api/v1/query", &json!({"sql": "SELECT 1"})).await?.ensure_status(200)?;

    // The last admin stays; a deleted user's token stops working.
    let me = admin.get("/api/v1/admin/users").await?.ensure_status(200)?;
    let admin_id = me.json["users"].as_array().context("users")?.iter().find(|u| u["role"] == "admin").context("admin")?["id"]
        .as_str()
        .context("id")?
        .to_string();
    let r = admin
        .send(
            Method::PUT,
            &format!("/api/v1/admin/users/{admin_id}"),
            Some(serde_json::to_vec(&json!({"role": "viewer"}))?),
            Some("application/json"),
        )
        .await?;
    ensure!(r.status == 409, "the last admin was demoted: {r}");
    admin.delete(&format!("/api/v1/admin/users/{operator_id}")).await?.ensure_status(200)?;
    let r = operator.kv_count("matrix").await;
    ensure!(r.is_err(), "a deleted user's token still works");
    anon.login("admin", ADMIN_PASSWORD).await?.ensure_status(200)?;
    Ok(())
}
