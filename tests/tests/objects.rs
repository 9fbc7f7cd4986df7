//! Scenario: the object store end to end through the router — buckets, binary
//! round trips with content type, metadata and a quoted FNV-1a ETag, overwrite,
//! prefix listing in key order with a continuation marker across the shards a
//! bucket's objects are spread over, a 64 MiB object streamed in and out, range
//! reads, 413 beyond the size limit, deletes, and data that outlives a leader
//! and its restart.

use std::collections::BTreeSet;

use anyhow::{Context, Result, anyhow, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const B: &str = "/api/v1/objects/buckets";
/// The router's object size limit in this scenario: room for the 64 MiB object.
const MAX_OBJECT: usize = 65 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects() {
    let opts =
        ClusterOptions { router_env: vec![("SERVICE_MAX_OBJECT_BYTES".into(), MAX_OBJECT.to_string())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(opts).await.expect("cluster start");
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

/// How [`put_raw`] frames its body.
enum Framing {
    /// `Content-Length: n` with `Expect: 100-continue`: the content is sent only
    /// after the router's `100 Continue`, as curl does for large uploads.
    Declared(usize),
    /// `Transfer-Encoding: chunked` with this many bytes: the router only learns
    /// the size while streaming.
    Chunked(usize),
}

/// PUTs over a raw HTTP/1.1 connection and returns the final status code.
/// Writes stop once the router has answered.
async fn put_raw(api: &Http, path: &str, framing: Framing) -> Result<u16> {
    let addr = api.base().trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.with_context(|| format!("connect {addr}"))?;
    let token = api.token().ok_or_else(|| anyhow!("no token"))?;
    let framing_headers = match framing {
        Framing::Declared(n) => format!("Content-Length: {n}\r\nExpect: 100-continue"),
        Framing::Chunked(_) => "Transfer-Encoding: chunked".to_string(),
    };
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/octet-stream\r\n{framing_headers}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await?;
    if let Framing::Chunked(total) = framing {
        let piece = vec![b'z'; 1024 * 1024];
        let mut sent = 0;
        while sent < total {
            let n = piece.len().min(total - sent);
            let frame = [format!("{n:x}\r\n").as_bytes(), &piece[..n], b"\r\n"].concat();
            if conn.write_all(&frame).await.is_err() {
                break; // the router answered and closed: read its answer
            }
            sent += n;
        }
        let _ = conn.write_all(b"0\r\n\r\n").await;
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut buf = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.map_err(|_| anyhow!("no answer to the PUT"))?;
    let line = String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string();
    line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| anyhow!("no status line in {line:?}"))
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();

    // Buckets: the S3-style name rule, creation, conflict, listing.
    api.post(B, &json!({"name": "Bad_Name"})).await?.ensure_status(400)?;
    api.post(B, &json!({"name": "ab"})).await?.ensure_status(400)?;
    api.post(B, &json!({"name": "media"})).await?.ensure_status(201)?;
    api.post(B, &json!({"name": "scratch"})).await?.ensure_status(201)?;
    let r = api.post(B, &json!({"name": "media"})).await?;
    ensure!(r.status == 409, "creating an existing bucket: {r}");
    let r = api.get(B).await?.ensure_status(200)?;
    let names: Vec<String> =
        r.json["buckets"].as_array().map(|a| a.iter().filter_map(|b| b["name"].as_str().map(str::to_string)).collect()).unwrap_or_default();
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
    put(&api, "media", "x", b"1".to_vec(), "text/plain", Some("{not json")).await?.ensure_status(400)?;
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

    // Prefix listing in key order, paged with the marker, over objects that
    // live in different shards (a bucket's objects are spread by key).
    let mut groups = BTreeSet::new();
    for k in ["docs/c", "docs/a", "docs/b/2", "docs/b/1", "doc", "docz"] {
        let r = put(&api, "media", k, k.as_bytes().to_vec(), "text/plain", None).await?.ensure_status(200)?;
        groups.insert(r.header("x-tessera-group").map(str::to_string));
    }
    ensure!(groups.len() >= 2, "the listed objects all sit in one shard ({groups:?}): the merge is not exercised");
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
    let r = api.get(&format!("{B}/media/objects?prefix=doc")).await?.ensure_status(200)?;
    let all: Vec<&str> = r.json["objects"].as_array().into_iter().flatten().filter_map(|o| o["key"].as_str()).collect();
    ensure!(all == ["doc", "docs/a", "docs/b/1", "docs/b/2", "docs/c", "docz"], "one-page listing {all:?}");

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

    // Beyond the limit: 413 whether the size is declared or only found while
    // streaming; nothing is stored, and the connection is not reused.
    let status = put_raw(&api, &format!("{B}/media/object/too/big"), Framing::Declared(MAX_OBJECT + 1)).await?;
    ensure!(status == 413, "declared oversize PUT answered {status}");
    let status = put_raw(&api, &format!("{B}/media/object/too/big-stream"), Framing::Chunked(MAX_OBJECT + 1024 * 1024)).await?;
    ensure!(status == 413, "streamed oversize PUT answered {status}");
    for k in ["too/big", "too/big-stream"] {
        let r = api.get(&format!("{B}/media/object/{k}?meta=1")).await?;
        ensure!(r.status == 404, "{k} was stored after a 413: {r}");
    }

    // Stats, delete, drop.
    let r = api.get(&format!("{B}/media")).await?.ensure_status(200)?;
    ensure!(r.json["object_count"] == json!(10), "stats {r}");
    api.delete(&format!("{B}/media/object/same/b")).await?.ensure_status(200)?;
    let r = api.delete(&format!("{B}/media/object/same/b")).await?;
    ensure!(r.status == 404, "deleting twice: {r}");
    api.delete(&format!("{B}/scratch")).await?.ensure_status(200)?;
    let r = api.get(&format!("{B}/scratch")).await?;
    ensure!(r.status == 404, "dropped bucket still there: {r}");

    // The leader of an object's shard dies: the object is still there, and
    // still there once that node is back.
    let r = put(&api, "media", "img/cat.png", data.clone(), "image/png", Some(r#"{"owner":"ada"}"#)).await?.ensure_status(200)?;
    let leader = r.served_by().ok_or_else(|| anyhow!("no X-Tessera-Node on {r}"))?;
    c.kill_node(leader)?;
    let r = api.get(&format!("{B}/media/object/img/cat.png")).await?.ensure_status(200)?;
    ensure!(r.body == data, "content after leader loss");
    put(&api, "media", "after/kill", b"k".to_vec(), "text/plain", None).await?.ensure_status(200)?;
    c.start_node(leader)?;
    c.wait_ready().await?;
    let r = api.get(&format!("{B}/media/objects?prefix=after/")).await?.ensure_status(200)?;
    ensure!(r.json["count"] == json!(1), "listing after the restart: {r}");
    let r = api.get(&format!("{B}/media/object/img/cat.png")).await?.ensure_status(200)?;
    ensure!(r.body == data, "content after the restart");
    Ok(())
}
