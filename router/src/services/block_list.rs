//! This router's copy of the active IP blocks, reloaded from the meta group
//! every `security.block_refresh_ms` by [`refresh_loop`] (so a check costs no
//! quorum read); blocks made through this router apply at once, through
//! another router within one reload. A block ends at its expiry on this
//! router's clock even between reloads. The HTTP layer checks every request
//! against it (`crate::http::block_check`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use tessera_api::command::{MetaQuery, MetaQueryResult, now_ms};
use tessera_api::security::{BlockRecord, SecurityQuery, SecurityQueryResult};
use tracing::debug;

use crate::cluster::ClusterClient;

/// Reloads the block list forever: every `every_ms` (clamped to 0.1-60 s) it
/// reads the meta group's active blocks and hands them to `replace` (this
/// router's [`BlockList::replace`]).
pub async fn refresh_loop(cluster: std::sync::Arc<dyn ClusterClient>, every_ms: u64, replace: impl Fn(Vec<BlockRecord>) + Send + 'static) {
    let every = Duration::from_millis(every_ms.clamp(100, 60_000));
    loop {
        match cluster.meta_read(MetaQuery::Security(SecurityQuery::Blocks)).await {
            Ok(MetaQueryResult::Security(SecurityQueryResult::Blocks(list))) => replace(list),
            Ok(other) => debug!("block list reload: unexpected reply {other:?}"),
            Err(e) => debug!("block list reload: {e}"),
        }
        tokio::time::sleep(every).await;
    }
}

/// How long a block or unblock made through this router wins over reloads that
/// may have been read before it was committed.
const LOCAL_GRACE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Inner {
    /// Blocked IP → expiry (Unix ms).
    blocked: HashMap<IpAddr, i64>,
    /// Local changes not yet certainly visible in a reload: IP → (expiry or None for unblocked, when).
    local: HashMap<IpAddr, (Option<i64>, Instant)>,
}

/// This router's copy of the active blocks.
#[derive(Default)]
pub struct BlockList {
    inner: RwLock<Inner>,
}

impl BlockList {
    /// When `ip` is blocked now, the block's expiry (Unix ms).
    pub fn blocked_until(&self, ip: IpAddr) -> Option<i64> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.blocked.get(&ip).copied().filter(|until| *until > now_ms())
    }

    /// Applies a block made through this router at once.
    pub fn insert(&self, block: &BlockRecord) {
        let Ok(ip) = block.ip.parse::<IpAddr>() else { return };
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.blocked.insert(ip, block.expires_at_ms);
        inner.local.insert(ip, (Some(block.expires_at_ms), Instant::now()));
    }

    /// Lifts a block through this router at once.
    pub fn remove(&self, ip: IpAddr) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.blocked.remove(&ip);
        inner.local.insert(ip, (None, Instant::now()));
    }

    /// Replaces the list with a reload from the meta group.
    pub fn replace(&self, blocks: Vec<BlockRecord>) {
        let mut blocked: HashMap<IpAddr, i64> = blocks.iter().filter_map(|b| Some((b.ip.parse().ok()?, b.expires_at_ms))).collect();
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.local.retain(|_, (_, at)| at.elapsed() < LOCAL_GRACE);
        for (ip, (until, _)) in &inner.local {
            match until {
                Some(until) => {
                    blocked.insert(*ip, *until);
                }
                None => {
                    blocked.remove(ip);
                }
            }
        }
        inner.blocked = blocked;
    }
}
