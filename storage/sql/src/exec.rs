//! Executor state shared by statements of one request, plus name helpers.
use crate::ExecContext;
use crate::error::{ErrorCode, Result, SqlError};
use crate::store::Overlay;
use crate::value::Value;
use sqlparser::ast::{Ident, ObjectName, ObjectNamePart};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Materialized rows with column names.
#[derive(Debug, Clone, Default)]
pub struct RowSet {
    pub cols: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// A column visible to expressions: optional table qualifier and name.
#[derive(Debug, Clone)]
pub struct ScopeCol {
    pub qual: Option<String>,
    pub name: String,
    /// A right-hand column of `JOIN … USING`: merged into the left one, so an
    /// unqualified name and `SELECT *` see only the left one (as PostgreSQL).
    pub merged: bool,
}

/// Columns of the row an expression is evaluated against.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub cols: Vec<ScopeCol>,
}

impl Scope {
    pub fn for_table(qual: &str, names: impl IntoIterator<Item = String>) -> Scope {
        Scope { cols: names.into_iter().map(|n| ScopeCol { qual: Some(qual.to_string()), name: n, merged: false }).collect() }
    }
    /// Resolves a (possibly qualified) column. Ok(None) when absent.
    pub fn resolve(&self, qual: Option<&str>, name: &str) -> Result<Option<usize>> {
        let mut found = None;
        for (i, c) in self.cols.iter().enumerate() {
            if c.name == name && (qual.is_none() && !c.merged || qual.is_some() && c.qual.as_deref() == qual) {
                if found.is_some() {
                    return Err(crate::error::column_not_found(format!("column reference \"{name}\" is ambiguous")));
                }
                found = Some(i);
            }
        }
        Ok(found)
    }
}

/// Evaluation environment: current row, its group (aggregation), and the enclosing query's env.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub scope: &'a Scope,
    pub row: &'a [Value],
    pub group: Option<&'a [Vec<Value>]>,
    pub outer: Option<&'a Env<'a>>,
}

impl<'a> Env<'a> {
    pub fn empty(outer: Option<&'a Env<'a>>) -> Env<'a> {
        static EMPTY: Scope = Scope { cols: Vec::new() };
        Env { scope: &EMPTY, row: &[], group: None, outer }
    }
}

/// Per-request executor.
pub struct Exec<'a> {
    pub kv: Overlay<'a>,
    pub params: Vec<Value>,
    pub ctx: &'a ExecContext,
    pub check_deadline: bool,
    pub trace: RefCell<Vec<String>>,
    /// Rows read from base tables (reported by `explain`).
    pub rows_scanned: Cell<u64>,
    /// Rows processed (for deadline checks).
    pub work: Cell<u64>,
    pub ctes: RefCell<Vec<(String, Rc<RowSet>)>>,
    /// How many views deep the expansion in progress is.
    pub view_depth: Cell<u32>,
    /// Subqueries of the current statement by address: a copy of the query and,
    /// when it does not depend on the outer row, its rows (see `run_subquery`).
    #[allow(clippy::type_complexity)]
    pub subqueries: RefCell<std::collections::HashMap<usize, (Box<sqlparser::ast::Query>, Option<Rc<RowSet>>)>>,
    /// `EXPLAIN ANALYZE`: plan lines carry the time each step took.
    pub analyze: Cell<bool>,
    /// Window call (by the address of its AST node) → its hidden column's slot.
    pub window_slots: RefCell<std::collections::HashMap<usize, usize>>,
    /// While a select list with set-returning calls (`unnest`,
    /// `generate_subscripts`) is projected: their elements for the input row
    /// and which of them this output row takes.
    pub set_returning: RefCell<Option<crate::system::SetReturning>>,
    /// Key prefixes VACUUM asked to compact (empty prefix: the whole database).
    pub vacuum: Vec<Vec<u8>>,
    /// Change data capture: which tables' row changes to record (`None`: none).
    pub capture: Option<&'a dyn Fn(&str) -> bool>,
    /// Row changes of captured tables, in execution order.
    pub changes: Vec<crate::RowChange>,
    /// Bytes of intermediate results the statement's operators hold now,
    /// together (checked against the memory budget by `join::Charge`).
    pub held: Cell<usize>,
}

impl<'a> Exec<'a> {
    /// Counts work and enforces the deadline (read-only requests only).
    pub fn tick(&self) -> Result<()> {
        let n = self.work.get() + 1;
        self.work.set(n);
        if self.ctx.max_work.is_some_and(|max| n > max) {
            return Err(over_work_budget());
        }
        if self.check_deadline && n.is_multiple_of(256) {
            if let Some(d) = self.ctx.deadline
                && std::time::Instant::now() >= d
            {
                return Err(SqlError::new(ErrorCode::QueryTimeout, "query exceeded its time limit and was cancelled"));
            }
            if self.ctx.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
                return Err(SqlError::new(ErrorCode::QueryTimeout, "query was cancelled: its caller stopped waiting"));
            }
        }
        Ok(())
    }

    /// Counts one row read from a base table.
    pub fn scanned(&self) -> Result<()> {
        self.rows_scanned.set(self.rows_scanned.get() + 1);
        self.tick()
    }

    /// Counts the decoding of a stored row of `bytes`: a unit of work per
    /// 4 KiB past the first (a large row costs its size).
    pub fn decoding(&self, bytes: usize) -> Result<()> {
        match (bytes / 4096) as u64 {
            0 => Ok(()),
            units => {
                self.work.set(self.work.get() + units - 1);
                self.tick()
            }
        }
    }

    pub fn note(&self, s: String) {
        self.trace.borrow_mut().push(s);
    }
}

/// The error of a statement that did more work than [`crate::ExecContext::max_work`]
/// allows; its caller runs it again where long work may go.
pub fn over_work_budget() -> SqlError {
    SqlError::new(ErrorCode::QueryTimeout, "the statement did more work than a point read")
}

/// Normalizes an identifier: unquoted → lowercase.
pub fn ident(i: &Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

/// Last part of an object name, normalized.
pub fn object_name(n: &ObjectName) -> String {
    match n.0.last() {
        Some(ObjectNamePart::Identifier(i)) => ident(i),
        Some(other) => other.to_string().to_lowercase(),
        None => String::new(),
    }
}
