//! Scenario: OpenID Connect sign-in against a real certified OpenID provider.
//!
//! `oidc-provider` 9 under Node.js ([`tessera_tests::oidc::Provider`]: client
//! `tessera`, PKCE required, dev-interaction login and consent forms, accounts
//! alice `roles: ["tessera-admins"]`, bob `["engineers"]`, carol `[]`, signing
//! with key A) serves a second router started with `SERVICE_CONFIG` naming
//! `[auth] method = "oauth2"`, the issuer, the client, its own callback URL,
//! `role_claim = "roles"`, `username_claim = "preferred_username"` and the role
//! mapping `tessera-admins` → admin, `engineers` → operator.
//!
//! A browser (cookies kept, redirects followed by hand) runs the code flow:
//! `GET /api/v1/auth/oidc/login` (302 to the provider with an S256 challenge,
//! state and nonce, and a `tessera_oidc` cookie) → the provider's login and
//! consent forms → the redirect back to `/api/v1/auth/oidc/callback`, which
//! answers Tessera's own session. alice becomes admin and opens an admin-only
//! route (`GET /api/v1/admin/config`); bob becomes operator (403 there; data
//! and `GET /api/v1/admin/users`, a `read:cluster` route, yes); carol (no
//! mapped role) is 403 at the callback. A forged or missing state, or no cookie, is 400; a code
//! the provider refuses is 401; a replayed callback opens no session.
//!
//! ID tokens as `Authorization: Bearer`: one the provider issued (the test as
//! the client, its own PKCE, never delivering the code to the router) and one
//! the test signs with key A open the admin route; wrong `aud`, wrong `iss`,
//! expired, `alg: none`, HS256 keyed with the public key's PEM, an unknown
//! `kid` and a key the provider never published are 401. Key rotation: the
//! provider restarts signing with key B alone; a B token is accepted (the
//! router refetches the JWKS for the unknown kid), a still-unexpired A token is
//! then 401 (one used before the rotation within the router's short caller
//! cache), and a fresh code flow (ID token signed with B) signs alice in.
//! Finally the router restarts: alice's Tessera session still works.
//!
//! Needs `node` (20 or later) and `npm` (the first run installs oidc-provider
//! into `~/.cache/tessera`); without them the test fails saying so.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tessera_tests::oidc::{
    self, Browser, CALLBACK_PATH, CLIENT_ID, CLIENT_SECRET, LOGIN_PATH, Provider, generate_key, now_secs, query_params, sign_rs256,
};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, Value, json, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_login() {
    let keys = tokio::task::spawn_blocking(|| -> Result<[Value; 3]> {
        Ok([generate_key("key-a")?, generate_key("key-b")?, generate_key("key-c")?])
    })
    .await
    .expect("key generation task")
    .unwrap_or_else(|e| panic!("could not generate the provider's keys: {e:?}"));
    let router_port = tessera_tests::pick_port().expect("a port for the OIDC router");
    let callback = format!("http://127.0.0.1:{router_port}{CALLBACK_PATH}");
    let mut provider = Provider::start(vec![callback.clone()], vec![keys[0].clone()])
        .await
        .unwrap_or_else(|e| panic!("could not start the OpenID provider the scenario needs: {e:?}"));
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, &mut provider, router_port, &callback, &keys).await {
        panic!("oidc_login scenario failed: {e:?}");
    }
}

const KEYS: &str = "/api/v1/kv/keys?prefix=&limit=1";
/// An admin-only route (`manage:cluster`). `GET /api/v1/admin/users` needs
/// only `read:cluster`, which operators have too.
const ADMIN_ROUTE: &str = "/api/v1/admin/config";
const USERS: &str = "/api/v1/admin/users";
const COOKIE: &str = "tessera_oidc";

/// The OIDC router's `SERVICE_CONFIG` file.
fn router_config(issuer: &str, callback: &str) -> String {
    format!(
        r#"[auth]
method = "oauth2"

[auth.oauth2]
issuer = "{issuer}"
client_id = "{CLIENT_ID}"
client_secret = "{CLIENT_SECRET}"
redirect_uri = "{callback}"
scopes = "openid email profile roles"
role_claim = "roles"
username_claim = "preferred_username"

[auth.oauth2.role_mapping]
"tessera-admins" = "admin"
"engineers" = "operator"
"#
    )
}

