//! Graph store operations and results (spec 01, graph).
//!
//! A graph lives in the one data group its name hashes to (`graph/<name>` on the
//! ring); ids are chosen by the router before proposing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest accepted graph name, node or edge id, and label.
pub const MAX_NAME_BYTES: usize = 256;
/// Nodes plus edges in one batch at most.
pub const MAX_BATCH_ITEMS: usize = 50_000;

/// A stored node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub id: String,
    pub label: String,
    pub properties: Map<String, Value>,
    pub created_at_ms: i64,
}

/// A stored edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeRecord {
    pub id: String,
    pub from_node: String,
    pub to_node: String,
    pub label: String,
    pub properties: Map<String, Value>,
    pub created_at_ms: i64,
}

/// A node to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewNode {
    pub id: String,
    pub label: String,
    pub properties: Map<String, Value>,
}

/// An edge to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEdge {
    pub id: String,
    pub from_node: String,
    pub to_node: String,
    pub label: String,
    pub properties: Map<String, Value>,
}

/// Graph writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GraphOp {
    /// Creates a node; rejected as a conflict if the id is taken.
    AddNode { graph: String, node: NewNode },
    /// Creates an edge; both nodes must exist (rejected as not found otherwise).
    AddEdge { graph: String, edge: NewEdge },
    /// Removes a node and every edge touching it (`Graph(NodeDeleted)`).
    DeleteNode { graph: String, id: String },
    /// Removes one edge (`Deleted(0 | 1)`).
    DeleteEdge { graph: String, id: String },
    /// Creates nodes, then edges, all or nothing; edges may use the batch's nodes.
    Batch { graph: String, nodes: Vec<NewNode>, edges: Vec<NewEdge> },
}

/// Which edges a traversal follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TraverseDirection {
    Out,
    In,
    Both,
}

/// Graph reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GraphQuery {
    Node {
        graph: String,
        id: String,
    },
    Edge {
        graph: String,
        id: String,
    },
    /// `GET /graph/data`: a traversal from `start` to `depth`, or the nodes (of
    /// `label`) and the edges among them.
    Data {
        graph: String,
        start: Option<String>,
        depth: u32,
        label: Option<String>,
        edge_label: Option<String>,
        direction: TraverseDirection,
        limit: usize,
        edge_limit: usize,
    },
    /// A pattern query (`POST /graph/query`).
    Pattern {
        graph: String,
        query: String,
        params: Map<String, Value>,
        max_rows: usize,
    },
}

/// Results of graph writes (others answer `Deleted` or `Rejected`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GraphResponse {
    Node(NodeRecord),
    Edge(EdgeRecord),
    NodeDeleted {
        edges_removed: u64,
    },
    Batch {
        nodes: u64,
        edges: u64,
    },
    /// How many edges a delete removed (0 or 1).
    EdgeDeleted(u64),
}

/// A node of a `Data` answer, with its BFS depth when traversing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataNode {
    pub id: String,
    pub label: String,
    pub properties: Map<String, Value>,
    pub depth: Option<u32>,
}

/// An edge of a `Data` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataEdge {
    pub id: String,
    pub from_node: String,
    pub to_node: String,
    pub label: String,
    pub properties: Map<String, Value>,
}

/// Results of graph reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GraphQueryResult {
    Node(Option<NodeRecord>),
    Edge(Option<EdgeRecord>),
    Data {
        nodes: Vec<DataNode>,
        edges: Vec<DataEdge>,
        truncated: bool,
    },
    /// The traversal's start node does not exist.
    NoStartNode,
    Table {
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
        truncated: bool,
        work: u64,
        plan: Vec<String>,
    },
}

/// Graph names: 1 to 128 bytes of letters, digits, `_`, `-` and `.`.
pub fn validate_graph_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return Err(format!("invalid graph name {name:?}: 1 to 128 letters, digits, '_', '-' or '.'"));
    }
    Ok(())
}

/// Node and edge ids: 1 to [`MAX_NAME_BYTES`] bytes, no NUL or `/`.
pub fn validate_id(what: &str, id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_NAME_BYTES || id.bytes().any(|b| b == 0 || b == b'/') {
        return Err(format!("invalid {what} id {id:?}: 1 to {MAX_NAME_BYTES} bytes, no '/' or NUL"));
    }
    Ok(())
}

/// Labels: 1 to [`MAX_NAME_BYTES`] bytes, no NUL.
pub fn validate_label(label: &str) -> Result<(), String> {
    if label.is_empty() || label.len() > MAX_NAME_BYTES || label.contains('\0') {
        return Err(format!("invalid label {label:?}: 1 to {MAX_NAME_BYTES} bytes, no NUL"));
    }
    Ok(())
}
