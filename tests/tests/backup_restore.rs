//! Scenario: an operator backs up a three-node cluster holding data of every
//! kind (key-value, SQL, documents, graph, time series, objects, a user), with
//! encryption, then restores the backup into a new, empty cluster started with
//! the same shard count: every record reads back equal there, the user logs in
//! with its password. A backup whose group file was altered, or truncated, is
//! refused before anything is written; an encrypted backup without the key
//! cannot be made.

use anyhow::{Result, ensure};
use reqwest::Method;
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http};

/// A backup key (base64 of 32 bytes), as an operator would configure it.
const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn options(dir: &std::path::Path, key: bool) -> ClusterOptions {
    let mut router_env = vec![("SERVICE_BACKUP_DIR".to_string(), dir.display().to_string())];
    if key {
        router_env.push(("SERVICE_BACKUP_KEY".into(), KEY.into()));
    }
    ClusterOptions { shard_count: 4, router_env, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_then_restore_into_a_new_cluster() {
    let dir = tempfile::tempdir().expect("backup dir");
    if let Err(e) = scenario(dir.path()).await {
        panic!("backup_restore scenario failed: {e:?}");
    }
}

async fn scenario(dir: &std::path::Path) -> Result<()> {
    // A cluster whose router has no backup key refuses an encrypted backup.
    let (backup_id, expected) = {
        let mut source = Cluster::start(options(dir, true)).await?;
        let result = async {
            let api = source.http.clone();
            let expected = write_everything(&api).await?;
            let made =
                api.post("/api/v1/admin/backup", &json!({"encrypted": true, "compliance_mode": "gdpr"})).await?.ensure_status(201)?;
            eprintln!("[backup_restore] backup: {}", made.json);
            ensure!(made.json["encrypted"] == true && made.json["encryption_algorithm"] == "AES-256-GCM", "{made}");
            ensure!(made.json["size_bytes"].as_u64().is_some_and(|n| n > 0), "{made}");
            ensure!(made.json["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{made}");
            let id = made.json["backup_id"].as_str().unwrap_or_default().to_string();
            let listed = api.get("/api/v1/admin/backups").await?.ensure_status(200)?;
            ensure!(listed.json["backups"][0]["backup_id"] == id.as_str(), "{listed}");
            api.get(&format!("/api/v1/admin/backups/{id}")).await?.ensure_status(200)?;
            api.get("/api/v1/admin/backups/bkp-nope").await?.ensure_status(404)?;
            // Writes after the backup are not in it.
            api.kv_put("after/backup", json!(1), None).await?.ensure_status(200)?;
            Ok::<_, anyhow::Error>((id, expected))
        }
        .await;
        if result.is_err() {
            eprintln!("{}", source.log_tails(40));
        }
        source.stop_all().await?;
        result?
    };

    let mut target = Cluster::start(options(dir, true)).await?;
    let result = restore_into(&target, dir, &backup_id, &expected).await;
    if result.is_err() {
        eprintln!("{}", target.log_tails(60));
    }
    target.stop_all().await?;
    result?;

    // Without a key, no encrypted backup.
    let keyless_dir = tempfile::tempdir()?;
    let mut keyless = Cluster::start(options(keyless_dir.path(), false)).await?;
    let refused = keyless.http.post("/api/v1/admin/backup", &json!({"encrypted": true})).await?.ensure_status(400)?;
    ensure!(refused.text.contains("SERVICE_BACKUP_KEY"), "{refused}");
    keyless.stop_all().await
}

/// What the source cluster holds, as the API answers it.
struct Expected {
    kv: Vec<(String, Value)>,
    sql_rows: Value,
    document: Value,
    graph_node: Value,
    points: usize,
    object: Vec<u8>,
}

async fn write_everything(api: &Http) -> Result<Expected> {
    let mut kv = Vec::new();
    for i in 0..60 {
        let (k, v) = (format!("kv/{i:03}"), json!({"n": i, "s": "x".repeat(i)}));
        api.kv_put(&k, v.clone(), None).await?.ensure_status(200)?;
        kv.push((k, v));
    }
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE accounts (id INT PRIMARY KEY, owner TEXT, balance INT)"}))
        .await?
        .ensure_status(200)?;
    api.post("/api/v1/query", &json!({"sql": "CREATE INDEX by_owner ON accounts (owner)"})).await?.ensure_status(200)?;
    let values: Vec<String> = (1..=25).map(|i| format!("({i}, 'owner{}', {})", i % 5, i * 10)).collect();
    api.post("/api/v1/query", &json!({"sql": format!("INSERT INTO accounts VALUES {}", values.join(", "))})).await?.ensure_status(200)?;
    let sql_rows = api.post("/api/v1/query", &json!({"sql": "SELECT * FROM accounts ORDER BY id"})).await?.ensure_status(200)?.json["data"]
        ["rows"]
        .clone();
    ensure!(sql_rows.as_array().is_some_and(|r| r.len() == 25), "{sql_rows}");
    api.post("/api/v1/documents/collections", &json!({"name": "people"})).await?.ensure_status(201)?;
    api.post("/api/v1/documents/collections/people/documents", &json!({"id": "ada", "document": {"city": "London", "born": 1815}}))
        .await?
        .ensure_status(201)?;
    let document = api.get("/api/v1/documents/collections/people/documents/ada").await?.ensure_status(200)?.json;
    api.post("/api/v1/graph/nodes", &json!({"graph": "g", "id": "ada", "label": "Person", "properties": {"field": "maths"}}))
        .await?
        .ensure_status(201)?;
    let graph_node = api.get("/api/v1/graph/nodes/ada?graph=g").await?.ensure_status(200)?.json;
    let points: Vec<Value> =
        (0..120).map(|i| json!({"timestamp": 1_700_000_000_000i64 + i * 1000, "value": i as f64, "tags": {"host": "a"}})).collect();
    api.post("/api/v1/timeseries/write", &json!({"metric": "temp", "points": points})).await?.ensure_status(200)?;
    api.post("/api/v1/objects/buckets", &json!({"name": "files"})).await?.ensure_status(201)?;
    let object: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    api.send(Method::PUT, "/api/v1/objects/buckets/files/object/report.bin", Some(object.clone()), Some("application/octet-stream"))
        .await?
        .ensure_status(200)?;
    api.post("/api/v1/admin/users", &json!({"username": "auditor", "email": "a@x.org", "password": "Correct-Horse-42", "role": "viewer"}))
        .await?
        .ensure_status(201)?;
    Ok(Expected { kv, sql_rows, document, graph_node, points: 120, object })
}

async fn restore_into(c: &Cluster, dir: &std::path::Path, id: &str, expected: &Expected) -> Result<()> {
    let api = c.http.clone();
    ensure!(api.kv_get("kv/001").await?.status == 404, "the new cluster starts empty");
    api.kv_put("only/in/target", json!(true), None).await?.ensure_status(200)?;

    // An altered group file is refused, and nothing is written.
    let file = dir.join(id).join("group-1.tbk");
    let original = std::fs::read(&file)?;
    let mut altered = original.clone();
    let at = altered.len() / 2;
    altered[at] ^= 0x40;
    std::fs::write(&file, &altered)?;
    let refused = api.post("/api/v1/admin/restore", &json!({"backup_id": id})).await?.ensure_status(400)?;
    ensure!(refused.text.contains("SHA-256"), "{refused}");
    std::fs::write(&file, &original[..original.len() - 10])?;
    let refused = api.post("/api/v1/admin/restore", &json!({"backup_id": id})).await?.ensure_status(400)?;
    ensure!(refused.text.contains("truncated"), "{refused}");
    ensure!(api.kv_get("only/in/target").await?.status == 200 && api.kv_get("kv/001").await?.status == 404, "nothing was written");
    std::fs::write(&file, &original)?;
    api.post("/api/v1/admin/restore", &json!({})).await?.ensure_status(400)?;
    api.post("/api/v1/admin/restore", &json!({"backup_id": "bkp-nope"})).await?.ensure_status(404)?;

    let restored = api
        .timeout(std::time::Duration::from_secs(120))
        .post("/api/v1/admin/restore", &json!({"backup_id": id}))
        .await?
        .ensure_status(200)?;
    eprintln!("[backup_restore] restore: {}", restored.json);
    // The meta group came back too: log in again as the backed-up admin.
    let api = c.http.clone();
    let admin = api.anonymous().login_as(tessera_tests::ADMIN_USER, tessera_tests::ADMIN_PASSWORD).await?;
    for (k, v) in &expected.kv {
        let r = admin.kv_get(k).await?.ensure_status(200)?;
        ensure!(r.json["value"] == *v, "{k}: {r}");
    }
    ensure!(admin.kv_get("after/backup").await?.status == 404, "a write made after the backup is not restored");
    ensure!(admin.kv_get("only/in/target").await?.status == 404, "the target's own records were replaced");
    let rows =
        admin.post("/api/v1/query", &json!({"sql": "SELECT * FROM accounts ORDER BY id"})).await?.ensure_status(200)?.json["data"]["rows"]
            .clone();
    ensure!(rows == expected.sql_rows, "SQL rows: {rows} vs {}", expected.sql_rows);
    let by_index =
        admin.post("/api/v1/query", &json!({"sql": "SELECT COUNT(*) FROM accounts WHERE owner = 'owner3'"})).await?.ensure_status(200)?;
    ensure!(by_index.json["data"]["rows"][0][0] == json!(5), "{by_index}");
    let doc = admin.get("/api/v1/documents/collections/people/documents/ada").await?.ensure_status(200)?.json;
    ensure!(doc == expected.document, "document: {doc} vs {}", expected.document);
    let node = admin.get("/api/v1/graph/nodes/ada?graph=g").await?.ensure_status(200)?.json;
    ensure!(node == expected.graph_node, "graph node: {node} vs {}", expected.graph_node);
    let ts = admin.post("/api/v1/timeseries/query", &json!({"metric": "temp", "start": 0})).await?.ensure_status(200)?;
    let points = ts.json["points"].as_array().map_or(0, Vec::len)
        + ts.json["series"].as_array().map_or(0, |s| s.iter().map(|s| s["points"].as_array().map_or(0, Vec::len)).sum());
    ensure!(points == expected.points, "time-series points: {points} in {}", ts.text.chars().take(300).collect::<String>());
    let obj = admin.get("/api/v1/objects/buckets/files/object/report.bin").await?.ensure_status(200)?;
    ensure!(obj.body == expected.object, "object bytes differ ({} vs {})", obj.body.len(), expected.object.len());
    admin.login("auditor", "Correct-Horse-42").await?.ensure_status(200)?;
    Ok(())
}
