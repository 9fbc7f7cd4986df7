//! Node localities: each node reports the `cluster.locality` it was started
//! with in its status; the placement driver records the ones the map lacks
//! (or holds differently) in the meta group, where the planner reads them to
//! spread replicas over failure domains ([`tessera_api::placement::crowding`]).

use tessera_api::command::MetaOp;
use tessera_api::meta::{ClusterMap, check_locality};
use tracing::{info, warn};

use super::{ControlHost, meta_write};

/// Records in the meta group the locality every answering node of `map`
/// reports, where the map holds another; answers how many it recorded.
pub(super) async fn record_localities<H: ControlHost>(host: &H, map: &ClusterMap) -> usize {
    let statuses = futures::future::join_all(map.nodes.iter().map(|n| host.status(n))).await;
    let mut recorded = 0;
    for (node, status) in map.nodes.iter().zip(statuses) {
        let Some(status) = status else { continue };
        if status.locality == node.locality {
            continue;
        }
        if let Err(e) = check_locality(&status.locality) {
            warn!(node = node.id, "placement driver: the node reports a locality it cannot use: {e}");
            continue;
        }
        let op = MetaOp::SetNodeLocality { node: node.id, locality: status.locality.clone() };
        match meta_write(host, op, "a node's locality").await {
            Ok(_) => {
                info!(node = node.id, locality = %status.locality, was = %node.locality, "placement driver recorded the node's locality");
                recorded += 1;
            }
            Err(e) => warn!(node = node.id, "placement driver: the node's locality is not recorded: {e}"),
        }
    }
    recorded
}
