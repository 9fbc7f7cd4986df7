//! The join planner for FROM clauses whose items are all inner or cross joins
//! (comma lists, `JOIN … ON`, `CROSS JOIN`).
//!
//! Every predicate of the WHERE clause and of the ON clauses goes into one pool.
//! Each item is scanned once with its single-table predicates pushed into the
//! scan, which also gives its exact cardinality. The order is greedy: start with
//! the smallest input, then repeatedly join the smallest input connected to what
//! is joined by an equality predicate (a hash join on every such equality, or an
//! index lookup per row when the other side is a table with a usable index and
//! no filter of its own); an unconnected item (a true cross product) comes only
//! when nothing connected is left. After each step every predicate whose items
//! are all joined filters the rows, so no cross product a predicate could cut
//! is ever materialised. Intermediate rows are charged against the query's
//! memory budget ([`crate::ExecContext::max_memory_bytes`]).
//!
//! Rows keep the FROM clause's column layout throughout (columns of items not
//! joined yet are NULL), so the result is the same as joining in written order.
//! WHERE predicates are checked again by the caller: an early evaluation that
//! fails keeps the row, and the caller reports the error if the row survives.
//! ON predicates are applied here, and their errors are errors.
use crate::access::{column_pos, conjuncts};
use crate::encoding::key_of;
use crate::error::{ErrorCode, Result, SqlError};
use crate::exec::{Env, Exec, Scope, ident};
use crate::query::{Item, Src};
use crate::types::SqlType;
use crate::value::{Value, cast, compare};
use sqlparser::ast::{self, Expr, FunctionArg, FunctionArgExpr, FunctionArguments};
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

/// Above this many rows on the probe side an indexed input is scanned and
/// hashed instead of looked up once per row.
const MAX_LOOKUP_ROWS: usize = 20_000;

/// A predicate of the pool.
struct Pred<'e> {
    expr: &'e Expr,
    /// Columns the predicate may name: a prefix of the FROM layout (the items
    /// up to an ON clause's own, or all of them for WHERE).
    scope_len: usize,
    /// Items it reads; `None` when that cannot be told (subqueries, ambiguous
    /// names, unusual expressions): then it is applied after the last join.
    items: Option<BTreeSet<usize>>,
    /// From an ON clause: must hold, errors are errors.
    required: bool,
    /// `a = b` between columns of two different items (FROM layout positions).
    equi: Option<(usize, usize)>,
    done: bool,
}

/// One item's rows, scanned or (for an indexed table) looked up on demand.
enum Input {
    Rows(Vec<Vec<Value>>),
    Lookup,
}

/// Approximate bytes a row takes in memory.
pub(crate) fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|v| {
            std::mem::size_of::<Value>()
                + match v {
                    Value::Text(s) | Value::Json(s) => s.len(),
                    Value::Blob(b) => b.len(),
                    _ => 0,
                }
        })
        .sum::<usize>()
        + std::mem::size_of::<Vec<Value>>()
}

/// A node-wide pool of memory for queries' intermediate results: concurrent
/// queries together hold at most `limit` bytes. Used for reads and trial runs
/// only: a replica applying a committed write must decide the same way as every
/// other replica, whatever else runs on it.
#[derive(Debug)]
pub struct MemoryPool {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryPool {
    /// A pool of `limit` bytes.
    pub fn new(limit: usize) -> MemoryPool {
        MemoryPool { limit, used: AtomicUsize::new(0) }
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(AtomicOrdering::SeqCst)
    }

    /// The pool's size in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Reserves `n` bytes if they are free.
    pub fn try_reserve(&self, n: usize) -> bool {
        self.used.fetch_update(AtomicOrdering::SeqCst, AtomicOrdering::SeqCst, |u| u.checked_add(n).filter(|t| *t <= self.limit)).is_ok()
    }

