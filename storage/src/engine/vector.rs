//! The vector engine (spec 03 part B): collections of fixed-dimension records
//! with an in-memory HNSW index per collection on every replica.
//!
//! Keys: `c/<name>` → [`CollectionConfig`]; `s/<name>` → counters (next
//! sequence number, live count); `i/<name>\0<id>` → the record's sequence
//! number (8 bytes BE); `r/<name>\0<seq BE>` → [`VectorRecord`];
//! `n/<name>\0<node BE u64>` → the node log: the sequence number (8 bytes BE)
//! and the vector as given (little-endian `f32`s) of every graph node the
//! index appended, in node order. The sequence number is the record's `u64` id
//! inside the index: assigned from the counter in log order, so every replica
//! maps ids the same way.
//!
//! The index lives in [`VectorState`], shared by a group's state machine
//! (which updates it while applying) and its reader (which searches it). It is
//! built lazily (at startup, after a snapshot install, or after a failed
//! apply) by replaying the node log and then soft-deleting every sequence
//! number without a live record, with a seed derived from the collection
//! name: graph linking depends only on the node-adding inserts in order and
//! levels only on `(seed, seq)`, so a rebuilt replica holds the same graph as
//! one that applied every command live, and both answer searches identically.
//! Collections created before the node log existed (counters without
//! `next_node`) keep the older rebuild from the `r/` records in sequence order.
//!
//! Re-linking is what makes a rebuild slow (seconds for 10 000 vectors), so a
//! replica keeps a link checkpoint of each large index in its derived data
//! (`h/<name>\0<uid>\0<created BE>`, see [`tessera_vector::HnswIndex::links_checkpoint`]):
//! written after a rebuild that linked many nodes, by the node's periodic
//! [`checkpoint`] pass and at shutdown. A rebuild restores the first nodes of
//! the log from it and links only the nodes appended after it. The node log of
//! one incarnation of a collection only grows and is the same on every
//! replica, so a checkpoint of its first `n` nodes stays valid through later
//! writes and snapshot installs; one that does not fit is ignored.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_api::command::Response;
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::vector::{
    CollectionConfig, CollectionStats, MAX_DIM, SearchRequest, VectorHit, VectorMetric, VectorOp, VectorQuery, VectorQueryResult,
    VectorRecord, VectorResponse, validate_collection_name, validate_record_id,
};
use tessera_vector::{HnswIndex, HnswParams, Metric, score};

use super::{Answer, Engine, GroupData, QueryCtx, ReadView, Tx, space};
use crate::error::{Result, StorageError};

fn config_key(name: &str) -> Vec<u8> {
    [b"c/".as_slice(), name.as_bytes()].concat()
}

fn counters_key(name: &str) -> Vec<u8> {
    [b"s/".as_slice(), name.as_bytes()].concat()
}

fn ids_prefix(name: &str) -> Vec<u8> {
    [b"i/".as_slice(), name.as_bytes(), b"\0"].concat()
}

fn id_key(name: &str, id: &str) -> Vec<u8> {
    [ids_prefix(name).as_slice(), id.as_bytes()].concat()
}

fn records_prefix(name: &str) -> Vec<u8> {
    [b"r/".as_slice(), name.as_bytes(), b"\0"].concat()
}

fn record_key(name: &str, seq: u64) -> Vec<u8> {
    [records_prefix(name).as_slice(), &seq.to_be_bytes()].concat()
}

fn nodes_prefix(name: &str) -> Vec<u8> {
    [b"n/".as_slice(), name.as_bytes(), b"\0"].concat()
}

fn node_key(name: &str, node: u64) -> Vec<u8> {
    [nodes_prefix(name).as_slice(), &node.to_be_bytes()].concat()
}

/// A node-log value: the sequence number (BE) then the vector (LE `f32`s).
/// Where the link checkpoint of one incarnation of a collection is kept.
fn checkpoint_key(c: &CollectionConfig) -> Vec<u8> {
    let mut k = format!("h/{}\0{}\0", c.name, c.uid).into_bytes();
    k.extend_from_slice(&c.created_at_ms.to_be_bytes());
    k
}

/// Indexes with fewer nodes are rebuilt from the log without a checkpoint.
const CHECKPOINT_MIN_NODES: usize = 1000;

fn node_value(seq: u64, vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 * vector.len());
    out.extend_from_slice(&seq.to_be_bytes());
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

fn decode_node(raw: &[u8], dim: usize) -> Result<(u64, Vec<f32>)> {
    if raw.len() != 8 + 4 * dim {
        return Err(StorageError::Corrupt(format!("vector node record of {} bytes for dim {dim}", raw.len())));
    }
    let (seq, vector) = raw.split_at(8);
    let seq = u64::from_be_bytes(seq.try_into().map_err(|_| StorageError::Corrupt("vector node record".into()))?);
    let vector = vector.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok((seq, vector))
}

/// Per-collection counters, updated with every write.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
struct Counters {
    /// The sequence number the next new record gets.
    next_seq: u64,
    /// Live records.
    count: u64,
    /// The number the next graph node gets (nodes appended so far); `None`
    /// for a collection created before the node log, which writes none.
    #[serde(default)]
    next_node: Option<u64>,
}

fn metric(m: VectorMetric) -> Metric {
    match m {
        VectorMetric::Cosine => Metric::Cosine,
        VectorMetric::L2 => Metric::L2,
        VectorMetric::Dot => Metric::Dot,
    }
}

/// FNV-1a 64 of the name: the collection's fixed level seed.
fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

fn new_index(c: &CollectionConfig) -> std::result::Result<HnswIndex, String> {
    let params = HnswParams { m: c.m as usize, ef_construction: c.ef_construction as usize, seed: seed(&c.name), ..HnswParams::default() };
    HnswIndex::new(c.dim as usize, metric(c.metric), params).map_err(|e| e.to_string())
}

fn json<T: serde::de::DeserializeOwned>(raw: Option<Vec<u8>>) -> Result<Option<T>> {
    Ok(raw.map(|b| serde_json::from_slice(&b)).transpose()?)
}

fn config(view: &ReadView<'_>, name: &str) -> Result<Option<CollectionConfig>> {
    json(view.get(&config_key(name))?)
}

fn counters(view: &ReadView<'_>, name: &str) -> Result<Counters> {
    Ok(json(view.get(&counters_key(name))?)?.unwrap_or_default())
}

fn seq_of(view: &ReadView<'_>, name: &str, id: &str) -> Result<Option<u64>> {
    match view.get(&id_key(name, id))? {
        None => Ok(None),
        Some(raw) => {
            let b: [u8; 8] = raw.as_slice().try_into().map_err(|_| StorageError::Corrupt("vector id mapping".into()))?;
            Ok(Some(u64::from_be_bytes(b)))
        }
    }
}

