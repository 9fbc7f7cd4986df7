//! The vault's admin routes (`/api/v1/admin/vault/...`): status, unseal, seal,
//! secrets, access policies and the audit trail. Every route needs
//! `manage:vault` (decided in the route table, `routes()` below); the logic is in
//! [`crate::services::vault`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_api::http::iso8601_ms;
use tessera_api::meta::{VaultCapability, VaultPolicyRecord};

use super::{JsonBody, QueryParams};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::services::security::ClientIp;
use crate::services::vault::policy::Subject;
use crate::services::vault::{Actor, VaultError};
use crate::state::AppState;

/// The vault routes.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .get("/api/v1/admin/vault/status", P("manage:vault"), status)
        .post("/api/v1/admin/vault/unseal", P("manage:vault"), unseal)
        .post("/api/v1/admin/vault/seal", P("manage:vault"), seal)
        .post("/api/v1/admin/vault/rekey", P("manage:vault"), rekey)
        .get("/api/v1/admin/vault/secrets", P("manage:vault"), list_secrets)
        .get("/api/v1/admin/vault/secrets/{*path}", P("manage:vault"), get_secret)
        .put("/api/v1/admin/vault/secrets/{*path}", P("manage:vault"), put_secret)
        .answers(&[200, 201])
        .delete("/api/v1/admin/vault/secrets/{*path}", P("manage:vault"), delete_secret)
        .get("/api/v1/admin/vault/policies", P("manage:vault"), list_policies)
        .get("/api/v1/admin/vault/policies/{name}", P("manage:vault"), get_policy)
        .put("/api/v1/admin/vault/policies/{name}", P("manage:vault"), put_policy)
        .answers(&[200, 201])
        .delete("/api/v1/admin/vault/policies/{name}", P("manage:vault"), delete_policy)
        .get("/api/v1/admin/vault/audit", P("manage:vault"), audit)
}

impl From<VaultError> for ApiError {
    fn from(e: VaultError) -> Self {
        match e {
            VaultError::Sealed => ApiError::VaultSealed(e.to_string()),
            VaultError::WrongPassphrase | VaultError::Invalid(_) => ApiError::BadRequest(e.to_string()),
            VaultError::Denied(m) => ApiError::Forbidden(m),
            VaultError::NotFound(m) => ApiError::NotFound(m),
            VaultError::Conflict(m) => ApiError::Conflict(m),
            VaultError::Cluster(c) => c.into(),
            VaultError::Internal(m) => ApiError::Internal(m),
        }
    }
}

/// The acting user, with the roles vault policies are matched against.
fn actor(caller: &Caller) -> Actor {
    match caller {
        Caller::User { user, .. } => {
            let mut roles = vec![user.role.as_str().to_string()];
            roles.extend(user.roles.iter().cloned());
            Actor { name: user.username.clone(), subject: Some(Subject { username: user.username.clone(), roles }) }
        }
        _ => Actor { name: "anonymous".into(), subject: None },
    }
}

// ---------------------------------------------------------------- answers

/// The vault's state on this router.
#[derive(Serialize, schemars::JsonSchema)]
pub struct VaultStatus {
    /// A first unseal created it.
    initialized: bool,
    sealed: bool,
    /// Secrets no policy grants are refused to everyone but admins.
    default_deny: bool,
}

/// Answer of an unseal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Unsealed {
    initialized: bool,
    sealed: bool,
    /// This unseal created the vault.
    created: bool,
}

/// Answer of a rekey.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Rekeyed {
    rekeyed: bool,
    /// The new passphrase key's id.
    key_id: String,
}

/// Answer of a seal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Sealed {
    sealed: bool,
}

/// Answer of `GET /api/v1/admin/vault/secrets`: paths only, never values.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecretPaths {
    prefix: String,
    total: usize,
    paths: Vec<String>,
}

/// Answer of a secret's write.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecretWritten {
    path: String,
    /// False when it replaced a value.
    created: bool,
}

