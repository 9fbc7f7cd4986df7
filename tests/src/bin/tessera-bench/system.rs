//! Modes that start their own local clusters through the test harness (with the
//! binaries next to this one: a release bench starts release nodes):
//!
//! - `memory`: resident set size of each node idle and under a KV write load,
//!   with 8 and with 64 shards.
//! - `groupcommit`: the fsync latency of the disk, the write rate that one
//!   fsync per write would allow, and the KV write rate at 1, 16 and 64
//!   clients with the nodes' own count of log entries per WAL sync.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions};

use super::{Client, load};

/// Resident set size of `pid` in KiB (`VmRSS` of /proc/<pid>/status).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn start(shards: u32) -> Result<(Cluster, Client)> {
    let cluster = Cluster::start(ClusterOptions { shard_count: shards, ..ClusterOptions::default() }).await?;
    let client = Client::login(&cluster.router_url(0), ADMIN_USER, ADMIN_PASSWORD).await?;
    Ok((cluster, client))
}

/// KV puts of 256-byte values from `clients` tasks for `secs`.
async fn kv_writes(c: &Client, clients: usize, secs: u64, tag: &str) -> Result<(f64, f64, f64)> {
    let (c, tag) = (c.clone(), tag.to_string());
    let value = "v".repeat(256);
    load(clients, secs, move |i, n| {
        let (c, body) = (c.clone(), json!({"key": format!("{tag}/{i}/{}", n % 1000), "value": value}));
        async move { c.send(reqwest::Method::POST, "/api/v1/kv/keys", Some(&body), "quorum").await.map(|_| ()) }
    })
    .await
}

/// `tessera-bench memory`.
pub async fn memory(secs: u64) -> Result<()> {
    println!("{:<7} {:<5} {:>14} {:>16} {:>12}", "shards", "node", "idle RSS MiB", "loaded RSS MiB", "writes/s");
    for shards in [8u32, 64] {
        let (cluster, client) = start(shards).await?;
        // Let elections, placement and the first heartbeats settle before sampling.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let pids: Vec<u32> = (1..=3).map(|n| cluster.node_pid(n).context("node pid")).collect::<Result<_>>()?;
        let idle: Vec<u64> = pids.iter().map(|p| rss_kib(*p)).collect();
        let peaks = Arc::new(std::sync::Mutex::new(idle.clone()));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peaks, done, pids) = (peaks.clone(), done.clone(), pids.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    {
                        let mut p = peaks.lock().unwrap_or_else(|e| e.into_inner());
                        for (i, pid) in pids.iter().enumerate() {
                            p[i] = p[i].max(rss_kib(*pid));
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let (rate, _, _) = kv_writes(&client, 32, secs, &format!("mem{shards}")).await?;
        done.store(true, Ordering::Relaxed);
        sampler.await?;
        let peaks = peaks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for n in 0..3 {
            println!("{:<7} {:<5} {:>14.1} {:>16.1} {:>12.0}", shards, n + 1, mib(idle[n]), mib(peaks[n]), rate);
        }
        drop(cluster);
    }
    println!("(idle: 5 s after readiness; loaded: peak while 32 clients write 256-byte values)");
    Ok(())
}

/// Mean and median latency of `n` 4 KiB write + fdatasync rounds in `dir`.
fn fsync_latency(dir: &std::path::Path, n: usize) -> Result<(f64, f64)> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let block = vec![7u8; 4096];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&block)?;
        f.sync_data()?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    std::fs::remove_file(&path)?;
    times.sort_by(|a, b| a.total_cmp(b));
    Ok((times.iter().sum::<f64>() / n as f64, times[n / 2]))
}

/// WAL syncs and log entries synced, summed over the nodes (`GET /api/v1/admin/cluster`).
async fn wal_counters(c: &Client) -> Result<(u64, u64)> {
    let cluster = c.send(reqwest::Method::GET, "/api/v1/admin/cluster", None, "quorum").await?;
    let nodes = cluster["nodes"].as_array().context("admin/cluster without nodes")?;
    Ok(nodes
        .iter()
        .fold((0, 0), |(s, e), n| (s + n["wal"]["syncs"].as_u64().unwrap_or(0), e + n["wal"]["log_entries_synced"].as_u64().unwrap_or(0))))
}

/// `tessera-bench groupcommit`.
pub async fn group_commit(secs: u64) -> Result<()> {
    let (cluster, client) = start(8).await?;
    let (mean, median) = fsync_latency(cluster.root(), 200)?;
    let bound = 1000.0 / mean;
    println!("fsync (4 KiB write + fdatasync) on the data disk: mean {mean:.2} ms, median {median:.2} ms");
    println!("one fsync per write, one write at a time: at most {bound:.0} writes/s");
    println!(
        "{:<10} {:>10} {:>9} {:>9} {:>14} {:>12} {:>14}",
        "clients", "writes/s", "p50 ms", "p99 ms", "÷ fsync bound", "fsyncs/s", "entries/fsync"
    );
    for clients in [1usize, 16, 64] {
        let before = wal_counters(&client).await?;
        let (rate, p50, p99) = kv_writes(&client, clients, secs, &format!("gc{clients}")).await?;
        let after = wal_counters(&client).await?;
        let (syncs, entries) = (after.0 - before.0, after.1 - before.1);
        println!(
            "{clients:<10} {rate:>10.0} {p50:>9.2} {p99:>9.2} {:>14.2} {:>12.0} {:>14.2}",
            rate / bound,
            syncs as f64 / 3.0 / secs as f64,
            entries as f64 / (syncs as f64).max(1.0)
        );
    }
    println!(
        "(each write is fsynced by the leader and a follower before it is acknowledged; fsyncs/s is per node; \
         entries/fsync is the log entries each WAL sync made durable, counted by the nodes: above 1, \
         concurrent writes share fsyncs)"
    );
    drop(cluster);
    Ok(())
}

