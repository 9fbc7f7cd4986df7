//! Scenarios: every node loses power right after a write was acknowledged, and the
//! leader restarts. Needs the power-loss filesystem (FUSE): skipped where it is
//! not available, a failure where `TESSERA_REQUIRE_FUSE=1` (as in CI).

use std::time::Duration;

use serde_json::json;
use tessera_tests::NODE_IDS;
use tessera_tests::chaos::cluster::ChaosCluster;

/// Whether the scenario can run (with `TESSERA_REQUIRE_FUSE=1` the cluster does
/// not start without FUSE).
fn power_loss_available(cluster: &ChaosCluster) -> bool {
    match cluster.disks_available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED: no power-loss filesystem here ({why})");
            false
        }
    }
}

/// A quorum read straight after a whole-cluster power cut returns the last
/// acknowledged value, never an older one, even while every replica's state
/// machine is held back 1.5 s per apply after the restart
/// (`SERVICE_TEST_APPLY_DELAY_MS`), so a read that does not wait for the log is
/// caught every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_restored_after_a_power_cut_reads_every_acknowledged_write() {
    const KEY: &str = "restored-leader/register";
    let mut cluster = ChaosCluster::start(&[], Duration::from_secs(90)).await.expect("cluster starts");
    if !power_loss_available(&cluster) {
        return;
    }
    let http = cluster.http.consistency("quorum");

    let mut leader = None;
    let last = 12;
    for value in 1..=last {
        let r = http.kv_put(KEY, json!(value), None).await.expect("put");
        assert!(r.status == 200 || r.status == 201, "put {value}: {r}");
        leader = r.served_by();
    }
    let leader = leader.expect("the write names the node that served it");

    for n in NODE_IDS {
        cluster.kill_node(n).expect("kill");
    }
    for n in NODE_IDS {
        let cut = cluster.power_cut(n).expect("power cut");
        eprintln!("node {n}: {} unsynced bytes in {} files lost", cut.bytes, cut.files);
    }
    for n in NODE_IDS {
        cluster.start_node_with(n, &[("SERVICE_TEST_APPLY_DELAY_MS", "1500")]).expect("restart");
    }
    cluster.wait_ready(Duration::from_secs(90)).await.expect("ready again");

    let r = http.timeout(Duration::from_secs(30)).kv_get(KEY).await.expect("get");
    assert_eq!(r.status, 200, "read after the restart: {r}");
    assert_eq!(
        r.json["value"],
        json!(last),
        "a quorum read after the power cut returned an older value than the last acknowledged write \
         (leader before the cut: node {leader}, served by: {:?})",
        r.served_by()
    );
}

/// Issue 35, defect 2. With `storage.sync_on_commit = false` nothing but votes,
/// truncations and purges is synced, so a power cut of the leader alone loses
/// the last entries of its log while its followers (whose processes merely
/// crash) keep them: the writes were acknowledged by the followers' quorum. The
/// restarted leader's synced vote is a committed vote for itself; openraft 0.9
/// resumed that leadership at once, in the same term and without a blank entry,
/// so its next entries took the lost ones' (term, index) with other contents, the
/// followers kept theirs because the ids matched, and reads served the value from
/// before the lost writes. It must campaign for a new term instead, which only a
/// replica holding them can win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_lost_its_log_tail_in_a_power_cut_does_not_lead_its_old_term_again() {
    const KEY: &str = "lagging-leader/register";
    let mut cluster = ChaosCluster::start(&[("SERVICE_SYNC_ON_COMMIT", "false")], Duration::from_secs(90)).await.expect("cluster starts");
    if !power_loss_available(&cluster) {
        return;
    }
    let http = cluster.http.consistency("quorum");
    let last = 8;
    let mut leader = None;
    for value in 1..=last {
        let r = http.kv_put(KEY, json!(value), None).await.expect("put");
        assert!(r.status == 200 || r.status == 201, "put {value}: {r}");
        leader = r.served_by();
    }
    let leader = leader.expect("the write names the node that served it");

    // Every process crashes; only the leader's machine loses power.
    for n in NODE_IDS {
        cluster.kill_node(n).expect("kill");
    }
    let cut = cluster.power_cut(leader).expect("power cut");
    eprintln!("node {leader} (the leader): {} unsynced bytes in {} files lost", cut.bytes, cut.files);
    assert!(cut.bytes > 0, "the leader lost nothing: the scenario did not happen");
    for n in NODE_IDS {
        cluster.start_node(n).expect("restart");
    }
    cluster.wait_ready(Duration::from_secs(90)).await.expect("ready again");

    // A new write after the restart must not take an acknowledged write's place.
    let r = http.timeout(Duration::from_secs(30)).kv_put("lagging-leader/after", json!("after"), None).await.expect("put after");
    assert!(r.status == 200 || r.status == 201, "put after the restart: {r}");
    for attempt in 0..3 {
        let r = http.timeout(Duration::from_secs(30)).kv_get(KEY).await.expect("get");
        assert_eq!(r.status, 200, "read {attempt} after the restart: {r}");
        assert_eq!(
            r.json["value"],
            json!(last),
            "read {attempt} after the leader's power cut returned an older value than the last acknowledged write \
             (leader before the cut: node {leader}, served by {:?})",
            r.served_by()
        );
    }
    // Every replica holds the same: the group's replicas have converged.
    tessera_tests::chaos::convergence::assert_converged(&cluster.http, Duration::from_secs(60))
        .await
        .expect("every replica of every group holds the same data");
}
