//! Who calls: the resolved caller of a session, the client it was opened
//! from, and the short-lived cache of callers by token hash. Resolving a
//! bearer token into a caller is the HTTP side's (`auth.rs`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_api::command::now_ms;
use tessera_api::meta::{Role, UserRecord};

use crate::error::ApiError;

/// Who is calling an authenticated route.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A logged-in user and every permission they hold.
    /// Shared parts are behind `Arc`s: a caller is cloned from the cache and
    /// again for the handler on every request.
    User {
        user: Arc<UserRecord>,
        token_hash: Arc<str>,
        permissions: Arc<[String]>,
        /// The client address of this request (see `services::rate_limits::RateLimits::client_ip`).
        client_ip: Option<IpAddr>,
        /// The session was opened with a second factor (see `auth.mfa_required`).
        mfa_verified: bool,
        /// The client the session was opened from (the router checks each request against it: `security.session_binding`).
        opened_by: Arc<SessionClient>,
    },
    /// An anonymous reader while no user exists and open bootstrap is on.
    Bootstrap,
}

impl Caller {
    /// The caller's built-in role (bootstrap readers count as viewers).
    pub fn role(&self) -> Role {
        match self {
            Caller::User { user, .. } => user.role,
            Caller::Bootstrap => Role::Viewer,
        }
    }

    /// Whether the caller holds a permission.
    pub fn has(&self, permission: &str) -> bool {
        match self {
            Caller::User { permissions, .. } => permissions.iter().any(|p| p == permission),
            Caller::Bootstrap => permission.starts_with("read:"),
        }
    }

    /// Whether the caller holds any `write:*` permission.
    pub fn can_write(&self) -> bool {
        matches!(self, Caller::User { permissions, .. } if permissions.iter().any(|p| p.starts_with("write:")))
    }

    /// `Ok` when the caller holds `permission`, 403 otherwise.
    pub fn require(&self, permission: &str) -> Result<(), ApiError> {
        if self.has(permission) { Ok(()) } else { Err(ApiError::Forbidden(format!("this request needs the {permission} permission"))) }
    }
}

/// The client a session is used from: its address and User-Agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionClient {
    pub ip: Option<String>,
    pub agent: Option<String>,
}

/// Resolved callers by token hash, reused for a short TTL so an authenticated
/// request usually costs no meta-group read. Logout and MFA changes through this
/// router evict the token at once, and a successful user or role mutation
/// through this router clears the cache; a revocation through another router
/// takes effect here within the TTL.
pub struct CallerCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Caller)>>,
}

/// Entries beyond which expired ones are swept (and, if still full, all dropped).
const CALLER_CACHE_MAX: usize = 10_000;

impl CallerCache {
    /// A cache keeping entries for `ttl` (zero disables it).
    pub fn new(ttl: Duration) -> Self {
        CallerCache { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Caller)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached caller of a token hash, if still fresh.
    pub fn get(&self, hash: &str) -> Option<Caller> {
        if self.ttl.is_zero() {
            return None;
        }
        let mut map = self.lock();
        match map.get(hash) {
            Some((until, caller)) if *until > Instant::now() => Some(caller.clone()),
            Some(_) => {
                map.remove(hash);
                None
            }
            None => None,
        }
    }

    /// Caches a caller until the TTL passes or its session expires, whichever is first.
    pub fn insert(&self, hash: String, caller: Caller, session_expires_at_ms: i64) {
        if self.ttl.is_zero() {
            return;
        }
        let left = Duration::from_millis((session_expires_at_ms - now_ms()).max(0) as u64);
        let now = Instant::now();
        let mut map = self.lock();
        if map.len() >= CALLER_CACHE_MAX {
            map.retain(|_, (until, _)| *until > now);
            if map.len() >= CALLER_CACHE_MAX {
                map.clear();
            }
        }
        map.insert(hash, (now + self.ttl.min(left), caller));
    }

    /// Forgets one token (logout, MFA change).
    pub fn evict(&self, hash: &str) {
        self.lock().remove(hash);
    }

    /// Forgets every token (a user or role changed).
    pub fn clear(&self) {
        self.lock().clear();
    }
}
