//! Black-box test harness for Tessera.
//!
//! [`Cluster::start`] runs the real `tessera-node` (x3) and `tessera-router`
//! binaries as child processes on loopback ports inside a temp dir, waits for
//! `GET /readyz`, and logs in as the admin. Tests then talk HTTP through
//! [`Http`] and inject faults with [`Cluster::kill_node`] / [`Cluster::stop_node`].
//!
//! The binaries are not built by `cargo test -p tessera-tests`; build them first
//! (`cargo build -p tessera-node -p tessera-router`). They are looked up in
//! `$TESSERA_BIN_DIR`, else in `<target>/debug/` next to the test executable.
//!
//! Environment knobs: `TESSERA_BIN_DIR`, `TESSERA_TEST_READY_SECS` (readiness
//! deadline, default 90), `TESSERA_TEST_LOG_LEVEL` (default `info`),
//! `TESSERA_TEST_KEEP=1` (keep the temp dir even when the test passes).
//!
//! Rules the harness follows: no fixed sleeps to wait for a condition (poll with
//! a deadline via [`wait_until`] / [`wait_for`]); on drop every child is killed;
//! if the test panicked the temp dir is kept and the log tails are printed.

pub mod certs;
pub mod chaos;
pub mod fuzz;
pub mod ldap;
pub mod meetings;
pub mod oidc;
pub mod pods;
pub mod webdriver;
pub mod ws;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use reqwest::Method;

pub use reqwest::header::HeaderMap;
pub use serde_json::{Value, json};

/// Admin user provisioned through `SERVICE_ADMIN_USERNAME`.
pub const ADMIN_USER: &str = "admin";
/// Admin password provisioned through `SERVICE_ADMIN_PASSWORD`.
pub const ADMIN_PASSWORD: &str = "Adm1n-Secret-Pass!";
/// Ids of the three data nodes.
pub const NODE_IDS: [u64; 3] = [1, 2, 3];
/// Version the router reports on `/health`.
pub const EXPECTED_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Header naming the Raft group a request was routed to.
pub const HDR_GROUP: &str = "x-tessera-group";
/// Header naming the node that served a request (the leader, for writes).
pub const HDR_NODE: &str = "x-tessera-node";

/// Poll interval used by [`wait_until`] / [`wait_for`].
const POLL: Duration = Duration::from_millis(100);
/// How long a SIGTERM'd process may take to exit before it counts as a failure.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// Polling helpers
// ---------------------------------------------------------------------------

/// Polls `cond` until it returns `true`, failing after `timeout`.
pub async fn wait_until<F>(timeout: Duration, what: &str, mut cond: F) -> Result<()>
where
    F: AsyncFnMut() -> bool,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `text` without terminal colour sequences (node logs are coloured).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Polls `f` until it yields `Ok(Some(v))` and returns `v`.
