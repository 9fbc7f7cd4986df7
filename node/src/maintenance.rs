//! Background maintenance of the data groups, run by each group's leader:
//! time-series retention, channel retention and the sweep of abandoned object
//! uploads. One command per group and period from whichever node leads the
//! group, however many routers there are; the command carries the leader's
//! time like every write, so replicas apply the same cut.

use std::sync::Arc;
use std::time::Duration;

use tessera_api::META_GROUP;
use tessera_api::command::{Operation, Response};
use tessera_api::object::ObjectOp;
use tessera_api::rpc::Consistency;
use tessera_api::stream::StreamOp;
use tessera_api::timeseries::TsOp;
use tracing::{debug, info, warn};

use crate::config::MaintenanceSection;
use crate::host::Host;

/// How long one maintenance write may wait for its commit at least.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the maintenance tasks of this node's groups; `default_retention_ms`
/// (`storage.retention.default_duration`) applies to metrics without a policy.
pub fn spawn(host: Arc<Host>, cfg: &MaintenanceSection, default_retention_ms: Option<i64>) {
    let max_age_ms = i64::try_from(cfg.upload_max_age_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let retention = move || match default_retention_ms {
        Some(drop_after_ms) => Operation::TimeSeries(TsOp::EnforceRetentionWithDefault { drop_after_ms }),
        None => Operation::TimeSeries(TsOp::EnforceRetention),
    };
    tokio::spawn(run_as_leader(host.clone(), "time-series retention", Duration::from_secs(cfg.retention_interval_secs.max(1)), retention));
    let tasks: [(&'static str, u64, fn(i64) -> Operation); 2] = [
        ("channel retention", cfg.stream_retention_interval_secs, |_| Operation::Stream(StreamOp::EnforceRetention)),
        ("upload sweep", cfg.upload_sweep_interval_secs, |max_age_ms| Operation::Object(ObjectOp::SweepUploads { max_age_ms })),
    ];
    for (task, secs, op) in tasks {
        tokio::spawn(run_as_leader(host.clone(), task, Duration::from_secs(secs.max(1)), move || op(max_age_ms)));
    }
}

/// Every `period`, proposes `op()` to each data group this node leads.
async fn run_as_leader(host: Arc<Host>, task: &'static str, period: Duration, op: impl Fn() -> Operation) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if host.is_stopping() {
            return;
        }
        for group in host.hosted().into_iter().map(|(g, _)| g).filter(|&g| g != META_GROUP) {
            if !host.leads(group) {
                continue;
            }
            // Bounded: a leader cut off from its quorum must not stall the other groups' turns.
            let bounded = tokio::time::timeout(period.max(WRITE_TIMEOUT), host.write(group, op(), None, Consistency::Quorum));
            let Ok(result) = bounded.await else {
                info!(group, task, "maintenance not committed in time; the next period tries again");
                continue;
            };
            match result {
                Ok(Response::Rejected(r)) => warn!(group, task, "refused: {}", r.message),
                Ok(Response::Deleted(n)) if n > 0 => info!(group, task, freed = n, "maintenance freed abandoned uploads"),
                Ok(done) => debug!(group, task, ?done, "maintenance applied"),
                // Leadership moved between the check and the write: the new leader runs it.
                Err(e) => info!(group, task, "maintenance not applied: {e}"),
            }
        }
    }
}
