//! The wire contract of Tessera.
//!
//! - [`http`]: JSON request and response bodies of `/api/v1`.
//! - [`command`]: what a Raft group replicates (operations, commands) and the
//!   queries it answers, with their results.
//! - [`meta`]: records of the meta group (cluster map, users, sessions).
//! - [`object`]: the object store's operations and records.
//! - [`rpc`]: the tonic code generated from `proto/tessera.proto`, plus helpers.

pub mod b64;
pub mod backup;
#[cfg(feature = "runtime")]
pub mod call_streams;
#[cfg(feature = "tls")]
pub mod certs;
pub mod clock;
pub mod codec;
pub mod command;
pub mod compliance;
pub mod document;
pub mod error;
pub mod graph;
pub mod http;
pub mod import;
pub mod meta;
pub mod object;
pub mod placement;
pub mod routing;
#[cfg(feature = "grpc")]
pub mod rpc;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod secret;
pub mod security;
pub mod sql;
pub mod stream;
#[cfg(feature = "runtime")]
pub mod telemetry;
pub mod timeseries;
#[cfg(feature = "tls")]
pub mod tls;
pub mod vector;

/// The release version reported by `/health`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Raft group id. Group 0 is the meta group; data shards are 1..=shard_count.
pub type GroupId = u64;
/// Node id, as configured in `cluster.node_id`.
pub type NodeId = u64;

/// The meta group's id.
pub const META_GROUP: GroupId = 0;
