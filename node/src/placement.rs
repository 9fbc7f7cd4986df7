//! The initial placement of groups on nodes, computed identically by every node
//! from the shared configuration and recorded once in the meta group.
//!
//! The meta group (0) lives on the first `max(3, replication_factor)` nodes (all of
//! them in a three-node cluster). Data group `g` (1-based) lives on
//! `replication_factor` consecutive nodes starting at node index `(g - 1) mod n`,
//! so leaders and replicas spread evenly.

use tessera_api::META_GROUP;
use tessera_api::meta::{ClusterMap, GroupInfo, KeyRange, NodeInfo, RangeDescriptor, ShardingStrategy};

/// Computes the cluster map for `nodes` (sorted by id).
pub fn initial_map(nodes: &[NodeInfo], shard_count: u64, replication_factor: usize, strategy: ShardingStrategy) -> ClusterMap {
    let n = nodes.len();
    let rf = replication_factor.min(n).max(1);
    let meta_size = rf.max(3).min(n);
    let mut groups = vec![GroupInfo::new(META_GROUP, nodes[..meta_size].iter().map(|x| x.id).collect())];
    for g in 1..=shard_count {
        let start = ((g - 1) as usize) % n;
        let members = (0..rf).map(|i| nodes[(start + i) % n].id).collect();
        groups.push(GroupInfo::new(g, members));
    }
    // Range sharding starts with every key-value key in the first data group;
    // ranges split off into new groups as they grow (see `maintenance`).
    let ranges = match strategy {
        ShardingStrategy::Range if shard_count > 0 => vec![RangeDescriptor { range: KeyRange::full(), group: 1 }],
        _ => Vec::new(),
    };
    ClusterMap {
        nodes: nodes.to_vec(),
        strategy,
        replication_factor: rf,
        groups,
        epoch: 0,
        ranges,
        moving: None,
        pending_splits: Default::default(),
        last_group_id: 0,
    }
}

/// Why a node refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "the configuration disagrees with the placement this node recorded at bootstrap: {0}. \
         Start it with the configuration the cluster was bootstrapped with (peers, shard_count, \
         replication_factor, sharding strategy); wipe the data directory only to re-add the node \
         (then start it with initial_cluster_state=existing)"
    )]
    Disagrees(String),
    #[error("placement record: {0}")]
    Record(String),
}

/// The placement this node hosts groups from: the one it recorded at its first
/// start (recorded now when there is none), with the configured addresses (nodes
/// may move; ids and groups may not). Refuses a configuration whose topology
/// differs from the recorded one.
pub fn recorded_or_configured(store: &tessera_storage::Store, configured: ClusterMap) -> Result<ClusterMap, PlacementError> {
    let record = |e: &dyn std::fmt::Display| PlacementError::Record(e.to_string());
    let Some(bytes) = store.recorded_placement().map_err(|e| record(&e))? else {
        let bytes = serde_json::to_vec(&configured).map_err(|e| record(&e))?;
        store.record_placement(&bytes).map_err(|e| record(&e))?;
        return Ok(configured);
    };
    let mut recorded: ClusterMap = serde_json::from_slice(&bytes).map_err(|e| record(&e))?;
    // Nodes added since bootstrap may be configured as peers (an operator lists
    // the whole cluster): the recorded placement rules, the live map comes from
    // the meta group.
    let added_since = recorded.nodes.len() < configured.nodes.len()
        && recorded.nodes.iter().all(|n| configured.node(n.id).is_some())
        && recorded.data_groups().len() == configured.data_groups().len()
        && recorded.replication_factor == configured.replication_factor
        && recorded.strategy == configured.strategy;
    if added_since {
        for node in &mut recorded.nodes {
            node.addr = configured.addr_of(node.id).unwrap_or(&node.addr).to_string();
        }
        return Ok(recorded);
    }
    if let Some(difference) = topology_difference(&recorded, &configured) {
        return Err(PlacementError::Disagrees(difference));
    }
    Ok(configured)
}

/// The placement and cluster id of a node whose replicas changed after
/// bootstrap (it joined an existing cluster, or replicas moved to or from it):
/// both as recorded, with the configured address of every node configured.
pub fn recorded_since_join(store: &tessera_storage::Store, configured: &ClusterMap) -> Result<(ClusterMap, u64), PlacementError> {
    let record = |e: &dyn std::fmt::Display| PlacementError::Record(e.to_string());
    let bytes = store.recorded_placement().map_err(|e| record(&e))?.ok_or_else(|| record(&"no placement is recorded"))?;
    let mut map: ClusterMap = serde_json::from_slice(&bytes).map_err(|e| record(&e))?;
    for node in &mut map.nodes {
        if let Some(c) = configured.node(node.id) {
            node.addr = c.addr.clone();
        }
    }
    let id = match store.node_record(tessera_storage::NODE_CLUSTER_ID).map_err(|e| record(&e))? {
        Some(b) if b.len() == 8 => u64::from_be_bytes(b.try_into().expect("8 bytes")),
        _ => return Err(record(&"no cluster id is recorded")),
    };
    Ok((map, id))
}

