//! A replica found at start with its applied index behind its purge mark (data
//! written by versions that could purge before an install applied) no longer
//! holds entries it acknowledged. Opening its state machine lowers the marks to
//! the applied id, so openraft starts and the leader sends what follows, and
//! records a vote floor: the replica does not vote until it applied that far.

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use tessera_api::command::{Command, KvOp, Operation};
use tessera_storage::{Store, TypeConfig};

fn log_id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn put(index: u64) -> Entry<TypeConfig> {
    let op = Operation::Kv(KvOp::Put { key: format!("k{index}"), value: serde_json::json!(index), ttl_secs: None });
    Entry { log_id: log_id(index), payload: EntryPayload::Normal(Command { issued_at_ms: 1, op, request_id: None }) }
}

#[tokio::test]
async fn applied_behind_the_purge_mark_lowers_it_and_bans_votes() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let store = Store::open(dir.path()).expect("open");
        let mut sm = store.state_machine(3);
        sm.apply((1..=5).map(put)).await.expect("apply");
        // An older version purged up to 9 for a snapshot whose install never happened.
        store.log_store(3).without_apply_guard().purge(log_id(9)).await.expect("purge");
        assert_eq!(store.vote_floor(3).expect("floor"), None, "no floor before the check at start");
    }
    let store = Store::open(dir.path()).expect("reopen");
    let mut sm = store.state_machine(3);
    let state = store.log_store(3).get_log_state().await.expect("log state");
    assert_eq!(state.last_purged_log_id, Some(log_id(5)), "purge mark lowered to the applied id");
    assert_eq!(sm.applied_state().await.expect("applied").0, Some(log_id(5)));
    assert_eq!(store.vote_floor(3).expect("floor"), Some(9), "no vote before entry 9 is applied again");

    // Caught up again (the leader sent 6..=9): the floor is lifted, and it stays
    // lifted across restarts.
    sm.apply((6..=9).map(put)).await.expect("apply");
    assert_eq!(store.vote_floor(3).expect("floor"), None);
    drop((sm, store));
    let store = Store::open(dir.path()).expect("reopen");
    let _sm = store.state_machine(3);
    assert_eq!(store.vote_floor(3).expect("floor"), None);
    let entries = store.log_store(3).try_get_log_entries(0..=9).await.expect("read");
    assert!(entries.is_empty());
}
