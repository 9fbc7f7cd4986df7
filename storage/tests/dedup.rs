//! A request id is applied once: the state machine answers a repeat (a router's
//! retry after a lost answer) with the first response and changes nothing.

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use serde_json::json;
use tessera_api::command::{Command, Operation, Query, QueryResult, Response};
use tessera_api::sql::{SqlOp, SqlQuery, SqlResult};
use tessera_storage::{Store, TypeConfig};

fn entry(index: u64, sql: &str, request_id: Option<&str>) -> Entry<TypeConfig> {
    let op = Operation::Sql(SqlOp {
        database: "d".into(),
        sql: sql.into(),
        params: vec![],
        max_result_rows: 100,
        timeout_ms: 0,
        max_memory_mb: 0,
        transaction: None,
    });
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Command { issued_at_ms: 1_000 + index as i64, op, request_id: request_id.map(Into::into) }),
    }
}

fn count(store: &Store) -> serde_json::Value {
    let q = Query::Sql(SqlQuery::Execute {
        database: "d".into(),
        sql: "SELECT COUNT(*) FROM t".into(),
        params: vec![],
        max_result_rows: 10,
        timeout_ms: 1000,
        max_memory_mb: 0,
    });
    match store.reader(3).query(&q, 0).expect("query") {
        QueryResult::Sql(SqlResult::Rows(r)) => json!(r.rows),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_repeated_request_id_applies_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("open");
    let mut sm = store.state_machine(3);
    sm.apply([entry(1, "CREATE TABLE t (v INT)", None)]).await.expect("apply");
    let first = sm.apply([entry(2, "INSERT INTO t VALUES (1)", Some("abc123"))]).await.expect("apply");
    // The same request again (a retry committed by a new leader), then a new one.
    let again = sm.apply([entry(3, "INSERT INTO t VALUES (1)", Some("abc123"))]).await.expect("apply");
    assert_eq!(first, again, "the repeat gets the first response");
    assert_eq!(count(&store), json!([[1]]));
    sm.apply([entry(4, "INSERT INTO t VALUES (2)", Some("def456"))]).await.expect("apply");
    assert_eq!(count(&store), json!([[2]]));
    // Without an id nothing is deduplicated.
    sm.apply([entry(5, "INSERT INTO t VALUES (3)", None), entry(6, "INSERT INTO t VALUES (3)", None)]).await.expect("apply");
    assert_eq!(count(&store), json!([[4]]));
    assert!(matches!(first[0], Response::Sql(_)));
}

#[tokio::test]
async fn request_ids_are_forgotten_after_the_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("open");
    let mut sm = store.state_machine(3);
    sm.apply([entry(1, "CREATE TABLE t (v INT)", None)]).await.expect("apply");
    sm.apply([entry(2, "INSERT INTO t VALUES (1)", Some("old1"))]).await.expect("apply");
    // A command stamped after the window and applied more than
    // MIN_KEPT_ENTRIES entries later expires the old id (records are expired
    // by the commands of every 8th entry).
    let later = 8 + tessera_storage::dedup::MIN_KEPT_ENTRIES;
    let mut late = entry(later, "INSERT INTO t VALUES (2)", Some("new1"));
    if let EntryPayload::Normal(cmd) = &mut late.payload {
        cmd.issued_at_ms = 1_002 + tessera_storage::dedup::WINDOW_MS + 1;
    }
    sm.apply([late]).await.expect("apply");
    sm.apply([entry(later + 1, "INSERT INTO t VALUES (1)", Some("old1"))]).await.expect("apply");
    assert_eq!(count(&store), json!([[3]]), "an expired id applies again");
}
