//! Graph routes (spec 01 graph).
//!
//! A graph lives in the one data group that `graph/<name>` hashes to; the
//! `graph` query parameter or body field names it (default `default`). Node and
//! edge ids are assigned here when absent, so the command is fixed before it is
//! proposed. Writes answer after the leader applied them.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tessera_api::GroupId;
use tessera_api::error::Rejection;
use tessera_api::graph::{
    DataEdge, DataNode, EdgeRecord, GraphOp, GraphQuery, GraphQueryResult, GraphResponse, MAX_BATCH_ITEMS, NewEdge, NewNode, NodeRecord,
    TraverseDirection, validate_graph_name, validate_id, validate_label,
};
use tessera_api::http::iso8601_ms;
use tessera_api::routing::RoutingKey;

use super::{JsonBody, QueryParams, ReadPrefs, require_writer, served_headers};
use crate::cluster::Served;
use crate::cluster::typed::{self, Graph, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id};
use crate::state::AppState;

/// The graph used when a request names none.
pub const DEFAULT_GRAPH: &str = "default";
/// Edges `/graph/data` returns at most.
const MAX_RESULT_EDGES: usize = 200_000;
/// Default `limit` of `/graph/data`.
const DEFAULT_DATA_LIMIT: usize = 1_000;
/// Deepest traversal of `/graph/data`.
const MAX_DEPTH: u32 = 10;
/// Largest body of `POST /api/v1/graph/batch`.
const MAX_BATCH_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The graph routes, merged into the router's table.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .post("/api/v1/graph/nodes", P("write:graph"), create_node)
        .answers(&[201])
        .get("/api/v1/graph/nodes/{id}", P("read:graph"), get_node)
        .delete("/api/v1/graph/nodes/{id}", P("write:graph"), delete_node)
        .post("/api/v1/graph/edges", P("write:graph"), create_edge)
        .answers(&[201])
        .get("/api/v1/graph/edges/{id}", P("read:graph"), get_edge)
        .delete("/api/v1/graph/edges/{id}", P("write:graph"), delete_edge)
        .get("/api/v1/graph/data", P("read:graph"), data)
        .post("/api/v1/graph/query", P("read:graph"), query)
        .returns::<GraphTable>()
        .merge(RouteTable::new().post("/api/v1/graph/batch", P("write:graph"), batch).answers(&[201]).body_limit(MAX_BATCH_BODY_BYTES))
}

// ---------------------------------------------------------------- helpers

/// `?graph=` of GET and DELETE routes.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct GraphParam {
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
}

/// The graph a request names in its body or its `?graph=` (the body wins);
/// each one given must be a valid name.
fn graph_name(body: Option<String>, param: Option<String>) -> Result<String, ApiError> {
    if let Some(p) = &param {
        validate_graph_name(p).map_err(ApiError::BadRequest)?;
    }
    let name = body.or(param).unwrap_or_else(|| DEFAULT_GRAPH.to_string());
    validate_graph_name(&name).map_err(ApiError::BadRequest)?;
    Ok(name)
}

fn group_of(state: &AppState, graph: &str) -> Result<GroupId, ApiError> {
    Ok(state.cluster.group_for(&RoutingKey::Graph(graph))?)
}

/// Proposes a write to the graph's group; a refusal becomes the matching error.
async fn write<T>(
    state: &AppState,
    graph: &str,
    op: GraphOp,
    prefs: &ReadPrefs,
    shape: impl FnOnce(GraphResponse) -> Result<T, GraphResponse>,
) -> Result<Served<T>, ApiError> {
    typed::write_as::<Graph, T>(&*state.cluster, group_of(state, graph)?, op, prefs.consistency, shape).await
}

/// Reads from the graph's group; a refusal becomes the matching error.
async fn read<T>(
    state: &AppState,
    graph: &str,
    q: GraphQuery,
    prefs: &ReadPrefs,
    shape: impl FnOnce(GraphQueryResult) -> Result<T, GraphQueryResult>,
) -> Result<Served<T>, ApiError> {
    let group = group_of(state, graph)?;
    super::within_query_timeout(state, typed::read_as::<Graph, T>(&*state.cluster, group, q, prefs.consistency, prefs.replica, shape)).await
}

