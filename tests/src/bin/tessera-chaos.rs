//! `tessera-chaos`: runs the chaos suite against real binaries.
//!
//! ```text
//! cargo run -p tessera-tests --bin tessera-chaos              # quick profile
//! cargo run -p tessera-tests --bin tessera-chaos -- --long --minutes 120
//! ```
//! Options: `--long`, `--minutes N` (long profile, default 60), `--seed N`,
//! `--hold-secs N` (how long each fault lasts). Prints operations, faults
//! injected by kind, anomalies and lost writes; exits 1 on any anomaly (the
//! history is saved as JSON and its path printed), 2 if the run could not complete.

use std::time::Duration;

use tessera_tests::chaos::{self, Profile};

fn usage() -> ! {
    eprintln!("usage: tessera-chaos [--long] [--minutes N] [--seed N] [--hold-secs N]");
    std::process::exit(2);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut long, mut minutes, mut seed, mut hold) = (false, 60u64, chaos::clock_seed(), None);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                usage()
            })
        };
        match a.as_str() {
            "--long" => long = true,
            "--minutes" => minutes = num("--minutes"),
            "--seed" => seed = num("--seed"),
            "--hold-secs" => hold = Some(Duration::from_secs(num("--hold-secs"))),
            "-h" | "--help" => usage(),
            other => {
                eprintln!("unknown argument {other}");
                usage()
            }
        }
    }
    let mut profile = if long { Profile::long(Duration::from_secs(minutes * 60), seed) } else { Profile::quick(seed) };
    if let Some(h) = hold {
        profile.hold = h;
    }
    match chaos::run(&profile).await {
        Ok(report) => {
            println!("{report}");
            if !report.passed() {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("chaos run could not complete: {e:?}");
            std::process::exit(2);
        }
    }
}
