//! Exact k-nearest-neighbour scan, used as ground truth and as the fallback
//! for very selective filters.

use std::collections::BinaryHeap;

use crate::index::Hit;
use crate::search::Cand;
use crate::{Metric, VectorError};

/// Keeps the `k` smallest candidates, returned nearest first.
pub(crate) fn top_k(cands: impl Iterator<Item = Cand>, k: usize) -> Vec<Cand> {
    let mut heap: BinaryHeap<Cand> = BinaryHeap::with_capacity(k + 1);
    for c in cands {
        if heap.len() < k {
            heap.push(c);
        } else if heap.peek().is_some_and(|worst| c < *worst) {
            heap.pop();
            heap.push(c);
        }
    }
    heap.into_sorted_vec()
}

/// Exact top-`k` over `vectors`, nearest first, ties by input position.
///
/// Vectors and query are prepared exactly as [`crate::HnswIndex`] prepares
/// them (cosine normalizes), so distances are bit-identical to the index's.
/// Records rejected by `filter` are skipped. Every vector must have the
/// query's length and finite components.
pub fn brute_force<'a, I>(
    vectors: I,
    query: &[f32],
    k: usize,
    metric: Metric,
    filter: Option<&dyn Fn(u64) -> bool>,
) -> Result<Vec<Hit>, VectorError>
where
    I: IntoIterator<Item = (u64, &'a [f32])>,
{
    let dim = query.len();
    let query = metric.prepare(query, dim)?;
    let mut ids = Vec::new();
    let mut cands = Vec::new();
    for (id, v) in vectors {
        if filter.is_some_and(|f| !f(id)) {
            continue;
        }
        let v = metric.prepare(v, dim)?;
        cands.push(Cand { dist: metric.distance(&query, &v), node: ids.len() as u32 });
        ids.push(id);
    }
    Ok(top_k(cands.into_iter(), k).into_iter().map(|c| Hit { id: ids[c.node as usize], distance: c.dist }).collect())
}
