//! State shared by every handler of one router.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tessera_api::rpc::Consistency;

use crate::cluster::ClusterClient;
use crate::config::RouterConfig;

/// Shared router state.
#[derive(Clone)]
pub struct AppState {
    pub inner: Arc<Inner>,
}

pub struct Inner {
    pub config: RouterConfig,
    pub cluster: Arc<dyn ClusterClient>,
    pub started: Instant,
    /// Set once a user is known to exist (users are never all removed by this router).
    pub users_exist: AtomicBool,
    /// Set when admin provisioning from the environment has finished (or was not asked for).
    pub provisioning_done: AtomicBool,
    pub default_consistency: Consistency,
    pub rate_limits: Arc<crate::services::rate_limits::RateLimits>,
    /// WebSocket fan-out of channel events (see `stream_hub`).
    pub streams: std::sync::Arc<crate::stream_hub::StreamHub>,
    /// Block-list and caller caches (see `security`).
    pub security: crate::services::security_state::SecurityState,
    /// This router's view of the secrets vault (the unsealed key lives here only).
    pub vault: crate::services::vault::Vault,
    /// Vector collection layouts this router has seen.
    pub vector_layouts: crate::services::vector_layouts::Layouts,
    /// Every route's access decision, from the route table the router was built
    /// from ([`AppState::set_decisions`]); the permission check reads it.
    pub decisions: std::sync::OnceLock<Vec<crate::route_access::Decision>>,
    /// What this router measured of the requests it served.
    pub request_stats: Arc<crate::services::request_stats::RequestStats>,
    /// Set by `POST /api/v1/admin/cluster/shutdown`: the router stops serving.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Activities noted and not yet written to the meta group.
    pub activities: Arc<crate::services::activity::Activities>,
    /// This router's `host:port` (names it in activity records).
    pub router_name: String,
    /// This router process: `host:port` and a random instance id (keys its
    /// published request figures; two routers may share an address).
    pub router_instance: String,
    /// Slots of requests served at once (`server.max_connections`; `None`: no limit).
    pub request_slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Alerts raised and since when each has been seen.
    pub alerts: crate::services::alerts::AlertBook,
    /// The classifications this router enforces, cached, and its access counts.
    pub classification: crate::services::classification::ClassificationState,
    /// This router's backups (`backup.dir`, `backup.key`).
    pub backups: crate::services::backup::Backups,
    /// The directory users sign in against (`auth.method = ldap`).
    pub directory: Option<Arc<crate::services::ldap::Directory>>,
    /// The OpenID provider users sign in through (`auth.method = oauth2`).
    pub oidc: Option<Arc<crate::services::oidc::Provider>>,
}

impl AppState {
    /// The state of a router with `config` over `cluster`.
    pub fn new(config: RouterConfig, cluster: Arc<dyn ClusterClient>) -> anyhow::Result<AppState> {
        let default_consistency = parse_consistency(&config.replication.consistency_level)
            .ok_or_else(|| anyhow::anyhow!("replication.consistency_level must be one, quorum or all"))?;
        let vault = crate::services::vault::Vault::new(config.vault.default_deny, format!("{}:{}", config.server.host, config.server.port));
        let router_name = format!("{}:{}", config.server.host, config.server.port);
        let backup_key = config.backup.key.as_ref().or(config.backup.encryption_key.as_ref()).map(|k| k.expose().to_string());
        let backups =
            crate::services::backup::Backups::new(config.backup.dir.clone(), backup_key.as_deref()).map_err(|e| anyhow::anyhow!(e))?;
        let directory = match (config.auth.method.trim().eq_ignore_ascii_case("ldap"), &config.auth.ldap) {
            (true, Some(section)) => {
                Some(Arc::new(crate::services::ldap::Directory::new(section.clone()).map_err(|e| anyhow::anyhow!(e))?))
            }
            _ => None,
        };
        let oidc = match (config.auth.method.trim().to_ascii_lowercase().as_str(), &config.auth.oauth2) {
            ("oauth2" | "oidc", Some(section)) => {
                Some(Arc::new(crate::services::oidc::Provider::new(section.clone()).map_err(|e| anyhow::anyhow!(e))?))
            }
            _ => None,
        };
        let request_slots =
            (config.server.max_connections > 0).then(|| Arc::new(tokio::sync::Semaphore::new(config.server.max_connections)));
        Ok(AppState {
            inner: Arc::new(Inner {
                rate_limits: Arc::new(crate::services::rate_limits::RateLimits::new(config.rate_limit.clone())),
                security: crate::services::security_state::SecurityState::new(&config.security),
                config,
                cluster,
                started: Instant::now(),
                users_exist: AtomicBool::new(false),
                provisioning_done: AtomicBool::new(false),
                default_consistency,
                vault,
                streams: Arc::new(crate::stream_hub::StreamHub::default()),
                vector_layouts: Default::default(),
                decisions: Default::default(),
                request_stats: Default::default(),
                activities: Default::default(),
                shutdown: tokio::sync::watch::Sender::new(false),
                request_slots,
                router_instance: format!("{router_name}/{}", &crate::services::ids::new_id()[..12]),
                router_name,
                alerts: Default::default(),
                classification: Default::default(),
                backups,
                directory,
                oidc,
            }),
        })
    }
}

impl AppState {
    /// Records the route table's decisions; the first call wins (one table per router).
    pub fn set_decisions(&self, decisions: Vec<crate::route_access::Decision>) {
        let _ = self.decisions.set(decisions);
    }

    /// Every route's access decision (none before the router is built: everything is refused).
    pub fn decisions(&self) -> &[crate::route_access::Decision] {
        self.decisions.get().map_or(&[], Vec::as_slice)
    }
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
