//! Sign-in against an LDAP directory (`auth.method = ldap`, `[auth.ldap]`).
//!
//! A user is found by a service account's search (`bind_dn`, `user_base_dn`,
//! `user_filter`) and proved by a bind as that entry with the password given,
//! or bound directly through `user_dn_template`. Their groups (`group_base_dn`,
//! `group_filter`) map to Tessera roles (`role_mapping`). A directory user
//! signs in as a Tessera user record kept in the meta group (so sessions,
//! roles, MFA and audit work as for local users) whose password hash is
//! `external:ldap` (`services/external_users.rs`): it never verifies, so such a user cannot sign in
//! locally. Every `recheck_interval_secs` a signed-in directory user is looked
//! up again: removed or disabled (no longer matching `user_filter`), their
//! sessions stop working; moved to other groups, their role follows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldap3::{Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry, dn_escape, ldap_escape};
use tessera_api::meta::{Role, UserRecord};

use crate::config::LdapSection;
use crate::error::ApiError;
use crate::services::external_roles;

/// Whether `user` signs in through the directory.
pub fn is_directory_user(user: &UserRecord) -> bool {
    user.password_hash == external_roles::marker("ldap")
}

/// A user as the directory describes them.
#[derive(Debug, Clone)]
pub struct DirectoryUser {
    pub dn: String,
    pub email: Option<String>,
    /// The names (`group_name_attribute`) of the groups they belong to.
    pub groups: Vec<String>,
}

/// The directory this router signs users in against, and when it last
/// looked up each signed-in user.
pub struct Directory {
    section: LdapSection,
    tls: Option<Arc<rustls::ClientConfig>>,
    checked: Mutex<HashMap<String, Instant>>,
}

impl Directory {
    /// The directory of `section` (already checked by `LdapSection::check`).
    pub fn new(section: LdapSection) -> Result<Directory, String> {
        let tls = match &section.ca_file {
            Some(ca) => {
                let roots = tessera_api::tls::root_store(ca).map_err(|e| format!("auth.ldap.ca_file: {e}"))?;
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("auth.ldap: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                Some(Arc::new(config))
            }
            None => None,
        };
        Ok(Directory { section, tls, checked: Mutex::new(HashMap::new()) })
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.section.timeout_secs.max(1))
    }

    /// An open connection (StartTLS or LDAPS as configured, the certificate checked).
    async fn connect(&self) -> Result<Ldap, ApiError> {
        let mut settings = LdapConnSettings::new().set_conn_timeout(self.timeout()).set_starttls(self.section.start_tls);
        if let Some(tls) = &self.tls {
            settings = settings.set_config(tls.clone());
        }
        let (conn, mut ldap) = LdapConnAsync::with_settings(settings, &self.section.url).await.map_err(unreachable)?;
        ldap3::drive!(conn);
        ldap.with_timeout(self.timeout());
        Ok(ldap)
    }

    /// A connection bound as the service account (`None` without one).
    async fn service(&self) -> Result<Option<Ldap>, ApiError> {
        let (Some(dn), Some(password)) = (&self.section.bind_dn, &self.section.bind_password) else {
            return Ok(None);
        };
        let mut ldap = self.connect().await?;
        ldap.simple_bind(dn, password.expose())
            .await
            .and_then(|r| r.success())
            .map_err(|e| ApiError::Unavailable(format!("the directory refused the service account (auth.ldap.bind_dn): {e}")))?;
        Ok(Some(ldap))
    }

    /// The entries under `base` matching `filter`, with `attrs`.
    async fn search(&self, ldap: &mut Ldap, base: &str, scope: Scope, filter: &str, attrs: &[&str]) -> Result<Vec<SearchEntry>, ApiError> {
        let ldap3::SearchResult(entries, result) = ldap.search(base, scope, filter, attrs.to_vec()).await.map_err(unreachable)?;
        // 32: noSuchObject (the base itself is gone): nothing matches.
        if result.rc != 0 && result.rc != 32 {
            return Err(ApiError::Unavailable(format!("the directory refused a search under {base}: {result}")));
        }
        Ok(entries.into_iter().map(SearchEntry::construct).collect())
    }

    /// The user's own entry (matching `user_filter`), read over `ldap`.
    async fn find(&self, ldap: &mut Ldap, username: &str) -> Result<Option<SearchEntry>, ApiError> {
        let filter = self.section.user_filter.replace("{username}", &ldap_escape(username));
        let attrs = [self.section.email_attribute.as_str()];
        let mut found = match &self.section.user_dn_template {
            // Direct bind: the entry is at its DN; the filter still says whether it may sign in.
            Some(template) => {
                let dn = template.replace("{username}", &dn_escape(username));
                self.search(ldap, &dn, Scope::Base, &filter, &attrs).await?
            }
            None => self.search(ldap, &self.section.user_base_dn, Scope::Subtree, &filter, &attrs).await?,
        };
        // Two entries for one name: refuse rather than guess.
        Ok(if found.len() == 1 { found.pop() } else { None })
    }

