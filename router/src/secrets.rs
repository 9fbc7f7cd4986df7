//! Resolution of the router's own secrets, in order: the secrets manager (a
//! Vault-compatible KV v2 HTTP API, when `secrets_manager.url` is set), the
//! environment, then the configuration/defaults. Only which source supplied
//! which name is ever logged; values are wrapped in [`SecretString`], whose
//! `Debug` and `Display` print `<redacted>`.

use serde_json::Value;

use crate::config::RouterConfig;

pub use tessera_api::secret::SecretString;

/// The names resolved, with their environment variables.
pub const NAMES: [(&str, &str); 6] = [
    ("tls_cert_path", "SERVICE_TLS_CERT"),
    ("tls_key_path", "SERVICE_TLS_KEY"),
    ("db_password", "SERVICE_DB_PASSWORD"),
    ("jwt_secret", "SERVICE_JWT_SECRET"),
    ("ldap_bind_password", "SERVICE_LDAP_BIND_PASSWORD"),
    ("oauth2_client_secret", "SERVICE_OAUTH2_CLIENT_SECRET"),
];

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    SecretsManager,
    Environment,
    Default,
    /// No source had a value.
    Unset,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::SecretsManager => "secrets manager",
            Source::Environment => "environment",
            Source::Default => "configuration default",
            Source::Unset => "unset",
        }
    }
}

/// One resolved secret.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub value: Option<SecretString>,
    pub source: Source,
}

/// Every resolved secret of the router.
#[derive(Debug, Clone)]
pub struct Secrets {
    pub tls_cert_path: Resolved,
    pub tls_key_path: Resolved,
    pub db_password: Resolved,
    pub jwt_secret: Resolved,
    /// `auth.ldap.bind_password`.
    pub ldap_bind_password: Resolved,
    /// `auth.oauth2.client_secret`.
    pub oauth2_client_secret: Resolved,
}

impl Secrets {
    /// Logs which source supplied each name (never a value).
    pub fn log_sources(&self) {
        tracing::info!(
            tls_cert_path = self.tls_cert_path.source.as_str(),
            tls_key_path = self.tls_key_path.source.as_str(),
            db_password = self.db_password.source.as_str(),
            jwt_secret = self.jwt_secret.source.as_str(),
            ldap_bind_password = self.ldap_bind_password.source.as_str(),
            oauth2_client_secret = self.oauth2_client_secret.source.as_str(),
            "resolved the router's secrets (sources only)"
        );
    }
}

/// Why resolution failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("secrets manager at {url}: {message}")]
    Manager { url: String, message: String },
}

/// A client of the Vault-compatible KV v2 API.
struct Manager {
    client: reqwest::Client,
    base: String,
    token: Option<SecretString>,
    service: String,
}

impl Manager {
    fn new(config: &RouterConfig) -> Result<Option<Manager>, SecretsError> {
        let section = &config.secrets_manager;
        let Some(url) = section.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else { return Ok(None) };
        let base = url.trim_end_matches('/').to_string();
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(section.timeout_secs.clamp(1, 300)))
            .build()
            .map_err(|e| SecretsError::Manager { url: base.clone(), message: e.to_string() })?;
        let token = SecretString::env_or("SERVICE_SECRETS_MANAGER_TOKEN", section.token.as_ref());
        Ok(Some(Manager { client, base, token, service: section.service.clone() }))
    }

    /// `GET <base>/v1/secret/data/<service>/<name>` → `data.data.value`;
    /// `None` when the manager has no such secret (404 or no `value`).
    async fn get(&self, name: &str) -> Result<Option<SecretString>, SecretsError> {
        let err = |message: String| SecretsError::Manager { url: self.base.clone(), message };
        let url = format!("{}/v1/secret/data/{}/{}", self.base, self.service, name);
        let mut req = self.client.get(&url);
        if let Some(t) = &self.token {
            req = req.header("X-Vault-Token", t.expose());
        }
        // Transport errors may quote the URL but never the token or a value.
        let resp = req.send().await.map_err(|e| err(format!("GET secret/data/{}/{name}: {e}", self.service)))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(err(format!("GET secret/data/{}/{name} answered {status}", self.service)));
        }
        let body: Value = resp.json().await.map_err(|_| err(format!("secret/data/{}/{name}: the reply is not JSON", self.service)))?;
        match body.pointer("/data/data/value") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(SecretString::new(s.clone()))),
            Some(_) => Err(err(format!("secret/data/{}/{name}: data.value must be a string", self.service))),
        }
    }
}

