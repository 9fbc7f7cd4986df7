//! Sign-in through an OpenID Connect provider (`auth.method = oauth2`,
//! `[auth.oauth2]`).
//!
//! Browsers: [`Provider::begin`] answers the provider's authorization URL
//! (authorization-code flow with PKCE S256, a `state` and a `nonce`) and a
//! cookie binding the sign-in to the browser; [`Provider::finish`] checks the
//! state against that cookie, exchanges the code (with the verifier and the
//! client's secret) and checks the ID token. The state is sealed (AES-256-GCM
//! under a key derived from the client secret), so any router configured with
//! the same client finishes a sign-in another began.
//!
//! Services: a provider token presented as `Authorization: Bearer <JWT>` is
//! checked the same way ([`Provider::validate`]). Every token's signature is
//! checked against the provider's JWKS (fetched through discovery, fetched
//! again on an unknown `kid`: key rotation), with an allow-list of asymmetric
//! algorithms (never `none`, never HS*), and its `iss`, `aud`, `exp`, `nbf`
//! and `iat` within `clock_skew_secs`. Claims map to roles as LDAP groups do
//! (`services/external_roles.rs`).

use std::time::{Duration, Instant};

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tessera_api::command::now_ms;
use tessera_api::meta::Role;
use tokio::sync::RwLock;

use crate::config::OidcSection;
use crate::error::ApiError;
use crate::services::external_roles;

/// The cookie binding a started sign-in to its browser.
pub const LOGIN_COOKIE: &str = "tessera_oidc";
/// The provider's keys are fetched again at most this often on an unknown `kid`.
const JWKS_REFETCH_MIN: Duration = Duration::from_secs(5);
/// ... and at least this often anyway (keys the provider dropped stop verifying).
const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);

/// What discovery says of the provider.
#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// A started sign-in, as sealed into `state`.
#[derive(Serialize, Deserialize)]
struct Pending {
    /// SHA-256 (hex) of the browser's cookie.
    browser: String,
    nonce: String,
    verifier: String,
    expires_at_ms: i64,
}

/// Where to send the browser, and the cookie to set.
pub struct Started {
    pub authorization_url: String,
    pub cookie: String,
    pub cookie_max_age_secs: u64,
}

/// The provider this router signs users in through.
pub struct Provider {
    section: OidcSection,
    http: reqwest::Client,
    seal: Aes256Gcm,
    algorithms: Vec<Algorithm>,
    metadata: RwLock<Option<Metadata>>,
    keys: RwLock<Option<(JwkSet, Instant)>>,
}

