//! Access control: every route has an explicit decision in [`ROUTES`], checked by
//! one middleware before any handler runs. A route missing from the table is
//! refused (fail closed), so a new route cannot ship without a decision.
//!
//! Built-in roles: admin holds every permission; operator every `read:*` and
//! `write:*`; viewer every `read:*`. `manage:*` permissions (users, roles, node
//! lifecycle, security, vault, backup, compliance) belong to admins only.
//! Custom roles add `read:*`/`write:*` permissions to a user.

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No authentication.
    Public,
    /// Any authenticated caller (self-service routes).
    Authenticated,
    /// A caller holding this permission.
    Permission(&'static str),
}

use Access::{Authenticated, Permission as P, Public};

/// The decision of every route: method, route template, access.
pub const ROUTES: &[(&str, &str, Access)] = &[
    ("GET", "/health", Public),
    ("GET", "/livez", Public),
    ("GET", "/readyz", Public),
    ("POST", "/api/v1/auth/login", Public),
    ("POST", "/api/v1/auth/logout", Authenticated),
    ("POST", "/api/v1/auth/mfa/enable", Authenticated),
    ("POST", "/api/v1/auth/mfa/verify", Public),
    ("POST", "/api/v1/auth/mfa/disable", Authenticated),
    // Key-value.
    ("GET", "/api/v1/kv/keys", P("read:kv")),
    ("POST", "/api/v1/kv/keys", P("write:kv")),
    ("DELETE", "/api/v1/kv/keys", P("write:kv")),
    ("GET", "/api/v1/kv/keys/{*key}", P("read:kv")),
    ("DELETE", "/api/v1/kv/keys/{*key}", P("write:kv")),
    ("GET", "/api/v1/kv/count", P("read:kv")),
    // SQL: POST /query reads; the handler also requires write:sql for writes.
    ("POST", "/api/v1/query", P("read:sql")),
    ("GET", "/api/v1/tables", P("read:sql")),
    ("GET", "/api/v1/tables/{name}", P("read:sql")),
    ("GET", "/api/v1/databases", P("read:sql")),
    // Objects.
    ("GET", "/api/v1/objects/buckets", P("read:objects")),
    ("POST", "/api/v1/objects/buckets", P("write:objects")),
    ("GET", "/api/v1/objects/buckets/{bucket}", P("read:objects")),
    ("DELETE", "/api/v1/objects/buckets/{bucket}", P("write:objects")),
    ("GET", "/api/v1/objects/buckets/{bucket}/objects", P("read:objects")),
    ("GET", "/api/v1/objects/buckets/{bucket}/object/{*key}", P("read:objects")),
    ("PUT", "/api/v1/objects/buckets/{bucket}/object/{*key}", P("write:objects")),
    ("DELETE", "/api/v1/objects/buckets/{bucket}/object/{*key}", P("write:objects")),
    // Bucket export/import as objects.ncb (admin only, like backup/restore).
    ("GET", "/api/v1/admin/objects/{bucket}/export", P("manage:backup")),
    ("POST", "/api/v1/admin/objects/{bucket}/import", P("manage:backup")),
    // Documents.
    ("GET", "/api/v1/documents/collections", P("read:documents")),
    ("POST", "/api/v1/documents/collections", P("write:documents")),
    ("GET", "/api/v1/documents/collections/{name}", P("read:documents")),
    ("DELETE", "/api/v1/documents/collections/{name}", P("write:documents")),
    ("GET", "/api/v1/documents/collections/{name}/documents", P("read:documents")),
    ("POST", "/api/v1/documents/collections/{name}/documents", P("write:documents")),
    ("GET", "/api/v1/documents/collections/{name}/documents/{id}", P("read:documents")),
    ("PUT", "/api/v1/documents/collections/{name}/documents/{id}", P("write:documents")),
    ("PATCH", "/api/v1/documents/collections/{name}/documents/{id}", P("write:documents")),
    ("DELETE", "/api/v1/documents/collections/{name}/documents/{id}", P("write:documents")),
    ("POST", "/api/v1/documents/collections/{name}/documents/{id}/update", P("write:documents")),
    ("POST", "/api/v1/documents/collections/{name}/query", P("read:documents")),
    ("GET", "/api/v1/documents/collections/{name}/indexes", P("read:documents")),
    ("POST", "/api/v1/documents/collections/{name}/indexes", P("write:documents")),
    ("DELETE", "/api/v1/documents/collections/{name}/indexes/{field}", P("write:documents")),
    ("POST", "/api/v1/documents/{name}/query", P("read:documents")),
    // Vectors.
    ("GET", "/api/v1/vector/collections", P("read:vectors")),
    ("POST", "/api/v1/vector/collections", P("write:vectors")),
    ("GET", "/api/v1/vector/collections/{name}", P("read:vectors")),
    ("DELETE", "/api/v1/vector/collections/{name}", P("write:vectors")),
    ("POST", "/api/v1/vector/collections/{name}/upsert", P("write:vectors")),
    ("POST", "/api/v1/vector/collections/{name}/batch", P("write:vectors")),
    ("POST", "/api/v1/vector/collections/{name}/search", P("read:vectors")),
    ("GET", "/api/v1/vector/collections/{name}/vectors/{*id}", P("read:vectors")),
    ("DELETE", "/api/v1/vector/collections/{name}/vectors/{*id}", P("write:vectors")),
    // Graph.
    ("POST", "/api/v1/graph/nodes", P("write:graph")),
    ("GET", "/api/v1/graph/nodes/{id}", P("read:graph")),
    ("DELETE", "/api/v1/graph/nodes/{id}", P("write:graph")),
    ("POST", "/api/v1/graph/edges", P("write:graph")),
    ("GET", "/api/v1/graph/edges/{id}", P("read:graph")),
    ("DELETE", "/api/v1/graph/edges/{id}", P("write:graph")),
    ("POST", "/api/v1/graph/batch", P("write:graph")),
    ("GET", "/api/v1/graph/data", P("read:graph")),
    ("POST", "/api/v1/graph/query", P("read:graph")),
    // Time-series.
    ("GET", "/api/v1/timeseries/metrics", P("read:timeseries")),
    ("POST", "/api/v1/timeseries/metrics", P("write:timeseries")),
    ("GET", "/api/v1/timeseries/metrics/{name}", P("read:timeseries")),
    ("PUT", "/api/v1/timeseries/metrics/{name}/retention", P("write:timeseries")),
    ("POST", "/api/v1/timeseries/write", P("write:timeseries")),
    ("POST", "/api/v1/timeseries/query", P("read:timeseries")),
    ("POST", "/api/v1/timeseries/retention/enforce", P("manage:cluster")),
    // Streaming. Consumer polls and commits are consumption: read:streaming.
    ("GET", "/api/v1/streaming/channels", P("read:streaming")),
    ("POST", "/api/v1/streaming/channels", P("write:streaming")),
    ("GET", "/api/v1/streaming/channels/{channel}", P("read:streaming")),
    ("GET", "/api/v1/streaming/channels/{channel}/history", P("read:streaming")),
    ("GET", "/api/v1/streaming/channels/{channel}/consumers", P("read:streaming")),
    ("POST", "/api/v1/streaming/channels/{channel}/consumers/{group}/poll", P("read:streaming")),
    ("POST", "/api/v1/streaming/channels/{channel}/consumers/{group}/commit", P("read:streaming")),
    ("POST", "/api/v1/streaming/publish", P("write:streaming")),
    ("GET", "/api/v1/streaming/cdc", P("read:streaming")),
    ("POST", "/api/v1/streaming/cdc", P("write:streaming")),
    ("DELETE", "/api/v1/streaming/cdc/{database}/{table}", P("write:streaming")),
    ("POST", "/api/v1/streaming/retention/enforce", P("manage:cluster")),
    ("GET", "/api/v1/streaming/{channel}", P("read:streaming")),
    // Bulk import: the handlers also require write:sql / write:documents / write:kv.
    ("POST", "/api/v1/import/sql", P("write:import")),
    ("POST", "/api/v1/import/documents", P("write:import")),
    ("POST", "/api/v1/import/kv", P("write:import")),
    // Administration.
    ("GET", "/api/v1/admin/cluster", P("read:cluster")),
    ("POST", "/api/v1/admin/compress", P("manage:cluster")),
    ("GET", "/api/v1/admin/routes", P("read:cluster")),
    ("GET", "/api/v1/admin/permissions", P("read:cluster")),
    ("GET", "/api/v1/admin/users", P("read:cluster")),
    ("POST", "/api/v1/admin/users", P("manage:users")),
    ("GET", "/api/v1/admin/users/{id}", P("read:cluster")),
    ("PUT", "/api/v1/admin/users/{id}", P("manage:users")),
    ("DELETE", "/api/v1/admin/users/{id}", P("manage:users")),
    ("GET", "/api/v1/admin/roles", P("read:cluster")),
    ("POST", "/api/v1/admin/roles", P("manage:roles")),
    ("PUT", "/api/v1/admin/roles/{name}", P("manage:roles")),
    ("DELETE", "/api/v1/admin/roles/{name}", P("manage:roles")),
    // Security: alerts and the IP block list.
    ("GET", "/api/v1/admin/security/alerts", P("read:cluster")),
    ("POST", "/api/v1/admin/security/alerts/{alert_id}/acknowledge", P("manage:security")),
    ("POST", "/api/v1/admin/security/block-ip", P("manage:security")),
    ("GET", "/api/v1/admin/security/blocked-ips", P("read:cluster")),
    ("DELETE", "/api/v1/admin/security/blocked-ips/{ip}", P("manage:security")),
    // Secrets vault: admin-only, reads included (see docs/secrets-vault.md).
    ("GET", "/api/v1/admin/vault/status", P("manage:vault")),
    ("POST", "/api/v1/admin/vault/unseal", P("manage:vault")),
    ("POST", "/api/v1/admin/vault/seal", P("manage:vault")),
    ("GET", "/api/v1/admin/vault/secrets", P("manage:vault")),
    ("GET", "/api/v1/admin/vault/secrets/{*path}", P("manage:vault")),
    ("PUT", "/api/v1/admin/vault/secrets/{*path}", P("manage:vault")),
    ("DELETE", "/api/v1/admin/vault/secrets/{*path}", P("manage:vault")),
    ("GET", "/api/v1/admin/vault/policies", P("manage:vault")),
    ("GET", "/api/v1/admin/vault/policies/{name}", P("manage:vault")),
    ("PUT", "/api/v1/admin/vault/policies/{name}", P("manage:vault")),
    ("DELETE", "/api/v1/admin/vault/policies/{name}", P("manage:vault")),
    ("GET", "/api/v1/admin/vault/audit", P("manage:vault")),
];

