//! A link checkpoint plus the vectors of the node-adding inserts restores the
//! index exactly; a checkpoint that does not fit is refused.

mod common;

use common::{Rng, gaussian_vectors};
use tessera_vector::{Hit, HnswIndex, HnswParams, Metric, VectorError};

struct Built {
    index: HnswIndex,
    /// `(id, vector)` of every insert that added a node, in node order.
    node_log: Vec<(u64, Vec<f32>)>,
    /// Ids with a node that are not live at the end.
    deleted: Vec<u64>,
}

/// Inserts, upserts (some with an unchanged vector) and deletes.
fn build(metric: Metric, params: HnswParams, n: usize) -> Built {
    let mut rng = Rng::new(5);
    let data = gaussian_vectors(&mut rng, n, 16);
    let mut index = HnswIndex::new(16, metric, params).unwrap();
    let mut node_log = Vec::new();
    let mut put = |index: &mut HnswIndex, id: u64, v: &[f32]| {
        if index.insert(id, v).unwrap() {
            node_log.push((id, v.to_vec()));
        }
    };
    for (i, v) in data.iter().enumerate() {
        let id = i as u64 / 2 * 3;
        put(&mut index, id, v);
        match rng.below(8) {
            0 => {
                index.delete(id);
            }
            1 => put(&mut index, id, &data[rng.below(n as u64) as usize]),
            2 => put(&mut index, id, v),
            _ => {}
        }
    }
    let deleted = node_log.iter().map(|(id, _)| *id).filter(|&id| !index.contains(id)).collect();
    Built { index, node_log, deleted }
}

fn answers(index: &HnswIndex, queries: &[Vec<f32>]) -> Vec<Vec<(u64, u32)>> {
    let bits = |hits: Vec<Hit>| hits.iter().map(|h| (h.id, h.distance.to_bits())).collect();
    queries.iter().map(|q| bits(index.search(q, 10, Some(40), None).unwrap())).collect()
}

fn restore(b: &Built, metric: Metric, params: HnswParams, checkpoint: &[u8]) -> Result<HnswIndex, VectorError> {
    let mut index = HnswIndex::from_links_checkpoint(16, metric, params, b.node_log.clone(), checkpoint)?;
    for &id in &b.deleted {
        index.delete(id);
    }
    Ok(index)
}

#[test]
fn a_restored_index_answers_and_grows_like_the_original() {
    let params = HnswParams { m: 6, ef_construction: 40, seed: 11, ..Default::default() };
    for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
        let mut b = build(metric, params, 1500);
        let checkpoint = b.index.links_checkpoint();
        assert_eq!(HnswIndex::checkpoint_nodes(&checkpoint), Some(b.node_log.len() as u64));
        let mut restored = restore(&b, metric, params, &checkpoint).unwrap();
        let queries = gaussian_vectors(&mut Rng::new(9), 50, 16);
        assert_eq!(answers(&restored, &queries), answers(&b.index, &queries), "{metric:?}: restored answers differ");
        assert_eq!((restored.len(), restored.tombstones()), (b.index.len(), b.index.tombstones()));
        // Inserts after the checkpoint link identically in both.
        for (i, v) in gaussian_vectors(&mut Rng::new(12), 300, 16).iter().enumerate() {
            let id = 10_000 + i as u64;
            assert_eq!(b.index.insert(id, v).unwrap(), restored.insert(id, v).unwrap());
        }
        assert_eq!(answers(&restored, &queries), answers(&b.index, &queries), "{metric:?}: answers differ after more inserts");
        assert_eq!(restored.links_checkpoint(), b.index.links_checkpoint(), "{metric:?}: graphs differ after more inserts");
    }
}

#[test]
fn an_empty_index_round_trips() {
    let index = HnswIndex::new(4, Metric::L2, HnswParams::default()).unwrap();
    let restored = HnswIndex::from_links_checkpoint(4, Metric::L2, HnswParams::default(), Vec::new(), &index.links_checkpoint()).unwrap();
    assert!(restored.is_empty());
}

#[test]
fn a_checkpoint_that_does_not_fit_is_refused() {
    let params = HnswParams { m: 6, ef_construction: 40, seed: 11, ..Default::default() };
    let b = build(Metric::L2, params, 400);
    let checkpoint = b.index.links_checkpoint();
    let refused = |r: Result<HnswIndex, VectorError>| matches!(r, Err(VectorError::InvalidCheckpoint(_)));

    let mut flipped = checkpoint.clone();
    flipped[checkpoint.len() / 2] ^= 1;
    assert!(refused(restore(&b, Metric::L2, params, &flipped)), "a flipped bit");
    assert!(refused(restore(&b, Metric::L2, params, &checkpoint[..checkpoint.len() - 9])), "a truncated checkpoint");
    assert!(refused(restore(&b, Metric::Cosine, params, &checkpoint)), "another metric");
    assert!(refused(restore(&b, Metric::L2, HnswParams { seed: 12, ..params }, &checkpoint)), "another seed");
    assert!(refused(restore(&b, Metric::L2, HnswParams { m: 7, ..params }, &checkpoint)), "another m");
    let mut fewer = Built { index: b.index.clone(), node_log: b.node_log[..b.node_log.len() - 1].to_vec(), deleted: vec![] };
    assert!(refused(restore(&fewer, Metric::L2, params, &checkpoint)), "one node fewer");
    // Same count, other ids: levels no longer match (with overwhelming likelihood).
    for (i, node) in fewer.node_log.iter_mut().enumerate() {
        node.0 = 1_000_000 + i as u64;
    }
    fewer.node_log.push((2_000_000, vec![1.0; 16]));
    assert!(refused(restore(&fewer, Metric::L2, params, &checkpoint)), "other ids");
    assert_eq!(HnswIndex::checkpoint_nodes(b"not a checkpoint at all, not one bit"), None);
}
