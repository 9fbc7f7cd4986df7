//! The node's one RocksDB instance.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rocksdb::{ColumnFamilyDescriptor, DB, IteratorMode, Options, WriteOptions};

use crate::crypt::{Crypt, CryptError, Purpose};
use crate::engine::EngineMemory;
use crate::error::Result;
use crate::keys::{self, CF_DATA, CF_INDEX, CF_LOG, CF_RAFT};
use crate::log_store::LogStore;
use crate::state_machine::{GroupReader, StateMachine};
use crate::wal_sync::{WalStats, WalSync};

/// Key (in the `default` column family) of the key check value of an encrypted
/// data directory; a plaintext directory has none.
const ENCRYPTION_CHECK_KEY: &[u8] = b"tessera/encryption-at-rest/key-check";

/// The node's RocksDB and the cipher of its values (none: stored in plaintext).
///
/// Every value of the `data` and `log` column families and every stored snapshot
/// goes through [`Db::seal`] on write and [`Db::open`] on read; keys are never
/// encrypted (they must keep their byte order for range scans).
pub struct Db {
    db: DB,
    crypt: Option<Crypt>,
    /// Key ranges of the data column family an apply asked to compact (VACUUM);
    /// compacted off the apply path once its batch is written ([`Db::compact_pending`]).
    pending_compactions: std::sync::Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The VACUUM compaction threads started and not yet joined: a shutdown
    /// waits for them, so no thread is inside RocksDB while the process exits.
    vacuums: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Woken when an apply or snapshot install may have split off a group the
    /// node should start ([`Store::group_events`]).
    group_events: Arc<tokio::sync::Notify>,
    /// Values the compactions re-sealed under the current key since the store
    /// opened (see [`crate::reseal`]).
    resealed: Arc<AtomicU64>,
    /// The database lives in memory (`Tuning::in_memory`): there is no file to sync.
    in_memory: bool,
    /// `Tuning::unsynced_commits`: the WAL is not fsynced.
    pub(crate) unsynced_commits: bool,
    /// Keeps writes to a group's records from outliving its deletion.
    pub(crate) gates: Arc<crate::gate::GroupGates>,
    /// Groups whose replica here refused to replace entries it had applied
    /// (see `LogStore::truncate_from`): the node rebuilds them ([`Store::take_diverged`]).
    diverged: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// The state-machine records every apply reads (`state_machine::CACHED_RECORDS`),
    /// per (group, tag), as the group's apply last read or wrote them; `None`
    /// inside: the record is absent. Only the apply path fills it, and whatever
    /// rewrites such a record otherwise (a snapshot install, a split, a restore,
    /// a dropped replica) forgets the group's entries.
    sm_records: std::sync::Mutex<HashMap<(u64, u8), Option<Vec<u8>>>>,
}

impl Deref for Db {
    type Target = DB;
    fn deref(&self) -> &DB {
        &self.db
    }
}

impl From<DB> for Db {
    /// A plaintext handle over `db`.
    fn from(db: DB) -> Self {
        Db {
            db,
            crypt: None,
            pending_compactions: Default::default(),
            vacuums: Default::default(),
            group_events: Default::default(),
            resealed: Default::default(),
            in_memory: false,
            unsynced_commits: false,
            gates: Default::default(),
            diverged: Default::default(),
            sm_records: Default::default(),
        }
    }
}

impl Db {
    /// Makes every write so far durable (syncs the WAL); nothing to do for a
    /// database in memory.
    pub(crate) fn sync_wal(&self) -> std::result::Result<(), rocksdb::Error> {
        if self.syncs_to_disk() { self.db.flush_wal(true) } else { Ok(()) }
    }

    /// Whether writes are made durable with an fsync (not for a database in
    /// memory, nor with `storage.sync_on_commit = false`).
    pub(crate) fn syncs_to_disk(&self) -> bool {
        !self.in_memory && !self.unsynced_commits
    }

    /// Whether a power cut can take entries this node acknowledged
    /// (`storage.sync_on_commit = false` on disk).
    pub(crate) fn may_lose_acknowledged(&self) -> bool {
        !self.in_memory && self.unsynced_commits
    }

    /// The cached state-machine record `tag` of `group` (see `Db::sm_records`):
    /// `None` when not cached, `Some(None)` when cached as absent.
    pub(crate) fn cached_record(&self, group: u64, tag: u8) -> Option<Option<Vec<u8>>> {
        self.sm_records.lock().unwrap_or_else(|e| e.into_inner()).get(&(group, tag)).cloned()
    }

    /// Which of `tags` the cache lacks for `group`.
    pub(crate) fn uncached_records(&self, group: u64, tags: &[u8]) -> Vec<u8> {
        let cached = self.sm_records.lock().unwrap_or_else(|e| e.into_inner());
        tags.iter().copied().filter(|tag| !cached.contains_key(&(group, *tag))).collect()
    }

    /// Caches `value` as `group`'s record `tag`; the apply path only.
    pub(crate) fn cache_record(&self, group: u64, tag: u8, value: Option<Vec<u8>>) {
        self.sm_records.lock().unwrap_or_else(|e| e.into_inner()).insert((group, tag), value);
    }

    /// Forgets every cached record of `group` (they are read again on its next apply).
    pub(crate) fn forget_records(&self, group: u64) {
        self.sm_records.lock().unwrap_or_else(|e| e.into_inner()).retain(|(g, _), _| *g != group);
    }

