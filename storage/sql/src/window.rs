//! Window functions: `f(…) OVER ([PARTITION BY …] [ORDER BY …] [frame])` in the
//! SELECT list and ORDER BY of a query without GROUP BY.
//!
//! Each window call is computed once over the rows that passed WHERE: rows are
//! split by the PARTITION BY values, sorted by the window's ORDER BY (rows with
//! equal keys are peers), and the function is evaluated per row over its frame.
//! The values become hidden columns of the rows, which the call's evaluation
//! reads back ([`Exec::window_value`]).
//!
//! Supported: `row_number`, `rank`, `dense_rank`, `percent_rank`, `cume_dist`,
//! `ntile`, `lag`, `lead`, `first_value`, `last_value`, `nth_value`, and the
//! aggregates `count`, `sum`, `avg`, `min`, `max`. Frames: the default (RANGE
//! UNBOUNDED PRECEDING to CURRENT ROW with ORDER BY, the whole partition
//! without), `ROWS` with `UNBOUNDED`/`n PRECEDING`/`CURRENT ROW`/`n FOLLOWING`
//! bounds, and `RANGE` with `UNBOUNDED` and `CURRENT ROW` bounds.
use crate::error::{Result, parse, unsupported};
use crate::eval::{func_args, func_name, walk};
use crate::exec::{Env, Exec, Scope, ScopeCol};
use crate::functions;
use crate::value::{Value, sort_cmp};
use sqlparser::ast::{self, Expr, FunctionArgExpr, WindowFrameBound, WindowFrameUnits, WindowType};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Qualifier of the hidden columns that hold window values.
const WINDOW_QUAL: &str = "\u{1}window";

/// The window calls (`… OVER …`) in `exprs`, each once.
pub(crate) fn window_calls<'q>(exprs: impl IntoIterator<Item = &'q Expr>) -> Vec<&'q ast::Function> {
    let mut out: Vec<&'q ast::Function> = Vec::new();
    for e in exprs {
        collect(e, &mut out);
    }
    out
}

fn collect<'q>(e: &'q Expr, out: &mut Vec<&'q ast::Function>) {
    walk(e, &mut |x: &'q Expr| {
        if let Expr::Function(f) = x
            && f.over.is_some()
            && !out.iter().any(|o| std::ptr::eq(*o, f))
        {
            out.push(f);
        }
    });
}

/// How a frame bound is given.
#[derive(Clone, Copy)]
enum Bound {
    Unbounded,
    Offset(i64),
    Current,
}

