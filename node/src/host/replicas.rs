//! Where replicas live: membership changes a group's leader makes (learners,
//! voters), hosting and dropping replicas, split-off children, retirement,
//! and the meta-term fence every control-plane call passes.

use super::*;

impl Host {
    /// On the leader of `group`: removes `node` from its voters and learners and
    /// returns the log index of the membership without it, once committed
    /// (at once when it is no member).
    pub async fn remove_voter(&self, group: GroupId, node: NodeId) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        if !membership.voter_ids().any(|v| v == node) && membership.get_node(&node).is_none() {
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        let change = openraft::ChangeMembers::RemoveVoters([node].into_iter().collect());
        let resp = g.raft.change_membership(change, false).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("removing node {node} from group {group}: {other}")),
        })?;
        info!(group, node, index = resp.log_id.index, "removed a voter");
        Ok(resp.log_id.index)
    }

    /// On the leader of `group`: adds `node` (at `addr`) as a learner and
    /// returns the log index of that membership once the learner has caught up
    /// with the leader's log (at once when it is a member already).
    pub async fn add_learner(&self, group: GroupId, node: NodeId, addr: String) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        if m.membership_config.membership().get_node(&node).is_some_and(|n| n.addr == addr) {
            // Added before (a resumed move, or a call that outlived its timeout):
            // answer once it holds what the group had now, as a first call would,
            // never while it is still empty.
            // The wait ends early when this node stops leading (no replication
            // progress to watch any more): the caller asks the next leader.
            let target = m.last_log_index.unwrap_or(0);
            let me = self.id;
            let caught_up = g
                .raft
                .wait(Some(LEARNER_CATCH_UP))
                .metrics(
                    |m| {
                        !leads_now(m, me)
                            || m.replication
                                .as_ref()
                                .and_then(|r| r.get(&node).cloned().flatten())
                                .is_some_and(|matched| matched.index >= target)
                    },
                    "the learner catches up",
                )
                .await;
            match caught_up {
                Err(e) => return Err(HostError::Unavailable(format!("node {node} has not caught up with group {group} yet: {e}"))),
                Ok(now) if !leads_now(&now, me) => {
                    let leader =
                        known_leader(&now, me).and_then(|l| now.membership_config.membership().get_node(&l).map(|n| (l, n.addr.clone())));
                    return Err(HostError::NotLeader { group, leader });
                }
                Ok(_) => {}
            }
            info!(group, node, target, "the learner added before has caught up");
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        let resp = g.raft.add_learner(node, BasicNode { addr }, true).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("adding node {node} to group {group} as a learner: {other}")),
        })?;
        info!(group, node, index = resp.log_id.index, "added a learner; it has caught up");
        Ok(resp.log_id.index)
    }

    /// On the leader of `group`: makes exactly `voters` its voters (nodes left
    /// out leave the group) and returns the log index of the new membership once
    /// committed.
    ///
    /// With `expected` (a compare-and-set), refused unless the voters are
    /// `expected` now or `voters` already, or the group is half-way (joint)
    /// into a change to `voters`: a caller planning from a stale map cannot
    /// bring back a voter set the group has left.
    pub async fn replace_voters(
        &self,
        group: GroupId,
        voters: std::collections::BTreeSet<NodeId>,
        expected: Option<std::collections::BTreeSet<NodeId>>,
    ) -> Result<u64, HostError> {
        let g = self.leader_group(group)?;
        let m = g.raft.metrics().borrow().clone();
        let current: std::collections::BTreeSet<NodeId> = m.membership_config.voter_ids().collect();
        let learners = m.membership_config.membership().learner_ids().count();
        if current == voters && learners == 0 {
            return Ok(m.membership_config.log_id().map_or(0, |l| l.index));
        }
        // A change to exactly `voters` that stopped half-way (its leader lost the
        // leadership between the joint and the final membership) is finished, not
        // refused: the joint's voters are neither the planned ones nor the target,
        // and nothing else would ever complete it.
        let joint = m.membership_config.membership().get_joint_config();
        let finishing = joint.len() > 1 && joint.last() == Some(&voters);
        if let Some(expected) = expected.filter(|e| *e != current && current != voters && !finishing) {
            return Err(HostError::Unavailable(format!(
                "group {group}'s voters are {current:?}, not the {expected:?} the caller planned from: it planned on stale data"
            )));
        }
        let change = openraft::ChangeMembers::ReplaceAllVoters(voters.clone());
        let resp = g.raft.change_membership(change, false).await.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(format!("changing the voters of group {group} to {voters:?}: {other}")),
        })?;
        info!(group, ?voters, index = resp.log_id.index, "replaced the voters");
        Ok(resp.log_id.index)
    }

    /// The replica of `group`, when this node leads it (and is not drained).
    pub(super) fn leader_group(&self, group: GroupId) -> Result<Arc<Group>, HostError> {
        let g = self.group(group)?;
        let m = g.raft.metrics().borrow().clone();
        if !leads_now(&m, self.id) || self.is_drained() {
            let hint = known_leader(&m, self.id).filter(|l| *l != self.id);
            let leader = hint.and_then(|l| m.membership_config.membership().get_node(&l).map(|n| (l, n.addr.clone())));
            return Err(HostError::NotLeader { group, leader });
        }
        Ok(g)
    }

    /// Starts an empty replica of `group` for its leader to fill as a learner
    /// (it votes once it has applied what the leader sent), and records it so a
    /// restart hosts it again. Answers false when the group is hosted already.
    pub async fn host_group(self: &Arc<Self>, group: GroupId) -> Result<bool, HostError> {
        let _serial = self.placement_changes.lock().await;
        if self.hosts(group) {
            return Ok(false);
        }
        let network = GroupNetwork { group, pool: self.pool.clone() };
        let raft = Raft::new(self.id, self.raft_config.clone(), network, self.store.log_store(group), self.store.state_machine(group))
            .await
            .map_err(|e| HostError::Unavailable(format!("starting a replica of group {group}: {e}")))?;
        // It campaigns only once it holds the group's state. A replica the group
        // never had here may vote at once: it acknowledged nothing, so its empty
        // log keeps no promise (a wiped node is caught by its incarnation), and a
        // floor would keep a group promoted onto it without a quorum of voters
        // while its leader is down. A replica of a group this node held before
        // (moved away, then back) votes only once it applied what the earlier one
        // held ([`Store::delete_group`] keeps that as its floor): a candidate of an
        // older membership still listing this node could otherwise win with its
        // vote without entries the earlier replica helped commit (the
        // `control-plane` chaos fault found that).
        raft.runtime_config().elect(false);
        let floor = self.store.vote_floor(group)?;
        if let Some(floor) = floor {
            info!(group, floor, "this node held the group before: the new replica votes once it applied that far");
        }
        let vote_floor = std::sync::atomic::AtomicU64::new(floor.unwrap_or(NO_VOTE_FLOOR));
        let g = Arc::new(Group::new(raft, self.store.reader(group), vote_floor));
        self.groups.write().unwrap_or_else(|e| e.into_inner()).insert(group, g.clone());
        self.record_hosted_groups()?;
        tokio::spawn(campaign_once_caught_up(self.clone(), group, g));
        info!(group, "hosting a new replica: it fills as a learner, then votes");
        Ok(true)
    }

    /// Replaces this node's replica of `group`, which stopped because it had
    /// applied entries its group lost (see `Store::take_diverged`), by an empty
    /// one its leader fills: what this replica alone holds is not the group's.
    pub(super) async fn rebuild_replica(self: &Arc<Self>, group: GroupId) -> Result<(), HostError> {
        warn!(
            group,
            "this replica applied entries its group lost (sync_on_commit = false and a power cut of several nodes): it is dropped and hosted again empty, for the leader to fill"
        );
        // Children this replica started from its own split applies, never
        // advanced since: the split may be among the lost entries.
        let children = self.store.children_at_their_start(group)?;
        let hosted: Vec<GroupId> =
            children.into_iter().filter(|c| self.groups.read().unwrap_or_else(|e| e.into_inner()).contains_key(c)).collect();
        for replica in std::iter::once(group).chain(hosted) {
            if replica != group {
                warn!(
                    group = replica,
                    parent = group,
                    "the split-off group still holds the start the diverged parent replica gave it: rebuilt too"
                );
            }
            self.drop_group(replica).await?;
            self.store.forget_diverged(replica);
            self.host_group(replica).await?;
        }
        Ok(())
    }

    /// Stops this node's replica of `group` and deletes its data (the replica
    /// moved away), recorded so a restart does not bring it back. Answers false
    /// when the group was not hosted.
    pub async fn drop_group(&self, group: GroupId) -> Result<bool, HostError> {
        let _serial = self.placement_changes.lock().await;
        let Some(g) = self.groups.write().unwrap_or_else(|e| e.into_inner()).remove(&group) else {
            return Ok(false);
        };
        self.record_hosted_groups()?;
        let mut dropped = self.dropped_groups()?;
        if !dropped.contains(&group) {
            dropped.push(group);
            let bytes = serde_json::to_vec(&dropped).map_err(|e| HostError::Unavailable(e.to_string()))?;
            self.store.record_node_record(tessera_storage::NODE_DROPPED_GROUPS, &bytes)?;
        }
        if let Err(e) = g.raft.shutdown().await {
            warn!(group, "shutting down the dropped replica: {e}");
        }
        // Reads and writes that found the replica before it left the map hold
        // it until they answer: a read that passed its linearizable check here
        // (this node led the group until the move) must not find the data gone.
        let deadline = Instant::now() + DROP_DRAIN_TIMEOUT;
        while Arc::strong_count(&g) > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if Arc::strong_count(&g) > 1 {
            warn!(group, "calls to the dropped replica still run after {DROP_DRAIN_TIMEOUT:?}; deleting its data anyway");
        }
        let held = {
            let m = g.raft.metrics().borrow().clone();
            m.last_log_index.unwrap_or(0).max(m.last_applied.map_or(0, |l| l.index))
        };
        drop(g);
        self.store.delete_group(group, held)?;
        info!(group, "dropped this node's replica (it moved to another node); its data is deleted");
        Ok(true)
    }

    /// Starts the groups split off from the groups this node hosts that it does
    /// not host yet (see `tessera_storage::range`): from the starting state the
    /// split left here, or, for a replica that skipped the split through a
    /// snapshot, empty for the child's leader to fill. A child whose replica
    /// moved away from this node is not brought back. Answers the groups started.
    pub async fn adopt_split_children(self: &Arc<Self>) -> Result<Vec<GroupId>, HostError> {
        let dropped = self.dropped_groups()?;
        let mut started = Vec::new();
        for (parent, _) in self.hosted() {
            if parent == tessera_api::META_GROUP {
                continue;
            }
            for (split, seeded) in self.store.split_children(parent)? {
                let child = split.child;
                if self.hosts(child) || dropped.contains(&child) || !split.members.contains(&self.id) {
                    continue;
                }
                if seeded {
                    self.host_split_child(child, self.leads(parent)).await?;
                } else {
                    self.host_group(child).await?;
                }
                started.push(child);
            }
        }
        Ok(started)
    }

    /// Starts the replica of a group split off here from the state the split
    /// left; `campaign`: this node led the parent, so it asks for the child's
    /// leadership at once rather than after an election timeout.
    pub(super) async fn host_split_child(self: &Arc<Self>, group: GroupId, campaign: bool) -> Result<(), HostError> {
        let _serial = self.placement_changes.lock().await;
        if self.hosts(group) {
            return Ok(());
        }
        let network = GroupNetwork { group, pool: self.pool.clone() };
        let raft = Raft::new(self.id, self.raft_config.clone(), network, self.store.log_store(group), self.store.state_machine(group))
            .await
            .map_err(|e| HostError::Unavailable(format!("starting split-off group {group}: {e}")))?;
        if self.is_drained() || self.election_bar().is_some() {
            raft.runtime_config().elect(false);
        }
        let vote_floor = std::sync::atomic::AtomicU64::new(NO_VOTE_FLOOR);
        let g = Arc::new(Group::new(raft, self.store.reader(group), vote_floor));
        self.groups.write().unwrap_or_else(|e| e.into_inner()).insert(group, g.clone());
        self.record_hosted_groups()?;
        if campaign
            && !self.is_drained()
            && self.election_bar().is_none()
            && let Err(e) = g.raft.trigger().elect().await
        {
            warn!(group, "campaigning for the split-off group: {e}");
        }
        info!(group, "hosting a group split off here (its state came with the split)");
        Ok(())
    }

    /// The groups whose replica this node dropped (moved away).
    pub(super) fn dropped_groups(&self) -> Result<Vec<GroupId>, HostError> {
        Ok(match self.store.node_record(tessera_storage::NODE_DROPPED_GROUPS)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| HostError::Unavailable(e.to_string()))?,
            None => Vec::new(),
        })
    }

    pub(super) fn record_hosted_groups(&self) -> Result<(), HostError> {
        let ids: Vec<GroupId> = self.hosted().into_iter().map(|(g, _)| g).collect();
        let bytes = serde_json::to_vec(&ids).map_err(|e| HostError::Unavailable(e.to_string()))?;
        self.store.record_node_record(tessera_storage::NODE_GROUPS, &bytes)?;
        Ok(())
    }

    /// The node was removed from the cluster: records a tombstone (it will not
    /// start on this data directory again) and asks `main` to stop for good.
    pub fn retire(&self) -> Result<(), HostError> {
        self.store.record_node_record(tessera_storage::NODE_REMOVED, &self.id.to_be_bytes())?;
        self.retired.store(true, Ordering::SeqCst);
        info!(node = self.id, "removed from the cluster: stopping for good");
        self.restart.send_replace(true);
        Ok(())
    }

    /// Fencing of the control plane: admits a call a placement driver made as
    /// the meta leader of term `meta_term` (0: an unfenced call, from a router),
    /// unless this node has seen a newer meta leadership — a fenced call's, or
    /// the one its own meta replica follows. A deposed meta leader that has not
    /// noticed yet is refused here. Terms of elections nobody won (this node's
    /// own failed candidacies while cut off) do not count: they would refuse
    /// the legitimate leader until the next election.
    pub fn admit_control(&self, meta_term: u64, what: &str) -> Result<(), HostError> {
        if meta_term == 0 {
            return Ok(());
        }
        let own = self.group(META_GROUP).map_or(0, |g| leadership_term(&g.raft.metrics().borrow().vote));
        let seen = self.control_fence.fetch_max(meta_term, Ordering::SeqCst).max(own);
        if meta_term < seen {
            warn!(meta_term, newer = seen, what, "refused a control-plane call of a deposed meta leader");
            return Err(HostError::Unavailable(format!(
                "{what}: refused, the call comes from the meta leader of term {meta_term} but term {seen} is newer (a deposed leader)"
            )));
        }
        Ok(())
    }
}

