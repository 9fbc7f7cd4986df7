//! The fault injector: each fault starts, lasts a while, and is undone before
//! the next one; every fault is recorded in the history and counted by kind.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;
use serde_json::json;

use super::Rng;
use super::cluster::{ChaosCluster, Peer};
use super::lazyfs::DiskFault;
use super::workloads::Workloads;
use crate::NODE_IDS;

/// Kinds of faults, as counted in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL the leader of a group, restart it after a while.
    KillLeader,
    /// SIGKILL a follower, restart it after a while.
    KillFollower,
    /// SIGSTOP a node, SIGCONT it after a while.
    PauseNode,
    /// Cut a group leader off from the other nodes (both ways).
    PartitionLeader,
    /// The leader's messages to the other nodes are lost; theirs still arrive.
    OneWayCut,
    /// Added latency on every link of a node.
    SlowLinks,
    /// The router cannot reach a group leader (both ways).
    RouterCut,
    /// SIGKILL the bank group's leader while transfers are in flight.
    CrashSqlCommit,
    /// SIGKILL a node while snapshots are built and logs purged every few entries.
    CrashLogPurge,
    /// SIGKILL a lagging node while it installs snapshots.
    CrashSnapshotInstall,
    /// Power cut on a group leader: SIGKILL, and its disk loses every write it
    /// did not fsync.
    PowerLoss,
    /// Power cut on every node at once.
    PowerLossAll,
    /// Power cut on every node, the node leading the most groups first and the
    /// others 30–150 ms later: that node's disk was slow to sync for a second
    /// before, so it loses entries its followers had synced and acknowledged
    /// (issue 35, defect 2's window). Every node restarts, the first one first.
    PowerLossLeaderFirst,
    /// The node leading the most groups loses power (its fsyncs slowed for a
    /// second before, so its disk is behind what its followers acknowledged)
    /// while both followers freeze (SIGSTOP: a hypervisor stall, a host under
    /// memory pressure). It restarts and takes writes for a while; then the
    /// followers wake up, still holding the entries it lost (issue 35,
    /// defect 2: a restarted leader must not reuse a (term, index) with other
    /// contents).
    PowerLossFollowersPaused,
    /// A node's disk is full (`ENOSPC` on writes) for a while; then the node
    /// is restarted, as an operator would after freeing space.
    DiskFull,
    /// A node's disk fails writes and fsyncs with `EIO` for a while; then the
    /// node is restarted.
    DiskEio,
    /// A group leader restarted with its wall clock 1–10 minutes ahead or
    /// behind (`SERVICE_TEST_CLOCK_OFFSET_MS`) for a while, then restarted
    /// with a right clock.
    ClockSkew,
    /// A node restarted with one of the storage layer's named crash points armed
    /// ([`CRASH_POINTS`]; `SERVICE_TEST_CRASH_POINTS`) kills itself there; it is
    /// then restarted plainly and must catch up.
    CrashPoint(usize),
    /// Membership: a new node is added (replicas move to it), drained
    /// (they move back) and removed, while the workloads run.
    Membership,
    /// The control plane under partitions: a new node is added and drained
    /// without waiting (the placement driver moves replicas on its own) while
    /// the meta group's leader is cut off both ways, then one way, then (during
    /// the drain) frozen, then cut off both ways again; a deposed meta leader's late steps must be
    /// refused (issue 35, defect 4). Then it waits for both to finish and
    /// removes the node.
    ControlPlane,
    /// A deposed placement driver wakes after its group moved on (issue 35,
    /// defect 4): a new node is added and frozen at once, so the meta leader's
    /// first move to it hangs on its first call; the meta leader is frozen
    /// right there, the others finish the addition under a new meta leader,
    /// the node is drained until that group's replica has moved back, and
    /// only then does the old meta leader wake in the middle of its stale
    /// move. Its calls must be refused; the run's final membership check
    /// finds any group whose Raft membership left the cluster map.
    StaleMove,
    /// The meta group's leader SIGKILLed in the middle of a range split: its
    /// links slowed (recording the split takes a while), writes spread over
    /// every range push ranges over the split threshold, and the leader is
    /// killed the moment it logs a split it has not recorded yet. The writes
    /// go on under the next leader; then every range must take writes again
    /// (issue 35, defect 1). Range sharding only.
    SplitKill,
}

/// The storage layer's crash points (`storage/src/crash_point.rs`, kept equal
/// to its `POINTS`): a snapshot build with its frames written, a purge written,
/// and an install after its pending record, after its ingest, after its
/// publish.
pub const CRASH_POINTS: [&str; 5] =
    ["snapshot-build", "log-purged", "snapshot-install-pending", "snapshot-install-ingested", "snapshot-install-published"];
const CRASH_POINT_FAULTS: [&str; 5] = [
    "crash-at-snapshot-build",
    "crash-at-log-purged",
    "crash-at-snapshot-install-pending",
    "crash-at-snapshot-install-ingested",
    "crash-at-snapshot-install-published",
];

