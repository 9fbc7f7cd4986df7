//! The meetings application (`tessera-meetings`) beside a test cluster: an
//! instance started against the cluster's router, signed in to Tessera as
//! the admin, with its own database; and users signed in to the app.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::{ADMIN_PASSWORD, ADMIN_USER, Cluster, Http, binary, pick_port, signal, spawn, wait_until};

/// A JWT secret of the length the application requires.
pub const JWT_SECRET: &str = "test-secret-of-the-meetings-app-0123456789-abcdefgh";

/// One running `tessera-meetings`.
pub struct MeetingsApp {
    /// The API (`MEETINGS_API_ADDR`).
    pub url: String,
    /// The web frontend (`MEETINGS_WEB_ADDR`).
    pub web_url: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl MeetingsApp {
    /// Starts an instance on the cluster's router 0 with database `database`,
    /// plus `env` (which wins over the defaults here, among them
    /// `MEETINGS_WEBHOOK_ALLOW_PRIVATE=true`), and waits until `/health` answers 200.
    pub async fn start(cluster: &Cluster, database: &str, label: &str, env: &[(&str, &str)]) -> Result<MeetingsApp> {
        let bin = binary("tessera-meetings")?;
        let router = cluster.router_url(0);
        let (api, web) = (pick_port()?, pick_port()?);
        let mut vars: Vec<(String, String)> = vec![
            (
                "DATABASE_URL".into(),
                format!(
                    "{}/{database}",
                    router.replacen("http://", &format!("tessera://{ADMIN_USER}:{}@", crate::url_encode(ADMIN_PASSWORD)), 1)
                ),
            ),
            ("JWT_SECRET".into(), JWT_SECRET.into()),
            ("MEETINGS_API_ADDR".into(), format!("127.0.0.1:{api}")),
            ("MEETINGS_WEB_ADDR".into(), format!("127.0.0.1:{web}")),
            // The scenarios' webhook receivers listen on 127.0.0.1, which the app
            // refuses by default (SSRF); a scenario may pass `false` in `env`.
            ("MEETINGS_WEBHOOK_ALLOW_PRIVATE".into(), "true".into()),
            ("RUST_LOG".into(), "info".into()),
        ];
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let log = cluster.root().join(format!("meetings-{label}.log"));
        let child = spawn(&bin, &vars, &log, cluster.root(), &format!("meetings {label}"))?;
        let app =
            MeetingsApp { url: format!("http://127.0.0.1:{api}"), web_url: format!("http://127.0.0.1:{web}"), log, child: Some(child) };
        let http = app.http();
        wait_until(Duration::from_secs(120), "the meetings app answers /health", || {
            let http = http.clone();
            async move { http.get("/health").await.is_ok_and(|r| r.status == 200) }
        })
        .await
        .with_context(|| format!("meetings app log:\n{}", app.log_text()))?;
        Ok(app)
    }

    /// An anonymous client of the API.
    pub fn http(&self) -> Http {
        Http::new(self.url.clone())
    }

    /// The instance's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the instance at once (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(&c, libc::SIGKILL);
            let _ = c.wait();
        }
    }
}

impl Drop for MeetingsApp {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("[harness] meetings app log ({}):\n{}", self.log.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        self.kill();
    }
}

/// A user registered and signed in to the app.
pub struct AppUser {
    pub id: String,
    pub email: String,
    pub password: String,
    /// The API client carrying the user's access token.
    pub http: Http,
    pub access_token: String,
    pub refresh_token: String,
}

impl AppUser {
    /// The user's client against another instance (same access token).
    pub fn on(&self, instance: &Http) -> Http {
        instance.with_token(&self.access_token)
    }
}

