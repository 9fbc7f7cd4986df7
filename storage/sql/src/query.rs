//! SELECT execution: FROM/joins, WHERE, GROUP BY/HAVING, projection, DISTINCT,
//! ORDER BY, LIMIT/OFFSET, set operations and CTEs.
use crate::access::{Cons, column_pos, conjuncts};
use crate::catalog::{self, TableDef};
use crate::encoding::key_of;
use crate::error::{ErrorCode, SqlError};
use crate::error::{Result, parse, table_not_found, type_mismatch, unsupported};
use crate::eval::{contains_aggregate, func_name, is_aggregate_name, walk_pruned};
use crate::exec::{Env, Exec, RowSet, Scope, ScopeCol, ident, object_name};
use crate::value::{Value, cast, sort_cmp};
use sqlparser::ast::{
    self, Distinct, Expr, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByExpr, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier, TableFactor,
};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

pub(crate) enum Src {
    Table(TableDef),
    Rows(Rc<RowSet>),
}

#[derive(Clone, Copy, PartialEq)]
enum JoinKind {
    First,
    Cross,
    Inner,
    Left,
}

pub(crate) struct Item<'q> {
    pub(crate) qual: String,
    pub(crate) cols: Vec<String>,
    pub(crate) src: Src,
    kind: JoinKind,
    pub(crate) on: Option<Expr>,
    /// Columns merged into an earlier item's by `USING`.
    merged: Vec<String>,
    _p: std::marker::PhantomData<&'q ()>,
}

/// Output column name PostgreSQL would give an expression.
pub fn expr_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => ident(i),
        Expr::CompoundIdentifier(p) => p.last().map(ident).unwrap_or_default(),
        Expr::Function(f) => func_name(f),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => expr_name(expr),
        Expr::Case { .. } => "case".into(),
        Expr::Exists { .. } => "exists".into(),
        _ => "?column?".into(),
    }
}

type Keyed = Vec<(Vec<Value>, Vec<Value>)>;

