//! Access-path planning for base tables: primary-key and index lookups for equality,
//! IN-list and range predicates; full scan otherwise.
use crate::catalog::{IndexMethod, TableDef};
use crate::encoding::{self, decode_row, encode_key, prefix_end};
use crate::error::Result;
use crate::exec::{Env, Exec, Scope, ident};
use crate::value::{Value, cast, compare};
use sqlparser::ast::{BinaryOperator as B, Expr, UnaryOperator};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Constraints known for one column.
#[derive(Debug, Clone, Default)]
pub struct ColCons {
    pub eq: Option<Value>,
    pub inl: Option<Vec<Value>>,
    pub lo: Option<(Value, bool)>,
    pub hi: Option<(Value, bool)>,
}

/// Column index → constraints.
pub type Cons = BTreeMap<usize, ColCons>;

/// Splits an AND tree into conjuncts.
pub fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp { left, op: B::And, right } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        Expr::Nested(x) => conjuncts(x, out),
        other => out.push(other),
    }
}

/// Literal/placeholder-only expression (safe to evaluate once).
pub fn is_const(e: &Expr) -> bool {
    match e {
        Expr::Value(_) | Expr::TypedString(_) => true,
        Expr::Nested(x) | Expr::Cast { expr: x, .. } => is_const(x),
        Expr::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr } => is_const(expr),
        Expr::BinaryOp { left, op: B::Plus | B::Minus | B::Multiply | B::Divide | B::StringConcat, right } => {
            is_const(left) && is_const(right)
        }
        _ => false,
    }
}

fn flip(op: &B) -> Option<B> {
    Some(match op {
        B::Eq => B::Eq,
        B::Lt => B::Gt,
        B::LtEq => B::GtEq,
        B::Gt => B::Lt,
        B::GtEq => B::LtEq,
        _ => return None,
    })
}

/// Position in `scope` of a column reference, if `e` is one.
pub fn column_pos(e: &Expr, scope: &Scope) -> Option<usize> {
    match e {
        Expr::Identifier(i) => scope.resolve(None, &ident(i)).ok().flatten(),
        Expr::CompoundIdentifier(p) if p.len() >= 2 => scope.resolve(Some(&ident(&p[p.len() - 2])), &ident(&p[p.len() - 1])).ok().flatten(),
        Expr::Nested(x) => column_pos(x, scope),
        _ => None,
    }
}

fn tighter(a: Option<(Value, bool)>, b: (Value, bool), lower: bool) -> Option<(Value, bool)> {
    match a {
        None => Some(b),
        Some(a) => match compare(&a.0, &b.0) {
            Ok(Some(Ordering::Equal)) => Some((a.0, a.1 && b.1)),
            Ok(Some(o)) => {
                if (o == Ordering::Less) == lower {
                    Some(b)
                } else {
                    Some(a)
                }
            }
            _ => Some(a),
        },
    }
}

/// Converts `v` to the column type only when that is lossless.
fn exact(v: &Value, ty: &crate::types::SqlType) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    let c = cast(v.clone(), ty, false).ok()?;
    (compare(v, &c).ok()? == Some(Ordering::Equal)).then_some(c)
}

