//! `tessera-fuzz`: runs each in-process fuzz target for a bounded time and
//! prints executions and crashes (see `tessera_tests::fuzz`). Crash inputs are
//! saved under `--out` (default `fuzz-crashes/`). Exit status 1 on any crash.
//!
//! ```text
//! tessera-fuzz [--seconds 60] [--seed 1] [--out DIR] [target …]   # targets: sql document_filter command_decode
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use tessera_tests::fuzz;

fn main() -> Result<()> {
    let (mut seconds, mut seed, mut out, mut names) = (60u64, 1u64, PathBuf::from("fuzz-crashes"), Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--seconds" => seconds = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            "--out" => out = PathBuf::from(value()?),
            flag if flag.starts_with("--") => bail!("unknown flag {flag}"),
            name => names.push(name.to_string()),
        }
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
    if crashed {
        std::process::exit(1);
    }
    Ok(())
}
