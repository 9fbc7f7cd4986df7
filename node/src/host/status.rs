//! What a node reports: applied indexes, group statuses, the recorded
//! cluster map, disk and memory.

use super::*;

impl Host {
    /// The index this node's replica of `group` has applied.
    pub fn applied_index(&self, group: GroupId) -> Result<u64, HostError> {
        Ok(self.group(group)?.reader.applied()?.map_or(0, |l| l.index))
    }

    /// The status of every hosted group, in id order.
    pub fn group_statuses(&self) -> Vec<GroupStatus> {
        let mut out: Vec<GroupStatus> = self
            .hosted()
            .iter()
            .map(|(id, g)| {
                let m = g.raft.metrics().borrow().clone();
                GroupStatus {
                    group_id: *id,
                    leader_id: super::leadership::known_leader(&m, self.id).unwrap_or(0),
                    term: m.current_term,
                    last_applied: m.last_applied.map_or(0, |l| l.index),
                    voters: m.membership_config.voter_ids().collect(),
                }
            })
            .collect();
        out.sort_by_key(|g| g.group_id);
        out
    }

    /// The cluster map recorded in this replica of the meta group, if any.
    pub fn recorded_map(&self) -> Option<ClusterMap> {
        let g = self.group(META_GROUP).ok()?;
        match g.reader.query(&Query::Meta(MetaQuery::ClusterMap), now_ms()) {
            Ok(QueryResult::Meta(MetaQueryResult::ClusterMap(m))) => m,
            _ => None,
        }
    }

    /// Records the cluster map in the meta group once: whichever node leads the
    /// meta group proposes it until a replica shows it recorded.
    pub async fn record_cluster_map(self: Arc<Self>) {
        if !self.hosts(META_GROUP) {
            return;
        }
        loop {
            if self.recorded_map().is_some() {
                return;
            }
            let is_leader = self.leads(META_GROUP);
            if is_leader {
                match self.write(META_GROUP, Operation::Meta(MetaOp::InitClusterMap(self.map.clone())), None, Consistency::Quorum).await {
                    Ok(_) => info!("recorded the cluster map in the meta group"),
                    Err(e) => warn!("recording the cluster map: {e}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Bytes of the files under the data directory, measured at most every 5 s.
    pub fn disk_bytes(&self) -> u64 {
        let mut cached = self.disk_usage.lock().unwrap_or_else(|e| e.into_inner());
        match *cached {
            Some((at, bytes)) if at.elapsed() < Duration::from_secs(5) => bytes,
            _ => {
                let bytes = tessera_storage::store::dir_bytes(&self.data_dir);
                *cached = Some((Instant::now(), bytes));
                bytes
            }
        }
    }
}

/// (bytes available to this process, total bytes) of the filesystem holding `dir`; zeros when unknown.
pub fn filesystem_space(dir: &std::path::Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return (0, 0) };
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stat` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return (0, 0);
    }
    let block = stat.f_frsize as u64;
    (stat.f_bavail as u64 * block, stat.f_blocks as u64 * block)
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`), 0 when unknown.
pub fn machine_memory_bytes() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// This process's resident memory (`VmRSS` of `/proc/self/status`; 0 where there is none).
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
