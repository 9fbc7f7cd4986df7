//! Errors reported by the vector index.

use thiserror::Error;

/// Everything that can go wrong when building or querying an index.
///
/// All variants describe bad input, exhausted capacity or an unusable link
/// checkpoint; the index is left
/// unchanged when an operation returns an error.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum VectorError {
    /// A vector's length differs from the index dimension.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch { expected: usize, got: usize },
    /// A component is NaN or infinite.
    #[error("vector component {index} is not finite")]
    NonFinite { index: usize },
    /// Cosine similarity is undefined for the all-zero vector.
    #[error("zero vector cannot be normalized for the cosine metric")]
    ZeroVector,
    /// Index construction parameters are out of range.
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    /// The index holds the maximum number of graph nodes (`u32::MAX`).
    #[error("index capacity exceeded")]
    CapacityExceeded,
    /// A link checkpoint that does not fit the index it should restore.
    #[error("invalid link checkpoint: {0}")]
    InvalidCheckpoint(String),
}
