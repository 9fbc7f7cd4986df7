//! Tessera storage: one RocksDB per node holding, for every Raft group the node
//! hosts, the group's Raft log, its vote and snapshot, and its state machine.
//!
//! - [`Store`] opens the database; [`LogStore`] and [`StateMachine`] implement
//!   openraft's storage traits for one group, over keys prefixed by the group id.
//! - [`engine`] holds one engine per data model; the state machine is a thin
//!   dispatcher that hands each command to its engine inside one write batch.

pub use tessera_crypt as crypt;
pub mod backup;
pub mod crash_point;
pub mod dedup;
pub mod digest;
pub mod engine;
pub mod error;
pub mod gate;
mod keys;
pub mod subject;
pub use keys::{
    NODE_CLUSTER_ID, NODE_DRAINED, NODE_DROPPED_GROUPS, NODE_GENERATION, NODE_GROUPS, NODE_INCARNATION, NODE_PEER_GENERATIONS,
    NODE_PEER_INCARNATIONS, NODE_REMOVED,
};
pub mod log_store;
pub mod range;
pub mod reseal;
pub mod snapshot;
pub mod state_machine;
pub mod store;
pub mod types;
mod wal_sync;

pub use crypt::{Crypt, CryptError};
pub use engine::sql::set_memory_pool_mb as set_sql_memory_pool_mb;
pub use error::StorageError;
pub use log_store::LogStore;
pub use state_machine::{GroupReader, StateMachine};
pub use store::{Compression, Store, Tuning};
pub use types::TypeConfig;
pub use wal_sync::WalStats;
