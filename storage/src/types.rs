//! The openraft type configuration shared by every group.

use tessera_api::command::{Command, Response};

openraft::declare_raft_types!(
    /// Tessera's Raft types: commands in, responses out, u64 node ids.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot::SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

/// openraft's storage error for our node id type.
pub type RaftStorageError = openraft::StorageError<u64>;
/// A log id of our type configuration.
pub type LogId = openraft::LogId<u64>;
