//! Scenarios for what PostgreSQL users reach for next: upserts
//! (`INSERT … ON CONFLICT DO NOTHING | DO UPDATE`), `RETURNING` on INSERT,
//! UPDATE and DELETE, `STRING_AGG` and `ARRAY_AGG`, views. Statement sequences run on
//! Tessera and on a real PostgreSQL must give the same rows after each
//! statement; other dialects' INSERT forms are refused, never run as an INSERT.
use tessera_sql::mem::MemStore;
use tessera_sql::*;

use tessera_sql::difftest::Postgres;

fn rows_of(out: &QueryResult) -> Vec<String> {
    tessera_sql::difftest::unaligned_rows(out)
}

const SETUP: &[&str] = &[
    "CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, note TEXT)",
    "CREATE TABLE tags (id INTEGER PRIMARY KEY, name TEXT, UNIQUE (name))",
    "INSERT INTO stock VALUES ('a', 1, NULL), ('b', 2, 'x'), ('c', 3, 'y')",
    "INSERT INTO tags VALUES (1, 'red'), (2, 'blue')",
];

const STATEMENTS: &[&str] = &[
    // Upserts.
    "INSERT INTO stock VALUES ('a', 10, 'new') ON CONFLICT (sku) DO NOTHING",
    "INSERT INTO stock VALUES ('d', 4, NULL) ON CONFLICT DO NOTHING RETURNING sku, qty",
    "INSERT INTO stock VALUES ('a', 10, 'n1'), ('e', 5, 'n2') ON CONFLICT (sku) DO UPDATE SET qty = stock.qty + excluded.qty, note = excluded.note RETURNING *",
    "INSERT INTO stock VALUES ('b', 7, 'z') ON CONFLICT (sku) DO UPDATE SET qty = stock.qty * 100 WHERE stock.qty > 5 RETURNING sku",
    "INSERT INTO stock AS s VALUES ('a', 1, 'aliased') ON CONFLICT (sku) DO UPDATE SET qty = s.qty + excluded.qty RETURNING s.sku, s.qty",
    "INSERT INTO stock VALUES ('b', 7, 'z') ON CONFLICT (sku) DO UPDATE SET qty = stock.qty * 100 WHERE excluded.qty > 5 RETURNING sku, qty",
    "INSERT INTO stock VALUES ('c', 7, 'z') ON CONFLICT ON CONSTRAINT stock_pkey DO UPDATE SET note = 'via constraint' RETURNING note",
    "INSERT INTO tags VALUES (3, 'red') ON CONFLICT (name) DO UPDATE SET id = tags.id RETURNING id, name",
    "INSERT INTO tags VALUES (4, 'green') ON CONFLICT (name) DO NOTHING RETURNING id",
    "SELECT * FROM stock",
    "SELECT * FROM tags",
    // RETURNING on UPDATE and DELETE.
    "UPDATE stock SET qty = qty + 1 WHERE qty < 5 RETURNING sku, qty * 2 AS doubled",
    "DELETE FROM stock WHERE sku IN ('d', 'e') RETURNING *",
    "SELECT sku, qty FROM stock",
    // List aggregates.
    "SELECT STRING_AGG(sku, ',' ORDER BY sku) FROM stock",
    "SELECT STRING_AGG(note, '; ' ORDER BY sku DESC) FROM stock",
    "SELECT qty > 5, STRING_AGG(sku, '-' ORDER BY sku) FROM stock GROUP BY qty > 5",
    "SELECT STRING_AGG(sku, ',') FROM stock WHERE qty < 0",
    // Uncorrelated subqueries run once per statement, before its changes.
    "UPDATE stock SET qty = (SELECT MAX(qty) FROM stock) + 1 WHERE sku IN ('a', 'b') RETURNING sku, qty",
    "SELECT sku FROM stock WHERE qty = (SELECT MAX(qty) FROM stock)",
    "SELECT sku, (SELECT COUNT(*) FROM stock s2 WHERE s2.qty < stock.qty) FROM stock",
    // Views.
    "CREATE VIEW low_stock AS SELECT sku, qty FROM stock WHERE qty < 5",
    "CREATE VIEW low_names (code) AS SELECT sku FROM low_stock",
    "SELECT * FROM low_stock",
    "SELECT l.code, s.note FROM low_names l JOIN stock s ON s.sku = l.code",
    "INSERT INTO stock VALUES ('f', 1, 'fresh')",
    "SELECT code FROM low_names",
    "CREATE OR REPLACE VIEW low_stock AS SELECT sku, qty FROM stock WHERE qty < 3",
    "SELECT count(*) FROM low_names",
    "DROP VIEW low_names",
    "DROP VIEW IF EXISTS low_names",
];

