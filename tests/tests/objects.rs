//! Scenario: the object store end to end through the router — buckets, binary
//! round trips with content type, metadata and a quoted FNV-1a ETag, overwrite,
//! prefix listing in key order with a continuation marker, a 64 MiB object
//! streamed in and out, range reads, deletes, and data that outlives a leader.

use anyhow::{Result, anyhow, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};

const B: &str = "/api/v1/objects/buckets";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("objects scenario failed: {e:?}");
    }
}

/// Deterministic pseudo-random bytes (xorshift), so content needs no storage.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn fnv1a(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}

async fn put(api: &Http, bucket: &str, key: &str, body: Vec<u8>, ct: &str, meta: Option<&str>) -> Result<Resp> {
    let mut api = api.clone();
    if let Some(m) = meta {
        api = api.header("X-Service-Meta", m);
    }
    api.send(Method::PUT, &format!("{B}/{bucket}/object/{key}"), Some(body), Some(ct)).await
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();

    // Buckets: the S3-style name rule, creation, conflict, listing.
    api.post(B, &json!({"name": "Bad_Name"})).await?.ensure_client_error()?;
    api.post(B, &json!({"name": "ab"})).await?.ensure_client_error()?;
    api.post(B, &json!({"name": "media"})).await?.ensure_status(201)?;
    api.post(B, &json!({"name": "scratch"})).await?.ensure_status(201)?;
    let r = api.post(B, &json!({"name": "media"})).await?;
    ensure!(r.status == 409, "creating an existing bucket: {r}");
    let r = api.get(B).await?.ensure_status(200)?;
    let names: Vec<String> = r.json["buckets"]
        .as_array()
        .map(|a| a.iter().filter_map(|b| b["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    ensure!(names == ["media", "scratch"], "bucket list {names:?}");

    // Binary round trip with content type, metadata and ETag.
    let data = bytes(300_000, 7);
    let r = put(&api, "media", "img/cat.png", data.clone(), "image/png", Some(r#"{"owner":"ada"}"#)).await?.ensure_status(200)?;
    ensure!(r.header("etag") == Some(fnv1a(&data).as_str()), "PUT etag {r}");
    let r = api.get(&format!("{B}/media/object/img/cat.png")).await?.ensure_status(200)?;
    ensure!(r.body == data, "content differs after a round trip");
    ensure!(r.header("content-type") == Some("image/png"), "content type {:?}", r.header("content-type"));
    ensure!(r.header("etag") == Some(fnv1a(&data).as_str()), "GET etag {:?}", r.header("etag"));
    let r = api.get(&format!("{B}/media/object/img/cat.png?meta=1")).await?.ensure_status(200)?;
    ensure!(r.json["metadata"] == json!({"owner": "ada"}) && r.json["size"] == json!(300_000), "meta=1: {r}");
    let r = api.send(Method::HEAD, &format!("{B}/media/object/img/cat.png"), None, None).await?;
    ensure!(r.status == 200 && r.header("content-length") == Some("300000") && r.body.is_empty(), "HEAD: {r}");

    // Bad metadata header, missing bucket, missing object.
    put(&api, "media", "x", b"1".to_vec(), "text/plain", Some("{not json")).await?.ensure_client_error()?;
    let r = put(&api, "nosuchbucket", "x", b"1".to_vec(), "text/plain", None).await?;
    ensure!(r.status == 404, "PUT into a missing bucket: {r}");
    let r = api.get(&format!("{B}/media/object/nope")).await?;
    ensure!(r.status == 404, "GET of a missing object: {r}");

    // Same content, same ETag; different content, new ETag.
    let e1 = put(&api, "media", "same/a", b"hello".to_vec(), "text/plain", None).await?.ensure_status(200)?;
    let e2 = put(&api, "media", "same/b", b"hello".to_vec(), "text/plain", None).await?.ensure_status(200)?;
    ensure!(e1.header("etag") == e2.header("etag"), "same content, different etags");
    let e3 = put(&api, "media", "same/a", b"hello!".to_vec(), "text/plain", None).await?.ensure_status(200)?;
    ensure!(e3.header("etag") != e1.header("etag"), "overwrite kept the etag");
    let r = api.get(&format!("{B}/media/object/same/a")).await?.ensure_status(200)?;
    ensure!(r.body == b"hello!", "overwrite not visible");

    // Prefix listing in key order, paged with the marker.
    for k in ["docs/c", "docs/a", "docs/b/2", "docs/b/1", "doc", "docz"] {
        put(&api, "media", k, k.as_bytes().to_vec(), "text/plain", None).await?.ensure_status(200)?;
    }
    let mut seen = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let mut path = format!("{B}/media/objects?prefix=docs/&limit=2");
        if let Some(m) = &marker {
            path.push_str(&format!("&marker={}", tessera_tests::url_encode(m)));
        }
        let r = api.get(&path).await?.ensure_status(200)?;
        for o in r.json["objects"].as_array().ok_or_else(|| anyhow!("no objects array: {r}"))? {
            seen.push(o["key"].as_str().unwrap_or_default().to_string());
        }
        if r.json["is_truncated"] != json!(true) {
            break;
        }
        marker = r.json["next_marker"].as_str().map(str::to_string);
    }
    ensure!(seen == ["docs/a", "docs/b/1", "docs/b/2", "docs/c"], "prefix listing {seen:?}");

    // A 64 MiB object streams in and out in chunks; range reads cut it exactly.
    let big = bytes(64 * 1024 * 1024, 99);
    let slow = api.timeout(std::time::Duration::from_secs(300));
    let started = std::time::Instant::now();
    let r = put(&slow, "media", "big/blob.bin", big.clone(), "application/octet-stream", None).await?.ensure_status(200)?;
    eprintln!("64 MiB PUT took {:?}", started.elapsed());
    ensure!(r.header("etag") == Some(fnv1a(&big).as_str()), "64 MiB etag");
    let started = std::time::Instant::now();
    let r = slow.get(&format!("{B}/media/object/big/blob.bin")).await?.ensure_status(200)?;
    ensure!(r.body.len() == big.len() && r.body == big, "64 MiB content differs");
    eprintln!("64 MiB GET took {:?}", started.elapsed());
    for (range, from, to) in [("bytes=0-9", 0, 10), ("bytes=1048570-1048590", 1048570, 1048591), ("bytes=-5", big.len() - 5, big.len())] {
        let r = api.header("Range", range).get(&format!("{B}/media/object/big/blob.bin")).await?;
        ensure!(r.status == 206 && r.body == big[from..to], "range {range}: {} {} bytes", r.status, r.body.len());
    }
    let r = api.header("Range", "bytes=99999999999-").get(&format!("{B}/media/object/big/blob.bin")).await?;
    ensure!(r.status == 416, "unsatisfiable range: {r}");
    drop(big);

    // Stats, delete, drop.
    let r = api.get(&format!("{B}/media")).await?.ensure_status(200)?;
    ensure!(r.json["object_count"] == json!(10), "stats {r}");
    api.delete(&format!("{B}/media/object/same/b")).await?.ensure_status(200)?;
    let r = api.delete(&format!("{B}/media/object/same/b")).await?;
    ensure!(r.status == 404, "deleting twice: {r}");
    api.delete(&format!("{B}/scratch")).await?.ensure_status(200)?;
    let r = api.get(&format!("{B}/scratch")).await?;
    ensure!(r.status == 404, "dropped bucket still there: {r}");

    // The bucket's leader dies: the objects are still there.
    let leader = put(&api, "media", "probe", b"p".to_vec(), "text/plain", None).await?.ensure_status(200)?.served_by();
    if let Some(id) = leader {
        c.kill_node(id)?;
    }
    let r = api.get(&format!("{B}/media/object/img/cat.png")).await?.ensure_status(200)?;
    ensure!(r.body == data, "content after leader loss");
    Ok(())
}