    /// Wakes whoever waits on [`Store::group_events`].
    pub(crate) fn note_group_event(&self) {
        self.group_events.notify_one();
    }

    /// Records that `group`'s replica diverged from its group, and wakes whoever
    /// waits on [`Store::group_events`].
    pub(crate) fn note_diverged(&self, group: u64) {
        self.diverged.lock().unwrap_or_else(|e| e.into_inner()).insert(group);
        self.group_events.notify_one();
    }

    /// Asks for `[from, to)` of the data column family to be compacted after
    /// the current apply (physical only: reclaims deleted and overwritten records).
    pub(crate) fn compact_later(&self, from: Vec<u8>, to: Vec<u8>) {
        self.pending_compactions.lock().unwrap_or_else(|e| e.into_inner()).push((from, to));
    }

    /// Compacts the ranges asked for so far on a background thread: a VACUUM
    /// neither holds the apply (and the group's Raft) nor compacts before its
    /// own deletes are written.
    pub(crate) fn compact_pending(self: &Arc<Self>) {
        let ranges = std::mem::take(&mut *self.pending_compactions.lock().unwrap_or_else(|e| e.into_inner()));
        if ranges.is_empty() {
            return;
        }
        let db = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("vacuum".into()).spawn(move || {
            let cf = db.cf_handle(crate::keys::CF_DATA).expect("data column family");
            for (from, to) in ranges {
                db.compact_range_cf(cf, Some(from), Some(to));
            }
            tracing::info!("VACUUM compaction finished");
        });
        match spawned {
            Ok(handle) => {
                let mut vacuums = self.vacuums.lock().unwrap_or_else(|e| e.into_inner());
                vacuums.retain(|h| !h.is_finished());
                vacuums.push(handle);
            }
            Err(e) => tracing::warn!(error = %e, "could not start the VACUUM compaction thread"),
        }
    }

    /// Waits until every VACUUM compaction started so far has finished.
    pub(crate) fn wait_for_vacuums(&self) {
        let handles = std::mem::take(&mut *self.vacuums.lock().unwrap_or_else(|e| e.into_inner()));
        for handle in handles {
            if handle.join().is_err() {
                tracing::warn!("a VACUUM compaction thread panicked");
            }
        }
    }

    /// Whether values are encrypted at rest.
    pub fn encrypted(&self) -> bool {
        self.crypt.is_some()
    }

    /// The stored form of `value` under `key`: sealed when encryption is on.
    pub fn seal<'a>(&self, purpose: Purpose, key: &[u8], value: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.crypt {
            Some(c) => Cow::Owned(c.seal(purpose, key, value)),
            None => Cow::Borrowed(value),
        }
    }

    /// The plaintext of a value stored under `key`.
    pub fn open<'a>(&self, purpose: Purpose, key: &[u8], stored: &'a [u8]) -> Result<Cow<'a, [u8]>, CryptError> {
        match &self.crypt {
            Some(c) => c.open(purpose, key, stored).map(Cow::Owned),
            None => Ok(Cow::Borrowed(stored)),
        }
    }
}

/// What one group's replica uses on a node (see [`Store::usage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupUsage {
    pub group: u64,
    /// Bytes per model (`system` for the state machine's own records).
    pub models: Vec<(&'static str, u64)>,
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
}

/// Bytes of the files under `dir`, symbolic links not followed (0 when it does not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// One RocksDB per node; hands out per-group log stores and state machines.
#[derive(Clone)]
pub struct Store {
    db: Arc<Db>,
    /// Group commit of the log appends of every group.
    wal: Arc<WalSync>,
    /// Each group's engine memory (see [`EngineMemory`]), shared by its state machine and reader.
    memories: Arc<Mutex<HashMap<u64, Arc<EngineMemory>>>>,
}

/// Block compression of the data files (`storage.compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    None,
    #[default]
    Lz4,
    Zstd,
}

impl Compression {
    /// `none`, `lz4` or `zstd`; `snappy` is refused (not compiled in).
    pub fn parse(name: &str) -> std::result::Result<Compression, String> {
        match name.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            "snappy" => {
                Err("storage.compression = snappy is not supported: this build compresses with lz4 (the default) or zstd, or none".into())
            }
            other => Err(format!("storage.compression must be none, lz4 or zstd, not {other:?}")),
        }
    }
}

/// How the store's RocksDB is tuned at open.
#[derive(Debug, Clone, Default)]
pub struct Tuning {
    pub compression: Compression,
    /// Bytes of the block cache shared by every column family (`storage.buffer_pool_size`);
    /// `None`: RocksDB's default cache per column family.
    pub block_cache_bytes: Option<usize>,
    /// Keep the database in memory (`storage.backend = memory`): nothing
    /// survives the process; snapshot files still go under the path.
    pub in_memory: bool,
    /// `storage.sync_on_commit = false`: log entries and applied state reach
    /// RocksDB's WAL in the OS's cache and are acknowledged without an fsync
    /// (votes, truncations and purges are still synced): a process crash loses
    /// nothing, a power loss or OS crash may lose the last writes.
    pub unsynced_commits: bool,
}

