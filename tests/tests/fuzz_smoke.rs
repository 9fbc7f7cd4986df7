//! The fuzz smoke CI runs: every in-process fuzz target for a few seconds with
//! a fixed seed; any panic fails with the saved input's path. Longer runs:
//! `cargo run --release -p tessera-tests --bin tessera-fuzz -- --seconds 600`.

use std::time::Duration;

use tessera_tests::fuzz;

#[test]
fn fuzz_smoke() {
    let seconds: u64 = std::env::var("TESSERA_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = std::env::temp_dir().join("tessera-fuzz-smoke");
    let mut failures = Vec::new();
    for target in fuzz::targets::all() {
        let report = fuzz::fuzz(&target, Duration::from_secs(seconds), 7);
        println!("{}: {} executions, {} crashes", report.target, report.executions, report.crashes.len());
        assert!(report.executions > 0, "{} never ran", report.target);
        for (path, crash) in fuzz::save_crashes(&report, &dir).expect("save crashes").iter().zip(&report.crashes) {
            failures.push(format!("{}: {} (input {})", report.target, crash.message, path.display()));
        }
    }
    assert!(failures.is_empty(), "fuzz crashes:\n{}", failures.join("\n"));
}
