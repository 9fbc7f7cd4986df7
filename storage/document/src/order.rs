//! Total order over JSON values (modelled on MongoDB's BSON comparison order).
//!
//! Types rank as: `null` < numbers < strings < objects < arrays < booleans.
//! Within a type:
//! * numbers compare by numeric value, exactly across integers and floats
//!   (`1 == 1.0`, `2^63` > `i64::MAX`);
//! * strings compare by Unicode code point (byte-wise UTF-8);
//! * objects compare as their (key, value) pairs sorted by key, pairwise
//!   (key first, then value), a shorter prefix first;
//! * arrays compare element-wise lexicographically, a shorter prefix first;
//! * `false` < `true`.
//!
//! A missing field sorts as `null`.

use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// Rank of a value's type in the total order (0 = null ... 5 = boolean).
pub fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Number(_) => 1,
        Value::String(_) => 2,
        Value::Object(_) => 3,
        Value::Array(_) => 4,
        Value::Bool(_) => 5,
    }
}

fn as_int(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

/// Compare an integer with a float exactly.
fn cmp_int_float(x: i128, y: f64) -> Ordering {
    if y.is_nan() {
        return Ordering::Less;
    }
    let t = y.trunc();
    if t < -1.0e38 {
        return Ordering::Greater;
    }
    if t > 1.0e38 {
        return Ordering::Less;
    }
    // |t| < 1e38 < i128::MAX, and t is integral: the cast is exact.
    let ti = t as i128;
    match x.cmp(&ti) {
        Ordering::Equal => {
            if y > t {
                Ordering::Less
            } else if y < t {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// Compare two JSON numbers by value, exactly across integer and float forms.
pub fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (as_int(a), as_int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(x), None) => cmp_int_float(x, b.as_f64().unwrap_or(f64::NAN)),
        (None, Some(y)) => cmp_int_float(y, a.as_f64().unwrap_or(f64::NAN)).reverse(),
        (None, None) => {
            let x = a.as_f64().unwrap_or(f64::NAN);
            let y = b.as_f64().unwrap_or(f64::NAN);
            x.total_cmp(&y)
        }
    }
}

fn sorted_entries(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut v: Vec<_> = m.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// Total order over JSON values; see the module documentation.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    let (ra, rb) = (type_rank(a), type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (ex, ey) in x.iter().zip(y.iter()) {
                let o = compare_values(ex, ey);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let (sx, sy) = (sorted_entries(x), sorted_entries(y));
            for ((kx, vx), (ky, vy)) in sx.iter().zip(sy.iter()) {
                let o = kx.cmp(ky).then_with(|| compare_values(vx, vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
            sx.len().cmp(&sy.len())
        }
        _ => Ordering::Equal, // both null
    }
}

/// Deep equality with numeric normalisation (`1 == 1.0`); object key order is irrelevant.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| values_equal(p, q)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w))),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_order() {
        let ordered = [
            json!(null),
            json!(-5),
            json!(2.5),
            json!(3),
            json!(""),
            json!("a"),
            json!({}),
            json!({"a": 1}),
            json!([]),
            json!([1]),
            json!(false),
            json!(true),
        ];
        for i in 0..ordered.len() {
            for j in 0..ordered.len() {
                assert_eq!(compare_values(&ordered[i], &ordered[j]), i.cmp(&j), "{} vs {}", ordered[i], ordered[j]);
            }
        }
    }

    #[test]
    fn numbers_exact() {
        assert_eq!(compare_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare_values(&json!(1), &json!(1.5)), Ordering::Less);
        assert_eq!(compare_values(&json!(-1), &json!(-1.5)), Ordering::Greater);
        assert_eq!(compare_values(&json!(u64::MAX), &json!(i64::MAX)), Ordering::Greater);
        assert_eq!(compare_values(&json!(i64::MIN), &json!(-1e300)), Ordering::Greater);
        assert_eq!(compare_values(&json!(i64::MAX), &json!(1e300)), Ordering::Less);
        assert!(values_equal(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }
}
