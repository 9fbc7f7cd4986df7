//! Users, passwords and tokens.
//!
//! - Passwords are Argon2id hashes (the `argon2` crate's defaults).
//! - An access token is an HS256 JWT (`JWT_SECRET`) with `sub` (the user),
//!   `sid` (the session), `aud`/`iss` `tessera-meetings`, `exp`, `nbf`, `iat`;
//!   every request checks the signature, the times and the audience, then
//!   that its session is not revoked (one read: logout and a reused refresh
//!   token end the session's access tokens at once, on every instance).
//! - A refresh token is `<id>.<secret>`; only the secret's SHA-256 is kept.
//!   Each use rotates it: the old one is marked used and a new one of the
//!   same session (the token family) is issued. Presenting a used one again
//!   is a theft signal, and revokes the whole session.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::db::Db;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL, role TEXT NOT NULL, password_hash TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, revoked BOOLEAN NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS refresh_tokens (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, user_id TEXT NOT NULL, token_hash TEXT NOT NULL, used BOOLEAN NOT NULL, expires_at BIGINT NOT NULL)",
];

/// The audience and issuer of the application's access tokens.
pub const AUDIENCE: &str = "tessera-meetings";

/// A user as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct User {
    pub id: String,
    pub email: String,
    pub display_name: String,
    pub role: String,
}

impl User {
    fn from_row(row: &serde_json::Map<String, Value>) -> Self {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        User { id: text("id"), email: text("email"), display_name: text("display_name"), role: text("role").to_lowercase() }
    }

    pub fn is_admin(&self) -> bool {
        self.role == "admin"
    }
}

/// The signed-in caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub session_id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    sid: String,
    aud: String,
    iss: String,
    exp: u64,
    nbf: u64,
    iat: u64,
}

/// The answer to a login or a refresh.
#[derive(Debug, Serialize)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: String,
    pub token_type: &'static str,
    pub expires_in: u64,
    pub user: User,
    /// The application has no second factor of its own: always false.
    pub mfa_required: bool,
}

/// Body of `POST /api/v1/auth/register`.
#[derive(Debug, Deserialize)]
pub struct Registration {
    pub email: String,
    pub password: String,
    pub display_name: String,
}

/// The shortest password accepted.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Checks an email address's shape: one `@`, a dot in the domain, no spaces.
pub fn valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else { return false };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A display name: 1–100 characters, not only spaces, no control characters.
pub fn valid_display_name(name: &str) -> bool {
    !name.trim().is_empty() && name.chars().count() <= 100 && !name.chars().any(char::is_control)
}

fn hash_password(password: &str) -> AppResult<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AppError::Internal(format!("hashing a password: {e}")))
}

fn password_matches(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// A hash checked when the email is unknown, so a login takes as long either way.
fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| hash_password("not a password of anyone").unwrap_or_default())
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Registers a user (role `user`); a taken email answers 409.
pub async fn register(db: &Db, r: Registration) -> AppResult<User> {
    let email = r.email.trim().to_lowercase();
    if !valid_email(&email) {
        return Err(AppError::Validation("email: not a valid email address".into()));
    }
    if r.password.chars().count() < MIN_PASSWORD_LEN || r.password.len() > 1024 {
        return Err(AppError::Validation(format!("password: {MIN_PASSWORD_LEN} to 1024 characters")));
    }
    if !valid_display_name(&r.display_name) {
        return Err(AppError::Validation("display_name: 1 to 100 characters".into()));
    }
    let user = User { id: uuid::Uuid::new_v4().to_string(), email, display_name: r.display_name.trim().to_string(), role: "user".into() };
    let hash = hash_password(&r.password)?;
    let inserted = db
        .sql(
            "INSERT INTO users (id, email, display_name, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (email) DO NOTHING",
            &[json!(user.id), json!(user.email), json!(user.display_name), json!(user.role), json!(hash), json!(now_ms())],
        )
        .await?;
    if inserted.affected == 0 {
        return Err(AppError::Conflict(format!("a user with email {} exists", user.email)));
    }
    // Organizations that invited this email before it registered.
    crate::orgs::join_invited(db, &user.id, &user.email).await?;
    Ok(user)
}

/// Signs a user in: a new session, its first refresh token and an access token.
pub async fn login(state: &AppState, email: &str, password: &str) -> AppResult<Tokens> {
    let email = email.trim().to_lowercase();
    let rows = state.db.sql("SELECT id, email, display_name, role, password_hash FROM users WHERE email = $1", &[json!(email)]).await?;
    let row = rows.first();
    let hash = row.as_ref().and_then(|r| r.get("password_hash")).and_then(Value::as_str).unwrap_or_else(|| dummy_hash()).to_string();
    let password = password.to_string();
    let matches = tokio::task::spawn_blocking(move || password_matches(&password, &hash)).await.unwrap_or(false);
    let (Some(row), true) = (row, matches) else {
        return Err(AppError::Unauthorized("wrong email or password".into()));
    };
    let user = User::from_row(&row);
    let session = uuid::Uuid::new_v4().to_string();
    state
        .db
        .sql(
            "INSERT INTO sessions (id, user_id, revoked, created_at) VALUES ($1, $2, FALSE, $3)",
            &[json!(session), json!(user.id), json!(now_ms())],
        )
        .await?;
    issue(state, user, &session).await
}

