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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use tessera_storage::{NODE_INCARNATION, NODE_PEER_INCARNATIONS, Store};
use tracing::warn;

use tessera_api::NodeId;

/// This node's incarnation and the ones it recorded for its peers.
pub struct Incarnations {
    own: u64,
    /// Whether `own` was drawn at this start (the data directory was new).
    drawn_now: bool,
    store: Option<Store>,
    known: Mutex<BTreeMap<NodeId, u64>>,
    /// Replaced incarnations already reported in the log.
    reported: Mutex<BTreeSet<(NodeId, u64)>>,
}

/// Incarnations that are never checked (a pool without a store).
impl Default for Incarnations {
    fn default() -> Incarnations {
        Incarnations { own: 0, drawn_now: false, store: None, known: Mutex::default(), reported: Mutex::default() }
    }
}

impl Incarnations {
    /// Reads this node's incarnation (drawing and recording one on a new data
    /// directory) and the peers' recorded ones.
    pub fn open(store: &Store) -> anyhow::Result<Incarnations> {
        let mut drawn_now = false;
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
                drawn_now = true;
                drawn
            }
        };
        let known = match store.node_record(NODE_PEER_INCARNATIONS)? {
            Some(bytes) => serde_json::from_slice(&bytes)?,
            None => BTreeMap::new(),
        };
        Ok(Incarnations { own, drawn_now, store: Some(store.clone()), known: Mutex::new(known), reported: Mutex::default() })
    }


    /// This node's incarnation (0: unchecked).
    pub fn own(&self) -> u64 {
        self.own
    }

    /// Whether this node's incarnation was drawn at this start (a new or wiped
    /// data directory).
    pub fn drawn_now(&self) -> bool {
        self.drawn_now
    }

    /// The incarnation recorded for `node` (0: none).
    pub fn recorded(&self, node: NodeId) -> u64 {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).get(&node).copied().unwrap_or(0)
    }

    /// Takes in the incarnation `node` says it has: recorded when first heard;
    /// `Err` with the reason when it differs from the recorded one (the node's
    /// data directory was replaced). A sender that names no node or incarnation
    /// (an older binary) passes.
    pub fn check(&self, node: NodeId, incarnation: u64) -> Result<(), String> {
        let Some(store) = &self.store else { return Ok(()) };
        if node == 0 || incarnation == 0 {
            return Ok(());
        }
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match known.get(&node) {
            Some(&recorded) if recorded == incarnation => Ok(()),
            Some(&recorded) => {
                let reason = format!(
                    "node {node}'s data directory was replaced (incarnation {incarnation:016x}, recorded {recorded:016x}): \
                     it has lost the votes and entries it acknowledged, so it takes no part in elections until it is \
                     removed and re-added; it may still replicate"
                );
                if self.reported.lock().unwrap_or_else(|e| e.into_inner()).insert((node, incarnation)) {
                    warn!(node, "{reason}");
                }
                Err(reason)
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
            assert!(refused.contains("node 2's data directory was replaced"), "{refused}");
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
}
