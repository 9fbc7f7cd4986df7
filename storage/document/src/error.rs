//! Error types. Every message is meant to be shown to the client as-is (HTTP 400).

use thiserror::Error;

/// A filter, sort specification or update document could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    /// An operator name (starting with `$`) that is not supported.
    #[error("unknown operator '{0}'")]
    UnknownOperator(String),
    /// Structurally malformed filter (wrong operand type, bad path, ...).
    #[error("invalid filter: {0}")]
    Invalid(String),
    /// `$regex` pattern or `$options` that does not compile.
    #[error("invalid regular expression '{pattern}': {reason}")]
    Regex { pattern: String, reason: String },
    /// Malformed sort specification.
    #[error("invalid sort: {0}")]
    Sort(String),
    /// Update that cannot be applied (bad path, non-numeric `$inc`, ...).
    #[error("invalid update: {0}")]
    Update(String),
}

/// A validation schema could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid schema at {path}: {message}")]
pub struct SchemaError {
    /// Location inside the schema document, e.g. `$.properties.age`.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}