/// A code flow run up to the redirect back to the router, not yet delivered.
struct Flow {
    browser: Browser,
    /// The callback URL the provider redirected to (`code`, `state`, `iss`).
    callback: String,
    /// The `state` the router put in its authorization request.
    state: String,
}

/// The value of query parameter `name` in `url`.
fn param(url: &str, name: &str) -> Result<Option<String>> {
    Ok(query_params(url)?.into_iter().find(|(k, _)| k == name).map(|(_, v)| v))
}

/// `url` with query parameter `name` set to `value` (removed when `None`).
fn with_param(url: &str, name: &str, value: Option<&str>) -> Result<String> {
    let mut u = reqwest::Url::parse(url)?;
    let pairs: Vec<(String, String)> = u.query_pairs().filter(|(k, _)| k != name).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    {
        let mut q = u.query_pairs_mut();
        q.clear();
        for (k, v) in &pairs {
            q.append_pair(k, v);
        }
        if let Some(v) = value {
            q.append_pair(name, v);
        }
    }
    Ok(u.to_string())
}

/// `GET /api/v1/auth/oidc/login` on `router` in a fresh browser: requires a 302
/// to the provider's authorization endpoint carrying the client, the callback,
/// the scopes, an S256 challenge, state and nonce, and the `tessera_oidc`
/// cookie; then signs in as `username` on the provider and stops at the
/// redirect back to the router.
async fn start_flow(router: &str, provider: &Provider, callback: &str, username: &str) -> Result<Flow> {
    let browser = Browser::new();
    let login = format!("{router}{LOGIN_PATH}");
    let r = browser.get(&login).await?;
    ensure!(r.status == 302, "GET {LOGIN_PATH} ({username}): expected HTTP 302, got {r}");
    let location = Browser::location(&login, &r)?;
    let endpoint = provider.discovery().await?["authorization_endpoint"].as_str().context("authorization_endpoint")?.to_string();
    ensure!(location.starts_with(&format!("{endpoint}?")), "the login redirect {location} is not to the provider's {endpoint}");
    let p = |name: &str| param(&location, name);
    ensure!(p("client_id")?.as_deref() == Some(CLIENT_ID), "client_id in {location}");
    ensure!(p("response_type")?.as_deref() == Some("code"), "response_type in {location}");
    ensure!(p("redirect_uri")?.as_deref() == Some(callback), "redirect_uri in {location} (expected {callback})");
    let scope = p("scope")?.unwrap_or_default();
    ensure!(["openid", "roles"].iter().all(|s| scope.split(' ').any(|x| x == *s)), "scope {scope:?} in {location}");
    ensure!(p("code_challenge_method")?.as_deref() == Some("S256"), "code_challenge_method in {location}");
    ensure!(p("code_challenge")?.is_some_and(|c| c.len() == 43), "a 43-character S256 code_challenge in {location}");
    let state = p("state")?.filter(|s| s.len() >= 16).with_context(|| format!("no state of 16+ characters in {location}"))?;
    ensure!(p("nonce")?.is_some_and(|n| n.len() >= 16), "no nonce of 16+ characters in {location}");
    ensure!(browser.cookie(COOKIE).is_some(), "no {COOKIE} cookie set by GET {LOGIN_PATH}: {:?}", r.headers.get_all("set-cookie"));

    let back = browser.sign_in(&location, username, &format!("{username}-any-password"), callback).await?;
    ensure!(param(&back, "error")?.is_none(), "the provider answered an error for {username}: {back}");
    ensure!(param(&back, "code")?.is_some(), "no code in the provider's redirect {back}");
    ensure!(param(&back, "state")?.as_deref() == Some(state.as_str()), "the provider's redirect {back} lost the state {state}");
    Ok(Flow { browser, callback: back, state })
}

