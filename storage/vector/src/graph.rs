//! Graph storage and HNSW insertion.
//!
//! Nodes are numbered densely in insertion order (`u32`). Vectors live in one
//! flat buffer. Layer-0 links use a fixed stride of `1 + m0` words per node
//! (`[count, links…]`); nodes above layer 0 additionally own `level` blocks of
//! `1 + m` words for layers `1..=level`.

use crate::Metric;
use crate::search::{Cand, Visited};

/// A graph's links, borrowed (see [`Graph::links`]).
pub(crate) struct Links<'a> {
    pub(crate) levels: &'a [u8],
    pub(crate) base: &'a [u32],
    pub(crate) upper: &'a [Vec<u32>],
    pub(crate) entry: Option<(u32, usize)>,
}

/// The navigable small-world graph: vectors, levels and links. It knows
/// nothing about external ids, deletions or filters.
#[derive(Debug, Clone)]
pub(crate) struct Graph {
    pub(crate) dim: usize,
    pub(crate) metric: Metric,
    /// Maximum links per node on layers ≥ 1.
    pub(crate) m: usize,
    /// Maximum links per node on layer 0 (`2 · m`).
    pub(crate) m0: usize,
    pub(crate) ef_construction: usize,
    vectors: Vec<f32>,
    levels: Vec<u8>,
    base: Vec<u32>,
    upper: Vec<Vec<u32>>,
    /// Entry node and its level; `None` while the graph is empty.
    pub(crate) entry: Option<(u32, usize)>,
}

impl Graph {
    pub(crate) fn new(dim: usize, metric: Metric, m: usize, ef_construction: usize) -> Self {
        Graph {
            dim,
            metric,
            m,
            m0: 2 * m,
            ef_construction,
            vectors: Vec::new(),
            levels: Vec::new(),
            base: Vec::new(),
            upper: Vec::new(),
            entry: None,
        }
    }

    /// The link structure: levels, layer-0 blocks, upper blocks and the entry.
    pub(crate) fn links(&self) -> Links<'_> {
        Links { levels: &self.levels, base: &self.base, upper: &self.upper, entry: self.entry }
    }

    /// A graph from its parts, as [`Graph::links`] gave them (checked by the caller).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_links(
        dim: usize,
        metric: Metric,
        m: usize,
        ef_construction: usize,
        vectors: Vec<f32>,
        levels: Vec<u8>,
        base: Vec<u32>,
        upper: Vec<Vec<u32>>,
        entry: Option<(u32, usize)>,
    ) -> Self {
        Graph { vectors, levels, base, upper, entry, ..Graph::new(dim, metric, m, ef_construction) }
    }

    /// Number of nodes, live or not.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.levels.len()
    }

    #[inline]
    pub(crate) fn vector(&self, node: u32) -> &[f32] {
        let start = node as usize * self.dim;
        &self.vectors[start..start + self.dim]
    }

    #[inline]
    pub(crate) fn dist(&self, query: &[f32], node: u32) -> f32 {
        self.metric.distance(query, self.vector(node))
    }

    #[inline]
    fn level(&self, node: u32) -> usize {
        self.levels[node as usize] as usize
    }

    /// Links of `node` on `layer` (empty if the node does not reach it).
    #[inline]
    pub(crate) fn neighbors(&self, node: u32, layer: usize) -> &[u32] {
        let block = if layer == 0 {
            let start = node as usize * (1 + self.m0);
            &self.base[start..start + 1 + self.m0]
        } else if layer <= self.level(node) {
            let start = (layer - 1) * (1 + self.m);
            &self.upper[node as usize][start..start + 1 + self.m]
        } else {
            return &[];
        };
        &block[1..1 + block[0] as usize]
    }

    fn set_neighbors(&mut self, node: u32, layer: usize, links: impl ExactSizeIterator<Item = u32>) {
        let block = if layer == 0 {
            let start = node as usize * (1 + self.m0);
            &mut self.base[start..start + 1 + self.m0]
        } else {
            let start = (layer - 1) * (1 + self.m);
            &mut self.upper[node as usize][start..start + 1 + self.m]
        };
        let count = links.len().min(block.len() - 1);
        block[0] = count as u32;
        for (slot, link) in block[1..].iter_mut().zip(links) {
            *slot = link;
        }
    }

    /// Appends a node holding `vector` (already prepared) with top layer
    /// `level` and links it into the graph. Returns the new node number.
    ///
    /// The caller guarantees `len() < u32::MAX` and `vector.len() == dim`.
    pub(crate) fn add_node(&mut self, vector: &[f32], level: usize) -> u32 {
        let node = self.len() as u32;
        self.vectors.extend_from_slice(vector);
        self.levels.push(level as u8);
        self.base.resize(self.base.len() + 1 + self.m0, 0);
        self.upper.push(vec![0; level * (1 + self.m)]);

        let Some((entry, top)) = self.entry else {
            self.entry = Some((node, level));
            return node;
        };

        let mut visited = Visited::new(self.len());
        let mut ep = Cand { dist: self.dist(vector, entry), node: entry };
        for layer in (level + 1..=top).rev() {
            ep = self.greedy(vector, ep, layer);
        }
        let mut entries = vec![ep];
        for layer in (0..=level.min(top)).rev() {
            visited.clear();
            let found = self.search_layer(vector, &entries, self.ef_construction, layer, |_| true, None, &mut visited).hits;
            // Like FAISS, a new node may take up to 2·m links on layer 0.
            let cap = if layer == 0 { self.m0 } else { self.m };
            let chosen = self.select_heuristic(&found, cap);
            self.set_neighbors(node, layer, chosen.iter().map(|c| c.node));
            for c in &chosen {
                self.link_back(c.node, node, c.dist, layer);
            }
            entries = found;
        }
        if level > top {
            self.entry = Some((node, level));
        }
        node
    }

    /// Adds `new` to the links of `target`, pruning with the heuristic when
    /// the list is full.
    fn link_back(&mut self, target: u32, new: u32, dist: f32, layer: usize) {
        let cap = if layer == 0 { self.m0 } else { self.m };
        let current = self.neighbors(target, layer);
        if current.len() < cap {
            let mut links = current.to_vec();
            links.push(new);
            self.set_neighbors(target, layer, links.into_iter());
            return;
        }
        let base = self.vector(target);
        let mut cands: Vec<Cand> = current.iter().map(|&n| Cand { dist: self.metric.distance(base, self.vector(n)), node: n }).collect();
        cands.push(Cand { dist, node: new });
        cands.sort_unstable();
        let kept = self.select_heuristic(&cands, cap);
        self.set_neighbors(target, layer, kept.iter().map(|c| c.node));
    }
}
