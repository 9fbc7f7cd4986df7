//! Scenario: attack detection and the IP block list. The routers trust
//! `X-Forwarded-For`, so the test presents several client IPs. Failed logins
//! from one IP raise a brute-force alert at 5 and ban the IP at the configured
//! threshold; a banned IP gets 403 on every route (probes included) on every
//! router until the ban expires. Admins block and unblock IPs through either
//! router; alerts can be acknowledged; SQL injection patterns are flagged and
//! recorded without blocking the query.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, Value, json, url_encode, wait_for, wait_until};

const BAN_THRESHOLD: usize = 8;
const BAN_SECS: u64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security() {
    let opts = ClusterOptions {
        router_env: vec![
            ("SERVICE_CLIENT_IP_HEADER".into(), "X-Forwarded-For".into()),
            ("SERVICE_AUTO_BAN_THRESHOLD".into(), BAN_THRESHOLD.to_string()),
            ("SERVICE_AUTO_BAN_DURATION_SECS".into(), BAN_SECS.to_string()),
            ("SERVICE_SECURITY__BLOCK_REFRESH_MS".into(), "300".into()),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("security scenario failed: {e:?}");
    }
}

fn from(http: &Http, ip: &str) -> Http {
    http.header("X-Forwarded-For", ip)
}

async fn alerts(admin: &Http, query: &str) -> Result<Vec<Value>> {
    let r = admin.get(&format!("/api/v1/admin/security/alerts{query}")).await?.ensure_status(200)?;
    Ok(r.json["alerts"].as_array().context("alerts")?.clone())
}

fn find<'a>(list: &'a [Value], kind: &str, ip: &str) -> Option<&'a Value> {
    list.iter().find(|a| a["kind"] == json!(kind) && a["source_ip"] == json!(ip))
}

async fn blocked_ips(admin: &Http) -> Result<Vec<String>> {
    let r = admin.get("/api/v1/admin/security/blocked-ips").await?.ensure_status(200)?;
    Ok(r.json["blocked_ips"]
        .as_array()
        .context("blocked_ips")?
        .iter()
        .filter_map(|b| b["ip_address"].as_str().map(str::to_string))
        .collect())
}

