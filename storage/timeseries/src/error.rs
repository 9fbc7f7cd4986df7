//! Error type; messages are client-facing (HTTP 400) except `CorruptChunk`.

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TsError {
    /// A duration string such as `"5m"` could not be parsed.
    #[error("invalid duration '{input}': {reason}")]
    InvalidDuration { input: String, reason: String },
    /// A timestamp could not be parsed or is out of range.
    #[error("invalid timestamp {input}: {reason}")]
    InvalidTimestamp { input: String, reason: String },
    /// Unknown aggregate function or malformed aggregation object.
    #[error("invalid aggregation: {0}")]
    InvalidAggregation(String),
    /// Malformed retention policy.
    #[error("invalid retention policy: {0}")]
    InvalidPolicy(String),
    /// The bytes are not a valid chunk (truncated, bad header, trailing data...).
    #[error("corrupt time-series chunk: {0}")]
    CorruptChunk(String),
    /// A chunk holds at most `u32::MAX` points.
    #[error("time-series chunk is full")]
    ChunkFull,
}
