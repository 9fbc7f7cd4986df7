//! The replicated state machine of one group, and its snapshots.
//!
//! Applying an entry writes the engine's changes and the entry's log id in one
//! RocksDB write batch. A snapshot is every key of the group's `data` range, read
//! from one RocksDB snapshot into a file; installing one replaces that range with
//! one atomic SST ingest (see [`crate::snapshot`]).

use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageIOError, StoredMembership};
use rocksdb::{DB, IteratorMode, WriteBatch, WriteOptions};
use tessera_api::command::{Command, KvQuery, KvQueryResult, Operation, Query, QueryResult, Response};
use tessera_api::sql::SqlQuery;

use crate::crypt::Purpose;
use crate::engine::document::DocumentEngine;
use crate::engine::graph::GraphEngine;
use crate::engine::sql::SqlEngine;
use crate::engine::stream::StreamEngine;
use crate::engine::timeseries::TimeSeriesEngine;
use crate::engine::vector::VectorEngine;
use crate::engine::{self, Engine, GroupData, QueryCtx, Tx, kv::KvEngine, meta::MetaEngine, object::ObjectEngine, space};
use crate::error::{Result, StorageError};
use crate::keys::{self, CF_DATA, CF_RAFT};
use crate::snapshot::{self, SNAPSHOT_WRITES, SnapshotDir, SnapshotFile};
use crate::store::Db;
use crate::types::{RaftStorageError, TypeConfig};

fn cf<'a>(db: &'a DB, name: &str) -> &'a rocksdb::ColumnFamily {
    db.cf_handle(name).expect("column family is created at open")
}

/// The state machine of one group on this node.
pub struct StateMachine {
    pub(crate) data: GroupData,
    /// The epoch of the group's gate its work runs under (0: ungated; see [`crate::gate`]).
    epoch: u64,
    /// While a batch entry applies: the place (from 1) of the command being
    /// applied, which its change-capture records carry in their position.
    batch_place: std::sync::atomic::AtomicU32,
}

/// A model's answer as the group's reply: its result, or the rejection.
fn answer<T>(a: engine::Answer<T>, wrap: impl FnOnce(T) -> QueryResult) -> QueryResult {
    a.map_or_else(QueryResult::Rejected, wrap)
}

/// The work a point read may do on a runtime thread ([`GroupReader::query_point`]):
/// rows read and values evaluated, enough for a primary-key or index lookup of
/// a few rows, far too little for a scan.
pub const POINT_READ_WORK: u64 = 256;

/// Answers queries from one group's local state (any replica).
#[derive(Clone)]
pub struct GroupReader {
    data: GroupData,
}

impl GroupReader {
    pub(crate) fn new(db: Arc<Db>, group: u64, memory: Arc<engine::EngineMemory>) -> Self {
        GroupReader { data: GroupData { db, group, memory, cancel: None } }
    }

    /// Writes this replica's records to export `id` (see [`crate::backup`]).
    pub fn export(&self, id: &str) -> Result<crate::backup::ExportInfo> {
        crate::backup::export(&self.data, id)
    }

    /// One page of export `id` of this group (see [`crate::backup::read_export`]).
    pub fn read_export(&self, id: &str, offset: u64, frame: u64, max_bytes: usize) -> Result<crate::backup::ExportPage> {
        crate::backup::read_export(&self.data.db, self.data.group, id, offset, frame, max_bytes)
    }

    /// Answers `query` from this replica's applied state, with `now_ms` for expiry.
    pub fn query(&self, query: &Query, now_ms: i64) -> Result<QueryResult> {
        self.query_cancellable(query, now_ms, None)
    }

    /// Like [`GroupReader::query`]; setting `cancel` stops a running SQL query
    /// at its next work check (the caller stopped waiting).
    pub fn query_cancellable(
        &self,
        query: &Query,
        now_ms: i64,
        cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<QueryResult> {
        self.query_bounded(query, now_ms, cancel, None)
    }

    /// Answers `query` at once when it is a point read — a key-value get, or a
    /// SQL read of one table ([`tessera_sql::is_point_read`]) that finishes
    /// within [`POINT_READ_WORK`] — so a caller on a runtime thread need not
    /// hand it to another thread. None when it is not one, went over that
    /// budget or was refused: the caller runs it as any read (a refusal comes
    /// back from there with its own words; a point read costs little twice).
    pub fn query_point(&self, query: &Query, now_ms: i64) -> Option<QueryResult> {
        let point = match query {
            Query::Kv(KvQuery::Get { .. }) => true,
            Query::Sql(SqlQuery::Execute { sql, .. }) => tessera_sql::is_point_read(sql),
            _ => false,
        };
        if !point {
            return None;
        }
        // A panic is the query threads' to report (they catch it and answer an
        // error), not the runtime task's to end with.
        let answered =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.query_bounded(query, now_ms, None, Some(POINT_READ_WORK))));
        match answered {
            Ok(Ok(QueryResult::Rejected(_)) | Err(_)) | Err(_) => None,
            Ok(Ok(answer)) => Some(answer),
        }
    }

    fn query_bounded(
        &self,
        query: &Query,
        now_ms: i64,
        cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
        max_work: Option<u64>,
    ) -> Result<QueryResult> {
        // Scans of the document, time-series, graph and vector engines stop when
        // the caller stops waiting (SQL checks the flag in its own executor).
        let scans_stop = matches!(query, Query::Document(_) | Query::TimeSeries(_) | Query::Graph(_) | Query::Vector(_));
        let data = GroupData { cancel: if scans_stop { cancel.clone() } else { None }, ..self.data.clone() };
        let ctx = QueryCtx { data: &data, now_ms, cancel, max_work };
        let vectors = VectorEngine { state: &self.data.memory.vectors };
        // A group a restore holds answers only that restore's own reads.
        let pass = match query {
            Query::DuringRestore { backup_id, .. } => Some(backup_id.as_str()),
            _ => None,
        };
        if let Some(refusal) = crate::backup::check_hold(&self.data, pass)? {
            return Ok(QueryResult::Rejected(refusal));
        }
        let answered = self.answer(&ctx, &vectors, query);
        match answered {
            Err(StorageError::Cancelled) => Ok(QueryResult::rejected(
                tessera_api::error::ErrorCode::QueryTimeout,
                "the query was cancelled: it ran past its time limit (query_timeout_secs)",
            )),
            other => other,
        }
    }

    fn answer(&self, ctx: &QueryCtx<'_>, vectors: &VectorEngine<'_>, query: &Query) -> Result<QueryResult> {
        Ok(match query {
            Query::Kv(KvQuery::Range) => {
                let mut info = crate::range::info(&self.data)?;
                info.applied_index = read_sm_record::<LogId<u64>>(&self.data, keys::SM_APPLIED)?.map_or(0, |l| l.index);
                QueryResult::Kv(KvQueryResult::Range(info))
            }
            Query::Kv(q) => match crate::range::check_query(&crate::range::own_range(&self.data)?, q) {
                Some(moved) => QueryResult::Rejected(moved),
                None => answer(KvEngine.query(ctx, q)?, QueryResult::Kv),
            },
            Query::Meta(q) => answer(MetaEngine.query(ctx, q)?, QueryResult::Meta),
            Query::Object(q) => answer(ObjectEngine.query(ctx, q)?, QueryResult::Object),
            Query::Sql(q) => answer(SqlEngine.query(ctx, q)?, QueryResult::Sql),
            Query::Document(q) => answer(DocumentEngine.query(ctx, q)?, QueryResult::Document),
            Query::Vector(q) => answer(vectors.query(ctx, q)?, QueryResult::Vector),
            Query::TimeSeries(q) => answer(TimeSeriesEngine.query(ctx, q)?, QueryResult::TimeSeries),
            Query::Stream(q) => answer(StreamEngine.query(ctx, q)?, QueryResult::Stream),
            Query::Graph(q) => answer(GraphEngine.query(ctx, q)?, QueryResult::Graph),
            Query::Subject(rule) => QueryResult::Subject(crate::subject::find(&self.data, rule, ctx.now_ms)?),
            Query::DuringRestore { query, .. } => self.answer(ctx, vectors, query)?,
        })
    }

    /// Whether `op`'s engine checks it before it is proposed ([`Engine::checks_before_propose`]).
    pub fn checks_before_propose(&self, op: &Operation) -> bool {
        match op.unwrapped() {
            Operation::Sql(op) => SqlEngine.checks_before_propose(op),
            // The other engines have no check (the trait's default).
            _ => false,
        }
    }

    /// The leader's check of `op` before proposing it, at `now_ms`
    /// ([`Engine::check_before_propose`]): `Some` refusal answers the client.
    pub fn check_before_propose(&self, op: &Operation, now_ms: i64) -> Option<tessera_api::error::Rejection> {
        let ctx = QueryCtx { data: &self.data, now_ms, cancel: None, max_work: None };
        match op.unwrapped() {
            Operation::Sql(op) => SqlEngine.check_before_propose(&ctx, op),
            _ => None,
        }
    }

    /// Builds the group's vector indexes that are not in memory yet (see
    /// [`engine::vector::warm`]); how many were built.
    pub fn warm_vector_indexes(&self) -> Result<usize> {
        engine::vector::warm(&self.data)
    }

    /// Stores link checkpoints of the group's large vector indexes that grew by
    /// at least `min_new` nodes since their last one (see
    /// [`engine::vector::checkpoint`]); how many were written.
    pub fn checkpoint_vector_indexes(&self, min_new: usize) -> Result<usize> {
        engine::vector::checkpoint(&self.data, min_new)
    }

    /// The last log id applied to this replica.
    pub fn applied(&self) -> Result<Option<LogId<u64>>> {
        read_sm_record(&self.data, keys::SM_APPLIED)
    }

    /// The largest command stamp this replica applied (the group's clock), if any.
    pub fn applied_clock(&self) -> Result<Option<i64>> {
        read_clock(&self.data)
    }
}

