//! API-level tests: index usage, determinism, limits, metadata, errors.
use tessera_sql::mem::MemStore;
use tessera_sql::*;

fn setup() -> MemStore {
    let mut s = MemStore::new();
    s.exec("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT, d DATE)", &[]).unwrap();
    let mut sql = String::from("INSERT INTO t VALUES ");
    for i in 0..500 {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&format!("({i}, {}, 'v{}', '2024-01-{:02}')", i % 50, i % 7, 1 + i % 28));
    }
    s.exec(&sql, &[]).unwrap();
    s.exec("CREATE INDEX t_a ON t (a)", &[]).unwrap();
    s.exec("CREATE INDEX t_b ON t (b) USING HASH", &[]).unwrap();
    s.exec("CREATE INDEX t_d ON t (d)", &[]).unwrap();
    s
}

fn scanned(plan: &str) -> u64 {
    plan.lines().last().and_then(|l| l.strip_prefix("rows scanned: ")).and_then(|n| n.parse().ok()).unwrap()
}

#[test]
fn index_scans_are_used() {
    let s = setup();
    let p = explain(&s, "SELECT * FROM t WHERE a = 7").unwrap();
    assert!(p.contains("INDEX SCAN t USING t_a"), "{p}");
    assert_eq!(scanned(&p), 10, "{p}");
    let p = explain(&s, "SELECT * FROM t WHERE a BETWEEN 10 AND 11").unwrap();
    assert!(p.contains("INDEX SCAN t USING t_a (a) RANGE"), "{p}");
    assert_eq!(scanned(&p), 20);
    let p = explain(&s, "SELECT * FROM t WHERE id = 42").unwrap();
    assert!(p.contains("PK LOOKUP"), "{p}");
    assert_eq!(scanned(&p), 1);
    let p = explain(&s, "SELECT * FROM t WHERE id >= 490").unwrap();
    assert!(p.contains("PK LOOKUP t USING PRIMARY KEY (id) RANGE"), "{p}");
    assert_eq!(scanned(&p), 10);
    let p = explain(&s, "SELECT * FROM t WHERE b = 'v3'").unwrap();
    assert!(p.contains("USING t_b"), "{p}");
    // Hash indexes are not used for ranges.
    let p = explain(&s, "SELECT * FROM t WHERE b > 'v3'").unwrap();
    assert!(p.contains("FULL SCAN t"), "{p}");
    let p = explain(&s, "SELECT * FROM t WHERE d < '2024-01-02'").unwrap();
    assert!(p.contains("USING t_d"), "{p}");
    let p = explain(&s, "SELECT * FROM t WHERE a IN (1, 2)").unwrap();
    assert!(p.contains("IN-LIST"), "{p}");
    assert_eq!(scanned(&p), 20);
    // Results through the index equal a full scan.
    let mut s2 = s.clone();
    let via_index = s2.exec("SELECT id FROM t WHERE a >= 45 AND a < 48 ORDER BY id", &[]).unwrap();
    let full = s2.exec("SELECT id FROM t WHERE a + 0 >= 45 AND a + 0 < 48 ORDER BY id", &[]).unwrap();
    assert_eq!(via_index.rows, full.rows);
    assert_eq!(via_index.row_count, 30);
    // Index join.
    s2.exec("CREATE TABLE u (id INT PRIMARY KEY, tid INT)", &[]).unwrap();
    s2.exec("INSERT INTO u VALUES (1, 5), (2, 6)", &[]).unwrap();
    let p = explain(&s2, "SELECT * FROM u JOIN t ON t.id = u.tid").unwrap();
    assert!(p.contains("PK LOOKUP t"), "{p}");
    assert!(scanned(&p) < 10, "{p}");
    // EXPLAIN as SQL.
    let r = s2.exec("EXPLAIN SELECT * FROM t WHERE a = 1", &[]).unwrap();
    assert_eq!(r.columns, vec!["plan"]);
}

#[test]
fn indexes_maintained_on_writes() {
    let mut s = setup();
    s.exec("UPDATE t SET a = 1000 WHERE id = 3", &[]).unwrap();
    let r = s.exec("SELECT id FROM t WHERE a = 1000", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!(3)]]);
    let r = s.exec("SELECT COUNT(*) FROM t WHERE a = 3", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!(9)]]);
    s.exec("DELETE FROM t WHERE a = 1000", &[]).unwrap();
    let r = s.exec("SELECT COUNT(*) FROM t WHERE a = 1000", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!(0)]]);
}