impl Provider {
    /// The provider of `section` (already checked by `OidcSection::check`).
    pub fn new(section: OidcSection) -> Result<Provider, String> {
        let mut http =
            reqwest::Client::builder().timeout(Duration::from_secs(section.timeout_secs)).redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = &section.ca_file {
            let pem = std::fs::read(ca).map_err(|e| format!("auth.oauth2.ca_file {}: {e}", ca.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("auth.oauth2.ca_file: {e}"))? {
                http = http.add_root_certificate(cert);
            }
            http = http.tls_built_in_root_certs(false);
        }
        let http = http.build().map_err(|e| format!("auth.oauth2: {e}"))?;
        let secret = section.client_secret.as_ref().map(|s| s.expose().to_string()).unwrap_or_default();
        let mut key = [0u8; 32];
        hkdf::Hkdf::<Sha256>::new(None, secret.as_bytes())
            .expand(b"tessera oidc login state", &mut key)
            .map_err(|e| format!("auth.oauth2: {e}"))?;
        let seal = Aes256Gcm::new_from_slice(&key).map_err(|e| format!("auth.oauth2: {e}"))?;
        let algorithms = section
            .algorithms
            .iter()
            .map(|a| a.parse::<Algorithm>().map_err(|e| format!("auth.oauth2.algorithms: {a}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Provider { section, http, seal, algorithms, metadata: RwLock::new(None), keys: RwLock::new(None) })
    }

    /// Whether provider tokens are accepted as bearer tokens.
    pub fn accepts_bearer_tokens(&self) -> bool {
        self.section.accept_bearer_tokens
    }

    /// Whether local users may still sign in with a password.
    pub fn allows_local_users(&self) -> bool {
        self.section.allow_local_users
    }

    /// The provider's discovery document (fetched once, again after a failure).
    async fn metadata(&self) -> Result<Metadata, ApiError> {
        if let Some(m) = self.metadata.read().await.clone() {
            return Ok(m);
        }
        let url = format!("{}/.well-known/openid-configuration", self.section.issuer.trim_end_matches('/'));
        let m: Metadata = self.get_json(&url).await?;
        // OpenID Connect Discovery 4.3: the document names the issuer it was fetched for.
        if m.issuer != self.section.issuer {
            return Err(ApiError::Unavailable(format!(
                "the provider's discovery names the issuer {:?}, not auth.oauth2.issuer {:?}",
                m.issuer, self.section.issuer
            )));
        }
        *self.metadata.write().await = Some(m.clone());
        Ok(m)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, ApiError> {
        let unavailable = |e: String| ApiError::Unavailable(format!("the OpenID provider did not answer {url}: {e}"));
        let response = self.http.get(url).send().await.map_err(|e| unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("status {}", response.status())));
        }
        response.json().await.map_err(|e| unavailable(e.to_string()))
    }

    /// The key `kid` of the provider's JWKS, fetched again when it is unknown
    /// (at most every few seconds) or the set is old.
    async fn key(&self, kid: &str) -> Result<DecodingKey, ApiError> {
        let cached = self.keys.read().await.clone();
        let (fresh_enough, known) = match &cached {
            Some((set, at)) => (at.elapsed() < JWKS_MAX_AGE, set.find(kid).cloned()),
            None => (false, None),
        };
        let jwk = match known {
            Some(jwk) if fresh_enough => jwk,
            _ => {
                let may_fetch = cached.as_ref().is_none_or(|(_, at)| at.elapsed() >= JWKS_REFETCH_MIN);
                if !may_fetch {
                    return Err(ApiError::Unauthorized(format!("the token's key {kid:?} is not one of the provider's")));
                }
                let set: JwkSet = self.get_json(&self.metadata().await?.jwks_uri).await?;
                let found = set.find(kid).cloned();
                *self.keys.write().await = Some((set, Instant::now()));
                found.ok_or_else(|| ApiError::Unauthorized(format!("the token's key {kid:?} is not one of the provider's")))?
            }
        };
        DecodingKey::from_jwk(&jwk).map_err(|e| ApiError::Unauthorized(format!("the provider's key {kid:?} is unusable: {e}")))
    }

    /// The claims of a provider token (an ID token, or a JWT access token),
    /// checked; with `nonce`, the ID token of the sign-in that sent it.
    pub async fn validate(&self, token: &str, nonce: Option<&str>) -> Result<Value, ApiError> {
        let refused = |why: String| ApiError::Unauthorized(format!("the token is refused: {why}"));
        // `none` and unknown algorithms fail here (jsonwebtoken has no `none`).
        let header = jsonwebtoken::decode_header(token).map_err(|e| refused(e.to_string()))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(refused(format!("algorithm {:?} is not accepted (auth.oauth2.algorithms)", header.alg)));
        }
        let kid = header.kid.ok_or_else(|| refused("it names no key (kid)".into()))?;
        let key = self.key(&kid).await?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.section.clock_skew_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.section.issuer]);
        let audiences =
            if self.section.audiences.is_empty() { vec![self.section.client_id.clone()] } else { self.section.audiences.clone() };
        validation.set_audience(&audiences);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| refused(e.to_string()))?.claims;
        let iat = claims["iat"].as_i64().ok_or_else(|| refused("iat is not a number".into()))?;
        if iat > now_ms() / 1000 + self.section.clock_skew_secs as i64 {
            return Err(refused("it was issued in the future (iat)".into()));
        }
        if let Some(nonce) = nonce
            && claims["nonce"].as_str() != Some(nonce)
        {
            return Err(refused("its nonce is not this sign-in's".into()));
        }
        Ok(claims)
    }

    /// Starts a sign-in: the provider's authorization URL and the browser's cookie.
    pub async fn begin(&self) -> Result<Started, ApiError> {
        let metadata = self.metadata().await?;
        let cookie = random_b64();
        let verifier = random_b64();
        let nonce = random_b64();
        let pending = Pending {
            browser: hex::encode(Sha256::digest(cookie.as_bytes())),
            nonce: nonce.clone(),
            verifier: verifier.clone(),
            expires_at_ms: now_ms() + (self.section.login_ttl_secs as i64) * 1000,
        };
        let state = self.seal(&pending)?;
        let challenge = B64.encode(Sha256::digest(verifier.as_bytes()));
        let mut scopes: Vec<&str> = self.section.scopes.split_whitespace().collect();
        if !scopes.contains(&"openid") {
            scopes.insert(0, "openid");
        }
        let mut url = reqwest::Url::parse(&metadata.authorization_endpoint)
            .map_err(|e| ApiError::Unavailable(format!("the provider's authorization endpoint is not a URL: {e}")))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.section.client_id)
            .append_pair("redirect_uri", &self.section.redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(Started { authorization_url: url.into(), cookie, cookie_max_age_secs: self.section.login_ttl_secs })
    }

    /// Finishes a sign-in: `state` must be one this router's client sealed, for
    /// the browser holding `cookie`; the code is exchanged and the ID token
    /// checked. Answers its claims.
    pub async fn finish(&self, code: &str, state: &str, cookie: Option<&str>) -> Result<Value, ApiError> {
        let bad = |why: &str| ApiError::BadRequest(format!("the sign-in cannot finish: {why}; start again at /api/v1/auth/oidc/login"));
        let pending = self.open(state).ok_or_else(|| bad("its state is not one this router issued"))?;
        if pending.expires_at_ms < now_ms() {
            return Err(bad("it took too long (auth.oauth2.login_ttl_secs)"));
        }
        let cookie = cookie.ok_or_else(|| bad(&format!("the browser did not send the {LOGIN_COOKIE} cookie")))?;
        if hex::encode(Sha256::digest(cookie.as_bytes())) != pending.browser {
            return Err(bad("it was started by another browser"));
        }
        let metadata = self.metadata().await?;
        let secret = self.section.client_secret.as_ref().map(|s| s.expose().to_string()).unwrap_or_default();
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.section.redirect_uri.as_str()),
            ("client_id", self.section.client_id.as_str()),
            ("client_secret", secret.as_str()),
            ("code_verifier", pending.verifier.as_str()),
        ];
        let response = self
            .http
            .post(&metadata.token_endpoint)
            .form(&form)
            .send()
            .await
            .map_err(|e| ApiError::Unavailable(format!("the OpenID provider's token endpoint did not answer: {e}")))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let why = body["error_description"].as_str().or(body["error"].as_str()).unwrap_or("no reason given");
            return Err(ApiError::Unauthorized(format!("the provider refused the code ({status}): {why}")));
        }
        let id_token = body["id_token"].as_str().ok_or_else(|| ApiError::Unauthorized("the provider answered no id_token".into()))?;
        self.validate(id_token, Some(&pending.nonce)).await
    }

    fn seal(&self, pending: &Pending) -> Result<String, ApiError> {
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let plain = serde_json::to_vec(pending).map_err(|e| ApiError::Internal(e.to_string()))?;
        let sealed = self.seal.encrypt(Nonce::from_slice(&nonce), plain.as_slice()).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(B64.encode([nonce.as_slice(), sealed.as_slice()].concat()))
    }

    fn open(&self, state: &str) -> Option<Pending> {
        let bytes = B64.decode(state).ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(12);
        let plain = self.seal.decrypt(Nonce::from_slice(nonce), sealed).ok()?;
        serde_json::from_slice(&plain).ok()
    }

    /// The user name a token's claims give (`username_claim`, else `sub`).
    pub fn username_of(&self, claims: &Value) -> Option<String> {
        let name = claims.get(&self.section.username_claim).and_then(Value::as_str).or(claims["sub"].as_str())?;
        (!name.is_empty() && name.len() <= 128 && !name.contains('\0')).then(|| name.to_string())
    }

    /// The role names a token's claims give (`role_claim`: a string or an array, a dotted path).
    fn role_names(&self, claims: &Value) -> Vec<String> {
        let mut at = claims;
        for part in self.section.role_claim.split('.') {
            at = &at[part];
        }
        match at {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        }
    }

    /// The e-mail address a token's claims give (`email_claim`).
    pub fn email_of(&self, claims: &Value) -> Option<String> {
        claims.get(&self.section.email_claim).and_then(Value::as_str).map(str::to_string)
    }

    /// The built-in role and custom roles a token's claims map to.
    pub fn roles_of(&self, claims: &Value) -> Option<(Role, Vec<String>)> {
        external_roles::roles_of(&self.section.role_mapping, self.section.default_role.as_ref(), &self.role_names(claims))
    }
}

