//! Differential testing against PostgreSQL: a throwaway PostgreSQL cluster
//! ([`Postgres`]), a generator of random schemas, data and multi-way join
//! queries ([`random_join_case`]), and Tessera's rows in psql's unaligned
//! format ([`unaligned_rows`]) so the two answers compare as multisets. Used by
//! the engine's tests and by `tessera-fuzz sql-diff`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::QueryResult;

/// A throwaway PostgreSQL cluster on a temp dir, reached over a Unix socket.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether this process runs as root (`/proc/self` belongs to the effective user).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

impl Postgres {
    /// A started cluster, or `None` (with a visible SKIPPED line) when
    /// PostgreSQL is not installed; panics instead when `TESSERA_REQUIRE_POSTGRES`
    /// is set (as `deploy/test.sh` does).
    pub fn start_or_skip() -> Option<Postgres> {
        let pg = Postgres::start();
        if pg.is_none() {
            eprintln!("SKIPPED: PostgreSQL could not be started (deploy/test.sh installs Debian's postgresql)");
            assert!(
                std::env::var_os("TESSERA_REQUIRE_POSTGRES").is_none(),
                "TESSERA_REQUIRE_POSTGRES is set but PostgreSQL could not be started"
            );
        }
        pg
    }

    /// A started cluster, or `None` when PostgreSQL is not installed or does not start.
    pub fn start() -> Option<Postgres> {
        let bin =
            std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).find(|b| b.join("initdb").exists())?;
        let dir = std::env::temp_dir().join(format!("tessera-pg-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).ok()?;
        let pg = Postgres { dir, bin };
        let root = running_as_root();
        let as_pg = |cmd: &Path| -> Command {
            if root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(cmd);
                c
            } else {
                Command::new(cmd)
            }
        };
        if root {
            Command::new("chown").args(["-R", "postgres"]).arg(&pg.dir).status().ok()?;
        }
        let data = pg.dir.join("data");
        let ok = as_pg(&pg.bin.join("initdb")).args(["-A", "trust", "-U", "postgres", "-D"]).arg(&data).output().ok()?.status.success();
        if !ok {
            return None;
        }
        let opts = format!("-c listen_addresses='' -c unix_socket_directories={} -c fsync=off", pg.dir.display());
        let ok = as_pg(&pg.bin.join("pg_ctl"))
            .args(["-w", "-D"])
            .arg(&data)
            .args(["-o", &opts, "-l"])
            .arg(pg.dir.join("log"))
            .arg("start")
            .output()
            .ok()?
            .status
            .success();
        ok.then_some(pg)
    }

    /// Runs setup, then each query; returns per query Ok(sorted rows) or Err(message).
    pub fn results(&self, setup: &[String], queries: &[String]) -> Vec<Result<Vec<String>, String>> {
        let mut script = String::from("\\set ON_ERROR_STOP 1\nDROP SCHEMA public CASCADE; CREATE SCHEMA public;\n");
        for s in setup {
            script.push_str(s);
            script.push_str(";\n");
        }
        script.push_str("\\set ON_ERROR_STOP 0\n");
        for (i, q) in queries.iter().enumerate() {
            script.push_str(&format!("\\echo ===Q{i}\n{q};\n"));
        }
        script.push_str("\\echo ===END\n");
        let path = self.dir.join("script.sql");
        std::fs::write(&path, script).unwrap();
        let cmd = format!(
            "{} -X -q -A -t -F '|' -U postgres -h {} -d postgres -f {} 2>&1",
            self.bin.join("psql").display(),
            self.dir.display(),
            path.display()
        );
        let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut by: BTreeMap<usize, Result<Vec<String>, String>> = BTreeMap::new();
        let mut cur: Option<usize> = None;
        for line in text.lines() {
            if let Some(n) = line.strip_prefix("===Q") {
                cur = Some(n.parse().unwrap());
                by.insert(cur.unwrap(), Ok(vec![]));
            } else if line == "===END" {
                cur = None;
            } else if let Some(q) = cur {
                let e = by.get_mut(&q).unwrap();
                if line.starts_with("psql:") && line.contains("NOTICE:") {
                    continue;
                }
                if line.starts_with("psql:") && line.contains("ERROR:") {
                    *e = Err(line.to_string());
                } else if let Ok(v) = e {
                    v.push(line.to_string());
                }
            } else if line.contains("ERROR") {
                panic!("setup failed in PostgreSQL: {line}\n{text}");
            }
        }
        (0..queries.len())
            .map(|i| {
                let mut r = by.remove(&i).unwrap_or(Ok(vec![]));
                if let Ok(v) = &mut r {
                    v.sort();
                }
                r
            })
            .collect()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let mut c = if running_as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = c.args(["-m", "immediate", "-D"]).arg(&data).arg("stop").output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

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

/// Random tables (`tables` of them, at least 2, up to `max_rows` rows each,
/// small value domains so joins match, NULLs included) and random join queries
/// of 2 to `tables` tables over them (comma and explicit joins, equalities in
/// WHERE and ON, `IN`, `BETWEEN`, `OR`, `IS NOT NULL`): `(setup statements,
/// queries)`. With more than 6 tables the join columns' domains grow to the
/// row count, so an equality matches about one row and long joins stay small.
pub fn random_join_case(seed: u64, tables: usize, max_rows: u64, queries: usize) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng(seed.max(1));
    let (dom_a, dom_b) = if tables > 6 { (max_rows.max(6), max_rows.max(4)) } else { (6, 4) };
    let mut setup = Vec::new();
    for t in 0..tables {
        setup.push(format!("CREATE TABLE r{t} (a INTEGER, b INTEGER, c TEXT)"));
        let rows = 1 + rng.below(max_rows);
        let mut values = Vec::new();
        for _ in 0..rows {
            let mut v = |dom: u64| if rng.below(8) == 0 { "NULL".to_string() } else { rng.below(dom).to_string() };
            let (a, b) = (v(dom_a), v(dom_b));
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
                0 => preds.push(format!("{}.a IN ({}, {})", alias(i), rng.below(dom_a), rng.below(dom_a))),
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

/// Rows of a result in psql's unaligned format (`|` between fields, NULL
/// empty, booleans as t/f, whole doubles without a fraction), sorted.
pub fn unaligned_rows(result: &QueryResult) -> Vec<String> {
    let mut rows: Vec<String> = result
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
                    serde_json::Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && !n.is_i64()) => {
                        format!("{}", n.as_f64().unwrap_or_default() as i64)
                    }
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}
