//! The replicated state machine of one group, and its snapshots.
//!
//! Applying an entry writes the engine's changes and the entry's log id in one
//! RocksDB write batch. A snapshot is every key of the group's `data` range, read
//! from one RocksDB snapshot; installing one replaces that range in one batch.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageIOError,
    StoredMembership,
};
use rocksdb::{DB, Direction, IteratorMode, WriteBatch, WriteOptions};
use tessera_api::command::{Command, Operation, Query, QueryResult, Response};

use crate::engine::document::DocumentEngine;
use crate::engine::sql::SqlEngine;
use crate::engine::timeseries::TimeSeriesEngine;
use crate::engine::vector::VectorEngine;
use crate::engine::{self, Engine, GroupData, Tx, kv::KvEngine, meta::MetaEngine, object::ObjectEngine, space};
use crate::error::{Result, StorageError};
use crate::keys::{self, CF_DATA, CF_RAFT};
use crate::types::{RaftStorageError, TypeConfig};

fn cf<'a>(db: &'a DB, name: &str) -> &'a rocksdb::ColumnFamily {
    db.cf_handle(name).expect("column family is created at open")
}

/// The state machine of one group on this node.
pub struct StateMachine {
    data: GroupData,
}

/// Answers queries from one group's local state (any replica).
#[derive(Clone)]
pub struct GroupReader {
    data: GroupData,
}

impl GroupReader {
    pub(crate) fn new(db: Arc<DB>, group: u64, vectors: Arc<engine::vector::VectorState>) -> Self {
        GroupReader { data: GroupData { db, group, vectors } }
    }

    /// Answers `query` from this replica's applied state, with `now_ms` for expiry.
    pub fn query(&self, query: &Query, now_ms: i64) -> Result<QueryResult> {
        let kv = self.data.space(space::KV);
        let meta = self.data.space(space::META);
        Ok(match query {
            Query::KvGet { key } => QueryResult::KvEntry(engine::kv::get(&kv, key, now_ms)?),
            Query::KvList { prefix, limit } => {
                let (entries, total) = engine::kv::list(&kv, prefix, *limit, now_ms)?;
                QueryResult::KvList { entries, total }
            }
            Query::KvCount { prefix } => QueryResult::Count(engine::kv::count(&kv, prefix, now_ms)?),
            Query::ClusterMap => QueryResult::ClusterMap(engine::meta::cluster_map(&meta)?),
            Query::UserByName { username } => QueryResult::User(engine::meta::user_by_name(&meta, username)?),
            Query::UserById { id } => QueryResult::User(engine::meta::user_by_id(&meta, id)?),
            Query::UserCount => QueryResult::Count(engine::meta::user_count(&meta)?),
            Query::ListUsers => QueryResult::Users(engine::meta::list_users(&meta)?),
            Query::ListRoles => QueryResult::Roles(engine::meta::list_roles(&meta)?),
            Query::Role { name } => QueryResult::Role(engine::meta::role(&meta, name)?),
            Query::Session { token_hash } => {
                QueryResult::Session(engine::meta::session(&meta, token_hash, now_ms)?)
            }
            Query::Object(q) => QueryResult::Object(engine::object::query(&self.data.space(space::OBJECT), q)?),
            Query::Sql(q) => QueryResult::Sql(engine::sql::query(&self.data, q)?),
            Query::Document(q) => QueryResult::Document(engine::document::query(&self.data.space(space::DOCUMENT), q)?),
            Query::Vector(q) => QueryResult::Vector(engine::vector::query(&self.data, q)?),
            Query::TimeSeries(q) => {
                QueryResult::TimeSeries(engine::timeseries::query(&self.data.space(space::TIMESERIES), q)?)
            }
        })
    }

    /// The last log id applied to this replica.
    pub fn applied(&self) -> Result<Option<LogId<u64>>> {
        read_sm_record(&self.data, keys::SM_APPLIED)
    }
}

fn read_sm_record<T: serde::de::DeserializeOwned>(data: &GroupData, tag: u8) -> Result<Option<T>> {
    let raw = data.db.get_cf(cf(&data.db, CF_DATA), keys::data_key(data.group, keys::SPACE_SM, &[tag]))?;
    Ok(raw.map(|b| serde_json::from_slice(&b)).transpose()?)
}

