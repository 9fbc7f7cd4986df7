//! Each metric against brute force, scores, and input validation.

mod common;

use common::{Rng, gaussian_vectors, recall, records, uniform_vectors};
use tessera_vector::{HnswIndex, HnswParams, Metric, VectorError, brute_force, score};

const METRICS: [Metric; 3] = [Metric::Cosine, Metric::L2, Metric::Dot];

fn build(metric: Metric, dim: usize, vectors: &[Vec<f32>]) -> HnswIndex {
    let mut index = HnswIndex::new(dim, metric, HnswParams::default()).unwrap();
    for (id, v) in records(vectors) {
        index.insert(id, v).unwrap();
    }
    index
}

#[test]
fn tiny_sets_match_brute_force_exactly() {
    for metric in METRICS {
        let mut rng = Rng::new(11);
        let (n, dim, k) = (60, 8, 10);
        let data = uniform_vectors(&mut rng, n, dim);
        let index = build(metric, dim, &data);
        assert_eq!(index.len(), n);
        for _ in 0..50 {
            let q: Vec<f32> = (0..dim).map(|_| rng.uniform()).collect();
            let got = index.search(&q, k, None, None).unwrap();
            let want = brute_force(records(&data), &q, k, metric, None).unwrap();
            assert_eq!(got, want, "{metric}: ids and distances must match exactly");
        }
    }
}

#[test]
fn larger_sets_have_high_recall() {
    for metric in METRICS {
        let mut rng = Rng::new(22);
        let (n, dim, k, queries) = (3000, 32, 10, 100);
        let data = gaussian_vectors(&mut rng, n, dim);
        let index = build(metric, dim, &data);
        let mut total = 0.0;
        for _ in 0..queries {
            let q: Vec<f32> = (0..dim).map(|_| rng.gaussian()).collect();
            let got = index.search(&q, k, None, None).unwrap();
            let want = brute_force(records(&data), &q, k, metric, None).unwrap();
            assert_eq!(got.len(), k);
            assert!(got.windows(2).all(|w| w[0].distance <= w[1].distance), "nearest first");
            total += recall(&got, &want);
        }
        let r = total / queries as f64;
        println!("{metric}: recall@{k} = {r:.4} (n={n}, dim={dim})");
        assert!(r >= 0.97, "{metric}: recall {r}");
    }
}

#[test]
fn distances_follow_the_metric_definitions() {
    let a = [3.0f32, 4.0];
    let b = [4.0f32, 3.0];
    let hit = |metric| {
        let mut index = HnswIndex::new(2, metric, HnswParams::default()).unwrap();
        index.insert(7, &a).unwrap();
        index.search(&b, 1, None, None).unwrap()[0]
    };
    let cos = hit(Metric::Cosine);
    assert!((cos.distance - (1.0 - 24.0 / 25.0)).abs() < 1e-6);
    assert!((score(Metric::Cosine, cos.distance) - 0.96).abs() < 1e-6);
    let l2 = hit(Metric::L2);
    assert_eq!(l2.distance, 2.0);
    assert_eq!(score(Metric::L2, l2.distance), 1.0 / 3.0);
    assert_eq!(score(Metric::L2, 0.0), 1.0);
    let dot = hit(Metric::Dot);
    assert_eq!(dot.distance, -24.0);
    assert_eq!(score(Metric::Dot, dot.distance), 24.0);
}

#[test]
fn metric_names() {
    for (m, s) in [(Metric::Cosine, "cosine"), (Metric::L2, "l2"), (Metric::Dot, "dot")] {
        assert_eq!(m.as_str(), s);
        assert_eq!(m.to_string(), s);
        assert_eq!(s.parse::<Metric>().unwrap(), m);
    }
    assert!("euclid".parse::<Metric>().is_err());
}

#[test]
fn bad_input_is_rejected_without_panicking() {
    let mut index = HnswIndex::new(3, Metric::Cosine, HnswParams::default()).unwrap();
    assert_eq!(index.insert(1, &[1.0, 2.0]), Err(VectorError::DimensionMismatch { expected: 3, got: 2 }));
    assert_eq!(index.insert(1, &[1.0, f32::NAN, 0.0]), Err(VectorError::NonFinite { index: 1 }));
    assert_eq!(index.insert(1, &[f32::INFINITY, 0.0, 0.0]), Err(VectorError::NonFinite { index: 0 }));
    assert_eq!(index.insert(1, &[0.0, 0.0, 0.0]), Err(VectorError::ZeroVector));
    assert!(index.is_empty());
    assert_eq!(index.search(&[1.0, 0.0, 0.0], 5, None, None).unwrap(), vec![]);
    index.insert(1, &[1.0, 0.0, 0.0]).unwrap();
    assert_eq!(index.search(&[1.0; 4], 1, None, None), Err(VectorError::DimensionMismatch { expected: 3, got: 4 }));
    assert!(matches!(index.search(&[f32::NEG_INFINITY, 0.0, 0.0], 1, None, None), Err(VectorError::NonFinite { .. })));
    assert_eq!(index.search(&[1.0, 0.0, 0.0], 0, None, None).unwrap(), vec![]);
    assert_eq!(index.search(&[1.0, 0.0, 0.0], 100, Some(0), None).unwrap().len(), 1);

    // Huge but finite components still normalize.
    index.insert(2, &[f32::MAX, f32::MAX, 0.0]).unwrap();
    let v = index.get(2).unwrap();
    assert!((v[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);

    let p = HnswParams::default();
    assert!(HnswIndex::new(0, Metric::L2, p).is_err());
    assert!(HnswIndex::new(4, Metric::L2, HnswParams { m: 1, ..p }).is_err());
    assert!(HnswIndex::new(4, Metric::L2, HnswParams { ef_construction: 0, ..p }).is_err());
    assert!(HnswIndex::new(4, Metric::L2, HnswParams { ef_search: 0, ..p }).is_err());
}

#[test]
fn brute_force_validates_and_filters() {
    let data = vec![vec![0.0f32, 0.0], vec![1.0, 0.0], vec![2.0, 0.0]];
    let odd = |id: u64| id % 2 == 1;
    let hits = brute_force(records(&data), &[0.0, 0.0], 5, Metric::L2, Some(&odd)).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, 1);
    let bad = vec![vec![0.0f32, 0.0, 1.0]];
    assert!(brute_force(records(&bad), &[0.0, 0.0], 1, Metric::L2, None).is_err());
}
