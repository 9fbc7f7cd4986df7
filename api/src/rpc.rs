//! gRPC code generated from `proto/tessera.proto` and helpers around it.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("tessera.v1");

impl Failure {
    /// Builds a failure of a kind with a message.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure { kind: kind as i32, message: message.into() }
    }

    /// The failure's kind; an unknown or unset one reads as
    /// [`FailureKind::Unavailable`] (the caller tries elsewhere).
    pub fn failure_kind(&self) -> FailureKind {
        match FailureKind::try_from(self.kind) {
            Ok(FailureKind::Unspecified) | Err(_) => FailureKind::Unavailable,
            Ok(kind) => kind,
        }
    }
}

/// Largest gRPC message a peer or router accepts (snapshot chunks, batches).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
