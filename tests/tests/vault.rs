//! Scenario: the built-in secrets vault. Sealed until the first unseal creates
//! it; put/get/list/delete of encrypted secrets; seal → 503 on every router; a
//! wrong passphrase leaves it sealed with its key intact and records an audit
//! failure (and a security alert); routers share it and unseal from
//! SERVICE_VAULT_PASSPHRASE at start, across restarts; default-deny policies;
//! non-admins are refused; the passphrase changes without downtime.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use reqwest::Method;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, Http, Resp, Value, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vault() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("vault scenario failed: {e:?}");
    }
}

const PASSPHRASE: &str = "correct horse battery staple 42";
const WRONG: &str = "correct horse battery staple 43";
const NEW_PASSPHRASE: &str = "a rotated passphrase for the vault 7";
const DB_PASSWORD: &str = "vault-db-password-7f3a9c";
const USER_PASSWORD: &str = "Sturdy-Passw0rd!";

async fn put(http: &Http, path: &str, body: &Value) -> Result<Resp> {
    http.send(Method::PUT, path, Some(serde_json::to_vec(body)?), Some("application/json")).await
}

async fn put_secret(http: &Http, path: &str, value: Value) -> Result<Resp> {
    put(http, &format!("/api/v1/admin/vault/secrets/{path}"), &json!({"value": value})).await
}

async fn get_secret(http: &Http, path: &str) -> Result<Resp> {
    http.get(&format!("/api/v1/admin/vault/secrets/{path}")).await
}

async fn status(http: &Http) -> Result<Value> {
    Ok(http.get("/api/v1/admin/vault/status").await?.ensure_status(200)?.json)
}

async fn unseal(http: &Http, passphrase: &str) -> Result<Resp> {
    http.post("/api/v1/admin/vault/unseal", &json!({"passphrase": passphrase})).await
}

fn ensure_sealed_error(r: &Resp, what: &str) -> Result<()> {
    ensure!(r.status == 503 && r.json["code"] == "VAULT_SEALED", "{what} on a sealed vault: {r}");
    ensure!(r.error().is_some_and(|e| e.contains("sealed")), "{what}: unclear error {r}");
    Ok(())
}

async fn audit(http: &Http) -> Result<Vec<Value>> {
    let r = http.get("/api/v1/admin/vault/audit?limit=1000").await?.ensure_status(200)?;
    Ok(r.json["events"].as_array().context("events")?.clone())
}

async fn admin_on(c: &Cluster, idx: usize) -> Result<Http> {
    c.router_http(idx).login_as(ADMIN_USER, ADMIN_PASSWORD).await
}

async fn wait_unsealed(http: &Http, what: &str) -> Result<()> {
    wait_for(Duration::from_secs(30), what, async || Ok((status(http).await?["sealed"] == false).then_some(()))).await
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let admin = c.http.clone();
    a_fresh_vault_is_sealed_and_refuses_secrets(&admin).await?;
    the_first_unseal_creates_the_vault(&admin).await?;
    secrets_are_put_read_listed_and_deleted(&admin).await?;
    a_sealed_vault_answers_503(&admin).await?;
    a_wrong_passphrase_keeps_it_sealed_and_the_right_one_unseals(&admin).await?;
    non_admins_are_refused_on_every_vault_route(&admin).await?;
    routers_share_the_vault_and_its_seal(c, &admin).await?;
    a_router_unseals_from_its_environment_across_restarts(c).await?;
    let admin3 = a_wrong_environment_passphrase_changes_nothing(c).await?;
    default_deny_requires_policy_grants(c, &admin3).await?;
    the_passphrase_changes_without_downtime(c, &admin3).await
}

