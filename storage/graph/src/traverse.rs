//! Breadth-first traversal and label listings (`GET /api/v1/graph/data`).

use std::collections::{HashMap, HashSet};

use crate::{Direction, Edge, GraphSource, Node};

/// What to return.
#[derive(Debug, Clone, PartialEq)]
pub struct TraversalSpec {
    /// Traverse from this node; `None` lists nodes instead.
    pub start: Option<String>,
    /// Hops from `start` at most.
    pub depth: u32,
    /// Only nodes with this label (the start node is always included).
    pub label: Option<String>,
    /// Only edges with this label.
    pub edge_label: Option<String>,
    /// Which edges a hop follows.
    pub direction: Direction,
    /// Nodes returned at most.
    pub limit: usize,
    /// Edges returned at most.
    pub edge_limit: usize,
}

/// Nodes (with their BFS depth when traversing) and the edges among them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Traversal {
    pub nodes: Vec<(Node, Option<u32>)>,
    pub edges: Vec<Edge>,
    /// A limit cut the answer short.
    pub truncated: bool,
    /// `false` when the start node does not exist.
    pub start_found: bool,
}

/// Runs `spec` against `src`.
pub fn traverse<S: GraphSource>(src: &S, spec: &TraversalSpec) -> Result<Traversal, S::Error> {
    match &spec.start {
        Some(start) => bfs(src, spec, start),
        None => listing(src, spec),
    }
}

fn bfs<S: GraphSource>(src: &S, spec: &TraversalSpec, start: &str) -> Result<Traversal, S::Error> {
    let mut out = Traversal::default();
    let Some(root) = src.node(start)? else { return Ok(out) };
    out.start_found = true;
    let mut depth_of: HashMap<String, u32> = HashMap::from([(root.id.clone(), 0)]);
    let mut frontier = vec![root.id.clone()];
    out.nodes.push((root, Some(0)));
    let mut edge_ids: Vec<String> = Vec::new();
    let mut seen_edges: HashSet<String> = HashSet::new();
    let dirs: &[Direction] = match spec.direction {
        Direction::Both => &[Direction::Out, Direction::In],
        Direction::Out => &[Direction::Out],
        Direction::In => &[Direction::In],
    };
    for d in 0..spec.depth {
        let mut next = Vec::new();
        for id in &frontier {
            let mut adj = Vec::new();
            for dir in dirs {
                src.adjacent(id, *dir, spec.edge_label.as_deref(), &mut |a| {
                    adj.push(a);
                    Ok(true)
                })?;
            }
            for a in adj {
                if seen_edges.contains(&a.edge) {
                    continue;
                }
                if !depth_of.contains_key(&a.other) {
                    if out.nodes.len() >= spec.limit {
                        out.truncated = true;
                        continue;
                    }
                    let Some(n) = src.node(&a.other)? else { continue };
                    if spec.label.as_ref().is_some_and(|l| *l != n.label) {
                        continue;
                    }
                    depth_of.insert(n.id.clone(), d + 1);
                    next.push(n.id.clone());
                    out.nodes.push((n, Some(d + 1)));
                }
                if edge_ids.len() >= spec.edge_limit {
                    out.truncated = true;
                    continue;
                }
                seen_edges.insert(a.edge.clone());
                edge_ids.push(a.edge);
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    for id in edge_ids {
        out.edges.extend(src.edge(&id)?);
    }
    Ok(out)
}

fn listing<S: GraphSource>(src: &S, spec: &TraversalSpec) -> Result<Traversal, S::Error> {
    let mut out = Traversal { start_found: true, ..Traversal::default() };
    let mut truncated = false;
    match &spec.label {
        Some(label) => {
            let mut ids = Vec::new();
            src.label_nodes(label, &mut |id| {
                if ids.len() >= spec.limit {
                    truncated = true;
                    return Ok(false);
                }
                ids.push(id.to_string());
                Ok(true)
            })?;
            for id in ids {
                out.nodes.extend(src.node(&id)?.map(|n| (n, None)));
            }
        }
        None => src.all_nodes(&mut |n| {
            if out.nodes.len() >= spec.limit {
                truncated = true;
                return Ok(false);
            }
            out.nodes.push((n, None));
            Ok(true)
        })?,
    }
    let members: HashSet<&str> = out.nodes.iter().map(|(n, _)| n.id.as_str()).collect();
    let mut edges = Vec::new();
    if spec.label.is_none() && !truncated {
        // Every node is in: every edge qualifies.
        src.all_edges(&mut |e| {
            if spec.edge_label.as_ref().is_some_and(|l| *l != e.label) {
                return Ok(true);
            }
            if edges.len() >= spec.edge_limit {
                truncated = true;
                return Ok(false);
            }
            edges.push(e);
            Ok(true)
        })?;
    } else {
        let mut ids = Vec::new();
        for (n, _) in &out.nodes {
            src.adjacent(&n.id, Direction::Out, spec.edge_label.as_deref(), &mut |a| {
                if members.contains(a.other.as_str()) {
                    if ids.len() >= spec.edge_limit {
                        truncated = true;
                        return Ok(false);
                    }
                    ids.push(a.edge);
                }
                Ok(true)
            })?;
        }
        for id in ids {
            edges.extend(src.edge(&id)?);
        }
    }
    out.edges = edges;
    out.truncated = truncated;
    Ok(out)
}
