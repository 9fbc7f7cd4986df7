//! Local authentication: Argon2id passwords, random 256-bit session tokens stored
//! in the meta group only as SHA-256 hashes, and who a request's token names
//! ([`resolve`], which the HTTP layer's `Caller` extractor calls). Resolved
//! callers are cached per router for `security.session_cache_ttl_ms`
//! ([`crate::services::sessions::CallerCache`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use sha2::{Digest, Sha256};
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response, now_ms};
use tessera_api::meta::{Role, UserRecord};
use tracing::{info, warn};

use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::state::AppState;

/// Argon2id with the spec's parameters: 19456 KiB, t=2, p=1, 32-byte output.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19_456, 2, 1, Some(32)).expect("valid argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes a password into a PHC string with a random 16-byte salt.
pub fn hash_password(password: &str) -> Result<String, ApiError> {
    let mut salt = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(argon2().hash_password(password.as_bytes(), &salt).map_err(|e| ApiError::Internal(e.to_string()))?.to_string())
}

/// Iterations of PBKDF2 in a SCRAM-SHA-256 verifier (PostgreSQL's default).
const SCRAM_ITERATIONS: usize = 4096;

/// A new password's stored forms: its Argon2id hash (sign-ins that present
/// the password check it) and its SCRAM-SHA-256 verifier (PostgreSQL clients
/// prove the password against it without sending it). Slow: call it off the
/// async workers.
pub fn password_secrets(password: &str) -> Result<(String, String), ApiError> {
    Ok((hash_password(password)?, scram_verifier(password)))
}

/// A SCRAM-SHA-256 verifier of `password` with a random salt, in PostgreSQL's
/// text form.
pub fn scram_verifier(password: &str) -> String {
    use base64::Engine as _;
    use pgwire::api::auth::sasl::scram::{ScramSecret, gen_salted_password};
    let mut salt = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    let salted = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
    let ScramSecret::Verifier { stored_key, server_key, .. } =
        ScramSecret::verifier_from_salted_password(salt.to_vec(), salted, SCRAM_ITERATIONS)
    else {
        unreachable!("a verifier is derived from a salted password")
    };
    let b64 = base64::engine::general_purpose::STANDARD;
    format!("SCRAM-SHA-256${SCRAM_ITERATIONS}:{}${}:{}", b64.encode(salt), b64.encode(stored_key), b64.encode(server_key))
}

/// A stored SCRAM-SHA-256 verifier read back; `None` if it is not one.
pub fn parse_scram_verifier(text: &str) -> Option<pgwire::api::auth::sasl::scram::ScramSecret> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let rest = text.strip_prefix("SCRAM-SHA-256$")?;
    let (head, keys) = rest.split_once('$')?;
    let (iterations, salt) = head.split_once(':')?;
    let (stored, server) = keys.split_once(':')?;
    Some(pgwire::api::auth::sasl::scram::ScramSecret::Verifier {
        salt: b64.decode(salt).ok()?,
        iterations: iterations.parse().ok()?,
        stored_key: b64.decode(stored).ok()?,
        server_key: b64.decode(server).ok()?,
    })
}

/// Checks a password against a stored PHC string.
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok())
}

/// A fresh random 256-bit token, hex encoded.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub use crate::services::ids::new_id;
pub use crate::services::sessions::{Caller, SessionClient};

/// The hex SHA-256 of a token: the only form in which tokens are stored.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether any user exists (cached once true).
pub async fn users_exist(state: &AppState) -> Result<bool, ApiError> {
    if state.users_exist.load(Ordering::Relaxed) {
        return Ok(true);
    }
    let users = typed::pick(state.cluster.meta_read(MetaQuery::UserCount).await?, shape!(MetaQueryResult::UserCount))?;
    if users > 0 {
        state.users_exist.store(true, Ordering::Relaxed);
    }
    Ok(users > 0)
}

/// A user's permissions: those of the built-in role plus those of each custom role.
async fn permissions_of(state: &AppState, user: &UserRecord) -> Result<Vec<String>, ApiError> {
    let mut perms: Vec<String> = user.role.permissions().into_iter().map(str::to_string).collect();
    for name in &user.roles {
        if let MetaQueryResult::Role(Some(r)) = state.cluster.meta_read(MetaQuery::Role { name: name.clone() }).await? {
            perms.extend(r.permissions.into_iter().filter(|p| !p.starts_with("manage:")));
        }
    }
    perms.sort();
    perms.dedup();
    Ok(perms)
}