/// The cluster's id: FNV-1a (64-bit) of its name and topology (node ids, groups
/// and their members, replication factor, strategy), never of addresses. Every
/// node of a cluster computes the same id without talking to the others; two
/// clusters share one only if both name and topology match (as etcd's
/// `initial-cluster-token`).
pub fn cluster_id(name: &str, map: &ClusterMap) -> u64 {
    let ids: Vec<u64> = map.nodes.iter().map(|n| n.id).collect();
    let groups: Vec<String> = map.groups.iter().map(|g| format!("{}:{:?}", g.id, g.members)).collect();
    let canonical = format!("{name}|{ids:?}|{}|{:?}|{}", map.replication_factor, map.strategy, groups.join(";"));
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in canonical.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

/// The cluster id this node recorded at bootstrap (`computed` is recorded now
/// when there is none). Refuses one that differs: the node belongs to another
/// cluster (its `cluster.name` changed, or its data directory came from elsewhere).
pub fn recorded_cluster_id(store: &tessera_storage::Store, computed: u64) -> Result<u64, PlacementError> {
    let record = |e: &dyn std::fmt::Display| PlacementError::Record(e.to_string());
    match store.node_record(tessera_storage::NODE_CLUSTER_ID).map_err(|e| record(&e))? {
        Some(bytes) if bytes.len() == 8 => {
            let recorded = u64::from_be_bytes(bytes.try_into().expect("8 bytes"));
            if recorded != computed {
                return Err(PlacementError::Disagrees(format!(
                    "cluster id {recorded:016x} was recorded, the configuration (cluster.name and topology) gives {computed:016x}"
                )));
            }
            Ok(recorded)
        }
        _ => {
            store.record_node_record(tessera_storage::NODE_CLUSTER_ID, &computed.to_be_bytes()).map_err(|e| record(&e))?;
            Ok(computed)
        }
    }
}

/// How two maps differ in anything but node addresses, if they do.
fn topology_difference(recorded: &ClusterMap, configured: &ClusterMap) -> Option<String> {
    let ids = |m: &ClusterMap| m.nodes.iter().map(|n| n.id).collect::<Vec<_>>();
    if ids(recorded) != ids(configured) {
        return Some(format!("nodes {:?} were recorded, {:?} are configured", ids(recorded), ids(configured)));
    }
    if recorded.groups.len() != configured.groups.len() {
        return Some(format!(
            "{} data groups were recorded, {} are configured (shard_count)",
            recorded.data_groups().len(),
            configured.data_groups().len()
        ));
    }
    if recorded.replication_factor != configured.replication_factor {
        return Some(format!(
            "replication factor {} was recorded, {} is configured",
            recorded.replication_factor, configured.replication_factor
        ));
    }
    if recorded.strategy != configured.strategy {
        return Some(format!("sharding strategy {:?} was recorded, {:?} is configured", recorded.strategy, configured.strategy));
    }
    (recorded.groups != configured.groups).then(|| "group members differ".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_hosts_the_recorded_placement_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        let store = tessera_storage::Store::open(dir.path()).unwrap();
        let first = initial_map(&nodes(3), 8, 3, ShardingStrategy::Hash);
        assert_eq!(recorded_or_configured(&store, first.clone()).unwrap(), first);
        // Same topology at new addresses: accepted, with the new addresses.
        let mut moved = first.clone();
        moved.nodes[1].addr = "10.0.0.2:9190".into();
        assert_eq!(recorded_or_configured(&store, moved.clone()).unwrap(), moved);
        // A node added since may be listed: the recorded placement rules.
        assert_eq!(recorded_or_configured(&store, initial_map(&nodes(4), 8, 3, ShardingStrategy::Hash)).unwrap(), first);
        for (other, what) in [
            (initial_map(&nodes(3), 4, 3, ShardingStrategy::Hash), "data groups"),
            (initial_map(&nodes(2), 8, 2, ShardingStrategy::Hash), "nodes"),
            (initial_map(&nodes(4), 4, 3, ShardingStrategy::Hash), "nodes"),
            (initial_map(&nodes(3), 8, 1, ShardingStrategy::Hash), "replication factor"),
        ] {
            let e = recorded_or_configured(&store, other).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains("recorded at bootstrap"), "{e}");
        }
        // The cluster id: the same for moved addresses, another for another name.
        let id = cluster_id("tessera", &first);
        assert_eq!(cluster_id("tessera", &moved), id);
        assert_ne!(cluster_id("other", &first), id);
        assert_eq!(recorded_cluster_id(&store, id).unwrap(), id);
        let e = recorded_cluster_id(&store, cluster_id("other", &first)).unwrap_err().to_string();
        assert!(e.contains("cluster id") && e.contains("recorded at bootstrap"), "{e}");
    }

    fn nodes(n: u64) -> Vec<NodeInfo> {
        (1..=n).map(|id| NodeInfo::new(id, format!("127.0.0.1:{}", 9190 + id))).collect()
    }

    #[test]
    fn three_nodes_replicate_everything_everywhere() {
        let map = initial_map(&nodes(3), 8, 3, ShardingStrategy::Hash);
        assert_eq!(map.groups.len(), 9);
        assert!(map.groups.iter().all(|g| g.members.len() == 3));
        assert_eq!(map.groups[2].members, vec![2, 3, 1]);
    }

    #[test]
    fn five_nodes_spread_data_groups() {
        let map = initial_map(&nodes(5), 5, 3, ShardingStrategy::Hash);
        assert_eq!(map.groups[0].members, vec![1, 2, 3]);
        assert_eq!(map.groups[5].members, vec![5, 1, 2]);
    }
}