/// Whether `ip` is refused with a JSON 403 on /health of this router.
async fn is_blocked(http: &Http, ip: &str) -> bool {
    match from(&http.anonymous(), ip).get("/health").await {
        Ok(r) if r.status == 403 => r.json["code"] == json!("IP_BLOCKED"),
        _ => false,
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let admin = c.http.clone();
    let (_, r2_anon) = c.start_router(&[]).await?;
    let admin2 = r2_anon.with_token(admin.token().context("admin token")?);

    // Brute force: four failures raise nothing, the fifth raises an alert.
    let attacker = "203.0.113.7";
    let anon = from(&admin.anonymous(), attacker);
    for _ in 0..4 {
        anon.login("admin", "wrong-password").await?.ensure_status(401)?;
    }
    ensure!(find(&alerts(&admin, "").await?, "brute_force_attack", attacker).is_none(), "alert before 5 failures");
    anon.login("admin", "wrong-password").await?.ensure_status(401)?;
    let list = alerts(&admin, "").await?;
    let alert = find(&list, "brute_force_attack", attacker).context("no brute-force alert after 5 failures")?.clone();
    ensure!(alert["severity"] == json!("critical") && alert["acknowledged"] == json!(false), "alert: {alert}");
    ensure!(alert["id"].is_string() && alert["created_at"].is_string() && alert["message"].is_string(), "alert: {alert}");
    ensure!(!is_blocked(&admin, attacker).await, "banned before the threshold");

    // Failures through the second router count too; the threshold bans the IP.
    let anon2 = from(&r2_anon, attacker);
    for _ in 5..BAN_THRESHOLD {
        anon2.login("admin", "wrong-password").await?.ensure_status(401)?;
    }
    // Banned on the router that saw the last failure at once, on the other after a reload.
    ensure!(is_blocked(&r2_anon, attacker).await, "not banned at the threshold");
    wait_until(Duration::from_secs(10), "the ban reaches router 0", async || is_blocked(&admin, attacker).await).await?;
    // 403 on every route: probes, login, authenticated routes (even with an admin token), unknown paths.
    for r in [
        from(&admin.anonymous(), attacker).get("/readyz").await?,
        anon.login("admin", tessera_tests::ADMIN_PASSWORD).await?,
        from(&admin, attacker).get("/api/v1/kv/count?prefix=").await?,
        from(&admin, attacker).get("/no/such/route").await?,
    ] {
        let r = r.ensure_status(403)?.ensure_error_body()?;
        ensure!(r.json["code"] == json!("IP_BLOCKED"), "blocked response: {r}");
    }
    // Other clients are unaffected.
    from(&admin, "203.0.113.8").get("/api/v1/kv/count?prefix=").await?.ensure_status(200)?;
    ensure!(blocked_ips(&admin).await?.contains(&attacker.to_string()), "the ban is not listed");
    let list = alerts(&admin, "").await?;
    ensure!(find(&list, "ip_auto_banned", attacker).is_some(), "no ban alert in {list:?}");
    let r = admin.get("/api/v1/admin/security/blocked-ips").await?;
    let entry =
        r.json["blocked_ips"].as_array().context("list")?.iter().find(|b| b["ip_address"] == json!(attacker)).context("entry")?.clone();
    ensure!(entry["automatic"] == json!(true) && entry["expires_at"].is_string() && entry["reason"].is_string(), "entry: {entry}");

    // The ban lifts by itself on both routers.
    wait_until(Duration::from_secs(BAN_SECS + 20), "the ban expires on router 0", async || !is_blocked(&admin, attacker).await).await?;
    wait_until(Duration::from_secs(10), "the ban expires on router 1", async || !is_blocked(&r2_anon, attacker).await).await?;
    ensure!(!blocked_ips(&admin).await?.contains(&attacker.to_string()), "an expired ban is still listed");
    anon.login("admin", tessera_tests::ADMIN_PASSWORD).await?.ensure_status(200)?;

    // Acknowledge an alert: it leaves the unacknowledged list; unknown ids are 404.
    let id = alert["id"].as_str().context("id")?;
    let r = admin.post(&format!("/api/v1/admin/security/alerts/{id}/acknowledge"), &json!({})).await?.ensure_status(200)?;
    ensure!(r.json["alert"]["acknowledged"] == json!(true) && r.json["alert"]["acknowledged_by"] == json!("admin"), "ack: {r}");
    let open = alerts(&admin2, "?acknowledged=false").await?;
    ensure!(open.iter().all(|a| a["id"] != json!(id)), "an acknowledged alert is still open");
    let done = alerts(&admin2, "?acknowledged=true").await?;
    ensure!(done.iter().any(|a| a["id"] == json!(id)), "the acknowledged alert is missing");
    admin.post("/api/v1/admin/security/alerts/sec-999999999999/acknowledge", &json!({})).await?.ensure_status(404)?;

    // Manual blocks: validation, then a block through router 1 applies on router 0 too.
    let block = "/api/v1/admin/security/block-ip";
    for bad in [
        json!({"ip_address": "not-an-ip", "reason": "x", "duration_hours": 1}),
        json!({"ip_address": "300.1.2.3", "reason": "x", "duration_hours": 1}),
        json!({"ip_address": "198.51.100.9", "reason": "x", "duration_hours": 0}),
        json!({"ip_address": "198.51.100.9", "reason": "x"}),
        json!({"ip_address": "198.51.100.9", "reason": "x", "duration_hours": "one"}),
    ] {
        admin.post(block, &bad).await?.ensure_status(400)?.ensure_error_body()?;
    }
    let manual = "198.51.100.9";
    let r = admin2.post(block, &json!({"ip_address": manual, "reason": "scanner", "duration_secs": 5})).await?.ensure_status(201)?;
    ensure!(r.json["blocked"]["ip_address"] == json!(manual) && r.json["blocked"]["blocked_by"] == json!("admin"), "block: {r}");
    ensure!(is_blocked(&r2_anon, manual).await, "not blocked on the router that blocked it");
    wait_until(Duration::from_secs(10), "the block reaches router 0", async || is_blocked(&admin, manual).await).await?;
    let listed = blocked_ips(&admin).await?;
    ensure!(listed.contains(&manual.to_string()), "block not listed on router 0: {listed:?}");
    wait_until(Duration::from_secs(30), "the manual block expires everywhere", async || {
        !is_blocked(&admin, manual).await && !is_blocked(&r2_anon, manual).await
    })
    .await?;

    // An hour-long IPv6 block, lifted by an admin.
    let v6 = "2001:db8::42";
    admin.post(block, &json!({"ip_address": v6, "reason": "abuse", "duration_hours": 1})).await?.ensure_status(201)?;
    ensure!(is_blocked(&admin, v6).await, "IPv6 block not applied");
    wait_until(Duration::from_secs(10), "the IPv6 block reaches router 1", async || is_blocked(&r2_anon, v6).await).await?;
    admin2.delete(&format!("/api/v1/admin/security/blocked-ips/{}", url_encode(v6))).await?.ensure_status(200)?;
    ensure!(!is_blocked(&r2_anon, v6).await, "unblock did not apply at once on its router");
    wait_until(Duration::from_secs(10), "the unblock reaches router 0", async || !is_blocked(&admin, v6).await).await?;
    admin.delete(&format!("/api/v1/admin/security/blocked-ips/{}", url_encode(v6))).await?.ensure_status(404)?;

    // SQL injection: flagged and recorded, not blocked; legitimate SQL is not flagged.
    admin
        .post("/api/v1/query", &json!({"sql": "CREATE TABLE sec_users (id INT PRIMARY KEY, name TEXT); INSERT INTO sec_users VALUES (1, 'ann'), (2, 'O''Brien')"}))
        .await?
        .ensure_status(200)?;
    let r = from(&admin, "192.0.2.55")
        .post("/api/v1/query", &json!({"sql": "SELECT * FROM sec_users WHERE name = '' OR '1'='1'"}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json["data"]["row_count"] == json!(2), "the flagged query did not run as sent: {r}");
    ensure!(r.json["metadata"]["security_flags"] == json!(["tautology"]), "no security flag: {r}");
    let r = admin
        .post("/api/v1/query", &json!({"sql": "SELECT * FROM sec_users WHERE name = 'O''Brien' OR id = 1"}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json.pointer("/metadata/security_flags").is_none(), "legitimate SQL flagged: {r}");
    let alert = wait_for(Duration::from_secs(10), "an sql_injection alert", async || {
        Ok(find(&alerts(&admin, "").await?, "sql_injection", "192.0.2.55").cloned())
    })
    .await?;
    ensure!(alert["username"] == json!("admin") && alert["severity"] == json!("high"), "sql alert: {alert}");
    Ok(())
}
