//! Reads and writes on a hosted replica: commands stamped with the group's
//! time and proposed, reads at a consistency level, exports, and the
//! storage-wide purges and re-seals an operator asks for.

use super::*;

impl Host {
    /// The time of a new command of `g`: the node's hybrid clock, but never at or
    /// before a stamp the group applied or this node gave, so the group's time
    /// only moves forward whatever the clocks of successive leaders say.
    pub(super) fn stamp(&self, g: &Group) -> i64 {
        let applied = g.reader.applied_clock().ok().flatten().unwrap_or(i64::MIN);
        let floor = applied.saturating_add(1);
        let mut stamp = self.clock.now_ms().max(floor);
        let mut last = g.last_stamp.load(Ordering::SeqCst);
        loop {
            stamp = stamp.max(last.saturating_add(1));
            match g.last_stamp.compare_exchange(last, stamp, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return stamp,
                Err(current) => last = current,
            }
        }
    }

    /// The time reads of `g` judge expiry by: the hybrid clock, but never before
    /// the group's applied clock (a lagging clock must not bring an expired key back).
    pub(super) fn read_time(&self, g: &Group) -> i64 {
        let applied = g.reader.applied_clock().ok().flatten().unwrap_or(i64::MIN);
        self.clock.now_ms().max(applied)
    }

    /// Stamps `op` with the group's next time (see [`Host::stamp`]) and proposes it; leader only.
    pub async fn write(
        &self,
        group: GroupId,
        op: Operation,
        request_id: Option<String>,
        consistency: Consistency,
    ) -> Result<Response, HostError> {
        let g = self.group(group)?;
        self.refuse_if_drained_leader(group)?;
        let size = super::proposals::sql_payload_size(op.unwrapped());
        if size > super::proposals::MAX_COMMAND_BYTES {
            let message = format!(
                "this write holds about {} KiB of statements and parameters; one write holds at most {} KiB: split it",
                size >> 10,
                super::proposals::MAX_COMMAND_BYTES >> 10
            );
            return Ok(Response::Rejected(tessera_api::error::Rejection::new(tessera_api::error::ErrorCode::Invalid, message)));
        }
        let issued_at_ms = self.stamp(&g);
        if g.reader.checks_before_propose(&op) && super::leadership::leads_now(&g.raft.metrics().borrow(), self.id) {
            let (reader, checked) = (g.reader.clone(), op.clone());
            let refusal = self.queries.run(move || reader.check_before_propose(&checked, issued_at_ms)).await?;
            if let Some(refusal) = refusal {
                return Ok(Response::Rejected(refusal));
            }
        }
        let cmd = Command { issued_at_ms, op, request_id };
        let proposed = g.proposals.propose(&g.raft, self.batch_limits, cmd).await;
        self.settle(group, proposed, consistency).await
    }

    /// Several writes of `group`, answered in order: the key-value and SQL writes
    /// that need no check before they are proposed go into the log together (one
    /// entry per batch, see [`super::proposals::Proposals::propose_many`]), the
    /// others each as [`Host::write`] would.
    pub async fn write_many(
        &self,
        group: GroupId,
        writes: Vec<(Operation, Option<String>, Consistency)>,
    ) -> Vec<Result<Response, HostError>> {
        let g = match self.group(group) {
            Ok(g) if self.refuse_if_drained_leader(group).is_ok() => g,
            // Each write gets the refusal it would get alone.
            _ => return futures::future::join_all(writes.into_iter().map(|(op, id, c)| self.write(group, op, id, c))).await,
        };
        let mut batched = Vec::new();
        let mut alone = Vec::new();
        for (i, (op, request_id, consistency)) in writes.into_iter().enumerate() {
            let size = super::proposals::sql_payload_size(op.unwrapped());
            if op.batchable() && !g.reader.checks_before_propose(&op) && size <= super::proposals::MAX_COMMAND_BYTES {
                batched.push((i, Command { issued_at_ms: self.stamp(&g), op, request_id }, consistency));
            } else {
                alone.push((i, op, request_id, consistency));
            }
        }
        let (slots, cmds): (Vec<(usize, Consistency)>, Vec<Command>) = batched.into_iter().map(|(i, cmd, c)| ((i, c), cmd)).unzip();
        let proposed = g.proposals.propose_many(&g.raft, self.batch_limits, cmds);
        let alone =
            futures::future::join_all(alone.into_iter().map(|(i, op, id, c)| async move { (i, self.write(group, op, id, c).await) }));
        let (proposed, alone) = futures::join!(proposed, alone);
        let settled = futures::future::join_all(
            slots.into_iter().zip(proposed).map(|((i, c), proposed)| async move { (i, self.settle(group, proposed, c).await) }),
        )
        .await;
        let mut answers: Vec<(usize, Result<Response, HostError>)> = settled.into_iter().chain(alone).collect();
        answers.sort_by_key(|(i, _)| *i);
        answers.into_iter().map(|(_, answer)| answer).collect()
    }