    /// Returns `n` reserved bytes.
    pub fn release(&self, n: usize) {
        let _ = self.used.fetch_update(AtomicOrdering::SeqCst, AtomicOrdering::SeqCst, |u| Some(u.saturating_sub(n)));
    }
}

/// What one operator of a statement holds against the statement's budget and
/// the node's pool. The budget is checked against everything the statement's
/// live charges hold together (`Exec::held`), not one operator's share; the
/// pool's share is returned when the charge ends, however it ends.
pub(crate) struct Charge<'a> {
    budget: usize,
    pool: Option<&'a MemoryPool>,
    statement: &'a std::cell::Cell<usize>,
    reserved: usize,
}

impl<'a> Charge<'a> {
    pub(crate) fn new(exec: &'a Exec<'_>) -> Charge<'a> {
        Charge { budget: exec.ctx.max_memory_bytes, pool: exec.ctx.memory_pool.as_deref(), statement: &exec.held, reserved: 0 }
    }

    /// This operator now holds `bytes`: an error once the statement's total
    /// passes its budget or the pool's free room.
    pub(crate) fn hold(&mut self, bytes: usize) -> Result<()> {
        let total = self.statement.get().saturating_sub(self.reserved).saturating_add(bytes);
        if total > self.budget {
            return Err(memory_exceeded(self.budget));
        }
        if let Some(pool) = self.pool {
            if bytes > self.reserved {
                if !pool.try_reserve(bytes - self.reserved) {
                    return Err(SqlError::new(
                        ErrorCode::QueryMemoryExceeded,
                        format!("the node's SQL memory pool ({} MiB) is taken by other queries; retry later", pool.limit() / (1024 * 1024)),
                    ));
                }
            } else {
                pool.release(self.reserved - bytes);
            }
        }
        self.statement.set(total);
        self.reserved = bytes;
        Ok(())
    }

    /// Adds `bytes` to what this operator holds.
    pub(crate) fn add(&mut self, bytes: usize) -> Result<()> {
        self.hold(self.reserved.saturating_add(bytes))
    }
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.statement.set(self.statement.get().saturating_sub(self.reserved));
        if let Some(pool) = self.pool {
            pool.release(self.reserved);
        }
    }
}

/// What one entry of an in-memory key set or map costs: the key and the
/// tree's share per entry.
pub(crate) fn key_bytes(key: &[u8]) -> usize {
    key.len() + 64
}

/// The error of a query whose intermediate results outgrow its memory budget.
pub fn memory_exceeded(budget: usize) -> SqlError {
    SqlError::new(
        ErrorCode::QueryMemoryExceeded,
        format!(
            "query needs more than its memory budget of {} MiB for intermediate results; add join conditions or filters",
            budget / (1024 * 1024)
        ),
    )
}

/// Whether `v` probes an index on a column of type `ty` exactly: the one key
/// its cast gives is the only stored value that can compare equal to it. Other
/// pairs (a DOUBLE probing a BIGINT key, where several integers round to one
/// float; TEXT against numbers, which compare as numbers) are hash-joined or
/// nested-looped instead, so results never depend on whether an index exists.
pub(crate) fn exact_probe(v: &Value, ty: &SqlType) -> bool {
    use SqlType as T;
    match v {
        Value::Null => true,
        Value::Int(_) => matches!(ty, T::TinyInt | T::SmallInt | T::Int | T::BigInt),
        Value::Text(_) => matches!(ty, T::Varchar(_) | T::Text),
        Value::Bool(_) => matches!(ty, T::Boolean),
        Value::Date(_) => matches!(ty, T::Date),
        Value::Time(_) => matches!(ty, T::Time),
        Value::Timestamp(_) => matches!(ty, T::Timestamp),
        Value::Uuid(_) => matches!(ty, T::Uuid),
        _ => false,
    }
}

/// Hash key of a join column value (`-0.0` and `0.0` are one key).
fn join_key(v: &Value) -> Vec<u8> {
    match v {
        Value::Float(f) if *f == 0.0 => key_of(&[Value::Float(0.0)]),
        other => key_of(std::slice::from_ref(other)),
    }
}

