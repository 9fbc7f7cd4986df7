//! Value semantics of the pattern language: equality, comparison (three-valued,
//! `None` for unknown), and the total order used by `ORDER BY`, `min` and `max`.

use std::cmp::Ordering;

use serde_json::Value;

/// `a = b`: `None` when either side is null; numbers compare by value (1 = 1.0).
pub fn equals(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Number(x), Value::Number(y)) => Some(num_cmp(x, y) == Some(Ordering::Equal)),
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            let mut unknown = false;
            for (p, q) in x.iter().zip(y) {
                match equals(p, q) {
                    Some(false) => return Some(false),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            if unknown { None } else { Some(true) }
        }
        _ => Some(a == b),
    }
}

fn num_cmp(x: &serde_json::Number, y: &serde_json::Number) -> Option<Ordering> {
    match (x.as_i64(), y.as_i64()) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
    }
}

/// `a < b` and friends: defined between two numbers or two strings (also two
/// booleans); otherwise unknown (`None`).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Object(_) => 0,
        Value::Array(_) => 1,
        Value::String(_) => 2,
        Value::Bool(_) => 3,
        Value::Number(_) => 4,
        Value::Null => 5,
    }
}

/// A total order for sorting: maps < lists < strings < booleans < numbers <
/// null (null sorts last ascending, as in Cypher).
pub fn order(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) | (Value::String(_), Value::String(_)) | (Value::Bool(_), Value::Bool(_)) => {
            compare(a, b).unwrap_or(Ordering::Equal)
        }
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let o = order(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let (sx, sy) = (x.get("id").map(|v| v.to_string()), y.get("id").map(|v| v.to_string()));
            sx.cmp(&sy).then_with(|| Value::Object(x.clone()).to_string().cmp(&Value::Object(y.clone()).to_string()))
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A hashable key for DISTINCT and grouping (numbers normalised so 1 and 1.0 agree).
pub fn key(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("n{i}"),
            None => {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 9.0e15 { format!("n{}", f as i64) } else { format!("n{f}") }
            }
        },
        Value::Array(xs) => format!("[{}]", xs.iter().map(key).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// Three-valued truth of a value in a boolean position.
pub fn truth(v: &Value) -> Result<Option<bool>, String> {
    match v {
        Value::Bool(b) => Ok(Some(*b)),
        Value::Null => Ok(None),
        other => Err(format!("expected a boolean, found {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_and_comparison() {
        assert_eq!(equals(&json!(1), &json!(1.0)), Some(true));
        assert_eq!(equals(&json!("a"), &json!("a")), Some(true));
        assert_eq!(equals(&json!("1"), &json!(1)), Some(false));
        assert_eq!(equals(&json!(null), &json!(null)), None);
        assert_eq!(equals(&json!([1, 2]), &json!([1, 2.0])), Some(true));
        assert_eq!(compare(&json!(2), &json!(10)), Some(Ordering::Less));
        assert_eq!(compare(&json!("b"), &json!("a")), Some(Ordering::Greater));
        assert_eq!(compare(&json!("b"), &json!(1)), None);
        assert_eq!(compare(&json!(null), &json!(1)), None);
    }

    #[test]
    fn total_order_puts_null_last() {
        let mut v = vec![json!(null), json!(3), json!("x"), json!(1.5), json!(true)];
        v.sort_by(order);
        assert_eq!(v, vec![json!("x"), json!(true), json!(1.5), json!(3), json!(null)]);
        assert_eq!(key(&json!(1)), key(&json!(1.0)));
    }
}