/// Delivers the callback: requires 200 with Tessera's session (`token`,
/// `user.username`, `user.role`, `expires_at`); answers a client with the token.
async fn finish_flow(router: &Http, flow: &Flow, username: &str, role: &str) -> Result<Http> {
    let r = flow.browser.get(&flow.callback).await?;
    ensure!(r.status == 200, "{username}'s callback: expected HTTP 200, got {r}");
    let token = r.json["token"].as_str().filter(|t| !t.is_empty()).with_context(|| format!("{username}'s callback: no token in {r}"))?;
    ensure!(r.json["user"]["username"] == json!(username), "{username}'s callback: user.username in {r}");
    ensure!(r.json["user"]["role"] == json!(role), "{username}'s callback: expected user.role {role:?} in {r}");
    ensure!(r.json["expires_at"].is_string(), "{username}'s callback: no expires_at in {r}");
    Ok(router.anonymous().with_token(token))
}

/// Requires a refusal: `status`, a JSON error body, no token.
fn refused(what: &str, r: Resp, status: u16) -> Result<Resp> {
    ensure!(r.status == status, "{what}: expected HTTP {status}, got {r}");
    ensure!(r.json.get("token").is_none_or(Value::is_null), "{what}: a refusal handed out a token: {r}");
    r.ensure_error_body().with_context(|| format!("{what}'s refusal"))
}

/// ID-token claims for `sub` (preferred_username = sub) with `roles`, issued
/// now by `iss` for `aud`, valid for ten minutes.
fn id_claims(iss: &str, aud: &str, sub: &str, roles: &[&str]) -> Value {
    let now = now_secs();
    json!({
        "iss": iss, "aud": aud, "sub": sub, "preferred_username": sub, "email": format!("{sub}@example.com"),
        "roles": roles, "iat": now, "nbf": now, "exp": now + 600,
    })
}

/// `GET path` with `Authorization: Bearer <token>` on `router`.
async fn bearer(router: &Http, token: &str, path: &str) -> Result<Resp> {
    router.anonymous().with_token(token).get(path).await
}

