//! Vault access policies: which user or role may do what on which secret paths.
//! Path patterns are globs (`glob` crate syntax) where `*`, `?` and `[..]` stay
//! within one path segment and a `**` segment spans any number of segments.

use glob::{MatchOptions, Pattern};
use tessera_api::meta::{VaultCapability, VaultPolicyRecord};

const MATCH: MatchOptions = MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

/// The identity a policy is checked against.
#[derive(Debug, Clone)]
pub struct Subject {
    pub username: String,
    /// The built-in role (`admin`, …) and every custom role of the user.
    pub roles: Vec<String>,
}

/// Whether `policy` names `subject` (by username, or by one of its roles).
pub fn applies_to(policy: &VaultPolicyRecord, subject: &Subject) -> bool {
    policy.username.as_deref().is_some_and(|u| u == subject.username)
        || policy.role.as_deref().is_some_and(|r| subject.roles.iter().any(|s| s.eq_ignore_ascii_case(r)))
}

/// Whether a path pattern matches a secret path.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    Pattern::new(pattern).is_ok_and(|p| p.matches_with(path, MATCH))
}

/// Whether any of `policies` grants `capability` on `path` to `subject`.
pub fn allows(policies: &[VaultPolicyRecord], subject: &Subject, path: &str, capability: VaultCapability) -> bool {
    policies.iter().any(|p| applies_to(p, subject) && p.capabilities.contains(&capability) && p.paths.iter().any(|g| path_matches(g, path)))
}

/// Whether any of `policies` grants `capability` on some path to `subject`.
pub fn grants_any(policies: &[VaultPolicyRecord], subject: &Subject, capability: VaultCapability) -> bool {
    policies.iter().any(|p| applies_to(p, subject) && p.capabilities.contains(&capability))
}

/// Checks a path pattern: a valid glob of 1 to 512 bytes.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() || pattern.len() > 512 {
        return Err("a path pattern must be 1 to 512 bytes".into());
    }
    Pattern::new(pattern).map(|_| ()).map_err(|e| format!("invalid path pattern {pattern:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(username: Option<&str>, role: Option<&str>, paths: &[&str], caps: &[VaultCapability]) -> VaultPolicyRecord {
        VaultPolicyRecord {
            name: "p".into(),
            username: username.map(Into::into),
            role: role.map(Into::into),
            paths: paths.iter().map(|s| s.to_string()).collect(),
            capabilities: caps.to_vec(),
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn globs_and_subjects() {
        use VaultCapability::*;
        let alice = Subject { username: "alice".into(), roles: vec!["admin".into()] };
        let bob = Subject { username: "bob".into(), roles: vec!["admin".into(), "ops".into()] };
        let ps = vec![policy(Some("alice"), None, &["app/*"], &[Read]), policy(None, Some("ops"), &["db/**"], &[Read, Write, List])];
        assert!(allows(&ps, &alice, "app/key", Read));
        assert!(!allows(&ps, &alice, "app/nested/key", Read), "* stays in one segment");
        assert!(!allows(&ps, &alice, "app/key", Write));
        assert!(!allows(&ps, &alice, "db/x", Read));
        assert!(allows(&ps, &bob, "db/a/b/c", Write));
        assert!(!allows(&ps, &bob, "app/key", Read));
        assert!(grants_any(&ps, &bob, List) && !grants_any(&ps, &alice, List));
        assert!(check_pattern("a/[").is_err() && check_pattern("").is_err() && check_pattern("**").is_ok());
    }
}
