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
    /// Purge only entries the group's state machine has applied on this replica.
    apply_guard: bool,
    /// The epoch of the group's gate this store writes under (0: ungated).
    epoch: u64,
}

fn cf<'a>(db: &'a DB, name: &str) -> &'a rocksdb::ColumnFamily {
    db.cf_handle(name).expect("column family is created at open")
}

/// Votes, truncations and purges are synced whatever `storage.sync_on_commit`
/// says: they are rare, and a vote forgotten in a power loss could let this
/// node vote twice in one term (two leaders).
fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

impl LogStore {
    pub(crate) fn new(db: Arc<Db>, wal: Arc<WalSync>, group: u64) -> Self {
        LogStore { db, wal, group, apply_guard: true, epoch: 0 }
    }

    /// The same store writing under epoch `epoch` of its group's gate (see [`crate::gate`]).
    pub(crate) fn with_epoch(self, epoch: u64) -> Self {
        LogStore { epoch, ..self }
    }

    /// The same log store purging whatever it is asked to, applied or not. Only for
    /// openraft's storage suite, which purges logs no state machine has applied.
    pub fn without_apply_guard(self) -> Self {
        LogStore { apply_guard: false, ..self }
    }

    fn get_raft<T: DeserializeOwned>(&self, tag: u8) -> Result<Option<T>, RaftStorageError> {
        let raw = self.db.get_cf(cf(&self.db, CF_RAFT), keys::raft_key(self.group, tag)).map_err(|e| StorageIOError::read(&e))?;
        raw.map(|b| serde_json::from_slice(&b).map_err(|e| StorageIOError::read(&e).into())).transpose()
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

/// The most stored bytes one AppendEntries carries (at least one entry is always
/// sent). openraft 0.9 gives an AppendEntries one heartbeat interval to finish, so a
/// lagging follower is fed in slices that fit it, never in a batch that times out
/// and starts over (object chunks and vector batches make entries large).
pub const MAX_APPEND_BYTES: usize = 512 * 1024;

impl LogStore {
    /// Reads the entries of `[start, end)` in order, stopping after `max_bytes` of
    /// stored values (at least one entry). Fails when the stored log has a hole.
    fn read_entries(&self, start: u64, end: Option<u64>, max_bytes: usize) -> Result<Vec<Entry<TypeConfig>>, RaftStorageError> {
        let start_key = keys::log_key(self.group, start);
        let end_key = match end {
            Some(end) => keys::log_key(self.group, end).to_vec(),
            None => keys::group_end(self.group),
        };
        let mut out: Vec<Entry<TypeConfig>> = Vec::new();
        let mut bytes = 0usize;
        let bounds = keys::bounded(&start_key, &end_key);
        for item in self.db.iterator_cf_opt(cf(&self.db, CF_LOG), bounds, IteratorMode::Start) {
            let (k, v) = item.map_err(|e| StorageIOError::read_logs(&e))?;
            let index = keys::log_index_of(&k);
            if end.is_some_and(|end| index >= end) {
                break;
            }
            if let Some(expected) = out.last().map(|e| e.log_id.index + 1)
                && index != expected
            {
                let gap = std::io::Error::other(format!("group {}: log entry {expected} is missing (found {index})", self.group));
                return Err(StorageIOError::read_logs(&gap).into());
            }
            if !out.is_empty() && bytes + v.len() > max_bytes {
                break;
            }
            bytes += v.len();
            out.push(self.decode_entry(&k, &v)?);
        }
        Ok(out)
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
        let end = match range.end_bound() {
            Bound::Included(i) => i.checked_add(1),
            Bound::Excluded(i) => Some(*i),
            Bound::Unbounded => None,
        };
        // openraft 0.9 orders log ids by term before index: a leader of a later
        // term whose log is shorter than what this replica applied (its group lost
        // applied entries: a power cut of several nodes with sync_on_commit =
        // false) makes its commit index "greater" though it is lower, and openraft
        // then asks to apply from past the applied index down to it — an inverted
        // range, on which it would panic. The replica stops and is rebuilt instead
        // (see `truncate_from`).
        if let Some(end) = end.filter(|&end| start > end) {
            let why = format!(
                "group {}: asked to apply entries {start}..{end} though this replica applied up to {}: \
                 the group lost applied entries (a power cut with storage.sync_on_commit = false); \
                 this replica stops and is rebuilt from the others",
                self.group,
                start - 1
            );
            tracing::error!("{why}");
            self.db.note_diverged(self.group);
            return Err(StorageIOError::read_logs(&std::io::Error::other(why)).into());
        }
        self.read_entries(start, end, usize::MAX)
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry<TypeConfig>>, RaftStorageError> {
        self.read_entries(start, Some(end), MAX_APPEND_BYTES)
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
        let vote = *vote;
        self.off_runtime(move |log| log.put_raft(keys::RAFT_VOTE, &vote, true)).await
    }

    /// The stored vote, always as *uncommitted*: a restarted node never resumes a
    /// leadership it held (openraft 0.9 would, at once, in the same term and without
    /// a blank entry). Its log may have lost entries its followers acknowledged and
    /// committed without it (they are readable and shipped before the local WAL
    /// sync), and leading again in the old term would hand new entries the same
    /// (term, index) as those — two contents under one log id. Read as uncommitted,
    /// the vote still binds this node to its term (it grants no other candidate of
    /// that term) and a leader of that term is still followed, but the node
    /// campaigns for a new term, which only a replica holding every committed entry
    /// can win.
    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, RaftStorageError> {
        let stored: Option<Vote<u64>> = self.get_raft(keys::RAFT_VOTE)?;
        Ok(stored.map(|v| Vote::new(v.leader_id().term, v.leader_id().voted_for().unwrap_or_default())))
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), RaftStorageError> {
        // Not synced: losing it only means re-applying from the last synced point.
        self.put_raft(keys::RAFT_COMMITTED, &committed, false)
    }

    /// The stored commit mark, never past the last entry the log holds. With
    /// `storage.sync_on_commit = false` a power cut can keep the mark (its column
    /// family's memtable was flushed to a synced table file) and lose the entries
    /// under it (only in the unsynced write-ahead log): openraft would then ask to
    /// apply entries the log does not have and panic, on every start (the
    /// control-plane chaos profile's `--unsynced` run found a replica doing so).
    /// The mark is only what this replica learned; its leader tells it again.
    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, RaftStorageError> {
        let committed = self.get_raft::<Option<LogId<u64>>>(keys::RAFT_COMMITTED)?.flatten();
        let held = self.get_log_state().await?.last_log_id;
        Ok(match (committed, held) {
            (Some(c), Some(h)) if c.index > h.index => {
                tracing::warn!(
                    group = self.group,
                    committed = c.index,
                    last = h.index,
                    "the stored commit mark is past the log (entries lost in a power cut): lowered to the log's end"
                );
                Some(h)
            }
            (Some(c), None) => {
                tracing::warn!(group = self.group, committed = c.index, "the stored commit mark is past the (empty) log: dropped");
                None
            }
            (c, _) => c,
        })
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
        let appended = std::time::Instant::now();
        self.wal.after_sync(count, move |res| {
            metrics::histogram!("tessera_raft_log_durable_seconds").record(appended.elapsed().as_secs_f64());
            callback.log_io_completed(res)
        });
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        self.off_runtime(move |log| log.truncate_from(log_id)).await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        self.off_runtime(move |log| log.purge_through(log_id)).await
    }
}

impl LogStore {
    /// Runs a synced write on the blocking pool: an fsync must not hold a runtime
    /// thread that drives other groups' heartbeats.
    async fn off_runtime(
        &self,
        work: impl FnOnce(&LogStore) -> Result<(), RaftStorageError> + Send + 'static,
    ) -> Result<(), RaftStorageError> {
        let log = self.clone();
        tokio::task::spawn_blocking(move || {
            let _pass = match log.epoch {
                0 => None,
                epoch => {
                    Some(log.db.gates.enter(log.group, epoch).ok_or_else(|| StorageIOError::write_logs(&crate::gate::dropped(log.group)))?)
                }
            };
            work(&log)
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e))?
    }

    fn truncate_from(&self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        // A leader asks to replace entries this replica has applied only when the
        // group lost committed entries on a majority (a power cut of several nodes
        // with `sync_on_commit = false`): its state machine holds writes the group
        // no longer has. Truncating would let the next commit apply below the
        // applied index (openraft panics) or, after a restart, leave the state
        // machine silently diverged from the log. Refuse: this replica stops with
        // the reason, the rest of the group goes on, and the node rebuilds it
        // (`Store::take_diverged`).
        if let Some(applied) = self.applied_log_id()?.filter(|a| a.index >= log_id.index) {
            let why = format!(
                "group {}: the leader replaces log entries from index {} but this replica applied up to {}: \
                 the group lost committed entries (a power cut with storage.sync_on_commit = false); \
                 this replica stops and is rebuilt from the others",
                self.group, log_id.index, applied.index
            );
            tracing::error!("{why}");
            self.db.note_diverged(self.group);
            return Err(StorageIOError::write_logs(&std::io::Error::other(why)).into());
        }
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(
            cf(&self.db, CF_LOG),
            keys::log_key(self.group, log_id.index).as_slice(),
            keys::group_end(self.group).as_slice(),
        );
        self.db.write_opt(batch, &synced()).map_err(|e| StorageIOError::write_logs(&e).into())
    }

    fn purge_through(&self, log_id: LogId<u64>) -> Result<(), RaftStorageError> {
        // Never delete entries this replica has not applied: openraft 0.9 may ask for
        // the purge a received snapshot allows before the install has applied it, and
        // a crash in between would leave the node without entries it acknowledged.
        // The install purges what it covers itself, in its own batch; the rest of a
        // capped purge waits for a later call.
        let log_id = if self.apply_guard {
            match self.applied_log_id()? {
                Some(applied) if applied.index < log_id.index => applied,
                Some(_) => log_id,
                None => return Ok(()),
            }
        } else {
            log_id
        };
        let purged: Option<LogId<u64>> = self.get_raft(keys::RAFT_PURGED)?;
        if purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        // The state machine writes are not synced one by one; sync them before
        // dropping the log entries they were applied from.
        self.db.sync_wal().map_err(|e| StorageIOError::write_logs(&e))?;
        let mut batch = WriteBatch::default();
        let bytes = serde_json::to_vec(&log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        batch.put_cf(cf(&self.db, CF_RAFT), keys::raft_key(self.group, keys::RAFT_PURGED), bytes);
        batch.delete_range_cf(cf(&self.db, CF_LOG), keys::log_key(self.group, 0), keys::log_key(self.group, log_id.index + 1));
        self.db.write_opt(batch, &synced()).map_err(|e| StorageIOError::write_logs(&e))?;
        crate::crash_point::reached("log-purged");
        Ok(())
    }

    /// This replica's own log id at `index`, where it still knows it: the
    /// applied and purged marks are exact, and the log holds the rest.
    fn own_log_id(
        &self,
        index: u64,
        applied: Option<LogId<u64>>,
        purged: Option<LogId<u64>>,
    ) -> Result<Option<LogId<u64>>, RaftStorageError> {
        if let Some(known) = [applied, purged].into_iter().flatten().find(|l| l.index == index) {
            return Ok(Some(known));
        }
        if purged.is_some_and(|p| index < p.index) {
            return Ok(None);
        }
        let key = keys::log_key(self.group, index);
        match self.db.get_cf(cf(&self.db, CF_LOG), key).map_err(|e| StorageIOError::read_logs(&e))? {
            Some(stored) => Ok(Some(self.decode_entry(&key, &stored)?.log_id)),
            None => Ok(None),
        }
    }

    /// Checks the log ids a leader sends (its previous entry and the entries
    /// of an AppendEntries) against what this replica committed or applied.
    /// openraft 0.9 takes every entry at or below its commit index as matching
    /// without looking; that holds while acknowledged entries are durable on a
    /// majority, but with `storage.sync_on_commit = false` a power cut of
    /// several nodes can take committed and applied entries from a majority,
    /// whose new leader then writes other entries at those indexes. A replica
    /// that kept them would append the leader's later entries on top of
    /// writes the group no longer has, silently diverged (the fourth
    /// `--unsynced` control-plane chaos run found one: a request applied on one
    /// replica only). Such a replica answers an error naming the index, and the
    /// node rebuilds it (`Store::take_diverged`). Only where commits can be
    /// lost: with synced commits it cannot fail, and it returns at once. A
    /// message of a leader older than this replica's vote is not checked
    /// (openraft refuses it; its entries may rightly differ).
    pub fn check_leader_log(&self, leader: &Vote<u64>, sent: impl IntoIterator<Item = LogId<u64>>) -> Result<(), RaftStorageError> {
        if !self.db.may_lose_acknowledged() {
            return Ok(());
        }
        if self.get_raft::<Vote<u64>>(keys::RAFT_VOTE)?.is_some_and(|own| leader < &own) {
            return Ok(());
        }
        let applied = self.applied_log_id()?;
        let purged: Option<LogId<u64>> = self.get_raft(keys::RAFT_PURGED)?;
        let committed = self.get_raft::<Option<LogId<u64>>>(keys::RAFT_COMMITTED)?.flatten();
        let Some(settled) = [applied, committed].into_iter().flatten().map(|l| l.index).max() else {
            return Ok(());
        };
        for theirs in sent.into_iter().filter(|l| l.index <= settled) {
            let Some(own) = self.own_log_id(theirs.index, applied, purged)? else { continue };
            if own != theirs {
                let why = format!(
                    "group {}: the leader's entry {theirs} differs from this replica's {own}, which it committed or applied: \
                     the group lost committed entries (a power cut with storage.sync_on_commit = false); \
                     this replica stops and is rebuilt from the others",
                    self.group
                );
                tracing::error!("{why}");
                self.db.note_diverged(self.group);
                return Err(StorageIOError::read_logs(&std::io::Error::other(why)).into());
            }
        }
        Ok(())
    }

    /// The last log id the group's state machine applied on this replica.
    fn applied_log_id(&self) -> Result<Option<LogId<u64>>, RaftStorageError> {
        let key = keys::data_key(self.group, keys::SPACE_SM, &[keys::SM_APPLIED]);
        let read = || -> Result<Option<LogId<u64>>, crate::error::StorageError> {
            match self.db.get_cf(cf(&self.db, keys::CF_DATA), &key)? {
                Some(raw) => Ok(serde_json::from_slice(&self.db.open(Purpose::Data, &key, &raw)?)?),
                None => Ok(None),
            }
        };
        read().map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftStateMachine;
    use openraft::{CommittedLeaderId, EntryPayload};
    use tessera_api::command::{Command, KvOp, Operation};

    use super::*;
    use crate::Store;

    const GROUP: u64 = 3;

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn put(index: u64, value_bytes: usize) -> Entry<TypeConfig> {
        let op = Operation::Kv(KvOp::Put { key: format!("k{index}"), value: "x".repeat(value_bytes).into(), ttl_secs: None });
        Entry { log_id: log_id(index), payload: EntryPayload::Normal(Command { issued_at_ms: 1, op, request_id: None }) }
    }

    /// Writes entries straight into the log column family (what `append` stores).
    fn write_log(log: &LogStore, entries: &[Entry<TypeConfig>]) {
        for e in entries {
            let key = keys::log_key(log.group, e.log_id.index);
            let bytes = codec::encode(e).unwrap();
            log.db.put_cf(cf(&log.db, CF_LOG), key, log.db.seal(Purpose::Log, &key, &bytes)).unwrap();
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// openraft may ask to purge what a received snapshot covers before the
    /// install applied it; the log keeps every entry the replica has not applied.
    #[test]
    fn purge_never_passes_the_applied_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut log = store.log_store(GROUP);
        let mut sm = store.state_machine(GROUP);
        let entries: Vec<_> = (1..=10).map(|i| put(i, 8)).collect();
        write_log(&log, &entries);
        runtime().block_on(async {
            sm.apply(entries[..5].to_vec()).await.unwrap();
            log.purge(log_id(9)).await.unwrap();
            let state = log.get_log_state().await.unwrap();
            assert_eq!(state.last_purged_log_id, Some(log_id(5)), "purged past the applied index");
            let kept = log.try_get_log_entries(6..=10).await.unwrap();
            assert_eq!(kept.iter().map(|e| e.log_id.index).collect::<Vec<_>>(), vec![6, 7, 8, 9, 10]);
            // Once applied, the next purge goes through.
            sm.apply(entries[5..].to_vec()).await.unwrap();
            log.purge(log_id(9)).await.unwrap();
            assert_eq!(log.get_log_state().await.unwrap().last_purged_log_id, Some(log_id(9)));
        });
    }

    /// A commit mark that survived a power cut while the entries under it did
    /// not is lowered to the log's end (openraft would ask to apply missing
    /// entries and panic).
    #[test]
    fn a_commit_mark_past_the_log_is_lowered_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut log = store.log_store(GROUP);
        write_log(&log, &(1..=4).map(|i| put(i, 8)).collect::<Vec<_>>());
        runtime().block_on(async {
            log.save_committed(Some(log_id(3))).await.unwrap();
            assert_eq!(log.read_committed().await.unwrap(), Some(log_id(3)));
            log.save_committed(Some(log_id(9))).await.unwrap();
            assert_eq!(log.read_committed().await.unwrap(), Some(log_id(4)));
        });
        let mut empty = store.log_store(GROUP + 1);
        runtime().block_on(async {
            empty.save_committed(Some(log_id(2))).await.unwrap();
            assert_eq!(empty.read_committed().await.unwrap(), None);
        });
    }

    /// Entries the state machine applied are never replaced: a leader that
    /// asks for it lost committed entries, and this replica stops instead of
    /// diverging. Unapplied entries are truncated as usual.
    #[test]
    fn applied_entries_are_never_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut log = store.log_store(GROUP);
        let mut sm = store.state_machine(GROUP);
        let entries: Vec<_> = (1..=8).map(|i| put(i, 8)).collect();
        write_log(&log, &entries);
        runtime().block_on(async {
            sm.apply(entries[..6].to_vec()).await.unwrap();
            let refused = log.truncate(log_id(5)).await.unwrap_err();
            assert!(refused.to_string().contains("applied up to 6"), "{refused}");
            assert_eq!(store.take_diverged(), [GROUP], "the node is told to rebuild the replica");
            assert!(store.take_diverged().is_empty(), "once");
            assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(log_id(8)), "nothing was truncated");
            log.truncate(log_id(7)).await.unwrap();
            assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(log_id(6)));
            // A commit index below the applied one (a later term's shorter log)
            // asks for an inverted range: refused, and the replica is rebuilt.
            #[allow(clippy::reversed_empty_ranges)] // the inverted range openraft asks for
            let inverted = 7..4;
            assert!(log.try_get_log_entries(inverted).await.is_err());
            assert_eq!(store.take_diverged(), [GROUP]);
            assert!(log.try_get_log_entries(4..4).await.unwrap().is_empty(), "an empty range is no divergence");
        });
    }

    /// With `sync_on_commit = false`, a leader whose entries differ from what
    /// this replica committed or applied (its group lost them in a power cut)
    /// is refused, and the node is told to rebuild the replica; matching ids,
    /// unknown ones and ids past the applied and committed marks pass.
    #[test]
    fn a_leader_log_that_differs_below_the_applied_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tuning = crate::Tuning { unsynced_commits: true, ..crate::Tuning::default() };
        let store = Store::open_tuned(dir.path(), None, &tuning).unwrap();
        let mut log = store.log_store(GROUP);
        let mut sm = store.state_machine(GROUP);
        let entries: Vec<_> = (1..=8).map(|i| put(i, 8)).collect();
        write_log(&log, &entries);
        let other_term = |index| LogId::new(CommittedLeaderId::new(2, 2), index);
        let leader = Vote::new_committed(2, 2);
        runtime().block_on(async {
            sm.apply(entries[..6].to_vec()).await.unwrap();
            log.purge(log_id(3)).await.unwrap();
            log.check_leader_log(&leader, [log_id(4), log_id(5), log_id(6), log_id(7)]).unwrap();
            log.check_leader_log(&leader, [other_term(2)]).expect("below the purge mark: unknown, not refused");
            log.check_leader_log(&leader, [other_term(7), other_term(8)]).expect("past the applied index: openraft truncates");
            assert!(store.take_diverged().is_empty());
            for differs in [3, 5, 6] {
                let refused = log.check_leader_log(&leader, [log_id(differs - 1), other_term(differs)]).unwrap_err();
                assert!(refused.to_string().contains("lost committed entries"), "{refused}");
                assert_eq!(store.take_diverged(), [GROUP], "entry {differs}: the node is told to rebuild the replica");
            }
            log.save_committed(Some(log_id(7))).await.unwrap();
            assert!(log.check_leader_log(&leader, [other_term(7)]).is_err(), "committed, not yet applied");
            assert_eq!(store.take_diverged(), [GROUP]);
            // A late message of a leader this replica has since left behind is
            // openraft's to refuse: its entries may rightly differ.
            log.save_vote(&Vote::new_committed(3, 1)).await.unwrap();
            log.check_leader_log(&leader, [other_term(5)]).unwrap();
        });
        // With synced commits the check never fails (and reads nothing).
        let synced = tempfile::tempdir().unwrap();
        let store = Store::open(synced.path()).unwrap();
        let log = store.log_store(GROUP);
        write_log(&log, &entries);
        runtime().block_on(async { store.state_machine(GROUP).apply(entries[..6].to_vec()).await.unwrap() });
        log.check_leader_log(&leader, [other_term(5)]).unwrap();
    }

    /// A lagging follower is fed in slices of at most `MAX_APPEND_BYTES` (one
    /// entry at least), in order.
    #[test]
    fn replication_reads_are_bounded_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut log = store.log_store(GROUP);
        let entries: Vec<_> = (1..=12).map(|i| put(i, 200 * 1024)).collect();
        write_log(&log, &entries);
        runtime().block_on(async {
            let first = log.limited_get_log_entries(1, 13).await.unwrap();
            assert!(!first.is_empty() && first.len() < 12, "{} entries in one slice", first.len());
            assert_eq!(first[0].log_id.index, 1);
            let one = log.limited_get_log_entries(5, 13).await.unwrap();
            assert_eq!(one[0].log_id.index, 5);
            let huge = vec![put(20, MAX_APPEND_BYTES * 2)];
            write_log(&log, &huge);
            assert_eq!(log.limited_get_log_entries(20, 21).await.unwrap().len(), 1, "an entry over the budget still goes alone");
            // A hole in the stored log is an error, not a silent short read.
            log.db.delete_cf(cf(&log.db, CF_LOG), keys::log_key(GROUP, 7)).unwrap();
            assert!(log.try_get_log_entries(5..=9).await.is_err());
        });
    }
}