fn cmp_keys(a: &[Value], b: &[Value], order: &[&OrderByExpr]) -> Ordering {
    for (i, o) in order.iter().enumerate() {
        let asc = o.options.asc.unwrap_or(true);
        let nulls_first = o.options.nulls_first.unwrap_or(!asc);
        let (x, y) = (&a[i], &b[i]);
        let ord = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => {
                if nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (false, true) => {
                if nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            _ => {
                let c = sort_cmp(x, y);
                if asc { c } else { c.reverse() }
            }
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

impl<'a> Exec<'a> {
    /// The rows without repeats, in first-seen order; the key set counts
    /// against the statement's memory budget.
    fn dedupe_rows(&self, rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>> {
        let mut seen = BTreeSet::new();
        let mut charge = crate::join::Charge::new(self);
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            self.tick()?;
            let k = key_of(&r);
            if seen.contains(&k) {
                continue;
            }
            charge.add(crate::join::key_bytes(&k))?;
            seen.insert(k);
            out.push(r);
        }
        Ok(out)
    }

    /// Runs a query (with CTEs, ORDER BY, LIMIT) and materializes its rows.
    pub fn run_query(&self, q: &Query, outer: Option<&Env>) -> Result<RowSet> {
        let mut pushed = 0;
        if let Some(with) = &q.with {
            if with.recursive {
                return Err(unsupported("WITH RECURSIVE is not supported"));
            }
            for cte in &with.cte_tables {
                let r = self.run_query(&cte.query, outer);
                let mut rs = match r {
                    Ok(rs) => rs,
                    Err(e) => {
                        self.pop_ctes(pushed);
                        return Err(e);
                    }
                };
                for (i, c) in cte.alias.columns.iter().enumerate() {
                    if i < rs.cols.len() {
                        rs.cols[i] = ident(&c.name);
                    }
                }
                self.ctes.borrow_mut().push((ident(&cte.alias.name), Rc::new(rs)));
                pushed += 1;
            }
        }
        let r = self.run_query_body(q, outer);
        self.pop_ctes(pushed);
        r
    }

    fn pop_ctes(&self, n: usize) {
        let mut c = self.ctes.borrow_mut();
        let len = c.len();
        c.truncate(len.saturating_sub(n));
    }

    fn count_expr(&self, e: &Expr, outer: Option<&Env>, what: &str) -> Result<usize> {
        match cast(self.eval(e, &Env::empty(outer))?, &crate::types::SqlType::BigInt, false)? {
            Value::Int(i) if i >= 0 => Ok(i as usize),
            Value::Null => Ok(usize::MAX),
            _ => Err(type_mismatch(format!("{what} must not be negative"))),
        }
    }

    fn run_query_body(&self, q: &Query, outer: Option<&Env>) -> Result<RowSet> {
        let order: Vec<&OrderByExpr> = match &q.order_by {
            None => vec![],
            Some(ob) => match &ob.kind {
                OrderByKind::Expressions(v) => v.iter().collect(),
                OrderByKind::All(_) => return Err(unsupported("ORDER BY ALL is not supported")),
            },
        };
        let (mut limit, mut offset) = (usize::MAX, 0usize);
        match &q.limit_clause {
            None => {}
            Some(LimitClause::LimitOffset { limit: l, offset: o, limit_by }) => {
                if !limit_by.is_empty() {
                    return Err(unsupported("LIMIT BY is not supported"));
                }
                if let Some(l) = l {
                    limit = self.count_expr(l, outer, "LIMIT")?;
                }
                if let Some(o) = o {
                    offset = self.count_expr(&o.value, outer, "OFFSET")?;
                    if offset == usize::MAX {
                        offset = 0;
                    }
                }
            }
            Some(LimitClause::OffsetCommaLimit { offset: o, limit: l }) => {
                limit = self.count_expr(l, outer, "LIMIT")?;
                offset = self.count_expr(o, outer, "OFFSET")?;
            }
        }
        if q.fetch.is_some() {
            return Err(unsupported("FETCH is not supported; use LIMIT"));
        }
        let (cols, mut keyed): (Vec<String>, Keyed) = match &*q.body {
            SetExpr::Select(s) => self.run_select(s, &order, outer)?,
            other => {
                let rs = self.run_set_expr(other, outer)?;
                let mut pos = Vec::new();
                for o in &order {
                    let p = match &o.expr {
                        Expr::Value(v) => match &v.value {
                            ast::Value::Number(n, _) => n.parse::<usize>().ok().filter(|n| *n >= 1 && *n <= rs.cols.len()).map(|n| n - 1),
                            _ => None,
                        },
                        Expr::Identifier(i) => rs.cols.iter().position(|c| *c == ident(i)),
                        _ => None,
                    };
                    pos.push(
                        p.ok_or_else(|| unsupported(format!("ORDER BY term {} must be an output column of the set operation", o.expr)))?,
                    );
                }
                let keyed = rs.rows.into_iter().map(|r| (pos.iter().map(|p| r[*p].clone()).collect(), r)).collect();
                (rs.cols, keyed)
            }
        };
        if !order.is_empty() {
            keyed.sort_by(|a, b| cmp_keys(&a.0, &b.0, &order));
        }
        let rows = keyed.into_iter().skip(offset).take(limit).map(|(_, r)| r).collect();
        Ok(RowSet { cols, rows })
    }

    fn run_set_expr(&self, s: &SetExpr, outer: Option<&Env>) -> Result<RowSet> {
        match s {
            SetExpr::Select(sel) => {
                let (cols, keyed) = self.run_select(sel, &[], outer)?;
                Ok(RowSet { cols, rows: keyed.into_iter().map(|(_, r)| r).collect() })
            }
            SetExpr::Query(q) => self.run_query(q, outer),
            SetExpr::Values(v) => {
                let env = Env::empty(outer);
                let mut rows = Vec::new();
                for r in &v.rows {
                    let mut row = Vec::new();
                    for e in r {
                        row.push(self.eval(e, &env)?);
                    }
                    rows.push(row);
                }
                let n = rows.first().map(|r| r.len()).unwrap_or(0);
                if rows.iter().any(|r| r.len() != n) {
                    return Err(parse("VALUES lists must all be the same length"));
                }
                Ok(RowSet { cols: (1..=n).map(|i| format!("column{i}")).collect(), rows })
            }
            SetExpr::SetOperation { op, set_quantifier, left, right } => {
                let l = self.run_set_expr(left, outer)?;
                let r = self.run_set_expr(right, outer)?;
                if l.cols.len() != r.cols.len() {
                    return Err(type_mismatch("each side of a set operation must have the same number of columns"));
                }
                let all = matches!(set_quantifier, SetQuantifier::All);
                // Both sides are held, and so is the key set a de-duplication builds.
                let mut sides = crate::join::Charge::new(self);
                sides.hold(l.rows.iter().chain(&r.rows).map(|r| crate::join::row_bytes(r)).sum())?;
                let rows = match op {
                    SetOperator::Union => {
                        let mut rows = l.rows;
                        rows.extend(r.rows);
                        if all { rows } else { self.dedupe_rows(rows)? }
                    }
                    SetOperator::Intersect | SetOperator::Except => {
                        let mut counts: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
                        for row in &r.rows {
                            self.tick()?;
                            let k = key_of(row);
                            if !counts.contains_key(&k) {
                                sides.add(crate::join::key_bytes(&k))?;
                            }
                            *counts.entry(k).or_default() += 1;
                        }
                        let is_int = matches!(op, SetOperator::Intersect);
                        let mut out = Vec::new();
                        for row in l.rows {
                            let k = key_of(&row);
                            let c = counts.get_mut(&k);
                            let present = c.as_ref().is_some_and(|c| **c > 0);
                            if present == is_int {
                                out.push(row);
                            }
                            if all && let Some(c) = c {
                                *c = c.saturating_sub(1);
                            }
                        }
                        if all { out } else { self.dedupe_rows(out)? }
                    }
                    SetOperator::Minus => return Err(unsupported("MINUS is not supported")),
                };
                Ok(RowSet { cols: l.cols, rows })
            }
            _ => Err(unsupported("unsupported query form")),
        }
    }

    /// Builds the FROM clause rows (cross product of items, joins applied, WHERE constraints pushed
    /// into base-table scans). The WHERE predicate itself is applied by the caller.
    pub fn build_from(
        &self,
        from: &[ast::TableWithJoins],
        selection: Option<&Expr>,
        outer: Option<&Env>,
    ) -> Result<(Scope, Vec<Vec<Value>>)> {
        let mut items: Vec<Item> = Vec::new();
        for (ti, twj) in from.iter().enumerate() {
            let group_start = items.len();
            items.push(self.table_item(&twj.relation, if ti == 0 { JoinKind::First } else { JoinKind::Cross }, None, outer)?);
            for j in &twj.joins {
                let (kind, c) = match &j.join_operator {
                    JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinKind::Inner, Some(c)),
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, Some(c)),
                    JoinOperator::CrossJoin(_) => (JoinKind::Cross, None),
                    JoinOperator::Right(_) | JoinOperator::RightOuter(_) => {
                        return Err(unsupported("RIGHT JOIN is not supported; rewrite it as a LEFT JOIN with the tables swapped"));
                    }
                    JoinOperator::FullOuter(_) => return Err(unsupported("FULL OUTER JOIN is not supported")),
                    _ => return Err(unsupported("this join kind is not supported")),
                };
                let mut it = self.table_item(&j.relation, kind, None, outer)?;
                it.on = match c {
                    Some(JoinConstraint::On(e)) => Some(e.clone()),
                    Some(JoinConstraint::Using(cols)) => {
                        let mut cond: Option<Expr> = None;
                        for c in cols {
                            let name = object_name(c);
                            it.merged.push(name.clone());
                            let left_qual = items
                                .iter()
                                .rev()
                                .find(|i| i.cols.contains(&name) && !i.merged.contains(&name))
                                .map(|i| i.qual.clone())
                                .ok_or_else(|| {
                                    crate::error::column_not_found(format!("column \"{name}\" specified in USING clause does not exist"))
                                })?;
                            let mk = |q: &str| {
                                Expr::CompoundIdentifier(vec![ast::Ident::with_quote('"', q), ast::Ident::with_quote('"', &name)])
                            };
                            let eq = Expr::BinaryOp {
                                left: Box::new(mk(&left_qual)),
                                op: ast::BinaryOperator::Eq,
                                right: Box::new(mk(&it.qual)),
                            };
                            cond = Some(match cond {
                                None => eq,
                                Some(c) => Expr::BinaryOp { left: Box::new(c), op: ast::BinaryOperator::And, right: Box::new(eq) },
                            });
                        }
                        cond
                    }
                    Some(JoinConstraint::Natural) => return Err(unsupported("NATURAL JOIN is not supported")),
                    _ => None,
                };
                if matches!(kind, JoinKind::Inner | JoinKind::Left) && it.on.is_none() {
                    return Err(parse("JOIN requires an ON or USING condition"));
                }
                // With comma items before this join, its ON sees only the items of its
                // own comma element (as PostgreSQL): names are resolved against them.
                if group_start > 0
                    && let Some(on) = &it.on
                {
                    let visible: Vec<&Item> = items[group_start..].iter().chain(std::iter::once(&it)).collect();
                    let earlier: Vec<&Item> = items[..group_start].iter().collect();
                    it.on = Some(scope_on(on, &visible, &earlier)?);
                }
                items.push(it);
            }
        }
        // As PostgreSQL: one name per FROM item at this level (`FROM a, a`
        // needs an alias on one of them).
        let mut names = std::collections::BTreeSet::new();
        for it in &items {
            if it.qual != "subquery" && !names.insert(it.qual.as_str()) {
                return Err(parse(format!("table name \"{}\" specified more than once", it.qual)));
            }
        }
        let mut full = Scope::default();
        for it in &items {
            for c in &it.cols {
                full.cols.push(ScopeCol { qual: Some(it.qual.clone()), name: c.clone(), merged: it.merged.contains(c) });
            }
        }
        // Inner and cross joins go through the join planner; a FROM clause with
        // a LEFT JOIN is joined in written order.
        if items.iter().all(|it| it.kind != JoinKind::Left) {
            let rows = self.join_planned(&items, &full, selection, outer)?;
            return Ok((full, rows));
        }
        let mut charge = crate::join::Charge::new(self);
        let mut conj = Vec::new();
        if let Some(w) = selection {
            conjuncts(w, &mut conj);
        }
        let mut rows: Vec<Vec<Value>> = vec![vec![]];
        let mut off = 0;
        for it in &items {
            let n = it.cols.len();
            let step_scope = Scope { cols: full.cols[..off + n].to_vec() };
            let base_cons: Cons = match (&it.src, it.kind) {
                (Src::Table(t), JoinKind::First | JoinKind::Cross | JoinKind::Inner) => self.derive_cons(&conj, &full, off, t)?,
                _ => Cons::new(),
            };
            // Equi-join key: right column = left column.
            let mut equi: Option<(usize, usize)> = None;
            if let Some(on) = &it.on {
                let mut oc = Vec::new();
                conjuncts(on, &mut oc);
                for c in oc {
                    if let Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } = c {
                        let (a, b) = (column_pos(left, &step_scope), column_pos(right, &step_scope));
                        if let (Some(a), Some(b)) = (a, b) {
                            if a >= off && b < off {
                                equi = Some((a - off, b));
                            } else if b >= off && a < off {
                                equi = Some((b - off, a));
                            }
                        }
                        if equi.is_some() {
                            break;
                        }
                    }
                }
            }
            let use_index = match (&it.src, equi) {
                (Src::Table(t), Some((rc, lc))) => {
                    let cname = &t.columns[rc].name;
                    (t.primary_key.first() == Some(cname)
                        || t.indexes.iter().any(|ix| {
                            ix.columns.first() == Some(cname) && (ix.method == crate::catalog::IndexMethod::BTree || ix.columns.len() == 1)
                        }))
                        && rows.iter().all(|l| crate::join::exact_probe(&l[lc], &t.columns[rc].ty))
                }
                _ => false,
            };
            let pre: Option<Vec<Vec<Value>>> = if use_index {
                None
            } else {
                Some(match &it.src {
                    Src::Table(t) => self.scan_table(t, &base_cons)?.into_iter().map(|(_, r)| r).collect(),
                    Src::Rows(rs) => rs.rows.clone(),
                })
            };
            // Hash table for equi-joins without an index.
            let mut hash: Option<(BTreeMap<Vec<u8>, Vec<usize>>, Option<std::mem::Discriminant<Value>>)> = None;
            if let (Some(pre), Some((rc, _))) = (&pre, equi) {
                let mut m: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
                let mut disc = None;
                let mut uniform = true;
                for (i, r) in pre.iter().enumerate() {
                    let v = &r[rc];
                    if v.is_null() {
                        continue;
                    }
                    let d = std::mem::discriminant(v);
                    if disc.is_some_and(|x| x != d) {
                        uniform = false;
                    }
                    disc = Some(d);
                    m.entry(key_of(std::slice::from_ref(v))).or_default().push(i);
                }
                if uniform {
                    hash = Some((m, disc));
                }
            }
            let mut out = Vec::new();
            let mut out_bytes = 0usize;
            let nulls = vec![Value::Null; n];
            for l in &rows {
                let cand: Vec<Vec<Value>> = match (&pre, equi) {
                    (None, Some((rc, lc))) => {
                        let Src::Table(t) = &it.src else { unreachable!() };
                        let v = &l[lc];
                        match crate::value::cast(v.clone(), &t.columns[rc].ty, false) {
                            Ok(c) if !c.is_null() && crate::value::compare(v, &c)? == Some(Ordering::Equal) => {
                                let mut cons = base_cons.clone();
                                cons.entry(rc).or_default().eq = Some(c);
                                self.scan_table(t, &cons)?.into_iter().map(|(_, r)| r).collect()
                            }
                            _ => vec![],
                        }
                    }
                    (Some(pre), Some((_, lc))) => match &hash {
                        Some((m, disc)) => {
                            let v = &l[lc];
                            if v.is_null() || disc.is_none() {
                                vec![]
                            } else if *disc == Some(std::mem::discriminant(v)) {
                                m.get(&key_of(std::slice::from_ref(v)))
                                    .map(|ix| ix.iter().map(|i| pre[*i].clone()).collect())
                                    .unwrap_or_default()
                            } else {
                                pre.clone()
                            }
                        }
                        None => pre.clone(),
                    },
                    (Some(pre), None) => pre.clone(),
                    (None, None) => vec![],
                };
                let mut matched = false;
                for r in cand {
                    self.tick()?;
                    let mut row = l.clone();
                    row.extend(r);
                    let ok = match &it.on {
                        Some(on) => {
                            let env = Env { scope: &step_scope, row: &row, group: None, outer };
                            self.eval_bool(on, &env)? == Some(true)
                        }
                        None => true,
                    };
                    if ok {
                        matched = true;
                        out_bytes += std::mem::size_of::<Value>() * row.len();
                        charge.hold(out_bytes)?;
                        out.push(row);
                    }
                }
                if !matched && it.kind == JoinKind::Left {
                    let mut row = l.clone();
                    row.extend(nulls.iter().cloned());
                    out.push(row);
                }
            }
            rows = out;
            off += n;
        }
        Ok((full, rows))
    }

    fn table_item<'q>(&self, f: &TableFactor, kind: JoinKind, _on: Option<Expr>, outer: Option<&Env>) -> Result<Item<'q>> {
        match f {
            TableFactor::Table { name, alias, args, .. } => {
                let tname = object_name(name);
                if let Some(args) = args {
                    // `FROM generate_series(1, 3) s`.
                    let mut exprs = Vec::with_capacity(args.args.len());
                    for a in &args.args {
                        match a {
                            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => exprs.push(x),
                            _ => return Err(unsupported(format!("arguments of table function {tname}() must be plain expressions"))),
                        }
                    }
                    return self.table_function_item(&tname, &exprs, alias.as_ref(), kind, outer);
                }
                let qual = alias.as_ref().map(|a| ident(&a.name)).unwrap_or_else(|| tname.clone());
                // A schema-qualified name (`pg_catalog.pg_class`) is never a CTE.
                let cte = match name.0.len() {
                    1 => self.ctes.borrow().iter().rev().find(|(n, _)| *n == tname).map(|(_, rs)| rs.clone()),
                    _ => None,
                };
                let cte = match cte {
                    Some(rs) => Some(rs),
                    // A read bounded for a runtime thread reads base tables only: a
                    // view or a system table is built whole before its first row
                    // counts. Such a read goes where long work may go.
                    None if self.ctx.max_work.is_some() => {
                        if name.0.len() != 1 || catalog::get_view(&self.kv, &tname)?.is_some() {
                            return Err(crate::exec::over_work_budget());
                        }
                        None
                    }
                    None => match self.system_table(name)? {
                        Some(rs) => Some(Rc::new(rs)),
                        None => self.expand_view(&tname)?.map(Rc::new),
                    },
                };
                let (cols, src) = match cte {
                    Some(rs) => (rs.cols.clone(), Src::Rows(rs)),
                    None => {
                        let t = catalog::get_table(&self.kv, &tname)?
                            .ok_or_else(|| table_not_found(format!("table \"{tname}\" does not exist")))?;
                        (t.columns.iter().map(|c| c.name.clone()).collect(), Src::Table(t))
                    }
                };
                let mut cols = cols;
                if let Some(a) = alias {
                    for (i, c) in a.columns.iter().enumerate() {
                        if i < cols.len() {
                            cols[i] = ident(&c.name);
                        }
                    }
                }
                Ok(Item { qual, cols, src, kind, on: None, merged: Vec::new(), _p: Default::default() })
            }
            TableFactor::Derived { subquery, alias, lateral } => {
                if *lateral {
                    return Err(unsupported("LATERAL is not supported"));
                }
                let mut rs = self.run_query(subquery, outer)?;
                let qual = alias.as_ref().map(|a| ident(&a.name)).unwrap_or_else(|| "subquery".into());
                if let Some(a) = alias {
                    for (i, c) in a.columns.iter().enumerate() {
                        if i < rs.cols.len() {
                            rs.cols[i] = ident(&c.name);
                        }
                    }
                }
                Ok(Item {
                    qual,
                    cols: rs.cols.clone(),
                    src: Src::Rows(Rc::new(rs)),
                    kind,
                    on: None,
                    merged: Vec::new(),
                    _p: Default::default(),
                })
            }
            TableFactor::UNNEST { alias, array_exprs, with_offset: false, with_ordinality: false, .. } if array_exprs.len() == 1 => {
                self.table_function_item("unnest", &[&array_exprs[0]], alias.as_ref(), kind, outer)
            }
            TableFactor::NestedJoin { .. } => Err(unsupported("parenthesized joins are not supported")),
            _ => Err(unsupported("unsupported FROM item")),
        }
    }

    /// A table function in FROM (`unnest(array) x`, `generate_series(1, 3) s`):
    /// its arguments may name the outer query's columns.
    fn table_function_item<'q>(
        &self,
        name: &str,
        args: &[&Expr],
        alias: Option<&ast::TableAlias>,
        kind: JoinKind,
        outer: Option<&Env>,
    ) -> Result<Item<'q>> {
        let env = Env::empty(outer);
        let mut values = Vec::with_capacity(args.len());
        for x in args {
            values.push(self.eval(x, &env)?);
        }
        let rs = crate::system::table_function(name, &values)?;
        let qual = alias.map(|a| ident(&a.name)).unwrap_or_else(|| name.to_string());
        // A single-column function's column takes the alias's name, as in PostgreSQL.
        let cols = match alias {
            Some(a) if a.columns.is_empty() => vec![qual.clone()],
            Some(a) if a.columns.len() > rs.cols.len() => {
                return Err(crate::error::parse(format!(
                    "table \"{qual}\" has {} columns available but {} columns specified",
                    rs.cols.len(),
                    a.columns.len()
                )));
            }
            Some(a) => a.columns.iter().map(|c| ident(&c.name)).collect(),
            None => rs.cols.clone(),
        };
        Ok(Item { qual, cols, src: Src::Rows(Rc::new(rs)), kind, on: None, merged: Vec::new(), _p: Default::default() })
    }

    /// Runs one SELECT block; returns output columns and (order keys, row) pairs.
    pub fn run_select(&self, s: &Select, order: &[&OrderByExpr], outer: Option<&Env>) -> Result<(Vec<String>, Keyed)> {
        let distinct = match &s.distinct {
            None => false,
            Some(Distinct::Distinct) => true,
            Some(Distinct::On(_)) => return Err(unsupported("DISTINCT ON is not supported")),
        };
        if s.top.is_some() || s.into.is_some() {
            return Err(unsupported("TOP / SELECT INTO are not supported"));
        }
        let (scope, rows) = self.build_from(&s.from, s.selection.as_ref(), outer)?;
        // The FROM rows stay held while they are filtered, grouped and projected.
        let mut from_charge = crate::join::Charge::new(self);
        from_charge.hold(rows.iter().map(|r| crate::join::row_bytes(r)).sum())?;
        // Projection list.
        let mut proj: Vec<(Option<&Expr>, Option<usize>, String)> = Vec::new();
        for item in &s.projection {
            match item {
                SelectItem::UnnamedExpr(e) => proj.push((Some(e), None, expr_name(e))),
                SelectItem::ExprWithAlias { expr, alias } => proj.push((Some(expr), None, ident(alias))),
                SelectItem::Wildcard(_) => {
                    if scope.cols.is_empty() {
                        return Err(parse("SELECT * with no tables specified is not valid"));
                    }
                    // As PostgreSQL: the merged USING columns first, then every other
                    // column in FROM order (the right-hand copies of USING columns left out).
                    let using: Vec<&str> = {
                        let mut names: Vec<&str> = Vec::new();
                        for c in scope.cols.iter().filter(|c| c.merged) {
                            if !names.contains(&c.name.as_str()) {
                                names.push(&c.name);
                            }
                        }
                        names
                    };
                    let mut emitted = vec![false; scope.cols.len()];
                    for name in &using {
                        if let Some(i) = scope.cols.iter().position(|c| !c.merged && c.name == *name) {
                            emitted[i] = true;
                            proj.push((None, Some(i), scope.cols[i].name.clone()));
                        }
                    }
                    for (i, c) in scope.cols.iter().enumerate() {
                        if !c.merged && !emitted[i] {
                            proj.push((None, Some(i), c.name.clone()));
                        }
                    }
                }
                SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                    let q = object_name(n);
                    let before = proj.len();
                    for (i, c) in scope.cols.iter().enumerate() {
                        if c.qual.as_deref() == Some(q.as_str()) {
                            proj.push((None, Some(i), c.name.clone()));
                        }
                    }
                    if proj.len() == before {
                        return Err(table_not_found(format!("missing FROM-clause entry for table \"{q}\"")));
                    }
                }
                _ => return Err(unsupported("unsupported select item")),
            }
        }
        let cols: Vec<String> = proj.iter().map(|p| p.2.clone()).collect();
        // WHERE
        let mut kept = Vec::with_capacity(rows.len());
        for r in rows {
            if let Some(w) = &s.selection {
                let env = Env { scope: &scope, row: &r, group: None, outer };
                if self.eval_bool(w, &env)? != Some(true) {
                    continue;
                }
            }
            kept.push(r);
        }
        let group_exprs: Vec<Expr> = match &s.group_by {
            GroupByExpr::Expressions(v, m) => {
                if !m.is_empty() {
                    return Err(unsupported("GROUP BY modifiers are not supported"));
                }
                let mut out = Vec::new();
                for e in v {
                    // Positional or alias references to the select list.
                    let resolved = match e {
                        Expr::Value(v) => match &v.value {
                            ast::Value::Number(n, _) => {
                                let i: usize = n.parse().map_err(|_| parse("invalid GROUP BY position"))?;
                                let p = i
                                    .checked_sub(1)
                                    .and_then(|i| proj.get(i))
                                    .ok_or_else(|| parse(format!("GROUP BY position {i} is not in select list")))?;
                                Some(match p {
                                    (Some(e), _, _) => (*e).clone(),
                                    (None, Some(ci), _) => Expr::CompoundIdentifier(vec![
                                        ast::Ident::with_quote('"', scope.cols[*ci].qual.clone().unwrap_or_default()),
                                        ast::Ident::with_quote('"', scope.cols[*ci].name.clone()),
                                    ]),
                                    _ => return Err(parse("invalid GROUP BY position")),
                                })
                            }
                            _ => None,
                        },
                        Expr::Identifier(i) if scope.resolve(None, &ident(i)).ok().flatten().is_none() => {
                            proj.iter().find(|p| p.2 == ident(i) && p.0.is_some()).and_then(|p| p.0.cloned())
                        }
                        _ => None,
                    };
                    out.push(resolved.unwrap_or_else(|| e.clone()));
                }
                out
            }
            GroupByExpr::All(_) => return Err(unsupported("GROUP BY ALL is not supported")),
        };
        let aggregate = !group_exprs.is_empty()
            || s.having.is_some()
            || proj.iter().any(|p| p.0.is_some_and(contains_aggregate))
            || order.iter().any(|o| contains_aggregate(&o.expr));
        if aggregate {
            check_grouping(&scope, &group_exprs, &proj, s.having.as_ref(), order, &cols)?;
        }
        // Window functions: computed over the rows WHERE kept, as hidden columns.
        let calls = crate::window::window_calls(proj.iter().filter_map(|p| p.0).chain(order.iter().map(|o| &o.expr)));
        let scope = if calls.is_empty() {
            scope
        } else {
            if aggregate {
                return Err(unsupported("window functions in queries with GROUP BY or aggregates are not supported"));
            }
            self.compute_windows(&calls, &scope, &mut kept, outer)?
        };
        // The projected rows (what ORDER BY, DISTINCT and the caller hold) count
        // against the memory budget too.
        let mut out_charge = crate::join::Charge::new(self);
        let mut out_bytes = 0usize;
        let mut push = |out: &mut Keyed, kr: (Vec<Value>, Vec<Value>)| -> Result<()> {
            out_bytes += crate::join::row_bytes(&kr.0) + crate::join::row_bytes(&kr.1);
            out_charge.hold(out_bytes)?;
            out.push(kr);
            Ok(())
        };
        let mut out: Keyed = Vec::new();
        let project = |env: &Env| -> Result<(Vec<Value>, Vec<Value>)> {
            let mut row = Vec::with_capacity(proj.len());
            for p in &proj {
                row.push(match p {
                    (Some(e), _, _) => self.eval(e, env)?,
                    (None, Some(i), _) => env.row.get(*i).cloned().unwrap_or(Value::Null),
                    _ => Value::Null,
                });
            }
            let mut keys = Vec::with_capacity(order.len());
            for o in order {
                let k = match &o.expr {
                    Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                        let ast::Value::Number(n, _) = &v.value else { unreachable!() };
                        let i: usize = n.parse().map_err(|_| parse("invalid ORDER BY position"))?;
                        i.checked_sub(1)
                            .and_then(|i| row.get(i))
                            .cloned()
                            .ok_or_else(|| parse(format!("ORDER BY position {i} is not in select list")))?
                    }
                    Expr::Identifier(i)
                        if cols.iter().filter(|c| **c == ident(i)).count() == 1
                            && (proj.iter().any(|p| p.2 == ident(i) && p.0.is_some_and(|e| !matches!(e, Expr::Identifier(_))))
                                || scope.resolve(None, &ident(i)).ok().flatten().is_none()) =>
                    {
                        let p = cols.iter().position(|c| *c == ident(i)).unwrap_or(0);
                        row[p].clone()
                    }
                    e => self.eval(e, env)?,
                };
                keys.push(k);
            }
            Ok((keys, row))
        };
        if aggregate {
            let mut index: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
            let mut groups: Vec<Vec<Vec<Value>>> = Vec::new();
            let mut group_charge = crate::join::Charge::new(self);
            for r in kept {
                self.tick()?;
                let env = Env { scope: &scope, row: &r, group: None, outer };
                let mut k = Vec::with_capacity(group_exprs.len());
                for g in &group_exprs {
                    k.push(self.eval(g, &env)?);
                }
                let kb = key_of(&k);
                if !index.contains_key(&kb) {
                    group_charge.add(crate::join::key_bytes(&kb) + std::mem::size_of::<Vec<Vec<Value>>>())?;
                }
                let gi = *index.entry(kb).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[gi].push(r);
            }
            if groups.is_empty() && group_exprs.is_empty() {
                groups.push(Vec::new());
            }
            let null_row = vec![Value::Null; scope.cols.len()];
            for g in &groups {
                self.tick()?;
                let first = g.first().unwrap_or(&null_row);
                let env = Env { scope: &scope, row: first, group: Some(g), outer };
                if let Some(h) = &s.having
                    && self.eval_bool(h, &env)? != Some(true)
                {
                    continue;
                }
                push(&mut out, project(&env)?)?;
            }
        } else {
            let set_returning: Vec<&Expr> = proj.iter().filter_map(|p| p.0).filter(|e| crate::system::is_set_returning(e)).collect();
            for r in &kept {
                let env = Env { scope: &scope, row: r, group: None, outer };
                if set_returning.is_empty() {
                    push(&mut out, project(&env)?)?;
                    continue;
                }
                // As PostgreSQL 10+: the calls step in lockstep, one output row
                // per element of the longest; shorter ones give NULLs. Each
                // call's elements are computed once per input row.
                let mut elements = std::collections::HashMap::new();
                let mut rows = 0;
                for e in &set_returning {
                    let (call, list) = self.set_returning_elements(e, &env)?;
                    rows = rows.max(list.len());
                    elements.insert(call, Rc::new(list));
                }
                for row in 0..rows {
                    self.tick()?;
                    let current = crate::system::SetReturning { row, elements: elements.clone() };
                    let previous = self.set_returning.replace(Some(current));
                    let projected = project(&env);
                    self.set_returning.replace(previous);
                    push(&mut out, projected?)?;
                }
            }
        }
        if distinct {
            let mut seen = BTreeSet::new();
            let mut seen_charge = crate::join::Charge::new(self);
            let mut kept_rows = Vec::with_capacity(out.len());
            for kr in out {
                let k = key_of(&kr.1);
                if seen.contains(&k) {
                    continue;
                }
                seen_charge.add(crate::join::key_bytes(&k))?;
                seen.insert(k);
                kept_rows.push(kr);
            }
            out = kept_rows;
        }
        Ok((cols, out))
    }
}