impl Exec<'_> {
    /// Computes every call of `calls` over `rows` and appends the values as
    /// hidden columns; returns the scope with those columns.
    pub(crate) fn compute_windows(
        &self,
        calls: &[&ast::Function],
        scope: &Scope,
        rows: &mut [Vec<Value>],
        outer: Option<&Env>,
    ) -> Result<Scope> {
        let mut columns = Vec::with_capacity(calls.len());
        for f in calls {
            columns.push(self.window_column(f, scope, rows, outer)?);
        }
        let mut extended = scope.clone();
        for (i, f) in calls.iter().enumerate() {
            self.window_slots.borrow_mut().insert(*f as *const ast::Function as usize, i);
            extended.cols.push(ScopeCol { qual: Some(WINDOW_QUAL.into()), name: i.to_string(), merged: false });
        }
        for (ri, row) in rows.iter_mut().enumerate() {
            for col in &columns {
                row.push(col[ri].clone());
            }
        }
        Ok(extended)
    }

    /// The value of window call `f` for the row of `env`.
    pub(crate) fn window_value(&self, f: &ast::Function, env: &Env) -> Result<Value> {
        let slot = self.window_slots.borrow().get(&(f as *const ast::Function as usize)).copied();
        let pos = slot.and_then(|s| env.scope.resolve(Some(WINDOW_QUAL), &s.to_string()).ok().flatten());
        match pos {
            Some(p) => Ok(env.row.get(p).cloned().unwrap_or(Value::Null)),
            None => Err(unsupported("window functions are allowed only in the SELECT list and ORDER BY of a query without GROUP BY")),
        }
    }

    /// The values of one window call, one per row of `rows`.
    fn window_column(&self, f: &ast::Function, scope: &Scope, rows: &[Vec<Value>], outer: Option<&Env>) -> Result<Vec<Value>> {
        let name = func_name(f);
        let spec = match &f.over {
            Some(WindowType::WindowSpec(s)) => s,
            Some(WindowType::NamedWindow(_)) => return Err(unsupported("named windows are not supported")),
            None => return Err(parse("not a window call")),
        };
        if spec.window_name.is_some() {
            return Err(unsupported("named windows are not supported"));
        }
        if f.filter.is_some() || !f.within_group.is_empty() {
            return Err(unsupported("FILTER / WITHIN GROUP on window functions are not supported"));
        }
        let (args, distinct) = func_args(f)?;
        if distinct {
            return Err(unsupported("DISTINCT is not implemented for window functions"));
        }
        // Partitions in first-seen order, rows in each sorted by the window's ORDER BY.
        let mut partitions: Vec<Vec<usize>> = Vec::new();
        let mut index: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut sort_keys: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
        for (ri, r) in rows.iter().enumerate() {
            self.tick()?;
            let env = Env { scope, row: r, group: None, outer };
            let mut pk = Vec::with_capacity(spec.partition_by.len());
            for e in &spec.partition_by {
                pk.push(self.eval(e, &env)?);
            }
            let mut ok = Vec::with_capacity(spec.order_by.len());
            for o in &spec.order_by {
                ok.push(self.eval(&o.expr, &env)?);
            }
            sort_keys.push(ok);
            let pi = *index.entry(crate::encoding::key_of(&pk)).or_insert_with(|| {
                partitions.push(Vec::new());
                partitions.len() - 1
            });
            partitions[pi].push(ri);
        }
        let order: Vec<&ast::OrderByExpr> = spec.order_by.iter().collect();
        let cmp = |a: usize, b: usize| compare_keys(&sort_keys[a], &sort_keys[b], &order);
        let (start, end) = self.frame_bounds(spec)?;
        let mut out = vec![Value::Null; rows.len()];
        for part in &mut partitions {
            part.sort_by(|a, b| cmp(*a, *b));
            let n = part.len();
            // Peer groups: [group_start[i], group_end[i]) for the row at sorted
            // position i, and the group's number (all rows are peers without ORDER BY).
            let mut group_start = vec![0usize; n];
            let mut group_end = vec![n; n];
            let mut dense = vec![0usize; n];
            if !order.is_empty() {
                let (mut i, mut d) = (0, 0);
                while i < n {
                    let mut j = i + 1;
                    while j < n && cmp(part[i], part[j]) == Ordering::Equal {
                        j += 1;
                    }
                    for k in i..j {
                        (group_start[k], group_end[k], dense[k]) = (i, j, d);
                    }
                    d += 1;
                    i = j;
                }
            }
            // The argument values in partition order (evaluated once).
            let arg_at = |k: usize, i: usize| -> Result<Value> {
                match args.get(k) {
                    Some(FunctionArgExpr::Expr(x)) => self.eval(x, &Env { scope, row: &rows[part[i]], group: None, outer }),
                    Some(_) => Err(parse(format!("{name}(*) is not valid here"))),
                    None => Ok(Value::Null),
                }
            };
            let const_arg = |k: usize, default: i64| -> Result<i64> {
                match args.get(k) {
                    Some(FunctionArgExpr::Expr(x)) => match self.eval(x, &Env::empty(outer))? {
                        Value::Int(v) => Ok(v),
                        Value::Null => Ok(default),
                        other => Err(parse(format!("{name}() expects an integer argument, got {}", other.to_text()))),
                    },
                    _ => Ok(default),
                }
            };
            let rows_units = matches!(self.units(spec), WindowFrameUnits::Rows);
            let frame = |i: usize| -> (usize, usize) {
                let lo = match start {
                    Bound::Unbounded => 0,
                    Bound::Current if rows_units => i,
                    Bound::Current => group_start[i],
                    Bound::Offset(k) => (i as i64 + k).clamp(0, n as i64) as usize,
                };
                let hi = match end {
                    Bound::Unbounded => n,
                    Bound::Current if rows_units => i + 1,
                    Bound::Current => group_end[i],
                    Bound::Offset(k) => (i as i64 + k + 1).clamp(0, n as i64) as usize,
                };
                (lo, hi.max(lo))
            };
            match name.as_str() {
                "row_number" => (0..n).for_each(|i| out[part[i]] = Value::Int(i as i64 + 1)),
                "rank" => (0..n).for_each(|i| out[part[i]] = Value::Int(group_start[i] as i64 + 1)),
                "dense_rank" => (0..n).for_each(|i| out[part[i]] = Value::Int(dense[i] as i64 + 1)),
                "percent_rank" => {
                    (0..n).for_each(|i| out[part[i]] = Value::Float(if n <= 1 { 0.0 } else { group_start[i] as f64 / (n - 1) as f64 }))
                }
                "cume_dist" => (0..n).for_each(|i| out[part[i]] = Value::Float(group_end[i] as f64 / n as f64)),
                "ntile" => {
                    let buckets = const_arg(0, 1)?;
                    if buckets <= 0 {
                        return Err(parse("argument of ntile must be greater than zero"));
                    }
                    let buckets = buckets as usize;
                    let (size, extra) = (n / buckets, n % buckets);
                    let mut i = 0;
                    for b in 0..buckets.min(n) {
                        let len = size + usize::from(b < extra);
                        for _ in 0..len {
                            out[part[i]] = Value::Int(b as i64 + 1);
                            i += 1;
                        }
                    }
                }
                "lag" | "lead" => {
                    let offset = const_arg(1, 1)?;
                    for i in 0..n {
                        let j = if name == "lag" { i as i64 - offset } else { i as i64 + offset };
                        out[part[i]] = if (0..n as i64).contains(&j) {
                            arg_at(0, j as usize)?
                        } else if args.len() > 2 {
                            arg_at(2, i)?
                        } else {
                            Value::Null
                        };
                    }
                }
                "first_value" | "last_value" | "nth_value" => {
                    let nth = if name == "nth_value" { const_arg(1, 1)? } else { 1 };
                    if nth <= 0 {
                        return Err(parse("argument of nth_value must be greater than zero"));
                    }
                    for i in 0..n {
                        let (lo, hi) = frame(i);
                        let at = match name.as_str() {
                            "first_value" => (lo < hi).then_some(lo),
                            "last_value" => (lo < hi).then(|| hi - 1),
                            _ => (lo + nth as usize - 1 < hi).then(|| lo + nth as usize - 1),
                        };
                        out[part[i]] = match at {
                            Some(j) => arg_at(0, j)?,
                            None => Value::Null,
                        };
                    }
                }
                "count" | "sum" | "avg" | "min" | "max" => {
                    let star = matches!(args.as_slice(), [FunctionArgExpr::Wildcard]);
                    if !star && args.len() != 1 {
                        return Err(parse(format!("{name}() takes exactly one argument")));
                    }
                    let vals: Vec<Value> = (0..n).map(|i| if star { Ok(Value::Int(1)) } else { arg_at(0, i) }).collect::<Result<_>>()?;
                    for i in 0..n {
                        self.tick()?;
                        let (lo, hi) = frame(i);
                        let window: Vec<Value> = vals[lo..hi].iter().filter(|v| !v.is_null()).cloned().collect();
                        out[part[i]] = functions::aggregate(&name, window)?;
                    }
                }
                other => return Err(unsupported(format!("window function {}() is not supported", other.to_uppercase()))),
            }
        }
        Ok(out)
    }

    fn units(&self, spec: &ast::WindowSpec) -> WindowFrameUnits {
        spec.window_frame.as_ref().map_or(WindowFrameUnits::Range, |f| f.units)
    }

    /// The frame's start and end bounds (offsets relative to the current row).
    fn frame_bounds(&self, spec: &ast::WindowSpec) -> Result<(Bound, Bound)> {
        let Some(frame) = &spec.window_frame else {
            return Ok((Bound::Unbounded, if spec.order_by.is_empty() { Bound::Unbounded } else { Bound::Current }));
        };
        let rows = match frame.units {
            WindowFrameUnits::Rows => true,
            WindowFrameUnits::Range => false,
            WindowFrameUnits::Groups => return Err(unsupported("GROUPS frames are not supported")),
        };
        let bound = |b: &WindowFrameBound| -> Result<Bound> {
            Ok(match b {
                WindowFrameBound::CurrentRow => Bound::Current,
                WindowFrameBound::Preceding(None) | WindowFrameBound::Following(None) => Bound::Unbounded,
                WindowFrameBound::Preceding(Some(e)) | WindowFrameBound::Following(Some(e)) => {
                    if !rows {
                        return Err(unsupported("RANGE frames with offsets are not supported; use ROWS"));
                    }
                    let sign = if matches!(b, WindowFrameBound::Preceding(_)) { -1 } else { 1 };
                    match self.eval(e, &Env::empty(None))? {
                        Value::Int(k) if k >= 0 => Bound::Offset(sign * k),
                        _ => return Err(parse("frame offsets must be non-negative integers")),
                    }
                }
            })
        };
        let start = bound(&frame.start_bound)?;
        let end = match &frame.end_bound {
            Some(b) => bound(b)?,
            None => Bound::Current,
        };
        if matches!(frame.start_bound, WindowFrameBound::Following(None)) {
            return Err(parse("frame start cannot be UNBOUNDED FOLLOWING"));
        }
        if matches!(frame.end_bound, Some(WindowFrameBound::Preceding(None))) {
            return Err(parse("frame end cannot be UNBOUNDED PRECEDING"));
        }
        Ok((start, end))
    }
}

/// Orders sort keys by a window's ORDER BY (NULLs last ascending, first descending).
fn compare_keys(a: &[Value], b: &[Value], order: &[&ast::OrderByExpr]) -> Ordering {
    for (i, o) in order.iter().enumerate() {
        let asc = o.options.asc.unwrap_or(true);
        let nulls_first = o.options.nulls_first.unwrap_or(!asc);
        let ord = match (a[i].is_null(), b[i].is_null()) {
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
                let c = sort_cmp(&a[i], &b[i]);
                if asc { c } else { c.reverse() }
            }
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}