/// Changing the passphrase keeps the data key: secrets read on at once on the
/// unsealed routers; from then on only the new passphrase unseals (by hand or
/// from a router's environment).
async fn the_passphrase_changes_without_downtime(c: &mut Cluster, admin3: &Http) -> Result<()> {
    let rekey = async |current: &str, new: &str| {
        admin3.post("/api/v1/admin/vault/rekey", &json!({"current_passphrase": current, "new_passphrase": new})).await
    };
    let r = rekey(WRONG, NEW_PASSPHRASE).await?;
    ensure!(r.status == 400 && r.text.contains("wrong passphrase"), "a wrong current passphrase: {r}");
    ensure!(rekey(PASSPHRASE, "short").await?.status == 400, "a short new passphrase");
    ensure!(
        admin3.post("/api/v1/admin/vault/rekey", &json!({"new_passphrase": NEW_PASSPHRASE})).await?.status == 400,
        "no current passphrase"
    );
    let r = rekey(PASSPHRASE, NEW_PASSPHRASE).await?.ensure_status(200)?;
    ensure!(r.json["rekeyed"] == true, "{r}");
    // No downtime: the unsealed router reads on.
    let r = get_secret(admin3, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "read right after the change: {r}");
    let events = audit(admin3).await?;
    ensure!(events.iter().any(|e| e["event"] == "rekeyed" && e["success"] == true), "rekey audited: {events:?}");
    ensure!(events.iter().any(|e| e["event"] == "rekey_failed"), "the failed attempt audited: {events:?}");
    // A router started with the new passphrase unseals from its environment.
    let (r5, _) = c.start_router(&[("SERVICE_VAULT_PASSPHRASE", NEW_PASSPHRASE)]).await?;
    let admin5 = admin_on(c, r5).await?;
    wait_unsealed(&admin5, "router 5 unsealed with the new passphrase").await?;
    let r = get_secret(&admin5, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "router 5 read: {r}");
    // After a seal, the old passphrase no longer opens the vault; the new one does.
    admin3.post("/api/v1/admin/vault/seal", &json!({})).await?.ensure_status(200)?;
    ensure!(unseal(admin3, PASSPHRASE).await?.status == 400, "the old passphrase still unseals");
    unseal(admin3, NEW_PASSPHRASE).await?.ensure_status(200)?;
    let r = get_secret(admin3, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "read after unsealing with the new passphrase: {r}");
    Ok(())
}

/// A fresh cluster: no vault yet, sealed; secret operations answer 503.
async fn a_fresh_vault_is_sealed_and_refuses_secrets(admin: &Http) -> Result<()> {
    let s = status(admin).await?;
    ensure!(s["initialized"] == false && s["sealed"] == true, "fresh status: {s}");
    ensure_sealed_error(&put_secret(admin, "app/db/password", json!(DB_PASSWORD)).await?, "put")?;
    let r = unseal(admin, "short").await?;
    ensure!(r.status == 400, "a 5-character passphrase created the vault: {r}");
    ensure!(admin.post("/api/v1/admin/vault/unseal", &json!({})).await?.status == 400, "unseal without a passphrase");
    Ok(())
}

/// First unseal creates it.
async fn the_first_unseal_creates_the_vault(admin: &Http) -> Result<()> {
    let r = unseal(admin, PASSPHRASE).await?.ensure_status(200)?;
    ensure!(r.json["created"] == true && r.json["sealed"] == false, "first unseal: {r}");
    let s = status(admin).await?;
    ensure!(s["initialized"] == true && s["sealed"] == false, "unsealed status: {s}");
    Ok(())
}

