//! The SQL engine's storage side: each database is its own key range
//! (`d/<database>\0…`) in the group's SQL space, handed to `tessera-sql` as an
//! ordered key-value view. Writes are executed by every replica's state machine
//! on the same state, so their effects are identical; read-only requests run on
//! one replica against a RocksDB snapshot (snapshot isolation).

use std::time::{Duration, Instant};

use tessera_api::command::Response;
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::import::{ImportFailure, ImportResult, OnConflict, SqlImportOp};
use tessera_api::sql::{SqlOp, SqlQuery, SqlResult, SqlRows};
use tessera_sql::import::{Conflict, ImportInput};
use tessera_sql::{ExecContext, KvRead, SqlError, WriteOp};

use super::{Answer, Engine, GroupData, QueryCtx, ReadView, Tx, space};
use crate::error::Result;

/// SQL engine.
pub struct SqlEngine;

/// Database names: 1–64 characters of letters, digits, `_` and `-`.
pub fn valid_database_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn data_prefix(database: &str) -> Vec<u8> {
    [b"d/".as_slice(), database.as_bytes(), b"\0"].concat()
}

fn registry_key(database: &str) -> Vec<u8> {
    [b"n/".as_slice(), database.as_bytes()].concat()
}

/// One database's key range as `tessera-sql` sees it.
struct DatabaseKv<'v, 'a> {
    view: &'v ReadView<'a>,
    prefix: Vec<u8>,
}

fn storage_error(e: crate::StorageError) -> SqlError {
    SqlError::new(ErrorCode::Storage, e.to_string())
}

impl KvRead for DatabaseKv<'_, '_> {
    fn get(&self, key: &[u8]) -> std::result::Result<Option<Vec<u8>>, SqlError> {
        self.view.get(&[self.prefix.as_slice(), key].concat()).map_err(storage_error)
    }

    fn scan(&self, start: &[u8], end: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> std::result::Result<(), SqlError> {
        if start >= end {
            return Ok(());
        }
        let n = self.prefix.len();
        self.view
            .scan_range(&[self.prefix.as_slice(), start].concat(), &[self.prefix.as_slice(), end].concat(), |k, v| Ok(f(&k[n..], v)))
            .map_err(storage_error)
    }
}

fn rows(r: tessera_sql::QueryResult) -> SqlResult {
    SqlResult::Rows(SqlRows {
        columns: r.columns,
        rows: r.rows,
        row_count: r.row_count,
        rows_affected: r.rows_affected,
        truncated: r.truncated,
    })
}

impl Engine for SqlEngine {
    const SPACE: u8 = super::space::SQL;
    type Op = SqlOp;
    type Query = SqlQuery;
    type Answer = SqlResult;

    /// A request that may run long is tried first ([`trial_run`]): one over its time
    /// or memory limit is refused before it takes a log entry every replica would replay.
    fn checks_before_propose(&self, op: &SqlOp) -> bool {
        op.timeout_ms > 0 && tessera_sql::may_run_long(&op.sql)
    }

    fn check_before_propose(&self, ctx: &QueryCtx<'_>, op: &SqlOp) -> Option<Rejection> {
        trial_run(ctx.data, op, ctx.now_ms)
    }

