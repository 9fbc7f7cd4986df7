//! The chaos suite: real `tessera-node`s and a `tessera-router` on loopback,
//! every link through a controllable TCP [`proxy`], a [`nemesis`] that kills,
//! pauses, partitions, cuts, slows and cuts power or fails disks ([`lazyfs`]),
//! [`workloads`] that record a [`history`],
//! and checkers (a [`linearizability`] search for registers, lost-write and
//! bank-invariant checks, and the replicas' [`convergence`]). [`run`] drives one profile; see `docs/chaos.md`.

pub mod cluster;
pub mod convergence;
pub mod history;
pub mod lazyfs;
pub mod linearizability;
pub mod nemesis;
pub mod proxy;
pub mod workloads;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use self::cluster::ChaosCluster;
use self::history::{Outcome, Recorder};
use self::nemesis::{Fault, Nemesis};
use self::workloads::{CheckReport, WorkloadConfig, Workloads};

/// A small xorshift PRNG (runs are reproducible from the printed seed as far
/// as the scheduling of real processes allows).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Which run to do.
#[derive(Clone, Debug)]
pub struct Profile {
    /// `false`: the quick profile (one of each fault, then every crash point once).
    pub long: bool,
    /// Long profile only: how long to inject random faults.
    pub duration: Duration,
    /// How long each fault lasts.
    pub hold: Duration,
    pub seed: u64,
    /// Quick profile only: inject these faults in this order instead of the
    /// standard sequence (to reproduce one fault kind again and again).
    pub faults: Vec<Fault>,
    /// Long profile only: draw faults from these kinds (empty: every kind,
    /// with `crash-snapshot-install` every tenth fault).
    pub kinds: Vec<Fault>,
    /// Range sharding with a low split threshold, so key-value ranges split
    /// again and again under the workloads while the nemesis runs.
    pub range_splits: bool,
    /// With `range_splits`: split at [`FAST_SPLIT_ENV`]'s lower threshold.
    pub fast_splits: bool,
    /// Nodes run with `storage.sync_on_commit = false`: after a whole-cluster
    /// power cut, lost acknowledged writes are tolerated (the contract allows
    /// them) but forks, phantom or doubled writes and broken invariants are not.
    pub unsynced: bool,
}

impl Profile {
    /// The CI profile: every fault kind once, then the crash points.
    pub fn quick(seed: u64) -> Profile {
        Profile {
            long: false,
            duration: Duration::ZERO,
            hold: Duration::from_secs(5),
            seed,
            faults: Vec::new(),
            kinds: Vec::new(),
            range_splits: false,
            fast_splits: false,
            unsynced: false,
        }
    }

    /// Random faults for `duration`, crash points interleaved.
    pub fn long(duration: Duration, seed: u64) -> Profile {
        Profile { long: true, duration, hold: Duration::from_secs(8), ..Profile::quick(seed) }
    }

    /// The control-plane profile (issue 35): random faults from
    /// [`Fault::CONTROL_PLANE`] for `duration` on a range-sharded cluster whose
    /// ranges keep splitting, so splits, replica moves, additions and drains,
    /// meta-leader partitions and whole-cluster power cuts overlap.
    pub fn control_plane(duration: Duration, seed: u64) -> Profile {
        Profile { kinds: Fault::CONTROL_PLANE.to_vec(), range_splits: true, ..Profile::long(duration, seed) }
    }

    /// The splits profile (issue 35, defect 1): random faults from
    /// [`Fault::SPLITS`] (mostly `split-kill`) for `duration`, on a
    /// range-sharded cluster whose ranges split at [`FAST_SPLIT_ENV`]'s
    /// threshold, so several ranges are often over it at once.
    pub fn splits(duration: Duration, seed: u64) -> Profile {
        Profile { kinds: Fault::SPLITS.to_vec(), range_splits: true, fast_splits: true, ..Profile::long(duration, seed) }
    }

    /// Node settings on top of [`NODE_ENV`].
    pub fn node_env(&self) -> Vec<(&'static str, &'static str)> {
        let mut env = NODE_ENV.to_vec();
        if self.range_splits {
            env.extend(RANGE_SPLIT_ENV);
            if self.fast_splits {
                env.extend(FAST_SPLIT_ENV);
            }
        }
        if self.unsynced {
            env.push(("SERVICE_SYNC_ON_COMMIT", "false"));
        }
        env
    }
}