/// Put / get / list / delete; bad input is refused.
async fn secrets_are_put_read_listed_and_deleted(admin: &Http) -> Result<()> {
    let r = put_secret(admin, "app/db/password", json!("first")).await?.ensure_status(201)?;
    ensure!(r.json["created"] == true, "create: {r}");
    put_secret(admin, "app/db/password", json!(DB_PASSWORD)).await?.ensure_status(200)?;
    put_secret(admin, "app/api-key", json!({"key": "k-123", "scopes": ["read"]})).await?.ensure_status(201)?;
    put_secret(admin, "other/token", json!("tok")).await?.ensure_status(201)?;
    let r = get_secret(admin, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD && r.json["version"] == 2 && r.json["updated_by"] == ADMIN_USER, "get: {r}");
    let r = get_secret(admin, "app/api-key").await?.ensure_status(200)?;
    ensure!(r.json["value"]["scopes"][0] == "read", "structured value: {r}");
    let r = admin.get("/api/v1/admin/vault/secrets?prefix=app/").await?.ensure_status(200)?;
    ensure!(r.json["paths"] == json!(["app/api-key", "app/db/password"]) && r.json["total"] == 2, "list app/: {r}");
    ensure!(!r.text.contains(DB_PASSWORD), "list shows values: {r}");
    let r = admin.get("/api/v1/admin/vault/secrets").await?.ensure_status(200)?;
    ensure!(r.json["total"] == 3, "list all: {r}");
    admin.delete("/api/v1/admin/vault/secrets/other/token").await?.ensure_status(200)?;
    ensure!(get_secret(admin, "other/token").await?.status == 404, "deleted secret still readable");
    ensure!(admin.delete("/api/v1/admin/vault/secrets/other/token").await?.status == 404, "second delete");
    // Bad input.
    for bad in ["a//b", "sp ace", "trailing/"] {
        let r = put_secret(admin, bad, json!("x")).await?;
        ensure!(r.status == 400 || r.status == 404, "bad path {bad:?}: {r}");
    }
    ensure!(put(admin, "/api/v1/admin/vault/secrets/app/x", &json!({})).await?.status == 400, "put without value");
    let r = put_secret(admin, "app/huge", json!("x".repeat(70 * 1024))).await?;
    ensure!(r.status == 400 || r.status == 413, "oversized value: {r}");
    Ok(())
}

/// Seal: every secret operation answers 503.
async fn a_sealed_vault_answers_503(admin: &Http) -> Result<()> {
    admin.post("/api/v1/admin/vault/seal", &json!({})).await?.ensure_status(200)?;
    let s = status(admin).await?;
    ensure!(s["sealed"] == true && s["initialized"] == true, "after seal: {s}");
    ensure_sealed_error(&get_secret(admin, "app/db/password").await?, "get")?;
    ensure_sealed_error(&put_secret(admin, "app/x", json!(1)).await?, "put")?;
    ensure_sealed_error(&admin.get("/api/v1/admin/vault/secrets").await?, "list")?;
    ensure_sealed_error(&admin.delete("/api/v1/admin/vault/secrets/app/api-key").await?, "delete")?;
    Ok(())
}

/// A wrong passphrase leaves it sealed, keeps the key, records the failure;
/// the right one then unseals the same key.
async fn a_wrong_passphrase_keeps_it_sealed_and_the_right_one_unseals(admin: &Http) -> Result<()> {
    let r = unseal(admin, WRONG).await?;
    ensure!(r.status == 400 && r.error().is_some_and(|e| e.contains("passphrase")), "wrong passphrase: {r}");
    ensure!(status(admin).await?["sealed"] == true, "a wrong passphrase unsealed the vault");
    ensure_sealed_error(&get_secret(admin, "app/db/password").await?, "get after a wrong passphrase")?;
    let events = audit(admin).await?;
    let failed = events.iter().find(|e| e["event"] == "unseal_failed").with_context(|| format!("no unseal_failed in {events:?}"))?;
    ensure!(failed["success"] == false && failed["actor"] == ADMIN_USER, "audit failure: {failed}");
    ensure!(events.iter().any(|e| e["event"] == "secret_written" && e["path"] == "app/db/password"), "writes audited");
    let audit_text = serde_json::to_string(&events)?;
    ensure!(!audit_text.contains(DB_PASSWORD) && !audit_text.contains(WRONG) && !audit_text.contains(PASSPHRASE), "audit holds a secret");
    let r = admin.get("/api/v1/admin/security/alerts").await?;
    if r.status == 200 {
        ensure!(r.text.contains("vault_unseal_failed"), "no security alert for the failed unseal: {r}");
    }
    // The right passphrase unseals the same key: earlier secrets still decrypt.
    let r = unseal(admin, PASSPHRASE).await?.ensure_status(200)?;
    ensure!(r.json["created"] == false, "the right unseal recreated the vault: {r}");
    let r = get_secret(admin, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "secret after re-unseal: {r}");
    Ok(())
}

