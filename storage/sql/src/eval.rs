//! Expression evaluation with three-valued logic.
use crate::error::{Result, SqlError, column_not_found, parse, type_mismatch, unsupported};
use crate::exec::{Env, Exec, ident};
use crate::functions;
use crate::value::{Value, cast, compare, number_literal};
use rust_decimal::Decimal;
use sqlparser::ast::{self, BinaryOperator as B, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, UnaryOperator};
use std::cmp::Ordering;

/// Names of aggregate functions.
pub fn is_aggregate_name(n: &str) -> bool {
    matches!(n, "count" | "sum" | "avg" | "min" | "max" | "string_agg" | "array_agg")
}

/// Lowercase function name.
pub fn func_name(f: &ast::Function) -> String {
    crate::exec::object_name(&f.name).to_lowercase()
}

/// Does `e` contain an aggregate call (not looking into subqueries)?
pub fn contains_aggregate(e: &Expr) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        if let Expr::Function(f) = x
            && is_aggregate_name(&func_name(f))
            && f.over.is_none()
        {
            found = true;
        }
    });
    found
}

/// Visits `e` and its sub-expressions (not subqueries).
pub fn walk<'e>(e: &'e Expr, f: &mut dyn FnMut(&'e Expr)) {
    walk_pruned(e, &mut |x| {
        f(x);
        true
    });
}

/// Visits `e` and its sub-expressions (not subqueries), descending below an
/// expression only when `f` returns true for it.
pub fn walk_pruned<'e>(e: &'e Expr, f: &mut dyn FnMut(&'e Expr) -> bool) {
    if !f(e) {
        return;
    }
    match e {
        Expr::BinaryOp { left, right, .. } | Expr::IsDistinctFrom(left, right) | Expr::IsNotDistinctFrom(left, right) => {
            walk_pruned(left, f);
            walk_pruned(right, f);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsNotFalse(expr)
        | Expr::Cast { expr, .. }
        | Expr::InSubquery { expr, .. } => walk_pruned(expr, f),
        Expr::InList { expr, list, .. } => {
            walk_pruned(expr, f);
            list.iter().for_each(|x| walk_pruned(x, f));
        }
        Expr::Between { expr, low, high, .. } => {
            walk_pruned(expr, f);
            walk_pruned(low, f);
            walk_pruned(high, f);
        }
        Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
            walk_pruned(expr, f);
            walk_pruned(pattern, f);
        }
        Expr::Case { operand, conditions, else_result, .. } => {
            if let Some(o) = operand {
                walk_pruned(o, f);
            }
            for c in conditions {
                walk_pruned(&c.condition, f);
                walk_pruned(&c.result, f);
            }
            if let Some(e) = else_result {
                walk_pruned(e, f);
            }
        }
        Expr::Function(func) => {
            if let FunctionArguments::List(l) = &func.args {
                for a in &l.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        walk_pruned(x, f);
                    }
                }
            }
        }
        Expr::Substring { expr, substring_from, substring_for, .. } => {
            walk_pruned(expr, f);
            if let Some(x) = substring_from {
                walk_pruned(x, f);
            }
            if let Some(x) = substring_for {
                walk_pruned(x, f);
            }
        }
        Expr::Trim { expr, .. } | Expr::Extract { expr, .. } => walk_pruned(expr, f),
        _ => {}
    }
}

