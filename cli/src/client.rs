//! The HTTP client of the router's `/api/v1`: every command goes through
//! [`Api::call`], which maps the router's answers to [`CliError`]s.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::error::{CliError, Position, Result};

/// A router at `url`, signed in with `token` when there is one.
pub struct Api {
    pub url: String,
    token: Option<String>,
    consistency: Option<String>,
    http: reqwest::Client,
    /// The PEM of `--cacert`, trusted beside the public roots.
    cacert: Option<Vec<u8>>,
}

impl Api {
    /// A client of the router at `url` (HTTPS verified against the system's
    /// roots, and `cacert` when given).
    pub fn new(url: &str, token: Option<String>, cacert: Option<&std::path::Path>, timeout: Duration) -> Result<Api> {
        let url = url.trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(CliError::Usage(format!("the router URL {url:?} must start with http:// or https://")));
        }
        let mut builder = reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_secs(10));
        let mut ca = None;
        if let Some(path) = cacert {
            let pem = std::fs::read(path).map_err(|e| CliError::Usage(format!("reading the CA file {}: {e}", path.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| CliError::Usage(format!("{} is not a PEM certificate: {e}", path.display())))?;
            builder = builder.add_root_certificate(cert);
            ca = Some(pem);
        }
        let http = builder.build().map_err(|e| CliError::Local(format!("HTTP client: {e}")))?;
        Ok(Api { url, token, consistency: None, http, cacert: ca })
    }

    /// The TLS configuration of a `wss://` connection: the public roots (as
    /// for HTTPS) and the `--cacert` certificates.
    pub fn websocket_tls(&self) -> Result<std::sync::Arc<rustls::ClientConfig>> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        if let Some(pem) = &self.cacert {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| CliError::Usage(format!("the CA file is not PEM: {e}")))?;
                roots.add(cert).map_err(|e| CliError::Usage(format!("the CA file's certificate: {e}")))?;
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CliError::Local(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(std::sync::Arc::new(config))
    }

    /// Every request carries `X-Consistency: level` from now on.
    pub fn with_consistency(mut self, level: Option<String>) -> Api {
        self.consistency = level;
        self
    }

    pub fn signed_in(&self) -> bool {
        self.token.is_some()
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.call(Method::DELETE, path, None).await
    }

    /// A request to `path` carrying the session and the consistency level.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(level) = &self.consistency {
            req = req.header("x-consistency", level);
        }
        req
    }

    /// The session token, for the calls that cannot go through [`Api::request`] (WebSocket).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// One request: the answer's JSON body on 2xx (null when empty), else the
    /// error it stands for.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        let mut req = self.request(method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        self.json(req).await
    }

    /// Sends `req`; its JSON answer on 2xx, else the error it stands for.
    pub async fn json(&self, req: reqwest::RequestBuilder) -> Result<Value> {
        let resp = self.send(req).await?;
        let bytes = resp.bytes().await.map_err(|e| CliError::Unavailable(format!("reading the answer of {}: {e}", self.url)))?;
        Ok(if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        })
    }

    /// Sends `req`; the response on 2xx (its body unread), else the error it stands for.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = req.send().await.map_err(|e| CliError::Unavailable(unreachable(&self.url, &e)))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| CliError::Unavailable(format!("reading the answer of {}: {e}", self.url)))?;
        let json: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        let (code, message, position) = error_of(&json);
        Err(match status {
            401 if self.token.is_none() => CliError::Auth(format!("{message} (sign in first: tessera login)")),
            401 => CliError::Auth(format!("{message} (the session ended: tessera login)")),
            403 => CliError::Auth(message),
            500..=599 => CliError::Unavailable(format!("{status} {code}: {message}")),
            _ => CliError::Refused { status, code, message, position },
        })
    }
}

/// Why a request got no answer, in words.
fn unreachable(url: &str, e: &reqwest::Error) -> String {
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    if e.is_timeout() { format!("{url} did not answer in time ({why})") } else { format!("cannot reach {url}: {why}") }
}

/// `(code, message, position)` of any of the router's error bodies:
/// `{error, code}`, SQL's `{error: {code, message, position: {line, column}}}`,
/// a positioned `{error, code, line, column}`, a timeout's `{success: false, error}`.
pub fn error_of(body: &Value) -> (String, String, Option<Position>) {
    let position = |v: &Value| match (v["line"].as_u64(), v["column"].as_u64()) {
        (Some(line), Some(column)) => Some(Position { line, column }),
        _ => None,
    };
    match &body["error"] {
        Value::Object(e) => {
            let code = e.get("code").and_then(Value::as_str).unwrap_or("ERROR").to_string();
            let message = e.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            (code, message, e.get("position").and_then(position))
        }
        Value::String(message) => {
            let code = body["code"].as_str().unwrap_or(if body["success"] == false { "TIMEOUT" } else { "ERROR" }).to_string();
            (code, message.clone(), position(body))
        }
        _ => match body {
            Value::String(text) => ("ERROR".into(), text.clone(), None),
            other => ("ERROR".into(), other.to_string(), None),
        },
    }
}

/// A path segment or query value, percent-encoded (keys and names may hold
/// `/`, spaces, anything).
pub fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_error_body_the_router_sends_is_read() {
        let sql = json!({"error": {"code": "PARSE_ERROR", "message": "bad", "position": {"line": 2, "column": 7}, "sql": "x"}});
        assert_eq!(error_of(&sql), ("PARSE_ERROR".into(), "bad".into(), Some(Position { line: 2, column: 7 })));
        let plain = json!({"error": "no such key", "code": "NOT_FOUND"});
        assert_eq!(error_of(&plain), ("NOT_FOUND".into(), "no such key".into(), None));
        let timeout = json!({"success": false, "error": "query timed out"});
        assert_eq!(error_of(&timeout).0, "TIMEOUT");
        let positioned = json!({"error": "x (line 1, column 3)", "code": "BAD_REQUEST", "line": 1, "column": 3});
        assert_eq!(error_of(&positioned).2, Some(Position { line: 1, column: 3 }));
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment("é"), "%C3%A9");
    }
}
