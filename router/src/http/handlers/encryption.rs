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
use serde::Serialize;
use tessera_api::NodeId;

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// How long one node may take (snapshot files and a full compaction).
const PER_NODE: Duration = Duration::from_secs(300);

/// One node's part of a re-encryption, or why it could not.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NodeReseal {
    pub node_id: NodeId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the node encrypts at rest at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Whether it was given previous keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_keys: Option<bool>,
    /// Values re-sealed under the current key since it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resealed: Option<u64>,
    /// Stored values and snapshot files that still need a previous key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needing_previous_keys: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}

impl NodeReseal {
    fn failed(node_id: NodeId, error: String) -> NodeReseal {
        NodeReseal {
            node_id,
            error: Some(error),
            encrypted: None,
            previous_keys: None,
            resealed: None,
            needing_previous_keys: None,
            took_ms: None,
        }
    }
}

/// The answer of a re-encryption (200), or of one a node could not do (503,
/// with `error` and `code` as an error body has them, and every node's answer).
#[derive(Serialize, schemars::JsonSchema)]
pub struct Reencryption {
    pub nodes: Vec<NodeReseal>,
    pub needing_previous_keys: u64,
    /// Every node holds its data under its current key.
    pub complete: bool,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// Every node of the map re-seals, one after another, then every node counts;
/// 503 (with every node's answer) when a node could not.
pub async fn reencrypt(
    State(state): State<AppState>,
    _caller: Caller,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Reencryption>), ApiError> {
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
            nodes.push(NodeReseal::failed(node.id, e.clone()));
            continue;
        }
        match state.cluster.reseal(node, true, PER_NODE).await {
            Ok(r) => {
                needing += r.needing_previous_keys;
                if r.encrypted && !r.previous_keys {
                    without_previous.push(node.id);
                }
                nodes.push(NodeReseal {
                    node_id: node.id,
                    error: None,
                    encrypted: Some(r.encrypted),
                    previous_keys: Some(r.previous_keys),
                    resealed: Some(r.resealed.max(resealed.get(&node.id).copied().unwrap_or(0))),
                    needing_previous_keys: Some(r.needing_previous_keys),
                    took_ms: Some(r.took_ms),
                });
            }
            Err(e) => {
                failed.push((node.id, e.to_string()));
                nodes.push(NodeReseal::failed(node.id, e.to_string()));
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
    let mut body = Reencryption { nodes, needing_previous_keys: needing, complete, message, error: None, code: None };
    if failed.is_empty() {
        Ok((StatusCode::OK, Json(body)))
    } else {
        body.error = Some(body.message.clone());
        body.code = Some("UNAVAILABLE".into());
        Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)))
    }
}
