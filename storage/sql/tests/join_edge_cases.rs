//! Edge cases of the join planner (storage/sql/src/join.rs) checked against a
//! real PostgreSQL: index lookups with mixed-type keys, names, self-joins,
//! derived tables, correlated subqueries, and random typed joins.

use tessera_sql::mem::MemStore;
use tessera_sql::*;

use tessera_sql::difftest::Postgres;

fn tessera(s: &MemStore, sql: &str) -> Result<Vec<String>, String> {
    // Catch panics too (index out of bounds etc.).
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(s, sql, &[], &ExecContext::default())));
    let out = match r {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(format!("{e}")),
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            return Err(format!("PANIC: {msg}"));
        }
    };
    let mut rows: Vec<String> = out
        .result
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Bool(b) => {
                        if *b {
                            "t".into()
                        } else {
                            "f".into()
                        }
                    }
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    Ok(rows)
}

fn store(setup: &[String]) -> MemStore {
    let mut s = MemStore::new();
    for stmt in setup {
        s.exec(stmt, &[]).unwrap_or_else(|e| panic!("{stmt}: {e}"));
    }
    s
}

/// Compares every query; returns the list of mismatches (query, tessera, pg).
fn diff(pg: &Postgres, setup: &[String], queries: &[String]) -> Vec<String> {
    let s = store(setup);
    let want = pg.results(setup, queries);
    let mut bad = Vec::new();
    for (q, w) in queries.iter().zip(want) {
        let got = tessera(&s, q);
        let same = match (&got, &w) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            bad.push(format!("QUERY: {q}\n  tessera: {got:?}\n  postgres: {w:?}"));
        }
    }
    bad
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

macro_rules! need_pg {
    () => {
        match Postgres::start_or_skip() {
            Some(pg) => pg,
            None => return,
        }
    };
}

fn fixture() -> Vec<String> {
    strs(&[
        "CREATE TABLE a (id INTEGER PRIMARY KEY, k INTEGER, x INTEGER, s TEXT)",
        "INSERT INTO a VALUES (1, 1, 10, 'p'), (2, 2, 20, 'q'), (3, NULL, 30, NULL), (4, 2, NULL, 'r')",
        "CREATE TABLE b (id INTEGER PRIMARY KEY, k INTEGER, x INTEGER, s TEXT)",
        "INSERT INTO b VALUES (1, 2, 10, 'p'), (2, 2, 40, 'q'), (3, NULL, 30, 'z'), (5, 1, 10, NULL)",
        "CREATE TABLE c (id INTEGER, k INTEGER, y INTEGER)",
        "INSERT INTO c VALUES (1, 1, 1), (2, 2, 2), (NULL, NULL, 3)",
        "CREATE INDEX c_k ON c (k)",
        "CREATE TABLE e (id INTEGER PRIMARY KEY, k INTEGER)",
        "CREATE TABLE ts (k TEXT PRIMARY KEY, v INTEGER)",
        "INSERT INTO ts VALUES ('1', 1), ('01', 2), ('abc', 3)",
        "CREATE TABLE tn (k TEXT, v INTEGER)",
        "INSERT INTO tn VALUES ('1', 1), ('01', 2), ('abc', 3)",
        "CREATE TABLE sm (k SMALLINT PRIMARY KEY)",
        "INSERT INTO sm VALUES (1), (2)",
        "CREATE TABLE vc (k VARCHAR(2) PRIMARY KEY)",
        "INSERT INTO vc VALUES ('ab'), ('c')",
        "CREATE TABLE fl (id INTEGER PRIMARY KEY, f DOUBLE PRECISION)",
        "INSERT INTO fl VALUES (1, 0.0), (2, -0.0), (3, 1.5), (4, NULL)",
        "CREATE TABLE fk (f DOUBLE PRECISION PRIMARY KEY)",
        "INSERT INTO fk VALUES (0.0), (1.5), (2)",
        "CREATE TABLE d (id INTEGER PRIMARY KEY, dt DATE, tm TIMESTAMP)",
        "INSERT INTO d VALUES (1, '2024-01-01', '2024-01-01 00:00:00'), (2, '2024-01-02', '2024-01-02 10:00:00')",
        "CREATE TABLE nm (k NUMERIC(10,2) PRIMARY KEY)",
        "INSERT INTO nm VALUES (1.50), (2), (2.25)",
    ])
}

