//! A real, certified OpenID provider for the OIDC sign-in scenario
//! (`tests/tests/oidc_login.rs`): `oidc-provider` from npm, run under Node.js.
//!
//! [`install`] puts `oidc-provider` ([`PROVIDER_VERSION`], every transitive
//! package pinned by `tests/oidc/package-lock.json`) into a cache directory,
//! `$HOME/.cache/tessera/oidc-provider-<version>` (`npm ci`, only when that
//! directory does not already hold this very lock file's install).
//! [`Provider::start`] writes a JSON configuration into a temp dir and runs
//! `node tests/oidc/provider.mjs CONFIG` on a free loopback port; it waits until
//! `GET ISSUER/.well-known/openid-configuration` answers. The provider:
//!
//! - issuer `http://127.0.0.1:PORT`, signing keys = the private RSA JWKs given
//!   (made by [`generate_key`]: RS256, `use: sig`, a `kid` each);
//! - one client [`CLIENT_ID`] / [`CLIENT_SECRET`] (`client_secret_post`,
//!   `authorization_code` + `code` only), redirect URIs as given;
//! - PKCE (S256) required; scopes `openid email profile roles` carrying `sub`,
//!   `email`, `preferred_username` and `roles`, all of them put into the ID
//!   token (`conformIdTokenClaims: false`);
//! - accounts [`ACCOUNTS`]: alice (`roles: ["tessera-admins"]`), bob
//!   (`["engineers"]`), carol (`[]`);
//! - dev interactions: an HTML login form that takes any password for a known
//!   account, then a consent form. [`Browser`] fills them in.
//!
//! [`Provider::restart`] stops it and starts it again on the same port (same
//! issuer) with another key set, for key rotation. The node process is killed
//! on drop; if the test panicked its log tail is printed and its dir kept.
//!
//! Keys, signatures (RS256, HS256 keyed with the public key's PEM, `alg: none`)
//! and PKCE pairs come from `node tests/oidc/sign.mjs` (node's own crypto).
//!
//! Needs `node` (v20 or later: oidc-provider 9 and its `jose` need it) and
//! `npm`, and the npm registry the first time; without them the fixture fails
//! saying so (the scenario never skips).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use reqwest::Url;
use serde_json::{Value, json};

use crate::{Cluster, Http, Resp, RouterProc, url_encode};

/// The `oidc-provider` release `tests/oidc/package.json` pins.
pub const PROVIDER_VERSION: &str = "9.13.3";
/// The relying party registered with the provider (the router).
pub const CLIENT_ID: &str = "tessera";
/// Its secret (`client_secret_post`).
pub const CLIENT_SECRET: &str = "tessera-client-secret-0123456789abcdef";
/// The scopes the router asks for.
pub const SCOPES: &str = "openid email profile roles";
/// The router's callback path (its `redirect_uri` is the router's URL + this).
pub const CALLBACK_PATH: &str = "/api/v1/auth/oidc/callback";
/// The router's login path (redirects to the provider).
pub const LOGIN_PATH: &str = "/api/v1/auth/oidc/login";

/// The provider's accounts: (sub = preferred_username, email, roles).
pub const ACCOUNTS: [(&str, &str, &[&str]); 3] =
    [("alice", "alice@example.com", &["tessera-admins"]), ("bob", "bob@example.com", &["engineers"]), ("carol", "carol@example.com", &[])];

/// How long the provider may take to answer discovery after a (re)start.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the provider may take to exit after SIGTERM before it is SIGKILLed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for the provider.
const POLL: Duration = Duration::from_millis(100);
/// What the error says when node or npm is missing.
const INSTALL_HINT: &str = "the OIDC scenario runs a real OpenID provider (oidc-provider from npm) under Node.js 20 or later: \
     install `node` and `npm` (the machine image has Node.js 20 with npm 11; Debian bookworm's own `nodejs` is 18, too old)";

// ---------------------------------------------------------------------------
// node, npm and the cached install
// ---------------------------------------------------------------------------

/// `tests/oidc` (provider.mjs, sign.mjs, package.json, package-lock.json).
pub fn oidc_dir() -> PathBuf {
    crate::manifest_dir().join("oidc")
}

/// `name` on `$PATH` or in /usr/bin, /usr/local/bin.
fn find_program(name: &str) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/bin", "/usr/local/bin", "/bin"].map(PathBuf::from));
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("`{name}` not found on PATH nor in /usr/bin: {INSTALL_HINT}"))
}