/// Non-admins are refused on every vault route.
async fn non_admins_are_refused_on_every_vault_route(admin: &Http) -> Result<()> {
    for (name, role) in [("vera", "viewer"), ("otto", "operator")] {
        admin
            .post(
                "/api/v1/admin/users",
                &json!({"username": name, "email": format!("{name}@example.com"), "password": USER_PASSWORD, "role": role}),
            )
            .await?
            .ensure_status(201)?;
        let who = admin.anonymous().login_as(name, USER_PASSWORD).await?;
        for r in [
            who.get("/api/v1/admin/vault/status").await?,
            get_secret(&who, "app/db/password").await?,
            who.get("/api/v1/admin/vault/secrets").await?,
            put_secret(&who, "app/x", json!(1)).await?,
            who.delete("/api/v1/admin/vault/secrets/app/api-key").await?,
            unseal(&who, PASSPHRASE).await?,
            who.post("/api/v1/admin/vault/seal", &json!({})).await?,
            who.get("/api/v1/admin/vault/audit").await?,
            put(&who, "/api/v1/admin/vault/policies/p", &json!({"role": role, "paths": ["**"], "capabilities": ["read"]})).await?,
        ] {
            ensure!(r.status == 403, "{role} reached a vault route: {r}");
            ensure!(!r.text.contains(DB_PASSWORD), "{role} saw a secret: {r}");
        }
    }
    Ok(())
}

/// A second router shares the vault but holds no key until unsealed itself;
/// a seal is cluster-wide.
async fn routers_share_the_vault_and_its_seal(c: &mut Cluster, admin: &Http) -> Result<()> {
    let (r1, _) = c.start_router(&[]).await?;
    let admin1 = admin_on(c, r1).await?;
    ensure!(status(&admin1).await?["sealed"] == true, "a new router started unsealed");
    ensure_sealed_error(&get_secret(&admin1, "app/db/password").await?, "get on router 1")?;
    unseal(&admin1, PASSPHRASE).await?.ensure_status(200)?;
    let r = get_secret(&admin1, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "router 1 read: {r}");
    put_secret(&admin1, "app/from-router-1", json!("r1")).await?.ensure_status(201)?;
    let r = get_secret(admin, "app/from-router-1").await?.ensure_status(200)?;
    ensure!(r.json["value"] == "r1", "router 0 read router 1's write: {r}");
    // A seal is cluster-wide.
    admin1.post("/api/v1/admin/vault/seal", &json!({})).await?.ensure_status(200)?;
    ensure!(status(admin).await?["sealed"] == true, "router 0 stayed unsealed after a seal on router 1");
    ensure_sealed_error(&get_secret(admin, "app/db/password").await?, "router 0 after a seal on router 1")?;
    Ok(())
}

/// A router started with SERVICE_VAULT_PASSPHRASE unseals itself, also after a restart.
async fn a_router_unseals_from_its_environment_across_restarts(c: &mut Cluster) -> Result<()> {
    let (r2, _) = c.start_router(&[("SERVICE_VAULT_PASSPHRASE", PASSPHRASE)]).await?;
    let admin2 = admin_on(c, r2).await?;
    wait_unsealed(&admin2, "router 2 unsealed from SERVICE_VAULT_PASSPHRASE").await?;
    let r = get_secret(&admin2, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "router 2 read: {r}");
    c.stop_router(r2).await?;
    c.start_all().await?;
    c.wait_router_ready(r2, Duration::from_secs(60)).await?;
    let admin2 = c.router_http(r2).with_token(admin2.token().context("token")?);
    wait_unsealed(&admin2, "router 2 unsealed again after its restart").await?;
    let r = get_secret(&admin2, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "router 2 read after restart: {r}");
    Ok(())
}

/// A router started with a wrong passphrase stays sealed and changes nothing.
/// Returns an admin client of that router (unsealed by hand by then).
async fn a_wrong_environment_passphrase_changes_nothing(c: &mut Cluster) -> Result<Http> {
    let (r3, _) = c.start_router(&[("SERVICE_VAULT_PASSPHRASE", WRONG)]).await?;
    let admin3 = admin_on(c, r3).await?;
    wait_for(Duration::from_secs(30), "the environment unseal failure in the audit", async || {
        Ok(audit(&admin3).await?.iter().any(|e| e["event"] == "unseal_failed" && e["actor"] == "environment").then_some(()))
    })
    .await?;
    ensure!(status(&admin3).await?["sealed"] == true, "a wrong SERVICE_VAULT_PASSPHRASE unsealed");
    unseal(&admin3, PASSPHRASE).await?.ensure_status(200)?;
    let r = get_secret(&admin3, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "after a wrong env passphrase the key changed: {r}");
    Ok(admin3)
}

