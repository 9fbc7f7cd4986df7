//! User and role management (`/api/v1/admin/users`, `/api/v1/admin/roles`) and
//! the access-control tables (`/api/v1/admin/routes`, `/api/v1/admin/permissions`).
//! Mutations need admin permissions (decided in the route table, `routes()` below).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response as Reply, now_ms};
use tessera_api::http::iso8601_ms;
use tessera_api::meta::{PERMISSIONS, Role, RoleRecord, UserRecord};

use super::JsonBody;
use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::http::permissions::Access;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id, password_secrets};
use crate::state::AppState;

/// The user, role and access-table routes.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .get("/api/v1/admin/users", P("read:cluster"), list_users)
        .post("/api/v1/admin/users", P("manage:users"), create_user)
        .answers(&[201])
        .get("/api/v1/admin/users/{id}", P("read:cluster"), get_user)
        .put("/api/v1/admin/users/{id}", P("manage:users"), update_user)
        .delete("/api/v1/admin/users/{id}", P("manage:users"), delete_user)
        .get("/api/v1/admin/roles", P("read:cluster"), list_roles)
        .post("/api/v1/admin/roles", P("manage:roles"), create_role)
        .answers(&[201])
        .put("/api/v1/admin/roles/{name}", P("manage:roles"), update_role)
        .delete("/api/v1/admin/roles/{name}", P("manage:roles"), delete_role)
        .get("/api/v1/admin/routes", P("read:cluster"), route_table)
        .get("/api/v1/admin/permissions", P("read:cluster"), permission_list)
}

/// Passwords: at least 12 characters with upper-case, lower-case, digit and symbol.
pub fn check_password_policy(password: &str) -> Result<(), ApiError> {
    let classes = [
        password.chars().any(|c| c.is_lowercase()),
        password.chars().any(|c| c.is_uppercase()),
        password.chars().any(|c| c.is_ascii_digit()),
        password.chars().any(|c| !c.is_alphanumeric()),
    ];
    if password.chars().count() < 12 || classes.iter().any(|c| !c) {
        return Err(ApiError::BadRequest(
            "the password must be at least 12 characters and mix upper-case, lower-case, digits and symbols".into(),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- answers

/// A user as administrators see it (never the password hash).
#[derive(Serialize, schemars::JsonSchema)]
pub struct UserView {
    id: String,
    username: String,
    email: String,
    /// The built-in role.
    role: String,
    /// Custom roles held besides it.
    roles: Vec<String>,
    mfa_enabled: bool,
    created_at: String,
}

fn user_view(u: &UserRecord) -> UserView {
    UserView {
        id: u.id.clone(),
        username: u.username.clone(),
        email: u.email.clone(),
        role: u.role.as_str().to_string(),
        roles: u.roles.clone(),
        mfa_enabled: u.mfa_enabled,
        created_at: iso8601_ms(u.created_at_ms),
    }
}

/// Answer of `GET /api/v1/admin/users`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct UserList {
    users: Vec<UserView>,
    total: usize,
}

/// Answer of a user's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedUser {
    id: String,
    deleted: bool,
}

/// A role with its permissions.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RoleView {
    name: String,
    permissions: Vec<String>,
    /// Admin, operator and viewer are built in (and have no creation time).
    builtin: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
}

/// Answer of `GET /api/v1/admin/roles`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RoleList {
    roles: Vec<RoleView>,
}

/// Answer of a role's removal.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DeletedRole {
    name: String,
    deleted: bool,
}

/// One route of the access table.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RouteAccess {
    method: String,
    path: String,
    /// A permission, `authenticated`, `public`, or the metrics rule.
    access: String,
}

/// Answer of `GET /api/v1/admin/routes`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RouteList {
    routes: Vec<RouteAccess>,
}

/// Answer of `GET /api/v1/admin/permissions`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct PermissionList {
    permissions: Vec<String>,
}

async fn meta_write(state: &AppState, op: MetaOp) -> Result<(), ApiError> {
    match state.cluster.meta_write(op).await? {
        Reply::Rejected(r) => Err(r.into()),
        _ => Ok(()),
    }
}

async fn known_roles(state: &AppState, roles: &[String]) -> Result<(), ApiError> {
    for name in roles {
        match state.cluster.meta_read(MetaQuery::Role { name: name.clone() }).await? {
            MetaQueryResult::Role(Some(_)) => {}
            _ => return Err(ApiError::BadRequest(format!("unknown role {name}"))),
        }
    }
    Ok(())
}

fn parse_role(s: &str) -> Result<Role, ApiError> {
    Role::parse(s).ok_or_else(|| ApiError::BadRequest(format!("role must be admin, operator or viewer, not {s:?}")))
}

/// Body of `POST /api/v1/admin/users`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateUser {
    username: String,
    email: String,
    password: String,
    /// `rbac.default_role` when absent.
    role: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
}

