//! Scenario: the meetings frontend in a real browser (Debian's headless
//! Chromium through chromedriver, driven over WebDriver):
//! sign in, create a meeting, start it, open its live view, see a sentence
//! streamed by another connection appear in the transcript with its speaker,
//! stop it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::meetings::{AppUser, MeetingsApp, connect, next_of, register_and_login, speak, stream};
use tessera_tests::webdriver::{Browser, Driver};
use tessera_tests::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_browser() {
    let cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("meetings_browser scenario failed: {e:?}");
    }
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    let app = MeetingsApp::start(cluster, "meetings", "a", &[]).await?;
    let ada = register_and_login(&app.http(), "ada@example.com", "correct horse battery", "Ada").await?;
    let driver = Driver::start()?;
    let profile = tempfile::tempdir()?;
    let page = driver.browser(profile.path()).await?;
    let outcome = drive(&page, &app, &ada, cluster).await;
    let _ = page.close().await;
    outcome
}

async fn drive(page: &Browser, app: &MeetingsApp, ada: &AppUser, cluster: &Cluster) -> Result<()> {
    page.goto(&format!("{}/", app.web_url)).await?;
    // A wrong password shows the API's message.
    page.fill("#email", "ada@example.com").await?;
    page.fill("#password", "wrong password").await?;
    page.click("#login").await?;
    page.text_when("#error", "the sign-in error is shown", |t| t.contains("wrong email or password")).await?;
    page.fill("#password", "correct horse battery").await?;
    page.click("#login").await?;
    page.text_when("#who", "the page names the signed-in user", |t| t == "Ada").await?;

    // Create a meeting and start it.
    page.fill("#title", "Browser stand-up").await?;
    page.click("#create").await?;
    page.text_when("#meetings tr td", "the new meeting is listed", |t| t == "Browser stand-up").await?;
    page.click("#meetings tr .start").await?;
    page.text_when("#meetings tr td:nth-child(2)", "the meeting is active", |t| t == "active").await?;
    let list = ada.http.get("/api/v1/meetings?status=active").await?.ensure_status(200)?;
    let meeting = list.json["meetings"][0]["id"].as_str().context("the active meeting")?.to_string();

    // Its live view shows what is said: a participant connects, the page joins
    // (the participant sees it), then the participant speaks.
    let mut socket = connect(app, ada, &meeting).await?;
    let mut seen = Vec::new();
    next_of(&mut socket, "participant_joined", &mut seen, Duration::from_secs(10)).await?;
    page.click("#meetings tr .open").await?;
    page.text_when("#live-status", "the live view opens", |t| t == "active").await?;
    next_of(&mut socket, "participant_joined", &mut seen, Duration::from_secs(10)).await?;
    stream(&mut socket, &speak("the meeting will start at ten o'clock", cluster.root())?).await?;
    let segment = next_of(&mut socket, "transcript_segment", &mut seen, Duration::from_secs(30)).await?;
    let said = segment["segment"]["text"].as_str().context("segment text")?.to_string();
    ensure!(!said.is_empty(), "{segment}");
    let heard = page.text_when("#transcript .segment", "the transcript shows the segment", |t| t.starts_with("Ada: ")).await?;
    eprintln!("[browser] transcript line: {heard:?}");
    ensure!(heard == format!("Ada: {said}"), "the page shows {heard:?}, the server pushed {said:?}");
    page.text_when("#speaker", "the speaker is shown", |t| t == "Ada").await?;

    // Stop it.
    page.click("#meetings tr .stop").await?;
    page.text_when("#meetings tr td:nth-child(2)", "the meeting is completed", |t| t == "completed").await?;
    let m = ada.http.get(&format!("/api/v1/meetings/{meeting}")).await?.ensure_status(200)?;
    ensure!(m.json["status"] == "completed", "{m}");
    Ok(())
}
