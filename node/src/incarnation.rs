//! Node incarnations: how peers tell that a node's data directory was wiped.
//!
//! A node draws a random incarnation when its data directory is new and records
//! it; every Raft message and reply carries it. Each node records the
//! incarnation it first hears from every peer. A peer that later speaks with
//! another incarnation has lost its disk: the votes it cast and the entries it
//! acknowledged are gone, so its vote could elect a leader that lacks committed
//! entries. Such a node may still replicate (it catches up like any follower),
//! but its vote requests are refused and its vote grants are not counted until
//! it is removed and re-added (the recorded incarnation is then forgotten).
//!
//! A data directory rolled back to an older copy (a restored volume, a VM
//! snapshot) keeps its incarnation but has lost the same things. Each
//! directory therefore also counts *generations*: raised and synced at every
//! start and every [`GENERATION_PERIOD`] while the node runs, and only then
//! told to the peers, which record the highest one per node and incarnation.
//! At its start a node asks its peers what they recorded: a generation above
//! the one its directory holds means the directory went back in time. A
//! rollback to a copy younger than one period can pass unseen.
//!
//! Until a majority of the cluster (this node included) has answered, a node
//! takes no part in elections (see `Host::standing`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tessera_storage::{NODE_GENERATION, NODE_INCARNATION, NODE_PEER_GENERATIONS, NODE_PEER_INCARNATIONS, Store};
use tracing::warn;

use tessera_api::NodeId;

/// This node's incarnation and the ones it recorded for its peers.
pub struct Incarnations {
    own: u64,
    store: Option<Store>,
    known: Mutex<BTreeMap<NodeId, u64>>,
    /// Replaced incarnations already reported in the log.
    reported: Mutex<BTreeSet<(NodeId, u64)>>,
    /// The generation the data directory held when the node opened it.
    generation_at_open: u64,
    /// This directory's current generation (synced before it is told).
    generation: AtomicU64,
    /// The highest generation each peer told, with its incarnation then.
    peer_generations: Mutex<BTreeMap<NodeId, (u64, u64)>>,
}

/// How often a running node raises its generation and tells its peers.
pub const GENERATION_PERIOD: Duration = Duration::from_secs(5);

/// Incarnations that are never checked (a pool without a store).
impl Default for Incarnations {
    fn default() -> Incarnations {
        Incarnations {
            own: 0,
            store: None,
            known: Mutex::default(),
            reported: Mutex::default(),
            generation_at_open: 0,
            generation: AtomicU64::new(0),
            peer_generations: Mutex::default(),
        }
    }
}

impl Incarnations {
    /// Reads this node's incarnation (drawing and recording one on a new data
    /// directory) and the peers' recorded ones.
    pub fn open(store: &Store) -> anyhow::Result<Incarnations> {
        let own = match store.node_record(NODE_INCARNATION)? {
            Some(bytes) if bytes.len() == 8 => u64::from_be_bytes(bytes.try_into().expect("8 bytes")),
            _ => {
                let drawn = loop {
                    let n: u64 = rand::random();
                    if n != 0 {
                        break n;
                    }
                };
                store.record_node_record(NODE_INCARNATION, &drawn.to_be_bytes())?;
                drawn
            }
        };
        let known = match store.node_record(NODE_PEER_INCARNATIONS)? {
            Some(bytes) => serde_json::from_slice(&bytes)?,
            None => BTreeMap::new(),
        };
        let generation_at_open = match store.node_record(NODE_GENERATION)? {
            Some(bytes) if bytes.len() == 8 => u64::from_be_bytes(bytes.try_into().expect("8 bytes")),
            _ => 0,
        };
        let generation = generation_at_open + 1;
        store.record_node_record(NODE_GENERATION, &generation.to_be_bytes())?;
        let peer_generations = match store.node_record(NODE_PEER_GENERATIONS)? {
            Some(bytes) => serde_json::from_slice(&bytes)?,
            None => BTreeMap::new(),
        };
        Ok(Incarnations {
            own,
            store: Some(store.clone()),
            known: Mutex::new(known),
            reported: Mutex::default(),
            generation_at_open,
            generation: AtomicU64::new(generation),
            peer_generations: Mutex::new(peer_generations),
        })
    }

