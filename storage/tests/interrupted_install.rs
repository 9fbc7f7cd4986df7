//! A node killed between openraft's purge after a snapshot install and the
//! install itself restarts with "purged past the stored snapshot"; opening the
//! state machine repairs it to a state openraft accepts (purge mark ≤ snapshot).

use openraft::storage::{RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
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
async fn purge_past_the_snapshot_is_repaired_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let store = Store::open(dir.path()).expect("open");
        let mut sm = store.state_machine(3);
        sm.apply((1..=3).map(put)).await.expect("apply");
        sm.get_snapshot_builder().await.build_snapshot().await.expect("snapshot at 3");
        sm.apply((4..=5).map(put)).await.expect("apply");
        // openraft purged up to 9 for a snapshot whose install never happened.
        store.log_store(3).purge(log_id(9)).await.expect("purge");
    }
    let store = Store::open(dir.path()).expect("reopen");
    let mut sm = store.state_machine(3);
    let snapshot = sm.get_current_snapshot().await.expect("read").expect("a snapshot");
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(5)), "a snapshot of the applied state");
    let state = store.log_store(3).get_log_state().await.expect("log state");
    assert_eq!(state.last_purged_log_id, Some(log_id(5)), "purge mark lowered to the applied id");
    assert_eq!(sm.applied_state().await.expect("applied").0, Some(log_id(5)));
}
