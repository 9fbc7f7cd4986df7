//! Data-model engines. Each engine owns one key space of a group's range in the
//! `data` column family and is plain code with no networking: given a
//! transaction over that space and an operation, it produces a [`Response`].

pub mod document;
pub mod graph;
pub mod kv;
pub mod meta;
pub mod object;
pub mod sql;
pub mod stream;
#[cfg(test)]
pub(crate) mod test_support;
pub mod timeseries;
pub mod vector;

use std::sync::Arc;

use rocksdb::{DB, IteratorMode, WriteBatch};
use tessera_api::command::Response;

use crate::crypt::Purpose;
use crate::error::Result;
use crate::keys::{self, CF_DATA, CF_INDEX};
use crate::store::Db;

/// A read's answer, or why it was refused (the reply carries the rejection).
pub type Answer<T> = std::result::Result<T, tessera_api::error::Rejection>;

/// Key spaces of the engines inside a group's range.
pub mod space {
    pub const KV: u8 = 1;
    pub const META: u8 = 2;
    pub const OBJECT: u8 = 3;
    pub const SQL: u8 = 4;
    pub const DOCUMENT: u8 = 5;
    pub const VECTOR: u8 = 6;
    pub const TIMESERIES: u8 = 7;
    pub const STREAM: u8 = 8;
    pub const GRAPH: u8 = 9;
    /// Ids of recently applied requests and their responses (retry deduplication).
    pub const DEDUP: u8 = 0xF0;

    /// Every space of a group's range with the model (or area) it belongs to:
    /// the state machine's own records and deduplication are `system`.
    pub const NAMED: [(u8, &str); 11] = [
        (crate::keys::SPACE_SM, "system"),
        (KV, "kv"),
        (META, "system"),
        (OBJECT, "objects"),
        (SQL, "sql"),
        (DOCUMENT, "documents"),
        (VECTOR, "vectors"),
        (TIMESERIES, "timeseries"),
        (STREAM, "streaming"),
        (GRAPH, "graph"),
        (DEDUP, "system"),
    ];
}

/// One engine: a data model's key space, the operations it applies
/// deterministically and the reads it answers from a replica's applied state.
/// The state machine dispatches each command and query to its engine.
pub trait Engine {
    /// The key space inside a group's range this engine owns (see [`space`]).
    const SPACE: u8;
    /// The operations this engine applies.
    type Op;
    /// The reads it answers.
    type Query;
    /// What a read answers.
    type Answer;
    /// Applies `op` stamped with the leader's clock into `tx`.
    fn apply(&self, tx: &mut Tx<'_>, issued_at_ms: i64, op: &Self::Op) -> Result<Response>;
    /// Answers `query` from the group's applied state; a refusal is the `Err` of the answer.
    fn query(&self, ctx: &QueryCtx<'_>, query: &Self::Query) -> Result<Answer<Self::Answer>>;
    /// Whether [`Engine::check_before_propose`] may refuse `op` (so the leader runs it).
    fn checks_before_propose(&self, _op: &Self::Op) -> bool {
        false
    }
    /// The leader's check of `op` against its current state before proposing it,
    /// changing nothing: a refusal answers the client and nothing is proposed.
    fn check_before_propose(&self, _ctx: &QueryCtx<'_>, _op: &Self::Op) -> Option<tessera_api::error::Rejection> {
        None
    }
}

/// What a read runs with: the group's data, the time expiry is judged by, the
/// flag that stops a long query when its caller stopped waiting, and the work
/// a SQL read may do before it stops (a point read tried on a runtime thread).
pub struct QueryCtx<'a> {
    pub data: &'a GroupData,
    pub now_ms: i64,
    pub cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
    pub max_work: Option<u64>,
}

impl QueryCtx<'_> {
    /// A view of the space of engine `E`.
    pub fn view<E: Engine>(&self) -> ReadView<'_> {
        self.data.space(E::SPACE)
    }
}

