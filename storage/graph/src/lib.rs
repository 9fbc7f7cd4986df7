//! Tessera graph model: pure logic over an abstract adjacency store.
//!
//! * [`GraphSource`]: what a store offers — node and edge records by id, the ids
//!   of a label, and the adjacency of one node (a prefix scan in RocksDB).
//! * [`traverse`]: breadth-first traversal to a depth, and label listings.
//! * [`parse`] / [`query`]: a small Cypher-like language,
//!   `MATCH (a:Person {name: 'x'})-[:KNOWS*1..3]->(b) WHERE b.age > 30 RETURN b.name LIMIT 10`,
//!   parsed by a hand-written recursive-descent parser and evaluated by a
//!   backtracking matcher that starts from the most selective node pattern.
//! * [`mem::MemGraph`]: an in-memory source for tests.
//!
//! Nothing here panics on any input; malformed queries are reported with their
//! position ([`QueryError`]).

pub mod ast;
pub mod eval;
pub mod mem;
pub mod parse;
pub mod traverse;
pub mod value;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use eval::{QueryOutput, run_query};
pub use parse::parse;
pub use traverse::{Traversal, TraversalSpec, traverse};

/// A node as the matcher sees it (the stored record may carry more fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub label: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// A directed, labelled edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub id: String,
    pub from_node: String,
    pub to_node: String,
    pub label: String,
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// Which adjacency of a node to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    /// Edges leaving the node.
    Out,
    /// Edges arriving at the node.
    In,
    /// Both (a self-loop is reported once).
    Both,
}

/// One adjacency entry: the edge, its label and the node at its other end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjacent {
    pub edge: String,
    pub label: String,
    pub other: String,
}

/// Read access to one graph. Scans call `f` until it returns `Ok(false)`.
pub trait GraphSource {
    type Error;

    fn node(&self, id: &str) -> Result<Option<Node>, Self::Error>;
    fn edge(&self, id: &str) -> Result<Option<Edge>, Self::Error>;
    /// Ids of the nodes with `label`, in id order.
    fn label_nodes(&self, label: &str, f: &mut dyn FnMut(&str) -> Result<bool, Self::Error>) -> Result<(), Self::Error>;
    /// Every node, in id order.
    fn all_nodes(&self, f: &mut dyn FnMut(Node) -> Result<bool, Self::Error>) -> Result<(), Self::Error>;
    /// Every edge, in id order.
    fn all_edges(&self, f: &mut dyn FnMut(Edge) -> Result<bool, Self::Error>) -> Result<(), Self::Error>;
    /// The edges of `node` in one direction (`Out` or `In`), only those with
    /// `label` when given, in (label, edge id) order.
    fn adjacent(
        &self,
        node: &str,
        dir: Direction,
        label: Option<&str>,
        f: &mut dyn FnMut(Adjacent) -> Result<bool, Self::Error>,
    ) -> Result<(), Self::Error>;
}

/// A query that cannot be parsed or evaluated; `position` is the 0-based
/// character offset in the query text where the problem was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub message: String,
    pub position: Option<usize>,
}

impl QueryError {
    pub fn at(position: usize, message: impl Into<String>) -> Self {
        QueryError { message: message.into(), position: Some(position) }
    }

    pub fn new(message: impl Into<String>) -> Self {
        QueryError { message: message.into(), position: None }
    }
}

/// Evaluation failed: the query was wrong, or the source failed.
#[derive(Debug, thiserror::Error)]
pub enum EvalError<E> {
    #[error("{0}")]
    Query(#[from] QueryError),
    #[error("graph source: {0:?}")]
    Source(E),
}