impl<'a> Exec<'a> {
    /// Derives constraints for the table occupying scope positions `off..off+ncols`.
    pub fn derive_cons(&self, conj: &[&Expr], scope: &Scope, off: usize, t: &TableDef) -> Result<Cons> {
        let mut cons = Cons::new();
        let n = t.columns.len();
        let empty = Env::empty(None);
        let col_of = |e: &Expr| column_pos(e, scope).filter(|p| *p >= off && *p < off + n).map(|p| p - off);
        for c in conj {
            match c {
                Expr::BinaryOp { left, op, right } => {
                    let (col, op, k) = if let (Some(ci), true) = (col_of(left), is_const(right)) {
                        (ci, op.clone(), right)
                    } else if let (Some(ci), true, Some(f)) = (col_of(right), is_const(left), flip(op)) {
                        (ci, f, left)
                    } else {
                        continue;
                    };
                    let Ok(v) = self.eval(k, &empty) else { continue };
                    let Some(v) = exact(&v, &t.columns[col].ty) else { continue };
                    let e = cons.entry(col).or_default();
                    match op {
                        B::Eq => e.eq = Some(v),
                        B::Gt => e.lo = tighter(e.lo.take(), (v, false), true),
                        B::GtEq => e.lo = tighter(e.lo.take(), (v, true), true),
                        B::Lt => e.hi = tighter(e.hi.take(), (v, false), false),
                        B::LtEq => e.hi = tighter(e.hi.take(), (v, true), false),
                        _ => {}
                    }
                }
                Expr::Between { expr, negated: false, low, high } if is_const(low) && is_const(high) => {
                    let Some(col) = col_of(expr) else { continue };
                    let (Ok(l), Ok(h)) = (self.eval(low, &empty), self.eval(high, &empty)) else { continue };
                    let ty = &t.columns[col].ty;
                    let e = cons.entry(col).or_default();
                    if let Some(l) = exact(&l, ty) {
                        e.lo = tighter(e.lo.take(), (l, true), true);
                    }
                    if let Some(h) = exact(&h, ty) {
                        e.hi = tighter(e.hi.take(), (h, true), false);
                    }
                }
                Expr::InList { expr, list, negated: false } if list.iter().all(is_const) && !list.is_empty() => {
                    let Some(col) = col_of(expr) else { continue };
                    let mut vals = Vec::new();
                    let mut ok = true;
                    for x in list {
                        match self.eval(x, &empty) {
                            Ok(v) if v.is_null() => {}
                            Ok(v) => match exact(&v, &t.columns[col].ty) {
                                Some(v) => vals.push(v),
                                None => ok = false,
                            },
                            Err(_) => ok = false,
                        }
                    }
                    if ok {
                        cons.entry(col).or_default().inl = Some(vals);
                    }
                }
                _ => {}
            }
        }
        Ok(cons)
    }

    /// Reads the rows of `t` (key, values) satisfying at least the usable constraints.
    /// The caller must still apply the full predicate.
    pub fn scan_table(&self, t: &TableDef, cons: &Cons) -> Result<Vec<(Vec<u8>, Vec<Value>)>> {
        if !self.analyze.get() {
            return self.scan_table_with(t, cons);
        }
        // EXPLAIN ANALYZE: the access path's line gets the rows and time it took.
        let (line, started) = (self.trace.borrow().len(), std::time::Instant::now());
        let rows = self.scan_table_with(t, cons)?;
        if let Some(l) = self.trace.borrow_mut().get_mut(line) {
            l.push_str(&format!(" → {} rows ({:.3} ms)", rows.len(), started.elapsed().as_secs_f64() * 1000.0));
        }
        Ok(rows)
    }