/// `POST /api/v1/admin/users` → 201 with the user.
pub async fn create_user(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CreateUser>,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let username = req.username.trim().to_string();
    if username.is_empty() || username.len() > 64 || username.chars().any(char::is_whitespace) {
        return Err(ApiError::BadRequest("username must be 1 to 64 characters without spaces".into()));
    }
    if !req.email.contains('@') {
        return Err(ApiError::BadRequest("email must be an address".into()));
    }
    let role = parse_role(req.role.as_deref().unwrap_or(&state.config.rbac.default_role))?;
    check_password_policy(&req.password)?;
    known_roles(&state, &req.roles).await?;
    let password = req.password;
    let (password_hash, scram) =
        tokio::task::spawn_blocking(move || password_secrets(&password)).await.map_err(|e| ApiError::Internal(e.to_string()))??;
    let user = UserRecord {
        id: new_id(),
        username,
        email: req.email,
        role,
        password_hash,
        mfa_enabled: false,
        created_at_ms: now_ms(),
        roles: req.roles,
        scram_verifier: Some(scram),
    };
    meta_write(&state, MetaOp::CreateUser(user.clone())).await?;
    Ok((StatusCode::CREATED, Json(user_view(&user))))
}

/// `GET /api/v1/admin/users`.
pub async fn list_users(State(state): State<AppState>) -> Result<Json<UserList>, ApiError> {
    let users = typed::pick(state.cluster.meta_read(MetaQuery::ListUsers).await?, shape!(MetaQueryResult::Users))?;
    let users: Vec<UserView> = users.iter().map(user_view).collect();
    Ok(Json(UserList { total: users.len(), users }))
}

async fn user(state: &AppState, id: &str) -> Result<UserRecord, ApiError> {
    let answer = state.cluster.meta_read(MetaQuery::UserById { id: id.to_string() }).await?;
    let found = typed::pick(answer, shape!(MetaQueryResult::User))?;
    found.ok_or_else(|| ApiError::NotFound(format!("user {id} does not exist")))
}

/// `GET /api/v1/admin/users/{id}`.
pub async fn get_user(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<UserView>, ApiError> {
    Ok(Json(user_view(&user(&state, &id).await?)))
}

/// Body of `PUT /api/v1/admin/users/{id}`: any of the fields.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct UpdateUser {
    email: Option<String>,
    password: Option<String>,
    role: Option<String>,
    roles: Option<Vec<String>>,
}

/// `PUT /api/v1/admin/users/{id}`.
pub async fn update_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<UpdateUser>,
) -> Result<Json<UserView>, ApiError> {
    let mut u = user(&state, &id).await?;
    let role_before = u.role;
    if let Some(email) = req.email {
        if !email.contains('@') {
            return Err(ApiError::BadRequest("email must be an address".into()));
        }
        u.email = email;
    }
    if let Some(role) = req.role {
        u.role = parse_role(&role)?;
    }
    if let Some(roles) = req.roles {
        known_roles(&state, &roles).await?;
        u.roles = roles;
    }
    if let Some(password) = req.password {
        check_password_policy(&password)?;
        let (hash, scram) =
            tokio::task::spawn_blocking(move || password_secrets(&password)).await.map_err(|e| ApiError::Internal(e.to_string()))??;
        (u.password_hash, u.scram_verifier) = (hash, Some(scram));
    }
    meta_write(&state, MetaOp::UpdateUser(u.clone())).await?;
    crate::services::security::watch_role_change(&state, &caller, &u.username, role_before, u.role);
    Ok(Json(user_view(&u)))
}

/// `DELETE /api/v1/admin/users/{id}`: the user's tokens stop working at once.
pub async fn delete_user(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<DeletedUser>, ApiError> {
    if matches!(&caller, Caller::User { user, .. } if user.id == id) {
        return Err(ApiError::Conflict("you cannot delete your own account".into()));
    }
    meta_write(&state, MetaOp::DeleteUser { id: id.clone() }).await?;
    Ok(Json(DeletedUser { id, deleted: true }))
}

/// Body of a role's update (the path names it).
#[derive(schemars::JsonSchema, Deserialize)]
pub struct RoleUpdate {
    /// Permissions of `GET /api/v1/admin/permissions`, except `manage:*`.
    #[schemars(schema_with = "grantable_permissions")]
    permissions: Vec<String>,
}

/// Body of role creation.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct RoleBody {
    /// Required to create; the path names the role on update.
    #[schemars(with = "String", pattern(crate::http::openapi::formats::ROLE))]
    name: Option<String>,
    /// Permissions of `GET /api/v1/admin/permissions`, except `manage:*`.
    #[schemars(schema_with = "grantable_permissions")]
    permissions: Vec<String>,
}

