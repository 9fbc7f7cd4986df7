//! Scenario: per-IP token buckets. Responses carry the X-RateLimit headers;
//! past the login limit (here 5/min) and the general limit (here 40/min) the
//! router answers 429 with Retry-After and a JSON error; probes are exempt.

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("rate_limit scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let (_, limited) = c.start_router(&[("SERVICE_REQUESTS_PER_MINUTE", "40"), ("SERVICE_LOGIN_REQUESTS_PER_MINUTE", "5")]).await?;

    // Login: 5 per minute, then 429 with Retry-After.
    let mut statuses = Vec::new();
    for _ in 0..7 {
        let r = limited.login("admin", "wrong-password").await?;
        statuses.push(r.status);
        if r.status == 429 {
            let retry: u64 = r.header("retry-after").context("Retry-After")?.parse()?;
            ensure!((1..=60).contains(&retry), "Retry-After {retry}");
            ensure!(r.json["error"].is_string(), "429 body: {r}");
            ensure!(r.header("x-ratelimit-remaining") == Some("0"), "remaining on 429: {r}");
        }
    }
    ensure!(statuses[..5].iter().all(|s| *s == 401) && statuses[5..].iter().all(|s| *s == 429), "login statuses {statuses:?}");

    // Other routes: headers on every response, counting down, then 429.
    let api = limited.with_token(c.http.token().context("admin token")?);
    let first = api.get("/api/v1/kv/count?prefix=").await?.ensure_status(200)?;
    ensure!(first.header("x-ratelimit-limit") == Some("40"), "limit header: {first}");
    let reset: u64 = first.header("x-ratelimit-reset").context("reset header")?.parse()?;
    ensure!(reset > 1_700_000_000, "reset is a Unix time: {reset}");
    let mut last_remaining = first.header("x-ratelimit-remaining").context("remaining")?.parse::<u64>()?;
    let mut refused = false;
    for _ in 0..60 {
        let r = api.get("/api/v1/kv/count?prefix=").await?;
        if r.status == 429 {
            refused = true;
            ensure!(r.header("retry-after").is_some(), "429 without Retry-After: {r}");
            break;
        }
        let remaining: u64 = r.header("x-ratelimit-remaining").context("remaining")?.parse()?;
        ensure!(remaining <= last_remaining, "remaining went up: {remaining} > {last_remaining}");
        last_remaining = remaining;
    }
    ensure!(refused, "never limited after 60 requests at 40/min");
    // Health probes are not limited; the other router has its own buckets.
    limited.get("/health").await?.ensure_status(200)?;
    c.http.kv_put("rl", json!(1), None).await?.ensure_status(200)?;
    Ok(())
}
