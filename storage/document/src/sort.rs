//! Multi-key sorting of documents.
//!
//! A [`SortSpec`] is an ordered list of `(path, direction)` keys. Accepted forms:
//! * object `{"age": -1, "name": 1}`;
//! * array of pairs `[["age", -1], ["name", 1]]` or of single-key objects
//!   `[{"age": -1}, {"name": 1}]`, or of strings `["-age", "name"]`;
//! * string `"-age,name"` (a leading `-` means descending).
//!
//! Directions: `1` / `-1`, or `"asc"` / `"desc"` (also `"ascending"` / `"descending"`).
//!
//! **Key order of the object form**: the crate does not enable serde_json's
//! `preserve_order` (that would change `Map` for the whole workspace), so a
//! `serde_json::Value` object iterates its keys alphabetically and
//! [`SortSpec::parse`] sees them in that order. To keep the client's key order,
//! deserialize the request field directly into `SortSpec` (it implements
//! `Deserialize` and visits map entries in document order), use
//! [`SortSpec::from_json_str`], or send the array form.
//!
//! Values are ordered by [`compare_values`] (the
//! JSON total order); a missing field sorts as `null`. Paths are resolved with
//! [`get_path`](crate::path::get_path) (numeric segments index arrays); an
//! array-valued field is compared as a whole array.

use crate::error::FilterError;
use crate::order::compare_values;
use crate::path::{Segment, get_segments, parse_path};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cmp::Ordering;
use std::fmt;

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// One sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// Dotted field path as given.
    pub path: String,
    /// Direction for this key.
    pub direction: Direction,
    segs: Vec<Segment>,
}

/// Ordered list of sort keys; an empty spec leaves documents in their order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SortSpec {
    keys: Vec<SortKey>,
}

fn sort_err(msg: impl Into<String>) -> FilterError {
    FilterError::Sort(msg.into())
}

fn parse_direction(path: &str, v: &Value) -> Result<Direction, FilterError> {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Ok(Direction::Asc),
            Some(-1.0) => Ok(Direction::Desc),
            _ => Err(sort_err(format!("direction for '{path}' must be 1 or -1, got {n}"))),
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "asc" | "ascending" | "1" => Ok(Direction::Asc),
            "desc" | "descending" | "-1" => Ok(Direction::Desc),
            _ => Err(sort_err(format!("direction for '{path}' must be 1, -1, \"asc\" or \"desc\", got \"{s}\""))),
        },
        _ => Err(sort_err(format!("direction for '{path}' must be 1 or -1"))),
    }
}

impl SortKey {
    fn new(path: &str, direction: Direction) -> Result<SortKey, FilterError> {
        let segs = parse_path(path).map_err(sort_err)?;
        Ok(SortKey { path: path.to_string(), direction, segs })
    }

    fn from_str_form(s: &str) -> Result<SortKey, FilterError> {
        let s = s.trim();
        match s.strip_prefix('-') {
            Some(p) => SortKey::new(p, Direction::Desc),
            None => SortKey::new(s.strip_prefix('+').unwrap_or(s), Direction::Asc),
        }
    }
}

impl SortSpec {
    /// Build from `(path, direction)` pairs.
    pub fn new<S: AsRef<str>>(keys: impl IntoIterator<Item = (S, Direction)>) -> Result<SortSpec, FilterError> {
        let keys = keys.into_iter().map(|(p, d)| SortKey::new(p.as_ref(), d)).collect::<Result<Vec<_>, _>>()?;
        Ok(SortSpec { keys })
    }