impl Store {
    /// Opens (or creates) the database at `path`, values in plaintext.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, None)
    }

    /// Opens (or creates) the database at `path`, encrypting values at rest with
    /// `crypt` when given. Refuses a directory written with another key, an
    /// encrypted directory opened without a key, and a non-empty plaintext
    /// directory opened with one.
    pub fn open_with(path: impl AsRef<Path>, crypt: Option<Crypt>) -> Result<Self> {
        Self::open_tuned(path, crypt, &Tuning::default())
    }

    /// [`Store::open_with`] with the block compression and block cache of `tuning`.
    pub fn open_tuned(path: impl AsRef<Path>, crypt: Option<Crypt>, tuning: &Tuning) -> Result<Self> {
        let compression = match tuning.compression {
            Compression::None => rocksdb::DBCompressionType::None,
            Compression::Lz4 => rocksdb::DBCompressionType::Lz4,
            Compression::Zstd => rocksdb::DBCompressionType::Zstd,
        };
        let mut opts = Options::default();
        if tuning.in_memory {
            opts.set_env(&rocksdb::Env::mem_env()?);
            // Snapshot and export files of an earlier process belong to a database that is gone.
            let leftovers = path.as_ref().to_path_buf();
            for dir in ["snapshots", "exports"] {
                let dir = leftovers.join(dir);
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)?;
                }
            }
        }
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        // With the WAL not synced (`sync_on_commit = false`), a power cut keeps each
        // column family as of its last flush: flushed one by one, the log, the Raft
        // records and the state machine's data and index would come back from
        // different moments (a commit mark above the lost log; index records of an
        // apply whose applied mark was lost, then applied again differently — the
        // meta group diverged in a chaos run). Flushed together, they come back as
        // one prefix of the writes. (With synced commits the WAL keeps every
        // committed entry, and an apply replayed from it writes the same records.)
        if tuning.unsynced_commits {
            opts.set_atomic_flush(true);
        }
        opts.set_compression_type(compression);
        // One block cache shared by every column family, when sized.
        let cache = tuning.block_cache_bytes.map(rocksdb::Cache::new_lru_cache);
        // After a key rotation, compactions re-seal old values under the current key.
        let resealed = Arc::new(AtomicU64::new(0));
        let reseal_with = crypt.as_ref().filter(|c| c.has_previous()).map(|c| Arc::new(c.clone()));
        let cfs = [CF_LOG, CF_RAFT, CF_DATA, CF_INDEX].map(|name| {
            let mut cf = Options::default();
            cf.set_compression_type(compression);
            let purpose = match name {
                CF_LOG => Some(Purpose::Log),
                CF_DATA | CF_INDEX => Some(Purpose::Data),
                _ => None,
            };
            if let (Some(crypt), Some(purpose)) = (&reseal_with, purpose) {
                cf.set_compaction_filter_factory(crate::reseal::ResealFactory::new(crypt.clone(), purpose, resealed.clone()));
            }
            let mut table = rocksdb::BlockBasedOptions::default();
            if let Some(cache) = &cache {
                table.set_block_cache(cache);
            }
            if matches!(name, CF_DATA | CF_INDEX) {
                // Most point reads of an apply look for keys that are not there (a
                // request id not seen, a key written for the first time, markers
                // of a restore or a hold): bloom filters over whole keys, in the
                // memtable and in every table file, answer those without a search.
                cf.set_memtable_prefix_bloom_ratio(0.1);
                cf.set_memtable_whole_key_filtering(true);
                table.set_bloom_filter(10.0, false);
            }
            cf.set_block_based_table_factory(&table);
            // Keys of one group (and, in the data column families, of one space and
            // key kind: state-machine records, request positions) go in near where the
            // last such key went: an insert starts from there instead of searching the
            // memtable from its top each time another group wrote in between.
            let hint_prefix = match name {
                CF_LOG => 8,
                CF_RAFT => 9,
                _ => 10,
            };
            cf.set_memtable_insert_hint_prefix_len(hint_prefix)?;
            Ok::<_, rocksdb::Error>(ColumnFamilyDescriptor::new(name, cf))
        });
        let cfs = cfs.into_iter().collect::<std::result::Result<Vec<_>, _>>()?;
        let db = DB::open_cf_descriptors(&opts, path, cfs)?;
        check_encryption(&db, crypt.as_ref())?;
        let db = Arc::new(Db {
            db,
            crypt,
            pending_compactions: Default::default(),
            vacuums: Default::default(),
            group_events: Default::default(),
            in_memory: tuning.in_memory,
            unsynced_commits: tuning.unsynced_commits,
            resealed,
            gates: Default::default(),
            diverged: Default::default(),
            sm_records: Default::default(),
        });
        let wal = WalSync::start(&db)?;
        Ok(Store { db, wal, memories: Default::default() })
    }

    /// Log entries appended and WAL syncs made since the store opened.
    pub fn wal_stats(&self) -> WalStats {
        self.wal.stats()
    }

    /// Whether this store encrypts values at rest.
    pub fn encrypted(&self) -> bool {
        self.db.encrypted()
    }

    /// The Raft log store of one group.
    /// Woken after a group applied a split or installed a snapshot: a split-off
    /// group may be waiting to be started ([`Store::split_children`]).
    pub fn group_events(&self) -> Arc<tokio::sync::Notify> {
        self.db.group_events.clone()
    }

    /// The groups whose replica here stopped because it had applied entries its
    /// group lost (a power cut of several nodes with `sync_on_commit = false`),
    /// each once: the node drops and re-hosts them empty, for their leader to fill.
    pub fn take_diverged(&self) -> Vec<u64> {
        std::mem::take(&mut *self.db.diverged.lock().unwrap_or_else(|e| e.into_inner())).into_iter().collect()
    }

    /// Forgets that `group`'s replica diverged: the node rebuilt it, and what
    /// the old replica reported while it was being dropped is not the new one's.
    pub fn forget_diverged(&self, group: u64) {
        self.db.diverged.lock().unwrap_or_else(|e| e.into_inner()).remove(&group);
    }

    /// The groups split off from `parent` whose replica here still holds just
    /// the starting state this node's replica of `parent` wrote when it applied
    /// the split. When that parent replica diverged (it applied entries its
    /// group lost), the split may be one of them, and the group may split
    /// again at another point with the same child id: those starting states
    /// are not the child group's and are rebuilt with the parent.
    pub fn children_at_their_start(&self, parent: u64) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for (split, seeded) in self.split_children(parent)? {
            if seeded && self.reader(split.child).applied()? == Some(crate::range::child_base_log_id()) {
                out.push(split.child);
            }
        }
        Ok(out)
    }

    /// The groups split off from `parent` on this node, each with its
    /// members, and whether this node holds its starting state (false: the
    /// replica skipped the split through a snapshot and must be filled by one).
    pub fn split_children(&self, parent: u64) -> Result<Vec<(tessera_api::meta::SplitRecord, bool)>> {
        let data = crate::engine::GroupData { db: self.db.clone(), group: parent, memory: self.engine_memory(parent), cancel: None };
        let mut out = Vec::new();
        for split in crate::range::splits(&data)? {
            let child =
                crate::engine::GroupData { db: self.db.clone(), group: split.child, memory: self.engine_memory(split.child), cancel: None };
            let seeded = crate::state_machine::read_sm_record::<openraft::LogId<u64>>(&child, keys::SM_APPLIED)?.is_some();
            out.push((split, seeded));
        }
        Ok(out)
    }

    /// Overwrites one record of a group's applied state on this node only,
    /// outside Raft, so this replica then differs from the others. For
    /// tamper-evidence tests (the audit chain must notice) and repair tools.
    pub fn overwrite_record(&self, group: u64, space: u8, key: &[u8], value: &[u8]) -> Result<()> {
        let k = keys::data_key(group, space, key);
        let cf = self.db.cf_handle(CF_DATA).expect("data column family");
        Ok(self.db.put_cf(cf, &k, self.db.seal(crate::crypt::Purpose::Data, &k, value))?)
    }

    /// [`LogStore::check_leader_log`] for an AppendEntries to `group` (reads
    /// only: the group's gate is left as it is).
    pub fn check_leader_log(
        &self,
        group: u64,
        leader: &openraft::Vote<u64>,
        sent: impl IntoIterator<Item = openraft::LogId<u64>>,
    ) -> std::result::Result<(), crate::types::RaftStorageError> {
        LogStore::new(self.db.clone(), self.wal.clone(), group).check_leader_log(leader, sent)
    }

    pub fn log_store(&self, group: u64) -> LogStore {
        LogStore::new(self.db.clone(), self.wal.clone(), group).with_epoch(self.db.gates.open(group))
    }

    /// The state machine of one group. First finishes or forgets a snapshot
    /// install a crash interrupted, guards a replica whose applied index is
    /// behind its purge mark (see [`crate::state_machine::guard_applied_behind_purge`]),
    /// and drops a stored snapshot the purge mark has passed.
    pub fn state_machine(&self, group: u64) -> StateMachine {
        let sm = StateMachine::new(self.db.clone(), group, self.engine_memory(group)).with_epoch(self.db.gates.open(group));
        let dir = crate::snapshot::SnapshotDir::of(&sm.data);
        if let Err(e) = crate::snapshot::resolve_pending_install(&sm.data, &dir) {
            tracing::error!(group, "resolving an interrupted snapshot install failed: {e}");
        }
        if let Err(e) = crate::state_machine::guard_applied_behind_purge(&sm.data) {
            tracing::error!(group, "checking the applied index against the purge mark failed: {e}");
        }
        if let Err(e) = crate::snapshot::drop_snapshot_behind_purge(&sm.data, &dir) {
            tracing::error!(group, "checking the stored snapshot against the purge mark failed: {e}");
        }
        sm
    }

    /// The log index `group`'s replica must apply before it grants votes
    /// again, when it has not yet (a replica found applied behind its purge mark).
    pub fn vote_floor(&self, group: u64) -> Result<Option<u64>> {
        let sm = StateMachine::new(self.db.clone(), group, self.engine_memory(group));
        crate::state_machine::vote_floor(&sm.data)
    }

    /// A digest of `group`'s replicated state on this node (see [`crate::digest`]).
    pub fn digest(&self, group: u64) -> Result<crate::digest::GroupDigest> {
        crate::digest::group_digest(&self.db, group)
    }

    /// A read-only view of one group's state machine, for serving queries.
    pub fn reader(&self, group: u64) -> GroupReader {
        GroupReader::new(self.db.clone(), group, self.engine_memory(group))
    }

    fn engine_memory(&self, group: u64) -> Arc<EngineMemory> {
        self.memories.lock().unwrap_or_else(|e| e.into_inner()).entry(group).or_default().clone()
    }

    /// The placement this node recorded at its first start (opaque bytes), if any.
    pub fn recorded_placement(&self) -> Result<Option<Vec<u8>>> {
        let key = keys::raft_key(keys::NODE_RECORDS, keys::NODE_PLACEMENT);
        Ok(self.db.get_cf(self.db.cf_handle(CF_RAFT).expect("raft column family"), key)?)
    }

    /// Records the node's placement (synced).
    pub fn record_placement(&self, bytes: &[u8]) -> Result<()> {
        let key = keys::raft_key(keys::NODE_RECORDS, keys::NODE_PLACEMENT);
        let mut w = rocksdb::WriteOptions::default();
        w.set_sync(true);
        Ok(self.db.put_cf_opt(self.db.cf_handle(CF_RAFT).expect("raft column family"), key, bytes, &w)?)
    }

    /// A node-level record (`keys::NODE_*` tag), if present.
    pub fn node_record(&self, tag: u8) -> Result<Option<Vec<u8>>> {
        let key = keys::raft_key(keys::NODE_RECORDS, tag);
        Ok(self.db.get_cf(self.db.cf_handle(CF_RAFT).expect("raft column family"), key)?)
    }

    /// Writes a node-level record without waiting for its sync (for records
    /// whose loss in a power cut only weakens a check).
    pub fn put_node_record_unsynced(&self, tag: u8, bytes: &[u8]) -> Result<()> {
        let key = keys::raft_key(keys::NODE_RECORDS, tag);
        Ok(self.db.put_cf(self.db.cf_handle(CF_RAFT).expect("raft column family"), key, bytes)?)
    }

    /// Writes a node-level record (synced).
    pub fn record_node_record(&self, tag: u8, bytes: &[u8]) -> Result<()> {
        let key = keys::raft_key(keys::NODE_RECORDS, tag);
        let mut w = rocksdb::WriteOptions::default();
        w.set_sync(true);
        Ok(self.db.put_cf_opt(self.db.cf_handle(CF_RAFT).expect("raft column family"), key, bytes, &w)?)
    }

    /// A RocksDB integer property (`rocksdb.total-sst-files-size`, ...) summed
    /// over the column families (0 when RocksDB does not know it).
    pub fn int_property(&self, name: &str) -> u64 {
        [CF_DATA, CF_INDEX, CF_LOG, CF_RAFT]
            .iter()
            .filter_map(|cf| self.db.cf_handle(cf))
            .filter_map(|h| self.db.property_int_value_cf(h, name).ok().flatten())
            .sum()
    }

    /// A database-wide RocksDB integer property (`rocksdb.is-write-stopped`, ...).
    /// Removes backup exports an earlier run left (see [`crate::backup`]).
    pub fn remove_leftover_exports(&self) -> Result<()> {
        crate::backup::remove_leftover_exports(&self.db)
    }

    /// Removes the unread backup exports of `groups` (see [`crate::backup::remove_exports_of`]).
    /// Groups of `groups` with a snapshot being received now (a `recv-*.part`
    /// file in their snapshot directory).
    pub fn snapshots_receiving(&self, groups: &[u64]) -> Vec<u64> {
        let root = self.db.path().join("snapshots");
        groups
            .iter()
            .copied()
            .filter(|g| {
                std::fs::read_dir(root.join(g.to_string())).is_ok_and(|entries| {
                    entries.flatten().any(|e| {
                        let name = e.file_name();
                        let name = name.to_string_lossy();
                        name.starts_with("recv-") && name.ends_with(".part")
                    })
                })
            })
            .collect()
    }

    pub fn remove_exports_of(&self, groups: &[u64]) -> Result<usize> {
        crate::backup::remove_exports_of(&self.db, groups)
    }

    pub fn db_int_property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    /// Deletes every record of `group` on this node (its data and derived
    /// indexes, Raft log, vote and state, stored snapshots): the replica moved
    /// to another node. The group's Raft must be shut down first.
    ///
    /// `acknowledged_up_to`, the last log index the dropped replica held, is kept
    /// as the group's vote floor: a replica of the same group hosted here again
    /// later grants no vote until it has applied that far. Its empty log would
    /// otherwise let a lagging candidate of an older membership that still lists
    /// this node win without entries this node's earlier replica helped commit.
    pub fn delete_group(&self, group: u64, acknowledged_up_to: u64) -> Result<()> {
        // Applies, installs and log writes still running for the replica (they
        // can outlive its Raft) finish first; later ones are refused.
        let running = self.db.gates.close(group, std::time::Duration::from_secs(30));
        if running > 0 {
            tracing::warn!(group, running, "work on the dropped replica still runs after 30 s; deleting its data anyway");
        }
        let (from, to) = (keys::group_prefix(group).to_vec(), keys::group_end(group));
        let mut batch = rocksdb::WriteBatch::default();
        for cf in [CF_DATA, CF_INDEX, CF_LOG, CF_RAFT] {
            batch.delete_range_cf(self.db.cf_handle(cf).expect("column family is created at open"), &from, &to);
        }
        batch.put_cf(
            self.db.cf_handle(CF_RAFT).expect("column family is created at open"),
            keys::raft_key(group, keys::RAFT_VOTE_FLOOR),
            serde_json::to_vec(&acknowledged_up_to)?,
        );
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        self.db.write_opt(batch, &sync)?;
        match std::fs::remove_dir_all(self.db.path().join("snapshots").join(group.to_string())) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        self.memories.lock().unwrap_or_else(|e| e.into_inner()).remove(&group);
        self.db.forget_records(group);
        Ok(())
    }

    /// The groups that have any record on this node (data, indexes, Raft log or
    /// state) besides the vote floor a dropped replica leaves behind: what an
    /// operator's check of a stopped node's disk finds of each group.
    pub fn groups_with_records(&self) -> Result<std::collections::BTreeSet<u64>> {
        let mut groups = std::collections::BTreeSet::new();
        for cf in [CF_DATA, CF_INDEX, CF_LOG, CF_RAFT] {
            let handle = self.db.cf_handle(cf).expect("column family is created at open");
            let mut iter = self.db.raw_iterator_cf(&handle);
            iter.seek_to_first();
            while let Some(key) = iter.key() {
                let Some(group) = key.get(..8).map(|g| u64::from_be_bytes(g.try_into().expect("8 bytes"))) else {
                    iter.next();
                    continue;
                };
                if cf == CF_RAFT && key == keys::raft_key(group, keys::RAFT_VOTE_FLOOR) {
                    iter.next();
                    continue;
                }
                groups.insert(group);
                // Jump over the rest of this group's keys.
                iter.seek(keys::group_end(group));
            }
            iter.status()?;
        }
        Ok(groups)
    }

    /// Whether the group has never stored a vote or log entry on this node.
    pub fn group_is_fresh(&self, group: u64) -> Result<bool> {
        self.log_store(group).is_fresh()
    }

    /// What each of `groups` uses on this node: bytes per model, its Raft log and
    /// its stored snapshot. Memtables are flushed first, so the figures (RocksDB's
    /// approximate sizes of each key range, compressed as on disk) include recent
    /// writes.
    pub fn usage(&self, groups: &[u64]) -> Result<Vec<GroupUsage>> {
        let data = self.db.cf_handle(CF_DATA).expect("data column family");
        let log = self.db.cf_handle(CF_LOG).expect("log column family");
        self.db.flush_cf(data)?;
        self.db.flush_cf(log)?;
        let mut out = Vec::with_capacity(groups.len());
        for &group in groups {
            let bounds: Vec<(Vec<u8>, Vec<u8>)> = crate::engine::space::NAMED
                .iter()
                .map(|(space, _)| (keys::data_key(group, *space, &[]), keys::data_key(group, *space + 1, &[])))
                .collect();
            let ranges: Vec<rocksdb::Range<'_>> = bounds.iter().map(|(a, b)| rocksdb::Range::new(a, b)).collect();
            let sizes = self.db.get_approximate_sizes_cf(&data, &ranges);
            let mut models: Vec<(&'static str, u64)> = Vec::new();
            for ((_, model), bytes) in crate::engine::space::NAMED.iter().zip(sizes) {
                match models.iter_mut().find(|(m, _)| m == model) {
                    Some((_, total)) => *total += bytes,
                    None => models.push((model, bytes)),
                }
            }
            let (start, end) = (keys::group_prefix(group).to_vec(), keys::group_end(group));
            let log_bytes = self.db.get_approximate_sizes_cf(&log, &[rocksdb::Range::new(&start, &end)])[0];
            let snapshot_bytes = dir_bytes(&self.db.path().join("snapshots").join(group.to_string()));
            out.push(GroupUsage { group, models, log_bytes, snapshot_bytes });
        }
        Ok(out)
    }

    /// Flushes every column family and compacts each whole, so deleted and
    /// purged records leave the SST files and the WAL files that held them are
    /// retired (after a secure erasure; heavy, on a blocking thread).
    pub fn compact_everything(&self) -> Result<()> {
        self.flush()?;
        for cf in [CF_LOG, CF_RAFT, CF_DATA, CF_INDEX] {
            if let Some(h) = self.db.cf_handle(cf) {
                let mut opts = rocksdb::CompactOptions::default();
                opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
                self.db.compact_range_cf_opt(h, None::<&[u8]>, None::<&[u8]>, &opts);
            }
        }
        self.flush()
    }

    /// Values re-sealed under the current key by compactions since the store
    /// opened (after a key rotation; see [`crate::reseal`]).
    pub fn resealed(&self) -> u64 {
        self.db.resealed.load(Ordering::Relaxed)
    }

    /// Whether this store was opened with previous keys (a rotation under way).
    pub fn previous_keys(&self) -> bool {
        self.db.crypt.as_ref().is_some_and(|c| c.has_previous())
    }

    /// After a key rotation, re-seals under the current key everything a
    /// previous key sealed: every column family is flushed and compacted (the
    /// compaction filter re-seals values, [`crate::reseal`]) and every stored
    /// snapshot file is rewritten. Heavy: run it on a blocking thread.
    pub fn reseal_everything(&self) -> Result<()> {
        if let Some(crypt) = self.db.crypt.as_ref().filter(|c| c.has_previous()) {
            crate::snapshot::reseal_snapshot_files(&self.db, crypt)?;
            self.compact_everything()?;
        }
        Ok(())
    }

    /// How many stored values and snapshot files still need a previous key
    /// (0 once the old key can be retired; always 0 without previous keys).
    pub fn needing_previous_keys(&self) -> Result<u64> {
        let Some(crypt) = self.db.crypt.as_ref().filter(|c| c.has_previous()) else { return Ok(0) };
        let mut count = 0;
        for (name, purpose) in [(CF_LOG, Purpose::Log), (CF_DATA, Purpose::Data), (CF_INDEX, Purpose::Data)] {
            let Some(cf) = self.db.cf_handle(name) else { continue };
            for item in self.db.iterator_cf(cf, IteratorMode::Start) {
                let (k, v) = item?;
                if crypt.sealed_by_previous(purpose, &k, &v) {
                    count += 1;
                }
            }
        }
        count += crate::snapshot::files_needing_previous_keys(&self.db, crypt)?;
        Ok(count)
    }

    /// Waits for background VACUUM compactions, then flushes memtables and
    /// syncs the WAL (used on graceful shutdown).
    pub fn flush(&self) -> Result<()> {
        self.db.wait_for_vacuums();
        self.db.sync_wal()?;
        for cf in [CF_LOG, CF_RAFT, CF_DATA, CF_INDEX] {
            if let Some(h) = self.db.cf_handle(cf) {
                self.db.flush_cf(h)?;
            }
        }
        Ok(())
    }
}

