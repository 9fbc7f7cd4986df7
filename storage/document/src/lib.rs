//! Tessera document model: pure functions over `serde_json::Value` documents.
//!
//! * [`filter`]: MongoDB-style filters compiled once ([`Filter::parse`]) and
//!   evaluated cheaply per document ([`Filter::matches`]), plus index hints.
//! * [`order`]: the total order of JSON values used by range operators and sorting.
//! * [`encoding`]: byte encodings that sort in that order (index keys, merge keys).
//! * [`sort`]: multi-key sort specifications ([`SortSpec`]) and [`compare`].
//! * [`schema`]: JSON-schema-style validation ([`Schema`]).
//! * [`path`]: dotted-path access ([`get_path`]).
//! * [`update`]: `$set` / `$unset` / `$inc` updates ([`apply_set`], [`apply_update`]).
//!
//! Nothing here does I/O; the storage layer calls these functions. No function
//! panics on any input: malformed input is reported through [`FilterError`] or
//! [`SchemaError`].
//!
//! ```
//! use serde_json::json;
//! use tessera_document::{Filter, Schema, SortSpec, apply_update, sort_documents};
//!
//! let filter = Filter::parse(&json!({"age": {"$gte": 18}, "tags": {"$contains": "admin"}})).unwrap();
//! assert!(filter.matches(&json!({"age": 30, "tags": ["admin"]})));
//!
//! let mut docs = vec![json!({"n": 2}), json!({"n": 1})];
//! sort_documents(&mut docs, &SortSpec::parse(&json!({"n": 1})).unwrap());
//! assert_eq!(docs[0]["n"], 1);
//!
//! let schema = Schema::parse(&json!({"type": "object", "required": ["n"]})).unwrap();
//! assert_eq!(schema.validate(&json!({})), Err(vec!["$.n: required property is missing".to_string()]));
//!
//! let mut doc = json!({"n": 1});
//! apply_update(&mut doc, &json!({"$set": {"a.b": true}, "$inc": {"n": 1}})).unwrap();
//! assert_eq!(doc, json!({"n": 2, "a": {"b": true}}));
//! ```

pub mod encoding;
pub mod error;
pub mod filter;
pub mod order;
pub mod path;
pub mod schema;
pub mod sort;
pub mod update;

pub use error::{FilterError, SchemaError};
pub use filter::{Bound, Filter, matches};
pub use order::{compare_values, type_rank, values_equal};
pub use path::get_path;
pub use schema::Schema;
pub use sort::{Direction, SortKey, SortSpec, compare, sort_documents};
pub use update::{apply_inc, apply_set, apply_unset, apply_update};

/// Maximum nesting depth accepted in filters, schemas and compared values.
/// Deeper input is rejected (filters, schemas) rather than risking stack exhaustion.
pub const MAX_DEPTH: usize = 64;
