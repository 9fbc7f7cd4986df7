//! A data subject's records in one group (spec 02 export and erasure). Each
//! model finds and erases its own through one [`SubjectRecords`]
//! implementation next to its engine (key-value, documents, graphs, objects,
//! vectors, time-series, streams; SQL rows are erased by the router with
//! `DELETE` statements), so indexes, counters and adjacency stay consistent;
//! every store of the group is erased in one apply.

use rocksdb::WriteBatch;
use tessera_api::command::Response;
use tessera_api::compliance::{EraseSubjectOp, SubjectItem, SubjectRule};
use tessera_api::error::Rejection;

use crate::engine::document::DocumentEngine;
use crate::engine::graph::GraphEngine;
use crate::engine::kv::KvEngine;
use crate::engine::object::ObjectEngine;
use crate::engine::stream::StreamEngine;
use crate::engine::timeseries::TimeSeriesEngine;
use crate::engine::vector::VectorEngine;
use crate::engine::{Engine, GroupData, ReadView, Tx};
use crate::error::Result;
use crate::store::Db;

/// A model's part in a data subject's export and erasure.
pub trait SubjectRecords: Engine {
    /// The store's name in [`SubjectItem::store`].
    const STORE: &'static str;
    /// The subject's records of this model in its space of a group, at `now`.
    fn subject_items(&self, view: &ReadView<'_>, rule: &SubjectRule, now: i64) -> Result<Vec<SubjectItem>>;
    /// Erases `items` (this model's, as found by
    /// [`SubjectRecords::subject_items`]) through the engine's own operations;
    /// a refusal leaves the whole command unapplied.
    fn erase_items(&self, tx: &mut Tx<'_>, now: i64, items: &[SubjectItem]) -> Result<Option<Rejection>>;
}

/// Runs `f` with every model's engine of `data`'s group.
macro_rules! for_each_model {
    ($data:expr, $f:ident ( $($arg:expr),* )) => {{
        let vectors = VectorEngine { state: &$data.memory.vectors };
        $f(KvEngine, $($arg),*)?;
        $f(DocumentEngine, $($arg),*)?;
        $f(GraphEngine, $($arg),*)?;
        $f(ObjectEngine, $($arg),*)?;
        $f(vectors, $($arg),*)?;
        $f(TimeSeriesEngine, $($arg),*)?;
        $f(StreamEngine, $($arg),*)?;
    }};
}

/// The subject's records in this group at `now`, every model's.
pub fn find(data: &GroupData, rule: &SubjectRule, now: i64) -> Result<Vec<SubjectItem>> {
    fn found<E: SubjectRecords>(engine: E, data: &GroupData, rule: &SubjectRule, now: i64, out: &mut Vec<SubjectItem>) -> Result<()> {
        out.extend(engine.subject_items(&data.space(E::SPACE), rule, now)?);
        Ok(())
    }
    let mut items = Vec::new();
    for_each_model!(data, found(data, rule, now, &mut items));
    Ok(items)
}

/// Deletes the subject's records `op` covers into `batch`; answers what was erased.
pub fn erase(data: &GroupData, db: &Db, batch: &mut WriteBatch, now: i64, op: &EraseSubjectOp) -> Result<Response> {
    let items: Vec<SubjectItem> = find(data, &op.rule, now)?.into_iter().filter(|i| op.covers(i)).collect();
    #[allow(clippy::too_many_arguments)] // one engine's share of the erasure, all of it in the one batch
    fn erased<E: SubjectRecords>(
        engine: E,
        data: &GroupData,
        db: &Db,
        batch: &mut WriteBatch,
        now: i64,
        items: &[SubjectItem],
        refusal: &mut Option<Rejection>,
        touched: &mut Vec<u8>,
    ) -> Result<()> {
        let mine: Vec<SubjectItem> = items.iter().filter(|i| i.store == E::STORE).cloned().collect();
        if mine.is_empty() || refusal.is_some() {
            return Ok(());
        }
        touched.push(E::SPACE);
        *refusal = engine.erase_items(&mut Tx::new(db, data.group, E::SPACE, batch), now, &mine)?;
        Ok(())
    }
    let mut refusal = None;
    let mut touched = Vec::new();
    for_each_model!(data, erased(data, db, batch, now, &items, &mut refusal, &mut touched));
    if let Some(r) = refusal {
        // Nothing of this apply is written (the batch holds this command only).
        batch.clear();
        data.memory.vectors.invalidate();
        return Ok(Response::Rejected(r));
    }
    if op.secure_erase && !items.is_empty() {
        let withdrawn = crate::dedup::withdraw_answers(&mut Tx::new(db, data.group, crate::engine::space::DEDUP, batch), &op.rule)?;
        if withdrawn > 0 {
            touched.push(crate::engine::space::DEDUP);
        }
    }
    if op.secure_erase {
        for space in touched {
            data.space(space).compact_range(b"", None);
        }
    }
    // The answer is kept with the request id for retries: it names what was
    // erased, never the erased data.
    let items = items.into_iter().map(|i| SubjectItem { data: serde_json::Value::Null, ..i }).collect();
    Ok(Response::SubjectErased { items })
}

/// The refusal in an engine's answer, if it is one.
pub(crate) fn refusal(outcome: Response) -> Option<Rejection> {
    match outcome {
        Response::Rejected(r) => Some(r),
        _ => None,
    }
}
