//! In-process fuzzing of the parts that take untrusted bytes: SQL text into the
//! engine, document filters, and the decoder of replicated commands and RPCs.
//!
//! The machine has only a stable toolchain, so `cargo fuzz` (libFuzzer with
//! sanitizer coverage, nightly only) cannot run here. Instead each target is a
//! libFuzzer-shaped `fn(&[u8])` driven by a mutation fuzzer: inputs start from a
//! seed corpus (real statements, filters and encoded commands) and are mutated
//! by bit flips, byte edits, range deletes and duplications, splices of two
//! inputs and dictionary tokens. Every execution runs under `catch_unwind`; a
//! panic is a crash, saved with its input. The targets can be moved under
//! `cargo fuzz` unchanged once a nightly toolchain is available.

mod mutate;
pub mod targets;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One fuzz target: a name, the function under test and its seed corpus.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens the mutator inserts (keywords, operators, JSON fragments).
    pub dictionary: &'static [&'static str],
}

/// A crash: the panic message and the input that caused it.
#[derive(Debug, Clone)]
pub struct Crash {
    pub message: String,
    pub input: Vec<u8>,
}

/// What one bounded run of a target did.
#[derive(Debug, Clone)]
pub struct Report {
    pub target: &'static str,
    pub executions: u64,
    pub elapsed: Duration,
    pub corpus: usize,
    /// Distinct crashes by panic message.
    pub crashes: Vec<Crash>,
}

/// Runs `target` for `budget` with a fixed `seed` (reproducible input sequence).
/// Inputs that reached new panic-free outcomes are not tracked (no coverage
/// feedback on stable); the corpus grows by keeping every 64th mutated input so
/// mutations compound.
pub fn fuzz(target: &Target, budget: Duration, seed: u64) -> Report {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut corpus = (target.seeds)();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let last_panic = Arc::new(Mutex::new(String::new()));
    let previous_hook = std::panic::take_hook();
    {
        let last_panic = last_panic.clone();
        std::panic::set_hook(Box::new(move |info| {
            let location = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            *last_panic.lock().unwrap_or_else(|p| p.into_inner()) = format!("{info}{location}");
        }));
    }
    let mut crashes: BTreeMap<String, Crash> = BTreeMap::new();
    let started = Instant::now();
    let mut executions = 0u64;
    // Every seed runs once unmutated first.
    let mut pending: Vec<Vec<u8>> = corpus.clone();
    while started.elapsed() < budget {
        let input = match pending.pop() {
            Some(i) => i,
            None => mutate::mutate(&mut rng, &corpus, target.dictionary),
        };
        executions += 1;
        if catch_unwind(AssertUnwindSafe(|| (target.run)(&input))).is_err() {
            let message = last_panic.lock().unwrap_or_else(|p| p.into_inner()).clone();
            crashes.entry(message.clone()).or_insert(Crash { message, input: input.clone() });
        } else if executions.is_multiple_of(64) && corpus.len() < 4096 && input.len() < 4096 {
            corpus.push(input);
        }
        if rng.gen_ratio(1, 100_000) {
            corpus.truncate((target.seeds)().len().max(1));
        }
    }
    std::panic::set_hook(previous_hook);
    Report { target: target.name, executions, elapsed: started.elapsed(), corpus: corpus.len(), crashes: crashes.into_values().collect() }
}

/// Writes each crash input of `report` under `dir` as `<target>-<n>.bin`.
pub fn save_crashes(report: &Report, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (n, c) in report.crashes.iter().enumerate() {
        let p = dir.join(format!("{}-{n}.bin", report.target));
        std::fs::write(&p, &c.input)?;
        std::fs::write(p.with_extension("txt"), &c.message)?;
        paths.push(p);
    }
    Ok(paths)
}