/// Range sharding whose ranges split at 4 000 keys, checked every 2 s (the set
/// workload adds ~100 keys a second in a release build: a split every 20–40 s,
/// some 50–90 groups after 30 minutes).
pub const RANGE_SPLIT_ENV: [(&str, &str); 3] =
    [("SERVICE_SHARDING_STRATEGY", "range"), ("SERVICE_SPLIT_THRESHOLD_KEYS", "4000"), ("SERVICE_SPLIT_CHECK_INTERVAL_SECS", "2")];

/// The splits profile's thresholds (set after [`RANGE_SPLIT_ENV`], so they
/// win): 600 keys, checked every second.
pub const FAST_SPLIT_ENV: [(&str, &str); 2] = [("SERVICE_SPLIT_THRESHOLD_KEYS", "600"), ("SERVICE_SPLIT_CHECK_INTERVAL_SECS", "1")];

/// A seed from the clock.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub elapsed: Duration,
    /// Operations by workload and outcome (`ok`/`fail`/`info`).
    pub operations: BTreeMap<String, BTreeMap<&'static str, u64>>,
    pub faults: BTreeMap<&'static str, u64>,
    pub fault_notes: Vec<String>,
    pub checks: CheckReport,
    /// How the cluster ran (sharding, sync_on_commit).
    pub mode: String,
    /// Key-value ranges at the end (range sharding only).
    pub ranges: Option<usize>,
    /// The saved history, when there were anomalies.
    pub history_path: Option<PathBuf>,
    pub cluster_dir: PathBuf,
}

impl Report {
    /// Total client operations.
    pub fn total_operations(&self) -> u64 {
        self.operations.values().flat_map(|m| m.values()).sum()
    }

    /// `true` when no anomaly was found.
    pub fn passed(&self) -> bool {
        self.checks.anomalies.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "chaos run: seed {}, {:.0?}, {}", self.seed, self.elapsed, self.mode)?;
        if let Some(n) = self.ranges {
            writeln!(f, "key-value ranges at the end: {n}")?;
        }
        writeln!(f, "operations: {}", self.total_operations())?;
        for (w, m) in &self.operations {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(f, "  {w:<9} {}", parts.join(", "))?;
        }
        writeln!(f, "faults injected: {}", self.faults.values().sum::<u64>())?;
        for (k, v) in &self.faults {
            writeln!(f, "  {k:<23} {v}")?;
        }
        for n in &self.fault_notes {
            writeln!(f, "  · {n}")?;
        }
        let c = &self.checks;
        writeln!(f, "register: {} keys, {} operations checked for linearizability", c.register_keys, c.register_ops_checked)?;
        writeln!(f, "set: {} adds acknowledged, {} present at the end", c.set_acked, c.set_present)?;
        writeln!(
            f,
            "bank: {} balance reads checked; {} transfers checked against {} ledger rows",
            c.bank_reads, c.bank_transfers_checked, c.bank_ledger_rows
        )?;
        writeln!(f, "lost writes: {}", c.lost_writes)?;
        if c.loss_tolerated {
            writeln!(f, "lost writes allowed by sync_on_commit = false: {}", c.lost_writes_tolerated)?;
        }
        for n in &c.notes {
            writeln!(f, "  note: {n}")?;
        }
        writeln!(f, "anomalies: {}", c.anomalies.len())?;
        for a in &c.anomalies {
            writeln!(f, "  ! {a}")?;
        }
        if let Some(p) = &self.history_path {
            writeln!(f, "history saved to {}", p.display())?;
        }
        Ok(())
    }
}

/// Snapshot and purge thresholds low enough that every group snapshots and
/// purges its log many times during a run.
pub const NODE_ENV: [(&str, &str); 2] = [("SERVICE_RAFT_SNAPSHOT_LOGS", "100"), ("SERVICE_RAFT_KEEP_LOGS", "10")];

