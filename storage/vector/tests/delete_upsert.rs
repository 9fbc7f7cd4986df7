//! Soft deletes are never returned; upserts replace.

mod common;

use common::{Rng, gaussian_vectors, recall, records};
use tessera_vector::{HnswIndex, HnswParams, Metric, brute_force};

fn build(metric: Metric, data: &[Vec<f32>]) -> HnswIndex {
    let mut index = HnswIndex::new(data[0].len(), metric, HnswParams::default()).unwrap();
    for (id, v) in records(data) {
        index.insert(id, v).unwrap();
    }
    index
}

#[test]
fn soft_deleted_ids_are_never_returned() {
    for metric in [Metric::Cosine, Metric::L2, Metric::Dot] {
        let mut rng = Rng::new(3);
        let data = gaussian_vectors(&mut rng, 3000, 32);
        let mut index = build(metric, &data);
        let dead = |id: u64| !id.is_multiple_of(3);
        for id in (0..3000u64).filter(|&id| dead(id)) {
            assert!(index.delete(id));
        }
        assert!(!index.delete(1), "second delete reports absence");
        assert!(!index.delete(1_000_000));
        assert_eq!(index.len(), 1000);
        assert_eq!(index.tombstones(), 2000);
        assert!(index.get(1).is_none() && !index.contains(1));
        assert!(index.get(3).is_some() && index.contains(3));

        let live: Vec<(u64, &[f32])> = records(&data).filter(|&(id, _)| !dead(id)).collect();
        let mut total = 0.0;
        for _ in 0..100 {
            let q: Vec<f32> = (0..32).map(|_| rng.gaussian()).collect();
            let got = index.search(&q, 20, None, None).unwrap();
            assert_eq!(got.len(), 20);
            assert!(got.iter().all(|h| !dead(h.id)), "{metric}: deleted id returned");
            let want = brute_force(live.iter().copied(), &q, 20, metric, None).unwrap();
            total += recall(&got, &want);
        }
        let r = total / 100.0;
        println!("{metric}: recall@20 with 2/3 deleted = {r:.4}");
        assert!(r >= 0.95, "{metric}: {r}");

        // A deleted vector queried exactly still does not come back.
        let hits = index.search(&data[1], 5, None, None).unwrap();
        assert!(hits.iter().all(|h| h.id != 1));
    }
}

#[test]
fn deleting_everything_then_reinserting() {
    let mut rng = Rng::new(4);
    let data = gaussian_vectors(&mut rng, 200, 8);
    let mut index = build(Metric::L2, &data);
    for id in 0..200 {
        assert!(index.delete(id));
    }
    assert!(index.is_empty());
    assert!(index.search(&data[0], 10, None, None).unwrap().is_empty());
    index.insert(17, &data[17]).unwrap();
    let hits = index.search(&data[0], 10, None, None).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, 17);
}

#[test]
fn upsert_replaces_the_vector() {
    let mut rng = Rng::new(5);
    let data = gaussian_vectors(&mut rng, 1000, 16);
    let mut index = build(Metric::L2, &data);
    let new_vector: Vec<f32> = data[900].iter().map(|x| x + 0.001).collect();

    index.insert(5, &new_vector).unwrap();
    assert_eq!(index.len(), 1000);
    assert_eq!(index.tombstones(), 1);
    assert_eq!(index.get(5).unwrap(), new_vector.as_slice());

    // Near its new position…
    let hits = index.search(&new_vector, 2, None, None).unwrap();
    assert_eq!(hits[0].id, 5);
    assert_eq!(hits[0].distance, 0.0);
    assert_eq!(hits[1].id, 900);
    // …and no longer at its old one.
    let hits = index.search(&data[5], 5, None, None).unwrap();
    assert!(hits.iter().all(|h| h.id != 5));
    // Exactly once in a full listing.
    let all = index.search(&data[5], 1000, Some(1000), None).unwrap();
    assert_eq!(all.len(), 1000);
    assert_eq!(all.iter().filter(|h| h.id == 5).count(), 1);

    // Re-upserting the same vector is a no-op.
    index.insert(5, &new_vector).unwrap();
    assert_eq!(index.tombstones(), 1);
    // Upsert after delete revives the id.
    assert!(index.delete(5));
    index.insert(5, &data[5]).unwrap();
    assert_eq!(index.search(&data[5], 1, None, None).unwrap()[0].id, 5);
    assert_eq!(index.len(), 1000);
}

#[test]
fn cosine_get_returns_the_normalized_vector() {
    let mut index = HnswIndex::new(2, Metric::Cosine, HnswParams::default()).unwrap();
    index.insert(1, &[3.0, 4.0]).unwrap();
    assert_eq!(index.get(1).unwrap(), &[0.6, 0.8]);
    // Same direction, different length: equal once normalized, so a no-op.
    index.insert(1, &[6.0, 8.0]).unwrap();
    assert_eq!(index.tombstones(), 0);
}

#[test]
fn compaction_drops_tombstones() {
    let mut rng = Rng::new(6);
    let data = gaussian_vectors(&mut rng, 2000, 16);
    let mut index = build(Metric::Dot, &data);
    for id in (0..2000).step_by(2) {
        index.delete(id);
    }
    let compact = index.compacted();
    assert_eq!(compact.len(), 1000);
    assert_eq!(compact.tombstones(), 0);
    let live: Vec<(u64, &[f32])> = index.iter().collect();
    assert_eq!(live, compact.iter().collect::<Vec<_>>());
    let mut total = 0.0;
    for _ in 0..50 {
        let q: Vec<f32> = (0..16).map(|_| rng.gaussian()).collect();
        let got = compact.search(&q, 10, None, None).unwrap();
        let want = brute_force(live.iter().copied(), &q, 10, Metric::Dot, None).unwrap();
        total += recall(&got, &want);
    }
    assert!(total / 50.0 >= 0.95);
}
