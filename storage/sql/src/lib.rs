//! Tessera SQL engine: parses requests with `sqlparser`, keeps a catalog, tables and indexes in an
//! ordered key-value view ([`KvRead`]) and returns the writes a request produces as a [`WriteSet`].
//!
//! Value output (see [`value::Value::to_json`]): integers and floats are JSON numbers, DECIMAL is a
//! JSON string holding the exact value, DATE/TIME/TIMESTAMP/UUID are strings, BLOB is a `\x`-prefixed
//! lowercase hex string, JSON columns are emitted as their JSON value, NULL is null.
//!
//! Error codes: out-of-range numbers and too-long strings are `TYPE_MISMATCH`; constraint failures
//! (NOT NULL, UNIQUE, PRIMARY KEY, REFERENCES, CHECK) are `CONSTRAINT_VIOLATION`.

mod access;
pub mod catalog;
mod copy;
pub use copy::{CopyFrom, CopyOptions, copy_from_stdin};
mod ddl;
pub mod difftest;
mod dml;
pub mod encoding;
pub mod error;
mod eval;
mod exec;
mod functions;
pub mod import;
mod join;
pub use join::MemoryPool;
pub mod mem;
mod parser;
pub use parser::{MAX_EXPR_DEPTH, REQUEST_THREAD_STACK_BYTES};
mod query;
mod store;
mod system;
pub mod types;
pub mod value;
mod views;
mod window;

pub use error::{ErrorCode, Position, SqlError};

use exec::{Exec, RowSet};
use serde::Serialize;
use sqlparser::ast::{ObjectType, Statement};
use std::cell::{Cell, RefCell};
use store::Overlay;

/// Ordered byte-key view of one database's key space (keys are relative to it).
pub trait KvRead {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SqlError>;
    /// Calls f(key, value) for keys in [start, end) in ascending order until f returns false.
    fn scan(&self, start: &[u8], end: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), SqlError>;
}

/// Writes produced by executing statements, in order; applied atomically by the caller.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct WriteSet {
    pub ops: Vec<WriteOp>,
}

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// Kind of a captured row change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ChangeOp {
    Insert,
    Update,
    Delete,
}

/// One row change of a table whose changes are captured (change data capture).
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    pub op: ChangeOp,
    /// The table's name as stored in the catalog.
    pub table: String,
    /// Primary-key columns → values of the row before the change (of the new
    /// row for an insert); every column when the table has no primary key.
    pub key: serde_json::Map<String, serde_json::Value>,
    /// The new row, column → value (`None` for a delete).
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Per-request execution settings.
#[derive(Debug, Clone)]
pub struct ExecContext {
    /// Leader-fixed Unix ms time for anything time-dependent (the only clock used).
    pub now_ms: i64,
    /// Extra rows are cut and the result flagged truncated.
    pub max_result_rows: usize,
    /// Exceeded → `QUERY_TIMEOUT` (reads, and writes when `enforce_deadline_on_writes`).
    pub deadline: Option<std::time::Instant>,
    /// Set only for a leader's trial run of a write before proposing it: a
    /// state machine applying a committed write never stops part-way.
    pub enforce_deadline_on_writes: bool,
    /// Bytes a query's intermediate results may hold (join inputs and outputs);
    /// past it the query stops with `QUERY_MEMORY_EXCEEDED`. A function of the
    /// data only, so every replica of a write decides alike.
    pub max_memory_bytes: usize,
    /// Set by whoever waits for a read when it stops waiting (the client went
    /// away): the query stops at its next work check, like at its deadline.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The node-wide pool that reads draw intermediate memory from, besides
    /// their own budget (never set for applying writes).
    pub memory_pool: Option<std::sync::Arc<MemoryPool>>,
    /// The database the statement runs in (`current_database()`, the
    /// `pg_database` and `information_schema` catalogs).
    pub database: String,
    /// Units of work (rows read, rows and values evaluated) the statement may
    /// do before it stops with an error: set for a read tried on a thread that
    /// must stay responsive (see [`is_point_read`]), which goes elsewhere if it
    /// stops. None: no such bound.
    pub max_work: Option<u64>,
}