/// A new refresh token of `session` and an access token.
async fn issue(state: &AppState, user: User, session: &str) -> AppResult<Tokens> {
    let id = uuid::Uuid::new_v4().to_string();
    let secret = random_hex(32);
    let expires = now_ms() + (state.config.refresh_ttl_secs as i64) * 1000;
    state
        .db
        .sql(
            "INSERT INTO refresh_tokens (id, session_id, user_id, token_hash, used, expires_at) VALUES ($1, $2, $3, $4, FALSE, $5)",
            &[json!(id), json!(session), json!(user.id), json!(sha256_hex(&secret)), json!(expires)],
        )
        .await?;
    Ok(Tokens {
        access_token: access_token(&state.config.jwt_secret, &user.id, session, state.config.access_ttl_secs)?,
        refresh_token: format!("{id}.{secret}"),
        token_type: "Bearer",
        expires_in: state.config.access_ttl_secs,
        user,
        mfa_required: false,
    })
}

fn access_token(secret: &str, user: &str, session: &str, ttl_secs: u64) -> AppResult<String> {
    let now = (now_ms() / 1000) as u64;
    let claims = Claims {
        sub: user.into(),
        sid: session.into(),
        aud: AUDIENCE.into(),
        iss: AUDIENCE.into(),
        exp: now + ttl_secs,
        nbf: now,
        iat: now,
    };
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret.as_bytes()))
        .map_err(|e| AppError::Internal(format!("signing a token: {e}")))
}

fn verify_access_token(secret: &str, token: &str) -> AppResult<Claims> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[AUDIENCE]);
    validation.validate_nbf = true;
    validation.leeway = 5;
    validation.set_required_spec_claims(&["exp", "nbf", "aud", "iss", "sub"]);
    jsonwebtoken::decode::<Claims>(token, &DecodingKey::from_secret(secret.as_bytes()), &validation)
        .map(|d| d.claims)
        .map_err(|e| AppError::Unauthorized(format!("invalid access token: {e}")))
}

async fn revoke_session(db: &Db, session: &str) -> AppResult<()> {
    db.sql("UPDATE sessions SET revoked = TRUE WHERE id = $1", &[json!(session)]).await?;
    Ok(())
}

/// Rotates a refresh token (see the module documentation).
pub async fn refresh(state: &AppState, presented: &str) -> AppResult<Tokens> {
    let invalid = || AppError::Unauthorized("invalid refresh token".into());
    let (id, secret) = presented.split_once('.').ok_or_else(invalid)?;
    if uuid::Uuid::parse_str(id).is_err() {
        return Err(invalid());
    }
    let rows =
        state.db.sql("SELECT session_id, user_id, token_hash, used, expires_at FROM refresh_tokens WHERE id = $1", &[json!(id)]).await?;
    let row = rows.first().ok_or_else(invalid)?;
    if row.get("token_hash").and_then(Value::as_str) != Some(sha256_hex(secret).as_str()) {
        return Err(invalid());
    }
    let session = row.get("session_id").and_then(Value::as_str).unwrap_or_default().to_string();
    if row.get("used").and_then(Value::as_bool) == Some(true) {
        revoke_session(&state.db, &session).await?;
        tracing::warn!(session, "a used refresh token was presented again: its session is revoked");
        return Err(AppError::Unauthorized("refresh token already used: the session is revoked, sign in again".into()));
    }
    if row.get("expires_at").and_then(Value::as_i64).unwrap_or(0) <= now_ms() {
        return Err(AppError::Unauthorized("refresh token expired".into()));
    }
    let caller = session_user(&state.db, &session).await?;
    // Only one of two concurrent uses wins; the other is a reuse.
    let taken = state.db.sql("UPDATE refresh_tokens SET used = TRUE WHERE id = $1 AND used = FALSE", &[json!(id)]).await?;
    if taken.affected == 0 {
        revoke_session(&state.db, &session).await?;
        return Err(AppError::Unauthorized("refresh token already used: the session is revoked, sign in again".into()));
    }
    issue(state, caller.user, &session).await
}

/// Ends the caller's session: its access and refresh tokens stop working.
pub async fn logout(db: &Db, caller: &Caller) -> AppResult<()> {
    revoke_session(db, &caller.session_id).await
}