fn record(view: &ReadView<'_>, name: &str, seq: u64) -> Result<Option<VectorRecord>> {
    json(view.get(&record_key(name, seq))?)
}

/// The in-memory index of one collection, with what hits and filters need.
struct Collection {
    index: HnswIndex,
    /// Sequence number → (record id, metadata) of live records.
    entries: HashMap<u64, (String, Value)>,
    /// Nodes in this replica's stored link checkpoint of the index.
    checkpointed: std::sync::atomic::AtomicUsize,
}

impl Collection {
    fn new(index: HnswIndex, entries: HashMap<u64, (String, Value)>, checkpointed: usize) -> Self {
        Collection { index, entries, checkpointed: checkpointed.into() }
    }
}

enum Slot {
    Live(Box<Collection>),
    /// Dropped by the state machine; never rebuilt from (possibly not yet deleted) records.
    Dropped,
}

/// The in-memory vector indexes of one group, shared by its state machine and reader.
#[derive(Default)]
pub struct VectorState {
    collections: RwLock<BTreeMap<String, Slot>>,
    /// Bumped by every writer (under the write lock): an index built outside
    /// the lock is kept only if no writer came between its start and its end.
    generation: std::sync::atomic::AtomicU64,
    /// Collections whose index is being built outside the lock (by the warm-up
    /// or a first search); others that need it wait for that build.
    building: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Signalled when a build outside the lock ends.
    build_done: std::sync::Condvar,
}

