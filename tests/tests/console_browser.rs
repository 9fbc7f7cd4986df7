//! Scenario: the web console (served by the router on its console port) in a
//! real browser (Debian's headless Chromium through chromedriver). An admin
//! signs in (after a wrong password is refused on the page), sees the three
//! nodes and every group led, runs SQL and sees the rows in the grid and a
//! syntax error pointed at in the statement, adds a key in the key-value
//! browser, and watches node 3's status change when it is killed. A viewer
//! signs in next: no admin buttons, and a write the viewer may not make is
//! refused by the API and said on the page. Screenshots of each page are
//! kept under `$CARGO_TARGET_DIR/test-artifacts/console/` (or the temporary
//! directory).

use std::path::PathBuf;

use anyhow::{Result, ensure};
use serde_json::json;
use tessera_tests::webdriver::{Browser, Driver};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

const VIEWER_PASSWORD: &str = "Viewer-Passw0rd-12";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_browser() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_CONSOLE_ENABLED".into(), "true".into()), ("SERVICE_CONSOLE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, port).await {
        panic!("console_browser scenario failed: {e:?}\n{}", cluster.log_tails(20));
    }
}

fn artifacts() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(std::env::temp_dir, PathBuf::from).join("test-artifacts").join("console")
}

async fn scenario(cluster: &mut Cluster, port: u16) -> Result<()> {
    cluster
        .http
        .post(
            "/api/v1/admin/users",
            &json!({"username": "vera", "email": "vera@example.com", "password": VIEWER_PASSWORD, "role": "viewer"}),
        )
        .await?
        .ensure_status(201)?;
    let driver = Driver::start()?;
    let profile = tempfile::tempdir()?;
    let page = driver.browser(profile.path()).await?;
    let outcome = drive(&page, cluster, port).await;
    let _ = page.screenshot(&artifacts().join("last.png")).await;
    let _ = page.close().await;
    outcome
}

