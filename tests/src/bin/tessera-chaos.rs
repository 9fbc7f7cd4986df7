//! `tessera-chaos`: runs the chaos suite against real binaries.
//!
//! ```text
//! cargo run -p tessera-tests --bin tessera-chaos              # quick profile
//! cargo run -p tessera-tests --bin tessera-chaos -- --long --minutes 120
//! cargo run -p tessera-tests --bin tessera-chaos -- --control-plane --minutes 30 [--unsynced]
//! cargo run -p tessera-tests --bin tessera-chaos -- --splits --minutes 20
//! ```
//! Options: `--long`, `--minutes N` (long profile, default 60), `--seed N`,
//! `--hold-secs N` (how long each fault lasts), `--fault NAME` (quick profile: only
//! this fault; repeat the flag for a sequence). Prints operations, faults
//! injected by kind, anomalies and lost writes; exits 1 on any anomaly (the
//! history is saved as JSON and its path printed), 2 if the run could not complete.

use std::time::Duration;

use clap::Parser;
use tessera_tests::chaos::nemesis::Fault;
use tessera_tests::chaos::{self, Profile};

/// Runs the chaos suite against real binaries.
#[derive(Parser)]
#[command(name = "tessera-chaos", version)]
struct Args {
    /// Run the long profile instead of the quick one.
    #[arg(long)]
    long: bool,
    /// Length of the long profile in minutes (only with --long).
    #[arg(long, value_name = "N", default_value_t = 60)]
    minutes: u64,
    /// Random seed [default: derived from the clock].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// How long each fault lasts, in seconds [default: the profile's].
    #[arg(long, value_name = "N")]
    hold_secs: Option<u64>,
    /// Quick profile: inject only this fault (repeat the flag for a sequence,
    /// e.g. `--fault crash-snapshot-install --fault crash-snapshot-install`).
    #[arg(long, value_name = "NAME", value_parser = parse_fault)]
    fault: Vec<Fault>,
    /// Long profile: the control-plane nemesis — range sharding whose ranges
    /// keep splitting, and faults drawn from replica moves, additions and
    /// drains under meta-leader partitions, leader kills and power cuts.
    #[arg(long)]
    control_plane: bool,
    /// Long profile: the splits nemesis — ranges split at a low threshold,
    /// the meta leader killed in the middle of splits, replicas moved to a
    /// fourth node and back, leaders killed.
    #[arg(long)]
    splits: bool,
    /// Range sharding with a low split threshold (any profile).
    #[arg(long)]
    range_splits: bool,
    /// Nodes run with storage.sync_on_commit = false (lost acknowledged
    /// writes after a whole-cluster power cut are then tolerated, forks not).
    #[arg(long)]
    unsynced: bool,
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    Fault::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Fault::ALL.iter().chain(&[Fault::SplitKill]).map(|f| f.name()).collect();
        format!("unknown fault {name:?}; one of: {}", names.join(", "))
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(chaos::clock_seed);
    let duration = Duration::from_secs(args.minutes * 60);
    let mut profile = if args.control_plane {
        Profile::control_plane(duration, seed)
    } else if args.splits {
        Profile::splits(duration, seed)
    } else if args.long {
        Profile::long(duration, seed)
    } else {
        Profile::quick(seed)
    };
    profile.faults = args.fault;
    profile.range_splits |= args.range_splits;
    profile.unsynced |= args.unsynced;
    if let Some(h) = args.hold_secs {
        profile.hold = Duration::from_secs(h);
    }
    match chaos::run(&profile).await {
        Ok(report) => {
            println!("{report}");
            if !report.passed() {
                std::process::exit(1);
            }
        }
        Err(e) => {
            // Exit status 2, not 1: 1 means the run completed and found anomalies.
            if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
                eprintln!("tessera-chaos: run could not complete: {e:?}");
            } else {
                eprintln!("tessera-chaos: run could not complete: {e:#}");
            }
            std::process::exit(2);
        }
    }
}
