//! openraft log storage for one group over the shared RocksDB.
//!
//! Appends are written to RocksDB at once (so they are readable when `append`
//! returns) and reported flushed only after the WAL is synced. The sync runs on the
//! node's WAL-sync thread ([`crate::wal_sync`]); concurrent appends of many
//! groups share one WAL sync.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageIOError, Vote};
use rocksdb::{DB, IteratorMode, WriteBatch, WriteOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;

use tessera_api::codec;

use crate::crypt::Purpose;
use crate::keys::{self, CF_LOG, CF_RAFT};
use crate::store::Db;
use crate::types::{RaftStorageError, TypeConfig};
use crate::wal_sync::WalSync;

/// The Raft log, vote and committed id of one group.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    wal: Arc<WalSync>,
    group: u64,
}

fn cf<'a>(db: &'a DB, name: &str) -> &'a rocksdb::ColumnFamily {
    db.cf_handle(name).expect("column family is created at open")
}

fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

impl LogStore {
    pub(crate) fn new(db: Arc<Db>, wal: Arc<WalSync>, group: u64) -> Self {
        LogStore { db, wal, group }
    }

    fn get_raft<T: DeserializeOwned>(&self, tag: u8) -> Result<Option<T>, RaftStorageError> {
        let raw = self
            .db
            .get_cf(cf(&self.db, CF_RAFT), keys::raft_key(self.group, tag))
            .map_err(|e| StorageIOError::read(&e))?;
        raw.map(|b| serde_json::from_slice(&b).map_err(|e| StorageIOError::read(&e).into()))
            .transpose()
    }

    fn put_raft<T: Serialize>(&self, tag: u8, value: &T, sync: bool) -> Result<(), RaftStorageError> {
        let bytes = serde_json::to_vec(value).map_err(|e| StorageIOError::write(&e))?;
        let opts = if sync { synced() } else { WriteOptions::default() };
        self.db
            .put_cf_opt(cf(&self.db, CF_RAFT), keys::raft_key(self.group, tag), bytes, &opts)
            .map_err(|e| StorageIOError::write(&e).into())
    }

    /// True when this group has no vote and no log on this node.
    pub(crate) fn is_fresh(&self) -> crate::error::Result<bool> {
        let vote = self.db.get_cf(cf(&self.db, CF_RAFT), keys::raft_key(self.group, keys::RAFT_VOTE))?;
        let mut it = self.db.iterator_cf_opt(
            cf(&self.db, CF_LOG),
            keys::bounded(&keys::group_prefix(self.group), &keys::group_end(self.group)),
            IteratorMode::Start,
        );
        let has_log = it.next().transpose()?.is_some();
        Ok(vote.is_none() && !has_log)
    }

    /// Decodes a stored log entry (opening it when the store encrypts at rest).
    fn decode_entry(&self, key: &[u8], stored: &[u8]) -> Result<Entry<TypeConfig>, RaftStorageError> {
        let bytes = self.db.open(Purpose::Log, key, stored).map_err(|e| StorageIOError::read_logs(&e))?;
        Ok(codec::decode(&bytes).map_err(|e| StorageIOError::read_logs(&e))?)
    }

    fn last_entry(&self) -> Result<Option<Entry<TypeConfig>>, RaftStorageError> {
        let bounds = keys::bounded(&keys::group_prefix(self.group), &keys::group_end(self.group));
        let mut it = self.db.iterator_cf_opt(cf(&self.db, CF_LOG), bounds, IteratorMode::End);
        match it.next() {
            Some(item) => {
                let (k, v) = item.map_err(|e| StorageIOError::read_logs(&e))?;
                Ok(Some(self.decode_entry(&k, &v)?))
            }
            None => Ok(None),
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, RaftStorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => 0,
        };
        let start_key = keys::log_key(self.group, start);
        let end_key = match range.end_bound() {
            Bound::Included(i) if *i < u64::MAX => keys::log_key(self.group, i + 1).to_vec(),
            Bound::Excluded(i) => keys::log_key(self.group, *i).to_vec(),
            _ => keys::group_end(self.group),
        };
        let mut out = Vec::new();
        let bounds = keys::bounded(&start_key, &end_key);
        for item in self.db.iterator_cf_opt(cf(&self.db, CF_LOG), bounds, IteratorMode::Start) {
            let (k, v) = item.map_err(|e| StorageIOError::read_logs(&e))?;
            let index = keys::log_index_of(&k);
            if !range.contains(&index) {
                break;
            }
            out.push(self.decode_entry(&k, &v)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, RaftStorageError> {
        let last_purged_log_id: Option<LogId<u64>> = self.get_raft(keys::RAFT_PURGED)?;
        let last_log_id = match self.last_entry()? {
            Some(e) => Some(e.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), RaftStorageError> {
        self.put_raft(keys::RAFT_VOTE, vote, true)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, RaftStorageError> {
        self.get_raft(keys::RAFT_VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), RaftStorageError> {
        // Not synced: losing it only means re-applying from the last synced point.
        self.put_raft(keys::RAFT_COMMITTED, &committed, false)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, RaftStorageError> {
        Ok(self.get_raft::<Option<LogId<u64>>>(keys::RAFT_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), RaftStorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::default();
        let log_cf = cf(&self.db, CF_LOG);
        let mut count = 0;
        for entry in entries {
            count += 1;
            let bytes = codec::encode(&entry).map_err(|e| StorageIOError::write_logs(&e))?;
            let key = keys::log_key(self.group, entry.log_id.index);
            batch.put_cf(log_cf, key, self.db.seal(Purpose::Log, &key, &bytes));
        }
        self.db.write(batch).map_err(|e| StorageIOError::write_logs(&e))?;
        // Report the entries flushed only once the WAL holding them is on disk.
        self.wal.after_sync(count, move |res| callback.log_io_completed(res));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(
            cf(&self.db, CF_LOG),
            keys::log_key(self.group, log_id.index).as_slice(),
            keys::group_end(self.group).as_slice(),
        );
        self.db.write_opt(batch, &synced()).map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        // The state machine writes are not synced one by one; sync them before
        // dropping the log entries they were applied from.
        self.db.flush_wal(true).map_err(|e| StorageIOError::write_logs(&e))?;
        let mut batch = WriteBatch::default();
        let bytes = serde_json::to_vec(&log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        batch.put_cf(cf(&self.db, CF_RAFT), keys::raft_key(self.group, keys::RAFT_PURGED), bytes);
        batch.delete_range_cf(
            cf(&self.db, CF_LOG),
            keys::log_key(self.group, 0),
            keys::log_key(self.group, log_id.index + 1),
        );
        self.db.write_opt(batch, &synced()).map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