/// Runs a profile end to end: start, workloads under faults, heal, check.
/// Anomalies are in the report (and the history is saved); `Err` means the run
/// itself could not proceed (the cluster did not start or never recovered).
pub async fn run(profile: &Profile) -> Result<Report> {
    let started = Instant::now();
    let ready = Duration::from_secs(std::env::var("TESSERA_TEST_READY_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(120));
    eprintln!("[chaos] seed {} ({})", profile.seed, if profile.long { "long" } else { "quick" });
    let node_env = profile.node_env();
    let mut c = ChaosCluster::start(&node_env, ready).await?;
    let result = drive(&mut c, profile, ready).await;
    let (rec, mut report) = match result {
        Ok(x) => x,
        Err(e) => {
            c.keep();
            save_cluster_state(&mut c).await;
            return Err(e.context(format!("chaos run failed; cluster dir {}", c.root().display())));
        }
    };
    report.seed = profile.seed;
    report.elapsed = started.elapsed();
    report.cluster_dir = c.root().to_path_buf();
    if !report.passed() {
        let path = c.save_json("history.json", &rec.to_json())?;
        report.history_path = Some(path);
    }
    Ok(report)
}

/// When a run stops on a failed step (a stalled addition, say), what the
/// cluster looked like then: the router's view of every group (leader, term,
/// members) and every replica's applied index and digest, saved beside the logs
/// as `cluster-at-failure.json` and `consistency-at-failure.json`.
async fn save_cluster_state(c: &mut ChaosCluster) {
    let http = c.http.timeout(Duration::from_secs(20));
    for (path, name) in [("/api/v1/admin/cluster", "cluster-at-failure.json"), ("/api/v1/admin/consistency", "consistency-at-failure.json")]
    {
        match http.get(path).await {
            Ok(r) => {
                let body = serde_json::json!({"status": r.status, "body": r.json});
                if let Err(e) = c.save_json(name, &body) {
                    eprintln!("[chaos] saving {name}: {e:#}");
                }
            }
            Err(e) => eprintln!("[chaos] GET {path} after the failure: {e:#}"),
        }
    }
}

async fn drive(c: &mut ChaosCluster, profile: &Profile, ready: Duration) -> Result<(Arc<Recorder>, Report)> {
    let rec = Arc::new(Recorder::default());
    let bank_group = workloads::setup_bank(&c.http).await.context("setting up the bank")?;
    let run_id = format!("{:x}", profile.seed & 0xffff_ffff);
    let cfg = WorkloadConfig {
        run: run_id.clone(),
        register_clients: 4,
        register_keys: 3,
        register_epoch: if profile.long { Duration::from_secs(300) } else { Duration::from_secs(3600) },
        set_clients: 2,
        bank_transfer_clients: 2,
        bank_read_clients: 1,
    };
    let mut w = Workloads::start(&c.http, cfg, rec.clone(), profile.seed, bank_group);
    let mut nemesis = Nemesis::new(Rng::new(profile.seed ^ 0xC4A0_5EED), profile.hold, ready);

    // Let the workloads get going before the first fault.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let quiet = Duration::from_secs(2);
    let injected: Result<()> = async {
        if profile.long {
            let end = Instant::now() + profile.duration;
            let mut n = 0u64;
            while Instant::now() < end {
                n += 1;
                let fault = if !profile.kinds.is_empty() {
                    profile.kinds[nemesis.rng.below(profile.kinds.len() as u64) as usize]
                } else if n.is_multiple_of(10) {
                    Fault::CrashSnapshotInstall
                } else {
                    let kinds = Fault::random_kinds();
                    kinds[nemesis.rng.below(kinds.len() as u64) as usize]
                };
                nemesis.inject(c, &w, fault).await?;
                if nemesis.stop {
                    break;
                }
                tokio::time::sleep(quiet).await;
            }
        } else if !profile.faults.is_empty() {
            for &fault in &profile.faults {
                nemesis.inject(c, &w, fault).await?;
                if nemesis.stop {
                    break;
                }
                tokio::time::sleep(quiet).await;
            }
        } else {
            for fault in Fault::quick_sequence() {
                nemesis.inject(c, &w, fault).await?;
                if nemesis.stop {
                    break;
                }
                tokio::time::sleep(quiet).await;
            }
        }
        Ok(())
    }
    .await;
    injected?;

    // Healed: every workload must make progress again.
    c.heal_all(ready).await?;
    let healed_at = rec.now();
    let progress = crate::wait_for(Duration::from_secs(60), "every workload acknowledges operations after healing", async || {
        let acked = w.acked_since(healed_at);
        if ["register", "set", "bank"].iter().all(|k| acked.get(k).copied().unwrap_or(0) >= 3) {
            Ok(Some(()))
        } else {
            Err(anyhow::anyhow!("acknowledged since healing: {acked:?}"))
        }
    })
    .await;
    w.stop().await?;

    let mut checks = CheckReport {
        loss_tolerated: profile.unsynced
            && (nemesis.counts.contains_key(Fault::PowerLossAll.name()) || nemesis.counts.contains_key(Fault::PowerLossLeaderFirst.name())),
        ..CheckReport::default()
    };
    if let Err(e) = progress {
        checks.anomalies.push(format!("no progress after healing: {e:#}"));
    }
    checks.anomalies.extend(nemesis.anomalies.iter().cloned());
    // A check that cannot read what it checks is a finding, not the end of the
    // run: the replica comparison below still runs. (With sync_on_commit = false
    // a whole-cluster power cut may take even the setup, e.g. the bank's table,
    // if no sync came between: then it is noted, as the loss is allowed.)
    let unreadable = |what: &str, e: anyhow::Error, checks: &mut CheckReport| {
        let finding = format!("{what} could not be checked: {e:#}");
        if checks.loss_tolerated { checks.notes.push(finding) } else { checks.anomalies.push(finding) }
    };
    if let Err(e) = workloads::final_register_reads(&c.http, &rec).await {
        unreadable("registers", e, &mut checks);
    }
    workloads::check_registers(&rec, &mut checks);
    if let Err(e) = workloads::check_set(&c.http, &rec, &run_id, &mut checks).await {
        unreadable("the set", e, &mut checks);
    }
    if let Err(e) = workloads::check_bank(&c.http, &rec, &mut checks).await {
        unreadable("the bank", e, &mut checks);
    }
    let mut offline_check = false;
    // Every replica of every group must end at one applied index with the same data.
    // (Binaries older than the check answer 404: say so rather than judge.)
    if c.http.get("/api/v1/admin/consistency").await?.status == 404 {
        offline_check = true;
    } else if let Err(e) = convergence::assert_converged(&c.http, Duration::from_secs(60)).await {
        checks.anomalies.push(format!("replicas: {e:#}"));
    } else if let Err(e) = convergence::assert_memberships_agree(&c.http, Duration::from_secs(60)).await {
        checks.anomalies.push(format!("memberships: {e:#}"));
    }

    let mut operations: BTreeMap<String, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for o in rec.ops() {
        let outcome = match o.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        };
        *operations.entry(format!("{}/{}", o.workload, o.kind)).or_default().entry(outcome).or_insert(0) += 1;
    }
    let ranges = if profile.range_splits {
        let cluster = c.http.get("/api/v1/admin/cluster").await?;
        cluster.json["sharding"]["ranges"].as_array().map(Vec::len)
    } else {
        None
    };
    if offline_check {
        match std::env::var_os("TESSERA_CHECK_BIN_DIR") {
            Some(dir) => {
                // Followers apply what their leaders committed last before the nodes stop.
                tokio::time::sleep(Duration::from_secs(10)).await;
                let cluster = c.http.get("/api/v1/admin/cluster").await?;
                let map_members: BTreeMap<u64, Vec<u64>> = cluster.json["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| {
                        let members = g["members"].as_array()?.iter().filter_map(serde_json::Value::as_u64).collect();
                        Some((g["id"].as_u64()?, members))
                    })
                    .collect();
                let (diverged, notes) = convergence::offline_divergences(c, std::path::Path::new(&dir), &map_members)?;
                checks.anomalies.extend(diverged.into_iter().map(|d| format!("replicas: {d}")));
                checks.notes.extend(notes);
            }
            None => checks.notes.push(
                "replicas not compared: the binaries under test have no consistency check (404); \
             TESSERA_CHECK_BIN_DIR=<a build with `tessera-node digest`> compares them offline"
                    .into(),
            ),
        }
    }
    let mode =
        format!("{} sharding, sync_on_commit = {}", if profile.range_splits { "range (splitting)" } else { "hash" }, !profile.unsynced);
    let report = Report {
        mode,
        ranges,
        operations,
        faults: nemesis.counts.clone(),
        fault_notes: nemesis.notes.clone(),
        checks,
        ..Report::default()
    };
    Ok((rec, report))
}
