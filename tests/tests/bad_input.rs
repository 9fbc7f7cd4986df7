//! Scenario: malformed or out-of-bounds writes are refused with a 4xx and a
//! JSON `{error, code}` body, and nothing is stored; the limits themselves
//! (1024-byte key, 1 MiB value) are accepted.

use anyhow::{Context, Result, ensure};
use tessera_tests::{Cluster, ClusterOptions, Http, json};

const KV: &str = "/api/v1/kv/keys";
const MAX_KEY: usize = 1024;
const MAX_VALUE: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster).await {
        panic!("bad_input scenario failed: {e:?}");
    }
}

async fn scenario(c: &mut Cluster) -> Result<()> {
    let api = c.http.clone();
    let q = api.consistency("quorum");

    // Every rejected body uses keys under "bi-bad-" so "nothing stored" is one count.
    let raw_bodies: &[(&str, &str)] = &[
        ("truncated JSON", r#"{"key": "bi-bad-truncated", "value": "#),
        ("trailing garbage", r#"{"key": "bi-bad-trailing", "value": 1}}"#),
        ("not JSON", "key=bi-bad-form&value=1"),
        ("empty body", ""),
        ("missing value", r#"{"key": "bi-bad-no-value"}"#),
        ("missing key", r#"{"value": {"k": "bi-bad-no-key"}}"#),
        ("empty object", "{}"),
        ("array body", r#"["bi-bad-array", 1]"#),
        ("string body", r#""bi-bad-string""#),
        ("null body", "null"),
        ("numeric key", r#"{"key": 42, "value": 1}"#),
        ("object key", r#"{"key": {"k": "bi-bad-obj"}, "value": 1}"#),
        ("string ttl", r#"{"key": "bi-bad-ttl-str", "value": 1, "ttl": "soon"}"#),
        ("negative ttl", r#"{"key": "bi-bad-ttl-neg", "value": 1, "ttl": -5}"#),
    ];
    for (what, body) in raw_bodies {
        let r = api.post_raw(KV, *body, Some("application/json")).await.context(*what)?;
        r.ensure_client_error().with_context(|| format!("{what}: body {body:?}"))?;
    }
    for k in ["bi-bad-truncated", "bi-bad-trailing", "bi-bad-form", "bi-bad-no-value", "bi-bad-ttl-str", "bi-bad-ttl-neg"] {
        q.kv_get(k).await?.ensure_status(404).with_context(|| format!("{k} must not be stored"))?;
    }
    ensure!(q.kv_count("42").await? == 0, "numeric key 42 was stored");

    // Key length: 1024 bytes is fine, 1025 is refused.
    let ok_key = format!("bi-ok-{}", "k".repeat(MAX_KEY - "bi-ok-".len()));
    assert_eq!(ok_key.len(), MAX_KEY);
    api.kv_put(&ok_key, json!("max key"), None).await?.ensure_status(200).context("1024-byte key")?;
    let r = q.kv_get(&ok_key).await?.ensure_status(200)?;
    ensure!(r.json["key"] == ok_key.as_str(), "1024-byte key read back as {r}");

    let long_key = format!("bi-bad-{}", "k".repeat(MAX_KEY + 1 - "bi-bad-".len()));
    assert_eq!(long_key.len(), MAX_KEY + 1);
    api.kv_put(&long_key, json!(1), None).await?.ensure_client_error().context("1025-byte key")?;
    // A multi-byte key just over the limit in bytes (but not in characters).
    let utf8_key = format!("bi-bad-{}", "é".repeat(509));
    ensure!(utf8_key.len() == 1025 && utf8_key.chars().count() < MAX_KEY);
    api.kv_put(&utf8_key, json!(1), None).await?.ensure_client_error().context("1025-byte UTF-8 key")?;

    // Value size: exactly 1 MiB of JSON is fine, one byte more is refused.
    let ok_value = json!("x".repeat(MAX_VALUE - 2));
    assert_eq!(serde_json::to_vec(&ok_value)?.len(), MAX_VALUE);
    api.kv_put("bi-ok-big", ok_value.clone(), None).await?.ensure_status(200).context("1 MiB value")?;
    let r = q.kv_get("bi-ok-big").await?.ensure_status(200)?;
    ensure!(r.json["value"] == ok_value, "1 MiB value read back with {} bytes", r.text.len());

    let big_value = json!("x".repeat(MAX_VALUE - 1));
    api.kv_put("bi-bad-big", big_value, None).await?.ensure_client_error().context("1 MiB + 1 value")?;
    // A body over the router's limit is refused before it is read to its end, so
    // the router closes that connection and says so; the client's next
    // requests go out on a fresh one instead of failing on the closed one.
    let huge_value = json!({"blob": "y".repeat(3 * MAX_VALUE)});
    for round in 0..5 {
        let r = api.kv_put("bi-bad-huge", huge_value.clone(), None).await?;
        let r = r.ensure_status(413).with_context(|| format!("3 MiB value, round {round}"))?;
        ensure!(r.header("connection") == Some("close"), "413 without Connection: close: {r}");
        q.kv_get("bi-ok-big").await?.ensure_status(200).with_context(|| format!("read after 413, round {round}"))?;
    }

    // Nothing under bi-bad- was stored; the accepted ones are.
    ensure!(q.kv_count("bi-bad-").await? == 0, "a rejected write was stored");
    let (listed, total) = q.kv_list_keys("bi-bad-", None).await?;
    ensure!(listed.is_empty() && total == 0, "a rejected write is listed: {listed:?}");
    ensure!(q.kv_count("bi-ok-").await? == 2, "count bi-ok-");

    // Unknown keys: 404 with a JSON error, on get and delete.
    missing(&q, "bi-never-written").await?;
    Ok(())
}

async fn missing(http: &Http, key: &str) -> Result<()> {
    let r = http.kv_get(key).await?;
    ensure!(r.status == 404, "get {key}: {r}");
    r.ensure_error_body()?;
    let r = http.kv_delete(key).await?;
    ensure!(r.status == 404, "delete {key}: {r}");
    r.ensure_error_body()?;
    Ok(())
}
