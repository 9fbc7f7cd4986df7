//! Per-router security state: the block list, the caller cache and the
//! last SQL alerts (the detectors and the middleware are `security/`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::SecuritySection;
use crate::services::block_list::BlockList;
use crate::services::sessions::CallerCache;

/// Per-router security state.
pub struct SecurityState {
    pub blocks: BlockList,
    pub callers: CallerCache,
    /// Last SQL alert per (user, rules), so a repeated query does not flood alerts.
    sql_alerts: Mutex<HashMap<String, Instant>>,
}

/// A repeated SQL finding of the same user and rules raises at most one alert per this.
pub const SQL_ALERT_INTERVAL: Duration = Duration::from_secs(60);

impl SecurityState {
    /// Empty caches for the configuration.
    pub fn new(config: &SecuritySection) -> Self {
        SecurityState {
            blocks: BlockList::default(),
            callers: CallerCache::new(Duration::from_millis(config.session_cache_ttl_ms)),
            sql_alerts: Mutex::new(HashMap::new()),
        }
    }

    /// The last SQL alert per (user, rules).
    pub fn sql_alerts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.sql_alerts.lock().unwrap_or_else(|e| e.into_inner())
    }
}