/// A secret with its decrypted value.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecretView {
    path: String,
    #[schemars(with = "NonNull")]
    value: Value,
    version: u64,
    created_at: String,
    updated_at: String,
    updated_by: String,
}

/// Answer of a secret's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecretDeleted {
    path: String,
    deleted: bool,
}

/// An access policy: a user or a role, the paths and what it may do there.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PolicyView {
    name: String,
    username: Option<String>,
    role: Option<String>,
    paths: Vec<String>,
    capabilities: Vec<VaultCapability>,
    created_at: String,
    updated_at: String,
}

/// Answer of `GET /api/v1/admin/vault/policies`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PolicyList {
    total: usize,
    policies: Vec<PolicyView>,
}

/// Answer of a policy's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PolicyDeleted {
    name: String,
    deleted: bool,
}

/// One vault audit event.
#[derive(Serialize, schemars::JsonSchema)]
pub struct VaultEvent {
    id: String,
    at: String,
    event: String,
    actor: String,
    /// The router that served it.
    router: String,
    path: Option<String>,
    success: bool,
    detail: String,
}

/// Answer of `GET /api/v1/admin/vault/audit`, newest first.
#[derive(Serialize, schemars::JsonSchema)]
pub struct VaultEvents {
    total: usize,
    events: Vec<VaultEvent>,
}

/// `GET /api/v1/admin/vault/status` → `{initialized, sealed, default_deny}` (this router).
pub async fn status(State(state): State<AppState>) -> Result<Json<VaultStatus>, ApiError> {
    let s = state.vault.status(&*state.cluster).await?;
    Ok(Json(VaultStatus { initialized: s.initialized, sealed: s.sealed, default_deny: state.vault.default_deny() }))
}

/// Body of `POST /api/v1/admin/vault/unseal`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct UnsealBody {
    #[schemars(length(min = 1))]
    passphrase: String,
}

/// `POST /api/v1/admin/vault/unseal {passphrase}`: unseals this router (the
/// first unseal of the cluster creates the vault). A wrong passphrase → 400.
pub async fn unseal(
    State(state): State<AppState>,
    caller: Caller,
    ip: Option<Extension<ClientIp>>,
    JsonBody(body): JsonBody<UnsealBody>,
) -> Result<Json<Unsealed>, ApiError> {
    let passphrase = zeroize::Zeroizing::new(body.passphrase);
    if passphrase.is_empty() {
        return Err(ApiError::BadRequest("passphrase must not be empty".into()));
    }
    let actor = actor(&caller);
    match state.vault.unseal(&*state.cluster, &passphrase, &actor).await {
        Ok(out) => Ok(Json(Unsealed { initialized: true, sealed: false, created: out.created })),
        Err(e) => Err(refused(&state, &actor, ip, e).await),
    }
}

/// The answer to a failed unseal or rekey; a wrong passphrase also raises the
/// `vault_unseal_failed` alert with the caller's address.
async fn refused(state: &AppState, actor: &Actor, ip: Option<Extension<ClientIp>>, e: VaultError) -> ApiError {
    if matches!(e, VaultError::WrongPassphrase) {
        let ip = ip.and_then(|Extension(ClientIp(ip))| ip).map(|ip| ip.to_string());
        crate::services::vault::unseal::alert_unseal_failure(state, actor, ip).await;
    }
    e.into()
}

/// Body of `POST /api/v1/admin/vault/rekey`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct RekeyBody {
    current_passphrase: String,
    new_passphrase: String,
}

