//! In-memory [`KvRead`] store for tests and embedding.
use crate::{ExecContext, KvRead, QueryResult, SqlError, WriteOp, WriteSet, execute};
use std::collections::BTreeMap;

/// A BTreeMap-backed store that applies each request's WriteSet.
#[derive(Debug, Default, Clone)]
pub struct MemStore {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl KvRead for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SqlError> {
        Ok(self.map.get(key).cloned())
    }
    fn scan(&self, start: &[u8], end: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), SqlError> {
        if start >= end {
            return Ok(());
        }
        for (k, v) in self.map.range::<[u8], _>((std::ops::Bound::Included(start), std::ops::Bound::Excluded(end))) {
            if !f(k, v) {
                break;
            }
        }
        Ok(())
    }
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a write set in order.
    pub fn apply(&mut self, ws: &WriteSet) {
        for op in &ws.ops {
            match op {
                WriteOp::Put(k, v) => {
                    self.map.insert(k.clone(), v.clone());
                }
                WriteOp::Delete(k) => {
                    self.map.remove(k);
                }
            }
        }
    }

    /// Executes a request with a default context and applies its writes on success.
    pub fn exec(&mut self, sql: &str, params: &[serde_json::Value]) -> Result<QueryResult, SqlError> {
        let out = execute(self, sql, params, &ExecContext::default())?;
        self.apply(&out.writes);
        Ok(out.result)
    }
}
