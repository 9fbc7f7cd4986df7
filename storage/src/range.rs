//! Range sharding inside a group: the key-value range a group holds, the check
//! that a request's key or range is still the group's, and the split that moves
//! the upper part of the range into a new group on the same replicas.
//!
//! A split is a command of the parent group. Applying it, in the parent's one
//! write batch: copies the parent's key-value records from the split key up
//! into the child's key space, deletes them from the parent, narrows the
//! parent's range and records the split, and writes the child's starting state
//! — applied and purged up to the log id [`child_base_log_id`] with the
//! parent's membership — so every replica's child starts from the same bytes
//! at the same log position, and a replica without them (one that skipped the
//! split through a snapshot of the parent) can only be filled by a snapshot of
//! the child. The node then starts the child's Raft instance
//! ([`crate::Store::split_children`], [`crate::Store::group_events`]).
//!
//! The parent's outcome depends on its own records only: a node that already
//! holds a replica of the child (moved there first) keeps it and gets no
//! starting state. Child ids come from the meta group's reservations
//! (`ClusterMap::reserve_split`), so none is used twice.

use openraft::{LogId, StoredMembership};
use rocksdb::WriteBatch;
use tessera_api::command::{KvOp, KvQuery, RangeInfo, Response, SplitOp};
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::meta::{KeyRange, SplitRecord};

use crate::crypt::Purpose;
use crate::engine::{GroupData, ReadView, space};
use crate::error::Result;
use crate::keys::{self, CF_DATA, CF_RAFT};
use crate::state_machine::read_sm_record;
use crate::store::Db;

/// The log id a split-off group starts at: applied, purged and committed, so
/// its first leader is elected on it and a replica without the child's state
/// gets a snapshot (term 0, like the membership entry of `initialize`).
pub fn child_base_log_id() -> LogId<u64> {
    LogId::new(openraft::CommittedLeaderId::new(0, 0), 0)
}

/// The key-value range the group holds (every key until it first split).
pub fn own_range(data: &GroupData) -> Result<KeyRange> {
    Ok(read_sm_record(data, keys::SM_RANGE)?.unwrap_or_else(KeyRange::full))
}

/// The splits the group applied, oldest first.
pub fn splits(data: &GroupData) -> Result<Vec<SplitRecord>> {
    Ok(read_sm_record(data, keys::SM_SPLITS)?.unwrap_or_default())
}

fn moved(what: String) -> Rejection {
    Rejection::new(ErrorCode::RangeMoved, what)
}

fn key_check(own: &KeyRange, key: &str) -> Option<Rejection> {
    (!own.contains(key)).then(|| moved(format!("key {key:?} is not in this group's range {own:?}")))
}

fn range_check(own: &KeyRange, asked: &Option<KeyRange>) -> Option<Rejection> {
    let asked = asked.as_ref()?;
    (!own.covers(asked)).then(|| moved(format!("this group holds {own:?}, not all of {asked:?}")))
}

/// Why `op` is not this group's to apply (its key or range moved), if it is not.
pub fn check_op(own: &KeyRange, op: &KvOp) -> Option<Rejection> {
    match op {
        KvOp::Put { key, .. } | KvOp::Delete { key } => key_check(own, key),
        KvOp::PutMany { pairs } => pairs.iter().find_map(|(k, _)| key_check(own, k)),
        KvOp::DeletePrefix { range, .. } => range_check(own, range),
    }
}

/// Why `query` is not this group's to answer, if it is not.
pub fn check_query(own: &KeyRange, query: &KvQuery) -> Option<Rejection> {
    match query {
        KvQuery::Get { key } => key_check(own, key),
        KvQuery::List { range, .. } | KvQuery::Count { range, .. } => range_check(own, range),
        KvQuery::Range => None,
    }
}