/// What a request presents to be recognized.
pub struct Presented<'a> {
    /// Its bearer token (header, or `?token=` of a WebSocket upgrade).
    pub token: Option<String>,
    /// The client it comes from, and its User-Agent.
    pub client: SessionClient,
    pub ip: Option<std::net::IpAddr>,
    /// A read (`GET`): what open-bootstrap mode serves anonymously.
    pub read_only: bool,
    pub path: &'a str,
}

/// Who `presented` is: the caller its token's session names (cached), or
/// `Bootstrap` for an anonymous read while no user exists in open-bootstrap
/// mode; 401 for a missing, expired or orphaned token, 503 before the first user.
pub async fn resolve(state: &AppState, presented: Presented<'_>) -> Result<Caller, ApiError> {
    // With a directory or a provider, users exist as soon as they sign in.
    let external = state.directory.is_some() || state.oidc.is_some();
    if !external && !users_exist(state).await? {
        if state.config.auth.open_bootstrap && presented.read_only {
            warn!(path = %presented.path, "SECURITY: serving an anonymous read in open-bootstrap mode (no users exist)");
            return Ok(Caller::Bootstrap);
        }
        return Err(ApiError::NotProvisioned);
    }
    let token = presented.token.ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
    let hash = token_hash(&token);
    let ip = presented.ip;
    let callers = &state.security.callers;
    let now_using = presented.client;
    if let Some(mut caller) = callers.get(&hash) {
        if let Caller::User { client_ip, .. } = &mut caller {
            *client_ip = ip;
        }
        check_session_binding(state, &caller, &now_using).await?;
        return Ok(caller);
    }
    // A provider's token (a JWT: three dot-separated parts), where accepted.
    if let Some(provider) = state.oidc.as_ref().filter(|p| p.accepts_bearer_tokens())
        && token.split('.').count() == 3
    {
        return provider_caller(state, provider, &token, hash, ip).await;
    }
    let session = match state.cluster.meta_read(MetaQuery::Session { token_hash: hash.clone() }).await? {
        MetaQueryResult::Session(Some(s)) => s,
        _ => return Err(ApiError::Unauthorized("invalid or expired token".into())),
    };
    match state.cluster.meta_read(MetaQuery::UserById { id: session.user_id }).await? {
        MetaQueryResult::User(Some(mut user)) => {
            if let Some(directory) = &state.directory {
                crate::services::external_users::directory_recheck(state, directory, &mut user).await?;
            }
            if !state.config.rbac.enabled {
                // `rbac.enabled = false`: every authenticated user acts as an admin.
                user.role = Role::Admin;
            }
            let permissions = permissions_of(state, &user).await?;
            let opened_by = SessionClient { ip: session.client_ip.clone(), agent: session.user_agent.clone() };
            let caller = Caller::User {
                user: Arc::new(user),
                token_hash: hash.as_str().into(),
                permissions: permissions.into(),
                client_ip: ip,
                mfa_verified: session.mfa_verified,
                opened_by: Arc::new(opened_by),
            };
            callers.insert(hash, caller.clone(), session.expires_at_ms);
            check_session_binding(state, &caller, &now_using).await?;
            Ok(caller)
        }
        _ => Err(ApiError::Unauthorized("the token's user no longer exists".into())),
    }
}

/// The caller a provider's token names: checked ([`crate::services::oidc::Provider::validate`]),
/// signed in as its user record, cached until the token expires.
async fn provider_caller(
    state: &AppState,
    provider: &crate::services::oidc::Provider,
    token: &str,
    hash: String,
    ip: Option<std::net::IpAddr>,
) -> Result<Caller, ApiError> {
    use crate::services::external_users::{ProviderSignIn as SignIn, provider_sign_in as sign_in};
    let claims = provider.validate(token, None).await?;
    let mut user = match sign_in(state, provider, &claims).await? {
        SignIn::User(user) => *user,
        SignIn::NoRole => {
            return Err(ApiError::Forbidden("none of the token's role claims maps to a Tessera role (auth.oauth2.role_mapping)".into()));
        }
        SignIn::NameTaken => return Err(ApiError::Unauthorized("the token names a user who signs in another way".into())),
        SignIn::NoName => return Err(ApiError::Unauthorized("the token names no user".into())),
    };
    if !state.config.rbac.enabled {
        user.role = Role::Admin;
    }
    let permissions = permissions_of(state, &user).await?;
    let expires_at_ms = claims["exp"].as_i64().unwrap_or(0).saturating_mul(1000);
    // The provider authenticated the holder (with its own second factor, where it asks one).
    let caller = Caller::User {
        user: Arc::new(user),
        token_hash: hash.as_str().into(),
        permissions: permissions.into(),
        client_ip: ip,
        mfa_verified: true,
        opened_by: Arc::default(),
    };
    state.security.callers.insert(hash, caller.clone(), expires_at_ms);
    Ok(caller)
}

