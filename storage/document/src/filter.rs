//! MongoDB-style filters.
//!
//! A filter is a JSON object. Each key is either a dotted field path or a
//! top-level logical operator; all keys are ANDed.
//!
//! | form | meaning |
//! |---|---|
//! | `{"f": v}` | implicit equality (`$eq`) |
//! | `{"f": {"$op": v, ...}}` | operators on one field, ANDed |
//! | `$eq` `$ne` | equality / its negation |
//! | `$gt` `$gte` `$lt` `$lte` | range comparison |
//! | `$in` `$nin` | equal to one of / none of an array of values |
//! | `$exists` | `true`: field present (even if `null`); `false`: absent |
//! | `$contains` | array field has an element equal to the value; string field contains the string |
//! | `$regex` (+ `$options`) | string matches; options `i` (case-insensitive), `m`, `s`, `x` |
//! | `$size` | array field has exactly this many elements |
//! | `$not` (field level) | `{"f": {"$not": {"$gt": 5}}}` negates an operator object (a plain value negates equality) |
//! | `$and` `$or` `$nor` (top level) | array of filters |
//! | `$not` (top level) | `{"$not": {filter}}` |
//!
//! Semantics follow MongoDB:
//! * **Equality** uses [`values_equal`] (`1` equals `1.0`, key order irrelevant).
//!   A field that is an array also matches when one of its elements is equal
//!   (`{"tags": "x"}` matches `{"tags": ["x", "y"]}`).
//! * **Null and missing**: `{"f": null}` matches documents where `f` is `null` or
//!   absent; `$ne: null` therefore requires a present non-null value. `$gte`/`$lte`
//!   with `null` match `null` and absent; `$gt`/`$lt` with `null` match nothing.
//! * **Range operators use type bracketing**: `$gt`/`$gte`/`$lt`/`$lte` only match
//!   values of the same JSON type as the operand (numbers with numbers, whatever
//!   int/float form, strings with strings, booleans with booleans ...), ordered
//!   by [`compare_values`]. So `{"age": {"$gt": 5}}`
//!   never matches `"age": "old"`. Sorting, in contrast, uses the full total order.
//! * **Arrays**: operators apply to the field value and, if it is an array, to
//!   each element ("any element matches"). Different operators on the same field
//!   may be satisfied by different elements, as in MongoDB.
//! * **Paths**: `"a.b.c"`; numeric segments index arrays (`"items.0.name"`); a
//!   non-numeric segment on an array of objects reaches every element (`"items.name"`).
//! * `$ne` and `$nin` are exact negations of `$eq` / `$in`; they match absent fields.

use crate::MAX_DEPTH;
use crate::error::FilterError;
use crate::order::{compare_values, type_rank, values_equal};
use crate::path::{Segment, parse_path_filter, resolve};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// Parse `filter` and test it against `doc` in one go. Prefer [`Filter::parse`]
/// once and [`Filter::matches`] per document when scanning a collection.
pub fn matches(filter: &Value, doc: &Value) -> Result<bool, FilterError> {
    Ok(Filter::parse(filter)?.matches(doc))
}

/// A compiled filter: parse once, evaluate cheaply per document.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
}

#[derive(Debug, Clone)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Not(Box<Node>),
    Field { path: String, segs: Vec<Segment>, pred: Pred },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

impl CmpOp {
    fn accepts(self, o: Ordering) -> bool {
        match self {
            CmpOp::Gt => o == Ordering::Greater,
            CmpOp::Gte => o != Ordering::Less,
            CmpOp::Lt => o == Ordering::Less,
            CmpOp::Lte => o != Ordering::Greater,
        }
    }
}

#[derive(Debug, Clone)]
enum Pred {
    Eq(Value),
    Ne(Value),
    Cmp(CmpOp, Value),
    In(Vec<Value>),
    Nin(Vec<Value>),
    Exists(bool),
    Contains(Value),
    Regex(Regex),
    Size(usize),
    Not(Box<Pred>),
    All(Vec<Pred>),
}

/// Constraint on one path, usable to pick and scan a secondary index.
/// See [`Filter::index_hint`].
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// The path holds a value equal to this (or an array with such an element).
    Eq(Value),
    /// The path holds a value equal to one of these (or an array with such an element).
    In(Vec<Value>),
    /// The path holds a value (or an array with an element) of the bounds' JSON
    /// type within the bounds. Each side is `(value, inclusive)`. When both
    /// sides are present they have the same JSON type.
    Range { lower: Option<(Value, bool)>, upper: Option<(Value, bool)> },
}

