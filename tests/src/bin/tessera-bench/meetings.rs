//! `tessera-bench meetings [--rows N] [--seconds S]`: the meetings application
//! (spec 03 part C) on a running cluster. Starts two `tessera-meetings`
//! instances (from the bench's own directory) on a fresh database, then prints:
//!
//! - requests/s and p50/p99 of `GET /api/v1/meetings` from 16 clients spread
//!   over both instances (200 meetings, pages of 20);
//! - search latency (`GET /api/v1/search`, two-term queries, 50 runs) with
//!   10,000 and then N (default 100,000) transcript segments indexed. The
//!   segments are written straight into the application's tables through the
//!   router, 100 per SQL request, with the application's own index statements
//!   (`tessera_meetings::search::index_sql`), as the app would write them;
//! - the recognizer's real-time factor on espeak-ng speech (when espeak-ng and
//!   sox are installed).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use reqwest::Method;
use serde_json::{Value, json};
use tessera_meetings::search::{Doc, index_sql};

use super::{Client, load};

const JWT_SECRET: &str = "bench-secret-of-the-meetings-app-0123456789-abcdefgh";
/// Segments per SQL request while loading.
const BATCH: u64 = 100;
/// Words of the generated transcripts.
const VOCABULARY: u64 = 2_000;

struct App {
    child: Child,
    url: String,
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

async fn start_app(router: &str, user: &str, password: &str, database: &str) -> Result<App> {
    let bin = std::env::current_exe()?.with_file_name("tessera-meetings");
    let (api, web) = (free_port()?, free_port()?);
    let url = format!("{}/{database}", router.replacen("http://", &format!("tessera://{}:{}@", percent(user), percent(password)), 1));
    let child = Command::new(&bin)
        .env("DATABASE_URL", url)
        .env("JWT_SECRET", JWT_SECRET)
        .env("MEETINGS_API_ADDR", format!("127.0.0.1:{api}"))
        .env("MEETINGS_WEB_ADDR", format!("127.0.0.1:{web}"))
        .env("MEETINGS_RATE_LIMIT_PER_MIN", "0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} (build it with deploy/build.sh)", bin.display()))?;
    let app = App { child, url: format!("http://127.0.0.1:{api}") };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !http.get(format!("{}/health", app.url)).send().await.is_ok_and(|r| r.status().is_success()) {
        if Instant::now() > deadline {
            bail!("tessera-meetings at {} did not become healthy", app.url);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(app)
}

/// A word of the generated text: a skewed draw so a few words are common.
fn word(seed: u64) -> String {
    let r = super::graph::mix(seed) % (VOCABULARY * VOCABULARY);
    format!("w{}", (r as f64).sqrt() as u64)
}

fn stats(mut ms: Vec<f64>) -> (f64, f64, f64) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| ms.get(((ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    (ms.iter().sum::<f64>() / ms.len().max(1) as f64, at(0.5), at(0.99))
}

pub async fn run(c: Client, user: &str, password: &str, seconds: u64, rows: u64) -> Result<()> {
    let database = format!("bench_meetings_{}", std::process::id());
    let a = start_app(&c.url, user, password, &database).await?;
    let b = start_app(&c.url, user, password, &database).await?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
    let creds = json!({"email": "bench@example.com", "password": "bench password 1", "display_name": "Bench"});
    http.post(format!("{}/api/v1/auth/register", a.url)).json(&creds).send().await?.error_for_status()?;
    let login: Value = http.post(format!("{}/api/v1/auth/login", a.url)).json(&creds).send().await?.error_for_status()?.json().await?;
    let token = login["access_token"].as_str().context("access token")?.to_string();
    let owner = login["user"]["id"].as_str().context("user id")?.to_string();

    // 200 meetings, then the list through both instances.
    let mut meeting_ids = Vec::new();
    for i in 0..200 {
        let base = if i % 2 == 0 { &a.url } else { &b.url };
        let m: Value = http
            .post(format!("{base}/api/v1/meetings"))
            .bearer_auth(&token)
            .json(&json!({"title": format!("Meeting {i}"), "description": "bench"}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        meeting_ids.push(m["id"].as_str().context("meeting id")?.to_string());
    }
    let urls = [a.url.clone(), b.url.clone()];
    let (list_http, list_token) = (http.clone(), token.clone());
    let (rate, p50, p99) = load(16, seconds, move |client, _| {
        let (http, token, base) = (list_http.clone(), list_token.clone(), urls[client % 2].clone());
        async move {
            http.get(format!("{base}/api/v1/meetings?limit=20")).bearer_auth(&token).send().await?.error_for_status()?;
            Ok(())
        }
    })
    .await?;
    println!("| workload | requests/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    println!("| GET /api/v1/meetings (page of 20 of 200), 16 clients over 2 instances | {rate:.0} | {p50:.2} | {p99:.2} |");

    // Search at 10k and at `rows` segments.
    println!();
    println!("| indexed segments | load s (segments/s) | search runs | avg ms | p50 ms | p99 ms | avg hits |");
    println!("|---|---|---|---|---|---|---|");
    let mut loaded = 0;
    for target in [10_000u64.min(rows), rows] {
        if target <= loaded {
            continue;
        }
        let started = Instant::now();
        let from = loaded;
        while loaded < target {
            let end = (loaded + BATCH).min(target);
            let mut sql = Vec::new();
            let mut params: Vec<Value> = Vec::new();
            for i in loaded..end {
                let text: Vec<String> = (0..10).map(|k| word(i * 16 + k)).collect();
                let text = text.join(" ");
                let id = format!("bench-seg-{i}");
                let meeting = &meeting_ids[(i % meeting_ids.len() as u64) as usize];
                let n = params.len();
                sql.push(format!(
                    "INSERT INTO segments (id, meeting_id, user_id, speaker, text, start_ms, end_ms, confidence, created_at) VALUES (${}, ${}, ${}, 'Bench', ${}, 0, 3000, 0.9, ${})",
                    n + 1,
                    n + 2,
                    n + 3,
                    n + 4,
                    n + 5
                ));
                params.extend([json!(id), json!(meeting), json!(owner), json!(text), json!(1_790_000_000_000i64 + i as i64)]);
                let doc = Doc {
                    id: &id,
                    doc_type: "transcript",
                    owner_id: &owner,
                    meeting_id: meeting,
                    title: "Meeting",
                    body: &text,
                    at_ms: 1_790_000_000_000 + i as i64,
                };
                let (index, more) = index_sql(&doc, params.len());
                sql.push(index);
                params.extend(more);
            }
            c.send(Method::POST, "/api/v1/query", Some(&json!({"sql": sql.join(";\n"), "params": params, "database": database})), "quorum")
                .await?;
            loaded = end;
        }
        let load_secs = started.elapsed().as_secs_f64();
        let mut ms = Vec::new();
        let mut hits = 0.0;
        for q in 0..50u64 {
            let query = format!("{} {}", word(q * 7919), word(q * 104_729 + 1));
            let base = if q % 2 == 0 { &a.url } else { &b.url };
            let t = Instant::now();
            let r: Value = http
                .get(format!("{base}/api/v1/search"))
                .query(&[("q", query.as_str()), ("type", "transcript")])
                .bearer_auth(&token)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            hits += r["total"].as_f64().unwrap_or(0.0);
        }
        let (avg, p50, p99) = stats(ms);
        let rate = (loaded - from) as f64 / load_secs;
        println!("| {loaded} | {load_secs:.1} ({rate:.0}/s) | 50 | {avg:.1} | {p50:.1} | {p99:.1} | {:.0} |", hits / 50.0);
    }

    // The recognizer's real-time factor.
    println!();
    match real_time_factor() {
        Ok((audio, decode)) => {
            println!("recognizer: {audio:.1} s of espeak-ng speech decoded in {decode:.2} s: real-time factor {:.3}", decode / audio)
        }
        Err(e) => println!("recognizer: not measured ({e:#})"),
    }
    Ok(())
}

fn real_time_factor() -> Result<(f64, f64)> {
    use tessera_meetings::speech::{Recognizer, SpeechModel};
    let dir = tempfile::tempdir()?;
    let sentences = [
        "the meeting will start at ten o'clock",
        "please send the report to the team",
        "we need more time to finish the project",
        "thank you for coming today",
    ];
    let mut samples: Vec<i16> = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let wav = dir.path().join(format!("{i}.wav"));
        let raw = dir.path().join(format!("{i}.raw"));
        let ok = Command::new("espeak-ng")
            .args(["-v", "en-us+edward", "-s", "140", "-w"])
            .arg(&wav)
            .arg(s)
            .status()
            .context("espeak-ng")?
            .success()
            && Command::new("sox")
                .arg("-R")
                .arg(&wav)
                .args(["-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw"])
                .arg(&raw)
                .status()
                .context("sox")?
                .success();
        if !ok {
            bail!("espeak-ng or sox failed");
        }
        samples.extend(std::fs::read(&raw)?.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])));
        samples.extend(std::iter::repeat_n(0, 16_000));
    }
    let mut r = Recognizer::new(&SpeechModel::from_dir(std::path::Path::new(SpeechModel::DEBIAN_EN_US_DIR))?)?;
    let t = Instant::now();
    for chunk in samples.chunks(1_600) {
        r.feed(chunk)?;
    }
    r.finish()?;
    Ok((samples.len() as f64 / 16_000.0, t.elapsed().as_secs_f64()))
}
