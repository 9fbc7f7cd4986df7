//! Scenario: meeting summaries (`AI_SERVICE_URL`) survive the instance that
//! stopped the meeting, and a failing text-generation service is retried.
//!
//! Instances of `tessera-meetings` share one database; each talks to its own
//! path of one fake text-generation service (`/a/…` stalls forever, the
//! others answer, after as many 500s as the scenario asks for, and can be
//! held).
//!
//! - A meeting is stopped on instance A, whose summary attempt stalls; a
//!   second instance B starts, A is killed, and B writes the summary once
//!   A's claim has lapsed.
//! - A 500 from the service is retried with backoff and the summary arrives.
//! - An empty transcript is not sent to the service (`skipped`).
//! - A live instance renews its claim while its call runs past the first
//!   lease (another instance with the service keeps looking and does not
//!   take it), and its answer is then written.
//! - An instance without `AI_SERVICE_URL` records no pending summary.
//! - A `meetings` table made by an earlier version (without the summary
//!   columns) is upgraded in place at start.
//!
//! Transcripts are written with SQL as the Tessera admin (no speech here:
//! `meetings_transcription` covers recognition).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Map, Value};
use tessera_tests::meetings::{AppUser, MeetingsApp, register_and_login};
use tessera_tests::{Cluster, ClusterOptions, Http, json, wait_for};

const DATABASE: &str = "meetings";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_summaries() {
    let cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("meetings_summaries scenario failed: {e:?}");
    }
}

/// The fake text-generation service: what it was asked (path, transcript),
/// and how path `b` behaves.
#[derive(Clone, Default)]
struct Fake {
    seen: Arc<Mutex<Vec<(String, String)>>>,
    /// Requests on `b` to answer 500.
    fail_next: Arc<Mutex<u32>>,
    /// While true, requests on `b` wait.
    hold: Arc<Mutex<bool>>,
}

impl Fake {
    /// The requests on `path` whose transcript contains `marker`.
    fn asked(&self, path: &str, marker: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|(p, t)| p == path && t.contains(marker)).count()
    }
}

async fn complete(
    State(fake): State<Fake>,
    Path(who): Path<String>,
    axum::Json(req): axum::Json<Value>,
) -> (StatusCode, axum::Json<Value>) {
    let transcript = req["messages"][1]["content"].as_str().unwrap_or_default().to_string();
    let words = transcript.split_whitespace().count();
    fake.seen.lock().unwrap().push((who.clone(), transcript));
    if who == "a" {
        // Instance A's attempts never end (until A does).
        futures::future::pending::<()>().await;
    }
    {
        let mut fail = fake.fail_next.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"error": "overloaded"})));
        }
    }
    while *fake.hold.lock().unwrap() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let content = format!("Summary by {who} of {words} words.");
    (StatusCode::OK, axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": content}}]})))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as i64
}

/// Runs `sql` with `params` in the app's database as the Tessera admin; answers the rows.
async fn sql(cluster: &Cluster, sql: &str, params: &[Value]) -> Result<Vec<Map<String, Value>>> {
    let r = cluster.http.post("/api/v1/query", &json!({"sql": sql, "params": params, "database": DATABASE})).await?.ensure_status(200)?;
    let columns: Vec<String> =
        r.json["data"]["columns"].as_array().map(|c| c.iter().filter_map(|c| c.as_str().map(str::to_string)).collect()).unwrap_or_default();
    let rows = r.json["data"]["rows"].as_array().cloned().unwrap_or_default();
    Ok(rows
        .iter()
        .map(|row| columns.iter().cloned().zip(row.as_array().cloned().unwrap_or_default()).collect::<Map<String, Value>>())
        .collect())
}

/// The summary bookkeeping of meeting `id`, as stored.
async fn summary_row(cluster: &Cluster, id: &str) -> Result<Map<String, Value>> {
    sql(
        cluster,
        "SELECT summary, summary_state, summary_attempts, summary_next_at, summary_claimed_by, summary_claim_until FROM meetings WHERE id = $1",
        &[json!(id)],
    )
    .await?
    .into_iter()
    .next()
    .with_context(|| format!("meeting {id} is stored"))
}