///
/// `Ok(None)` and `Err(_)` both mean "not yet"; the last error is included in
/// the timeout message, so returning `Err` with a reason makes failures readable.
pub async fn wait_for<T, F>(timeout: Duration, what: &str, mut f: F) -> Result<T>
where
    F: AsyncFnMut() -> Result<Option<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut last: Option<anyhow::Error> = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(match last {
                Some(e) => e.context(format!("timed out after {timeout:?} waiting for: {what}")),
                None => anyhow!("timed out after {timeout:?} waiting for: {what}"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A node or group id given as a JSON number or a numeric string.
pub fn as_id(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Percent-encodes `s` for use as one URL path segment or query value.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------

/// A response: status, headers and body (parsed as JSON when possible).
#[derive(Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    /// Parsed body; `Value::Null` when the body is empty or not JSON.
    pub json: Value,
    /// Raw body text.
    pub text: String,
    /// Raw body bytes.
    pub body: Vec<u8>,
}

impl Resp {
    /// A header value as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `X-Tessera-Node`: the node that served the request.
    pub fn served_by(&self) -> Option<u64> {
        self.header(HDR_NODE).and_then(|v| v.trim().parse().ok())
    }

    /// `X-Tessera-Group`: the Raft group the request was routed to.
    pub fn group(&self) -> Option<String> {
        self.header(HDR_GROUP).map(|v| v.trim().to_string())
    }

    /// The `error` string of a JSON error body.
    pub fn error(&self) -> Option<&str> {
        self.json.get("error").and_then(Value::as_str)
    }

    /// Fails unless the status is `status`.
    pub fn ensure_status(self, status: u16) -> Result<Self> {
        ensure!(self.status == status, "expected HTTP {status}, got {self}");
        Ok(self)
    }

    /// Fails unless this is a 4xx with a JSON body `{error: string, code: string}`.
    pub fn ensure_client_error(self) -> Result<Self> {
        ensure!((400..500).contains(&self.status), "expected a 4xx, got {self}");
        self.ensure_error_body()
    }

    /// Fails unless the body is JSON `{error: non-empty string, code: string}`.
    pub fn ensure_error_body(self) -> Result<Self> {
        ensure!(self.error().is_some_and(|e| !e.is_empty()), "expected a JSON body with a non-empty `error` string, got {self}");
        ensure!(self.json.get("code").is_some_and(Value::is_string), "expected a JSON error body with a `code` string, got {self}");
        Ok(self)
    }
}

impl fmt::Display for Resp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 400;
        let body = if self.text.len() > MAX {
            let mut end = MAX;
            while !self.text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}… ({} bytes)", &self.text[..end], self.text.len())
        } else {
            self.text.clone()
        };
        write!(f, "HTTP {} {body}", self.status)?;
        if let Some(n) = self.header(HDR_NODE) {
            write!(f, " [node {n}")?;
            if let Some(g) = self.header(HDR_GROUP) {
                write!(f, ", group {g}")?;
            }
            write!(f, "]")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Resp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// HTTP client bound to one router, with an optional bearer token and extra
/// headers. Builder methods return modified clones; cloning is cheap.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    headers: Vec<(String, String)>,
    timeout: Duration,
    /// Set by [`Http::renewing_session`]: the session is signed in again when
    /// the router no longer knows it, shared by every clone.
    renew: Option<std::sync::Arc<Renewal>>,
}

/// Credentials and the current token of a session that renews itself.
#[derive(Debug)]
struct Renewal {
    username: String,
    password: String,
    token: std::sync::Mutex<String>,
}

impl Http {
    /// A client for the router at `base` (e.g. `http://127.0.0.1:8080`), no token.
    pub fn new(base: impl Into<String>) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .expect("build reqwest client");
        Self { client, base: base.into(), token: None, headers: Vec::new(), timeout: Duration::from_secs(15), renew: None }
    }

    /// A client for the router at an `https://` `base`, trusting the CA
    /// certificate `ca_pem` (PEM).
    pub fn with_root_ca(base: impl Into<String>, ca_pem: &[u8]) -> Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(5))
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).context("CA certificate PEM")?)
            .build()
            .context("build reqwest client")?;
        Ok(Self { client, ..Self::new(base) })
    }

    /// Base URL of the router.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The bearer token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Same client with `Authorization: Bearer <token>`.
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: Some(token.to_string()), renew: None, ..self.clone() }
    }

    /// Same client signed in as `username` with `token`, signing in again
    /// whenever the router answers 401 (every clone shares the new token): for
    /// chaos runs where a whole-cluster power cut with `sync_on_commit = false`
    /// may lose the session itself, an acknowledged write that mode may lose.
    pub fn renewing_session(&self, username: &str, password: &str, token: &str) -> Self {
        let renewal = Renewal { username: username.into(), password: password.into(), token: std::sync::Mutex::new(token.into()) };
        Self { token: Some(token.to_string()), renew: Some(std::sync::Arc::new(renewal)), ..self.clone() }
    }

    /// Same client without a token and without extra headers.
    pub fn anonymous(&self) -> Self {
        Self { token: None, headers: Vec::new(), renew: None, ..self.clone() }
    }

    /// Same client with an extra header (replacing one of the same name).
    pub fn header(&self, name: &str, value: &str) -> Self {
        let mut s = self.clone();
        s.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        s.headers.push((name.to_string(), value.to_string()));
        s
    }

    /// Same client with `X-Consistency: one|quorum|all`.
    pub fn consistency(&self, level: &str) -> Self {
        self.header("X-Consistency", level)
    }

    /// Same client reading from `node`'s local state (`X-Consistency: one` +
    /// `X-Tessera-Replica: <node>`).
    pub fn replica(&self, node: u64) -> Self {
        self.consistency("one").header("X-Tessera-Replica", &node.to_string())
    }

    /// Same client with another per-request timeout (default 15 s).
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { timeout, ..self.clone() }
    }

    /// Sends a request; `body` is sent as-is with `content_type` if given.
    /// Transport errors (refused, timeout) are `Err`; any HTTP status is `Ok`.
    pub async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>, content_type: Option<&str>) -> Result<Resp> {
        let Some(renew) = &self.renew else { return self.send_once(method, path, body, content_type, self.token.as_deref()).await };
        let token = renew.token.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let resp = self.send_once(method.clone(), path, body.clone(), content_type, Some(&token)).await?;
        if resp.status != 401 {
            return Ok(resp);
        }
        let credentials = serde_json::to_vec(&json!({"username": renew.username, "password": renew.password}))?;
        let login = self.send_once(Method::POST, "/api/v1/auth/login", Some(credentials), Some("application/json"), None).await?;
        let Some(fresh) = login.json["token"].as_str() else { return Ok(resp) };
        *renew.token.lock().unwrap_or_else(|e| e.into_inner()) = fresh.to_string();
        self.send_once(method, path, body, content_type, Some(fresh)).await
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
        token: Option<&str>,
    ) -> Result<Resp> {
        let url = format!("{}{}", self.base, path);
        let mut req = self.client.request(method.clone(), &url).timeout(self.timeout);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (n, v) in &self.headers {
            req = req.header(n.as_str(), v.as_str());
        }
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.with_context(|| format!("{method} {url}"))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.with_context(|| format!("{method} {url}: reading body"))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Resp { status, headers, json, text, body: bytes.to_vec() })
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Result<Resp> {
        self.send(Method::PUT, path, Some(serde_json::to_vec(body)?), Some("application/json")).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Resp> {
        self.send(Method::GET, path, None, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Resp> {
        let bytes = serde_json::to_vec(body)?;
        self.send(Method::POST, path, Some(bytes), Some("application/json")).await
    }

    /// `POST path` with raw bytes and an optional content type.
    pub async fn post_raw(&self, path: &str, body: impl Into<Vec<u8>>, content_type: Option<&str>) -> Result<Resp> {
        self.send(Method::POST, path, Some(body.into()), content_type).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Result<Resp> {
        self.send(Method::DELETE, path, None, None).await
    }

    // --- auth -------------------------------------------------------------

    /// `POST /api/v1/auth/login`.
    pub async fn login(&self, username: &str, password: &str) -> Result<Resp> {
        self.post("/api/v1/auth/login", &json!({"username": username, "password": password})).await
    }

    /// Logs in and returns a client carrying the new token.
    pub async fn login_as(&self, username: &str, password: &str) -> Result<Http> {
        let r = self.login(username, password).await?.ensure_status(200)?;
        let token = r.json["token"].as_str().with_context(|| format!("no token in {r}"))?;
        Ok(self.with_token(token))
    }

    /// `POST /api/v1/auth/logout` with this client's token.
    pub async fn logout(&self) -> Result<Resp> {
        self.post_raw("/api/v1/auth/logout", Vec::new(), None).await
    }

    // --- key-value --------------------------------------------------------

    /// `POST /api/v1/kv/keys {key, value, ttl?}`.
    pub async fn kv_put(&self, key: &str, value: Value, ttl: Option<u64>) -> Result<Resp> {
        let mut body = json!({"key": key, "value": value});
        if let Some(ttl) = ttl {
            body["ttl"] = json!(ttl);
        }
        self.post("/api/v1/kv/keys", &body).await
    }

    /// `GET /api/v1/kv/keys/{key}`.
    pub async fn kv_get(&self, key: &str) -> Result<Resp> {
        self.get(&format!("/api/v1/kv/keys/{}", url_encode(key))).await
    }

    /// `DELETE /api/v1/kv/keys/{key}`.
    pub async fn kv_delete(&self, key: &str) -> Result<Resp> {
        self.delete(&format!("/api/v1/kv/keys/{}", url_encode(key))).await
    }

    /// `GET /api/v1/kv/keys?prefix=&limit=`.
    pub async fn kv_list(&self, prefix: &str, limit: Option<usize>) -> Result<Resp> {
        let mut path = format!("/api/v1/kv/keys?prefix={}", url_encode(prefix));
        if let Some(l) = limit {
            path.push_str(&format!("&limit={l}"));
        }
        self.get(&path).await
    }

    /// Lists by prefix and returns `(keys in returned order, total)`; requires 200.
    pub async fn kv_list_keys(&self, prefix: &str, limit: Option<usize>) -> Result<(Vec<String>, u64)> {
        let r = self.kv_list(prefix, limit).await?.ensure_status(200)?;
        let entries = r.json["keys"].as_array().with_context(|| format!("no `keys` array in {r}"))?;
        let keys = entries
            .iter()
            .map(|e| e["key"].as_str().map(str::to_string).with_context(|| format!("entry without key: {e}")))
            .collect::<Result<Vec<_>>>()?;
        let total = r.json["total"].as_u64().with_context(|| format!("no numeric `total` in {r}"))?;
        Ok((keys, total))
    }

    /// `DELETE /api/v1/kv/keys?prefix=`.
    pub async fn kv_delete_prefix(&self, prefix: &str) -> Result<Resp> {
        self.delete(&format!("/api/v1/kv/keys?prefix={}", url_encode(prefix))).await
    }

    /// `GET /api/v1/kv/count?prefix=` → `count`; requires 200.
    pub async fn kv_count(&self, prefix: &str) -> Result<u64> {
        let r = self.get(&format!("/api/v1/kv/count?prefix={}", url_encode(prefix))).await?.ensure_status(200)?;
        r.json["count"].as_u64().with_context(|| format!("no numeric `count` in {r}"))
    }
}

// ---------------------------------------------------------------------------
// Ports, binaries, processes
// ---------------------------------------------------------------------------

/// Picks a free loopback port outside the kernel's ephemeral range (so an
/// outgoing connection cannot grab it between a stop and a restart), never
/// handing out the same port twice in one process, nor one another test
/// process claimed in the last half hour ([`claim_port`]): tests run in
/// parallel processes, and a port is free from its pick until its server binds.
pub fn pick_port() -> Result<u16> {
    static USED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let (eph_lo, eph_hi) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999));
    let mut used = USED.lock().unwrap();
    for _ in 0..1000 {
        let port = 10_000 + (random_u64() % 50_000) as u16;
        if (eph_lo..=eph_hi).contains(&port) || used.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && claim_port(port) {
            used.insert(port);
            return Ok(port);
        }
    }
    bail!("could not find a free loopback port")
}

/// Claims `port` for this test process with a file in a directory every test
/// process shares; a claim older than half an hour has lapsed. Without that
/// directory every port counts as claimable.
fn claim_port(port: u16) -> bool {
    let dir = std::env::temp_dir().join("tessera-test-ports");
    if std::fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let claim = dir.join(port.to_string());
    let lapsed = std::fs::metadata(&claim)
        .and_then(|m| m.modified())
        .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > Duration::from_secs(30 * 60)));
    if lapsed {
        let _ = std::fs::remove_file(&claim);
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&claim) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// Directory holding `tessera-node` and `tessera-router`.
/// This crate's directory: the runner's `CARGO_MANIFEST_DIR` (cargo and
/// nextest set it), else the one it was compiled in. One target directory
/// serves several checkouts, and a test binary built in another names that one.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

