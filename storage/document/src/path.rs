//! Dotted field paths: `"a.b.c"`, with numeric segments indexing arrays (`"items.0.name"`).

use crate::error::FilterError;
use serde_json::Value;

/// One parsed path segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub key: String,
    /// `Some(i)` when the segment is a non-negative decimal integer.
    pub index: Option<usize>,
}

/// Split a dotted path into segments; empty paths and empty segments are errors.
pub(crate) fn parse_path(path: &str) -> Result<Vec<Segment>, String> {
    if path.is_empty() {
        return Err("empty field path".into());
    }
    path.split('.')
        .map(|s| {
            if s.is_empty() {
                Err(format!("field path '{path}' has an empty segment"))
            } else {
                let index = if s.bytes().all(|b| b.is_ascii_digit()) { s.parse::<usize>().ok() } else { None };
                Ok(Segment { key: s.to_string(), index })
            }
        })
        .collect()
}

pub(crate) fn parse_path_filter(path: &str) -> Result<Vec<Segment>, FilterError> {
    parse_path(path).map_err(FilterError::Invalid)
}

/// Value at a dotted path: object segments look up keys, numeric segments index
/// arrays. Returns `None` when any segment is missing or the path is malformed.
pub fn get_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let segs = parse_path(path).ok()?;
    get_segments(doc, &segs)
}

pub(crate) fn get_segments<'a>(doc: &'a Value, segs: &[Segment]) -> Option<&'a Value> {
    let mut cur = doc;
    for s in segs {
        cur = match cur {
            Value::Object(m) => m.get(&s.key)?,
            Value::Array(a) => a.get(s.index?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// All values a path reaches, MongoDB style: a non-numeric segment applied to an
/// array fans out over the array's object elements (`"items.name"` reaches every
/// item's name); a numeric segment indexes the array.
pub(crate) fn resolve<'a>(v: &'a Value, segs: &[Segment], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = segs.split_first() else {
        out.push(v);
        return;
    };
    match v {
        Value::Object(m) => {
            if let Some(c) = m.get(&first.key) {
                resolve(c, rest, out);
            }
        }
        Value::Array(a) => match first.index {
            Some(i) => {
                if let Some(c) = a.get(i) {
                    resolve(c, rest, out);
                }
            }
            None => {
                for e in a.iter().filter(|e| e.is_object()) {
                    resolve(e, segs, out);
                }
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn get_paths() {
        let d = json!({"a": {"b": {"c": 1}}, "items": [{"name": "x"}, {"name": "y"}]});
        assert_eq!(get_path(&d, "a.b.c"), Some(&json!(1)));
        assert_eq!(get_path(&d, "items.1.name"), Some(&json!("y")));
        assert_eq!(get_path(&d, "items.2.name"), None);
        assert_eq!(get_path(&d, "items.name"), None);
        assert_eq!(get_path(&d, "a..b"), None);
        assert_eq!(get_path(&d, ""), None);
        assert_eq!(get_path(&d, "a.b.c.d"), None);
    }

    #[test]
    fn resolve_fans_out() {
        let d = json!({"items": [{"name": "x"}, 3, {"name": "y"}, {"other": 1}]});
        let segs = parse_path("items.name").unwrap();
        let mut out = vec![];
        resolve(&d, &segs, &mut out);
        assert_eq!(out, vec![&json!("x"), &json!("y")]);
    }
}