#[test]
fn upserts_returning_and_string_agg_agree_with_postgresql() {
    let Some(pg) = Postgres::start_or_skip() else { return };
    let setup: Vec<String> = SETUP.iter().map(|s| s.to_string()).collect();
    let statements: Vec<String> = STATEMENTS.iter().map(|s| s.to_string()).collect();
    let want = pg.results(&setup, &statements);
    let mut s = MemStore::new();
    for stmt in &setup {
        s.exec(stmt, &[]).unwrap();
    }
    for (stmt, want) in statements.iter().zip(want) {
        let want = want.unwrap_or_else(|e| panic!("PostgreSQL refused {stmt}: {e}"));
        let got = s.exec(stmt, &[]).unwrap_or_else(|e| panic!("{stmt}: {e}"));
        assert_eq!(rows_of(&got), want, "{stmt}");
    }
}

#[test]
fn upsert_counts_and_errors() {
    let mut s = MemStore::new();
    for stmt in SETUP {
        s.exec(stmt, &[]).unwrap();
    }
    let r = s.exec("INSERT INTO stock VALUES ('a', 1, NULL), ('z', 1, NULL) ON CONFLICT DO NOTHING", &[]).unwrap();
    assert_eq!(r.rows_affected, 1, "only the new row counts");
    let err = s.exec("INSERT INTO stock VALUES ('a', 1, NULL) ON CONFLICT (qty) DO NOTHING", &[]).unwrap_err();
    assert!(err.message.contains("no unique or exclusion constraint"), "{err}");
    let err = s.exec("INSERT INTO stock VALUES ('a', 1, NULL) ON CONFLICT DO UPDATE SET qty = 0", &[]).unwrap_err();
    assert!(err.message.contains("requires inference specification"), "{err}");
    // A DO UPDATE that breaks a constraint is an error, and nothing of the request is written.
    let err = s.exec("INSERT INTO tags VALUES (9, 'red') ON CONFLICT (name) DO UPDATE SET id = 2", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::ConstraintViolation, "{err}");
}

#[test]
fn array_agg_returns_a_json_array_with_nulls() {
    let mut s = MemStore::new();
    for stmt in SETUP {
        s.exec(stmt, &[]).unwrap();
    }
    let r = s.exec("SELECT ARRAY_AGG(note ORDER BY sku), ARRAY_AGG(qty ORDER BY qty DESC) FROM stock", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!([null, "x", "y"]), serde_json::json!([3, 2, 1])]]);
    let r = s.exec("SELECT ARRAY_AGG(qty) FROM stock WHERE qty > 100", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::Value::Null]]);
}

#[test]
fn other_dialects_insert_forms_are_refused_not_run_as_insert() {
    let mut s = MemStore::new();
    for stmt in SETUP {
        s.exec(stmt, &[]).unwrap();
    }
    for stmt in [
        "REPLACE INTO stock VALUES ('a', 99, NULL)",
        "INSERT OR REPLACE INTO stock VALUES ('a', 99, NULL)",
        "INSERT IGNORE INTO stock VALUES ('a', 99, NULL)",
        "INSERT INTO stock VALUES ('a', 99, NULL) ON DUPLICATE KEY UPDATE qty = 99",
    ] {
        let err = s.exec(stmt, &[]).unwrap_err();
        assert_eq!(err.code, ErrorCode::Unsupported, "{stmt}: {err}");
    }
    let r = s.exec("SELECT qty FROM stock WHERE sku = 'a'", &[]).unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!(1)]], "a refused statement wrote");
}

