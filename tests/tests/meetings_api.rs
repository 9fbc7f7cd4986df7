//! Scenario: the meetings application (spec 03 part C) on a real cluster,
//! every byte of its state in Tessera. Users register and sign in, edit
//! their profile, schedule, start and stop meetings (illegal moves refused
//! with 409), page and filter their list, and never see another user's
//! meetings; comments and meetings are found by a ranked search. A second instance shares everything with the first: a refresh
//! token rotated on one, then reused on the other, revokes the whole
//! session. The first admin is made with one SQL statement. Rate limits
//! answer 429 with Retry-After.

use anyhow::{Context, Result, ensure};
use tessera_tests::meetings::{MeetingsApp, register_and_login};
use tessera_tests::{Cluster, ClusterOptions, json};

const PASSWORD: &str = "correct horse battery";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_api() {
    let cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("meetings_api scenario failed: {e:?}");
    }
}

/// `resp` failed with `status` and the spec's error body `{error: code, message}`.
fn refused(resp: tessera_tests::Resp, status: u16, code: &str) -> Result<()> {
    ensure!(
        resp.status == status && resp.json["error"] == code && resp.json["message"].is_string(),
        "expected {status} {code}, got {resp}"
    );
    Ok(())
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    let a = MeetingsApp::start(cluster, "meetings", "a", &[]).await?;
    let api = a.http();
    let health = api.get("/health").await?.ensure_status(200)?;
    ensure!(health.json["status"] == "ok", "{health}");

    // Registration and sign-in.
    let ada = register_and_login(&api, "ada@example.com", PASSWORD, "Ada").await?;
    let dup =
        api.post("/api/v1/auth/register", &json!({"email": "ADA@example.com", "password": PASSWORD, "display_name": "Ada 2"})).await?;
    refused(dup, 409, "conflict")?;
    for bad in [
        json!({"email": "not-an-email", "password": PASSWORD, "display_name": "X"}),
        json!({"email": "x@example.com", "password": "short", "display_name": "X"}),
        json!({"email": "x@example.com", "password": PASSWORD, "display_name": " "}),
        json!({"email": "x@example.com"}),
    ] {
        refused(api.post("/api/v1/auth/register", &bad).await?, 400, "validation_error")?;
    }
    let login = api.post("/api/v1/auth/login", &json!({"email": "ada@example.com", "password": PASSWORD})).await?.ensure_status(200)?;
    ensure!(login.json["expires_in"].is_u64() && login.json["mfa_required"] == false, "{login}");
    ensure!(login.json["user"]["email"] == "ada@example.com" && login.json["user"]["role"] == "user", "{login}");
    refused(
        api.post("/api/v1/auth/login", &json!({"email": "ada@example.com", "password": "wrong password"})).await?,
        401,
        "unauthorized",
    )?;
    refused(api.post("/api/v1/auth/login", &json!({"email": "nobody@example.com", "password": PASSWORD})).await?, 401, "unauthorized")?;

    // The caller and their profile.
    refused(api.get("/api/v1/users/me").await?, 401, "unauthorized")?;
    refused(api.with_token("not.a.jwt").get("/api/v1/users/me").await?, 401, "unauthorized")?;
    let me = ada.http.get("/api/v1/users/me").await?.ensure_status(200)?;
    ensure!(me.json["id"] == ada.id.as_str() && me.json["display_name"] == "Ada", "{me}");
    let renamed = ada.http.put("/api/v1/users/me", &json!({"display_name": "Ada Lovelace"})).await?.ensure_status(200)?;
    ensure!(renamed.json["display_name"] == "Ada Lovelace", "{renamed}");
    refused(ada.http.put("/api/v1/users/me", &json!({"email": "nope"})).await?, 400, "validation_error")?;

    // Meetings: create, list, filter, page.
    let mut ids = Vec::new();
    for i in 0..23 {
        let m = ada
            .http
            .post("/api/v1/meetings", &json!({"title": format!("Stand-up {i:02}"), "description": "daily", "scheduled_at": format!("2026-12-{:02}T09:00:00Z", i + 1)}))
            .await?
            .ensure_status(201)?;
        ensure!(m.json["status"] == "scheduled" && m.json["title"] == format!("Stand-up {i:02}"), "{m}");
        ids.push(m.json["id"].as_str().unwrap_or_default().to_string());
    }
    refused(ada.http.post("/api/v1/meetings", &json!({"title": ""})).await?, 400, "validation_error")?;
    refused(ada.http.post("/api/v1/meetings", &json!({"title": "x", "scheduled_at": "next tuesday"})).await?, 400, "validation_error")?;
    let first = ada.http.get("/api/v1/meetings").await?.ensure_status(200)?;
    ensure!(
        first.json["meetings"].as_array().map(Vec::len) == Some(20) && first.json["total"] == 23 && first.json["limit"] == 20,
        "{first}"
    );
    ensure!(first.json["meetings"][0]["title"] == "Stand-up 22", "newest scheduled first: {first}");
    let second = ada.http.get("/api/v1/meetings?page=2").await?.ensure_status(200)?;
    ensure!(second.json["meetings"].as_array().map(Vec::len) == Some(3), "{second}");
    refused(ada.http.get("/api/v1/meetings?status=paused").await?, 400, "validation_error")?;
    refused(ada.http.get("/api/v1/meetings?limit=0").await?, 400, "validation_error")?;

    // Start and stop; illegal moves answer 409.
    let id = &ids[0];
    refused(ada.http.post(&format!("/api/v1/meetings/{id}/stop"), &json!({})).await?, 409, "conflict")?;
    let started = ada.http.post(&format!("/api/v1/meetings/{id}/start"), &json!({})).await?.ensure_status(200)?;
    ensure!(started.json["status"] == "active" && started.json["started_at"].is_string(), "{started}");
    refused(ada.http.post(&format!("/api/v1/meetings/{id}/start"), &json!({})).await?, 409, "conflict")?;
    let active = ada.http.get("/api/v1/meetings?status=active").await?.ensure_status(200)?;
    ensure!(active.json["total"] == 1 && active.json["meetings"][0]["id"] == id.as_str(), "{active}");
    let stopped = ada.http.post(&format!("/api/v1/meetings/{id}/stop"), &json!({})).await?.ensure_status(200)?;
    ensure!(stopped.json["status"] == "completed" && stopped.json["ended_at"].is_string(), "{stopped}");
    refused(ada.http.post(&format!("/api/v1/meetings/{id}/stop"), &json!({})).await?, 409, "conflict")?;
    let transcript = ada.http.get(&format!("/api/v1/meetings/{id}/transcript")).await?.ensure_status(200)?;
    ensure!(transcript.json["segments"] == json!([]) && transcript.json["status"] == "completed", "{transcript}");

    // Comments, and search ranked over meetings and comments.
    let budget = ada
        .http
        .post(
            "/api/v1/meetings",
            &json!({"title": "Budget review", "description": "quarterly budget and hiring plan", "scheduled_at": "2027-01-10T15:00:00Z"}),
        )
        .await?
        .ensure_status(201)?;
    let budget_id = budget.json["id"].as_str().unwrap_or_default().to_string();
    let comment = ada
        .http
        .post(&format!("/api/v1/meetings/{budget_id}/comments"), &json!({"text": "The budget is approved"}))
        .await?
        .ensure_status(201)?;
    ensure!(comment.json["author"] == "Ada Lovelace", "{comment}");
    ada.http.post(&format!("/api/v1/meetings/{id}/comments"), &json!({"text": "Moved to the big room"})).await?.ensure_status(201)?;
    refused(ada.http.post(&format!("/api/v1/meetings/{budget_id}/comments"), &json!({"text": " "})).await?, 400, "validation_error")?;
    let listed = ada.http.get(&format!("/api/v1/meetings/{budget_id}/comments")).await?.ensure_status(200)?;
    ensure!(listed.json.as_array().map(Vec::len) == Some(1), "{listed}");
    let found = ada.http.get("/api/v1/search?q=budget").await?.ensure_status(200)?;
    let hits = found.json["results"].as_array().cloned().unwrap_or_default();
    ensure!(hits.len() == 2 && found.json["total"] == 2, "{found}");
    // BM25: the two-word comment outranks the six-word meeting that names budget twice.
    ensure!(hits[0]["type"] == "comment" && hits[1]["type"] == "meeting" && hits[1]["id"] == budget_id.as_str(), "{found}");
    ensure!(hits[0]["score"].as_f64() > hits[1]["score"].as_f64(), "{found}");
    let comments_only = ada.http.get("/api/v1/search?q=budget&type=comment").await?.ensure_status(200)?;
    ensure!(comments_only.json["total"] == 1 && comments_only.json["results"][0]["id"] == comment.json["id"], "{comments_only}");
    let later = ada.http.get("/api/v1/search?q=budget&from=2027-01-01").await?.ensure_status(200)?;
    ensure!(later.json["total"] == 1 && later.json["results"][0]["type"] == "meeting", "{later}");
    let stand_ups = ada.http.get("/api/v1/search?q=stand-up%2007&limit=3").await?.ensure_status(200)?;
    ensure!(
        stand_ups.json["results"].as_array().map(Vec::len) == Some(3) && stand_ups.json["results"][0]["title"] == "Stand-up 07",
        "{stand_ups}"
    );
    refused(ada.http.get("/api/v1/search").await?, 400, "validation_error")?;
    refused(ada.http.get("/api/v1/search?q=x&type=video").await?, 400, "validation_error")?;
    refused(ada.http.get("/api/v1/search?q=x&from=someday").await?, 400, "validation_error")?;

    // Another user sees none of it.
    let bob = register_and_login(&api, "bob@example.com", PASSWORD, "Bob").await?;
    refused(bob.http.get(&format!("/api/v1/meetings/{id}")).await?, 404, "not_found")?;
    refused(bob.http.post(&format!("/api/v1/meetings/{}/start", ids[1]), &json!({})).await?, 404, "not_found")?;
    refused(bob.http.get("/api/v1/meetings/not-a-uuid").await?, 404, "not_found")?;
    let bobs = bob.http.get("/api/v1/meetings").await?.ensure_status(200)?;
    ensure!(bobs.json["total"] == 0, "{bobs}");
    let bob_found = bob.http.get("/api/v1/search?q=budget").await?.ensure_status(200)?;
    ensure!(bob_found.json["total"] == 0, "{bob_found}");
    refused(bob.http.get(&format!("/api/v1/meetings/{budget_id}/comments")).await?, 404, "not_found")?;
    refused(api.get("/api/v1/no-such-route").await?, 404, "not_found")?;

    // A second instance shares the state: rotation on B, reuse on A revokes the session.
    let b = MeetingsApp::start(cluster, "meetings", "b", &[]).await?;
    let api_b = b.http();
    let me_b = ada.on(&api_b).get("/api/v1/users/me").await?.ensure_status(200)?;
    ensure!(me_b.json["display_name"] == "Ada Lovelace", "instance B sees A's users: {me_b}");
    let rotated = api_b.post("/api/v1/auth/refresh", &json!({"refresh_token": ada.refresh_token})).await?.ensure_status(200)?;
    let new_refresh = rotated.json["refresh_token"].as_str().unwrap_or_default().to_string();
    let new_access = rotated.json["access_token"].as_str().unwrap_or_default().to_string();
    ensure!(!new_refresh.is_empty() && new_refresh != ada.refresh_token, "{rotated}");
    api.with_token(&new_access).get("/api/v1/users/me").await?.ensure_status(200)?;
    refused(api.post("/api/v1/auth/refresh", &json!({"refresh_token": ada.refresh_token})).await?, 401, "unauthorized")?;
    refused(api.post("/api/v1/auth/refresh", &json!({"refresh_token": new_refresh})).await?, 401, "unauthorized")?;
    refused(api_b.with_token(&new_access).get("/api/v1/users/me").await?, 401, "unauthorized")?;
    refused(api.post("/api/v1/auth/refresh", &json!({"refresh_token": "garbage"})).await?, 401, "unauthorized")?;

    // Logout ends the session on every instance.
    bob.http.get("/api/v1/users/me").await?.ensure_status(200)?;
    let out = bob.http.post("/api/v1/auth/logout", &json!({})).await?;
    ensure!(out.status == 204, "{out}");
    refused(bob.on(&api_b).get("/api/v1/users/me").await?, 401, "unauthorized")?;

    // The first admin: register, then one SQL statement in the app's database.
    let root = register_and_login(&api, "root@example.com", PASSWORD, "Root").await?;
    let sql = json!({"sql": "UPDATE users SET role = 'admin' WHERE email = 'root@example.com'", "database": "meetings"});
    cluster.http.post("/api/v1/query", &sql).await?.ensure_status(200)?;
    let admin = root.http.get("/api/v1/users/me").await?.ensure_status(200)?;
    ensure!(admin.json["role"] == "admin", "{admin}");
    root.http.get(&format!("/api/v1/meetings/{id}")).await?.ensure_status(200)?;

    // Rate limits are counted in Tessera, per client address: an instance with a
    // budget of 5 a minute answers 429 with Retry-After within six requests.
    let c = MeetingsApp::start(cluster, "meetings", "c", &[("MEETINGS_RATE_LIMIT_PER_MIN", "5")]).await?;
    let limited = root.on(&c.http());
    let mut throttled = None;
    for _ in 0..6 {
        let r = limited.get("/api/v1/users/me").await?;
        if r.status == 429 {
            throttled = Some(r);
            break;
        }
        r.ensure_status(200)?;
    }
    let throttled = throttled.context("no 429 within six requests")?;
    ensure!(throttled.header("retry-after").and_then(|s| s.parse::<u64>().ok()).is_some_and(|s| (1..=60).contains(&s)), "{throttled}");
    refused(throttled, 429, "rate_limited")?;
    c.http().get("/health").await?.ensure_status(200)?;
    root.http.get("/api/v1/users/me").await?.ensure_status(200)?;
    Ok(())
}