/// BUG: the index-lookup path (join.rs 317-327) casts the probe value to the
/// indexed column's type and looks up that one exact key, but the join's `=`
/// compares INTEGER/BIGINT or NUMERIC against DOUBLE PRECISION as doubles (as
/// PostgreSQL does), and several distinct column values map to one double.
/// The same queries without an index agree with PostgreSQL.
#[test]
fn lookup_of_a_double_probe_in_an_integer_or_numeric_index() {
    let pg = need_pg!();
    let setup = strs(&[
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER)",
        "INSERT INTO t VALUES (9007199254740993, 1)",
        "CREATE TABLE t_noidx (id BIGINT, v INTEGER)",
        "INSERT INTO t_noidx VALUES (9007199254740993, 1)",
        "CREATE TABLE u (x DOUBLE PRECISION)",
        "INSERT INTO u VALUES (9007199254740992)",
        "CREATE TABLE n (id NUMERIC PRIMARY KEY)",
        "INSERT INTO n VALUES (1.00000000000000001)",
        "CREATE TABLE n_noidx (id NUMERIC)",
        "INSERT INTO n_noidx VALUES (1.00000000000000001)",
        "CREATE TABLE f (x DOUBLE PRECISION)",
        "INSERT INTO f VALUES (1)",
    ]);
    let queries = strs(&[
        "SELECT t.v FROM u JOIN t ON t.id = u.x",                   // PG: 1 row, Tessera: 0
        "SELECT t_noidx.v FROM u JOIN t_noidx ON t_noidx.id = u.x", // agrees
        "SELECT count(*) FROM f JOIN n ON n.id = f.x",              // PG: 1, Tessera: 0
        "SELECT count(*) FROM f, n WHERE n.id = f.x",               // PG: 1, Tessera: 0
        "SELECT count(*) FROM f JOIN n_noidx ON n_noidx.id = f.x",  // agrees
    ]);
    let bad = diff(&pg, &setup, &queries);
    for b in &bad {
        eprintln!("{b}");
    }
    assert!(bad.is_empty(), "{} mismatches", bad.len());
}

/// BUG (Tessera-internal inconsistency; PostgreSQL rejects text = integer):
/// the lookup path finds different rows than the hash/nested-loop path for the
/// same join, because `cast(text → INTEGER)` rejects '1.0' and the reverse cast
/// (INTEGER → TEXT) finds only the canonical spelling '1' and not '01', while
/// `compare` coerces text to a number and calls all of them equal.
#[test]
fn lookup_and_scan_disagree_on_text_integer_keys() {
    let mk = |indexed: bool| {
        let pk = if indexed { " PRIMARY KEY" } else { "" };
        store(&strs(&[
            &format!("CREATE TABLE ts (k TEXT{pk}, v INTEGER)"),
            "INSERT INTO ts VALUES ('1', 1), ('01', 2), ('1.0', 3)",
            &format!("CREATE TABLE a (id INTEGER{pk})"),
            "INSERT INTO a VALUES (1), (2), (3), (4)",
        ]))
    };
    let (with_index, without) = (mk(true), mk(false));
    for q in ["SELECT count(*) FROM a JOIN ts ON ts.k = a.id", "SELECT count(*) FROM ts JOIN a ON a.id = ts.k"] {
        let (x, y) = (tessera(&with_index, q), tessera(&without, q));
        eprintln!("{q}\n  indexed: {x:?}\n  not indexed: {y:?}");
        assert_eq!(x, y, "{q}");
    }
}

/// Differences from PostgreSQL that come from build_from / value.rs rather
/// than from join.rs (the old in-order path behaves the same): text is
/// compared with numbers by converting it (PostgreSQL refuses `integer = text`).
#[test]
#[ignore = "known difference outside the join planner (text = integer); run with --ignored"]
fn differences_outside_the_planner() {
    let pg = need_pg!();
    let queries = strs(&[
        "SELECT count(*) FROM ts JOIN a ON a.id = ts.k",
        "SELECT count(*) FROM a JOIN ts ON ts.k = a.id",
        "SELECT count(*) FROM a JOIN tn ON tn.k = a.id",
        "SELECT count(*) FROM (SELECT '1.0'::text AS v) q JOIN a ON a.id = q.v",
    ]);
    let bad = diff(&pg, &fixture(), &queries);
    for b in &bad {
        eprintln!("{b}");
    }
    assert!(bad.is_empty(), "{} mismatches", bad.len());
}