    /// A proposal's answer to its caller: the command's response once it is
    /// committed and applied (on every voter for `Consistency::All`).
    async fn settle(&self, group: GroupId, proposed: super::proposals::Proposed, consistency: Consistency) -> Result<Response, HostError> {
        let (response, log_index) = proposed.map_err(|e| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(other.to_string()),
        })?;
        if consistency == Consistency::All {
            self.wait_all_applied(group, log_index).await?;
        }
        Ok(response)
    }

    /// Answers `query` with the requested consistency.
    pub async fn read(&self, group: GroupId, query: Query, consistency: Consistency) -> Result<QueryResult, HostError> {
        let g = self.group(group)?;
        if consistency != Consistency::One {
            self.refuse_if_drained_leader(group)?;
            let read_log_id = g.raft.ensure_linearizable().await.map_err(|e| match e {
                RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => HostError::forward(group, f),
                other => HostError::Unavailable(other.to_string()),
            })?;
            let read_index = read_log_id.map(|l| l.index);
            if consistency == Consistency::All
                && let Some(index) = read_index
            {
                self.wait_all_applied(group, index).await?;
            }
        }
        let reader = g.reader.clone();
        let now = self.read_time(&g);
        // A point read is answered here: handing it to a query thread and back
        // costs more than the read (see `GroupReader::query_point`).
        if let Some(answer) = reader.query_point(&query, now) {
            return Ok(answer);
        }
        Ok(self.queries.run_cancellable(move |cancel| reader.query_cancellable(&query, now, Some(cancel))).await??)
    }

    /// Exports `group`'s records (this node must lead it) after a read-index
    /// barrier, so the export holds every write acknowledged before the call;
    /// answers the export's id and what it holds.
    pub async fn export_group(&self, group: GroupId) -> Result<(String, tessera_storage::backup::ExportInfo), HostError> {
        let g = self.group(group)?;
        self.refuse_if_drained_leader(group)?;
        g.raft.ensure_linearizable().await.map_err(|e| match e {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => HostError::forward(group, f),
            other => HostError::Unavailable(other.to_string()),
        })?;
        let id = format!("{group}-{:016x}", rand::random::<u64>());
        let reader = g.reader.clone();
        let export_id = id.clone();
        let info =
            tokio::task::spawn_blocking(move || reader.export(&export_id)).await.map_err(|e| HostError::Unavailable(e.to_string()))??;
        info!(group, export = id, applied_index = info.applied_index, pairs = info.pairs, "exported the group for a backup");
        Ok((id, info))
    }

    /// One page of an export of `group` made by [`Host::export_group`].
    pub async fn read_export(
        &self,
        group: GroupId,
        id: String,
        offset: u64,
        frame: u64,
        max_bytes: usize,
    ) -> Result<tessera_storage::backup::ExportPage, HostError> {
        let reader = self.group(group)?.reader.clone();
        Ok(tokio::task::spawn_blocking(move || reader.read_export(&id, offset, frame, max_bytes))
            .await
            .map_err(|e| HostError::Unavailable(e.to_string()))??)
    }

    /// A drained node that still leads `group` serves nothing a leader serves
    /// (so no message of it renews its followers' leases): they elect another
    /// leader, and the caller retries there.
    pub(super) fn refuse_if_drained_leader(&self, group: GroupId) -> Result<(), HostError> {
        if (self.is_drained() || self.is_handing_off(group)) && self.leads(group) {
            return Err(HostError::NotLeader { group, leader: None });
        }
        Ok(())
    }

    /// Waits until every voter of `group` has applied `index`.
    pub(super) async fn wait_all_applied(&self, group: GroupId, index: u64) -> Result<(), HostError> {
        let g = self.group(group)?;
        let voters: Vec<NodeId> = g.raft.metrics().borrow().membership_config.voter_ids().collect();
        // Followers learn of a commit from the next append, or a tenth of a heartbeat later
        // (third_party/README.md); a heartbeat now tells them at once.
        let _ = g.raft.trigger().heartbeat().await;
        let deadline = Instant::now() + ALL_APPLIED_TIMEOUT;
        let mut pending: Vec<NodeId> = voters;
        loop {
            let mut still = Vec::new();
            for node in pending {
                let applied = if node == self.id { self.applied_index(group).ok() } else { self.peer_applied(node, group).await };
                if applied.is_none_or(|a| a < index) {
                    still.push(node);
                }
            }
            if still.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                warn!(group, index, ?still, "not applied on every voter in time");
                return Err(HostError::NotAppliedEverywhere(ALL_APPLIED_TIMEOUT));
            }
            pending = still;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(super) async fn peer_applied(&self, node: NodeId, group: GroupId) -> Option<u64> {
        let live = self.recorded_map().and_then(|m| m.addr_of(node).map(str::to_string));
        let addr = live.or_else(|| self.map.addr_of(node).map(str::to_string))?;
        let mut client = self.pool.data_client(node, &addr).ok()?;
        let mut req = tonic::Request::new(AppliedRequest { group_id: group });
        req.set_timeout(Duration::from_millis(500));
        let reply = client.applied(req).await.ok()?.into_inner();
        reply.hosted.then_some(reply.last_applied)
    }

    /// Makes what a secure erasure deleted leave this node's files: for each
    /// hosted group of `groups`, a snapshot of the applied state and a purge of
    /// the log up to it (waiting for both until `timeout`); then every column
    /// family flushed and compacted (on a blocking thread), which also retires
    /// the WAL files that held the records. Answers the groups purged.
    pub async fn purge_erased(&self, groups: &[GroupId], timeout: Duration) -> Result<Vec<GroupId>, HostError> {
        // One purge at a time per node: each compacts the whole store.
        let _turn = ONE_COMPACTION_AT_A_TIME.lock().await;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut purged = Vec::new();
        for &id in groups {
            let Ok(g) = self.group(id) else { continue };
            // A replica applies what it holds first (the erasure itself, on a follower).
            let held = {
                let m = g.raft.metrics().borrow().clone();
                m.last_log_index.unwrap_or(0).max(m.last_applied.map_or(0, |l| l.index))
            };
            let applied = wait_metric(&g, deadline, |m| m.last_applied.map(|l| l.index).filter(|i| *i >= held))
                .await
                .ok_or_else(|| HostError::Unavailable(format!("group {id}: entries up to {held} not applied within {timeout:?}")))?;
            let fatal = |e: openraft::error::Fatal<NodeId>| HostError::Unavailable(format!("group {id}: {e}"));
            g.raft.trigger().snapshot().await.map_err(fatal)?;
            let snapshot = wait_metric(&g, deadline, |m| m.snapshot.map(|l| l.index).filter(|i| *i >= applied))
                .await
                .ok_or_else(|| HostError::Unavailable(format!("group {id}: no snapshot at index {applied} within {timeout:?}")))?;
            g.raft.trigger().purge_log(snapshot).await.map_err(fatal)?;
            wait_metric(&g, deadline, |m| m.purged.map(|l| l.index).filter(|i| *i >= snapshot)).await.ok_or_else(|| {
                HostError::Unavailable(format!(
                    "group {id}: its log was not purged up to {snapshot} within {timeout:?} (a replica behind?)"
                ))
            })?;
            purged.push(id);
        }
        // A snapshot being received was built before the erasure and may hold
        // the erased records: the purge (and so the certificate) waits until
        // every transfer in progress has ended, installed or removed.
        loop {
            let receiving = self.store.snapshots_receiving(groups);
            if receiving.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::Unavailable(format!(
                    "snapshots of groups {receiving:?} are still being received after {timeout:?}; the erasure is not certified until they end"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // An unread backup export taken before the erasure still holds the erased
        // records: remove it (that backup fails and is taken again).
        let exports = self.store.remove_exports_of(groups)?;
        if exports > 0 {
            info!(exports, "removed unread backup exports of erased groups");
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.compact_everything())
            .await
            .map_err(|e| HostError::Unavailable(format!("compaction: {e}")))??;
        Ok(purged)
    }

    /// After an encryption key rotation, rewrites what this node stores under
    /// its current key (unless `count_only`): every stored snapshot file, then
    /// a full compaction whose filter re-seals old values
    /// ([`tessera_storage::reseal`]). Answers the values re-sealed since the
    /// node started and how many values or snapshot files still need a previous key.
    pub async fn reseal(&self, count_only: bool) -> Result<(u64, u64), HostError> {
        // One at a time per node (each compacts the whole store), shared with secure-erasure purges.
        let _turn = ONE_COMPACTION_AT_A_TIME.lock().await;
        let store = self.store.clone();
        let needing = tokio::task::spawn_blocking(move || {
            if !count_only {
                store.reseal_everything()?;
            }
            store.needing_previous_keys()
        })
        .await
        .map_err(|e| HostError::Unavailable(format!("re-sealing: {e}")))??;
        Ok((self.store.resealed(), needing))
    }
}
