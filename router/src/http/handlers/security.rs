//! Security administration: alerts, acknowledgement and the IP block list under
//! `/api/v1/admin/security/`. Reads need `read:cluster`, mutations
//! `manage:security` (decided in the route table, `routes()` below).

use std::net::IpAddr;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response, now_ms};
use tessera_api::http::iso8601_ms;
use tessera_api::security::{AlertRecord, BlockRecord, SecurityOp, SecurityQuery, SecurityQueryResult, SecurityResponse};
use tracing::warn;

use super::{JsonBody, QueryParams};
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The security administration routes.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .get("/api/v1/admin/security/alerts", P("read:cluster"), list_alerts)
        .post("/api/v1/admin/security/alerts/{alert_id}/acknowledge", P("manage:security"), acknowledge)
        .post("/api/v1/admin/security/block-ip", P("manage:security"), block_ip)
        .answers(&[201])
        .get("/api/v1/admin/security/blocked-ips", P("read:cluster"), list_blocks)
        .delete("/api/v1/admin/security/blocked-ips/{ip}", P("manage:security"), unblock)
}

// ---------------------------------------------------------------- answers

/// A security alert.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AlertView {
    id: String,
    kind: String,
    severity: String,
    source_ip: Option<String>,
    username: Option<String>,
    message: String,
    created_at: String,
    acknowledged: bool,
    acknowledged_by: Option<String>,
    acknowledged_at: Option<String>,
}

fn alert_view(a: &AlertRecord) -> AlertView {
    AlertView {
        id: a.id.clone(),
        kind: a.kind.clone(),
        severity: a.severity.clone(),
        source_ip: a.source_ip.clone(),
        username: a.username.clone(),
        message: a.message.clone(),
        created_at: iso8601_ms(a.created_at_ms),
        acknowledged: a.acknowledged,
        acknowledged_by: a.acknowledged_by.clone(),
        acknowledged_at: a.acknowledged_at_ms.map(iso8601_ms),
    }
}

/// An active IP block.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BlockView {
    ip_address: String,
    reason: String,
    blocked_at: String,
    expires_at: String,
    remaining_secs: i64,
    blocked_by: String,
    /// Set by the brute-force detector rather than an administrator.
    automatic: bool,
}

fn block_view(b: &BlockRecord) -> BlockView {
    BlockView {
        ip_address: b.ip.clone(),
        reason: b.reason.clone(),
        blocked_at: iso8601_ms(b.created_at_ms),
        expires_at: iso8601_ms(b.expires_at_ms),
        remaining_secs: ((b.expires_at_ms - now_ms()).max(0) + 999) / 1000,
        blocked_by: b.created_by.clone(),
        automatic: b.automatic,
    }
}

/// Answer of `GET /api/v1/admin/security/alerts`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AlertList {
    alerts: Vec<AlertView>,
    count: usize,
    /// Alerts matching the filter, beyond the limit too.
    total: u64,
    unacknowledged: u64,
}

/// Answer of an acknowledgement.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Acknowledged {
    success: bool,
    alert: AlertView,
}

/// Answer of a block.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Blocked {
    success: bool,
    blocked: BlockView,
}

/// Answer of `GET /api/v1/admin/security/blocked-ips`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BlockList {
    blocked_ips: Vec<BlockView>,
    count: usize,
}

/// Answer of an unblock.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Unblocked {
    success: bool,
    ip_address: String,
}

fn username(caller: &Caller) -> String {
    match caller {
        Caller::User { user, .. } => user.username.clone(),
        Caller::Bootstrap => "anonymous".into(),
    }
}

/// A security write whose reply has the one shape named.
async fn write<T>(
    state: &AppState,
    op: SecurityOp,
    shape: impl FnOnce(SecurityResponse) -> Result<T, SecurityResponse>,
) -> Result<T, ApiError> {
    match state.cluster.meta_write(MetaOp::Security(op)).await? {
        Response::Rejected(r) => Err(r.into()),
        reply => typed::pick(typed::pick(reply, shape!(Response::Security))?, shape),
    }
}

/// A security read whose answer has the one shape named.
async fn read<T>(
    state: &AppState,
    q: SecurityQuery,
    shape: impl FnOnce(SecurityQueryResult) -> Result<T, SecurityQueryResult>,
) -> Result<T, ApiError> {
    let answer = state.cluster.meta_read(MetaQuery::Security(q)).await?;
    typed::pick(typed::pick(answer, shape!(MetaQueryResult::Security))?, shape)
}

/// `?acknowledged=true|false&limit=` of the alert list.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct AlertParams {
    acknowledged: Option<bool>,
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<usize>,
}

