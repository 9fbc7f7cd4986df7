//! Scenario: streaming channels end to end through the router — bad input,
//! publish and history (order, limit, after), WebSocket delivery across two
//! routers (header and `?token=` auth), resume after an event id without gaps,
//! the channel group's leader killed while publishing and subscribed,
//! retention by age and by count enforced through the leader, and channels and
//! events surviving a full restart.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::ws::{Subscriber, TokenIn};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, Http, Value, json, wait_for};

const CH: &str = "/api/v1/streaming/channels";
const PUB: &str = "/api/v1/streaming/publish";
const DELIVERY: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming() {
    let opts =
        ClusterOptions { node_env: vec![("SERVICE_STREAM_RETENTION_INTERVAL_SECS".into(), "1".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("streaming scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn publish(api: &Http, channel: &str, n: u64) -> Result<Value> {
    let r = api
        .post(PUB, &json!({"channel": channel, "event_type": "order.created", "data": {"n": n, "item": format!("item-{n}")}}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json["id"].is_u64() && r.json["timestamp"].is_string(), "publish answer: {r}");
    Ok(r.json)
}

async fn history(api: &Http, channel: &str, query: &str) -> Result<Vec<Value>> {
    let r = api.get(&format!("{CH}/{channel}/history{query}")).await?.ensure_status(200)?;
    Ok(r.json["events"].as_array().cloned().unwrap_or_default())
}

fn ids(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["id"].as_u64().unwrap_or(0)).collect()
}

/// Waits until the subscriber holds exactly the ids `from..=to`, in order.
async fn expect_ids(sub: &Subscriber, who: &str, from: u64, to: u64) -> Result<()> {
    let n = (to - from + 1) as usize;
    let events = sub.wait_count(n, DELIVERY).await.with_context(|| format!("subscriber {who}"))?;
    let got = ids(&events);
    let want: Vec<u64> = (from..=to).collect();
    ensure!(got == want, "subscriber {who}: ids {got:?}, expected {from}..={to} once each in order");
    Ok(())
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let api = cluster.http.clone();
    let token = api.token().context("admin token")?.to_string();
    bad_input_is_refused_and_a_channel_is_created(&api).await?;
    published_events_are_ordered_in_history(&api).await?;
    let (r2, token2, a, b) = sockets_on_two_routers_receive_every_event(cluster, &api, &token).await?;
    let c = a_resumed_client_gets_history_then_live_events(&r2, &token2, &a).await?;
    subscribers_see_every_event_across_a_leader_kill(cluster, &api, &r2, &a, b, c).await?;
    retention_trims_by_age_and_by_count(&api).await?;
    channels_and_events_survive_a_full_restart(cluster, a).await
}

/// Bad input is a 4xx with a JSON error; nothing is created. Then `orders` is.
async fn bad_input_is_refused_and_a_channel_is_created(api: &Http) -> Result<()> {
    for body in [
        json!({"name": "", "retention": "1h"}),
        json!({"name": "has space", "retention": "1h"}),
        json!({"name": "channels"}),
        json!({"name": "cdc.default.orders"}),
        json!({"name": "x", "retention": "soon"}),
        json!({"name": "x", "retention": "0s"}),
        json!({"name": "x", "max_events": 0}),
        json!({"name": "x", "retention": 5}),
    ] {
        api.post(CH, &body).await?.ensure_status(400)?.ensure_error_body()?;
    }
    let created = api.post(CH, &json!({"name": "orders", "retention": "24h"})).await?.ensure_status(201)?;
    ensure!(created.json["retention"] == "24h" && created.json["retention_ms"] == 86_400_000, "{created}");
    api.post(CH, &json!({"name": "orders"})).await?.ensure_status(409)?;
    api.post(PUB, &json!({"channel": "nope", "event_type": "t", "data": {}})).await?.ensure_status(404)?;
    api.post(PUB, &json!({"channel": "orders", "event_type": "t", "data": [1]})).await?.ensure_status(400)?;
    api.post(PUB, &json!({"channel": "orders", "event_type": "", "data": {}})).await?.ensure_status(400)?;
    api.get(&format!("{CH}/orders/history?limit=0")).await?.ensure_status(400)?;
    api.get(&format!("{CH}/orders/history?after=-1")).await?.ensure_status(400)?;
    api.get(&format!("{CH}/nope/history")).await?.ensure_status(404)?;
    api.get("/api/v1/streaming/orders").await?.ensure_client_error()?; // not a WebSocket upgrade
    Ok(())
}

/// Publish: ids 1..=30 in order, timestamps never decreasing; history pages
/// by limit and `after`, and the channel list counts the events.
async fn published_events_are_ordered_in_history(api: &Http) -> Result<()> {
    let mut last_ts = 0;
    for n in 1..=30 {
        let p = publish(api, "orders", n).await?;
        ensure!(p["id"] == n, "event {n} got id {}", p["id"]);
        let ts = p["timestamp_ms"].as_i64().unwrap_or(0);
        ensure!(ts >= last_ts, "timestamps went backwards: {ts} < {last_ts}");
        last_ts = ts;
    }
    let newest = history(api, "orders", "?limit=10").await?;
    ensure!(ids(&newest) == (21..=30).collect::<Vec<_>>(), "newest 10: {:?}", ids(&newest));
    ensure!(newest[9]["data"]["n"] == 30 && newest[9]["event_type"] == "order.created" && newest[9]["channel"] == "orders");
    let after = history(api, "orders", "?after=5&limit=3").await?;
    ensure!(ids(&after) == vec![6, 7, 8], "after 5: {:?}", ids(&after));
    let default_limit = history(api, "orders", "").await?;
    ensure!(ids(&default_limit) == (1..=30).collect::<Vec<_>>(), "default history: {:?}", ids(&default_limit));
    let list = api.get(CH).await?.ensure_status(200)?;
    let orders = list.json["channels"].as_array().and_then(|a| a.iter().find(|c| c["name"] == "orders")).cloned();
    ensure!(orders.as_ref().is_some_and(|c| c["last_id"] == 30 && c["events"] == 30), "channel list: {list}");
    Ok(())
}

/// WebSocket delivery across two routers, publishing through both. Returns the
/// second router, its token and the subscribers A (router 1) and B (router 2).
async fn sockets_on_two_routers_receive_every_event(
    cluster: &mut Cluster,
    api: &Http,
    token: &str,
) -> Result<(Http, String, Subscriber, Subscriber)> {
    let (_, r2) = cluster.start_router(&[]).await?;
    let r2 = r2.login_as(ADMIN_USER, ADMIN_PASSWORD).await?;
    let token2 = r2.token().context("router 2 token")?.to_string();
    let unauth = tessera_tests::ws::connect(api.base(), None, TokenIn::Header, "orders", None).await;
    ensure!(unauth.is_err(), "a socket without a token must be refused");
    let a = Subscriber::start(api.base(), token, TokenIn::Header, "orders", 30).await?;
    let b = Subscriber::start(r2.base(), &token2, TokenIn::Query, "orders", 30).await?;
    let (api2, r22) = (api.clone(), r2.clone());
    let p1 = tokio::spawn(async move {
        for n in 0..25u64 {
            publish(&api2, "orders", 100 + n).await?;
        }
        Ok::<_, anyhow::Error>(())
    });
    let p2 = tokio::spawn(async move {
        for n in 0..25u64 {
            publish(&r22, "orders", 200 + n).await?;
        }
        Ok::<_, anyhow::Error>(())
    });
    p1.await??;
    p2.await??;
    expect_ids(&a, "A (router 1, header token)", 31, 80).await?;
    expect_ids(&b, "B (router 2, ?token=)", 31, 80).await?;
    let stored = history(api, "orders", "?after=30&limit=100").await?;
    ensure!(a.events() == stored && b.events() == stored, "socket messages differ from history");
    ensure!(stored.iter().all(|e| e["data"]["item"].is_string() && e["timestamp"].is_string()), "message shape");
    Ok((r2, token2, a, b))
}

/// Resume: a client that saw up to 40 gets 41.. from history, then live
/// events. Returns that subscriber, C.
async fn a_resumed_client_gets_history_then_live_events(r2: &Http, token2: &str, a: &Subscriber) -> Result<Subscriber> {
    let c = Subscriber::start(r2.base(), token2, TokenIn::Header, "orders", 40).await?;
    expect_ids(&c, "C (resumed after 40)", 41, 80).await?;
    for n in 0..5 {
        publish(r2, "orders", 300 + n).await?;
    }
    expect_ids(&c, "C (resumed, then live)", 41, 85).await?;
    expect_ids(a, "A", 31, 85).await?;
    Ok(c)
}

/// Kill the leader of the channel's group while subscribed: publishing goes
/// on and every subscriber sees every event once, in order. Closes B and C.
async fn subscribers_see_every_event_across_a_leader_kill(
    cluster: &mut Cluster,
    api: &Http,
    r2: &Http,
    a: &Subscriber,
    b: Subscriber,
    c: Subscriber,
) -> Result<()> {
    let p = api.post(PUB, &json!({"channel": "orders", "event_type": "probe", "data": {"n": 86}})).await?.ensure_status(200)?;
    let leader = p.served_by().context("publish names its leader")?;
    eprintln!("[streaming] killing node {leader}, leader of the channel's group {:?}", p.group());
    cluster.kill_node(leader)?;
    for n in 87..=100u64 {
        let via = if n % 2 == 0 { api } else { r2 };
        let p = wait_for(Duration::from_secs(60), "publish after the leader kill", async || {
            let r = via.post(PUB, &json!({"channel": "orders", "event_type": "after.kill", "data": {"n": n}})).await?;
            Ok((r.status == 200).then_some(r.json))
        })
        .await?;
        ensure!(p["id"] == n, "after the kill event {n} got id {}", p["id"]);
    }
    expect_ids(a, "A across the leader kill", 31, 100).await?;
    expect_ids(&b, "B across the leader kill", 31, 100).await?;
    expect_ids(&c, "C across the leader kill", 41, 100).await?;
    let all = history(api, "orders", "?after=0&limit=1000").await?;
    ensure!(ids(&all) == (1..=100).collect::<Vec<_>>(), "history after the kill: {:?}", ids(&all));
    eprintln!("[streaming] reconnects: A {}, B {}, C {}", a.reconnects(), b.reconnects(), c.reconnects());
    cluster.start_node(leader)?;
    drop((b, c)); // `a` stays open: routers must shut down with a socket open
    Ok(())
}

/// Retention by age: a 2 s channel is emptied by the leader's retention
/// command. Retention by count keeps the newest events.
async fn retention_trims_by_age_and_by_count(api: &Http) -> Result<()> {
    api.post(CH, &json!({"name": "short-lived", "retention": "2s"})).await?.ensure_status(201)?;
    for n in 1..=5 {
        publish(api, "short-lived", n).await?;
    }
    ensure!(history(api, "short-lived", "").await?.len() == 5, "5 events before expiry");
    wait_for(Duration::from_secs(30), "retention to drop the expired events", async || {
        let r = api.get(&format!("{CH}/short-lived")).await?;
        Ok((r.status == 200 && r.json["events"] == 0 && r.json["first_id"] == 6).then_some(()))
    })
    .await?;
    ensure!(history(api, "short-lived", "").await?.is_empty(), "expired events still in history");
    let p = publish(api, "short-lived", 6).await?;
    ensure!(p["id"] == 6, "ids continue after trimming: {p}");
    // Retention by count.
    api.post(CH, &json!({"name": "capped", "max_events": 3})).await?.ensure_status(201)?;
    for n in 1..=5 {
        publish(api, "capped", n).await?;
    }
    let capped = history(api, "capped", "").await?;
    ensure!(ids(&capped) == vec![3, 4, 5], "max_events 3 keeps the newest: {:?}", ids(&capped));
    Ok(())
}

/// A full restart keeps channels and events (routers stop with a socket open).
async fn channels_and_events_survive_a_full_restart(cluster: &mut Cluster, a: Subscriber) -> Result<()> {
    cluster.stop_all().await?;
    drop(a);
    cluster.start_all().await?;
    cluster.login().await?;
    let api = cluster.http.clone();
    let all = wait_for(Duration::from_secs(60), "history after the restart", async || {
        let r = api.get(&format!("{CH}/orders/history?after=0&limit=1000")).await?;
        Ok((r.status == 200).then(|| r.json["events"].as_array().cloned().unwrap_or_default()))
    })
    .await?;
    ensure!(ids(&all) == (1..=100).collect::<Vec<_>>(), "history after the restart: {:?}", ids(&all));
    ensure!(all[99]["event_type"] == "after.kill" && all[99]["data"]["n"] == 100, "event 100: {}", all[99]);
    let list = api.get(CH).await?.ensure_status(200)?;
    let names: Vec<&str> =
        list.json["channels"].as_array().map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect()).unwrap_or_default();
    ensure!(["capped", "orders", "short-lived"].iter().all(|n| names.contains(n)), "channels after restart: {names:?}");
    let p = publish(&api, "orders", 101).await?;
    ensure!(p["id"] == 101, "ids continue after the restart: {p}");
    Ok(())
}