fn random_b64() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    B64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        Provider::new(OidcSection {
            issuer: "http://127.0.0.1:1".into(),
            client_id: "tessera".into(),
            client_secret: Some("a-client-secret".into()),
            redirect_uri: "http://127.0.0.1:2/api/v1/auth/oidc/callback".into(),
            role_claim: "realm_access.roles".into(),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_sealed_state_opens_only_unchanged_and_under_the_same_secret() {
        let p = provider();
        let pending = Pending { browser: "b".into(), nonce: "n".into(), verifier: "v".into(), expires_at_ms: 1 };
        let state = p.seal(&pending).unwrap();
        assert_eq!(p.open(&state).unwrap().verifier, "v");
        let mut tampered = B64.decode(&state).unwrap();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(p.open(&B64.encode(tampered)).is_none(), "a changed state does not open");
        let other = Provider::new(OidcSection { client_secret: Some("another-secret".into()), ..p.section.clone() }).unwrap();
        assert!(other.open(&state).is_none(), "another client's secret does not open it");
    }

    #[tokio::test]
    async fn unsigned_and_symmetric_tokens_are_refused_before_any_key_is_fetched() {
        let p = provider();
        // {"alg":"none","kid":"k"} . {"sub":"x"} . (no signature)
        let none = format!("{}.{}.", B64.encode(br#"{"alg":"none","kid":"k"}"#), B64.encode(br#"{"sub":"x"}"#));
        assert!(matches!(p.validate(&none, None).await, Err(ApiError::Unauthorized(_))));
        let hs256 = format!("{}.{}.c2ln", B64.encode(br#"{"alg":"HS256","kid":"k"}"#), B64.encode(br#"{"sub":"x"}"#));
        let refused = p.validate(&hs256, None).await;
        assert!(matches!(&refused, Err(ApiError::Unauthorized(m)) if m.contains("not accepted")), "{refused:?}");
    }

    #[test]
    fn roles_come_from_a_dotted_claim() {
        let p = provider();
        let claims = serde_json::json!({"sub": "s", "preferred_username": "ana", "realm_access": {"roles": ["a", "b"]}});
        assert_eq!(p.role_names(&claims), ["a", "b"]);
        assert_eq!(p.username_of(&claims).as_deref(), Some("ana"));
        assert_eq!(p.username_of(&serde_json::json!({"sub": "s"})).as_deref(), Some("s"));
    }
}