    /// The generation the data directory held when this node opened it: a peer
    /// that recorded a higher one heard from a later state of this directory.
    pub fn generation_at_open(&self) -> u64 {
        self.generation_at_open
    }

    /// This directory's current generation (what the peers may be told).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Raises the generation and syncs it; answers the new one, to tell peers.
    pub fn advance_generation(&self) -> anyhow::Result<u64> {
        let Some(store) = &self.store else { return Ok(0) };
        let next = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        store.record_node_record(NODE_GENERATION, &next.to_be_bytes())?;
        Ok(next)
    }

    /// Takes in the generation `node` (of `incarnation`) told; answers the
    /// highest one recorded for it under that incarnation (0: none). Told
    /// nothing (0s), it only answers.
    pub fn note_generation(&self, node: NodeId, incarnation: u64, generation: u64) -> u64 {
        let Some(store) = &self.store else { return 0 };
        if node == 0 || incarnation == 0 {
            return 0;
        }
        let mut known = self.peer_generations.lock().unwrap_or_else(|e| e.into_inner());
        let recorded = match known.get(&node) {
            Some(&(inc, g)) if inc == incarnation => g,
            _ => 0,
        };
        if generation > recorded {
            known.insert(node, (incarnation, generation));
            // Not synced: losing it only lets one rollback of this peer pass unseen.
            if let Ok(bytes) = serde_json::to_vec(&*known)
                && let Err(e) = store.put_node_record_unsynced(NODE_PEER_GENERATIONS, &bytes)
            {
                warn!(node, "recording a peer's generation failed: {e}");
            }
        }
        recorded.max(generation)
    }

    /// Forgets what was recorded of `node` (its incarnation and generation):
    /// it was removed from the cluster, and whatever data directory it comes
    /// back with is recorded anew when first heard.
    pub fn forget(&self, node: NodeId) {
        let Some(store) = &self.store else { return };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.remove(&node).is_some() {
            tracing::info!(node, "forgot the removed node's incarnation: it is recorded anew when it comes back");
            if let Ok(bytes) = serde_json::to_vec(&*known)
                && let Err(e) = store.record_node_record(NODE_PEER_INCARNATIONS, &bytes)
            {
                warn!(node, "forgetting a peer's incarnation failed: {e}");
            }
        }
        drop(known);
        let mut generations = self.peer_generations.lock().unwrap_or_else(|e| e.into_inner());
        if generations.remove(&node).is_some()
            && let Ok(bytes) = serde_json::to_vec(&*generations)
            && let Err(e) = store.put_node_record_unsynced(NODE_PEER_GENERATIONS, &bytes)
        {
            warn!(node, "forgetting a peer's generation failed: {e}");
        }
        self.reported.lock().unwrap_or_else(|e| e.into_inner()).retain(|(n, _)| *n != node);
    }

    /// This node's incarnation (0: unchecked).
    pub fn own(&self) -> u64 {
        self.own
    }

    /// The nodes whose incarnation is recorded.
    pub fn recorded_nodes(&self) -> Vec<NodeId> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
    }

    /// The incarnation recorded for `node` (0: none).
    pub fn recorded(&self, node: NodeId) -> u64 {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).get(&node).copied().unwrap_or(0)
    }

    /// Takes in the incarnation `node` says it has: recorded when first heard;
    /// `Err` with the reason when it differs from the recorded one (the node's
    /// data directory was replaced). A sender that names no node or incarnation
    /// (an older binary) passes.
    pub fn check(&self, node: NodeId, incarnation: u64) -> Result<(), DataReplaced> {
        let Some(store) = &self.store else { return Ok(()) };
        if node == 0 || incarnation == 0 {
            return Ok(());
        }
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match known.get(&node) {
            Some(&recorded) if recorded == incarnation => Ok(()),
            Some(&recorded) => {
                let replaced = DataReplaced { node, incarnation, recorded };
                if self.reported.lock().unwrap_or_else(|e| e.into_inner()).insert((node, incarnation)) {
                    warn!(node, "{replaced}");
                }
                Err(replaced)
            }
            None => {
                known.insert(node, incarnation);
                if let Ok(bytes) = serde_json::to_vec(&*known)
                    && let Err(e) = store.record_node_record(NODE_PEER_INCARNATIONS, &bytes)
                {
                    warn!(node, "recording a peer's incarnation failed: {e}");
                }
                Ok(())
            }
        }
    }
}