pub fn bin_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("TESSERA_BIN_DIR") {
        return Ok(PathBuf::from(d));
    }
    let exe = std::env::current_exe().context("current_exe")?;
    let mut dir = exe.parent().context("test executable has no parent dir")?.to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

/// The built binary `name`, refusing one older than its sources.
pub fn binary(name: &str) -> Result<PathBuf> {
    let path = bin_dir()?.join(name);
    ensure!(
        path.is_file(),
        "{} not found; build it first (`cargo build -p tessera-node -p tessera-router`) \
         or set TESSERA_BIN_DIR",
        path.display()
    );
    if std::env::var_os("TESSERA_BIN_DIR").is_none() {
        let built = std::fs::metadata(&path)?.modified()?;
        let newest = newest_dep_info_source(&path).or_else(|| newest_source(name));
        if let Some((source, changed)) = newest.filter(|(_, changed)| *changed > built) {
            bail!(
                "{} is older than {} (changed {:?} later): the harness does not build the binaries; \
                 run `cargo build -p tessera-node -p tessera-router` first",
                path.display(),
                source.display(),
                changed.duration_since(built).unwrap_or_default()
            );
        }
    }
    Ok(path)
}

/// The most recently changed source among those cargo's dep-info file
/// (`<binary>.d`) says the binary was built from, when that file names sources
/// of this checkout (a test-only source change does not make a binary stale).
fn newest_dep_info_source(bin: &Path) -> Option<(PathBuf, std::time::SystemTime)> {
    let root = manifest_dir().as_path().parent()?.canonicalize().ok()?;
    let text = std::fs::read_to_string(bin.with_extension("d")).ok()?;
    let (_, deps) = text.lines().next()?.split_once(": ")?;
    let sources: Vec<PathBuf> = deps
        .replace("\\ ", "\u{0}")
        .split_whitespace()
        .map(|p| PathBuf::from(p.replace('\u{0}', " ")))
        .filter(|p| p.starts_with(&root))
        .collect();
    if sources.is_empty() {
        return None; // built from another checkout: judge by this one's sources
    }
    sources
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).and_then(|m| m.modified()).ok()?, p)))
        .max()
        .map(|(changed, p)| (p, changed))
}