/// Matches the directory's encryption state against the configured key (see
/// [`Store::open_with`]); a fresh directory opened with a key records its check value.
fn check_encryption(db: &DB, crypt: Option<&Crypt>) -> Result<()> {
    let stored = db.get(ENCRYPTION_CHECK_KEY)?;
    match (crypt, stored) {
        (Some(c), Some(check)) => {
            if c.verify_check_value(&check)? {
                // Opened with a previous key: the directory is checked with the current one from now on.
                let mut w = WriteOptions::default();
                w.set_sync(true);
                db.put_opt(ENCRYPTION_CHECK_KEY, c.check_value(), &w)?;
                tracing::info!(
                    "encryption at rest: the data directory's key was rotated (values sealed with a previous key stay readable)"
                );
            }
        }
        (Some(c), None) => {
            if holds_data(db)? {
                return Err(CryptError::PlaintextStore.into());
            }
            let mut w = WriteOptions::default();
            w.set_sync(true);
            db.put_opt(ENCRYPTION_CHECK_KEY, c.check_value(), &w)?;
        }
        (None, Some(_)) => return Err(CryptError::EncryptedStore.into()),
        (None, None) => {}
    }
    Ok(())
}

fn holds_data(db: &DB) -> Result<bool> {
    for name in [CF_LOG, CF_RAFT, CF_DATA] {
        if let Some(h) = db.cf_handle(name)
            && let Some(item) = db.iterator_cf(h, IteratorMode::Start).next()
        {
            item?;
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Crypt {
        Crypt::new(&[b; crate::crypt::KEY_LEN])
    }

    /// Each column family inserts into its memtable from where the last key of
    /// the same group (and kind) went, and keeps the options set before that.
    #[test]
    fn memtable_inserts_start_from_the_last_insert_of_their_group() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.db.put_cf(store.db.cf_handle(CF_LOG).unwrap(), keys::log_key(1, 1), b"entry").unwrap();
        let newest = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("OPTIONS-"))
            .max()
            .expect("RocksDB writes its options file");
        let text = std::fs::read_to_string(newest).unwrap();
        let section = |cf: &str| {
            let start = text.find(&format!("[CFOptions \"{cf}\"]")).unwrap_or_else(|| panic!("no section for {cf}"));
            let rest = &text[start + 1..];
            rest[..rest.find("\n[").unwrap_or(rest.len())].to_string()
        };
        for (cf, len) in [(CF_LOG, 8), (CF_RAFT, 9), (CF_DATA, 10), (CF_INDEX, 10)] {
            let options = section(cf);
            assert!(options.contains(&format!("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.{len}")), "{cf}: {options}");
        }
        let data = section(CF_DATA);
        assert!(data.contains("memtable_whole_key_filtering=true") && data.contains("memtable_prefix_bloom_size_ratio=0.1"), "{data}");
        assert_eq!(store.db.get_cf(store.db.cf_handle(CF_LOG).unwrap(), keys::log_key(1, 1)).unwrap().as_deref(), Some(&b"entry"[..]));
    }

    #[test]
    fn a_deleted_group_leaves_no_record_but_its_vote_floor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for group in [3u64, 4, 5] {
            store.db.put_cf(store.db.cf_handle(CF_DATA).unwrap(), keys::data_key(group, 1, b"k"), b"v").unwrap();
            store.db.put_cf(store.db.cf_handle(CF_RAFT).unwrap(), keys::raft_key(group, keys::RAFT_VOTE), b"{}").unwrap();
        }
        assert_eq!(store.groups_with_records().unwrap(), [3, 4, 5].into());
        store.delete_group(4, 17).unwrap();
        assert_eq!(store.groups_with_records().unwrap(), [3, 5].into());
    }

    #[test]
    fn directory_encryption_state_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let enc = dir.path().join("enc");
        let store = Store::open_with(&enc, Some(key(1))).unwrap();
        assert!(store.encrypted());
        drop(store);
        Store::open_with(&enc, Some(key(1))).unwrap();
        let wrong = Store::open_with(&enc, Some(key(2))).err().unwrap().to_string();
        assert!(wrong.contains("does not match"), "{wrong}");
        let missing = Store::open(&enc).err().unwrap().to_string();
        assert!(missing.contains("SERVICE_ENCRYPTION_AT_REST"), "{missing}");

        // A plaintext directory with data cannot be switched to encryption.
        let plain = dir.path().join("plain");
        let store = Store::open(&plain).unwrap();
        store.db.put_cf(store.db.cf_handle(CF_DATA).unwrap(), b"k", b"v").unwrap();
        drop(store);
        let err = Store::open_with(&plain, Some(key(1))).err().unwrap().to_string();
        assert!(err.contains("unencrypted data"), "{err}");
        Store::open(&plain).unwrap();
    }

    #[test]
    fn a_full_compaction_after_a_rotation_retires_the_old_key() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let put = |store: &Store, k: &[u8], v: &[u8]| {
            let sealed = store.db.seal(Purpose::Data, k, v).into_owned();
            store.db.put_cf(store.db.cf_handle(CF_DATA).unwrap(), k, sealed).unwrap();
        };
        let get = |store: &Store, k: &[u8]| -> Result<Vec<u8>> {
            let raw = store.db.get_cf(store.db.cf_handle(CF_DATA).unwrap(), k)?.expect("stored");
            Ok(store.db.open(Purpose::Data, k, &raw)?.into_owned())
        };
        let store = Store::open_with(&path, Some(key(1))).unwrap();
        for i in 0..50u32 {
            put(&store, format!("old-{i}").as_bytes(), b"sealed with key 1");
        }
        store.flush().unwrap();
        drop(store);

        let old_spec = base64::engine::general_purpose::STANDARD.encode([1u8; crate::crypt::KEY_LEN]);
        let rotated = Store::open_with(&path, Some(key(2).with_previous(std::slice::from_ref(&old_spec)).unwrap())).unwrap();
        put(&rotated, b"new", b"sealed with key 2");
        assert_eq!(rotated.needing_previous_keys().unwrap(), 50, "every old value needs key 1");
        rotated.compact_everything().unwrap();
        assert_eq!(rotated.resealed(), 50, "the compaction re-sealed the old values");
        assert_eq!(rotated.needing_previous_keys().unwrap(), 0);
        drop(rotated);

        // Key 1 retired: everything opens with key 2 alone.
        let retired = Store::open_with(&path, Some(key(2))).unwrap();
        assert_eq!(get(&retired, b"old-7").unwrap(), b"sealed with key 1");
        assert_eq!(get(&retired, b"new").unwrap(), b"sealed with key 2");
        assert_eq!(retired.needing_previous_keys().unwrap(), 0, "no previous key, nothing to count");
    }
}

