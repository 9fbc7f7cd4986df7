//! Scenario: no secret ever reaches a log line. A cluster runs at debug log
//! level with its router's secrets coming from a (loopback) secrets manager and
//! the environment; the session logs in, creates a user with a password, changes
//! it, fails logins, enables MFA, fails an MFA code, stores and reads a vault
//! secret and tries a wrong vault passphrase. Then every node and router log
//! under the cluster root is scanned for each secret string: none may appear.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, ensure};
use reqwest::Method;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MANAGER_TOKEN: &str = "s.manager-token-Q7v2LpX9";
const MANAGER_DB_PASSWORD: &str = "mgr-db-pass-H3kW8zN1";
const MANAGER_JWT_SECRET: &str = "mgr-jwt-secret-R5tY6uI7oP8aS9dF0gH1jK2lZ3xC4vB5nM6qW7eR8tY9uI0o";
const ENV_DB_PASSWORD: &str = "env-db-pass-U2iO3pA4";
const VAULT_PASSPHRASE: &str = "vault-passphrase-T4rG6yH8";
const WRONG_PASSPHRASE: &str = "wrong-passphrase-B1nM3kL5";
const VAULT_VALUE: &str = "vault-value-Z9xC8vB7nM6";
const USER_PASSWORD: &str = "User-Passw0rd#E5rT6y";
const NEW_USER_PASSWORD: &str = "Changed-Passw0rd#W3eR4t";
const WRONG_PASSWORD: &str = "Wrong-Passw0rd#A1sD2f";

