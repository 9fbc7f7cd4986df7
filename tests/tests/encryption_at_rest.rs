//! Scenario: encryption at rest. A cluster started with
//! `SERVICE_ENCRYPTION_AT_REST=true` stores a key-value value, a SQL row, a
//! document and an object that each carry a unique marker string; node 3 is down
//! meanwhile and catches up by snapshot install (small snapshot threshold, no
//! log kept). After a graceful stop (memtables flushed to SST files) no file under
//! any node's data directory (SST, WAL, manifest, everything) contains a marker;
//! after a full restart every value reads back. A node given a wrong key, no key,
//! or no encryption refuses to start with a clear error. Then the key is
//! rotated: every node restarts with a new key and the old one as a previous
//! key, and old and new values read back; the nodes re-seal everything under
//! the new key, restart without the old one, and every value still reads back.
//!
//! The control test runs the same workload without encryption and finds every
//! marker on disk, which shows the scan can see plaintext where it exists.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use base64::Engine as _;
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, bin_dir, json, wait_for};

const FILLER: usize = 100;

fn random_bytes(n: usize) -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    (0..n.div_ceil(8))
        .flat_map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
            h.finish().to_le_bytes()
        })
        .take(n)
        .collect()
}

/// One marker per data model, unique to this run.
struct Markers {
    kv: String,
    sql: String,
    doc: String,
    object: String,
}

impl Markers {
    /// Independent random upper-case strings: RocksDB LZ4-compresses SST blocks,
    /// and markers sharing a prefix (or common 4-byte runs) could be stored as
    /// back-references, hiding them from the scan in the control test.
    fn new() -> Self {
        let one = || random_bytes(24).iter().map(|b| (b'A' + b % 26) as char).collect::<String>();
        Markers { kv: one(), sql: one(), doc: one(), object: one() }
    }