/// `GET /api/v1/admin/security/alerts`: newest first (default 100, at most 1000).
pub async fn list_alerts(State(state): State<AppState>, QueryParams(p): QueryParams<AlertParams>) -> Result<Json<AlertList>, ApiError> {
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::BadRequest("limit must be between 1 and 1000".into()));
    }
    let q = SecurityQuery::Alerts { acknowledged: p.acknowledged, limit };
    let listed = shape!(SecurityQueryResult::Alerts { alerts, total, unacknowledged });
    let (alerts, total, unacknowledged) = read(&state, q, listed).await?;
    Ok(Json(AlertList { alerts: alerts.iter().map(alert_view).collect(), count: alerts.len(), total, unacknowledged }))
}

/// `POST /api/v1/admin/security/alerts/{alert_id}/acknowledge` (no body needed).
pub async fn acknowledge(
    State(state): State<AppState>,
    caller: Caller,
    Path(alert_id): Path<String>,
) -> Result<Json<Acknowledged>, ApiError> {
    let op = SecurityOp::AcknowledgeAlert { id: alert_id, by: username(&caller) };
    let a = write(&state, op, shape!(SecurityResponse::Alert)).await?;
    Ok(Json(Acknowledged { success: true, alert: alert_view(&a) }))
}

/// Body of `POST /api/v1/admin/security/block-ip`.
#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(extend("oneOf" = [{"required": ["duration_hours"]}, {"required": ["duration_secs"]}]))]
pub struct BlockRequest {
    #[schemars(schema_with = "crate::http::openapi::formats::ip_address")]
    ip_address: String,
    #[serde(default)]
    reason: Option<String>,
    /// Whole hours, 1 to 87600.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 87600))]
    duration_hours: Option<i64>,
    /// Alternative to `duration_hours`: whole seconds, 1 to 315360000.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 315360000))]
    duration_secs: Option<i64>,
}

/// Parses an IP address in its usual textual forms (canonicalised).
pub fn parse_ip(s: &str) -> Result<IpAddr, ApiError> {
    s.trim().parse::<IpAddr>().map_err(|_| ApiError::BadRequest(format!("{s:?} is not a valid IPv4 or IPv6 address")))
}

/// `POST /api/v1/admin/security/block-ip {ip_address, reason, duration_hours}` → 201.
pub async fn block_ip(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<BlockRequest>,
) -> Result<(StatusCode, Json<Blocked>), ApiError> {
    let ip = parse_ip(&req.ip_address)?;
    let duration_secs = match (req.duration_hours, req.duration_secs) {
        (Some(h), None) if (1..=87_600).contains(&h) => h * 3600,
        (None, Some(s)) if (1..=315_360_000).contains(&s) => s,
        (Some(_), Some(_)) => return Err(ApiError::BadRequest("give duration_hours or duration_secs, not both".into())),
        (None, None) => return Err(ApiError::BadRequest("duration_hours (an integer number of hours) is required".into())),
        _ => {
            return Err(ApiError::BadRequest("duration_hours must be 1 to 87600 (or duration_secs 1 to 315360000)".into()));
        }
    };
    let own = match &caller {
        Caller::User { client_ip, .. } => *client_ip,
        Caller::Bootstrap => None,
    };
    if own == Some(ip) {
        return Err(ApiError::BadRequest(format!("refusing to block {ip}: it is the address of this request")));
    }
    let by = username(&caller);
    let reason = req.reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| format!("blocked by {by}"));
    let op = SecurityOp::BlockIp { ip: ip.to_string(), reason, duration_ms: duration_secs * 1000, by };
    let b = write(&state, op, shape!(SecurityResponse::Block)).await?;
    state.security.blocks.insert(&b);
    warn!(ip = %b.ip, by = %b.created_by, "SECURITY: blocked until {}: {}", iso8601_ms(b.expires_at_ms), b.reason);
    Ok((StatusCode::CREATED, Json(Blocked { success: true, blocked: block_view(&b) })))
}

/// `GET /api/v1/admin/security/blocked-ips`: the blocks still active.
pub async fn list_blocks(State(state): State<AppState>) -> Result<Json<BlockList>, ApiError> {
    let list = read(&state, SecurityQuery::Blocks, shape!(SecurityQueryResult::Blocks)).await?;
    state.security.blocks.replace(list.clone());
    Ok(Json(BlockList { blocked_ips: list.iter().map(block_view).collect(), count: list.len() }))
}

/// `DELETE /api/v1/admin/security/blocked-ips/{ip}`: lifts a block (404 if none is active).
pub async fn unblock(State(state): State<AppState>, Path(ip): Path<String>) -> Result<Json<Unblocked>, ApiError> {
    let ip = parse_ip(&ip)?;
    let op = SecurityOp::UnblockIp { ip: ip.to_string() };
    let active = write(&state, op, shape!(SecurityResponse::Unblocked)).await?;
    state.security.blocks.remove(ip);
    if !active {
        return Err(ApiError::NotFound(format!("{ip} is not blocked")));
    }
    Ok(Json(Unblocked { success: true, ip_address: ip.to_string() }))
}
