//! The application's one way into Tessera: SQL over the router's public
//! `POST /api/v1/query`, signed in as the application's database user
//! (`DATABASE_URL`). The session token is renewed when the router answers 401;
//! a busy or electing cluster (503) or a lost connection is retried briefly,
//! with one `Idempotency-Key` per statement so a retried write applies once.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::RwLock;

use crate::config::DatabaseUrl;
use crate::error::AppError;

/// Why a database call failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A constraint refused the statement (a unique key taken).
    #[error("{0}")]
    Constraint(String),
    /// The statement was refused for another reason (a bug in the application's SQL).
    #[error("{code}: {message}")]
    Refused { code: String, message: String },
    /// The cluster did not answer, or answered 5xx.
    #[error("{0}")]
    Unavailable(String),
}

impl From<DbError> for AppError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Constraint(m) => AppError::Conflict(m),
            DbError::Refused { .. } => AppError::Internal(format!("database: {e}")),
            DbError::Unavailable(m) => AppError::Unavailable(format!("database unavailable: {m}")),
        }
    }
}

/// The rows a statement answered, and how many it changed.
#[derive(Debug, Default, Clone)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    pub affected: u64,
}

impl Rows {
    /// The rows as JSON objects keyed by column name.
    pub fn objects(&self) -> Vec<serde_json::Map<String, Value>> {
        self.rows.iter().map(|r| self.columns.iter().cloned().zip(r.iter().cloned()).collect()).collect()
    }

    /// The first row as an object.
    pub fn first(&self) -> Option<serde_json::Map<String, Value>> {
        self.objects().into_iter().next()
    }
}

#[derive(Deserialize)]
struct QueryAnswer {
    #[serde(default)]
    data: Option<QueryData>,
    #[serde(default)]
    rows_affected: u64,
}

#[derive(Deserialize)]
struct QueryData {
    #[serde(default)]
    columns: Vec<String>,
    #[serde(default)]
    rows: Vec<Vec<Value>>,
}

/// A client of one Tessera database.
pub struct Db {
    url: DatabaseUrl,
    http: reqwest::Client,
    token: RwLock<Option<String>>,
}

/// How many times a statement is sent while the cluster answers 503.
const ATTEMPTS: u32 = 8;