/// The state-machine records every apply reads (the group's clock, its key
/// range, the markers of a restore in progress and of a restore's hold): the
/// apply path keeps them in memory ([`Db::cached_record`]), so a write does
/// not read them back from RocksDB. Exact, not a hint: an apply reads them to
/// decide what it writes.
const CACHED_RECORDS: [u8; 4] = [keys::SM_CLOCK, keys::SM_RANGE, keys::SM_RESTORE, keys::SM_RESTORE_HOLD];

/// The group's applied clock (see [`keys::SM_CLOCK`]), if a command was applied.
fn read_clock(data: &GroupData) -> Result<Option<i64>> {
    match read_sm_raw(data, keys::SM_CLOCK)? {
        Some(bytes) => {
            let be: [u8; 8] = bytes.as_slice().try_into().map_err(|_| StorageError::Corrupt("applied clock record".into()))?;
            Ok(Some(i64::from_be_bytes(be)))
        }
        None => Ok(None),
    }
}

pub(crate) fn read_sm_record<T: serde::de::DeserializeOwned>(data: &GroupData, tag: u8) -> Result<Option<T>> {
    match read_sm_raw(data, tag)? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        None => Ok(None),
    }
}

/// The plaintext of the group's state-machine record `tag`: from the apply
/// path's cache when it holds the record, else from RocksDB.
fn read_sm_raw(data: &GroupData, tag: u8) -> Result<Option<Vec<u8>>> {
    if let Some(known) = data.db.cached_record(data.group, tag) {
        return Ok(known);
    }
    stored_sm_raw(&data.db, data.group, tag)
}

fn stored_sm_raw(db: &Db, group: u64, tag: u8) -> Result<Option<Vec<u8>>> {
    let key = keys::data_key(group, keys::SPACE_SM, &[tag]);
    match db.get_cf(cf(db, CF_DATA), &key)? {
        Some(raw) => Ok(Some(db.open(Purpose::Data, &key, &raw)?.into_owned())),
        None => Ok(None),
    }
}

/// Puts a record into the `data` column family, sealed when encryption is on.
fn put_data(db: &Db, batch: &mut WriteBatch, key: &[u8], value: &[u8]) {
    batch.put_cf(cf(db, CF_DATA), key, db.seal(Purpose::Data, key, value));
}

impl StateMachine {
    pub(crate) fn new(db: Arc<Db>, group: u64, memory: Arc<engine::EngineMemory>) -> Self {
        StateMachine { data: GroupData { db, group, memory, cancel: None }, epoch: 0, batch_place: Default::default() }
    }

    /// The same machine working under epoch `epoch` of its group's gate.
    pub(crate) fn with_epoch(self, epoch: u64) -> Self {
        StateMachine { epoch, ..self }
    }