impl Bound {
    /// Whether a single (index key) value satisfies this bound.
    pub fn contains(&self, v: &Value) -> bool {
        match self {
            Bound::Eq(x) => values_equal(v, x),
            Bound::In(xs) => xs.iter().any(|x| values_equal(v, x)),
            Bound::Range { lower, upper } => {
                let lo_ok = lower.as_ref().is_none_or(|(x, incl)| {
                    type_rank(v) == type_rank(x) && {
                        let o = compare_values(v, x);
                        o == Ordering::Greater || (*incl && o == Ordering::Equal)
                    }
                });
                let hi_ok = upper.as_ref().is_none_or(|(x, incl)| {
                    type_rank(v) == type_rank(x) && {
                        let o = compare_values(v, x);
                        o == Ordering::Less || (*incl && o == Ordering::Equal)
                    }
                });
                lo_ok && hi_ok
            }
        }
    }
}

impl Filter {
    /// Compile a filter document. Errors on non-object filters, unknown
    /// operators, wrong operand types, invalid regexes and empty path segments.
    pub fn parse(filter: &Value) -> Result<Filter, FilterError> {
        Ok(Filter { root: parse_node(filter, 0)? })
    }

    /// A filter that matches every document (same as parsing `{}`).
    pub fn match_all() -> Filter {
        Filter { root: Node::And(Vec::new()) }
    }

    /// Whether the document satisfies the filter.
    pub fn matches(&self, doc: &Value) -> bool {
        eval_node(&self.root, doc)
    }

    /// Constraints on paths that every matching document must satisfy, taken
    /// from the top-level AND (implicit, or nested `$and`) only; `$or`, `$nor`,
    /// `$not`, `$ne`, `$nin`, `$regex`, ... contribute nothing.
    ///
    /// One entry per path, in order of first appearance. For a path:
    /// * any equality wins (`Bound::Eq`), then `$in` (`Bound::In`), otherwise
    ///   the range operators merged into one `Bound::Range` (the tighter bound of
    ///   each side; a side whose operand has a different JSON type than the
    ///   first range operand is dropped).
    /// * Constraints that a document with the field *absent* could satisfy
    ///   (equality with `null`, `$in` containing `null`, `$gte`/`$lte` `null`) are
    ///   omitted, so an index that does not store absent fields stays correct.
    ///
    /// The hint is a necessary condition only: candidates found through an index
    /// must still be checked with [`Filter::matches`]. For array-valued (multikey)
    /// fields, lower and upper bounds may be satisfied by different elements;
    /// scan such an index with one side of a range only.
    pub fn index_hint(&self) -> Vec<(String, Bound)> {
        let mut out: Vec<(String, Bound)> = Vec::new();
        collect_hints(&self.root, &mut out);
        out
    }
}

// ---------------------------------------------------------------- parsing

fn invalid(msg: impl Into<String>) -> FilterError {
    FilterError::Invalid(msg.into())
}

fn parse_node(v: &Value, depth: usize) -> Result<Node, FilterError> {
    if depth > MAX_DEPTH {
        return Err(invalid("filter is nested too deeply"));
    }
    let obj = v.as_object().ok_or_else(|| invalid(format!("a filter must be a JSON object, got {}", type_name(v))))?;
    let mut nodes = Vec::with_capacity(obj.len());
    for (k, val) in obj {
        if k.starts_with('$') {
            nodes.push(match k.as_str() {
                "$and" => Node::And(parse_list(k, val, depth)?),
                "$or" => Node::Or(parse_list(k, val, depth)?),
                "$nor" => Node::Nor(parse_list(k, val, depth)?),
                "$not" => Node::Not(Box::new(parse_node(val, depth + 1)?)),
                "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$in" | "$nin" | "$exists" | "$contains" | "$regex" | "$options"
                | "$size" => {
                    return Err(invalid(format!("operator '{k}' must be applied to a field, e.g. {{\"field\": {{\"{k}\": ...}}}}")));
                }
                _ => return Err(FilterError::UnknownOperator(k.clone())),
            });
        } else {
            let segs = parse_path_filter(k)?;
            let pred = if is_operator_object(val) {
                parse_ops(k, val.as_object().unwrap_or(&Map::new()), depth + 1)?
            } else {
                Pred::Eq(val.clone())
            };
            nodes.push(Node::Field { path: k.clone(), segs, pred });
        }
    }
    Ok(if nodes.len() == 1 { nodes.pop().unwrap_or(Node::And(Vec::new())) } else { Node::And(nodes) })
}

fn parse_list(op: &str, v: &Value, depth: usize) -> Result<Vec<Node>, FilterError> {
    let arr = v.as_array().ok_or_else(|| invalid(format!("'{op}' expects an array of filters")))?;
    if arr.is_empty() {
        return Err(invalid(format!("'{op}' expects a non-empty array")));
    }
    arr.iter().map(|f| parse_node(f, depth + 1)).collect()
}

