//! The replica convergence check at the end of a scenario: every replica of
//! every group reaches the same applied index with the same data digest
//! (`GET /api/v1/admin/consistency`), so a divergence is found even when no
//! read happens to touch it.

use std::time::Duration;

use anyhow::{Result, anyhow, bail, ensure};
use serde_json::Value;

use super::cluster::ChaosCluster;
use crate::Http;

/// Polls the consistency check until every group is converged and answers the
/// last report. Fails at once when two replicas at the same applied index hold
/// different data (the report is in the error), and at `timeout` with the
/// groups not converged yet.
pub async fn assert_converged(http: &Http, timeout: Duration) -> Result<Value> {
    crate::wait_for(timeout, "every replica of every group at one applied index with one digest", async || {
        let resp = http.get("/api/v1/admin/consistency").await?;
        ensure!(resp.status == 200, "the consistency check answered {resp}");
        let report = resp.json;
        if report["consistent"] != true {
            return Ok(Some(Err(anyhow!("replicas diverged (same applied index, different data): {report:#}"))));
        }
        if report["converged"] == true {
            return Ok(Some(Ok(report)));
        }
        let pending: Vec<&Value> = report["groups"].as_array().into_iter().flatten().filter(|g| g["converged"] != true).collect();
        bail!("not converged yet: {}", serde_json::to_string_pretty(&pending)?)
    })
    .await?
}

/// Polls the consistency check until every group's Raft membership is the
/// cluster map's (`memberships_agree`: voters are the map's members, no
/// learners). Fails at `timeout` naming the groups that still disagree: a Raft
/// membership the map never recorded is a control-plane step taken outside
/// the meta log (issue 35, defect 4: a deposed placement driver's late call).
pub async fn assert_memberships_agree(http: &Http, timeout: Duration) -> Result<()> {
    crate::wait_for(timeout, "every group's Raft membership equal to the cluster map's", async || {
        let resp = http.get("/api/v1/admin/consistency").await?;
        ensure!(resp.status == 200, "the consistency check answered {resp}");
        if resp.json["memberships_agree"] == true {
            return Ok(Some(()));
        }
        let apart: Vec<String> = resp.json["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| g["membership_agrees"] != true)
            .map(|g| {
                let members: Vec<String> = g["replicas"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["member"] == true)
                    .map(|r| r["node_id"].to_string())
                    .collect();
                let raft: Vec<String> = g["replicas"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| format!("node {} at {}: voters {} learners {}", r["node_id"], r["applied_index"], r["voters"], r["learners"]))
                    .collect();
                format!("group {}: map members [{}], Raft {}", g["group_id"], members.join(","), raft.join("; "))
            })
            .collect();
        bail!("Raft membership apart from the cluster map: {}", apart.join(" | "))
    })
    .await
}

/// The convergence check for binaries without the consistency endpoint (older
/// builds under test): stops every running node and digests each one's store
/// with `tessera-node digest` from `check_bin_dir` (a build that has it).
/// Answers the divergences found (replicas of a group at one applied index with
/// different digests) and notes on what could not be compared.
///
/// `map_members` (group → its members in the cluster map, read before the
/// nodes stop) also checks every group's Raft membership: the one the most
/// advanced replica applied must have exactly the map's members as voters and
/// no learners (see [`assert_memberships_agree`]).
pub fn offline_divergences(
    c: &mut ChaosCluster,
    check_bin_dir: &std::path::Path,
    map_members: &std::collections::BTreeMap<u64, Vec<u64>>,
) -> Result<(Vec<String>, Vec<String>)> {
    use std::collections::BTreeMap;
    let bin = check_bin_dir.join("tessera-node");
    // group → applied index → (node, records, digest)
    let mut by_group: BTreeMap<u64, BTreeMap<u64, Vec<(u64, u64, String)>>> = BTreeMap::new();
    // group → (applied index, node, voters, learners) of its most advanced replica
    let mut latest_membership: BTreeMap<u64, (u64, u64, Vec<u64>, Vec<u64>)> = BTreeMap::new();
    let nodes = c.running_nodes();
    for &id in &nodes {
        c.kill_node(id)?;
    }
    for &id in &nodes {
        let out = std::process::Command::new(&bin).arg("digest").arg("--data-dir").arg(c.data_dir(id)).output()?;
        ensure!(out.status.success(), "{} digest of node {id}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let d: Value = serde_json::from_str(line)?;
            let (Some(group), Some(applied)) = (d["group"].as_u64(), d["applied_index"].as_u64()) else { continue };
            let entry = (id, d["records"].as_u64().unwrap_or(0), d["digest"].as_str().unwrap_or_default().to_string());
            by_group.entry(group).or_default().entry(applied).or_default().push(entry);
            let ids = |field: &str| -> Vec<u64> { d[field].as_array().into_iter().flatten().filter_map(Value::as_u64).collect() };
            let (voters, learners) = (ids("voters"), ids("learners"));
            if !voters.is_empty() && latest_membership.get(&group).is_none_or(|l| l.0 < applied) {
                latest_membership.insert(group, (applied, id, voters, learners));
            }
        }
    }
    let (mut diverged, mut notes) = (Vec::new(), Vec::new());
    let mut compared = 0usize;
    for (group, at) in &by_group {
        if at.len() > 1 {
            let spread: Vec<String> = at.iter().map(|(i, r)| format!("{i} on {:?}", r.iter().map(|x| x.0).collect::<Vec<_>>())).collect();
            notes.push(format!("group {group}: replicas at different applied indexes ({})", spread.join(", ")));
        }
        for (index, replicas) in at {
            if replicas.len() < 2 {
                continue;
            }
            compared += 1;
            if replicas.iter().any(|r| r.2 != replicas[0].2) {
                let detail: Vec<String> =
                    replicas.iter().map(|(n, recs, d)| format!("node {n}: {recs} records, {}", &d[..12.min(d.len())])).collect();
                diverged.push(format!("group {group} at applied index {index}: replicas differ ({})", detail.join("; ")));
            }
        }
    }
    let mut apart = Vec::new();
    for (group, members) in map_members {
        let Some((applied, node, voters, learners)) = latest_membership.get(group) else { continue };
        let mut wanted = members.clone();
        wanted.sort_unstable();
        if *voters != wanted || !learners.is_empty() {
            apart.push(format!(
                "group {group}: Raft membership apart from the cluster map (map members {wanted:?}; node {node} at applied index {applied}: voters {voters:?}, learners {learners:?})"
            ));
        }
    }
    notes.push(format!("Raft memberships compared offline with the cluster map: {} groups, {} apart", map_members.len(), apart.len()));
    notes.push(format!(
        "replicas compared offline ({} digest of nodes {nodes:?} after the run): {compared} groups at a shared applied index, {} diverged",
        bin.display(),
        diverged.len()
    ));
    diverged.extend(apart);
    Ok((diverged, notes))
}