    /// Applies `cmd` as the committed log entry `log_index` (term 1), through
    /// the same path as an entry Raft committed. For single-process harnesses
    /// (the router's in-process tests); a cluster applies only what Raft
    /// committed, in log order.
    pub fn apply_at(&self, log_index: u64, cmd: Command) -> Result<Response, RaftStorageError> {
        let entry =
            openraft::Entry { log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), log_index), payload: EntryPayload::Normal(cmd) };
        Ok(self.apply_entries(vec![entry])?.pop().unwrap_or(Response::Empty))
    }

    /// Applies `entries` in order, each in one write batch with its log id.
    pub(crate) fn apply_entries(&self, entries: Vec<openraft::Entry<TypeConfig>>) -> Result<Vec<Response>, RaftStorageError> {
        let mut responses = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut batch = WriteBatch::default();
            let mut clock = None;
            let response = match &entry.payload {
                EntryPayload::Blank => Response::Empty,
                EntryPayload::Normal(Command { op: Operation::Batch(cmds), .. }) => {
                    let (response, last_clock) =
                        self.apply_batch(&mut batch, entry.log_id.index, cmds).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
                    clock = last_clock;
                    response
                }
                EntryPayload::Normal(cmd) => {
                    let (response, stamp) =
                        self.apply_stamped(&mut batch, entry.log_id.index, cmd).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
                    clock = Some(stamp);
                    response
                }
                EntryPayload::Membership(m) => {
                    let stored = StoredMembership::new(Some(entry.log_id), m.clone());
                    let bytes = serde_json::to_vec(&stored).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
                    put_data(&self.data.db, &mut batch, &self.sm_key(keys::SM_MEMBERSHIP), &bytes);
                    Response::Empty
                }
            };
            let applied = serde_json::to_vec(&entry.log_id).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
            put_data(&self.data.db, &mut batch, &self.sm_key(keys::SM_APPLIED), &applied);
            self.data.db.write(batch).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
            if let EntryPayload::Normal(cmd) = &entry.payload {
                match &cmd.op {
                    Operation::Batch(cmds) => cmds.iter().for_each(|cmd| self.written(cmd, None)),
                    _ => self.written(cmd, None),
                }
            }
            if let Some(clock) = clock {
                self.data.db.cache_record(self.data.group, keys::SM_CLOCK, Some(clock.to_be_bytes().to_vec()));
            }
            self.data.db.compact_pending();
            if matches!(&entry.payload, EntryPayload::Normal(Command { op: Operation::Split(_), .. })) {
                self.data.db.note_group_event();
            }
            if let EntryPayload::Normal(cmd) = &entry.payload
                && crate::backup::is_restore(&cmd.op)
            {
                // In-memory indexes are rebuilt from the restored records.
                self.data.memory.invalidate();
            }
            if let Response::SubjectErased { items } = &response
                && items.iter().any(|i| i.store == "vector")
            {
                // Rebuilt from the node log the erasure rewrote, the same on every replica.
                self.data.memory.invalidate();
            }
            responses.push(response);
        }
        Ok(responses)
    }

    /// Applies `cmd` at the group's clock when it was stamped before it (the
    /// group's time never runs backwards, whatever the clocks of successive
    /// leaders say), and moves the clock to its stamp.
    /// Answers the command's response and the clock it wrote.
    fn apply_stamped(&self, batch: &mut WriteBatch, log_index: u64, cmd: &Command) -> Result<(Response, i64)> {
        self.load_cached_records()?;
        let stamped;
        let cmd = match read_clock(&self.data)? {
            Some(clock) if cmd.issued_at_ms < clock => {
                stamped = Command { issued_at_ms: clock, ..cmd.clone() };
                &stamped
            }
            _ => cmd,
        };
        let response = self.apply_once(batch, log_index, cmd)?;
        put_data(&self.data.db, batch, &self.sm_key(keys::SM_CLOCK), &cmd.issued_at_ms.to_be_bytes());
        Ok((response, cmd.issued_at_ms))
    }

    /// Reads into the cache the records of [`CACHED_RECORDS`] it lacks.
    fn load_cached_records(&self) -> Result<()> {
        let (db, group) = (&*self.data.db, self.data.group);
        for tag in db.uncached_records(group, &CACHED_RECORDS) {
            db.cache_record(group, tag, stored_sm_raw(db, group, tag)?);
        }
        Ok(())
    }

    /// Once `cmd`'s records are written: the cache forgets what the command may
    /// have changed besides the clock (a split: its group's range and the child's
    /// records; a restore: its markers) and keeps `clock`, the clock it wrote.
    fn written(&self, cmd: &Command, clock: Option<i64>) {
        let db = &self.data.db;
        match cmd.op.unwrapped() {
            Operation::Split(op) => {
                db.forget_records(self.data.group);
                db.forget_records(op.child);
            }
            Operation::Restore(_) => db.forget_records(self.data.group),
            _ => {}
        }
        if let Some(clock) = clock {
            db.cache_record(self.data.group, keys::SM_CLOCK, Some(clock.to_be_bytes().to_vec()));
        }
    }

    /// Applies the commands of the batch entry `log_index` one after the other,
    /// each written before the next reads: all but the last in write batches of
    /// their own that also record how far the entry got, the last into `batch`
    /// (written with the entry's log id). An entry applied again after a crash in
    /// its middle skips the commands applied already (their clients saw no answer).
    /// Answers the entry's response and the clock its last command wrote.
    fn apply_batch(&self, batch: &mut WriteBatch, log_index: u64, cmds: &[Command]) -> Result<(Response, Option<i64>)> {
        let progress_key = self.sm_key(keys::SM_BATCH_PROGRESS);
        let done = match self.data.db.get_cf(cf(&self.data.db, CF_DATA), &progress_key)? {
            Some(raw) => {
                let bytes = self.data.db.open(Purpose::Data, &progress_key, &raw)?;
                let (index, count) = bytes.split_at_checked(8).ok_or_else(|| StorageError::Corrupt("batch progress record".into()))?;
                let be = |b: &[u8]| b.try_into().map(u64::from_be_bytes).map_err(|_| StorageError::Corrupt("batch progress record".into()));
                if be(index)? == log_index { be(count)? as usize } else { 0 }
            }
            None => 0,
        };
        let mut responses = Vec::with_capacity(cmds.len());
        let mut last_clock = None;
        for (i, cmd) in cmds.iter().enumerate() {
            if i < done {
                responses.push(Response::Empty);
                continue;
            }
            self.batch_place.store(i as u32 + 1, std::sync::atomic::Ordering::Relaxed);
            let response = if matches!(cmd.op, Operation::Batch(_)) {
                Response::rejected(tessera_api::error::ErrorCode::Invalid, "a batch of commands cannot hold another batch")
            } else if i + 1 == cmds.len() {
                let (response, clock) = self.apply_stamped(batch, log_index, cmd)?;
                last_clock = Some(clock);
                response
            } else {
                let mut own = WriteBatch::default();
                let (response, clock) = self.apply_stamped(&mut own, log_index, cmd)?;
                let progress = [log_index.to_be_bytes(), (i as u64 + 1).to_be_bytes()].concat();
                put_data(&self.data.db, &mut own, &progress_key, &progress);
                self.data.db.write(own)?;
                self.written(cmd, Some(clock));
                response
            };
            responses.push(response);
        }
        self.batch_place.store(0, std::sync::atomic::Ordering::Relaxed);
        Ok((Response::Batch(responses), last_clock))
    }

    /// Applies a command unless its request id was applied already (then the
    /// first response is returned and nothing changes); see [`crate::dedup`].
    fn apply_once(&self, batch: &mut WriteBatch, log_index: u64, cmd: &Command) -> Result<Response> {
        // A restore replaces the group's records at its end: nothing else is
        // written meanwhile (it would be lost, or mixed into the restored
        // state). Not remembered for retries: the same request may pass later.
        if !matches!(cmd.op, Operation::Restore(_))
            && let Some(backup) = crate::backup::restore_in_progress(&self.data)?
        {
            return Ok(Response::rejected(
                tessera_api::error::ErrorCode::Conflict,
                format!("a restore of backup {backup} is in progress on this group; write again once it is over"),
            ));
        }
        // A group a restore holds takes only that restore's own writes; they
        // apply as themselves (the wrapper only names the restore).
        if !matches!(cmd.op, Operation::Restore(_)) {
            let pass = match &cmd.op {
                Operation::DuringRestore { backup_id, .. } => Some(backup_id.as_str()),
                _ => None,
            };
            if let Some(refusal) = crate::backup::check_hold(&self.data, pass)? {
                return Ok(Response::Rejected(refusal));
            }
        }
        let unwrapped;
        let cmd = match &cmd.op {
            Operation::DuringRestore { .. } => {
                unwrapped = Command { op: cmd.op.unwrapped().clone(), ..cmd.clone() };
                &unwrapped
            }
            _ => cmd,
        };
        let Some(id) = cmd.request_id.as_deref().filter(|id| crate::dedup::valid_id(id)) else {
            return self.apply_guarded(batch, log_index, cmd);
        };
        let (db, group) = (&*self.data.db, self.data.group);
        if let Some(first) = crate::dedup::seen(&engine::ReadView::new(db, group, space::DEDUP), id, cmd)? {
            return Ok(first);
        }
        let response = self.apply_guarded(batch, log_index, cmd)?;
        crate::dedup::remember(&mut Tx::new(db, group, space::DEDUP, batch), log_index, cmd.issued_at_ms, id, cmd, &response)?;
        Ok(response)
    }

    /// [`StateMachine::apply_command`] into an empty `batch`, where an engine that
    /// panics or fails deterministically (the same on every replica: an encoding
    /// error) leaves a recorded rejection and no writes, so the entry counts as
    /// applied instead of stopping the group on every replica at every start (a
    /// poison pill). Errors of this replica's storage stay fatal.
    ///
    /// A panic is taken as the command's own only when it comes back with every
    /// in-memory index dropped (they are this replica's state, not the group's): the
    /// retry reads nothing but the group's replicated records, as every replica
    /// would. A panic that does not come back was this replica's, and the retry's
    /// outcome is applied, as elsewhere.
    fn apply_guarded(&self, batch: &mut WriteBatch, log_index: u64, cmd: &Command) -> Result<Response> {
        let attempt =
            |batch: &mut WriteBatch| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.apply_command(batch, log_index, cmd)));
        let outcome = match attempt(batch) {
            Err(panic) => {
                tracing::warn!(
                    group = self.data.group,
                    log_index,
                    "an engine panicked applying a command ({}): retrying with the in-memory indexes rebuilt from storage",
                    panic_message(&*panic)
                );
                self.data.memory.invalidate();
                batch.clear();
                attempt(batch)
            }
            first => first,
        };
        let message = match outcome {
            Ok(Ok(response)) => return Ok(response),
            Ok(Err(StorageError::Encoding(e))) => format!("the command could not be applied: {e}"),
            Ok(Err(fatal)) => return Err(fatal),
            Err(panic) => {
                let what = panic_message(&*panic);
                // In-memory indexes may be half-updated: rebuild them from storage.
                self.data.memory.invalidate();
                tracing::error!(group = self.data.group, log_index, "an engine panicked applying a command, twice: {what}");
                format!("the command could not be applied: internal error ({what})")
            }
        };
        batch.clear();
        Ok(Response::rejected(tessera_api::error::ErrorCode::Invalid, message))
    }

    /// Runs a SQL write (`run`, given the SQL space and which tables of
    /// `database` have change data capture) and appends its change records to
    /// their channels in the same batch.
    fn apply_sql(
        &self,
        batch: &mut WriteBatch,
        log_index: u64,
        now: i64,
        database: &str,
        run: impl FnOnce(&mut Tx<'_>, &dyn Fn(&str) -> bool) -> Result<(Response, Vec<tessera_sql::RowChange>)>,
    ) -> Result<Response> {
        let (db, group) = (&*self.data.db, self.data.group);
        let cdc = engine::stream::cdc_tables(&engine::ReadView::new(db, group, space::STREAM), database)?;
        let capture = |table: &str| cdc.contains(table);
        let (response, changes) = run(&mut Tx::new(db, group, space::SQL, batch), &capture)?;
        if !changes.is_empty() {
            let stream_tx = &mut Tx::new(db, group, space::STREAM, batch);
            let place = self.batch_place.load(std::sync::atomic::Ordering::Relaxed);
            let position = engine::stream::ChangePosition { log_index, command: (place > 0).then(|| place - 1) };
            engine::stream::append_changes(stream_tx, now, position, database, changes)?;
        }
        Ok(response)
    }

    /// Applies one command into `batch`; business-rule outcomes are responses.
    fn apply_command(&self, batch: &mut WriteBatch, log_index: u64, cmd: &Command) -> Result<Response> {
        let (db, group) = (&*self.data.db, self.data.group);
        #[cfg(test)]
        if let Operation::Kv(tessera_api::command::KvOp::Put { key, .. }) = &cmd.op
            && key == test_hooks::PANIC_KEY
        {
            panic!("test hook: an engine bug");
        }
        #[cfg(test)]
        if let Operation::Kv(tessera_api::command::KvOp::Put { key, .. }) = &cmd.op
            && key == test_hooks::PANIC_ONCE_KEY
            && !test_hooks::PANICKED_ONCE.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            panic!("test hook: this replica's in-memory state was wrong");
        }
        /// Applies `op` with engine `engine` in its own space of this group.
        fn with<E: Engine>(engine: E, db: &Db, group: u64, batch: &mut WriteBatch, now: i64, op: &E::Op) -> Result<Response> {
            engine.apply(&mut Tx::new(db, group, E::SPACE, batch), now, op)
        }
        let now = cmd.issued_at_ms;
        match &cmd.op {
            Operation::Kv(op) => match crate::range::check_op(&crate::range::own_range(&self.data)?, op) {
                Some(moved) => Ok(Response::Rejected(moved)),
                None => with(KvEngine, db, group, batch, now, op),
            },
            Operation::Split(op) => crate::range::apply_split(&self.data, batch, now, op),
            Operation::EraseSubject(op) => crate::subject::erase(&self.data, db, batch, now, op),
            Operation::Restore(op) => crate::backup::apply_restore(&self.data, batch, op),
            Operation::Meta(op) => with(MetaEngine, db, group, batch, now, op),
            Operation::Object(op) => with(ObjectEngine, db, group, batch, now, op),
            Operation::Document(op) => with(DocumentEngine, db, group, batch, now, op),
            Operation::Vector(op) => with(VectorEngine { state: &self.data.memory.vectors }, db, group, batch, now, op),
            Operation::TimeSeries(op) => with(TimeSeriesEngine, db, group, batch, now, op),
            Operation::Stream(op) => with(StreamEngine, db, group, batch, now, op),
            Operation::Graph(op) => with(GraphEngine, db, group, batch, now, op),
            // SQL writes also capture their row changes for CDC (see `apply_sql`).
            Operation::Sql(op) => {
                self.apply_sql(batch, log_index, now, &op.database, |tx, capture| SqlEngine.apply_capturing(tx, now, op, capture))
            }
            Operation::SqlImport(op) => {
                self.apply_sql(batch, log_index, now, &op.database, |tx, capture| SqlEngine.import_capturing(tx, now, op, capture))
            }
            // Unwrapped in `apply_once`; a nested one is refused.
            Operation::DuringRestore { .. } => Ok(Response::rejected(
                tessera_api::error::ErrorCode::Invalid,
                "an operation during a restore wraps another operation, not a wrapped one",
            )),
            // A batch is unpacked by `apply_entries`; one anywhere else is refused.
            Operation::Batch(_) => {
                Ok(Response::rejected(tessera_api::error::ErrorCode::Invalid, "a batch of commands is a log entry of its own"))
            }
        }
    }

    fn sm_key(&self, tag: u8) -> Vec<u8> {
        keys::data_key(self.data.group, keys::SPACE_SM, &[tag])
    }
}