/// `POST /api/v1/admin/vault/rekey {current_passphrase, new_passphrase}` →
/// `{rekeyed: true, key_id}`: the vault's passphrase changes, its data key and
/// secrets stay, unsealed routers stay unsealed. A wrong current passphrase →
/// 400 (audited, alerted as a failed unseal); a concurrent change → 409.
pub async fn rekey(
    State(state): State<AppState>,
    caller: Caller,
    ip: Option<Extension<ClientIp>>,
    JsonBody(body): JsonBody<RekeyBody>,
) -> Result<Json<Rekeyed>, ApiError> {
    let (current, new) = (zeroize::Zeroizing::new(body.current_passphrase), zeroize::Zeroizing::new(body.new_passphrase));
    if current.is_empty() {
        return Err(ApiError::BadRequest("current_passphrase must not be empty".into()));
    }
    let actor = actor(&caller);
    match state.vault.rekey(&*state.cluster, &current, &new, &actor).await {
        Ok(key_id) => Ok(Json(Rekeyed { rekeyed: true, key_id })),
        Err(e) => Err(refused(&state, &actor, ip, e).await),
    }
}

/// `POST /api/v1/admin/vault/seal`: seals the vault on every router.
pub async fn seal(State(state): State<AppState>, caller: Caller) -> Result<Json<Sealed>, ApiError> {
    state.vault.seal(&*state.cluster, &actor(&caller)).await?;
    Ok(Json(Sealed { sealed: true }))
}

/// Query of `GET /api/v1/admin/vault/secrets`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    prefix: String,
}

/// `GET /api/v1/admin/vault/secrets?prefix=` → the paths only.
pub async fn list_secrets(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<Json<SecretPaths>, ApiError> {
    let paths = state.vault.list(&*state.cluster, &actor(&caller), &q.prefix).await?;
    Ok(Json(SecretPaths { prefix: q.prefix, total: paths.len(), paths }))
}

/// The schema of a JSON value that is not null.
struct NonNull;

impl schemars::JsonSchema for NonNull {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NonNullValue".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"description": "any JSON value but null", "nullable": false, "anyOf": [
            {"type": "object"}, {"type": "array", "items": {}}, {"type": "string"}, {"type": "number"}, {"type": "boolean"},
        ]})
    }
}

/// Body of `PUT /api/v1/admin/vault/secrets/{*path}`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct PutBody {
    /// Any JSON value but null.
    #[schemars(required, with = "NonNull")]
    value: Option<Value>,
}

/// `PUT /api/v1/admin/vault/secrets/{*path} {value}` → 201 created, 200 replaced.
pub async fn put_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    JsonBody(body): JsonBody<PutBody>,
) -> Result<(StatusCode, Json<SecretWritten>), ApiError> {
    let Some(value) = body.value.filter(|v| !v.is_null()) else {
        return Err(ApiError::BadRequest("value is required (any JSON value but null)".into()));
    };
    let created = state.vault.put(&*state.cluster, &actor(&caller), &path, &value).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(SecretWritten { path, created })))
}

/// `GET /api/v1/admin/vault/secrets/{*path}` → the decrypted value.
pub async fn get_secret(State(state): State<AppState>, caller: Caller, Path(path): Path<String>) -> Result<Json<SecretView>, ApiError> {
    let s = state.vault.get(&*state.cluster, &actor(&caller), &path).await?;
    Ok(Json(SecretView {
        created_at: iso8601_ms(s.record.created_at_ms),
        updated_at: iso8601_ms(s.record.updated_at_ms),
        path: s.record.path,
        value: s.value,
        version: s.record.version,
        updated_by: s.record.updated_by,
    }))
}

/// `DELETE /api/v1/admin/vault/secrets/{*path}`.
pub async fn delete_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
) -> Result<Json<SecretDeleted>, ApiError> {
    state.vault.delete(&*state.cluster, &actor(&caller), &path).await?;
    Ok(Json(SecretDeleted { path, deleted: true }))
}

fn policy_view(p: &VaultPolicyRecord) -> PolicyView {
    PolicyView {
        name: p.name.clone(),
        username: p.username.clone(),
        role: p.role.clone(),
        paths: p.paths.clone(),
        capabilities: p.capabilities.clone(),
        created_at: iso8601_ms(p.created_at_ms),
        updated_at: iso8601_ms(p.updated_at_ms),
    }
}

