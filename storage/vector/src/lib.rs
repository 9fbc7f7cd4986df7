//! Tessera vector index: a deterministic HNSW graph (hierarchical navigable
//! small world) with soft deletes, upserts and filtered search.
//!
//! The index is purely in-memory; the storage layer persists records and
//! feeds them in, and may keep a link checkpoint
//! ([`HnswIndex::links_checkpoint`]) to restore the graph without re-linking. Replicas that apply the same operations in the same order,
//! with the same [`HnswParams::seed`], build identical graphs.
//!
//! [`HnswIndex`] is `Send + Sync`: `search` takes `&self`, so readers can
//! share it behind an `RwLock` while writers `insert`/`delete` with `&mut`.
//!
//! ```
//! use tessera_vector::{HnswIndex, HnswParams, Metric};
//!
//! let mut index = HnswIndex::new(3, Metric::L2, HnswParams::default()).unwrap();
//! index.insert(1, &[0.0, 0.0, 0.0]).unwrap();
//! index.insert(2, &[1.0, 0.0, 0.0]).unwrap();
//! index.insert(3, &[5.0, 5.0, 5.0]).unwrap();
//! let hits = index.search(&[0.9, 0.0, 0.0], 2, None, None).unwrap();
//! assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [2, 1]);
//! let odd = |id: u64| id % 2 == 1;
//! let hits = index.search(&[0.9, 0.0, 0.0], 1, None, Some(&odd)).unwrap();
//! assert_eq!(hits[0].id, 1);
//! ```

mod brute;
mod checkpoint;
mod error;
mod graph;
mod index;
mod level;
mod metric;
mod search;

pub use brute::brute_force;
pub use error::VectorError;
pub use index::{Hit, HnswIndex, HnswParams};
pub use metric::{Metric, score};

#[cfg(test)]
mod tests {
    #[test]
    fn index_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::HnswIndex>();
    }
}
