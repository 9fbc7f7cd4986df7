//! Who may call which RPC of the node's gRPC port: one layer in front of every
//! service, deciding by the role the caller's certificate names (see
//! `tessera_api::certs`). The table is the list in `docs/security.md`.
//!
//! - Raft and placement (votes, entries, snapshots, learners, voters, hosting
//!   and dropping replicas, applied indexes): nodes only. A router certificate
//!   cannot speak Raft or move replicas.
//! - What a router does for users and operators (logs, restarts, drains,
//!   removals, backups, erasure purges, configuration, digests): routers only.
//! - Data and leadership (reads, writes, status, hand-offs, campaigns, releases,
//!   re-sealing): both, since nodes forward leader calls to each other.
//!
//! A certificate naming no role, an RPC missing from the table, or a caller
//! without a certificate is refused (`PERMISSION_DENIED`). On a cluster that
//! runs without TLS (`cluster.insecure = true`) there is no certificate to read
//! and nothing is enforced: that mode trusts its network.

use std::task::{Context, Poll};

use tessera_api::certs::Role;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

const NODE: &[Role] = &[Role::Node];
const ROUTER: &[Role] = &[Role::Router];
const BOTH: &[Role] = &[Role::Node, Role::Router];

/// Every RPC of `proto/tessera.proto` (`/package.Service/Method`) and the roles
/// that may call it.
pub const POLICY: &[(&str, &[Role])] = &[
    ("/tessera.v1.RaftService/Vote", NODE),
    ("/tessera.v1.RaftService/AppendEntries", NODE),
    ("/tessera.v1.RaftService/AppendStream", NODE),
    ("/tessera.v1.RaftService/InstallSnapshot", NODE),
    ("/tessera.v1.DataService/Write", BOTH),
    ("/tessera.v1.DataService/WriteMany", BOTH),
    ("/tessera.v1.DataService/Read", BOTH),
    ("/tessera.v1.DataService/Status", BOTH),
    ("/tessera.v1.DataService/Applied", NODE),
    ("/tessera.v1.DataService/Logs", ROUTER),
    ("/tessera.v1.DataService/Restart", ROUTER),
    ("/tessera.v1.DataService/Drain", ROUTER),
    ("/tessera.v1.DataService/RemoveVoter", ROUTER),
    ("/tessera.v1.DataService/AddLearner", NODE),
    ("/tessera.v1.DataService/ReplaceVoters", NODE),
    ("/tessera.v1.DataService/HostGroup", NODE),
    ("/tessera.v1.DataService/DropGroup", NODE),
    ("/tessera.v1.DataService/Retire", ROUTER),
    ("/tessera.v1.DataService/Storage", ROUTER),
    ("/tessera.v1.DataService/Shutdown", ROUTER),
    ("/tessera.v1.DataService/ReleaseLeadership", BOTH),
    ("/tessera.v1.DataService/HandOff", BOTH),
    ("/tessera.v1.DataService/Campaign", BOTH),
    ("/tessera.v1.DataService/ExportGroup", ROUTER),
    ("/tessera.v1.DataService/FetchExport", ROUTER),
    ("/tessera.v1.DataService/Config", ROUTER),
    ("/tessera.v1.DataService/PurgeErased", ROUTER),
    ("/tessera.v1.DataService/Reseal", BOTH),
    ("/tessera.v1.DataService/Calls", BOTH),
    ("/tessera.v1.DataService/Digest", ROUTER),
];

/// Why a gRPC call is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} {not_served}", not_served = tessera_api::rpc::NOT_SERVED)]
    UnknownRpc(String),
    #[error("a {} certificate may not call {path} (allowed: {})", role.as_str(), allowed.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", "))]
    RoleNotAllowed { role: Role, path: String, allowed: &'static [Role] },
    #[error("{0} needs a node or router certificate of the cluster CA naming its role")]
    NoRole(String),
}

/// Whether a caller of `role` may call the RPC at `path`; the refusal says why.
pub fn admit(path: &str, role: Option<Role>) -> Result<(), Refusal> {
    let Some((_, allowed)) = POLICY.iter().find(|(p, _)| *p == path) else {
        return Err(Refusal::UnknownRpc(path.to_string()));
    };
    match role {
        Some(role) if allowed.contains(&role) => Ok(()),
        Some(role) => Err(Refusal::RoleNotAllowed { role, path: path.to_string(), allowed }),
        None => Err(Refusal::NoRole(path.to_string())),
    }
}

