//! Scenario: LDAP sign-in against a real OpenLDAP server.
//!
//! A seeded `slapd` ([`tessera_tests::ldap::Slapd`]: alice in `tessera-admins`,
//! bob and dave in `engineers`, carol in `unmapped`, dave marked
//! `employeeType: disabled`) serves a second router started with
//! `SERVICE_CONFIG` naming `[auth] method = "ldap"`, the user and group
//! filters, a 1 s recheck interval and the role mapping `tessera-admins` →
//! admin, `engineers` → operator. Router 0 keeps local users (the harness's admin).
//!
//! Through the LDAP router: alice signs in as `admin` and her token opens an
//! admin route (router 0, local users only, refuses her directory password);
//! bob signs in as `operator`, reads keys and gets 403 on the
//! admin route; the local admin still signs in (break-glass). A wrong password
//! is 401 and recorded as a `failed_login` security event naming alice; carol
//! (known to the directory, in no mapped group) is 403; an unknown user and dave
//! (excluded by the user filter) are 401. bob is then disabled in the directory
//! mid-session: within seconds both of his tokens answer 401 and he cannot sign
//! in again, while alice's session goes on. Finally the LDAP router is stopped
//! and started again with the same configuration: alice's token still works,
//! bob's stays refused, and alice can sign in again. Last, a router binding
//! users directly by DN (`user_dn_template`, no service account) signs alice
//! in as admin and refuses a wrong password, dave and an empty password.
//!
//! Needs the Debian packages `slapd` and `ldap-utils`; without them the test
//! fails saying so (it never skips).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tessera_tests::ldap::{self, ALICE_PASSWORD, BOB_PASSWORD, CAROL_PASSWORD, DAVE_PASSWORD, Slapd};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, Http, Resp, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ldap_login() {
    let slapd = tokio::task::spawn_blocking(Slapd::start)
        .await
        .expect("slapd start task")
        .unwrap_or_else(|e| panic!("could not start the OpenLDAP server the scenario needs: {e:?}"));
    let opts = ClusterOptions {
        router_env: vec![
            // The compliance interface lists the security events (failed logins).
            ("SERVICE_COMPLIANCE_ENABLED".into(), "true".into()),
            // The scenario's refused logins all come from 127.0.0.1: keep them far
            // from the auto-ban threshold, which would close the routers to it.
            ("SERVICE_AUTO_BAN_THRESHOLD".into(), "1000".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, &slapd).await {
        panic!("ldap_login scenario failed: {e:?}");
    }
}

/// The LDAP router's `SERVICE_CONFIG` file.
fn router_config(slapd: &Slapd) -> String {
    format!(
        r#"[auth]
method = "ldap"

[auth.ldap]
url = "{url}"
bind_dn = "{bind_dn}"
bind_password = "{bind_password}"
user_base_dn = "{people}"
user_filter = "(&(objectClass=inetOrgPerson)(uid={{username}})(!(employeeType=disabled)))"
group_base_dn = "{groups}"
group_filter = "(member={{dn}})"
recheck_interval_secs = 1

[auth.ldap.role_mapping]
"tessera-admins" = "admin"
"engineers" = "operator"
"#,
        url = slapd.url(),
        bind_dn = slapd.admin_dn(),
        bind_password = slapd.admin_password(),
        people = ldap::PEOPLE_DN,
        groups = ldap::GROUPS_DN,
    )
}

/// The `SERVICE_CONFIG` file of a router binding users directly by DN: no
/// service account; the entry and groups are read as the user.
fn direct_bind_config(slapd: &Slapd) -> String {
    format!(
        r#"[auth]
method = "ldap"

[auth.ldap]
url = "{url}"
user_dn_template = "uid={{username}},{people}"
user_filter = "(&(objectClass=inetOrgPerson)(uid={{username}})(!(employeeType=disabled)))"
group_base_dn = "{groups}"
group_filter = "(member={{dn}})"

[auth.ldap.role_mapping]
"tessera-admins" = "admin"
"engineers" = "operator"
"#,
        url = slapd.url(),
        people = ldap::PEOPLE_DN,
        groups = ldap::GROUPS_DN,
    )
}

/// Signs in; requires 200 with a token, `user.username` and `user.role`;
/// answers a client carrying the token.
async fn sign_in(http: &Http, username: &str, password: &str, role: &str) -> Result<Http> {
    let r = http.anonymous().login(username, password).await?;
    ensure!(r.status == 200, "{username}'s login: expected HTTP 200, got {r}");
    let token = r.json["token"].as_str().filter(|t| !t.is_empty()).with_context(|| format!("{username}'s login: no token in {r}"))?;
    ensure!(r.json["user"]["username"] == json!(username), "{username}'s login: user.username in {r}");
    ensure!(r.json["user"]["role"] == json!(role), "{username}'s login: expected user.role {role:?} in {r}");
    ensure!(r.json["expires_at"].is_string(), "{username}'s login: no expires_at in {r}");
    Ok(http.anonymous().with_token(token))
}

/// Requires a refused login: `status`, a JSON error body, no token.
fn refused(who: &str, r: Resp, status: u16) -> Result<Resp> {
    ensure!(r.status == status, "{who}: expected HTTP {status}, got {r}");
    ensure!(r.json.get("token").is_none_or(|t| t.is_null()), "{who}: a refused login handed out a token: {r}");
    r.ensure_error_body().with_context(|| format!("{who}'s refusal"))
}

/// `failed_login` security events naming `username` (newest first).
async fn failed_logins_of(admin: &Http, username: &str) -> Result<Vec<tessera_tests::Value>> {
    let r = admin.get("/api/v1/compliance/security-events?event_type=failed_login&limit=1000").await?.ensure_status(200)?;
    let events = r.json["events"].as_array().with_context(|| format!("no `events` array in {r}"))?;
    Ok(events.iter().filter(|e| e["user_id"] == json!(username)).cloned().collect())
}

const KEYS: &str = "/api/v1/kv/keys?prefix=&limit=1";
/// An admin-only route (`manage:vault`); `GET /api/v1/admin/users` needs only
/// `read:cluster`, which operators hold too.
const ADMIN_ROUTE: &str = "/api/v1/admin/vault/status";

async fn scenario(c: &mut Cluster, slapd: &Slapd) -> Result<()> {
    let local_admin = c.http.clone();
    let config = c.root().join("ldap-router.toml");
    std::fs::write(&config, router_config(slapd))?;
    let config = config.display().to_string();
    let env: [(&str, &str); 2] = [
        ("SERVICE_CONFIG", config.as_str()),
        // A disabled user's token must stop working within the recheck interval,
        // not after the router's 2 s default reuse of a resolved token.
        ("SERVICE_SESSION_CACHE_TTL_MS", "200"),
    ];
    let (idx, router) = c.start_router(&env).await.context("starting the LDAP router")?;
    let anon = router.anonymous();

    // 1. alice (tessera-admins) is an admin: her token opens an admin route.
    let alice = sign_in(&anon, "alice", ALICE_PASSWORD, "admin").await?;
    let alice_token = alice.token().context("alice's token")?.to_string();
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice on the admin route")?;
    alice.get(KEYS).await?.ensure_status(200).context("alice lists keys")?;
    // Router 0 signs in local users only: the record kept for a directory user
    // has no password that verifies there.
    refused("alice through the local-only router 0", local_admin.anonymous().login("alice", ALICE_PASSWORD).await?, 401)?;

    // 2. bob (engineers) is an operator: data yes, admin routes no.
    let bob = sign_in(&anon, "bob", BOB_PASSWORD, "operator").await?;
    bob.get(KEYS).await?.ensure_status(200).context("bob lists keys")?;
    let r = bob.get(ADMIN_ROUTE).await?;
    ensure!(r.status == 403, "bob (operator) on {ADMIN_ROUTE}: expected HTTP 403, got {r}");
    r.ensure_error_body()?;

    // 7. Break-glass: the local admin the harness provisioned still signs in here.
    let admin_here = sign_in(&anon, ADMIN_USER, ADMIN_PASSWORD, "admin").await.context("the local admin through the LDAP router")?;
    admin_here.get(ADMIN_ROUTE).await?.ensure_status(200).context("the local admin on the admin route")?;

    // 3. A wrong password is 401 and recorded as a failed login naming alice.
    let before = failed_logins_of(&local_admin, "alice").await?.len();
    refused("alice with a wrong password", anon.login("alice", "Not-Alice-Passw0rd!").await?, 401)?;
    wait_for(Duration::from_secs(10), "a failed_login security event naming alice", async || {
        let events = failed_logins_of(&local_admin, "alice").await?;
        ensure!(events.len() > before, "{} failed_login events name alice, {before} before the wrong password", events.len());
        Ok(Some(()))
    })
    .await?;

    // 4. carol is known to the directory but in no mapped group: 403. An unknown user: 401.
    refused("carol (no mapped group)", anon.login("carol", CAROL_PASSWORD).await?, 403)?;
    refused("zed (not in the directory)", anon.login("zed", "Zed-Passw0rd!").await?, 401)?;

    // 5. dave is excluded by the user filter (employeeType=disabled), right password or not.
    refused("dave (disabled)", anon.login("dave", DAVE_PASSWORD).await?, 401)?;

    // 6. bob is disabled mid-session: his tokens (this one and the one of step 2)
    // stop working within a few seconds; he cannot sign in again; alice goes on.
    let bob2 = sign_in(&anon, "bob", BOB_PASSWORD, "operator").await?;
    bob2.get(KEYS).await?.ensure_status(200).context("bob's second session lists keys")?;
    slapd.modify(&format!("dn: {}\nchangetype: modify\nreplace: employeeType\nemployeeType: disabled\n", ldap::user_dn("bob")))?;
    let disabled_at = Instant::now();
    for (label, session) in [("bob's second session", &bob2), ("bob's first session", &bob)] {
        wait_for(Duration::from_secs(15), &format!("{label} to answer 401 after bob was disabled in the directory"), async || {
            let r = session.get(KEYS).await?;
            ensure!(r.status == 401, "GET {KEYS} with {label}: {r}");
            Ok(Some(()))
        })
        .await?;
    }
    eprintln!("[ldap_login] bob's sessions refused {:?} after he was disabled", disabled_at.elapsed());
    refused("bob after being disabled", anon.login("bob", BOB_PASSWORD).await?, 401)?;
    alice.get(KEYS).await?.ensure_status(200).context("alice after bob was disabled")?;

    // 8. The LDAP router restarts (same port, same configuration): alice's
    // session survives, bob's stays refused, and alice signs in again.
    c.stop_router(idx).await?;
    c.start_all().await?;
    let timeout = c.options().ready_timeout;
    c.wait_router_ready(idx, timeout).await.context("the LDAP router after its restart")?;
    let router = c.router_http(idx);
    let r = router.with_token(&alice_token).get(ADMIN_ROUTE).await?;
    ensure!(r.status == 200, "alice's token on {ADMIN_ROUTE} after the LDAP router restarted: expected HTTP 200, got {r}");
    let r = router.with_token(bob.token().context("bob's token")?).get(KEYS).await?;
    ensure!(r.status == 401, "bob's token after the LDAP router restarted: expected HTTP 401, got {r}");
    sign_in(&router, "alice", ALICE_PASSWORD, "admin").await.context("alice after the restart")?;

    // 9. Direct bind (user_dn_template, no service account): alice binds as her
    // own DN and reads her groups as herself; a wrong password and a user the
    // filter excludes are refused.
    let direct = c.root().join("ldap-direct-router.toml");
    std::fs::write(&direct, direct_bind_config(slapd))?;
    let direct = direct.display().to_string();
    let (_, direct_router) = c.start_router(&[("SERVICE_CONFIG", direct.as_str())]).await.context("starting the direct-bind router")?;
    let anon = direct_router.anonymous();
    let alice = sign_in(&anon, "alice", ALICE_PASSWORD, "admin").await.context("alice by direct bind")?;
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice (direct bind) on the admin route")?;
    refused("alice by direct bind with a wrong password", anon.login("alice", "Not-Alice-Passw0rd!").await?, 401)?;
    refused("dave by direct bind (disabled)", anon.login("dave", DAVE_PASSWORD).await?, 401)?;
    refused("an empty password by direct bind", anon.login("alice", "").await?, 401)?;
    Ok(())
}