#[test]
fn deterministic_writes() {
    let sql = "CREATE TABLE x (id SERIAL PRIMARY KEY, v TEXT UNIQUE); INSERT INTO x (v) VALUES ('a'), ('b'); CREATE INDEX xi ON x (v)";
    let a = execute(&MemStore::new(), sql, &[], &ExecContext::default()).unwrap();
    let b = execute(&MemStore::new(), sql, &[], &ExecContext::default()).unwrap();
    assert_eq!(a.writes, b.writes);
    assert!(!a.writes.ops.is_empty());
}

#[test]
fn failed_request_writes_nothing_and_reads_write_nothing() {
    let s = MemStore::new();
    let e = execute(
        &s,
        "CREATE TABLE y (id INT PRIMARY KEY); INSERT INTO y VALUES (1); INSERT INTO y VALUES (1)",
        &[],
        &ExecContext::default(),
    );
    assert_eq!(e.unwrap_err().code, ErrorCode::ConstraintViolation);
    let s = setup();
    let r = execute(&s, "SELECT * FROM t", &[], &ExecContext::default()).unwrap();
    assert!(r.writes.ops.is_empty());
}

#[test]
fn truncation() {
    let s = setup();
    let ctx = ExecContext { max_result_rows: 10, ..Default::default() };
    let r = execute(&s, "SELECT id FROM t", &[], &ctx).unwrap().result;
    assert!(r.truncated);
    assert_eq!(r.row_count, 10);
    let r = execute(&s, "SELECT id FROM t LIMIT 5", &[], &ctx).unwrap().result;
    assert!(!r.truncated);
}

#[test]
fn timeout() {
    let s = setup();
    let ctx = ExecContext { deadline: Some(std::time::Instant::now()), ..Default::default() };
    let e = execute(&s, "SELECT COUNT(*) FROM t a CROSS JOIN t b", &[], &ctx).unwrap_err();
    assert_eq!(e.code, ErrorCode::QueryTimeout);
}

#[test]
fn read_only_detection() {
    assert!(is_read_only("SELECT 1; SHOW TABLES").unwrap());
    assert!(is_read_only("BEGIN; SELECT 1; COMMIT").unwrap());
    assert!(!is_read_only("BEGIN; INSERT INTO t VALUES (1); COMMIT").unwrap());
    assert!(!is_read_only("VACUUM").unwrap());
    assert!(is_read_only("SELEC").is_err());
}

#[test]
fn metadata() {
    let mut s = MemStore::new();
    s.exec("CREATE TABLE m (id SERIAL PRIMARY KEY, e VARCHAR(20) UNIQUE NOT NULL, p DECIMAL(8,2) DEFAULT 0 CHECK (p >= 0))", &[]).unwrap();
    s.exec("CREATE TABLE n (id INT PRIMARY KEY, mid INT REFERENCES m(id))", &[]).unwrap();
    s.exec("INSERT INTO m (e) VALUES ('a'), ('b')", &[]).unwrap();
    let l = list_tables(&s).unwrap();
    assert_eq!(l.len(), 2);
    assert_eq!((l[0].name.as_str(), l[0].columns, l[0].rows), ("m", 3, 2));
    let d = describe_table(&s, "m").unwrap();
    assert_eq!(d.columns[0].data_type, "SERIAL");
    assert!(d.columns[0].primary_key);
    assert_eq!(d.columns[1].data_type, "VARCHAR(20)");
    assert!(d.columns[1].unique && !d.columns[1].nullable);
    assert_eq!(d.columns[2].default.as_deref(), Some("0"));
    assert!(d.constraints.iter().any(|c| c.kind == "CHECK"));
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["columns"][1]["type"], "VARCHAR(20)");
    let n = describe_table(&s, "n").unwrap();
    assert!(n.constraints.iter().any(|c| c.kind == "FOREIGN KEY"));
    assert_eq!(describe_table(&s, "zz").unwrap_err().code, ErrorCode::TableNotFound);
}

#[test]
fn errors_name_their_code_and_position() {
    let e = execute(&MemStore::new(), "SELECT 1;\nSELEC 2", &[], &ExecContext::default()).unwrap_err();
    assert_eq!(e.code, ErrorCode::ParseError);
    assert_eq!(e.position.map(|p| p.line), Some(2));
    // The engine's error is the contract's rejection; clients see the code's stable name.
    assert_eq!(e.code.as_str(), "PARSE_ERROR");
    assert!(e.to_string().starts_with("PARSE_ERROR: "));
}

