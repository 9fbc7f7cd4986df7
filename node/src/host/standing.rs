//! Whether this node may take part in elections: its data directory checked
//! against a majority of its peers at start (wiped, rolled back), its
//! generation advanced, and its peers' incarnations learnt.

use super::*;

impl Host {
    /// Why this node takes no part in elections now (`None`: it does): peers
    /// have not yet confirmed its data directory, or it was wiped or rolled back.
    pub fn election_bar(&self) -> Option<String> {
        match &*self.standing.read().unwrap_or_else(|e| e.into_inner()) {
            Standing::Confirmed => None,
            Standing::Checking => {
                Some(format!("node {} is waiting for a majority of the cluster to confirm that its data directory is current", self.id))
            }
            Standing::Lost(reason) => Some(reason.clone()),
        }
    }

    /// Whether the node can take its share of the work: not stopping, and every
    /// group placed on it started, knows a leader and may vote (has caught up).
    pub fn readiness(&self) -> Result<(), NotReady> {
        if self.is_stopping() {
            return Err(NotReady::Stopping);
        }
        if let Some(reason) = self.election_bar() {
            return Err(NotReady::ElectionBarred(reason));
        }
        if let Some(failed) = self.failed_groups.first() {
            return Err(NotReady::GroupFailed(*failed));
        }
        for (id, g) in self.hosted() {
            // A leader that left its group still names itself: that replica is on its way out, not waiting.
            if g.raft.metrics().borrow().current_leader.is_none() {
                return Err(NotReady::NoLeader(id));
            }
            if !g.may_vote() {
                return Err(NotReady::CatchingUp(id));
            }
        }
        Ok(())
    }
}

