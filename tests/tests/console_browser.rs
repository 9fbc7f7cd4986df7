//! Scenario: the web console (served by the router on its console port) in a
//! real browser (Debian's headless Chromium through chromedriver). An admin
//! signs in (after a wrong password is refused on the page), sees the three
//! nodes and every group led, runs SQL and sees the rows in the grid, a
//! syntax error pointed at in the statement and a join's plan drawn as a
//! tree, adds a key in the key-value browser, acknowledges the incident a
//! flagged query opened and erases a data subject on the compliance page
//! (the signed certificate listed and verified), makes a role and a user on
//! the users page, changes its role and password there and deletes it,
//! acknowledges a security alert, blocks an address and unblocks another on
//! the security page, downloads an incident's PDF report, and watches node
//! 3's status change when it is killed. A viewer signs in next: no admin
//! buttons or forms, and a write the viewer may not make is refused by the
//! API and said on the page. Screenshots of each page are kept under
//! `$CARGO_TARGET_DIR/test-artifacts/console/` (or the temporary directory).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use tessera_tests::webdriver::{Browser, Driver};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port, wait_for};

const VIEWER_PASSWORD: &str = "Viewer-Passw0rd-12";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_browser() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![
            ("SERVICE_CONSOLE_ENABLED".into(), "true".into()),
            ("SERVICE_CONSOLE_PORT".into(), port.to_string()),
            ("SERVICE_COMPLIANCE_ENABLED".into(), "true".into()),
        ],
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
    // Tall enough for a page's tables and forms to be in its screenshot.
    page.resize(1280, 1400).await?;
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
    Ok(())
}

