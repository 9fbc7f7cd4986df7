//! recall@10 at the default ef on 10,000 × 64 random vectors.

mod common;

use std::time::Instant;

use common::{Rng, gaussian_vectors, recall, records, uniform_vectors};
use tessera_vector::{HnswIndex, HnswParams, Metric, brute_force};

fn measure(metric: Metric, data: &[Vec<f32>], queries: &[Vec<f32>]) -> f64 {
    let dim = data[0].len();
    let params = HnswParams { seed: 42, ..HnswParams::default() };
    let start = Instant::now();
    let mut index = HnswIndex::new(dim, metric, params).unwrap();
    for (id, v) in records(data) {
        index.insert(id, v).unwrap();
    }
    let build = start.elapsed();

    let start = Instant::now();
    let results: Vec<_> = queries.iter().map(|q| index.search(q, 10, None, None).unwrap()).collect();
    let search = start.elapsed();

    let mut total = 0.0;
    for (q, got) in queries.iter().zip(&results) {
        let want = brute_force(records(data), q, 10, metric, None).unwrap();
        total += recall(got, &want);
    }
    let r = total / queries.len() as f64;
    println!(
        "{metric}: n={} dim={dim} ef={} recall@10={r:.4} build={:.2}s ({:.0} inserts/s) qps={:.0}",
        data.len(),
        params.ef_search,
        build.as_secs_f64(),
        data.len() as f64 / build.as_secs_f64(),
        queries.len() as f64 / search.as_secs_f64(),
    );
    r
}

#[test]
fn recall_at_10_gaussian_l2() {
    let mut rng = Rng::new(2024);
    let data = gaussian_vectors(&mut rng, 10_000, 64);
    let queries = gaussian_vectors(&mut rng, 200, 64);
    let r = measure(Metric::L2, &data, &queries);
    assert!(r >= 0.95, "recall@10 {r} < 0.95");
}

#[test]
fn recall_at_10_uniform_cosine() {
    let mut rng = Rng::new(7);
    let data = uniform_vectors(&mut rng, 10_000, 64);
    let queries = uniform_vectors(&mut rng, 200, 64);
    let r = measure(Metric::Cosine, &data, &queries);
    assert!(r >= 0.95, "recall@10 {r} < 0.95");
}
