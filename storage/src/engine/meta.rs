//! The meta engine (group 0): the cluster map, users and sessions.
//!
//! Keys: `map` → cluster map; `u/<id>` → user; `n/<username>` → user id;
//! `s/<token hash>` → session. The vault (see [`apply_vault`]) lives under `vault/`.

use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response};
use tessera_api::error::ErrorCode;
use tessera_api::meta::{
    ACTIVITIES_KEEP, ActivityRecord, VAULT_AUDIT_KEEP, VaultAuditRecord, VaultKeyRecord, VaultPolicyRecord, VaultSecretRecord,
};
use tessera_api::meta::{ClusterMap, NodeState, Role, RoleRecord, SessionRecord, UserRecord};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
use crate::error::Result;

/// MFA, alerts, failed-login counters and IP blocks (keys under `sec/`).
pub mod audit;
pub mod classification;
pub mod consent;
pub mod incidents;
pub mod security;

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

fn reject(kind: ErrorCode, message: impl Into<String>) -> Result<Response> {
    Ok(Response::rejected(kind, message))
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
    const SPACE: u8 = super::space::META;
    type Op = MetaOp;
    type Query = MetaQuery;
    type Answer = MetaQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &MetaQuery) -> Result<Answer<MetaQueryResult>> {
        let meta = ctx.view::<Self>();
        Ok(Ok(match query {
            MetaQuery::ClusterMap => MetaQueryResult::ClusterMap(cluster_map(&meta)?),
            MetaQuery::UserByName { username } => MetaQueryResult::User(user_by_name(&meta, username)?),
            MetaQuery::UserById { id } => MetaQueryResult::User(user_by_id(&meta, id)?),
            MetaQuery::UserCount => MetaQueryResult::UserCount(user_count(&meta)?),
            MetaQuery::ListUsers => MetaQueryResult::Users(list_users(&meta)?),
            MetaQuery::ListRoles => MetaQueryResult::Roles(list_roles(&meta)?),
            MetaQuery::Role { name } => MetaQueryResult::Role(role(&meta, name)?),
            MetaQuery::Security(q) => MetaQueryResult::Security(security::query(&meta, q, ctx.now_ms)?),
            MetaQuery::Consent(q) => MetaQueryResult::Consent(consent::query(&meta, q)?),
            MetaQuery::Audit(q) => MetaQueryResult::Audit(audit::query(&meta, q)?),
            MetaQuery::Incident(q) => MetaQueryResult::Incident(incidents::query(&meta, q)?),
            MetaQuery::Classifications { table } => MetaQueryResult::Classifications(classification::list(&meta, table.as_deref())?),
            MetaQuery::VaultState => {
                let (key, seal_epoch) = vault_state(&meta)?;
                MetaQueryResult::VaultState { key, seal_epoch }
            }
            MetaQuery::VaultSecret { path } => MetaQueryResult::VaultSecret(vault_secret(&meta, path)?),
            MetaQuery::VaultSecrets { prefix } => MetaQueryResult::VaultSecrets(vault_secrets(&meta, prefix)?),
            MetaQuery::VaultPolicies => MetaQueryResult::VaultPolicies(vault_policies(&meta)?),
            MetaQuery::VaultAudit { limit } => MetaQueryResult::VaultAudit(vault_audit(&meta, *limit)?),
            MetaQuery::Activities { limit, kind } => MetaQueryResult::Activities(activities(&meta, *limit, kind.as_deref())?),
            MetaQuery::RouterStats => {
                let mut all = Vec::new();
                meta.scan_prefix(ROUTER_STATS_PREFIX, |_, v| {
                    all.push(serde_json::from_slice(v)?);
                    Ok(true)
                })?;
                MetaQueryResult::RouterStats(all)
            }
            MetaQuery::SigningKey => MetaQueryResult::SigningKey(meta.get(SIGNING_KEY)?.map(|v| String::from_utf8_lossy(&v).into_owned())),
            MetaQuery::Certificates { from_ms, to_ms } => {
                let mut all: Vec<serde_json::Value> = Vec::new();
                meta.scan_prefix(CERT_PREFIX, |_, v| {
                    let cert: serde_json::Value = serde_json::from_slice(v)?;
                    let at = cert["issued_at_ms"].as_i64().unwrap_or(0);
                    if from_ms.is_none_or(|f| at >= f) && to_ms.is_none_or(|t| at <= t) {
                        all.push(cert);
                    }
                    Ok(true)
                })?;
                all.sort_by_key(|c| c["issued_at_ms"].as_i64().unwrap_or(0));
                MetaQueryResult::Certificates(all)
            }
            MetaQuery::Certificate { id } => MetaQueryResult::Certificate(
                meta.get(&[CERT_PREFIX, id.as_bytes()].concat())?.map(|v| serde_json::from_slice(&v)).transpose()?,
            ),
            MetaQuery::ErasureJobs => {
                let mut all: Vec<serde_json::Value> = Vec::new();
                meta.scan_prefix(ERASURE_JOB_PREFIX, |_, v| {
                    all.push(serde_json::from_slice(v)?);
                    Ok(true)
                })?;
                all.sort_by_key(|j| j["created_at_ms"].as_i64().unwrap_or(0));
                MetaQueryResult::ErasureJobs(all)
            }
            MetaQuery::Export { id } => MetaQueryResult::Export(
                meta.get(&[EXPORT_PREFIX, id.as_bytes()].concat())?
                    .map(|v| serde_json::from_slice::<tessera_api::compliance::ExportFile>(&v))
                    .transpose()?
                    .filter(|f| f.expires_at_ms > ctx.now_ms),
            ),
            MetaQuery::Session { token_hash } => MetaQueryResult::Session(session(&meta, token_hash, ctx.now_ms)?),
        }))
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &MetaOp) -> Result<Response> {
        match op {
            MetaOp::InitClusterMap(map) => {
                if tx.view().get(MAP_KEY)?.is_some() {
                    return Ok(Response::Applied(false));
                }
                tx.put(MAP_KEY, &serde_json::to_vec(map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::SetNodeState { node, state } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                let Some(current) = map.node(*node).map(|n| n.state) else {
                    return reject(ErrorCode::NotFound, format!("node {node} does not exist"));
                };
                if current == *state {
                    return Ok(Response::Applied(false));
                }
                // One node leaves at a time: two leaving at once could take a quorum with them.
                if *state != NodeState::Active {
                    if let Some(mv) = map.moving {
                        return reject(ErrorCode::Conflict, in_flight(&mv));
                    }
                    if let Some(other) = map.nodes.iter().find(|n| n.id != *node && n.state != NodeState::Active) {
                        return reject(
                            ErrorCode::Conflict,
                            format!("node {} is {}: one node leaves at a time (remove it first)", other.id, other.state.as_str()),
                        );
                    }
                    if map.nodes.len() < 2 {
                        return reject(ErrorCode::Conflict, format!("node {node} is the only node: nothing could take over its groups"));
                    }
                }
                map.nodes.iter_mut().filter(|n| n.id == *node).for_each(|n| n.state = *state);
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::EnsureSigningKey { seed_b64 } => {
                if tx.view().get(SIGNING_KEY)?.is_some() {
                    return Ok(Response::Applied(false));
                }
                tx.put(SIGNING_KEY, seed_b64.as_bytes());
                Ok(Response::Applied(true))
            }
            MetaOp::RedactActivities { needle } => {
                let mut hits = Vec::new();
                tx.view().scan_prefix(ACTIVITY_PREFIX, |k, v| {
                    if let Ok(mut record) = serde_json::from_slice::<ActivityRecord>(v)
                        && tessera_api::compliance::names_token(&record.detail, needle)
                    {
                        record.detail = REDACTED_DETAIL.to_string();
                        hits.push((k.to_vec(), record));
                    }
                    Ok(true)
                })?;
                for (k, record) in &hits {
                    tx.put(k, &serde_json::to_vec(record)?);
                }
                Ok(Response::Deleted(hits.len() as u64))
            }
            MetaOp::PutExport { id, file } => {
                let mut expired = Vec::new();
                tx.view().scan_prefix(EXPORT_PREFIX, |k, v| {
                    if serde_json::from_slice::<tessera_api::compliance::ExportFile>(v).map_or(true, |f| f.expires_at_ms <= now) {
                        expired.push(k.to_vec());
                    }
                    Ok(true)
                })?;
                for k in expired {
                    tx.delete(&k);
                }
                tx.put(&[EXPORT_PREFIX, id.as_bytes()].concat(), &serde_json::to_vec(file)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DropExports { subject_id } => {
                let mut hits = Vec::new();
                tx.view().scan_prefix(EXPORT_PREFIX, |k, v| {
                    if serde_json::from_slice::<tessera_api::compliance::ExportFile>(v).map_or(true, |f| f.subject_id == *subject_id) {
                        hits.push(k.to_vec());
                    }
                    Ok(true)
                })?;
                for k in &hits {
                    tx.delete(k);
                }
                Ok(Response::Deleted(hits.len() as u64))
            }
            MetaOp::PutErasureJob { id, job } => {
                tx.put(&[ERASURE_JOB_PREFIX, id.as_bytes()].concat(), &serde_json::to_vec(job)?);
                Ok(Response::Applied(true))
            }
            MetaOp::RecordCertificate { id, certificate } => {
                let key = [CERT_PREFIX, id.as_bytes()].concat();
                if tx.view().get(&key)?.is_some() {
                    return reject(ErrorCode::Conflict, format!("certificate {id} exists already"));
                }
                tx.put(&key, &serde_json::to_vec(certificate)?);
                Ok(Response::Applied(true))
            }
            MetaOp::PutRouterStats(record) => {
                let mut stale = Vec::new();
                tx.view().scan_prefix(ROUTER_STATS_PREFIX, |k, v| {
                    let old: tessera_api::meta::RouterStatsRecord = serde_json::from_slice(v)?;
                    if old.at_ms < now - ROUTER_STATS_KEEP_MS {
                        stale.push(k.to_vec());
                    }
                    Ok(true)
                })?;
                for k in stale {
                    tx.delete(&k);
                }
                let mut record = record.clone();
                record.at_ms = now;
                tx.put(&[ROUTER_STATS_PREFIX, record.router.as_bytes()].concat(), &serde_json::to_vec(&record)?);
                Ok(Response::Applied(true))
            }
            MetaOp::RecordActivities(records) => {
                let mut count = read_u64(tx.view(), ACTIVITY_COUNT)?;
                // The oldest record lies at or after the floor: the trim's scan starts
                // there rather than walking over the tombstones of the records it
                // dropped before (thousands a second under load).
                let mut floor = tx.view().get(ACTIVITY_FLOOR)?.unwrap_or_else(|| ACTIVITY_PREFIX.to_vec());
                let mut lowest_written: Option<Vec<u8>> = None;
                for record in records {
                    let key = [ACTIVITY_PREFIX, format!("{:020}/{}", record.at_ms.max(0), record.id).as_bytes()].concat();
                    if tx.view().get(&key)?.is_none() {
                        count += 1;
                    }
                    if lowest_written.as_ref().is_none_or(|lowest| key < *lowest) {
                        lowest_written = Some(key.clone());
                    }
                    tx.put(&key, &serde_json::to_vec(record)?);
                }
                if count as usize > ACTIVITIES_KEEP {
                    let mut excess = count as usize - ACTIVITIES_KEEP;
                    let mut oldest = Vec::new();
                    let end = crate::keys::prefix_end(ACTIVITY_PREFIX).unwrap_or_default();
                    tx.view().scan_range(&floor, &end, |k, _| {
                        oldest.push(k.to_vec());
                        excess -= 1;
                        Ok(excess > 0)
                    })?;
                    for k in oldest {
                        tx.delete(&k);
                        count -= 1;
                        floor = k;
                    }
                }
                // The trim saw only records written before this command: a late one
                // written now may lie below what it dropped.
                if let Some(lowest) = lowest_written
                    && lowest < floor
                {
                    floor = lowest;
                }
                tx.put(ACTIVITY_FLOOR, &floor);
                tx.put(ACTIVITY_COUNT, &count.to_be_bytes());
                Ok(Response::Applied(true))
            }
            MetaOp::RemoveNode { node } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                if map.node(*node).is_none() {
                    return Ok(Response::Applied(false));
                }
                if map.groups.iter().any(|g| g.members == [*node]) {
                    return reject(ErrorCode::Conflict, format!("node {node} holds the last replica of a group"));
                }
                map.nodes.retain(|n| n.id != *node);
                for g in &mut map.groups {
                    g.members.retain(|m| m != node);
                    if g.preferred_leader == Some(*node) {
                        g.preferred_leader = None;
                    }
                }
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::SetNodeLocality { node, locality } => {
                if let Err(e) = tessera_api::meta::check_locality(locality) {
                    return reject(ErrorCode::Invalid, e);
                }
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                let Some(entry) = map.nodes.iter_mut().find(|n| n.id == *node) else {
                    return reject(ErrorCode::NotFound, format!("node {node} does not exist"));
                };
                if entry.locality == *locality {
                    return Ok(Response::Applied(false));
                }
                entry.locality = locality.clone();
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::AddNode { node } => {
                if let Err(e) = tessera_api::meta::check_locality(&node.locality) {
                    return reject(ErrorCode::Invalid, e);
                }
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                if let Some(existing) = map.node(node.id) {
                    if existing.addr == node.addr {
                        return Ok(Response::Applied(false));
                    }
                    return reject(ErrorCode::Conflict, format!("node {} is already in the cluster at {}", node.id, existing.addr));
                }
                if let Some(other) = map.nodes.iter().find(|n| n.state != NodeState::Active) {
                    return reject(
                        ErrorCode::Conflict,
                        format!("node {} is {}: one membership change at a time", other.id, other.state.as_str()),
                    );
                }
                if let Some(mv) = map.moving {
                    return reject(ErrorCode::Conflict, in_flight(&mv));
                }
                map.nodes.push(node.clone().in_state(NodeState::Joining));
                map.nodes.sort_by_key(|n| n.id);
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::SetGroupMembers { group, members, expected_move } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                if let Some(unknown) = members.iter().find(|m| map.node(**m).is_none()) {
                    return reject(ErrorCode::NotFound, format!("node {unknown} does not exist"));
                }
                if members.is_empty() {
                    return reject(ErrorCode::Conflict, format!("group {group} would have no replica"));
                }
                let Some(g) = map.groups.iter_mut().find(|g| g.id == *group) else {
                    return reject(ErrorCode::NotFound, format!("group {group} does not exist"));
                };
                if g.members == *members {
                    return Ok(Response::Applied(false));
                }
                if let Some(expected) = expected_move
                    && map.moving != Some(*expected)
                {
                    return reject(
                        ErrorCode::Conflict,
                        format!("the replica move {expected:?} is not the one in flight ({:?}): its record is stale", map.moving),
                    );
                }
                let Some(g) = map.groups.iter_mut().find(|g| g.id == *group) else {
                    return reject(ErrorCode::NotFound, format!("group {group} does not exist"));
                };
                g.members = members.clone();
                if g.preferred_leader.is_some_and(|p| !members.contains(&p)) {
                    g.preferred_leader = None;
                }
                map.end_move(*group);
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::BeginMove(mv) => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                match map.begin_move(*mv) {
                    Ok(false) => Ok(Response::Applied(false)),
                    Ok(true) => {
                        tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                        Ok(Response::Applied(true))
                    }
                    Err(why) => reject(ErrorCode::Conflict, why),
                }
            }
            MetaOp::SetPreferredLeader { group, node } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                let Some(g) = map.groups.iter_mut().find(|g| g.id == *group) else {
                    return reject(ErrorCode::NotFound, format!("group {group} does not exist"));
                };
                if let Some(n) = node.filter(|n| !g.members.contains(n)) {
                    return reject(ErrorCode::Conflict, format!("node {n} holds no replica of group {group}: it cannot lead it"));
                }
                if g.preferred_leader == *node {
                    return Ok(Response::Applied(false));
                }
                g.preferred_leader = *node;
                map.epoch += 1;
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::EndMove { group } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                if !map.end_move(*group) {
                    return Ok(Response::Applied(false));
                }
                tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                Ok(Response::Applied(true))
            }
            MetaOp::ReserveSplit { parent } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                match map.reserve_split(*parent) {
                    Ok(false) => Ok(Response::Applied(false)),
                    Ok(true) => {
                        tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                        Ok(Response::Applied(true))
                    }
                    Err(why) => reject(ErrorCode::Conflict, why),
                }
            }
            MetaOp::RecordSplit { parent, child, at, members } => {
                let Some(mut map) = cluster_map(tx.view())? else {
                    return reject(ErrorCode::NotFound, "no cluster map is recorded");
                };
                match map.record_split(*parent, *child, at, members) {
                    Ok(false) => Ok(Response::Applied(false)),
                    Ok(true) => {
                        tx.put(MAP_KEY, &serde_json::to_vec(&map)?);
                        Ok(Response::Applied(true))
                    }
                    Err(why) => reject(ErrorCode::Conflict, why),
                }
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
                    return reject(ErrorCode::Conflict, format!("user {} already exists", user.username));
                }
                tx.put(&user_key(&user.id), &serde_json::to_vec(user)?);
                tx.put(&name_key(&user.username), user.id.as_bytes());
                Ok(Response::Applied(true))
            }
            MetaOp::UpdateUser(user) => {
                let Some(old) = user_by_id(tx.view(), &user.id)? else {
                    return reject(ErrorCode::NotFound, format!("user {} does not exist", user.id));
                };
                if old.role == Role::Admin && user.role != Role::Admin && is_last_admin(tx.view(), &user.id)? {
                    return reject(ErrorCode::Conflict, "the last admin cannot lose the admin role");
                }
                if old.username != user.username {
                    if tx.view().get(&name_key(&user.username))?.is_some() {
                        return reject(ErrorCode::Conflict, format!("user {} already exists", user.username));
                    }
                    tx.delete(&name_key(&old.username));
                    tx.put(&name_key(&user.username), user.id.as_bytes());
                }
                tx.put(&user_key(&user.id), &serde_json::to_vec(user)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteUser { id } => {
                let Some(old) = user_by_id(tx.view(), id)? else {
                    return reject(ErrorCode::NotFound, format!("user {id} does not exist"));
                };
                if old.role == Role::Admin && is_last_admin(tx.view(), id)? {
                    return reject(ErrorCode::Conflict, "the last admin cannot be deleted");
                }
                tx.delete(&user_key(id));
                tx.delete(&name_key(&old.username));
                Ok(Response::Applied(true))
            }
            MetaOp::PutRole { role, create } => {
                let exists = tx.view().get(&role_key(&role.name))?.is_some();
                if *create && exists {
                    return reject(ErrorCode::Conflict, format!("role {} already exists", role.name));
                }
                if !*create && !exists {
                    return reject(ErrorCode::NotFound, format!("role {} does not exist", role.name));
                }
                tx.put(&role_key(&role.name), &serde_json::to_vec(role)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteRole { name } => {
                if tx.view().get(&role_key(name))?.is_none() {
                    return reject(ErrorCode::NotFound, format!("role {name} does not exist"));
                }
                tx.delete(&role_key(name));
                Ok(Response::Applied(true))
            }
            MetaOp::CreateSession { token_hash, session } => {
                if let Some(ip) = &session.client_ip {
                    security::note_login(tx, now, &session.user_id, ip)?;
                }
                tx.put(&session_key(token_hash), &serde_json::to_vec(session)?);
                Ok(Response::Applied(true))
            }
            MetaOp::DeleteSession { token_hash } => {
                let existed = tx.view().get(&session_key(token_hash))?.is_some();
                tx.delete(&session_key(token_hash));
                Ok(Response::Applied(existed))
            }
            MetaOp::VaultInit(_)
            | MetaOp::VaultSeal
            | MetaOp::VaultPutSecret(_)
            | MetaOp::VaultDeleteSecret { .. }
            | MetaOp::VaultPutPolicy(_)
            | MetaOp::VaultDeletePolicy { .. }
            | MetaOp::VaultAudit(_)
            | MetaOp::VaultRekey { .. } => apply_vault(tx, now, op),
            MetaOp::Security(op) => security::apply(tx, now, op),
            MetaOp::Consent(op) => consent::apply(tx, now, op),
            MetaOp::Incident(op) => incidents::apply(tx, now, op),
            MetaOp::Classify(op) => {
                classification::apply(tx, now, op)?;
                Ok(Response::Applied(true))
            }
            MetaOp::Audit(events) => {
                audit::append(tx, now, events.clone())?;
                Ok(Response::Applied(true))
            }
            MetaOp::PruneAudit { before_ms } => Ok(Response::Deleted(audit::prune(tx, now, *before_ms)?)),
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
    let s: Option<SessionRecord> = view.get(&session_key(token_hash))?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
    Ok(s.filter(|s| now < s.expires_at_ms))
}

// ---------------------------------------------------------------------------
// Vault: `vault/key` → wrapped data key; `vault/epoch` → seal epoch (u64 BE);
// `vault/s/<path>` → secret ciphertext; `vault/p/<name>` → access policy;
// `vault/a/<at_ms, 20 digits>/<id>` → audit record; `vault/acount` → how many.
// ---------------------------------------------------------------------------

const VAULT_KEY: &[u8] = b"vault/key";
const VAULT_EPOCH: &[u8] = b"vault/epoch";
const VAULT_AUDIT_COUNT: &[u8] = b"vault/acount";
const ACTIVITY_COUNT: &[u8] = b"activity/count";
/// What a redacted activity record says instead of its SQL text.
const REDACTED_DETAIL: &str = "(redacted by a secure erasure of the data subject it named)";
const ACTIVITY_PREFIX: &[u8] = b"activity/r/";
/// No activity record's key is below this one (the last one trimmed, or the
/// oldest written since): where the trim looks for the oldest.
const ACTIVITY_FLOOR: &[u8] = b"activity/floor";
/// The Ed25519 seed (base64) deletion certificates are signed with.
const SIGNING_KEY: &[u8] = b"cert/key";
/// `cert/r/<id>` → a signed deletion certificate (JSON).
const CERT_PREFIX: &[u8] = b"cert/r/";
/// Erasure jobs by id (JSON, without the erased data).
const ERASURE_JOB_PREFIX: &[u8] = b"erasure-job/";
/// Kept subject exports (`export/<id>` → `ExportFile`).
const EXPORT_PREFIX: &[u8] = b"export/";
/// `routerstats/<router>` → that router's published request figures.
const ROUTER_STATS_PREFIX: &[u8] = b"routerstats/";
/// Figures not published again within an hour (a router gone) are dropped.
const ROUTER_STATS_KEEP_MS: i64 = 3_600_000;
const VAULT_AUDIT_PREFIX: &[u8] = b"vault/a/";

fn vault_secret_key(path: &str) -> Vec<u8> {
    [b"vault/s/".as_slice(), path.as_bytes()].concat()
}

fn vault_policy_key(name: &str) -> Vec<u8> {
    [b"vault/p/".as_slice(), name.as_bytes()].concat()
}

fn read_u64(view: &ReadView<'_>, key: &[u8]) -> Result<u64> {
    Ok(view.get(key)?.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok()).map(u64::from_be_bytes).unwrap_or(0))
}

/// Applies the vault's meta operations.
fn apply_vault(tx: &mut Tx<'_>, now: i64, op: &MetaOp) -> Result<Response> {
    match op {
        MetaOp::VaultInit(key) => {
            if tx.view().get(VAULT_KEY)?.is_some() {
                return Ok(Response::Applied(false));
            }
            tx.put(VAULT_KEY, &serde_json::to_vec(key)?);
            Ok(Response::Applied(true))
        }
        MetaOp::VaultRekey { expected_wrapped_key, key } => {
            let Some(stored) = tx.view().get(VAULT_KEY)? else {
                return reject(ErrorCode::NotFound, "the vault is not initialized");
            };
            let stored: VaultKeyRecord = serde_json::from_slice(&stored)?;
            if stored.wrapped_key != *expected_wrapped_key || stored.key_id != key.key_id {
                return Ok(Response::Applied(false));
            }
            tx.put(VAULT_KEY, &serde_json::to_vec(key)?);
            Ok(Response::Applied(true))
        }
        MetaOp::VaultSeal => {
            let epoch = read_u64(tx.view(), VAULT_EPOCH)? + 1;
            tx.put(VAULT_EPOCH, &epoch.to_be_bytes());
            Ok(Response::Applied(true))
        }
        MetaOp::VaultPutSecret(secret) => {
            let mut secret = secret.clone();
            let old = vault_secret(tx.view(), &secret.path)?;
            secret.version = old.as_ref().map_or(1, |o| o.version + 1);
            secret.created_at_ms = old.as_ref().map_or(now, |o| o.created_at_ms);
            secret.updated_at_ms = now;
            tx.put(&vault_secret_key(&secret.path), &serde_json::to_vec(&secret)?);
            Ok(Response::Applied(old.is_none()))
        }
        MetaOp::VaultDeleteSecret { path } => {
            let existed = tx.view().get(&vault_secret_key(path))?.is_some();
            tx.delete(&vault_secret_key(path));
            Ok(Response::Deleted(existed as u64))
        }
        MetaOp::VaultPutPolicy(policy) => {
            let mut policy = policy.clone();
            let old: Option<VaultPolicyRecord> =
                tx.view().get(&vault_policy_key(&policy.name))?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
            policy.created_at_ms = old.as_ref().map_or(now, |o| o.created_at_ms);
            policy.updated_at_ms = now;
            tx.put(&vault_policy_key(&policy.name), &serde_json::to_vec(&policy)?);
            Ok(Response::Applied(old.is_none()))
        }
        MetaOp::VaultDeletePolicy { name } => {
            if tx.view().get(&vault_policy_key(name))?.is_none() {
                return reject(ErrorCode::NotFound, format!("vault policy {name} does not exist"));
            }
            tx.delete(&vault_policy_key(name));
            Ok(Response::Applied(true))
        }
        MetaOp::VaultAudit(record) => {
            let mut record = record.clone();
            record.at_ms = now;
            let key = [VAULT_AUDIT_PREFIX, format!("{:020}/{}", now.max(0), record.id).as_bytes()].concat();
            let mut count = read_u64(tx.view(), VAULT_AUDIT_COUNT)? + 1;
            if count as usize > VAULT_AUDIT_KEEP {
                let mut oldest = None;
                tx.view().scan_prefix(VAULT_AUDIT_PREFIX, |k, _| {
                    oldest = Some(k.to_vec());
                    Ok(false)
                })?;
                if let Some(k) = oldest {
                    tx.delete(&k);
                    count -= 1;
                }
            }
            tx.put(&key, &serde_json::to_vec(&record)?);
            tx.put(VAULT_AUDIT_COUNT, &count.to_be_bytes());
            Ok(Response::Applied(true))
        }
        _ => reject(ErrorCode::Invalid, "not a vault operation"),
    }
}

/// The vault's wrapped key (if the vault is initialized) and its seal epoch.
pub fn vault_state(view: &ReadView<'_>) -> Result<(Option<VaultKeyRecord>, u64)> {
    let key = view.get(VAULT_KEY)?.map(|raw| serde_json::from_slice(&raw)).transpose()?;
    Ok((key, read_u64(view, VAULT_EPOCH)?))
}

/// One vault secret (ciphertext).
pub fn vault_secret(view: &ReadView<'_>, path: &str) -> Result<Option<VaultSecretRecord>> {
    Ok(view.get(&vault_secret_key(path))?.map(|raw| serde_json::from_slice(&raw)).transpose()?)
}

/// Vault secrets whose path starts with `prefix`, in path order.
pub fn vault_secrets(view: &ReadView<'_>, prefix: &str) -> Result<Vec<VaultSecretRecord>> {
    let mut out = Vec::new();
    view.scan_prefix(&vault_secret_key(prefix), |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// Every vault access policy, by name.
pub fn vault_policies(view: &ReadView<'_>) -> Result<Vec<VaultPolicyRecord>> {
    let mut out = Vec::new();
    view.scan_prefix(b"vault/p/", |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// The newest `limit` activity records of `kind` (all kinds when `None`), newest first.
pub fn activities(view: &ReadView<'_>, limit: usize, kind: Option<&str>) -> Result<Vec<ActivityRecord>> {
    /// Only the field a filter needs: the scan passes up to 10,000 records.
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    // The newest `limit` matching records, as stored; only those are decoded.
    let mut newest: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::with_capacity(limit.min(1024));
    view.scan_prefix(ACTIVITY_PREFIX, |_, v| {
        if let Some(wanted) = kind
            && serde_json::from_slice::<Kind<'_>>(v)?.kind != wanted
        {
            return Ok(true);
        }
        if limit > 0 {
            if newest.len() == limit {
                newest.pop_front();
            }
            newest.push_back(v.to_vec());
        }
        Ok(true)
    })?;
    newest.iter().rev().map(|v| Ok(serde_json::from_slice(v)?)).collect()
}

/// The newest `limit` vault audit records, newest first.
pub fn vault_audit(view: &ReadView<'_>, limit: usize) -> Result<Vec<VaultAuditRecord>> {
    let mut all: Vec<VaultAuditRecord> = Vec::new();
    view.scan_prefix(VAULT_AUDIT_PREFIX, |_, v| {
        all.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    all.reverse();
    all.truncate(limit);
    Ok(all)
}

/// Why a membership change waits for the replica move in flight.
fn in_flight(mv: &tessera_api::meta::ReplicaMove) -> String {
    format!("group {}'s replica is moving from node {} to node {}: try again once it has moved (a few seconds)", mv.group, mv.from, mv.to)
}

#[cfg(test)]
mod vault_tests {

    use super::*;
    use crate::engine::{GroupData, space};

    fn data() -> (tempfile::TempDir, GroupData) {
        crate::engine::test_support::open_group(0)
    }

    fn apply(data: &GroupData, now: i64, op: MetaOp) -> Response {
        crate::engine::test_support::apply_op(&MetaEngine, data, space::META, now, &op)
    }

    fn key(id: &str) -> VaultKeyRecord {
        VaultKeyRecord {
            key_id: id.into(),
            kdf_m_kib: 8,
            kdf_t: 1,
            kdf_p: 1,
            salt: vec![1; 16],
            wrap_nonce: vec![2; 12],
            wrapped_key: vec![3; 48],
            check_nonce: vec![4; 12],
            check: vec![5; 47],
            created_at_ms: 1,
        }
    }

    fn audit(id: &str) -> VaultAuditRecord {
        VaultAuditRecord {
            id: id.into(),
            at_ms: 0,
            event: "sealed".into(),
            actor: "a".into(),
            router: "r".into(),
            path: None,
            success: true,
            detail: String::new(),
        }
    }

    #[test]
    fn the_key_is_written_once_and_secrets_count_versions() {
        let (_dir, data) = data();
        assert_eq!(apply(&data, 1, MetaOp::VaultInit(key("first"))), Response::Applied(true));
        assert_eq!(apply(&data, 2, MetaOp::VaultInit(key("second"))), Response::Applied(false));
        let (k, epoch) = vault_state(&data.space(space::META)).unwrap();
        assert_eq!((k.unwrap().key_id.as_str(), epoch), ("first", 0));
        apply(&data, 3, MetaOp::VaultSeal);
        assert_eq!(vault_state(&data.space(space::META)).unwrap().1, 1);

        let secret = VaultSecretRecord {
            path: "a/b".into(),
            key_id: "first".into(),
            nonce: vec![0; 12],
            ciphertext: vec![9; 20],
            version: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
            updated_by: "u".into(),
        };
        assert_eq!(apply(&data, 10, MetaOp::VaultPutSecret(secret.clone())), Response::Applied(true));
        assert_eq!(apply(&data, 20, MetaOp::VaultPutSecret(secret.clone())), Response::Applied(false));
        let stored = vault_secret(&data.space(space::META), "a/b").unwrap().unwrap();
        assert_eq!((stored.version, stored.created_at_ms, stored.updated_at_ms), (2, 10, 20));
        assert_eq!(vault_secrets(&data.space(space::META), "a/").unwrap().len(), 1);
        assert!(vault_secrets(&data.space(space::META), "b").unwrap().is_empty());
        assert_eq!(apply(&data, 30, MetaOp::VaultDeleteSecret { path: "a/b".into() }), Response::Deleted(1));
        assert_eq!(apply(&data, 31, MetaOp::VaultDeleteSecret { path: "a/b".into() }), Response::Deleted(0));
    }

    #[test]
    fn the_audit_trail_is_newest_first_and_capped() {
        let (_dir, data) = data();
        let n = VAULT_AUDIT_KEEP + 5;
        for i in 0..n {
            apply(&data, 1000 + i as i64, MetaOp::VaultAudit(audit(&format!("{i:06}"))));
        }
        let view = data.space(space::META);
        let all = vault_audit(&view, usize::MAX).unwrap();
        assert_eq!(all.len(), VAULT_AUDIT_KEEP);
        assert_eq!(all[0].id, format!("{:06}", n - 1));
        assert_eq!(all[0].at_ms, 1000 + (n - 1) as i64);
        assert_eq!(all.last().unwrap().id, format!("{:06}", 5));
        assert_eq!(vault_audit(&view, 2).unwrap().len(), 2);
    }
}

#[cfg(test)]
mod activity_tests {
    use super::*;
    use crate::engine::space;

    fn record(at_ms: i64, id: &str) -> ActivityRecord {
        ActivityRecord {
            id: id.into(),
            at_ms,
            kind: "query".into(),
            user: "u".into(),
            method: "POST".into(),
            route: "/api/v1/query".into(),
            status: 200,
            duration_ms: 1,
            detail: "SELECT 1".into(),
            router: "r".into(),
        }
    }

    #[test]
    fn the_newest_activities_are_kept_and_a_late_older_one_is_trimmed_first() {
        let (_dir, data) = crate::engine::test_support::open_group(0);
        let apply = |now, op| crate::engine::test_support::apply_op(&MetaEngine, &data, space::META, now, &op);
        // Three flushes of 4,000 records each: the first 2,000 written go.
        for flush in 0..3i64 {
            let records = (0..4_000).map(|i| record(10_000 + flush * 4_000 + i, &format!("{flush}-{i:04}"))).collect();
            assert_eq!(apply(flush, MetaOp::RecordActivities(records)), Response::Applied(true));
        }
        let view = data.space(space::META);
        let kept = activities(&view, usize::MAX, None).unwrap();
        assert_eq!(kept.len(), ACTIVITIES_KEEP);
        assert_eq!(kept.last().unwrap().at_ms, 10_000 + 2_000, "the oldest kept is the 2,001st written");
        // A router that could not write for a while sends an older record late.
        // A command trims only what was written before it, so the late record
        // stays for now and the oldest of those goes ...
        apply(3, MetaOp::RecordActivities(vec![record(5, "late")]));
        let kept = activities(&view, usize::MAX, None).unwrap();
        assert_eq!((kept.len(), kept.last().unwrap().id.as_str()), (ACTIVITIES_KEEP, "late"));
        assert_eq!(kept[kept.len() - 2].at_ms, 10_000 + 2_001);
        // ... and, being the oldest, it is the next to go (the trim starts below it).
        apply(4, MetaOp::RecordActivities(vec![record(30_000, "new")]));
        let kept = activities(&view, usize::MAX, None).unwrap();
        assert_eq!((kept.len(), kept[0].id.as_str()), (ACTIVITIES_KEEP, "new"));
        assert!(kept.iter().all(|r| r.id != "late"), "the late record went");
        assert_eq!(kept.last().unwrap().at_ms, 10_000 + 2_001);
    }

    #[test]
    fn a_listing_gives_the_newest_records_of_a_kind_newest_first() {
        let (_dir, data) = crate::engine::test_support::open_group(0);
        let apply = |now, op| crate::engine::test_support::apply_op(&MetaEngine, &data, space::META, now, &op);
        let records = (0..10)
            .map(|i| ActivityRecord { kind: if i % 2 == 0 { "query" } else { "login" }.into(), ..record(1_000 + i, &format!("r{i}")) })
            .collect();
        apply(1, MetaOp::RecordActivities(records));
        let view = data.space(space::META);
        let ids = |limit, kind| activities(&view, limit, kind).unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(3, Some("login")), ["r9", "r7", "r5"]);
        assert_eq!(ids(2, None), ["r9", "r8"]);
        assert_eq!(ids(20, Some("query")), ["r8", "r6", "r4", "r2", "r0"]);
        assert!(ids(0, None).is_empty());
        assert!(ids(5, Some("admin")).is_empty());
    }
}