    fn scan_table_with(&self, t: &TableDef, cons: &Cons) -> Result<Vec<(Vec<u8>, Vec<Value>)>> {
        struct Cand {
            name: String,
            cols: Vec<usize>,
            method: IndexMethod,
            prefix: Vec<u8>,
            pk: bool,
            unique: bool,
        }
        let mut cands = Vec::new();
        if !t.primary_key.is_empty() {
            cands.push(Cand {
                name: "PRIMARY KEY".into(),
                cols: t.pk_idx()?,
                method: IndexMethod::BTree,
                prefix: encoding::rows_prefix(t.id),
                pk: true,
                unique: true,
            });
        }
        for ix in &t.indexes {
            cands.push(Cand {
                name: ix.name.clone(),
                cols: t.cols_idx(&ix.columns)?,
                method: ix.method,
                prefix: encoding::index_prefix(t.id, ix.id),
                pk: false,
                unique: ix.unique,
            });
        }
        // (score, cand index, eq values, in-list, range)
        type Plan = (u32, usize, Vec<Value>, Option<Vec<Value>>, Option<(Option<(Value, bool)>, Option<(Value, bool)>)>);
        let mut best: Option<Plan> = None;
        for (ci, c) in cands.iter().enumerate() {
            let mut eqs = Vec::new();
            let mut inl = None;
            let mut range = None;
            for &col in &c.cols {
                let Some(cc) = cons.get(&col) else { break };
                if let Some(v) = &cc.eq {
                    eqs.push(v.clone());
                    continue;
                }
                if let Some(l) = &cc.inl {
                    inl = Some(l.clone());
                } else if c.method == IndexMethod::BTree && (cc.lo.is_some() || cc.hi.is_some()) {
                    range = Some((cc.lo.clone(), cc.hi.clone()));
                }
                break;
            }
            let covered = eqs.len() + inl.is_some() as usize;
            if c.method == IndexMethod::Hash && covered != c.cols.len() {
                continue;
            }
            let mut score = eqs.len() as u32 * 10 + if inl.is_some() { 8 } else { 0 } + if range.is_some() { 4 } else { 0 };
            if score == 0 {
                continue;
            }
            if c.unique && covered == c.cols.len() {
                score += 3;
            }
            if c.pk {
                score += 1;
            }
            if best.as_ref().is_none_or(|b| score > b.0) {
                best = Some((score, ci, eqs, inl, range));
            }
        }
        let Some((_, ci, eqs, inl, range)) = best else {
            self.note(format!("FULL SCAN {}", t.name));
            let mut out = Vec::new();
            let p = encoding::rows_prefix(t.id);
            self.kv.scan(&p, &prefix_end(&p), &mut |k, v| {
                self.scanned()?;
                self.decoding(v.len())?;
                out.push((k.to_vec(), decode_row(v)?));
                Ok(true)
            })?;
            return Ok(out);
        };
        let c = &cands[ci];
        let mut base = c.prefix.clone();
        for v in &eqs {
            encode_key(&mut base, v);
        }
        let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut desc = format!(
            "{} {} USING {} ({})",
            if c.pk { "PK LOOKUP" } else { "INDEX SCAN" },
            t.name,
            c.name,
            c.cols
                .iter()
                .take(eqs.len() + (inl.is_some() || range.is_some()) as usize)
                .map(|i| t.columns[*i].name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(list) = inl {
            desc.push_str(" IN-LIST");
            let mut keys = std::collections::BTreeSet::new();
            for v in &list {
                let mut k = base.clone();
                encode_key(&mut k, v);
                keys.insert(k);
            }
            for k in keys {
                let e = prefix_end(&k);
                ranges.push((k, e));
            }
        } else if let Some((lo, hi)) = range {
            desc.push_str(" RANGE");
            let start = match lo {
                Some((v, incl)) => {
                    let mut k = base.clone();
                    encode_key(&mut k, &v);
                    if incl { k } else { prefix_end(&k) }
                }
                None => {
                    let mut k = base.clone();
                    k.push(0x01); // skip NULLs
                    k
                }
            };
            let end = match hi {
                Some((v, incl)) => {
                    let mut k = base.clone();
                    encode_key(&mut k, &v);
                    if incl { prefix_end(&k) } else { k }
                }
                None => prefix_end(&base),
            };
            ranges.push((start, end));
        } else if c.pk && eqs.len() == c.cols.len() {
            // Every key column given: one row at most, under exactly this key
            // (key encodings are self-delimiting), read with a point get.
            self.note(desc);
            let mut out = Vec::new();
            if let Some(v) = self.kv.get(&base)? {
                self.scanned()?;
                self.decoding(v.len())?;
                out.push((base, decode_row(&v)?));
            }
            return Ok(out);
        } else {
            let e = prefix_end(&base);
            ranges.push((base, e));
        }
        self.note(desc);
        let mut out = Vec::new();
        if c.pk {
            for (s, e) in ranges {
                self.kv.scan(&s, &e, &mut |k, v| {
                    self.scanned()?;
                    self.decoding(v.len())?;
                    out.push((k.to_vec(), decode_row(v)?));
                    Ok(true)
                })?;
            }
        } else {
            let mut keys = Vec::new();
            for (s, e) in ranges {
                self.kv.scan(&s, &e, &mut |_, v| {
                    self.tick()?;
                    keys.push(v.to_vec());
                    Ok(true)
                })?;
            }
            keys.sort();
            keys.dedup();
            for k in keys {
                self.scanned()?;
                if let Some(v) = self.kv.get(&k)? {
                    self.decoding(v.len())?;
                    out.push((k, decode_row(&v)?));
                }
            }
        }
        Ok(out)
    }
}