/// `{"$gt": 1}` is an operator object; `{}` and `{"a": 1}` are literal values.
fn is_operator_object(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.keys().any(|k| k.starts_with('$')))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn parse_ops(field: &str, obj: &Map<String, Value>, depth: usize) -> Result<Pred, FilterError> {
    if depth > MAX_DEPTH {
        return Err(invalid("filter is nested too deeply"));
    }
    let mut preds = Vec::with_capacity(obj.len());
    let mut regex: Option<&str> = None;
    let mut options: Option<&str> = None;
    for (op, v) in obj {
        let p = match op.as_str() {
            "$eq" => Pred::Eq(v.clone()),
            "$ne" => Pred::Ne(v.clone()),
            "$gt" => Pred::Cmp(CmpOp::Gt, v.clone()),
            "$gte" => Pred::Cmp(CmpOp::Gte, v.clone()),
            "$lt" => Pred::Cmp(CmpOp::Lt, v.clone()),
            "$lte" => Pred::Cmp(CmpOp::Lte, v.clone()),
            "$in" | "$nin" => {
                let arr = v.as_array().ok_or_else(|| invalid(format!("'{op}' on '{field}' expects an array, got {}", type_name(v))))?;
                if op == "$in" { Pred::In(arr.clone()) } else { Pred::Nin(arr.clone()) }
            }
            "$exists" => Pred::Exists(match v {
                Value::Bool(b) => *b,
                Value::Number(n) if n.as_f64().is_some() => n.as_f64() != Some(0.0),
                _ => {
                    return Err(invalid(format!("'$exists' on '{field}' expects a boolean, got {}", type_name(v))));
                }
            }),
            "$contains" => Pred::Contains(v.clone()),
            "$size" => {
                let n = v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| invalid(format!("'$size' on '{field}' expects a non-negative integer")))?;
                Pred::Size(n)
            }
            "$regex" => {
                regex = Some(v.as_str().ok_or_else(|| invalid(format!("'$regex' on '{field}' expects a string, got {}", type_name(v))))?);
                continue;
            }
            "$options" => {
                options =
                    Some(v.as_str().ok_or_else(|| invalid(format!("'$options' on '{field}' expects a string, got {}", type_name(v))))?);
                continue;
            }
            "$not" => {
                let inner = match v {
                    Value::Object(m) if is_operator_object(v) => parse_ops(field, m, depth + 1)?,
                    other => Pred::Eq(other.clone()),
                };
                Pred::Not(Box::new(inner))
            }
            o if o.starts_with('$') => return Err(FilterError::UnknownOperator(o.to_string())),
            o => {
                return Err(invalid(format!("cannot mix operators and plain field '{o}' in the condition on '{field}'")));
            }
        };
        preds.push(p);
    }
    match (regex, options) {
        (Some(pat), opts) => preds.push(Pred::Regex(compile_regex(pat, opts.unwrap_or(""))?)),
        (None, Some(_)) => {
            return Err(invalid(format!("'$options' on '{field}' requires '$regex'")));
        }
        (None, None) => {}
    }
    Ok(if preds.len() == 1 { preds.pop().unwrap_or(Pred::All(Vec::new())) } else { Pred::All(preds) })
}

fn compile_regex(pattern: &str, options: &str) -> Result<Regex, FilterError> {
    let mut b = RegexBuilder::new(pattern);
    b.size_limit(1 << 20).dfa_size_limit(1 << 20).nest_limit(64);
    for c in options.chars() {
        match c {
            'i' => b.case_insensitive(true),
            'm' => b.multi_line(true),
            's' => b.dot_matches_new_line(true),
            'x' => b.ignore_whitespace(true),
            other => {
                return Err(FilterError::Regex {
                    pattern: pattern.to_string(),
                    reason: format!("unsupported option '{other}' (supported: i, m, s, x)"),
                });
            }
        };
    }
    b.build().map_err(|e| FilterError::Regex { pattern: pattern.to_string(), reason: e.to_string() })
}

// ---------------------------------------------------------------- evaluation

fn eval_node(n: &Node, doc: &Value) -> bool {
    match n {
        Node::And(ns) => ns.iter().all(|c| eval_node(c, doc)),
        Node::Or(ns) => ns.iter().any(|c| eval_node(c, doc)),
        Node::Nor(ns) => !ns.iter().any(|c| eval_node(c, doc)),
        Node::Not(c) => !eval_node(c, doc),
        Node::Field { segs, pred, .. } => {
            let mut cands = Vec::new();
            resolve(doc, segs, &mut cands);
            eval_pred(pred, &cands)
        }
    }
}

/// True when `f` holds for the value or, if it is an array, for any element.
fn any_or_element(c: &Value, f: &impl Fn(&Value) -> bool) -> bool {
    f(c) || matches!(c, Value::Array(a) if a.iter().any(f))
}

