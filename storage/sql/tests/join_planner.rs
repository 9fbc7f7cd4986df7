//! Scenarios for the join planner: reporting-tool joins (comma lists with the
//! join conditions in WHERE) are joined along their equalities, never as cross
//! products; a join that would outgrow the memory budget stops with
//! QUERY_MEMORY_EXCEEDED; and random multi-way joins agree with a real
//! PostgreSQL (when its binaries are installed; see `deploy/prerequisites.sh`).
use std::time::Instant;

use tessera_sql::mem::MemStore;
use tessera_sql::*;

use tessera_sql::difftest::{Postgres, random_join_case, unaligned_rows};

/// `n` tables `t0..t{n-1}` of `rows` rows: `id` (primary key), `ref` (the id of a
/// row of the next table), `grp` (id mod 10) and a text column.
fn chain(n: usize, rows: usize) -> MemStore {
    let mut s = MemStore::new();
    for t in 0..n {
        s.exec(&format!("CREATE TABLE t{t} (id INTEGER PRIMARY KEY, ref INTEGER, grp INTEGER, label TEXT)"), &[]).unwrap();
        let values: Vec<String> = (0..rows).map(|i| format!("({i}, {}, {}, 'r{t}-{i}')", (i * 7 + t) % rows, i % 10)).collect();
        s.exec(&format!("INSERT INTO t{t} VALUES {}", values.join(",")), &[]).unwrap();
    }
    s
}

/// `SELECT … FROM t0, t1, … WHERE t0.ref = t1.id AND …` over `n` tables, the
/// tables listed in reverse so written order is the worst one.
fn comma_chain_query(n: usize) -> String {
    let from: Vec<String> = (0..n).rev().map(|t| format!("t{t}")).collect();
    let preds: Vec<String> = (0..n - 1).map(|t| format!("t{t}.ref = t{}.id", t + 1)).collect();
    format!("SELECT t0.id, t{}.label FROM {} WHERE {}", n - 1, from.join(", "), preds.join(" AND "))
}

#[test]
fn an_eight_table_comma_join_follows_its_equalities() {
    let s = chain(8, 100);
    let sql = comma_chain_query(8);
    let started = Instant::now();
    let out = execute(&s, &sql, &[], &ExecContext::default()).unwrap();
    eprintln!("8-table join of 100-row tables: {:?} (debug build)", started.elapsed());
    // Every t0 row follows one chain of references: 100 rows.
    assert_eq!(out.result.row_count, 100);
    let plan = explain(&s, &sql).unwrap();
    for line in plan.lines().filter(|l| l.contains("JOIN") || l.contains("NESTED LOOP")) {
        assert!(!line.contains("NESTED LOOP"), "a cross product was built:\n{plan}");
        let rows: usize = line.rsplit("→ ").next().and_then(|r| r.trim_end_matches(" rows").parse().ok()).unwrap();
        assert!(rows <= 100, "an intermediate result outgrew the tables:\n{plan}");
    }
}

#[test]
fn join_conditions_in_on_and_where_give_the_same_rows() {
    let s = chain(4, 50);
    let on = "SELECT t0.id, t3.id FROM t0 JOIN t1 ON t0.ref = t1.id JOIN t2 ON t1.ref = t2.id JOIN t3 ON t2.ref = t3.id \
              WHERE t0.grp = 3 ORDER BY t0.id";
    let comma = "SELECT t0.id, t3.id FROM t3, t2, t1, t0 WHERE t2.ref = t3.id AND t0.grp = 3 AND t1.ref = t2.id \
                 AND t0.ref = t1.id ORDER BY t0.id";
    let a = execute(&s, on, &[], &ExecContext::default()).unwrap().result;
    let b = execute(&s, comma, &[], &ExecContext::default()).unwrap().result;
    assert_eq!(a.rows, b.rows);
    assert_eq!(a.row_count, 5);
}

#[test]
fn an_explosive_cross_join_stops_at_the_memory_budget() {
    let s = chain(4, 100);
    let ctx = ExecContext { max_memory_bytes: 8 * 1024 * 1024, ..ExecContext::default() };
    let err = execute(&s, "SELECT count(*) FROM t0, t1, t2, t3", &[], &ctx).unwrap_err();
    assert_eq!(err.code, ErrorCode::QueryMemoryExceeded, "{err}");
    // A LEFT JOIN is joined in written order and is bounded too.
    let err =
        execute(&s, "SELECT count(*) FROM t0 LEFT JOIN t1 ON t1.id >= 0 LEFT JOIN t2 ON t2.id >= 0 LEFT JOIN t3 ON t3.id >= 0", &[], &ctx)
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::QueryMemoryExceeded, "{err}");
}