impl Db {
    /// A client of the database at `url`; `ca_file` (PEM) adds the CA
    /// certificates a router's HTTPS certificate may chain to.
    pub fn new(url: DatabaseUrl, ca_file: Option<&std::path::Path>) -> Result<Self, DbError> {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30));
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|e| DbError::Unavailable(format!("reading {}: {e}", path.display())))?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| DbError::Unavailable(format!("{}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(DbError::Unavailable(format!("{} holds no PEM certificate", path.display())));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| DbError::Unavailable(format!("HTTP client: {e}")))?;
        Ok(Db { url, http, token: RwLock::new(None) })
    }

    /// The database the application's tables live in.
    pub fn database(&self) -> &str {
        &self.url.database
    }

    async fn login(&self) -> Result<String, DbError> {
        let body = json!({"username": self.url.user, "password": self.url.password});
        let resp = self
            .http
            .post(format!("{}/api/v1/auth/login", self.url.router))
            .json(&body)
            .send()
            .await
            .map_err(|e| DbError::Unavailable(format!("{}: {e}", self.url.router)))?;
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap_or(Value::Null);
        match answer["token"].as_str() {
            Some(token) if status.is_success() => Ok(token.to_string()),
            _ if is_busy(status) => Err(DbError::Unavailable(format!("sign-in to the database answered {status}: {answer}"))),
            _ => Err(DbError::Refused {
                code: "SIGN_IN".into(),
                message: format!("the database refused user {}: {status} {answer}", self.url.user),
            }),
        }
    }

    /// The router's base URL (`http://host:port`).
    pub fn router(&self) -> &str {
        &self.url.router
    }

    /// A session token of the application's database user (for the router's
    /// WebSocket routes); `renew` signs in again.
    pub async fn session_token(&self, renew: bool) -> Result<String, DbError> {
        self.token(renew).await
    }

    async fn token(&self, renew: bool) -> Result<String, DbError> {
        if !renew && let Some(t) = self.token.read().await.clone() {
            return Ok(t);
        }
        let mut slot = self.token.write().await;
        let token = self.login().await?;
        *slot = Some(token.clone());
        Ok(token)
    }

    /// Runs `sql` (one or several statements, one transaction) with `params`
    /// bound to `$1`, `$2`, …, read and written at `quorum`.
    pub async fn sql(&self, sql: &str, params: &[Value]) -> Result<Rows, DbError> {
        let body = json!({"sql": sql, "params": params, "database": self.url.database});
        let (status, text) = self.exchange(&reqwest::Method::POST, "/api/v1/query", Some(&body)).await?;
        if status.is_success() {
            let answer: QueryAnswer =
                serde_json::from_str(&text).map_err(|e| DbError::Unavailable(format!("an answer that does not parse ({e}): {text}")))?;
            let data = answer.data.unwrap_or(QueryData { columns: Vec::new(), rows: Vec::new() });
            return Ok(Rows { columns: data.columns, rows: data.rows, affected: answer.rows_affected });
        }
        let (code, message) = error_of(&text);
        Err(if is_busy(status) {
            DbError::Unavailable(format!("{status}: {message}"))
        } else if code == "CONSTRAINT_VIOLATION" || status == reqwest::StatusCode::CONFLICT {
            DbError::Constraint(message)
        } else {
            DbError::Refused { code: if code.is_empty() { status.to_string() } else { code }, message }
        })
    }

    /// Calls another endpoint of the router (the compliance API, streams) as
    /// the application's database user: `method` on `path` (from `/api/v1/…`)
    /// with an optional JSON `body`; answers the JSON answer of a 2xx. A 4xx
    /// is [`DbError::Refused`] with the router's code and message, a 5xx, a
    /// lasting 429 or no answer [`DbError::Unavailable`].
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<Value, DbError> {
        let (status, text) = self.exchange(&method, path, body).await?;
        if status.is_success() {
            return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
        }
        let (code, message) = error_of(&text);
        let message = format!("{method} {path} answered {status}: {message}");
        Err(if is_busy(status) {
            DbError::Unavailable(message)
        } else {
            DbError::Refused { code: if code.is_empty() { status.as_u16().to_string() } else { code }, message }
        })
    }

    /// Sends one request to the router and answers its final status and body:
    /// signs in again once on a 401, and retries 503/429 and lost connections
    /// briefly, with one `Idempotency-Key` for every attempt (a write retried
    /// after a lost answer applies once).
    async fn exchange(&self, method: &reqwest::Method, path: &str, body: Option<&Value>) -> Result<(reqwest::StatusCode, String), DbError> {
        let idempotency_key = uuid::Uuid::new_v4().to_string();
        let mut renewed = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let token = self.token(false).await?;
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.url.router))
                .bearer_auth(&token)
                .header("x-consistency", "quorum")
                .header("idempotency-key", &idempotency_key);
            if let Some(body) = body {
                request = request.json(body);
            }
            let resp = match request.send().await {
                Ok(resp) => resp,
                Err(e) if attempt < ATTEMPTS => {
                    tracing::debug!("router call {method} {path} failed, trying again: {e}");
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
                Err(e) => return Err(DbError::Unavailable(format!("{method} {path}: {e}"))),
            };
            let status = resp.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && !renewed {
                renewed = true;
                self.token(true).await?;
                continue;
            }
            if (status == reqwest::StatusCode::SERVICE_UNAVAILABLE || status == reqwest::StatusCode::TOO_MANY_REQUESTS)
                && attempt < ATTEMPTS
            {
                tokio::time::sleep(backoff(attempt)).await;
                continue;
            }
            let text = resp.text().await.map_err(|e| DbError::Unavailable(e.to_string()))?;
            return Ok((status, text));
        }
    }
}

/// A failure the database may get over: a 5xx, or a 429 that outlasted the retries.
fn is_busy(status: reqwest::StatusCode) -> bool {
    status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS
}

/// The router's error code and message in a failed answer (`{error: {code,
/// message}}` of SQL, or `{error: message, code}` of the other routes).
fn error_of(text: &str) -> (String, String) {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    match &body["error"] {
        Value::Object(e) => (
            e.get("code").and_then(Value::as_str).unwrap_or("").to_string(),
            e.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
        ),
        Value::String(m) => (body["code"].as_str().unwrap_or("").to_string(), m.clone()),
        _ => (String::new(), text.to_string()),
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 * u64::from(attempt.min(10)))
}