/// A query flagged as SQL injection opens an incident, which the compliance
/// page lists and acknowledges; a data subject erased with the page's form
/// leaves a signed certificate, listed, shown and verified.
async fn compliance(page: &Browser, cluster: &Cluster) -> Result<()> {
    const C: &str = "/api/v1/compliance";
    let api = &cluster.http;
    api.post("/api/v1/query", &json!({"sql": "SELECT name FROM pets WHERE name = '' OR '1'='1'"})).await?.ensure_status(200)?;
    let incident = wait_for(Duration::from_secs(30), "the flagged query opens an incident", async || {
        let list = api.get(&format!("{C}/breaches")).await?.ensure_status(200)?;
        let found = list.json["incidents"].as_array().and_then(|all| all.iter().find(|i| i["type"] == "sql_injection").cloned());
        Ok(found.and_then(|i| i["incident_id"].as_str().map(str::to_string)))
    })
    .await?;
    api.kv_put("customers/zoe", json!({"plan": "pro"}), None).await?.ensure_status(200)?;

    page.click("[data-page=security]").await?;
    page.text_when("#security-alerts tbody", "the flagged query's alert", |t| t.contains("sql_injection")).await?;
    page.screenshot(&artifacts().join("security.png")).await?;

    page.click("[data-page=compliance]").await?;
    page.text_when("#compliance-status tbody", "the frameworks' status", |t| t.contains("GDPR")).await?;
    let listed = page.text_when("#incidents tbody", "the incident is listed", |t| t.contains(&incident)).await?;
    let row = listed.lines().find(|l| l.starts_with(&incident)).unwrap_or_default();
    ensure!(row.contains("high") && row.contains("open") && row.contains("sql_injection"), "the incident's row: {row:?}");
    page.click(&format!("[aria-label='Acknowledge incident {incident}']")).await?;
    page.text_when("#compliance-message", "the incident is acknowledged", |t| t == format!("Incident {incident} acknowledged by admin"))
        .await?;
    let stored = api.get(&format!("{C}/breaches/{incident}")).await?.ensure_status(200)?;
    ensure!(stored.json["status"] == "acknowledged", "{stored}");

    // The incident's report, fetched by the page with the session's token and saved as a PDF.
    page.click(&format!("[aria-label='Download the report of incident {incident}']")).await?;
    let saved = page
        .text_when("#compliance-message", "the report is downloaded", |t| {
            t.starts_with(&format!("Report of incident {incident} downloaded"))
        })
        .await?;
    ensure!(saved.contains("(application/pdf, ") && !saved.contains(", 0 bytes)"), "{saved}");
    let pdf = api.get(&format!("{C}/breaches/{incident}/report?format=pdf")).await?.ensure_status(200)?;
    ensure!(pdf.body.starts_with(b"%PDF"), "the report is a PDF: {:?}", pdf.text.chars().take(20).collect::<String>());

    page.fill("#erase-subject", "zoe").await?;
    page.fill("#erase-reason", "console erasure").await?;
    page.click("#erase-run").await?;
    page.accept_dialog().await?;
    let erased = page.text_when("#compliance-message", "the subject is erased", |t| t.starts_with("Subject zoe erased: ")).await?;
    ensure!(erased.contains("1 record(s), certificate DEL-"), "{erased}");
    let certificates = page.text_when("#certificates tbody", "the certificate is listed", |t| t.contains("zoe")).await?;
    let id = certificates.split_whitespace().find(|w| w.starts_with("DEL-")).context("a certificate id")?.to_string();
    page.text_when("#compliance-detail-json", "the certificate's JSON", |t| t.contains(r#""signature_algorithm": "Ed25519""#)).await?;
    api.kv_get("customers/zoe").await?.ensure_status(404)?;
    page.click(&format!("[aria-label='Verify certificate {id}']")).await?;
    page.text_when("#compliance-detail-note", "the certificate verifies", |t| t.starts_with("Valid: ")).await?;
    page.screenshot(&artifacts().join("compliance.png")).await?;
    Ok(())
}

/// The security page's actions: the flagged query's alert acknowledged, an
/// address blocked through the API unblocked on the page, another blocked
/// with the page's form (left blocked for the viewer to see).
async fn security(page: &Browser, cluster: &Cluster) -> Result<()> {
    const S: &str = "/api/v1/admin/security";
    let api = &cluster.http;
    api.post(&format!("{S}/block-ip"), &json!({"ip_address": "203.0.113.9", "reason": "console test", "duration_hours": 1}))
        .await?
        .ensure_status(201)?;
    let alerts = api.get(&format!("{S}/alerts?acknowledged=false")).await?.ensure_status(200)?;
    let alert = alerts.json["alerts"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["kind"] == "sql_injection"))
        .and_then(|a| a["id"].as_str())
        .with_context(|| format!("the flagged query's alert, unacknowledged: {alerts}"))?
        .to_string();

    page.click("[data-page=security]").await?;
    page.text_when("#blocked-ips tbody", "the blocked address is listed", |t| t.contains("203.0.113.9 console test admin")).await?;
    page.click(&format!("[aria-label='Acknowledge alert {alert}']")).await?;
    page.text_when("#security-message", "the alert is acknowledged", |t| {
        t == format!("Alert {alert} (sql_injection) acknowledged by admin")
    })
    .await?;
    ensure!(!page.visible(&format!("[aria-label='Acknowledge alert {alert}']")).await?, "an acknowledged alert has no button");
    let listed = api.get(&format!("{S}/alerts")).await?.ensure_status(200)?;
    let stored = listed.json["alerts"].as_array().and_then(|all| all.iter().find(|a| a["id"] == alert.as_str())).context("the alert")?;
    ensure!(stored["acknowledged"] == true && stored["acknowledged_by"] == "admin", "{stored}");

    // An address blocked by hand for two hours.
    page.fill("#block-ip", "198.51.100.4").await?;
    page.fill("#block-reason", "port scan").await?;
    page.fill("#block-duration", "2").await?;
    page.click("#block-save").await?;
    page.text_when("#security-message", "the address is blocked", |t| t.starts_with("198.51.100.4 blocked until ")).await?;
    page.text_when("#blocked-ips tbody", "the new block is listed", |t| t.contains("198.51.100.4 port scan admin")).await?;
    let blocks = api.get(&format!("{S}/blocked-ips")).await?.ensure_status(200)?;
    let block = blocks.json["blocked_ips"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["ip_address"] == "198.51.100.4"))
        .with_context(|| format!("the page's block: {blocks}"))?;
    let remaining = block["remaining_secs"].as_i64().unwrap_or_default();
    ensure!((7000..=7200).contains(&remaining), "blocked for two hours: {block}");

    page.click("[aria-label='Unblock 203.0.113.9']").await?;
    page.accept_dialog().await?;
    page.text_when("#security-message", "the address is unblocked", |t| t == "203.0.113.9 unblocked").await?;
    page.text_when("#blocked-ips tbody", "the address is gone from the list", |t| !t.contains("203.0.113.9") && t.contains("198.51.100.4"))
        .await?;
    let blocks = api.get(&format!("{S}/blocked-ips")).await?.ensure_status(200)?;
    ensure!(!blocks.text.contains("203.0.113.9"), "the block is lifted: {blocks}");
    page.screenshot(&artifacts().join("security-actions.png")).await?;
    Ok(())
}

