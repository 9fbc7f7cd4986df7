//! Vector store operations and results (spec 03 part B).

use serde::{Deserialize, Serialize};

/// Vector writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorOp {}

/// Vector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorQuery {}

/// Results of vector writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorResponse {}

/// Results of vector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VectorQueryResult {}