/// The group's range, splits and size, and its middle key.
pub fn info(data: &GroupData) -> Result<RangeInfo> {
    let range = own_range(data)?;
    let view = data.space(space::KV);
    let (mut keys, mut bytes) = (0u64, 0u64);
    view.scan_prefix(b"", |k, v| {
        keys += 1;
        bytes += (k.len() + v.len()) as u64;
        Ok(true)
    })?;
    let mut middle_key = None;
    if keys >= 2 {
        let mut seen = 0u64;
        view.scan_prefix(b"", |k, _| {
            seen += 1;
            if seen > keys / 2 {
                middle_key = Some(String::from_utf8_lossy(k).into_owned());
                return Ok(false);
            }
            Ok(true)
        })?;
    }
    Ok(RangeInfo { range, splits: splits(data)?, keys, bytes, middle_key, applied_index: 0 })
}

fn put_sm(db: &Db, batch: &mut WriteBatch, group: u64, tag: u8, value: &impl serde::Serialize) -> Result<()> {
    let key = keys::data_key(group, keys::SPACE_SM, &[tag]);
    let bytes = serde_json::to_vec(value)?;
    batch.put_cf(db.cf_handle(CF_DATA).expect("data column family"), &key, db.seal(Purpose::Data, &key, &bytes));
    Ok(())
}