/// Positional arguments of a function call.
pub fn func_args(f: &ast::Function) -> Result<(Vec<&FunctionArgExpr>, bool)> {
    match &f.args {
        FunctionArguments::None => Ok((vec![], false)),
        FunctionArguments::List(l) => {
            let distinct = matches!(l.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
            let mut out = Vec::new();
            for a in &l.args {
                match a {
                    FunctionArg::Unnamed(x) => out.push(x),
                    _ => return Err(unsupported("named function arguments are not supported")),
                }
            }
            Ok((out, distinct))
        }
        FunctionArguments::Subquery(_) => Err(unsupported("subquery function arguments are not supported")),
    }
}

pub fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

pub fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn b3(v: Option<bool>) -> Value {
    v.map(Value::Bool).unwrap_or(Value::Null)
}

/// SQL LIKE with `%` and `_`, `\` (or the given char) as escape.
pub fn like_match(s: &str, p: &str, esc: Option<char>, ci: bool) -> bool {
    let (s, p): (Vec<char>, Vec<char>) = if ci {
        (s.to_lowercase().chars().collect(), p.to_lowercase().chars().collect())
    } else {
        (s.chars().collect(), p.chars().collect())
    };
    // Tokenize pattern.
    enum T {
        Any,
        One,
        Lit(char),
    }
    let mut toks = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        if Some(c) == esc && i + 1 < p.len() {
            toks.push(T::Lit(p[i + 1]));
            i += 2;
            continue;
        }
        toks.push(match c {
            '%' => T::Any,
            '_' => T::One,
            c => T::Lit(c),
        });
        i += 1;
    }
    let (mut si, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if ti < toks.len() {
            match toks[ti] {
                T::Any => {
                    star = Some((ti, si));
                    ti += 1;
                    continue;
                }
                T::One => {
                    si += 1;
                    ti += 1;
                    continue;
                }
                T::Lit(c) if c == s[si] => {
                    si += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((st, ss)) => {
                ti = st + 1;
                si = ss + 1;
                star = Some((st, ss + 1));
            }
            None => return false,
        }
    }
    while ti < toks.len() && matches!(toks[ti], T::Any) {
        ti += 1;
    }
    ti == toks.len()
}

fn int_overflow() -> SqlError {
    type_mismatch("integer out of range")
}

fn to_dec(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal::from(*i)),
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

fn to_float(v: &Value) -> Option<f64> {
    use rust_decimal::prelude::ToPrimitive;
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Decimal(d) => d.to_f64(),
        _ => None,
    }
}

fn numeric_operand(v: Value) -> Result<Value> {
    match v {
        Value::Text(s) => number_literal(&s),
        other => Ok(other),
    }
}

/// Arithmetic on two values (NULL-propagating).
pub fn arith(op: &B, a: Value, b: Value) -> Result<Value> {
    use Value::*;
    if a.is_null() || b.is_null() {
        return Ok(Null);
    }
    // Date arithmetic.
    match (op, &a, &b) {
        (B::Plus, Date(d), Int(n)) | (B::Plus, Int(n), Date(d)) => {
            return i32::try_from(*n).ok().and_then(|n| d.checked_add(n)).map(Date).ok_or_else(|| type_mismatch("date out of range"));
        }
        (B::Minus, Date(d), Int(n)) => {
            return i32::try_from(*n).ok().and_then(|n| d.checked_sub(n)).map(Date).ok_or_else(|| type_mismatch("date out of range"));
        }
        (B::Minus, Date(x), Date(y)) => return Ok(Int(*x as i64 - *y as i64)),
        _ => {}
    }
    let a = numeric_operand(a)?;
    let b = numeric_operand(b)?;
    let div0 = || SqlError::new(crate::error::ErrorCode::DivisionByZero, "division by zero");
    match (&a, &b) {
        (Int(x), Int(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                B::Plus => x.checked_add(y),
                B::Minus => x.checked_sub(y),
                B::Multiply => x.checked_mul(y),
                B::Divide => {
                    if y == 0 {
                        return Err(div0());
                    }
                    x.checked_div(y)
                }
                B::Modulo => {
                    if y == 0 {
                        return Err(div0());
                    }
                    x.checked_rem(y)
                }
                _ => return Err(unsupported(format!("operator {op} is not supported"))),
            };
            r.map(Int).ok_or_else(int_overflow)
        }
        (Float(_), Int(_) | Float(_) | Decimal(_)) | (Int(_) | Decimal(_), Float(_)) => {
            let (x, y) = (to_float(&a).unwrap_or(f64::NAN), to_float(&b).unwrap_or(f64::NAN));
            Ok(Float(match op {
                B::Plus => x + y,
                B::Minus => x - y,
                B::Multiply => x * y,
                B::Divide => {
                    if y == 0.0 {
                        return Err(div0());
                    }
                    x / y
                }
                B::Modulo => {
                    if y == 0.0 {
                        return Err(div0());
                    }
                    x % y
                }
                _ => return Err(unsupported(format!("operator {op} is not supported"))),
            }))
        }
        (Int(_) | Decimal(_), Int(_) | Decimal(_)) => {
            let (x, y) = (to_dec(&a).unwrap_or_default(), to_dec(&b).unwrap_or_default());
            let r = match op {
                B::Plus => x.checked_add(y),
                B::Minus => x.checked_sub(y),
                B::Multiply => x.checked_mul(y),
                B::Divide => {
                    if y.is_zero() {
                        return Err(div0());
                    }
                    x.checked_div(y)
                }
                B::Modulo => {
                    if y.is_zero() {
                        return Err(div0());
                    }
                    x.checked_rem(y)
                }
                _ => return Err(unsupported(format!("operator {op} is not supported"))),
            };
            r.map(Decimal).ok_or_else(|| type_mismatch("numeric value out of range"))
        }
        _ => Err(type_mismatch(format!("operator {op} cannot be applied to {} and {}", a.type_name(), b.type_name()))),
    }
}

fn cmp_op(op: &B, a: &Value, b: &Value) -> Result<Value> {
    let o = match compare(a, b)? {
        None => return Ok(Value::Null),
        Some(o) => o,
    };
    Ok(Value::Bool(match op {
        B::Eq => o == Ordering::Equal,
        B::NotEq => o != Ordering::Equal,
        B::Lt => o == Ordering::Less,
        B::LtEq => o != Ordering::Greater,
        B::Gt => o == Ordering::Greater,
        B::GtEq => o != Ordering::Less,
        _ => return Err(unsupported(format!("operator {op} is not supported"))),
    }))
}

impl<'a> Exec<'a> {
    /// Looks a column up through the env chain (inner scope first).
    pub fn lookup(&self, qual: Option<&str>, name: &str, env: &Env) -> Result<Value> {
        let mut cur = Some(env);
        while let Some(e) = cur {
            if let Some(i) = e.scope.resolve(qual, name)? {
                return Ok(e.row.get(i).cloned().unwrap_or(Value::Null));
            }
            cur = e.outer;
        }
        Err(column_not_found(match qual {
            Some(q) => format!("column \"{q}.{name}\" does not exist"),
            None => format!("column \"{name}\" does not exist"),
        }))
    }

    /// Converts a literal.
    pub fn literal(&self, v: &ast::Value) -> Result<Value> {
        use ast::Value as V;
        Ok(match v {
            V::Number(s, _) => number_literal(s)?,
            V::SingleQuotedString(s)
            | V::EscapedStringLiteral(s)
            | V::NationalStringLiteral(s)
            | V::TripleSingleQuotedString(s)
            | V::UnicodeStringLiteral(s) => Value::Text(s.clone()),
            V::DollarQuotedString(d) => Value::Text(d.value.clone()),
            V::Boolean(b) => Value::Bool(*b),
            V::Null => Value::Null,
            V::HexStringLiteral(h) => cast(Value::Text(format!("\\x{h}")), &crate::types::SqlType::Blob, true)?,
            V::Placeholder(p) => {
                let n: usize = p
                    .trim_start_matches(['$', '?', ':'])
                    .parse()
                    .map_err(|_| parse(format!("unsupported placeholder {p}; use $1, $2, ...")))?;
                match n.checked_sub(1).and_then(|i| self.params.get(i)) {
                    Some(v) => v.clone(),
                    None => return Err(parse(format!("no value bound for placeholder {p} ({} params given)", self.params.len()))),
                }
            }
            other => return Err(unsupported(format!("unsupported literal {other}"))),
        })
    }

    /// Evaluates a predicate to Some(bool)/None.
    pub fn eval_bool(&self, e: &Expr, env: &Env) -> Result<Option<bool>> {
        self.eval(e, env)?.as_bool()
    }

    /// Evaluates an expression.
    pub fn eval(&self, e: &Expr, env: &Env) -> Result<Value> {
        match e {
            Expr::Identifier(i) => self.lookup(None, &ident(i), env),
            Expr::CompoundIdentifier(parts) => {
                let n = parts.len();
                if n < 2 {
                    return Err(parse("invalid identifier"));
                }
                self.lookup(Some(&ident(&parts[n - 2])), &ident(&parts[n - 1]), env)
            }
            Expr::Value(v) => self.literal(&v.value),
            Expr::Nested(x) => self.eval(x, env),
            Expr::BinaryOp { left, op, right } => match op {
                B::And => {
                    let l = self.eval_bool(left, env)?;
                    if l == Some(false) {
                        return Ok(Value::Bool(false));
                    }
                    Ok(b3(and3(l, self.eval_bool(right, env)?)))
                }
                B::Or => {
                    let l = self.eval_bool(left, env)?;
                    if l == Some(true) {
                        return Ok(Value::Bool(true));
                    }
                    Ok(b3(or3(l, self.eval_bool(right, env)?)))
                }
                B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq => {
                    let (l, r) = (self.eval(left, env)?, self.eval(right, env)?);
                    cmp_op(op, &l, &r)
                }
                B::StringConcat => {
                    let (l, r) = (self.eval(left, env)?, self.eval(right, env)?);
                    if l.is_null() || r.is_null() {
                        return Ok(Value::Null);
                    }
                    Ok(Value::Text(l.to_text() + &r.to_text()))
                }
                B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                    let (l, r) = (self.eval(left, env)?, self.eval(right, env)?);
                    arith(op, l, r)
                }
                B::PGRegexMatch | B::PGRegexIMatch | B::PGRegexNotMatch | B::PGRegexNotIMatch => {
                    let (l, r) = (self.eval(left, env)?, self.eval(right, env)?);
                    regex_op(op, &l, &r)
                }
                // `OPERATOR(pg_catalog.~)` and its kin, as psql writes them.
                B::PGCustomBinaryOperator(path) => {
                    let op = match path.last().map(String::as_str) {
                        Some("~") => B::PGRegexMatch,
                        Some("~*") => B::PGRegexIMatch,
                        Some("!~") => B::PGRegexNotMatch,
                        Some("!~*") => B::PGRegexNotIMatch,
                        Some("=") => B::Eq,
                        Some("<>") => B::NotEq,
                        _ => return Err(unsupported(format!("operator {op} is not supported"))),
                    };
                    self.eval(&Expr::BinaryOp { left: left.clone(), op, right: right.clone() }, env)
                }
                other => Err(unsupported(format!("operator {other} is not supported"))),
            },
            // `x = ANY(array)`, `x <> ALL(array)` over an array value (catalog
            // arrays such as `pg_index.indkey`, JSON arrays, `'{1,2}'`).
            Expr::AnyOp { left, compare_op, right, .. } | Expr::AllOp { left, compare_op, right } => {
                let all = matches!(e, Expr::AllOp { .. });
                let l = self.eval(left, env)?;
                let mut verdict = Some(all);
                // `x = ANY (SELECT …)`: the subquery's rows, as `IN` reads them.
                let elements = match right.as_ref() {
                    Expr::Subquery(q) => {
                        let rs = self.run_subquery(q, env)?;
                        if rs.cols.len() != 1 {
                            return Err(type_mismatch("subquery has too many columns"));
                        }
                        rs.rows.iter().filter_map(|r| r.last().cloned()).collect()
                    }
                    other => crate::system::array_elements(&self.eval(other, env)?),
                };
                for element in elements {
                    match cmp_op(compare_op, &l, &element)?.as_bool()? {
                        Some(b) if b != all => return Ok(Value::Bool(b)),
                        Some(_) => {}
                        None => verdict = None,
                    }
                }
                Ok(b3(verdict))
            }
            // Tessera compares text by code point (PostgreSQL's "C" collation).
            Expr::Collate { expr, .. } => self.eval(expr, env),
            Expr::UnaryOp { op, expr } => {
                let v = self.eval(expr, env)?;
                match op {
                    UnaryOperator::Not => Ok(b3(v.as_bool()?.map(|b| !b))),
                    UnaryOperator::Minus => match numeric_operand(v)? {
                        Value::Null => Ok(Value::Null),
                        Value::Int(i) => i.checked_neg().map(Value::Int).ok_or_else(int_overflow),
                        Value::Float(f) => Ok(Value::Float(-f)),
                        Value::Decimal(d) => Ok(Value::Decimal(-d)),
                        other => Err(type_mismatch(format!("cannot negate {}", other.type_name()))),
                    },
                    UnaryOperator::Plus => numeric_operand(v),
                    other => Err(unsupported(format!("operator {other} is not supported"))),
                }
            }
            Expr::IsNull(x) => Ok(Value::Bool(self.eval(x, env)?.is_null())),
            Expr::IsNotNull(x) => Ok(Value::Bool(!self.eval(x, env)?.is_null())),
            Expr::IsTrue(x) => Ok(Value::Bool(self.eval_bool(x, env)? == Some(true))),
            Expr::IsNotTrue(x) => Ok(Value::Bool(self.eval_bool(x, env)? != Some(true))),
            Expr::IsFalse(x) => Ok(Value::Bool(self.eval_bool(x, env)? == Some(false))),
            Expr::IsNotFalse(x) => Ok(Value::Bool(self.eval_bool(x, env)? != Some(false))),
            Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
                let (x, y) = (self.eval(a, env)?, self.eval(b, env)?);
                let same = match (x.is_null(), y.is_null()) {
                    (true, true) => true,
                    (false, false) => compare(&x, &y)? == Some(Ordering::Equal),
                    _ => false,
                };
                Ok(Value::Bool(if matches!(e, Expr::IsDistinctFrom(..)) { !same } else { same }))
            }
            Expr::Between { expr, negated, low, high } => {
                let v = self.eval(expr, env)?;
                let lo = cmp_op(&B::GtEq, &v, &self.eval(low, env)?)?.as_bool()?;
                let hi = cmp_op(&B::LtEq, &v, &self.eval(high, env)?)?.as_bool()?;
                let r = and3(lo, hi);
                Ok(b3(if *negated { r.map(|b| !b) } else { r }))
            }
            Expr::InList { expr, list, negated } => {
                let v = self.eval(expr, env)?;
                let mut vals = Vec::with_capacity(list.len());
                for x in list {
                    vals.push(self.eval(x, env)?);
                }
                let r = in_values(&v, &vals)?;
                Ok(b3(if *negated { r.map(|b| !b) } else { r }))
            }
            Expr::InSubquery { expr, subquery, negated } => {
                let v = self.eval(expr, env)?;
                let rs = self.run_subquery(subquery, env)?;
                if rs.cols.len() != 1 {
                    return Err(type_mismatch("subquery has too many columns"));
                }
                let vals: Vec<Value> = rs.rows.iter().filter_map(|r| r.last().cloned()).collect();
                let r = in_values(&v, &vals)?;
                Ok(b3(if *negated { r.map(|b| !b) } else { r }))
            }
            Expr::Exists { subquery, negated } => {
                let rs = self.run_subquery(subquery, env)?;
                Ok(Value::Bool(rs.rows.is_empty() == *negated))
            }
            Expr::Subquery(q) => {
                let rs = self.run_subquery(q, env)?;
                if rs.cols.len() != 1 {
                    return Err(type_mismatch("subquery must return only one column"));
                }
                match rs.rows.len() {
                    0 => Ok(Value::Null),
                    1 => Ok(rs.rows[0].last().cloned().unwrap_or(Value::Null)),
                    _ => Err(type_mismatch("more than one row returned by a subquery used as an expression")),
                }
            }
            Expr::Like { negated, expr, pattern, escape_char, any: _ } | Expr::ILike { negated, expr, pattern, escape_char, any: _ } => {
                let v = self.eval(expr, env)?;
                let p = self.eval(pattern, env)?;
                if v.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                let esc = match escape_char {
                    Some(ast::Value::SingleQuotedString(s)) => s.chars().next(),
                    _ => Some('\\'),
                };
                let m = like_match(&v.to_text(), &p.to_text(), esc, matches!(e, Expr::ILike { .. }));
                Ok(Value::Bool(m != *negated))
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                let op = match operand {
                    Some(o) => Some(self.eval(o, env)?),
                    None => None,
                };
                for c in conditions {
                    let hit = match &op {
                        Some(v) => {
                            let w = self.eval(&c.condition, env)?;
                            compare(v, &w)? == Some(Ordering::Equal)
                        }
                        None => self.eval_bool(&c.condition, env)? == Some(true),
                    };
                    if hit {
                        return self.eval(&c.result, env);
                    }
                }
                match else_result {
                    Some(x) => self.eval(x, env),
                    None => Ok(Value::Null),
                }
            }
            Expr::Cast { expr, data_type, .. } => {
                let v = self.eval(expr, env)?;
                let system_type = match data_type {
                    ast::DataType::Regclass => Some("regclass".to_string()),
                    ast::DataType::Custom(name, args) if args.is_empty() => Some(name.to_string()),
                    _ => None,
                };
                if let Some(type_name) = system_type
                    && let Some(v) = self.system_cast(&v, &type_name)?
                {
                    return Ok(v);
                }
                let (ty, _) = crate::types::from_ast(data_type)?;
                cast(v, &ty, true)
            }
            Expr::TypedString(ts) => {
                let (ty, _) = crate::types::from_ast(&ts.data_type)?;
                cast(self.literal(&ts.value.value)?, &ty, true)
            }
            Expr::Function(f) => self.eval_function(f, env),
            Expr::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![self.eval(expr, env)?];
                args.push(match substring_from {
                    Some(x) => self.eval(x, env)?,
                    None => Value::Int(1),
                });
                if let Some(x) = substring_for {
                    args.push(self.eval(x, env)?);
                }
                functions::scalar("substring", args, self.ctx)
            }
            Expr::Trim { expr, trim_where, trim_what, .. } => {
                let v = self.eval(expr, env)?;
                let what = match trim_what {
                    Some(x) => self.eval(x, env)?,
                    None => Value::Text(" ".into()),
                };
                let name = match trim_where {
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                    _ => "trim",
                };
                functions::scalar(name, vec![v, what], self.ctx)
            }
            Expr::Extract { field, expr, .. } => {
                let v = self.eval(expr, env)?;
                functions::extract(&field.to_string(), v)
            }
            other => Err(unsupported(format!("unsupported expression: {other}"))),
        }
    }

    /// Runs a subquery for the row of `env`. One that does not depend on the
    /// outer row (it runs without the outer scope) is run once per statement
    /// and its rows reused, as PostgreSQL does for uncorrelated subqueries;
    /// a correlated one runs per row.
    fn run_subquery(&self, q: &ast::Query, env: &Env) -> Result<std::rc::Rc<crate::exec::RowSet>> {
        use std::rc::Rc;
        let key = q as *const ast::Query as usize;
        // View queries are parsed anew at each use, so addresses repeat there:
        // the stored copy of the query confirms a hit.
        let cached = self.subqueries.borrow().get(&key).filter(|(same, _)| same.as_ref() == q).map(|(_, rows)| rows.clone());
        match cached {
            Some(Some(rows)) => return Ok(rows),
            Some(None) => return Ok(Rc::new(self.run_query(q, Some(env))?)),
            None => {}
        }
        let outcome = match self.run_query(q, None) {
            Ok(rows) => Some(Rc::new(rows)),
            // It needs the outer row (or fails on its own: running it per row says so).
            Err(_) => None,
        };
        self.subqueries.borrow_mut().insert(key, (Box::new(q.clone()), outcome.clone()));
        match outcome {
            Some(rows) => Ok(rows),
            None => Ok(Rc::new(self.run_query(q, Some(env))?)),
        }
    }

    fn eval_function(&self, f: &ast::Function, env: &Env) -> Result<Value> {
        let name = func_name(f);
        if matches!(name.as_str(), "unnest" | "generate_subscripts") && f.over.is_none() {
            return self.set_returning_value(f, &name);
        }
        // `ARRAY(SELECT …)`: the subquery's one column as an array.
        if let FunctionArguments::Subquery(q) = &f.args {
            if name != "array" {
                return Err(unsupported(format!("{name}(SELECT …) is not supported")));
            }
            let rs = self.run_subquery(q, env)?;
            if rs.cols.len() != 1 {
                return Err(type_mismatch("subquery must return only one column"));
            }
            let items: Vec<serde_json::Value> = rs.rows.iter().map(|r| r.last().map_or(serde_json::Value::Null, Value::to_json)).collect();
            return Ok(Value::Json(serde_json::Value::Array(items).to_string()));
        }
        if f.over.is_some() {
            return self.window_value(f, env);
        }
        let (args, distinct) = func_args(f)?;
        if is_aggregate_name(&name) {
            if matches!(name.as_str(), "string_agg" | "array_agg") {
                return self.eval_list_aggregate(&name, f, &args, distinct, env);
            }
            return self.eval_aggregate(&name, &args, distinct, env);
        }
        let mut vals = Vec::with_capacity(args.len());
        if name == "coalesce" {
            for a in &args {
                if let FunctionArgExpr::Expr(x) = a {
                    let v = self.eval(x, env)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
            }
            return Ok(Value::Null);
        }
        for a in args {
            match a {
                FunctionArgExpr::Expr(x) => vals.push(self.eval(x, env)?),
                _ => return Err(parse(format!("{name}(*) is not valid"))),
            }
        }
        if let Some(v) = self.system_function(&name, &vals)? {
            return Ok(v);
        }
        functions::scalar(&name, vals, self.ctx)
    }

    /// `STRING_AGG(x, separator [ORDER BY …])` (NULLs skipped; NULL when none is
    /// left) and `ARRAY_AGG(x [ORDER BY …])` (NULLs kept; a JSON array, since
    /// results travel as JSON; NULL over no rows), as in PostgreSQL.
    fn eval_list_aggregate(&self, name: &str, f: &ast::Function, args: &[&FunctionArgExpr], distinct: bool, env: &Env) -> Result<Value> {
        let group = env.group.ok_or_else(|| parse(format!("aggregate function {name}() is not allowed here")))?;
        let (x, sep) = match (name, args) {
            ("string_agg", [FunctionArgExpr::Expr(x), FunctionArgExpr::Expr(sep)]) => (x, Some(sep)),
            ("array_agg", [FunctionArgExpr::Expr(x)]) => (x, None),
            _ => return Err(parse(format!("{name}() takes {} argument(s)", if name == "string_agg" { 2 } else { 1 }))),
        };
        if contains_aggregate(x) {
            return Err(parse("aggregate function calls cannot be nested"));
        }
        let order: &[ast::OrderByExpr] = match &f.args {
            FunctionArguments::List(l) => l
                .clauses
                .iter()
                .find_map(|c| match c {
                    ast::FunctionArgumentClause::OrderBy(o) => Some(o.as_slice()),
                    _ => None,
                })
                .unwrap_or(&[]),
            _ => &[],
        };
        let mut items: Vec<(Vec<Value>, Value)> = Vec::with_capacity(group.len());
        for r in group {
            let e = Env { scope: env.scope, row: r, group: None, outer: env.outer };
            let v = self.eval(x, &e)?;
            let keys = order.iter().map(|o| self.eval(&o.expr, &e)).collect::<Result<Vec<_>>>()?;
            items.push((keys, v));
        }
        if !order.is_empty() {
            let mut err = None;
            items.sort_by(|(a, _), (b, _)| {
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
                        (false, false) => {
                            let o = compare(&a[i], &b[i]).unwrap_or_else(|e| {
                                err.get_or_insert(e);
                                None
                            });
                            let o = o.unwrap_or(Ordering::Equal);
                            if asc { o } else { o.reverse() }
                        }
                    };
                    if ord != Ordering::Equal {
                        return ord;
                    }
                }
                Ordering::Equal
            });
            if let Some(e) = err {
                return Err(e);
            }
        }
        let mut vals: Vec<Value> = items.into_iter().map(|(_, v)| v).collect();
        if distinct {
            let mut seen = std::collections::BTreeSet::new();
            vals.retain(|v| seen.insert(crate::encoding::key_of(std::slice::from_ref(v))));
        }
        match sep {
            Some(sep) => {
                let sep = self.eval(sep, env)?;
                if sep.is_null() {
                    return Ok(Value::Null);
                }
                let parts: Vec<String> = vals.iter().filter(|v| !v.is_null()).map(|v| v.to_text()).collect();
                Ok(if parts.is_empty() { Value::Null } else { Value::Text(parts.join(&sep.to_text())) })
            }
            None if vals.is_empty() => Ok(Value::Null),
            None => Ok(Value::Json(serde_json::Value::Array(vals.iter().map(|v| v.to_json()).collect()).to_string())),
        }
    }

    fn eval_aggregate(&self, name: &str, args: &[&FunctionArgExpr], distinct: bool, env: &Env) -> Result<Value> {
        let group = match env.group {
            Some(g) => g,
            None => return Err(parse(format!("aggregate function {name}() is not allowed here"))),
        };
        let arg = match args {
            [FunctionArgExpr::Wildcard] if name == "count" => None,
            [FunctionArgExpr::Expr(x)] => Some(x),
            _ => return Err(parse(format!("{name}() takes exactly one argument"))),
        };
        let mut vals = Vec::with_capacity(group.len());
        match arg {
            None => return Ok(Value::Int(group.len() as i64)),
            Some(x) => {
                if contains_aggregate(x) {
                    return Err(parse("aggregate function calls cannot be nested"));
                }
                for r in group {
                    let e = Env { scope: env.scope, row: r, group: None, outer: env.outer };
                    let v = self.eval(x, &e)?;
                    if !v.is_null() {
                        vals.push(v);
                    }
                }
            }
        }
        if distinct {
            let mut seen = std::collections::BTreeSet::new();
            vals.retain(|v| seen.insert(crate::encoding::key_of(std::slice::from_ref(v))));
        }
        functions::aggregate(name, vals)
    }
}