/// Builds snapshots of one group.
pub struct SnapshotBuilder {
    data: GroupData,
    epoch: u64,
}

impl SnapshotBuilder {
    /// Builds a snapshot file of the group's applied state and makes it the
    /// current snapshot, unless a newer one was installed meanwhile.
    fn build(&self) -> Result<Snapshot<TypeConfig>> {
        let dir = SnapshotDir::of(&self.data);
        let (meta, part) = snapshot::build(&self.data, &dir)?;
        // Opened first: a build that loses to a newer install is unlinked but stays readable.
        let file = SnapshotFile::open(&part)?;
        let _serialized = SNAPSHOT_WRITES.lock().unwrap_or_else(|e| e.into_inner());
        dir.publish(&part, &meta)?;
        Ok(Snapshot { meta, snapshot: Box::new(file) })
    }
}

/// At start, a replica whose applied index is behind its purge mark (left only
/// by older versions, which could purge before an install applied) cannot start
/// openraft as is: the log it would re-apply is gone. The purge and committed
/// marks are lowered to the applied id so the group starts and the leader sends
/// what follows, and the purged index becomes the replica's vote floor: it does
/// not grant votes until it has applied that far again, since its log no
/// longer shows entries it acknowledged. Refused (left alone) when log entries
/// after the purge mark exist.
pub(crate) fn guard_applied_behind_purge(data: &GroupData) -> Result<()> {
    let db = &*data.db;
    let group = data.group;
    let raft_json = |tag: u8| -> Result<Option<Vec<u8>>> { Ok(db.get_cf(cf(db, CF_RAFT), keys::raft_key(group, tag))?) };
    let purged: Option<LogId<u64>> = match raft_json(keys::RAFT_PURGED)? {
        Some(b) => serde_json::from_slice(&b)?,
        None => None,
    };
    let Some(purged) = purged else { return Ok(()) };
    let applied: Option<LogId<u64>> = read_sm_record(data, keys::SM_APPLIED)?;
    if applied.is_some_and(|a| a.index >= purged.index) {
        return Ok(());
    }
    let mut later = db.iterator_cf_opt(
        cf(db, keys::CF_LOG),
        keys::bounded(&keys::log_key(group, purged.index.saturating_add(1)), &keys::group_end(group)),
        IteratorMode::Start,
    );
    if let Some(item) = later.next() {
        item?;
        tracing::error!(group, purged = %purged, "applied behind the purge mark with later log entries; not repairing");
        return Ok(());
    }
    let floor = stored_vote_floor(db, group)?.unwrap_or(0).max(purged.index);
    let mut batch = WriteBatch::default();
    batch.put_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_PURGED), serde_json::to_vec(&applied)?);
    let committed: Option<LogId<u64>> = match raft_json(keys::RAFT_COMMITTED)? {
        Some(b) => serde_json::from_slice(&b)?,
        None => None,
    };
    if committed > applied {
        batch.put_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_COMMITTED), serde_json::to_vec(&applied)?);
    }
    batch.put_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_VOTE_FLOOR), serde_json::to_vec(&floor)?);
    let mut w = WriteOptions::default();
    w.set_sync(true);
    db.write_opt(batch, &w)?;
    // A stored snapshot past the applied state would contradict it; a new one is built.
    let dir = SnapshotDir::of(data);
    if let Some((meta, path)) = dir.current_meta()?
        && meta.last_log_id > applied
    {
        std::fs::remove_file(path)?;
    }
    tracing::warn!(group, purged = %purged, applied = ?applied, floor,
        "applied behind the purge mark: lowered the marks; this replica does not vote until it applied the floor");
    Ok(())
}

fn stored_vote_floor(db: &Db, group: u64) -> Result<Option<u64>> {
    match db.get_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_VOTE_FLOOR))? {
        Some(b) => Ok(Some(serde_json::from_slice(&b)?)),
        None => Ok(None),
    }
}

