//! Graph traversal: greedy descent, best-first layer search with an
//! acceptance predicate, and the neighbour-selection heuristic.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::graph::Graph;

/// A node with its distance to the current query. Ordered by distance, then
/// node number, so every tie is broken the same way on every replica.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cand {
    pub(crate) dist: f32,
    pub(crate) node: u32,
}

impl Ord for Cand {
    fn cmp(&self, other: &Self) -> Ordering {
        self.dist.total_cmp(&other.dist).then(self.node.cmp(&other.node))
    }
}

impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Cand {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Cand {}

/// Bitset of visited nodes.
pub(crate) struct Visited {
    words: Vec<u64>,
}

impl Visited {
    pub(crate) fn new(nodes: usize) -> Self {
        Visited { words: vec![0; nodes.div_ceil(64)] }
    }

    pub(crate) fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Marks `node`; returns `true` if it was not marked before.
    #[inline]
    pub(crate) fn insert(&mut self, node: u32) -> bool {
        let (word, bit) = (node as usize / 64, 1u64 << (node % 64));
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        fresh
    }
}

/// Cost of one distance evaluation during a graph walk (random access, heap
/// upkeep) relative to one in a sequential scan.
const WALK_COST: f64 = 2.0;
/// Cost of one predicate call relative to a sequential distance evaluation.
const PREDICATE_COST: f64 = 1.0 / 16.0;

/// Outcome of [`Graph::search_layer`].
pub(crate) struct LayerResult {
    /// Accepted nodes, nearest first, at most `ef`.
    pub(crate) hits: Vec<Cand>,
    /// The distance-evaluation budget ran out before the search converged.
    pub(crate) over_budget: bool,
}

impl Graph {
    /// Greedy descent on `layer` (ef = 1): move to the closest neighbour
    /// while it improves.
    pub(crate) fn greedy(&self, query: &[f32], mut best: Cand, layer: usize) -> Cand {
        loop {
            let mut improved = false;
            for &n in self.neighbors(best.node, layer) {
                let c = Cand { dist: self.dist(query, n), node: n };
                if c < best {
                    best = c;
                    improved = true;
                }
            }
            if !improved {
                return best;
            }
        }
    }

    /// Best-first search of one layer from `entries`.
    ///
    /// Every reachable node is a navigation candidate, but only nodes for
    /// which `accept` holds enter the result set, so the search keeps
    /// expanding until it holds `ef` accepted nodes and no candidate can
    /// improve them: a restrictive predicate widens the search by itself.
    ///
    /// With `scan_size = Some(n)` the walk gives up (`over_budget`) once it
    /// has cost more than an exact scan of `n` nodes would. A scan calls the
    /// predicate `n` times and computes distances, sequentially, only for the
    /// `p̂ · n` accepted nodes (`p̂` = acceptance rate seen so far); a walk
    /// evaluation costs [`WALK_COST`] sequential ones and a predicate call
    /// [`PREDICATE_COST`] of one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_layer(
        &self,
        query: &[f32],
        entries: &[Cand],
        ef: usize,
        layer: usize,
        mut accept: impl FnMut(u32) -> bool,
        scan_size: Option<usize>,
        visited: &mut Visited,
    ) -> LayerResult {
        let ef = ef.max(1);
        let mut candidates: BinaryHeap<Reverse<Cand>> = BinaryHeap::new();
        let mut results: BinaryHeap<Cand> = BinaryHeap::with_capacity(ef + 1);
        // Distance evaluations, predicate calls, and predicate passes.
        let (mut evaluations, mut tested, mut accepted) = (0usize, 0usize, 0usize);
        for &e in entries {
            if !visited.insert(e.node) {
                continue;
            }
            candidates.push(Reverse(e));
            tested += 1;
            if accept(e.node) {
                accepted += 1;
                results.push(e);
                if results.len() > ef {
                    results.pop();
                }
            }
        }

        let mut over_budget = false;
        'expand: while let Some(Reverse(current)) = candidates.pop() {
            if results.len() >= ef && results.peek().is_some_and(|worst| current > *worst) {
                break;
            }
            for &n in self.neighbors(current.node, layer) {
                if !visited.insert(n) {
                    continue;
                }
                if let Some(n) = scan_size {
                    // WALK_COST·e > p̂·n + PREDICATE_COST·n, p̂ = accepted / tested.
                    let (e, t, a) = (evaluations as f64, tested as f64, accepted as f64);
                    if WALK_COST * e * t > (a + PREDICATE_COST * t) * n as f64 {
                        over_budget = true;
                        break 'expand;
                    }
                }
                evaluations += 1;
                let c = Cand { dist: self.dist(query, n), node: n };
                let full = results.len() >= ef;
                if full && results.peek().is_some_and(|worst| c >= *worst) {
                    continue;
                }
                candidates.push(Reverse(c));
                tested += 1;
                if accept(n) {
                    accepted += 1;
                    results.push(c);
                    if results.len() > ef {
                        results.pop();
                    }
                }
            }
        }
        LayerResult { hits: results.into_sorted_vec(), over_budget }
    }

    /// HNSW neighbour-selection heuristic (Malkov & Yashunin, algorithm 4):
    /// walk `sorted` nearest first and keep a candidate only if it is closer
    /// to the base than to every candidate already kept. Keeps at most `max`.
    pub(crate) fn select_heuristic(&self, sorted: &[Cand], max: usize) -> Vec<Cand> {
        if sorted.len() <= max {
            return sorted.to_vec();
        }
        let mut kept: Vec<Cand> = Vec::with_capacity(max);
        for &c in sorted {
            if kept.len() >= max {
                break;
            }
            let v = self.vector(c.node);
            let diverse = kept.iter().all(|k| self.metric.distance(v, self.vector(k.node)) >= c.dist);
            if diverse {
                kept.push(c);
            }
        }
        kept
    }
}
