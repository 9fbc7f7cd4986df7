//! SCRAM-SHA-256 sign-in (RFC 5802/7677, as PostgreSQL does it): the client
//! proves it knows the password without sending it, against the verifier kept
//! beside the user's Argon2id hash (`UserRecord::scram_verifier`). pgwire's
//! SCRAM does the exchange; this wraps it with Tessera's sign-in: a blocked
//! address is refused before it starts, a wrong proof is a failed login (the
//! brute-force detector and blocking see it, as over HTTP), and a right one
//! opens a session.
//!
//! Who signs in this way: a local user with a verifier and without MFA, and
//! (so a probe cannot tell names apart) any name no user has, which then
//! fails against a mock verifier. The others sign in with a cleartext
//! password: directory and provider users (their password is checked by the
//! directory), users with MFA (they give a session token), and users whose
//! password predates verifiers (until it is changed).

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::ClientInfo;
use pgwire::api::auth::mechanism::{AuthMechanism, AuthMechanismFactory, AuthState};
use pgwire::api::auth::sasl::scram::{ScramAuth, ScramSecret};
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::PasswordMessageFamily;
use sha2::Digest;
use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::meta::UserRecord;

use super::SignedIn;
use crate::cluster::typed::{self, shape};
use crate::services::auth::parse_scram_verifier;
use crate::services::security::record_login_failure;
use crate::services::sign_in::{LoginAnswer, open_session};
use crate::state::AppState;

/// How a user named at startup proves who they are.
pub enum Method {
    Scram,
    Cleartext,
}

/// The method for `username` (see the module docs).
pub async fn method_for(state: &AppState, username: &str) -> Method {
    // Local users may be off (`auth.ldap.allow_local_users`,
    // `auth.oauth2.allow_local_users`): the cleartext sign-in refuses them.
    let local_users_off =
        state.directory.as_ref().is_some_and(|d| !d.allows_local_users()) || state.oidc.as_ref().is_some_and(|p| !p.allows_local_users());
    if local_users_off {
        return Method::Cleartext;
    }
    match user_named(state, username).await {
        Ok(Some(u)) if u.scram_verifier.is_some() && !u.mfa_enabled && !crate::services::external_roles::is_external(&u) => Method::Scram,
        Ok(Some(_)) => Method::Cleartext,
        Ok(None) if state.directory.is_none() && state.oidc.is_none() => Method::Scram,
        // A name the directory or provider may know; or the meta group cannot say.
        _ => Method::Cleartext,
    }
}

async fn user_named(state: &AppState, username: &str) -> Result<Option<UserRecord>, crate::error::ApiError> {
    let answer = state.cluster.meta_read(MetaQuery::UserByName { username: username.to_string() }).await?;
    typed::pick(answer, shape!(MetaQueryResult::User))
}

/// A connection's SCRAM sign-in.
pub fn mechanism(state: AppState, ip: IpAddr, username: String) -> Box<dyn AuthMechanism<SignedIn>> {
    let verifiers = Arc::new(Verifiers { state: state.clone(), ip });
    let inner = AuthMechanismFactory::<UserRecord>::create(&ScramAuth::new(verifiers));
    Box::new(ScramSignIn { inner, state, ip, username })
}

fn refused(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), code.into(), message)))
}

/// The verifiers pgwire's SCRAM checks a proof against.
struct Verifiers {
    state: AppState,
    ip: IpAddr,
}

impl std::fmt::Debug for Verifiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifiers").field("ip", &self.ip).finish()
    }
}

#[async_trait]
impl AuthSource<UserRecord> for Verifiers {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Err(refused("28000", "passwords are checked, never read".into()))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<UserRecord>)> {
        if let Some(until) = self.state.security.blocks.blocked_until(self.ip) {
            let message = format!("your address {} is blocked until {}", self.ip, tessera_api::http::iso8601_ms(until));
            return Err(refused("28000", message));
        }
        let username = login.user().unwrap_or_default();
        let user = user_named(&self.state, username).await.map_err(|e| refused("57P03", e.to_string()))?;
        match user.as_ref().and_then(|u| u.scram_verifier.as_deref()).and_then(parse_scram_verifier) {
            Some(secret) => Ok((secret, user)),
            None => Ok((mock_verifier(username), None)),
        }
    }
}

/// A verifier no password matches, with a salt fixed per name (asking twice
/// for an unknown name gives the same salt, as for a known one) that nobody
/// can compute: a keyed hash under a key this process drew at random.
fn mock_verifier(username: &str) -> ScramSecret {
    static KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(rand::random);
    let salt = sha2::Sha256::digest([key.as_slice(), username.as_bytes()].concat())[..16].to_vec();
    ScramSecret::Verifier {
        salt,
        iterations: 4096,
        stored_key: rand::random::<[u8; 32]>().to_vec(),
        server_key: rand::random::<[u8; 32]>().to_vec(),
    }
}

/// pgwire's SCRAM exchange with Tessera's sign-in around it.
struct ScramSignIn {
    inner: Box<dyn AuthMechanism<UserRecord>>,
    state: AppState,
    ip: IpAddr,
    username: String,
}

/// A wrong proof: a failed login, as a wrong password over HTTP.
async fn failed(state: &AppState, ip: IpAddr, username: &str) -> PgWireError {
    record_login_failure(state, Some(ip), username).await;
    refused("28P01", format!("password authentication failed for user \"{username}\""))
}

#[async_trait]
impl AuthMechanism<SignedIn> for ScramSignIn {
    async fn begin(&mut self, client: &(dyn ClientInfo + Send + Sync)) -> PgWireResult<AuthState<SignedIn>> {
        Ok(match self.inner.begin(client).await? {
            AuthState::InProgress(message) => AuthState::InProgress(message),
            AuthState::Failed(e) => AuthState::Failed(e),
            AuthState::Ok { .. } => AuthState::Failed(refused("28000", "SCRAM ended before it began".into())),
        })
    }

    async fn next(&mut self, client: &(dyn ClientInfo + Send + Sync), message: PasswordMessageFamily) -> PgWireResult<AuthState<SignedIn>> {
        let step = match self.inner.next(client, message).await {
            Ok(step) => step,
            // A malformed message or an address refused up front is not a wrong password.
            Err(PgWireError::UserError(info)) => return Err(PgWireError::UserError(info)),
            Err(PgWireError::InvalidPassword(_)) => return Err(failed(&self.state, self.ip, &self.username).await),
            Err(other) => return Err(other),
        };
        match step {
            AuthState::InProgress(message) => Ok(AuthState::InProgress(message)),
            AuthState::Failed(_) | AuthState::Ok { identity: None, .. } => Err(failed(&self.state, self.ip, &self.username).await),
            AuthState::Ok { final_message, identity: Some(user) } => {
                match open_session(&self.state, &user, Some(self.ip), Some("pgwire".into())).await {
                    Ok(LoginAnswer::Session(s)) => {
                        Ok(AuthState::Ok { final_message, identity: Some(SignedIn { token: s.token, opened_here: true }) })
                    }
                    Ok(LoginAnswer::MfaChallenge(_)) => Err(refused(
                        "28000",
                        format!("{} signs in with a second factor: give a session token as the password", user.username),
                    )),
                    Err(e) => Err(refused(super::types::sqlstate_of(&e), e.to_string())),
                }
            }
        }
    }
}