/// The default [`ExecContext::max_memory_bytes`]: 1 GiB.
pub const DEFAULT_MAX_MEMORY_BYTES: usize = 1024 * 1024 * 1024;

impl Default for ExecContext {
    fn default() -> Self {
        ExecContext {
            now_ms: 0,
            max_result_rows: 100_000,
            deadline: None,
            enforce_deadline_on_writes: false,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            cancel: None,
            memory_pool: None,
            database: String::new(),
            max_work: None,
        }
    }
}

/// Outcome of [`execute`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExecOutcome {
    pub result: QueryResult,
    pub writes: WriteSet,
    /// Key prefixes (relative to the database) that VACUUM asks the storage to
    /// compact, reclaiming the space of deleted and overwritten rows; an empty
    /// prefix means the whole database. Compaction changes no logical state.
    pub vacuum: Vec<Vec<u8>>,
    /// Row changes of the tables [`execute_capturing`] was asked to capture, in
    /// statement order (rolled-back transactions contribute none).
    pub changes: Vec<RowChange>,
}

/// Result of the last statement that returns rows; when none does, an empty result whose
/// `rows_affected` is the total of rows inserted/updated/deleted by the request.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: usize,
    pub rows_affected: u64,
    pub truncated: bool,
}

// The catalog answers are wire types: the router reads them back.
pub use tessera_api::sql::{ColumnSchema, ConstraintSchema, IndexSchema, TableSchema, TableSummary};

fn is_read_stmt(s: &Statement) -> bool {
    matches!(
        s,
        Statement::Query(_)
            | Statement::ShowTables { .. }
            | Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. }
    ) || matches!(s, Statement::Explain { statement, .. } if matches!(**statement, Statement::Query(_)))
}

/// True when the request may take long to execute: anything but INSERT …
/// VALUES, CREATE TABLE and transaction control (unparsable text: false, the
/// apply reports the error).
pub fn may_run_long(sql: &str) -> bool {
    parser::on_request_stack(|| may_run_long_here(sql))
}

fn may_run_long_here(sql: &str) -> bool {
    let Ok(stmts) = parser::parse_shared(sql) else { return false };
    !stmts.iter().all(|s| match s {
        Statement::Insert(ins) => ins.source.as_ref().is_some_and(|q| matches!(*q.body, sqlparser::ast::SetExpr::Values(_))),
        Statement::CreateTable(ct) => ct.query.is_none(),
        Statement::StartTransaction { .. } | Statement::Commit { .. } | Statement::Rollback { .. } => true,
        _ => false,
    })
}

/// Rows an INSERT may list and still count as a point write.
const POINT_WRITE_MAX_ROWS: usize = 16;

/// True when the request is one INSERT … VALUES of a few rows with no
/// subquery and no function call anywhere (an upsert's ON CONFLICT included):
/// its cost is a few key lookups and row writes, like a key-value put's,
/// whatever the table's size (a function such as `repeat` could build a value
/// of any size). Unparsable text, and text longer than the parse cache keeps
/// (it would be parsed afresh for this check alone): false.
pub fn is_point_write(sql: &str) -> bool {
    use sqlparser::ast::SetExpr;
    the_only_statement(sql, |stmt| {
        let Statement::Insert(ins) = stmt else { return false };
        let few_rows = ins
            .source
            .as_ref()
            .is_some_and(|q| q.with.is_none() && matches!(&*q.body, SetExpr::Values(v) if v.rows.len() <= POINT_WRITE_MAX_ROWS));
        few_rows && !open_ended(stmt)
    })
}

/// `check` of the request's only statement, parsed through the parse cache;
/// false when the text is longer than that cache keeps (it would be parsed
/// afresh for the check alone), does not parse, or holds several statements.
fn the_only_statement(sql: &str, check: impl FnOnce(&Statement) -> bool) -> bool {
    if sql.len() > parser::PARSED_CACHE_MAX_TEXT_BYTES {
        return false;
    }
    parser::on_request_stack(|| match parser::parse_shared(sql) {
        Ok(stmts) => matches!(stmts.as_slice(), [stmt] if check(stmt)),
        Err(_) => false,
    })
}