/// The decision for a request: HEAD is decided as GET.
pub fn decision(method: &Method, template: &str) -> Option<Access> {
    let method = if method == Method::HEAD { "GET" } else { method.as_str() };
    ROUTES.iter().find(|(m, p, _)| *m == method && *p == template).map(|(_, _, a)| *a)
}

/// The middleware: authenticates, checks the route's decision, and hands the
/// caller on to the handler.
pub async fn authorize(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let template = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    let Some(access) = decision(req.method(), &template) else {
        return ApiError::Forbidden(format!("no access decision for {} {template}", req.method())).into_response();
    };
    if access == Public {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    if let Access::Permission(p) = access
        && !caller.has(p)
    {
        return ApiError::Forbidden(format!("this route needs the {p} permission")).into_response();
    }
    let idempotency = match parts.headers.get(crate::idempotency::HEADER).map(|v| v.to_str()) {
        None => None,
        Some(Ok(key)) if crate::idempotency::valid_key(key) => match &caller {
            Caller::User { user, .. } => Some(crate::idempotency::Scope::new(&user.id, key)),
            Caller::Bootstrap => None,
        },
        Some(_) => {
            return ApiError::BadRequest("Idempotency-Key must be 1-255 visible ASCII characters".into()).into_response();
        }
    };
    parts.extensions.insert(caller);
    let req = Request::from_parts(parts, body);
    match idempotency {
        Some(scope) => crate::idempotency::with_scope(scope, next.run(req)).await,
        None => next.run(req).await,
    }
}