#[test]
fn where_errors_on_rows_a_join_removes_are_not_raised() {
    // `100 / t1.grp` divides by zero only for rows whose grp is 0; those rows are
    // removed by t1.grp > 0, which PostgreSQL may check first as well.
    let s = chain(2, 20);
    let out =
        execute(&s, "SELECT count(*) FROM t0, t1 WHERE t0.ref = t1.id AND t1.grp > 0 AND 100 / t1.grp > 1", &[], &ExecContext::default())
            .unwrap();
    assert_eq!(out.result.rows, vec![vec![serde_json::json!(18)]]);
}

// ---------------------------------------------------------------------------
// Differential checks against PostgreSQL.

/// Random schemas, data and 2-to-6-table join queries (comma and explicit
/// joins, predicates in WHERE and ON, IN lists, BETWEEN, NULLs): Tessera and
/// PostgreSQL return the same rows as multisets.
#[test]
fn random_joins_agree_with_postgresql() {
    let Some(pg) = Postgres::start_or_skip() else { return };
    let mut checked = 0;
    for seed in 1..=6u64 {
        let (setup, queries) = random_join_case(seed * 7919, 6, 12, 25);
        let mut s = MemStore::new();
        for stmt in &setup {
            s.exec(stmt, &[]).unwrap();
        }
        for (q, want) in queries.iter().zip(pg.results(&setup, &queries)) {
            let want = want.unwrap_or_else(|e| panic!("PostgreSQL refused {q}: {e}"));
            let out = execute(&s, q, &[], &ExecContext::default()).unwrap_or_else(|e| panic!("{q}: {e}"));
            let got = unaligned_rows(&out.result);
            assert_eq!(got.len(), want.len(), "seed {seed}, query {q}: row counts differ");
            assert_eq!(got, want, "seed {seed}, query {q}");
            checked += 1;
        }
    }
    eprintln!("{checked} random join queries agreed with PostgreSQL");
}

#[test]
fn concurrent_queries_share_the_nodes_memory_pool() {
    let s = chain(3, 100);
    let pool = std::sync::Arc::new(MemoryPool::new(4 * 1024 * 1024));
    let ctx = ExecContext { memory_pool: Some(pool.clone()), ..ExecContext::default() };
    let sql = "SELECT count(*) FROM t0, t1 WHERE t0.grp = t1.grp";
    // Alone, the query fits; its share goes back to the pool when it ends.
    execute(&s, sql, &[], &ctx).unwrap();
    assert_eq!(pool.used(), 0, "a finished query kept its share of the pool");
    // With most of the pool taken by others, it is refused, and holds nothing after.
    assert!(pool.try_reserve(4 * 1024 * 1024 - 64 * 1024));
    let err = execute(&s, sql, &[], &ctx).unwrap_err();
    assert_eq!(err.code, ErrorCode::QueryMemoryExceeded, "{err}");
    assert!(err.message.contains("pool"), "{err}");
    pool.release(4 * 1024 * 1024 - 64 * 1024);
    assert_eq!(pool.used(), 0, "a refused query kept its share of the pool");
    execute(&s, sql, &[], &ctx).unwrap();
}

#[test]
fn an_uncorrelated_subquery_runs_once() {
    let s = chain(2, 2000);
    let plan = explain(&s, "SELECT count(*) FROM t0 WHERE t0.ref IN (SELECT id FROM t1 WHERE grp = 3)").unwrap();
    let scanned: u64 = plan.lines().last().and_then(|l| l.strip_prefix("rows scanned: ")).and_then(|n| n.parse().ok()).unwrap();
    // Once: t0 (2000 rows) and t1 (2000 rows), not 2000 times t1.
    assert!(scanned <= 4000, "the subquery ran per row: {scanned} rows scanned\n{plan}");
    // A correlated one still sees its outer row.
    let out = execute(
        &s,
        "SELECT count(*) FROM t0 WHERE EXISTS (SELECT 1 FROM t1 WHERE t1.id = t0.ref AND t1.grp = t0.grp)",
        &[],
        &ExecContext::default(),
    )
    .unwrap();
    let direct = execute(&s, "SELECT count(*) FROM t0, t1 WHERE t1.id = t0.ref AND t1.grp = t0.grp", &[], &ExecContext::default()).unwrap();
    assert_eq!(out.result.rows, direct.result.rows);
}

