//! Scenario: a bucket exported to an `objects.ncb` file through the admin
//! interface and imported into another bucket (created by the import) comes back
//! identical — content, ETags, content types, metadata — for binary objects from
//! empty to several MiB; `on_conflict` skips or overwrites; corrupt, truncated or
//! foreign files answer 400 and import nothing; only admins may use the routes.

use anyhow::{Context, Result, ensure};
use reqwest::Method;
use tessera_tests::{Cluster, ClusterOptions, Http, Resp, json};

const B: &str = "/api/v1/objects/buckets";
const ADMIN: &str = "/api/v1/admin/objects";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_export() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("object_export scenario failed: {e:?}");
    }
}

/// Deterministic pseudo-random bytes (xorshift).
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

async fn put(api: &Http, bucket: &str, key: &str, body: Vec<u8>, ct: &str, meta: Option<&str>) -> Result<Resp> {
    let mut api = api.clone();
    if let Some(m) = meta {
        api = api.header("X-Service-Meta", m);
    }
    api.send(Method::PUT, &format!("{B}/{bucket}/object/{key}"), Some(body), Some(ct)).await?.ensure_status(200)
}

async fn import(api: &Http, bucket: &str, query: &str, file: &[u8]) -> Result<Resp> {
    api.send(Method::POST, &format!("{ADMIN}/{bucket}/import{query}"), Some(file.to_vec()), Some("application/gzip")).await
}

