//! The node's one RocksDB instance.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rocksdb::{ColumnFamilyDescriptor, DB, Options};

use crate::engine::vector::VectorState;
use crate::error::Result;
use crate::keys::{CF_DATA, CF_LOG, CF_RAFT};
use crate::log_store::LogStore;
use crate::state_machine::{GroupReader, StateMachine};

/// One RocksDB per node; hands out per-group log stores and state machines.
#[derive(Clone)]
pub struct Store {
    db: Arc<DB>,
    /// Each group's in-memory vector indexes, shared by its state machine and reader.
    vectors: Arc<Mutex<HashMap<u64, Arc<VectorState>>>>,
}

impl Store {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let cfs = [CF_LOG, CF_RAFT, CF_DATA].map(|name| {
            let mut cf = Options::default();
            cf.set_compression_type(rocksdb::DBCompressionType::Lz4);
            ColumnFamilyDescriptor::new(name, cf)
        });
        let db = DB::open_cf_descriptors(&opts, path, cfs)?;
        Ok(Store { db: Arc::new(db), vectors: Default::default() })
    }

    /// The Raft log store of one group.
    pub fn log_store(&self, group: u64) -> LogStore {
        LogStore::new(self.db.clone(), group)
    }

    /// The state machine of one group.
    pub fn state_machine(&self, group: u64) -> StateMachine {
        StateMachine::new(self.db.clone(), group, self.vector_state(group))
    }

    /// A read-only view of one group's state machine, for serving queries.
    pub fn reader(&self, group: u64) -> GroupReader {
        GroupReader::new(self.db.clone(), group, self.vector_state(group))
    }

    fn vector_state(&self, group: u64) -> Arc<VectorState> {
        self.vectors.lock().unwrap_or_else(|e| e.into_inner()).entry(group).or_default().clone()
    }

    /// Whether the group has never stored a vote or log entry on this node.
    pub fn group_is_fresh(&self, group: u64) -> Result<bool> {
        self.log_store(group).is_fresh()
    }

    /// Flushes memtables and syncs the WAL (used on graceful shutdown).
    pub fn flush(&self) -> Result<()> {
        self.db.flush_wal(true)?;
        for cf in [CF_LOG, CF_RAFT, CF_DATA] {
            if let Some(h) = self.db.cf_handle(cf) {
                self.db.flush_cf(h)?;
            }
        }
        Ok(())
    }
}