async fn scenario(c: &mut Cluster, provider: &mut Provider, router_port: u16, callback: &str, keys: &[Value; 3]) -> Result<()> {
    let [key_a, key_b, key_c] = keys;
    let issuer = provider.issuer();
    let config = c.root().join("oidc-router.toml");
    std::fs::write(&config, router_config(&issuer, callback))?;
    let config = config.display().to_string();
    let env: [(&str, &str); 2] = [
        ("SERVICE_CONFIG", config.as_str()),
        // The scenario's many refused tokens all come from 127.0.0.1: keep them
        // far from the auto-ban threshold, which would close the router to it.
        ("SERVICE_AUTO_BAN_THRESHOLD", "1000"),
    ];
    let (idx, router) = c.start_router_on_port(router_port, &env).await.context("starting the OIDC router")?;
    let base = router.base().to_string();
    ensure!(format!("{base}{CALLBACK_PATH}") == callback, "the router serves at {base}, its callback is {callback}");

    // 1. alice (tessera-admins) through the code flow: admin, her token opens an admin route.
    let flow = start_flow(&base, provider, callback, "alice").await?;
    let alice = finish_flow(&router, &flow, "alice", "admin").await?;
    let alice_token = alice.token().context("alice's token")?.to_string();
    let r = alice.get(USERS).await?.ensure_status(200).context("alice lists the users")?;
    let users = r.json["users"].as_array().with_context(|| format!("no users in {r}"))?;
    ensure!(users.iter().any(|u| u["username"] == "alice" && u["role"] == "admin"), "alice's record (admin) in {r}");
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice (admin) on the admin route")?;
    alice.get(KEYS).await?.ensure_status(200).context("alice lists keys")?;
    // The same callback again (code and state used up) opens no session.
    let r = flow.browser.get(&flow.callback).await?;
    ensure!(matches!(r.status, 400 | 401), "alice's callback replayed: expected HTTP 400 or 401, got {r}");
    ensure!(r.json.get("token").is_none_or(Value::is_null), "a replayed callback handed out a token: {r}");

    // 2. bob (engineers): operator; data yes, admin routes no.
    let flow = start_flow(&base, provider, callback, "bob").await?;
    let bob = finish_flow(&router, &flow, "bob", "operator").await?;
    bob.get(KEYS).await?.ensure_status(200).context("bob (operator) lists keys")?;
    bob.get(USERS).await?.ensure_status(200).context("bob (operator, read:cluster) lists the users")?;
    let r = bob.get(ADMIN_ROUTE).await?;
    ensure!(r.status == 403, "bob (operator) on {ADMIN_ROUTE}: expected HTTP 403, got {r}");
    r.ensure_error_body()?;

    // 3. carol is known to the provider but carries no mapped role: 403 at the callback.
    let flow = start_flow(&base, provider, callback, "carol").await?;
    refused("carol's callback (no mapped role)", flow.browser.get(&flow.callback).await?, 403)?;

    // 4. The callback's guards: a forged state, no state, no cookie → 400; a code the provider refuses → 401.
    let flow = start_flow(&base, provider, callback, "alice").await?;
    let forged = with_param(&flow.callback, "state", Some("forged-state-0123456789abcdef"))?;
    refused("a callback with a forged state", flow.browser.get(&forged).await?, 400)?;
    let flow = start_flow(&base, provider, callback, "alice").await?;
    refused("a callback without state", flow.browser.get(&with_param(&flow.callback, "state", None)?).await?, 400)?;
    let flow = start_flow(&base, provider, callback, "alice").await?;
    refused("a callback without the tessera_oidc cookie", Browser::new().get(&flow.callback).await?, 400)?;
    // Another flow's cookie (its own state) does not fit this flow's state either.
    let other = start_flow(&base, provider, callback, "alice").await?;
    let mixed = Browser::new();
    mixed.copy_cookie_from(&other.browser, COOKIE);
    refused("a callback with another flow's cookie", mixed.get(&flow.callback).await?, 400)?;
    let flow = start_flow(&base, provider, callback, "alice").await?;
    let bogus = with_param(&flow.callback, "code", Some("not-a-code-the-provider-issued"))?;
    ensure!(param(&bogus, "state")?.as_deref() == Some(flow.state.as_str()), "the bogus-code callback keeps the state");
    refused("a callback with a code the provider refuses", flow.browser.get(&bogus).await?, 401)?;

    // 5. ID tokens as bearer tokens. One the provider issued (the test is the
    // client, with its own PKCE; the code never reaches the router):
    let issued = provider.code_flow("alice", callback).await?;
    let id_token = issued["id_token"].as_str().context("the provider's id_token")?.to_string();
    let r = bearer(&router, &id_token, ADMIN_ROUTE).await?;
    ensure!(r.status == 200, "alice's provider-issued ID token on {ADMIN_ROUTE}: expected HTTP 200, got {r}");
    // … and ones the test signs with the provider's key A.
    let good = sign_rs256(key_a, json!({}), &id_claims(&issuer, CLIENT_ID, "alice", &["tessera-admins"]))?;
    let r = bearer(&router, &good, ADMIN_ROUTE).await?;
    ensure!(r.status == 200, "alice's ID token signed with key A on {ADMIN_ROUTE}: expected HTTP 200, got {r}");
    let bob_id = sign_rs256(key_a, json!({}), &id_claims(&issuer, CLIENT_ID, "bob", &["engineers"]))?;
    bearer(&router, &bob_id, KEYS).await?.ensure_status(200).context("bob's ID token lists keys")?;
    let r = bearer(&router, &bob_id, ADMIN_ROUTE).await?;
    ensure!(r.status == 403, "bob's ID token (operator) on {ADMIN_ROUTE}: expected HTTP 403, got {r}");
    let carol_id = sign_rs256(key_a, json!({}), &id_claims(&issuer, CLIENT_ID, "carol", &[]))?;
    let r = bearer(&router, &carol_id, KEYS).await?;
    ensure!(matches!(r.status, 401 | 403), "carol's ID token (no mapped role): expected HTTP 403 (or 401), got {r}");

    let alice_claims = id_claims(&issuer, CLIENT_ID, "alice", &["tessera-admins"]);
    let mut expired = alice_claims.clone();
    let now = now_secs();
    (expired["iat"], expired["nbf"], expired["exp"]) = (json!(now - 7200), json!(now - 7200), json!(now - 3600));
    let forgeries: Vec<(&str, String)> = vec![
        ("wrong aud", sign_rs256(key_a, json!({}), &id_claims(&issuer, "another-client", "alice", &["tessera-admins"]))?),
        ("wrong iss", sign_rs256(key_a, json!({}), &id_claims("http://127.0.0.1:1", CLIENT_ID, "alice", &["tessera-admins"]))?),
        ("expired an hour ago", sign_rs256(key_a, json!({}), &expired)?),
        ("alg none, unsigned", oidc::unsigned(&alice_claims)),
        ("HS256 keyed with the public key's PEM", oidc::sign_hs256_with_public_pem(key_a, &alice_claims)?),
        ("signed with key A under an unknown kid", sign_rs256(key_a, json!({"kid": "key-unknown"}), &alice_claims)?),
        ("signed with key C, never published", sign_rs256(key_c, json!({}), &alice_claims)?),
        ("key A's signature over other claims", {
            let bob_parts: Vec<&str> = bob_id.split('.').collect();
            let alice_parts: Vec<&str> = good.split('.').collect();
            format!("{}.{}.{}", alice_parts[0], alice_parts[1], bob_parts[2])
        }),
    ];
    for (what, token) in &forgeries {
        let r = bearer(&router, token, ADMIN_ROUTE).await?;
        ensure!(r.status == 401, "an ID token {what} on {ADMIN_ROUTE}: expected HTTP 401, got {r}");
    }

    // 6. Key rotation: the provider restarts (same issuer) signing with key B alone.
    provider.restart(vec![key_b.clone()]).await.context("restarting the provider with key B")?;
    let b_token = sign_rs256(key_b, json!({}), &id_claims(&issuer, CLIENT_ID, "alice", &["tessera-admins"]))?;
    let rotated = Instant::now();
    wait_for(Duration::from_secs(60), "an ID token signed with the new key B to be accepted", async || {
        let r = bearer(&router, &b_token, ADMIN_ROUTE).await?;
        ensure!(r.status == 200, "alice's ID token signed with key B on {ADMIN_ROUTE}: {r}");
        Ok(Some(()))
    })
    .await?;
    eprintln!("[oidc_login] key B accepted {:?} after the provider's rotation", rotated.elapsed());
    // Key A no longer verifies: a token it signs now is refused at once, and
    // the one used before the rotation once the router's caller cache
    // (2 s by default) lets go of it.
    let mut fresh_a = id_claims(&issuer, CLIENT_ID, "alice", &["tessera-admins"]);
    fresh_a["jti"] = json!("signed-with-a-after-the-rotation");
    let r = bearer(&router, &sign_rs256(key_a, json!({}), &fresh_a)?, ADMIN_ROUTE).await?;
    ensure!(r.status == 401, "an unexpired ID token signed with the retired key A after the rotation: expected HTTP 401, got {r}");
    wait_for(Duration::from_secs(10), "alice's ID token signed with the retired key A to be refused", async || {
        let r = bearer(&router, &good, ADMIN_ROUTE).await?;
        ensure!(r.status == 401, "alice's unexpired ID token signed with the retired key A (used before the rotation): {r}");
        Ok(Some(()))
    })
    .await?;
    alice.get(ADMIN_ROUTE).await?.ensure_status(200).context("alice's Tessera session after the key rotation")?;
    let flow = start_flow(&base, provider, callback, "alice").await?;
    finish_flow(&router, &flow, "alice", "admin").await.context("alice's code flow with ID tokens signed by key B")?;

    // 7. The OIDC router restarts (same port, same configuration): alice's Tessera session survives.
    c.stop_router(idx).await?;
    c.start_all().await?;
    let timeout = c.options().ready_timeout;
    c.wait_router_ready(idx, timeout).await.context("the OIDC router after its restart")?;
    let router = c.router_http(idx);
    let r = router.with_token(&alice_token).get(ADMIN_ROUTE).await?;
    ensure!(r.status == 200, "alice's Tessera token on {ADMIN_ROUTE} after the OIDC router restarted: expected HTTP 200, got {r}");
    router.with_token(&alice_token).get(USERS).await?.ensure_status(200).context("alice lists the users after the restart")?;
    let r = bearer(&router, &b_token, ADMIN_ROUTE).await?;
    ensure!(r.status == 200, "alice's key-B ID token after the OIDC router restarted: expected HTTP 200, got {r}");
    Ok(())
}
