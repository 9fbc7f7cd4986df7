//! The meta engine (group 0): the cluster map, users and sessions.
//!
//! Keys: `map` → cluster map; `u/<id>` → user; `n/<username>` → user id;
//! `s/<token hash>` → session.

use tessera_api::command::{MetaOp, RejectKind, Response};
use tessera_api::meta::{ClusterMap, Role, RoleRecord, SessionRecord, UserRecord};

use super::{Engine, ReadView, Tx};
use crate::error::Result;

/// Meta engine.
pub struct MetaEngine;

const MAP_KEY: &[u8] = b"map";

fn user_key(id: &str) -> Vec<u8> {
    [b"u/".as_slice(), id.as_bytes()].concat()
}

fn name_key(username: &str) -> Vec<u8> {
    [b"n/".as_slice(), username.as_bytes()].concat()
}

fn role_key(name: &str) -> Vec<u8> {
    [b"r/".as_slice(), name.as_bytes()].concat()
}

fn reject(kind: RejectKind, message: impl Into<String>) -> Result<Response> {
    Ok(Response::Rejected { kind, message: message.into() })
}

/// Whether removing `id`'s admin role (or the user) would leave no admin.
fn is_last_admin(view: &ReadView<'_>, id: &str) -> Result<bool> {
    let admins: Vec<String> = list_users(view)?.into_iter().filter(|u| u.role == Role::Admin).map(|u| u.id).collect();
    Ok(admins.len() == 1 && admins[0] == id)
}

fn session_key(hash: &str) -> Vec<u8> {
    [b"s/".as_slice(), hash.as_bytes()].concat()
}

impl Engine for MetaEngine {
    type Op = MetaOp;

    fn apply(&self, tx: &mut Tx<'_>, _now: i64, op: &MetaOp) -> Result<Response> {
        match op {
            MetaOp::InitClusterMap(map) => {
                if tx.view().get(MAP_KEY)?.is_some() {
                    return Ok(Response::Applied(false));
                }
                tx.put(MAP_KEY, &serde_json::to_vec(map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::ProvisionFirstAdmin(user) => {
                if user_count(tx.view())? > 0 {
                    return Ok(Response::Applied(false));
                }
                tx.put(&user_key(&user.id), &serde_json::to_vec(user)?);
                tx.put(&name_key(&user.username), user.id.as_bytes());
                Ok(Response::Applied(true))
            }
            MetaOp::CreateUser(user) => {
                if tx.view().get(&name_key(&user.username))?.is_some() {
                    return reject(RejectKind::Conflict, format!("user {} already exists", user.username));
                }
                tx.put(&user_key(&user.id), &serde_json::to_vec(user)?);
                tx.put(&name_key(&user.username), user.id.as_bytes());
                Ok(Response::Applied(true))
            }
            MetaOp::UpdateUser(user) => {
                let Some(old) = user_by_id(tx.view(), &user.id)? else {
                    return reject(RejectKind::NotFound, format!("user {} does not exist", user.id));
                };
                if old.role == Role::Admin && user.role != Role::Admin && is_last_admin(tx.view(), &user.id)? {
                    return reject(RejectKind::Conflict, "the last admin cannot lose the admin role");
                }
                if old.username != user.username {
                    if tx.view().get(&name_key(&user.username))?.is_some() {
                        return reject(RejectKind::Conflict, format!("user {} already exists", user.username));
                    }
                    tx.delete(&name_key(&old.username));
                    tx.put(&name_key(&user.username), user.id.as_bytes());
                }
                tx.put(&user_key(&user.id), &serde_json::to_vec(user)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteUser { id } => {
                let Some(old) = user_by_id(tx.view(), id)? else {
                    return reject(RejectKind::NotFound, format!("user {id} does not exist"));
                };
                if old.role == Role::Admin && is_last_admin(tx.view(), id)? {
                    return reject(RejectKind::Conflict, "the last admin cannot be deleted");
                }
                tx.delete(&user_key(id));
                tx.delete(&name_key(&old.username));
                Ok(Response::Applied(true))
            }
            MetaOp::PutRole { role, create } => {
                let exists = tx.view().get(&role_key(&role.name))?.is_some();
                if *create && exists {
                    return reject(RejectKind::Conflict, format!("role {} already exists", role.name));
                }
                if !*create && !exists {
                    return reject(RejectKind::NotFound, format!("role {} does not exist", role.name));
                }
                tx.put(&role_key(&role.name), &serde_json::to_vec(role)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteRole { name } => {
                if tx.view().get(&role_key(name))?.is_none() {
                    return reject(RejectKind::NotFound, format!("role {name} does not exist"));
                }
                tx.delete(&role_key(name));
                Ok(Response::Applied(true))
            }
            MetaOp::CreateSession { token_hash, session } => {
                tx.put(&session_key(token_hash), &serde_json::to_vec(session)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteSession { token_hash } => {
                let existed = tx.view().get(&session_key(token_hash))?.is_some();
                tx.delete(&session_key(token_hash));
                Ok(Response::Applied(existed))
            }
        }
    }
}

/// The recorded cluster map.
pub fn cluster_map(view: &ReadView<'_>) -> Result<Option<ClusterMap>> {
    Ok(view.get(MAP_KEY)?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// A user by id.
pub fn user_by_id(view: &ReadView<'_>, id: &str) -> Result<Option<UserRecord>> {
    Ok(view.get(&user_key(id))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// A user by username.
pub fn user_by_name(view: &ReadView<'_>, username: &str) -> Result<Option<UserRecord>> {
    match view.get(&name_key(username))? {
        Some(id) => user_by_id(view, &String::from_utf8_lossy(&id)),
        None => Ok(None),
    }
}

/// Every user, by id.
pub fn list_users(view: &ReadView<'_>) -> Result<Vec<UserRecord>> {
    let mut out = Vec::new();
    view.scan_prefix(b"u/", |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// Every custom role, by name.
pub fn list_roles(view: &ReadView<'_>) -> Result<Vec<RoleRecord>> {
    let mut out = Vec::new();
    view.scan_prefix(b"r/", |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// A custom role by name.
pub fn role(view: &ReadView<'_>, name: &str) -> Result<Option<RoleRecord>> {
    Ok(view.get(&role_key(name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// How many users exist.
pub fn user_count(view: &ReadView<'_>) -> Result<u64> {
    let mut n = 0;
    view.scan_prefix(b"u/", |_, _| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

/// A session by token hash, if it has not expired at `now`.
pub fn session(view: &ReadView<'_>, token_hash: &str, now: i64) -> Result<Option<SessionRecord>> {
    let s: Option<SessionRecord> =
        view.get(&session_key(token_hash))?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
    Ok(s.filter(|s| now < s.expires_at_ms))
}