/// A role and a user made on the users page (a weak password refused first),
/// the user's role, other roles and password changed with the edit form, then
/// the user deleted.
async fn users(page: &Browser, cluster: &Cluster) -> Result<()> {
    let api = &cluster.http;
    page.click("[data-page=users]").await?;
    page.text_when("#users tbody", "the users are listed", |t| t.contains("vera")).await?;
    page.text_when("#role-permissions", "the permissions are offered", |t| t.contains("read:compliance")).await?;
    page.fill("#role-name", "auditor").await?;
    page.click("#perm-read-compliance").await?;
    page.click("#perm-read-cluster").await?;
    page.click("#role-save").await?;
    page.text_when("#roles tbody", "the new role is listed", |t| t.contains("auditor read:compliance, read:cluster")).await?;

    page.fill("#user-name", "carl").await?;
    page.fill("#user-email", "carl@example.com").await?;
    page.fill("#user-password", "weak").await?;
    page.click("#user-role option[value=operator]").await?;
    page.click("#user-roles option[value=auditor]").await?;
    page.click("#user-save").await?;
    page.text_when("#users-error", "a weak password is refused", |t| t.contains("at least 12 characters")).await?;
    page.fill("#user-password", "Carl-Passw0rd-34").await?;
    page.click("#user-save").await?;
    page.text_when("#users-status", "the user is made", |t| t == "User carl created (operator)").await?;
    page.text_when("#users tbody", "the new user is listed", |t| t.contains("carl carl@example.com operator auditor")).await?;
    let listed = api.get("/api/v1/admin/users").await?.ensure_status(200)?;
    let carl = listed.json["users"].as_array().and_then(|u| u.iter().find(|u| u["username"] == "carl").cloned()).context("carl")?;
    ensure!(carl["role"] == "operator" && carl["roles"] == json!(["auditor"]), "{carl}");
    page.screenshot(&artifacts().join("users.png")).await?;

    // Edited: role viewer, the custom role taken away, a new password.
    page.click("[aria-label='Edit user carl']").await?;
    page.text_when("#user-edit-title", "the edit form", |t| t == "Edit user carl").await?;
    page.click("#user-edit-role option[value=viewer]").await?;
    page.click("#user-edit-roles option[value=auditor]").await?;
    page.fill("#user-edit-password", "Carl-N3w-Passw0rd-56").await?;
    page.screenshot(&artifacts().join("user-edit.png")).await?;
    page.click("#user-edit-save").await?;
    page.text_when("#users-status", "the user is changed", |t| t == "User carl updated: role viewer; other roles none; password reset")
        .await?;
    ensure!(!page.visible("#user-edit").await?, "the edit form closes");
    page.text_when("#users tbody", "the new role is listed", |t| t.contains("carl carl@example.com viewer")).await?;
    let listed = api.get("/api/v1/admin/users").await?.ensure_status(200)?;
    let carl = listed.json["users"].as_array().and_then(|u| u.iter().find(|u| u["username"] == "carl").cloned()).context("carl")?;
    ensure!(carl["role"] == "viewer" && carl["roles"] == json!([]), "{carl}");
    api.login("carl", "Carl-N3w-Passw0rd-56").await?.ensure_status(200)?;
    api.login("carl", "Carl-Passw0rd-34").await?.ensure_status(401)?;

    page.click("[aria-label='Delete user carl']").await?;
    page.accept_dialog().await?;
    page.text_when("#users-status", "the user is deleted", |t| t == "User carl deleted").await?;
    page.text_when("#users tbody", "carl is gone from the list", |t| t.contains("vera") && !t.contains("carl")).await?;
    let listed = api.get("/api/v1/admin/users").await?.ensure_status(200)?;
    ensure!(!listed.json["users"].as_array().is_some_and(|u| u.iter().any(|u| u["username"] == "carl")), "{listed}");
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
    for statement in [
        "CREATE TABLE pets (id INT PRIMARY KEY, name TEXT)",
        "INSERT INTO pets VALUES (1, 'rex'), (2, 'tom')",
        "CREATE TABLE owners (id INT PRIMARY KEY, pet_id INT)",
        "INSERT INTO owners VALUES (10, 1), (11, 2)",
    ] {
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

    // EXPLAIN: the plan as a tree, the join step holding the steps it joined; a step collapses.
    page.fill("#sql-text", "SELECT o.id, p.name FROM owners o JOIN pets p ON p.id = o.pet_id").await?;
    page.click("#sql-explain").await?;
    page.text_when("#sql-status", "the plan", |t| t.starts_with("Plan of")).await?;
    let plan = page.text("#sql-plan-tree").await?;
    ensure!(plan.contains("JOIN"), "the plan has a join step: {plan:?}");
    // The statement holds the join step, which holds the first table's START, which holds its scan.
    let first = page.text("#sql-plan-tree details details details").await?;
    ensure!(first.starts_with("START ") && first.contains(" SCAN "), "the first table's steps nested in the join: {plan:?}");
    ensure!(!page.visible("#sql-result").await?, "the plan replaces the grid");
    page.screenshot(&artifacts().join("explain.png")).await?;
    page.click("#sql-plan-tree > li > details > summary").await?;
    ensure!(!page.visible("#sql-plan-tree details details").await?, "the plan's root closes");

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
    compliance(page, cluster).await?;
    security(page, cluster).await?;
    users(page, cluster).await?;

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

    // The viewer reads incidents, certificates and users, with none of the admin forms.
    page.click("[data-page=compliance]").await?;
    page.text_when("#certificates tbody", "the viewer sees the certificate", |t| t.contains("zoe")).await?;
    page.text_when("#incidents tbody", "the viewer sees the incident", |t| t.contains("sql_injection")).await?;
    ensure!(!page.visible("#erase-form").await?, "a viewer sees no erasure form");
    ensure!(!page.visible("#incidents .incident-resolve").await?, "a viewer sees no resolve button");
    ensure!(page.visible("#incidents .incident-report").await?, "a viewer may download an incident's report");

    // The viewer's own flagged query raises an alert, which the viewer sees but cannot acknowledge.
    let vera = cluster.http.login_as("vera", VIEWER_PASSWORD).await?;
    vera.post("/api/v1/query", &json!({"sql": "SELECT name FROM pets WHERE name = '' OR '1'='1'"})).await?;
    wait_for(Duration::from_secs(30), "the viewer's flagged query raises an alert", async || {
        let alerts = cluster.http.get("/api/v1/admin/security/alerts?acknowledged=false").await?.ensure_status(200)?;
        Ok(alerts.json["alerts"].as_array().is_some_and(|all| all.iter().any(|a| a["username"] == "vera")).then_some(()))
    })
    .await?;
    page.click("[data-page=security]").await?;
    page.text_when("#security-alerts tbody", "the viewer sees the new alert", |t| t.contains("vera")).await?;
    page.text_when("#blocked-ips tbody", "the viewer sees the block", |t| t.contains("198.51.100.4")).await?;
    for admin_only in ["#block-form", ".alert-ack", ".ip-unblock"] {
        ensure!(!page.visible(admin_only).await?, "a viewer sees no {admin_only}");
    }
    page.screenshot(&artifacts().join("viewer-security.png")).await?;

    page.click("[data-page=users]").await?;
    page.text_when("#users tbody", "the viewer sees the users", |t| t.contains("vera")).await?;
    for admin_only in ["#user-create", "#user-edit", "#role-form", ".user-edit", ".user-delete", ".role-delete"] {
        ensure!(!page.visible(admin_only).await?, "a viewer sees no {admin_only}");
    }
    Ok(())
}