/// True when `stmt` holds a subquery or a function call anywhere: work its
/// text does not bound (a function such as `repeat` builds a value of any size).
fn open_ended(stmt: &Statement) -> bool {
    use sqlparser::ast::{Expr, visit_expressions};
    use std::ops::ControlFlow;
    visit_expressions(stmt, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } | Expr::Function(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// True when the request is one SELECT from one base table with no join,
/// subquery, function call, grouping or window: given the table's primary key
/// or an indexed column, it reads a row or a few, as a key-value get does.
/// Whether it does is known only as it runs, so a caller that runs it where
/// long work must not go bounds it with [`ExecContext::max_work`]. Unparsable
/// text, and text longer than the parse cache keeps: false.
pub fn is_point_read(sql: &str) -> bool {
    use sqlparser::ast::{GroupByExpr, SetExpr, TableFactor};
    the_only_statement(sql, |stmt| {
        let Statement::Query(query) = stmt else { return false };
        let SetExpr::Select(select) = &*query.body else { return false };
        let one_table = matches!(select.from.as_slice(), [from] if from.joins.is_empty() && matches!(&from.relation, TableFactor::Table { args: None, .. }));
        let ungrouped = matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty())
            && select.having.is_none()
            && select.named_window.is_empty()
            && select.distinct.is_none();
        query.with.is_none() && one_table && ungrouped && !open_ended(stmt)
    })
}

/// True when every statement is a read (SELECT / SHOW TABLES / EXPLAIN SELECT / transaction control).
pub fn is_read_only(sql: &str) -> Result<bool, SqlError> {
    parser::on_request_stack(|| Ok(parser::parse_shared(sql)?.iter().all(is_read_stmt)))
}

enum StmtOut {
    Rows(RowSet),
    Affected(u64),
    /// A write with RETURNING: rows changed, and the rows it returns.
    Returning(u64, RowSet),
}

impl StmtOut {
    fn changed((n, rows): (u64, Option<RowSet>)) -> StmtOut {
        match rows {
            Some(rows) => StmtOut::Returning(n, rows),
            None => StmtOut::Affected(n),
        }
    }
}

impl<'a> Exec<'a> {
    fn new(store: &'a dyn KvRead, params: &[serde_json::Value], ctx: &'a ExecContext, read_only: bool) -> Self {
        Exec {
            kv: Overlay::new(store),
            params: params.iter().map(value::Value::from_json).collect(),
            ctx,
            check_deadline: read_only || ctx.enforce_deadline_on_writes,
            trace: RefCell::new(Vec::new()),
            rows_scanned: Cell::new(0),
            work: Cell::new(0),
            ctes: RefCell::new(Vec::new()),
            view_depth: Cell::new(0),
            window_slots: RefCell::new(Default::default()),
            set_returning: RefCell::new(None),
            subqueries: RefCell::new(Default::default()),
            analyze: Cell::new(false),
            vacuum: Vec::new(),
            capture: None,
            changes: Vec::new(),
            held: Cell::new(0),
        }
    }

    fn exec_stmt(&mut self, s: &Statement) -> Result<StmtOut, SqlError> {
        use error::unsupported;
        // Uncorrelated subqueries are run once per statement: earlier statements may have changed their rows.
        self.subqueries.borrow_mut().clear();
        Ok(match s {
            Statement::Query(q) => StmtOut::Rows(self.run_query(q, None)?),
            Statement::Insert(ins) => StmtOut::changed(self.insert(ins)?),
            Statement::Update { table, assignments, from, selection, returning, limit, or, .. } => {
                if limit.is_some() || or.is_some() {
                    return Err(unsupported("UPDATE ... LIMIT and UPDATE OR ... are not supported"));
                }
                StmtOut::changed(self.update(table, assignments, from.is_some(), selection.as_ref(), returning.as_deref())?)
            }
            Statement::Delete(d) => StmtOut::changed(self.delete(d)?),
            Statement::CreateTable(ct) => {
                self.create_table(ct)?;
                StmtOut::Affected(0)
            }
            Statement::CreateIndex(ci) => {
                self.create_index(ci)?;
                StmtOut::Affected(0)
            }
            Statement::Drop { object_type: ObjectType::Table, if_exists, names, .. } => {
                self.drop_tables(names, *if_exists)?;
                StmtOut::Affected(0)
            }
            Statement::CreateView { name, columns, query, or_replace, or_alter, materialized, temporary, if_not_exists, to, .. } => {
                if *materialized || *temporary || *or_alter || to.is_some() {
                    return Err(unsupported("only CREATE [OR REPLACE] VIEW name [(columns)] AS query is supported"));
                }
                self.create_view(name, columns, query, *or_replace, *if_not_exists)?;
                StmtOut::Affected(0)
            }
            Statement::Drop { object_type: ObjectType::View, if_exists, names, .. } => {
                self.drop_views(names, *if_exists)?;
                StmtOut::Affected(0)
            }
            Statement::Drop { object_type: ObjectType::Index, if_exists, names, .. } => {
                self.drop_index(names, *if_exists)?;
                StmtOut::Affected(0)
            }
            Statement::AlterTable { name, if_exists, operations, .. } => {
                self.alter_table(name, *if_exists, operations)?;
                StmtOut::Affected(0)
            }
            Statement::Vacuum(v) => {
                let prefix = match &v.table_name {
                    Some(n) => encoding::table_prefix(self.load_table(&exec::object_name(n))?.id),
                    None => Vec::new(),
                };
                self.vacuum.push(prefix);
                StmtOut::Affected(0)
            }
            Statement::Truncate { table_names, partitions: None, identity, cascade, on_cluster: None, .. } => {
                if matches!(identity, Some(sqlparser::ast::TruncateIdentityOption::Restart))
                    || matches!(cascade, Some(sqlparser::ast::CascadeOption::Cascade))
                {
                    return Err(unsupported("TRUNCATE ... RESTART IDENTITY and TRUNCATE ... CASCADE are not supported"));
                }
                // Every row deleted, as DELETE does (indexes, references, change
                // capture); a table that refers to another one named here goes
                // first, so `TRUNCATE parent, child` empties both.
                let mut pending: Vec<String> = Vec::new();
                let mut named = std::collections::HashSet::new();
                let mut referring: Vec<(String, Vec<String>)> = Vec::new();
                for target in table_names {
                    let name = exec::object_name(&target.name);
                    if !named.insert(name.clone()) {
                        continue;
                    }
                    // A missing table fails the statement before anything is done.
                    let table = self.load_table(&name)?;
                    referring.push((name.clone(), table.foreign_keys.into_iter().map(|f| f.ref_table).collect()));
                    pending.push(name);
                }
                // The rows deleted are counted (the mass-deletion detector reads
                // them); PostgreSQL's command tag carries no count.
                let mut deleted = 0;
                while !pending.is_empty() {
                    let referred =
                        |name: &String| referring.iter().any(|(t, refs)| t != name && pending.contains(t) && refs.contains(name));
                    let next = pending.iter().position(|n| !referred(n)).unwrap_or(0);
                    let name = pending.remove(next);
                    for delete in parser::parse_statements(&format!("DELETE FROM \"{}\"", name.replace('"', "\"\"")))? {
                        if let StmtOut::Affected(n) = self.exec_stmt(&delete)? {
                            deleted += n;
                        }
                    }
                }
                StmtOut::Affected(deleted)
            }
            Statement::Copy {
                source: sqlparser::ast::CopySource::Table { table_name, columns },
                to: false,
                target: sqlparser::ast::CopyTarget::Stdin,
                ..
            } => StmtOut::Affected(self.copy_from_params(table_name, columns)?),
            Statement::Copy { .. } => {
                return Err(unsupported(
                    "only COPY table [(columns)] FROM STDIN is supported (its rows travel as the request's parameters)",
                ));
            }
            Statement::ShowTables { .. } => {
                let rows = catalog::all_tables(&self.kv)?.into_iter().map(|t| vec![value::Value::Text(t.name)]).collect();
                StmtOut::Rows(RowSet { cols: vec!["table_name".into()], rows })
            }
            Statement::Explain { statement, analyze, .. } => match &**statement {
                Statement::Query(q) => {
                    self.trace.borrow_mut().clear();
                    self.analyze.set(*analyze);
                    let started = std::time::Instant::now();
                    let result = self.run_query(q, None);
                    self.analyze.set(false);
                    let result = result?;
                    if *analyze {
                        self.note(format!(
                            "result: {} rows; rows scanned: {}; execution time: {:.3} ms",
                            result.rows.len(),
                            self.rows_scanned.get(),
                            started.elapsed().as_secs_f64() * 1000.0
                        ));
                    }
                    let rows = self.trace.borrow().iter().map(|l| vec![value::Value::Text(l.clone())]).collect();
                    StmtOut::Rows(RowSet { cols: vec!["plan".into()], rows })
                }
                _ => return Err(unsupported("EXPLAIN supports SELECT only")),
            },
            other => {
                let text = other.to_string();
                let head: String = text.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
                return Err(unsupported(format!("statement not supported: {head}")));
            }
        })
    }
}

/// Executes one request (one or several `;`-separated statements) against `store`.
///
/// BEGIN…COMMIT applies atomically; ROLLBACK discards everything since BEGIN; any failing
/// statement fails the whole request (no writes at all); a request ending inside an open
/// transaction fails with `TRANSACTION_ERROR`. Reads see the request's own earlier writes.
pub fn execute(store: &dyn KvRead, sql: &str, params: &[serde_json::Value], ctx: &ExecContext) -> Result<ExecOutcome, SqlError> {
    execute_capturing(store, sql, params, ctx, &|_| false)
}

/// [`execute`], also recording in [`ExecOutcome::changes`] every row inserted,
/// updated or deleted by INSERT/UPDATE/DELETE in a table for which `capture`
/// answers true (DDL records nothing).
pub fn execute_capturing(
    store: &dyn KvRead,
    sql: &str,
    params: &[serde_json::Value],
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<ExecOutcome, SqlError> {
    parser::on_request_stack(|| execute_here(store, sql, params, ctx, capture))
}

fn execute_here(
    store: &dyn KvRead,
    sql: &str,
    params: &[serde_json::Value],
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<ExecOutcome, SqlError> {
    let stmts = parser::parse_shared(sql)?;
    if stmts.is_empty() {
        return Err(error::parse("empty query"));
    }
    let read_only = stmts.iter().all(is_read_stmt);
    let mut ex = Exec::new(store, params, ctx, read_only);
    ex.capture = Some(capture);
    let mut changes_at_begin = 0usize;
    let mut snapshot: Option<std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>> = None;
    let mut last_rows: Option<RowSet> = None;
    let mut affected = 0u64;
    let mut tx_affected = 0u64;
    for s in stmts.iter() {
        match s {
            Statement::StartTransaction { .. } => {
                if snapshot.is_some() {
                    return Err(SqlError::new(ErrorCode::TransactionError, "there is already a transaction in progress"));
                }
                snapshot = Some(ex.kv.writes.clone());
                changes_at_begin = ex.changes.len();
                tx_affected = 0;
            }
            Statement::Commit { .. } => {
                snapshot = None;
            }
            Statement::Rollback { savepoint, .. } => {
                if savepoint.is_some() {
                    return Err(error::unsupported("savepoints are not supported"));
                }
                if let Some(w) = snapshot.take() {
                    ex.kv.writes = w;
                    ex.changes.truncate(changes_at_begin);
                    affected -= tx_affected.min(affected);
                }
            }
            other => match ex.exec_stmt(other)? {
                StmtOut::Rows(r) => last_rows = Some(r),
                StmtOut::Affected(n) => {
                    affected += n;
                    tx_affected += n;
                }
                StmtOut::Returning(n, r) => {
                    affected += n;
                    tx_affected += n;
                    last_rows = Some(r);
                }
            },
        }
    }
    if snapshot.is_some() {
        return Err(SqlError::new(
            ErrorCode::TransactionError,
            "transaction was not committed (missing COMMIT); all its changes were rolled back",
        ));
    }
    let result = result_of(affected, last_rows, ctx.max_result_rows);
    let writes = if read_only { WriteSet::default() } else { ex.kv.into_write_set() };
    let vacuum = std::mem::take(&mut ex.vacuum);
    let changes = if read_only { Vec::new() } else { std::mem::take(&mut ex.changes) };
    Ok(ExecOutcome { result, writes, vacuum, changes })
}

/// One statement of an interactive transaction, with its own parameters.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub sql: &'a str,
    pub params: &'a [serde_json::Value],
}

/// Outcome of [`execute_transaction`]: every step's own result, and the
/// transaction's writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionOutcome {
    /// Per step: its rows (a query, or a write with RETURNING), else its
    /// `rows_affected`.
    pub results: Vec<QueryResult>,
    pub writes: WriteSet,
    pub vacuum: Vec<Vec<u8>>,
    pub changes: Vec<RowChange>,
}

/// Why [`execute_transaction`] stopped: the step that failed and its error.
#[derive(Debug, Clone, PartialEq)]
pub struct StepError {
    pub step: usize,
    pub error: SqlError,
}

/// Runs an interactive transaction's statements in order as one transaction:
/// each step is one statement (transaction control is the caller's) with its
/// own parameters, and sees the earlier steps' writes. The first failing step
/// stops it (nothing is written).
pub fn execute_transaction(
    store: &dyn KvRead,
    steps: &[Step<'_>],
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<TransactionOutcome, StepError> {
    parser::on_request_stack(|| execute_transaction_here(store, steps, ctx, capture))
}

fn execute_transaction_here(
    store: &dyn KvRead,
    steps: &[Step<'_>],
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<TransactionOutcome, StepError> {
    let mut parsed = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let fail = |error| StepError { step: i, error };
        let mut stmts = parser::parse_statements(step.sql).map_err(fail)?;
        if stmts.len() != 1 {
            return Err(fail(error::parse("a transaction step is exactly one statement")));
        }
        let stmt = stmts.pop().expect("one statement");
        if matches!(stmt, Statement::StartTransaction { .. } | Statement::Commit { .. } | Statement::Rollback { .. }) {
            return Err(fail(SqlError::new(ErrorCode::TransactionError, "transaction control is not a step of a transaction")));
        }
        parsed.push(stmt);
    }
    let read_only = parsed.iter().all(is_read_stmt);
    let mut ex = Exec::new(store, &[], ctx, read_only);
    ex.capture = Some(capture);
    let mut results = Vec::with_capacity(steps.len());
    for (i, (stmt, step)) in parsed.iter().zip(steps).enumerate() {
        ex.params = step.params.iter().map(value::Value::from_json).collect();
        let out = ex.exec_stmt(stmt).map_err(|error| StepError { step: i, error })?;
        let (affected, rows) = match out {
            StmtOut::Rows(r) => (0, Some(r)),
            StmtOut::Affected(n) => (n, None),
            StmtOut::Returning(n, r) => (n, Some(r)),
        };
        results.push(result_of(affected, rows, ctx.max_result_rows));
    }
    let writes = if read_only { WriteSet::default() } else { ex.kv.into_write_set() };
    let vacuum = std::mem::take(&mut ex.vacuum);
    let changes = if read_only { Vec::new() } else { std::mem::take(&mut ex.changes) };
    Ok(TransactionOutcome { results, writes, vacuum, changes })
}

/// A statement's (or request's) answer: `rows` cut at `max_rows`, else only
/// the rows affected.
fn result_of(affected: u64, rows: Option<RowSet>, max_rows: usize) -> QueryResult {
    let mut result = QueryResult { rows_affected: affected, ..Default::default() };
    if let Some(rs) = rows {
        result.truncated = rs.rows.len() > max_rows;
        result.columns = rs.cols;
        result.rows = rs.rows.iter().take(max_rows).map(|r| r.iter().map(|v| v.to_json()).collect()).collect();
        result.row_count = result.rows.len();
    }
    result
}

/// Access paths chosen while running a read-only request, one line per base-table access
/// (e.g. `INDEX SCAN t USING t_a_idx (a)`, `PK LOOKUP ...`, `FULL SCAN t`), followed by
/// `rows scanned: N`.
pub fn explain(store: &dyn KvRead, sql: &str) -> Result<String, SqlError> {
    parser::on_request_stack(|| explain_here(store, sql))
}

fn explain_here(store: &dyn KvRead, sql: &str) -> Result<String, SqlError> {
    let stmts = parser::parse_shared(sql)?;
    let ctx = ExecContext::default();
    let mut ex = Exec::new(store, &[], &ctx, true);
    for s in stmts.iter() {
        ex.exec_stmt(s)?;
    }
    let mut out = ex.trace.borrow().join("\n");
    out.push_str(&format!("\nrows scanned: {}", ex.rows_scanned.get()));
    Ok(out)
}

/// Lists tables with their column count and row count.
pub fn list_tables(store: &dyn KvRead) -> Result<Vec<TableSummary>, SqlError> {
    let kv = Overlay::new(store);
    let mut out = Vec::new();
    for t in catalog::all_tables(&kv)? {
        let mut n = 0u64;
        let p = encoding::rows_prefix(t.id);
        kv.scan(&p, &encoding::prefix_end(&p), &mut |_, _| {
            n += 1;
            Ok(true)
        })?;
        out.push(TableSummary { name: t.name.clone(), columns: t.columns.len(), rows: n });
    }
    Ok(out)
}

/// Describes one table.
pub fn describe_table(store: &dyn KvRead, name: &str) -> Result<TableSchema, SqlError> {
    let kv = Overlay::new(store);
    let key = if catalog::get_table(&kv, name)?.is_some() { name.to_string() } else { name.to_lowercase() };
    let t = catalog::get_table(&kv, &key)?.ok_or_else(|| error::table_not_found(format!("table \"{name}\" does not exist")))?;
    let columns = t
        .columns
        .iter()
        .map(|c| ColumnSchema {
            name: c.name.clone(),
            data_type: if c.serial { "SERIAL".into() } else { c.ty.name() },
            nullable: c.nullable && !t.primary_key.contains(&c.name),
            default: c.default.clone(),
            primary_key: t.primary_key.contains(&c.name),
            unique: t.primary_key == [c.name.clone()] || t.indexes.iter().any(|i| i.unique && i.columns == [c.name.clone()]),
        })
        .collect();
    let indexes = t
        .indexes
        .iter()
        .map(|i| IndexSchema {
            name: i.name.clone(),
            columns: i.columns.clone(),
            unique: i.unique,
            method: match i.method {
                catalog::IndexMethod::BTree => "BTREE".into(),
                catalog::IndexMethod::Hash => "HASH".into(),
            },
        })
        .collect();
    let mut constraints = Vec::new();
    if !t.primary_key.is_empty() {
        constraints.push(ConstraintSchema {
            name: t.pk_name.clone(),
            kind: "PRIMARY KEY".into(),
            definition: format!("PRIMARY KEY ({})", t.primary_key.join(", ")),
        });
    }
    for i in t.indexes.iter().filter(|i| i.constraint) {
        constraints.push(ConstraintSchema {
            name: i.name.clone(),
            kind: "UNIQUE".into(),
            definition: format!("UNIQUE ({})", i.columns.join(", ")),
        });
    }
    for f in &t.foreign_keys {
        constraints.push(ConstraintSchema {
            name: f.name.clone(),
            kind: "FOREIGN KEY".into(),
            definition: format!("FOREIGN KEY ({}) REFERENCES {}({})", f.columns.join(", "), f.ref_table, f.ref_columns.join(", ")),
        });
    }
    for c in &t.checks {
        constraints.push(ConstraintSchema { name: c.name.clone(), kind: "CHECK".into(), definition: format!("CHECK ({})", c.expr) });
    }
    Ok(TableSchema { name: t.name, columns, indexes, constraints })
}