/// Default-deny: even an admin needs a policy grant (by user or by role);
/// routers without default-deny are unaffected by policies.
async fn default_deny_requires_policy_grants(c: &mut Cluster, admin3: &Http) -> Result<()> {
    let (r4, _) = c.start_router(&[("SERVICE_VAULT_PASSPHRASE", PASSPHRASE), ("SERVICE_VAULT_DEFAULT_DENY", "true")]).await?;
    let deny = admin_on(c, r4).await?;
    wait_unsealed(&deny, "router 4 unsealed").await?;
    ensure!(status(&deny).await?["default_deny"] == true, "default_deny not reported");
    put_secret(admin3, "zzz/outside", json!("no")).await?.ensure_status(201)?;
    for r in [
        get_secret(&deny, "app/db/password").await?,
        deny.get("/api/v1/admin/vault/secrets").await?,
        put_secret(&deny, "app/new", json!(1)).await?,
        deny.delete("/api/v1/admin/vault/secrets/app/api-key").await?,
    ] {
        ensure!(r.status == 403, "default-deny without a policy: {r}");
    }
    let r = put(
        &deny,
        "/api/v1/admin/vault/policies/admin-app-read",
        &json!({"username": ADMIN_USER, "paths": ["app/**"], "capabilities": ["read", "list"]}),
    )
    .await?
    .ensure_status(201)?;
    ensure!(r.json["capabilities"] == json!(["read", "list"]), "policy: {r}");
    let r = get_secret(&deny, "app/db/password").await?.ensure_status(200)?;
    ensure!(r.json["value"] == DB_PASSWORD, "granted read: {r}");
    ensure!(get_secret(&deny, "zzz/outside").await?.status == 403, "read outside the granted paths");
    ensure!(put_secret(&deny, "app/new", json!(1)).await?.status == 403, "write without the write capability");
    let r = deny.get("/api/v1/admin/vault/secrets").await?.ensure_status(200)?;
    let paths = r.json["paths"].as_array().context("paths")?;
    ensure!(paths.iter().all(|p| p.as_str().is_some_and(|p| p.starts_with("app/"))) && paths.len() == 3, "filtered list: {r}");
    // A role grant.
    put(
        &deny,
        "/api/v1/admin/vault/policies/admins-write",
        &json!({"role": "Admin", "paths": ["app/*"], "capabilities": ["write", "delete"]}),
    )
    .await?
    .ensure_status(201)?;
    put_secret(&deny, "app/new", json!(1)).await?.ensure_status(201)?;
    deny.delete("/api/v1/admin/vault/secrets/app/new").await?.ensure_status(200)?;
    let r = deny.get("/api/v1/admin/vault/policies").await?.ensure_status(200)?;
    ensure!(r.json["total"] == 2, "policies: {r}");
    for bad in [
        json!({"paths": ["a"], "capabilities": ["read"]}),
        json!({"username": "a", "role": "admin", "paths": ["a"], "capabilities": ["read"]}),
        json!({"username": "a", "paths": [], "capabilities": ["read"]}),
        json!({"username": "a", "paths": ["a/["], "capabilities": ["read"]}),
        json!({"username": "a", "paths": ["a"], "capabilities": ["fly"]}),
    ] {
        let r = put(&deny, "/api/v1/admin/vault/policies/bad", &bad).await?;
        ensure!(r.status == 400, "bad policy {bad}: {r}");
    }
    deny.delete("/api/v1/admin/vault/policies/admins-write").await?.ensure_status(200)?;
    ensure!(put_secret(&deny, "app/new", json!(1)).await?.status == 403, "a deleted policy still grants");
    ensure!(audit(&deny).await?.iter().any(|e| e["event"] == "access_denied"), "denials audited");
    // The default router (allow-all for admins) is unaffected by policies.
    put_secret(admin3, "app/new", json!(2)).await?.ensure_status(201)?;
    Ok(())
}
