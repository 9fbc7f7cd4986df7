//! Document store operations and results (spec 01, documents).
//!
//! Documents of a collection are spread over the data groups by id; every group
//! that may hold them keeps its own copy of the [`CollectionDef`] (the router
//! writes it to every group), so each group validates and indexes locally.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest accepted collection name, document id and indexed field path.
pub const MAX_NAME_BYTES: usize = 256;

/// A collection as stored in one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionDef {
    pub name: String,
    /// JSON-schema-style validation applied to every write; `None` for none.
    pub schema: Option<Value>,
    /// Dotted field paths with a secondary index, in creation order.
    pub indexes: Vec<String>,
    pub created_at_ms: i64,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocRecord {
    pub id: String,
    pub collection: String,
    pub data: Value,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Document writes. Ids are chosen by the router before proposing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocOp {
    /// Creates the collection in this group. When it exists already: rejected
    /// as a conflict if `exclusive`, otherwise left as it is (`Applied(false)`).
    CreateCollection { name: String, schema: Option<Value>, exclusive: bool },
    /// Removes the collection, its documents and indexes from this group
    /// (`Deleted(documents)`, or rejected as not found).
    DropCollection { name: String },
    /// Adds a secondary index and builds it over this group's documents
    /// (`Applied(false)` when it exists already).
    CreateIndex { collection: String, field: String },
    /// Removes a secondary index (`Deleted(0 | 1)`).
    DropIndex { collection: String, field: String },
    /// Inserts a new document; rejected as a conflict if the id is taken.
    Insert { collection: String, id: String, data: Value },
    /// Replaces the whole content of an existing document.
    Replace { collection: String, id: String, data: Value },
    /// Applies `$set` / `$unset` / `$inc` to an existing document.
    Update { collection: String, id: String, update: Value },
    /// Deletes one document (`Deleted(0 | 1)`).
    Delete { collection: String, id: String },
    /// Inserts a batch of new documents all or nothing (bulk import): a schema
    /// violation or a taken id fails the batch (`Response::Import`).
    InsertMany { collection: String, docs: Vec<crate::import::ImportDoc> },
    /// Re-encodes the stored documents last written at or before
    /// `issued_at_ms - older_than_ms` in the compact binary form (`DocResponse::Compressed`).
    Compress { older_than_ms: i64 },
}

/// Document reads of one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocQuery {
    /// Every collection of this group with its local document count.
    ListCollections,
    /// One collection definition.
    Collection {
        name: String,
    },
    Get {
        collection: String,
        id: String,
    },
    Find(FindSpec),
}

/// A filtered, sorted and limited scan of one group's part of a collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindSpec {
    pub collection: String,
    /// A filter document (`{}` matches everything).
    pub filter: Value,
    /// Any form `tessera_document::SortSpec::parse` accepts; `null` for none.
    /// The router sends objects as arrays of `[path, direction]` pairs to keep
    /// the client's key order.
    pub sort: Value,
    /// At most this many documents, after sorting (`None`: no limit).
    pub limit: Option<usize>,
}

/// A collection of one group and how many documents the group holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionInfo {
    pub def: CollectionDef,
    pub documents: u64,
}

/// One found document with its merge key: the order-preserving encoding of its
/// sort values (byte order is the requested order; ties are broken by id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoundDoc {
    #[serde(with = "crate::b64")]
    pub sort_key: Vec<u8>,
    pub doc: DocRecord,
}

/// One group's answer to [`DocQuery::Find`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// In (sort key, id) order, at most `limit`.
    pub docs: Vec<FoundDoc>,
    /// Documents read and tested against the filter.
    pub scanned: u64,
    /// Documents matching the filter (before the limit).
    pub matched: u64,
    /// The indexed field the scan used, if any.
    pub index_used: Option<String>,
}

/// Results of document writes (others answer `Applied`, `Deleted` or `Rejected`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocResponse {
    /// The document as stored after an insert, replace or update.
    Document(DocRecord),
    /// What [`DocOp::Compress`] did in this group.
    /// `collections`: names of the collections with documents re-encoded here.
    Compressed { collections: Vec<String>, documents: u64, bytes_before: u64, bytes_after: u64 },
    /// Whether a create (collection or index) made something new; `false` when it existed.
    Created(bool),
    /// How many documents a delete or a collection drop removed.
    Deleted(u64),
}

/// Results of document reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocQueryResult {
    Collections(Vec<CollectionInfo>),
    Collection(Option<CollectionDef>),
    Document(Option<DocRecord>),
    Found(Found),
}

/// Collection names: 1 to [`MAX_NAME_BYTES`] bytes of letters, digits, `_`, `-` and `.`.
pub fn validate_collection_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!("collection names are 1 to {MAX_NAME_BYTES} bytes"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return Err(format!("invalid collection name {name:?}: only letters, digits, '_', '-' and '.' are allowed"));
    }
    // `/api/v1/documents/collections/query` is taken by the collection routes.
    if name == "collections" {
        return Err("\"collections\" is reserved and cannot name a collection".into());
    }
    Ok(())
}

/// Document ids: 1 to [`MAX_NAME_BYTES`] bytes, no NUL or `/`.
pub fn validate_doc_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_NAME_BYTES || id.bytes().any(|b| b == 0 || b == b'/') {
        return Err(format!("invalid document id {id:?}"));
    }
    Ok(())
}

/// Indexed fields: a dotted path of non-empty segments, no NUL.
pub fn validate_index_field(field: &str) -> Result<(), String> {
    if field.is_empty() || field.len() > MAX_NAME_BYTES || field.contains('\0') || field.split('.').any(str::is_empty) {
        return Err(format!("invalid field path {field:?} (a dotted path such as \"address.city\")"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names() {
        for ok in ["users", "a.b-c_1", "Collections"] {
            assert!(validate_collection_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "sp ace", "collections", &"x".repeat(MAX_NAME_BYTES + 1)] {
            assert!(validate_collection_name(bad).is_err(), "{bad}");
        }
    }
}