/// The role the caller's certificate names (`None`: no TLS certificate, or no role).
fn caller_role<B>(req: &http::Request<B>) -> Option<Role> {
    let info = req.extensions().get::<TlsConnectInfo<TcpConnectInfo>>()?;
    let certs = info.peer_certs()?;
    ROLES.role_of(certs.first()?.as_ref())
}

/// Roles of the certificates seen, by their DER bytes: a certificate is parsed
/// once, not on every call (Raft sends thousands of calls a second over a
/// handful of connections). Bounded: past `ROLE_CACHE_ENTRIES` certificates
/// (rotations) it starts over.
static ROLES: RoleCache = RoleCache(std::sync::LazyLock::new(Default::default));

const ROLE_CACHE_ENTRIES: usize = 1024;

struct RoleCache(std::sync::LazyLock<std::sync::RwLock<std::collections::HashMap<Vec<u8>, Option<Role>>>>);

impl RoleCache {
    fn role_of(&self, der: &[u8]) -> Option<Role> {
        if let Some(role) = self.0.read().unwrap_or_else(|e| e.into_inner()).get(der) {
            return *role;
        }
        let role = tessera_api::certs::role_of(der);
        let mut known = self.0.write().unwrap_or_else(|e| e.into_inner());
        if known.len() >= ROLE_CACHE_ENTRIES {
            known.clear();
        }
        known.insert(der.to_vec(), role);
        role
    }
}

/// The layer enforcing [`POLICY`] (when `enforce`: the port serves mutual TLS).
#[derive(Clone, Copy)]
pub struct AccessLayer {
    pub enforce: bool,
}

impl<S> tower::Layer<S> for AccessLayer {
    type Service = Access<S>;
    fn layer(&self, inner: S) -> Access<S> {
        Access { inner, enforce: self.enforce }
    }
}

#[derive(Clone)]
pub struct Access<S> {
    inner: S,
    enforce: bool,
}

impl<S, B> tower::Service<http::Request<B>> for Access<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::Either<S::Future, futures::future::Ready<Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.enforce
            && let Err(why) = admit(req.uri().path(), caller_role(&req))
        {
            tracing::warn!(path = req.uri().path(), "refused a gRPC call: {why}");
            return futures::future::Either::Right(futures::future::ready(Ok(
                tonic::Status::permission_denied(why.to_string()).into_http()
            )));
        }
        futures::future::Either::Left(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every RPC `proto/tessera.proto` declares is in the table, and nothing else.
    #[test]
    fn the_policy_lists_every_rpc_of_the_proto_file() {
        let proto = include_str!("../../proto/tessera.proto");
        let mut service = "";
        let mut declared = Vec::new();
        for line in proto.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("service ") {
                service = rest.split_whitespace().next().unwrap_or_default();
            } else if let Some(rest) = line.strip_prefix("rpc ") {
                let method = rest.split('(').next().unwrap_or_default().trim();
                declared.push(format!("/tessera.v1.{service}/{method}"));
            }
        }
        let listed: Vec<String> = POLICY.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(declared.len(), 30, "{declared:?}");
        for rpc in &declared {
            assert!(listed.contains(rpc), "{rpc} has no entry in the access policy");
        }
        for rpc in &listed {
            assert!(declared.contains(rpc), "{rpc} is in the policy but not in the proto file");
        }
    }

    #[test]
    fn routers_cannot_speak_raft_and_callers_without_a_role_get_nothing() {
        assert!(admit("/tessera.v1.RaftService/Vote", Some(Role::Node)).is_ok());
        assert!(admit("/tessera.v1.RaftService/Vote", Some(Role::Router)).is_err());
        assert!(admit("/tessera.v1.DataService/HostGroup", Some(Role::Router)).is_err());
        assert!(admit("/tessera.v1.DataService/Write", Some(Role::Router)).is_ok());
        assert!(admit("/tessera.v1.DataService/FetchExport", Some(Role::Node)).is_err());
        for (path, _) in POLICY {
            assert!(admit(path, None).is_err(), "{path} admitted a caller without a role");
        }
        assert!(admit("/tessera.v1.DataService/Unknown", Some(Role::Node)).is_err());
    }
}
