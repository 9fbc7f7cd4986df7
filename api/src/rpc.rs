//! gRPC code generated from `proto/tessera.proto` and helpers around it.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("tessera.v1");

use serde::{Deserialize, Serialize};

/// Why a node could not serve a data call (carried in [`Failure::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// The node does not host a replica of the group.
    UnknownGroup,
    /// The request could not be decoded.
    BadRequest,
    /// Committed by a majority, but not applied on every voter in time (`all`).
    NotAppliedEverywhere,
    /// Raft could not serve the call right now (no quorum, shutting down, ...).
    Unavailable,
    /// A storage error on the node.
    Storage,
}

impl FailureKind {
    /// The name sent over the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::UnknownGroup => "UnknownGroup",
            FailureKind::BadRequest => "BadRequest",
            FailureKind::NotAppliedEverywhere => "NotAppliedEverywhere",
            FailureKind::Unavailable => "Unavailable",
            FailureKind::Storage => "Storage",
        }
    }

    /// Parses a wire name; unknown names read as [`FailureKind::Unavailable`].
    pub fn parse(s: &str) -> Self {
        match s {
            "UnknownGroup" => FailureKind::UnknownGroup,
            "BadRequest" => FailureKind::BadRequest,
            "NotAppliedEverywhere" => FailureKind::NotAppliedEverywhere,
            "Storage" => FailureKind::Storage,
            _ => FailureKind::Unavailable,
        }
    }
}

impl Failure {
    /// Builds a failure of a kind with a message.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure { kind: kind.as_str().to_string(), message: message.into() }
    }
}

/// Largest gRPC message a peer or router accepts (snapshot chunks, batches).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