/// Where a [`ReadView`] reads from: the live database, or a RocksDB snapshot
/// (one consistent point in time for a whole query).
#[derive(Clone, Copy)]
enum Source<'a> {
    Db(&'a DB),
    Snapshot(&'a rocksdb::Snapshot<'a>),
}

/// Reads of one key space of one group. Values come back in plaintext (opened
/// here when the store encrypts at rest).
pub struct ReadView<'a> {
    db: &'a Db,
    source: Source<'a>,
    group: u64,
    space: u8,
    /// Set when the query's caller stopped waiting: scans stop with
    /// [`crate::error::StorageError::Cancelled`].
    cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl<'a> ReadView<'a> {
    pub(crate) fn new(db: &'a Db, group: u64, space: u8) -> Self {
        ReadView { db, source: Source::Db(db), group, space, cancel: None }
    }

    /// A view reading from `snapshot` of `db`.
    pub(crate) fn at_snapshot(db: &'a Db, snapshot: &'a rocksdb::Snapshot<'a>, group: u64, space: u8) -> Self {
        ReadView { db, source: Source::Snapshot(snapshot), group, space, cancel: None }
    }

    fn cf(&self) -> &'a rocksdb::ColumnFamily {
        self.db.cf_handle(CF_DATA).expect("column family is created at open")
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let k = keys::data_key(self.group, self.space, key);
        let raw = match self.source {
            Source::Db(db) => db.get_cf(self.cf(), &k)?,
            Source::Snapshot(s) => s.get_cf(self.cf(), &k)?,
        };
        match raw {
            Some(v) if self.db.encrypted() => Ok(Some(self.db.open(Purpose::Data, &k, &v)?.into_owned())),
            other => Ok(other),
        }
    }

    /// Calls `f` with every (key, value) whose key starts with `prefix`, in key
    /// order, until `f` returns false.
    pub fn scan_prefix(&self, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let start = keys::data_key(self.group, self.space, prefix);
        let end = keys::prefix_end(&start).unwrap_or_else(|| keys::group_end(self.group));
        self.iterate(&start, &end, |k, v| f(&k[9..], v))
    }

    /// Calls `f` with every (key, value) in `[start, end)`, in key order, until
    /// `f` returns false.
    pub fn scan_range(&self, start: &[u8], end: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let from = keys::data_key(self.group, self.space, start);
        let to = keys::data_key(self.group, self.space, end);
        if from >= to {
            return Ok(());
        }
        self.iterate(&from, &to, |k, v| f(&k[9..], v))
    }

    /// Asks for the stored keys in `[start, end)` of this space to be compacted
    /// once the current apply is written (physical only: reclaims the space of
    /// deleted and overwritten records); see [`crate::store::Db::compact_pending`].
    pub fn compact_range(&self, start: &[u8], end: Option<&[u8]>) {
        let from = keys::data_key(self.group, self.space, start);
        let to = match end {
            Some(e) => keys::data_key(self.group, self.space, e),
            None => keys::data_key(self.group, self.space + 1, b""),
        };
        self.db.compact_later(from, to);
    }

    fn index_cf(&self) -> &'a rocksdb::ColumnFamily {
        self.db.cf_handle(CF_INDEX).expect("column family is created at open")
    }

    /// This node's derived data under `key` (the `index` column family: not
    /// replicated, not in snapshots, read from the latest state whatever the
    /// view's source).
    pub fn derived(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let k = keys::data_key(self.group, self.space, key);
        match self.db.get_cf(self.index_cf(), &k)? {
            Some(v) => Ok(Some(self.db.open(Purpose::Data, &k, &v)?.into_owned())),
            None => Ok(None),
        }
    }

    /// Stores derived data under `key` (unsynced: it can always be recomputed).
    pub fn put_derived(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let k = keys::data_key(self.group, self.space, key);
        Ok(self.db.put_cf(self.index_cf(), &k, self.db.seal(Purpose::Data, &k, value))?)
    }

    /// Forgets the derived data under `key`.
    pub fn delete_derived(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_cf(self.index_cf(), keys::data_key(self.group, self.space, key))?)
    }

    /// The keys of this space's derived data that start with `prefix`.
    pub fn derived_keys(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>> {
        let start = keys::data_key(self.group, self.space, prefix);
        let end = keys::prefix_end(&start).unwrap_or_else(|| keys::group_end(self.group));
        let mut out = Vec::new();
        for item in self.db.iterator_cf_opt(self.index_cf(), keys::bounded(&start, &end), IteratorMode::Start) {
            out.push(item?.0[9..].to_vec());
        }
        Ok(out)
    }

    /// Visits `[from, to)` in key order until `f` returns false.
    fn iterate(&self, from: &[u8], to: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let bounds = keys::bounded(from, to);
        let iter = match self.source {
            Source::Db(db) => db.iterator_cf_opt(self.cf(), bounds, IteratorMode::Start),
            Source::Snapshot(s) => s.iterator_cf_opt(self.cf(), bounds, IteratorMode::Start),
        };
        for item in iter {
            if self.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
                return Err(crate::error::StorageError::Cancelled);
            }
            let (k, v) = item?;
            let v = self.db.open(Purpose::Data, &k, &v)?;
            if !f(&k, &v)? {
                break;
            }
        }
        Ok(())
    }
}