/// The log index this replica must apply before it grants votes again, if
/// it has not applied it yet (see [`guard_applied_behind_purge`]).
pub(crate) fn vote_floor(data: &GroupData) -> Result<Option<u64>> {
    let Some(floor) = stored_vote_floor(&data.db, data.group)? else { return Ok(None) };
    let applied: Option<LogId<u64>> = read_sm_record(data, keys::SM_APPLIED)?;
    Ok(applied.is_none_or(|a| a.index < floor).then_some(floor))
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, RaftStorageError> {
        let (data, epoch) = (self.data.clone(), self.epoch);
        tokio::task::spawn_blocking(move || {
            let _pass = pass(&data, epoch)?;
            SnapshotBuilder { data, epoch }.build()
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(None, &e))?
        .map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, StoredMembership<u64, openraft::BasicNode>), RaftStorageError> {
        let applied = read_sm_record(&self.data, keys::SM_APPLIED).map_err(StorageError::into_raft_read)?;
        let membership = read_sm_record(&self.data, keys::SM_MEMBERSHIP).map_err(StorageError::into_raft_read)?.unwrap_or_default();
        Ok((applied, membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, RaftStorageError>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<openraft::Entry<TypeConfig>> = entries.into_iter().collect();
        let started = std::time::Instant::now();
        // Point writes cost what the log append before them costs (a few key
        // lookups and record writes): applied here, on the runtime, as the append
        // is, they spare two thread hand-overs per entry on every replica.
        if entries.iter().all(applies_lightly) && crate::crash_point::apply_delay().is_none() {
            let _pass = pass(&self.data, self.epoch).map_err(|e| StorageIOError::write_state_machine(&e))?;
            let applied = self.apply_entries(entries);
            metrics::histogram!("tessera_raft_apply_seconds", "on" => "runtime").record(started.elapsed().as_secs_f64());
            return applied;
        }
        // Other engines do real work here (index upkeep, SQL, vector graphs): run it on
        // the blocking pool, never on the runtime threads that drive every group's
        // heartbeats and RPCs.
        let machine = StateMachine { data: self.data.clone(), epoch: self.epoch, batch_place: Default::default() };
        let applied = tokio::task::spawn_blocking(move || {
            let _pass = pass(&machine.data, machine.epoch).map_err(|e| StorageIOError::write_state_machine(&e))?;
            // Test builds: a slow apply, holding its pass as a real one would.
            if let Some(delay) = crate::crash_point::apply_delay() {
                std::thread::sleep(delay);
            }
            machine.apply_entries(entries)
        })
        .await
        .map_err(|e| StorageIOError::write_state_machine(&e))?;
        metrics::histogram!("tessera_raft_apply_seconds", "on" => "blocking_pool").record(started.elapsed().as_secs_f64());
        applied
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder { data: self.data.clone(), epoch: self.epoch }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, RaftStorageError> {
        let dir = SnapshotDir::of(&self.data);
        let file = dir.temp("recv", "part").and_then(|path| SnapshotFile::create(&path));
        Ok(Box::new(file.map_err(|e| StorageIOError::write_snapshot(None, &e))?))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), RaftStorageError> {
        fn failed(meta: &SnapshotMeta<u64, openraft::BasicNode>, e: &(impl std::error::Error + 'static)) -> RaftStorageError {
            StorageIOError::write_snapshot(Some(meta.signature()), e).into()
        }
        let path = snapshot.finish_writing().await.map_err(|e| failed(meta, &e))?;
        let data = self.data.clone();
        let meta_owned = meta.clone();
        let install_path = path.clone();
        // Reading, sealing and ingesting a whole group is heavy: off the runtime threads.
        let epoch = self.epoch;
        let installed = tokio::task::spawn_blocking(move || {
            let _pass = pass(&data, epoch)?;
            snapshot::install(&data, &SnapshotDir::of(&data), &meta_owned, &install_path)
        })
        .await
        .map_err(|e| failed(meta, &e))?;
        if let Err(e) = installed {
            self.data.db.forget_records(self.data.group);
            let _ = std::fs::remove_file(&path);
            return Err(failed(meta, &e));
        }
        let group = self.data.group;
        self.data.db.forget_records(group); // the install replaced them
        self.data.memory.invalidate(); // in-memory indexes are rebuilt from the new records
        self.data.db.note_group_event(); // the snapshot may record splits this replica skipped
        tracing::info!(group, snapshot = %meta.snapshot_id, "installed snapshot");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, RaftStorageError> {
        let dir = SnapshotDir::of(&self.data);
        let read = || -> Result<Option<Snapshot<TypeConfig>>> {
            let _serialized = SNAPSHOT_WRITES.lock().unwrap_or_else(|e| e.into_inner());
            match dir.current_meta()? {
                Some((meta, path)) => Ok(Some(Snapshot { meta, snapshot: Box::new(SnapshotFile::open(&path)?) })),
                None => Ok(None),
            }
        };
        read().map_err(|e| StorageIOError::read_snapshot(None, &e).into())
    }
}

#[cfg(test)]
mod test_hooks {
    /// A KV put of this key panics inside apply (test builds only).
    pub const PANIC_KEY: &str = "test-hook/panic";
    /// A KV put of this key panics the first time only, as a panic caused by a
    /// replica's own in-memory state would (test builds only).
    pub const PANIC_ONCE_KEY: &str = "test-hook/panic-once";
    pub static PANICKED_ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
}

/// Whether `entry` is cheap enough to apply on a runtime thread: no payload,
/// a membership, or point writes (alone or batched): single-key key-value
/// writes and SQL inserts of a few rows ([`tessera_sql::is_point_write`]).
fn applies_lightly(entry: &openraft::Entry<TypeConfig>) -> bool {
    fn point_write(op: &Operation) -> bool {
        match op {
            Operation::Kv(tessera_api::command::KvOp::Put { .. } | tessera_api::command::KvOp::Delete { .. }) => true,
            Operation::Sql(op) => op.transaction.is_none() && tessera_sql::is_point_write(&op.sql),
            _ => false,
        }
    }
    match &entry.payload {
        EntryPayload::Blank | EntryPayload::Membership(_) => true,
        EntryPayload::Normal(Command { op: Operation::Batch(cmds), .. }) => cmds.iter().all(|cmd| point_write(&cmd.op)),
        EntryPayload::Normal(cmd) => point_write(&cmd.op),
    }
}

/// A pass of the group's gate for work under `epoch` (none needed at 0); an
/// error once the group was dropped on this node.
fn pass(data: &GroupData, epoch: u64) -> std::io::Result<Option<crate::gate::GroupPass>> {
    match epoch {
        0 => Ok(None),
        epoch => data.db.gates.enter(data.group, epoch).map(Some).ok_or_else(|| crate::gate::dropped(data.group)),
    }
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_api::command::{KvQuery, KvQueryResult};
    use tessera_api::error::{ErrorCode, Rejection};

    /// An engine that panics on a command does not stop the group: the entry is
    /// applied as a rejection with no writes, the same on every replica, and the
    /// next commands apply.
    #[test]
    fn an_engine_panic_is_a_recorded_rejection() {
        use tessera_api::command::KvOp;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(2);
        let put = |key: &str, request_id: &str| Command {
            issued_at_ms: 9,
            op: Operation::Kv(KvOp::Put { key: key.into(), value: serde_json::json!(1), ttl_secs: None }),
            request_id: Some(request_id.into()),
        };
        let entry = |index: u64, cmd: Command| openraft::Entry::<TypeConfig> {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(cmd),
        };
        let responses = sm
            .apply_entries(vec![
                entry(1, put(test_hooks::PANIC_KEY, "r1")),
                entry(2, put("fine", "r2")),
                entry(3, put(test_hooks::PANIC_KEY, "r1")),
            ])
            .expect("the group keeps applying");
        assert!(
            matches!(&responses[0], Response::Rejected(Rejection { message, .. }) if message.contains("internal error")),
            "{responses:?}"
        );
        assert_eq!(responses[2], responses[0], "a retry answers the recorded rejection");
        let reader = store.reader(2);
        let got = reader.query(&Query::Kv(KvQuery::Get { key: test_hooks::PANIC_KEY.into() }), 10).unwrap();
        assert_eq!(got, QueryResult::Kv(KvQueryResult::Entry(None)), "the failed command wrote nothing");
        assert!(matches!(
            reader.query(&Query::Kv(KvQuery::Get { key: "fine".into() }), 10).unwrap(),
            QueryResult::Kv(KvQueryResult::Entry(Some(_)))
        ));
        assert_eq!(reader.applied().unwrap().map(|l| l.index), Some(3));
    }

    /// A panic that does not come back once the in-memory indexes are rebuilt
    /// from storage was this replica's own, not the command's: the command is
    /// applied as every other replica applies it, never recorded as a rejection
    /// here alone (which would diverge the replicas).
    #[test]
    fn a_panic_that_does_not_come_back_applies_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(4);
        let responses =
            sm.apply_entries(vec![entry(1, kv_put(test_hooks::PANIC_ONCE_KEY, serde_json::json!(7), 9, "p1"))]).expect("applies");
        assert!(!matches!(&responses[0], Response::Rejected(_)), "{responses:?}");
        let got = store.reader(4).query(&Query::Kv(KvQuery::Get { key: test_hooks::PANIC_ONCE_KEY.into() }), 10).unwrap();
        assert!(matches!(got, QueryResult::Kv(KvQueryResult::Entry(Some(_)))), "the command was applied: {got:?}");
    }

    fn kv_put(key: &str, value: serde_json::Value, issued_at_ms: i64, request_id: &str) -> Command {
        Command {
            issued_at_ms,
            op: Operation::Kv(tessera_api::command::KvOp::Put { key: key.into(), value, ttl_secs: None }),
            request_id: Some(request_id.into()),
        }
    }

    /// A SQL write `text` to database `db`, stamped 5.
    fn sql_command(text: &str, request_id: Option<&str>) -> Command {
        let op = tessera_api::sql::SqlOp {
            database: "db".into(),
            sql: text.into(),
            params: vec![],
            max_result_rows: 10,
            timeout_ms: 0,
            max_memory_mb: 0,
            transaction: None,
        };
        Command { issued_at_ms: 5, op: Operation::Sql(op), request_id: request_id.map(Into::into) }
    }

    /// Point writes (key-value puts, SQL inserts of a few rows, upserts
    /// included) apply on the runtime; SQL that may read or write a whole table,
    /// hide a query in a subquery or build a value of any size with a function
    /// keeps the blocking pool.
    #[test]
    fn point_writes_apply_on_the_runtime_and_table_wide_sql_off_it() {
        let light = |cmd: Command| applies_lightly(&entry(1, cmd));
        let upsert = "INSERT INTO acct (id, v) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v";
        assert!(light(sql_command(upsert, Some("a"))));
        assert!(light(batch(vec![sql_command(upsert, Some("a")), kv_put("k", serde_json::json!(1), 5, "b")])));
        assert!(light(sql_command("insert into t values (1, 'x'), (2, 'y') returning id", None)));
        let many_rows = format!("INSERT INTO t VALUES {}", vec!["(1)"; 17].join(", "));
        let long_text = format!("INSERT INTO t VALUES ('{}')", "x".repeat(4096));
        for heavy in [
            "UPDATE t SET v = v + 1",
            "DELETE FROM t WHERE v > 3",
            "INSERT INTO t SELECT * FROM u",
            "INSERT INTO t VALUES ((SELECT count(*) FROM u))",
            "INSERT INTO t VALUES (1, repeat('x', 100000000))",
            "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET v = length(repeat(excluded.v, 1000000))",
            "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET v = (SELECT max(v) FROM u)",
            "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET v = 2 WHERE EXISTS (SELECT 1 FROM u)",
            "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
            "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (",
            many_rows.as_str(),
            long_text.as_str(),
        ] {
            assert!(!light(sql_command(heavy, None)), "{heavy}");
            assert!(!light(batch(vec![sql_command(upsert, None), sql_command(heavy, None)])), "a batch holding {heavy}");
        }
        let mut in_transaction = sql_command(upsert, None);
        if let Operation::Sql(op) = &mut in_transaction.op {
            op.transaction = Some(tessera_api::sql::SqlTransaction { steps: vec![], seen: vec![], now_ms: 5 });
        }
        assert!(!light(in_transaction), "a transaction's steps may read anything");
    }

    /// A key-value get and a SQL read of one row by its key are answered at
    /// once; a read that turns out to scan, one that is not a point read by its
    /// text, and one refused are left for the query threads.
    #[test]
    fn point_reads_are_answered_at_once_and_scans_are_left_to_the_query_threads() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(1);
        sm.apply_at(1, sql_command("CREATE TABLE t (id INT PRIMARY KEY, v INT)", None)).unwrap();
        let rows: Vec<String> = (0..2 * POINT_READ_WORK).map(|i| format!("({i}, {})", i * 10)).collect();
        sm.apply_at(2, sql_command(&format!("INSERT INTO t VALUES {}", rows.join(", ")), None)).unwrap();
        sm.apply_at(3, kv_put("k", serde_json::json!(1), 5, "a")).unwrap();
        let select = |sql: &str| {
            Query::Sql(tessera_api::sql::SqlQuery::Execute {
                database: "db".into(),
                sql: sql.into(),
                params: vec![],
                max_result_rows: 1000,
                timeout_ms: 10_000,
                max_memory_mb: 0,
            })
        };
        let reader = store.reader(1);
        let by_key = select("SELECT v FROM t WHERE id = 7");
        let at_once = reader.query_point(&by_key, 100).expect("a read by primary key is a point read");
        assert_eq!(at_once, reader.query(&by_key, 100).unwrap());
        assert!(
            matches!(&at_once, QueryResult::Sql(tessera_api::sql::SqlResult::Rows(r)) if r.rows == vec![vec![serde_json::json!(70)]]),
            "{at_once:?}"
        );
        let get = Query::Kv(KvQuery::Get { key: "k".into() });
        assert!(matches!(reader.query_point(&get, 100), Some(QueryResult::Kv(KvQueryResult::Entry(Some(_))))));

        let scan = select("SELECT id FROM t WHERE v = 70");
        assert_eq!(reader.query_point(&scan, 100), None, "a scan of more rows than a point read may read goes to the query threads");
        assert!(
            matches!(reader.query(&scan, 100).unwrap(), QueryResult::Sql(tessera_api::sql::SqlResult::Rows(r)) if r.rows == vec![vec![serde_json::json!(7)]])
        );
        for not_point in [
            "SELECT count(*) FROM t",
            "SELECT v FROM t WHERE id IN (SELECT id FROM t)",
            "SELECT t.v FROM t JOIN t AS u ON t.id = u.id WHERE t.id = 1",
        ] {
            assert_eq!(reader.query_point(&select(not_point), 100), None, "{not_point}");
        }
        assert_eq!(reader.query_point(&select("SELECT v FROM missing WHERE id = 1"), 100), None, "a refusal comes from the query threads");

        // Views and system tables are built whole before their first row counts;
        // an index many rows share is read whole before the first row is; a row
        // of megabytes costs its size to decode. Each goes to the query threads.
        sm.apply_at(4, sql_command("CREATE VIEW w AS SELECT id, v FROM t WHERE id < 3", None)).unwrap();
        sm.apply_at(5, sql_command("ALTER TABLE t ADD COLUMN g INT", None)).unwrap();
        sm.apply_at(6, sql_command("UPDATE t SET g = 0", None)).unwrap();
        sm.apply_at(7, sql_command("CREATE INDEX t_g ON t (g)", None)).unwrap();
        sm.apply_at(8, sql_command("CREATE TABLE big (id INT PRIMARY KEY, s TEXT)", None)).unwrap();
        let inserted = sm.apply_at(9, sql_command(&format!("INSERT INTO big VALUES (1, '{}')", "x".repeat(2_000_000)), None)).unwrap();
        assert!(!matches!(inserted, Response::Rejected(_)), "{inserted:?}");
        for (elsewhere, rows) in [
            ("SELECT v FROM w WHERE id = 2", 1),
            ("SELECT relname FROM pg_catalog.pg_class WHERE relname = 't'", 1),
            ("SELECT id FROM t WHERE g = 0", 2 * POINT_READ_WORK as usize),
            ("SELECT s FROM big WHERE id = 1", 1),
        ] {
            let at_once = reader.query_point(&select(elsewhere), 100);
            assert!(at_once.is_none(), "{elsewhere}: {:?}", at_once.map(|a| format!("{a:?}").chars().take(300).collect::<String>()));
            let answer = reader.query(&select(elsewhere), 100).unwrap();
            assert!(
                matches!(&answer, QueryResult::Sql(tessera_api::sql::SqlResult::Rows(r)) if r.row_count == rows),
                "{elsewhere}: {answer:?}"
            );
        }
    }

    fn entry(index: u64, cmd: Command) -> openraft::Entry<TypeConfig> {
        openraft::Entry { log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Normal(cmd) }
    }

    fn batch(cmds: Vec<Command>) -> Command {
        Command { issued_at_ms: cmds.iter().map(|c| c.issued_at_ms).max().unwrap_or(0), op: Operation::Batch(cmds), request_id: None }
    }

    fn kv_get(store: &crate::Store, group: u64, key: &str) -> Option<tessera_api::command::KvEntry> {
        match store.reader(group).query(&Query::Kv(KvQuery::Get { key: key.into() }), 100).unwrap() {
            QueryResult::Kv(KvQueryResult::Entry(e)) => e,
            other => panic!("{other:?}"),
        }
    }

    /// Writes a leader proposed together apply in order, each seeing those before
    /// it, and answer one by one; a retried one answers its first response.
    #[test]
    fn a_batch_entry_applies_its_commands_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(5);
        let first = sm
            .apply_entries(vec![entry(
                1,
                batch(vec![
                    kv_put("a", serde_json::json!(1), 10, "b1"),
                    kv_put("a", serde_json::json!(2), 11, "b2"),
                    kv_put("b", serde_json::json!(3), 12, "b3"),
                ]),
            )])
            .unwrap();
        let [Response::Batch(answers)] = first.as_slice() else { panic!("{first:?}") };
        assert_eq!(answers.len(), 3);
        let Response::KvEntry(second) = &answers[1] else { panic!("{answers:?}") };
        assert_eq!((second.created_at_ms, second.updated_at_ms), (10, 11), "the second put saw the first");
        assert_eq!(kv_get(&store, 5, "a").map(|e| e.value), Some(serde_json::json!(2)));
        assert_eq!(kv_get(&store, 5, "b").map(|e| e.value), Some(serde_json::json!(3)));

        let again = sm
            .apply_entries(vec![entry(
                2,
                batch(vec![kv_put("a", serde_json::json!(2), 13, "b2"), kv_put("c", serde_json::json!(4), 14, "b4")]),
            )])
            .unwrap();
        let [Response::Batch(retried)] = again.as_slice() else { panic!("{again:?}") };
        assert_eq!(retried[0], answers[1], "a retry answers the first response");
        assert_eq!(kv_get(&store, 5, "a").map(|e| e.updated_at_ms), Some(11), "and changes nothing");
        assert_eq!(store.reader(5).applied().unwrap().map(|l| l.index), Some(2));
    }

    /// A batch entry applied again after a crash in its middle (its first
    /// commands written, its log id not) applies only the commands after them.
    #[test]
    fn a_batch_interrupted_by_a_crash_resumes_after_its_applied_commands() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(6);
        let cmds = vec![
            kv_put("a", serde_json::json!(1), 10, "c1"),
            kv_put("b", serde_json::json!(2), 11, "c2"),
            kv_put("c", serde_json::json!(3), 12, "c3"),
        ];
        // What the first command's own write batch leaves behind.
        let mut own = WriteBatch::default();
        sm.apply_stamped(&mut own, 1, &cmds[0]).unwrap();
        put_data(&sm.data.db, &mut own, &sm.sm_key(keys::SM_BATCH_PROGRESS), &[1u64.to_be_bytes(), 1u64.to_be_bytes()].concat());
        sm.data.db.write(own).unwrap();
        assert_eq!(store.reader(6).applied().unwrap(), None, "the entry is not applied yet");

        let resumed = sm.apply_entries(vec![entry(1, batch(cmds))]).unwrap();
        let [Response::Batch(answers)] = resumed.as_slice() else { panic!("{resumed:?}") };
        assert_eq!(answers[0], Response::Empty, "the applied command is skipped");
        assert!(matches!(&answers[1], Response::KvEntry(e) if e.key == "b"), "{answers:?}");
        assert!(matches!(&answers[2], Response::KvEntry(e) if e.key == "c"), "{answers:?}");
        for key in ["a", "b", "c"] {
            assert!(kv_get(&store, 6, key).is_some(), "{key}");
        }
        assert_eq!(store.reader(6).applied().unwrap().map(|l| l.index), Some(1));
    }

    /// A retried 1 MiB put answers exactly like the first (its record keeps the
    /// entry without the value; the retry carries the value) and applies once;
    /// a different body under the same id is a conflict.
    #[test]
    fn a_retried_large_put_answers_like_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(3);
        let big = serde_json::json!("x".repeat(1 << 20));
        let first = sm.apply_entries(vec![entry(1, kv_put("big", big.clone(), 100, "req1"))]).unwrap();
        assert!(matches!(&first[0], Response::KvEntry(e) if e.value == big));
        // Overwritten in between: the retry must not apply again.
        sm.apply_entries(vec![entry(2, kv_put("big", serde_json::json!("later"), 200, "req2"))]).unwrap();
        let retry = sm.apply_entries(vec![entry(3, kv_put("big", big.clone(), 300, "req1"))]).unwrap();
        assert_eq!(retry, first, "the retry answers like the first");
        let got = store.reader(3).query(&Query::Kv(KvQuery::Get { key: "big".into() }), 400).unwrap();
        assert!(
            matches!(got, QueryResult::Kv(KvQueryResult::Entry(Some(e))) if e.value == serde_json::json!("later")),
            "the retry applied again"
        );
        let other = sm.apply_entries(vec![entry(4, kv_put("big", serde_json::json!("other"), 400, "req1"))]).unwrap();
        assert!(matches!(&other[0], Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })), "{other:?}");
    }

    /// Records are forgotten only past both the time window and the entry
    /// count: a clock that jumps ahead does not expire a retry in flight.
    #[test]
    fn dedup_records_outlive_a_clock_jump() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(3);
        let first = sm.apply_entries(vec![entry(1, kv_put("k", serde_json::json!(1), 1_000, "req1"))]).unwrap();
        // A leader whose clock is an hour ahead applies the next entry.
        let hour = 3_600_000;
        sm.apply_entries(vec![entry(2, kv_put("k", serde_json::json!(2), 1_000 + hour, "req2"))]).unwrap();
        let retry = sm.apply_entries(vec![entry(3, kv_put("k", serde_json::json!(1), 1_000 + hour + 1, "req1"))]).unwrap();
        assert_eq!(retry, first, "the record of req1 expired with the clock jump");
        // Far enough in the log and in time, it is forgotten: the id applies anew.
        // (Records are expired at every 8th entry.)
        let far = crate::dedup::MIN_KEPT_ENTRIES + 16;
        sm.apply_entries(vec![entry(far, kv_put("other", serde_json::json!(0), 2 * hour, "req3"))]).unwrap();
        let again = sm.apply_entries(vec![entry(far + 1, kv_put("k", serde_json::json!(1), 2 * hour + 1, "req1"))]).unwrap();
        assert!(matches!(&again[0], Response::KvEntry(e) if e.updated_at_ms == 2 * hour + 1), "{again:?}");
    }

    /// A remembered response this version cannot read (kept by an earlier
    /// one in another shape) answers the repeat with a conflict: it neither
    /// halts the group nor applies the request twice.
    #[test]
    fn dedup_records_of_an_earlier_version_answer_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(3);
        sm.apply_entries(vec![entry(1, kv_put("k", serde_json::json!(1), 1_000, "req1"))]).unwrap();
        sm.apply_entries(vec![entry(2, kv_put("k", serde_json::json!(2), 1_100, "req2"))]).unwrap();
        // Both records rewritten in a shape no Response has.
        let old_shape = tessera_api::codec::encode(&serde_json::json!({"RejectKind": ["Conflict", "x"]})).unwrap();
        let mut batch = WriteBatch::default();
        let mut tx = Tx::new(&sm.data.db, 3, space::DEDUP, &mut batch);
        tx.put(b"r/req1", &old_shape);
        tx.put(b"c/req2", &old_shape);
        tx.delete(b"r/req2");
        sm.data.db.write(batch).unwrap();
        for (index, id) in [(3, "req1"), (4, "req2")] {
            let retry = sm.apply_entries(vec![entry(index, kv_put("k", serde_json::json!(9), 1_200, id))]).unwrap();
            assert!(matches!(&retry[0], Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })), "{retry:?}");
        }
        let got = store.reader(3).query(&Query::Kv(KvQuery::Get { key: "k".into() }), 1_300).unwrap();
        assert!(
            matches!(&got, QueryResult::Kv(KvQueryResult::Entry(Some(e))) if e.value == serde_json::json!(2)),
            "a repeat applied again: {got:?}"
        );
    }

    /// A replica that cannot read its own state (here: a row whose sealed bytes
    /// no longer decrypt) stops applying instead of answering the statement as
    /// failed, which the replicas that could read would not have done. A
    /// deterministic failure (a constraint) stays an ordinary answer.
    #[test]
    fn sql_read_errors_stop_the_apply() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open_with(dir.path(), Some(crate::Crypt::new(&[7; crate::crypt::KEY_LEN]))).unwrap();
        let sm = store.state_machine(4);
        let sql = |text: &str| sql_command(text, None);
        let apply = |cmd: Command| {
            let mut batch = WriteBatch::default();
            let r = sm.apply_command(&mut batch, 1, &cmd);
            if r.is_ok() {
                sm.data.db.write(batch).unwrap();
            }
            r
        };
        apply(sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")).unwrap();
        apply(sql("INSERT INTO t VALUES (1, 1)")).unwrap();
        let dup = apply(sql("INSERT INTO t VALUES (1, 2)")).unwrap();
        assert!(matches!(&dup, Response::Rejected(r) if r.code == tessera_api::error::ErrorCode::ConstraintViolation), "{dup:?}");
        // Damage every stored value of the SQL space.
        let db = &*sm.data.db;
        let start = keys::data_key(4, space::SQL, b"");
        let end = keys::prefix_end(&start).unwrap();
        let stored: Vec<Vec<u8>> = db
            .iterator_cf_opt(cf(db, CF_DATA), keys::bounded(&start, &end), IteratorMode::Start)
            .map(|kv| kv.unwrap().0.to_vec())
            .collect();
        assert!(!stored.is_empty());
        for k in stored {
            db.put_cf(cf(db, CF_DATA), k, b"not a sealed value").unwrap();
        }
        let r = apply(sql("UPDATE t SET v = 3 WHERE id = 1"));
        assert!(matches!(r, Err(StorageError::EngineRead(_))), "a read error was answered as {r:?}");
    }

    /// An interactive transaction's commit applies only when every step answers
    /// what its client saw; otherwise it is a CONFLICT and writes nothing.
    #[test]
    fn a_transaction_commit_applies_only_if_its_answers_hold() {
        use serde_json::json;
        use tessera_api::sql::{SqlOp, SqlResult, SqlRows, SqlStep, SqlTransaction, result_digest};
        let (_dir, data) = crate::engine::test_support::open_group(1);
        let sm = StateMachine { data: data.clone(), epoch: 0, batch_place: Default::default() };
        let mut log_index = 0;
        let mut apply = |op: SqlOp| {
            log_index += 1;
            let mut batch = WriteBatch::default();
            let r =
                sm.apply_command(&mut batch, log_index, &Command { issued_at_ms: 5, op: Operation::Sql(op), request_id: None }).unwrap();
            sm.data.db.write(batch).unwrap();
            r
        };
        let op = |sql: &str, transaction: Option<SqlTransaction>| SqlOp {
            database: "db".into(),
            sql: sql.into(),
            params: vec![],
            max_result_rows: 10,
            timeout_ms: 0,
            max_memory_mb: 0,
            transaction,
        };
        apply(op("CREATE TABLE acct (id INT PRIMARY KEY, bal INT)", None));
        apply(op("INSERT INTO acct VALUES (1, 100)", None));
        let answer = |rows: Vec<Vec<serde_json::Value>>, columns: &[&str], affected| {
            let row_count = rows.len();
            result_digest(&SqlRows {
                columns: columns.iter().map(|c| c.to_string()).collect(),
                rows,
                row_count,
                rows_affected: affected,
                truncated: false,
            })
        };
        let steps = vec![
            SqlStep { sql: "SELECT bal FROM acct WHERE id = 1".into(), params: vec![] },
            SqlStep { sql: "UPDATE acct SET bal = $1 WHERE id = 1".into(), params: vec![json!(90)] },
        ];
        let saw = |balance: i64| vec![answer(vec![vec![json!(balance)]], &["bal"], 0), answer(vec![], &[], 1)];
        // The client saw a balance of 99: the commit is refused, nothing written.
        let refused = apply(op("", Some(SqlTransaction { steps: steps.clone(), seen: saw(99), now_ms: 5 })));
        assert!(
            matches!(&refused, Response::Rejected(r) if r.code == tessera_api::error::ErrorCode::Conflict && r.message.contains("statement 1")),
            "{refused:?}"
        );
        let read = apply(op("SELECT bal FROM acct", None));
        assert!(matches!(&read, Response::Sql(SqlResult::Rows(r)) if r.rows == vec![vec![json!(100)]]), "{read:?}");
        // It saw 100, which holds: applied.
        let committed = apply(op("", Some(SqlTransaction { steps, seen: saw(100), now_ms: 5 })));
        assert!(matches!(&committed, Response::Sql(_)), "{committed:?}");
        let read = apply(op("SELECT bal FROM acct", None));
        assert!(matches!(&read, Response::Sql(SqlResult::Rows(r)) if r.rows == vec![vec![json!(90)]]), "{read:?}");
    }

    /// A SQL import batch into a CDC-enabled table appends its change records in
    /// the same batch as the rows: Insert per new row, Update per replaced row,
    /// nothing for skipped rows or a failed batch.
    #[test]
    fn sql_import_batches_are_captured() {
        use serde_json::json;
        use tessera_api::import::{ImportRow, OnConflict, SqlImportOp};
        use tessera_api::stream::{StreamOp, StreamQuery, StreamQueryResult};
        let (_dir, data) = crate::engine::test_support::open_group(1);
        let sm = StateMachine { data: data.clone(), epoch: 0, batch_place: Default::default() };
        let mut log_index = 0;
        let mut apply = |op: Operation| {
            log_index += 1;
            let mut batch = WriteBatch::default();
            let r = sm.apply_command(&mut batch, log_index, &Command { issued_at_ms: 5, op, request_id: None }).unwrap();
            sm.data.db.write(batch).unwrap();
            r
        };
        let sql = |text: &str| sql_command(text, None).op;
        let import = |on_conflict, rows: &[(u64, i64, &str)]| {
            let rows =
                rows.iter().map(|(line, id, v)| ImportRow { line: *line, values: vec![("id".into(), json!(id)), ("v".into(), json!(v))] });
            Operation::SqlImport(SqlImportOp { database: "db".into(), table: "t".into(), on_conflict, rows: rows.collect() })
        };
        apply(sql("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"));
        apply(import(OnConflict::Error, &[(2, 0, "before cdc")]));
        apply(Operation::Stream(StreamOp::EnableCdc { database: "db".into(), table: "t".into(), retention: None, max_events: None }));
        let ok = |r: Response| assert!(matches!(r, Response::Import(ref i) if i.failure.is_none()), "{r:?}");
        ok(apply(import(OnConflict::Error, &[(2, 1, "a"), (3, 2, "b")]))); // log index 4
        ok(apply(import(OnConflict::Update, &[(2, 2, "b2"), (3, 3, "c"), (4, 0, "zero")]))); // 5
        ok(apply(import(OnConflict::Skip, &[(2, 1, "skipped"), (3, 4, "d")]))); // 6
        let failed = apply(import(OnConflict::Error, &[(2, 5, "e"), (3, 1, "dup")])); // 7
        assert!(matches!(failed, Response::Import(ref i) if i.failure.as_ref().is_some_and(|f| f.line == 3)), "{failed:?}");
        let q = StreamQuery::Events { channel: "cdc.db.t".into(), after: Some(0), limit: 100 };
        let StreamQueryResult::Events(Some(r)) = engine::stream::query(&data.space(space::STREAM), &q).unwrap() else { panic!() };
        let got: Vec<serde_json::Value> =
            r.events.iter().map(|e| json!([e.event_type, e.data["key"]["id"], e.data["data"]["v"], e.data["position"]])).collect();
        let pos = |log_index: u64, index: u64| json!({"log_index": log_index, "index": index});
        assert_eq!(
            got,
            vec![
                json!(["Insert", 1, "a", pos(4, 0)]),
                json!(["Insert", 2, "b", pos(4, 1)]),
                json!(["Update", 2, "b2", pos(5, 0)]),
                json!(["Insert", 3, "c", pos(5, 1)]),
                json!(["Update", 0, "zero", pos(5, 2)]),
                json!(["Insert", 4, "d", pos(6, 0)]),
            ]
        );
    }

    /// SQL writes a leader proposed together apply in order, each seeing the
    /// ones before it, and their change records name their place in the entry.
    #[test]
    fn sql_writes_in_one_batch_entry_apply_in_order_and_capture_their_place() {
        use serde_json::json;
        use tessera_api::stream::{StreamOp, StreamQuery, StreamQueryResult};
        let (_dir, data) = crate::engine::test_support::open_group(1);
        let sm = StateMachine { data: data.clone(), epoch: 0, batch_place: Default::default() };
        let sql = |text: &str, id: &str| sql_command(text, Some(id));
        sm.apply_at(1, sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "s1")).unwrap();
        let cdc = Operation::Stream(StreamOp::EnableCdc { database: "db".into(), table: "t".into(), retention: None, max_events: None });
        sm.apply_at(2, Command { issued_at_ms: 5, op: cdc, request_id: None }).unwrap();
        sm.apply_at(3, sql("INSERT INTO t VALUES (9, 9)", "s2")).unwrap();
        let applied = sm
            .apply_entries(vec![entry(
                4,
                batch(vec![
                    sql("INSERT INTO t VALUES (1, 10), (2, 20)", "s3"),
                    sql("UPDATE t SET v = v + 1 WHERE id <= 2", "s4"),
                    sql("INSERT INTO t VALUES (1, 0)", "s5"),
                ]),
            )])
            .unwrap();
        let [Response::Batch(answers)] = applied.as_slice() else { panic!("{applied:?}") };
        assert!(matches!(&answers[0], Response::Sql(tessera_api::sql::SqlResult::Rows(r)) if r.rows_affected == 2), "{answers:?}");
        assert!(
            matches!(&answers[1], Response::Sql(tessera_api::sql::SqlResult::Rows(r)) if r.rows_affected == 2),
            "the update saw the insert: {answers:?}"
        );
        assert!(
            matches!(&answers[2], Response::Rejected(r) if r.code == tessera_api::error::ErrorCode::ConstraintViolation),
            "a duplicate key fails alone: {answers:?}"
        );
        let q = StreamQuery::Events { channel: "cdc.db.t".into(), after: Some(0), limit: 100 };
        let StreamQueryResult::Events(Some(r)) = engine::stream::query(&data.space(space::STREAM), &q).unwrap() else { panic!() };
        let got: Vec<serde_json::Value> =
            r.events.iter().map(|e| json!([e.event_type, e.data["key"]["id"], e.data["data"]["v"], e.data["position"]])).collect();
        let at = |command: u32, index: u64| json!({"log_index": 4, "command": command, "index": index});
        assert_eq!(
            got,
            vec![
                json!(["Insert", 9, 9, {"log_index": 3, "index": 0}]),
                json!(["Insert", 1, 10, at(0, 0)]),
                json!(["Insert", 2, 20, at(0, 1)]),
                json!(["Update", 1, 11, at(1, 0)]),
                json!(["Update", 2, 21, at(1, 1)]),
            ]
        );
    }
}

