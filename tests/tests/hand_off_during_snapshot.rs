//! Scenario (issue 35, defect 5): a leader that gives up its leadership while
//! it streams a snapshot to a slow follower steps aside at once. Each snapshot
//! chunk renews the follower's lease on its leader, so a leader that stopped
//! heartbeats but went on sending chunks kept that follower from voting for a
//! successor until the whole transfer had ended, while it refused every call
//! itself: the group's writes stalled for the transfer.
//!
//! Node F is down while a data group gains ~80 MB and snapshots past F's log,
//! then comes back behind 120 ms links (one 1 MiB chunk per round trip: the
//! transfer takes well over 10 s).
//!
//! Mid-transfer its leader L is drained. The group must elect another leader
//! and take a write before F has installed the snapshot.
//!
//! - `a_draining_leader_does_not_hold_its_group_through_a_snapshot_transfer`:
//!   all links up otherwise. It passes on the code before the fix too (the
//!   drained leader's own vote lets its successor win while F's lease is still
//!   renewed); it guards the liveness of a drain during a transfer.
//! - `a_successor_that_needs_the_receiving_followers_vote_is_elected_mid_transfer`:
//!   the third node S cannot reach L (what S sends L is lost), so S can only
//!   win with F's vote. Before the fix F refused it until the transfer ended
//!   (its lease was renewed by every chunk); after it, L stops streaming when
//!   it hands off and S is elected while F still holds a partial snapshot.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use reqwest::Method;
use tessera_tests::chaos::cluster::{ChaosCluster, Peer};
use tessera_tests::{NODE_IDS, json, wait_for};

const OBJECTS: u64 = 20;
const OBJECT_BYTES: usize = 4 * 1024 * 1024;
/// Below the 200 ms a Raft message may take (the heartbeat interval), so the
/// slow follower still hears its leader; 1 MiB snapshot chunks then arrive at
/// most about seven a second.
const SLOW_LINK: Duration = Duration::from_millis(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_leader_does_not_hold_its_group_through_a_snapshot_transfer() {
    run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_that_needs_the_receiving_followers_vote_is_elected_mid_transfer() {
    run(true).await;
}

async fn run(successor_needs_the_follower: bool) {
    let env = [("SERVICE_RAFT_SNAPSHOT_LOGS", "16"), ("SERVICE_RAFT_KEEP_LOGS", "0")];
    let mut cluster = ChaosCluster::start(&env, Duration::from_secs(120)).await.expect("cluster start");
    if let Err(e) = scenario(&mut cluster, successor_needs_the_follower).await {
        cluster.keep();
        panic!("scenario failed: {e:?}\n{}", cluster.log_tails(40));
    }
}

fn object(i: u64) -> Vec<u8> {
    let mut body: Vec<u8> = (0..OBJECT_BYTES).map(|b| (b % 251) as u8).collect();
    body[..8].copy_from_slice(&i.to_be_bytes());
    body
}

/// Bytes of the snapshot of `group` node `node` is receiving now (0: none).
fn receiving(c: &ChaosCluster, node: u64, group: u64) -> u64 {
    let dir = c.root().join(format!("node-{node}"));
    tessera_tests::files_under(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let in_group = p.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()) == Some(&group.to_string());
            in_group && name.starts_with("recv-") && name.ends_with(".part")
        })
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
        .sum()
}

fn installed(c: &ChaosCluster, node: u64, group: u64, offset: u64) -> Result<bool> {
    let text = std::fs::read(c.node_log(node))?;
    let text = String::from_utf8_lossy(&text[offset.min(text.len() as u64) as usize..]).to_string();
    Ok(text.lines().any(|l| l.contains(&format!("installed snapshot group={group} "))))
}

