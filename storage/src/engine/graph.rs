//! The graph engine (spec 01 graph): labelled nodes and directed labelled edges
//! with JSON properties, stored with adjacency lists so that one hop is a prefix
//! scan of one node's edges. Several graphs may share a group; every key starts
//! with the graph's name.
//!
//! Keys (`g` is the graph name, `\0` separates parts; ids and labels hold no NUL):
//! - `n/<g>\0<id>` → JSON [`NodeRecord`];
//! - `e/<g>\0<id>` → JSON [`EdgeRecord`];
//! - `l/<g>\0<label>\0<node>` → empty (label index);
//! - `o/<g>\0<from>\0<label>\0<edge>` → to-node id (out-adjacency);
//! - `i/<g>\0<to>\0<label>\0<edge>` → from-node id (in-adjacency).
//!
//! Queries run against one RocksDB snapshot through [`tessera_graph`].

use std::collections::HashSet;

use serde_json::Value;

use tessera_api::command::Response;
use tessera_api::error::{ErrorCode, Position, Rejection};
use tessera_api::graph::{
    DataEdge, DataNode, EdgeRecord, GraphOp, GraphQuery, GraphQueryResult, GraphResponse, NewEdge, NewNode, NodeRecord, TraverseDirection,
    validate_graph_name, validate_id, validate_label,
};
use tessera_graph::{Adjacent, Direction, Edge, EvalError, GraphSource, Node, TraversalSpec};

use super::{Answer, Engine, GroupData, QueryCtx, ReadView, Tx, space};
use crate::error::{Result, StorageError};

/// Graph engine.
pub struct GraphEngine;

// ---------------------------------------------------------------- keys

