//! Scenario: change data capture of a SQL table end to end — enabling CDC,
//! Insert/Update/Delete records in commit order on `cdc.<database>.<table>`
//! (history and WebSocket), Delete carrying the key, multi-statement
//! transactions in statement order, rolled-back and failed transactions
//! emitting nothing, consumer groups (re-delivery until commit, durable offsets
//! across a leader kill), disabling CDC, and rows of `POST /api/v1/import/sql`
//! captured as Insert/Update records.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::ws::{Subscriber, TokenIn};
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, Value, json, wait_for};

const CDC: &str = "/api/v1/streaming/cdc";
const CHANNEL: &str = "cdc.shop.orders";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("cdc scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

async fn sql(api: &Http, sql: &str) -> Result<Resp> {
    api.post("/api/v1/query", &json!({"sql": sql, "database": "shop"})).await
}

async fn history(api: &Http) -> Result<Vec<Value>> {
    let r = api.get(&format!("/api/v1/streaming/channels/{CHANNEL}/history?after=0&limit=1000")).await?.ensure_status(200)?;
    Ok(r.json["events"].as_array().cloned().unwrap_or_default())
}

/// (op, key, data) of a change record event.
fn record(e: &Value) -> (String, Value, Value) {
    let d = &e["data"];
    (d["op"].as_str().unwrap_or("").to_string(), d["key"].clone(), d["data"].clone())
}

async fn poll(api: &Http, group: &str, max: u64) -> Result<Value> {
    Ok(api
        .post(&format!("/api/v1/streaming/channels/{CHANNEL}/consumers/{group}/poll"), &json!({"max": max}))
        .await?
        .ensure_status(200)?
        .json)
}

async fn commit(api: &Http, group: &str, offset: u64) -> Result<Resp> {
    api.post(&format!("/api/v1/streaming/channels/{CHANNEL}/consumers/{group}/commit"), &json!({"offset": offset})).await
}

fn polled_ids(p: &Value) -> Vec<u64> {
    p["events"].as_array().map(|a| a.iter().filter_map(|e| e["id"].as_u64()).collect()).unwrap_or_default()
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let api = cluster.http.clone();
    let token = api.token().context("admin token")?.to_string();
    sql(&api, "CREATE TABLE orders (id INT PRIMARY KEY, item TEXT, qty INT)").await?.ensure_status(200)?;
    sql(&api, "CREATE TABLE other (id INT PRIMARY KEY)").await?.ensure_status(200)?;

    // Enabling: the table must exist; the channel is created in the database's group.
    api.post(CDC, &json!({"database": "shop", "table": "missing"})).await?.ensure_status(404)?;
    api.post(CDC, &json!({"database": "bad name", "table": "orders"})).await?.ensure_status(400)?;
    api.post(CDC, &json!({"database": "shop", "table": "orders", "retention": "nope"})).await?.ensure_status(400)?;
    let on = api.post(CDC, &json!({"database": "shop", "table": "orders", "retention": "7d"})).await?.ensure_status(201)?;
    ensure!(on.json["name"] == CHANNEL && on.json["cdc"]["enabled"] == true, "enable: {on}");
    let list = api.get(CDC).await?.ensure_status(200)?;
    ensure!(
        list.json["tables"].as_array().is_some_and(|t| t.iter().any(|t| t["table"] == "orders" && t["channel"] == CHANNEL)),
        "cdc list: {list}"
    );
    api.post("/api/v1/streaming/publish", &json!({"channel": CHANNEL, "event_type": "x", "data": {}})).await?.ensure_status(400)?;
    let sub = Subscriber::start(api.base(), &token, TokenIn::Header, CHANNEL, 0).await?;

    // Writes: single statements, a multi-statement transaction, a rollback and a failure.
    sql(&api, "INSERT INTO orders VALUES (1, 'apple', 3)").await?.ensure_status(200)?;
    sql(&api, "INSERT INTO orders VALUES (2, 'pear', 1), (3, 'fig', 2)").await?.ensure_status(200)?;
    sql(&api, "UPDATE orders SET qty = 5 WHERE id = 1").await?.ensure_status(200)?;
    sql(&api, "DELETE FROM orders WHERE id = 2").await?.ensure_status(200)?;
    sql(&api, "INSERT INTO other VALUES (1)").await?.ensure_status(200)?; // not captured
    sql(&api, "BEGIN; INSERT INTO orders VALUES (4, 'kiwi', 7); UPDATE orders SET item = 'big kiwi' WHERE id = 4; DELETE FROM orders WHERE id = 3; COMMIT")
        .await?
        .ensure_status(200)?;
    sql(&api, "BEGIN; INSERT INTO orders VALUES (9, 'never', 1); DELETE FROM orders WHERE id = 1; ROLLBACK").await?.ensure_status(200)?;
    let failed = sql(&api, "BEGIN; INSERT INTO orders VALUES (10, 'lost', 1); INSERT INTO orders VALUES (1, 'dup', 1); COMMIT").await?;
    ensure!(failed.status == 409, "duplicate key fails the transaction: {failed}");
    sql(&api, "SELECT * FROM orders").await?.ensure_status(200)?;

    let expected: Vec<(&str, Value, Value)> = vec![
        ("Insert", json!({"id": 1}), json!({"id": 1, "item": "apple", "qty": 3})),
        ("Insert", json!({"id": 2}), json!({"id": 2, "item": "pear", "qty": 1})),
        ("Insert", json!({"id": 3}), json!({"id": 3, "item": "fig", "qty": 2})),
        ("Update", json!({"id": 1}), json!({"id": 1, "item": "apple", "qty": 5})),
        ("Delete", json!({"id": 2}), Value::Null),
        ("Insert", json!({"id": 4}), json!({"id": 4, "item": "kiwi", "qty": 7})),
        ("Update", json!({"id": 4}), json!({"id": 4, "item": "big kiwi", "qty": 7})),
        ("Delete", json!({"id": 3}), Value::Null),
    ];
    let events = history(&api).await?;
    let got: Vec<(String, Value, Value)> = events.iter().map(record).collect();
    let want: Vec<(String, Value, Value)> = expected.iter().map(|(o, k, d)| (o.to_string(), k.clone(), d.clone())).collect();
    ensure!(got == want, "change records:\n got {got:#?}\nwant {want:#?}");
    ensure!(events.iter().enumerate().all(|(i, e)| e["id"] == i as u64 + 1), "ids 1..=8");
    ensure_shape(&events, "orders")?;
    // Positions: increasing log index between writes; one transaction shares one, indexed 0, 1, 2.
    let pos = positions(&events);
    ensure!(pos[0].0 < pos[1].0 && pos[1].0 == pos[2].0 && pos[2].0 < pos[3].0, "positions {pos:?}");
    ensure!(pos[5].0 == pos[6].0 && pos[6].0 == pos[7].0 && [pos[5].1, pos[6].1, pos[7].1] == [0, 1, 2], "tx positions {pos:?}");
    let live = sub.wait_count(8, Duration::from_secs(30)).await?;
    ensure!(live == events, "the WebSocket delivered other records than history");

    // Consumer groups: re-delivery until commit, forward-only offsets.
    let p = poll(&api, "billing", 3).await?;
    ensure!(polled_ids(&p) == vec![1, 2, 3] && p["committed_offset"] == 0, "first poll: {p}");
    let p = poll(&api, "billing", 3).await?;
    ensure!(polled_ids(&p) == vec![1, 2, 3], "uncommitted events are delivered again: {p}");
    let c = commit(&api, "billing", 3).await?.ensure_status(200)?;
    ensure!(c.json["committed_offset"] == 3 && c.json["advanced"] == true, "commit: {c}");
    let p = poll(&api, "billing", 3).await?;
    ensure!(polled_ids(&p) == vec![4, 5, 6] && p["committed_offset"] == 3, "after commit: {p}");
    let c = commit(&api, "billing", 2).await?.ensure_status(200)?;
    ensure!(c.json["committed_offset"] == 3 && c.json["advanced"] == false, "a lower offset is ignored: {c}");
    // Beyond the newest event: a conflict with the channel's state.
    commit(&api, "billing", 99).await?.ensure_status(409)?;
    commit(&api, "bad group", 1).await?.ensure_status(400)?;
    let other = poll(&api, "audit", 100).await?;
    ensure!(polled_ids(&other) == (1..=8).collect::<Vec<_>>(), "another group starts at the beginning: {other}");
    let consumers = api.get(&format!("/api/v1/streaming/channels/{CHANNEL}/consumers")).await?.ensure_status(200)?;
    ensure!(consumers.json["consumers"] == json!([{"group": "billing", "committed_offset": 3}]), "{consumers}");

    // The committed offset is replicated: it survives the group leader's death.
    sql(&api, "INSERT INTO orders VALUES (5, 'plum', 1)").await?.ensure_status(200)?;
    let w = commit(&api, "billing", 3).await?.ensure_status(200)?;
    let leader = w.served_by().context("a commit names its leader")?;
    eprintln!("[cdc] killing node {leader}, leader of database shop's group {:?}", w.group());
    cluster.kill_node(leader)?;
    let p = wait_for(Duration::from_secs(60), "poll after the leader kill", async || {
        let r = api.post(&format!("/api/v1/streaming/channels/{CHANNEL}/consumers/billing/poll"), &json!({"max": 100})).await?;
        Ok((r.status == 200).then_some(r.json))
    })
    .await?;
    ensure!(polled_ids(&p) == vec![4, 5, 6, 7, 8, 9] && p["committed_offset"] == 3, "after the kill: {p}");
    let last = p["events"][5].clone();
    ensure!(record(&last) == ("Insert".into(), json!({"id": 5}), json!({"id": 5, "item": "plum", "qty": 1})), "{last}");
    sub.wait_count(9, Duration::from_secs(60)).await?;
    cluster.start_node(leader)?;

    // Disabling stops capture; the channel and its records stay.
    api.delete("/api/v1/streaming/cdc/shop/orders").await?.ensure_status(200)?;
    api.delete("/api/v1/streaming/cdc/shop/orders").await?.ensure_status(404)?;
    wait_for(Duration::from_secs(60), "a write after disabling", async || {
        Ok((sql(&api, "INSERT INTO orders VALUES (6, 'lime', 1)").await?.status == 200).then_some(()))
    })
    .await?;
    let after = history(&api).await?;
    ensure!(after.len() == 9, "no record after disabling: {} records", after.len());
    import_capture(&api).await
}

/// Bulk-imported rows are captured like SQL writes: one Insert per new row in
/// row order (across batches), an Update for a row replaced by
/// `on_conflict: update`, nothing for skipped rows or a failed batch.
async fn import_capture(api: &Http) -> Result<()> {
    const ITEMS: &str = "cdc.shop.items";
    let import =
        |data: &str, options: Value| json!({"table": "items", "database": "shop", "format": "csv", "data": data, "options": options});
    sql(api, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, qty INT)").await?.ensure_status(200)?;
    sql(api, "INSERT INTO items VALUES (100, 'before', 0)").await?.ensure_status(200)?; // before CDC: not captured
    api.post(CDC, &json!({"database": "shop", "table": "items"})).await?.ensure_status(201)?;

    // Three batches of at most two rows, one Raft command each.
    let r = api
        .post(
            "/api/v1/import/sql",
            &import(
                "id,name,qty
1,a,1
2,b,2
3,c,3
4,d,4
5,e,5
",
                json!({"batch_size": 2}),
            ),
        )
        .await?
        .ensure_status(200)?;
    ensure!(r.json["rows_imported"] == 5, "first import: {r}");
    // update: 2 and 100 exist (Update), 6 is new (Insert).
    let r = api
        .post(
            "/api/v1/import/sql",
            &import(
                "id,name,qty
2,b2,20
6,f,6
100,after,1
",
                json!({"on_conflict": "update"}),
            ),
        )
        .await?
        .ensure_status(200)?;
    ensure!(r.json["rows_imported"] == 3, "update import: {r}");
    // skip: 1 exists (nothing), 7 is new.
    let r = api
        .post(
            "/api/v1/import/sql",
            &import(
                "id,name,qty
1,x,9
7,g,7
",
                json!({"on_conflict": "skip"}),
            ),
        )
        .await?
        .ensure_status(200)?;
    ensure!(r.json["rows_imported"] == 1 && r.json["rows_skipped"] == 1, "skip import: {r}");
    // error: the batch with a duplicate key is not applied and records nothing.
    let r = api
        .post(
            "/api/v1/import/sql",
            &import(
                "id,name,qty
8,h,8
3,dup,3
",
                json!({}),
            ),
        )
        .await?;
    ensure!(r.status == 409 && r.json["rows_imported"] == 0, "failed import: {r}");

    let h = api.get(&format!("/api/v1/streaming/channels/{ITEMS}/history?after=0&limit=1000")).await?.ensure_status(200)?;
    let events = h.json["events"].as_array().cloned().unwrap_or_default();
    let got: Vec<(String, Value, Value)> = events.iter().map(record).collect();
    let ins = |id: i64, name: &str, qty: i64| ("Insert".to_string(), json!({"id": id}), json!({"id": id, "name": name, "qty": qty}));
    let upd = |id: i64, name: &str, qty: i64| ("Update".to_string(), json!({"id": id}), json!({"id": id, "name": name, "qty": qty}));
    let want = vec![
        ins(1, "a", 1),
        ins(2, "b", 2),
        ins(3, "c", 3),
        ins(4, "d", 4),
        ins(5, "e", 5),
        upd(2, "b2", 20),
        ins(6, "f", 6),
        upd(100, "after", 1),
        ins(7, "g", 7),
    ];
    ensure!(got == want, "import change records:\n got {got:#?}\nwant {want:#?}");
    ensure_shape(&events, "items")?;
    // Each batch is one transaction: positions share its log index, indexed from 0.
    let pos = positions(&events);
    ensure!(pos[0].0 == pos[1].0 && pos[1].0 < pos[2].0 && pos[2].0 == pos[3].0 && pos[3].0 < pos[4].0, "batch positions {pos:?}");
    ensure!([pos[0].1, pos[1].1, pos[2].1, pos[3].1, pos[4].1] == [0, 1, 0, 1, 0], "batch indexes {pos:?}");
    ensure!(pos[5].0 == pos[7].0 && [pos[5].1, pos[6].1, pos[7].1] == [0, 1, 2], "update batch positions {pos:?}");
    Ok(())
}

/// Every record names database `shop` and `table`, and its event type is its op.
fn ensure_shape(events: &[Value], table: &str) -> Result<()> {
    for e in events {
        let d = &e["data"];
        ensure!(d["database"] == "shop" && d["table"] == table && e["event_type"] == d["op"], "record shape: {e}");
    }
    Ok(())
}

/// Each record's `(log index, index within its transaction)`.
fn positions(events: &[Value]) -> Vec<(u64, u64)> {
    events
        .iter()
        .map(|e| (e["data"]["position"]["log_index"].as_u64().unwrap_or(0), e["data"]["position"]["index"].as_u64().unwrap_or(99)))
        .collect()
}