#[test]
fn json_output_of_values() {
    let mut s = MemStore::new();
    let r = s
        .exec("SELECT 1, 1.5::DOUBLE, CAST(2.50 AS DECIMAL(4,2)), TRUE, NULL, DATE '2024-01-02', CAST('{\"k\":[1]}' AS JSON)", &[])
        .unwrap();
    assert_eq!(serde_json::Value::Array(r.rows[0].clone()), serde_json::json!([1, 1.5, "2.50", true, null, "2024-01-02", {"k": [1]}]));
    assert_eq!(r.columns[0], "?column?");
}

#[test]
fn garbage_input_never_panics() {
    let s = setup();
    for q in [
        "",
        ";",
        "SELECT",
        "SELECT * FROM t WHERE",
        "INSERT INTO t VALUES",
        "SELECT 'a' LIKE",
        "SELECT 99999999999999999999999",
        "SELECT CAST('x' AS UUID)",
        "SELECT -(-9223372036854775808)",
        "SELECT 1e400",
        "SELECT $0",
        "DROP INDEX",
        "SELECT t.* FROM t x",
        "SELECT * FROM t LIMIT -1",
        "SELECT a FROM t GROUP BY 5",
        "SELECT SUM(b) FROM t",
    ] {
        let _ = execute(&s, q, &[], &ExecContext::default());
    }
}

#[test]
fn a_transaction_runs_its_steps_in_order_each_with_its_own_parameters() {
    let mut s = MemStore::new();
    s.exec("CREATE TABLE acct (id INT PRIMARY KEY, bal INT)", &[]).unwrap();
    s.exec("INSERT INTO acct VALUES (1, 100), (2, 100)", &[]).unwrap();
    let (p1, p2, p3) = ([serde_json::json!(1)], [serde_json::json!(70), serde_json::json!(1)], [serde_json::json!(1)]);
    let steps = [
        Step { sql: "SELECT bal FROM acct WHERE id = $1", params: &p1 },
        Step { sql: "UPDATE acct SET bal = $1 WHERE id = $2", params: &p2 },
        Step { sql: "SELECT bal FROM acct WHERE id = $1", params: &p3 },
    ];
    let out = execute_transaction(&s, &steps, &ExecContext::default(), &|_| false).unwrap();
    let answers: Vec<(Vec<Vec<serde_json::Value>>, u64)> = out.results.iter().map(|r| (r.rows.clone(), r.rows_affected)).collect();
    assert_eq!(
        answers,
        vec![(vec![vec![serde_json::json!(100)]], 0), (vec![], 1), (vec![vec![serde_json::json!(70)]], 0)],
        "each step answers for itself and sees the earlier steps' writes"
    );
    s.apply(&out.writes);
    assert_eq!(s.exec("SELECT bal FROM acct WHERE id = 1", &[]).unwrap().rows, vec![vec![serde_json::json!(70)]]);

    // The first failing step stops it, named by its index; nothing is written.
    let steps = [Step { sql: "UPDATE acct SET bal = 0", params: &[] }, Step { sql: "INSERT INTO acct VALUES (2, 1)", params: &[] }];
    let err = execute_transaction(&s, &steps, &ExecContext::default(), &|_| false).unwrap_err();
    assert_eq!((err.step, err.error.code), (1, ErrorCode::ConstraintViolation));
    // Transaction control and several statements are not steps.
    let err = execute_transaction(&s, &[Step { sql: "COMMIT", params: &[] }], &ExecContext::default(), &|_| false).unwrap_err();
    assert_eq!(err.error.code, ErrorCode::TransactionError);
    let err = execute_transaction(&s, &[Step { sql: "SELECT 1; SELECT 2", params: &[] }], &ExecContext::default(), &|_| false).unwrap_err();
    assert_eq!(err.error.code, ErrorCode::ParseError);
}

