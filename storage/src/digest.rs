//! A digest of one group's replicated state on this node, to compare replicas:
//! two replicas at the same applied index must hold the same records, so they
//! must have the same digest, whether or not a read ever touches a difference.
//!
//! Only the `data` column family is digested: it is the replicated state (the
//! `log`, `raft` and `index` column families are node-local). Values are opened
//! first, so the digest is of plaintext and does not depend on a node's key or
//! on whether it encrypts at rest.

use rocksdb::IteratorMode;
use sha2::{Digest as _, Sha256};

use crate::crypt::Purpose;
use crate::error::{Result, StorageError};
use crate::keys::{self, CF_DATA};
use crate::store::Db;

/// One group's replicated state on this node, read from one RocksDB snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDigest {
    pub group: u64,
    /// The log index the state reflects (0: nothing applied yet).
    pub applied_index: u64,
    /// Records of the group's `data` range.
    pub records: u64,
    /// SHA-256 (hex) over every record in key order: for each, the key's length
    /// (8 bytes, big-endian), the key, the plaintext value's length, the value.
    pub digest: String,
    /// The Raft membership the state reflects (the last one applied): its
    /// voters and its learners, each sorted. Empty when none was applied yet.
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
}

/// Digests `group`'s `data` range and reads its applied index from one snapshot,
/// so the two agree even while the group applies.
pub(crate) fn group_digest(db: &Db, group: u64) -> Result<GroupDigest> {
    let cf = db.cf_handle(CF_DATA).expect("data column family");
    let snap = db.snapshot();
    let applied_key = keys::data_key(group, keys::SPACE_SM, &[keys::SM_APPLIED]);
    let applied_index = match snap.get_cf(cf, &applied_key)? {
        Some(raw) => serde_json::from_slice::<Option<openraft::LogId<u64>>>(&db.open(Purpose::Data, &applied_key, &raw)?)
            .map_err(|e| StorageError::Corrupt(format!("group {group}'s applied log id: {e}")))?
            .map_or(0, |l| l.index),
        None => 0,
    };
    let membership_key = keys::data_key(group, keys::SPACE_SM, &[keys::SM_MEMBERSHIP]);
    let (voters, learners) = match snap.get_cf(cf, &membership_key)? {
        Some(raw) => {
            let stored: openraft::StoredMembership<u64, openraft::BasicNode> =
                serde_json::from_slice(&db.open(Purpose::Data, &membership_key, &raw)?)
                    .map_err(|e| StorageError::Corrupt(format!("group {group}'s applied membership: {e}")))?;
            let mut voters: Vec<u64> = stored.membership().voter_ids().collect();
            let mut learners: Vec<u64> = stored.membership().learner_ids().collect();
            voters.sort_unstable();
            learners.sort_unstable();
            (voters, learners)
        }
        None => (Vec::new(), Vec::new()),
    };
    let prefix = keys::group_prefix(group);
    let mut hasher = Sha256::new();
    let mut records = 0u64;
    for item in snap.iterator_cf_opt(cf, keys::bounded(&prefix, &keys::group_end(group)), IteratorMode::Start) {
        let (k, v) = item?;
        let v = db.open(Purpose::Data, &k, &v)?;
        hasher.update((k.len() as u64).to_be_bytes());
        hasher.update(&k);
        hasher.update((v.len() as u64).to_be_bytes());
        hasher.update(&v);
        records += 1;
    }
    Ok(GroupDigest { group, applied_index, records, digest: hex::encode(hasher.finalize()), voters, learners })
}

#[cfg(test)]
mod tests {
    use tessera_api::command::{Command, KvOp, Operation};

    use crate::Store;

    const GROUP: u64 = 3;

    fn put(key: &str, value: &str) -> Command {
        Command { issued_at_ms: 1, op: Operation::Kv(KvOp::Put { key: key.into(), value: value.into(), ttl_secs: None }), request_id: None }
    }

    fn store_with(dir: &std::path::Path, crypt: Option<crate::Crypt>, entries: &[(&str, &str)]) -> Store {
        let store = Store::open_with(dir, crypt).unwrap();
        let sm = store.state_machine(GROUP);
        for (i, (k, v)) in entries.iter().enumerate() {
            sm.apply_at(i as u64 + 1, put(k, v)).unwrap();
        }
        store
    }

    #[test]
    fn replicas_with_the_same_entries_have_the_same_digest_and_a_differing_record_changes_it() {
        let dir = tempfile::tempdir().unwrap();
        let entries = [("a", "1"), ("b", "2"), ("c", "3")];
        let plain = store_with(&dir.path().join("plain"), None, &entries);
        // Encryption at rest does not change the digest: it is of plaintext.
        let key = crate::Crypt::new(&[7; crate::crypt::KEY_LEN]);
        let sealed = store_with(&dir.path().join("sealed"), Some(key), &entries);
        let (a, b) = (plain.digest(GROUP).unwrap(), sealed.digest(GROUP).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.applied_index, 3);
        assert!(a.records >= 3, "{a:?}");
        assert_eq!(a.digest.len(), 64);
        // Another group, or nothing applied: an empty digest at index 0.
        let empty = plain.digest(GROUP + 1).unwrap();
        assert_eq!((empty.applied_index, empty.records), (0, 0));
        assert_ne!(empty.digest, a.digest);

        // One replica's record changed outside Raft: same index, another digest.
        let other = store_with(&dir.path().join("other"), None, &entries);
        assert_eq!(other.digest(GROUP).unwrap(), a);
        other.overwrite_record(GROUP, crate::engine::space::KV, b"b", br#"{"key":"b","value":"tampered"}"#).unwrap();
        let c = other.digest(GROUP).unwrap();
        assert_eq!((c.applied_index, c.records), (a.applied_index, a.records));
        assert_ne!(c.digest, a.digest);
    }
}
