//! Two indexes fed the same operations answer identically.

mod common;

use common::{Rng, gaussian_vectors};
use tessera_vector::{Hit, HnswIndex, HnswParams, Metric};

/// Applies a fixed, pseudo-random mix of inserts, upserts and deletes.
fn replay(metric: Metric, seed: u64) -> HnswIndex {
    let mut rng = Rng::new(77);
    let data = gaussian_vectors(&mut rng, 4000, 24);
    let params = HnswParams { seed, ..Default::default() };
    let mut index = HnswIndex::new(24, metric, params).unwrap();
    for (i, v) in data.iter().enumerate() {
        // Sparse, unordered ids.
        let id = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
        index.insert(id, v).unwrap();
        match rng.below(10) {
            0 => {
                index.delete(id);
            }
            1 => {
                index.insert(id, &data[rng.below(data.len() as u64) as usize]).unwrap();
            }
            _ => {}
        }
    }
    index
}

fn bits(hits: &[Hit]) -> Vec<(u64, u32)> {
    hits.iter().map(|h| (h.id, h.distance.to_bits())).collect()
}

#[test]
fn same_operations_same_results() {
    for metric in [Metric::Cosine, Metric::L2, Metric::Dot] {
        let a = replay(metric, 123);
        let b = replay(metric, 123);
        assert_eq!(a.len(), b.len());
        assert_eq!(a.tombstones(), b.tombstones());
        let even = |id: u64| id.is_multiple_of(2);
        let mut rng = Rng::new(8);
        for i in 0..200 {
            let q: Vec<f32> = (0..24).map(|_| rng.gaussian()).collect();
            let ef = [None, Some(16), Some(200)][i % 3];
            let filter: Option<&dyn Fn(u64) -> bool> = if i % 2 == 0 { Some(&even) } else { None };
            let ha = a.search(&q, 10, ef, filter).unwrap();
            let hb = b.search(&q, 10, ef, filter).unwrap();
            assert_eq!(ha.len(), 10);
            assert_eq!(bits(&ha), bits(&hb), "{metric}: query {i} differs");
        }
    }
}

#[test]
fn identical_vectors_break_ties_deterministically() {
    let build = || {
        let mut index = HnswIndex::new(4, Metric::L2, HnswParams::default()).unwrap();
        for id in (0..500u64).rev() {
            index.insert(id, &[(id % 5) as f32, 0.0, 1.0, 2.0]).unwrap();
        }
        index
    };
    let (a, b) = (build(), build());
    for x in 0..5 {
        let q = [x as f32, 0.0, 1.0, 2.0];
        let ha = a.search(&q, 50, None, None).unwrap();
        assert_eq!(bits(&ha), bits(&b.search(&q, 50, None, None).unwrap()));
        assert!(ha.iter().take(50).all(|h| h.distance == 0.0 && h.id % 5 == x));
    }
}

#[test]
fn compaction_is_deterministic() {
    let index = replay(Metric::L2, 9);
    let (a, b) = (index.compacted(), index.compacted());
    assert_eq!(a.tombstones(), 0);
    assert_eq!(a.len(), index.len());
    let mut rng = Rng::new(10);
    for _ in 0..100 {
        let q: Vec<f32> = (0..24).map(|_| rng.gaussian()).collect();
        assert_eq!(bits(&a.search(&q, 10, None, None).unwrap()), bits(&b.search(&q, 10, None, None).unwrap()));
    }
}
