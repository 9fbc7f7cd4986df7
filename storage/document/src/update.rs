//! Update operators: `$set`, `$unset`, `$inc`.
//!
//! Paths are dotted (`"a.b.c"`, `"items.0.qty"`). Every function is atomic: on
//! error the document is left unchanged.
//!
//! * `$set` creates missing intermediate objects (an intermediate `null` is
//!   replaced by an object). On an array, a numeric segment addresses an existing
//!   element or, if equal to the length, appends. Setting through any other
//!   scalar, a non-numeric segment on an array, or an index past the end is an error.
//! * `$unset` removes object fields; on an array element it sets `null` (so
//!   positions don't shift, as in MongoDB). Missing paths are ignored.
//! * `$inc` adds a number; a missing field is created with the increment.
//!   Integer + integer stays an integer unless it overflows `i64`, then it
//!   becomes a float; anything with a float is a float. A non-numeric target
//!   is an error.

use crate::error::FilterError;
use crate::path::{Segment, parse_path};
use serde_json::{Map, Number, Value};

fn uerr(msg: impl Into<String>) -> FilterError {
    FilterError::Update(msg.into())
}

fn segs(path: &str) -> Result<Vec<Segment>, FilterError> {
    parse_path(path).map_err(uerr)
}

/// Mutable slot at `segs`, creating intermediates; `None` parent chain errors.
fn slot_mut<'a>(doc: &'a mut Value, path: &str, segs: &[Segment]) -> Result<&'a mut Value, FilterError> {
    let mut cur = doc;
    for s in segs {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(m) => m.entry(s.key.clone()).or_insert(Value::Null),
            Value::Array(a) => {
                let i = s.index.ok_or_else(|| uerr(format!("cannot use field name '{}' on an array in path '{path}'", s.key)))?;
                if i == a.len() {
                    a.push(Value::Null);
                }
                let len = a.len();
                a.get_mut(i).ok_or_else(|| uerr(format!("index {i} is past the end of the array (length {len}) in path '{path}'")))?
            }
            other => {
                return Err(uerr(format!("cannot create field '{}' inside a non-object value ({other}) in path '{path}'", s.key)));
            }
        };
    }
    Ok(cur)
}

fn set_in(doc: &mut Value, path: &str, value: Value) -> Result<(), FilterError> {
    let sg = segs(path)?;
    *slot_mut(doc, path, &sg)? = value;
    Ok(())
}

fn unset_in(doc: &mut Value, path: &str) -> Result<(), FilterError> {
    let sg = segs(path)?;
    let Some((last, parents)) = sg.split_last() else {
        return Ok(());
    };
    let mut cur = doc;
    for s in parents {
        cur = match cur {
            Value::Object(m) => match m.get_mut(&s.key) {
                Some(c) => c,
                None => return Ok(()),
            },
            Value::Array(a) => match s.index.and_then(|i| a.get_mut(i)) {
                Some(c) => c,
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
    }
    match cur {
        Value::Object(m) => {
            m.remove(&last.key);
        }
        Value::Array(a) => {
            if let Some(e) = last.index.and_then(|i| a.get_mut(i)) {
                *e = Value::Null;
            }
        }
        _ => {}
    }
    Ok(())
}

fn add_numbers(a: &Number, b: &Number) -> Result<Number, FilterError> {
    if let Some(s) = a.as_i64().zip(b.as_i64()).and_then(|(x, y)| x.checked_add(y)) {
        return Ok(Number::from(s));
    }
    let s = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
    Number::from_f64(s).ok_or_else(|| uerr("$inc result is not a finite number"))
}

fn inc_in(doc: &mut Value, path: &str, by: &Value) -> Result<(), FilterError> {
    let Value::Number(by) = by else {
        return Err(uerr(format!("$inc amount for '{path}' must be a number")));
    };
    let sg = segs(path)?;
    let slot = slot_mut(doc, path, &sg)?;
    *slot = match slot {
        Value::Null => Value::Number(by.clone()),
        Value::Number(cur) => Value::Number(add_numbers(cur, by)?),
        other => {
            return Err(uerr(format!("cannot $inc non-numeric field '{path}' ({other})")));
        }
    };
    Ok(())
}

fn require_object_root(doc: &Value) -> Result<(), FilterError> {
    if doc.is_object() { Ok(()) } else { Err(uerr("the document must be a JSON object")) }
}

fn atomically(doc: &mut Value, f: impl FnOnce(&mut Value) -> Result<(), FilterError>) -> Result<(), FilterError> {
    require_object_root(doc)?;
    let mut work = doc.clone();
    f(&mut work)?;
    *doc = work;
    Ok(())
}

/// `$set`: assign each `path → value`, creating intermediate objects.
pub fn apply_set(doc: &mut Value, set: &Map<String, Value>) -> Result<(), FilterError> {
    atomically(doc, |d| set.iter().try_for_each(|(p, v)| set_in(d, p, v.clone())))
}

/// `$unset`: remove each path (the values are ignored, as in MongoDB).
pub fn apply_unset<'a>(doc: &mut Value, paths: impl IntoIterator<Item = &'a str>) -> Result<(), FilterError> {
    atomically(doc, |d| paths.into_iter().try_for_each(|p| unset_in(d, p)))
}

/// `$inc`: add each numeric amount to its path.
pub fn apply_inc(doc: &mut Value, inc: &Map<String, Value>) -> Result<(), FilterError> {
    atomically(doc, |d| inc.iter().try_for_each(|(p, v)| inc_in(d, p, v)))
}

/// Apply an update document `{"$set": {...}, "$unset": {...} | [...], "$inc": {...}}`
/// atomically, operators in the order `$set`, `$inc`, `$unset`. An update
/// without operators or with an unknown one is an error.
pub fn apply_update(doc: &mut Value, update: &Value) -> Result<(), FilterError> {
    let ops = update.as_object().ok_or_else(|| uerr("an update must be a JSON object"))?;
    if ops.is_empty() {
        return Err(uerr("the update has no operator ($set, $unset or $inc)"));
    }
    for (k, v) in ops {
        match k.as_str() {
            "$set" | "$inc" if !v.is_object() => {
                return Err(uerr(format!("'{k}' expects an object")));
            }
            "$set" | "$inc" => {}
            "$unset" if !(v.is_object() || v.is_array()) => {
                return Err(uerr("'$unset' expects an object or an array of paths"));
            }
            "$unset" => {}
            o if o.starts_with('$') => return Err(FilterError::UnknownOperator(o.to_string())),
            o => {
                return Err(uerr(format!("field '{o}' in an update must be inside an operator such as $set")));
            }
        }
    }
    atomically(doc, |d| {
        if let Some(Value::Object(set)) = ops.get("$set") {
            set.iter().try_for_each(|(p, v)| set_in(d, p, v.clone()))?;
        }
        if let Some(Value::Object(inc)) = ops.get("$inc") {
            inc.iter().try_for_each(|(p, v)| inc_in(d, p, v))?;
        }
        match ops.get("$unset") {
            Some(Value::Object(m)) => m.keys().try_for_each(|p| unset_in(d, p))?,
            Some(Value::Array(a)) => a.iter().try_for_each(|p| match p.as_str() {
                Some(p) => unset_in(d, p),
                None => Err(uerr("'$unset' paths must be strings")),
            })?,
            _ => {}
        }
        Ok(())
    })
}
