//! Vector store operations, queries and records (spec 03 part B).
//!
//! A collection holds fixed-dimension records `{id, vector, metadata}` under
//! string ids. The state machine assigns each id a per-collection `u64` (a
//! counter, in log order) that keys the in-memory HNSW index on every replica.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::GroupId;

/// Largest accepted vector dimension.
pub const MAX_DIM: u32 = 4096;
/// Largest accepted `k` of a search.
pub const MAX_K: u32 = 1000;
/// Largest accepted `ef` of a search.
pub const MAX_EF: u32 = 10_000;
/// Longest record id, in bytes.
pub const MAX_ID_BYTES: usize = 512;
/// Default HNSW links per node (`m`).
pub const DEFAULT_M: u32 = 16;
/// Default HNSW candidate-list size while inserting.
pub const DEFAULT_EF_CONSTRUCTION: u32 = 200;

/// Distance function of a collection (lower-case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VectorMetric {
    /// Vectors are normalized on insert; distance = 1 − cosine similarity.
    Cosine,
    /// Squared Euclidean distance.
    L2,
    /// Negative inner product.
    Dot,
}

impl VectorMetric {
    /// `"cosine"`, `"l2"` or `"dot"`.
    pub fn as_str(self) -> &'static str {
        match self {
            VectorMetric::Cosine => "cosine",
            VectorMetric::L2 => "l2",
            VectorMetric::Dot => "dot",
        }
    }

    /// Parses a metric name, case-insensitively.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cosine" => Ok(VectorMetric::Cosine),
            "l2" => Ok(VectorMetric::L2),
            "dot" => Ok(VectorMetric::Dot),
            _ => Err(format!("unknown metric {s:?}: use cosine, l2 or dot")),
        }
    }
}

/// A collection's fixed configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionConfig {
    pub name: String,
    pub dim: u32,
    pub metric: VectorMetric,
    /// HNSW links per node.
    pub m: u32,
    /// HNSW candidate-list size while inserting.
    pub ef_construction: u32,
    /// Set by the state machine from the command time.
    #[serde(default)]
    pub created_at_ms: i64,
    /// The data groups holding the collection, in placement order (the first is
    /// its home, where its name hashes); empty for a single-group collection
    /// stored before collections could be split.
    #[serde(default)]
    pub shards: Vec<GroupId>,
    /// Fixed at creation; commands naming another uid are refused, so a router
    /// with a stale view of a dropped and recreated collection cannot misplace
    /// records.
    #[serde(default)]
    pub uid: String,
}

/// The shard (index into [`CollectionConfig::shards`]) that holds record `id`:
/// FNV-1a 64 of the id modulo the shard count.
pub fn shard_of(id: &str, shards: usize) -> usize {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    (h % shards.max(1) as u64) as usize
}

/// Checks a vector against a collection's dimension and metric (finite
/// components; cosine also needs a non-zero norm).
pub fn check_vector(metric: VectorMetric, dim: u32, v: &[f32]) -> Result<(), String> {
    if v.len() != dim as usize {
        return Err(format!("dimension mismatch: expected {dim}, got {}", v.len()));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(format!("component {i} is not a finite number"));
    }
    if metric == VectorMetric::Cosine && v.iter().all(|x| *x == 0.0) {
        return Err("a zero vector has no cosine direction".into());
    }
    Ok(())
}

/// A collection's configuration and live record count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionStats {
    pub config: CollectionConfig,
    pub count: u64,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorRecord {
    pub id: String,
    /// As given (not normalized).
    pub vector: Vec<f32>,
    /// A JSON object, or `null` when absent.
    #[serde(default)]
    pub metadata: Value,
    /// Set by the state machine.
    #[serde(default)]
    pub created_at_ms: i64,
    #[serde(default)]
    pub updated_at_ms: i64,
}

/// Vector writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorOp {
    CreateCollection(CollectionConfig),
    /// Removes the collection and all its records (only the copy with `uid` when given).
    DropCollection {
        name: String,
        #[serde(default)]
        uid: Option<String>,
    },
    /// Inserts or replaces records (a single upsert or a whole batch, atomically).
    Upsert {
        collection: String,
        records: Vec<VectorRecord>,
        /// The collection's uid as the router knows it.
        #[serde(default)]
        uid: Option<String>,
    },
    /// Removes one record (soft delete inside the index).
    Delete {
        collection: String,
        id: String,
        #[serde(default)]
        uid: Option<String>,
    },
}

/// A nearest-neighbour search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRequest {
    pub collection: String,
    pub vector: Vec<f32>,
    pub k: u32,
    pub ef: Option<u32>,
    pub filter: Option<MetadataFilter>,
    /// The collection's uid as the router knows it.
    #[serde(default)]
    pub uid: Option<String>,
}

/// Vector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorQuery {
    ListCollections,
    Stats {
        name: String,
    },
    Get {
        collection: String,
        id: String,
        #[serde(default)]
        uid: Option<String>,
    },
    Search(SearchRequest),
    /// Live records of this shard after sequence number `after`, in sequence
    /// order, at most `limit` (an export pages through them).
    Scan {
        collection: String,
        #[serde(default)]
        uid: Option<String>,
        after: Option<u64>,
        limit: u32,
    },
}