#[test]
fn views_that_would_expand_forever_are_an_error() {
    let mut s = MemStore::new();
    for stmt in SETUP {
        s.exec(stmt, &[]).unwrap();
    }
    s.exec("CREATE VIEW v1 AS SELECT sku FROM stock", &[]).unwrap();
    s.exec("CREATE VIEW v2 AS SELECT sku FROM v1", &[]).unwrap();
    let err = s.exec("CREATE VIEW v1 AS SELECT sku FROM stock", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::TableExists, "{err}");
    let err = s.exec("CREATE TABLE v2 (x INTEGER)", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::TableExists, "{err}");
    // v1 → v2 → v1 …: refused when made or when used, never a stack overflow.
    let made = s.exec("CREATE OR REPLACE VIEW v1 AS SELECT sku FROM v2", &[]);
    if made.is_ok() {
        assert!(s.exec("SELECT * FROM v1", &[]).is_err());
    }
    let err = s.exec("DROP VIEW nope", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::TableNotFound, "{err}");
}

/// Window functions over partitions, peers (ties), frames and NULLs agree with
/// PostgreSQL.
#[test]
fn window_functions_agree_with_postgresql() {
    let Some(pg) = Postgres::start_or_skip() else { return };
    let setup: Vec<String> = [
        "CREATE TABLE sales (id INTEGER PRIMARY KEY, region TEXT, amount INTEGER, price DOUBLE PRECISION)",
        "INSERT INTO sales VALUES (1, 'n', 10, 1.5), (2, 'n', 20, 2.5), (3, 'n', 20, NULL), (4, 's', 5, 0.5), \
         (5, 's', NULL, 3.0), (6, 's', 7, 1.0), (7, 'e', 1, 1.0), (8, 'n', 40, 4.0)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let queries: Vec<String> = [
        "SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM sales",
        "SELECT id, ROW_NUMBER() OVER (PARTITION BY region ORDER BY id DESC) FROM sales",
        "SELECT id, RANK() OVER (ORDER BY amount), DENSE_RANK() OVER (ORDER BY amount) FROM sales",
        "SELECT id, RANK() OVER (PARTITION BY region ORDER BY amount DESC NULLS LAST) FROM sales",
        "SELECT id, SUM(amount) OVER (PARTITION BY region ORDER BY id) FROM sales",
        "SELECT id, SUM(amount) OVER (ORDER BY amount), COUNT(*) OVER (ORDER BY amount) FROM sales",
        "SELECT id, COUNT(amount) OVER (PARTITION BY region), MAX(amount) OVER (PARTITION BY region) FROM sales",
        "SELECT id, SUM(amount) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM sales",
        "SELECT id, MIN(amount) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM sales",
        "SELECT id, LAG(amount) OVER (ORDER BY id), LEAD(amount, 2, -1) OVER (ORDER BY id) FROM sales",
        "SELECT id, FIRST_VALUE(id) OVER (PARTITION BY region ORDER BY id), \
         LAST_VALUE(id) OVER (PARTITION BY region ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM sales",
        "SELECT id, NTH_VALUE(id, 2) OVER (ORDER BY id) FROM sales",
        "SELECT id, NTILE(3) OVER (ORDER BY id) FROM sales",
        "SELECT id, CUME_DIST() OVER (ORDER BY amount), PERCENT_RANK() OVER (ORDER BY amount) FROM sales",
        "SELECT region, id, amount * 2 - ROW_NUMBER() OVER (PARTITION BY region ORDER BY id) FROM sales WHERE id > 1",
        "SELECT id FROM sales ORDER BY ROW_NUMBER() OVER (ORDER BY id DESC) LIMIT 3",
        "SELECT id, AVG(price) OVER (PARTITION BY region) FROM sales WHERE region <> 'n'",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let want = pg.results(&setup, &queries);
    let mut s = MemStore::new();
    for stmt in &setup {
        s.exec(stmt, &[]).unwrap();
    }
    for (q, want) in queries.iter().zip(want) {
        let want = want.unwrap_or_else(|e| panic!("PostgreSQL refused {q}: {e}"));
        let got = s.exec(q, &[]).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(rows_of(&got), want, "{q}");
    }
    let err = s.exec("SELECT region, SUM(amount), RANK() OVER (ORDER BY SUM(amount)) FROM sales GROUP BY region", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported, "{err}");
    let err = s.exec("SELECT id FROM sales WHERE ROW_NUMBER() OVER (ORDER BY id) = 1", &[]).unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported, "{err}");
}
