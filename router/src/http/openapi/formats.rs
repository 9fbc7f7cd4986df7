//! The formats of names and ids the router accepts, as OpenAPI schemas: each
//! pattern states exactly what the handler's check accepts, so a client
//! generated from the document never builds a request the router refuses as
//! malformed, nor one the document forbids that the router would take. A limit
//! in bytes on a Unicode string cannot be a pattern; the description states it.
//!
//! The request types name these in `#[schemars(...)]` attributes, and
//! [`path_parameter`] gives the path parameters of every route their schema.
//! CI's schemathesis run (tests/contract/) checks each against the router.

use serde_json::{Value, json};

/// Stream channels, consumer groups and metrics: 1 to 200 of `A-Z a-z 0-9 _ . : -`.
pub const STREAM_NAME: &str = r"^[A-Za-z0-9_.:-]{1,200}$";
/// Channel names the streaming routes take for themselves.
pub const RESERVED_CHANNELS: [&str; 4] = ["channels", "publish", "cdc", "retention"];
/// SQL databases (and the `database` of every model that has one): 1 to 64 of `A-Z a-z 0-9 _ -`.
pub const DATABASE: &str = r"^[A-Za-z0-9_-]{1,64}$";
/// Vector collections: 1 to 64 of `A-Z a-z 0-9 _ - .`, starting with a letter or digit.
pub const VECTOR_COLLECTION: &str = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";
/// Document collections: 1 to 256 bytes of `A-Z a-z 0-9 _ - .` (not `collections`).
pub const DOCUMENT_COLLECTION: &str = r"^[A-Za-z0-9_.-]{1,256}$";
/// Graphs: 1 to 128 of `A-Z a-z 0-9 _ - .`.
pub const GRAPH: &str = r"^[A-Za-z0-9_.-]{1,128}$";
/// Graph node and edge ids, document ids: 1 to 256 bytes without `/` or NUL.
pub const SLASHLESS_ID: &str = r"^[^/\u0000]+$";
/// Labels: 1 to 256 bytes without NUL.
pub const LABEL: &str = r"^[^\u0000]+$";
/// Vector record ids: 1 to 512 bytes without control characters.
pub const VECTOR_RECORD_ID: &str = r"^[^\u0000-\u001f\u007f-\u009f]+$";
/// A dotted field path (`address.city`): non-empty segments, no NUL, at most 256 bytes.
pub const FIELD_PATH: &str = r"^[^.\u0000]+(\.[^.\u0000]+)*$";
/// Positive durations: `<number><unit>` components (`ms`, `s`, `m`, `h`, `d`,
/// `w`), e.g. `7d` or `1h30m` (the router also takes fractions and any case).
pub const DURATION: &str = r"^[1-9][0-9]{0,5}(ms|s|m|h|d|w)( ?[1-9][0-9]{0,5}(ms|s|m|h|d|w)){0,3}$";
/// Buckets (S3's rule): lower-case letters, digits, `-` and `.`, 3 to 63, starting
/// and ending with a letter or digit, no `..` (and not shaped like an IPv4 address).
pub const BUCKET: &str = r"^[a-z0-9](\.?[a-z0-9-]){0,60}\.?[a-z0-9]$";
/// Roles: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub const ROLE: &str = r"^[A-Za-z0-9_-]{1,64}$";
/// Vault policies: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub const VAULT_POLICY: &str = r"^[A-Za-z0-9._-]{1,64}$";
/// Vault secret paths: `/`-separated segments of `A-Z a-z 0-9 . _ -`, none
/// empty, `.` or `..` (stated as segments not starting with `.`), 1 to 512 bytes.
pub const VAULT_PATH: &str = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}){0,6}$";
/// Backup ids: 1 to 64 of `A-Z a-z 0-9 -`.
pub const BACKUP_ID: &str = r"^[A-Za-z0-9-]{1,64}$";

/// A string schema with `pattern`.
pub fn string(pattern: &str) -> Value {
    json!({"type": "string", "pattern": pattern})
}