/// A read whose rejection is left to the caller.
async fn read_answer(
    state: &AppState,
    graph: &str,
    q: GraphQuery,
    prefs: &ReadPrefs,
) -> Result<Served<Result<GraphQueryResult, Rejection>>, ApiError> {
    typed::ask::<Graph>(&*state.cluster, group_of(state, graph)?, q, prefs.consistency, prefs.replica).await
}

/// `properties` as sent: absent or null is `{}`, anything but an object is refused.
fn properties(v: Option<Value>) -> Result<Map<String, Value>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(ApiError::BadRequest(format!("properties must be a JSON object, not {other}"))),
    }
}

// ---------------------------------------------------------------- answers

/// A node as clients see it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeView {
    id: String,
    label: String,
    properties: Map<String, Value>,
    created_at: String,
    graph: String,
}

fn node_view(graph: &str, n: &NodeRecord) -> NodeView {
    NodeView {
        id: n.id.clone(),
        label: n.label.clone(),
        properties: n.properties.clone(),
        created_at: iso8601_ms(n.created_at_ms),
        graph: graph.to_string(),
    }
}

/// An edge as clients see it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct EdgeView {
    id: String,
    from_node: String,
    to_node: String,
    label: String,
    properties: Map<String, Value>,
    created_at: String,
    graph: String,
}

fn edge_view(graph: &str, e: &EdgeRecord) -> EdgeView {
    EdgeView {
        id: e.id.clone(),
        from_node: e.from_node.clone(),
        to_node: e.to_node.clone(),
        label: e.label.clone(),
        properties: e.properties.clone(),
        created_at: iso8601_ms(e.created_at_ms),
        graph: graph.to_string(),
    }
}

/// Answer of a node's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedNode {
    id: String,
    graph: String,
    deleted: bool,
    /// The edges that touched it, removed with it.
    edges_removed: u64,
}

/// Answer of an edge's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedEdge {
    id: String,
    graph: String,
    deleted: bool,
}

/// Answer of a batch.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BatchAnswer {
    graph: String,
    nodes_created: u64,
    edges_created: u64,
    node_ids: Vec<String>,
    edge_ids: Vec<String>,
}

/// A node of `GET /api/v1/graph/data`, with its depth in a traversal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DataNodeView {
    id: String,
    label: String,
    properties: Map<String, Value>,
    /// Edges from the start node (traversals only).
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<u32>,
}

/// An edge of `GET /api/v1/graph/data`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DataEdgeView {
    id: String,
    from_node: String,
    to_node: String,
    label: String,
    properties: Map<String, Value>,
}

/// Answer of `GET /api/v1/graph/data`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct GraphData {
    graph: String,
    nodes: Vec<DataNodeView>,
    edges: Vec<DataEdgeView>,
    node_count: usize,
    edge_count: usize,
    truncated: bool,
    execution_time_ms: u64,
    /// The traversal's start (traversals only).
    #[serde(skip_serializing_if = "Option::is_none")]
    start_node: Option<String>,
    /// The traversal's depth (traversals only).
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<u32>,
    /// The label asked for, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

/// Answer of a pattern query.
#[derive(Serialize, schemars::JsonSchema)]
pub struct GraphTable {
    graph: String,
    columns: Vec<String>,
    row_count: usize,
    /// One array of values per row, in `columns` order.
    rows: Vec<Vec<Value>>,
    truncated: bool,
    /// The evaluation's plan, one step a line.
    plan: Vec<String>,
    /// Nodes and edges the evaluation visited.
    elements_visited: u64,
    execution_time_ms: u64,
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

// ---------------------------------------------------------------- nodes and edges

/// A node in a request: `{id?, label, properties?}`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct NodeBody {
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::SLASHLESS_ID))]
    id: Option<String>,
    #[schemars(pattern(crate::http::openapi::formats::LABEL))]
    label: String,
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    properties: Option<Value>,
}

impl NodeBody {
    fn into_new(self) -> Result<NewNode, ApiError> {
        if let Some(g) = &self.graph {
            validate_graph_name(g).map_err(ApiError::BadRequest)?;
        }
        let id = self.id.unwrap_or_else(new_id);
        validate_id("node", &id).map_err(ApiError::BadRequest)?;
        validate_label(&self.label).map_err(ApiError::BadRequest)?;
        Ok(NewNode { id, label: self.label, properties: properties(self.properties)? })
    }
}

