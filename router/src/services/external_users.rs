//! The Tessera user records of users whose identity lives elsewhere: created
//! at their first sign-in through a directory (`ldap.rs`) or a provider
//! (`oidc.rs`), brought up to date at each, and for a directory's users
//! rechecked while they are signed in. Records are kept in the meta group so
//! sessions, permissions, MFA and audit work as for local users; their
//! password hash is a marker (`external_roles.rs`).

use serde_json::Value;
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response, now_ms};
use tessera_api::meta::{Role, UserRecord};

use crate::error::ApiError;
use crate::services::external_roles::marker;
use crate::services::ldap::{self, Directory};
use crate::services::oidc::Provider;
use crate::state::AppState;

/// Who an external sign-in names, and what they may do.
pub struct External<'a> {
    pub username: &'a str,
    pub email: Option<String>,
    pub role: Role,
    pub roles: Vec<String>,
    /// [`marker`] of the method.
    pub marker: String,
}

/// The user record `who` signs in as: created at the first sign-in, brought
/// up to date (role, e-mail) at each. `None` when a local user, or a user of
/// another method, holds the name (never taken over).
pub async fn upsert(state: &AppState, who: External<'_>) -> Result<Option<UserRecord>, ApiError> {
    let existing = match state.cluster.meta_read(MetaQuery::UserByName { username: who.username.to_string() }).await? {
        MetaQueryResult::User(u) => u,
        other => return Err(ApiError::unexpected(other)),
    };
    match existing {
        Some(u) if u.password_hash != who.marker => Ok(None),
        Some(mut u) => {
            let email = who.email.unwrap_or_else(|| u.email.clone());
            if u.role != who.role || u.roles != who.roles || u.email != email {
                (u.role, u.roles, u.email) = (who.role, who.roles, email);
                write(state, MetaOp::UpdateUser(u.clone())).await?;
            }
            Ok(Some(u))
        }
        None => {
            let u = UserRecord {
                id: crate::services::ids::new_id(),
                username: who.username.to_string(),
                email: who.email.unwrap_or_default(),
                role: who.role,
                password_hash: who.marker,
                mfa_enabled: false,
                created_at_ms: now_ms(),
                roles: who.roles,
                // Signs in through the directory or provider: no password here.
                scram_verifier: None,
            };
            write(state, MetaOp::CreateUser(u.clone())).await?;
            state.users_exist.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(Some(u))
        }
    }
}

/// Brings a signed-in external user's record to `role` and `roles` (a change of groups or claims).
pub async fn set_roles(state: &AppState, user: &mut UserRecord, role: Role, roles: Vec<String>) -> Result<(), ApiError> {
    if user.role != role || user.roles != roles {
        (user.role, user.roles) = (role, roles);
        write(state, MetaOp::UpdateUser(user.clone())).await?;
    }
    Ok(())
}

async fn write(state: &AppState, op: MetaOp) -> Result<(), ApiError> {
    match state.cluster.meta_write(op).await? {
        Response::Rejected(r) => Err(r.into()),
        _ => Ok(()),
    }
}

/// How a directory sign-in ended.
pub enum DirectorySignIn {
    /// The user's record (created or brought up to date from the directory).
    User(Box<UserRecord>),
    /// Unknown, wrong password or disabled.
    Refused,
    /// The directory knows them, but no group maps to a Tessera role.
    NoRole,
}

/// Signs `username` in against the directory and keeps their user record in
/// step with it (role from their groups, e-mail).
pub async fn directory_sign_in(
    state: &AppState,
    directory: &Directory,
    username: &str,
    password: &str,
) -> Result<DirectorySignIn, ApiError> {
    let Some(found) = directory.authenticate(username, password).await? else { return Ok(DirectorySignIn::Refused) };
    let Some((role, roles)) = directory.roles_of(&found.groups) else {
        tracing::info!(user = username, dn = %found.dn, groups = ?found.groups, "directory sign-in refused: no group maps to a role");
        return Ok(DirectorySignIn::NoRole);
    };
    tracing::info!(user = username, dn = %found.dn, groups = ?found.groups, ?role, "directory sign-in");
    let who = External { username, email: found.email.clone(), role, roles, marker: marker("ldap") };
    // A local user of the same name is not taken over by a directory entry.
    let Some(user) = upsert(state, who).await? else { return Ok(DirectorySignIn::Refused) };
    directory.mark_checked(username);
    Ok(DirectorySignIn::User(Box::new(user)))
}

/// A signed-in directory user, looked up again when due: `Err(Unauthorized)`
/// once the directory no longer lists them (or grants them no role); their
/// record follows a change of groups.
pub async fn directory_recheck(state: &AppState, directory: &Directory, user: &mut UserRecord) -> Result<(), ApiError> {
    if !ldap::is_directory_user(user) || !directory.due(&user.username) {
        return Ok(());
    }
    let found = match directory.lookup(&user.username).await {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(()),
        Err(e) => {
            // The directory being down does not end sessions; the next request asks again.
            directory.forget(&user.username);
            tracing::warn!(user = %user.username, "directory recheck not done: {e}");
            return Ok(());
        }
    };
    let roles = found.as_ref().and_then(|f| directory.roles_of(&f.groups));
    let Some((role, roles)) = roles else {
        tracing::info!(user = %user.username, "the directory no longer lists this user (or grants no role): their sessions end");
        return Err(ApiError::Unauthorized("the directory no longer lets this user sign in".into()));
    };
    set_roles(state, user, role, roles).await
}

/// How a provider sign-in ended.
pub enum ProviderSignIn {
    User(Box<UserRecord>),
    /// A local user (or a directory's) holds the name.
    NameTaken,
    /// No claim value maps to a Tessera role.
    NoRole,
    /// The claims name no usable user.
    NoName,
}

/// The Tessera user a checked token's `claims` sign in as (created or brought up to date).
pub async fn provider_sign_in(state: &AppState, provider: &Provider, claims: &Value) -> Result<ProviderSignIn, ApiError> {
    let Some(username) = provider.username_of(claims) else { return Ok(ProviderSignIn::NoName) };
    let Some((role, roles)) = provider.roles_of(claims) else {
        tracing::info!(user = %username, "OpenID sign-in refused: no claim maps to a role");
        return Ok(ProviderSignIn::NoRole);
    };
    let email = provider.email_of(claims);
    let who = External { username: &username, email, role, roles, marker: marker("oidc") };
    Ok(match upsert(state, who).await? {
        Some(user) => ProviderSignIn::User(Box::new(user)),
        None => ProviderSignIn::NameTaken,
    })
}