#[cfg(test)]
mod tuning_tests {
    use super::*;

    #[test]
    fn the_configured_compression_is_what_rocksdb_writes() {
        for (compression, name) in
            [(Compression::Zstd, "kZSTD"), (Compression::None, "kNoCompression"), (Compression::Lz4, "kLZ4Compression")]
        {
            let dir = tempfile::tempdir().unwrap();
            let tuning = Tuning { compression, block_cache_bytes: Some(8 << 20), ..Tuning::default() };
            drop(Store::open_tuned(dir.path(), None, &tuning).unwrap());
            let options: String = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
                .map(|e| std::fs::read_to_string(e.path()).unwrap())
                .collect();
            assert!(options.contains(&format!("compression={name}")), "{compression:?}: no compression={name} in the OPTIONS file");
        }
        assert_eq!(Compression::parse("ZSTD"), Ok(Compression::Zstd));
        assert!(Compression::parse("snappy").is_err());
    }

    /// A secure erasure's purge waits while a group receives a snapshot: the
    /// receive file names it until the transfer ends.
    #[test]
    fn a_snapshot_being_received_is_seen_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_tuned(dir.path(), None, &Tuning::default()).unwrap();
        assert!(store.snapshots_receiving(&[2, 3]).is_empty());
        let group_dir = store.db.path().join("snapshots").join("3");
        std::fs::create_dir_all(&group_dir).unwrap();
        std::fs::write(group_dir.join("build-1-0.part"), b"built, not received").unwrap();
        assert!(store.snapshots_receiving(&[2, 3]).is_empty(), "a build is not a receive");
        std::fs::write(group_dir.join("recv-1-1.part"), b"half a snapshot").unwrap();
        assert_eq!(store.snapshots_receiving(&[2, 3]), [3]);
        std::fs::remove_file(group_dir.join("recv-1-1.part")).unwrap();
        assert!(store.snapshots_receiving(&[2, 3]).is_empty());
    }

    #[test]
    fn a_memory_store_writes_no_files_and_forgets_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rocksdb");
        let tuning = Tuning { in_memory: true, ..Tuning::default() };
        let store = Store::open_tuned(&path, None, &tuning).unwrap();
        store.record_node_record(crate::keys::NODE_GROUPS, b"[1]").unwrap();
        assert_eq!(store.node_record(crate::keys::NODE_GROUPS).unwrap().as_deref(), Some(&b"[1]"[..]));
        drop(store);
        let on_disk = std::fs::read_dir(&path).map(|d| d.count()).unwrap_or(0);
        assert_eq!(on_disk, 0, "a memory store writes nothing under its path");
        let store = Store::open_tuned(&path, None, &tuning).unwrap();
        assert_eq!(store.node_record(crate::keys::NODE_GROUPS).unwrap(), None, "nothing survives the process");
        assert!(Compression::parse("snappy").unwrap_err().contains("not supported"));
        assert!(Compression::parse("brotli").is_err());
    }
}
