//! Scenario: a subject erased after a backup was taken does not come back when
//! that backup is restored — neither into the same cluster (its live
//! certificates name the erasure) nor into a new, empty cluster restoring the
//! same backups (the erasure ledger beside them does). The restore re-applies
//! each later erasure before it answers and records the original certificate
//! again; other subjects' data is restored as it was. While it re-applies them
//! (a test pause makes that take seconds) every data group is held: a read
//! answers 503, never the erased subject's restored records, and the audit
//! entries recorded since the backup are recorded again, not rolled back.

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tessera_tests::{Cluster, ClusterOptions, Http};

fn options(dir: &std::path::Path) -> ClusterOptions {
    let router_env = vec![
        ("SERVICE_BACKUP_DIR".to_string(), dir.display().to_string()),
        ("SERVICE_COMPLIANCE_ENABLED".to_string(), "true".to_string()),
        // Each erasure pauses between recording its job and erasing: the window
        // in which a restore has brought the subject back and not yet erased it.
        ("TESSERA_TEST_ERASURE_PAUSE_MS".to_string(), "3000".to_string()),
    ];
    ClusterOptions { shard_count: 3, router_env, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_after_a_backup_survives_its_restore() {
    let dir = tempfile::tempdir().expect("backup dir");
    if let Err(e) = scenario(dir.path()).await {
        panic!("erasure_survives_restore failed: {e:?}");
    }
}

async fn write_subjects(api: &Http) -> Result<()> {
    for who in ["ana", "ben"] {
        api.kv_put(&format!("user:{who}"), json!({"plan": "pro"}), None).await?.ensure_status(200)?;
    }
    api.post("/api/v1/query", &json!({"sql": "CREATE TABLE orders (id INT PRIMARY KEY, customer_id TEXT, total INT)"}))
        .await?
        .ensure_status(200)?;
    api.post("/api/v1/query", &json!({"sql": "INSERT INTO orders VALUES (1, 'ana', 10), (2, 'ben', 20), (3, 'ana', 30)"}))
        .await?
        .ensure_status(200)?;
    api.post("/api/v1/documents/collections", &json!({"name": "profiles"})).await?.ensure_status(201)?;
    api.post("/api/v1/documents/collections/profiles/documents", &json!({"id": "p1", "document": {"user_id": "ana", "city": "Oslo"}}))
        .await?
        .ensure_status(201)?;
    Ok(())
}

/// What of ana and of ben the cluster serves: (ana's key, ana's rows, ana's document, ben's key, ben's rows).
async fn visible(api: &Http) -> Result<(u16, usize, u16, u16, usize)> {
    let rows = |who: &str| {
        let api = api.clone();
        let sql = format!("SELECT id FROM orders WHERE customer_id = '{who}'");
        async move {
            Ok::<_, anyhow::Error>(
                api.post("/api/v1/query", &json!({"sql": sql})).await?.ensure_status(200)?.json["data"]["rows"]
                    .as_array()
                    .map_or(0, Vec::len),
            )
        }
    };
    Ok((
        api.kv_get("user:ana").await?.status,
        rows("ana").await?,
        api.get("/api/v1/documents/collections/profiles/documents/p1").await?.status,
        api.kv_get("user:ben").await?.status,
        rows("ben").await?,
    ))
}

/// Restores `backup_id` while reading ana's key, rows and kept export again and again until
/// it answers: every read must be held (503) or find nothing (404, no rows),
/// and some must have been held. Answers the restore's body.
async fn restore_while_reading(api: &Http, backup_id: &str, export_url: &str) -> Result<Value> {
    let done = std::sync::atomic::AtomicBool::new(false);
    let restore = async {
        let r = api.post("/api/v1/admin/restore", &json!({"backup_id": backup_id})).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    };
    let probe = async {
        let (mut held, mut reads) = (0, 0);
        let sql = json!({"sql": "SELECT id FROM orders WHERE customer_id = 'ana'"});
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let key = api.kv_get("user:ana").await?;
            let rows = api.post("/api/v1/query", &sql).await?;
            // The export of ana kept before the backup is restored with the meta group.
            let export = api.get(export_url).await?;
            if export.status == 200 {
                anyhow::bail!("a download during the restore served the erased subject's kept export: {}", export.text);
            }
            for r in [&key, &rows] {
                reads += 1;
                match r.status {
                    503 => held += 1,
                    404 => {}
                    // The restore replaces the users and sessions too: in a new
                    // cluster the session of this caller may be gone for a moment.
                    401 => {}
                    200 if r.json["data"]["rows"].as_array().is_some_and(Vec::is_empty) => {}
                    // Before the restore's swap the table may not exist yet (new cluster).
                    400 if r.text.contains("TABLE_NOT_FOUND") || r.text.contains("does not exist") => {}
                    _ => anyhow::bail!("a read during the restore saw the erased subject: HTTP {} {}", r.status, r.text),
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok::<_, anyhow::Error>((held, reads))
    };
    let (restored, probed) = tokio::join!(restore, probe);
    let (held, reads) = probed?;
    let restored = restored?.ensure_status(200)?;
    eprintln!("[erasure_survives_restore] {reads} reads during the restore, {held} held");
    ensure!(held > 0, "no read during the restore was held ({reads} reads): {}", restored.json);
    Ok(restored.json)
}

fn reapplied(restored: &Value, certificate: &str) -> bool {
    restored["erasures_reapplied"].as_array().is_some_and(|r| r.iter().any(|e| e["certificate_id"] == certificate))
}

async fn scenario(dir: &std::path::Path) -> Result<()> {
    let (backup_id, certificate, export_url) = {
        let mut source = Cluster::start(options(dir)).await?;
        let result = async {
            let api = source.http.timeout(std::time::Duration::from_secs(120));
            write_subjects(&api).await?;
            let exported = api.post("/api/v1/compliance/export", &json!({"subject_id": "ana"})).await?.ensure_status(200)?;
            let export_url = exported.json["download_url"].as_str().context("download_url")?.to_string();
            let made = api.post("/api/v1/admin/backup", &json!({"compliance_mode": "gdpr"})).await?.ensure_status(201)?;
            let backup_id = made.json["backup_id"].as_str().context("backup id")?.to_string();
            let erased = api.delete("/api/v1/compliance/data-subject/ana").await?.ensure_status(200)?;
            let certificate = erased.json["certificate"]["certificate_id"].as_str().context("certificate id")?.to_string();
            ensure!(visible(&api).await? == (404, 0, 404, 200, 1), "ana erased, ben kept");

            // Restored into the same cluster: the live certificate is re-applied.
            let restored = restore_while_reading(&api, &backup_id, &export_url).await?;
            eprintln!("[erasure_survives_restore] same cluster: {restored}");
            ensure!(reapplied(&restored, &certificate), "{restored}");
            ensure!(visible(&api).await? == (404, 0, 404, 200, 1), "after the restore: {:?}", visible(&api).await?);
            let listed = api.get("/api/v1/compliance/certificates").await?.ensure_status(200)?;
            ensure!(listed.text.contains(&certificate), "the original certificate stands again: {}", listed.json);
            api.get(&export_url).await?.ensure_status(404)?;
            // The audit entry of the erasure, recorded after the backup, is not
            // rolled back by it: it is recorded again, naming the original, and
            // the chain still verifies.
            ensure!(restored["audit_entries_re_recorded"].as_u64().is_some_and(|n| n > 0), "{restored}");
            let trail = api.get("/api/v1/compliance/audit/ana").await?.ensure_status(200)?;
            let again = trail.json["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["event_type"] == "data_erased" && e["details"]["recorded_again_after_restore_of"] == json!(backup_id));
            ensure!(again, "the erasure's audit entry was rolled back by the restore: {}", trail.json);
            let verified = api.get("/api/v1/compliance/audit/verify").await?.ensure_status(200)?;
            ensure!(verified.json["valid"] == json!(true), "the audit chain after the restore: {}", verified.json);
            Ok::<_, anyhow::Error>((backup_id, certificate, export_url))
        }
        .await;
        if result.is_err() {
            eprintln!("{}", source.log_tails(40));
        }
        source.stop_all().await?;
        result?
    };

    // A new, empty cluster restoring the same backup: the ledger beside it names the erasure.
    let mut target = Cluster::start(options(dir)).await?;
    let result = async {
        let api = target.http.timeout(std::time::Duration::from_secs(120));
        let restored = restore_while_reading(&api, &backup_id, &export_url).await?;
        eprintln!("[erasure_survives_restore] new cluster: {restored}");
        ensure!(reapplied(&restored, &certificate), "{restored}");
        // The users and sessions are the backup's now: sign in again.
        let token = target.login().await?;
        let api = target.http.with_token(&token).timeout(std::time::Duration::from_secs(120));
        ensure!(visible(&api).await? == (404, 0, 404, 200, 1), "after the restore: {:?}", visible(&api).await?);
        api.get(&export_url).await?.ensure_status(404)?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    if result.is_err() {
        eprintln!("{}", target.log_tails(40));
    }
    target.stop_all().await?;
    result
}