/// Resolves every secret with the process environment.
pub async fn resolve_all(config: &RouterConfig, defaults: &[(&str, Option<String>)]) -> Result<Secrets, SecretsError> {
    resolve_with(config, defaults, |k| std::env::var(k).ok()).await
}

/// Resolves every secret: manager, then `env`, then `defaults` (name → value,
/// e.g. the TLS paths of the configuration file).
pub async fn resolve_with(
    config: &RouterConfig,
    defaults: &[(&str, Option<String>)],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Secrets, SecretsError> {
    let manager = Manager::new(config)?;
    let mut out = Vec::new();
    for (name, var) in NAMES {
        let mut resolved = Resolved { value: None, source: Source::Unset };
        if let Some(m) = &manager
            && let Some(v) = m.get(name).await?
        {
            resolved = Resolved { value: Some(v), source: Source::SecretsManager };
        }
        if resolved.value.is_none()
            && let Some(v) = env(var).filter(|v| !v.is_empty())
        {
            resolved = Resolved { value: Some(SecretString::new(v)), source: Source::Environment };
        }
        if resolved.value.is_none()
            && let Some(v) = defaults.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.clone())
        {
            resolved = Resolved { value: Some(SecretString::new(v)), source: Source::Default };
        }
        out.push(resolved);
    }
    let mut it = out.into_iter();
    let mut next = || it.next().expect("one per name");
    Ok(Secrets {
        tls_cert_path: next(),
        tls_key_path: next(),
        db_password: next(),
        jwt_secret: next(),
        ldap_bind_password: next(),
        oauth2_client_secret: next(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    use serde_json::json;

    use super::*;

    type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

    /// A loopback stand-in for a Vault KV v2 server holding `secrets` under
    /// `secret/data/tessera/<name>`, recording each (name, token) asked.
    async fn fake_manager(secrets: HashMap<String, String>) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app =
            axum::Router::new()
                .route(
                    "/v1/secret/data/tessera/{name}",
                    get(
                        |State((secrets, seen)): State<(Arc<HashMap<String, String>>, Seen)>,
                         Path(name): Path<String>,
                         headers: HeaderMap| async move {
                            let token = headers.get("x-vault-token").and_then(|v| v.to_str().ok()).map(str::to_string);
                            seen.lock().unwrap().push((name.clone(), token.clone()));
                            if token.as_deref() != Some("root-token") {
                                return (StatusCode::FORBIDDEN, axum::Json(json!({"errors": ["permission denied"]})));
                            }
                            match secrets.get(&name) {
                                Some(v) => {
                                    (StatusCode::OK, axum::Json(json!({"data": {"data": {"value": v}, "metadata": {"version": 1}}})))
                                }
                                None => (StatusCode::NOT_FOUND, axum::Json(json!({"errors": []}))),
                            }
                        },
                    ),
                )
                .with_state((Arc::new(secrets), seen.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/"), seen)
    }

    fn config(url: Option<String>, token: &str) -> RouterConfig {
        let mut c = RouterConfig::default();
        c.secrets_manager.url = url;
        c.secrets_manager.token = Some(SecretString::new(token));
        c
    }

    fn value(r: &Resolved) -> Option<&str> {
        r.value.as_ref().map(SecretString::expose)
    }

    #[tokio::test]
    async fn order_is_manager_then_environment_then_defaults() {
        let (url, seen) = fake_manager(HashMap::from([
            ("tls_cert_path".to_string(), "/manager/cert.pem".to_string()),
            ("db_password".to_string(), "manager-db-pass".to_string()),
            ("ldap_bind_password".to_string(), "manager-ldap-pass".to_string()),
        ]))
        .await;
        let env = HashMap::from([
            ("SERVICE_DB_PASSWORD", "env-db-pass"),
            ("SERVICE_JWT_SECRET", "env-jwt"),
            ("SERVICE_LDAP_BIND_PASSWORD", "env-ldap-pass"),
        ]);
        let defaults = [
            ("tls_cert_path", Some("/default/cert.pem".to_string())),
            ("tls_key_path", Some("/default/key.pem".to_string())),
            ("oauth2_client_secret", Some("file-client-secret".to_string())),
        ];
        let s = resolve_with(&config(Some(url), "root-token"), &defaults, |k| env.get(k).map(|v| v.to_string())).await.unwrap();
        assert_eq!((value(&s.tls_cert_path), s.tls_cert_path.source), (Some("/manager/cert.pem"), Source::SecretsManager));
        assert_eq!((value(&s.tls_key_path), s.tls_key_path.source), (Some("/default/key.pem"), Source::Default));
        assert_eq!((value(&s.db_password), s.db_password.source), (Some("manager-db-pass"), Source::SecretsManager));
        assert_eq!((value(&s.jwt_secret), s.jwt_secret.source), (Some("env-jwt"), Source::Environment));
        assert_eq!((value(&s.ldap_bind_password), s.ldap_bind_password.source), (Some("manager-ldap-pass"), Source::SecretsManager));
        assert_eq!((value(&s.oauth2_client_secret), s.oauth2_client_secret.source), (Some("file-client-secret"), Source::Default));
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 6, "one lookup per name: {seen:?}");
        assert!(seen.iter().all(|(_, t)| t.as_deref() == Some("root-token")));
        // Nothing prints a value.
        let printed = format!("{s:?}");
        assert!(
            !printed.contains("manager-db-pass") && !printed.contains("env-jwt") && !printed.contains("manager-ldap-pass"),
            "{printed}"
        );
    }

    #[test]
    fn scalar_configuration_values_are_secret_strings() {
        use figment::providers::Serialized;
        let c: RouterConfig = figment::Figment::from(Serialized::defaults(RouterConfig::default()))
            .merge(Serialized::default("vault.passphrase", 12345678901234u64))
            .merge(Serialized::default("secrets_manager.token", true))
            .extract()
            .unwrap();
        assert_eq!(c.vault.passphrase.as_ref().map(SecretString::expose), Some("12345678901234"));
        assert_eq!(c.secrets_manager.token.as_ref().map(SecretString::expose), Some("true"));
        assert_eq!(format!("{:?}", c.vault), "VaultSection { passphrase: Some(<redacted>), default_deny: false }");
    }

    #[tokio::test]
    async fn without_a_manager_environment_wins_over_defaults() {
        let env = HashMap::from([("SERVICE_TLS_CERT", "/env/cert.pem")]);
        let defaults = [("tls_cert_path", Some("/default/cert.pem".to_string()))];
        let s = resolve_with(&RouterConfig::default(), &defaults, |k| env.get(k).map(|v| v.to_string())).await.unwrap();
        assert_eq!((value(&s.tls_cert_path), s.tls_cert_path.source), (Some("/env/cert.pem"), Source::Environment));
        assert_eq!(s.db_password.source, Source::Unset);
        assert!(s.db_password.value.is_none());
    }

    #[tokio::test]
    async fn a_refusing_or_unreachable_manager_fails_resolution() {
        let (url, _) = fake_manager(HashMap::new()).await;
        let e = resolve_with(&config(Some(url), "wrong-token"), &[], |_| None).await.unwrap_err();
        assert!(e.to_string().contains("403"), "{e}");
        assert!(!e.to_string().contains("wrong-token"), "{e}");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        assert!(resolve_with(&config(Some(dead), "root-token"), &[], |_| None).await.is_err());
    }
}
