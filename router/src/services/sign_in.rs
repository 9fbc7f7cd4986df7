//! Signing in with a name and password: the local user's Argon2id hash (or the
//! directory's bind), lockout and the brute-force detector, then a session in
//! the meta group or, for a user with MFA, the challenge its code answers.
//! `POST /api/v1/auth/login` and the PostgreSQL wire listener both sign in here.

use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, now_ms};
use tessera_api::http::{LoginRequest, LoginResponse, UserView, iso8601_ms};
use tessera_api::meta::{SessionRecord, UserRecord};
use tessera_api::security::SecurityOp;

use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::services::auth::{new_token, token_hash, users_exist, verify_password};
use crate::services::external_users;
use crate::services::security::record_login_failure;
use crate::state::AppState;

/// A sign-in with a name and password (a local user, or the directory's),
/// with lockout, rate limits and the detectors as over `POST
/// /api/v1/auth/login`: a session, or the MFA challenge its code answers. The
/// PostgreSQL wire listener signs its clients in here too.
pub async fn sign_in_with_password(
    state: &AppState,
    ip: Option<std::net::IpAddr>,
    user_agent: Option<String>,
    username: &str,
    password: String,
) -> Result<LoginAnswer, ApiError> {
    let req = LoginRequest { username: username.to_string(), password };
    // With a directory or a provider, their users need no local user to exist first.
    if state.directory.is_none() && state.oidc.is_none() && !users_exist(state).await? {
        return Err(ApiError::NotProvisioned);
    }
    let answer = state.cluster.meta_read(MetaQuery::UserByName { username: req.username.clone() }).await?;
    // A reply of another shape is reported by its variant only: a user record holds a password hash.
    let user = typed::pick(answer, shape!(MetaQueryResult::User))?;
    let user = match (state.directory.clone(), user) {
        // A directory user, or a name only the directory may know.
        (Some(directory), user) if user.as_ref().is_none_or(crate::services::external_roles::is_external) => {
            match external_users::directory_sign_in(state, &directory, &req.username, &req.password).await? {
                external_users::DirectorySignIn::User(user) => *user,
                external_users::DirectorySignIn::Refused => {
                    record_login_failure(state, ip, &req.username).await;
                    return Err(ApiError::Unauthorized("invalid username or password".into()));
                }
                external_users::DirectorySignIn::NoRole => {
                    return Err(ApiError::Forbidden(format!(
                        "the directory knows {} but none of their groups maps to a Tessera role (auth.ldap.role_mapping)",
                        req.username
                    )));
                }
            }
        }
        // A local user while the directory is the only way in.
        (Some(directory), Some(_)) if !directory.allows_local_users() => {
            record_login_failure(state, ip, &req.username).await;
            return Err(ApiError::Unauthorized("invalid username or password (local users are off: auth.ldap.allow_local_users)".into()));
        }
        // Local users while a provider is the way in.
        (None, _) if state.oidc.as_ref().is_some_and(|p| !p.allows_local_users()) => {
            record_login_failure(state, ip, &req.username).await;
            return Err(ApiError::Unauthorized(
                "invalid username or password (local users are off: auth.oauth2.allow_local_users; sign in at /api/v1/auth/oidc/login)"
                    .into(),
            ));
        }
        (_, user) => verify_local(state, ip, &req.username, req.password, user).await?,
    };
    open_session(state, &user, ip, user_agent).await
}

/// A session for `user` who proved who they are, or (with MFA on) the challenge
/// their code answers.
pub async fn open_session(
    state: &AppState,
    user: &UserRecord,
    ip: Option<std::net::IpAddr>,
    user_agent: Option<String>,
) -> Result<LoginAnswer, ApiError> {
    let security = &state.config.security;
    if user.mfa_enabled {
        let temp = new_token();
        let ttl_ms = (security.mfa_challenge_secs.max(1) * 1000) as i64;
        let op = SecurityOp::BeginMfaLogin { challenge_hash: token_hash(&temp), user_id: user.id.clone(), ttl_ms };
        state.cluster.meta_write(MetaOp::Security(op)).await?;
        return Ok(LoginAnswer::MfaChallenge(MfaChallenge {
            mfa_required: true,
            temp_token: temp,
            expires_at: iso8601_ms(now_ms() + ttl_ms),
            message: "send the 6-digit code from your authenticator to POST /api/v1/auth/mfa/verify {token, code}".into(),
        }));
    }
    let token = new_token();
    let now = now_ms();
    let expires_at_ms = now + (state.config.auth.session_timeout as i64) * 1000;
    let client_ip = ip.map(|i| i.to_string());
    let session = SessionRecord { user_id: user.id.clone(), created_at_ms: now, expires_at_ms, client_ip, user_agent, mfa_verified: false };
    state.cluster.meta_write(MetaOp::CreateSession { token_hash: token_hash(&token), session }).await?;
    let mfa_enrollment_required = state.config.auth.mfa_required;
    let session = LoginResponse { token, user: UserView::from(user), expires_at: iso8601_ms(expires_at_ms), mfa_enrollment_required };
    Ok(LoginAnswer::Session(session))
}

/// A local user's password checked (against a dummy hash for an unknown name,
/// so timing does not tell them apart); a failure feeds the detector.
async fn verify_local(
    state: &AppState,
    ip: Option<std::net::IpAddr>,
    username: &str,
    password: String,
    user: Option<UserRecord>,
) -> Result<UserRecord, ApiError> {
    let phc = user.as_ref().map(|u| u.password_hash.clone());
    let ok = tokio::task::spawn_blocking(move || match phc {
        Some(phc) => verify_password(&password, &phc),
        None => {
            let _ = crate::services::auth::hash_password(&password);
            false
        }
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    match (ok, user) {
        (true, Some(u)) => Ok(u),
        _ => {
            record_login_failure(state, ip, username).await;
            Err(ApiError::Unauthorized("invalid username or password".into()))
        }
    }
}

/// The answer of a login: a session, or (for a user with MFA) a challenge.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum LoginAnswer {
    Session(LoginResponse),
    MfaChallenge(MfaChallenge),
}

/// A login's second step: the code from the user's authenticator is sent
/// with `temp_token` to `POST /api/v1/auth/mfa/verify`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct MfaChallenge {
    pub mfa_required: bool,
    pub temp_token: String,
    /// When the challenge expires (ISO 8601 UTC).
    pub expires_at: String,
    pub message: String,
}
