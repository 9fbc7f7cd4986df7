//! The document engine (spec 01 documents): not built yet; its operation types are empty.

use tessera_api::command::Response;
use tessera_api::document::{DocOp, DocQuery, DocQueryResult};

use super::{Engine, ReadView, Tx};
use crate::error::Result;

/// Document engine.
pub struct DocumentEngine;

impl Engine for DocumentEngine {
    type Op = DocOp;

    fn apply(&self, _tx: &mut Tx<'_>, _now: i64, op: &DocOp) -> Result<Response> {
        match *op {}
    }
}

/// Answers a document query.
pub fn query(_view: &ReadView<'_>, q: &DocQuery) -> Result<DocQueryResult> {
    match *q {}
}
