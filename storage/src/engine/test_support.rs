//! Fixtures for the engines' unit tests: one group over a fresh RocksDB, and
//! applying one operation the way the state machine does (one batch, written).

use std::sync::Arc;

use rocksdb::{ColumnFamilyDescriptor, DB, Options, WriteBatch};
use tessera_api::command::Response;

use super::{Engine, GroupData, Tx};

/// Group `group` over a new database in a temporary directory (kept alive by the guard).
pub(crate) fn open_group(group: u64) -> (tempfile::TempDir, GroupData) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let cfs = [crate::keys::CF_DATA, crate::keys::CF_INDEX].map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
    let db = Arc::new(crate::store::Db::from(DB::open_cf_descriptors(&opts, dir.path(), cfs).unwrap()));
    (dir, GroupData { db, group, memory: Default::default(), cancel: None })
}

/// Applies `op` with `engine` in `space` at time `now` and writes the batch.
pub(crate) fn apply_op<E: Engine>(engine: &E, data: &GroupData, space: u8, now: i64, op: &E::Op) -> Response {
    let mut batch = WriteBatch::default();
    let response = engine.apply(&mut Tx::new(&data.db, data.group, space, &mut batch), now, op).unwrap();
    data.db.write(batch).unwrap();
    response
}
