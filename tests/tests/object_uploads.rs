//! Scenario: a router dies in the middle of an object upload. The chunks it
//! had written are counted as a pending upload in the bucket's stats, never
//! become an object, and are freed by the sweep the group's leader runs once
//! they are older than `SERVICE_UPLOAD_MAX_AGE_SECS` (a node setting);
//! completed uploads leave nothing pending.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, Http, json, wait_until};
use tokio::io::AsyncWriteExt;

const B: &str = "/api/v1/objects/buckets";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_uploads() {
    // The leaders sweep every second and free uploads older than 3 s.
    let opts = ClusterOptions {
        node_env: vec![("SERVICE_UPLOAD_MAX_AGE_SECS".into(), "3".into()), ("SERVICE_UPLOAD_SWEEP_INTERVAL_SECS".into(), "1".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("object_uploads scenario failed: {e:?}");
    }
}

async fn pending_uploads(api: &Http, bucket: &str) -> Result<u64> {
    let r = api.get(&format!("{B}/{bucket}")).await?.ensure_status(200)?;
    r.json["pending_uploads"].as_u64().ok_or_else(|| anyhow!("no pending_uploads in {r}"))
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    api.post(B, &json!({"name": "uploads"})).await?.ensure_status(201)?;

    // A completed upload leaves nothing pending.
    let r = api.send(Method::PUT, &format!("{B}/uploads/object/whole"), Some(vec![7u8; 600_000]), Some("application/octet-stream")).await?;
    r.ensure_status(200)?;
    ensure!(pending_uploads(&api, "uploads").await? == 0, "a committed upload is still pending");

    // Router 1 receives 3 MiB of a
    // chunked upload that never ends, then crashes.
    let (idx, second) = c.start_router(&[]).await?;
    let addr = second.base().trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.with_context(|| format!("connect {addr}"))?;
    // A session is valid on every router.
    let token = api.token().ok_or_else(|| anyhow!("no token"))?.to_string();
    let head = format!(
        "PUT {B}/uploads/object/abandoned HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await?;
    let piece = vec![b'a'; 1024 * 1024];
    for _ in 0..3 {
        conn.write_all(&[format!("{:x}\r\n", piece.len()).as_bytes(), &piece, b"\r\n"].concat()).await?;
    }
    wait_until(Duration::from_secs(30), "the abandoned upload's chunks to be written", async || {
        pending_uploads(&api, "uploads").await.is_ok_and(|n| n == 1)
    })
    .await?;
    c.kill_router(idx)?;
    drop(conn);

    // Nothing became visible, and the sweep frees the chunks.
    let r = api.get(&format!("{B}/uploads/object/abandoned?meta=1")).await?;
    ensure!(r.status == 404, "an abandoned upload became an object: {r}");
    wait_until(Duration::from_secs(60), "the sweep to free the abandoned upload", async || {
        pending_uploads(&api, "uploads").await.is_ok_and(|n| n == 0)
    })
    .await?;
    let r = api.get(&format!("{B}/uploads")).await?.ensure_status(200)?;
    ensure!(r.json["object_count"] == json!(1) && r.json["total_bytes"] == json!(600_000), "stats after the sweep: {r}");
    let r = api.get(&format!("{B}/uploads/object/whole")).await?.ensure_status(200)?;
    ensure!(r.body == vec![7u8; 600_000], "the committed object changed");
    Ok(())
}
