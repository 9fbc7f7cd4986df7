//! openraft's storage test suite, run against the RocksDB log store and state machine.

use openraft::StorageError;
use openraft::testing::{StoreBuilder, Suite};
use tessera_storage::{LogStore, StateMachine, Store, TypeConfig};

struct RocksBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for RocksBuilder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("open rocksdb");
        // Use a group other than 0 so group prefixes are exercised.
        Ok((dir, store.log_store(7).without_apply_guard(), store.state_machine(7)))
    }
}

#[test]
fn rocksdb_store_passes_openraft_suite() -> Result<(), StorageError<u64>> {
    Suite::test_all(RocksBuilder)
}

/// The same store with encryption at rest on: log entries, state machine records
/// and snapshots all go through AES-256-GCM.
struct EncryptedRocksBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for EncryptedRocksBuilder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let crypt = tessera_storage::Crypt::new(&[0x5a; tessera_storage::crypt::KEY_LEN]);
        let store = Store::open_with(dir.path(), Some(crypt)).expect("open encrypted rocksdb");
        Ok((dir, store.log_store(7).without_apply_guard(), store.state_machine(7)))
    }
}

#[test]
fn encrypted_rocksdb_store_passes_openraft_suite() -> Result<(), StorageError<u64>> {
    Suite::test_all(EncryptedRocksBuilder)
}