/// Registers `email` (201) and signs in (200).
pub async fn register_and_login(app: &Http, email: &str, password: &str, name: &str) -> Result<AppUser> {
    let r = app
        .post("/api/v1/auth/register", &json!({"email": email, "password": password, "display_name": name}))
        .await?
        .ensure_status(201)?;
    let id = r.json["id"].as_str().context("register answers an id")?.to_string();
    let login = app.post("/api/v1/auth/login", &json!({"email": email, "password": password})).await?.ensure_status(200)?;
    let access = login.json["access_token"].as_str().context("login answers an access token")?.to_string();
    let refresh = login.json["refresh_token"].as_str().context("login answers a refresh token")?.to_string();
    ensure!(login.json["user"]["id"] == Value::String(id.clone()), "login names another user: {login}");
    Ok(AppUser {
        id,
        email: email.into(),
        password: password.into(),
        http: app.with_token(&access),
        access_token: access,
        refresh_token: refresh,
    })
}

/// `text` spoken by espeak-ng (American English, voice variant `edward`:
/// PocketSphinx's en-us model recognizes it far better than the default
/// voice; 140 words a minute) as 16 kHz mono signed 16-bit samples (sox
/// converts, without random dither so every run hears the same audio).
/// Fails, never skips, when either tool is missing.
pub fn speak(text: &str, dir: &std::path::Path) -> Result<Vec<i16>> {
    let wav = dir.join(format!("speech-{}.wav", crate::pick_port()?));
    let raw = wav.with_extension("raw");
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us+edward", "-s", "140", "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .context("espeak-ng is needed to make test speech (apt-get install espeak-ng)")?;
    ensure!(status.success(), "espeak-ng failed on {text:?}");
    let status = std::process::Command::new("sox")
        .arg("-R")
        .arg(&wav)
        .args(["-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw"])
        .arg(&raw)
        .status()
        .context("sox is needed to convert test speech (apt-get install sox)")?;
    ensure!(status.success(), "sox failed on {}", wav.display());
    let bytes = std::fs::read(&raw)?;
    Ok(bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect())
}

/// The word error rate of `hypothesis` against `reference`: word-level edit
/// distance over the reference's word count (lower-cased, punctuation dropped).
pub fn word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.chars().filter(|c| c.is_alphanumeric() || *c == '\'').collect::<String>().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut prev = row[0];
        row[0] = i;
        for j in 1..=h.len() {
            let cur = row[j];
            row[j] = if r[i - 1] == h[j - 1] { prev } else { 1 + prev.min(row[j]).min(row[j - 1]) };
            prev = cur;
        }
    }
    row[h.len()] as f64 / r.len().max(1) as f64
}

/// A meeting's WebSocket.
pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// `user`'s connection to `meeting`'s WebSocket on `app`.
pub async fn connect(app: &MeetingsApp, user: &AppUser, meeting: &str) -> Result<Socket> {
    let url = format!("{}/ws/meeting/{meeting}?access_token={}", app.url.replacen("http://", "ws://", 1), user.access_token);
    let (socket, _) = tokio_tungstenite::connect_async(url).await.context("WebSocket upgrade")?;
    Ok(socket)
}

/// The next JSON message of `kind` on `socket` (others are kept in `seen`).
pub async fn next_of(socket: &mut Socket, kind: &str, seen: &mut Vec<Value>, within: Duration) -> Result<Value> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, socket.next())
            .await
            .with_context(|| format!("no {kind} message within {within:?}; saw {seen:#?}"))?;
        match msg {
            Some(Ok(Message::Text(text))) => {
                let v: Value = serde_json::from_str(text.as_str())?;
                if v["type"] == kind {
                    return Ok(v);
                }
                seen.push(v);
            }
            Some(Ok(_)) => {}
            other => bail!("socket ended waiting for {kind}: {other:?}"),
        }
    }
}

/// Streams `samples` in 100 ms frames at real-time pace, then one second of silence.
pub async fn stream(socket: &mut Socket, samples: &[i16]) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let silence = vec![0i16; 16_000];
    for chunk in samples.chunks(1_600).chain(silence.chunks(1_600)) {
        tick.tick().await;
        let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
        socket.send(Message::Binary(bytes.into())).await?;
    }
    Ok(())
}