/// A loopback stand-in for a Vault KV v2 server: `GET /v1/secret/data/tessera/<name>`
/// answers `{"data":{"data":{"value":…}}}` for db_password and jwt_secret with the
/// right `X-Vault-Token`, 404 otherwise. Records the names asked.
async fn secrets_manager() -> Result<(String, Arc<Mutex<Vec<String>>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or_default().to_string();
                let token_ok = head
                    .lines()
                    .any(|l| l.split_once(':').is_some_and(|(k, v)| k.eq_ignore_ascii_case("x-vault-token") && v.trim() == MANAGER_TOKEN));
                let name = path.strip_prefix("/v1/secret/data/tessera/").unwrap_or_default().to_string();
                log.lock().unwrap().push(name.clone());
                let value = match name.as_str() {
                    "db_password" => Some(MANAGER_DB_PASSWORD),
                    "jwt_secret" => Some(MANAGER_JWT_SECRET),
                    _ => None,
                };
                let (status, body) = match (token_ok, value) {
                    (false, _) => ("403 Forbidden", json!({"errors": ["permission denied"]})),
                    (true, Some(v)) => ("200 OK", json!({"data": {"data": {"value": v}, "metadata": {"version": 1}}})),
                    (true, None) => ("404 Not Found", json!({"errors": []})),
                };
                let body = body.to_string();
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Ok((format!("http://{addr}"), asked))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secrets_in_logs() {
    let (manager_url, asked) = secrets_manager().await.expect("secrets manager");
    let level = ("SERVICE_LOG_LEVEL".to_string(), "debug".to_string());
    let opts = ClusterOptions {
        node_env: vec![level.clone()],
        router_env: vec![
            level,
            ("SERVICE_SECRETS_MANAGER_URL".into(), manager_url),
            ("SERVICE_SECRETS_MANAGER_TOKEN".into(), MANAGER_TOKEN.into()),
            ("SERVICE_DB_PASSWORD".into(), ENV_DB_PASSWORD.into()),
            ("SERVICE_VAULT_PASSPHRASE".into(), VAULT_PASSPHRASE.into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, &asked).await {
        panic!("no-secrets-in-logs scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster, asked: &Arc<Mutex<Vec<String>>>) -> Result<()> {
    let admin = c.http.clone();
    let anon = admin.anonymous();
    let mut secrets: Vec<String> = [
        MANAGER_TOKEN,
        MANAGER_DB_PASSWORD,
        MANAGER_JWT_SECRET,
        ENV_DB_PASSWORD,
        VAULT_PASSPHRASE,
        WRONG_PASSPHRASE,
        VAULT_VALUE,
        USER_PASSWORD,
        NEW_USER_PASSWORD,
        WRONG_PASSWORD,
        ADMIN_PASSWORD,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    secrets.push(admin.token().context("admin token")?.to_string());
    {
        let asked = asked.lock().unwrap();
        ensure!(asked.iter().any(|n| n == "db_password") && asked.iter().any(|n| n == "jwt_secret"), "manager not asked: {asked:?}");
    }

    // Users and passwords.
    let r = admin
        .post(
            "/api/v1/admin/users",
            &json!({"username": "lena", "email": "lena@example.com", "password": USER_PASSWORD, "role": "operator"}),
        )
        .await?
        .ensure_status(201)?;
    let lena_id = r.json["id"].as_str().context("id")?.to_string();
    let lena = anon.login_as("lena", USER_PASSWORD).await?;
    secrets.push(lena.token().context("token")?.to_string());
    ensure!(anon.login("lena", WRONG_PASSWORD).await?.status == 401, "wrong password accepted");
    ensure!(anon.login("nobody", WRONG_PASSWORD).await?.status == 401, "unknown user accepted");
    admin
        .send(
            Method::PUT,
            &format!("/api/v1/admin/users/{lena_id}"),
            Some(serde_json::to_vec(&json!({"password": NEW_USER_PASSWORD}))?),
            Some("application/json"),
        )
        .await?
        .ensure_status(200)?;
    // A weak password is refused; the refusal must not echo it into a log either.
    let weak = "weakpw-k8j";
    secrets.push(weak.into());
    let r = admin
        .post("/api/v1/admin/users", &json!({"username": "weak", "email": "w@example.com", "password": weak, "role": "viewer"}))
        .await?;
    ensure!(r.status == 400, "weak password accepted: {r}");
    let lena = anon.login_as("lena", NEW_USER_PASSWORD).await?;
    secrets.push(lena.token().context("token")?.to_string());
    lena.kv_put("nsl/k", json!("not a secret"), None).await?.ensure_status(200)?;

    // MFA, when the router offers it.
    let r = lena.post("/api/v1/auth/mfa/enable", &json!({})).await?;
    if r.status == 200 {
        for field in ["secret", "otpauth_uri"] {
            if let Some(s) = r.json[field].as_str() {
                secrets.push(s.to_string());
            }
        }
        let r = anon.login("lena", NEW_USER_PASSWORD).await?.ensure_status(200)?;
        let temp = r.json["temp_token"].as_str().or(r.json["token"].as_str()).context("temporary token")?.to_string();
        secrets.push(temp.clone());
        let r = anon.post("/api/v1/auth/mfa/verify", &json!({"token": temp, "code": "000001"})).await?;
        ensure!(r.status != 200, "a wrong MFA code was accepted: {r}");
    }
    lena.logout().await?;

    // The vault: unsealed from the environment at start.
    tessera_tests::wait_for(std::time::Duration::from_secs(30), "vault unsealed from SERVICE_VAULT_PASSPHRASE", async || {
        let r = admin.get("/api/v1/admin/vault/status").await?.ensure_status(200)?;
        Ok((r.json["sealed"] == false).then_some(()))
    })
    .await?;
    let body = serde_json::to_vec(&json!({"value": VAULT_VALUE}))?;
    admin.send(Method::PUT, "/api/v1/admin/vault/secrets/app/token", Some(body), Some("application/json")).await?.ensure_status(201)?;
    let r = admin.get("/api/v1/admin/vault/secrets/app/token").await?.ensure_status(200)?;
    ensure!(r.json["value"] == VAULT_VALUE, "vault read: {r}");
    admin.post("/api/v1/admin/vault/seal", &json!({})).await?.ensure_status(200)?;
    let r = admin.post("/api/v1/admin/vault/unseal", &json!({"passphrase": WRONG_PASSPHRASE})).await?;
    ensure!(r.status == 400, "wrong passphrase: {r}");
    admin.post("/api/v1/admin/vault/unseal", &json!({"passphrase": VAULT_PASSPHRASE})).await?.ensure_status(200)?;
    admin.get("/api/v1/admin/vault/secrets/app/token").await?.ensure_status(200)?;
    // A second router resolving the same secrets, then everything stops (shutdown logs too).
    let (idx, r1) = c.start_router(&[("SERVICE_VAULT_PASSPHRASE", VAULT_PASSPHRASE)]).await?;
    let r1 = r1.login_as(ADMIN_USER, ADMIN_PASSWORD).await?;
    secrets.push(r1.token().context("token")?.to_string());
    c.stop_all().await?;

    // The router says where its secrets came from, and nothing else about them.
    let router_log = std::fs::read_to_string(c.root().join("router-0.log"))?;
    ensure!(
        router_log.lines().any(|l| l.contains("db_password") && l.contains("secrets manager")),
        "router 0 does not report the source of db_password"
    );
    let mut scanned = 0;
    let mut bytes = 0;
    for entry in std::fs::read_dir(c.root())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read(&path)?;
            bytes += text.len();
            scanned += 1;
            check_file(&path, &text, &secrets)?;
        }
    }
    ensure!(scanned > 3 + idx, "only {scanned} log files under {}", c.root().display());
    eprintln!("scanned {scanned} log files ({bytes} bytes) for {} secrets", secrets.len());
    Ok(())
}

fn check_file(path: &Path, text: &[u8], secrets: &[String]) -> Result<()> {
    let text = String::from_utf8_lossy(text);
    for s in secrets {
        if let Some(line) = text.lines().find(|l| l.contains(s.as_str())) {
            anyhow::bail!("{} contains the secret {s:?} in: {line}", path.display());
        }
    }
    Ok(())
}