/// Asks the peers of `map` what they recorded for this node until a majority
/// of the cluster (this node included) has answered, retrying unreachable
/// peers every 500 ms: lost when one knew it under another incarnation or a
/// later generation, else confirmed. Peers of another cluster do not count.
pub(super) async fn check_standing(pool: &PeerPool, map: &ClusterMap, id: NodeId) -> Standing {
    let inc = &pool.incarnations;
    let (own, at_open) = (inc.own(), inc.generation_at_open());
    let needed = map.nodes.len() / 2; // peers, besides this node, that make a majority
    let mut answered = std::collections::BTreeSet::new();
    let mut waited_long = false;
    let started = Instant::now();
    loop {
        let asks = map.nodes.iter().filter(|n| n.id != id && !answered.contains(&n.id)).map(|n| async move {
            let mut client = pool.data_client(n.id, &n.addr).ok()?;
            let ask = tessera_api::rpc::StatusRequest { from_node: id, from_incarnation: own, from_generation: 0 };
            let mut req = tonic::Request::new(ask);
            req.set_timeout(Duration::from_secs(2));
            let r = client.status(req).await.ok()?.into_inner();
            (r.cluster_id == pool.cluster_id || r.cluster_id == 0).then_some((n.id, r))
        });
        for (peer, r) in futures::future::join_all(asks).await.into_iter().flatten() {
            if r.your_incarnation != 0 && r.your_incarnation != own {
                return Standing::Lost(format!(
                    "this node's data directory was replaced: node {peer} knew it as incarnation {:016x}, it is now \
                     {own:016x}. It has lost the votes and entries it acknowledged, so it initializes no group, does \
                     not vote and does not campaign until it is removed and re-added; it still replicates",
                    r.your_incarnation
                ));
            }
            if r.your_generation > at_open {
                return Standing::Lost(format!(
                    "this node's data directory was rolled back to an older copy: node {peer} heard generation {} \
                     from it, the directory holds {at_open}. It may have lost votes and entries it acknowledged, so it \
                     does not vote and does not campaign until it is removed and re-added; it still replicates",
                    r.your_generation
                ));
            }
            answered.insert(peer);
        }
        if answered.len() >= needed {
            info!(answered = answered.len(), "peers confirmed this data directory is current: it takes part in elections");
            return Standing::Confirmed;
        }
        if !waited_long && started.elapsed() > Duration::from_secs(10) {
            waited_long = true;
            warn!(
                answered = answered.len(),
                needed, "waiting for a majority of the cluster to confirm this data directory before taking part in elections"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Settles the node's [`Standing`] with its peers; once confirmed, initializes
/// the fresh groups this start bootstraps (`bootstrap`: group and members) and
/// lets every hosted group campaign (or campaign once caught up).
pub(super) async fn settle_standing(host: Arc<Host>, bootstrap: Vec<(GroupId, BTreeMap<NodeId, BasicNode>)>) {
    let standing = check_standing(&host.pool, &host.map, host.id).await;
    let _serial = host.placement_changes.lock().await;
    *host.standing.write().unwrap_or_else(|e| e.into_inner()) = standing.clone();
    if let Standing::Lost(reason) = standing {
        tracing::error!("{reason}");
        return;
    }
    // Told only now: a peer told before it answered would report the new
    // generation back as a later state of this directory.
    tokio::spawn(advance_generation_periodically(host.clone()));
    let initialized: Vec<GroupId> = bootstrap.iter().map(|(group, _)| *group).collect();
    for (group, members) in bootstrap {
        let Ok(g) = host.group(group) else { continue };
        match g.raft.initialize(members).await {
            Ok(()) => info!(group, "initialized group"),
            Err(RaftError::APIError(InitializeError::NotAllowed(e))) => info!(group, "group already initialized: {e}"),
            Err(e) => tracing::error!(group, "initializing the group failed: {e}"),
        }
    }
    if host.is_drained() {
        return;
    }
    // Replicas that hold something (or bootstrap their group) campaign now;
    // the others once they have caught up.
    for (group, g) in host.hosted() {
        let holds = g.reader.applied().ok().flatten().is_some() || initialized.contains(&group);
        if g.may_vote() && holds {
            g.raft.runtime_config().elect(true);
        } else {
            tokio::spawn(campaign_once_caught_up(host.clone(), group, g));
        }
    }
}

/// Every [`GENERATION_PERIOD`](crate::incarnation::GENERATION_PERIOD), raises
/// this data directory's generation (synced) and tells every peer, so that a
/// copy of the directory older than that is found out at its next start.
pub(super) async fn advance_generation_periodically(host: Arc<Host>) {
    let inc = host.pool.incarnations.clone();
    let mut generation = inc.generation();
    let mut told_all_once = false;
    loop {
        if host.is_stopping() {
            return;
        }
        let recorded = host.recorded_map();
        // Nodes removed since: what was recorded of them is forgotten (see
        // `Incarnations::forget`), on the map this node's meta replica applied.
        if let Some(map) = &recorded {
            for node in inc.recorded_nodes().into_iter().filter(|n| map.node(*n).is_none()) {
                inc.forget(node);
            }
        }
        let map = recorded.unwrap_or_else(|| host.map.clone());
        let tells = map.nodes.iter().filter(|n| n.id != host.id).map(|n| {
            let pool = host.pool.clone();
            let (addr, peer, from_node, from_incarnation) = (n.addr.clone(), n.id, host.id, inc.own());
            async move {
                let mut client = pool.data_client(peer, &addr).ok()?;
                let tell = tessera_api::rpc::StatusRequest { from_node, from_incarnation, from_generation: generation };
                let mut req = tonic::Request::new(tell);
                req.set_timeout(Duration::from_secs(2));
                client.status(req).await.ok().map(|_| ())
            }
        });
        let told = futures::future::join_all(tells).await;
        if !told_all_once && told.iter().all(Option::is_some) {
            told_all_once = true;
            info!(generation, "told every peer this data directory's generation");
        }
        tokio::time::sleep(crate::incarnation::GENERATION_PERIOD).await;
        generation = match inc.advance_generation() {
            Ok(g) => g,
            Err(e) => {
                warn!("raising the data directory's generation failed: {e}");
                continue;
            }
        };
    }
}

/// The cluster map and id a peer holds (its meta replica's map), asking the
/// configured peers in turn for up to 30 s; `None` when none answers with one.
pub(super) async fn live_map_from_peers(pool: &PeerPool, peers: &[tessera_api::meta::NodeInfo], id: NodeId) -> Option<(ClusterMap, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for peer in peers.iter().filter(|p| p.id != id) {
            let Ok(mut client) = pool.data_client(peer.id, &peer.addr) else { continue };
            let mut req = tonic::Request::new(tessera_api::rpc::StatusRequest { from_node: id, ..Default::default() });
            req.set_timeout(Duration::from_secs(2));
            let Ok(reply) = client.status(req).await.map(|r| r.into_inner()) else { continue };
            if reply.cluster_map.is_empty() || reply.cluster_id == 0 {
                continue;
            }
            match tessera_api::codec::decode::<ClusterMap>(&reply.cluster_map) {
                Ok(map) => return Some((map, reply.cluster_id)),
                Err(e) => warn!(peer = peer.id, "undecodable cluster map from a peer: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Asks every peer of the cluster map for its incarnation (`Status`), retrying
/// unreachable ones, until this node has one for each (see `incarnation`).
pub(super) async fn learn_peer_incarnations(host: Arc<Host>) {
    let mut pending: Vec<(NodeId, String)> = host.map.nodes.iter().filter(|n| n.id != host.id).map(|n| (n.id, n.addr.clone())).collect();
    while !pending.is_empty() {
        let mut left = Vec::new();
        for (peer, addr) in pending {
            let reply = match host.pool.data_client(peer, &addr) {
                Ok(mut client) => {
                    let mut req = tonic::Request::new(tessera_api::rpc::StatusRequest { from_node: host.id, ..Default::default() });
                    req.set_timeout(std::time::Duration::from_secs(2));
                    client.status(req).await.ok().map(|r| r.into_inner())
                }
                Err(_) => None,
            };
            match reply {
                Some(r) if r.cluster_id != 0 && r.cluster_id != host.pool.cluster_id => {
                    warn!(
                        peer,
                        "the node at {addr} belongs to cluster {:016x}, not this one ({:016x})", r.cluster_id, host.pool.cluster_id
                    );
                    left.push((peer, addr));
                }
                // A mismatch is reported (once) by the check itself.
                Some(r) if r.node_id == peer => {
                    let _ = host.pool.incarnations.check(peer, r.incarnation);
                }
                _ => left.push((peer, addr)),
            }
        }
        pending = left;
        if !pending.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    info!("this node knows the incarnation of every peer");
}

/// Why a node is not ready to take its share of the work (`GET /readyz`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("the node is shutting down")]
    Stopping,
    /// It may not vote yet (its standing in the cluster is being checked, or is lost).
    #[error("{0}")]
    ElectionBarred(String),
    #[error("group {0} failed to start on this node (see its log)")]
    GroupFailed(GroupId),
    #[error("group {0} has no known leader yet")]
    NoLeader(GroupId),
    #[error("group {0}'s replica is still catching up")]
    CatchingUp(GroupId),
}
