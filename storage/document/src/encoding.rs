//! Order-preserving byte encodings of JSON values, for index keys and for
//! merging sorted results across shards: comparing encodings byte by byte
//! gives [`crate::compare_values`]'s order, and a sort key compares like
//! [`crate::compare`]. Also the values an index holds for a document
//! ([`index_values`]), reached the way filters reach them.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::path::get_path;
use crate::sort::{Direction, SortSpec};

const TAG_NULL: u8 = 0x10;
const TAG_NUMBER: u8 = 0x20;
const TAG_STRING: u8 = 0x30;
const TAG_OBJECT: u8 = 0x40;
const TAG_ARRAY: u8 = 0x50;
const TAG_BOOL: u8 = 0x60;

/// Appends the order-preserving, prefix-free encoding of `v`: byte order equals
/// the JSON total order (null < numbers < strings < objects < arrays < booleans),
/// and values equal under that order (`1` and `1.0`) encode identically.
pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(TAG_NULL),
        Value::Bool(b) => out.extend_from_slice(&[TAG_BOOL, *b as u8]),
        Value::Number(n) => {
            out.push(TAG_NUMBER);
            // Primary: the f64 value; secondary: the exact integer part, which
            // orders integers beyond 2^53 that share an f64 (and equals for equal values).
            let (f, exact) = match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => (i as f64, i as i128),
                (None, Some(u)) => (u as f64, u as i128),
                _ => {
                    let f = n.as_f64().unwrap_or(0.0);
                    let t = f.trunc();
                    let exact = if t >= 1.0e38 {
                        i128::MAX
                    } else if t <= -1.0e38 {
                        i128::MIN
                    } else {
                        t as i128
                    };
                    (f, exact)
                }
            };
            let f = if f == 0.0 { 0.0 } else { f }; // -0.0 sorts with 0
            let bits = f.to_bits();
            let ordered = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
            out.extend_from_slice(&ordered.to_be_bytes());
            out.extend_from_slice(&((exact as u128) ^ (1 << 127)).to_be_bytes());
        }
        Value::String(s) => {
            out.push(TAG_STRING);
            encode_str(s, out);
        }
        Value::Object(m) => {
            out.push(TAG_OBJECT);
            // serde_json maps iterate in key order (no `preserve_order` in this workspace),
            // but sort anyway so the encoding never depends on that feature.
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (k, x) in entries {
                out.push(0x01);
                encode_str(k, out);
                encode_value(x, out);
            }
            out.push(0x00);
        }
        Value::Array(a) => {
            out.push(TAG_ARRAY);
            for x in a {
                encode_value(x, out); // every element starts with a tag > 0
            }
            out.push(0x00);
        }
    }
}

/// Escaped bytes (`00` → `00 FF`) and the terminator `00 00`.
fn encode_str(s: &str, out: &mut Vec<u8>) {
    for b in s.bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// The encoding of `v` alone (see [`encode_value`]).
pub fn encoded(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

/// The merge key of a document under `spec`: each key's encoded value (missing
/// as null, as `tessera_document::compare` does), bytes inverted when descending.
pub fn sort_key(data: &Value, spec: &SortSpec) -> Vec<u8> {
    let mut out = Vec::new();
    for k in spec.keys() {
        let start = out.len();
        encode_value(get_path(data, &k.path).unwrap_or(&Value::Null), &mut out);
        if k.direction == Direction::Desc {
            out[start..].iter_mut().for_each(|b| *b = !*b);
        }
    }
    out
}

// ---------------------------------------------------------------- index values

/// The values a dotted path reaches, as filters see them: a non-numeric segment
/// on an array fans out over its object elements, a numeric one indexes it.
fn resolve<'a>(v: &'a Value, segs: &[&str], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = segs.split_first() else {
        out.push(v);
        return;
    };
    match v {
        Value::Object(m) => {
            if let Some(c) = m.get(*first) {
                resolve(c, rest, out);
            }
        }
        Value::Array(a) => match array_index(first) {
            Some(i) => {
                if let Some(c) = a.get(i) {
                    resolve(c, rest, out);
                }
            }
            None => a.iter().filter(|e| e.is_object()).for_each(|e| resolve(e, segs, out)),
        },
        _ => {}
    }
}

fn array_index(seg: &str) -> Option<usize> {
    if seg.bytes().all(|b| b.is_ascii_digit()) { seg.parse().ok() } else { None }
}

/// Encodings of every value `field` reaches in `data` (arrays also by element),
/// and whether there is more than one such value (multikey).
pub fn index_values(data: &Value, field: &str) -> (BTreeSet<Vec<u8>>, bool) {
    let segs: Vec<&str> = field.split('.').collect();
    let mut cands = Vec::new();
    resolve(data, &segs, &mut cands);
    let mut out = BTreeSet::new();
    let mut multi = cands.len() > 1;
    for c in cands {
        out.insert(encoded(c));
        if let Value::Array(a) = c {
            multi = true;
            out.extend(a.iter().map(encoded));
        }
    }
    (out, multi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare_values;
    use serde_json::json;
    use std::cmp::Ordering;

    #[test]
    fn encoding_follows_the_json_total_order() {
        let vals = [
            json!(null),
            json!(-1e300),
            json!(i64::MIN),
            json!(-5),
            json!(-0.5),
            json!(0),
            json!(0.0),
            json!(2.5),
            json!(3),
            json!(9007199254740992.0),
            json!(9007199254740993u64),
            json!(9007199254740994.0),
            json!(u64::MAX),
            json!(1e300),
            json!(""),
            json!("a"),
            json!("a\u{0}"),
            json!("ab"),
            json!("b"),
            json!({}),
            json!({"a": 1}),
            json!({"a": 1, "b": 0}),
            json!({"a": 2}),
            json!({"b": 0}),
            json!([]),
            json!([1]),
            json!([1, 2]),
            json!([1, "x"]),
            json!([2]),
            json!(false),
            json!(true),
        ];
        for a in &vals {
            for b in &vals {
                let want = compare_values(a, b);
                let got = encoded(a).cmp(&encoded(b));
                assert_eq!(got, want, "{a} vs {b}");
            }
        }
        assert_eq!(encoded(&json!(1)), encoded(&json!(1.0)));
    }

    #[test]
    fn descending_sort_keys_invert_the_order() {
        let spec = SortSpec::parse(&json!([["a", -1], ["b", 1]])).unwrap();
        let docs = [json!({"a": 2, "b": "x"}), json!({"a": 2, "b": "y"}), json!({"a": 1}), json!({"a": [1, 2]}), json!({})];
        for x in &docs {
            for y in &docs {
                let want = crate::compare(x, y, &spec);
                assert_eq!(sort_key(x, &spec).cmp(&sort_key(y, &spec)), want, "{x} vs {y}");
            }
        }
        assert_eq!(sort_key(&docs[0], &spec).cmp(&sort_key(&docs[2], &spec)), Ordering::Less);
    }

    #[test]
    fn index_values_fan_out_like_filters() {
        let d = json!({"items": [{"n": 1}, {"n": [2, 3]}], "t": ["a", "b"], "x": 5});
        let (v, multi) = index_values(&d, "items.n");
        assert!(multi);
        for x in [json!(1), json!(2), json!(3), json!([2, 3])] {
            assert!(v.contains(&encoded(&x)), "{x}");
        }
        let (v, multi) = index_values(&d, "x");
        assert!(!multi && v.len() == 1);
        let (v, _) = index_values(&d, "missing");
        assert!(v.is_empty());
        let (v, _) = index_values(&d, "t.1");
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![encoded(&json!("b"))]);
    }
}
