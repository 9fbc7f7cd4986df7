//! Scenario: PostgreSQL clients sign in with SCRAM-SHA-256: the password is
//! proved, never sent.
//!
//! At startup the router asks the admin (and a name no user has, so a probe
//! cannot tell names apart) for SCRAM-SHA-256, not for a cleartext password.
//! `tokio-postgres` and `psql` sign in with the right password; a wrong one is
//! `28P01`. A user created over HTTP signs in the same way, and after their
//! password is changed the old one stops working. Wrong proofs count as
//! failed logins: past the ban threshold the address is blocked, and then
//! even the right password is refused.

use std::io::{Read, Write};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_clients_prove_their_password_with_scram() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![
            ("SERVICE_PGWIRE_ENABLED".into(), "true".into()),
            ("SERVICE_PGWIRE_PORT".into(), port.to_string()),
            ("SERVICE_AUTO_BAN_THRESHOLD".into(), "6".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    cluster.login().await.expect("the admin signs in over HTTP");
    if let Err(e) = scenario(&cluster, port).await {
        panic!("SCRAM scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// The authentication the router asks `user` for at startup: its code
/// (3 cleartext password, 10 SASL) and, for SASL, the mechanisms offered.
fn asked_for(port: u16, user: &str) -> Result<(i32, Vec<String>)> {
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port))?;
    socket.set_read_timeout(Some(std::time::Duration::from_secs(20)))?;
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for part in ["user", user, "database", "postgres", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut message = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    message.extend(body);
    socket.write_all(&message)?;
    let mut head = [0u8; 5];
    socket.read_exact(&mut head)?;
    ensure!(head[0] == b'R', "expected an authentication request, got {:?}", head[0] as char);
    let len = i32::from_be_bytes(head[1..5].try_into()?) as usize;
    let mut rest = vec![0u8; len - 4];
    socket.read_exact(&mut rest)?;
    let code = i32::from_be_bytes(rest[..4].try_into()?);
    let mechanisms = rest[4..].split(|b| *b == 0).filter(|m| !m.is_empty()).map(|m| String::from_utf8_lossy(m).into_owned()).collect();
    Ok((code, mechanisms))
}

async fn connect(port: u16, user: &str, password: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let config = format!("host=127.0.0.1 port={port} user={user} password={password} connect_timeout=20");
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn refusal(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| format!("{} {}", d.code().code(), d.message())).unwrap_or_else(|| e.to_string())
}

fn psql(port: u16, user: &str, password: &str) -> Result<std::process::Output> {
    std::process::Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", user, "-tAc", "SELECT 41 + 1"])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "20")
        .output()
        .context("running psql")
}

async fn scenario(cluster: &Cluster, port: u16) -> Result<()> {
    // The router asks for SCRAM, for a known name and an unknown one alike.
    for user in [ADMIN_USER, "nobody-here"] {
        let (code, mechanisms) = asked_for(port, user)?;
        ensure!(code == 10 && mechanisms.contains(&"SCRAM-SHA-256".to_string()), "{user}: asked for {code} {mechanisms:?}");
    }

    // The driver and psql prove the password.
    let client = connect(port, ADMIN_USER, ADMIN_PASSWORD).await?;
    let n: i64 = client.query_one("SELECT 7 * 6", &[]).await?.get(0);
    ensure!(n == 42, "{n}");
    let out = psql(port, ADMIN_USER, ADMIN_PASSWORD)?;
    ensure!(out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "42", "psql: {out:?}");
    let err = connect(port, ADMIN_USER, "not-the-password").await.err().context("a wrong password is refused")?;
    ensure!(refusal(&err).starts_with("28P01"), "{}", refusal(&err));
    let out = psql(port, "nobody-here", "whatever")?;
    ensure!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("password authentication failed"), "{out:?}");

    // A user made over HTTP signs in with SCRAM; a new password replaces the old.
    let admin = &cluster.http;
    let made = admin
        .post(
            "/api/v1/admin/users",
            &json!({"username": "analyst", "email": "analyst@example.com", "password": "First-Passw0rd-1", "role": "viewer"}),
        )
        .await?
        .ensure_status(201)?;
    let id = made.json["id"].as_str().context("a user id")?.to_string();
    let (code, _) = asked_for(port, "analyst")?;
    ensure!(code == 10, "analyst asked for {code}");
    connect(port, "analyst", "First-Passw0rd-1").await?.query_one("SELECT 1", &[]).await?;
    admin.put(&format!("/api/v1/admin/users/{id}"), &json!({"password": "Second-Passw0rd-2"})).await?.ensure_status(200)?;
    let err = connect(port, "analyst", "First-Passw0rd-1").await.err().context("the old password is refused")?;
    ensure!(refusal(&err).starts_with("28P01"), "{}", refusal(&err));
    connect(port, "analyst", "Second-Passw0rd-2").await?.query_one("SELECT 1", &[]).await?;

    // Wrong proofs are failed logins: past the threshold the address is
    // blocked, and the right password no longer gets in.
    let mut blocked = None;
    for _ in 0..10 {
        match connect(port, "analyst", "guess-guess-guess").await {
            Ok(_) => bail!("a wrong password got in"),
            Err(e) if refusal(&e).contains("blocked") => {
                blocked = Some(refusal(&e));
                break;
            }
            Err(_) => {}
        }
    }
    let blocked = blocked.context("the address was never blocked")?;
    let err = connect(port, "analyst", "Second-Passw0rd-2").await.err().context("a blocked address is refused")?;
    ensure!(refusal(&err).contains("blocked"), "after the ban ({blocked}): {}", refusal(&err));
    Ok(())
}