/// The most recently changed Rust or proto source of the crates binary `name`
/// is built from, and when it changed (looked up once per binary and test
/// process). The router's own sources do not make the node stale, nor the
/// node's the router.
fn newest_source(name: &str) -> Option<(PathBuf, std::time::SystemTime)> {
    type Newest = Option<(PathBuf, std::time::SystemTime)>;
    static NODE: std::sync::OnceLock<Newest> = std::sync::OnceLock::new();
    static ROUTER: std::sync::OnceLock<Newest> = std::sync::OnceLock::new();
    let (cell, own) = if name == "tessera-router" { (&ROUTER, "router/src") } else { (&NODE, "node/src") };
    cell.get_or_init(|| {
        let root = manifest_dir().as_path().parent()?.to_path_buf();
        let mut dirs: Vec<PathBuf> = ["api/src", own, "storage/src", "proto"].iter().map(|d| root.join(d)).collect();
        for model in std::fs::read_dir(root.join("storage")).ok()?.flatten() {
            dirs.push(model.path().join("src"));
        }
        let mut newest: Option<(PathBuf, std::time::SystemTime)> = None;
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs" || e == "proto")
                    && let Ok(changed) = entry.metadata().and_then(|m| m.modified())
                    && newest.as_ref().is_none_or(|(_, t)| changed > *t)
                {
                    newest = Some((path, changed));
                }
            }
        }
        newest
    })
    .clone()
}

/// Spawns `bin` with `env` (and none of the runner's own `SERVICE_*`
/// settings), appending its output to `log`; the child dies with the test.
pub fn spawn(bin: &Path, env: &[(String, String)], log: &Path, cwd: &Path, label: &str) -> Result<Child> {
    spawn_with_args(bin, &[], env, log, cwd, label)
}

/// [`spawn`] with command-line arguments.
pub fn spawn_with_args(bin: &Path, args: &[String], env: &[(String, String)], log: &Path, cwd: &Path, label: &str) -> Result<Child> {
    let mut f = OpenOptions::new().create(true).append(true).open(log)?;
    writeln!(f, "===== [harness] starting {label} =====")?;
    let mut cmd = Command::new(bin);
    cmd.args(args);
    // Do not leak the test runner's own SERVICE_* settings into the children.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SERVICE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUST_BACKTRACE", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // If the test process dies without running Drop, take the children with it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    cmd.spawn().with_context(|| format!("spawning {label} ({})", bin.display()))
}

/// Sends `sig` to a child process.
pub(crate) fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: plain kill(2) on a pid we spawned and have not reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// Sends SIGTERM to every child, then waits for all of them (SIGKILL after
/// [`STOP_TIMEOUT`]). Errors name the processes that did not exit in time.
async fn terminate(children: Vec<(String, Child)>) -> Result<()> {
    for (_, c) in &children {
        signal(c, libc::SIGTERM);
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    let mut pending = children;
    let mut stuck = Vec::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for (label, mut c) in pending {
            match c.try_wait()? {
                Some(status) => eprintln!("[harness] {label} exited after SIGTERM: {status}"),
                None if Instant::now() >= deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    stuck.push(label);
                }
                None => still.push((label, c)),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    ensure!(stuck.is_empty(), "did not exit within {STOP_TIMEOUT:?} of SIGTERM (killed): {stuck:?}");
    Ok(())
}

/// Last `lines` lines of a file.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("<cannot read: {e}>"),
    }
}

// ---------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------

