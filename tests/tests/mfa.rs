//! Scenario: TOTP second factor. A user enables MFA and gets a secret and an
//! otpauth URI; login then answers `{mfa_required, temp_token}`; a wrong code is
//! 401, the right one opens a session; the same code is refused again (also
//! through a second router); the development code is refused by default and
//! accepted only by a router in development mode; MFA can be disabled again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use tessera_api::security::totp;
use tessera_tests::{Cluster, ClusterOptions, Http, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mfa() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("mfa scenario failed: {e:?}");
    }
}

const USER: &str = "mia";
const PASSWORD: &str = "Sturdy-Passw0rd!";

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

/// The code of `secret` for the current time step, and that step.
fn current_code(secret: &[u8]) -> (String, u64) {
    let t = now_secs();
    (totp::code_at(secret, 6, t), t / totp::STEP_SECS)
}

/// Logs in with the password; expects the MFA challenge and returns the temporary token.
async fn challenge(http: &Http) -> Result<String> {
    let r = http.anonymous().login(USER, PASSWORD).await?.ensure_status(200)?;
    ensure!(r.json["mfa_required"] == json!(true), "login of an MFA user: {r}");
    ensure!(r.json.get("token").is_none(), "an MFA login must not hand out a session token: {r}");
    Ok(r.json["temp_token"].as_str().context("temp_token")?.to_string())
}

async fn verify(http: &Http, token: &str, code: &str) -> Result<tessera_tests::Resp> {
    http.anonymous().post("/api/v1/auth/mfa/verify", &json!({"token": token, "code": code})).await
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let admin = c.http.clone();
    admin
        .post("/api/v1/admin/users", &json!({"username": USER, "email": "mia@example.com", "password": PASSWORD, "role": "operator"}))
        .await?
        .ensure_status(201)?;
    let mia = admin.anonymous().login_as(USER, PASSWORD).await?;

    // Enable: a base32 secret and an otpauth URI; a second enable is a conflict.
    let r = mia.post("/api/v1/auth/mfa/enable", &json!({})).await?.ensure_status(200)?;
    let secret_b32 = r.json["secret"].as_str().context("secret")?.to_string();
    let uri = r.json["otpauth_uri"].as_str().context("otpauth_uri")?;
    ensure!(uri.starts_with("otpauth://totp/") && uri.contains(&format!("secret={secret_b32}")), "uri: {uri}");
    let secret = totp::decode_secret(&secret_b32).context("the secret is not base32")?;
    ensure!(secret.len() >= 16, "secret of {} bytes", secret.len());
    mia.post("/api/v1/auth/mfa/enable", &json!({})).await?.ensure_status(409)?.ensure_error_body()?;
    // The session opened before MFA keeps working.
    mia.get("/api/v1/kv/count?prefix=").await?.ensure_status(200)?;
    // Anonymous callers cannot enable MFA.
    admin.anonymous().post("/api/v1/auth/mfa/enable", &json!({})).await?.ensure_status(401)?;

    // Login now asks for a code. Malformed input is 400; a wrong code is 401; the
    // development code is refused on a router not in development mode.
    let temp = challenge(&admin).await?;
    verify(&admin, &temp, "12ab").await?.ensure_status(400)?.ensure_error_body()?;
    admin.anonymous().post("/api/v1/auth/mfa/verify", &json!({"token": temp})).await?.ensure_status(400)?;
    let valid: Vec<String> = (-1i64..=1).map(|d| totp::code_at(&secret, 6, (now_secs() as i64 + d * 30) as u64)).collect();
    let wrong = ["000000", "111111", "222222", "333333"].into_iter().find(|w| !valid.iter().any(|v| v == w)).context("a wrong code")?;
    verify(&admin, &temp, wrong).await?.ensure_status(401)?.ensure_error_body()?;
    if !valid.iter().any(|v| v == "000000") {
        let r = verify(&admin, &temp, "000000").await?;
        ensure!(r.status == 401, "the development code was accepted by default: {r}");
    }
    verify(&admin, "not-a-temp-token", wrong).await?.ensure_status(401)?;

    // The right code opens a session.
    let (code, step) = current_code(&secret);
    let r = verify(&admin, &temp, &code).await?.ensure_status(200)?;
    let token = r.json["token"].as_str().context("session token")?.to_string();
    ensure!(r.json["user"]["username"] == json!(USER) && r.json["user"]["mfa_enabled"] == json!(true), "verify: {r}");
    admin.with_token(&token).get("/api/v1/kv/count?prefix=").await?.ensure_status(200)?;
    // The temporary token was single purpose: it is gone now.
    verify(&admin, &temp, &code).await?.ensure_status(401)?;

    // The same code is refused again: on this router and through another one.
    let temp2 = challenge(&admin).await?;
    let r = verify(&admin, &temp2, &code).await?;
    ensure!(r.status == 401, "a used code was accepted again: {r}");
    let (_, r2) = c.start_router(&[]).await?;
    let temp3 = challenge(&r2).await?;
    let r = verify(&r2, &temp3, &code).await?;
    ensure!(r.status == 401, "a used code was accepted again through a second router: {r}");

    // The next time step's code works (wait for it on the clock, then try once).
    while now_secs() / totp::STEP_SECS <= step {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (next, _) = current_code(&secret);
    let r = verify(&r2, &temp3, &next).await?.ensure_status(200)?;
    let token2 = r.json["token"].as_str().context("token")?.to_string();

    // A router in development mode accepts the fixed development code.
    let (_, dev) = c.start_router(&[("SERVICE_DEV_MODE", "true")]).await?;
    let temp4 = challenge(&dev).await?;
    verify(&dev, &temp4, "000000").await?.ensure_status(200)?;

    // Disable needs a valid code: a wrong one is 401; then MFA is off and login
    // returns a session directly again.
    let mia2 = r2.with_token(&token2);
    mia2.post("/api/v1/auth/mfa/disable", &json!({"code": wrong})).await?.ensure_status(401)?;
    dev.with_token(&token2).post("/api/v1/auth/mfa/disable", &json!({"code": "000000"})).await?.ensure_status(200)?;
    let r = admin.anonymous().login(USER, PASSWORD).await?.ensure_status(200)?;
    ensure!(r.json["token"].is_string() && r.json.get("mfa_required").is_none(), "login after disable: {r}");
    mia2.post("/api/v1/auth/mfa/disable", &json!({"code": "000000"})).await?.ensure_status(400)?;
    Ok(())
}