/// Results of vector writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorResponse {
    Created(CollectionConfig),
    /// How many records the dropped collection held.
    Dropped {
        count: u64,
    },
    /// Records new to the collection and records replaced.
    Upserted {
        inserted: u64,
        updated: u64,
    },
    Deleted,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorHit {
    pub id: String,
    /// Higher is more similar (cosine: similarity; l2: 1/(1+d); dot: inner product).
    pub score: f32,
    /// Raw metric distance, smaller is nearer.
    pub distance: f32,
    pub metadata: Value,
}

/// Results of vector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorQueryResult {
    Collections(Vec<CollectionStats>),
    Stats(CollectionStats),
    Record(VectorRecord),
    /// Nearest first.
    Hits(Vec<VectorHit>),
    /// A page of [`VectorQuery::Scan`]; `next` continues after it (`None`: the last page).
    Page {
        records: Vec<VectorRecord>,
        next: Option<u64>,
    },
}

/// Collection names: 1 to 64 ASCII letters, digits, `_`, `-` or `.`, starting
/// with a letter or digit.
pub fn validate_collection_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!("invalid collection name {name:?}: use 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit"))
    }
}

/// Record ids: 1 to [`MAX_ID_BYTES`] bytes, no control characters.
pub fn validate_record_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(format!("record ids are 1 to {MAX_ID_BYTES} bytes without control characters"));
    }
    Ok(())
}

/// A metadata filter: every clause must hold.
///
/// JSON form: an object of `field: condition`, where a condition is a literal
/// (equality), `{"$eq": v}`, or `{"$in": [v, …]}` (equals any). A field name
/// that is not a top-level key is looked up as a dotted path (`"a.b"`).
/// Numbers compare by value (`3` equals `3.0`). Example:
/// `{"color": "red", "size": {"$in": [1, 2, 3]}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetadataFilter {
    pub clauses: Vec<FilterClause>,
}

/// `field` must equal one of `any_of`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilterClause {
    pub field: String,
    pub any_of: Vec<Value>,
}

impl MetadataFilter {
    /// Parses the JSON form (see the type's documentation).
    pub fn parse(v: &Value) -> Result<Self, String> {
        let Value::Object(fields) = v else {
            return Err("filter must be a JSON object of field: condition".into());
        };
        let mut clauses = Vec::with_capacity(fields.len());
        for (field, cond) in fields {
            let any_of = match cond {
                Value::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
                    if ops.len() != 1 {
                        return Err(format!("filter on {field:?}: use exactly one of $eq or $in"));
                    }
                    match ops.iter().next() {
                        Some((op, v)) if op == "$eq" => vec![v.clone()],
                        Some((op, Value::Array(vs))) if op == "$in" => vs.clone(),
                        Some((op, _)) if op == "$in" => return Err(format!("filter on {field:?}: $in takes an array")),
                        Some((op, _)) => return Err(format!("filter on {field:?}: unsupported operator {op}")),
                        None => return Err(format!("filter on {field:?}: empty condition")),
                    }
                }
                literal => vec![literal.clone()],
            };
            clauses.push(FilterClause { field: field.clone(), any_of });
        }
        Ok(MetadataFilter { clauses })
    }

    /// Whether `metadata` satisfies every clause.
    pub fn matches(&self, metadata: &Value) -> bool {
        self.clauses.iter().all(|c| lookup(metadata, &c.field).is_some_and(|found| c.any_of.iter().any(|want| json_eq(found, want))))
    }
}

fn lookup<'a>(metadata: &'a Value, field: &str) -> Option<&'a Value> {
    let obj = metadata.as_object()?;
    if let Some(v) = obj.get(field) {
        return Some(v);
    }
    if !field.contains('.') {
        return None;
    }
    field.split('.').try_fold(metadata, |v, part| v.as_object()?.get(part))
}

/// JSON equality with numbers compared by value.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(x), Some(y), _, _) => x == y,
            (_, _, Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w))),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters() {
        let f = MetadataFilter::parse(&json!({"color": "red", "size": {"$in": [1, 2.0]}, "a.b": true})).unwrap();
        assert!(f.matches(&json!({"color": "red", "size": 2, "a": {"b": true}})));
        assert!(!f.matches(&json!({"color": "red", "size": 3, "a": {"b": true}})));
        assert!(!f.matches(&json!({"color": "red", "size": 1})));
        assert!(!f.matches(&Value::Null));
        assert!(MetadataFilter::parse(&json!([1])).is_err());
        assert!(MetadataFilter::parse(&json!({"x": {"$gt": 1}})).is_err());
        assert!(MetadataFilter::parse(&json!({"x": {"$in": 1}})).is_err());
        assert!(MetadataFilter::parse(&json!({})).unwrap().matches(&Value::Null));
    }

    #[test]
    fn names() {
        assert!(validate_collection_name("docs_v1.2-x").is_ok());
        assert!(validate_collection_name("").is_err());
        assert!(validate_collection_name("_x").is_err());
        assert!(validate_collection_name("a/b").is_err());
        assert!(validate_record_id("a/b c").is_ok());
        assert!(validate_record_id("").is_err());
    }
}
