//! The initial placement of groups on nodes, computed identically by every node
//! from the shared configuration and recorded once in the meta group.
//!
//! The meta group (0) lives on the first `max(3, replication_factor)` nodes (all of
//! them in a three-node cluster). Data group `g` (1-based) lives on
//! `replication_factor` consecutive nodes starting at node index `(g - 1) mod n`,
//! so leaders and replicas spread evenly.

use tessera_api::META_GROUP;
use tessera_api::meta::{ClusterMap, GroupInfo, NodeInfo, ShardingStrategy};

/// Computes the cluster map for `nodes` (sorted by id).
pub fn initial_map(
    nodes: &[NodeInfo],
    shard_count: u64,
    replication_factor: usize,
    strategy: ShardingStrategy,
) -> ClusterMap {
    let n = nodes.len();
    let rf = replication_factor.min(n).max(1);
    let meta_size = rf.max(3).min(n);
    let mut groups = vec![GroupInfo { id: META_GROUP, members: nodes[..meta_size].iter().map(|x| x.id).collect() }];
    for g in 1..=shard_count {
        let start = ((g - 1) as usize) % n;
        let members = (0..rf).map(|i| nodes[(start + i) % n].id).collect();
        groups.push(GroupInfo { id: g, members });
    }
    ClusterMap { nodes: nodes.to_vec(), strategy, replication_factor: rf, groups }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: u64) -> Vec<NodeInfo> {
        (1..=n).map(|id| NodeInfo { id, addr: format!("127.0.0.1:{}", 9190 + id) }).collect()
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
