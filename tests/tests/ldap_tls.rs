//! Scenario: LDAP sign-in over TLS to the directory.
//!
//! A seeded `slapd` started with [`Slapd::start_with_tls`] holds a server
//! certificate (SAN IP 127.0.0.1, DNS localhost) issued by a test CA, and
//! listens on `ldap://127.0.0.1:P1` (StartTLS) and `ldaps://127.0.0.1:P2`.
//! Routers are started with `SERVICE_CONFIG` naming `[auth] method = "ldap"`
//! and the role mapping `tessera-admins` → admin:
//!
//! 1. `ldap://P1` with `start_tls = true` and `ca_file` = the test CA: alice
//!    signs in as admin and her token opens an admin route; a wrong password
//!    is 401 (the bind went through over TLS and was refused).
//! 2. `ldaps://P2` with the test CA: the same.
//! 3. `ldaps://P2` with a CA that did not sign slapd's certificate: alice's
//!    sign-in is 503 (the directory is unreachable: the certificate does not
//!    verify: the refusal names the certificate), with no token.
//! 4. `ldap://P1` with `start_tls = true` and that other CA: 503 as well, so
//!    the router of step 1 did upgrade its connection rather than stay plain.
//!
//! Needs the Debian packages `slapd` and `ldap-utils`; without them the test
//! fails saying so (it never skips).

use std::path::Path;