/// The `node` binary, checked to be v20 or later.
pub fn node() -> Result<PathBuf> {
    let node = find_program("node")?;
    let out = Command::new(&node).arg("--version").output().with_context(|| format!("running {} --version", node.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let major: u32 = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    ensure!(out.status.success() && major >= 20, "{} --version says {version:?}: {INSTALL_HINT}", node.display());
    Ok(node)
}

/// The cache directory `oidc-provider` is installed into.
pub fn install_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".cache").join("tessera").join(format!("oidc-provider-{PROVIDER_VERSION}"))
}

/// Marker written after a complete install: a copy of the lock file installed.
const MARKER: &str = ".tessera-installed-lock.json";

/// Installs `oidc-provider` (pinned by `tests/oidc/package-lock.json`) into
/// [`install_dir`] unless it holds that install already; answers its
/// `node_modules`. The install goes to a staging dir renamed into place.
pub fn install() -> Result<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = oidc_dir();
    let lock = std::fs::read(src.join("package-lock.json")).with_context(|| format!("reading {}/package-lock.json", src.display()))?;
    let dir = install_dir();
    let installed =
        |d: &Path| std::fs::read(d.join(MARKER)).is_ok_and(|m| m == lock) && d.join("node_modules/oidc-provider/package.json").is_file();
    if installed(&dir) {
        return Ok(dir.join("node_modules"));
    }
    let npm = find_program("npm")?;
    let parent = dir.parent().context("install dir has a parent")?;
    std::fs::create_dir_all(parent)?;
    let staging = parent.join(format!(".oidc-provider-{PROVIDER_VERSION}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(src.join(f), staging.join(f)).with_context(|| format!("copying {f} to {}", staging.display()))?;
    }
    eprintln!("[oidc] installing oidc-provider {PROVIDER_VERSION} into {} (npm ci)", dir.display());
    let started = Instant::now();
    let out = Command::new(&npm)
        .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"])
        .current_dir(&staging)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} ci: {INSTALL_HINT}", npm.display()))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        bail!(
            "npm ci of oidc-provider {PROVIDER_VERSION} failed ({}): stdout {:?} stderr {:?} ({INSTALL_HINT}; the npm registry must be reachable)",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::write(staging.join(MARKER), &lock)?;
    if installed(&dir) {
        // Another test process installed it meanwhile (and may be running it).
        let _ = std::fs::remove_dir_all(&staging);
        return Ok(dir.join("node_modules"));
    }
    if dir.exists() {
        // A stale or partial install (another lock file): replace it.
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing the stale {}", dir.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another process may have installed it meanwhile.
        ensure!(installed(&dir), "moving {} to {}: {e}", staging.display(), dir.display());
    }
    eprintln!("[oidc] installed oidc-provider {PROVIDER_VERSION} in {:?}", started.elapsed());
    Ok(dir.join("node_modules"))
}

// ---------------------------------------------------------------------------
// Keys, signatures, PKCE (tests/oidc/sign.mjs)
// ---------------------------------------------------------------------------

/// Runs `node sign.mjs` with `request` on stdin; answers its JSON line.
fn sign_tool(request: &Value) -> Result<Value> {
    use std::io::Write;
    let node = node()?;
    let script = oidc_dir().join("sign.mjs");
    let mut child = Command::new(&node)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {} {}", node.display(), script.display()))?;
    child.stdin.take().context("stdin pipe")?.write_all(request.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(out.status.success(), "sign.mjs {}: {} stderr {:?}", request["op"], out.status, String::from_utf8_lossy(&out.stderr).trim());
    serde_json::from_slice(&out.stdout).with_context(|| format!("sign.mjs answer {:?}", String::from_utf8_lossy(&out.stdout)))
}

/// A fresh private RSA-2048 JWK (`kid`, `alg: RS256`, `use: sig`).
pub fn generate_key(kid: &str) -> Result<Value> {
    let jwk = sign_tool(&json!({"op": "keygen", "kid": kid}))?;
    ensure!(jwk["kty"] == "RSA" && jwk["d"].is_string() && jwk["kid"] == kid, "keygen answered {jwk}");
    Ok(jwk)
}

/// The public half of a private JWK.
pub fn public_jwk(jwk: &Value) -> Result<Value> {
    Ok(sign_tool(&json!({"op": "public", "jwk": jwk}))?["jwk"].clone())
}

/// The public key of a JWK as SPKI PEM text.
pub fn public_pem(jwk: &Value) -> Result<String> {
    sign_tool(&json!({"op": "public", "jwk": jwk}))?["pem"].as_str().map(str::to_string).context("no pem")
}

fn token_of(answer: Value) -> Result<String> {
    answer["token"].as_str().map(str::to_string).with_context(|| format!("sign.mjs answered {answer}"))
}

/// An RS256 JWS of `claims` signed with the private `jwk`; the header is
/// `{alg: RS256, typ: JWT, kid: the JWK's}` with `header`'s fields on top
/// (e.g. `{"kid": "other"}`).
pub fn sign_rs256(jwk: &Value, header: Value, claims: &Value) -> Result<String> {
    token_of(sign_tool(&json!({"op": "sign", "alg": "RS256", "jwk": jwk, "header": header, "claims": claims}))?)
}

/// An HS256 JWS of `claims` whose HMAC key is the text of `jwk`'s public key
/// as SPKI PEM (the RS256 → HS256 algorithm-confusion forgery); header
/// `{alg: HS256, typ: JWT, kid}`.
pub fn sign_hs256_with_public_pem(jwk: &Value, claims: &Value) -> Result<String> {
    token_of(sign_tool(&json!({"op": "sign", "alg": "HS256-public-pem", "jwk": jwk, "claims": claims}))?)
}

/// An unsigned token `{"alg":"none"}.claims.` (empty signature).
pub fn unsigned(claims: &Value) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.", b64(&json!({"alg": "none"})), b64(claims))
}