/// The items an expression reads, when that can be told for sure.
fn expr_items(e: &Expr, scope: &Scope, item_of: &[usize]) -> Option<BTreeSet<usize>> {
    fn walk(e: &Expr, scope: &Scope, item_of: &[usize], out: &mut BTreeSet<usize>) -> bool {
        let col = |qual: Option<&str>, name: &str, out: &mut BTreeSet<usize>| match scope.resolve(qual, name) {
            Ok(Some(p)) => {
                out.insert(item_of[p]);
                true
            }
            // An outer query's column: fixed for this whole join.
            Ok(None) => true,
            Err(_) => false,
        };
        match e {
            Expr::Identifier(i) => col(None, &ident(i), out),
            Expr::CompoundIdentifier(p) if p.len() >= 2 => col(Some(&ident(&p[p.len() - 2])), &ident(&p[p.len() - 1]), out),
            Expr::Value(_) => true,
            Expr::BinaryOp { left, right, .. } | Expr::IsDistinctFrom(left, right) | Expr::IsNotDistinctFrom(left, right) => {
                walk(left, scope, item_of, out) && walk(right, scope, item_of, out)
            }
            Expr::UnaryOp { expr, .. }
            | Expr::Nested(expr)
            | Expr::IsNull(expr)
            | Expr::IsNotNull(expr)
            | Expr::IsTrue(expr)
            | Expr::IsFalse(expr)
            | Expr::IsNotTrue(expr)
            | Expr::IsNotFalse(expr)
            | Expr::Cast { expr, .. } => walk(expr, scope, item_of, out),
            Expr::InList { expr, list, .. } => walk(expr, scope, item_of, out) && list.iter().all(|x| walk(x, scope, item_of, out)),
            Expr::Between { expr, low, high, .. } => {
                walk(expr, scope, item_of, out) && walk(low, scope, item_of, out) && walk(high, scope, item_of, out)
            }
            Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
                walk(expr, scope, item_of, out) && walk(pattern, scope, item_of, out)
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                operand.as_deref().is_none_or(|o| walk(o, scope, item_of, out))
                    && conditions.iter().all(|c| walk(&c.condition, scope, item_of, out) && walk(&c.result, scope, item_of, out))
                    && else_result.as_deref().is_none_or(|x| walk(x, scope, item_of, out))
            }
            Expr::Function(f) if f.over.is_none() && f.filter.is_none() && f.within_group.is_empty() => match &f.args {
                FunctionArguments::None => true,
                FunctionArguments::List(l) => l.args.iter().all(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => walk(x, scope, item_of, out),
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => true,
                    _ => false,
                }),
                FunctionArguments::Subquery(_) => false,
            },
            _ => false,
        }
    }
    let mut out = BTreeSet::new();
    walk(e, scope, item_of, &mut out).then_some(out)
}

/// A pool entry for `expr`, which may name the first `scope_len` columns of `full`.
fn make_pred<'e>(expr: &'e Expr, scope_len: usize, required: bool, full: &Scope, item_of: &[usize]) -> Pred<'e> {
    let scope = Scope { cols: full.cols[..scope_len].to_vec() };
    let items = expr_items(expr, &scope, item_of);
    let equi = match expr {
        Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } if items.is_some() => {
            match (column_pos(left, &scope), column_pos(right, &scope)) {
                (Some(a), Some(b)) if item_of[a] != item_of[b] => Some((a, b)),
                _ => None,
            }
        }
        _ => None,
    };
    Pred { expr, scope_len, items, required, equi, done: false }
}

