//! `POST /api/v1/auth/login`, `/logout`, and the TOTP second factor:
//! `/api/v1/auth/mfa/enable`, `/mfa/verify`, `/mfa/disable`.
//!
//! A failed login (and a wrong MFA code) is counted by the brute-force detector
//! in the meta group. A user with MFA gets `{mfa_required, temp_token}` from
//! login instead of a session; `mfa/verify {token, code}` then opens the session.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rand::RngCore;
use serde::Deserialize;
use serde_json::Value;
use tessera_api::command::{MetaOp, Response as Reply};
use tessera_api::http::{LoginRequest, LoginResponse, UserView, iso8601_ms};
use tessera_api::security::{MfaOutcome, SecurityOp, SecurityResponse, totp};
use tracing::warn;

use super::JsonBody;
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::services::auth::{Caller, new_token, token_hash};
use crate::services::security::{ClientIp, record_login_failure};
pub use crate::services::sign_in::LoginAnswer;
use crate::services::sign_in::{open_session, sign_in_with_password};
use crate::services::{external_users, oidc};
use crate::state::AppState;

fn client_ip(ip: &Option<Extension<ClientIp>>) -> Option<std::net::IpAddr> {
    ip.as_ref().and_then(|Extension(c)| c.0)
}

/// Checks the password (Argon2id) and opens a session stored in the meta group,
/// or, for a user with MFA, an MFA challenge answered by `mfa/verify`.
pub async fn login(
    state: State<AppState>,
    ip: Option<Extension<ClientIp>>,
    headers: axum::http::HeaderMap,
    JsonBody(req): JsonBody<LoginRequest>,
) -> Response {
    // The activity record names who tried, whether or not it worked.
    let name: String = req.username.chars().take(128).collect();
    let mut response = attempt_login(state, ip, crate::http::caller::user_agent(&headers), req).await.into_response();
    response.extensions_mut().insert(crate::services::activity::ActivityUser(name.clone()));
    response.extensions_mut().insert(crate::services::activity::ActivityDetail(name));
    response
}

async fn attempt_login(
    State(state): State<AppState>,
    ip: Option<Extension<ClientIp>>,
    user_agent: Option<String>,
    req: LoginRequest,
) -> Result<Response, ApiError> {
    let answer = sign_in_with_password(&state, client_ip(&ip), user_agent, &req.username, req.password).await?;
    Ok(Json(answer).into_response())
}

/// `GET /api/v1/auth/oidc/login`: starts an OpenID Connect sign-in (`auth.method
/// = oauth2`): 302 to the provider's authorization endpoint, with the cookie
/// that binds the sign-in to this browser.
pub async fn oidc_login(State(state): State<AppState>) -> Result<Response, ApiError> {
    let provider = state.oidc.clone().ok_or_else(oidc_off)?;
    let started = provider.begin().await?;
    let cookie = format!(
        "{}={}; Path=/api/v1/auth/oidc; Max-Age={}; HttpOnly; SameSite=Lax{}",
        oidc::LOGIN_COOKIE,
        started.cookie,
        started.cookie_max_age_secs,
        if state.config.tls.cert.is_some() { "; Secure" } else { "" }
    );
    let headers = [(axum::http::header::LOCATION, started.authorization_url), (axum::http::header::SET_COOKIE, cookie)];
    Ok((StatusCode::FOUND, headers).into_response())
}

