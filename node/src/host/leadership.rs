//! Who leads a group from here: drains, hand-offs, campaigns (including the
//! drained voter's last resort), and the meta leadership the control plane
//! confirms with a quorum.

use openraft::{RaftMetrics, ServerState};

use super::*;

/// The leader the metrics of node `me`'s replica name. openraft derives it
/// from the vote alone, so a leader that removed itself from its group (a
/// replica moved off it) keeps naming itself after it stepped down: that
/// claim is dropped here, and nothing waits on leader work it can no longer do.
pub(crate) fn known_leader(m: &RaftMetrics<NodeId, BasicNode>, me: NodeId) -> Option<NodeId> {
    m.current_leader.filter(|l| *l != me || m.state == ServerState::Leader)
}

/// Whether node `me`'s replica leads its group now (see [`known_leader`]).
pub(crate) fn leads_now(m: &RaftMetrics<NodeId, BasicNode>, me: NodeId) -> bool {
    known_leader(m, me) == Some(me)
}

impl Host {
    /// Drains the node (recorded, so it survives a restart): every group stops
    /// campaigning here and, where this node leads, stops its heartbeats; the
    /// followers elect another leader once their lease runs out (openraft 0.9 has
    /// no leader transfer). Returns the groups it led when asked.
    pub fn drain(&self) -> Result<Vec<GroupId>, HostError> {
        self.store.record_node_record(tessera_storage::NODE_DRAINED, &[])?;
        let led = self.stop_leading();
        info!(node = self.id, ?led, "drained: this node no longer campaigns or leads");
        Ok(led)
    }

    /// Every group stops campaigning here and, where this node leads, stops its
    /// heartbeats; leader work is refused from now on. Answers the groups led.
    pub(super) fn stop_leading(&self) -> Vec<GroupId> {
        self.drained.store(true, Ordering::SeqCst);
        self.pool.leaving.leave_all();
        let mut led = Vec::new();
        for (id, g) in self.hosted() {
            g.raft.runtime_config().elect(false);
            g.raft.runtime_config().heartbeat(false);
            if self.leads(id) {
                led.push(id);
            }
        }
        led
    }