/// The user of a live session.
async fn session_user(db: &Db, session: &str) -> AppResult<Caller> {
    let rows = db
        .sql(
            "SELECT u.id AS id, u.email AS email, u.display_name AS display_name, u.role AS role, s.revoked AS revoked FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1",
            &[json!(session)],
        )
        .await?;
    let row = rows.first().ok_or_else(|| AppError::Unauthorized("the session does not exist (the account may be deleted)".into()))?;
    if row.get("revoked").and_then(Value::as_bool) != Some(false) {
        return Err(AppError::Unauthorized("the session has ended; sign in again".into()));
    }
    Ok(Caller { user: User::from_row(&row), session_id: session.to_string() })
}

/// The caller of `token`: a valid access token of a live session.
pub async fn authenticate(state: &AppState, token: &str) -> AppResult<Caller> {
    let claims = verify_access_token(&state.config.jwt_secret, token)?;
    let caller = session_user(&state.db, &claims.sid).await?;
    if caller.user.id != claims.sub {
        return Err(AppError::Unauthorized("invalid access token".into()));
    }
    Ok(caller)
}

/// Body of `PUT /api/v1/users/me`: either field may be left out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileUpdate {
    pub display_name: Option<String>,
    pub email: Option<String>,
}

/// Changes the caller's display name and email.
pub async fn update_profile(db: &Db, caller: &Caller, u: ProfileUpdate) -> AppResult<User> {
    let mut user = caller.user.clone();
    if let Some(name) = u.display_name {
        if !valid_display_name(&name) {
            return Err(AppError::Validation("display_name: 1 to 100 characters".into()));
        }
        user.display_name = name.trim().to_string();
    }
    if let Some(email) = u.email {
        let email = email.trim().to_lowercase();
        if !valid_email(&email) {
            return Err(AppError::Validation("email: not a valid email address".into()));
        }
        if email != user.email {
            let taken = db.sql("SELECT id FROM users WHERE email = $1", &[json!(email)]).await?;
            if !taken.rows.is_empty() {
                return Err(AppError::Conflict(format!("a user with email {email} exists")));
            }
        }
        user.email = email;
    }
    db.sql("UPDATE users SET display_name = $2, email = $3 WHERE id = $1", &[json!(user.id), json!(user.display_name), json!(user.email)])
        .await?;
    Ok(user)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = match header.and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer "))) {
            Some(t) => t.trim().to_string(),
            // Browsers cannot set headers on a WebSocket: `?access_token=` there.
            None => query_token(parts.uri.query()).ok_or_else(|| AppError::Unauthorized("missing bearer token".into()))?,
        };
        authenticate(state, &token).await
    }
}

fn query_token(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == "access_token" || k == "token").map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn an_access_token_is_checked_for_signature_audience_and_time() {
        let token = access_token(SECRET, "u1", "s1", 60).unwrap();
        let claims = verify_access_token(SECRET, &token).unwrap();
        assert_eq!((claims.sub.as_str(), claims.sid.as_str()), ("u1", "s1"));
        assert!(verify_access_token("another secret of forty-eight characters at least!!", &token).is_err());
        let now = (now_ms() / 1000) as u64;
        let sign =
            |c: &Claims| jsonwebtoken::encode(&Header::new(Algorithm::HS256), c, &EncodingKey::from_secret(SECRET.as_bytes())).unwrap();
        let base =
            Claims { sub: "u".into(), sid: "s".into(), aud: AUDIENCE.into(), iss: AUDIENCE.into(), exp: now + 60, nbf: now, iat: now };
        assert!(verify_access_token(SECRET, &sign(&Claims { exp: now - 60, ..base })).is_err(), "expired");
        let base = Claims {
            sub: "u".into(),
            sid: "s".into(),
            aud: AUDIENCE.into(),
            iss: AUDIENCE.into(),
            exp: now + 600,
            nbf: now + 300,
            iat: now,
        };
        assert!(verify_access_token(SECRET, &sign(&base)).is_err(), "not yet valid");
        let other = Claims { nbf: now, aud: "another-app".into(), ..base };
        assert!(verify_access_token(SECRET, &sign(&other)).is_err(), "wrong audience");
        let none = format!("{}.{}.", base64_url(r#"{"alg":"none","typ":"JWT"}"#), base64_url(r#"{"sub":"u"}"#));
        assert!(verify_access_token(SECRET, &none).is_err(), "alg none");
    }

    fn base64_url(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    }

    #[test]
    fn passwords_are_argon2id_hashes() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(password_matches("correct horse", &hash));
        assert!(!password_matches("wrong horse", &hash));
        assert!(!password_matches("x", "not a hash"));
    }

    #[test]
    fn emails_and_names_are_checked() {
        assert!(valid_email("ada@example.com"));
        for bad in ["", "ada", "ada@", "@example.com", "ada@example", "a da@example.com", "ada@.com", "a@b@c.com"] {
            assert!(!valid_email(bad), "{bad}");
        }
        assert!(valid_display_name("Ada"));
        assert!(!valid_display_name("   ") && !valid_display_name("a\u{0}b") && !valid_display_name(&"x".repeat(101)));
    }
}