/// Suspicions that turned out fine: unqualified names, USING with qualified
/// references, ON referencing later tables (an error in both), self joins,
/// empty and zero-column inputs, NULL keys, derived tables / CTEs / VALUES,
/// correlated subqueries, lookups with SMALLINT/VARCHAR/DATE/NUMERIC(p,s)
/// casts, LEFT joins mixed in, non-equi and OR join conditions.
#[test]
fn suspicions_that_agree_with_postgresql() {
    let pg = need_pg!();
    let queries = strs(&[
        "SELECT a.id, b.id FROM a JOIN b ON k = b.k",
        "SELECT a.id, b.id FROM a JOIN b ON a.k = b.k WHERE s = 'p'",
        "SELECT a.id, y FROM a, c WHERE a.k = c.k AND y > 1",
        "SELECT a.id, b.id FROM a JOIN b ON a.k = b.k JOIN c ON y = a.id",
        "SELECT a.id, b.id FROM a JOIN b USING (k)",
        "SELECT a.id, b.id, c.y FROM a JOIN b USING (k) JOIN c USING (k)",
        "SELECT count(*) FROM a JOIN b USING (k, x)",
        "SELECT a.id FROM a JOIN b ON a.k = c.k JOIN c ON b.k = c.k",
        "SELECT count(*) FROM a JOIN a ON a.id = a.id",
        // Fixed after review: USING columns are merged (one unqualified name, listed
        // first by SELECT *), a repeated table name is an error, -0.0 = 0.0.
        "SELECT k FROM a JOIN b USING (k)",
        "SELECT * FROM a JOIN c USING (k)",
        "SELECT * FROM a JOIN b USING (k, x)",
        "SELECT * FROM a LEFT JOIN c USING (k) ORDER BY a.id",
        "SELECT k, a.id, b.id, c.y FROM a JOIN b USING (k) JOIN c USING (k)",
        "SELECT * FROM a JOIN b USING (k) JOIN c USING (k)",
        "SELECT b.*, k FROM a JOIN b USING (k)",
        "SELECT count(*) FROM a JOIN b USING (k) WHERE k > 1",
        // An ON clause after comma items sees only its own comma element.
        "SELECT a.id, b.id, c.y FROM a, b JOIN c ON a.k = c.k",
        "SELECT b.id, c.y FROM a, b JOIN c ON x = c.y",
        "SELECT a.id, c.y FROM b, a JOIN c ON a.k = c.k WHERE b.id = a.id",
        "SELECT count(*) FROM a, b JOIN c ON k = c.k",
        "SELECT count(*) FROM a, b JOIN c ON b.k = c.k AND x > 1",
        "SELECT count(*) FROM a, b JOIN c ON b.k = c.k AND c.y IN (1, 2) AND b.x BETWEEN 0 AND 50",
        "SELECT count(*) FROM a, a",
        "SELECT f1.id, f2.id FROM fl f1 JOIN fl f2 ON f1.f = f2.f",
        "SELECT fl.id FROM fl JOIN fk ON fk.f = fl.f",
        "SELECT fl.id FROM fl, fk WHERE fk.f = fl.f AND fl.id > 0",
        "SELECT id FROM fl WHERE f = 0 ORDER BY id",
        "SELECT count(*) FROM fl GROUP BY f ORDER BY 1",
        "SELECT count(DISTINCT f) FROM fl",
        "SELECT x1.id, x2.id FROM a x1 JOIN a x2 ON x1.k = x2.k",
        "SELECT x1.id, x2.id FROM a x1 JOIN a x2 ON x1.id = x2.k JOIN a x3 ON x3.id = x2.id",
        "SELECT x1.id, x2.id FROM a x1, a x2, a x3 WHERE x1.id = x2.id AND x2.id = x3.id AND x3.k = x1.k",
        "SELECT count(*) FROM a, e",
        "SELECT count(*) FROM a JOIN e ON a.id = e.id",
        "SELECT count(*) FROM e JOIN a ON a.id = e.id JOIN b ON b.id = a.id",
        "SELECT count(*) FROM a, b, e WHERE a.id = b.id",
        "SELECT a.id, c.y FROM a JOIN c ON a.k = c.k",
        "SELECT a.id, c.y FROM a JOIN c ON a.id = c.id",
        "SELECT a.id, c.y FROM a JOIN c ON a.k IS NOT DISTINCT FROM c.k",
        "SELECT a.id, b.id FROM a, b WHERE a.k = b.k AND a.x = b.x",
        "SELECT q.id, b.id FROM (SELECT id, k FROM a WHERE id > 1) q JOIN b ON q.k = b.k",
        "WITH w AS (SELECT k, count(*) AS n FROM b GROUP BY k) SELECT a.id, w.n FROM a JOIN w ON w.k = a.k",
        "WITH w AS (SELECT k FROM b) SELECT count(*) FROM w w1 JOIN w w2 ON w1.k = w2.k JOIN a ON a.id = w1.k",
        "SELECT q.v, a.id FROM (VALUES (1), (2), (NULL)) q(v) JOIN a ON a.id = q.v",
        "SELECT q.v, a.id FROM (SELECT 1 AS v UNION ALL SELECT 2) q, a WHERE a.k = q.v",
        "SELECT count(*) FROM (SELECT 1.5 AS v UNION ALL SELECT 2) q JOIN a ON a.id = q.v",
        "SELECT count(*) FROM (SELECT 2.0 AS v) q JOIN a ON a.id = q.v",
        "SELECT count(*) FROM (SELECT 2.0 AS v) q JOIN nm ON nm.k = q.v",
        "SELECT count(*) FROM (SELECT 1.5 AS v UNION ALL SELECT 2.25) q JOIN nm ON nm.k = q.v",
        "SELECT count(*) FROM (SELECT 1.5::float8 AS v) q JOIN nm ON nm.k = q.v",
        "SELECT count(*) FROM (SELECT 2 AS v) q JOIN fk ON fk.f = q.v",
        "SELECT count(*) FROM (SELECT 1.5 AS v) q JOIN fk ON fk.f = q.v",
        "SELECT a.id, (SELECT count(*) FROM b JOIN c ON b.k = c.k WHERE c.y = a.id) FROM a",
        "SELECT a.id, (SELECT count(*) FROM b, c WHERE b.k = c.k AND b.id = a.k) FROM a",
        "SELECT a.id, (SELECT count(*) FROM b JOIN c ON b.k = c.k AND c.k = a.k) FROM a",
        "SELECT a.id, (SELECT count(*) FROM b JOIN c ON b.id = c.id WHERE x = a.x) FROM a",
        "SELECT a.id FROM a WHERE EXISTS (SELECT 1 FROM b JOIN c ON b.k = c.k WHERE b.id = a.id)",
        "SELECT a.id, (SELECT max(c.y) FROM b JOIN c ON c.k = a.k WHERE b.k = c.k) FROM a",
        "SELECT a.id, (SELECT count(*) FROM b JOIN c ON b.k = c.k WHERE a.k = b.id) FROM a",
        "SELECT a.id FROM a WHERE a.k IN (SELECT c.k FROM c JOIN b ON b.k = c.k)",
        "SELECT a.id, b.id FROM a JOIN b ON b.k = (SELECT max(k) FROM c WHERE c.id = a.id)",
        "SELECT count(*) FROM a JOIN sm ON sm.k = a.x",
        "SELECT count(*) FROM (SELECT 100000 AS v) q JOIN sm ON sm.k = q.v",
        "SELECT count(*) FROM (SELECT 'abc'::text AS v) q JOIN vc ON vc.k = q.v",
        "SELECT count(*) FROM a JOIN d ON d.id = a.id JOIN d d2 ON d2.dt = d.tm",
        "SELECT count(*) FROM d JOIN d d2 ON d2.tm = d.dt",
        "SELECT a.id FROM a JOIN fl ON fl.f = a.k",
        "SELECT a.id, b.id, c.y FROM a LEFT JOIN b ON a.k = b.k JOIN c ON c.k = a.k",
        "SELECT a.id, b.id, c.y FROM a JOIN c ON c.k = a.k LEFT JOIN b ON a.k = b.k AND b.x > 10",
        "SELECT count(*) FROM a CROSS JOIN b JOIN c ON a.k = c.k",
        "SELECT count(*) FROM a JOIN b ON true",
        "SELECT count(*) FROM a JOIN b ON a.id = b.id WHERE false",
        "SELECT count(*) FROM a, b WHERE a.id = b.id OR a.k = b.k",
        "SELECT count(*) FROM a JOIN b ON (a.id = b.id) AND (a.k = b.k OR b.k IS NULL)",
        "SELECT count(*) FROM a JOIN b ON a.id + 0 = b.id",
        "SELECT count(*) FROM a JOIN b ON a.id = b.id + 1 - 1",
        "SELECT count(*) FROM a JOIN b ON a.id = b.k AND a.id = b.id",
        "SELECT count(*) FROM a JOIN b ON a.k = b.k AND a.id = 1",
        "SELECT count(*) FROM a JOIN b ON a.k = b.k WHERE b.id = 1",
        "SELECT count(*) FROM a JOIN c ON a.id = c.k WHERE c.k = 2",
        "SELECT count(*) FROM a JOIN c ON a.id = c.k WHERE a.id = 2",
        "SELECT count(*) FROM (SELECT FROM a) z, b",
        "SELECT count(*) FROM b, (SELECT FROM a) z JOIN c ON c.k = 2",
        "SELECT count(*) FROM b JOIN (SELECT FROM a) z ON true JOIN c ON c.k = b.k",
        "SELECT a.id, (SELECT count(*) FROM b JOIN c ON c.k = a.k JOIN a ON a.id = b.id) FROM a",
        "SELECT count(*) FROM a JOIN b ON a.id = b.id WHERE 1 / (b.k - 2) > 0 AND b.k <> 2",
        "SELECT count(*) FROM a JOIN b ON a.id = b.id AND b.k <> 2 AND 1 / (b.k - 2) > 0",
        "SELECT count(*) FROM a JOIN b ON a.id = b.k WHERE a.x = 10",
        "SELECT count(*) FROM a JOIN b ON a.id = b.id JOIN c ON c.k = b.k AND 10 / c.y > 0",
    ]);
    let bad = diff(&pg, &fixture(), &queries);
    for b in &bad {
        eprintln!("{b}");
    }
    assert!(bad.is_empty(), "{} mismatches", bad.len());
}