#[cfg(test)]
mod cancellation_tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use tessera_api::command::{Command, Operation, Query, QueryResult};
    use tessera_api::document::{DocOp, DocQuery, FindSpec};
    use tessera_api::error::ErrorCode;

    fn doc_op(op: DocOp) -> Command {
        Command { issued_at_ms: 1_000, op: Operation::Document(op), request_id: None }
    }

    /// A document scan whose caller stopped waiting answers QUERY_TIMEOUT
    /// instead of running on; the same query uncancelled answers.
    #[test]
    fn a_cancelled_scan_stops_with_a_timeout_rejection() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(1);
        sm.apply_at(1, doc_op(DocOp::CreateCollection { name: "c".into(), schema: None, exclusive: true })).unwrap();
        for i in 0..20 {
            let insert = DocOp::Insert { collection: "c".into(), id: format!("d{i}"), data: serde_json::json!({"i": i}) };
            sm.apply_at(2 + i, doc_op(insert)).unwrap();
        }
        let find = Query::Document(DocQuery::Find(FindSpec {
            collection: "c".into(),
            filter: serde_json::json!({}),
            sort: serde_json::Value::Null,
            limit: None,
        }));
        let reader = store.reader(1);
        let gone = Arc::new(AtomicBool::new(true));
        let answer = reader.query_cancellable(&find, 5_000, Some(gone)).unwrap();
        assert!(matches!(&answer, QueryResult::Rejected(r) if r.code == ErrorCode::QueryTimeout), "{answer:?}");
        let waiting = Arc::new(AtomicBool::new(false));
        assert!(matches!(reader.query_cancellable(&find, 5_000, Some(waiting)).unwrap(), QueryResult::Document(_)));
    }
}