/// The term of the leadership `vote` stands for: its term once a leader won
/// it (committed), else 0 (a candidacy, won by nobody yet).
fn leadership_term(vote: &openraft::Vote<NodeId>) -> u64 {
    if vote.is_committed() { vote.leader_id().term } else { 0 }
}

/// Starts split-off groups whenever a hosted group applied a split or
/// installed a snapshot (and once at start: a crash may have come between a
/// split's apply and the child's start), and rebuilds replicas that diverged.
pub(super) async fn follow_splits(host: Arc<Host>) {
    let events = host.store.group_events();
    loop {
        if host.is_stopping() {
            return;
        }
        match host.adopt_split_children().await {
            Ok(started) if !started.is_empty() => info!(?started, "started split-off groups"),
            Ok(_) => {}
            Err(e) => warn!("starting split-off groups: {e}"),
        }
        for group in host.store.take_diverged() {
            if let Err(e) = host.rebuild_replica(group).await {
                warn!(group, "rebuilding the diverged replica: {e}");
            }
        }
        tokio::select! {
            _ = events.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// Watches this node's state in the cluster map its meta replica holds: a node
/// the map marks as leaving drains itself, even when it did not answer the
/// router's drain call (it was down, or the router died half-way).
pub(super) async fn follow_lifecycle_state(host: Arc<Host>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !host.is_stopping() && !host.is_drained() {
        tick.tick().await;
        let leaving = host.recorded_map().and_then(|m| {
            m.node(host.id).map(|n| matches!(n.state, tessera_api::meta::NodeState::Draining | tessera_api::meta::NodeState::Removing))
        });
        if leaving == Some(true)
            && let Err(e) = host.drain()
        {
            warn!("draining as the cluster map asks: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::leadership_term;

    #[test]
    fn only_a_won_election_fences_the_control_plane() {
        // Cut off, this node stood for the meta leadership up to term 12 and lost:
        // the leader of term 10 is still the legitimate one.
        let candidacy = openraft::Vote::new(12, 2);
        assert_eq!(leadership_term(&candidacy), 0);
        // Once a leader of term 12 is known, calls of term 10 come from a deposed one.
        let won = openraft::Vote::new_committed(12, 3);
        assert_eq!(leadership_term(&won), 12);
    }
}