/// Documents found by a filter, a time-series plotted, a stream followed
/// live, an object listed, a graph drawn, a vector search, a backup made
/// with the button.
async fn other_models(page: &Browser, cluster: &Cluster) -> Result<()> {
    let api = &cluster.http;
    api.post("/api/v1/documents/collections", &json!({"name": "animals"})).await?.ensure_status(201)?;
    for (name, age) in [("rex", 3), ("tom", 9)] {
        api.post("/api/v1/documents/collections/animals/documents", &json!({"document": {"name": name, "age": age}}))
            .await?
            .ensure_status(201)?;
    }
    page.click("[data-page=docs]").await?;
    page.text_when("#docs-collection", "the collections are offered", |t| t.contains("animals")).await?;
    page.fill("#docs-filter", r#"{"age": {"$gt": 5}}"#).await?;
    page.click("#docs-find").await?;
    let found = page.text_when("#docs-result tbody", "the filter's documents", |t| t.contains("tom")).await?;
    ensure!(!found.contains("rex"), "{found}");

    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as u64;
    let points: Vec<_> = (0..5u64).map(|i| json!({"timestamp": now_ms - (5 - i) * 60_000, "value": (i * i) as f64})).collect();
    api.post("/api/v1/timeseries/write", &json!({"metric": "temperature", "points": points, "tags": {"room": "a"}}))
        .await?
        .ensure_status(200)?;
    page.click("[data-page=ts]").await?;
    page.text_when("#ts-metric", "the metrics are offered", |t| t.contains("temperature")).await?;
    page.click("#ts-plot").await?;
    page.text_when("#ts-status", "the points are plotted", |t| t == "5 point(s) in 1 series").await?;
    ensure!(page.visible("#ts-chart polyline.series").await?, "a line is drawn");
    page.screenshot(&artifacts().join("timeseries.png")).await?;

    api.post("/api/v1/streaming/channels", &json!({"name": "orders"})).await?.ensure_status(201)?;
    api.post("/api/v1/streaming/publish", &json!({"channel": "orders", "event_type": "created", "data": {"id": 1}}))
        .await?
        .ensure_status(200)?;
    page.click("[data-page=streams]").await?;
    page.text_when("#streams-channel", "the channels are offered", |t| t.contains("orders")).await?;
    page.click("#streams-follow").await?;
    page.text_when("#streams-status", "the first event", |t| t.ends_with("1 event(s)")).await?;
    api.post("/api/v1/streaming/publish", &json!({"channel": "orders", "event_type": "paid", "data": {"id": 1}}))
        .await?
        .ensure_status(200)?;
    page.text_when("#streams-events tbody", "a new event appears live", |t| t.contains("paid")).await?;

    api.post("/api/v1/objects/buckets", &json!({"name": "reports"})).await?.ensure_status(201)?;
    let put = api
        .send(reqwest::Method::PUT, "/api/v1/objects/buckets/reports/object/q3.txt", Some(b"third quarter".to_vec()), Some("text/plain"))
        .await?;
    ensure!(put.status / 100 == 2, "{put}");
    page.click("[data-page=objects]").await?;
    page.text_when("#objects-list tbody", "the bucket's objects", |t| t.contains("q3.txt")).await?;

    // A graph drawn: two nodes and the edge between them.
    for (id, name) in [("ada", "Ada"), ("alan", "Alan")] {
        api.post("/api/v1/graph/nodes", &json!({"id": id, "label": "Person", "properties": {"name": name}})).await?.ensure_status(201)?;
    }
    api.post("/api/v1/graph/edges", &json!({"from_node": "ada", "to_node": "alan", "label": "KNOWS"})).await?.ensure_status(201)?;
    page.click("[data-page=graph]").await?;
    page.click("#graph-draw").await?;
    page.text_when("#graph-status", "the graph is drawn", |t| t.starts_with("2 node(s), 1 edge(s)")).await?;
    // (A horizontal line has no height, which WebDriver calls not displayed: the nodes are checked, the edge by its label.)
    ensure!(page.visible("#graph-view circle.node").await?, "the nodes are drawn");
    let names = page.text("#graph-view").await?;
    ensure!(names.contains("Ada") && names.contains("Alan") && names.contains("KNOWS"), "{names:?}");
    page.screenshot(&artifacts().join("graph.png")).await?;

    // Vectors: the collection listed, a search answered.
    api.post("/api/v1/vector/collections", &json!({"name": "items", "dim": 3, "metric": "l2"})).await?.ensure_status(201)?;
    for (id, v) in [("a", [1.0, 0.0, 0.0]), ("b", [0.0, 1.0, 0.0])] {
        api.post("/api/v1/vector/collections/items/upsert", &json!({"id": id, "vector": v})).await?.ensure_status(200)?;
    }
    page.click("[data-page=vectors]").await?;
    page.text_when("#vector-collections tbody", "the collection is listed", |t| t.contains("items")).await?;
    page.fill("#vector-query", "[0.9, 0.1, 0]").await?;
    page.fill("#vector-k", "1").await?;
    page.click("#vector-search").await?;
    let hits = page.text_when("#vector-hits tbody", "the nearest vector", |t| !t.is_empty()).await?;
    ensure!(hits.starts_with("a "), "the nearest of [0.9, 0.1, 0] is a: {hits:?}");

    page.click("[data-page=backups]").await?;
    page.click("#backup-create").await?;
    page.text_when("#backups-status", "the backup is made", |t| t.ends_with(": complete")).await?;
    page.text_when("#backups tbody", "the backup is listed", |t| t.contains("bkp-")).await?;
    page.click("[data-page=security]").await?;
    page.text_when("#compliance-status tbody, #security-error", "the security page loads", |_| true).await?;
    page.screenshot(&artifacts().join("security.png")).await?;
    Ok(())
}

async fn sign_in(page: &Browser, user: &str, password: &str) -> Result<()> {
    page.fill("#username", user).await?;
    page.fill("#password", password).await?;
    page.click("#login").await
}

async fn drive(page: &Browser, cluster: &mut Cluster, port: u16) -> Result<()> {
    page.goto(&format!("http://127.0.0.1:{port}/")).await?;
    sign_in(page, ADMIN_USER, "not the password").await?;
    page.text_when("#error", "a wrong password is refused on the page", |t| !t.is_empty()).await?;
    sign_in(page, ADMIN_USER, ADMIN_PASSWORD).await?;
    page.text_when("#who", "the page names the signed-in admin", |t| t == "admin (admin)").await?;

    // The cluster overview: three nodes, every group led, admin actions shown.
    page.text_when("#health", "the overview", |t| t.starts_with("3 nodes") && t.ends_with("every group led")).await?;
    page.text_when("#nodes tbody", "the nodes are listed", |t| t.matches("127.0.0.1").count() == 3).await?;
    ensure!(page.visible("#nodes .drain").await?, "an admin sees the drain buttons");
    page.screenshot(&artifacts().join("overview.png")).await?;

    // SQL: rows in the grid; an error pointed at in the statement.
    page.click("[data-page=sql]").await?;
    for statement in ["CREATE TABLE pets (id INT PRIMARY KEY, name TEXT)", "INSERT INTO pets VALUES (1, 'rex'), (2, 'tom')"] {
        page.fill("#sql-text", statement).await?;
        page.click("#sql-run").await?;
        page.text_when("#sql-status", "the statement ran", |t| t.starts_with("OK")).await?;
    }
    page.fill("#sql-text", "SELECT id, name FROM pets ORDER BY id").await?;
    page.click("#sql-run").await?;
    page.text_when("#sql-status", "two rows", |t| t.starts_with("2 row(s)")).await?;
    let grid = page.text("#sql-result").await?;
    ensure!(grid.contains("id name") && grid.contains("1 rex") && grid.contains("2 tom"), "the grid: {grid:?}");
    page.fill("#sql-text", "SELECT 1;\nSELEC name FROM pets").await?;
    page.click("#sql-run").await?;
    let error = page.text_when("#sql-error", "the error is shown", |t| t.contains("PARSE_ERROR")).await?;
    ensure!(error.contains("LINE 2: SELEC name FROM pets") && error.contains('^'), "the error points into the statement: {error}");
    page.screenshot(&artifacts().join("sql.png")).await?;

    // Key-value: a key added on the page is in the database.
    page.click("[data-page=kv]").await?;
    page.fill("#kv-key", "console/greeting").await?;
    page.fill("#kv-value", r#"{"hello": "world"}"#).await?;
    page.click("#kv-save").await?;
    page.text_when("#kv-entries tbody", "the new key is listed", |t| t.contains("console/greeting")).await?;
    let stored = cluster.http.kv_get("console/greeting").await?.ensure_status(200)?;
    ensure!(stored.json["value"] == json!({"hello": "world"}), "{stored}");
    page.screenshot(&artifacts().join("kv.png")).await?;

    other_models(page, cluster).await?;

    // A node goes down: the overview says so within a refresh or two.
    page.click("[data-page=overview]").await?;
    cluster.kill_node(3)?;
    page.text_when("#health", "node 3 is reported unreachable", |t| t.starts_with("1 node(s) unreachable")).await?;
    page.screenshot(&artifacts().join("node-down.png")).await?;

    // A viewer: no admin buttons, and the API refuses a write on the page.
    page.click("#logout").await?;
    page.text_when("#error", "signed out", |t| t == "Signed out.").await?;
    sign_in(page, "vera", VIEWER_PASSWORD).await?;
    page.text_when("#who", "the viewer is signed in", |t| t == "vera (viewer)").await?;
    page.text_when("#nodes tbody", "the viewer sees the nodes", |t| t.contains("127.0.0.1")).await?;
    ensure!(!page.visible("#nodes .drain").await?, "a viewer sees no drain button");
    page.click("[data-page=kv]").await?;
    page.text_when("#kv-entries tbody", "the viewer reads the keys", |t| t.contains("console/greeting")).await?;
    ensure!(!page.visible(".kv-delete").await?, "a viewer sees no delete button");
    page.fill("#kv-key", "console/viewer").await?;
    page.fill("#kv-value", "1").await?;
    page.click("#kv-save").await?;
    page.text_when("#kv-error", "the refusal is shown", |t| t.contains("write:kv")).await?;
    cluster.http.kv_get("console/viewer").await?.ensure_status(404)?;
    Ok(())
}