#[test]
fn explain_analyze_shows_rows_and_time_per_step() {
    let mut s = chain(3, 50);
    let out = s.exec("EXPLAIN ANALYZE SELECT t0.id FROM t2, t1, t0 WHERE t0.ref = t1.id AND t1.ref = t2.id AND t0.grp = 1", &[]).unwrap();
    let plan: Vec<String> = out.rows.iter().map(|r| r[0].as_str().unwrap_or_default().to_string()).collect();
    let text = plan.join("\n");
    assert!(plan.iter().any(|l| l.starts_with("FULL SCAN t0") && l.contains("→ 50 rows (") && l.ends_with(" ms)")), "{text}");
    assert!(plan.iter().any(|l| l.contains("JOIN t1") && l.contains("→ 5 rows (")), "{text}");
    assert!(plan.last().is_some_and(|l| l.starts_with("result: 5 rows;") && l.contains("execution time:")), "{text}");
    // Plain EXPLAIN has the row counts without times.
    let out = s.exec("EXPLAIN SELECT t0.id FROM t1, t0 WHERE t0.ref = t1.id", &[]).unwrap();
    assert!(out.rows.iter().all(|r| !r[0].as_str().unwrap_or_default().contains(" ms)")), "{:?}", out.rows);
}

/// Long joins (up to 20 tables, comma and explicit) agree with PostgreSQL too.
#[test]
fn random_long_joins_agree_with_postgresql() {
    let Some(pg) = Postgres::start_or_skip() else { return };
    let mut checked = 0;
    for seed in 1..=4u64 {
        let (setup, queries) = random_join_case(seed * 104_729, 20, 12, 12);
        let mut s = MemStore::new();
        for stmt in &setup {
            s.exec(stmt, &[]).unwrap();
        }
        for (q, want) in queries.iter().zip(pg.results(&setup, &queries)) {
            let want = want.unwrap_or_else(|e| panic!("PostgreSQL refused {q}: {e}"));
            let out = execute(&s, q, &[], &ExecContext::default()).unwrap_or_else(|e| panic!("{q}: {e}"));
            assert_eq!(unaligned_rows(&out.result), want, "seed {seed}, query {q}");
            checked += 1;
        }
    }
    eprintln!("{checked} random joins of up to 20 tables agreed with PostgreSQL");
}

/// One table of `rows` rows with a distinct 200-byte label each.
fn wide_labels(rows: usize) -> MemStore {
    let mut s = MemStore::new();
    s.exec("CREATE TABLE w (id INTEGER PRIMARY KEY, label TEXT)", &[]).unwrap();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{i:0>200}')")).collect();
        s.exec(&format!("INSERT INTO w VALUES {}", values.join(",")), &[]).unwrap();
    }
    s
}

#[test]
fn grouping_distinct_and_set_operations_count_against_the_budget() {
    let s = wide_labels(5000);
    // Each case: a statement that fits the budget, and one over the same rows
    // that also holds a key set (group keys, the DISTINCT set, both sides of a
    // set operation and its key set) on top of them.
    let cases = [
        (7 << 19, "SELECT id FROM w", "SELECT label, count(*) FROM w GROUP BY label"),
        (7 << 19, "SELECT id FROM w", "SELECT DISTINCT label FROM w"),
        (2 << 20, "SELECT label FROM w WHERE id < 2500", "SELECT label FROM w WHERE id < 2500 UNION SELECT label FROM w WHERE id >= 2500"),
        (2 << 20, "SELECT label FROM w WHERE id < 2500", "SELECT label FROM w WHERE id < 2500 EXCEPT SELECT label FROM w WHERE id >= 2500"),
    ];
    for (budget, fits, over) in cases {
        let ctx = ExecContext { max_memory_bytes: budget, ..ExecContext::default() };
        execute(&s, fits, &[], &ctx).unwrap_or_else(|e| panic!("{fits}: {e}"));
        let err = execute(&s, over, &[], &ctx).map(|o| o.result.row_count).unwrap_err();
        assert_eq!(err.code, ErrorCode::QueryMemoryExceeded, "{over}: {err}");
        // With the default budget the same statement answers.
        let out = execute(&s, over, &[], &ExecContext::default()).unwrap();
        assert!(out.result.row_count >= 2500, "{over}");
    }
}