/// A PKCE pair: (code_verifier, S256 code_challenge).
pub fn pkce() -> Result<(String, String)> {
    let a = sign_tool(&json!({"op": "pkce"}))?;
    Ok((a["verifier"].as_str().context("verifier")?.to_string(), a["challenge"].as_str().context("challenge")?.to_string()))
}

/// The payload of a compact JWT, decoded (signature not checked).
pub fn jwt_claims(token: &str) -> Result<Value> {
    let payload = token.split('.').nth(1).context("a JWT has three parts")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).context("JWT payload base64url")?;
    serde_json::from_slice(&bytes).context("JWT payload JSON")
}

/// The header of a compact JWT, decoded.
pub fn jwt_header(token: &str) -> Result<Value> {
    let header = token.split('.').next().context("empty JWT")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header.trim_end_matches('=')).context("JWT header base64url")?;
    serde_json::from_slice(&bytes).context("JWT header JSON")
}

/// Seconds since the epoch.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Random URL-safe text (state, nonce).
pub fn random_text() -> String {
    use rand::RngCore;
    let mut b = [0u8; 18];
    rand::thread_rng().fill_bytes(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

// ---------------------------------------------------------------------------
// The provider
// ---------------------------------------------------------------------------

/// A running `oidc-provider` (see the module docs).
pub struct Provider {
    child: Option<Child>,
    port: u16,
    redirect_uris: Vec<String>,
    keys: Vec<Value>,
    node: PathBuf,
    modules: PathBuf,
    root: PathBuf,
    log: PathBuf,
    starts: u32,
    tempdir: Option<tempfile::TempDir>,
}

impl Provider {
    /// Installs (if needed) and starts the provider on a free loopback port
    /// with signing `keys` (private JWKs) and the client's `redirect_uris`;
    /// waits until discovery answers (at most 30 s).
    pub async fn start(redirect_uris: Vec<String>, keys: Vec<Value>) -> Result<Provider> {
        Self::start_on(crate::pick_port()?, redirect_uris, keys).await
    }

    /// Like [`Provider::start`] on a port chosen by the caller.
    pub async fn start_on(port: u16, redirect_uris: Vec<String>, keys: Vec<Value>) -> Result<Provider> {
        let node = node()?;
        let modules = tokio::task::spawn_blocking(install).await.context("install task")??;
        let tempdir = tempfile::Builder::new().prefix("tessera-oidc-").tempdir()?;
        let root = tempdir.path().to_path_buf();
        let log = root.join("provider.log");
        let mut p = Provider { child: None, port, redirect_uris, keys, node, modules, root, log, starts: 0, tempdir: Some(tempdir) };
        p.spawn()?;
        p.wait_ready().await?;
        Ok(p)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The private JWKs it signs with now.
    pub fn keys(&self) -> &[Value] {
        &self.keys
    }

    /// Its log file (node's stdout and stderr).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::tail(&self.log, lines)
    }

    /// The provider's configuration file (rewritten at every start).
    fn config(&self) -> Value {
        let accounts: serde_json::Map<String, Value> = ACCOUNTS
            .iter()
            .map(|(name, email, roles)| (name.to_string(), json!({"preferred_username": name, "email": email, "roles": roles})))
            .collect();
        json!({
            "issuer": self.issuer(),
            "jwks": {"keys": self.keys},
            "clients": [{
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": self.redirect_uris,
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_post",
            }],
            "accounts": accounts,
            "cookie_keys": ["tessera-oidc-test-cookie-key-0123456789"],
        })
    }

    fn spawn(&mut self) -> Result<()> {
        ensure!(self.child.is_none(), "the provider runs already");
        let config = self.root.join("provider.json");
        std::fs::write(&config, serde_json::to_vec_pretty(&self.config())?)?;
        self.starts += 1;
        let script = oidc_dir().join("provider.mjs");
        let args = [script.display().to_string(), config.display().to_string()];
        let modules = self.modules.display().to_string();
        let env = [("OIDC_NODE_MODULES".to_string(), modules.clone()), ("NODE_PATH".to_string(), modules)];
        let label = format!("oidc-provider (start #{})", self.starts);
        self.child = Some(crate::spawn_with_args(&self.node, &args, &env, &self.log, &self.root, &label)?);
        eprintln!("[oidc] started {label} at {} (log {})", self.issuer(), self.log.display());
        Ok(())
    }

    /// Polls discovery until it names this issuer; fails at once if node exited.
    async fn wait_ready(&mut self) -> Result<()> {
        let http = Http::new(self.issuer()).timeout(Duration::from_secs(3));
        let started = Instant::now();
        let mut last;
        loop {
            if let Some(status) = self.child.as_mut().context("the provider is not running")?.try_wait()? {
                self.child = None;
                bail!("oidc-provider exited at start ({status}); log {}:\n{}", self.log.display(), self.log_tail(40));
            }
            match http.get("/.well-known/openid-configuration").await {
                Ok(r) if r.status == 200 && r.json["issuer"] == json!(self.issuer()) => {
                    eprintln!("[oidc] provider ready after {:?}", started.elapsed());
                    return Ok(());
                }
                Ok(r) => last = r.to_string(),
                Err(e) => last = format!("{e:#}"),
            }
            if started.elapsed() >= START_TIMEOUT {
                bail!(
                    "oidc-provider did not answer discovery within {START_TIMEOUT:?}; last answer: {last}; log {}:\n{}",
                    self.log.display(),
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGTERMs node and waits for it to exit (SIGKILL after 10 s).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::signal(&child, libc::SIGTERM);
            let deadline = Instant::now() + STOP_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                eprintln!("[oidc] the provider did not exit within {STOP_TIMEOUT:?} of SIGTERM: SIGKILL");
                crate::signal(&child, libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }

    /// Stops the provider and starts it again on the same port (same issuer,
    /// same client) signing with `keys` instead; waits until it answers.
    /// Sessions, grants and codes of the old process are gone.
    pub async fn restart(&mut self, keys: Vec<Value>) -> Result<()> {
        self.stop();
        self.keys = keys;
        self.spawn()?;
        self.wait_ready().await
    }

    /// `GET /.well-known/openid-configuration`.
    pub async fn discovery(&self) -> Result<Value> {
        let r = Http::new(self.issuer()).get("/.well-known/openid-configuration").await?.ensure_status(200)?;
        Ok(r.json)
    }

    /// The provider's JWKS (`jwks_uri` of discovery).
    pub async fn jwks(&self) -> Result<Value> {
        let uri = self.discovery().await?["jwks_uri"].as_str().context("discovery has no jwks_uri")?.to_string();
        let r = Http::new(uri).get("").await?.ensure_status(200)?;
        Ok(r.json)
    }

    /// The authorization request URL for the registered client, with `state`,
    /// `nonce` and the S256 `code_challenge`.
    pub fn authorization_url(&self, redirect_uri: &str, state: &str, nonce: &str, challenge: &str) -> String {
        format!(
            "{}/auth?client_id={}&response_type=code&scope={}&redirect_uri={}&state={}&nonce={}&code_challenge={}&code_challenge_method=S256",
            self.issuer(),
            url_encode(CLIENT_ID),
            url_encode(SCOPES),
            url_encode(redirect_uri),
            url_encode(state),
            url_encode(nonce),
            url_encode(challenge)
        )
    }

    /// Runs the code flow as the client itself (its own state, nonce and
    /// PKCE), signing in as `username` through the dev interactions; stops at
    /// the redirect to `redirect_uri` (never following it) and redeems the code
    /// at the token endpoint. Answers the token endpoint's JSON (`id_token`,
    /// `access_token`, …), checked for state, `iss` and nonce.
    pub async fn code_flow(&self, username: &str, redirect_uri: &str) -> Result<Value> {
        let (verifier, challenge) = pkce()?;
        let (state, nonce) = (random_text(), random_text());
        let browser = Browser::new();
        let url = self.authorization_url(redirect_uri, &state, &nonce, &challenge);
        let back = browser.sign_in(&url, username, &format!("{username}-password"), redirect_uri).await?;
        let params = query_params(&back)?;
        let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        ensure!(param("error").is_none(), "the provider answered an error to {username}'s sign-in: {back}");
        ensure!(param("state").as_deref() == Some(state.as_str()), "the redirect {back} does not carry state {state}");
        ensure!(param("iss").as_deref().is_none_or(|iss| iss == self.issuer()), "the redirect {back} names another issuer");
        let code = param("code").with_context(|| format!("no code in {back}"))?;
        let token = self.redeem(&code, redirect_uri, &verifier).await?.ensure_status(200).context("redeeming the code")?;
        let id_token = token.json["id_token"].as_str().with_context(|| format!("no id_token in {token}"))?;
        let claims = jwt_claims(id_token)?;
        ensure!(claims["nonce"] == json!(nonce), "the ID token's nonce: {claims}");
        ensure!(claims["iss"] == json!(self.issuer()) && claims["aud"] == json!(CLIENT_ID), "the ID token's iss/aud: {claims}");
        Ok(token.json)
    }

    /// `POST /token` (authorization_code, client_secret_post) with `code`.
    pub async fn redeem(&self, code: &str, redirect_uri: &str, verifier: &str) -> Result<Resp> {
        let endpoint = self.discovery().await?["token_endpoint"].as_str().context("discovery has no token_endpoint")?.to_string();
        let body = form_body(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", CLIENT_ID),
            ("client_secret", CLIENT_SECRET),
            ("code_verifier", verifier),
        ]);
        Http::new(endpoint).post_raw("", body, Some("application/x-www-form-urlencoded")).await
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("[oidc] test failed; oidc-provider log {} (last 60 lines):\n{}", self.log.display(), self.log_tail(60));
            if let Some(dir) = self.tempdir.take() {
                eprintln!("[oidc] kept the provider's dir {}", dir.keep().display());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// A browser: cookies, redirects by hand, the dev-interaction forms
// ---------------------------------------------------------------------------

/// `application/x-www-form-urlencoded` text of `fields`.
pub fn form_body(fields: &[(&str, &str)]) -> String {
    fields.iter().map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v))).collect::<Vec<_>>().join("&")
}

/// The decoded query parameters of `url`.
pub fn query_params(url: &str) -> Result<Vec<(String, String)>> {
    let url = Url::parse(url).with_context(|| format!("not a URL: {url:?}"))?;
    Ok(url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
}

#[derive(Clone, Debug)]
struct Cookie {
    host: String,
    path: String,
    name: String,
    value: String,
}

/// An HTTP client that keeps cookies like a browser (by host, path-scoped,
/// dropped when a `Set-Cookie` expires them; `Secure` honoured as browsers do
/// on loopback, i.e. sent over plain HTTP to 127.0.0.1) and never follows
/// redirects by itself.
pub struct Browser {
    client: reqwest::Client,
    jar: Mutex<Vec<Cookie>>,
}

impl Default for Browser {
    fn default() -> Self {
        Self::new()
    }
}

impl Browser {
    pub fn new() -> Browser {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(15))
            .build()
            .expect("build reqwest client");
        Browser { client, jar: Mutex::new(Vec::new()) }
    }

    /// The value of cookie `name`, if the jar has one.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.jar.lock().unwrap().iter().find(|c| c.name == name).map(|c| c.value.clone())
    }

    /// Forgets every cookie.
    pub fn clear_cookies(&self) {
        self.jar.lock().unwrap().clear();
    }

    /// Copies cookie `name` (every path) from another browser's jar.
    pub fn copy_cookie_from(&self, other: &Browser, name: &str) {
        let theirs: Vec<Cookie> = other.jar.lock().unwrap().iter().filter(|c| c.name == name).cloned().collect();
        let mut jar = self.jar.lock().unwrap();
        jar.retain(|c| c.name != name);
        jar.extend(theirs);
    }

    fn cookie_header(&self, url: &Url) -> Option<String> {
        let host = url.host_str().unwrap_or_default();
        let path = url.path();
        let jar = self.jar.lock().unwrap();
        let mut matching: Vec<&Cookie> = jar.iter().filter(|c| c.host == host && path_matches(&c.path, path)).collect();
        matching.sort_by_key(|c| std::cmp::Reverse(c.path.len()));
        (!matching.is_empty()).then(|| matching.iter().map(|c| format!("{}={}", c.name, c.value)).collect::<Vec<_>>().join("; "))
    }

    fn store_cookies(&self, url: &Url, headers: &reqwest::header::HeaderMap) {
        let host = url.host_str().unwrap_or_default().to_string();
        let default_path = match url.path().rfind('/') {
            Some(0) | None => "/".to_string(),
            Some(i) => url.path()[..i].to_string(),
        };
        let mut jar = self.jar.lock().unwrap();
        for raw in headers.get_all(reqwest::header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let mut parts = raw.split(';').map(str::trim);
            let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else { continue };
            let (mut path, mut expired) = (default_path.clone(), false);
            for attr in parts {
                let (k, v) = attr.split_once('=').map_or((attr, ""), |(k, v)| (k.trim(), v.trim()));
                if k.eq_ignore_ascii_case("path") && v.starts_with('/') {
                    path = v.to_string();
                } else if k.eq_ignore_ascii_case("max-age") {
                    expired |= v.parse::<i64>().is_ok_and(|s| s <= 0);
                } else if k.eq_ignore_ascii_case("expires") {
                    expired |= http_date_is_past(v);
                }
            }
            jar.retain(|c| !(c.name == name && c.path == path && c.host == host));
            if !expired {
                jar.push(Cookie { host: host.clone(), path, name: name.to_string(), value: value.to_string() });
            }
        }
    }

    /// One request (no redirect followed); cookies sent and stored.
    pub async fn request(&self, method: reqwest::Method, url: &str, form: Option<String>) -> Result<Resp> {
        let parsed = Url::parse(url).with_context(|| format!("not a URL: {url:?}"))?;
        let mut req = self.client.request(method.clone(), parsed.clone());
        if let Some(cookies) = self.cookie_header(&parsed) {
            req = req.header(reqwest::header::COOKIE, cookies);
        }
        if let Some(body) = form {
            req = req.header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
        }
        let resp = req.send().await.with_context(|| format!("{method} {url}"))?;
        self.store_cookies(&parsed, resp.headers());
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await?.to_vec();
        let text = String::from_utf8_lossy(&body).into_owned();
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Resp { status, headers, json, text, body })
    }

    /// `GET url`.
    pub async fn get(&self, url: &str) -> Result<Resp> {
        self.request(reqwest::Method::GET, url, None).await
    }

    /// `POST url` with a form.
    pub async fn post_form(&self, url: &str, fields: &[(&str, &str)]) -> Result<Resp> {
        self.request(reqwest::Method::POST, url, Some(form_body(fields))).await
    }

    /// The absolute `Location` of a redirect answered for `url`.
    pub fn location(url: &str, r: &Resp) -> Result<String> {
        ensure!((300..400).contains(&r.status), "expected a redirect from {url}, got {r}");
        let loc = r.header("location").with_context(|| format!("a redirect without Location from {url}: {r}"))?;
        Ok(Url::parse(url)?.join(loc).with_context(|| format!("Location {loc:?}"))?.to_string())
    }

    /// Starting at `start` (the router's login URL or an authorization
    /// request), follows redirects, signs in as `username` with `password` on
    /// the provider's login form and grants the consent form, until a
    /// redirect whose target starts with `stop` (a callback): answers that
    /// target without requesting it. Fails on any other answer, naming the
    /// path taken.
    pub async fn sign_in(&self, start: &str, username: &str, password: &str, stop: &str) -> Result<String> {
        let mut trail: Vec<String> = Vec::new();
        let mut next: (String, Option<Vec<(String, String)>>) = (start.to_string(), None);
        for _ in 0..30 {
            let (url, form) = next;
            let r = match &form {
                Some(fields) => {
                    let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    self.post_form(&url, &pairs).await?
                }
                None => self.get(&url).await?,
            };
            trail.push(format!("{} {url} -> {}", if form.is_some() { "POST" } else { "GET" }, r.status));
            if (300..400).contains(&r.status) {
                let loc = Self::location(&url, &r)?;
                if loc.starts_with(stop) {
                    return Ok(loc);
                }
                next = (loc, None);
                continue;
            }
            let page = || format!("{r}\npath taken:\n  {}", trail.join("\n  "));
            ensure!(r.status == 200, "unexpected answer during the sign-in of {username}: {}", page());
            let form = parse_form(&r.text).with_context(|| format!("no form in the provider's page: {}", page()))?;
            let prompt = form.fields.iter().find(|(k, _)| k == "prompt").map(|(_, v)| v.clone()).unwrap_or_default();
            let mut fields = form.fields.clone();
            match prompt.as_str() {
                "login" => {
                    fields.retain(|(k, _)| k != "login" && k != "password");
                    fields.push(("login".into(), username.into()));
                    fields.push(("password".into(), password.into()));
                }
                "consent" => {}
                other => bail!("a form with prompt {other:?} during the sign-in of {username}: {}", page()),
            }
            let action = Url::parse(&url)?.join(&form.action)?.to_string();
            next = (action, Some(fields));
        }
        bail!("the sign-in of {username} took more than 30 steps:\n  {}", trail.join("\n  "))
    }
}

/// `cookie_path` matches `request_path` (RFC 6265 §5.1.4).
fn path_matches(cookie_path: &str, request_path: &str) -> bool {
    request_path == cookie_path
        || (request_path.starts_with(cookie_path) && (cookie_path.ends_with('/') || request_path[cookie_path.len()..].starts_with('/')))
}

/// Whether an `Expires` date lies in the past: the clearing dates servers
/// send (1970) are; the year is all this looks at against the current one.
fn http_date_is_past(date: &str) -> bool {
    let this_year = 1970 + now_secs() / 31_556_952;
    date.split(|c: char| !c.is_ascii_digit()).filter(|t| t.len() == 4).filter_map(|t| t.parse::<i64>().ok()).any(|y| y < this_year)
}

/// A form of an HTML page: its action and its inputs' names and values.
#[derive(Clone, Debug)]
pub struct Form {
    pub action: String,
    pub fields: Vec<(String, String)>,
}

/// The first `<form>` of `html` (its `<input name value>`s; text inputs
/// without a value count with an empty one).
pub fn parse_form(html: &str) -> Option<Form> {
    let start = html.find("<form")?;
    let end = html[start..].find("</form>").map_or(html.len(), |e| start + e);
    let form = &html[start..end];
    let tag_end = form.find('>')?;
    let action = attr(&form[..tag_end], "action").unwrap_or_default();
    let mut fields = Vec::new();
    let mut rest = &form[tag_end..];
    while let Some(i) = rest.find("<input") {
        let tag = &rest[i..];
        let close = tag.find('>').unwrap_or(tag.len());
        let tag_text = &tag[..close];
        if let Some(name) = attr(tag_text, "name") {
            fields.push((name, attr(tag_text, "value").unwrap_or_default()));
        }
        rest = &tag[close..];
    }
    Some(Form { action, fields })
}

/// The (HTML-unescaped) value of attribute `name` in a tag's text.
fn attr(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let i = tag.find(&needle)? + needle.len();
    let j = tag[i..].find('"')? + i;
    Some(html_unescape(&tag[i..j]))
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

// ---------------------------------------------------------------------------
// A router whose URL is known before it starts
// ---------------------------------------------------------------------------

impl Cluster {
    /// Starts another router like [`Cluster::start_router`], on `port` (from
    /// [`crate::pick_port`]) rather than one picked at spawn: an OIDC router's
    /// configuration names its own callback URL, so the URL must be known
    /// before it starts. Restarts ([`Cluster::stop_router`] then
    /// [`Cluster::start_all`]) keep the port.
    pub async fn start_router_on_port(&mut self, port: u16, extra_env: &[(&str, &str)]) -> Result<(usize, Http)> {
        let mut env = self.opts.router_env.clone();
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let log = self.root.join(format!("router-{}.log", self.routers.len()));
        self.routers.push(RouterProc { port, env, log, child: None, starts: 0 });
        let idx = self.routers.len() - 1;
        self.respawn_router(idx)?;
        self.wait_router_ready(idx, self.opts.ready_timeout).await?;
        Ok((idx, self.router_http(idx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_cookies_and_paths() {
        let html = r#"<form autocomplete="off" action="http://127.0.0.1:5/interaction/abc?x=1&amp;y=2" method="post">
  <input type="hidden" name="prompt" value="login"/>
  <input required type="text" name="login" placeholder="Enter any login" autofocus="on">
  <input required type="password" name="password" placeholder="and password" ></form>"#;
        let f = parse_form(html).unwrap();
        assert_eq!(f.action, "http://127.0.0.1:5/interaction/abc?x=1&y=2");
        assert_eq!(f.fields, vec![("prompt".into(), "login".into()), ("login".into(), String::new()), ("password".into(), String::new())]);
        assert!(path_matches("/", "/auth/x"));
        assert!(path_matches("/auth/x", "/auth/x"));
        assert!(!path_matches("/auth/x", "/auth/xy"));
        assert!(path_matches("/interaction/x", "/interaction/x/abort"));
        assert!(http_date_is_past("Thu, 01 Jan 1970 00:00:00 GMT"));
        assert!(!http_date_is_past("Thu, 01 Jan 2099 00:00:00 GMT"));
        let claims = json!({"sub": "a"});
        assert_eq!(jwt_claims(&unsigned(&claims)).unwrap(), claims);
        assert_eq!(jwt_header(&unsigned(&claims)).unwrap(), json!({"alg": "none"}));
    }

    /// The fixture alone, no router: discovery and JWKS (public halves only),
    /// the code flow through the dev interactions for alice and carol with a
    /// dummy redirect URI (ID tokens signed with the current key, carrying
    /// the scopes' claims), an unknown redirect URI and an unknown account
    /// refused, and a restart with another key set on the same issuer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn provider_fixture_signs_in_and_rotates_keys() -> Result<()> {
        const CB: &str = "http://127.0.0.1:1/cb";
        let (a, b) = (generate_key("key-a")?, generate_key("key-b")?);
        let mut p = Provider::start(vec![CB.to_string()], vec![a.clone()]).await?;
        let d = p.discovery().await?;
        ensure!(d["issuer"] == json!(p.issuer()) && d["code_challenge_methods_supported"] == json!(["S256"]), "discovery: {d}");
        for scope in ["openid", "email", "profile", "roles"] {
            ensure!(d["scopes_supported"].as_array().is_some_and(|s| s.contains(&json!(scope))), "scope {scope} in {d}");
        }
        let jwks = p.jwks().await?;
        ensure!(jwks["keys"].as_array().map(Vec::len) == Some(1) && jwks["keys"][0]["kid"] == "key-a", "JWKS: {jwks}");
        ensure!(jwks["keys"][0].get("d").is_none(), "the JWKS shows a private key: {jwks}");
        ensure!(jwks["keys"][0]["n"] == public_jwk(&a)?["n"], "JWKS key vs key A");

        let t = p.code_flow("alice", CB).await?;
        let id = t["id_token"].as_str().context("id_token")?;
        let (h, c) = (jwt_header(id)?, jwt_claims(id)?);
        ensure!(h["alg"] == "RS256" && h["kid"] == "key-a", "header {h}");
        ensure!(c["sub"] == "alice" && c["preferred_username"] == "alice" && c["email"] == "alice@example.com", "claims {c}");
        ensure!(c["roles"] == json!(["tessera-admins"]), "alice's roles in {c}");
        let c = jwt_claims(p.code_flow("carol", CB).await?["id_token"].as_str().context("id_token")?)?;
        ensure!(c["sub"] == "carol" && c["roles"] == json!([]), "carol's claims {c}");

        // A redirect URI the client did not register: the provider shows an error, no redirect.
        let (_, challenge) = pkce()?;
        let r = Browser::new().get(&p.authorization_url("http://127.0.0.1:2/other", "s", "n", &challenge)).await?;
        ensure!(r.status == 400 && r.text.contains("redirect_uri"), "an unregistered redirect_uri: {r}");
        // No PKCE: refused (redirected back with an error).
        let url = p.authorization_url(CB, "s", "n", "x").replace("&code_challenge=x&code_challenge_method=S256", "");
        let r = Browser::new().get(&url).await?;
        let loc = Browser::location(&url, &r)?;
        ensure!(loc.starts_with(CB) && loc.contains("error=invalid_request"), "no PKCE: {loc}");
        // An account the provider does not know never gets a code (the dev
        // interactions take any login; resuming with no account is a 500).
        ensure!(p.code_flow("zed", CB).await.is_err(), "zed got a code");

        let port = p.port();
        p.restart(vec![b.clone()]).await?;
        ensure!(p.port() == port && p.discovery().await?["issuer"] == json!(format!("http://127.0.0.1:{port}")), "issuer after restart");
        let jwks = p.jwks().await?;
        ensure!(jwks["keys"].as_array().map(Vec::len) == Some(1) && jwks["keys"][0]["kid"] == "key-b", "JWKS after restart: {jwks}");
        let id = p.code_flow("bob", CB).await?["id_token"].as_str().context("id_token")?.to_string();
        ensure!(jwt_header(&id)?["kid"] == "key-b" && jwt_claims(&id)?["roles"] == json!(["engineers"]), "bob's ID token after restart");

        // The test's own signatures have the expected shapes.
        let claims = json!({"sub": "alice"});
        ensure!(jwt_header(&sign_rs256(&a, json!({}), &claims)?)? == json!({"alg": "RS256", "kid": "key-a", "typ": "JWT"}), "RS256 header");
        ensure!(jwt_header(&sign_rs256(&a, json!({"kid": "nope"}), &claims)?)?["kid"] == "nope", "kid override");
        ensure!(jwt_header(&sign_hs256_with_public_pem(&a, &claims)?)?["alg"] == "HS256", "HS256 header");
        ensure!(public_pem(&a)?.starts_with("-----BEGIN PUBLIC KEY-----"), "public PEM");
        Ok(())
    }
}
