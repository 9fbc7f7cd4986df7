//! Scenarios for the join planner: reporting-tool joins (comma lists with the
//! join conditions in WHERE) are joined along their equalities, never as cross
//! products; a join that would outgrow the memory budget stops with
//! QUERY_MEMORY_EXCEEDED; and random multi-way joins agree with a real
//! PostgreSQL (when its binaries are installed; see `deploy/prerequisites.sh`).
use std::time::Instant;

use tessera_sql::mem::MemStore;
use tessera_sql::*;

mod support;
use support::Postgres;

/// `n` tables `t0..t{n-1}` of `rows` rows: `id` (primary key), `ref` (the id of a
/// row of the next table), `grp` (id mod 10) and a text column.
fn chain(n: usize, rows: usize) -> MemStore {
    let mut s = MemStore::new();
    for t in 0..n {
        s.exec(&format!("CREATE TABLE t{t} (id INTEGER PRIMARY KEY, ref INTEGER, grp INTEGER, label TEXT)"), &[]).unwrap();
        let values: Vec<String> =
            (0..rows).map(|i| format!("({i}, {}, {}, 'r{t}-{i}')", (i * 7 + t) % rows, i % 10)).collect();
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
    let err = execute(&s, "SELECT count(*) FROM t0 LEFT JOIN t1 ON t1.id >= 0 LEFT JOIN t2 ON t2.id >= 0 LEFT JOIN t3 ON t3.id >= 0", &[], &ctx)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::QueryMemoryExceeded, "{err}");
}

#[test]
fn where_errors_on_rows_a_join_removes_are_not_raised() {
    // `100 / t1.grp` divides by zero only for rows whose grp is 0; those rows are
    // removed by t1.grp > 0, which PostgreSQL may check first as well.
    let s = chain(2, 20);
    let out = execute(&s, "SELECT count(*) FROM t0, t1 WHERE t0.ref = t1.id AND t1.grp > 0 AND 100 / t1.grp > 1", &[], &ExecContext::default())
        .unwrap();
    assert_eq!(out.result.rows, vec![vec![serde_json::json!(18)]]);
}

// ---------------------------------------------------------------------------
// Differential checks against PostgreSQL.

/// A tiny deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Random tables (`tables` of them, up to `max_rows` rows each, small value
/// domains so joins match, NULLs included) and random join queries over them.
fn random_case(seed: u64, tables: usize, max_rows: u64, queries: usize) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng(seed.max(1));
    let mut setup = Vec::new();
    for t in 0..tables {
        setup.push(format!("CREATE TABLE r{t} (a INTEGER, b INTEGER, c TEXT)"));
        let rows = 1 + rng.below(max_rows);
        let mut values = Vec::new();
        for _ in 0..rows {
            let mut v = |dom: u64| if rng.below(8) == 0 { "NULL".to_string() } else { rng.below(dom).to_string() };
            let (a, b) = (v(6), v(4));
            let c = if rng.below(8) == 0 { "NULL".to_string() } else { format!("'x{}'", rng.below(3)) };
            values.push(format!("({a}, {b}, {c})"));
        }
        setup.push(format!("INSERT INTO r{t} VALUES {}", values.join(", ")));
    }
    let mut out = Vec::new();
    for _ in 0..queries {
        let k = 2 + rng.below(tables as u64 - 1) as usize;
        let mut picked: Vec<usize> = (0..tables).collect();
        for i in (1..picked.len()).rev() {
            picked.swap(i, rng.below(i as u64 + 1) as usize);
        }
        picked.truncate(k);
        let alias = |i: usize| format!("q{i}");
        let mut preds = Vec::new();
        for i in 1..k {
            let j = rng.below(i as u64) as usize;
            let (x, y) = (["a", "b"][rng.below(2) as usize], ["a", "b"][rng.below(2) as usize]);
            preds.push(format!("{}.{x} = {}.{y}", alias(i), alias(j)));
        }
        for i in 0..k {
            match rng.below(6) {
                0 => preds.push(format!("{}.a IN ({}, {})", alias(i), rng.below(6), rng.below(6))),
                1 => preds.push(format!("{}.b BETWEEN 1 AND {}", alias(i), 1 + rng.below(3))),
                2 => preds.push(format!("{}.c IS NOT NULL", alias(i))),
                3 => preds.push(format!("({}.a < 3 OR {}.c = 'x1')", alias(i), alias(i))),
                _ => {}
            }
        }
        let explicit = rng.below(2) == 0;
        let from = if explicit {
            let mut f = format!("r{} {}", picked[0], alias(0));
            for i in 1..k {
                // The equality chaining item i to an earlier one goes into its ON.
                f.push_str(&format!(" JOIN r{} {} ON {}", picked[i], alias(i), preds[i - 1]));
            }
            preds.drain(..k - 1);
            f
        } else {
            (0..k).map(|i| format!("r{} {}", picked[i], alias(i))).collect::<Vec<_>>().join(", ")
        };
        let cols: Vec<String> = (0..k).map(|i| format!("{}.a, {}.c", alias(i), alias(i))).collect();
        let mut q = format!("SELECT {} FROM {from}", cols.join(", "));
        if !preds.is_empty() {
            q.push_str(&format!(" WHERE {}", preds.join(" AND ")));
        }
        out.push(q);
    }
    (setup, out)
}

/// Tessera's rows in psql's unaligned format (`|` between fields, NULL empty).
fn tessera_rows(s: &MemStore, sql: &str) -> Vec<String> {
    let out = execute(s, sql, &[], &ExecContext::default()).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows: Vec<String> = out
        .result
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}

/// Random schemas, data and 2-to-6-table join queries (comma and explicit
/// joins, predicates in WHERE and ON, IN lists, BETWEEN, NULLs): Tessera and
/// PostgreSQL return the same rows as multisets.
#[test]
fn random_joins_agree_with_postgresql() {
    let Some(pg) = Postgres::start_or_skip() else { return };
    let mut checked = 0;
    for seed in 1..=6u64 {
        let (setup, queries) = random_case(seed * 7919, 6, 12, 25);
        let mut s = MemStore::new();
        for stmt in &setup {
            s.exec(stmt, &[]).unwrap();
        }
        for (q, want) in queries.iter().zip(pg.results(&setup, &queries)) {
            let want = want.unwrap_or_else(|e| panic!("PostgreSQL refused {q}: {e}"));
            let got = tessera_rows(&s, q);
            assert_eq!(got.len(), want.len(), "seed {seed}, query {q}: row counts differ");
            assert_eq!(got, want, "seed {seed}, query {q}");
            checked += 1;
        }
    }
    eprintln!("{checked} random join queries agreed with PostgreSQL");
}