impl Fault {
    /// Stable name used in reports and histories.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillLeader => "kill-leader",
            Fault::KillFollower => "kill-follower",
            Fault::PauseNode => "pause",
            Fault::PartitionLeader => "partition-leader",
            Fault::OneWayCut => "one-way-cut",
            Fault::SlowLinks => "slow-links",
            Fault::RouterCut => "router-cut",
            Fault::CrashSqlCommit => "crash-sql-commit",
            Fault::CrashLogPurge => "crash-log-purge",
            Fault::CrashSnapshotInstall => "crash-snapshot-install",
            Fault::PowerLoss => "power-loss",
            Fault::PowerLossAll => "power-loss-all",
            Fault::PowerLossLeaderFirst => "power-loss-leader-first",
            Fault::PowerLossFollowersPaused => "power-loss-followers-paused",
            Fault::DiskFull => "disk-full",
            Fault::DiskEio => "disk-eio",
            Fault::ClockSkew => "clock-skew",
            Fault::CrashPoint(i) => CRASH_POINT_FAULTS[i % CRASH_POINT_FAULTS.len()],
            Fault::Membership => "membership",
            Fault::ControlPlane => "control-plane",
            Fault::SplitKill => "split-kill",
            Fault::StaleMove => "stale-move",
        }
    }

    /// Every fault kind, in the quick profile's order.
    pub const ALL: [Fault; 24] = [
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::PauseNode,
        Fault::PartitionLeader,
        Fault::OneWayCut,
        Fault::SlowLinks,
        Fault::RouterCut,
        Fault::CrashSqlCommit,
        Fault::CrashLogPurge,
        Fault::CrashSnapshotInstall,
        Fault::ClockSkew,
        Fault::Membership,
        Fault::ControlPlane,
        Fault::CrashPoint(0),
        Fault::CrashPoint(1),
        Fault::CrashPoint(2),
        Fault::CrashPoint(3),
        Fault::CrashPoint(4),
        Fault::PowerLoss,
        Fault::DiskFull,
        Fault::DiskEio,
        Fault::PowerLossAll,
        Fault::PowerLossLeaderFirst,
        Fault::PowerLossFollowersPaused,
    ];

    /// What the control-plane profile draws from: the control plane's own
    /// work under partitions and kills (replica moves, additions, drains and,
    /// with its range sharding, splits), leaders cut off or killed, and power
    /// cuts of one node or all three.
    pub const CONTROL_PLANE: [Fault; 10] = [
        Fault::ControlPlane,
        Fault::StaleMove,
        Fault::Membership,
        Fault::PartitionLeader,
        Fault::OneWayCut,
        Fault::KillLeader,
        Fault::PowerLoss,
        Fault::PowerLossAll,
        Fault::PowerLossLeaderFirst,
        Fault::PowerLossFollowersPaused,
    ];

    /// The splits profile (issue 35, defect 1): splits interrupted by a meta
    /// leader's death, replicas moved to a fourth node and back, leaders killed.
    pub const SPLITS: [Fault; 4] = [Fault::SplitKill, Fault::SplitKill, Fault::Membership, Fault::KillLeader];

    /// The quick profile: every kind once but `kill-follower`.
    pub fn quick_sequence() -> Vec<Fault> {
        Fault::ALL.into_iter().filter(|f| *f != Fault::KillFollower).collect()
    }

    /// The kinds a long run draws from (it injects `crash-snapshot-install`
    /// every tenth time instead): every kind of the quick profile and
    /// `stale-move` (a few minutes each, so not in the quick profile).
    pub fn random_kinds() -> Vec<Fault> {
        Fault::ALL.into_iter().filter(|f| *f != Fault::CrashSnapshotInstall).chain([Fault::StaleMove]).collect()
    }

    /// Faults that need the power-loss filesystem under the data directories.
    pub fn needs_disks(self) -> bool {
        matches!(
            self,
            Fault::PowerLoss
                | Fault::PowerLossAll
                | Fault::PowerLossLeaderFirst
                | Fault::PowerLossFollowersPaused
                | Fault::DiskFull
                | Fault::DiskEio
        )
    }

    /// The fault named `name` (as in [`Fault::name`]).
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().chain([Fault::SplitKill, Fault::StaleMove]).find(|f| f.name() == name)
    }
}

/// Injects faults into a cluster while workloads run.
pub struct Nemesis {
    pub rng: Rng,
    /// How long a fault lasts.
    pub hold: Duration,
    /// Faults injected, by kind.
    pub counts: BTreeMap<&'static str, u64>,
    /// Details worth reporting (crash points: what was hit).
    pub notes: Vec<String>,
    /// What a fault found wrong by itself (e.g. a range that takes no writes
    /// after a split was interrupted); the run reports them as anomalies.
    pub anomalies: Vec<String>,
    /// A fault left the cluster unable to take the next ones (a node that
    /// cannot be drained): the run goes on to its final checks.
    pub stop: bool,
    ready_timeout: Duration,
}

impl Nemesis {
    pub fn new(rng: Rng, hold: Duration, ready_timeout: Duration) -> Nemesis {
        Nemesis { rng, hold, counts: BTreeMap::new(), notes: Vec::new(), anomalies: Vec::new(), stop: false, ready_timeout }
    }

    /// A group the workloads use (or the meta group).
    fn pick_group(&mut self, w: &Workloads) -> u64 {
        let mut groups: Vec<u64> = w.groups.lock().expect("groups").iter().copied().collect();
        groups.push(0);
        groups.push(w.bank_group.load(Ordering::Relaxed));
        groups[self.rng.below(groups.len() as u64) as usize]
    }

    /// The leader of `group` as the router sees it; a random node if unknown.
    async fn leader_of(&mut self, c: &ChaosCluster, group: u64) -> u64 {
        match c.leaders().await {
            Ok(m) if m.contains_key(&group) => m[&group],
            _ => NODE_IDS[self.rng.below(3) as usize],
        }
    }

    fn other_nodes(node: u64) -> Vec<u64> {
        NODE_IDS.iter().copied().filter(|n| *n != node).collect()
    }