impl VectorState {
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Slot>> {
        self.collections.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Slot>> {
        let guard = self.collections.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        guard
    }

    /// Whether `name` has no slot yet, and the generation to build it against.
    fn absent(&self, name: &str) -> Option<u64> {
        let map = self.read();
        (!map.contains_key(name)).then(|| self.generation.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Keeps an index of `name` built outside the lock from storage, unless a
    /// writer came since `generation` was read (its state may not be in the
    /// build) or the slot was filled meanwhile. Whether it was kept.
    fn keep_built(&self, generation: u64, name: &str, col: Collection) -> bool {
        let mut map = self.collections.write().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(std::sync::atomic::Ordering::SeqCst) != generation || map.contains_key(name) {
            return false;
        }
        map.insert(name.to_string(), Slot::Live(Box::new(col)));
        true
    }

    /// Builds the index of `c` outside the lock unless it is in memory, or waits
    /// for the build of it that is already running (the warm-up's or another
    /// search's), so the group's applies and searches go on and no index is
    /// built twice at once. Whether the slot is filled now; `false` when a
    /// writer came during the build (the caller then builds under the lock).
    fn build_outside_lock(&self, view: &ReadView<'_>, c: &CollectionConfig) -> Result<bool> {
        {
            let mut building = self.building.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if self.absent(&c.name).is_none() {
                    return Ok(true);
                }
                if building.insert(c.name.clone()) {
                    break;
                }
                building = self.build_done.wait(building).unwrap_or_else(|e| e.into_inner());
            }
        }
        let built = (|| {
            let Some(generation) = self.absent(&c.name) else { return Ok(true) };
            let col = load(view, c)?;
            Ok(self.keep_built(generation, &c.name, col))
        })();
        self.building.lock().unwrap_or_else(|e| e.into_inner()).remove(&c.name);
        self.build_done.notify_all();
        built
    }

    /// Forgets every index (they are rebuilt from storage on next use); called
    /// after the group's state was replaced by a snapshot.
    pub fn invalidate(&self) {
        self.write().clear();
    }
}

/// Builds a collection's index from storage: replays the node log in node
/// order, then soft-deletes every sequence number without a live record
/// (deletes only flip flags, so their order does not matter). A collection
/// without a node log is built from its records in sequence order.
fn load(view: &ReadView<'_>, c: &CollectionConfig) -> Result<Collection> {
    let mut index = new_index(c).map_err(StorageError::Corrupt)?;
    let logged = counters(view, &c.name)?.next_node.is_some();
    let mut seen = BTreeSet::new();
    let mut restored = 0;
    if logged {
        if let Some((from_checkpoint, seqs)) = restore_checkpoint(view, c)? {
            index = from_checkpoint;
            restored = index.nodes();
            seen.extend(seqs);
        }
        let prefix = nodes_prefix(&c.name);
        let first = node_key(&c.name, restored as u64);
        let end = crate::keys::prefix_end(&prefix).expect("a prefix that ends in a name");
        view.scan_range(&first[..], &end, |k, v| {
            let b: [u8; 8] = k[prefix.len()..].try_into().map_err(|_| StorageError::Corrupt("vector node key".into()))?;
            let node = u64::from_be_bytes(b);
            if node != index.nodes() as u64 {
                return Err(StorageError::Corrupt(format!("vector node log of {} skips to node {node}", c.name)));
            }
            let (seq, vector) = decode_node(v, c.dim as usize)?;
            let added = index.insert(seq, &vector).map_err(|e| StorageError::Corrupt(format!("vector node {node}: {e}")))?;
            if !added {
                return Err(StorageError::Corrupt(format!("vector node {node} of {} repeats its vector", c.name)));
            }
            seen.insert(seq);
            Ok(true)
        })?;
    }
    let mut entries = HashMap::new();
    let prefix = records_prefix(&c.name);
    view.scan_prefix(&prefix, |k, v| {
        let b: [u8; 8] = k[prefix.len()..].try_into().map_err(|_| StorageError::Corrupt("vector record key".into()))?;
        let seq = u64::from_be_bytes(b);
        let r: VectorRecord = serde_json::from_slice(v)?;
        if !logged {
            index.insert(seq, &r.vector).map_err(|e| StorageError::Corrupt(format!("vector record {}: {e}", r.id)))?;
        } else if !index.contains(seq) {
            return Err(StorageError::Corrupt(format!("vector record {} has no node in the log", r.id)));
        }
        entries.insert(seq, (r.id, r.metadata));
        Ok(true)
    })?;
    for seq in seen.into_iter().filter(|s| !entries.contains_key(s)) {
        index.delete(seq);
    }
    let linked = index.nodes() - restored;
    if restored > 0 || linked >= CHECKPOINT_MIN_NODES {
        tracing::info!(collection = c.name, records = entries.len(), restored, linked, "vector index built");
    } else {
        tracing::debug!(collection = c.name, records = entries.len(), restored, linked, "vector index built");
    }
    let col = Collection::new(index, entries, restored);
    if logged && linked >= CHECKPOINT_MIN_NODES {
        // The checkpoint only saves time: a failure to write it is not the load's.
        if let Err(e) = save_checkpoint(view, c, &col) {
            tracing::warn!(collection = c.name, "writing the vector index link checkpoint: {e}");
        }
    }
    Ok(col)
}

/// The index restored from the stored link checkpoint of `c` and the node
/// log's first nodes, with their sequence numbers; `None` when there is no
/// checkpoint or it does not fit the log (then it is ignored, and replaced
/// once the rebuild is done).
fn restore_checkpoint(view: &ReadView<'_>, c: &CollectionConfig) -> Result<Option<(HnswIndex, Vec<u64>)>> {
    // Derived data that cannot be read is rebuilt, never fatal.
    let stored = match view.derived(&checkpoint_key(c)) {
        Ok(Some(stored)) if stored.len() > 8 => stored,
        Ok(_) => return Ok(None),
        Err(e) => {
            tracing::warn!(collection = c.name, "vector index link checkpoint unreadable, rebuilding: {e}");
            return Ok(None);
        }
    };
    let (digest, checkpoint) = stored.split_at(8);
    let Some(n) = HnswIndex::checkpoint_nodes(checkpoint) else { return Ok(None) };
    let prefix = nodes_prefix(&c.name);
    let mut nodes = Vec::new();
    let mut hash = NodeLogDigest::default();
    view.scan_prefix(&prefix, |k, v| {
        if nodes.len() as u64 == n {
            return Ok(false);
        }
        if k[prefix.len()..] != (nodes.len() as u64).to_be_bytes() {
            return Err(StorageError::Corrupt(format!("vector node log of {} skips node {}", c.name, nodes.len())));
        }
        hash.add(v);
        nodes.push(decode_node(v, c.dim as usize)?);
        Ok(true)
    })?;
    if nodes.len() as u64 != n || hash.0.to_le_bytes() != digest {
        tracing::warn!(collection = c.name, "vector index link checkpoint does not match the node log; rebuilding");
        return Ok(None);
    }
    let seqs: Vec<u64> = nodes.iter().map(|(seq, _)| *seq).collect();
    let params = new_index(c).map_err(StorageError::Corrupt)?.params().to_owned();
    match HnswIndex::from_links_checkpoint(c.dim as usize, metric(c.metric), params, nodes, checkpoint) {
        Ok(index) => Ok(Some((index, seqs))),
        Err(e) => {
            tracing::warn!(collection = c.name, "vector index link checkpoint not used: {e}");
            Ok(None)
        }
    }
}

/// Every collection of the group, in name order.
fn all_configs(view: &ReadView<'_>) -> Result<Vec<CollectionConfig>> {
    let mut configs = Vec::new();
    view.scan_prefix(b"c/", |_, v| {
        configs.push(serde_json::from_slice::<CollectionConfig>(v)?);
        Ok(true)
    })?;
    Ok(configs)
}

/// Stores a link checkpoint of `col`'s index.
fn save_checkpoint(view: &ReadView<'_>, c: &CollectionConfig, col: &Collection) -> Result<()> {
    let nodes = col.index.nodes();
    if put_checkpoint(view, c, nodes, col.index.links_checkpoint())? {
        col.checkpointed.store(nodes, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(())
}

/// FNV-1a 64 over node-log values: ties a checkpoint to the exact node log it
/// was taken of.
#[derive(Default)]
struct NodeLogDigest(u64);

impl NodeLogDigest {
    fn add(&mut self, value: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for chunk in [&(value.len() as u64).to_le_bytes()[..], value] {
            for &b in chunk {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
}

/// Stores `checkpoint` (of the first `nodes` nodes) with the digest of those
/// nodes' log values; `false` (nothing stored) when the stored log does not
/// hold that many nodes (an apply that was rolled back).
fn put_checkpoint(view: &ReadView<'_>, c: &CollectionConfig, nodes: usize, checkpoint: Vec<u8>) -> Result<bool> {
    let (mut hash, mut seen) = (NodeLogDigest::default(), 0usize);
    view.scan_prefix(&nodes_prefix(&c.name), |_, v| {
        if seen == nodes {
            return Ok(false);
        }
        hash.add(v);
        seen += 1;
        Ok(true)
    })?;
    if seen != nodes {
        return Ok(false);
    }
    let mut value = hash.0.to_le_bytes().to_vec();
    value.extend_from_slice(&checkpoint);
    view.put_derived(&checkpoint_key(c), &value)?;
    Ok(true)
}

/// Stores a link checkpoint of every index in memory that has at least
/// [`CHECKPOINT_MIN_NODES`] nodes and grew since its last one: by any number
/// of nodes when `min_new` is 1 (at shutdown), otherwise by `min_new` and by a
/// quarter of the last checkpoint (so a large index is not rewritten every
/// period), and forgets the checkpoints of collections that are gone. Each index
/// is serialized under the read lock (applies wait for it, searches do not).
/// Returns how many checkpoints were written.
pub fn checkpoint(data: &GroupData, min_new: usize) -> Result<usize> {
    checkpoint_larger_than(data, min_new, CHECKPOINT_MIN_NODES)
}

fn checkpoint_larger_than(data: &GroupData, min_new: usize, min_nodes: usize) -> Result<usize> {
    let view = data.space(space::VECTOR);
    let configs = all_configs(&view)?;
    let mut written = 0;
    for c in &configs {
        if counters(&view, &c.name)?.next_node.is_none() {
            continue; // rebuilt from its records, not from a node log
        }
        let checkpoint = {
            let map = data.memory.vectors.read();
            let Some(Slot::Live(col)) = map.get(&c.name) else { continue };
            let nodes = col.index.nodes();
            let last = col.checkpointed.load(std::sync::atomic::Ordering::Relaxed);
            let growth = if min_new <= 1 { 1 } else { min_new.max(last / 4) };
            if nodes < min_nodes || nodes < last + growth {
                continue;
            }
            (nodes, col.index.links_checkpoint())
        };
        if put_checkpoint(&view, c, checkpoint.0, checkpoint.1)? {
            if let Some(Slot::Live(col)) = data.memory.vectors.read().get(&c.name) {
                col.checkpointed.fetch_max(checkpoint.0, std::sync::atomic::Ordering::Relaxed);
            }
            written += 1;
        }
    }
    // Collections created since the scan above keep their checkpoints.
    let live: BTreeSet<Vec<u8>> = all_configs(&view)?.iter().map(checkpoint_key).collect();
    for key in view.derived_keys(b"h/")? {
        if !live.contains(&key) {
            view.delete_derived(&key)?;
        }
    }
    Ok(written)
}

/// The live collection in `map`, loaded from storage when missing.
fn live<'m>(map: &'m mut BTreeMap<String, Slot>, view: &ReadView<'_>, c: &CollectionConfig) -> Result<&'m mut Collection> {
    if !matches!(map.get(&c.name), Some(Slot::Live(_))) {
        map.insert(c.name.clone(), Slot::Live(Box::new(load(view, c)?)));
    }
    match map.get_mut(&c.name) {
        Some(Slot::Live(col)) => Ok(col),
        _ => Err(StorageError::Corrupt("vector index vanished".into())),
    }
}

fn reject(kind: ErrorCode, message: String) -> Result<Response> {
    Ok(Response::rejected(kind, message))
}

/// Whether a command naming `uid` was meant for another incarnation of the collection.
fn stale(c: &CollectionConfig, uid: &Option<String>) -> bool {
    uid.as_ref().is_some_and(|u| *u != c.uid)
}

fn recreated(name: &str) -> String {
    format!("collection {name} does not exist (it was dropped and recreated)")
}

/// Vector engine: applies writes to storage and to the group's in-memory indexes.
pub struct VectorEngine<'a> {
    pub state: &'a VectorState,
}

impl Engine for VectorEngine<'_> {
    const SPACE: u8 = super::space::VECTOR;
    type Op = VectorOp;
    type Query = VectorQuery;
    type Answer = VectorQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &VectorQuery) -> Result<Answer<VectorQueryResult>> {
        self::query(ctx.data, query)
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &VectorOp) -> Result<Response> {
        match op {
            VectorOp::CreateCollection(c) => {
                if let Err(e) = validate_collection_name(&c.name) {
                    return reject(ErrorCode::Invalid, e);
                }
                if !(1..=MAX_DIM).contains(&c.dim) {
                    return reject(ErrorCode::Invalid, format!("dim must be 1 to {MAX_DIM}"));
                }
                let index = match new_index(c) {
                    Ok(i) => i,
                    Err(e) => return reject(ErrorCode::Invalid, e),
                };
                if config(tx.view(), &c.name)?.is_some() {
                    return reject(ErrorCode::Conflict, format!("collection {} already exists", c.name));
                }
                let stored = CollectionConfig { created_at_ms: now, ..c.clone() };
                tx.put(&config_key(&c.name), &serde_json::to_vec(&stored)?);
                let n = Counters { next_node: Some(0), ..Counters::default() };
                tx.put(&counters_key(&c.name), &serde_json::to_vec(&n)?);
                let col = Collection::new(index, HashMap::new(), 0);
                self.state.write().insert(c.name.clone(), Slot::Live(Box::new(col)));
                Ok(Response::Vector(VectorResponse::Created(stored)))
            }
            VectorOp::DropCollection { name, uid } => {
                match config(tx.view(), name)? {
                    None => return reject(ErrorCode::NotFound, format!("collection {name} does not exist")),
                    Some(c) if stale(&c, uid) => return reject(ErrorCode::NotFound, recreated(name)),
                    Some(_) => {}
                }
                let count = counters(tx.view(), name)?.count;
                tx.delete_prefix(&ids_prefix(name));
                tx.delete_prefix(&records_prefix(name));
                tx.delete_prefix(&nodes_prefix(name));
                tx.delete(&counters_key(name));
                tx.delete(&config_key(name));
                self.state.write().insert(name.clone(), Slot::Dropped);
                Ok(Response::Vector(VectorResponse::Dropped { count }))
            }
            VectorOp::Upsert { collection, records, uid } => self.upsert(tx, now, collection, records, uid),
            VectorOp::Delete { collection, id, uid } => {
                let Some(c) = config(tx.view(), collection)? else {
                    return reject(ErrorCode::NotFound, format!("collection {collection} does not exist"));
                };
                if stale(&c, uid) {
                    return reject(ErrorCode::NotFound, recreated(collection));
                }
                let Some(seq) = seq_of(tx.view(), collection, id)? else {
                    return reject(ErrorCode::NotFound, format!("record {id} does not exist in {collection}"));
                };
                let mut n = counters(tx.view(), collection)?;
                n.count = n.count.saturating_sub(1);
                tx.delete(&id_key(collection, id));
                tx.delete(&record_key(collection, seq));
                tx.put(&counters_key(collection), &serde_json::to_vec(&n)?);
                let mut map = self.state.write();
                let col = live(&mut map, tx.view(), &c)?;
                col.index.delete(seq);
                col.entries.remove(&seq);
                Ok(Response::Vector(VectorResponse::Deleted))
            }
        }
    }
}

impl VectorEngine<'_> {
    fn upsert(&self, tx: &mut Tx<'_>, now: i64, collection: &str, records: &[VectorRecord], uid: &Option<String>) -> Result<Response> {
        let Some(c) = config(tx.view(), collection)? else {
            return reject(ErrorCode::NotFound, format!("collection {collection} does not exist"));
        };
        if stale(&c, uid) {
            return reject(ErrorCode::NotFound, recreated(collection));
        }
        // Validate everything first: a rejected batch changes nothing.
        let m = metric(c.metric);
        for r in records {
            if let Err(e) = validate_record_id(&r.id) {
                return reject(ErrorCode::Invalid, e);
            }
            if let Err(e) = m.prepare(&r.vector, c.dim as usize) {
                return reject(ErrorCode::Invalid, format!("record {}: {e}", r.id));
            }
            if !(r.metadata.is_object() || r.metadata.is_null()) {
                return reject(ErrorCode::Invalid, format!("record {}: metadata must be a JSON object", r.id));
            }
        }
        let mut n = counters(tx.view(), collection)?;
        let dim = c.dim as usize;
        // Within one batch reads do not see earlier puts: track this batch's
        // records (sequence number, creation time, latest vector).
        let mut batch: HashMap<&str, (u64, i64, &[f32])> = HashMap::new();
        let mut planned = Vec::with_capacity(records.len());
        let (mut inserted, mut updated) = (0u64, 0u64);
        for r in records {
            let (seq, previous) = match batch.get(r.id.as_str()) {
                Some(&(seq, created, vector)) => (seq, Some((created, vector.to_vec()))),
                None => match seq_of(tx.view(), collection, &r.id)? {
                    Some(seq) => {
                        let old = record(tx.view(), collection, seq)?;
                        (seq, Some(old.map_or((now, Vec::new()), |old| (old.created_at_ms, old.vector))))
                    }
                    None => {
                        let seq = n.next_seq;
                        n.next_seq += 1;
                        n.count += 1;
                        tx.put(&id_key(collection, &r.id), &seq.to_be_bytes());
                        (seq, None)
                    }
                },
            };
            // The index appends a node unless the prepared vector is unchanged
            // (decided here from storage, so every replica numbers nodes alike).
            let adds_node = match &previous {
                Some((_, old)) => m.prepare(old, dim).ok() != m.prepare(&r.vector, dim).ok(),
                None => true,
            };
            let node = match (adds_node, n.next_node.as_mut()) {
                (true, Some(next)) => {
                    let node = *next;
                    *next += 1;
                    tx.put(&node_key(collection, node), &node_value(seq, &r.vector));
                    Some(node)
                }
                _ => None,
            };
            match previous {
                Some(_) => updated += 1,
                None => inserted += 1,
            }
            let created = previous.map_or(now, |(created, _)| created);
            let stored = VectorRecord { created_at_ms: created, updated_at_ms: now, ..r.clone() };
            tx.put(&record_key(collection, seq), &serde_json::to_vec(&stored)?);
            batch.insert(&r.id, (seq, created, &r.vector));
            planned.push((seq, stored, node));
        }
        tx.put(&counters_key(collection), &serde_json::to_vec(&n)?);

        let mut map = self.state.write();
        let col = live(&mut map, tx.view(), &c)?;
        for (seq, r, node) in planned {
            let before = col.index.nodes() as u64;
            let added = match col.index.insert(seq, &r.vector) {
                Ok(added) => added,
                Err(e) => {
                    // Only capacity can fail here; rebuild from storage on next use.
                    map.remove(collection);
                    return Err(StorageError::Corrupt(format!("vector index insert: {e}")));
                }
            };
            if n.next_node.is_some() && (node.is_some() != added || node.is_some_and(|node| node != before)) {
                // Cannot happen while the index mirrors the node log; say so loudly.
                tracing::error!(collection, seq, ?node, before, added, "vector index out of step with its node log");
            }
            col.entries.insert(seq, (r.id, r.metadata));
        }
        Ok(Response::Vector(VectorResponse::Upserted { inserted, updated }))
    }
}

fn missing<T>(name: &str) -> Answer<T> {
    Err(Rejection::not_found(format!("collection {name} does not exist")))
}

/// Answers a vector query from a replica's state.
pub fn query(data: &GroupData, q: &VectorQuery) -> Result<Answer<VectorQueryResult>> {
    let view = data.space(space::VECTOR);
    Ok(Ok(match q {
        VectorQuery::ListCollections => {
            let stats = all_configs(&view)?
                .into_iter()
                .map(|config| Ok(CollectionStats { count: counters(&view, &config.name)?.count, config }))
                .collect::<Result<Vec<_>>>()?;
            VectorQueryResult::Collections(stats)
        }
        VectorQuery::Stats { name } => match config(&view, name)? {
            Some(config) => VectorQueryResult::Stats(CollectionStats { count: counters(&view, name)?.count, config }),
            None => return Ok(missing(name)),
        },
        VectorQuery::Get { collection, id, uid } => {
            match config(&view, collection)? {
                None => return Ok(missing(collection)),
                Some(c) if stale(&c, uid) => {
                    return Ok(Err(Rejection::not_found(recreated(collection))));
                }
                Some(_) => {}
            }
            let found = match seq_of(&view, collection, id)? {
                Some(seq) => record(&view, collection, seq)?,
                None => None,
            };
            match found {
                Some(r) => VectorQueryResult::Record(r),
                None => return Ok(Err(Rejection::not_found(format!("record {id} does not exist in {collection}")))),
            }
        }
        VectorQuery::Search(req) => return search(data, &view, req),
        VectorQuery::Scan { collection, uid, after, limit } => {
            match config(&view, collection)? {
                None => return Ok(missing(collection)),
                Some(c) if stale(&c, uid) => return Ok(Err(Rejection::not_found(recreated(collection)))),
                Some(_) => {}
            }
            let prefix = records_prefix(collection);
            let start = match after {
                Some(seq) => record_key(collection, seq.saturating_add(1)),
                None => prefix.clone(),
            };
            let end = [prefix.as_slice(), &[0xff; 9]].concat();
            let (mut records, mut last, mut more) = (Vec::new(), None, false);
            view.scan_range(&start, &end, |k, v| {
                if records.len() >= *limit as usize {
                    more = true;
                    return Ok(false);
                }
                let seq_bytes: [u8; 8] = k[prefix.len()..].try_into().map_err(|_| StorageError::Corrupt("vector record key".into()))?;
                last = Some(u64::from_be_bytes(seq_bytes));
                records.push(serde_json::from_slice::<VectorRecord>(v)?);
                Ok(true)
            })?;
            VectorQueryResult::Page { records, next: if more { last } else { None } }
        }
    }))
}

/// Builds every collection index of the group that is not in memory yet (after
/// a start or an install), so the first searches do not pay for it. Returns how
/// many were built. Builds run outside the group's index lock.
pub fn warm(data: &GroupData) -> Result<usize> {
    let view = data.space(space::VECTOR);
    let configs = all_configs(&view)?;
    let mut built = 0;
    for c in configs {
        // Built outside the lock, so applies and searches of the group's other
        // collections go on meanwhile; dropped when a writer came in between.
        if data.memory.vectors.absent(&c.name).is_some() && data.memory.vectors.build_outside_lock(&view, &c)? {
            built += 1;
        }
    }
    Ok(built)
}

fn search(data: &GroupData, view: &ReadView<'_>, req: &SearchRequest) -> Result<Answer<VectorQueryResult>> {
    let Some(c) = config(view, &req.collection)? else {
        return Ok(missing(&req.collection));
    };
    if stale(&c, &req.uid) {
        return Ok(Err(Rejection::not_found(recreated(&req.collection))));
    }
    let invalid = |message: String| Ok(Err(Rejection::invalid(message)));
    if let Err(e) = metric(c.metric).prepare(&req.vector, c.dim as usize) {
        return invalid(format!("query vector: {e}"));
    }
    let state = &data.memory.vectors;
    loop {
        {
            let map = state.read();
            match map.get(&c.name) {
                Some(Slot::Live(col)) => return Ok(search_in(col, &c, req)),
                Some(Slot::Dropped) => return Ok(missing(&req.collection)),
                None => {}
            }
        }
        // Build outside the lock, or wait for the build already running (the
        // warm-up's after a start, or another first search's). Only when a writer
        // came during that build, build under the write lock (re-checked inside),
        // which always completes; then search under a read lock.
        if !state.build_outside_lock(view, &c)? {
            let mut map = state.write();
            if map.get(&c.name).is_none() {
                live(&mut map, view, &c)?;
            }
        }
    }
}

fn search_in(col: &Collection, c: &CollectionConfig, req: &SearchRequest) -> Answer<VectorQueryResult> {
    let accept = |seq: u64| req.filter.as_ref().is_none_or(|f| col.entries.get(&seq).is_some_and(|(_, meta)| f.matches(meta)));
    let filter: Option<&dyn Fn(u64) -> bool> = if req.filter.is_some() { Some(&accept) } else { None };
    let hits = match col.index.search(&req.vector, req.k as usize, req.ef.map(|e| e as usize), filter) {
        Ok(h) => h,
        Err(e) => return Err(Rejection::invalid(e.to_string())),
    };
    let m = metric(c.metric);
    Ok(VectorQueryResult::Hits(
        hits.into_iter()
            .filter_map(|h| {
                let (id, metadata) = col.entries.get(&h.id)?;
                Some(VectorHit { id: id.clone(), score: score(m, h.distance), distance: h.distance, metadata: metadata.clone() })
            })
            .collect(),
    ))
}

/// Records of a data subject: the record whose id is the subject id, or whose
/// metadata has a subject field. Erased as deletes are (out of the store, the
/// counters and the replica's index), and their vectors in the node log are
/// replaced by a neutral one, so no copy of them stays on disk.
impl crate::subject::SubjectRecords for VectorEngine<'_> {
    const STORE: &'static str = "vector";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        let mut items = Vec::new();
        view.scan_prefix(b"r/", |k, v| {
            let r: VectorRecord = serde_json::from_slice(v)?;
            if (r.id == rule.subject_id || rule.matches_object(&r.metadata)) && k.len() >= 2 + 1 + 8 {
                items.push(tessera_api::compliance::SubjectItem {
                    store: Self::STORE.into(),
                    location: String::from_utf8_lossy(&k[2..k.len() - 9]).into_owned(),
                    item_id: r.id.clone(),
                    data: serde_json::json!({"id": r.id, "vector": r.vector, "metadata": r.metadata}),
                    bytes: (k.len() + v.len()) as u64,
                    at_ms: Some(r.updated_at_ms),
                });
            }
            Ok(true)
        })?;
        Ok(items)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        _now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        let mut by_collection: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
        for item in items {
            by_collection.entry(item.location.as_str()).or_default().push(item.item_id.as_str());
        }
        // A node-log record that does not decode may hold an erased vector no
        // one can find: the erasure is refused (nothing of it applies; the job
        // stays pending and uncertified) rather than certified over it.
        for collection in by_collection.keys() {
            let Some(c) = config(tx.view(), collection)? else { continue };
            let mut undecodable = 0usize;
            tx.view().scan_prefix(&nodes_prefix(collection), |_, v| {
                undecodable += usize::from(decode_node(v, c.dim as usize).is_err());
                Ok(true)
            })?;
            if undecodable > 0 {
                return Ok(Some(tessera_api::error::Rejection::new(
                    tessera_api::error::ErrorCode::Storage,
                    format!(
                        "vector collection {collection}: {undecodable} node-log records do not decode; the erasure cannot show that none holds the subject's vectors (rebuild the collection, then erase again)"
                    ),
                )));
            }
        }
        for (collection, ids) in by_collection {
            let Some(c) = config(tx.view(), collection)? else { continue };
            let mut n = counters(tx.view(), collection)?;
            let mut seqs = Vec::new();
            for id in ids {
                if let Some(seq) = seq_of(tx.view(), collection, id)? {
                    tx.delete(&id_key(collection, id));
                    tx.delete(&record_key(collection, seq));
                    n.count = n.count.saturating_sub(1);
                    seqs.push(seq);
                }
            }
            tx.put(&counters_key(collection), &serde_json::to_vec(&n)?);
            // The node log keeps every vector the index was built from; an
            // erased record's vectors there become a neutral one (all ones) of
            // the same dimension. The node log's digest changes with it, so no
            // stored link checkpoint matches and every replica rebuilds the
            // same graph from the rewritten log (the state machine drops the
            // in-memory indexes once this apply is written).
            let erased: BTreeSet<u64> = seqs.iter().copied().collect();
            let neutral = vec![1.0f32; c.dim as usize];
            let mut rewritten = Vec::new();
            tx.view().scan_prefix(&nodes_prefix(collection), |k, v| {
                // Every record decodes (checked above).
                let (seq, _) = decode_node(v, c.dim as usize)?;
                if erased.contains(&seq) {
                    rewritten.push((k.to_vec(), node_value(seq, &neutral)));
                }
                Ok(true)
            })?;
            for (k, v) in rewritten {
                tx.put(&k, &v);
            }
            let mut map = self.state.write();
            let col = live(&mut map, tx.view(), &c)?;
            for seq in seqs {
                col.index.delete(seq);
                col.entries.remove(&seq);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {

    use rocksdb::WriteBatch;
    use serde_json::json;
    use tessera_api::vector::MetadataFilter;

    use super::*;

    #[test]
    fn seeds_differ_by_name() {
        assert_ne!(seed("a"), seed("b"));
        assert_eq!(seed("a"), seed("a"));
    }

    fn apply(data: &GroupData, op: VectorOp) -> Response {
        let mut batch = WriteBatch::default();
        let engine = VectorEngine { state: &data.memory.vectors };
        let r = engine.apply(&mut Tx::new(&data.db, data.group, space::VECTOR, &mut batch), 7, &op).unwrap();
        data.db.write(batch).unwrap();
        r
    }

    fn rec(id: &str, v: &[f32], color: &str) -> VectorRecord {
        VectorRecord { id: id.into(), vector: v.to_vec(), metadata: json!({"color": color}), created_at_ms: 0, updated_at_ms: 0 }
    }

    fn ids(data: &GroupData, v: &[f32], k: u32, filter: Option<Value>) -> Vec<String> {
        let filter = filter.map(|f| MetadataFilter::parse(&f).unwrap());
        let q = VectorQuery::Search(SearchRequest { collection: "c".into(), vector: v.to_vec(), k, ef: None, filter, uid: None });
        match query(data, &q).unwrap() {
            Ok(VectorQueryResult::Hits(h)) => h.into_iter().map(|h| h.id).collect(),
            other => panic!("{other:?}"),
        }
    }

    /// An index built outside the lock is kept only when no writer came in
    /// between (here: a snapshot install's invalidation) and the slot is still free.
    #[test]
    fn a_build_outside_the_lock_loses_to_any_writer() {
        let (_dir, data) = crate::engine::test_support::open_group(3);
        let config = CollectionConfig {
            name: "c".into(),
            dim: 2,
            metric: VectorMetric::L2,
            m: 16,
            ef_construction: 50,
            created_at_ms: 0,
            shards: vec![3],
            uid: "u1".into(),
        };
        apply(&data, VectorOp::CreateCollection(config.clone()));
        data.memory.vectors.invalidate();
        let view = data.space(space::VECTOR);
        let generation = data.memory.vectors.absent("c").expect("no index after an invalidation");
        let built = load(&view, &config).unwrap();
        data.memory.vectors.invalidate(); // a writer came meanwhile
        assert!(!data.memory.vectors.keep_built(generation, "c", built), "a build that raced a writer was kept");
        let generation = data.memory.vectors.absent("c").unwrap();
        assert!(data.memory.vectors.keep_built(generation, "c", load(&view, &config).unwrap()));
        assert_eq!(data.memory.vectors.absent("c"), None);
        assert_eq!(warm(&data).unwrap(), 0, "warm builds only what is missing");
        data.memory.vectors.invalidate();
        assert_eq!(warm(&data).unwrap(), 1);
    }

    /// Batches with repeated ids, deletes, a rebuild from storage (restart or
    /// snapshot install) and drop/recreate all keep index and records in step.
    #[test]
    fn apply_rebuild_and_drop() {
        let (_dir, data) = crate::engine::test_support::open_group(3);
        let config = CollectionConfig {
            name: "c".into(),
            dim: 2,
            metric: VectorMetric::L2,
            m: 16,
            ef_construction: 50,
            created_at_ms: 0,
            shards: vec![3],
            uid: "u1".into(),
        };
        assert!(matches!(apply(&data, VectorOp::CreateCollection(config.clone())), Response::Vector(_)));
        assert!(matches!(
            apply(&data, VectorOp::CreateCollection(config.clone())),
            Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })
        ));
        // A command for another incarnation of the collection changes nothing.
        let r =
            apply(&data, VectorOp::Upsert { collection: "c".into(), records: vec![rec("s", &[0.0, 0.0], "red")], uid: Some("u0".into()) });
        assert!(matches!(r, Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        let r = apply(&data, VectorOp::Upsert { collection: "c".into(), records: vec![], uid: Some("u1".into()) });
        assert_eq!(r, Response::Vector(VectorResponse::Upserted { inserted: 0, updated: 0 }));
        let records = vec![rec("a", &[0.0, 0.0], "red"), rec("b", &[1.0, 0.0], "blue"), rec("a", &[5.0, 5.0], "red")];
        let r = apply(&data, VectorOp::Upsert { collection: "c".into(), records, uid: None });
        assert_eq!(r, Response::Vector(VectorResponse::Upserted { inserted: 2, updated: 1 }));
        let bad = vec![rec("x", &[1.0, 1.0], "red"), rec("y", &[1.0], "red")];
        let r = apply(&data, VectorOp::Upsert { collection: "c".into(), records: bad, uid: None });
        assert!(matches!(r, Response::Rejected(Rejection { code: ErrorCode::Invalid, .. })));
        let more = (0..50).map(|i| rec(&format!("p{i}"), &[i as f32, 1.0], if i % 2 == 0 { "red" } else { "blue" })).collect();
        apply(&data, VectorOp::Upsert { collection: "c".into(), records: more, uid: None });
        assert_eq!(ids(&data, &[0.0, 0.0], 2, None), ["b", "p0"]);
        assert_eq!(ids(&data, &[5.0, 5.0], 1, None), ["a"]);
        apply(&data, VectorOp::Delete { collection: "c".into(), id: "b".into(), uid: None });
        let r = apply(&data, VectorOp::Delete { collection: "c".into(), id: "b".into(), uid: None });
        assert!(matches!(r, Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        let before = ids(&data, &[0.5, 0.5], 10, Some(json!({"color": "red"})));
        assert_eq!(before.len(), 10);
        assert!(!before.contains(&"b".to_string()));

        // A fresh state (restart) and an invalidated one (snapshot install) rebuild lazily.
        let restarted = GroupData { memory: Default::default(), ..data.clone() };
        assert_eq!(ids(&restarted, &[0.5, 0.5], 10, Some(json!({"color": "red"}))), before);
        data.memory.vectors.invalidate();
        assert_eq!(ids(&data, &[0.5, 0.5], 10, Some(json!({"color": "red"}))), before);
        match query(&data, &VectorQuery::Stats { name: "c".into() }).unwrap() {
            Ok(VectorQueryResult::Stats(s)) => assert_eq!(s.count, 51),
            other => panic!("{other:?}"),
        }

        assert_eq!(
            apply(&data, VectorOp::DropCollection { name: "c".into(), uid: None }),
            Response::Vector(VectorResponse::Dropped { count: 51 })
        );
        let q =
            VectorQuery::Search(SearchRequest { collection: "c".into(), vector: vec![0.0, 0.0], k: 1, ef: None, filter: None, uid: None });
        assert!(matches!(query(&data, &q).unwrap(), Err(Rejection { code: ErrorCode::NotFound, .. })));
        apply(&data, VectorOp::CreateCollection(config));
        assert!(ids(&data, &[0.0, 0.0], 5, None).is_empty());
        let mut left = 0;
        data.space(space::VECTOR)
            .scan_prefix(b"", |_, _| {
                left += 1;
                Ok(true)
            })
            .unwrap();
        assert_eq!(left, 2, "only the new config and counters remain");
    }

    fn hits(data: &GroupData, v: &[f32], ef: Option<u32>, filter: Option<Value>) -> Vec<(String, u32)> {
        let filter = filter.map(|f| MetadataFilter::parse(&f).unwrap());
        let q = VectorQuery::Search(SearchRequest { collection: "c".into(), vector: v.to_vec(), k: 10, ef, filter, uid: None });
        match query(data, &q).unwrap() {
            Ok(VectorQueryResult::Hits(h)) => h.into_iter().map(|h| (h.id, h.distance.to_bits())).collect(),
            other => panic!("{other:?}"),
        }
    }

    /// Inserts, updates with new (and unchanged) vectors, deletes, more
    /// inserts: a replica that rebuilds its index from storage answers every
    /// search exactly like one that applied the commands live, where the old
    /// rebuild from the live records in sequence order does not.
    #[test]
    fn rebuild_replays_the_node_log() {
        let (_dir, data) = crate::engine::test_support::open_group(3);
        let config = CollectionConfig {
            name: "c".into(),
            dim: 8,
            metric: VectorMetric::Cosine,
            m: 4,
            ef_construction: 8,
            created_at_ms: 0,
            shards: vec![3],
            uid: "u1".into(),
        };
        apply(&data, VectorOp::CreateCollection(config.clone()));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let mut vec8 = || (0..8).map(|_| rand()).collect::<Vec<f32>>();
        let color = |i: usize| if i.is_multiple_of(3) { "red" } else { "blue" };
        let upsert = |records: Vec<VectorRecord>| {
            let r = apply(&data, VectorOp::Upsert { collection: "c".into(), records, uid: None });
            assert!(matches!(r, Response::Vector(VectorResponse::Upserted { .. })), "{r:?}");
        };
        let delete = |i: usize| {
            let r = apply(&data, VectorOp::Delete { collection: "c".into(), id: format!("p{i}"), uid: None });
            assert_eq!(r, Response::Vector(VectorResponse::Deleted));
        };
        let mut current: HashMap<usize, Vec<f32>> = HashMap::new();
        for chunk in (0..300).collect::<Vec<_>>().chunks(50) {
            let batch = chunk.iter().map(|&i| {
                let v = vec8();
                current.insert(i, v.clone());
                rec(&format!("p{i}"), &v, color(i))
            });
            upsert(batch.collect());
        }
        // Updates: new vectors (one id twice in a batch), an unchanged and a
        // rescaled one (equal once normalized: no new node), interleaved with deletes.
        for round in 0..6 {
            let mut batch = Vec::new();
            for i in (round * 7..300).step_by(13) {
                let v = vec8();
                current.insert(i, v.clone());
                batch.push(rec(&format!("p{i}"), &v, color(i)));
            }
            let v = vec8();
            batch.push(rec(&format!("p{}", round * 7), &v, "red"));
            current.insert(round * 7, v);
            let same = (round * 11 + 1..).find(|i| current.contains_key(i) && current.contains_key(&(i + 1))).unwrap();
            batch.push(rec(&format!("p{same}"), &current[&same], color(same)));
            let scaled: Vec<f32> = current[&(same + 1)].iter().map(|x| x * 2.0).collect();
            batch.push(rec(&format!("p{}", same + 1), &scaled, color(same + 1)));
            upsert(batch);
            for i in (round * 5 + 2..300).step_by(29) {
                if current.remove(&i).is_some() {
                    delete(i);
                }
            }
        }
        // A link checkpoint now; the nodes appended after it are linked on rebuild.
        let view = data.space(space::VECTOR);
        assert_eq!(checkpoint_larger_than(&data, 1, 1).unwrap(), 1);
        assert_eq!(checkpoint_larger_than(&data, 1, 1).unwrap(), 0, "nothing new to checkpoint");
        let checkpointed = counters(&view, "c").unwrap().next_node.unwrap() as usize;
        let restored = |d: &GroupData| match d.memory.vectors.read().get("c") {
            Some(Slot::Live(col)) => col.checkpointed.load(std::sync::atomic::Ordering::Relaxed),
            _ => panic!("no live index"),
        };
        for chunk in (300..400).collect::<Vec<_>>().chunks(25) {
            upsert(
                chunk
                    .iter()
                    .map(|&i| {
                        let v = vec8();
                        current.insert(i, v.clone());
                        rec(&format!("p{i}"), &v, color(i))
                    })
                    .collect(),
            );
        }
        let nodes = counters(&data.space(space::VECTOR), "c").unwrap().next_node.unwrap();
        {
            let map = data.memory.vectors.read();
            let Some(Slot::Live(col)) = map.get("c") else { panic!("no live index") };
            assert_eq!(col.index.nodes() as u64, nodes);
            assert_eq!(col.index.len(), current.len());
            assert!(col.index.tombstones() > 0);
        }

        let queries: Vec<Vec<f32>> = (0..40).map(|_| vec8()).collect();
        let filters = [None, Some(json!({"color": "red"}))];
        let efs = [Some(10), Some(16), None];
        let answers = |d: &GroupData| {
            let mut out = Vec::new();
            for q in &queries {
                for ef in efs {
                    for f in &filters {
                        out.push(hits(d, q, ef, f.clone()));
                    }
                }
            }
            out
        };
        let live_answers = answers(&data);
        assert!(live_answers.iter().all(|h| h.len() == 10));
        let restarted = GroupData { memory: Default::default(), ..data.clone() };
        assert!(answers(&restarted) == live_answers, "a restarted replica answers differently");
        assert_eq!(restored(&restarted), checkpointed, "the rebuild did not start from the checkpoint");
        data.memory.vectors.invalidate();
        assert!(answers(&data) == live_answers, "a snapshot-installed replica answers differently");
        // A damaged checkpoint is ignored: the rebuild links every node.
        let key = checkpoint_key(&super::config(&view, "c").unwrap().unwrap());
        let valid = view.derived(&key).unwrap().unwrap();
        let mut damaged = valid.clone();
        damaged[40] ^= 0x10;
        view.put_derived(&key, &damaged).unwrap();
        let rebuilt = GroupData { memory: Default::default(), ..data.clone() };
        assert!(answers(&rebuilt) == live_answers, "a replica with a damaged checkpoint answers differently");
        assert_eq!(restored(&rebuilt), 0);
        // So is an intact checkpoint of another node log (its digest differs).
        let mut foreign = valid;
        foreign[0] ^= 0x01;
        view.put_derived(&key, &foreign).unwrap();
        let rebuilt = GroupData { memory: Default::default(), ..data.clone() };
        assert!(answers(&rebuilt) == live_answers, "a replica with a foreign checkpoint answers differently");
        assert_eq!(restored(&rebuilt), 0, "a checkpoint of another node log was restored");

        // The old rebuild (live records in sequence order, as for a collection
        // without a node log) builds another graph, which answers differently.
        let legacy = GroupData { memory: Default::default(), ..data.clone() };
        let n = counters(&legacy.space(space::VECTOR), "c").unwrap();
        let mut batch = WriteBatch::default();
        let mut tx = Tx::new(&legacy.db, legacy.group, space::VECTOR, &mut batch);
        tx.put(&counters_key("c"), &serde_json::to_vec(&Counters { next_node: None, ..n }).unwrap());
        legacy.db.write(batch).unwrap();
        assert!(answers(&legacy) != live_answers, "record-order rebuild happens to match; the test shows nothing");
        // A collection without a node log writes none and keeps rebuilding by record order.
        upsert(vec![rec("late", &vec8(), "red")]);
        let mut logged = 0;
        legacy
            .space(space::VECTOR)
            .scan_prefix(&nodes_prefix("c"), |_, _| {
                logged += 1;
                Ok(true)
            })
            .unwrap();
        assert_eq!(logged, nodes);

        assert_eq!(
            apply(&data, VectorOp::DropCollection { name: "c".into(), uid: None }),
            Response::Vector(VectorResponse::Dropped { count: current.len() as u64 + 1 })
        );
        let mut left = 0;
        data.space(space::VECTOR)
            .scan_prefix(b"", |_, _| {
                left += 1;
                Ok(true)
            })
            .unwrap();
        assert_eq!(left, 0, "drop removes the node log too");
        checkpoint_larger_than(&data, 1, 1).unwrap();
        assert_eq!(view.derived_keys(b"h/").unwrap(), Vec::<Vec<u8>>::new(), "the dropped collection's checkpoint is kept");
    }
}
