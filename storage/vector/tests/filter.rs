//! Filtered search: only matches, and k hits whenever k matches exist.

mod common;

use std::sync::OnceLock;

use common::{Rng, gaussian_vectors, recall, records};
use tessera_vector::{HnswIndex, HnswParams, Metric, brute_force};

const N: usize = 10_000;
const DIM: usize = 64;

fn fixture() -> &'static (Vec<Vec<f32>>, HnswIndex) {
    static FIXTURE: OnceLock<(Vec<Vec<f32>>, HnswIndex)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut rng = Rng::new(99);
        let data = gaussian_vectors(&mut rng, N, DIM);
        let mut index = HnswIndex::new(DIM, Metric::L2, HnswParams { seed: 5, ..Default::default() }).unwrap();
        for (id, v) in records(&data) {
            index.insert(id, v).unwrap();
        }
        (data, index)
    })
}

/// Runs `queries` filtered searches; checks every hit matches and that
/// `min(k, matches)` hits come back; returns mean recall vs filtered brute force.
fn check(filter: &dyn Fn(u64) -> bool, k: usize, ef: Option<usize>, queries: usize) -> f64 {
    let (data, index) = fixture();
    let matches = (0..N as u64).filter(|&id| filter(id)).count();
    let mut rng = Rng::new(k as u64 * 31 + matches as u64);
    let mut total = 0.0;
    for _ in 0..queries {
        let q: Vec<f32> = (0..DIM).map(|_| rng.gaussian()).collect();
        let got = index.search(&q, k, ef, Some(filter)).unwrap();
        assert!(got.iter().all(|h| filter(h.id)), "non-matching id returned");
        assert_eq!(got.len(), k.min(matches), "expected min(k, matches) hits");
        let want = brute_force(records(data), &q, k, Metric::L2, Some(filter)).unwrap();
        total += recall(&got, &want);
    }
    total / queries as f64
}

#[test]
fn one_percent_filter_returns_k_matches() {
    let r = check(&|id| id % 100 == 7, 10, None, 100);
    println!("1% filter: recall@10 = {r:.4}");
    assert!(r >= 0.99, "{r}");
}

#[test]
fn small_ef_still_fills_k() {
    // With ef = k = 10 a post-filter would keep about one (10%) or five (50%)
    // hits per query; filtering during the walk, or the scan fallback, keeps k.
    let r = check(&|id| id % 10 == 3, 10, Some(10), 100);
    println!("10% filter, ef=10: recall@10 = {r:.4}");
    let r = check(&|id| id % 2 == 1, 10, Some(10), 100);
    println!("50% filter, ef=10: recall@10 = {r:.4}");
    let r = check(&|id| id % 10 == 3, 10, None, 100);
    println!("10% filter, default ef: recall@10 = {r:.4}");
    assert!(r >= 0.95, "{r}");
}

#[test]
fn half_filter_keeps_high_recall() {
    let r = check(&|id: u64| id.is_multiple_of(2), 10, None, 100);
    println!("50% filter: recall@10 = {r:.4}");
    assert!(r >= 0.95, "{r}");
}

#[test]
fn fewer_matches_than_k_returns_all_of_them() {
    let few = |id: u64| id < 10_000 && id % 2000 == 1; // 5 matches
    assert_eq!(check(&few, 10, None, 10), 1.0);
    let none = |_: u64| false;
    assert_eq!(check(&none, 10, None, 5), 1.0);
    let one = |id: u64| id == 4321;
    let (data, index) = fixture();
    let hits = index.search(&data[0], 3, None, Some(&one)).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, 4321);
}

#[test]
fn large_k_with_filter() {
    let r = check(&|id: u64| id.is_multiple_of(20), 300, None, 20);
    println!("5% filter, k=300: recall = {r:.4}");
    assert!(r >= 0.95, "{r}");
}
