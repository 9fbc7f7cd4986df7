//! A headless Chromium driven over the W3C WebDriver protocol (Debian's
//! `chromium` + `chromium-driver`), for the browser scenarios. WebDriver is a
//! small JSON-over-HTTP protocol; these few calls are all the scenarios use.
//! (fantoccini would do, but its TLS stack brings aws-lc, whose build
//! dependencies' features would force a second build of RocksDB.)

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::{pick_port, wait_for};

/// `chromedriver` on a free loopback port; killed when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    pub fn start() -> Result<Driver> {
        let port = pick_port()?;
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("chromedriver is needed for the browser scenarios (apt-get install chromium chromium-driver)")?;
        Ok(Driver { child, url: format!("http://127.0.0.1:{port}") })
    }

    /// A new headless browser session with its own profile directory.
    pub async fn browser(&self, profile: &std::path::Path) -> Result<Browser> {
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"args": args, "binary": "/usr/bin/chromium"}}}});
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
        let url = self.url.clone();
        let session = wait_for(Duration::from_secs(30), "chromedriver starts a session", async || {
            let Ok(resp) = http.post(format!("{url}/session")).json(&caps).send().await else { return Ok(None) };
            let answer: Value = resp.json().await.unwrap_or(Value::Null);
            Ok(answer["value"]["sessionId"].as_str().map(str::to_string))
        })
        .await?;
        Ok(Browser { http, base: format!("{}/session/{session}", self.url) })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
#[derive(Clone)]
pub struct Browser {
    http: reqwest::Client,
    base: String,
}

/// An element of the page (its WebDriver reference).
pub struct Element(String);

/// The key WebDriver names an element reference with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("WebDriver {path}: {status} {}", answer["value"]["message"].as_str().unwrap_or(""));
        }
        Ok(answer["value"].clone())
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await.map(|_| ())
    }

    /// The first element matching `css`.
    pub async fn find(&self, css: &str) -> Result<Element> {
        let v = self.call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css}))).await?;
        v[ELEMENT].as_str().map(|id| Element(id.to_string())).with_context(|| format!("no element {css}: {v}"))
    }

    pub async fn click(&self, css: &str) -> Result<()> {
        let e = self.find(css).await?;
        self.call(reqwest::Method::POST, &format!("/element/{}/click", e.0), Some(json!({}))).await.map(|_| ())
    }

    /// Types `text` into the element `css`, after clearing it.
    pub async fn fill(&self, css: &str, text: &str) -> Result<()> {
        let e = self.find(css).await?;
        self.call(reqwest::Method::POST, &format!("/element/{}/clear", e.0), Some(json!({}))).await?;
        self.call(reqwest::Method::POST, &format!("/element/{}/value", e.0), Some(json!({"text": text}))).await.map(|_| ())
    }

    /// The visible text of the element `css`.
    pub async fn text(&self, css: &str) -> Result<String> {
        let e = self.find(css).await?;
        Ok(self.call(reqwest::Method::GET, &format!("/element/{}/text", e.0), None).await?.as_str().unwrap_or_default().to_string())
    }

    /// The text of `css` once `ok` accepts it (within 30 s).
    pub async fn text_when(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> Result<String> {
        wait_for(Duration::from_secs(30), what, async || Ok(self.text(css).await.ok().filter(|t| ok(t)))).await
    }

    /// Whether an element matches `css` and is displayed.
    pub async fn visible(&self, css: &str) -> Result<bool> {
        let Ok(e) = self.find(css).await else { return Ok(false) };
        Ok(self.call(reqwest::Method::GET, &format!("/element/{}/displayed", e.0), None).await?.as_bool().unwrap_or(false))
    }

    /// Resizes the browser's window (what a screenshot covers).
    pub async fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.call(reqwest::Method::POST, "/window/rect", Some(json!({"width": width, "height": height}))).await.map(|_| ())
    }

    /// Accepts the dialog the page opened (`confirm()`), once it is open (within 10 s).
    pub async fn accept_dialog(&self) -> Result<()> {
        wait_for(Duration::from_secs(10), "the page's dialog", async || {
            Ok(self.call(reqwest::Method::POST, "/alert/accept", Some(json!({}))).await.ok().map(|_| ()))
        })
        .await
    }

    /// A PNG of the page, written to `path` (a test artifact).
    pub async fn screenshot(&self, path: &std::path::Path) -> Result<()> {
        use base64::Engine;
        let png = self.call(reqwest::Method::GET, "/screenshot", None).await?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().context("a screenshot")?)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, bytes)?;
        Ok(())
    }

    /// Ends the session (the browser closes).
    pub async fn close(&self) -> Result<()> {
        self.call(reqwest::Method::DELETE, "", None).await.map(|_| ())
    }
}