fn grantable_permissions(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let grantable: Vec<&str> = PERMISSIONS.iter().copied().filter(|p| !p.starts_with("manage:")).collect();
    schemars::json_schema!({"type": "array", "items": {"type": "string", "enum": grantable}})
}

fn check_permissions(perms: &[String]) -> Result<(), ApiError> {
    for p in perms {
        if !PERMISSIONS.contains(&p.as_str()) {
            return Err(ApiError::BadRequest(format!("unknown permission {p:?}; see GET /api/v1/admin/permissions")));
        }
        if p.starts_with("manage:") {
            return Err(ApiError::BadRequest(format!("{p} belongs to admins and cannot be granted by a custom role")));
        }
    }
    Ok(())
}

fn role_view(r: &RoleRecord) -> RoleView {
    RoleView { name: r.name.clone(), permissions: r.permissions.clone(), builtin: false, created_at: Some(iso8601_ms(r.created_at_ms)) }
}

/// `POST /api/v1/admin/roles {name, permissions}` → 201.
pub async fn create_role(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<RoleBody>,
) -> Result<(StatusCode, Json<RoleView>), ApiError> {
    let name = req.name.unwrap_or_default();
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(ApiError::BadRequest("role name must be 1 to 64 letters, digits, '_' or '-'".into()));
    }
    if Role::parse(&name).is_some() {
        return Err(ApiError::Conflict(format!("{name} is a built-in role")));
    }
    check_permissions(&req.permissions)?;
    let role = RoleRecord { name, permissions: req.permissions, created_at_ms: now_ms() };
    meta_write(&state, MetaOp::PutRole { role: role.clone(), create: true }).await?;
    Ok((StatusCode::CREATED, Json(role_view(&role))))
}

/// `GET /api/v1/admin/roles`: built-in and custom roles with their permissions.
pub async fn list_roles(State(state): State<AppState>) -> Result<Json<RoleList>, ApiError> {
    let mut list: Vec<RoleView> = [Role::Admin, Role::Operator, Role::Viewer]
        .iter()
        .map(|r| RoleView {
            name: r.as_str().to_string(),
            permissions: r.permissions().iter().map(|p| p.to_string()).collect(),
            builtin: true,
            created_at: None,
        })
        .collect();
    let roles = typed::pick(state.cluster.meta_read(MetaQuery::ListRoles).await?, shape!(MetaQueryResult::Roles))?;
    list.extend(roles.iter().map(role_view));
    Ok(Json(RoleList { roles: list }))
}

/// `PUT /api/v1/admin/roles/{name} {permissions}`.
pub async fn update_role(
    State(state): State<AppState>,
    Path(name): Path<String>,
    JsonBody(req): JsonBody<RoleUpdate>,
) -> Result<Json<RoleView>, ApiError> {
    if Role::parse(&name).is_some() {
        return Err(ApiError::Conflict(format!("{name} is a built-in role")));
    }
    check_permissions(&req.permissions)?;
    let role = RoleRecord { name, permissions: req.permissions, created_at_ms: now_ms() };
    meta_write(&state, MetaOp::PutRole { role: role.clone(), create: false }).await?;
    Ok(Json(role_view(&role)))
}

/// `DELETE /api/v1/admin/roles/{name}`.
pub async fn delete_role(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<DeletedRole>, ApiError> {
    if Role::parse(&name).is_some() {
        return Err(ApiError::Conflict(format!("{name} is a built-in role")));
    }
    meta_write(&state, MetaOp::DeleteRole { name: name.clone() }).await?;
    Ok(Json(DeletedRole { name, deleted: true }))
}

/// `GET /api/v1/admin/routes`: the access decision of every route.
pub async fn route_table(State(state): State<AppState>) -> Json<RouteList> {
    let routes: Vec<RouteAccess> = state
        .decisions()
        .iter()
        .map(|d| {
            let (m, p) = (d.method, &d.path);
            let access = match d.access {
                Access::Public => "public".to_string(),
                Access::Authenticated => "authenticated".to_string(),
                Access::Permission(p) => p.to_string(),
                Access::Metrics => format!("{} or the metrics token", crate::http::permissions::METRICS_PERMISSION),
            };
            RouteAccess { method: m.to_string(), path: p.clone(), access }
        })
        .collect();
    Json(RouteList { routes })
}

/// `GET /api/v1/admin/permissions`: every permission.
pub async fn permission_list() -> Json<PermissionList> {
    Json(PermissionList { permissions: PERMISSIONS.iter().map(|p| p.to_string()).collect() })
}

#[cfg(test)]
mod tests {
    use super::check_password_policy;

    #[test]
    fn password_policy() {
        assert!(check_password_policy("Str0ng-Enough!").is_ok());
        for weak in ["short1!A", "alllowercase-123", "ALLUPPER-12345", "NoDigitsHere!!", "NoSymbols12345a"] {
            assert!(check_password_policy(weak).is_err(), "{weak}");
        }
    }
}