fn eq_match(x: &Value, cands: &[&Value]) -> bool {
    if cands.is_empty() {
        return x.is_null();
    }
    cands.iter().any(|c| any_or_element(c, &|v| values_equal(v, x)))
}

fn eval_pred(p: &Pred, cands: &[&Value]) -> bool {
    match p {
        Pred::Eq(x) => eq_match(x, cands),
        Pred::Ne(x) => !eq_match(x, cands),
        Pred::In(xs) => xs.iter().any(|x| eq_match(x, cands)),
        Pred::Nin(xs) => !xs.iter().any(|x| eq_match(x, cands)),
        Pred::Cmp(op, x) => {
            if cands.is_empty() {
                return x.is_null() && matches!(op, CmpOp::Gte | CmpOp::Lte);
            }
            let rank = type_rank(x);
            let f = |v: &Value| type_rank(v) == rank && op.accepts(compare_values(v, x));
            cands.iter().any(|c| any_or_element(c, &f))
        }
        Pred::Exists(b) => cands.is_empty() != *b,
        Pred::Contains(x) => cands.iter().any(|c| match (c, x) {
            (Value::Array(a), _) => a.iter().any(|e| values_equal(e, x)),
            (Value::String(s), Value::String(sub)) => s.contains(sub.as_str()),
            _ => false,
        }),
        Pred::Regex(re) => cands.iter().any(|c| any_or_element(c, &|v: &Value| v.as_str().is_some_and(|s| re.is_match(s)))),
        Pred::Size(n) => cands.iter().any(|c| c.as_array().is_some_and(|a| a.len() == *n)),
        Pred::Not(inner) => !eval_pred(inner, cands),
        Pred::All(ps) => ps.iter().all(|q| eval_pred(q, cands)),
    }
}

// ---------------------------------------------------------------- index hints

fn collect_hints(n: &Node, out: &mut Vec<(String, Bound)>) {
    match n {
        Node::And(ns) => ns.iter().for_each(|c| collect_hints(c, out)),
        Node::Field { path, pred, .. } => collect_pred_hints(path, pred, out),
        _ => {}
    }
}

fn collect_pred_hints(path: &str, p: &Pred, out: &mut Vec<(String, Bound)>) {
    let b = match p {
        Pred::All(ps) => {
            ps.iter().for_each(|q| collect_pred_hints(path, q, out));
            return;
        }
        Pred::Eq(x) if !x.is_null() => Bound::Eq(x.clone()),
        Pred::In(xs) if !xs.is_empty() && !xs.iter().any(Value::is_null) => Bound::In(xs.clone()),
        Pred::Cmp(op, x) if !x.is_null() => match op {
            CmpOp::Gt => Bound::Range { lower: Some((x.clone(), false)), upper: None },
            CmpOp::Gte => Bound::Range { lower: Some((x.clone(), true)), upper: None },
            CmpOp::Lt => Bound::Range { lower: None, upper: Some((x.clone(), false)) },
            CmpOp::Lte => Bound::Range { lower: None, upper: Some((x.clone(), true)) },
        },
        _ => return,
    };
    match out.iter_mut().find(|(p, _)| p == path) {
        None => out.push((path.to_string(), b)),
        Some((_, existing)) => merge_bound(existing, b),
    }
}

fn merge_bound(existing: &mut Bound, new: Bound) {
    match (&mut *existing, new) {
        (Bound::Eq(_), _) => {}
        (_, b @ Bound::Eq(_)) => *existing = b,
        (Bound::In(_), _) => {}
        (Bound::Range { .. }, b @ Bound::In(_)) => *existing = b,
        (Bound::Range { lower, upper }, Bound::Range { lower: nl, upper: nu }) => {
            let rank = lower.as_ref().or(upper.as_ref()).map(|(v, _)| type_rank(v));
            let same = |v: &Value| rank.is_none_or(|r| r == type_rank(v));
            if let Some((v, incl)) = nl.filter(|(v, _)| same(v)) {
                *lower = Some(match lower.take() {
                    None => (v, incl),
                    Some((cur, ci)) => match compare_values(&v, &cur) {
                        Ordering::Greater => (v, incl),
                        Ordering::Less => (cur, ci),
                        Ordering::Equal => (cur, ci && incl),
                    },
                });
            }
            if let Some((v, incl)) = nu.filter(|(v, _)| same(v)) {
                *upper = Some(match upper.take() {
                    None => (v, incl),
                    Some((cur, ci)) => match compare_values(&v, &cur) {
                        Ordering::Less => (v, incl),
                        Ordering::Greater => (cur, ci),
                        Ordering::Equal => (cur, ci && incl),
                    },
                });
            }
        }
    }
}
