//! Stray replicas: a node still hosting a group the map no longer lists it
//! for. A replica move drops its source's replica as its last step; when that
//! drop fails (the node is down, or it refused the call), the move is over
//! all the same, and nothing else would drop the replica: it keeps its disk,
//! answers stale `one` reads, and keeps a node addition at `all` waiting. The
//! placement driver sweeps them periodically.

use std::collections::{BTreeMap, BTreeSet};

use tessera_api::meta::{ClusterMap, NodeState};
use tessera_api::{GroupId, META_GROUP, NodeId};
use tracing::{info, warn};

use super::ControlHost;

/// Drops every replica that a node of `map` hosts although the map does not
/// list it among its group's members, fenced by `term`; answers how many it
/// dropped. A replica is kept whenever the group may still need it:
/// - while a replica move is in flight (its source and target both hold one);
/// - when its group is not in the map (a split's child not recorded yet);
/// - unless the group's leader reports voters that are exactly the map's
///   members (the membership without the replica is committed there).
pub(super) async fn drop_stray_replicas<H: ControlHost>(host: &H, map: &ClusterMap, term: u64) -> usize {
    if map.moving.is_some() {
        return 0;
    }
    let nodes: Vec<_> =
        map.nodes.iter().filter(|n| matches!(n.state, NodeState::Active | NodeState::Joining | NodeState::Draining)).collect();
    let statuses = futures::future::join_all(nodes.iter().map(|n| host.status(n))).await;
    let statuses: Vec<_> = nodes.iter().zip(statuses).filter_map(|(n, s)| s.map(|s| (*n, s))).collect();
    // Each group's voters as its leader of the highest term reports them.
    let mut led: BTreeMap<GroupId, (u64, BTreeSet<NodeId>)> = BTreeMap::new();
    for (node, status) in &statuses {
        for g in status.groups.iter().filter(|g| g.leader_id == node.id) {
            if led.get(&g.group_id).is_none_or(|(term, _)| g.term > *term) {
                led.insert(g.group_id, (g.term, g.voters.iter().copied().collect()));
            }
        }
    }
    let mut dropped = 0;
    for (node, status) in &statuses {
        for g in status.groups.iter().filter(|g| g.group_id != META_GROUP) {
            let Some(group) = map.groups.iter().find(|info| info.id == g.group_id) else { continue };
            if group.members.contains(&node.id) {
                continue;
            }
            let members: BTreeSet<NodeId> = group.members.iter().copied().collect();
            match led.get(&g.group_id) {
                Some((_, voters)) if *voters == members => {}
                _ => continue,
            }
            match host.drop_group(node, g.group_id, term).await {
                Ok(()) => {
                    info!(group = g.group_id, node = node.id, "placement driver dropped a replica the map no longer lists");
                    dropped += 1;
                }
                Err(e) => warn!(group = g.group_id, node = node.id, "a replica the map no longer lists was not dropped: {e}"),
            }
        }
    }
    dropped
}
