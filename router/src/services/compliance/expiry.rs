//! Spec 02's `retention` with `auto_delete_expired = true`: personal data
//! past its retention period is erased, and time-series points past the
//! default retention dropped, by a round every router runs.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use tessera_api::command::{MetaOp, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// Days in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// Spec 02's `retention` with `auto_delete_expired = true`: runs
/// [`expire_once`] every `retention.check_interval_secs` (3600). Every router
/// runs it; what it deletes is gone after the first, so the others find nothing.
pub async fn expiry_loop(state: AppState) {
    let r = &state.config.retention;
    if !state.config.compliance.enabled || !r.auto_delete_expired || r.enabled == Some(false) {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(r.check_interval_secs.unwrap_or(3600).max(1)));
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = expire_once(&state, tessera_api::command::now_ms()).await {
            tracing::warn!("retention expiry not finished this round: {e}");
        }
    }
}

/// One expiry round as of `now_ms`: in every data group, the records of any
/// data subject (a subject field holds an id: key-value values, documents,
/// graph nodes, object and vector metadata, time-series tags, stream events)
/// last written more than `pii_retention_days` (90) before are erased through
/// the engines' deletes, as an erasure does; time-series points of metrics
/// without a policy of their own older than `default_retention_days` (365) are
/// dropped. SQL rows carry no write time and are left to the erasure
/// endpoints. Answers the number of records erased per store; audited as
/// `retention_expired` (counts only).
pub async fn expire_once(state: &AppState, now_ms: i64) -> Result<BTreeMap<String, u64>, ApiError> {
    use tessera_api::command::Operation;
    use tessera_api::compliance::{EraseSubjectOp, SubjectRule};
    use tessera_api::rpc::Consistency;
    let r = &state.config.retention;
    let pii_days = r.pii_retention_days.unwrap_or(90) as i64;
    let default_days = r.default_retention_days.unwrap_or(365) as i64;
    let fields = crate::services::compliance::subject_rule(&state.config.compliance, "").fields;
    let expire = Operation::EraseSubject(EraseSubjectOp {
        rule: SubjectRule::any_subject(fields),
        locations: None,
        secure_erase: false,
        written_before_ms: Some(now_ms.saturating_sub(pii_days.saturating_mul(DAY_MS))),
    });
    let points = Operation::TimeSeries(tessera_api::timeseries::TsOp::EnforceRetentionWithDefault {
        drop_after_ms: default_days.saturating_mul(DAY_MS),
    });
    let mut by_store: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors = Vec::new();
    for group in state.cluster.data_groups()? {
        match state.cluster.write(group, &expire, Consistency::Quorum).await.map(|s| s.value) {
            Ok(Response::SubjectErased { items }) => {
                for item in items {
                    *by_store.entry(item.store).or_default() += 1;
                }
            }
            Ok(other) => errors.push(format!("group {group}: {other:?}")),
            Err(e) => errors.push(format!("group {group}: {e}")),
        }
        if let Err(e) = state.cluster.write(group, &points, Consistency::Quorum).await {
            errors.push(format!("group {group} time-series: {e}"));
        }
    }
    let total: u64 = by_store.values().sum();
    if total > 0 {
        tracing::info!(total, ?by_store, pii_days, "personal data past its retention erased");
        let event = tessera_api::compliance::AuditEvent {
            event_type: "retention_expired".into(),
            actor: "retention".into(),
            subject_id: None,
            details: json!({"records": total, "by_store": by_store, "pii_retention_days": pii_days}),
        };
        if let Err(e) = state.cluster.meta_write(MetaOp::Audit(vec![event])).await {
            tracing::warn!("the expiry was not audited: {e}");
        }
    }
    if errors.is_empty() { Ok(by_store) } else { Err(ApiError::Unavailable(errors.join("; "))) }
}