    /// Parse any accepted form (see module docs). `null` gives an empty spec.
    pub fn parse(v: &Value) -> Result<SortSpec, FilterError> {
        let keys = match v {
            Value::Null => Vec::new(),
            Value::Object(m) => m.iter().map(|(k, d)| SortKey::new(k, parse_direction(k, d)?)).collect::<Result<_, _>>()?,
            Value::Array(items) => items.iter().map(parse_item).collect::<Result<_, _>>()?,
            Value::String(s) => s.split(',').filter(|p| !p.trim().is_empty()).map(SortKey::from_str_form).collect::<Result<_, _>>()?,
            _ => {
                return Err(sort_err("sort must be an object like {\"field\": 1, \"other\": -1}"));
            }
        };
        Ok(SortSpec { keys })
    }

    /// Parse raw JSON text, keeping the key order of an object form.
    pub fn from_json_str(s: &str) -> Result<SortSpec, FilterError> {
        serde_json::from_str(s).map_err(|e| sort_err(e.to_string()))
    }

    /// The keys, most significant first.
    pub fn keys(&self) -> &[SortKey] {
        &self.keys
    }

    /// True when there is no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn parse_item(item: &Value) -> Result<SortKey, FilterError> {
    match item {
        Value::String(s) => SortKey::from_str_form(s),
        Value::Array(pair) => match pair.as_slice() {
            [Value::String(p), d] => SortKey::new(p, parse_direction(p, d)?),
            [Value::String(p)] => SortKey::new(p, Direction::Asc),
            _ => Err(sort_err("array sort items must be [\"field\", 1 | -1]")),
        },
        Value::Object(m) if m.len() == 1 => {
            let (k, d) = m.iter().next().ok_or_else(|| sort_err("empty sort item"))?;
            SortKey::new(k, parse_direction(k, d)?)
        }
        _ => Err(sort_err("sort items must be \"field\", [\"field\", dir] or {\"field\": dir}")),
    }
}

impl<'de> Deserialize<'de> for SortSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SortSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sort specification such as {\"field\": 1, \"other\": -1}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SortSpec, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    let dir = parse_direction(&k, &v).map_err(de::Error::custom)?;
                    keys.push(SortKey::new(&k, dir).map_err(de::Error::custom)?);
                }
                Ok(SortSpec { keys })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SortSpec, A::Error> {
                let mut keys = Vec::new();
                while let Some(item) = seq.next_element::<OrderedItem>()? {
                    keys.push(item.0);
                }
                Ok(SortSpec { keys })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SortSpec, E> {
                SortSpec::parse(&Value::String(s.to_string())).map_err(E::custom)
            }
            fn visit_unit<E: de::Error>(self) -> Result<SortSpec, E> {
                Ok(SortSpec::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// One array item, deserialized so that a single-key object keeps its key.
struct OrderedItem(SortKey);

impl<'de> Deserialize<'de> for OrderedItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedItem;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"field\", [\"field\", 1 | -1] or {\"field\": 1 | -1}")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<OrderedItem, E> {
                SortKey::from_str_form(s).map(OrderedItem).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedItem, A::Error> {
                let (k, v) = map.next_entry::<String, Value>()?.ok_or_else(|| de::Error::custom("empty sort item"))?;
                if map.next_key::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom("each sort item must name exactly one field"));
                }
                let dir = parse_direction(&k, &v).map_err(de::Error::custom)?;
                SortKey::new(&k, dir).map(OrderedItem).map_err(de::Error::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OrderedItem, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = seq.next_element::<Value>()? {
                    items.push(v);
                }
                parse_item(&Value::Array(items)).map(OrderedItem).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

static NULL: Value = Value::Null;

/// Compare two documents under `spec`: first key first; missing fields sort as `null`.
pub fn compare(a: &Value, b: &Value, spec: &SortSpec) -> Ordering {
    for k in &spec.keys {
        let va = get_segments(a, &k.segs).unwrap_or(&NULL);
        let vb = get_segments(b, &k.segs).unwrap_or(&NULL);
        let o = compare_values(va, vb);
        let o = if k.direction == Direction::Desc { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Stable in-place sort of documents by `spec`.
pub fn sort_documents(docs: &mut [Value], spec: &SortSpec) {
    docs.sort_by(|a, b| compare(a, b, spec));
}
