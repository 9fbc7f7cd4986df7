//! Users whose identity lives elsewhere (an LDAP directory, an OpenID
//! provider): the marker their Tessera user record carries instead of a
//! password hash (no password verifies against it, so the account cannot sign
//! in locally), and the roles their groups or claims map to.

use std::collections::BTreeMap;

use tessera_api::meta::{Role, UserRecord};

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