/// An ON clause of a join that follows comma items, with its column names
/// resolved against the items of its own comma element only: unqualified names
/// are qualified with the visible item that has them, and a name or qualifier
/// that only an earlier comma item has is an error, as in PostgreSQL. Names the
/// FROM clause does not have at all (outer references) are left alone, as are
/// subqueries inside the clause.
fn scope_on(e: &Expr, visible: &[&Item], earlier: &[&Item]) -> Result<Expr> {
    let q = |x: &Expr| scope_on(x, visible, earlier).map(Box::new);
    Ok(match e {
        Expr::Identifier(i) => {
            let name = ident(i);
            let owners: Vec<&&Item> = visible.iter().filter(|it| it.cols.contains(&name) && !it.merged.contains(&name)).collect();
            match owners.as_slice() {
                [one] => Expr::CompoundIdentifier(vec![ast::Ident::with_quote('"', &one.qual), ast::Ident::with_quote('"', &name)]),
                [] if earlier.iter().any(|it| it.cols.contains(&name)) => {
                    return Err(crate::error::column_not_found(format!(
                        "column \"{name}\" does not exist here: a table before the comma has it, but a JOIN's ON clause cannot refer to it"
                    )));
                }
                [] => e.clone(),
                _ => return Err(crate::error::column_not_found(format!("column reference \"{name}\" is ambiguous"))),
            }
        }
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            let qual = ident(&parts[0]);
            if !visible.iter().any(|it| it.qual == qual) && earlier.iter().any(|it| it.qual == qual) {
                return Err(table_not_found(format!("invalid reference to FROM-clause entry for table \"{qual}\"")));
            }
            e.clone()
        }
        Expr::BinaryOp { left, op, right } => Expr::BinaryOp { left: q(left)?, op: op.clone(), right: q(right)? },
        Expr::UnaryOp { op, expr } => Expr::UnaryOp { op: *op, expr: q(expr)? },
        Expr::Nested(x) => Expr::Nested(q(x)?),
        Expr::IsNull(x) => Expr::IsNull(q(x)?),
        Expr::IsNotNull(x) => Expr::IsNotNull(q(x)?),
        Expr::IsTrue(x) => Expr::IsTrue(q(x)?),
        Expr::IsNotTrue(x) => Expr::IsNotTrue(q(x)?),
        Expr::IsDistinctFrom(a, b) => Expr::IsDistinctFrom(q(a)?, q(b)?),
        Expr::IsNotDistinctFrom(a, b) => Expr::IsNotDistinctFrom(q(a)?, q(b)?),
        Expr::InList { expr, list, negated } => Expr::InList {
            expr: q(expr)?,
            list: list.iter().map(|x| scope_on(x, visible, earlier)).collect::<Result<_>>()?,
            negated: *negated,
        },
        Expr::Between { expr, negated, low, high } => Expr::Between { expr: q(expr)?, negated: *negated, low: q(low)?, high: q(high)? },
        Expr::Like { negated, any, expr, pattern, escape_char } => {
            Expr::Like { negated: *negated, any: *any, expr: q(expr)?, pattern: q(pattern)?, escape_char: escape_char.clone() }
        }
        Expr::ILike { negated, any, expr, pattern, escape_char } => {
            Expr::ILike { negated: *negated, any: *any, expr: q(expr)?, pattern: q(pattern)?, escape_char: escape_char.clone() }
        }
        Expr::Cast { kind, expr, data_type, format } => {
            Expr::Cast { kind: kind.clone(), expr: q(expr)?, data_type: data_type.clone(), format: format.clone() }
        }
        other => other.clone(),
    })
}