impl Exec<'_> {
    /// Joins `items` (none of them a LEFT join) with the planner described in
    /// the module docs. Returns rows in the FROM clause's layout.
    pub(crate) fn join_planned(
        &self,
        items: &[Item<'_>],
        full: &Scope,
        selection: Option<&Expr>,
        outer: Option<&Env>,
    ) -> Result<Vec<Vec<Value>>> {
        let mut charge = Charge::new(self);
        let width = full.cols.len();
        let mut offsets = Vec::with_capacity(items.len());
        let mut item_of = Vec::with_capacity(width);
        for (i, it) in items.iter().enumerate() {
            offsets.push(item_of.len());
            item_of.extend(std::iter::repeat_n(i, it.cols.len()));
        }

        // The predicate pool: WHERE conjuncts, then each ON clause's.
        let mut where_conj = Vec::new();
        if let Some(w) = selection {
            conjuncts(w, &mut where_conj);
        }
        let mut preds: Vec<Pred> = Vec::new();
        for c in &where_conj {
            preds.push(make_pred(c, width, false, full, &item_of));
        }
        let mut on_conj: Vec<Vec<&Expr>> = Vec::new();
        for it in items {
            let mut oc = Vec::new();
            if let Some(on) = &it.on {
                conjuncts(on, &mut oc);
            }
            on_conj.push(oc);
        }
        for (i, oc) in on_conj.iter().enumerate() {
            let scope_len = offsets[i] + items[i].cols.len();
            for c in oc {
                preds.push(make_pred(c, scope_len, true, full, &item_of));
            }
        }

        // Inputs: scanned with their own predicates pushed down, or looked up by
        // index per row when the table has no filter but an indexed equi-join column.
        let mut inputs: Vec<Input> = Vec::with_capacity(items.len());
        // Bytes of the scanned inputs; `held` adds the current intermediate rows.
        let mut held = 0usize;
        for (i, it) in items.iter().enumerate() {
            let input = match &it.src {
                Src::Table(t) => {
                    let cons = self.derive_cons(&where_conj, full, offsets[i], t)?;
                    if cons.is_empty() && self.lookup_column(items, &offsets, &preds, i).is_some() {
                        Input::Lookup
                    } else {
                        let rows: Vec<Vec<Value>> = self.scan_table(t, &cons)?.into_iter().map(|(_, r)| r).collect();
                        held += rows.iter().map(|r| row_bytes(r)).sum::<usize>();
                        Input::Rows(rows)
                    }
                }
                Src::Rows(rs) => {
                    held += rs.rows.iter().map(|r| row_bytes(r)).sum::<usize>();
                    Input::Rows(rs.rows.clone())
                }
            };
            charge.hold(held)?;
            inputs.push(input);
        }

        let mut joined: BTreeSet<usize> = BTreeSet::new();
        let mut rows: Vec<Vec<Value>> = vec![vec![Value::Null; width]];
        while joined.len() < items.len() {
            let step_started = std::time::Instant::now();
            let remaining: Vec<usize> = (0..items.len()).filter(|i| !joined.contains(i)).collect();
            let connected = |i: usize| {
                preds.iter().any(|p| {
                    !p.done
                        && p.equi.is_some_and(|(a, b)| {
                            (item_of[a] == i && joined.contains(&item_of[b])) || (item_of[b] == i && joined.contains(&item_of[a]))
                        })
                })
            };
            // Cost of taking item i next: its rows, or 1 per probe row for a lookup.
            let cost = |i: usize| match &inputs[i] {
                Input::Rows(r) => r.len(),
                Input::Lookup => 1,
            };
            let lookup_ok = |i: usize, probe: usize| {
                let Src::Table(t) = &items[i].src else { return false };
                matches!(inputs[i], Input::Lookup)
                    && probe <= MAX_LOOKUP_ROWS
                    && self
                        .lookup_column_within(items, &offsets, &preds, i, &joined)
                        .is_some_and(|(rc, lc)| rows.iter().all(|l| exact_probe(&l[lc], &t.columns[rc].ty)))
            };
            let mut pool: Vec<usize> = remaining.iter().copied().filter(|&i| !joined.is_empty() && connected(i)).collect();
            if pool.is_empty() {
                pool = remaining.clone();
            }
            let next = pool
                .iter()
                .copied()
                .min_by_key(|&i| match &inputs[i] {
                    Input::Lookup if lookup_ok(i, rows.len()) => (0, 1),
                    Input::Lookup => (1, usize::MAX),
                    Input::Rows(_) => (0, cost(i)),
                })
                .expect("an item remains");
            let use_lookup = lookup_ok(next, rows.len());
            if matches!(inputs[next], Input::Lookup) && !use_lookup {
                let Src::Table(t) = &items[next].src else { unreachable!("lookups are tables") };
                let scanned: Vec<Vec<Value>> = self.scan_table(t, &Default::default())?.into_iter().map(|(_, r)| r).collect();
                held += scanned.iter().map(|r| row_bytes(r)).sum::<usize>();
                charge.hold(held)?;
                inputs[next] = Input::Rows(scanned);
            }
            let (off, n) = (offsets[next], items[next].cols.len());
            // Equalities between the next item and what is joined: (item column, joined column).
            let keys: Vec<(usize, usize)> = if joined.is_empty() {
                vec![]
            } else {
                preds
                    .iter()
                    .filter(|p| !p.done)
                    .filter_map(|p| p.equi)
                    .filter_map(|(a, b)| {
                        if item_of[a] == next && joined.contains(&item_of[b]) {
                            Some((a - off, b))
                        } else if item_of[b] == next && joined.contains(&item_of[a]) {
                            Some((b - off, a))
                        } else {
                            None
                        }
                    })
                    .collect()
            };
            // Predicates whose tables are all joined after this step filter each
            // joined row as it is made, before it takes any memory.
            let ready: Vec<(usize, Scope)> = preds
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.done && p.items.as_ref().is_some_and(|s| s.iter().all(|i| *i == next || joined.contains(i))))
                .map(|(i, p)| (i, Scope { cols: full.cols[..p.scope_len].to_vec() }))
                .collect();
            let mut out: Vec<Vec<Value>> = Vec::new();
            let mut out_bytes = 0usize;
            let mut emit = |l: &Vec<Value>, r: &[Value], out: &mut Vec<Vec<Value>>| -> Result<()> {
                self.tick()?;
                let mut row = l.clone();
                row[off..off + n].clone_from_slice(r);
                for (pi, scope) in &ready {
                    let env = Env { scope, row: &row, group: None, outer };
                    match self.eval_bool(preds[*pi].expr, &env) {
                        Ok(Some(true)) => {}
                        Ok(_) => return Ok(()),
                        Err(e) if preds[*pi].required => return Err(e),
                        // The caller evaluates WHERE again and reports the error if the row survives.
                        Err(_) => {}
                    }
                }
                out_bytes += row_bytes(&row);
                charge.hold(held + out_bytes)?;
                out.push(row);
                Ok(())
            };
            let how;
            if use_lookup {
                let Src::Table(t) = &items[next].src else { unreachable!("lookups are tables") };
                let (rc, lc) = self.lookup_column_within(items, &offsets, &preds, next, &joined).expect("checked");
                how = format!("INDEX LOOKUP JOIN {} ON {}", items[next].qual, full.cols[off + rc].name);
                for l in &rows {
                    let v = &l[lc];
                    let c = match cast(v.clone(), &t.columns[rc].ty, false) {
                        Ok(c) if !c.is_null() && compare(v, &c)? == Some(Ordering::Equal) => c,
                        _ => continue,
                    };
                    let mut cons = crate::access::Cons::new();
                    cons.entry(rc).or_default().eq = Some(c);
                    for (_, r) in self.scan_table(t, &cons)? {
                        emit(l, &r, &mut out)?;
                    }
                }
            } else {
                let Input::Rows(right) = &inputs[next] else { unreachable!("materialised above") };
                // A hash join when every key column holds values of one type on both sides.
                let uniform = !keys.is_empty()
                    && keys.iter().all(|&(rc, lc)| {
                        let mut kinds = right
                            .iter()
                            .map(|r| &r[rc])
                            .chain(rows.iter().map(|l| &l[lc]))
                            .filter(|v| !v.is_null())
                            .map(std::mem::discriminant);
                        match kinds.next() {
                            Some(first) => kinds.all(|k| k == first),
                            None => true,
                        }
                    });
                if uniform {
                    how = format!("HASH JOIN {} ({} key(s))", items[next].qual, keys.len());
                    let mut table: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
                    'build: for (ri, r) in right.iter().enumerate() {
                        let mut key = Vec::new();
                        for &(rc, _) in &keys {
                            if r[rc].is_null() {
                                continue 'build;
                            }
                            key.extend(join_key(&r[rc]));
                        }
                        table.entry(key).or_default().push(ri);
                    }
                    'probe: for l in &rows {
                        let mut key = Vec::new();
                        for &(_, lc) in &keys {
                            if l[lc].is_null() {
                                continue 'probe;
                            }
                            key.extend(join_key(&l[lc]));
                        }
                        if let Some(matches) = table.get(&key) {
                            for &ri in matches {
                                emit(l, &right[ri], &mut out)?;
                            }
                        }
                    }
                } else {
                    how =
                        if joined.is_empty() { format!("START {}", items[next].qual) } else { format!("NESTED LOOP {}", items[next].qual) };
                    for l in &rows {
                        for r in right {
                            emit(l, r, &mut out)?;
                        }
                    }
                }
            }
            joined.insert(next);
            for (pi, _) in &ready {
                preds[*pi].done = true;
            }
            let before = rows.iter().map(|r| row_bytes(r)).sum::<usize>();
            held = held - before.min(held) + out_bytes;
            rows = out;
            if self.analyze.get() {
                self.note(format!("{how} → {} rows ({:.3} ms)", rows.len(), step_started.elapsed().as_secs_f64() * 1000.0));
            } else {
                self.note(format!("{how} → {} rows", rows.len()));
            }
        }
        // Predicates that could not be placed: ON ones are applied now; WHERE
        // ones are left to the caller.
        self.apply_unplaced(&mut preds, full, rows, outer)
    }

    /// Filters `rows` by the ON predicates whose tables could not be told, once
    /// every item is joined.
    fn apply_unplaced(&self, preds: &mut [Pred], full: &Scope, mut rows: Vec<Vec<Value>>, outer: Option<&Env>) -> Result<Vec<Vec<Value>>> {
        for p in preds.iter_mut().filter(|p| !p.done && p.items.is_none() && p.required) {
            p.done = true;
            let scope = Scope { cols: full.cols[..p.scope_len].to_vec() };
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows {
                self.tick()?;
                let env = Env { scope: &scope, row: &row, group: None, outer };
                if self.eval_bool(p.expr, &env)? == Some(true) {
                    kept.push(row);
                }
            }
            rows = kept;
        }
        Ok(rows)
    }

    /// Item `i`'s column usable for index lookups against any other item:
    /// `(column within the item, other side's FROM position)`.
    fn lookup_column(&self, items: &[Item<'_>], offsets: &[usize], preds: &[Pred], i: usize) -> Option<(usize, usize)> {
        let all: BTreeSet<usize> = (0..items.len()).filter(|&j| j != i).collect();
        self.lookup_column_within(items, offsets, preds, i, &all)
    }

    /// Like [`Exec::lookup_column`], against the items in `joined` only.
    fn lookup_column_within(
        &self,
        items: &[Item<'_>],
        offsets: &[usize],
        preds: &[Pred],
        i: usize,
        joined: &BTreeSet<usize>,
    ) -> Option<(usize, usize)> {
        let Src::Table(t) = &items[i].src else { return None };
        let (off, n) = (offsets[i], items[i].cols.len());
        let item_at = |p: usize| offsets.iter().rposition(|&o| o <= p && !items.is_empty()).unwrap_or(0);
        preds.iter().filter(|p| !p.done).filter_map(|p| p.equi).find_map(|(a, b)| {
            let (mine, other) = if (off..off + n).contains(&a) {
                (a, b)
            } else if (off..off + n).contains(&b) {
                (b, a)
            } else {
                return None;
            };
            if !joined.contains(&item_at(other)) {
                return None;
            }
            let cname = &t.columns[mine - off].name;
            let indexed = t.primary_key.first() == Some(cname)
                || t.indexes.iter().any(|ix| {
                    ix.columns.first() == Some(cname) && (ix.method == crate::catalog::IndexMethod::BTree || ix.columns.len() == 1)
                });
            indexed.then_some((mine - off, other))
        })
    }
}
