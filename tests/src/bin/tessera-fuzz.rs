//! `tessera-fuzz`: runs each in-process fuzz target for a bounded time and
//! prints executions and crashes (see `tessera_tests::fuzz`). Crash inputs are
//! saved under `--out` (default `fuzz-crashes/`). Exit status 1 on any crash.
//!
//! ```text
//! tessera-fuzz [--seconds 60] [--seed 1] [--out DIR] [target …]   # targets: sql document_filter command_decode
//! tessera-fuzz sql-diff [--minutes N | --seconds N] [--seed 1]     # random joins, Tessera vs PostgreSQL
//! ```
//!
//! `sql-diff` generates random schemas, data and 2-to-20-table join queries,
//! runs them on the SQL engine and on a throwaway PostgreSQL (Debian's
//! `postgresql`), and prints the queries tried and every disagreement (exit
//! status 1 if any).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Parser;
use tessera_tests::fuzz;

/// Runs each in-process fuzz target for a bounded time.
#[derive(Parser)]
#[command(name = "tessera-fuzz", version)]
struct Args {
    /// Seconds to fuzz each target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory the crash inputs are saved in.
    #[arg(long, value_name = "DIR", default_value = "fuzz-crashes")]
    out: PathBuf,
    /// Minutes to run (`sql-diff`; overrides --seconds).
    #[arg(long)]
    minutes: Option<u64>,
    /// Targets to run (sql, document_filter, command_decode) [default: all], or
    /// `sql-diff` alone for the differential run against PostgreSQL.
    #[arg(value_name = "TARGET")]
    targets: Vec<String>,
}

fn main() {
    let args = Args::parse();
    match run(args) {
        Ok(crashed) => std::process::exit(i32::from(crashed)),
        Err(err) => {
            if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
                eprintln!("tessera-fuzz: {err:?}");
            } else {
                eprintln!("tessera-fuzz: {err:#}");
            }
            std::process::exit(1);
        }
    }
}

/// Returns whether any target crashed.
fn run(args: Args) -> Result<bool> {
    let Args { seconds, seed, out, minutes, targets: names } = args;
    if names.iter().any(|n| n == "sql-diff") {
        let limit = Duration::from_secs(minutes.map_or(seconds, |m| m * 60));
        return sql_diff(limit, seed);
    }
    let targets: Vec<_> = fuzz::targets::all().into_iter().filter(|t| names.is_empty() || names.iter().any(|n| n == t.name)).collect();
    if targets.is_empty() {
        bail!("no such target; targets: sql document_filter command_decode");
    }
    println!("{:<18} {:>12} {:>10} {:>9} {:>8}", "target", "executions", "execs/s", "corpus", "crashes");
    let mut crashed = false;
    for t in &targets {
        let r = fuzz::fuzz(t, Duration::from_secs(seconds), seed);
        let rate = r.executions as f64 / r.elapsed.as_secs_f64().max(1e-9);
        println!("{:<18} {:>12} {:>10.0} {:>9} {:>8}", r.target, r.executions, rate, r.corpus, r.crashes.len());
        for (path, c) in fuzz::save_crashes(&r, &out)?.iter().zip(&r.crashes) {
            crashed = true;
            println!("  crash saved to {}: {}", path.display(), c.message.lines().next().unwrap_or(""));
        }
    }
    Ok(crashed)
}

/// Random joins on the SQL engine and on PostgreSQL for `limit`; returns
/// whether any answer differed.
fn sql_diff(limit: Duration, seed: u64) -> Result<bool> {
    use tessera_sql::difftest::{Postgres, random_join_case, unaligned_rows};
    use tessera_sql::mem::MemStore;
    let Some(pg) = Postgres::start() else { bail!("PostgreSQL could not be started (apt-get install postgresql)") };
    let started = std::time::Instant::now();
    let (mut cases, mut queries, mut disagreements) = (0u64, 0u64, 0u64);
    while started.elapsed() < limit {
        let case_seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(cases + 1);
        let tables = 2 + (case_seed % 19) as usize;
        let (setup, qs) = random_join_case(case_seed, tables, 15, 40);
        let mut store = MemStore::new();
        for stmt in &setup {
            store.exec(stmt, &[]).map_err(|e| anyhow::anyhow!("{stmt}: {e}"))?;
        }
        for (q, want) in qs.iter().zip(pg.results(&setup, &qs)) {
            queries += 1;
            let got = tessera_sql::execute(&store, q, &[], &tessera_sql::ExecContext::default())
                .map(|o| unaligned_rows(&o.result))
                .map_err(|e| e.to_string());
            if got != want {
                disagreements += 1;
                println!(
                    "DISAGREEMENT (case seed {case_seed}): {q}\n  setup: {}\n  tessera:    {got:?}\n  postgresql: {want:?}",
                    setup.join("; ")
                );
            }
        }
        cases += 1;
    }
    println!("sql-diff: {cases} random schemas, {queries} join queries in {:.0?}; disagreements: {disagreements}", started.elapsed());
    Ok(disagreements > 0)
}