    fn all(&self) -> [(&'static str, &str); 4] {
        [("kv", &self.kv), ("sql", &self.sql), ("document", &self.doc), ("object", &self.object)]
    }
}

fn options(extra: Vec<(String, String)>) -> ClusterOptions {
    let mut node_env = vec![
        // Snapshot every 20 entries and keep no log behind it: snapshots are built
        // on every node and a lagging node catches up by installing one.
        ("SERVICE_RAFT_SNAPSHOT_LOGS".to_string(), "20".to_string()),
        ("SERVICE_RAFT_KEEP_LOGS".to_string(), "0".to_string()),
    ];
    node_env.extend(extra);
    ClusterOptions { node_env, shard_count: 2, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encryption_at_rest_hides_values() {
    let keys = tempfile::tempdir().expect("key dir");
    let key_file = keys.path().join("master.key");
    std::fs::write(&key_file, base64::engine::general_purpose::STANDARD.encode(random_bytes(32))).expect("key file");
    let opts = options(vec![
        ("SERVICE_ENCRYPTION_AT_REST".into(), "true".into()),
        ("SERVICE_ENCRYPTION_KEY".into(), key_file.display().to_string()),
    ]);
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = encrypted_scenario(&mut cluster).await {
        panic!("encryption_at_rest scenario failed: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_control_shows_values() {
    let mut cluster = Cluster::start(options(Vec::new())).await.expect("cluster start");
    if let Err(e) = plaintext_scenario(&mut cluster).await {
        panic!("plaintext control scenario failed: {e:?}");
    }
}

async fn encrypted_scenario(c: &mut Cluster) -> Result<()> {
    let m = Markers::new();
    workload(c, &m).await?;
    c.stop_all().await?;
    for id in [1, 2, 3] {
        let dir = c.node_data_dir(id)?;
        let scanned = tessera_tests::files_under(&dir)?.len();
        ensure!(scanned > 3, "node {id}: only {scanned} files under {}", dir.display());
        for (model, marker) in m.all() {
            let found = tessera_tests::files_containing(&dir, marker.as_bytes())?;
            ensure!(found.is_empty(), "node {id}: the {model} marker is in plaintext in {found:?}");
        }
    }

    c.start_all().await?;
    verify(c, &m).await?;

    // A node refuses to open its encrypted directory without the right key.
    c.stop_node(1).await?;
    let other_key = base64::engine::general_purpose::STANDARD.encode(random_bytes(32));
    let cases: [(&str, Vec<(&str, String)>, &str); 4] = [
        (
            "wrong key",
            vec![("SERVICE_ENCRYPTION_AT_REST", "true".into()), ("SERVICE_ENCRYPTION_KEY", other_key)],
            "does not match the key this data directory was encrypted with",
        ),
        ("encryption off", vec![], "this data directory is encrypted at rest"),
        ("no key", vec![("SERVICE_ENCRYPTION_AT_REST", "true".into())], "needs SERVICE_ENCRYPTION_KEY"),
        (
            "malformed key",
            vec![("SERVICE_ENCRYPTION_AT_REST", "true".into()), ("SERVICE_ENCRYPTION_KEY", "c2hvcnQ=".into())],
            "base64 of 32 bytes",
        ),
    ];
    for (label, env, expected) in cases {
        let out = run_node_once(c, 1, &env).await?;
        ensure!(!out.0, "node 1 started with {label}");
        ensure!(out.1.contains(expected), "node 1 with {label}: expected {expected:?} in its output:\n{}", out.1);
    }
    // Refused starts leave the directory intact: the right key still opens it.
    c.start_node(1)?;
    let replica = c.http.replica(1);
    wait_for(Duration::from_secs(60), "node 1 serves the kv marker again", async || {
        let r = replica.kv_get("enc/kv").await?;
        Ok((r.status == 200 && r.json["value"]["note"] == m.kv.as_str()).then_some(()))
    })
    .await?;
    rotate_the_key(c, &m).await
}

/// Key rotation: every node restarts with a new key and the old one among
/// `SERVICE_ENCRYPTION_PREVIOUS_KEYS`; everything written before reads back,
/// new writes are served, and the next restart opens the directories with the
/// new key as their own.
async fn rotate_the_key(c: &mut Cluster, m: &Markers) -> Result<()> {
    let old_key =
        c.options().node_env.iter().find(|(k, _)| k == "SERVICE_ENCRYPTION_KEY").map(|(_, v)| v.clone()).context("the old key")?;
    let new_key = base64::engine::general_purpose::STANDARD.encode(random_bytes(32));
    c.stop_all().await?;
    for id in [1, 2, 3] {
        c.set_node_env(id, "SERVICE_ENCRYPTION_KEY", &new_key)?;
        c.set_node_env(id, "SERVICE_ENCRYPTION_PREVIOUS_KEYS", &old_key)?;
    }
    c.start_all().await?;
    verify(c, m).await?;
    c.http.kv_put("enc/after-rotation", json!({"note": "rotated"}), None).await?.ensure_status(200)?;
    c.stop_all().await?;
    c.start_all().await?;
    verify(c, m).await?;
    let r = c.http.kv_get("enc/after-rotation").await?.ensure_status(200)?;
    ensure!(r.json["value"]["note"] == "rotated", "{r}");
    for id in [1, 2, 3] {
        ensure!(c.node_log_text(id)?.contains("key was rotated"), "node {id} says its key was rotated");
    }
    retire_the_old_key(c, m).await
}

/// Retiring the old key: every node re-seals what it stores under the new key
/// (`POST /api/v1/admin/encryption/reencrypt`), then every node restarts
/// without the previous key and every value still reads back.
async fn retire_the_old_key(c: &mut Cluster, m: &Markers) -> Result<()> {
    let r = c.http.post("/api/v1/admin/encryption/reencrypt", &json!({})).await?.ensure_status(200)?;
    ensure!(r.json["complete"] == true && r.json["needing_previous_keys"] == 0, "re-encryption incomplete: {r}");
    let nodes = r.json["nodes"].as_array().context("nodes")?;
    ensure!(nodes.len() == 3 && nodes.iter().all(|n| n["previous_keys"] == true), "every node had the old key: {r}");
    let resealed: u64 = nodes.iter().filter_map(|n| n["resealed"].as_u64()).sum();
    ensure!(resealed > 0, "values sealed with the old key were re-sealed: {r}");
    println!("re-encryption: {resealed} values re-sealed on 3 nodes");
    c.stop_all().await?;
    for id in [1, 2, 3] {
        c.set_node_env(id, "SERVICE_ENCRYPTION_PREVIOUS_KEYS", "")?;
    }
    c.start_all().await?;
    verify(c, m).await?;
    let r = c.http.kv_get("enc/after-rotation").await?.ensure_status(200)?;
    ensure!(r.json["value"]["note"] == "rotated", "{r}");
    Ok(())
}

async fn plaintext_scenario(c: &mut Cluster) -> Result<()> {
    let m = Markers::new();
    workload(c, &m).await?;
    c.stop_all().await?;
    for (model, marker) in m.all() {
        let mut found = Vec::new();
        for id in [1, 2, 3] {
            found.extend(tessera_tests::files_containing(&c.node_data_dir(id)?, marker.as_bytes())?);
        }
        ensure!(!found.is_empty(), "the {model} marker is nowhere on disk without encryption: the scan is blind");
    }
    // Node 3 got its values only through snapshot install; they are plain on disk.
    let on_3 = tessera_tests::files_containing(&c.node_data_dir(3)?, m.kv.as_bytes())?;
    ensure!(!on_3.is_empty(), "node 3 (caught up by snapshot) shows no kv marker without encryption");
    c.start_all().await?;
    verify(c, &m).await
}

/// Writes the marked records with node 3 down, lets the leaders snapshot and
/// purge, brings node 3 back through snapshot install, and checks the values.
async fn workload(c: &mut Cluster, m: &Markers) -> Result<()> {
    let api = c.http.clone();
    c.stop_node(3).await?;

    api.kv_put("enc/kv", json!({"note": m.kv, "n": 1}), None).await?.ensure_status(200)?;
    let sql = |text: String| {
        let api = api.clone();
        async move {
            let r = api.post("/api/v1/query", &json!({"sql": text, "params": [], "database": "enc"})).await?;
            ensure!(r.status == 200 && r.json["success"] == json!(true), "{text}: {r}");
            Ok::<_, anyhow::Error>(r)
        }
    };
    sql("CREATE TABLE secrets (id INT PRIMARY KEY, note TEXT NOT NULL)".into()).await?;
    sql(format!("INSERT INTO secrets VALUES (1, '{}')", m.sql)).await?;
    api.post("/api/v1/documents/collections", &json!({"name": "enc"})).await?.ensure_status(201)?;
    api.post("/api/v1/documents/collections/enc/documents", &json!({"document": {"note": m.doc}})).await?.ensure_status(201)?;
    api.post("/api/v1/objects/buckets", &json!({"name": "encbucket"})).await?.ensure_status(201)?;
    let body = format!("object body with {} inside", m.object).into_bytes();
    let r = api.send(Method::PUT, "/api/v1/objects/buckets/encbucket/object/note.txt", Some(body), Some("text/plain")).await?;
    ensure!(r.status == 200 || r.status == 201, "object put: {r}");
    for i in 0..FILLER {
        api.kv_put(&format!("enc/filler-{i:03}"), json!({"i": i}), None).await?.ensure_status(200)?;
    }

    c.start_node(3)?;
    let replica = c.http.replica(3);
    wait_for(Duration::from_secs(60), "node 3 catches up", async || {
        let n = replica.kv_count("enc/").await?;
        if n != FILLER as u64 + 1 {
            return Err(anyhow!("node 3 count so far: {n}"));
        }
        Ok(Some(()))
    })
    .await?;
    let log = std::fs::read_to_string(c.node_log(3)?)?;
    ensure!(log.contains("installed snapshot"), "node 3 caught up without installing a snapshot");
    verify(c, m).await
}

/// Every marked value reads back through the router, and from node 3's replica.
async fn verify(c: &Cluster, m: &Markers) -> Result<()> {
    let api = &c.http;
    let r = api.kv_get("enc/kv").await?.ensure_status(200)?;
    ensure!(r.json["value"]["note"] == m.kv.as_str(), "kv value {r}");
    let r = c.http.replica(3).kv_get("enc/kv").await?.ensure_status(200)?;
    ensure!(r.json["value"]["note"] == m.kv.as_str(), "kv value on node 3 {r}");
    let r = api
        .post("/api/v1/query", &json!({"sql": "SELECT note FROM secrets WHERE id = 1", "params": [], "database": "enc"}))
        .await?
        .ensure_status(200)?;
    ensure!(r.json["data"]["rows"] == json!([[m.sql]]), "sql row {r}");
    let r = api.post("/api/v1/documents/enc/query", &json!({"filter": {"note": m.doc}})).await?.ensure_status(200)?;
    let docs = r.json["documents"].as_array().with_context(|| format!("document query {r}"))?;
    ensure!(docs.len() == 1 && docs[0]["data"]["note"] == m.doc.as_str(), "document query {r}");
    let r = api.get("/api/v1/objects/buckets/encbucket/object/note.txt").await?.ensure_status(200)?;
    ensure!(r.text.contains(&m.object), "object body {r}");
    Ok(())
}

/// Runs node `id` once with the cluster's usual settings plus `env` (no other
/// `SERVICE_*`), expecting it to exit: (exited successfully, its output).
async fn run_node_once(c: &Cluster, id: u64, env: &[(&str, String)]) -> Result<(bool, String)> {
    let mut cmd = tokio::process::Command::new(bin_dir()?.join("tessera-node"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SERVICE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("SERVICE_NODE_ID", id.to_string())
        .env("SERVICE_PEERS", c.peers())
        .env("SERVICE_GRPC_ADDR", c.node_addr(id)?)
        .env("SERVICE_DATA_DIR", c.node_data_dir(id)?)
        .env("SERVICE_SHARD_COUNT", "2")
        .env("SERVICE_CLUSTER_INSECURE", "true")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(Duration::from_secs(30), cmd.output()).await {
        Ok(out) => out?,
        Err(_) => bail!("node {id} did not exit within 30 s (it should have refused to start)"),
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}
