//! Retiring an encryption key after a rotation: while previous keys are given
//! (`SERVICE_ENCRYPTION_PREVIOUS_KEYS`), every compaction of the sealed column
//! families re-seals the values a previous key sealed under the current key
//! (a RocksDB compaction filter, so it never races a write: a compaction
//! rewrites the very versions it reads). A full compaction
//! ([`crate::store::Store::compact_everything`]) therefore leaves no value that
//! needs a previous key; [`crate::store::Store::needing_previous_keys`] counts
//! what still does.

use std::ffi::{CStr, CString};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};

use crate::crypt::{Crypt, Purpose};

/// Makes one [`Reseal`] filter per compaction of a column family whose values
/// are sealed for `purpose`.
pub struct ResealFactory {
    crypt: Arc<Crypt>,
    purpose: Purpose,
    resealed: Arc<AtomicU64>,
    name: CString,
}

impl ResealFactory {
    /// `resealed` counts the values re-sealed (shared by every column family).
    pub fn new(crypt: Arc<Crypt>, purpose: Purpose, resealed: Arc<AtomicU64>) -> Self {
        ResealFactory { crypt, purpose, resealed, name: CString::new("tessera-reseal").expect("no NUL") }
    }
}

impl CompactionFilterFactory for ResealFactory {
    type Filter = Reseal;

    fn create(&mut self, _context: CompactionFilterContext) -> Reseal {
        Reseal {
            crypt: self.crypt.clone(),
            purpose: self.purpose,
            resealed: self.resealed.clone(),
            value: Vec::new(),
            name: self.name.clone(),
        }
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

/// The filter of one compaction (RocksDB calls it from one thread at a time).
pub struct Reseal {
    crypt: Arc<Crypt>,
    purpose: Purpose,
    resealed: Arc<AtomicU64>,
    /// The last re-sealed value, which RocksDB copies when the call returns.
    value: Vec<u8>,
    name: CString,
}

impl CompactionFilter for Reseal {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        match self.crypt.reseal(self.purpose, key, value) {
            Some(resealed) => {
                self.value = resealed;
                self.resealed.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the slice lives in `self.value` until the next call on
                // this filter; RocksDB's C shim copies a changed value into its
                // own string as soon as this call returns (rocksdb's c.cc
                // `rocksdb_compactionfilter_t::Filter`), so the `'static` the
                // binding asks for is never relied upon.
                Decision::Change(unsafe { std::mem::transmute::<&[u8], &'static [u8]>(self.value.as_slice()) })
            }
            None => Decision::Keep,
        }
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}