/// Options for [`Cluster::start`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Start the first router with `SERVICE_ADMIN_USERNAME/PASSWORD` and log in.
    pub admin: bool,
    /// `SERVICE_SHARD_COUNT`.
    pub shard_count: u32,
    /// Extra env for every node.
    pub node_env: Vec<(String, String)>,
    /// Extra env for one bootstrap node (id → pairs), e.g. its locality.
    pub node_env_of: BTreeMap<u64, Vec<(String, String)>>,
    /// Extra env for the first router.
    pub router_env: Vec<(String, String)>,
    /// Deadline for `/readyz` after (re)starts.
    pub ready_timeout: Duration,
    /// PEM CA certificate of the routers' HTTPS certificate: when set, router
    /// URLs are `https://` and the harness's clients trust this CA (the routers'
    /// `SERVICE_TLS_CERT`/`SERVICE_TLS_KEY` go in `router_env`).
    pub https_ca: Option<Vec<u8>>,
    /// Nodes and routers run without the cluster's mutual TLS
    /// (`SERVICE_CLUSTER_INSECURE=true`); by default they get certificates.
    pub insecure: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        let ready_secs = std::env::var("TESSERA_TEST_READY_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(90);
        Self {
            admin: true,
            shard_count: 8,
            node_env: Vec::new(),
            node_env_of: BTreeMap::new(),
            router_env: Vec::new(),
            ready_timeout: Duration::from_secs(ready_secs),
            https_ca: None,
            insecure: false,
        }
    }
}

impl ClusterOptions {
    /// The first router gets no admin env: no user exists, auth routes answer 503.
    pub fn without_admin(mut self) -> Self {
        self.admin = false;
        self
    }
}

/// How a process of the cluster at `root` reaches the others: its certificate
/// (`node`: that node's; `None`: a router's), or plaintext when `insecure`.
fn cluster_transport_env(root: &Path, insecure: bool, node: Option<u64>) -> Result<Vec<(String, String)>> {
    if insecure {
        return Ok(vec![(certs::INSECURE.0.into(), certs::INSECURE.1.into())]);
    }
    match node {
        Some(id) => certs::node_env(root, id),
        None => certs::router_env(root),
    }
}

struct NodeProc {
    port: u16,
    /// Extra env of this node only (after `ClusterOptions::node_env`).
    env: Vec<(String, String)>,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

struct RouterProc {
    port: u16,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

/// Three `tessera-node`s and one or more `tessera-router`s as child processes.
pub struct Cluster {
    /// Client for router 0; carries the admin token once logged in.
    pub http: Http,
    opts: ClusterOptions,
    root: PathBuf,
    tempdir: Option<tempfile::TempDir>,
    node_bin: PathBuf,
    router_bin: PathBuf,
    nodes: BTreeMap<u64, NodeProc>,
    routers: Vec<RouterProc>,
    keep: bool,
}

impl Cluster {
    /// Starts 3 nodes and router 0, waits for `/readyz`, and logs in as admin
    /// when `opts.admin`. On failure the log tails are printed and the dir kept.
    pub async fn start(opts: ClusterOptions) -> Result<Cluster> {
        let node_bin = binary("tessera-node")?;
        let router_bin = binary("tessera-router")?;
        let tempdir = tempfile::Builder::new().prefix("tessera-test-").tempdir()?;
        let root = tempdir.path().to_path_buf();
        let mut nodes = BTreeMap::new();
        for id in NODE_IDS {
            let data_dir = root.join(format!("node-{id}"));
            std::fs::create_dir_all(&data_dir)?;
            nodes.insert(
                id,
                NodeProc {
                    port: pick_port()?,
                    env: opts.node_env_of.get(&id).cloned().unwrap_or_default(),
                    data_dir,
                    log: root.join(format!("node-{id}.log")),
                    child: None,
                    starts: 0,
                },
            );
        }
        let mut c = Cluster {
            http: Http::new("http://127.0.0.1:1"),
            opts,
            root,
            tempdir: Some(tempdir),
            node_bin,
            router_bin,
            nodes,
            routers: Vec::new(),
            keep: std::env::var_os("TESSERA_TEST_KEEP").is_some_and(|v| v == "1"),
        };
        eprintln!("[harness] cluster dir {} (peers {})", c.root.display(), c.peers());
        match c.boot().await {
            Ok(()) => Ok(c),
            Err(e) => {
                c.keep = true;
                eprintln!("[harness] cluster failed to start: {e:#}\n{}", c.log_tails(80));
                Err(e)
            }
        }
    }

    async fn boot(&mut self) -> Result<()> {
        for id in NODE_IDS {
            self.start_node(id)?;
        }
        let mut env = self.opts.router_env.clone();
        if self.opts.admin {
            env.push(("SERVICE_ADMIN_USERNAME".into(), ADMIN_USER.into()));
            env.push(("SERVICE_ADMIN_PASSWORD".into(), ADMIN_PASSWORD.into()));
        }
        let idx = self.spawn_router(env)?;
        self.http = self.router_http(idx);
        self.wait_ready().await?;
        if self.opts.admin {
            self.login().await?;
        }
        Ok(())
    }

    /// The temp dir holding data dirs and logs.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Options the cluster was started with.
    pub fn options(&self) -> &ClusterOptions {
        &self.opts
    }

    /// `1=127.0.0.1:P1,2=...` as given to nodes and routers.
    pub fn peers(&self) -> String {
        self.nodes.iter().map(|(id, n)| format!("{id}=127.0.0.1:{}", n.port)).collect::<Vec<_>>().join(",")
    }

    /// gRPC address of a node.
    pub fn node_addr(&self, id: u64) -> Result<String> {
        Ok(format!("127.0.0.1:{}", self.node(id)?.port))
    }

    /// Data directory of a node.
    pub fn node_data_dir(&self, id: u64) -> Result<PathBuf> {
        Ok(self.node(id)?.data_dir.clone())
    }

    /// Log file of a node.
    pub fn node_log(&self, id: u64) -> Result<PathBuf> {
        Ok(self.node(id)?.log.clone())
    }

    /// A node's log so far, without its colour sequences.
    pub fn node_log_text(&self, id: u64) -> Result<String> {
        Ok(strip_ansi(&std::fs::read_to_string(self.node_log(id)?)?))
    }