/// `GET /api/v1/admin/vault/policies`.
pub async fn list_policies(State(state): State<AppState>) -> Result<Json<PolicyList>, ApiError> {
    let ps = state.vault.list_policies(&*state.cluster).await?;
    let policies: Vec<PolicyView> = ps.iter().map(policy_view).collect();
    Ok(Json(PolicyList { total: policies.len(), policies }))
}

/// `GET /api/v1/admin/vault/policies/{name}`.
pub async fn get_policy(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<PolicyView>, ApiError> {
    let ps = state.vault.list_policies(&*state.cluster).await?;
    let p = ps.iter().find(|p| p.name == name).ok_or_else(|| ApiError::NotFound(format!("vault policy {name} does not exist")))?;
    Ok(Json(policy_view(p)))
}

/// Body of `PUT /api/v1/admin/vault/policies/{name}`.
#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(extend("anyOf" = [{"required": ["username"]}, {"required": ["role"]}]))]
pub struct PolicyBody {
    /// Exactly one of `username` and `role`.
    #[serde(default)]
    #[schemars(pattern(r"\S"))]
    username: Option<String>,
    #[serde(default)]
    #[schemars(pattern(r"\S"))]
    role: Option<String>,
    /// 1 to 100 glob patterns over secret paths (`app/*`, `team/**`).
    #[schemars(length(min = 1, max = 100), inner(length(min = 1)))]
    paths: Vec<String>,
    #[schemars(length(min = 1))]
    capabilities: Vec<VaultCapability>,
}

/// `PUT /api/v1/admin/vault/policies/{name} {username | role, paths, capabilities}`
/// → 201 created, 200 replaced.
pub async fn put_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<PolicyBody>,
) -> Result<(StatusCode, Json<PolicyView>), ApiError> {
    let mut capabilities = body.capabilities;
    capabilities.sort_by_key(|c| *c as u8);
    capabilities.dedup();
    let policy = VaultPolicyRecord {
        name,
        username: body.username.map(|u| u.trim().to_string()),
        role: body.role.map(|r| r.trim().to_ascii_lowercase()),
        paths: body.paths,
        capabilities,
        created_at_ms: 0,
        updated_at_ms: 0,
    };
    let created = state.vault.put_policy(&*state.cluster, &actor(&caller), policy.clone()).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let ps = state.vault.list_policies(&*state.cluster).await?;
    let stored = ps.iter().find(|p| p.name == policy.name).unwrap_or(&policy);
    Ok((status, Json(policy_view(stored))))
}

/// `DELETE /api/v1/admin/vault/policies/{name}`.
pub async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<PolicyDeleted>, ApiError> {
    state.vault.delete_policy(&*state.cluster, &actor(&caller), &name).await?;
    Ok(Json(PolicyDeleted { name, deleted: true }))
}

/// Query of `GET /api/v1/admin/vault/audit`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct AuditQuery {
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<usize>,
}

/// `GET /api/v1/admin/vault/audit?limit=` (default 100, at most 10000), newest first.
pub async fn audit(State(state): State<AppState>, QueryParams(q): QueryParams<AuditQuery>) -> Result<Json<VaultEvents>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > tessera_api::meta::VAULT_AUDIT_KEEP {
        return Err(ApiError::BadRequest(format!("limit must be 1 to {}", tessera_api::meta::VAULT_AUDIT_KEEP)));
    }
    let records = state.vault.audit_trail(&*state.cluster, limit).await?;
    let events: Vec<VaultEvent> = records
        .iter()
        .map(|r| VaultEvent {
            id: r.id.clone(),
            at: iso8601_ms(r.at_ms),
            event: r.event.clone(),
            actor: r.actor.clone(),
            router: r.router.clone(),
            path: r.path.clone(),
            success: r.success,
            detail: r.detail.clone(),
        })
        .collect();
    Ok(Json(VaultEvents { total: events.len(), events }))
}