/// `tessera-bench snapshot --mib N`: one shard filled with `mib` MiB of 8 MiB
/// objects while node 3 is down; node 3's data directory is then wiped and the
/// node restarted, so the group reaches it as one snapshot built by the leader,
/// shipped in chunks and installed. Prints every node's RSS before and its peak
/// during the catch-up, and the time from node 3's start to the installed
/// snapshot.
pub async fn snapshot(group_mib: u64, keep_follower_data: bool) -> Result<()> {
    let opts = ClusterOptions {
        shard_count: 1,
        node_env: vec![("SERVICE_RAFT_SNAPSHOT_LOGS".into(), "64".into()), ("SERVICE_RAFT_KEEP_LOGS".into(), "8".into())],
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(opts).await?;
    let client = Client::login(&cluster.router_url(0), ADMIN_USER, ADMIN_PASSWORD).await?;
    cluster.stop_node(3).await?;
    client.send(reqwest::Method::POST, "/api/v1/objects/buckets", Some(&json!({"name": "snap"})), "quorum").await?;
    let object = 8u64; // MiB
    let count = group_mib.div_ceil(object);
    let loaded = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (c, next) = (client.clone(), next.clone());
            tokio::spawn(async move {
                let body = vec![0x5au8; (object * 1024 * 1024) as usize];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return Ok::<(), anyhow::Error>(());
                    }
                    let mut body = body.clone();
                    body[..8].copy_from_slice(&i.to_be_bytes()); // distinct objects
                    super::objects::put(&c, &format!("/api/v1/objects/buckets/snap/object/o{i}"), body).await?;
                }
            })
        })
        .collect();
    for w in writers {
        w.await??;
    }
    println!("loaded {} MiB in {count} objects in {:.1} s (node 3 down)", count * object, loaded.elapsed().as_secs_f64());

    let dir = cluster.node_data_dir(3)?;
    if !keep_follower_data {
        std::fs::remove_dir_all(&dir)?;
        std::fs::create_dir_all(&dir)?;
        cluster.set_node_env(3, "SERVICE_INITIAL_CLUSTER_STATE", "existing")?;
    }
    let before: Vec<u64> = (1..=2).map(|n| cluster.node_pid(n).map_or(0, rss_kib)).collect();
    let started = Instant::now();
    cluster.start_node(3)?;
    let pids: Vec<u32> = (1..=3).map(|n| cluster.node_pid(n).context("node pid")).collect::<Result<_>>()?;
    let log = cluster.node_log(3)?;
    let mut peaks = [0u64; 3];
    let installed = loop {
        for (i, pid) in pids.iter().enumerate() {
            peaks[i] = peaks[i].max(rss_kib(*pid));
        }
        let text = tessera_tests::strip_ansi(&std::fs::read_to_string(&log).unwrap_or_default());
        // Group 1 is the data group (group 0 is the meta group).
        if text.lines().any(|l| l.contains("installed snapshot") && l.contains("group=1 ")) {
            break started.elapsed();
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(1800), "node 3 did not install the snapshot in 30 min");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A follower that just installed must not unsettle the group: count its
    // elections over the next 30 s.
    let term =
        |v: &serde_json::Value| v["groups"].as_array().and_then(|g| g.iter().find(|g| g["id"] == 1)).and_then(|g| g["term"].as_u64());
    let t0 = term(&client.send(reqwest::Method::GET, "/api/v1/admin/cluster", None, "quorum").await?);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let t1 = term(&client.send(reqwest::Method::GET, "/api/v1/admin/cluster", None, "quorum").await?);
    println!("group 1 term right after the install {t0:?}, 30 s later {t1:?}");
    let on_disk = dir_bytes(&dir);
    println!(
        "node 3 installed the {} MiB group in {:.1} s; its data directory holds {:.0} MiB",
        count * object,
        installed.as_secs_f64(),
        on_disk as f64 / 1048576.0
    );
    println!("{:<6} {:>15} {:>22} {:>12}", "node", "RSS before MiB", "peak in catch-up MiB", "growth MiB");
    for n in 0..3 {
        let base = if n < 2 { before[n] } else { 0 };
        let growth = if n < 2 { format!("{:.1}", mib(peaks[n].saturating_sub(base))) } else { "(started)".into() };
        println!("{:<6} {:>15.1} {:>22.1} {:>12}", n + 1, mib(base), mib(peaks[n]), growth);
    }
    Ok(())
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}