/// The schema of path parameter `name` of route `template`.
pub fn path_parameter(template: &str, name: &str) -> Value {
    let under = |prefix: &str| template.starts_with(prefix);
    match name {
        "channel" if under("/api/v1/streaming/") => {
            json!({"type": "string", "pattern": STREAM_NAME, "not": {"enum": RESERVED_CHANNELS}})
        }
        "group" if under("/api/v1/streaming/") => string(STREAM_NAME),
        "name" if under("/api/v1/timeseries/") => string(STREAM_NAME),
        "database" => string(DATABASE),
        "name" if under("/api/v1/vector/") || under("/api/v1/admin/vectors/") => string(VECTOR_COLLECTION),
        "id" if under("/api/v1/vector/") => string(VECTOR_RECORD_ID),
        "name" if under("/api/v1/documents/") => {
            json!({"type": "string", "pattern": DOCUMENT_COLLECTION, "not": {"enum": ["collections"]}})
        }
        "id" if under("/api/v1/documents/") || under("/api/v1/graph/") => string(SLASHLESS_ID),
        "field" if under("/api/v1/documents/") => string(FIELD_PATH),
        "bucket" => json!({"type": "string", "pattern": BUCKET, "minLength": 3, "maxLength": 63}),
        "name" if under("/api/v1/admin/roles/") => string(ROLE),
        "name" if under("/api/v1/admin/vault/policies/") => string(VAULT_POLICY),
        "path" if under("/api/v1/admin/vault/secrets/") => json!({"type": "string", "pattern": VAULT_PATH, "maxLength": 512}),
        "backup_id" => string(BACKUP_ID),
        "ip" => json!({"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}),
        "node_id" | "group_id" => json!({"type": "integer", "format": "int64", "minimum": 0}),
        _ => json!({"type": "string"}),
    }
}

/// The aggregate functions of a time-series query.
const TS_FUNCTIONS: &str = r"^(avg|sum|min|max|count|first|last|stddev|variance|percentile_[0-9]{1,2})$";

/// `schema_with` of a time-series aggregation: a function name, or an object
/// naming the function and optionally a bucket `interval` and a rolling `window`.
pub fn ts_aggregation(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let function = json!({"type": "string", "pattern": TS_FUNCTIONS});
    let duration = json!({"type": "string", "pattern": DURATION});
    schemars::json_schema!({
        "nullable": true,
        "anyOf": [
            function,
            {"type": "object", "properties": {"function": function, "interval": duration, "window": duration}, "required": ["function"]},
        ],
    })
}

/// `schema_with` of a point in time: RFC 3339, a date, or epoch seconds or milliseconds.
pub fn timestamp(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date"},
        {"type": "integer", "format": "int64"},
        {"type": "number", "minimum": -9.2e18, "maximum": 9.2e18, "exclusiveMinimum": true, "exclusiveMaximum": true},
    ]})
}

/// `schema_with` of an optional point in time (absent or null: unbounded).
pub fn optional_timestamp(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = timestamp(generator);
    schema.insert("nullable".into(), true.into());
    schema
}

/// Vector metrics, in any case.
pub const VECTOR_METRIC: &str = r"^([Cc][Oo][Ss][Ii][Nn][Ee]|[Ll]2|[Dd][Oo][Tt])$";

/// `schema_with` of a vector record id: a string, or an integer written as one.
pub fn vector_record_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [{"type": "string", "pattern": VECTOR_RECORD_ID}, {"type": "integer"}]})
}

/// `schema_with` of an IPv4 or IPv6 address.
pub fn ip_address(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]})
}

/// `schema_with` of an optional duration given as a string (`"90s"`, `"7d"`)
/// or whole seconds (null: the default).
pub fn duration_or_seconds(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"nullable": true, "anyOf": [
        {"type": "string", "pattern": DURATION},
        {"type": "integer", "minimum": 0, "maximum": i64::MAX / 1000},
    ]})
}