    /// Gives up every leadership before the node is stopped (not recorded: the
    /// next start campaigns again): as [`Host::drain`] in memory, then waits
    /// until no group is led here, at most `timeout`. Answers the groups led
    /// when asked and those still led at the end.
    pub async fn release_leadership(&self, timeout: Duration) -> (Vec<GroupId>, Vec<GroupId>) {
        let led = self.stop_leading();
        info!(node = self.id, ?led, "releasing leadership before stopping");
        let deadline = Instant::now() + timeout;
        loop {
            let still: Vec<GroupId> = self.hosted().into_iter().map(|(id, _)| id).filter(|&id| self.leads(id)).collect();
            if still.is_empty() || Instant::now() >= deadline {
                if still.is_empty() {
                    info!(node = self.id, "every group this node led has another leader");
                } else {
                    warn!(node = self.id, ?still, "still leading when the release timed out");
                }
                return (led, still);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether this node is handing `group`'s leadership off.
    pub(super) fn is_handing_off(&self, group: GroupId) -> bool {
        self.pool.leaving.handing_off(group)
    }

    /// Hands the leadership of `group` off (openraft 0.9 has no leader
    /// transfer): this replica stops campaigning for the group and, while it
    /// leads, sends no heartbeats and refuses leader work, so the followers'
    /// leases run out and one of them (the one asked to [`Host::campaign`]) is
    /// elected. First it waits (at most [`HAND_OFF_CATCH_UP`]) until `to` holds
    /// its whole log, so the successor's votes are not refused for a short log.
    /// Once another node leads, or after `timeout`, the replica campaigns and
    /// heartbeats again (unless the node was drained meanwhile). Answers false
    /// when this node does not lead the group.
    pub async fn hand_off(self: &Arc<Self>, group: GroupId, to: NodeId, timeout: Duration) -> Result<bool, HostError> {
        let g = self.group(group)?;
        if !self.leads(group) {
            return Ok(false);
        }
        self.pool.leaving.insert(group);
        let caught_up_by = Instant::now() + HAND_OFF_CATCH_UP;
        loop {
            let m = g.raft.metrics().borrow().clone();
            let matched = m.replication.as_ref().and_then(|r| r.get(&to)).and_then(|l| l.map(|l| l.index));
            if matched >= m.last_log_index || Instant::now() >= caught_up_by {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        g.raft.runtime_config().elect(false);
        g.raft.runtime_config().heartbeat(false);
        info!(group, "handing the leadership off");
        let host = self.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + timeout;
            while host.leads(group) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            host.pool.leaving.remove(group);
            if !host.is_drained() {
                g.raft.runtime_config().elect(true);
                g.raft.runtime_config().heartbeat(true);
            }
            let leader = known_leader(&g.raft.metrics().borrow(), host.id);
            info!(group, ?leader, "leadership hand-off over");
        });
        Ok(true)
    }

    /// Campaigns for `group` until this replica leads it, another node than
    /// `previous` leads it, or `timeout` passes; answers the leader then (if
    /// known). Votes are granted once the voters' lease on the previous leader
    /// ran out (an election timeout after its last heartbeat).
    pub async fn campaign(&self, group: GroupId, previous: Option<NodeId>, timeout: Duration) -> Result<Option<NodeId>, HostError> {
        let g = self.group(group)?;
        if self.is_drained() {
            return Err(HostError::Unavailable(format!("node {} is drained: it does not campaign", self.id)));
        }
        if !g.raft.metrics().borrow().membership_config.voter_ids().any(|v| v == self.id) {
            return Err(HostError::Unavailable(format!("node {} is no voter of group {group}", self.id)));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let leader = known_leader(&g.raft.metrics().borrow(), self.id);
            if leader == Some(self.id) || (leader.is_some() && leader != previous) || Instant::now() >= deadline {
                return Ok(leader);
            }
            if let Err(e) = g.raft.trigger().elect().await {
                return Err(HostError::Unavailable(format!("group {group}: {e}")));
            }
            // Each attempt raises the term; voters refuse until their lease on the
            // previous leader ran out, so a few attempts per lease are enough.
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }

    /// Notes that a leader's append or snapshot chunk for `group` reached this replica.
    pub fn leader_heard(&self, group: GroupId) {
        if let Ok(g) = self.group(group) {
            g.leader_heard_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }

    /// A drained node neither campaigns nor leads, but it stays a voter of its
    /// groups, and when its log is longer than the live candidates' it may be
    /// the only replica that can be elected: without its campaign the group
    /// would stay leaderless with a majority of its voters up (the control-plane
    /// chaos profile found a drain waiting forever for such a group). So when it
    /// has just refused a candidate its vote because its own log is longer, and
    /// no leader has reached it for an election timeout, it campaigns (a few
    /// times in a row, at most once per two election timeouts). Once it leads, its heartbeats stay
    /// off and leader work is refused, as for any drained node, so the
    /// followers elect another leader as soon as they hold its log.
    pub fn campaign_as_last_resort(&self, group: GroupId, refused_for_longer_log: bool) {
        if !refused_for_longer_log || !self.is_drained() {
            return;
        }
        let Ok(g) = self.group(group) else { return };
        let now = self.started.elapsed().as_millis() as u64;
        let timeout = self.raft_config.election_timeout_max;
        let silent = now.saturating_sub(g.leader_heard_ms.load(Ordering::Relaxed)) > timeout;
        let last = g.last_resort_ms.load(Ordering::Relaxed);
        let rested = last == 0 || now.saturating_sub(last) > 2 * timeout;
        if !silent || !rested || self.leads(group) || !g.may_vote() {
            return;
        }
        g.last_resort_ms.store(now, Ordering::Relaxed);
        info!(group, "drained, but this replica's log is longer than the candidates': it campaigns as a last resort");
        let (raft, id) = (g.raft.clone(), self.id);
        tokio::spawn(async move {
            // The first campaign usually runs in a term the candidates passed
            // (this replica refused them without taking their term); its
            // answers carry their term, and the next campaign runs above it,
            // before the candidates' next election timeout.
            for _ in 0..LAST_RESORT_ATTEMPTS {
                if let Err(e) = raft.trigger().elect().await {
                    warn!(group, "last-resort campaign: {e}");
                    return;
                }
                tokio::time::sleep(LAST_RESORT_PAUSE).await;
                if leads_now(&raft.metrics().borrow(), id) {
                    info!(group, "leads as a last resort: its heartbeats stay off, so the followers elect another leader");
                    return;
                }
            }
        });
    }

    /// Whether the node was drained.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::SeqCst)
    }

    /// Confirms that this node leads the meta group with a read-index round (a
    /// quorum of the group acknowledges its leadership now; a leader cut off
    /// from its followers fails it) and answers the term of that leadership: the
    /// fence its control-plane calls carry. `None` when it does not lead.
    pub async fn confirm_meta_leadership(&self) -> Option<u64> {
        let g = self.group(META_GROUP).ok()?;
        if self.is_drained() || !leads_now(&g.raft.metrics().borrow(), self.id) {
            return None;
        }
        let confirmed = tokio::time::timeout(Duration::from_secs(5), g.raft.ensure_linearizable()).await;
        if !matches!(confirmed, Ok(Ok(_))) {
            return None;
        }
        let m = g.raft.metrics().borrow().clone();
        leads_now(&m, self.id).then_some(m.current_term)
    }

    /// Whether this node currently leads `group`.
    pub fn leads(&self, group: GroupId) -> bool {
        self.group(group).is_ok_and(|g| leads_now(&g.raft.metrics().borrow(), self.id))
    }
}

/// Lets a replica below its vote floor campaign again once it has caught up.
pub(super) async fn campaign_once_caught_up(host: Arc<Host>, group: GroupId, g: Arc<Group>) {
    // An empty replica may vote (see `host_group`) but campaigns only once it
    // holds something: its campaigns could not win and would only raise the
    // term. No replica campaigns before peers confirmed this data directory.
    while !g.may_vote() || g.reader.applied().ok().flatten().is_none() || host.election_bar().is_some() {
        if matches!(*host.standing.read().unwrap_or_else(|e| e.into_inner()), Standing::Lost(_)) {
            return;
        }
        if host.is_stopping() || !host.hosts(group) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if host.is_drained() {
        return;
    }
    g.raft.runtime_config().elect(true);
    info!(group, "replica caught up: it campaigns again");
}