/// `v IN (vals)` with SQL NULL semantics.
pub fn in_values(v: &Value, vals: &[Value]) -> Result<Option<bool>> {
    if v.is_null() {
        return Ok(if vals.is_empty() { Some(false) } else { None });
    }
    let mut saw_null = false;
    for x in vals {
        match compare(v, x)? {
            Some(Ordering::Equal) => return Ok(Some(true)),
            None => saw_null = true,
            _ => {}
        }
    }
    Ok(if saw_null { None } else { Some(false) })
}

/// `~`, `~*`, `!~`, `!~*`: a POSIX-style regular expression match (the
/// `regex` crate's syntax, which covers what PostgreSQL's common patterns use).
fn regex_op(op: &B, text: &Value, pattern: &Value) -> Result<Value> {
    if text.is_null() || pattern.is_null() {
        return Ok(Value::Null);
    }
    let insensitive = matches!(op, B::PGRegexIMatch | B::PGRegexNotIMatch);
    let re = regex::RegexBuilder::new(&pattern.to_text())
        .case_insensitive(insensitive)
        .dot_matches_new_line(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| crate::error::SqlError::new(crate::error::ErrorCode::Invalid, format!("invalid regular expression: {e}")))?;
    let found = re.is_match(&text.to_text());
    Ok(Value::Bool(found != matches!(op, B::PGRegexNotMatch | B::PGRegexNotIMatch)))
}
