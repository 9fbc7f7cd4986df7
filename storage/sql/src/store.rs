//! Read-your-writes overlay over a [`KvRead`] store; collects the request's writes.
use crate::error::Result;
use crate::{KvRead, WriteOp, WriteSet};
use std::collections::BTreeMap;
use std::ops::Bound;

/// Pending writes layered over the base store (`None` = deleted).
pub struct Overlay<'a> {
    base: &'a dyn KvRead,
    pub(crate) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn KvRead) -> Self {
        Overlay { base, writes: BTreeMap::new() }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.writes.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.base.get(key),
        }
    }

    /// Ordered scan of [start, end) merging pending writes; stops when `f` returns false.
    pub fn scan(&self, start: &[u8], end: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let mut base: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.base.scan(start, end, &mut |k, v| {
            base.push((k.to_vec(), v.to_vec()));
            true
        })?;
        let mut ov = self.writes.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end))).peekable();
        let mut bi = base.into_iter().peekable();
        loop {
            let take_overlay = match (bi.peek(), ov.peek()) {
                (None, None) => return Ok(()),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((bk, _)), Some((ok, _))) => {
                    if bk.as_slice() == ok.as_slice() {
                        bi.next();
                        true
                    } else {
                        ok.as_slice() < bk.as_slice()
                    }
                }
            };
            if take_overlay {
                if let Some((k, v)) = ov.next()
                    && let Some(v) = v
                    && !f(k, v)?
                {
                    return Ok(());
                }
            } else if let Some((k, v)) = bi.next()
                && !f(&k, &v)?
            {
                return Ok(());
            }
        }
    }

    /// Collects all (key, value) pairs with the given prefix.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(prefix, &crate::encoding::prefix_end(prefix), &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        Ok(out)
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.insert(key, Some(value));
    }

    pub fn delete(&mut self, key: Vec<u8>) {
        self.writes.insert(key, None);
    }

    /// Deletes every key with the prefix.
    pub fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        for (k, _) in self.scan_prefix(prefix)? {
            self.delete(k);
        }
        Ok(())
    }

    /// The net effect of all writes, ordered by key (deterministic).
    pub fn into_write_set(self) -> WriteSet {
        WriteSet {
            ops: self
                .writes
                .into_iter()
                .map(|(k, v)| match v {
                    Some(v) => WriteOp::Put(k, v),
                    None => WriteOp::Delete(k),
                })
                .collect(),
        }
    }
}