/// An edge in a request: `{id?, from_node, to_node, label, properties?}`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct EdgeBody {
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::SLASHLESS_ID))]
    id: Option<String>,
    #[serde(alias = "from")]
    #[schemars(pattern(crate::http::openapi::formats::SLASHLESS_ID))]
    from_node: String,
    #[serde(alias = "to")]
    #[schemars(pattern(crate::http::openapi::formats::SLASHLESS_ID))]
    to_node: String,
    #[schemars(pattern(crate::http::openapi::formats::LABEL))]
    label: String,
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    properties: Option<Value>,
}

impl EdgeBody {
    fn into_new(self) -> Result<NewEdge, ApiError> {
        let id = self.id.unwrap_or_else(new_id);
        validate_id("edge", &id).map_err(ApiError::BadRequest)?;
        validate_id("node", &self.from_node).map_err(ApiError::BadRequest)?;
        validate_id("node", &self.to_node).map_err(ApiError::BadRequest)?;
        validate_label(&self.label).map_err(ApiError::BadRequest)?;
        Ok(NewEdge { id, from_node: self.from_node, to_node: self.to_node, label: self.label, properties: properties(self.properties)? })
    }
}

/// `POST /api/v1/graph/nodes {label, properties?, id?, graph?}` → 201 with the node.
pub async fn create_node(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<GraphParam>,
    JsonBody(mut body): JsonBody<NodeBody>,
) -> Result<(StatusCode, HeaderMap, Json<NodeView>), ApiError> {
    require_writer(&caller)?;
    let graph = graph_name(body.graph.take(), p.graph)?;
    let node = body.into_new()?;
    let op = GraphOp::AddNode { graph: graph.clone(), node };
    let served = write(&state, &graph, op, &prefs, shape!(GraphResponse::Node)).await?;
    Ok((StatusCode::CREATED, served_headers(&served), Json(node_view(&graph, &served.value))))
}

/// `POST /api/v1/graph/edges {from_node, to_node, label, properties?, id?, graph?}`
/// → 201 with the edge; 404 when either node does not exist.
pub async fn create_edge(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<GraphParam>,
    JsonBody(mut body): JsonBody<EdgeBody>,
) -> Result<(StatusCode, HeaderMap, Json<EdgeView>), ApiError> {
    require_writer(&caller)?;
    let graph = graph_name(body.graph.take(), p.graph)?;
    let edge = body.into_new()?;
    let op = GraphOp::AddEdge { graph: graph.clone(), edge };
    let served = write(&state, &graph, op, &prefs, shape!(GraphResponse::Edge)).await?;
    Ok((StatusCode::CREATED, served_headers(&served), Json(edge_view(&graph, &served.value))))
}

/// `GET /api/v1/graph/nodes/{id}?graph=`.
pub async fn get_node(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<GraphParam>,
) -> Result<(HeaderMap, Json<NodeView>), ApiError> {
    let graph = graph_name(None, p.graph)?;
    let q = GraphQuery::Node { graph: graph.clone(), id: id.clone() };
    let served = read(&state, &graph, q, &prefs, shape!(GraphQueryResult::Node)).await?;
    let headers = served_headers(&served);
    let n = served.value.ok_or_else(|| ApiError::NotFound(format!("node {id} does not exist in graph {graph}")))?;
    Ok((headers, Json(node_view(&graph, &n))))
}

/// `GET /api/v1/graph/edges/{id}?graph=`.
pub async fn get_edge(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<GraphParam>,
) -> Result<(HeaderMap, Json<EdgeView>), ApiError> {
    let graph = graph_name(None, p.graph)?;
    let q = GraphQuery::Edge { graph: graph.clone(), id: id.clone() };
    let served = read(&state, &graph, q, &prefs, shape!(GraphQueryResult::Edge)).await?;
    let headers = served_headers(&served);
    let e = served.value.ok_or_else(|| ApiError::NotFound(format!("edge {id} does not exist in graph {graph}")))?;
    Ok((headers, Json(edge_view(&graph, &e))))
}

/// `DELETE /api/v1/graph/nodes/{id}?graph=`: the node and every edge touching it, atomically.
pub async fn delete_node(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<GraphParam>,
) -> Result<Json<DeletedNode>, ApiError> {
    require_writer(&caller)?;
    let graph = graph_name(None, p.graph)?;
    let op = GraphOp::DeleteNode { graph: graph.clone(), id: id.clone() };
    let edges_removed = write(&state, &graph, op, &prefs, shape!(GraphResponse::NodeDeleted { edges_removed })).await?.value;
    Ok(Json(DeletedNode { id, graph, deleted: true, edges_removed }))
}

