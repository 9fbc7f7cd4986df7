//! Deeply nested and very long expressions: generated queries nest far
//! deeper than hand-written ones. Each either runs or is refused with a clear
//! error; none may overflow a stack (on the apply path, every replica
//! replaying the entry would crash).
use tessera_sql::mem::MemStore;
use tessera_sql::{ErrorCode, MAX_EXPR_DEPTH, is_read_only};

fn store() -> MemStore {
    let mut s = MemStore::new();
    s.exec("CREATE TABLE t (id INT PRIMARY KEY, a INT)", &[]).unwrap();
    s.exec("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)", &[]).unwrap();
    s
}

fn nested_where(depth: usize) -> String {
    // (a = 1000 OR (a = 1001 OR (… OR a = 30)))
    let mut sql = String::from("SELECT id FROM t WHERE ");
    for i in 0..depth {
        sql.push_str(&format!("(a = {} OR ", 1000 + i));
    }
    sql.push_str("a = 30");
    sql.push_str(&")".repeat(depth));
    sql
}

#[test]
fn a_where_clause_nested_two_hundred_deep_runs() {
    let mut s = store();
    let out = s.exec(&nested_where(200), &[]).expect("nested 200 deep");
    assert_eq!(out.rows, vec![vec![serde_json::json!(3)]], "{out:?}");
}

fn or_chain(terms: usize) -> String {
    let terms: Vec<String> = (0..terms).map(|i| format!("a = {}", 1000 + i)).collect();
    format!("DELETE FROM t WHERE {}", terms.join(" OR "))
}

#[test]
fn a_where_clause_nested_to_the_limit_runs() {
    let mut s = store();
    // Each level is a parenthesis and an OR: two expression levels.
    let out = s.exec(&nested_where(MAX_EXPR_DEPTH / 2 - 2), &[]).expect("nested to the limit");
    assert_eq!(out.rows, vec![vec![serde_json::json!(3)]], "{out:?}");
}

#[test]
fn a_chain_of_ors_up_to_the_limit_runs() {
    let mut s = store();
    let out = s.exec(&or_chain(MAX_EXPR_DEPTH - 10), &[]).expect("a chain of ORs");
    assert_eq!(out.rows_affected, 0, "{out:?}");
    let out = s.exec("DELETE FROM t WHERE a = 10 OR a = 20", &[]).unwrap();
    assert_eq!(out.rows_affected, 2, "{out:?}");
}

/// A chain of 100,000 ORs is a tree 100,000 deep: it used to overflow the
/// stack (and abort the process) while being evaluated or dropped.
#[test]
fn a_chain_of_ors_past_the_limit_is_refused_clearly() {
    let mut s = store();
    let err = s.exec(&or_chain(100_000), &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::ParseError, "{err}");
    assert!(err.message.contains("nest too deeply"), "{err}");
    assert_eq!(s.exec("SELECT id FROM t", &[]).unwrap().rows.len(), 3, "nothing was deleted");
}

#[test]
fn nesting_past_the_limit_is_refused_clearly() {
    let mut s = store();
    let err = s.exec(&nested_where(5_000), &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::ParseError, "{err}");
    assert!(err.message.contains("nest too deeply"), "{err}");
    let err = is_read_only(&nested_where(5_000)).unwrap_err();
    assert!(err.message.contains("nest too deeply"), "{err}");
}
