//! Where each vector collection's records live, as this router caches it: the
//! collection's uid and shards. A stale entry is refused by the shards (the
//! uid no longer matches) and read again from the collection's home group.

use std::collections::HashMap;
use std::sync::RwLock;

use tessera_api::GroupId;
use tessera_api::vector::{CollectionConfig, VectorMetric, shard_of};

/// Where a collection's records live.
#[derive(Debug, Clone)]
pub struct Layout {
    pub uid: String,
    pub shards: Vec<GroupId>,
    pub dim: u32,
    pub metric: VectorMetric,
}

impl Layout {
    /// The layout a collection's configuration gives, `home` being the group
    /// its name hashes to (a collection created unsharded lives there only).
    pub fn of(c: &CollectionConfig, home: GroupId) -> Layout {
        let shards = if c.shards.is_empty() { vec![home] } else { c.shards.clone() };
        Layout { uid: c.uid.clone(), shards, dim: c.dim, metric: c.metric }
    }

    /// The shard holding record `id`.
    pub fn shard(&self, id: &str) -> GroupId {
        self.shards[shard_of(id, self.shards.len())]
    }

    pub fn uid(&self) -> Option<String> {
        Some(self.uid.clone())
    }
}

/// Collection layouts this router has seen, by name.
pub type Layouts = RwLock<HashMap<String, Layout>>;