/// A meeting of `user` (through `http`, the user's client of an instance),
/// started, with one transcript segment saying `text` (written as the
/// admin), not yet stopped.
async fn meeting_with_transcript(cluster: &Cluster, user: &AppUser, http: &Http, title: &str, text: &str) -> Result<String> {
    let m = http.post("/api/v1/meetings", &json!({"title": title})).await?.ensure_status(201)?;
    let id = m.json["id"].as_str().context("meeting id")?.to_string();
    http.post(&format!("/api/v1/meetings/{id}/start"), &json!({})).await?.ensure_status(200)?;
    if !text.is_empty() {
        sql(
            cluster,
            "INSERT INTO segments (id, meeting_id, user_id, speaker, text, start_ms, end_ms, confidence, created_at) \
             VALUES ($1, $2, $3, 'Ada', $4, 0, 1000, 0.9, 1)",
            &[json!(format!("seg-{id}")), json!(id), json!(user.id), json!(text)],
        )
        .await?;
    }
    Ok(id)
}

/// Waits for meeting `id`'s summary, read through `user`'s client.
async fn summary_of(user: &Http, id: &str, within: Duration) -> Result<String> {
    wait_for(within, &format!("meeting {id}'s summary"), async || {
        let m = user.get(&format!("/api/v1/meetings/{id}")).await?.ensure_status(200)?;
        Ok(m.json["summary"].as_str().map(str::to_string))
    })
    .await
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    // A deployment made by an earlier version: `meetings` without the summary columns.
    sql(
        cluster,
        "CREATE TABLE meetings (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, organization_id TEXT, title TEXT NOT NULL, \
         description TEXT NOT NULL, scheduled_at BIGINT NOT NULL, status TEXT NOT NULL, created_at BIGINT NOT NULL, \
         started_at BIGINT, ended_at BIGINT, summary TEXT)",
        &[],
    )
    .await?;
    sql(
        cluster,
        "INSERT INTO meetings (id, owner_id, organization_id, title, description, scheduled_at, status, created_at, started_at, ended_at, summary) \
         VALUES ('old-meeting', 'old-owner', NULL, 'Old', '', 1, 'completed', 1, 1, 2, NULL)",
        &[],
    )
    .await?;

    let fake = Fake::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let ai = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn({
        let fake = fake.clone();
        async move {
            let app = axum::Router::new().route("/{who}/v1/chat/completions", axum::routing::post(complete)).with_state(fake);
            let _ = axum::serve(listener, app).await;
        }
    });

    // --- Instance A stops a meeting, stalls on its summary, and is killed ----
    let mut a = MeetingsApp::start(cluster, DATABASE, "a", &[("AI_SERVICE_URL", &format!("{ai}/a"))]).await?;
    let ada = register_and_login(&a.http(), "ada@example.com", "correct horse battery", "Ada").await?;
    let m1 = meeting_with_transcript(cluster, &ada, &ada.http, "Survives", "alpha bravo charlie delta marker-one").await?;
    ada.http.post(&format!("/api/v1/meetings/{m1}/stop"), &json!({})).await?.ensure_status(200)?;
    wait_for(Duration::from_secs(30), "instance A asks the service for m1's summary", async || {
        Ok((fake.asked("a", "marker-one") > 0).then_some(()))
    })
    .await?;
    // A second instance joins while A's attempt is in flight; then A dies.
    let b = MeetingsApp::start(cluster, DATABASE, "b", &[("AI_SERVICE_URL", &format!("{ai}/b"))]).await?;
    let on_b = ada.on(&b.http());
    a.kill();
    // B writes the summary once A's claim has lapsed.
    let summary = summary_of(&on_b, &m1, Duration::from_secs(120)).await.with_context(|| format!("instance B log:\n{}", b.log_text()))?;
    ensure!(summary == "Summary by b of 5 words.", "{summary}");
    ensure!(fake.asked("b", "marker-one") == 1, "B asked once for m1");
    let row = summary_row(cluster, &m1).await?;
    ensure!(row["summary_state"] == "done" && row["summary_attempts"] == 2, "A's attempt and B's: {row:?}");
    ensure!(row["summary_claimed_by"].is_null() && row["summary_claim_until"].is_null(), "the claim is released: {row:?}");
    let shown = on_b.get(&format!("/api/v1/meetings/{m1}")).await?.ensure_status(200)?;
    ensure!(shown.json["summary_status"] == "done", "{shown}");

    // --- A transient 500 is retried ----------------------------------------
    *fake.fail_next.lock().unwrap() = 1;
    let m2 = meeting_with_transcript(cluster, &ada, &on_b, "Retried", "echo foxtrot marker-two").await?;
    let stopped = on_b.post(&format!("/api/v1/meetings/{m2}/stop"), &json!({})).await?.ensure_status(200)?;
    ensure!(stopped.json["summary_status"] == "pending", "the stop records a pending summary: {stopped}");
    let summary = summary_of(&on_b, &m2, Duration::from_secs(60)).await?;
    ensure!(summary == "Summary by b of 3 words.", "{summary}");
    ensure!(fake.asked("b", "marker-two") == 2, "one 500, then the answer");
    let row = summary_row(cluster, &m2).await?;
    ensure!(row["summary_state"] == "done" && row["summary_attempts"] == 2, "{row:?}");

    // --- An empty transcript is not summarized -----------------------------
    let m3 = meeting_with_transcript(cluster, &ada, &on_b, "Silent", "").await?;
    on_b.post(&format!("/api/v1/meetings/{m3}/stop"), &json!({})).await?.ensure_status(200)?;
    wait_for(Duration::from_secs(30), "m3's summary is skipped", async || {
        let m = on_b.get(&format!("/api/v1/meetings/{m3}")).await?.ensure_status(200)?;
        Ok((m.json["summary_status"] == "skipped").then_some(m))
    })
    .await
    .and_then(|m| {
        ensure!(m.json["summary"].is_null(), "{m}");
        Ok(())
    })?;

    // --- A live instance keeps its claim while its call runs --------------
    // A third instance, C, with the service too: whichever of B and C claims
    // m4 holds it past its first lease while the other keeps looking.
    let c = MeetingsApp::start(cluster, DATABASE, "c", &[("AI_SERVICE_URL", &format!("{ai}/c"))]).await?;
    *fake.hold.lock().unwrap() = true;
    let m4 = meeting_with_transcript(cluster, &ada, &on_b, "Held", "golf hotel india juliet kilo marker-four").await?;
    on_b.post(&format!("/api/v1/meetings/{m4}/stop"), &json!({})).await?.ensure_status(200)?;
    let holder = wait_for(Duration::from_secs(30), "an instance asks for m4's summary", async || {
        Ok(["b", "c"].into_iter().find(|who| fake.asked(who, "marker-four") > 0))
    })
    .await?;
    let first = summary_row(cluster, &m4).await?;
    let (owner, first_until) = (first["summary_claimed_by"].clone(), first["summary_claim_until"].as_i64().context("a lease")?);
    ensure!(owner.is_string() && first["summary_state"] == "pending", "{first:?}");
    wait_for(Duration::from_secs(90), "m4's first lease has passed, its claim renewed", async || {
        let row = summary_row(cluster, &m4).await?;
        ensure!(row["summary_claimed_by"] == owner && row["summary_state"] == "pending", "the claim changed hands: {row:?}");
        ensure!(fake.asked("b", "marker-four") + fake.asked("c", "marker-four") == 1, "a second instance asked for m4");
        let renewed = row["summary_claim_until"].as_i64() > Some(first_until);
        Ok((renewed && now_ms() > first_until + 2_000).then_some(()))
    })
    .await?;
    *fake.hold.lock().unwrap() = false;
    let summary = summary_of(&on_b, &m4, Duration::from_secs(60)).await?;
    ensure!(summary == format!("Summary by {holder} of 6 words."), "{summary}");
    ensure!(fake.asked("b", "marker-four") + fake.asked("c", "marker-four") == 1, "one call: the claim never lapsed");
    ensure!(summary_row(cluster, &m4).await?["summary_attempts"] == 1, "one attempt");
    drop(c);

    // --- Without AI_SERVICE_URL nothing is pending --------------------------
    let d = MeetingsApp::start(cluster, DATABASE, "d", &[]).await?;
    let on_d = ada.on(&d.http());
    let m5 = meeting_with_transcript(cluster, &ada, &on_d, "Unsummarized", "lima mike marker-five").await?;
    let stopped = on_d.post(&format!("/api/v1/meetings/{m5}/stop"), &json!({})).await?.ensure_status(200)?;
    ensure!(stopped.json["summary_status"].is_null(), "{stopped}");
    ensure!(summary_row(cluster, &m5).await?["summary_state"].is_null(), "no pending summary");

    // --- The earlier version's table was upgraded in place ------------------
    let old = summary_row(cluster, "old-meeting").await?;
    ensure!(old["summary_state"].is_null() && old["summary"].is_null(), "an old meeting is left alone: {old:?}");

    server.abort();
    Ok(())
}