fn key(tag: &[u8], graph: &str, parts: &[&str]) -> Vec<u8> {
    let mut k = Vec::with_capacity(tag.len() + graph.len() + 1 + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    k.extend_from_slice(tag);
    k.extend_from_slice(graph.as_bytes());
    for p in parts {
        k.push(0);
        k.extend_from_slice(p.as_bytes());
    }
    k
}

fn node_key(g: &str, id: &str) -> Vec<u8> {
    key(b"n/", g, &[id])
}

fn edge_key(g: &str, id: &str) -> Vec<u8> {
    key(b"e/", g, &[id])
}

fn label_key(g: &str, label: &str, node: &str) -> Vec<u8> {
    key(b"l/", g, &[label, node])
}

fn out_key(g: &str, e: &EdgeRecord) -> Vec<u8> {
    key(b"o/", g, &[&e.from_node, &e.label, &e.id])
}

fn in_key(g: &str, e: &EdgeRecord) -> Vec<u8> {
    key(b"i/", g, &[&e.to_node, &e.label, &e.id])
}

/// `prefix` followed by the separator: every key under it.
fn under(mut prefix: Vec<u8>) -> Vec<u8> {
    prefix.push(0);
    prefix
}

// ---------------------------------------------------------------- records

fn reject(kind: ErrorCode, message: String) -> Result<Response> {
    Ok(Response::rejected(kind, message))
}

fn node(view: &ReadView<'_>, g: &str, id: &str) -> Result<Option<NodeRecord>> {
    Ok(view.get(&node_key(g, id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn edge(view: &ReadView<'_>, g: &str, id: &str) -> Result<Option<EdgeRecord>> {
    Ok(view.get(&edge_key(g, id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

fn check_node(graph: &str, n: &NewNode) -> Result<(), String> {
    validate_graph_name(graph)?;
    validate_id("node", &n.id)?;
    validate_label(&n.label)
}

fn check_edge(graph: &str, e: &NewEdge) -> Result<(), String> {
    validate_graph_name(graph)?;
    validate_id("edge", &e.id)?;
    validate_id("node", &e.from_node)?;
    validate_id("node", &e.to_node)?;
    validate_label(&e.label)
}

fn put_node(tx: &mut Tx<'_>, g: &str, n: &NewNode, now: i64) -> Result<NodeRecord> {
    let rec = NodeRecord { id: n.id.clone(), label: n.label.clone(), properties: n.properties.clone(), created_at_ms: now };
    tx.put(&node_key(g, &rec.id), &serde_json::to_vec(&rec)?);
    tx.put(&label_key(g, &rec.label, &rec.id), b"");
    Ok(rec)
}

fn put_edge(tx: &mut Tx<'_>, g: &str, e: &NewEdge, now: i64) -> Result<EdgeRecord> {
    let rec = EdgeRecord {
        id: e.id.clone(),
        from_node: e.from_node.clone(),
        to_node: e.to_node.clone(),
        label: e.label.clone(),
        properties: e.properties.clone(),
        created_at_ms: now,
    };
    tx.put(&edge_key(g, &rec.id), &serde_json::to_vec(&rec)?);
    tx.put(&out_key(g, &rec), rec.to_node.as_bytes());
    tx.put(&in_key(g, &rec), rec.from_node.as_bytes());
    Ok(rec)
}

fn remove_edge(tx: &mut Tx<'_>, g: &str, e: &EdgeRecord) {
    tx.delete(&edge_key(g, &e.id));
    tx.delete(&out_key(g, e));
    tx.delete(&in_key(g, e));
}

/// Ids of the edges in one adjacency list of `node`.
fn incident(view: &ReadView<'_>, tag: &[u8], g: &str, node: &str) -> Result<Vec<String>> {
    let prefix = under(key(tag, g, &[node]));
    let mut ids = Vec::new();
    view.scan_prefix(&prefix, |k, _| {
        let rest = &k[prefix.len()..];
        if let Some(p) = rest.iter().position(|b| *b == 0) {
            ids.push(String::from_utf8_lossy(&rest[p + 1..]).into_owned());
        }
        Ok(true)
    })?;
    Ok(ids)
}

fn missing_node(id: &str) -> String {
    format!("node {id} does not exist")
}

impl Engine for GraphEngine {
    const SPACE: u8 = super::space::GRAPH;
    type Op = GraphOp;
    type Query = GraphQuery;
    type Answer = GraphQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &GraphQuery) -> Result<Answer<GraphQueryResult>> {
        self::query(ctx.data, query)
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &GraphOp) -> Result<Response> {
        match op {
            GraphOp::AddNode { graph, node: n } => {
                if let Err(e) = check_node(graph, n) {
                    return reject(ErrorCode::Invalid, e);
                }
                if tx.view().get(&node_key(graph, &n.id))?.is_some() {
                    return reject(ErrorCode::Conflict, format!("node {} already exists", n.id));
                }
                Ok(Response::Graph(GraphResponse::Node(put_node(tx, graph, n, now)?)))
            }
            GraphOp::AddEdge { graph, edge: e } => {
                if let Err(msg) = check_edge(graph, e) {
                    return reject(ErrorCode::Invalid, msg);
                }
                for id in [&e.from_node, &e.to_node] {
                    if tx.view().get(&node_key(graph, id))?.is_none() {
                        return reject(ErrorCode::NotFound, missing_node(id));
                    }
                }
                if tx.view().get(&edge_key(graph, &e.id))?.is_some() {
                    return reject(ErrorCode::Conflict, format!("edge {} already exists", e.id));
                }
                Ok(Response::Graph(GraphResponse::Edge(put_edge(tx, graph, e, now)?)))
            }
            GraphOp::DeleteNode { graph, id } => {
                let Some(rec) = node(tx.view(), graph, id)? else { return reject(ErrorCode::NotFound, missing_node(id)) };
                let mut ids = incident(tx.view(), b"o/", graph, id)?;
                ids.extend(incident(tx.view(), b"i/", graph, id)?);
                let mut removed = HashSet::new();
                for eid in ids {
                    if !removed.insert(eid.clone()) {
                        continue; // a self-loop is in both lists
                    }
                    match edge(tx.view(), graph, &eid)? {
                        Some(e) => remove_edge(tx, graph, &e),
                        None => return Err(StorageError::Corrupt(format!("graph {graph}: adjacency names missing edge {eid}"))),
                    }
                }
                tx.delete(&node_key(graph, id));
                tx.delete(&label_key(graph, &rec.label, id));
                Ok(Response::Graph(GraphResponse::NodeDeleted { edges_removed: removed.len() as u64 }))
            }
            GraphOp::DeleteEdge { graph, id } => match edge(tx.view(), graph, id)? {
                Some(e) => {
                    remove_edge(tx, graph, &e);
                    Ok(Response::Graph(GraphResponse::EdgeDeleted(1)))
                }
                None => Ok(Response::Graph(GraphResponse::EdgeDeleted(0))),
            },
            GraphOp::Batch { graph, nodes, edges } => batch(tx, now, graph, nodes, edges),
        }
    }
}

/// Checks the whole batch before writing any of it.
fn batch(tx: &mut Tx<'_>, now: i64, graph: &str, nodes: &[NewNode], edges: &[NewEdge]) -> Result<Response> {
    let mut new_nodes: HashSet<&str> = HashSet::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if let Err(e) = check_node(graph, n) {
            return reject(ErrorCode::Invalid, format!("nodes[{i}]: {e}"));
        }
        if !new_nodes.insert(&n.id) || tx.view().get(&node_key(graph, &n.id))?.is_some() {
            return reject(ErrorCode::Conflict, format!("nodes[{i}]: node {} already exists", n.id));
        }
    }
    let mut new_edges: HashSet<&str> = HashSet::with_capacity(edges.len());
    let mut known: HashSet<&str> = HashSet::new();
    for (i, e) in edges.iter().enumerate() {
        if let Err(msg) = check_edge(graph, e) {
            return reject(ErrorCode::Invalid, format!("edges[{i}]: {msg}"));
        }
        for id in [e.from_node.as_str(), e.to_node.as_str()] {
            if new_nodes.contains(id) || known.contains(id) {
                continue;
            }
            if tx.view().get(&node_key(graph, id))?.is_none() {
                return reject(ErrorCode::NotFound, format!("edges[{i}]: {}", missing_node(id)));
            }
            known.insert(id);
        }
        if !new_edges.insert(&e.id) || tx.view().get(&edge_key(graph, &e.id))?.is_some() {
            return reject(ErrorCode::Conflict, format!("edges[{i}]: edge {} already exists", e.id));
        }
    }
    for n in nodes {
        put_node(tx, graph, n, now)?;
    }
    for e in edges {
        put_edge(tx, graph, e, now)?;
    }
    Ok(Response::Graph(GraphResponse::Batch { nodes: nodes.len() as u64, edges: edges.len() as u64 }))
}

// ---------------------------------------------------------------- queries

/// One graph of a snapshot, as the traversal and the matcher see it.
struct Source<'a, 'v> {
    view: &'a ReadView<'v>,
    graph: &'a str,
}

impl GraphSource for Source<'_, '_> {
    type Error = StorageError;

    fn node(&self, id: &str) -> Result<Option<Node>> {
        Ok(self.view.get(&node_key(self.graph, id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
    }

    fn edge(&self, id: &str) -> Result<Option<Edge>> {
        Ok(self.view.get(&edge_key(self.graph, id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
    }

    fn label_nodes(&self, label: &str, f: &mut dyn FnMut(&str) -> Result<bool>) -> Result<()> {
        let prefix = under(key(b"l/", self.graph, &[label]));
        self.view.scan_prefix(&prefix, |k, _| f(&String::from_utf8_lossy(&k[prefix.len()..])))
    }

    fn all_nodes(&self, f: &mut dyn FnMut(Node) -> Result<bool>) -> Result<()> {
        self.view.scan_prefix(&under(key(b"n/", self.graph, &[])), |_, v| f(serde_json::from_slice(v)?))
    }

    fn all_edges(&self, f: &mut dyn FnMut(Edge) -> Result<bool>) -> Result<()> {
        self.view.scan_prefix(&under(key(b"e/", self.graph, &[])), |_, v| f(serde_json::from_slice(v)?))
    }

    fn adjacent(&self, node: &str, dir: Direction, label: Option<&str>, f: &mut dyn FnMut(Adjacent) -> Result<bool>) -> Result<()> {
        let dirs: &[&[u8]] = match dir {
            Direction::Out => &[b"o/"],
            Direction::In => &[b"i/"],
            Direction::Both => &[b"o/", b"i/"],
        };
        for tag in dirs {
            let base = under(key(tag, self.graph, &[node]));
            let prefix = match label {
                Some(l) => under([base.as_slice(), l.as_bytes()].concat()),
                None => base.clone(),
            };
            let mut go = true;
            self.view.scan_prefix(&prefix, |k, v| {
                let rest = &k[base.len()..];
                let Some(p) = rest.iter().position(|b| *b == 0) else { return Ok(true) };
                let other = String::from_utf8_lossy(v).into_owned();
                if dir == Direction::Both && **tag == *b"i/" && other == node {
                    return Ok(true); // a self-loop is reported once
                }
                go = f(Adjacent {
                    label: String::from_utf8_lossy(&rest[..p]).into_owned(),
                    edge: String::from_utf8_lossy(&rest[p + 1..]).into_owned(),
                    other,
                })?;
                Ok(go)
            })?;
            if !go {
                break;
            }
        }
        Ok(())
    }
}

/// Answers a graph query from one snapshot of this replica.
pub fn query(data: &GroupData, q: &GraphQuery) -> Result<Answer<GraphQueryResult>> {
    let db = data.db();
    let snapshot = db.snapshot();
    let view = ReadView::at_snapshot(db, &snapshot, data.group, space::GRAPH);
    Ok(Ok(match q {
        GraphQuery::Node { graph, id } => GraphQueryResult::Node(node(&view, graph, id)?),
        GraphQuery::Edge { graph, id } => GraphQueryResult::Edge(edge(&view, graph, id)?),
        GraphQuery::Data { graph, start, depth, label, edge_label, direction, limit, edge_limit } => {
            let spec = TraversalSpec {
                start: start.clone(),
                depth: *depth,
                label: label.clone(),
                edge_label: edge_label.clone(),
                direction: match direction {
                    TraverseDirection::Out => Direction::Out,
                    TraverseDirection::In => Direction::In,
                    TraverseDirection::Both => Direction::Both,
                },
                limit: *limit,
                edge_limit: *edge_limit,
            };
            let t = tessera_graph::traverse(&Source { view: &view, graph }, &spec)?;
            if !t.start_found {
                return Ok(Ok(GraphQueryResult::NoStartNode));
            }
            let nodes =
                t.nodes.into_iter().map(|(n, depth)| DataNode { id: n.id, label: n.label, properties: n.properties, depth }).collect();
            let edges = t
                .edges
                .into_iter()
                .map(|e| DataEdge { id: e.id, from_node: e.from_node, to_node: e.to_node, label: e.label, properties: e.properties })
                .collect();
            GraphQueryResult::Data { nodes, edges, truncated: t.truncated }
        }
        GraphQuery::Pattern { graph, query, params, max_rows } => {
            let opts = tessera_graph::eval::Options { max_rows: *max_rows, ..Default::default() };
            let run = || match tessera_graph::run_query(&Source { view: &view, graph }, query, params, opts) {
                Ok(out) => Ok(Ok(GraphQueryResult::Table {
                    columns: out.columns,
                    rows: out.rows,
                    truncated: out.truncated,
                    work: out.work,
                    plan: out.plan,
                })),
                Err(EvalError::Query(e)) => {
                    let position = e.position.map(|offset| Position::of_offset(query, offset));
                    Ok(Err(Rejection::invalid(e.message).at(position)))
                }
                Err(EvalError::Source(e)) => Err(e),
            };
            // The matcher recurses once per hop; the parser bounds that, and a
            // thread with a large stack makes it safe whatever the caller's stack.
            let run = &run;
            let spawned = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("graph-query".into())
                    .stack_size(QUERY_STACK_BYTES)
                    .spawn_scoped(s, run)
                    .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            });
            return match spawned {
                Ok(result) => result,
                Err(_) => run(),
            };
        }
    }))
}

/// Stack of the thread a pattern query runs on.
const QUERY_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The graph nodes of the data subject `rule` names (its id, or a subject
/// property) and every edge touching them: this engine's part of spec 02's
/// export and erasure. Edges come after the nodes.
pub fn subject_items(
    view: &ReadView<'_>,
    rule: &tessera_api::compliance::SubjectRule,
) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
    let mut nodes: Vec<(String, NodeRecord, u64)> = Vec::new();
    view.scan_prefix(b"n/", |k, v| {
        let rec: NodeRecord = serde_json::from_slice(v)?;
        let props = Value::Object(rec.properties.clone());
        if rec.id == rule.subject_id || rule.matches_object(&props) {
            let graph = String::from_utf8_lossy(&k[2..k.len() - rec.id.len() - 1]).into_owned();
            nodes.push((graph, rec, (k.len() + v.len()) as u64));
        }
        Ok(true)
    })?;
    let mut items = Vec::new();
    let mut edges = Vec::new();
    let mut seen = HashSet::new();
    for (graph, rec, bytes) in &nodes {
        let mut ids = incident(view, b"o/", graph, &rec.id)?;
        ids.extend(incident(view, b"i/", graph, &rec.id)?);
        for eid in ids {
            if seen.insert((graph.clone(), eid.clone()))
                && let Some(e) = edge(view, graph, &eid)?
            {
                let raw = serde_json::to_vec(&e)?;
                edges.push(tessera_api::compliance::SubjectItem {
                        store: "graph".into(),
                        location: graph.clone(),
                        item_id: format!("edge:{}", e.id),
                        data: serde_json::json!({"kind": "edge", "from": e.from_node, "to": e.to_node, "label": e.label, "properties": e.properties}),
                        bytes: (edge_key(graph, &e.id).len() + raw.len()) as u64,
                        at_ms: Some(e.created_at_ms),
                    });
            }
        }
        items.push(tessera_api::compliance::SubjectItem {
            store: "graph".into(),
            location: graph.clone(),
            item_id: format!("node:{}", rec.id),
            data: serde_json::json!({"kind": "node", "label": rec.label, "properties": rec.properties}),
            bytes: *bytes,
            at_ms: Some(rec.created_at_ms),
        });
    }
    items.extend(edges);
    Ok(items)
}

impl crate::subject::SubjectRecords for GraphEngine {
    const STORE: &'static str = "graph";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        subject_items(view, rule)
    }
    /// A node's edges go with it (they are listed as items of their own).
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        for item in items {
            let Some(id) = item.item_id.strip_prefix("node:") else { continue };
            let delete = GraphOp::DeleteNode { graph: item.location.clone(), id: id.to_string() };
            if let Some(r) = crate::subject::refusal(self.apply(tx, now, &delete)?) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {

    use serde_json::{Map, Value, json};

    use super::*;

    fn open() -> (tempfile::TempDir, GroupData) {
        crate::engine::test_support::open_group(2)
    }

    fn apply(data: &GroupData, op: GraphOp) -> Response {
        crate::engine::test_support::apply_op(&GraphEngine, data, space::GRAPH, 5, &op)
    }

    fn props(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn nn(id: &str, label: &str) -> NewNode {
        NewNode { id: id.into(), label: label.into(), properties: props(json!({"name": id})) }
    }

    fn ne(id: &str, from: &str, to: &str, label: &str) -> NewEdge {
        NewEdge { id: id.into(), from_node: from.into(), to_node: to.into(), label: label.into(), properties: Map::new() }
    }

    fn add_node(data: &GroupData, g: &str, id: &str, label: &str) -> Response {
        apply(data, GraphOp::AddNode { graph: g.into(), node: nn(id, label) })
    }

    fn add_edge(data: &GroupData, g: &str, id: &str, from: &str, to: &str) -> Response {
        apply(data, GraphOp::AddEdge { graph: g.into(), edge: ne(id, from, to, "R") })
    }

    fn data(data: &GroupData, g: &str, start: Option<&str>, depth: u32) -> GraphQueryResult {
        let q = GraphQuery::Data {
            graph: g.into(),
            start: start.map(str::to_string),
            depth,
            label: None,
            edge_label: None,
            direction: TraverseDirection::Out,
            limit: 100,
            edge_limit: 100,
        };
        query(data, &q).unwrap().unwrap()
    }

    fn counts(r: &GraphQueryResult) -> (usize, usize) {
        match r {
            GraphQueryResult::Data { nodes, edges, .. } => (nodes.len(), edges.len()),
            other => panic!("{other:?}"),
        }
    }

    fn pattern(data: &GroupData, g: &str, q: &str) -> GraphQueryResult {
        match query(data, &GraphQuery::Pattern { graph: g.into(), query: q.into(), params: Map::new(), max_rows: 100 }).unwrap() {
            Ok(r) => r,
            Err(r) => panic!("{r}"),
        }
    }

    fn rejected(r: &Response) -> Option<ErrorCode> {
        match r {
            Response::Rejected(Rejection { code: kind, .. }) => Some(*kind),
            _ => None,
        }
    }

    #[test]
    fn nodes_edges_and_adjacency() {
        let (_dir, d) = open();
        assert!(matches!(add_node(&d, "g", "a", "P"), Response::Graph(GraphResponse::Node(ref n)) if n.created_at_ms == 5));
        add_node(&d, "g", "b", "P");
        add_node(&d, "g", "c", "Q");
        assert_eq!(rejected(&add_node(&d, "g", "a", "P")), Some(ErrorCode::Conflict));
        assert_eq!(rejected(&add_node(&d, "g", "x/y", "P")), Some(ErrorCode::Invalid));
        assert_eq!(rejected(&add_node(&d, "g", "z", "")), Some(ErrorCode::Invalid));
        assert_eq!(rejected(&add_node(&d, "bad name", "z", "P")), Some(ErrorCode::Invalid));
        assert!(matches!(add_edge(&d, "g", "e1", "a", "b"), Response::Graph(GraphResponse::Edge(_))));
        add_edge(&d, "g", "e2", "b", "c");
        add_edge(&d, "g", "e3", "c", "c");
        assert_eq!(rejected(&add_edge(&d, "g", "e1", "a", "c")), Some(ErrorCode::Conflict));
        assert_eq!(rejected(&add_edge(&d, "g", "e9", "a", "nope")), Some(ErrorCode::NotFound));
        // The out-adjacency of one node is one prefix scan.
        let view = d.space(space::GRAPH);
        let src = Source { view: &view, graph: "g" };
        let mut seen = Vec::new();
        src.adjacent("b", Direction::Both, None, &mut |a| {
            seen.push((a.edge, a.other));
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen, vec![("e2".to_string(), "c".to_string()), ("e1".to_string(), "a".to_string())]);
        assert_eq!(counts(&data(&d, "g", Some("a"), 2)), (3, 2));
        assert_eq!(counts(&data(&d, "g", None, 0)), (3, 3));
        assert!(matches!(data(&d, "g", Some("zz"), 1), GraphQueryResult::NoStartNode));
        // Graphs are separate, also when one name is a prefix of another.
        add_node(&d, "g2", "a", "P");
        assert_eq!(counts(&data(&d, "g2", None, 0)), (1, 0));
        assert_eq!(counts(&data(&d, "g", None, 0)), (3, 3));
        match pattern(&d, "g", "MATCH (a:P)-[:R*1..3]->(b) RETURN count(DISTINCT b)") {
            GraphQueryResult::Table { rows, .. } => assert_eq!(rows, vec![vec![json!(2)]]),
            other => panic!("{other:?}"),
        }
        match pattern(&d, "g", "MATCH (a:P)-[:R]->(b) RETURN a.name ORDER BY a.name") {
            GraphQueryResult::Table { rows, columns, .. } => {
                assert_eq!(columns, vec!["a.name"]);
                assert_eq!(rows, vec![vec![json!("a")], vec![json!("b")]]);
            }
            other => panic!("{other:?}"),
        }
        let bad = GraphQuery::Pattern { graph: "g".into(), query: "MATCH (a RETURN a".into(), params: Map::new(), max_rows: 100 };
        let expected = Position { line: 1, column: 10, offset: Some(9) };
        assert!(matches!(query(&d, &bad).unwrap(), Err(Rejection { code: ErrorCode::Invalid, position: Some(p), .. }) if p == expected));
    }

    #[test]
    fn deleting_a_node_removes_its_edges() {
        let (_dir, d) = open();
        for n in ["a", "b", "c"] {
            add_node(&d, "g", n, "P");
        }
        add_edge(&d, "g", "ab", "a", "b");
        add_edge(&d, "g", "cb", "c", "b");
        add_edge(&d, "g", "bb", "b", "b");
        add_edge(&d, "g", "ac", "a", "c");
        match apply(&d, GraphOp::DeleteNode { graph: "g".into(), id: "b".into() }) {
            Response::Graph(GraphResponse::NodeDeleted { edges_removed }) => assert_eq!(edges_removed, 3),
            other => panic!("{other:?}"),
        }
        assert_eq!(counts(&data(&d, "g", None, 0)), (2, 1));
        assert_eq!(counts(&data(&d, "g", Some("a"), 3)), (2, 1));
        // No adjacency key is left behind.
        let mut left = Vec::new();
        d.space(space::GRAPH)
            .scan_prefix(b"", |k, _| {
                left.push(String::from_utf8_lossy(k).replace('\0', "|"));
                Ok(true)
            })
            .unwrap();
        assert_eq!(left, vec!["e/g|ac", "i/g|c|R|ac", "l/g|P|a", "l/g|P|c", "n/g|a", "n/g|c", "o/g|a|R|ac"]);
        assert_eq!(rejected(&apply(&d, GraphOp::DeleteNode { graph: "g".into(), id: "b".into() })), Some(ErrorCode::NotFound));
        assert_eq!(apply(&d, GraphOp::DeleteEdge { graph: "g".into(), id: "ac".into() }), Response::Graph(GraphResponse::EdgeDeleted(1)));
        assert_eq!(apply(&d, GraphOp::DeleteEdge { graph: "g".into(), id: "ac".into() }), Response::Graph(GraphResponse::EdgeDeleted(0)));
        assert_eq!(counts(&data(&d, "g", None, 0)), (2, 0));
    }

    #[test]
    fn batches_apply_all_or_nothing() {
        let (_dir, d) = open();
        add_node(&d, "g", "old", "P");
        let nodes = vec![nn("n1", "P"), nn("n2", "P")];
        // The second edge names a missing node: nothing is written.
        let bad = GraphOp::Batch {
            graph: "g".into(),
            nodes: nodes.clone(),
            edges: vec![ne("e1", "n1", "n2", "R"), ne("e2", "n2", "ghost", "R")],
        };
        assert_eq!(rejected(&apply(&d, bad)), Some(ErrorCode::NotFound));
        assert_eq!(counts(&data(&d, "g", None, 0)), (1, 0));
        let dup = GraphOp::Batch { graph: "g".into(), nodes: vec![nn("n1", "P"), nn("n1", "P")], edges: vec![] };
        assert_eq!(rejected(&apply(&d, dup)), Some(ErrorCode::Conflict));
        let dup_edge =
            GraphOp::Batch { graph: "g".into(), nodes: vec![], edges: vec![ne("e", "old", "old", "R"), ne("e", "old", "old", "R")] };
        assert_eq!(rejected(&apply(&d, dup_edge)), Some(ErrorCode::Conflict));
        let good = GraphOp::Batch { graph: "g".into(), nodes, edges: vec![ne("e1", "n1", "n2", "R"), ne("e2", "n2", "old", "R")] };
        assert_eq!(apply(&d, good), Response::Graph(GraphResponse::Batch { nodes: 2, edges: 2 }));
        assert_eq!(counts(&data(&d, "g", Some("n1"), 5)), (3, 2));
    }
}
