//! Users whose identity lives elsewhere (an LDAP directory, an OpenID
//! provider): the roles their groups or claims map to, and the Tessera user
//! record each signs in as, kept in the meta group so sessions, permissions,
//! MFA and audit work as for local users. Such a record's password hash is a
//! marker (`external:<method>`), not a PHC string: no password verifies
//! against it, so the account cannot sign in locally.

use std::collections::BTreeMap;

use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response, now_ms};
use tessera_api::meta::{Role, UserRecord};

use crate::error::ApiError;
use crate::state::AppState;

/// The password-hash marker of a user signing in through `method` (`ldap`, `oidc`).
pub fn marker(method: &str) -> String {
    format!("external:{method}")
}

/// Whether `user` signs in through a directory or a provider.
pub fn is_external(user: &UserRecord) -> bool {
    user.password_hash.starts_with("external:")
}

/// The built-in role and custom roles that `names` (groups, role claims) map
/// to by `mapping`: the highest built-in role, every custom role; `default_role`
/// when none maps; `None` when none maps and there is no default.
pub fn roles_of(mapping: &BTreeMap<String, String>, default_role: Option<&String>, names: &[String]) -> Option<(Role, Vec<String>)> {
    let mut builtin: Option<Role> = None;
    let mut custom: Vec<String> = Vec::new();
    let mapped: Vec<&String> = names.iter().filter_map(|g| mapping.get(g)).collect();
    let mapped = if mapped.is_empty() { default_role.into_iter().collect() } else { mapped };
    for role in mapped {
        match Role::parse(role) {
            Some(r) => builtin = Some(builtin.map_or(r, |b| highest(b, r))),
            None if !custom.contains(role) => custom.push(role.clone()),
            None => {}
        }
    }
    match (builtin, custom.is_empty()) {
        (None, true) => None,
        // Custom roles alone: the least built-in role, plus theirs.
        (None, false) => Some((Role::Viewer, custom)),
        (Some(b), _) => Some((b, custom)),
    }
}

fn rank(r: Role) -> u8 {
    match r {
        Role::Viewer => 0,
        Role::Operator => 1,
        Role::Admin => 2,
    }
}

fn highest(a: Role, b: Role) -> Role {
    if rank(a) >= rank(b) { a } else { b }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_the_highest_role_and_custom_roles_add_up() {
        let mapping: BTreeMap<String, String> = [("admins", "admin"), ("eng", "operator"), ("audit", "auditor"), ("ops", "Operator")]
            .iter()
            .map(|(g, r)| (g.to_string(), r.to_string()))
            .collect();
        let names = |g: &[&str]| g.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(roles_of(&mapping, None, &names(&["eng", "admins"])), Some((Role::Admin, vec![])));
        assert_eq!(roles_of(&mapping, None, &names(&["eng", "audit"])), Some((Role::Operator, vec!["auditor".to_string()])));
        assert_eq!(roles_of(&mapping, None, &names(&["audit"])), Some((Role::Viewer, vec!["auditor".to_string()])));
        assert_eq!(roles_of(&mapping, None, &names(&["unmapped"])), None, "no mapped name and no default role: refused");
        assert_eq!(roles_of(&mapping, Some(&"viewer".to_string()), &names(&["unmapped"])), Some((Role::Viewer, vec![])));
    }
}
