//! Scenario: authentication end to end.
//!
//! The cluster first comes up behind a router without admin credentials: no
//! user exists, so authenticated routes answer 503 naming
//! SERVICE_ADMIN_USERNAME while `/health` stays up. A second router then
//! provisions the admin; login works on both routers, bad or missing tokens
//! get 401, wrong passwords get 401, and logout invalidates the token.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, EXPECTED_VERSION, Http, Resp, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth() {
    let mut cluster = Cluster::start(ClusterOptions::default().without_admin()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("auth scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let r1 = c.router_http(0);

    // Health endpoints need no auth and no users.
    let h = r1.get("/health").await?.ensure_status(200)?;
    ensure!(h.json["version"] == EXPECTED_VERSION, "/health version: {h}");
    ensure!(h.json["status"].is_string() && !h.json["uptime"].is_null(), "/health fields: {h}");
    r1.get("/livez").await?.ensure_status(200)?;

    // No users yet: authenticated routes are unavailable, with a hint.
    for (what, resp) in [
        ("GET kv/keys", r1.get("/api/v1/kv/keys").await?),
        ("GET kv/keys with a token", r1.with_token("whatever").get("/api/v1/kv/keys").await?),
        ("POST kv/keys", r1.kv_put("auth-x", json!(1), None).await?),
        ("GET admin/cluster", r1.get("/api/v1/admin/cluster").await?),
    ] {
        no_users_503(what, resp)?;
    }

    // Open bootstrap (opt-in): anonymous reads are served while no user exists;
    // writes still are not.
    let (_, open) = c.start_router(&[("SERVICE_OPEN_BOOTSTRAP", "true")]).await?;
    let anon = open.anonymous();
    anon.get("/api/v1/kv/count?prefix=auth-").await?.ensure_status(200).context("open-bootstrap read")?;
    no_users_503("open-bootstrap write", anon.kv_put("auth-open", json!(1), None).await?)?;

    // Another router provisions the admin.
    let (_, r2) = c.start_router(&[("SERVICE_ADMIN_USERNAME", ADMIN_USER), ("SERVICE_ADMIN_PASSWORD", ADMIN_PASSWORD)]).await?;
    let t2 = wait_login(&r2, "router 2").await?;
    // The users live in the cluster, so the first router lets the admin in too.
    let t1 = wait_login(&r1, "router 1").await?;
    let a1 = r1.with_token(&t1);
    let a2 = r2.with_token(&t2);
    a1.kv_count("auth-").await.context("router 1 with its own token")?;
    a2.kv_count("auth-").await.context("router 2 with its own token")?;
    // Sessions live in the cluster too: a token works on either router.
    let cross = r1.with_token(&t2);
    wait_for(Duration::from_secs(10), "router 2's token accepted by router 1", async || {
        cross.get("/api/v1/kv/count?prefix=auth-").await?.ensure_status(200).map(|_| Some(()))
    })
    .await?;

    // Missing or bad credentials → 401 with a JSON error.
    for r in [&r1, &r2] {
        unauthorized("no token", r.get("/api/v1/kv/keys").await?)?;
        unauthorized("no token on POST", r.kv_put("auth-y", json!(1), None).await?)?;
        unauthorized("bad token", r.with_token("not-a-real-token").get("/api/v1/kv/keys").await?)?;
        unauthorized("bad token on admin", r.with_token("not-a-real-token").get("/api/v1/admin/cluster").await?)?;
        unauthorized("basic auth", r.header("Authorization", "Basic YWRtaW46eA==").get("/api/v1/kv/keys").await?)?;
        unauthorized("empty bearer", r.header("Authorization", "Bearer ").get("/api/v1/kv/keys").await?)?;
    }
    ensure!(r1.kv_get("auth-y").await?.status == 401, "unauthenticated get");
    a1.consistency("quorum").kv_get("auth-y").await?.ensure_status(404)?;

    // Wrong password and unknown user → 401, no token.
    for (user, pass) in [(ADMIN_USER, "wrong-password"), (ADMIN_USER, ""), ("nobody", ADMIN_PASSWORD)] {
        let r = r1.login(user, pass).await?;
        ensure!(r.json.get("token").is_none_or(|t| t.is_null()), "failed login returned a token: {r}");
        unauthorized(&format!("login {user}/{pass:?}"), r)?;
    }

    // Logout invalidates the token everywhere; other sessions are unaffected.
    a1.logout().await?.ensure_status(200)?;
    unauthorized("token after logout", a1.get("/api/v1/kv/keys").await?)?;
    let t1_on_r2 = r2.with_token(&t1);
    wait_for(Duration::from_secs(10), "logged-out token rejected by router 2", async || {
        let r = t1_on_r2.get("/api/v1/kv/keys").await?;
        if r.status == 401 { Ok(Some(())) } else { Err(anyhow!("still {r}")) }
    })
    .await?;
    a2.kv_count("auth-").await.context("router 2's session after router 1's logout")?;

    // And a fresh login still works after all that.
    r1.login_as(ADMIN_USER, ADMIN_PASSWORD).await?.kv_count("auth-").await?;
    Ok(())
}

/// 503 with an `error` that tells the operator to set SERVICE_ADMIN_USERNAME.
fn no_users_503(what: &str, r: Resp) -> Result<()> {
    ensure!(r.status == 503, "{what}: expected 503 without users, got {r}");
    let err = r.error().with_context(|| format!("{what}: no JSON error in {r}"))?;
    ensure!(err.contains("SERVICE_ADMIN_USERNAME"), "{what}: error does not mention SERVICE_ADMIN_USERNAME: {r}");
    Ok(())
}

/// 401 with a JSON `{error, code}` body.
fn unauthorized(what: &str, r: Resp) -> Result<()> {
    ensure!(r.status == 401, "{what}: expected 401, got {r}");
    r.ensure_error_body().with_context(|| what.to_string())?;
    Ok(())
}

/// Logs in as admin (polling: provisioning may lag router readiness).
async fn wait_login(http: &Http, name: &str) -> Result<String> {
    wait_for(Duration::from_secs(30), &format!("admin login on {name}"), async || {
        let r = http.login(ADMIN_USER, ADMIN_PASSWORD).await?.ensure_status(200)?;
        let user = &r.json["user"];
        ensure!(user["username"] == ADMIN_USER, "login user: {r}");
        ensure!(!user["id"].is_null() && user["role"].is_string(), "login user fields: {r}");
        ensure!(user["mfa_enabled"].is_boolean(), "login user mfa_enabled: {r}");
        Ok(Some(r.json["token"].as_str().with_context(|| format!("no token in {r}"))?.to_string()))
    })
    .await
}
