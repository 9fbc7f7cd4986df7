//! `tessera-fuzz`: runs each in-process fuzz target for a bounded time and
//! prints executions and crashes (see `tessera_tests::fuzz`). Crash inputs are
//! saved under `--out` (default `fuzz-crashes/`). Exit status 1 on any crash.
//!
//! ```text
//! tessera-fuzz [--seconds 60] [--seed 1] [--out DIR] [target …]   # targets: sql document_filter command_decode
//! ```

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
    /// Targets to run (sql, document_filter, command_decode) [default: all].
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
    let Args { seconds, seed, out, targets: names } = args;
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