/// What the provider sends the browser back with.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct OidcCallback {
    code: Option<String>,
    state: Option<String>,
    /// The provider's refusal (`access_denied`, ...), instead of a code.
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /api/v1/auth/oidc/callback?code=&state=`: finishes the sign-in the
/// login route started (same browser, within `login_ttl_secs`) and opens a
/// Tessera session for the provider's user, as `POST /api/v1/auth/login` does.
pub async fn oidc_callback(
    State(state): State<AppState>,
    ip: Option<Extension<ClientIp>>,
    headers: axum::http::HeaderMap,
    super::QueryParams(q): super::QueryParams<OidcCallback>,
) -> Result<Json<LoginAnswer>, ApiError> {
    let provider = state.oidc.clone().ok_or_else(oidc_off)?;
    if let Some(error) = q.error {
        return Err(ApiError::Unauthorized(format!(
            "the provider refused the sign-in: {error} {}",
            q.error_description.unwrap_or_default()
        )));
    }
    let (Some(code), Some(sign_in_state)) = (q.code, q.state) else {
        return Err(ApiError::BadRequest("the callback needs code and state".into()));
    };
    let cookie = headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == oidc::LOGIN_COOKIE)
        .map(|(_, value)| value.to_string());
    let claims = match provider.finish(&code, &sign_in_state, cookie.as_deref()).await {
        Ok(claims) => claims,
        Err(e @ ApiError::Unauthorized(_)) => {
            record_login_failure(&state, client_ip(&ip), "(openid)").await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let user = match external_users::provider_sign_in(&state, &provider, &claims).await? {
        external_users::ProviderSignIn::User(user) => *user,
        external_users::ProviderSignIn::NoRole => {
            return Err(ApiError::Forbidden(
                "the provider's user has no role claim that maps to a Tessera role (auth.oauth2.role_mapping)".into(),
            ));
        }
        external_users::ProviderSignIn::NameTaken => {
            return Err(ApiError::Conflict("a local user holds this name; it is not taken over".into()));
        }
        external_users::ProviderSignIn::NoName => return Err(ApiError::Unauthorized("the provider's ID token names no user".into())),
    };
    let user_agent = crate::http::caller::user_agent(&headers);
    Ok(Json(open_session(&state, &user, client_ip(&ip), user_agent).await?))
}

fn oidc_off() -> ApiError {
    ApiError::NotFound("OpenID Connect sign-in is off (auth.method = oauth2 with an [auth.oauth2] section)".into())
}

/// Answer of a logout.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct LoggedOut {
    success: bool,
}

/// Answer of turning MFA on: the secret to load into an authenticator.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct MfaEnabled {
    success: bool,
    /// The session that asked stays limited until the next login proves a code
    /// (where a second factor is required).
    log_in_again: bool,
    mfa_enabled: bool,
    /// Base32, as authenticator apps take it.
    secret: String,
    otpauth_uri: String,
    issuer: String,
    algorithm: String,
    digits: usize,
    period: u64,
}

/// Answer of turning MFA off.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct MfaDisabled {
    success: bool,
    mfa_enabled: bool,
}

/// Removes the caller's session: the token stops working on every router (at
/// once on this one; within the caller-cache TTL on the others).
pub async fn logout(State(state): State<AppState>, caller: Caller) -> Result<Json<LoggedOut>, ApiError> {
    let Caller::User { token_hash, .. } = caller else {
        return Err(ApiError::Unauthorized("not logged in".into()));
    };
    state.security.callers.evict(&token_hash);
    state.cluster.meta_write(MetaOp::DeleteSession { token_hash: token_hash.to_string() }).await?;
    state.security.callers.evict(&token_hash);
    Ok(Json(LoggedOut { success: true }))
}

/// The caller's own session (`GET /api/v1/auth/session`, `tessera whoami`).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct SessionView {
    pub user: UserView,
    /// Every permission the user holds, from their role.
    pub permissions: Vec<String>,
    /// Whether the session was opened with a second factor.
    pub mfa_verified: bool,
}

/// `GET /api/v1/auth/session`: who the caller is and what they may do.
pub async fn session(caller: Caller) -> Result<Json<SessionView>, ApiError> {
    let Caller::User { user, permissions, mfa_verified, .. } = caller else {
        return Err(ApiError::Unauthorized("not logged in".into()));
    };
    let mut permissions = permissions.to_vec();
    permissions.sort();
    Ok(Json(SessionView { user: UserView::from(&*user), permissions, mfa_verified }))
}

/// The development code, only when the router runs in development mode.
fn dev_code(state: &AppState) -> Option<String> {
    let s = &state.config.security;
    (s.dev_mode && !s.mfa_dev_code.is_empty()).then(|| s.mfa_dev_code.clone())
}

async fn security_write(state: &AppState, op: SecurityOp) -> Result<Reply, ApiError> {
    Ok(state.cluster.meta_write(MetaOp::Security(op)).await?)
}

/// An MFA step's outcome; any other reply (a rejection too) is unexpected.
async fn mfa_write(state: &AppState, op: SecurityOp) -> Result<MfaOutcome, ApiError> {
    let reply = typed::pick(security_write(state, op).await?, shape!(Reply::Security))?;
    typed::pick(reply, shape!(SecurityResponse::Mfa))
}

/// `POST /api/v1/auth/mfa/enable`: a fresh 160-bit secret; MFA is active at once
/// (the next login asks for a code). 409 when MFA is already on.
pub async fn mfa_enable(State(state): State<AppState>, caller: Caller) -> Result<Json<MfaEnabled>, ApiError> {
    let Caller::User { user, token_hash, .. } = caller else {
        return Err(ApiError::Unauthorized("MFA needs a logged-in user".into()));
    };
    let mut raw = [0u8; 20];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let secret = totp::encode_secret(&raw);
    match security_write(&state, SecurityOp::EnableMfa { user_id: user.id.clone(), secret_b32: secret.clone() }).await? {
        Reply::Applied(true) => {}
        Reply::Rejected(r) => return Err(r.into()),
        other => return Err(ApiError::unexpected(other)),
    }
    state.security.callers.evict(&token_hash);
    let issuer = &state.config.security.mfa_issuer;
    Ok(Json(MfaEnabled {
        success: true,
        // Where a second factor is required, a session opened by the password
        // alone stays limited: the next login proves the authenticator with a code.
        log_in_again: state.config.auth.mfa_required,
        mfa_enabled: true,
        otpauth_uri: totp::otpauth_uri(&secret, issuer, &user.username),
        secret,
        issuer: issuer.clone(),
        algorithm: "SHA1".into(),
        digits: totp::DIGITS,
        period: totp::STEP_SECS,
    }))
}

/// Body of `POST /api/v1/auth/mfa/verify`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct VerifyRequest {
    /// The temporary token the login answered.
    #[schemars(pattern(r"\S"))]
    token: String,
    /// Six digits (a string; a number is taken leniently).
    #[schemars(schema_with = "mfa_code")]
    code: Value,
}

fn mfa_code(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [{"type": "string", "pattern": "^[0-9]{6}$"}, {"type": "integer", "minimum": 0, "maximum": 999999}]})
}

/// Accepts the code as a string (or, leniently, a number; leading zeros then lost).
fn code_of(v: &Value) -> Result<String, ApiError> {
    let code = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) if n.is_u64() => format!("{:0width$}", n.as_u64().unwrap_or(0), width = totp::DIGITS),
        _ => return Err(ApiError::BadRequest("code must be a 6-digit string".into())),
    };
    if code.len() != totp::DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::BadRequest("code must be a 6-digit string".into()));
    }
    Ok(code)
}

/// `POST /api/v1/auth/mfa/verify {token, code}` (public): completes an MFA login.
pub async fn mfa_verify(
    State(state): State<AppState>,
    ip: Option<Extension<ClientIp>>,
    headers: axum::http::HeaderMap,
    JsonBody(req): JsonBody<VerifyRequest>,
) -> Result<Json<LoginResponse>, ApiError> {
    if req.token.trim().is_empty() {
        return Err(ApiError::BadRequest("token (the temporary token from login) is required".into()));
    }
    let code = code_of(&req.code)?;
    let session_token = new_token();
    let security = &state.config.security;
    let op = SecurityOp::CompleteMfaLogin {
        challenge_hash: token_hash(req.token.trim()),
        code,
        dev_code: dev_code(&state),
        session_token_hash: token_hash(&session_token),
        session_ttl_ms: (state.config.auth.session_timeout as i64) * 1000,
        max_failures: security.mfa_max_attempts.max(1),
        client_ip: client_ip(&ip).map(|i| i.to_string()),
        user_agent: crate::http::caller::user_agent(&headers),
    };
    let outcome = mfa_write(&state, op).await?;
    match outcome {
        MfaOutcome::Verified { user, session: Some(session) } => Ok(Json(LoginResponse {
            token: session_token,
            user: UserView::from(&user),
            expires_at: iso8601_ms(session.expires_at_ms),
            mfa_enrollment_required: false,
        })),
        MfaOutcome::WrongCode { username, attempts_left } => {
            record_login_failure(&state, client_ip(&ip), &username).await;
            Err(ApiError::Unauthorized(if attempts_left == 0 {
                "invalid MFA code; too many wrong codes, log in again".into()
            } else {
                format!("invalid MFA code ({attempts_left} attempts left)")
            }))
        }
        MfaOutcome::Replayed { username } => {
            warn!(user = %username, "SECURITY: an already used MFA code was presented again");
            record_login_failure(&state, client_ip(&ip), &username).await;
            Err(ApiError::Unauthorized("this MFA code was already used; wait for the next one".into()))
        }
        MfaOutcome::NoChallenge | MfaOutcome::NotEnabled | MfaOutcome::Verified { session: None, .. } => {
            Err(ApiError::Unauthorized("unknown or expired temporary token; log in again".into()))
        }
    }
}

/// Body of `POST /api/v1/auth/mfa/disable`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct DisableRequest {
    code: Value,
}

/// `POST /api/v1/auth/mfa/disable {code}`: turns MFA off after a current code.
pub async fn mfa_disable(
    State(state): State<AppState>,
    caller: Caller,
    ip: Option<Extension<ClientIp>>,
    JsonBody(req): JsonBody<DisableRequest>,
) -> Result<Response, ApiError> {
    let Caller::User { user, token_hash, .. } = caller else {
        return Err(ApiError::Unauthorized("MFA needs a logged-in user".into()));
    };
    if state.config.auth.mfa_required {
        return Err(ApiError::Forbidden("this cluster requires a second factor (auth.mfa_required): it cannot be turned off".into()));
    }
    let code = code_of(&req.code)?;
    let op = SecurityOp::DisableMfa { user_id: user.id.clone(), code, dev_code: dev_code(&state) };
    let outcome = mfa_write(&state, op).await?;
    state.security.callers.evict(&token_hash);
    match outcome {
        MfaOutcome::Verified { .. } => Ok((StatusCode::OK, Json(MfaDisabled { success: true, mfa_enabled: false })).into_response()),
        MfaOutcome::NotEnabled | MfaOutcome::NoChallenge => Err(ApiError::BadRequest("MFA is not enabled".into())),
        MfaOutcome::WrongCode { username, .. } | MfaOutcome::Replayed { username } => {
            record_login_failure(&state, client_ip(&ip), &username).await;
            Err(ApiError::Unauthorized("invalid or already used MFA code".into()))
        }
    }
}