    /// Injects one fault, holds it, undoes it, and waits until the cluster is
    /// ready again.
    pub async fn inject(&mut self, c: &mut ChaosCluster, w: &Workloads, fault: Fault) -> Result<()> {
        if fault.needs_disks()
            && let Err(why) = c.disks_available()
        {
            let note = format!("{} SKIPPED: FUSE is not available here ({why})", fault.name());
            eprintln!("[chaos] {note}");
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
            return Ok(());
        }
        let start = w.rec.now();
        let hold = self.hold;
        let group = self.pick_group(w);
        let leader = self.leader_of(c, group).await;
        let detail = match fault {
            Fault::KillLeader | Fault::KillFollower => {
                let node = if fault == Fault::KillLeader {
                    leader
                } else {
                    let others = Self::other_nodes(leader);
                    others[self.rng.below(2) as usize]
                };
                c.kill_node(node)?;
                tokio::time::sleep(hold / 2).await;
                c.start_node(node)?;
                format!("SIGKILL node {node} (leader of group {group}: {leader}), restarted after {:?}", hold / 2)
            }
            Fault::PauseNode => {
                let node = NODE_IDS[self.rng.below(3) as usize];
                c.pause_node(node)?;
                tokio::time::sleep(hold).await;
                c.resume_node(node)?;
                format!("SIGSTOP node {node} for {hold:?} (leader of group {group}: {leader})")
            }
            Fault::PartitionLeader => {
                for o in Self::other_nodes(leader) {
                    c.cut(Peer::Node(leader), Peer::Node(o), true);
                    c.cut(Peer::Node(o), Peer::Node(leader), true);
                }
                tokio::time::sleep(hold).await;
                c.heal_network();
                format!("partition {{{leader}}} | others (leader of group {group}) for {hold:?}")
            }
            Fault::OneWayCut => {
                for o in Self::other_nodes(leader) {
                    c.cut(Peer::Node(leader), Peer::Node(o), true);
                }
                tokio::time::sleep(hold).await;
                c.heal_network();
                format!("node {leader} (leader of group {group}) → others cut for {hold:?}")
            }
            Fault::SlowLinks => {
                let node = NODE_IDS[self.rng.below(3) as usize];
                let d = Duration::from_millis(50 + self.rng.below(250));
                for o in Self::other_nodes(node) {
                    c.delay(Peer::Node(node), Peer::Node(o), d);
                    c.delay(Peer::Node(o), Peer::Node(node), d);
                }
                c.delay(Peer::Router, Peer::Node(node), d);
                c.delay(Peer::Node(node), Peer::Router, d);
                tokio::time::sleep(hold).await;
                c.heal_network();
                format!("+{d:?} each way on every link of node {node} for {hold:?}")
            }
            Fault::RouterCut => {
                c.cut(Peer::Router, Peer::Node(leader), true);
                c.cut(Peer::Node(leader), Peer::Router, true);
                tokio::time::sleep(hold).await;
                c.heal_network();
                format!("router ↮ node {leader} (leader of group {group}) for {hold:?}")
            }
            Fault::CrashSqlCommit => self.crash_sql_commit(c, w).await?,
            Fault::CrashLogPurge => {
                let node = NODE_IDS[self.rng.below(3) as usize];
                tokio::time::sleep(Duration::from_millis(self.rng.below(2000))).await;
                c.kill_node(node)?;
                c.start_node(node)?;
                format!("SIGKILL node {node} under write load (snapshot + purge every few entries), restarted at once")
            }
            Fault::CrashSnapshotInstall => self.crash_snapshot_install(c, w).await?,
            Fault::CrashPoint(i) => self.crash_point(c, w, i % CRASH_POINTS.len()).await?,
            Fault::Membership => self.membership(c).await?,
            Fault::ControlPlane => self.control_plane(c).await?,
            Fault::SplitKill => self.split_kill(c, w).await?,
            Fault::StaleMove => self.stale_move(c).await?,
            Fault::ClockSkew => {
                let minutes = 1 + self.rng.below(10) as i64;
                let skew_ms = if self.rng.below(2) == 0 { minutes } else { -minutes } * 60_000;
                c.kill_node(leader)?;
                let skew = skew_ms.to_string();
                c.start_node_with(leader, &[("SERVICE_TEST_CLOCK_OFFSET_MS", skew.as_str())])?;
                tokio::time::sleep(hold).await;
                c.kill_node(leader)?;
                c.start_node(leader)?;
                let note = format!(
                    "node {leader} (leader of group {group}) ran with its clock {skew_ms:+} ms off for {hold:?}, then restarted with a right clock"
                );
                self.notes.push(note.clone());
                note
            }
            Fault::PowerLoss => {
                c.kill_node(leader)?;
                let cut = c.power_cut(leader)?;
                tokio::time::sleep(hold / 2).await;
                c.start_node(leader)?;
                let note = format!(
                    "power cut on node {leader} (leader of group {group}): {} unsynced bytes in {} files lost, restarted after {:?}",
                    cut.bytes,
                    cut.files,
                    hold / 2
                );
                self.notes.push(note.clone());
                note
            }
            Fault::PowerLossAll => {
                for n in NODE_IDS {
                    c.kill_node(n)?;
                }
                let mut lost = Vec::new();
                for n in NODE_IDS {
                    let cut = c.power_cut(n)?;
                    lost.push(format!("node {n}: {} bytes in {} files", cut.bytes, cut.files));
                }
                tokio::time::sleep(hold / 2).await;
                for n in NODE_IDS {
                    c.start_node(n)?;
                }
                let note = format!("power cut on every node (unsynced writes lost: {}), restarted after {:?}", lost.join(", "), hold / 2);
                self.notes.push(note.clone());
                note
            }
            Fault::PowerLossLeaderFirst => self.power_loss_leader_first(c).await?,
            Fault::PowerLossFollowersPaused => self.power_loss_followers_paused(c).await?,
            Fault::DiskFull | Fault::DiskEio => {
                let disk_fault = if fault == Fault::DiskFull { DiskFault::Full } else { DiskFault::Broken };
                c.set_disk_fault(leader, Some(disk_fault))?;
                tokio::time::sleep(hold).await;
                c.set_disk_fault(leader, None)?;
                let ended = match c.reap_if_exited(leader)? {
                    Some(status) => format!("the node stopped by itself ({status})"),
                    None => {
                        c.kill_node(leader)?;
                        "the node kept running; SIGKILLed".to_string()
                    }
                };
                c.start_node(leader)?;
                let note = format!("{disk_fault:?} disk on node {leader} (leader of group {group}) for {hold:?}: {ended}, then restarted");
                self.notes.push(note.clone());
                note
            }
        };
        w.rec.fault(fault.name(), detail.clone(), start);
        *self.counts.entry(fault.name()).or_insert(0) += 1;
        eprintln!("[chaos] {:>8.1}s {}: {detail}", start as f64 / 1e9, fault.name());
        c.heal_all(self.ready_timeout).await?;
        Ok(())
    }