#[test]
fn copy_from_stdin_takes_its_rows_as_parameters_all_or_none() {
    use serde_json::json;
    let mut s = MemStore::new();
    s.exec("CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price DECIMAL(10,2), added DATE)", &[]).unwrap();
    let rows = [json!(["1", "bolt", "0.25", "2026-01-02"]), json!(["2", null, "1.50", null])];
    let out = s.exec(r#"COPY "items" FROM STDIN;"#, &rows).unwrap();
    assert_eq!(out.rows_affected, 2);
    let read = s.exec("SELECT id, name, price, added FROM items ORDER BY id", &[]).unwrap();
    assert_eq!(
        read.rows,
        vec![vec![json!(1), json!("bolt"), json!("0.25"), json!("2026-01-02")], vec![json!(2), json!(null), json!("1.50"), json!(null)]]
    );
    // Named columns; the others take their defaults.
    s.exec(r#"COPY "items" ("name", "id") FROM STDIN;"#, &[json!(["nut", "3"])]).unwrap();
    assert_eq!(s.exec("SELECT name FROM items WHERE id = 3", &[]).unwrap().rows, vec![vec![json!("nut")]]);
    // A conflict, a bad value or a short row fails the whole COPY, naming its line.
    for (rows, code, says) in [
        (vec![json!(["4", "a", "1", null]), json!(["1", "dup", "1", null])], ErrorCode::ConstraintViolation, "line 2"),
        (vec![json!(["x", "a", "1", null])], ErrorCode::TypeMismatch, "line 1"),
        (vec![json!(["5", "a"])], ErrorCode::ParseError, "missing data for column \"price\""),
        (vec![json!(["5", "a", "1", null, "extra"])], ErrorCode::ParseError, "extra data"),
        (vec![json!("5")], ErrorCode::ParseError, "an array of fields"),
    ] {
        let err = s.exec(r#"COPY "items" FROM STDIN;"#, &rows).unwrap_err();
        assert!(err.code == code && err.message.contains(says), "{rows:?}: {err:?}");
    }
    assert_eq!(s.exec("SELECT count(*) FROM items", &[]).unwrap().rows, vec![vec![json!(3)]], "nothing of a failed COPY is written");
    assert_eq!(s.exec("COPY items TO STDOUT;", &[]).unwrap_err().code, ErrorCode::Unsupported);
}

#[test]
fn truncate_empties_every_table_it_names() {
    use serde_json::json;
    let mut s = MemStore::new();
    s.exec("CREATE TABLE a (id INT PRIMARY KEY, v TEXT UNIQUE); CREATE TABLE b (id INT PRIMARY KEY)", &[]).unwrap();
    s.exec("INSERT INTO a VALUES (1, 'x'), (2, 'y'); INSERT INTO b VALUES (1)", &[]).unwrap();
    assert_eq!(s.exec("TRUNCATE TABLE a, b", &[]).unwrap().rows_affected, 3, "the rows deleted are counted");
    assert_eq!(s.exec("SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)", &[]).unwrap().rows, vec![vec![json!(0)]]);
    // Its unique index is emptied too: the same values go in again.
    s.exec("INSERT INTO a VALUES (1, 'x')", &[]).unwrap();
    assert_eq!(s.exec("TRUNCATE missing", &[]).unwrap_err().code, ErrorCode::TableNotFound);
    assert_eq!(s.exec("TRUNCATE a CASCADE", &[]).unwrap_err().code, ErrorCode::Unsupported);
}

#[test]
fn truncate_of_a_parent_and_its_child_together_empties_both_in_any_order() {
    use serde_json::json;
    let mut s = MemStore::new();
    s.exec("CREATE TABLE parent (id INT PRIMARY KEY); CREATE TABLE child (id INT PRIMARY KEY, p INT REFERENCES parent (id))", &[]).unwrap();
    for order in ["parent, child", "child, parent"] {
        s.exec("INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (10, 1), (11, 2)", &[]).unwrap();
        s.exec(&format!("TRUNCATE {order}"), &[]).unwrap_or_else(|e| panic!("TRUNCATE {order}: {e:?}"));
        let left = s.exec("SELECT (SELECT count(*) FROM parent) + (SELECT count(*) FROM child)", &[]).unwrap().rows;
        assert_eq!(left, vec![vec![json!(0)]], "TRUNCATE {order}");
    }
    // A parent alone, while a child refers to it, is refused and keeps its rows.
    s.exec("INSERT INTO parent VALUES (1); INSERT INTO child VALUES (10, 1)", &[]).unwrap();
    assert_eq!(s.exec("TRUNCATE parent", &[]).unwrap_err().code, ErrorCode::ConstraintViolation);
    assert_eq!(s.exec("SELECT count(*) FROM parent", &[]).unwrap().rows, vec![vec![json!(1)]]);
}
