//! State shared by every handler of one router.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tessera_api::rpc::Consistency;

use crate::cluster::Cluster;
use crate::config::RouterConfig;

/// Shared router state.
#[derive(Clone)]
pub struct AppState {
    pub inner: Arc<Inner>,
}

pub struct Inner {
    pub config: RouterConfig,
    pub cluster: Arc<Cluster>,
    pub started: Instant,
    /// Set once a user is known to exist (users are never all removed by this router).
    pub users_exist: AtomicBool,
    /// Set when admin provisioning from the environment has finished (or was not asked for).
    pub provisioning_done: AtomicBool,
    pub default_consistency: Consistency,
    pub rate_limits: crate::ratelimit::RateLimits,
    /// WebSocket fan-out of channel events (see `stream_hub`).
    pub streams: std::sync::Arc<crate::stream_hub::StreamHub>,
    /// Block-list and caller caches (see `security`).
    pub security: crate::security::SecurityState,
    /// This router's view of the secrets vault (the unsealed key lives here only).
    pub vault: crate::vault::Vault,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

/// Parses `one`, `quorum` or `all` (any case).
pub fn parse_consistency(s: &str) -> Option<Consistency> {
    match s.trim().to_ascii_lowercase().as_str() {
        "one" => Some(Consistency::One),
        "quorum" => Some(Consistency::Quorum),
        "all" => Some(Consistency::All),
        _ => None,
    }
}