    /// The node leading the most groups (a random one if none is known).
    async fn busiest_leader(&mut self, c: &ChaosCluster) -> (u64, usize) {
        let mut led: BTreeMap<u64, usize> = BTreeMap::new();
        for leader in c.leaders().await.unwrap_or_default().into_values() {
            *led.entry(leader).or_default() += 1;
        }
        match led.iter().max_by_key(|(_, n)| **n) {
            Some((id, n)) => (*id, *n),
            None => (NODE_IDS[self.rng.below(3) as usize], 0),
        }
    }

    /// See [`Fault::PowerLossFollowersPaused`]. The restarted node gets the
    /// hold to take writes alone; then its followers resume.
    async fn power_loss_followers_paused(&mut self, c: &mut ChaosCluster) -> Result<String> {
        let (first, led) = self.busiest_leader(c).await;
        c.set_disk_fault(first, Some(DiskFault::SlowSync))?;
        tokio::time::sleep(Duration::from_millis(500 + self.rng.below(1000))).await;
        c.kill_node(first)?;
        let followers = Self::other_nodes(first);
        for n in &followers {
            c.pause_node(*n)?;
        }
        let cut = c.power_cut(first)?;
        c.set_disk_fault(first, None)?;
        c.start_node(first)?;
        tokio::time::sleep(self.hold).await;
        for n in &followers {
            c.resume_node(*n)?;
        }
        let note = format!(
            "power cut on node {first} (leader of {led} groups, its fsyncs slowed; {} unsynced bytes in {} files lost) \
             while nodes {followers:?} were frozen; it restarted and ran alone for {:?}, then they resumed",
            cut.bytes, cut.files, self.hold
        );
        self.notes.push(note.clone());
        Ok(note)
    }

    /// Slows the syncs of the node leading the most groups for a second under
    /// load, cuts its power, then, 30–150 ms later (its followers have synced
    /// what it had sent them; none has timed out on it yet), the others';
    /// restarts that node first.
    async fn power_loss_leader_first(&mut self, c: &mut ChaosCluster) -> Result<String> {
        let (first, led) = self.busiest_leader(c).await;
        let gap = Duration::from_millis(30 + self.rng.below(120));
        c.set_disk_fault(first, Some(DiskFault::SlowSync))?;
        tokio::time::sleep(Duration::from_millis(500 + self.rng.below(1000))).await;
        c.kill_node(first)?;
        let cut = c.power_cut(first)?;
        c.set_disk_fault(first, None)?;
        let mut lost = vec![format!("node {first}: {} bytes in {} files", cut.bytes, cut.files)];
        tokio::time::sleep(gap).await;
        for n in Self::other_nodes(first) {
            c.kill_node(n)?;
            let cut = c.power_cut(n)?;
            lost.push(format!("node {n}: {} bytes in {} files", cut.bytes, cut.files));
        }
        tokio::time::sleep(self.hold / 2).await;
        c.start_node(first)?;
        for n in Self::other_nodes(first) {
            c.start_node(n)?;
        }
        let note = format!(
            "power cut on node {first} (leader of {led} groups, its fsyncs slowed), on the others {gap:?} later (unsynced writes lost: {}), restarted after {:?}",
            lost.join(", "),
            self.hold / 2
        );
        self.notes.push(note.clone());
        Ok(note)
    }

    async fn crash_sql_commit(&mut self, c: &mut ChaosCluster, w: &Workloads) -> Result<String> {
        let group = w.bank_group.load(Ordering::Relaxed);
        let leader = self.leader_of(c, group).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.transfers_in_flight.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let in_flight = w.transfers_in_flight.load(Ordering::SeqCst);
        c.kill_node(leader)?;
        tokio::time::sleep(self.hold / 2).await;
        c.start_node(leader)?;
        let note =
            format!("SIGKILL node {leader} (leader of the bank's group {group}) with {in_flight} multi-statement transfers in flight");
        self.notes.push(note.clone());
        Ok(note)
    }

