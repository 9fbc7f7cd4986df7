//! The storage layer's error type.

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("rocksdb: {0}")]
    RocksDb(#[from] rocksdb::Error),
    #[error("corrupt record: {0}")]
    Corrupt(String),
    #[error("encoding: {0}")]
    Encoding(#[from] serde_json::Error),
    #[error("encryption at rest: {0}")]
    Crypt(#[from] crate::crypt::CryptError),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A read an engine made failed (RocksDB or decryption): the replica cannot
    /// know what the command would have done, so the apply must stop, never
    /// answer as if the command itself had failed.
    #[error("engine read failed: {0}")]
    EngineRead(String),
    /// A query's caller stopped waiting (its time limit passed): the scan stopped.
    #[error("the query was cancelled: its caller stopped waiting")]
    Cancelled,
}

impl StorageError {
    /// Converts into openraft's storage error for a read of the state machine.
    pub fn into_raft_read(self) -> openraft::StorageError<u64> {
        openraft::StorageIOError::read_state_machine(&self).into()
    }

    /// Converts into openraft's storage error for a write of the state machine.
    pub fn into_raft_write(self) -> openraft::StorageError<u64> {
        openraft::StorageIOError::write_state_machine(&self).into()
    }
}

/// Result alias of the storage layer.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
