//! `GET /api/v1/admin/consistency`: the replica consistency check. Every node
//! digests each group it hosts (its replicated records in plaintext, with the
//! applied index they reflect, from one RocksDB snapshot); replicas at the same
//! applied index must have the same digest, so a divergence is found even when
//! no read happens to touch it.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use tessera_api::http::iso8601_ms;
use tessera_api::rpc::GroupDigest;
use tessera_api::{GroupId, NodeId};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The answer of the consistency check.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ConsistencyReport {
    /// No group has two replicas at the same applied index with different digests.
    pub consistent: bool,
    /// Every group is converged (see [`GroupConsistency::converged`]).
    pub converged: bool,
    /// Every group's Raft membership is the cluster map's (see
    /// [`GroupConsistency::membership_agrees`]).
    pub memberships_agree: bool,
    pub groups: Vec<GroupConsistency>,
    pub checked_at: String,
}

/// One group's replicas, compared.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct GroupConsistency {
    pub group_id: GroupId,
    /// No two replicas at the same applied index have different digests.
    pub consistent: bool,
    /// Every member answered, all at one applied index with one digest.
    pub converged: bool,
    /// The applied indexes at which replicas' digests differ (empty when consistent).
    pub divergent_at: Vec<u64>,
    /// The Raft membership applied at the highest applied index any replica
    /// reports has exactly the map's members as voters and no learners. False
    /// while a replica move is between its steps; a group whose Raft membership
    /// stays apart from the map (a control-plane step the map never recorded)
    /// keeps it false.
    pub membership_agrees: bool,
    /// Each member, then each other node still hosting a replica (a learner, or
    /// one being moved away: compared for consistency, not for convergence).
    pub replicas: Vec<ReplicaDigest>,
}

/// One replica's digest, or why it is missing.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReplicaDigest {
    pub node_id: NodeId,
    /// Whether the node is a member of the group in the cluster map.
    pub member: bool,
    pub applied_index: Option<u64>,
    /// Records of the group's range on this replica.
    pub records: Option<u64>,
    /// SHA-256 (hex) of the replica's records, keys and plaintext values.
    pub digest: Option<String>,
    /// The Raft voters and learners of the membership this replica applied last.
    pub voters: Option<Vec<NodeId>>,
    pub learners: Option<Vec<NodeId>>,
    /// Why the replica has no digest (node unreachable, group not hosted, read failed).
    pub error: Option<String>,
}

impl ReplicaDigest {
    fn failed(node_id: NodeId, member: bool, error: String) -> ReplicaDigest {
        ReplicaDigest {
            node_id,
            member,
            applied_index: None,
            records: None,
            digest: None,
            voters: None,
            learners: None,
            error: Some(error),
        }
    }
}

/// `GET /api/v1/admin/consistency` (see the module's doc).
pub async fn consistency(State(state): State<AppState>, _caller: Caller) -> Result<Json<ConsistencyReport>, ApiError> {
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let calls = map.nodes.iter().map(|n| async { (n.id, state.cluster.node_digests(n).await) });
    let replies: HashMap<NodeId, Result<HashMap<GroupId, GroupDigest>, String>> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|(id, reply)| (id, reply.map(|r| r.groups.into_iter().map(|g| (g.group_id, g)).collect()).map_err(|e| e.to_string())))
        .collect();
    let mut groups: Vec<GroupConsistency> = map.groups.iter().map(|g| compare(g.id, &g.members, &replies)).collect();
    groups.sort_by_key(|g| g.group_id);
    Ok(Json(ConsistencyReport {
        consistent: groups.iter().all(|g| g.consistent),
        converged: groups.iter().all(|g| g.converged),
        memberships_agree: groups.iter().all(|g| g.membership_agrees),
        groups,
        checked_at: iso8601_ms(tessera_api::command::now_ms()),
    }))
}

/// Compares the replicas of `group` the nodes reported.
fn compare(
    group: GroupId,
    members: &[NodeId],
    replies: &HashMap<NodeId, Result<HashMap<GroupId, GroupDigest>, String>>,
) -> GroupConsistency {
    let mut replicas: Vec<ReplicaDigest> = members
        .iter()
        .map(|&node| match replies.get(&node) {
            None => ReplicaDigest::failed(node, true, format!("node {node} is not in the cluster map")),
            Some(Err(e)) => ReplicaDigest::failed(node, true, e.clone()),
            Some(Ok(reply)) => match reply.get(&group) {
                None => ReplicaDigest::failed(node, true, format!("node {node} does not host group {group}")),
                Some(d) => replica(node, true, d),
            },
        })
        .collect();
    let mut others: Vec<ReplicaDigest> = replies
        .iter()
        .filter(|(node, _)| !members.contains(node))
        .filter_map(|(&node, reply)| reply.as_ref().ok()?.get(&group).map(|d| replica(node, false, d)))
        .collect();
    replicas.sort_by_key(|r| r.node_id);
    others.sort_by_key(|r| r.node_id);
    replicas.extend(others);

    // Applied index → the digests replicas at it have.
    let mut at: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for r in &replicas {
        if let (Some(index), Some(digest)) = (r.applied_index, r.digest.as_deref()) {
            at.entry(index).or_default().push(digest);
        }
    }
    let divergent_at: Vec<u64> = at.iter().filter(|(_, digests)| digests.iter().any(|d| d != &digests[0])).map(|(&i, _)| i).collect();
    let members_answered: Vec<&ReplicaDigest> = replicas.iter().filter(|r| r.member).collect();
    let converged = !members_answered.is_empty()
        && members_answered.iter().all(|r| r.error.is_none())
        && members_answered.windows(2).all(|w| (w[0].applied_index, &w[0].digest) == (w[1].applied_index, &w[1].digest));
    let membership_agrees = membership_agrees(members, &replicas);
    GroupConsistency { group_id: group, consistent: divergent_at.is_empty(), converged, divergent_at, membership_agrees, replicas }
}