    /// Kills a node, writes enough that every group snapshots and purges past
    /// it, slows its inbound links, restarts it, and SIGKILLs it as soon as its
    /// first snapshot install is logged (others still in transfer or install).
    async fn crash_snapshot_install(&mut self, c: &mut ChaosCluster, w: &Workloads) -> Result<String> {
        let meta_leader = self.leader_of(c, 0).await;
        let node = Self::other_nodes(meta_leader)[self.rng.below(2) as usize];
        c.kill_node(node)?;
        // Filler writes: enough entries per group to pass the snapshot threshold
        // several times over (the node env sets it low).
        let run = w.cfg.run.clone();
        let round = self.counts.get(Fault::CrashSnapshotInstall.name()).copied().unwrap_or(0);
        let filled = fill(c, &run, &round.to_string(), 0).await;
        let log = c.node_log(node);
        let offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        for o in Self::other_nodes(node) {
            c.delay(Peer::Node(o), Peer::Node(node), Duration::from_millis(300));
        }
        let bytes_before = c.bytes_into(node);
        c.start_node(node)?;
        let started = Instant::now();
        let mut installs_before_kill = 0;
        while started.elapsed() < Duration::from_secs(60) {
            installs_before_kill = count_after(&log, offset, "installed snapshot");
            if installs_before_kill > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c.kill_node(node)?;
        let delivered = c.bytes_into(node) - bytes_before;
        c.heal_network();
        let offset2 = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        c.start_node(node)?;
        // The restarted node must finish catching up (snapshot installs logged
        // after the second start, or plain replication if the first got far enough).
        let replica = c.http.replica(node).timeout(Duration::from_secs(10));
        let quorum = c.http.consistency("quorum").timeout(Duration::from_secs(10));
        let prefix = format!("fill/{run}/{round}/");
        crate::wait_for(Duration::from_secs(120), "the restarted node catches up on the filler keys", async || {
            let want = quorum.kv_count(&prefix).await?;
            let got = replica.kv_count(&prefix).await?;
            if got == want { Ok(Some(())) } else { Err(anyhow::anyhow!("node {node}: {got} of {want} filler keys")) }
        })
        .await?;
        let installs_after = count_after(&log, offset2, "installed snapshot");
        let note = format!(
            "node {node}: down while {filled} filler writes passed, restarted behind 300 ms links, SIGKILLed {:?} later \
             after {installs_before_kill} snapshot install(s) ({delivered} bytes delivered); after the next restart it \
             installed {installs_after} more and caught up",
            started.elapsed()
        );
        self.notes.push(note.clone());
        Ok(note)
    }
}

impl Nemesis {
    /// Restarts a follower of the meta group with crash point `CRASH_POINTS[i]`
    /// armed and drives it there: for the install points it was down while
    /// every group wrote past its snapshot threshold (so it is sent snapshots);
    /// for the others filler writes make every group snapshot and purge. When
    /// it has killed itself it is restarted plainly and must serve every filler
    /// key from its own state.
    /// Adds a new node (replicas and leaderships move to it), holds, drains it
    /// (they move back to the bootstrap nodes), removes it: each lifecycle call
    /// with `all`, so it answers once every member of every affected group
    /// applied the change.
    async fn membership(&mut self, c: &mut ChaosCluster) -> Result<String> {
        let (id, addr) = c.start_extra_node().await?;
        let admin = c.http.consistency("all").timeout(Duration::from_secs(180));
        let added = admin.post("/api/v1/admin/nodes", &serde_json::json!({"node_id": id, "address": addr})).await?.ensure_status(200)?;
        tokio::time::sleep(self.hold / 2).await;
        let drained = admin.post(&format!("/api/v1/admin/nodes/{id}/drain"), &serde_json::json!({})).await?.ensure_status(200)?;
        admin.delete(&format!("/api/v1/admin/nodes/{id}")).await?.ensure_status(200)?;
        c.forget_removed_node(id, Duration::from_secs(30)).await?;
        Ok(format!(
            "node {id} added ({} replicas moved to it), drained ({} moved away) and removed",
            added.json["replicas_moved"], drained.json["replicas_moved"]
        ))
    }

    async fn control_plane(&mut self, c: &mut ChaosCluster) -> Result<String> {
        let (id, addr) = c.start_extra_node().await?;
        let body = serde_json::json!({"node_id": id, "address": addr});
        let asked = c.http.consistency("one").timeout(Duration::from_secs(60));
        asked.post("/api/v1/admin/nodes", &body).await?.ensure_status(202)?;
        let mut steps = vec![self.cut_meta_leader(c, true).await, self.cut_meta_leader(c, false).await];
        // Back in one piece: the addition finishes (asking again waits for it).
        c.wait_ready(self.ready_timeout).await?;
        let admin = c.http.consistency("all").timeout(Duration::from_secs(240));
        let added = admin.post("/api/v1/admin/nodes", &body).await?.ensure_status(200)?;
        let drain = format!("/api/v1/admin/nodes/{id}/drain");
        let meta_leader = self.leader_of(c, 0).await;
        let log = c.node_log(meta_leader);
        let offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        asked.post(&drain, &serde_json::json!({})).await?.ensure_status(202)?;
        steps.push(self.pause_meta_leader_mid_move(c, meta_leader, &log, offset).await?);
        steps.push(self.cut_meta_leader(c, true).await);
        c.wait_ready(self.ready_timeout).await?;
        let drained = admin.post(&drain, &serde_json::json!({})).await?.ensure_status(200)?;
        admin.delete(&format!("/api/v1/admin/nodes/{id}")).await?.ensure_status(200)?;
        c.forget_removed_node(id, Duration::from_secs(30)).await?;
        let note = format!(
            "node {id} added ({} replicas moved) and drained ({} moved) by the placement driver while {}; removed",
            added.json["replicas_moved"],
            drained.json["replicas_moved"],
            steps.join(", then ")
        );
        self.notes.push(note.clone());
        Ok(note)
    }