    fn query(&self, ctx: &QueryCtx<'_>, query: &SqlQuery) -> Result<Answer<SqlResult>> {
        self::query(ctx.data, query, ctx.cancel.clone(), ctx.max_work)
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &SqlOp) -> Result<Response> {
        Ok(self.apply_capturing(tx, now, op, &|_| false)?.0)
    }
}

impl SqlEngine {
    /// [`Engine::apply`], also returning the row changes of the tables
    /// `capture` selects (change data capture), in statement order.
    pub fn apply_capturing(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        op: &SqlOp,
        capture: &dyn Fn(&str) -> bool,
    ) -> Result<(Response, Vec<tessera_sql::RowChange>)> {
        if !valid_database_name(&op.database) {
            let message = format!("invalid database name {:?}", op.database);
            return Ok((Response::Rejected(Rejection::new(ErrorCode::Unsupported, message)), Vec::new()));
        }
        let prefix = data_prefix(&op.database);
        let ctx = ExecContext {
            now_ms: op.transaction.as_ref().map_or(now, |t| t.now_ms),
            max_result_rows: op.max_result_rows,
            max_memory_bytes: memory_budget(op.max_memory_mb),
            database: op.database.clone(),
            ..Default::default()
        };
        let outcome = {
            let kv = DatabaseKv { view: tx.view(), prefix: prefix.clone() };
            match &op.transaction {
                None => tessera_sql::execute_capturing(&kv, &op.sql, &op.params, &ctx, capture),
                Some(t) => match run_transaction(&kv, t, &ctx, capture)? {
                    TransactionRun::Ran(out) if t.seen.len() != out.results.len() => {
                        Err(Rejection::invalid("a transaction's commit gives the answer seen of every step"))
                    }
                    TransactionRun::Ran(out) => match check_seen(&out.results, &t.seen) {
                        Some(conflict) => Err(conflict),
                        None => {
                            let affected = out.results.iter().map(|r| r.rows_affected).sum();
                            let result = tessera_sql::QueryResult { rows_affected: affected, ..Default::default() };
                            Ok(tessera_sql::ExecOutcome { result, writes: out.writes, vacuum: out.vacuum, changes: out.changes })
                        }
                    },
                    TransactionRun::Failed(e) => Err(changed_under(e.step, Some(&e.error))),
                },
            }
        };
        match outcome {
            Ok(out) => {
                if !out.writes.ops.is_empty() && tx.view().get(&registry_key(&op.database))?.is_none() {
                    tx.put(&registry_key(&op.database), &serde_json::to_vec(&serde_json::json!({"created_at_ms": now}))?);
                }
                for w in &out.writes.ops {
                    match w {
                        WriteOp::Put(k, v) => tx.put(&[prefix.as_slice(), k].concat(), v),
                        WriteOp::Delete(k) => tx.delete(&[prefix.as_slice(), k].concat()),
                    }
                }
                // VACUUM: compact the table's (or database's) key range on this replica,
                // after this apply and off its thread.
                for table in &out.vacuum {
                    let start = [prefix.as_slice(), table].concat();
                    let end = crate::keys::prefix_end(&start);
                    tx.view().compact_range(&start, end.as_deref());
                    tracing::info!(database = %op.database, whole_database = table.is_empty(), "VACUUM: compaction of the key range scheduled");
                }
                Ok((Response::Sql(rows(out.result)), out.changes))
            }
            // I/O and decryption errors are this replica's, not the statement's:
            // stop this group's apply here instead of answering a failure that the
            // other replicas (which could read) did not give.
            Err(e) if e.code == ErrorCode::Storage => Err(crate::StorageError::EngineRead(e.message)),
            Err(e) => Ok((Response::Rejected(e), Vec::new())),
        }
    }
}

/// How an interactive transaction's steps ran.
enum TransactionRun {
    Ran(tessera_sql::TransactionOutcome),
    Failed(tessera_sql::StepError),
}

/// Runs `t`'s steps against `kv`; an I/O or decryption failure is this
/// replica's, not the transaction's, and stops the caller.
fn run_transaction(
    kv: &DatabaseKv<'_, '_>,
    t: &tessera_api::sql::SqlTransaction,
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<TransactionRun> {
    let steps: Vec<tessera_sql::Step<'_>> = t.steps.iter().map(|s| tessera_sql::Step { sql: &s.sql, params: &s.params }).collect();
    match tessera_sql::execute_transaction(kv, &steps, ctx, capture) {
        Ok(out) => Ok(TransactionRun::Ran(out)),
        Err(e) if e.error.code == ErrorCode::Storage => Err(crate::StorageError::EngineRead(e.error.message)),
        Err(e) => Ok(TransactionRun::Failed(e)),
    }
}

/// The first step whose answer now differs from the one its client saw, as
/// the transaction's conflict.
fn check_seen(results: &[tessera_sql::QueryResult], seen: &[String]) -> Option<Rejection> {
    let differs = results.iter().zip(seen).position(|(r, seen)| {
        let SqlResult::Rows(now) = rows(r.clone()) else { return true };
        tessera_api::sql::result_digest(&now) != *seen
    });
    differs.map(|step| changed_under(step, None))
}

/// PostgreSQL's serialization failure (40001): the client retries the whole transaction.
fn changed_under(step: usize, error: Option<&Rejection>) -> Rejection {
    let now = match error {
        Some(e) => format!("now fails ({}: {})", e.code, e.message),
        None => "now answers differently".to_string(),
    };
    Rejection::new(
        ErrorCode::Conflict,
        format!(
            "could not serialize access: statement {} of the transaction {now} — a concurrent transaction changed what it read; retry the transaction",
            step + 1
        ),
    )
}

/// The node's pool for SQL reads' intermediate results (see [`MemoryPool`]).
static MEMORY_POOL: std::sync::OnceLock<std::sync::Arc<tessera_sql::MemoryPool>> = std::sync::OnceLock::new();

/// Sizes the node's SQL memory pool; the first call wins (default 4 GiB).
pub fn set_memory_pool_mb(mb: u64) {
    let _ = MEMORY_POOL.set(std::sync::Arc::new(tessera_sql::MemoryPool::new(mb_to_bytes(mb))));
}

fn memory_pool() -> std::sync::Arc<tessera_sql::MemoryPool> {
    MEMORY_POOL.get_or_init(|| std::sync::Arc::new(tessera_sql::MemoryPool::new(mb_to_bytes(4096)))).clone()
}

fn mb_to_bytes(mb: u64) -> usize {
    usize::try_from(mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
}

/// The memory budget of a request that asked for `mb` MiB (0: the default).
fn memory_budget(mb: u64) -> usize {
    if mb == 0 { tessera_sql::DEFAULT_MAX_MEMORY_BYTES } else { mb_to_bytes(mb) }
}

/// The leader's trial run of a write before it is proposed: executes `op`
/// against a snapshot of this replica's current state with the request's time
/// limit and discards the writes. Returns the `QUERY_TIMEOUT` (or
/// `QUERY_MEMORY_EXCEEDED`) rejection when a limit is exceeded; every other
/// outcome is left to the real apply, which may see newer state. Only requests
/// that may run long are tried ([`tessera_sql::may_run_long`]).
pub fn trial_run(data: &GroupData, op: &SqlOp, now_ms: i64) -> Option<Rejection> {
    if op.timeout_ms == 0 || !valid_database_name(&op.database) || !tessera_sql::may_run_long(&op.sql) {
        return None;
    }
    let db = data.db();
    let snapshot = db.snapshot();
    let view = ReadView::at_snapshot(db, &snapshot, data.group, space::SQL);
    let kv = DatabaseKv { view: &view, prefix: data_prefix(&op.database) };
    let ctx = ExecContext {
        now_ms,
        max_result_rows: op.max_result_rows,
        deadline: Some(Instant::now() + Duration::from_millis(op.timeout_ms)),
        enforce_deadline_on_writes: true,
        max_memory_bytes: memory_budget(op.max_memory_mb),
        cancel: None,
        memory_pool: Some(memory_pool()),
        database: op.database.clone(),
        max_work: None,
    };
    match tessera_sql::execute(&kv, &op.sql, &op.params, &ctx) {
        Err(e) if matches!(e.code, ErrorCode::QueryTimeout | ErrorCode::QueryMemoryExceeded) => Some(e),
        _ => None,
    }
}

impl SqlEngine {
    /// Applies one bulk import batch: every row or none (the first failing row's
    /// line is reported and the batch writes nothing).
    pub fn import(&self, tx: &mut Tx<'_>, now: i64, op: &SqlImportOp) -> Result<Response> {
        Ok(self.import_capturing(tx, now, op, &|_| false)?.0)
    }

    /// [`SqlEngine::import`], also returning the row changes of the batch when
    /// `capture` selects its table (change data capture): an Insert per new row,
    /// an Update per row replaced by `on_conflict: update`, in row order; nothing
    /// for skipped rows or a failed batch.
    pub fn import_capturing(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        op: &SqlImportOp,
        capture: &dyn Fn(&str) -> bool,
    ) -> Result<(Response, Vec<tessera_sql::RowChange>)> {
        let fail = |line: u64, rejection: Rejection| {
            Ok((Response::Import(ImportResult { imported: 0, skipped: 0, failure: Some(ImportFailure { line, rejection }) }), Vec::new()))
        };
        if !valid_database_name(&op.database) {
            return fail(0, Rejection::invalid(format!("invalid database name {:?}", op.database)));
        }
        let prefix = data_prefix(&op.database);
        let ctx = ExecContext { now_ms: now, max_result_rows: 0, deadline: None, ..ExecContext::default() };
        let conflict = match op.on_conflict {
            OnConflict::Skip => Conflict::Skip,
            OnConflict::Error => Conflict::Error,
            OnConflict::Update => Conflict::Update,
        };
        let rows: Vec<ImportInput<'_>> = op.rows.iter().map(|r| ImportInput { line: r.line, values: &r.values }).collect();
        let outcome = {
            let kv = DatabaseKv { view: tx.view(), prefix: prefix.clone() };
            tessera_sql::import::import_rows_capturing(&kv, &op.table, &rows, conflict, &ctx, capture)
        };
        match outcome {
            Ok(out) => {
                if !out.writes.ops.is_empty() && tx.view().get(&registry_key(&op.database))?.is_none() {
                    tx.put(&registry_key(&op.database), &serde_json::to_vec(&serde_json::json!({"created_at_ms": now}))?);
                }
                for w in &out.writes.ops {
                    match w {
                        WriteOp::Put(k, v) => tx.put(&[prefix.as_slice(), k].concat(), v),
                        WriteOp::Delete(k) => tx.delete(&[prefix.as_slice(), k].concat()),
                    }
                }
                let response = Response::Import(ImportResult { imported: out.imported, skipped: out.skipped, failure: None });
                Ok((response, out.changes))
            }
            Err(e) if e.error.code == ErrorCode::Storage => Err(crate::StorageError::EngineRead(e.error.message)),
            Err(e) => fail(e.line.unwrap_or(0), e.error),
        }
    }
}

/// Answers a SQL read from one consistent snapshot of this replica; `cancel`,
/// once set, stops a running query. A statement that writes is refused with
/// `NOT_READ_ONLY` (the router then proposes it).
pub fn query(
    data: &GroupData,
    q: &SqlQuery,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    max_work: Option<u64>,
) -> Result<Answer<SqlResult>> {
    let db = data.db();
    let snapshot = db.snapshot();
    let view = ReadView::at_snapshot(db, &snapshot, data.group, space::SQL);
    let kv = |database: &str| DatabaseKv { view: &view, prefix: data_prefix(database) };
    Ok(match q {
        SqlQuery::Execute { database, sql, params, max_result_rows, timeout_ms, max_memory_mb } => {
            match tessera_sql::is_read_only(sql) {
                Ok(true) => {}
                Ok(false) => {
                    return Ok(Err(Rejection::new(ErrorCode::NotReadOnly, "the request writes and must be proposed")));
                }
                Err(e) => return Ok(Err(e)),
            }
            let ctx = ExecContext {
                now_ms: tessera_api::command::now_ms(),
                max_result_rows: *max_result_rows,
                deadline: Some(Instant::now() + Duration::from_millis(*timeout_ms)),
                enforce_deadline_on_writes: false,
                max_memory_bytes: memory_budget(*max_memory_mb),
                cancel,
                memory_pool: Some(memory_pool()),
                database: database.clone(),
                max_work,
            };
            tessera_sql::execute(&kv(database), sql, params, &ctx).map(|out| rows(out.result))
        }
        SqlQuery::Transaction { database, transaction, max_result_rows, timeout_ms, max_memory_mb } => {
            let ctx = ExecContext {
                now_ms: transaction.now_ms,
                max_result_rows: *max_result_rows,
                deadline: Some(Instant::now() + Duration::from_millis(*timeout_ms)),
                enforce_deadline_on_writes: true,
                max_memory_bytes: memory_budget(*max_memory_mb),
                cancel,
                memory_pool: Some(memory_pool()),
                database: database.clone(),
                max_work,
            };
            let last = transaction.steps.len().saturating_sub(1);
            match run_transaction(&kv(database), transaction, &ctx, &|_| false)? {
                TransactionRun::Ran(mut out) if transaction.seen.len() == last => match check_seen(&out.results, &transaction.seen) {
                    Some(conflict) => Err(conflict),
                    None => Ok(out.results.pop().map(rows).unwrap_or_else(|| rows(Default::default()))),
                },
                TransactionRun::Ran(_) => Err(Rejection::invalid("a transaction's read gives the answers seen of every step but the last")),
                // The new statement's own failure is its client's error; an earlier
                // step's, a change under the transaction.
                TransactionRun::Failed(e) if e.step == last => Err(e.error),
                TransactionRun::Failed(e) => Err(changed_under(e.step, Some(&e.error))),
            }
        }
        SqlQuery::ListTables { database } => match tessera_sql::list_tables(&kv(database)) {
            Ok(tables) => Ok(SqlResult::Catalog(serde_json::to_value(tables)?)),
            Err(e) => Err(e),
        },
        SqlQuery::DescribeTable { database, name } => match tessera_sql::describe_table(&kv(database), name) {
            Ok(schema) => Ok(SqlResult::Catalog(serde_json::to_value(schema)?)),
            Err(e) => Err(e),
        },
        SqlQuery::ListDatabases => {
            let mut names = Vec::new();
            view.scan_prefix(b"n/", |k, _| {
                names.push(String::from_utf8_lossy(&k[2..]).into_owned());
                Ok(true)
            })?;
            Ok(SqlResult::Catalog(serde_json::json!(names)))
        }
    })
}
