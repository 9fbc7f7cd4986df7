//! This router's copy of the data classifications (read from the meta group,
//! cached briefly) and its per-user counts of classified reads.

pub mod guard;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tessera_api::command::{MetaQuery, MetaQueryResult};
use tessera_api::compliance::ColumnClassification;

use crate::cluster::ClusterClient;
use crate::error::ApiError;

/// How long the classifications read from the meta group are reused.
const CACHE_TTL: Duration = Duration::from_secs(1);

/// This router's copy of the classifications and its per-user access counts.
#[derive(Default)]
pub struct ClassificationState {
    cache: tokio::sync::Mutex<Option<(Instant, Vec<ColumnClassification>)>>,
    /// User → (minute, classified reads in it).
    counts: std::sync::Mutex<HashMap<String, (i64, u64)>>,
}

impl ClassificationState {
    /// Forgets the cached classifications (after a `classify` here).
    pub async fn invalidate(&self) {
        *self.cache.lock().await = None;
    }

    /// The classifications, from the cache when it is fresh.
    pub async fn current(&self, cluster: &dyn ClusterClient) -> Result<Vec<ColumnClassification>, ApiError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, list)) = cache.as_ref()
            && at.elapsed() < CACHE_TTL
        {
            return Ok(list.clone());
        }
        let list = match cluster.meta_read(MetaQuery::Classifications { table: None }).await? {
            MetaQueryResult::Classifications(list) => list,
            other => return Err(ApiError::unexpected(other)),
        };
        *cache = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// Counts one classified read of `who` in the minute `minute`; answers
    /// how many `who` made in that minute so far.
    pub fn count_read(&self, who: &str, minute: i64) -> u64 {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let entry = counts.entry(who.to_string()).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        entry.1 += 1;
        entry.1
    }
}