    /// See [`Fault::StaleMove`]. The frozen move is the addition's first one
    /// from another node than the meta leader (the drain must be able to move
    /// that group back while the meta leader sleeps). Whether the drain moves
    /// it back before it needs the frozen node for another group depends on
    /// which groups the new node leads by then: the node waits at most 150 s.
    async fn stale_move(&mut self, c: &mut ChaosCluster) -> Result<String> {
        let mut meta_leader = self.leader_of(c, 0).await;
        if meta_leader == NODE_IDS[0] {
            // A fresh cluster's first move to a new node takes the lowest
            // group from the lowest node: let another node lead meta (the
            // leader stalls until the others elect one).
            c.pause_node(meta_leader)?;
            let moved = crate::wait_for(Duration::from_secs(30), "another meta leader", async || {
                let now = c.leaders().await?.get(&0).copied();
                Ok(now.filter(|l| *l != meta_leader))
            })
            .await;
            c.resume_node(meta_leader)?;
            c.wait_ready(self.ready_timeout).await?;
            if let Ok(leader) = moved {
                meta_leader = leader;
            }
        }
        let log = c.node_log(meta_leader);
        let mut read_to = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let (id, addr) = c.start_extra_node().await?;
        let body = serde_json::json!({"node_id": id, "address": addr});
        let asked = c.http.consistency("one").timeout(Duration::from_secs(60));
        // The addition is asked for while the meta leader's log is watched, so
        // its moves are seen as they start (within a few milliseconds).
        let addition = {
            let (asked, body) = (asked.clone(), body.clone());
            tokio::spawn(async move { asked.post("/api/v1/admin/nodes", &body).await })
        };
        let started = Instant::now();
        let mut seen = Vec::new();
        let mut frozen = None;
        while frozen.is_none() && started.elapsed() < Duration::from_secs(60) {
            for line in new_lines(&log, &mut read_to, "placement driver: moving a replica") {
                let line = without_colours(&line);
                let (Some(group), Some(from), Some(to)) = (log_field(&line, "group"), log_field(&line, "from"), log_field(&line, "to"))
                else {
                    continue;
                };
                if to != id {
                    continue;
                }
                if from != meta_leader {
                    c.pause_node(meta_leader)?;
                    frozen = Some((group, from));
                    break;
                }
                seen.push(format!("group {group} from node {from}"));
            }
            if frozen.is_none() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let posted = match addition.await {
            Ok(answer) => answer.and_then(|r| r.ensure_status(202)),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = posted {
            if frozen.is_some() {
                c.resume_node(meta_leader)?;
            }
            return Err(e);
        }
        let admin = c.http.consistency("quorum").timeout(Duration::from_secs(240));
        let what = match frozen {
            None => {
                admin.post("/api/v1/admin/nodes", &body).await?.ensure_status(200)?;
                format!("no stale move (meta leader {meta_leader} logged no move from another node in 60 s, only {seen:?})")
            }
            Some((group, from)) => {
                let woke = async {
                    admin.post("/api/v1/admin/nodes", &body).await?.ensure_status(200)?;
                    // The drain moves a group only once the draining node no
                    // longer leads it: the group is led by its third member
                    // (neither the new node nor the frozen one) first.
                    if let Some(third) = NODE_IDS.iter().copied().find(|n| *n != from && *n != meta_leader) {
                        let leader = serde_json::json!({"node_id": third});
                        admin.put(&format!("/api/v1/admin/groups/{group}/leader"), &leader).await?.ensure_status(200)?;
                    }
                    asked.post(&format!("/api/v1/admin/nodes/{id}/drain"), &serde_json::json!({})).await?.ensure_status(202)?;
                    let back = crate::wait_for(Duration::from_secs(150), "the frozen move's group back on its first node", async || {
                        let cluster = c.http.get("/api/v1/admin/cluster").await?.ensure_status(200)?;
                        let members: Vec<u64> = cluster.json["groups"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .find(|g| g["id"].as_u64() == Some(group))
                            .and_then(|g| g["members"].as_array())
                            .map(|m| m.iter().filter_map(serde_json::Value::as_u64).collect())
                            .unwrap_or_default();
                        anyhow::ensure!(members.contains(&from) && !members.contains(&id), "group {group}: members {members:?}");
                        Ok(Some(()))
                    })
                    .await;
                    anyhow::Ok(back.is_ok())
                }
                .await;
                c.resume_node(meta_leader)?;
                // Its stale step runs now (and must be refused).
                tokio::time::sleep(self.hold).await;
                let clear = serde_json::json!({"node_id": null});
                let _ = asked.put(&format!("/api/v1/admin/groups/{group}/leader"), &clear).await;
                let back = match woke {
                    Ok(true) => format!("group {group} had moved back to node {from}"),
                    Ok(false) => format!("group {group} had not moved back to node {from} in 150 s"),
                    Err(e) => format!("the addition or drain failed meanwhile: {e:#}"),
                };
                format!(
                    "meta leader {meta_leader} frozen in its move of group {group} from node {from} to node {id}; woke after the addition finished and {back}"
                )
            }
        };
        c.wait_ready(self.ready_timeout).await?;
        let all = c.http.consistency("all").timeout(Duration::from_secs(240));
        let drained = async {
            all.post(&format!("/api/v1/admin/nodes/{id}/drain"), &serde_json::json!({})).await?.ensure_status(200)?;
            all.delete(&format!("/api/v1/admin/nodes/{id}")).await?.ensure_status(200)
        }
        .await;
        if let Err(e) = drained {
            // A stale step that took effect leaves the drain unable to finish
            // (a group's Raft voters are no longer the map's): report it and
            // leave the node in place for the run's final checks.
            let anomaly = format!("stale-move: {what}; the drain and removal of node {id} then failed: {e:#}");
            self.anomalies.push(anomaly.clone());
            self.notes.push(anomaly.clone());
            self.stop = true;
            return Ok(anomaly);
        }
        c.forget_removed_node(id, Duration::from_secs(30)).await?;
        let note = format!("node {id} added and drained: {what}; removed");
        self.notes.push(note.clone());
        Ok(note)
    }

    /// Freezes the meta group's leader (SIGSTOP) the moment its placement
    /// driver logs that it starts a replica move (or after 20 s), for a hold:
    /// long enough for the others to elect a new leader that resumes the
    /// recorded move and goes on. Then it wakes up in the middle of its step
    /// with its old view of the map (the classic paused lock holder; issue 35,
    /// defect 4: its late calls must be refused).
    async fn pause_meta_leader_mid_move(
        &mut self,
        c: &mut ChaosCluster,
        leader: u64,
        log: &std::path::Path,
        offset: u64,
    ) -> Result<String> {
        let started = Instant::now();
        let mut moving = false;
        while started.elapsed() < Duration::from_secs(20) {
            if count_after(log, offset, "placement driver: moving a replica") > 0 {
                moving = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c.pause_node(leader)?;
        tokio::time::sleep(self.hold).await;
        c.resume_node(leader)?;
        let when = if moving { "as it started a replica move" } else { "(no move logged in 20 s)" };
        Ok(format!("meta leader {leader} frozen (SIGSTOP) {when} for {:?}", self.hold))
    }

    /// Cuts the meta group's leader off from the other bootstrap nodes (both
    /// ways, or only what it sends) for a hold, then heals.
    async fn cut_meta_leader(&mut self, c: &ChaosCluster, both_ways: bool) -> String {
        let leader = self.leader_of(c, 0).await;
        for o in Self::other_nodes(leader) {
            c.cut(Peer::Node(leader), Peer::Node(o), true);
            if both_ways {
                c.cut(Peer::Node(o), Peer::Node(leader), true);
            }
        }
        tokio::time::sleep(self.hold).await;
        c.heal_network();
        let how = if both_ways { "both ways" } else { "one way (its messages lost)" };
        format!("meta leader {leader} cut off {how} for {:?}", self.hold)
    }

    async fn crash_point(&mut self, c: &mut ChaosCluster, w: &Workloads, i: usize) -> Result<String> {
        let point = CRASH_POINTS[i];
        let meta_leader = self.leader_of(c, 0).await;
        let node = Self::other_nodes(meta_leader)[self.rng.below(2) as usize];
        let round = format!("cp{}-{}", i, self.counts.get(Fault::CrashPoint(i).name()).copied().unwrap_or(0));
        let install = point.starts_with("snapshot-install");
        if install {
            c.kill_node(node)?;
            fill(c, &w.cfg.run, &round, 0).await;
        }
        if c.node_state(node) != super::cluster::NodeState::Killed {
            c.kill_node(node)?;
        }
        let armed = format!("{point}@1");
        c.start_node_with(node, &[("SERVICE_TEST_CRASH_POINTS", armed.as_str())])?;
        let started = Instant::now();
        let mut batch = 1;
        let ended = loop {
            if let Some(status) = c.reap_if_exited(node)? {
                break Some(status);
            }
            if started.elapsed() > Duration::from_secs(90) {
                break None;
            }
            if install {
                tokio::time::sleep(Duration::from_millis(20)).await;
            } else {
                // Writes until the node reaches the point (every group snapshots
                // and purges every ~100 entries).
                fill_some(c, &w.cfg.run, &round, batch, 8, 20).await;
                batch += 1;
            }
        };
        let reached = match &ended {
            Some(status) => format!("killed itself at {point} after {:?} ({status})", started.elapsed()),
            None => {
                c.kill_node(node)?;
                format!("did not reach {point} in 90 s; SIGKILLed")
            }
        };
        c.start_node(node)?;
        let replica = c.http.replica(node).timeout(Duration::from_secs(10));
        let quorum = c.http.consistency("quorum").timeout(Duration::from_secs(10));
        let prefix = format!("fill/{}/{round}/", w.cfg.run);
        crate::wait_for(Duration::from_secs(120), "the restarted node catches up on the filler keys", async || {
            let want = quorum.kv_count(&prefix).await?;
            let got = replica.kv_count(&prefix).await?;
            if got == want { Ok(Some(())) } else { Err(anyhow::anyhow!("node {node}: {got} of {want} filler keys")) }
        })
        .await?;
        let note = format!("node {node} restarted with {point} armed: {reached}; restarted plainly, it caught up");
        self.notes.push(note.clone());
        Ok(note)
    }
}

/// The key count ranges split at in the splits profile ([`super::FAST_SPLIT_ENV`]).
const SPLIT_KILL_THRESHOLD: usize = 600;

impl Nemesis {
    /// See [`Fault::SplitKill`].
    async fn split_kill(&mut self, c: &mut ChaosCluster, w: &Workloads) -> Result<String> {
        let round = format!("sk{}", self.counts.get(Fault::SplitKill.name()).copied().unwrap_or(0));
        let leader = self.leader_of(c, 0).await;
        let log = c.node_log(leader);
        let offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        for o in Self::other_nodes(leader) {
            c.delay(Peer::Node(leader), Peer::Node(o), SPLIT_KILL_DELAY);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let writers: Vec<_> = (0..8)
            .map(|t| {
                let (http, stop, written) = (c.http.timeout(Duration::from_secs(10)), stop.clone(), written.clone());
                let prefix = format!("{}-{round}-{t}", w.cfg.run);
                tokio::spawn(spread_writes(http, prefix, t, stop, written))
            })
            .collect();
        let started = Instant::now();
        let split_line = loop {
            if let Some(line) = first_line_after(&log, offset, "split a key-value range") {
                break Some(line);
            }
            if started.elapsed() > Duration::from_secs(120) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let killed = split_line.is_some();
        if killed {
            c.kill_node(leader)?;
        }
        c.heal_network();
        // The writes go on while the next leader takes over: other ranges cross the threshold.
        tokio::time::sleep(self.hold).await;
        if killed {
            c.start_node(leader)?;
        }
        tokio::time::sleep(self.hold / 2).await;
        stop.store(true, Ordering::SeqCst);
        for h in writers {
            let _ = h.await;
        }
        c.heal_all(self.ready_timeout).await?;
        // Every range takes writes again: a sample of the keys written, spread over the key space.
        let keys = std::mem::take(&mut *written.lock().expect("written"));
        let sample: Vec<String> = keys.iter().step_by((keys.len() / 300).max(1)).cloned().collect();
        let http = c.http.timeout(Duration::from_secs(10));
        // Written 32 at a time, and only the keys still refused are tried again: a refused key
        // costs the router's whole retry budget, so one at a time a stuck range would take hours
        // to report.
        let mut pending = sample.clone();
        let stuck = crate::wait_for(Duration::from_secs(90), "every sampled key takes a write again", async || {
            let answers: Vec<(String, Option<String>)> = futures::stream::iter(pending.clone())
                .map(|key| {
                    let http = &http;
                    async move {
                        let refusal = match http.kv_put(&key, json!("again"), None).await {
                            Ok(r) if r.status == 200 => None,
                            Ok(r) => Some(format!("{key}: {}", r.status)),
                            Err(e) => Some(format!("{key}: {e}")),
                        };
                        (key, refusal)
                    }
                })
                .buffer_unordered(32)
                .collect()
                .await;
            let refused: Vec<String> = answers.iter().filter_map(|(_, r)| r.clone()).collect();
            pending = answers.into_iter().filter(|(_, r)| r.is_some()).map(|(k, _)| k).collect();
            if refused.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow::anyhow!("{} of {} keys refused: {:?}", refused.len(), sample.len(), &refused[..refused.len().min(5)]))
            }
        })
        .await;
        let mut outcome = match &stuck {
            Ok(()) => format!("all {} sampled keys take writes again", sample.len()),
            Err(e) => {
                let anomaly = format!("split-kill ({round}): keys that took writes before no longer do: {e:#}");
                self.anomalies.push(anomaly.clone());
                anomaly
            }
        };
        // Splits go on: within two minutes no range holds more than three times the
        // split threshold of this round's keys alone (a splitter stuck on a refused
        // split leaves its range growing, and every range after it unsplit).
        let mut sorted = keys.clone();
        sorted.sort();
        let crowded = crate::wait_for(Duration::from_secs(120), "no range far over the split threshold", async || {
            let cluster = c.http.get("/api/v1/admin/cluster").await?;
            let ranges = cluster.json["sharding"]["ranges"].as_array().cloned().unwrap_or_default();
            let fullest = ranges
                .iter()
                .map(|r| {
                    let (start, end) = (r["start"].as_str().unwrap_or(""), r["end"].as_str());
                    let from = sorted.partition_point(|k| k.as_str() < start);
                    let to = end.map_or(sorted.len(), |end| sorted.partition_point(|k| k.as_str() < end));
                    (to.saturating_sub(from), r["group"].clone())
                })
                .max_by_key(|(n, _)| *n);
            match fullest {
                Some((n, group)) if n > 3 * SPLIT_KILL_THRESHOLD => {
                    Err(anyhow::anyhow!("group {group}'s range holds {n} of this round's keys ({} ranges in all)", ranges.len()))
                }
                _ => Ok(Some(ranges.len())),
            }
        })
        .await;
        match crowded {
            Ok(ranges) => outcome.push_str(&format!("; splits go on ({ranges} ranges)")),
            Err(e) => {
                let anomaly = format!("split-kill ({round}): ranges stopped splitting: {e:#}");
                self.anomalies.push(anomaly.clone());
                outcome.push_str(&format!("; {anomaly}"));
            }
        }
        let note = match split_line {
            Some(line) => format!(
                "meta leader {leader} SIGKILLed {:?} after its links were slowed by {SPLIT_KILL_DELAY:?}, right after it logged a split ({}); {} keys spread over the ranges; {outcome}",
                started.elapsed(),
                without_colours(line.trim()).chars().rev().take(160).collect::<String>().chars().rev().collect::<String>(),
                keys.len()
            ),
            None => {
                format!("meta leader {leader} logged no split in 120 s (not killed); {} keys spread over the ranges; {outcome}", keys.len())
            }
        };
        self.notes.push(note.clone());
        Ok(note)
    }
}

/// What `split-kill` adds to the meta leader's outbound links: the window
/// between a split and its record grows by at least this much (the kill lands
/// a few milliseconds after the log line), while the groups it also leads
/// still take writes at a useful rate.
const SPLIT_KILL_DELAY: Duration = Duration::from_millis(60);

/// Writes filler keys `split/<prefix>/<random>` until `stop` (uniformly
/// random, so as the `split/` ranges split, every one of them keeps growing
/// and several are over the threshold at once); the acknowledged keys go to
/// `written`. Their own namespace keeps them out of the set and register
/// workloads' checks.
async fn spread_writes(http: crate::Http, prefix: String, seed: u64, stop: Arc<AtomicBool>, written: Arc<std::sync::Mutex<Vec<String>>>) {
    let mut rng = super::Rng::new(seed ^ 0x5B11_7000);
    while !stop.load(Ordering::SeqCst) {
        let key = format!("split/{:016x}/{prefix}", rng.next_u64());
        if let Ok(r) = http.kv_put(&key, json!("split-kill filler"), None).await
            && r.status == 200
        {
            written.lock().expect("written").push(key);
        }
    }
}

/// `text` without its ANSI colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The first line containing `needle` after byte `offset` of `path`.
fn first_line_after(path: &std::path::Path, offset: u64, needle: &str) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    String::from_utf8_lossy(&bytes).lines().find(|l| l.contains(needle)).map(str::to_string)
}

/// 960 filler writes of 2 KiB under `fill/<run>/<round>/<batch>/`: enough
/// entries for every group to pass its snapshot threshold several times.
async fn fill(c: &ChaosCluster, run: &str, round: &str, batch: u64) -> u64 {
    fill_some(c, run, round, batch, 8, 120).await
}

/// `tasks` × `per_task` filler writes; how many were acknowledged.
async fn fill_some(c: &ChaosCluster, run: &str, round: &str, batch: u64, tasks: u64, per_task: u64) -> u64 {
    let http = c.http.timeout(Duration::from_secs(10));
    let value = "x".repeat(2048);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (http, value) = (http.clone(), value.clone());
        let prefix = format!("fill/{run}/{round}/{batch}/{t}");
        handles.push(tokio::spawn(async move {
            let mut ok = 0u64;
            for i in 0..per_task {
                if let Ok(r) = http.kv_put(&format!("{prefix}/{i}"), json!(value), None).await
                    && r.status == 200
                {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut filled = 0;
    for h in handles {
        filled += h.await.unwrap_or(0);
    }
    filled
}

/// The complete lines containing `needle` written to `path` since byte
/// `*read_to`, which moves past them (a line still being written is left for
/// the next call).
fn new_lines(path: &std::path::Path, read_to: &mut u64, needle: &str) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(*read_to)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else { return Vec::new() };
    *read_to += end as u64 + 1;
    String::from_utf8_lossy(&bytes[..end]).lines().filter(|l| l.contains(needle)).map(str::to_string).collect()
}

/// The number a log line gives for field `name` (`name=12`).
fn log_field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    let digits: String = line[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Lines containing `needle` after byte `offset` of `path`.
fn count_after(path: &std::path::Path, offset: u64, needle: &str) -> usize {
    let Ok(bytes) = std::fs::read(path) else { return 0 };
    let start = (offset as usize).min(bytes.len());
    String::from_utf8_lossy(&bytes[start..]).lines().filter(|l| l.contains(needle)).count()
}
