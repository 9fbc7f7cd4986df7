//! Scenario: every node loses power right after a write was acknowledged. The
//! leader restarts and openraft 0.9 hands it its old leadership back at once,
//! without an election — but its state machine and commit index are only what
//! reached its disk, behind its synced log. A quorum read straight after the
//! restart must still return the acknowledged value, never an older one.
//!
//! Each node's state machine is held back 1.5 s per apply after the restart
//! (`SERVICE_TEST_APPLY_DELAY_MS`), so a read that does not wait for the
//! restored log is caught every time rather than when a race happens to lose.
//! Needs the power-loss filesystem (FUSE); skipped where it is not available.

use std::time::Duration;

use serde_json::json;
use tessera_tests::NODE_IDS;
use tessera_tests::chaos::cluster::ChaosCluster;

const KEY: &str = "restored-leader/register";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_restored_after_a_power_cut_reads_every_acknowledged_write() {
    let mut cluster = ChaosCluster::start(&[], Duration::from_secs(90)).await.expect("cluster starts");
    if let Err(why) = cluster.disks_available() {
        eprintln!("SKIPPED: no power-loss filesystem here ({why})");
        return;
    }
    let http = cluster.http.consistency("quorum");

    // Writes the register a few times; the last acknowledged value is the one to read back.
    let mut leader = None;
    let last = 12;
    for value in 1..=last {
        let r = http.kv_put(KEY, json!(value), None).await.expect("put");
        assert!(r.status == 200 || r.status == 201, "put {value}: {r}");
        leader = r.served_by();
    }
    let leader = leader.expect("the write names the node that served it");

    // Power cut on every node at once, right after the acknowledgement.
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