    /// The OS process id of node `id`, while it runs.
    pub fn node_pid(&self, id: u64) -> Option<u32> {
        self.nodes.get(&id).and_then(|n| n.child.as_ref()).map(|c| c.id())
    }

    /// CPU seconds (user + system) the running node processes have used so far.
    pub fn nodes_cpu_secs(&self) -> Result<f64> {
        let mut ticks = 0u64;
        for pid in self.nodes.values().filter_map(|n| n.child.as_ref()).map(|c| c.id()) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
            // After the parenthesised command name, utime and stime are the 12th and 13th fields.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).context("unexpected /proc stat format")?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            ticks += fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        }
        Ok(ticks as f64 / 100.0)
    }

    /// The nodes whose processes exited by themselves since the harness last
    /// looked (a crash point fired, a refused start); they can be started again.
    pub fn reap_exited_nodes(&mut self) -> Vec<u64> {
        let mut exited = Vec::new();
        for (id, n) in self.nodes.iter_mut() {
            if let Some(child) = n.child.as_mut()
                && matches!(child.try_wait(), Ok(Some(_)))
            {
                n.child = None;
                exited.push(*id);
            }
        }
        exited
    }

    /// Whether the harness currently has a live process for node `id`.
    pub fn node_running(&self, id: u64) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.child.is_some())
    }

