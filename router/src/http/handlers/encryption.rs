//! `POST /api/v1/admin/encryption/reencrypt`: the last step of an at-rest key
//! rotation. Nodes restarted with a new `SERVICE_ENCRYPTION_KEY` and the old
//! one in `SERVICE_ENCRYPTION_PREVIOUS_KEYS` read old values and seal new ones
//! with the new key; this call has every node, one at a time, rewrite what it
//! stores under its current key (its stored snapshot files, then a full
//! compaction that re-seals old values), then asks every node again to count
//! what still needs a previous key (a snapshot another node shipped before it
//! was rewritten is found then). When every node was given previous keys and
//! counts 0 (`complete`), they can be removed at the next restart
//! (docs/tls-encryption.md).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// How long one node may take (snapshot files and a full compaction).
const PER_NODE: Duration = Duration::from_secs(300);

/// Every node of the map re-seals, one after another, then every node counts;
/// 503 (with every node's answer) when a node could not.
pub async fn reencrypt(
    State(state): State<AppState>,
    _caller: Caller,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    super::nodes::lifecycle_body(&body)?;
    let map = state.cluster.map().ok_or_else(|| ApiError::Unavailable("the cluster map is not known yet".into()))?;
    let mut failed = Vec::new();
    let mut resealed = std::collections::BTreeMap::new();
    for node in &map.nodes {
        match state.cluster.reseal(node, false, PER_NODE).await {
            Ok(r) => {
                resealed.insert(node.id, r.resealed);
            }
            Err(e) => failed.push((node.id, e.to_string())),
        }
    }
    let mut nodes = Vec::new();
    let mut needing = 0;
    let mut without_previous = Vec::new();
    for node in &map.nodes {
        if let Some((_, e)) = failed.iter().find(|(id, _)| *id == node.id) {
            nodes.push(json!({"node_id": node.id, "error": e}));
            continue;
        }
        match state.cluster.reseal(node, true, PER_NODE).await {
            Ok(r) => {
                needing += r.needing_previous_keys;
                if r.encrypted && !r.previous_keys {
                    without_previous.push(node.id);
                }
                nodes.push(json!({
                    "node_id": node.id,
                    "encrypted": r.encrypted,
                    "previous_keys": r.previous_keys,
                    "resealed": r.resealed.max(resealed.get(&node.id).copied().unwrap_or(0)),
                    "needing_previous_keys": r.needing_previous_keys,
                    "took_ms": r.took_ms,
                }));
            }
            Err(e) => {
                failed.push((node.id, e.to_string()));
                nodes.push(json!({"node_id": node.id, "error": e.to_string()}));
            }
        }
    }
    let failed: Vec<u64> = failed.iter().map(|(id, _)| *id).collect();
    let complete = failed.is_empty() && needing == 0 && without_previous.is_empty();
    let message = if !failed.is_empty() {
        format!("nodes {failed:?} did not re-seal their data; run the call again once they answer")
    } else if !without_previous.is_empty() {
        format!(
            "nodes {without_previous:?} were not started with SERVICE_ENCRYPTION_PREVIOUS_KEYS: they may still seal with the old key; \
             restart them with the new key (and the old one as previous), then run the call again"
        )
    } else if complete {
        "every node holds its data under its current key: the previous keys can be removed from SERVICE_ENCRYPTION_PREVIOUS_KEYS at the next restart".to_string()
    } else {
        format!("{needing} values or snapshot files still need a previous key; run the call again")
    };
    let mut body = json!({"nodes": nodes, "needing_previous_keys": needing, "complete": complete, "message": message});
    if failed.is_empty() {
        Ok((StatusCode::OK, Json(body)))
    } else {
        body["error"] = json!(message);
        body["code"] = json!("UNAVAILABLE");
        Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)))
    }
}
