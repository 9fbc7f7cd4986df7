//! Scenario: the quick chaos profile. Three nodes and a router with every link
//! behind a controllable proxy; register, set and bank workloads run while the
//! nemesis kills a leader, pauses a node, partitions a leader, cuts one way,
//! slows links, cuts the router off a leader, hits the crash points (SQL
//! commit, log purge, snapshot install), adds, drains and removes a new node,
//! and, with each data directory on the
//! power-loss filesystem (`chaos::lazyfs`), cuts the power of a leader and of
//! every node at once and fails a disk (full, EIO). Where FUSE is not
//! available those faults are skipped and the run says so. Then everything heals and the
//! checkers run: linearizability per register key, no lost acknowledged add,
//! the bank total invariant in every read, replicas that agree.
//!
//! On an anomaly the test fails naming it and the saved history file.

use tessera_tests::chaos::{self, Profile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_quick() {
    let seed = std::env::var("TESSERA_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(chaos::clock_seed);
    let report = match chaos::run(&Profile::quick(seed)).await {
        Ok(r) => r,
        Err(e) => panic!("chaos run could not complete: {e:?}"),
    };
    eprintln!("{report}");
    assert!(report.total_operations() > 0, "no operations ran");
    assert!(
        report.passed(),
        "chaos found {} anomalies (seed {}); history saved to {}:\n{}",
        report.checks.anomalies.len(),
        report.seed,
        report.history_path.as_ref().map_or("<not saved>".into(), |p| p.display().to_string()),
        report.checks.anomalies.join("\n")
    );
}
