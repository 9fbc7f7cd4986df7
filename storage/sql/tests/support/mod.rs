//! PostgreSQL as the SQL engine's differential-testing peer: a throwaway
//! cluster per test, scripts run through `psql` in unaligned mode (`|` between
//! fields, NULL as an empty field).
use std::collections::BTreeMap;
use std::process::Command;

/// A throwaway PostgreSQL cluster on a temp dir, reached over a Unix socket.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

impl Postgres {
    /// A started cluster, or `None` (with a visible SKIPPED line) when
    /// PostgreSQL is not installed; panics instead when `TESSERA_REQUIRE_POSTGRES`
    /// is set (as `deploy/test.sh` does).
    pub fn start_or_skip() -> Option<Postgres> {
        let pg = Postgres::start();
        if pg.is_none() {
            eprintln!("SKIPPED: PostgreSQL could not be started (deploy/test.sh installs Debian's postgresql)");
            assert!(std::env::var_os("TESSERA_REQUIRE_POSTGRES").is_none(), "TESSERA_REQUIRE_POSTGRES is set but PostgreSQL could not be started");
        }
        pg
    }

    fn start() -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).find(|b| b.join("initdb").exists())?;
        let dir = tempfile::tempdir().ok()?;
        let root = unsafe { libc_geteuid() } == 0;
        let as_pg = |cmd: &std::path::Path| -> Command {
            if root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(cmd);
                c
            } else {
                Command::new(cmd)
            }
        };
        if root {
            Command::new("chown").args(["-R", "postgres"]).arg(dir.path()).status().ok()?;
        }
        let data = dir.path().join("data");
        let ok = as_pg(&bin.join("initdb")).args(["-A", "trust", "-U", "postgres", "-D"]).arg(&data).output().ok()?.status.success();
        if !ok {
            return None;
        }
        let opts = format!("-c listen_addresses='' -c unix_socket_directories={} -c fsync=off", dir.path().display());
        let ok = as_pg(&bin.join("pg_ctl")).args(["-w", "-D"]).arg(&data).args(["-o", &opts, "-l"]).arg(dir.path().join("log")).arg("start").output().ok()?.status.success();
        ok.then_some(Postgres { dir, bin })
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
        let path = self.dir.path().join("script.sql");
        std::fs::write(&path, script).unwrap();
        let cmd = format!(
            "{} -X -q -A -t -F '|' -U postgres -h {} -d postgres -f {} 2>&1",
            self.bin.join("psql").display(),
            self.dir.path().display(),
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
        let data = self.dir.path().join("data");
        let mut c = if unsafe { libc_geteuid() } == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = c.args(["-m", "immediate", "-D"]).arg(&data).arg("stop").output();
    }
}
