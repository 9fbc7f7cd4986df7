//! The vector engine (spec 03 part B): not built yet; its operation types are empty.

use tessera_api::command::Response;
use tessera_api::vector::{VectorOp, VectorQuery, VectorQueryResult};

use super::{Engine, ReadView, Tx};
use crate::error::Result;

/// Vector engine.
pub struct VectorEngine;

impl Engine for VectorEngine {
    type Op = VectorOp;

    fn apply(&self, _tx: &mut Tx<'_>, _now: i64, op: &VectorOp) -> Result<Response> {
        match *op {}
    }
}

/// Answers a vector query.
pub fn query(_view: &ReadView<'_>, q: &VectorQuery) -> Result<VectorQueryResult> {
    match *q {}
}