use anyhow::{Context, Result, ensure};
use tessera_tests::ldap::{self, ALICE_PASSWORD, Slapd};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ldap_tls() {
    let slapd = tokio::task::spawn_blocking(Slapd::start_with_tls)
        .await
        .expect("slapd start task")
        .unwrap_or_else(|e| panic!("could not start the OpenLDAP server (with TLS) the scenario needs: {e:?}"));
    let opts = ClusterOptions {
        router_env: vec![
            // The refused logins all come from 127.0.0.1: keep them far from
            // the auto-ban threshold, which would close the routers to it.
            ("SERVICE_AUTO_BAN_THRESHOLD".into(), "1000".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, &slapd).await {
        panic!("ldap_tls scenario failed: {e:?}");
    }
}

/// An LDAP router's `SERVICE_CONFIG` file: `url`, `start_tls` and `ca_file`.
fn router_config(slapd: &Slapd, url: &str, start_tls: bool, ca_file: &Path) -> String {
    format!(
        r#"[auth]
method = "ldap"

[auth.ldap]
url = "{url}"
start_tls = {start_tls}
ca_file = "{ca_file}"
bind_dn = "{bind_dn}"
bind_password = "{bind_password}"
user_base_dn = "{people}"
user_filter = "(&(objectClass=inetOrgPerson)(uid={{username}})(!(employeeType=disabled)))"
group_base_dn = "{groups}"
group_filter = "(member={{dn}})"
timeout_secs = 5

[auth.ldap.role_mapping]
"tessera-admins" = "admin"
"engineers" = "operator"
"#,
        ca_file = ca_file.display(),
        bind_dn = slapd.admin_dn(),
        bind_password = slapd.admin_password(),
        people = ldap::PEOPLE_DN,
        groups = ldap::GROUPS_DN,
    )
}

/// Starts a router signing users in against `url` (`start_tls`, `ca_file`);
/// answers an unauthenticated client of it.
async fn ldap_router(c: &mut Cluster, slapd: &Slapd, name: &str, url: &str, start_tls: bool, ca_file: &Path) -> Result<Http> {
    let config = c.root().join(format!("{name}.toml"));
    std::fs::write(&config, router_config(slapd, url, start_tls, ca_file))?;
    let config = config.display().to_string();
    let (_, router) =
        c.start_router(&[("SERVICE_CONFIG", config.as_str())]).await.with_context(|| format!("starting the {name} router"))?;
    Ok(router.anonymous())
}

/// Signs in; requires 200 with a token, `user.username` and `user.role`;
/// answers a client carrying the token.
async fn sign_in(http: &Http, username: &str, password: &str, role: &str) -> Result<Http> {
    let r = http.anonymous().login(username, password).await?;
    ensure!(r.status == 200, "{username}'s login: expected HTTP 200, got {r}");
    let token = r.json["token"].as_str().filter(|t| !t.is_empty()).with_context(|| format!("{username}'s login: no token in {r}"))?;
    ensure!(r.json["user"]["username"] == json!(username), "{username}'s login: user.username in {r}");
    ensure!(r.json["user"]["role"] == json!(role), "{username}'s login: expected user.role {role:?} in {r}");
    Ok(http.anonymous().with_token(token))
}

/// Requires a refused login: `status`, a JSON error body, no token.
fn refused(who: &str, r: Resp, status: u16) -> Result<Resp> {
    ensure!(r.status == status, "{who}: expected HTTP {status}, got {r}");
    ensure!(r.json.get("token").is_none_or(|t| t.is_null()), "{who}: a refused login handed out a token: {r}");
    r.ensure_error_body().with_context(|| format!("{who}'s refusal"))
}

/// An admin-only route (`manage:vault`).
const ADMIN_ROUTE: &str = "/api/v1/admin/vault/status";

async fn scenario(c: &mut Cluster, slapd: &Slapd) -> Result<()> {
    let ca = slapd.ca_file().context("slapd was started without TLS")?.to_path_buf();
    let ldaps = slapd.ldaps_url().context("slapd has no ldaps:// URL")?;
    let other_ca = ldap::other_ca(&c.root().join("other-ca")).context("making a CA that did not sign slapd's certificate")?;
    ensure!(std::fs::read(&other_ca)? != std::fs::read(&ca)?, "the other CA is slapd's CA");

    // 1. StartTLS on the ldap:// port, the certificate checked against the test CA.
    let starttls = ldap_router(c, slapd, "ldap-starttls", &slapd.url(), true, &ca).await?;
    let alice = sign_in(&starttls, "alice", ALICE_PASSWORD, "admin").await.context("alice over StartTLS")?;
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice (StartTLS) on the admin route")?;
    refused("alice with a wrong password over StartTLS", starttls.login("alice", "Not-Alice-Passw0rd!").await?, 401)?;

    // 2. LDAPS, the certificate checked against the test CA.
    let tls = ldap_router(c, slapd, "ldaps", &ldaps, false, &ca).await?;
    let alice = sign_in(&tls, "alice", ALICE_PASSWORD, "admin").await.context("alice over LDAPS")?;
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice (LDAPS) on the admin route")?;
    refused("alice with a wrong password over LDAPS", tls.login("alice", "Not-Alice-Passw0rd!").await?, 401)?;

    // 3. LDAPS trusting a CA that did not sign slapd's certificate: the
    // directory is unreachable to this router.
    let wrong = ldap_router(c, slapd, "ldaps-other-ca", &ldaps, false, &other_ca).await?;
    let r = refused("alice over LDAPS with another CA", wrong.login("alice", ALICE_PASSWORD).await?, 503)?;
    eprintln!("[ldap_tls] LDAPS with another CA: {r}");
    ensure!(r.to_string().contains("certificate"), "alice over LDAPS with another CA: the refusal does not name the certificate: {r}");

    // 4. StartTLS trusting that other CA: refused too, so step 1 was TLS.
    let wrong = ldap_router(c, slapd, "ldap-starttls-other-ca", &slapd.url(), true, &other_ca).await?;
    let r = refused("alice over StartTLS with another CA", wrong.login("alice", ALICE_PASSWORD).await?, 503)?;
    eprintln!("[ldap_tls] StartTLS with another CA: {r}");
    ensure!(r.to_string().contains("certificate"), "alice over StartTLS with another CA: the refusal does not name the certificate: {r}");

    // The routers that trust the right CA still sign alice in.
    sign_in(&starttls, "alice", ALICE_PASSWORD, "admin").await.context("alice over StartTLS, at the end")?;
    sign_in(&tls, "alice", ALICE_PASSWORD, "admin").await.context("alice over LDAPS, at the end")?;
    Ok(())
}