/// `DELETE /api/v1/graph/edges/{id}?graph=`.
pub async fn delete_edge(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<GraphParam>,
) -> Result<Json<DeletedEdge>, ApiError> {
    require_writer(&caller)?;
    let graph = graph_name(None, p.graph)?;
    let op = GraphOp::DeleteEdge { graph: graph.clone(), id: id.clone() };
    match write(&state, &graph, op, &prefs, shape!(GraphResponse::EdgeDeleted)).await?.value {
        0 => Err(ApiError::NotFound(format!("edge {id} does not exist in graph {graph}"))),
        _ => Ok(Json(DeletedEdge { id, graph, deleted: true })),
    }
}

/// Body of `POST /api/v1/graph/batch`.
#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(extend("anyOf" = [
    {"required": ["nodes"], "properties": {"nodes": {"minItems": 1}}},
    {"required": ["edges"], "properties": {"edges": {"minItems": 1}}},
]))]
pub struct BatchBody {
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
    #[serde(default)]
    nodes: Vec<NodeBody>,
    #[serde(default)]
    edges: Vec<EdgeBody>,
}

/// `POST /api/v1/graph/batch {nodes, edges, graph?}`: one command, all or nothing
/// (edges may name the batch's nodes) → 201 with the ids.
pub async fn batch(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<GraphParam>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<(StatusCode, HeaderMap, Json<BatchAnswer>), ApiError> {
    require_writer(&caller)?;
    let graph = graph_name(body.graph, p.graph)?;
    let total = body.nodes.len() + body.edges.len();
    if total == 0 {
        return Err(ApiError::BadRequest("a batch needs nodes or edges".into()));
    }
    if total > MAX_BATCH_ITEMS {
        return Err(ApiError::BadRequest(format!("a batch holds at most {MAX_BATCH_ITEMS} nodes and edges, got {total}")));
    }
    let nodes = body
        .nodes
        .into_iter()
        .enumerate()
        .map(|(i, n)| n.into_new().map_err(|e| ApiError::BadRequest(format!("nodes[{i}]: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let edges = body
        .edges
        .into_iter()
        .enumerate()
        .map(|(i, e)| e.into_new().map_err(|e| ApiError::BadRequest(format!("edges[{i}]: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let node_ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
    let edge_ids: Vec<String> = edges.iter().map(|e| e.id.clone()).collect();
    let op = GraphOp::Batch { graph: graph.clone(), nodes, edges };
    let served = write(&state, &graph, op, &prefs, shape!(GraphResponse::Batch { nodes, edges })).await?;
    let headers = served_headers(&served);
    let (nodes, edges) = served.value;
    Ok((StatusCode::CREATED, headers, Json(BatchAnswer { graph, nodes_created: nodes, edges_created: edges, node_ids, edge_ids })))
}

// ---------------------------------------------------------------- reads

/// Query of `GET /api/v1/graph/data`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct DataParams {
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
    label: Option<String>,
    start_node: Option<String>,
    /// With `start_node` only: how far to traverse (default 1).
    #[schemars(range(max = 10))]
    depth: Option<u32>,
    edge_label: Option<String>,
    #[schemars(pattern(r"^([Oo][Uu][Tt]|[Ii][Nn]|[Bb][Oo][Tt][Hh])$"))]
    direction: Option<String>,
    /// At most the router's `query_limits.max_result_rows` (default 100000).
    #[schemars(range(min = 1, max = 100000))]
    limit: Option<usize>,
}

fn data_node_view(n: &DataNode) -> DataNodeView {
    DataNodeView { id: n.id.clone(), label: n.label.clone(), properties: n.properties.clone(), depth: n.depth }
}

fn data_edge_view(e: &DataEdge) -> DataEdgeView {
    DataEdgeView {
        id: e.id.clone(),
        from_node: e.from_node.clone(),
        to_node: e.to_node.clone(),
        label: e.label.clone(),
        properties: e.properties.clone(),
    }
}

/// `GET /api/v1/graph/data?graph=&label=&start_node=&depth=&edge_label=&direction=&limit=`:
/// with `start_node`, a breadth-first traversal to `depth` (default 1) with each
/// node's depth; otherwise the nodes (of `label`) and the edges among them.
pub async fn data(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<DataParams>,
) -> Result<(HeaderMap, Json<GraphData>), ApiError> {
    let started = Instant::now();
    let graph = graph_name(None, p.graph)?;
    let label = p.label.filter(|l| !l.is_empty());
    let edge_label = p.edge_label.filter(|l| !l.is_empty());
    let start = p.start_node.filter(|s| !s.is_empty());
    if start.is_none() && p.depth.is_some() {
        return Err(ApiError::BadRequest("depth needs start_node (the node to traverse from)".into()));
    }
    let depth = p.depth.unwrap_or(1);
    if depth > MAX_DEPTH {
        return Err(ApiError::BadRequest(format!("depth is at most {MAX_DEPTH}")));
    }
    let direction = match p.direction.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("out" | "outgoing") => TraverseDirection::Out,
        Some("in" | "incoming") => TraverseDirection::In,
        Some("both" | "any") => TraverseDirection::Both,
        Some(other) => return Err(ApiError::BadRequest(format!("direction must be out, in or both, not {other:?}"))),
    };
    // Nodes returned at most (spec limit `max_result_rows`).
    let max_rows = state.config.query_limits.max_result_rows;
    let limit = p.limit.unwrap_or(DEFAULT_DATA_LIMIT.min(max_rows));
    if limit == 0 || limit > max_rows {
        return Err(ApiError::BadRequest(format!("limit is 1 to {max_rows}")));
    }
    let q = GraphQuery::Data {
        graph: graph.clone(),
        start: start.clone(),
        depth,
        label: label.clone(),
        edge_label,
        direction,
        limit,
        edge_limit: MAX_RESULT_EDGES,
    };
    // No start node is an answer of its own: `None`.
    let data = |answer| match answer {
        GraphQueryResult::Data { nodes, edges, truncated } => Ok(Some((nodes, edges, truncated))),
        GraphQueryResult::NoStartNode => Ok(None),
        other => Err(other),
    };
    let served = read(&state, &graph, q, &prefs, data).await?;
    let headers = served_headers(&served);
    match served.value {
        Some((nodes, edges, truncated)) => {
            let body = GraphData {
                graph,
                nodes: nodes.iter().map(data_node_view).collect(),
                edges: edges.iter().map(data_edge_view).collect(),
                node_count: nodes.len(),
                edge_count: edges.len(),
                truncated,
                execution_time_ms: elapsed_ms(started),
                depth: start.is_some().then_some(depth),
                start_node: start,
                label,
            };
            Ok((headers, Json(body)))
        }
        None => Err(ApiError::NotFound(format!("start node {} does not exist in graph {graph}", start.unwrap_or_default()))),
    }
}

/// Body of `POST /api/v1/graph/query`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct QueryBody {
    #[serde(default)]
    #[schemars(pattern(crate::http::openapi::formats::GRAPH))]
    graph: Option<String>,
    #[schemars(pattern(r"\S"))]
    query: String,
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    params: Option<Value>,
}

/// `POST /api/v1/graph/query {query, params?, graph?}`: a pattern query →
/// `{columns, rows, row_count, truncated, plan, elements_visited, execution_time_ms}`;
/// a query that does not parse or evaluate is a 400 with its `position`, `line`
/// and `column`.
pub async fn query(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<GraphParam>,
    JsonBody(body): JsonBody<QueryBody>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let graph = graph_name(body.graph, p.graph)?;
    if body.query.trim().is_empty() {
        return Err(ApiError::BadRequest("query is empty".into()));
    }
    let params = match body.params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ApiError::BadRequest("params must be a JSON object of name → value".into())),
    };
    let q = GraphQuery::Pattern {
        graph: graph.clone(),
        query: body.query.clone(),
        params,
        max_rows: state.config.query_limits.max_result_rows,
    };
    let served = read_answer(&state, &graph, q, &prefs).await?;
    let headers = served_headers(&served);
    let table = shape!(GraphQueryResult::Table { columns, rows, truncated, work, plan });
    match served.value.map(|answer| typed::pick(answer, table)) {
        Ok(picked) => {
            let (columns, rows, truncated, work, plan) = picked?;
            let body = GraphTable {
                graph,
                columns,
                row_count: rows.len(),
                rows,
                truncated,
                plan,
                elements_visited: work,
                execution_time_ms: elapsed_ms(started),
            };
            Ok((headers, Json(body)).into_response())
        }
        // Refused with the replica's headers; a parse error says where.
        Err(r) => Ok((headers, ApiError::from(r)).into_response()),
    }
}