/// Applies a split of the group of `data` into `batch` (see the module docs).
pub fn apply_split(data: &GroupData, batch: &mut WriteBatch, now: i64, op: &SplitOp) -> Result<Response> {
    let (db, parent) = (&*data.db, data.group);
    let own = own_range(data)?;
    let mut done = splits(data)?;
    if done.iter().any(|s| s.child == op.child && s.at == op.at) {
        return Ok(Response::Applied(false));
    }
    if !own.contains(&op.at) || op.at == own.start {
        return Ok(Response::rejected(ErrorCode::Invalid, format!("{:?} does not split this group's range {own:?}", op.at)));
    }
    // Decided on the parent's own replicated records alone, the same on every
    // replica: whether this node holds anything under the child's id is its own
    // state (the meta group reserves child ids, so none is used twice).
    if op.child == parent || done.iter().any(|s| s.child == op.child) {
        return Ok(Response::rejected(ErrorCode::Conflict, format!("group {} exists already", op.child)));
    }
    let Some(membership) = read_sm_record::<StoredMembership<u64, openraft::BasicNode>>(data, keys::SM_MEMBERSHIP)? else {
        return Ok(Response::rejected(ErrorCode::Invalid, "the group has no membership yet"));
    };
    // A child started mid-change would inherit a joint configuration or
    // learners that no one ever finishes for it: the split waits for the
    // parent's change to end (the splitter retries).
    let m = membership.membership();
    if m.get_joint_config().len() > 1 || m.learner_ids().next().is_some() {
        return Ok(Response::rejected(
            ErrorCode::Conflict,
            format!("group {parent} is changing its membership; a split waits until the change is over"),
        ));
    }
    let members: Vec<u64> = m.voter_ids().collect();

    // The child's replica on this node starts here, unless this node holds one
    // already (it was moved here and filled by the child's own leader before this
    // replica of the parent applied the split): that one is the child group's
    // state, not the parent's to overwrite. Only the child's part depends on it;
    // the parent's outcome is the same on every replica.
    let child_data = GroupData { db: data.db.clone(), group: op.child, memory: data.memory.clone(), cancel: None };
    let child_here = read_sm_record::<LogId<u64>>(&child_data, keys::SM_APPLIED)?.is_some();
    if child_here {
        tracing::info!(parent, child = op.child, "the split's child already has a replica here: its records are not rewritten");
    }

    // The records move: copied into the child's space, then one range delete.
    let cf = db.cf_handle(CF_DATA).expect("data column family");
    let moved_end = own.end.clone();
    let view = ReadView::new(db, parent, space::KV);
    let end_bytes = moved_end.as_ref().map(|e| e.as_bytes().to_vec());
    let mut copy = |k: &[u8], v: &[u8]| -> Result<bool> {
        let key = keys::data_key(op.child, space::KV, k);
        batch.put_cf(cf, &key, db.seal(Purpose::Data, &key, v));
        Ok(true)
    };
    // Keys are UTF-8 and never hold the byte 0xff: `[at, 0xff)` is every key from `at` up.
    let scan_end = end_bytes.clone().unwrap_or_else(|| vec![0xff]);
    if !child_here {
        view.scan_range(op.at.as_bytes(), &scan_end, &mut copy)?;
    }
    let from = keys::data_key(parent, space::KV, op.at.as_bytes());
    let to = match &end_bytes {
        Some(end) => keys::data_key(parent, space::KV, end),
        None => keys::data_key(parent, space::KV + 1, b""),
    };
    batch.delete_range_cf(cf, from, to);

    // The child's starting state.
    if !child_here {
        let base = child_base_log_id();
        put_sm(db, batch, op.child, keys::SM_APPLIED, &base)?;
        put_sm(db, batch, op.child, keys::SM_MEMBERSHIP, &StoredMembership::new(Some(base), membership.membership().clone()))?;
        put_sm(db, batch, op.child, keys::SM_RANGE, &KeyRange { start: op.at.clone(), end: moved_end })?;
        let clock_key = keys::data_key(op.child, keys::SPACE_SM, &[keys::SM_CLOCK]);
        batch.put_cf(cf, &clock_key, db.seal(Purpose::Data, &clock_key, &now.to_be_bytes()));
        let raft_cf = db.cf_handle(CF_RAFT).expect("raft column family");
        batch.put_cf(raft_cf, keys::raft_key(op.child, keys::RAFT_PURGED), serde_json::to_vec(&base)?);
        batch.put_cf(raft_cf, keys::raft_key(op.child, keys::RAFT_COMMITTED), serde_json::to_vec(&Some(base))?);
    }

    // The parent keeps the lower part and remembers the split.
    put_sm(db, batch, parent, keys::SM_RANGE, &KeyRange { start: own.start, end: Some(op.at.clone()) })?;
    done.push(SplitRecord { child: op.child, at: op.at.clone(), members });
    put_sm(db, batch, parent, keys::SM_SPLITS, &done)?;
    Ok(Response::Applied(true))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::{BasicNode, EntryPayload, Membership};
    use tessera_api::command::{Command, KvOp, KvQuery, KvQueryResult, Operation, Query, QueryResult, Response, SplitOp};
    use tessera_api::error::ErrorCode;

    use super::*;
    use crate::types::TypeConfig;

    fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> openraft::Entry<TypeConfig> {
        openraft::Entry { log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index), payload }
    }

    fn op(op: Operation) -> EntryPayload<TypeConfig> {
        EntryPayload::Normal(Command { issued_at_ms: 1_000, op, request_id: None })
    }

    fn get(store: &crate::Store, group: u64, key: &str) -> QueryResult {
        store.reader(group).query(&Query::Kv(KvQuery::Get { key: key.into() }), 2_000).unwrap()
    }

    /// A split moves the upper keys into the child, which starts applied at
    /// the base log id with the parent's members; each side refuses the
    /// other's keys, and applying the split again changes nothing.
    #[test]
    fn a_split_moves_the_upper_keys_into_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let parent = store.state_machine(1);
        let voters: BTreeSet<u64> = [1, 2, 3].into();
        let nodes: BTreeMap<u64, BasicNode> = voters.iter().map(|n| (*n, BasicNode { addr: format!("n{n}") })).collect();
        let mut entries = vec![entry(1, EntryPayload::Membership(Membership::new(vec![voters], nodes)))];
        for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
            let put = KvOp::Put { key: k.to_string(), value: serde_json::json!(i), ttl_secs: None };
            entries.push(entry(2 + i as u64, op(Operation::Kv(put))));
        }
        entries.push(entry(6, op(Operation::Split(SplitOp { child: 9, at: "c".into() }))));
        entries.push(entry(7, op(Operation::Split(SplitOp { child: 9, at: "c".into() }))));
        let responses = parent.apply_entries(entries).unwrap();
        assert_eq!(responses[5], Response::Applied(true));
        assert_eq!(responses[6], Response::Applied(false), "a repeated split changes nothing");

        assert!(matches!(get(&store, 1, "b"), QueryResult::Kv(KvQueryResult::Entry(Some(_)))));
        assert!(matches!(get(&store, 1, "c"), QueryResult::Rejected(r) if r.code == ErrorCode::RangeMoved));
        assert!(matches!(get(&store, 9, "d"), QueryResult::Kv(KvQueryResult::Entry(Some(e))) if e.value == serde_json::json!(3)));
        assert!(matches!(get(&store, 9, "a"), QueryResult::Rejected(r) if r.code == ErrorCode::RangeMoved));

        let child = store.reader(9);
        assert_eq!(child.applied().unwrap(), Some(child_base_log_id()));
        let QueryResult::Kv(KvQueryResult::Range(info)) = child.query(&Query::Kv(KvQuery::Range), 2_000).unwrap() else { panic!() };
        assert_eq!(info.range, KeyRange { start: "c".into(), end: None });
        assert_eq!(info.keys, 2);
        let QueryResult::Kv(KvQueryResult::Range(info)) = store.reader(1).query(&Query::Kv(KvQuery::Range), 2_000).unwrap() else {
            panic!()
        };
        assert_eq!(info.range, KeyRange { start: String::new(), end: Some("c".into()) });
        assert_eq!(info.splits, vec![SplitRecord { child: 9, at: "c".into(), members: vec![1, 2, 3] }]);
        let children = store.split_children(1).unwrap();
        assert_eq!(children.len(), 1);
        assert!(children[0].1, "this replica holds the child's starting state");

        // A list asked for a range the parent no longer covers is refused; one
        // within its range answers only that part.
        let wide = KvQuery::List { prefix: String::new(), limit: 10, range: Some(KeyRange::full()) };
        assert!(
            matches!(store.reader(1).query(&Query::Kv(wide), 2_000).unwrap(), QueryResult::Rejected(r) if r.code == ErrorCode::RangeMoved)
        );
        let own = KvQuery::List { prefix: String::new(), limit: 10, range: Some(KeyRange { start: "b".into(), end: Some("c".into()) }) };
        let QueryResult::Kv(KvQueryResult::List { entries, total }) = store.reader(1).query(&Query::Kv(own), 2_000).unwrap() else {
            panic!()
        };
        assert_eq!((entries.len(), total), (1, 1));
        // A key outside the child's range is not written there.
        let stray = Command {
            issued_at_ms: 3_000,
            op: Operation::Kv(KvOp::Put { key: "a2".into(), value: serde_json::json!(0), ttl_secs: None }),
            request_id: None,
        };
        assert!(matches!(store.state_machine(9).apply_at(1, stray).unwrap(), Response::Rejected(r) if r.code == ErrorCode::RangeMoved));
    }

    /// Issue 35, defect 1: a split's outcome for the parent depends on the
    /// parent's replicated records alone. A replica whose node already holds
    /// records under the child's id (the child moved there first, or leftovers)
    /// applies the split like every other replica: same answer, same parent range,
    /// the moved keys gone from the parent; its child records are left alone.
    #[test]
    fn a_split_applies_the_same_whatever_this_node_holds_under_the_child_id() {
        let stores: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
        let opened: Vec<_> = stores.iter().map(|d| crate::Store::open(d.path()).unwrap()).collect();
        // The second node already holds a replica of group 9 (applied at index 1).
        let held = KvOp::Put { key: "x".into(), value: serde_json::json!("held"), ttl_secs: None };
        opened[1].state_machine(9).apply_entries(vec![entry(1, op(Operation::Kv(held)))]).unwrap();
        let voters: BTreeSet<u64> = [1, 2, 3].into();
        let nodes: BTreeMap<u64, BasicNode> = voters.iter().map(|n| (*n, BasicNode { addr: format!("n{n}") })).collect();
        let mut answers = Vec::new();
        for store in &opened {
            let mut entries = vec![entry(1, EntryPayload::Membership(Membership::new(vec![voters.clone()], nodes.clone())))];
            for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
                let put = KvOp::Put { key: k.to_string(), value: serde_json::json!(i), ttl_secs: None };
                entries.push(entry(2 + i as u64, op(Operation::Kv(put))));
            }
            entries.push(entry(6, op(Operation::Split(SplitOp { child: 9, at: "c".into() }))));
            answers.push(store.state_machine(1).apply_entries(entries).unwrap());
            assert!(matches!(get(store, 1, "d"), QueryResult::Rejected(r) if r.code == ErrorCode::RangeMoved), "the parent gave up d");
            let QueryResult::Kv(KvQueryResult::Range(info)) = store.reader(1).query(&Query::Kv(KvQuery::Range), 2_000).unwrap() else {
                panic!()
            };
            assert_eq!(info.range, KeyRange { start: String::new(), end: Some("c".into()) });
            assert_eq!(info.keys, 2);
        }
        assert_eq!(answers[0], answers[1], "both replicas of the parent answer the split alike");
        assert_eq!(answers[1][5], Response::Applied(true));
        // The replica held under the child's id is not rewritten.
        assert_eq!(opened[1].reader(9).applied().unwrap().map(|l| l.index), Some(1));
        assert!(matches!(get(&opened[0], 9, "d"), QueryResult::Kv(KvQueryResult::Entry(Some(_)))));
        // A child that holds just the start the split gave it is rebuilt with a
        // diverged parent replica; one filled by its own group is not.
        assert_eq!(opened[0].children_at_their_start(1).unwrap(), vec![9]);
        assert!(opened[1].children_at_their_start(1).unwrap().is_empty());
    }

    /// Issue 35, defect 8: a split while the parent's membership changes (a
    /// joint configuration, or a learner being filled) is refused, so no child
    /// starts with a change nobody finishes; once the change is over it splits.
    #[test]
    fn a_split_waits_for_a_membership_change_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let nodes: BTreeMap<u64, BasicNode> = (1..=4).map(|n| (n, BasicNode { addr: format!("n{n}") })).collect();
        let old: BTreeSet<u64> = [1, 2, 3].into();
        let new: BTreeSet<u64> = [1, 2, 4].into();
        let split = |i| entry(i, op(Operation::Split(SplitOp { child: 9, at: "c".into() })));
        let mut entries = vec![entry(1, EntryPayload::Membership(Membership::new(vec![old.clone()], nodes.clone())))];
        entries.push(entry(2, op(Operation::Kv(KvOp::Put { key: "d".into(), value: serde_json::json!(1), ttl_secs: None }))));
        // Node 4 joins as a learner, then the voters change jointly, then alone.
        let with_learner = Membership::new(vec![old.clone()], nodes.clone());
        entries.push(entry(3, EntryPayload::Membership(with_learner)));
        entries.push(split(4));
        entries.push(entry(5, EntryPayload::Membership(Membership::new(vec![old, new.clone()], nodes.clone()))));
        entries.push(split(6));
        let only_new: BTreeMap<u64, BasicNode> = nodes.into_iter().filter(|(n, _)| new.contains(n)).collect();
        entries.push(entry(7, EntryPayload::Membership(Membership::new(vec![new], only_new))));
        entries.push(split(8));
        let answers = store.state_machine(1).apply_entries(entries).unwrap();
        assert!(matches!(&answers[3], Response::Rejected(r) if r.code == ErrorCode::Conflict), "{:?}", answers[3]);
        assert!(matches!(&answers[5], Response::Rejected(r) if r.code == ErrorCode::Conflict), "{:?}", answers[5]);
        assert_eq!(answers[7], Response::Applied(true));
        let QueryResult::Kv(KvQueryResult::Range(info)) = store.reader(1).query(&Query::Kv(KvQuery::Range), 2_000).unwrap() else {
            panic!()
        };
        assert_eq!(info.splits, vec![SplitRecord { child: 9, at: "c".into(), members: vec![1, 2, 4] }]);
    }

    /// A split key outside the range, or at its start, is refused.
    #[test]
    fn a_split_key_must_be_inside_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let sm = store.state_machine(1);
        let split = |at: &str| Command { issued_at_ms: 1, op: Operation::Split(SplitOp { child: 5, at: at.into() }), request_id: None };
        assert!(matches!(sm.apply_at(1, split("")).unwrap(), Response::Rejected(r) if r.code == ErrorCode::Invalid));
    }
}