    /// Base URL of router `idx` (0 is the one started by [`Cluster::start`]).
    pub fn router_url(&self, idx: usize) -> String {
        let scheme = if self.opts.https_ca.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.routers[idx].port)
    }

    /// Unauthenticated client for router `idx` (trusting `opts.https_ca` if set).
    pub fn router_http(&self, idx: usize) -> Http {
        match &self.opts.https_ca {
            Some(ca) => Http::with_root_ca(self.router_url(idx), ca).expect("https_ca is a PEM certificate"),
            None => Http::new(self.router_url(idx)),
        }
    }

    fn node(&self, id: u64) -> Result<&NodeProc> {
        self.nodes.get(&id).with_context(|| format!("no node {id}"))
    }

    /// Spawns node `id` with its usual env, port and data dir (no waiting).
    pub fn start_node(&mut self, id: u64) -> Result<()> {
        let peers = self.peers();
        let level = std::env::var("TESSERA_TEST_LOG_LEVEL").unwrap_or_else(|_| "info".into());
        let shards = self.opts.shard_count.to_string();
        let extra = self.opts.node_env.clone();
        let insecure = self.opts.insecure;
        let (root, bin) = (self.root.clone(), self.node_bin.clone());
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        ensure!(n.child.is_none(), "node {id} is already running");
        let mut env: Vec<(String, String)> = vec![
            ("SERVICE_NODE_ID".into(), id.to_string()),
            ("SERVICE_PEERS".into(), peers),
            ("SERVICE_GRPC_ADDR".into(), format!("127.0.0.1:{}", n.port)),
            ("SERVICE_DATA_DIR".into(), n.data_dir.display().to_string()),
            ("SERVICE_SHARD_COUNT".into(), shards),
            ("SERVICE_RAFT_HEARTBEAT_MS".into(), "200".into()),
            ("SERVICE_RAFT_ELECTION_MIN_MS".into(), "1000".into()),
            ("SERVICE_RAFT_ELECTION_MAX_MS".into(), "2000".into()),
            ("SERVICE_LOG_LEVEL".into(), level),
        ];
        env.extend(cluster_transport_env(&root, insecure, Some(id))?);
        env.extend(extra);
        env.extend(n.env.clone());
        n.starts += 1;
        let label = format!("node {id} (start #{})", n.starts);
        n.child = Some(spawn(&bin, &env, &n.log, &root, &label)?);
        eprintln!("[harness] started {label} on 127.0.0.1:{}, log {}", n.port, n.log.display());
        Ok(())
    }

    /// Starts a new node `id` (not one of the bootstrap nodes) with
    /// `SERVICE_INITIAL_CLUSTER_STATE=existing`, ready to be added through
    /// `POST /api/v1/admin/nodes`; answers its gRPC address. Its peers list every
    /// node the harness runs, itself included.
    pub fn start_new_node(&mut self, id: u64) -> Result<String> {
        self.start_new_node_with(id, &[])
    }

    /// As [`Cluster::start_new_node`] with extra env for the new node.
    pub fn start_new_node_with(&mut self, id: u64, extra_env: &[(&str, &str)]) -> Result<String> {
        ensure!(!self.nodes.contains_key(&id), "node {id} exists already");
        let data_dir = self.root.join(format!("node-{id}"));
        std::fs::create_dir_all(&data_dir)?;
        let port = pick_port()?;
        self.nodes.insert(
            id,
            NodeProc {
                port,
                env: [("SERVICE_INITIAL_CLUSTER_STATE", "existing")]
                    .iter()
                    .chain(extra_env)
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                data_dir,
                log: self.root.join(format!("node-{id}.log")),
                child: None,
                starts: 0,
            },
        );
        self.start_node(id)?;
        // It serves once it has taken the cluster's map from a peer.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(std::time::Instant::now() < deadline, "node {id} did not listen on 127.0.0.1:{port} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(format!("127.0.0.1:{port}"))
    }

    /// Sets env of node `id` alone, used from its next start on.
    pub fn set_node_env(&mut self, id: u64, key: &str, value: &str) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        n.env.retain(|(k, _)| k != key);
        n.env.push((key.to_string(), value.to_string()));
        Ok(())
    }

    /// Waits until node `id`'s process exits by itself (a refused start) and
    /// returns its exit status; fails if it still runs after `timeout`.
    pub async fn wait_node_exit(&mut self, id: u64, timeout: Duration) -> Result<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
            let child = n.child.as_mut().with_context(|| format!("node {id} is not running"))?;
            if let Some(status) = child.try_wait()? {
                n.child = None;
                return Ok(status);
            }
            ensure!(Instant::now() < deadline, "node {id} still runs after {timeout:?}");
            tokio::time::sleep(POLL).await;
        }
    }

    /// Removes node `id`'s env override `key` (see [`Cluster::set_node_env`]).
    pub fn unset_node_env(&mut self, id: u64, key: &str) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        n.env.retain(|(k, _)| k != key);
        Ok(())
    }

    /// SIGKILLs node `id` (simulated crash) and reaps it.
    pub fn kill_node(&mut self, id: u64) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        let mut child = n.child.take().with_context(|| format!("node {id} is not running"))?;
        signal(&child, libc::SIGKILL);
        let status = child.wait()?;
        eprintln!("[harness] SIGKILLed node {id}: {status}");
        Ok(())
    }

    /// SIGTERMs node `id` and waits for it to exit (fails if it takes > 20 s).
    pub async fn stop_node(&mut self, id: u64) -> Result<()> {
        let n = self.nodes.get_mut(&id).with_context(|| format!("no node {id}"))?;
        let child = n.child.take().with_context(|| format!("node {id} is not running"))?;
        terminate(vec![(format!("node {id}"), child)]).await
    }

    /// SIGTERMs every router and node (all at once) and waits for them.
    pub async fn stop_all(&mut self) -> Result<()> {
        let mut routers = Vec::new();
        for (i, r) in self.routers.iter_mut().enumerate() {
            if let Some(c) = r.child.take() {
                routers.push((format!("router {i}"), c));
            }
        }
        terminate(routers).await?;
        let mut nodes = Vec::new();
        for (id, n) in self.nodes.iter_mut() {
            if let Some(c) = n.child.take() {
                nodes.push((format!("node {id}"), c));
            }
        }
        terminate(nodes).await
    }

    /// Restarts every stopped node and router (same ports, same data dirs) and
    /// waits for router 0's `/readyz`. The token on `http` is kept as is.
    pub async fn start_all(&mut self) -> Result<()> {
        for id in NODE_IDS {
            if !self.node_running(id) {
                self.start_node(id)?;
            }
        }
        for idx in 0..self.routers.len() {
            if self.routers[idx].child.is_none() {
                self.respawn_router(idx)?;
            }
        }
        // Fresh connection pool: the old one points at dead processes.
        let token = self.http.token().map(str::to_string);
        self.http = self.router_http(0);
        if let Some(t) = token {
            self.http = self.http.with_token(&t);
        }
        self.wait_ready().await
    }

    fn spawn_router(&mut self, env: Vec<(String, String)>) -> Result<usize> {
        let log = self.root.join(format!("router-{}.log", self.routers.len()));
        self.routers.push(RouterProc { port: pick_port()?, env, log, child: None, starts: 0 });
        let idx = self.routers.len() - 1;
        self.respawn_router(idx)?;
        Ok(idx)
    }

    fn respawn_router(&mut self, idx: usize) -> Result<()> {
        let level = std::env::var("TESSERA_TEST_LOG_LEVEL").unwrap_or_else(|_| "info".into());
        let peers = self.peers();
        let (root, bin) = (self.root.clone(), self.router_bin.clone());
        let transport = cluster_transport_env(&root, self.opts.insecure, None)?;
        let r = &mut self.routers[idx];
        let mut env: Vec<(String, String)> = vec![
            ("SERVICE_HOST".into(), "127.0.0.1".into()),
            ("SERVICE_PORT".into(), r.port.to_string()),
            ("SERVICE_NODES".into(), peers),
            ("SERVICE_LOG_LEVEL".into(), level),
            // Scenarios send far more than the spec's 1000 requests/min from one IP;
            // the rate-limit scenario sets its own limits.
            ("SERVICE_REQUESTS_PER_MINUTE".into(), "1000000".into()),
            ("SERVICE_LOGIN_REQUESTS_PER_MINUTE".into(), "100000".into()),
        ];
        env.extend(transport);
        env.extend(r.env.iter().cloned());
        r.starts += 1;
        let label = format!("router {idx} (start #{})", r.starts);
        r.child = Some(spawn(&bin, &env, &r.log, &root, &label)?);
        eprintln!("[harness] started {label} on 127.0.0.1:{}, log {}", r.port, r.log.display());
        Ok(())
    }

    /// Starts another router with `extra_env` (on top of the base env and
    /// `opts.router_env`, without admin credentials unless given), waits for
    /// its `/readyz`, and returns its index and an unauthenticated client.
    pub async fn start_router(&mut self, extra_env: &[(&str, &str)]) -> Result<(usize, Http)> {
        let mut env = self.opts.router_env.clone();
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let idx = self.spawn_router(env)?;
        self.wait_router_ready(idx, self.opts.ready_timeout).await?;
        Ok((idx, self.router_http(idx)))
    }

    /// Starts another router with `extra_env` like [`Cluster::start_router`]
    /// but does not wait for it to become ready (for routers the cluster refuses).
    pub fn spawn_extra_router(&mut self, extra_env: &[(&str, &str)]) -> Result<(usize, Http)> {
        let mut env = self.opts.router_env.clone();
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let idx = self.spawn_router(env)?;
        Ok((idx, self.router_http(idx)))
    }

    /// Waits until router `idx`'s process exits by itself and returns its exit
    /// status; fails if it still runs after `timeout`.
    pub async fn wait_router_exit(&mut self, idx: usize, timeout: Duration) -> Result<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.routers.get_mut(idx).with_context(|| format!("no router {idx}"))?;
            let child = r.child.as_mut().with_context(|| format!("router {idx} is not running"))?;
            if let Some(status) = child.try_wait()? {
                r.child = None;
                return Ok(status);
            }
            ensure!(Instant::now() < deadline, "router {idx} still runs after {timeout:?}");
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGTERMs router `idx` and waits for it.
    pub async fn stop_router(&mut self, idx: usize) -> Result<()> {
        let r = self.routers.get_mut(idx).with_context(|| format!("no router {idx}"))?;
        let child = r.child.take().with_context(|| format!("router {idx} is not running"))?;
        terminate(vec![(format!("router {idx}"), child)]).await
    }

    /// SIGKILLs router `idx` (simulated crash: no graceful shutdown) and reaps it.
    pub fn kill_router(&mut self, idx: usize) -> Result<()> {
        let r = self.routers.get_mut(idx).with_context(|| format!("no router {idx}"))?;
        let mut child = r.child.take().with_context(|| format!("router {idx} is not running"))?;
        signal(&child, libc::SIGKILL);
        let status = child.wait()?;
        eprintln!("[harness] SIGKILLed router {idx}: {status}");
        Ok(())
    }

    /// Waits for router 0's `/readyz` to answer 200.
    pub async fn wait_ready(&mut self) -> Result<()> {
        self.wait_router_ready(0, self.opts.ready_timeout).await
    }

    /// Waits for router `idx`'s `/readyz` to answer 200; fails fast if any
    /// process the harness started has exited.
    pub async fn wait_router_ready(&mut self, idx: usize, timeout: Duration) -> Result<()> {
        let http = self.router_http(idx).timeout(Duration::from_secs(3));
        let started = Instant::now();
        let mut last: String;
        loop {
            self.check_children()?;
            match http.get("/readyz?groups=all").await {
                Ok(r) if r.status == 200 => {
                    eprintln!("[harness] router {idx} ready after {:?}", started.elapsed());
                    return Ok(());
                }
                Ok(r) => last = r.to_string(),
                Err(e) => last = format!("{e:#}"),
            }
            if started.elapsed() >= timeout {
                bail!("router {idx} not ready after {timeout:?}; last /readyz: {last}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Fails if a process the harness believes is running has exited.
    pub fn check_children(&mut self) -> Result<()> {
        for (id, n) in self.nodes.iter_mut() {
            if let Some(status) = n.child.as_mut().map(Child::try_wait).transpose()?.flatten() {
                n.child = None;
                bail!("node {id} exited unexpectedly ({status}); log {}:\n{}", n.log.display(), tail(&n.log, 40));
            }
        }
        for (i, r) in self.routers.iter_mut().enumerate() {
            if let Some(status) = r.child.as_mut().map(Child::try_wait).transpose()?.flatten() {
                r.child = None;
                bail!("router {i} exited unexpectedly ({status}); log {}:\n{}", r.log.display(), tail(&r.log, 40));
            }
        }
        Ok(())
    }

    /// Logs in as admin on router 0 (polling up to 30 s, since provisioning
    /// may lag readiness) and stores the token on `http`.
    pub async fn login(&mut self) -> Result<String> {
        let anon = self.http.anonymous();
        let token = wait_for(Duration::from_secs(30), "admin login on router 0", async || {
            let r = anon.login(ADMIN_USER, ADMIN_PASSWORD).await?.ensure_status(200)?;
            let t = r.json["token"].as_str().with_context(|| format!("no token in {r}"))?;
            Ok(Some(t.to_string()))
        })
        .await?;
        self.http = self.http.with_token(&token);
        Ok(token)
    }

    /// `GET /api/v1/admin/cluster` with the admin token; requires 200.
    pub async fn cluster_info(&self) -> Result<Value> {
        Ok(self.http.get("/api/v1/admin/cluster").await?.ensure_status(200)?.json)
    }

    /// Last `lines` lines of every node and router log, with paths.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        let logs = self
            .nodes
            .iter()
            .map(|(id, n)| (format!("node {id}"), &n.log))
            .chain(self.routers.iter().enumerate().map(|(i, r)| (format!("router {i}"), &r.log)));
        for (label, path) in logs {
            out.push_str(&format!("----- {label}: {} (last {lines} lines) -----\n", path.display()));
            out.push_str(&tail(path, lines));
            out.push('\n');
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        let children = self.nodes.values_mut().filter_map(|n| n.child.take()).chain(self.routers.iter_mut().filter_map(|r| r.child.take()));
        for mut c in children {
            signal(&c, libc::SIGKILL);
            let _ = c.wait();
        }
        if failed {
            eprintln!("[harness] test failed; logs:\n{}", self.log_tails(60));
        }
        let kept = if failed || self.keep { self.tempdir.take() } else { None };
        if let Some(dir) = kept {
            eprintln!("[harness] kept cluster dir {}", dir.keep().display());
        }
    }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(&path, out)?;
            } else {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    Ok(files)
}

/// Every file under `dir` whose bytes contain `needle` (files that vanish
/// while scanned, as RocksDB retires them, are skipped).
pub fn files_containing(dir: &Path, needle: &[u8]) -> Result<Vec<PathBuf>> {
    let mut hits = Vec::new();
    for f in files_under(dir)? {
        let bytes = match std::fs::read(&f) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", f.display())),
        };
        if bytes.windows(needle.len()).any(|w| w == needle) {
            hits.push(f);
        }
    }
    Ok(hits)
}