impl StateMachine {
    pub(crate) fn new(db: Arc<DB>, group: u64, vectors: Arc<engine::vector::VectorState>) -> Self {
        StateMachine { data: GroupData { db, group, vectors } }
    }

    /// Applies one command into `batch`; business-rule outcomes are responses.
    fn apply_command(&self, batch: &mut WriteBatch, cmd: &Command) -> Result<Response> {
        let (db, group) = (&*self.data.db, self.data.group);
        match &cmd.op {
            Operation::Kv(op) => KvEngine.apply(&mut Tx::new(db, group, space::KV, batch), cmd.issued_at_ms, op),
            Operation::Meta(op) => {
                MetaEngine.apply(&mut Tx::new(db, group, space::META, batch), cmd.issued_at_ms, op)
            }
            Operation::Object(op) => {
                ObjectEngine.apply(&mut Tx::new(db, group, space::OBJECT, batch), cmd.issued_at_ms, op)
            }
            Operation::Sql(op) => SqlEngine.apply(&mut Tx::new(db, group, space::SQL, batch), cmd.issued_at_ms, op),
            Operation::Document(op) => {
                DocumentEngine.apply(&mut Tx::new(db, group, space::DOCUMENT, batch), cmd.issued_at_ms, op)
            }
            Operation::Vector(op) => {
                VectorEngine { state: &self.data.vectors }.apply(&mut Tx::new(db, group, space::VECTOR, batch), cmd.issued_at_ms, op)
            }
            Operation::TimeSeries(op) => {
                TimeSeriesEngine.apply(&mut Tx::new(db, group, space::TIMESERIES, batch), cmd.issued_at_ms, op)
            }
        }
    }

    fn sm_key(&self, tag: u8) -> Vec<u8> {
        keys::data_key(self.data.group, keys::SPACE_SM, &[tag])
    }
}

/// Snapshot file format: a sequence of `u32 len | key | u32 len | value` records
/// (big-endian lengths), keys relative to the group prefix.
fn encode_pairs(pairs: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_be_bytes());
        out.extend_from_slice(&k);
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(&v);
    }
    out
}