async fn scenario(c: &mut ChaosCluster, successor_needs_the_follower: bool) -> Result<()> {
    let api = c.http.timeout(Duration::from_secs(60));
    api.post("/api/v1/objects/buckets", &json!({"name": "slow"})).await?.ensure_status(201)?;
    let put = async |name: &str, body: Vec<u8>| {
        let path = format!("/api/v1/objects/buckets/slow/object/{name}");
        let r = api.send(Method::PUT, &path, Some(body), Some("application/octet-stream")).await?.ensure_status(200)?;
        r.group().context("no group header")?.parse::<u64>().context("group header")
    };
    let group = put("probe", b"probe".to_vec()).await?;
    let leader = *c.leaders().await?.get(&group).context("no leader for the bucket's group")?;
    let follower = NODE_IDS.iter().copied().find(|n| *n != leader).context("a follower")?;

    // Names whose objects live in that group (objects are placed by name).
    let mut names = Vec::new();
    for n in 0.. {
        if names.len() as u64 == OBJECTS {
            break;
        }
        let name = format!("o{n}");
        if put(&name, Vec::new()).await? == group {
            names.push(name);
        }
    }
    c.kill_node(follower)?;
    for (i, name) in names.iter().enumerate() {
        put(name, object(i as u64)).await?;
    }
    // Enough entries past the snapshot threshold that the group's log no longer
    // reaches back to the follower's.
    for i in 0..40u32 {
        put(&names[0], i.to_be_bytes().to_vec()).await?;
    }
    // Every link into the follower is slow, whoever leads.
    for other in NODE_IDS.iter().copied().filter(|n| *n != follower) {
        c.delay(Peer::Node(other), Peer::Node(follower), SLOW_LINK);
    }
    let log_offset = std::fs::metadata(c.node_log(follower)).map(|m| m.len()).unwrap_or(0);
    c.start_node(follower)?;
    // The transfer of the group's snapshot is under way: a few chunks received.
    let what = format!("node {follower} to receive a few chunks of group {group}'s snapshot");
    wait_for(Duration::from_secs(120), &what, async || Ok((receiving(c, follower, group) > 3 * 1024 * 1024).then_some(()))).await?;
    if installed(c, follower, group, log_offset)? {
        bail!("node {follower} installed group {group}'s snapshot before the drain: the links are not slow enough");
    }

    let started = Instant::now();
    let admin = c.http.timeout(Duration::from_secs(120));
    let drain = format!("/api/v1/admin/nodes/{leader}/drain");
    if successor_needs_the_follower {
        // S's messages to L are lost (L's still reach S, so S follows L until
        // L stops its heartbeats): S can win only with F's vote.
        let successor = NODE_IDS.iter().copied().find(|n| *n != leader && *n != follower).context("a third node")?;
        c.cut(Peer::Node(successor), Peer::Node(leader), true);
        let drained = tokio::spawn(async move { admin.post(&drain, &json!({})).await });
        // Several election timeouts (1–2 s here), far less than the transfer.
        let what = format!(
            "node {successor} to lead group {group} with node {follower}'s vote (a drained leader still streaming \
             its snapshot to node {follower} keeps that vote from any successor)"
        );
        wait_for(Duration::from_secs(30), &what, async || Ok((c.leaders().await?.get(&group) == Some(&successor)).then_some(()))).await?;
        let elected_after = started.elapsed();
        ensure!(
            !installed(c, follower, group, log_offset)?,
            "node {successor} was elected only after node {follower} had installed the snapshot ({elected_after:?} after \
             the drain began): the drained leader's transfer kept node {follower}'s vote"
        );
        eprintln!("node {successor} elected {elected_after:?} after the drain began, node {follower} still receiving");
        c.heal_network();
        drained.await??.ensure_status(200)?;
    } else {
        admin.post(&drain, &json!({})).await?.ensure_status(200)?;
    }
    let drained_after = started.elapsed();
    put(&names[0], b"written under the new leader".to_vec()).await?;
    let written_after = started.elapsed();
    let new_leader = *c.leaders().await?.get(&group).context("no leader after the drain")?;
    ensure!(new_leader != leader, "node {leader} still leads group {group}");
    // (With the cut, the election was checked above; the drain's own end may
    // come after the new leader has sent F the whole snapshot.)
    ensure!(
        successor_needs_the_follower || !installed(c, follower, group, log_offset)?,
        "group {group} took its next write only after node {follower} had installed the snapshot \
         (drained after {drained_after:?}, written after {written_after:?}): the drained leader's \
         transfer held the group"
    );
    eprintln!(
        "drained node {leader} after {drained_after:?}; group {group} took a write under node {new_leader} after \
         {written_after:?}, while node {follower} was still receiving its snapshot"
    );

    // The follower still gets the whole group, from the new leader.
    c.heal_network();
    let replica = c.http.replica(follower).timeout(Duration::from_secs(30));
    wait_for(Duration::from_secs(180), "the follower to serve every object from its own state", async || {
        for (i, name) in names.iter().enumerate() {
            let r = replica.send(Method::GET, &format!("/api/v1/objects/buckets/slow/object/{name}"), None, None).await?;
            ensure!(r.status == 200, "object {name} on node {follower}: {}", r.status);
            let want = if i == 0 { b"written under the new leader".to_vec() } else { object(i as u64) };
            ensure!(r.body == want, "object {name} on node {follower} differs");
        }
        Ok(Some(()))
    })
    .await
}