// ---------------------------------------------------------------------------
// Random differential test with typed columns (INTEGER, BIGINT, DOUBLE, NUMERIC,
// TEXT), primary keys and secondary indexes (so the index-lookup path and its
// casts run), self joins, derived tables, CTEs and correlated subqueries.

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

const COLS: [&str; 5] = ["id", "a", "b", "d", "n"];

fn typed_case(seed: u64, tables: usize, max_rows: u64, queries: usize) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng(seed.max(1));
    let mut setup = Vec::new();
    for t in 0..tables {
        setup.push(format!("CREATE TABLE r{t} (id INTEGER PRIMARY KEY, a INTEGER, b BIGINT, d DOUBLE PRECISION, n NUMERIC, c TEXT)"));
        match rng.below(4) {
            0 => setup.push(format!("CREATE INDEX r{t}_a ON r{t} (a)")),
            1 => setup.push(format!("CREATE INDEX r{t}_d ON r{t} (d)")),
            2 => setup.push(format!("CREATE INDEX r{t}_n ON r{t} (n, a)")),
            _ => {}
        }
        let rows = rng.below(max_rows + 1); // may be empty
        let mut values = Vec::new();
        for i in 0..rows {
            let mut pick = |opts: &[&str]| {
                if rng.below(7) == 0 { "NULL".to_string() } else { opts[rng.below(opts.len() as u64) as usize].to_string() }
            };
            let a = pick(&["0", "1", "2", "3", "4"]);
            let b = pick(&["0", "1", "2", "3"]);
            let d = pick(&["0", "1", "1.5", "2", "3"]);
            let n = pick(&["0", "1.0", "1.50", "2", "3.00"]);
            let c = pick(&["'x0'", "'x1'", "'x2'"]);
            values.push(format!("({i}, {a}, {b}, {d}, {n}, {c})"));
        }
        if !values.is_empty() {
            setup.push(format!("INSERT INTO r{t} VALUES {}", values.join(", ")));
        }
    }
    let mut out = Vec::new();
    for _ in 0..queries {
        let k = 2 + rng.below(6) as usize;
        let alias = |i: usize| format!("q{i}");
        let mut items = Vec::new();
        let mut ctes = Vec::new();
        for i in 0..k {
            let t = rng.below(tables as u64); // with replacement: self joins
            items.push(match rng.below(6) {
                0 => format!("(SELECT * FROM r{t} WHERE c IS NOT NULL) {}", alias(i)),
                1 => {
                    ctes.push(format!("w{i} AS (SELECT id, a, b, d, n, c FROM r{t} WHERE id < 9)"));
                    format!("w{i} {}", alias(i))
                }
                _ => format!("r{t} {}", alias(i)),
            });
        }
        let mut joins = Vec::new();
        for i in 1..k {
            let j = rng.below(i as u64) as usize;
            let (x, y) = (COLS[rng.below(5) as usize], COLS[rng.below(5) as usize]);
            let mut p = format!("{}.{x} = {}.{y}", alias(i), alias(j));
            if rng.below(4) == 0 {
                let (x, y) = (COLS[rng.below(5) as usize], COLS[rng.below(5) as usize]);
                p.push_str(&format!(" AND {}.{x} = {}.{y}", alias(j), alias(i)));
            }
            joins.push(p);
        }
        let mut filters = Vec::new();
        for i in 0..k {
            match rng.below(7) {
                0 => filters.push(format!("{}.a IN ({}, {})", alias(i), rng.below(5), rng.below(5))),
                1 => filters.push(format!("{}.b BETWEEN 1 AND {}", alias(i), 1 + rng.below(3))),
                2 => filters.push(format!("{}.c IS NOT NULL", alias(i))),
                3 => filters.push(format!("({}.d < 2 OR {}.c = 'x1')", alias(i), alias(i))),
                4 => filters.push(format!("{}.id = {}", alias(i), rng.below(6))),
                _ => {}
            }
        }
        let explicit = rng.below(2) == 0;
        let from = if explicit {
            let mut f = items[0].clone();
            for i in 1..k {
                let kw = match rng.below(8) {
                    0 => "LEFT JOIN",
                    1 if i > 1 => "CROSS JOIN",
                    _ => "JOIN",
                };
                if kw == "CROSS JOIN" {
                    f.push_str(&format!(" CROSS JOIN {}", items[i]));
                    filters.push(joins[i - 1].clone());
                } else {
                    f.push_str(&format!(" {kw} {} ON {}", items[i], joins[i - 1]));
                }
            }
            f
        } else {
            filters.extend(joins.iter().cloned());
            items.join(", ")
        };
        let with = if ctes.is_empty() { String::new() } else { format!("WITH {} ", ctes.join(", ")) };
        let q = if rng.below(4) == 0 {
            // correlated: the whole join inside a scalar subquery
            let i = rng.below(k as u64) as usize;
            let mut f = filters.clone();
            f.push(format!("{}.{} = o.a", alias(i), COLS[rng.below(5) as usize]));
            format!("SELECT o.id, ({with}SELECT count(*) FROM {from} WHERE {}) FROM r{} o", f.join(" AND "), rng.below(tables as u64))
        } else {
            let cols: Vec<String> = (0..k).map(|i| format!("{}.id, {}.c", alias(i), alias(i))).collect();
            let mut q = format!("{with}SELECT {} FROM {from}", cols.join(", "));
            if !filters.is_empty() {
                q.push_str(&format!(" WHERE {}", filters.join(" AND ")));
            }
            q
        };
        out.push(q);
    }
    (setup, out)
}

#[test]
fn random_typed_joins_agree_with_postgresql() {
    let pg = need_pg!();
    let mut bad = Vec::new();
    let mut total = 0;
    for seed in 1..=40u64 {
        let (setup, queries) = typed_case(seed * 104_729, 6, 14, 40);
        total += queries.len();
        let b = diff(&pg, &setup, &queries);
        for m in &b {
            eprintln!("seed {seed}: {m}");
        }
        bad.extend(b);
    }
    eprintln!("{} mismatches of {total}", bad.len());
    assert!(bad.is_empty());
}