/// A write batch over one key space, applied atomically with the log id.
/// Reads see the state before the batch.
pub struct Tx<'a> {
    view: ReadView<'a>,
    batch: &'a mut WriteBatch,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(db: &'a Db, group: u64, space: u8, batch: &'a mut WriteBatch) -> Self {
        Tx { view: ReadView::new(db, group, space), batch }
    }

    /// Reads of the same space.
    pub fn view(&self) -> &ReadView<'a> {
        &self.view
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        let k = keys::data_key(self.view.group, self.view.space, key);
        let stored = self.view.db.seal(Purpose::Data, &k, value);
        self.batch.put_cf(self.view.cf(), &k, stored);
    }

    pub fn delete(&mut self, key: &[u8]) {
        let k = keys::data_key(self.view.group, self.view.space, key);
        self.batch.delete_cf(self.view.cf(), k);
    }

    /// Deletes every key of this space under `prefix` with one range tombstone: the
    /// command's size and apply time do not grow with the number of keys (a drop of
    /// a large collection or bucket is one small entry in the batch).
    pub fn delete_prefix(&mut self, prefix: &[u8]) {
        let start = keys::data_key(self.view.group, self.view.space, prefix);
        let end = keys::prefix_end(&start).expect("a data key starts with the group prefix, never all 0xff");
        self.batch.delete_range_cf(self.view.cf(), start, end);
    }
}

/// Read access to one group's state for the engines' query functions.
#[derive(Clone)]
pub struct GroupData {
    pub(crate) db: Arc<Db>,
    pub(crate) group: u64,
    /// The engines' in-memory state of the group (shared by its state machine and reader).
    pub(crate) memory: Arc<EngineMemory>,
    /// A query's cancel flag, handed to every view of this data (scans stop once set).
    pub(crate) cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// What engines keep in memory for one group, derived from its applied data: it
/// is rebuilt from storage after a snapshot install or a failed apply
/// ([`EngineMemory::invalidate`]). Today only the vector engine keeps any (its
/// HNSW indexes).
#[derive(Default)]
pub struct EngineMemory {
    pub(crate) vectors: vector::VectorState,
}

impl EngineMemory {
    /// Forgets everything derived; each engine rebuilds its part from storage on next use.
    pub(crate) fn invalidate(&self) {
        self.vectors.invalidate();
    }
}

impl GroupData {
    /// A view of one engine's space.
    pub fn space(&self, space: u8) -> ReadView<'_> {
        ReadView { cancel: self.cancel.clone(), ..ReadView::new(&self.db, self.group, space) }
    }

    /// The database handle, for taking a RocksDB snapshot.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }
}