/// How GROUP BY membership compares expressions: a column reference by the
/// column it resolves to, anything else by its normalized text.
fn grouping_key(e: &Expr, scope: &Scope) -> String {
    let resolved = match e {
        Expr::Identifier(i) => scope.resolve(None, &ident(i)).ok().flatten(),
        Expr::CompoundIdentifier(p) if p.len() == 2 => scope.resolve(Some(&ident(&p[0])), &ident(&p[1])).ok().flatten(),
        Expr::Nested(inner) => return grouping_key(inner, scope),
        _ => None,
    };
    match resolved {
        Some(i) => format!("#column {i}"),
        None => e.to_string().to_lowercase(),
    }
}

/// The first column of this query's FROM list that `e` uses outside every
/// aggregate call and outside every GROUP BY expression.
fn ungrouped_column(e: &Expr, scope: &Scope, group_keys: &BTreeSet<String>) -> Option<String> {
    let mut bad = None;
    walk_pruned(e, &mut |x| {
        if bad.is_some() || group_keys.contains(&grouping_key(x, scope)) {
            return false;
        }
        match x {
            Expr::Function(f) if is_aggregate_name(&func_name(f)) && f.over.is_none() => false,
            Expr::Identifier(i) => {
                if let Ok(Some(_)) = scope.resolve(None, &ident(i)) {
                    bad = Some(ident(i));
                }
                false
            }
            Expr::CompoundIdentifier(p) if p.len() == 2 => {
                if let Ok(Some(_)) = scope.resolve(Some(&ident(&p[0])), &ident(&p[1])) {
                    bad = Some(format!("{}.{}", ident(&p[0]), ident(&p[1])));
                }
                false
            }
            _ => true,
        }
    });
    bad
}