/// Spec 02's `session_hijacking`: a token used from another address, or by
/// another client (User-Agent), than the one its session was opened from.
/// Addresses are compared when both are known (a client behind one NAT
/// gateway keeps one address); a session that recorded no client is not
/// checked. By `security.session_binding`: `alert` (default) raises the alert
/// (high; once per session and new client a minute) and serves the
/// request, `end` also ends the session (401), `off` checks nothing.
pub async fn check_session_binding(state: &AppState, caller: &Caller, now: &SessionClient) -> Result<(), ApiError> {
    let Caller::User { user, token_hash, opened_by, .. } = caller else { return Ok(()) };
    let policy = state.config.security.session_binding.as_str();
    if policy == "off" {
        return Ok(());
    }
    let moved = matches!((&opened_by.ip, &now.ip), (Some(a), Some(b)) if a != b);
    let other_client = opened_by.agent.is_some() && opened_by.agent != now.agent;
    if !moved && !other_client {
        return Ok(());
    }
    let shown =
        |c: &SessionClient| format!("{} ({})", c.ip.as_deref().unwrap_or("unknown address"), c.agent.as_deref().unwrap_or("no User-Agent"));
    let message = format!("{}'s session opened from {} is used from {}", user.username, shown(opened_by), shown(now));
    let dedupe = format!("session_hijacking:{token_hash}:{}:{}", now.ip.as_deref().unwrap_or(""), now.agent.as_deref().unwrap_or(""));
    crate::services::security::raise_session_hijacking(state, caller, &message, dedupe);
    if policy == "end" {
        state.security.callers.evict(token_hash);
        state.cluster.meta_write(MetaOp::DeleteSession { token_hash: token_hash.to_string() }).await?;
        return Err(ApiError::Unauthorized(
            "this session was opened by another client or from another address; it has ended (log in again)".into(),
        ));
    }
    Ok(())
}

/// Creates the first admin from the environment, once per cluster: the meta group
/// applies the command only while no user exists, so routers racing at start
/// create exactly one user.
pub async fn provision_admin(state: AppState) {
    let (Some(username), Some(password)) = (state.config.auth.admin_username.clone(), state.config.auth.admin_password.clone()) else {
        state.provisioning_done.store(true, Ordering::Relaxed);
        return;
    };
    let (hash, scram) = match tokio::task::spawn_blocking(move || password_secrets(password.expose())).await {
        Ok(Ok(secrets)) => secrets,
        _ => {
            warn!("could not hash the admin password; not provisioning");
            state.provisioning_done.store(true, Ordering::Relaxed);
            return;
        }
    };
    let user = UserRecord {
        id: new_id(),
        email: state.config.auth.admin_email.clone().unwrap_or_else(|| format!("{username}@localhost")),
        username,
        role: Role::Admin,
        password_hash: hash,
        mfa_enabled: false,
        created_at_ms: now_ms(),
        roles: Vec::new(),
        scram_verifier: Some(scram),
    };
    loop {
        match state.cluster.meta_write(MetaOp::ProvisionFirstAdmin(user.clone())).await {
            Ok(Response::Applied(true)) => {
                info!(username = %user.username, "provisioned the first admin");
                break;
            }
            Ok(_) => {
                info!("users already exist; the admin from the environment was not created again");
                break;
            }
            Err(e) => {
                warn!("provisioning the admin: {e}; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
    state.users_exist.store(true, Ordering::Relaxed);
    state.provisioning_done.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::{parse_scram_verifier, scram_verifier};
    use pgwire::api::auth::sasl::scram::ScramSecret;

    #[test]
    fn a_scram_verifier_reads_back_and_is_salted_afresh() {
        let text = scram_verifier("Correct-Horse-42");
        assert!(text.starts_with("SCRAM-SHA-256$4096:"), "{text}");
        let Some(ScramSecret::Verifier { salt, iterations, stored_key, server_key }) = parse_scram_verifier(&text) else {
            panic!("{text} does not read back")
        };
        assert_eq!((salt.len(), iterations, stored_key.len(), server_key.len()), (16, 4096, 32, 32));
        assert_ne!(scram_verifier("Correct-Horse-42"), text, "a new salt each time");
        assert!(parse_scram_verifier("$argon2id$v=19$m=19456").is_none());
    }
}
