//! Key layout. Every key starts with the 8-byte big-endian group id, so one group's
//! data is one contiguous range in each column family.
//!
//! - `log` CF: `group | index(8 BE)` → log entry (MessagePack, `tessera_api::codec`).
//! - `raft` CF: `group | tag` → vote, committed, last purged log id, install and vote records.
//!   Snapshots are files (see `snapshot`).
//! - `data` CF: `group | space | key` → state machine records; space 0 holds the
//!   applied log id and membership so they travel with snapshots.
//! - `index` CF: `group | space | key` → node-local data derived from the `data`
//!   CF that is costly to recompute (vector index link checkpoints). Never
//!   replicated and not in snapshots: each entry says what it was derived from,
//!   and a reader checks that before using it.

pub const CF_LOG: &str = "log";
pub const CF_RAFT: &str = "raft";
pub const CF_DATA: &str = "data";
pub const CF_INDEX: &str = "index";

/// Tags in the `raft` column family.
pub const RAFT_VOTE: u8 = 1;
pub const RAFT_COMMITTED: u8 = 2;
pub const RAFT_PURGED: u8 = 3;
/// Snapshot meta and bytes of versions before file snapshots (removed at the next install).
pub const RAFT_SNAPSHOT_META: u8 = 4;
pub const RAFT_SNAPSHOT_DATA: u8 = 5;
/// An install between its ingest and its completion (see `snapshot::install`).
pub const RAFT_INSTALL_PENDING: u8 = 6;
/// The log index this replica must apply before it votes again (u64 JSON).
pub const RAFT_VOTE_FLOOR: u8 = 7;

/// Key spaces in the `data` column family.
pub const SPACE_SM: u8 = 0;
pub const SM_APPLIED: u8 = 0;
pub const SM_MEMBERSHIP: u8 = 1;
/// The group's applied clock: the largest command stamp applied (i64 BE).
pub const SM_CLOCK: u8 = 2;
/// Range sharding: the key-value range the group holds (JSON `KeyRange`; absent: every key).
pub const SM_RANGE: u8 = 3;
/// Range sharding: the splits the group applied (JSON list of `SplitRecord`).
pub const SM_SPLITS: u8 = 4;
/// A restore in progress: the backup id its `Begin` named (JSON string).
pub const SM_RESTORE: u8 = 5;
/// A restore's hold after its `End { hold: true }`: the backup id (JSON string);
/// only that restore's reads and writes pass until its `Release`.
pub const SM_RESTORE_HOLD: u8 = 6;
/// How far the entry being applied, a batch of commands, got before a crash:
/// its log index and how many of its commands are applied (two u64 BE).
pub const SM_BATCH_PROGRESS: u8 = 7;
/// Records of a restore in progress, staged until its `End` swaps them in
/// (key: `group | SPACE_RESTORE | relative key`).
pub const SPACE_RESTORE: u8 = 0xF8;

pub fn group_prefix(group: u64) -> [u8; 8] {
    group.to_be_bytes()
}

/// First key after every key of the group.
pub fn group_end(group: u64) -> Vec<u8> {
    match group.checked_add(1) {
        Some(next) => next.to_be_bytes().to_vec(),
        None => vec![0xff; 9],
    }
}

pub fn log_key(group: u64, index: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&group.to_be_bytes());
    k[8..].copy_from_slice(&index.to_be_bytes());
    k
}

pub fn log_index_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[8..16]);
    u64::from_be_bytes(b)
}

/// Node-level records in the `raft` CF live under this pseudo group id (no real
/// group has it).
pub const NODE_RECORDS: u64 = u64::MAX;
/// The placement the node recorded at its first start (JSON).
pub const NODE_PLACEMENT: u8 = 1;
/// This node's incarnation: a random id drawn when its data directory was new.
pub const NODE_INCARNATION: u8 = 2;
/// The incarnation each peer had when this node first heard from it (JSON map).
pub const NODE_PEER_INCARNATIONS: u8 = 3;
/// The id of the cluster the node was bootstrapped into (8 bytes, big-endian).
pub const NODE_CLUSTER_ID: u8 = 4;
/// Present when the node was drained: it neither campaigns nor leads (empty value).
pub const NODE_DRAINED: u8 = 5;
/// Present when the node was removed from the cluster: it refuses to start (the node id, 8 bytes).
pub const NODE_REMOVED: u8 = 6;
/// The groups this node hosts, when replicas were placed on it or moved away
/// after bootstrap (JSON list of group ids).
pub const NODE_GROUPS: u8 = 7;
/// The groups whose replica this node dropped (moved away): a split record of
/// a parent never brings them back (JSON list of group ids).
pub const NODE_DROPPED_GROUPS: u8 = 8;
/// This data directory's generation: raised (synced) at every start and every
/// few seconds while it runs, and told to the peers, so a directory rolled
/// back to an older copy finds a peer that heard a later one (8 bytes, big-endian).
pub const NODE_GENERATION: u8 = 9;
/// The highest generation each peer told this node, with the incarnation it
/// had then (JSON map).
pub const NODE_PEER_GENERATIONS: u8 = 10;

pub fn raft_key(group: u64, tag: u8) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&group.to_be_bytes());
    k[8] = tag;
    k
}

/// `group | space | key`.
pub fn data_key(group: u64, space: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.extend_from_slice(&group.to_be_bytes());
    k.push(space);
    k.extend_from_slice(key);
    k
}

/// Read options confining an iterator to `[lower, upper)`. Without bounds an
/// iterator that runs off its range walks on through the next group's deleted
/// (purged or overwritten) records still in the memtable, which cost as much
/// CPU as live ones.
pub fn bounded(lower: &[u8], upper: &[u8]) -> rocksdb::ReadOptions {
    let mut opts = rocksdb::ReadOptions::default();
    opts.set_iterate_lower_bound(lower.to_vec());
    opts.set_iterate_upper_bound(upper.to_vec());
    opts
}

/// The first key after every key starting with `prefix` (None: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    tessera_api::meta::prefix_successor(prefix)
}