fn grouping_error(column: &str) -> SqlError {
    SqlError::new(
        ErrorCode::GroupingError,
        format!("column \"{column}\" must appear in the GROUP BY clause or be used in an aggregate function"),
    )
}

/// PostgreSQL's grouping rule for an aggregating SELECT: outside aggregate
/// calls, the select list, HAVING and ORDER BY may use a column of the FROM
/// list only inside an expression that GROUP BY lists. (Columns of enclosing
/// queries are constants here and always allowed.)
fn check_grouping(
    scope: &Scope,
    group_exprs: &[Expr],
    proj: &[(Option<&Expr>, Option<usize>, String)],
    having: Option<&Expr>,
    order: &[&OrderByExpr],
    output_names: &[String],
) -> Result<()> {
    let keys: BTreeSet<String> = group_exprs.iter().map(|g| grouping_key(g, scope)).collect();
    for p in proj {
        match p {
            (Some(e), _, _) => {
                if let Some(c) = ungrouped_column(e, scope, &keys) {
                    return Err(grouping_error(&c));
                }
            }
            (None, Some(i), name) if !keys.contains(&format!("#column {i}")) => {
                return Err(grouping_error(name));
            }
            _ => {}
        }
    }
    if let Some(h) = having
        && let Some(c) = ungrouped_column(h, scope, &keys)
    {
        return Err(grouping_error(&c));
    }
    for o in order {
        let refers_to_output = match &o.expr {
            Expr::Value(v) => matches!(v.value, ast::Value::Number(..)),
            Expr::Identifier(i) => output_names.contains(&ident(i)),
            _ => false,
        };
        if !refers_to_output && let Some(c) = ungrouped_column(&o.expr, scope, &keys) {
            return Err(grouping_error(&c));
        }
    }
    Ok(())
}