/// Whether the Raft membership of the most advanced replica (the highest
/// applied index; replicas that applied no membership are not judged) has
/// exactly `members` as voters and no learners.
fn membership_agrees(members: &[NodeId], replicas: &[ReplicaDigest]) -> bool {
    let latest = replicas.iter().filter(|r| r.voters.as_ref().is_some_and(|v| !v.is_empty())).max_by_key(|r| r.applied_index);
    let Some(latest) = latest else { return true };
    let mut wanted = members.to_vec();
    wanted.sort_unstable();
    latest.voters.as_deref() == Some(wanted.as_slice()) && latest.learners.as_ref().is_none_or(|l| l.is_empty())
}

fn replica(node: NodeId, member: bool, d: &GroupDigest) -> ReplicaDigest {
    if !d.error.is_empty() {
        return ReplicaDigest::failed(node, member, format!("node {node}: {}", d.error));
    }
    ReplicaDigest {
        node_id: node,
        member,
        applied_index: Some(d.applied_index),
        records: Some(d.records),
        digest: Some(d.digest.clone()),
        voters: Some(d.voters.clone()),
        learners: Some(d.learners.clone()),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(group: GroupId, index: u64, digest: &str) -> GroupDigest {
        GroupDigest {
            group_id: group,
            applied_index: index,
            records: 1,
            digest: digest.into(),
            error: String::new(),
            voters: vec![1, 2, 3],
            learners: vec![],
        }
    }

    fn replies(by_node: &[(NodeId, Vec<GroupDigest>)]) -> HashMap<NodeId, Result<HashMap<GroupId, GroupDigest>, String>> {
        by_node.iter().map(|(n, ds)| (*n, Ok(ds.iter().map(|d| (d.group_id, d.clone())).collect()))).collect()
    }

    #[test]
    fn replicas_are_compared_at_the_same_applied_index() {
        let same = replies(&[(1, vec![digest(7, 5, "a")]), (2, vec![digest(7, 5, "a")]), (3, vec![digest(7, 5, "a")])]);
        let g = compare(7, &[1, 2, 3], &same);
        assert!(g.consistent && g.converged, "{g:?}");

        // A replica behind is consistent (another index), not converged.
        let behind = replies(&[(1, vec![digest(7, 5, "a")]), (2, vec![digest(7, 4, "b")]), (3, vec![digest(7, 5, "a")])]);
        let g = compare(7, &[1, 2, 3], &behind);
        assert!(g.consistent && !g.converged, "{g:?}");

        // Two replicas at one index with different data: divergence.
        let diverged = replies(&[(1, vec![digest(7, 5, "a")]), (2, vec![digest(7, 5, "b")]), (3, vec![digest(7, 5, "a")])]);
        let g = compare(7, &[1, 2, 3], &diverged);
        assert!(!g.consistent && !g.converged, "{g:?}");
        assert_eq!(g.divergent_at, vec![5]);

        // A member that did not answer: not converged; a non-member replica is compared too.
        let mut partial = replies(&[(1, vec![digest(7, 5, "a")]), (3, vec![digest(7, 5, "a")]), (4, vec![digest(7, 5, "c")])]);
        partial.insert(2, Err("node 2: unreachable".into()));
        let g = compare(7, &[1, 2, 3], &partial);
        assert!(!g.converged && !g.consistent, "{g:?}");
        assert_eq!(g.replicas.iter().map(|r| (r.node_id, r.member)).collect::<Vec<_>>(), [(1, true), (2, true), (3, true), (4, false)]);
        assert_eq!(g.replicas[1].error.as_deref(), Some("node 2: unreachable"));
    }

    #[test]
    fn a_raft_membership_apart_from_the_map_is_reported() {
        let agreeing = replies(&[(1, vec![digest(7, 5, "a")]), (2, vec![digest(7, 5, "a")]), (3, vec![digest(7, 5, "a")])]);
        assert!(compare(7, &[3, 1, 2], &agreeing).membership_agrees);
        // A stale control-plane step left a learner the map does not know.
        let mut learner = digest(7, 6, "a");
        learner.learners = vec![4];
        let stale = replies(&[(1, vec![learner]), (2, vec![digest(7, 5, "a")]), (3, vec![digest(7, 5, "a")])]);
        assert!(!compare(7, &[1, 2, 3], &stale).membership_agrees);
        // Raft's voters are not the map's members.
        let mut swapped = digest(7, 6, "a");
        swapped.voters = vec![2, 3, 4];
        let swapped = replies(&[(2, vec![swapped]), (3, vec![digest(7, 5, "a")])]);
        assert!(!compare(7, &[1, 2, 3], &swapped).membership_agrees);
    }
}