fn decode_pairs(mut buf: &[u8]) -> Result<Vec<(&[u8], &[u8])>> {
    fn take<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8]> {
        if buf.len() < 4 {
            return Err(StorageError::Corrupt("truncated snapshot record".into()));
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if buf.len() < 4 + len {
            return Err(StorageError::Corrupt("truncated snapshot record".into()));
        }
        let (item, rest) = buf[4..].split_at(len);
        *buf = rest;
        Ok(item)
    }
    let mut pairs = Vec::new();
    while !buf.is_empty() {
        let k = take(&mut buf)?;
        let v = take(&mut buf)?;
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Builds snapshots of one group.
pub struct SnapshotBuilder {
    data: GroupData,
}

impl SnapshotBuilder {
    fn build(&self) -> Result<Snapshot<TypeConfig>> {
        let db = &*self.data.db;
        let group = self.data.group;
        let snap = db.snapshot();
        let prefix = keys::group_prefix(group);
        let mut pairs = Vec::new();
        let mut applied: Option<LogId<u64>> = None;
        let mut membership = StoredMembership::default();
        for item in snap.iterator_cf(cf(db, CF_DATA), IteratorMode::From(&prefix, Direction::Forward)) {
            let (k, v) = item?;
            if !k.starts_with(&prefix) {
                break;
            }
            let rel = k[8..].to_vec();
            if rel == [keys::SPACE_SM, keys::SM_APPLIED] {
                applied = serde_json::from_slice(&v)?;
            } else if rel == [keys::SPACE_SM, keys::SM_MEMBERSHIP] {
                membership = serde_json::from_slice(&v)?;
            }
            pairs.push((rel, v.to_vec()));
        }
        drop(snap);
        let bytes = encode_pairs(pairs.into_iter());
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id: format!("{group}-{}-{}", applied.map_or(0, |l| l.index), tessera_api::command::now_ms()),
        };
        save_snapshot(db, group, &meta, &bytes)?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

fn save_snapshot(db: &DB, group: u64, meta: &SnapshotMeta<u64, openraft::BasicNode>, bytes: &[u8]) -> Result<()> {
    let mut batch = WriteBatch::default();
    batch.put_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_SNAPSHOT_META), serde_json::to_vec(meta)?);
    batch.put_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_SNAPSHOT_DATA), bytes);
    let mut w = WriteOptions::default();
    w.set_sync(true);
    db.write_opt(batch, &w)?;
    Ok(())
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, RaftStorageError> {
        let data = self.data.clone();
        tokio::task::spawn_blocking(move || SnapshotBuilder { data }.build())
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?
            .map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, openraft::BasicNode>), RaftStorageError> {
        let applied = read_sm_record(&self.data, keys::SM_APPLIED).map_err(StorageError::into_raft_read)?;
        let membership =
            read_sm_record(&self.data, keys::SM_MEMBERSHIP).map_err(StorageError::into_raft_read)?.unwrap_or_default();
        Ok((applied, membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, RaftStorageError>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut responses = Vec::new();
        for entry in entries {
            let mut batch = WriteBatch::default();
            let response = match &entry.payload {
                EntryPayload::Blank => Response::Empty,
                EntryPayload::Normal(cmd) => {
                    self.apply_command(&mut batch, cmd).map_err(|e| StorageIOError::apply(entry.log_id, &e))?
                }
                EntryPayload::Membership(m) => {
                    let stored = StoredMembership::new(Some(entry.log_id), m.clone());
                    let bytes = serde_json::to_vec(&stored).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
                    batch.put_cf(cf(&self.data.db, CF_DATA), self.sm_key(keys::SM_MEMBERSHIP), bytes);
                    Response::Empty
                }
            };
            let applied = serde_json::to_vec(&entry.log_id).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
            batch.put_cf(cf(&self.data.db, CF_DATA), self.sm_key(keys::SM_APPLIED), applied);
            self.data.db.write(batch).map_err(|e| StorageIOError::apply(entry.log_id, &e))?;
            responses.push(response);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder { data: self.data.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, RaftStorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), RaftStorageError> {
        let bytes = snapshot.into_inner();
        let db = &*self.data.db;
        let group = self.data.group;
        let install = || -> Result<()> {
            let pairs = decode_pairs(&bytes)?;
            let mut batch = WriteBatch::default();
            batch.delete_range_cf(cf(db, CF_DATA), keys::group_prefix(group).as_slice(), keys::group_end(group).as_slice());
            for (k, v) in pairs {
                batch.put_cf(cf(db, CF_DATA), [keys::group_prefix(group).as_slice(), k].concat(), v);
            }
            // The snapshot's own records say where it ends; write them again from
            // the meta so an empty group's snapshot still records them.
            batch.put_cf(cf(db, CF_DATA), self.sm_key(keys::SM_APPLIED), serde_json::to_vec(&meta.last_log_id)?);
            batch.put_cf(cf(db, CF_DATA), self.sm_key(keys::SM_MEMBERSHIP), serde_json::to_vec(&meta.last_membership)?);
            let mut w = WriteOptions::default();
            w.set_sync(true);
            db.write_opt(batch, &w)?;
            save_snapshot(db, group, meta, &bytes)
        };
        install().map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.data.vectors.invalidate(); // vector indexes are rebuilt from the new records
        tracing::info!(group, snapshot = %meta.snapshot_id, "installed snapshot");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, RaftStorageError> {
        let db = &*self.data.db;
        let group = self.data.group;
        let read = || -> Result<Option<Snapshot<TypeConfig>>> {
            let meta = db.get_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_SNAPSHOT_META))?;
            let data = db.get_cf(cf(db, CF_RAFT), keys::raft_key(group, keys::RAFT_SNAPSHOT_DATA))?;
            match (meta, data) {
                (Some(meta), Some(data)) => {
                    Ok(Some(Snapshot { meta: serde_json::from_slice(&meta)?, snapshot: Box::new(Cursor::new(data)) }))
                }
                _ => Ok(None),
            }
        };
        read().map_err(|e| StorageIOError::read_snapshot(None, &e).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_records_round_trip() {
        let pairs = vec![(b"a".to_vec(), b"1".to_vec()), (vec![], b"".to_vec()), (b"k\xff".to_vec(), vec![0; 300])];
        let bytes = encode_pairs(pairs.clone().into_iter());
        let back: Vec<(Vec<u8>, Vec<u8>)> =
            decode_pairs(&bytes).unwrap().into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(back, pairs);
        assert!(decode_pairs(&bytes[..bytes.len() - 1]).is_err());
    }
}