/// A peer whose data directory was replaced: the incarnation it sends is not
/// the one first recorded for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node {node}'s data directory was replaced (incarnation {incarnation:016x}, recorded {recorded:016x}): \
     it has lost the votes and entries it acknowledged, so it takes no part in elections until it is \
     removed and re-added; it may still replicate"
)]
pub struct DataReplaced {
    pub node: NodeId,
    pub incarnation: u64,
    pub recorded: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_comes_back_with_another_incarnation_is_refused_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let own = {
            let store = Store::open(dir.path()).unwrap();
            let inc = Incarnations::open(&store).unwrap();
            assert_ne!(inc.own(), 0);
            // First heard: recorded. Same again: fine. Unknown senders pass.
            assert!(inc.check(2, 7).is_ok());
            assert!(inc.check(2, 7).is_ok());
            assert!(inc.check(3, 0).is_ok());
            let refused = inc.check(2, 8).unwrap_err();
            assert_eq!((refused.node, refused.incarnation, refused.recorded), (2, 8, 7));
            assert!(refused.to_string().contains("node 2's data directory was replaced"), "{refused}");
            inc.own()
        };
        // After a restart: the same own incarnation, and the record holds.
        let store = Store::open(dir.path()).unwrap();
        let inc = Incarnations::open(&store).unwrap();
        assert_eq!(inc.own(), own);
        assert!(inc.check(2, 7).is_ok());
        assert!(inc.check(2, 8).is_err());
        // A wiped data directory draws a new one.
        drop(store);
        let wiped = tempfile::tempdir().unwrap();
        assert_ne!(Incarnations::open(&Store::open(wiped.path()).unwrap()).unwrap().own(), own);
    }

    #[test]
    fn a_removed_peer_is_forgotten_and_recorded_anew_when_it_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let inc = Incarnations::open(&store).unwrap();
        assert!(inc.check(2, 7).is_ok());
        inc.note_generation(2, 7, 9);
        assert!(inc.check(2, 8).is_err(), "a replaced directory is refused while the node is a member");
        inc.forget(2);
        assert_eq!(inc.recorded(2), 0);
        assert!(inc.check(2, 8).is_ok(), "after its removal, its new directory is first heard");
        assert_eq!(inc.note_generation(2, 8, 1), 1, "its old directory's generation is forgotten too");
        drop(inc);
        let inc = Incarnations::open(&store).unwrap();
        assert_eq!(inc.recorded(2), 8, "the new record survives a restart");
    }

    #[test]
    fn generations_rise_at_every_start_and_peers_keep_the_highest_per_incarnation() {
        let dir = tempfile::tempdir().unwrap();
        {
            let inc = Incarnations::open(&Store::open(dir.path()).unwrap()).unwrap();
            assert_eq!((inc.generation_at_open(), inc.generation()), (0, 1));
            assert_eq!(inc.advance_generation().unwrap(), 2);
            // A peer's record: the highest told, per incarnation; asking alone tells nothing.
            assert_eq!(inc.note_generation(2, 7, 5), 5);
            assert_eq!(inc.note_generation(2, 7, 3), 5);
            assert_eq!(inc.note_generation(2, 7, 0), 5);
            assert_eq!(inc.note_generation(2, 8, 0), 0, "another incarnation starts afresh");
            assert_eq!(inc.note_generation(0, 7, 9), 0, "a router is no peer");
        }
        let inc = Incarnations::open(&Store::open(dir.path()).unwrap()).unwrap();
        assert_eq!((inc.generation_at_open(), inc.generation()), (2, 3));
        assert_eq!(inc.note_generation(2, 7, 0), 5, "the peers' records survive a restart");
    }
}
