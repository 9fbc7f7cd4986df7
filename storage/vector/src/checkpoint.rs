//! Link checkpoints: the graph's links (not its vectors) in a compact binary
//! form, so an index can be restored from its vectors without re-linking.
//!
//! Linking is the expensive part of a rebuild (an `ef_construction` search per
//! node and layer); reading vectors back is cheap. A checkpoint taken of an
//! index with `n` nodes, restored with the same `n` node-adding inserts in node
//! order, gives the index those inserts would have built, so the caller can
//! then replay only the inserts that came after it.
//!
//! Layout (little-endian): magic `THNSWL01`, `dim u32`, `metric u8`, `m u32`,
//! `ef_construction u32`, `seed u64`, `nodes u64`, `entry node u32`
//! (`u32::MAX` = empty), `entry level u8`, one level byte per node, the
//! layer-0 link blocks (`1 + 2m` words per node), the upper blocks
//! (`level · (1 + m)` words per node), and a CRC-32 of everything before it.
//! Every field is checked on restore: a checkpoint that does not fit the
//! vectors, the parameters or the graph's invariants is refused.

use crate::graph::{Graph, Links};
use crate::index::{HnswIndex, HnswParams};
use crate::level::level_for;
use crate::{Metric, VectorError};

const MAGIC: &[u8; 8] = b"THNSWL01";

fn metric_code(metric: Metric) -> u8 {
    match metric {
        Metric::Cosine => 0,
        Metric::L2 => 1,
        Metric::Dot => 2,
    }
}

fn invalid(msg: impl Into<String>) -> VectorError {
    VectorError::InvalidCheckpoint(msg.into())
}

/// Serializes the links of `graph` (with the index's parameters).
pub(crate) fn save(graph: &Graph, params: &HnswParams) -> Vec<u8> {
    let Links { levels, base, upper, entry } = graph.links();
    let words = base.len() + upper.iter().map(Vec::len).sum::<usize>();
    let mut out = Vec::with_capacity(48 + levels.len() + 4 * words);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(graph.dim as u32).to_le_bytes());
    out.push(metric_code(graph.metric));
    out.extend_from_slice(&(params.m as u32).to_le_bytes());
    out.extend_from_slice(&(params.ef_construction as u32).to_le_bytes());
    out.extend_from_slice(&params.seed.to_le_bytes());
    out.extend_from_slice(&(levels.len() as u64).to_le_bytes());
    let (entry_node, entry_level) = entry.map_or((u32::MAX, 0), |(n, l)| (n, l as u8));
    out.extend_from_slice(&entry_node.to_le_bytes());
    out.push(entry_level);
    out.extend_from_slice(levels);
    for w in base.iter().chain(upper.iter().flatten()) {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Number of nodes a checkpoint holds, read from its header (not verified).
pub(crate) fn nodes(bytes: &[u8]) -> Option<u64> {
    let header = bytes.get(..8 + 4 + 1 + 4 + 4 + 8 + 8)?;
    (&header[..8] == MAGIC).then(|| u64::from_le_bytes(header[29..37].try_into().expect("8 bytes")))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], VectorError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| invalid("truncated"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, VectorError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, VectorError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, VectorError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn words(&mut self, n: usize) -> Result<Vec<u32>, VectorError> {
        let raw = self.take(n.checked_mul(4).ok_or_else(|| invalid("size overflow"))?)?;
        Ok(raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }
}

/// Restores an index from `nodes` (`(id, vector as given)` of every node-adding
/// insert, in node order) and a checkpoint [`save`]d from an index that held
/// exactly those nodes, with the same dimension, metric and parameters.
pub(crate) fn restore(
    dim: usize,
    metric: Metric,
    params: HnswParams,
    nodes: Vec<(u64, Vec<f32>)>,
    bytes: &[u8],
) -> Result<HnswIndex, VectorError> {
    let mut index = HnswIndex::new(dim, metric, params)?;
    let body_len = bytes.len().checked_sub(4).ok_or_else(|| invalid("truncated"))?;
    let (body, crc) = bytes.split_at(body_len);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(invalid("checksum mismatch"));
    }
    let mut r = Reader { bytes: body, at: 0 };
    if r.take(8)? != MAGIC {
        return Err(invalid("not a link checkpoint"));
    }
    if r.u32()? as usize != dim || r.u8()? != metric_code(metric) {
        return Err(invalid("taken of an index with another dimension or metric"));
    }
    if r.u32()? as usize != params.m || r.u32()? as usize != params.ef_construction || r.u64()? != params.seed {
        return Err(invalid("taken of an index with other parameters"));
    }
    let n = r.u64()?;
    if n != nodes.len() as u64 {
        return Err(invalid(format!("holds {n} nodes, {} given", nodes.len())));
    }
    let n = nodes.len();
    let entry_node = r.u32()?;
    let entry_level = r.u8()? as usize;
    let levels = r.take(n)?.to_vec();
    let (m, m0) = (params.m, 2 * params.m);
    let base = r.words(n * (1 + m0))?;
    let mut upper = Vec::with_capacity(n);
    for &level in &levels {
        upper.push(if level == 0 { Vec::new() } else { r.words(level as usize * (1 + m))? });
    }
    if r.at != body.len() {
        return Err(invalid("trailing bytes"));
    }
    // Levels are a function of (seed, id); links point at other existing nodes
    // and fit their blocks; the entry is the first node on the top layer.
    for (node, (&(id, _), &level)) in nodes.iter().zip(&levels).enumerate() {
        if level as usize != level_for(params.seed, id, m) {
            return Err(invalid(format!("node {node} has the wrong level")));
        }
    }
    let blocks = base.chunks_exact(1 + m0).map(|b| (b, m0)).chain(upper.iter().flat_map(|u| u.chunks_exact(1 + m).map(|b| (b, m))));
    for (node_blocks, (block, cap)) in blocks.enumerate() {
        let count = block[0] as usize;
        if count > cap || block[1..1 + count].iter().any(|&l| l as usize >= n) {
            return Err(invalid(format!("link block {node_blocks} is out of range")));
        }
    }
    let entry = if n == 0 {
        (entry_node == u32::MAX).then_some(None)
    } else {
        let top = levels.iter().copied().max().unwrap_or(0) as usize;
        let first_top = levels.iter().position(|&l| l as usize == top).unwrap_or(0) as u32;
        (entry_node == first_top && entry_level == top).then_some(Some((entry_node, entry_level)))
    };
    let entry = entry.ok_or_else(|| invalid("wrong entry node"))?;
    let mut vectors = Vec::with_capacity(n * dim);
    let mut ids = Vec::with_capacity(n);
    for (id, v) in nodes {
        vectors.extend_from_slice(&metric.prepare(&v, dim)?);
        ids.push(id);
    }
    index.restore_parts(ids, Graph::from_links(dim, metric, m, params.ef_construction, vectors, levels, base, upper, entry));
    Ok(index)
}