    /// The names of the groups `dn` (`username`) belongs to.
    async fn groups(&self, ldap: &mut Ldap, dn: &str, username: &str) -> Result<Vec<String>, ApiError> {
        let Some(base) = &self.section.group_base_dn else { return Ok(Vec::new()) };
        let filter = self.section.group_filter.replace("{dn}", &ldap_escape(dn)).replace("{username}", &ldap_escape(username));
        let attr = self.section.group_name_attribute.as_str();
        let entries = self.search(ldap, base, Scope::Subtree, &filter, &[attr]).await?;
        Ok(entries.into_iter().filter_map(|mut e| e.attrs.remove(attr).and_then(|mut v| v.pop())).collect())
    }

    fn described(&self, entry: SearchEntry, groups: Vec<String>) -> DirectoryUser {
        let email = entry.attrs.get(&self.section.email_attribute).and_then(|v| v.first()).cloned();
        DirectoryUser { dn: entry.dn, email, groups }
    }

    /// The directory user `username` proved by `password`; `None` when the
    /// directory does not know them, refuses the password, or they are disabled.
    pub async fn authenticate(&self, username: &str, password: &str) -> Result<Option<DirectoryUser>, ApiError> {
        // An empty password is an unauthenticated bind (RFC 4513 5.1.2), which
        // many directories "accept": never a proof.
        if username.is_empty() || password.is_empty() {
            return Ok(None);
        }
        let (dn, service) = match &self.section.user_dn_template {
            Some(template) => (template.replace("{username}", &dn_escape(username)), self.service().await?),
            None => {
                let mut service = self.service().await?.ok_or_else(|| ApiError::Internal("auth.ldap has no service account".into()))?;
                match self.find(&mut service, username).await? {
                    Some(entry) => (entry.dn, Some(service)),
                    None => return Ok(None),
                }
            }
        };
        let mut as_user = self.connect().await?;
        match as_user.simple_bind(&dn, password).await.map_err(unreachable)?.success() {
            Ok(_) => {}
            // 49: invalidCredentials (wrong password, locked or unknown entry).
            Err(ldap3::LdapError::LdapResult { result }) if result.rc == 49 => return Ok(None),
            Err(e) => return Err(ApiError::Unavailable(format!("the directory refused the sign-in bind: {e}"))),
        }
        // Read the entry and groups as the service account when there is one, else as the user.
        let mut reader = service.unwrap_or(as_user);
        let Some(entry) = self.find(&mut reader, username).await? else { return Ok(None) };
        let groups = self.groups(&mut reader, &entry.dn, username).await?;
        let _ = reader.unbind().await;
        Ok(Some(self.described(entry, groups)))
    }

    /// `username` as the directory describes them now (the service account's
    /// search); `None`: removed or disabled. Without a service account the
    /// directory cannot be asked between sign-ins: the user stays as signed in.
    pub async fn lookup(&self, username: &str) -> Result<Option<Option<DirectoryUser>>, ApiError> {
        let Some(mut ldap) = self.service().await? else { return Ok(None) };
        let Some(entry) = self.find(&mut ldap, username).await? else { return Ok(Some(None)) };
        let groups = self.groups(&mut ldap, &entry.dn, username).await?;
        let _ = ldap.unbind().await;
        Ok(Some(Some(self.described(entry, groups))))
    }

    /// Notes that `username` was just looked up.
    pub fn mark_checked(&self, username: &str) {
        self.checked.lock().expect("recheck map").insert(username.to_string(), Instant::now());
    }

    /// Forgets when `username` was looked up (the next request asks again).
    pub fn forget(&self, username: &str) {
        self.checked.lock().expect("recheck map").remove(username);
    }

    /// Whether `username` is due a recheck (and marks it checked now).
    pub fn due(&self, username: &str) -> bool {
        let interval = Duration::from_secs(self.section.recheck_interval_secs);
        if interval.is_zero() {
            return false;
        }
        let mut checked = self.checked.lock().expect("recheck map");
        let due = checked.get(username).is_none_or(|at| at.elapsed() >= interval);
        if due {
            checked.insert(username.to_string(), Instant::now());
        }
        due
    }

    /// The built-in role and custom roles `groups` map to (see [`external_roles::roles_of`]).
    pub fn roles_of(&self, groups: &[String]) -> Option<(Role, Vec<String>)> {
        external_roles::roles_of(&self.section.role_mapping, self.section.default_role.as_ref(), groups)
    }

    /// Whether local users may still sign in with a password.
    pub fn allows_local_users(&self) -> bool {
        self.section.allow_local_users
    }
}

fn unreachable(e: ldap3::LdapError) -> ApiError {
    ApiError::Unavailable(format!("the directory (auth.ldap.url) did not answer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> Directory {
        Directory::new(LdapSection { url: "ldap://127.0.0.1:1".into(), ..Default::default() }).unwrap()
    }

    #[tokio::test]
    async fn an_empty_password_is_never_a_proof() {
        // No directory listens on port 1: the refusal comes before any connection.
        let d = directory();
        assert!(d.authenticate("alice", "").await.unwrap().is_none());
    }
}
