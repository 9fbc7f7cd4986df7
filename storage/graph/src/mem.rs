//! An in-memory [`GraphSource`] for tests and examples.

use std::collections::BTreeMap;
use std::convert::Infallible;

use serde_json::{Map, Value};

use crate::{Adjacent, Direction, Edge, GraphSource, Node};

/// A graph held in ordered maps, with the same adjacency order as the store.
#[derive(Debug, Clone, Default)]
pub struct MemGraph {
    nodes: BTreeMap<String, Node>,
    edges: BTreeMap<String, Edge>,
}

fn props(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl MemGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a node; `properties` should be a JSON object.
    pub fn node(&mut self, id: &str, label: &str, properties: Value) -> &mut Self {
        self.nodes.insert(id.into(), Node { id: id.into(), label: label.into(), properties: props(properties) });
        self
    }

    /// Adds (or replaces) an edge.
    pub fn edge(&mut self, id: &str, from: &str, to: &str, label: &str, properties: Value) -> &mut Self {
        let e = Edge { id: id.into(), from_node: from.into(), to_node: to.into(), label: label.into(), properties: props(properties) };
        self.edges.insert(id.into(), e);
        self
    }
}

impl GraphSource for MemGraph {
    type Error = Infallible;

    fn node(&self, id: &str) -> Result<Option<Node>, Infallible> {
        Ok(self.nodes.get(id).cloned())
    }

    fn edge(&self, id: &str) -> Result<Option<Edge>, Infallible> {
        Ok(self.edges.get(id).cloned())
    }

    fn label_nodes(&self, label: &str, f: &mut dyn FnMut(&str) -> Result<bool, Infallible>) -> Result<(), Infallible> {
        for n in self.nodes.values().filter(|n| n.label == label) {
            if !f(&n.id)? {
                break;
            }
        }
        Ok(())
    }

    fn all_nodes(&self, f: &mut dyn FnMut(Node) -> Result<bool, Infallible>) -> Result<(), Infallible> {
        for n in self.nodes.values() {
            if !f(n.clone())? {
                break;
            }
        }
        Ok(())
    }

    fn all_edges(&self, f: &mut dyn FnMut(Edge) -> Result<bool, Infallible>) -> Result<(), Infallible> {
        for e in self.edges.values() {
            if !f(e.clone())? {
                break;
            }
        }
        Ok(())
    }

    fn adjacent(
        &self,
        node: &str,
        dir: Direction,
        label: Option<&str>,
        f: &mut dyn FnMut(Adjacent) -> Result<bool, Infallible>,
    ) -> Result<(), Infallible> {
        let mut adj: Vec<Adjacent> = self
            .edges
            .values()
            .filter(|e| label.is_none_or(|l| e.label == l))
            .filter_map(|e| {
                match dir {
                    Direction::Out if e.from_node == node => Some(e.to_node.clone()),
                    Direction::In if e.to_node == node => Some(e.from_node.clone()),
                    Direction::Both if e.from_node == node => Some(e.to_node.clone()),
                    Direction::Both if e.to_node == node => Some(e.from_node.clone()),
                    _ => None,
                }
                .map(|other| Adjacent { edge: e.id.clone(), label: e.label.clone(), other })
            })
            .collect();
        adj.sort_by(|a, b| (&a.label, &a.edge).cmp(&(&b.label, &b.edge)));
        for a in adj {
            if !f(a)? {
                break;
            }
        }
        Ok(())
    }
}