/// `(key, content, content type, metadata)` of every object, read through the public routes.
async fn snapshot(api: &Http, bucket: &str) -> Result<Vec<(String, Vec<u8>, String, String, serde_json::Value)>> {
    let list = api.get(&format!("{B}/{bucket}/objects?limit=1000")).await?.ensure_status(200)?;
    let mut out = Vec::new();
    for o in list.json["objects"].as_array().context("objects")? {
        let key = o["key"].as_str().context("key")?.to_string();
        let r = api.get(&format!("{B}/{bucket}/object/{key}")).await?.ensure_status(200)?;
        let meta = api.get(&format!("{B}/{bucket}/object/{key}?meta=1")).await?.ensure_status(200)?;
        out.push((
            key,
            r.body.clone(),
            r.header("content-type").unwrap_or_default().to_string(),
            r.header("etag").unwrap_or_default().to_string(),
            meta.json["metadata"].clone(),
        ));
    }
    Ok(out)
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.timeout(std::time::Duration::from_secs(300));
    api.post(B, &json!({"name": "source"})).await?.ensure_status(201)?;
    let objects: Vec<(&str, Vec<u8>, &str, Option<&str>)> = vec![
        ("empty", Vec::new(), "application/x-empty", None),
        ("one", vec![0xff], "application/octet-stream", Some(r#"{"n":1}"#)),
        ("docs/readme.txt", b"hello objects.ncb".to_vec(), "text/plain; charset=utf-8", Some(r#"{"lang":"en","tags":["a","b"]}"#)),
        ("img/chunk-exact.bin", bytes(256 * 1024, 3), "image/x-raw", None),
        ("img/cat.png", bytes(300_000, 7), "image/png", Some(r#"{"owner":"ada"}"#)),
        ("big/random.bin", bytes(6 * 1024 * 1024 + 123, 11), "application/octet-stream", Some(r#"{"big":true}"#)),
        ("big/zeros.bin", vec![0u8; 3 * 1024 * 1024], "application/octet-stream", None),
    ];
    for (key, data, ct, meta) in &objects {
        put(&api, "source", key, data.clone(), ct, *meta).await?;
    }
    let original = snapshot(&api, "source").await?;
    ensure!(original.len() == objects.len(), "source holds {} objects", original.len());

    // Export: a gzip stream that names the bucket in its file name.
    let r = api.get(&format!("{ADMIN}/source/export")).await?.ensure_status(200)?;
    ensure!(r.body.starts_with(&[0x1f, 0x8b]), "the export is not gzip: {:?}", &r.body[..r.body.len().min(8)]);
    ensure!(
        r.header("content-disposition").is_some_and(|d| d.contains("objects.ncb")),
        "disposition {:?}",
        r.header("content-disposition")
    );
    let file = r.body;
    let total: usize = objects.iter().map(|o| o.1.len()).sum();
    eprintln!("exported {} objects, {total} bytes, into a {} byte file", objects.len(), file.len());
    api.get(&format!("{ADMIN}/nosuchbucket/export")).await?.ensure_status(404)?.ensure_error_body()?;

    // Import into a bucket that does not exist yet: identical objects.
    let r = import(&api, "copy", "", &file).await?.ensure_status(200)?;
    ensure!(
        r.json["objects_imported"] == json!(objects.len()) && r.json["bytes"] == json!(total) && r.json["skipped"] == json!(0),
        "import {r}"
    );
    ensure!(r.json["bucket_created"] == json!(true), "import {r}");
    let copy = snapshot(&api, "copy").await?;
    ensure!(copy.len() == original.len(), "copy holds {} objects", copy.len());
    for (a, b) in original.iter().zip(&copy) {
        ensure!(a.0 == b.0, "keys differ: {} vs {}", a.0, b.0);
        ensure!(a.1 == b.1, "content of {} differs", a.0);
        ensure!(a.2 == b.2 && a.3 == b.3 && a.4 == b.4, "{}: {:?} vs {:?}", a.0, (&a.2, &a.3, &a.4), (&b.2, &b.3, &b.4));
    }
    let r = api.header("Range", "bytes=5000000-5000009").get(&format!("{B}/copy/object/big/random.bin")).await?;
    ensure!(r.status == 206 && r.body == objects[5].1[5_000_000..5_000_010], "range read of an imported object: {r}");

    // Conflicts: skip (the default) keeps what is there; overwrite replaces it.
    put(&api, "copy", "one", b"changed".to_vec(), "text/plain", None).await?;
    let r = import(&api, "copy", "", &file).await?.ensure_status(200)?;
    ensure!(r.json["objects_imported"] == json!(0) && r.json["skipped"] == json!(objects.len()), "skip import {r}");
    ensure!(api.get(&format!("{B}/copy/object/one")).await?.body == b"changed", "skip replaced an object");
    let r = import(&api, "copy", "?on_conflict=overwrite", &file).await?.ensure_status(200)?;
    ensure!(r.json["objects_imported"] == json!(objects.len()) && r.json["skipped"] == json!(0), "overwrite import {r}");
    ensure!(api.get(&format!("{B}/copy/object/one")).await?.body == [0xff], "overwrite kept the old object");
    // A bad parameter is refused before the body is read: send a small one, as the
    // router may close the connection on a large body it will not read.
    import(&api, "copy", "?on_conflict=merge", &file[..64]).await?.ensure_status(400)?.ensure_error_body()?;
    let stats = api.get(&format!("{B}/copy")).await?.ensure_status(200)?;
    ensure!(stats.json["object_count"] == json!(objects.len()), "stats after imports {stats}");

    // Corrupt files: 400, no bucket left behind, nothing half-imported into an existing one.
    let mut flipped = file.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    let truncated = file[..file.len() - 100].to_vec();
    let mut no_trailer = file.clone();
    let n = no_trailer.len();
    no_trailer[n - 6] ^= 0x01; // inside the gzip CRC-32
    for (what, bad) in [
        ("a flipped byte", flipped),
        ("a truncated file", truncated),
        ("a wrong CRC", no_trailer),
        ("not gzip", b"this is not an objects.ncb file".to_vec()),
        ("empty", Vec::new()),
    ] {
        let r = import(&api, "fresh-target", "", &bad).await?;
        ensure!(r.status == 400, "{what}: {r}");
        r.ensure_error_body()?;
        let r = api.get(&format!("{B}/fresh-target")).await?;
        ensure!(r.status == 404, "{what} left the bucket it created: {r}");
        put(&api, "copy", "one", b"changed again".to_vec(), "text/plain", None).await?;
        let r = import(&api, "copy", "?on_conflict=overwrite", &bad).await?;
        ensure!(r.status == 400, "{what} into an existing bucket: {r}");
        ensure!(api.get(&format!("{B}/copy/object/one")).await?.body == b"changed again", "{what} half-imported");
        let stats = api.get(&format!("{B}/copy")).await?.ensure_status(200)?;
        ensure!(stats.json["object_count"] == json!(objects.len()), "{what}: stats {stats}");
    }

    // A round trip of the copy gives the same file content again.
    let again = api.get(&format!("{ADMIN}/source/export")).await?.ensure_status(200)?;
    ensure!(again.body == file, "exporting the same bucket twice gave different files");

    // Only admins (manage:backup) may export or import.
    let password = "Sturdy-Passw0rd!";
    api.post("/api/v1/admin/users", &json!({"username": "olga", "email": "olga@example.com", "password": password, "role": "operator"}))
        .await?
        .ensure_status(201)?;
    let operator = api.anonymous().login_as("olga", password).await?;
    operator.get(&format!("{ADMIN}/source/export")).await?.ensure_status(403)?;
    // (A small body: the router refuses before reading it.)
    let r = import(&operator, "other", "", &file[..1000]).await?;
    ensure!(r.status == 403, "operator import: {r}");
    Ok(())
}
