//! A data subject's records in one group (spec 02 export and erasure): each
//! engine finds its own (`subject_items` of the key-value, document and graph
//! engines), and an erasure deletes them through the engines' own delete
//! operations, so their indexes and adjacency stay consistent, all in one apply.

use rocksdb::WriteBatch;
use tessera_api::command::{KvOp, Response};
use tessera_api::compliance::{EraseSubjectOp, SubjectItem, SubjectRule};
use tessera_api::document::DocOp;
use tessera_api::graph::GraphOp;

use crate::engine::document::DocumentEngine;
use crate::engine::graph::GraphEngine;
use crate::engine::kv::KvEngine;
use crate::engine::{Engine, GroupData, Tx, space};
use crate::error::Result;
use crate::store::Db;

/// The subject's records in this group at `now`: key-value entries, documents, graph nodes and their edges.
pub fn find(data: &GroupData, rule: &SubjectRule, now: i64) -> Result<Vec<SubjectItem>> {
    let mut items = crate::engine::kv::subject_items(&data.space(space::KV), rule, now)?;
    items.extend(crate::engine::document::subject_items(&data.space(space::DOCUMENT), rule)?);
    items.extend(crate::engine::graph::subject_items(&data.space(space::GRAPH), rule)?);
    Ok(items)
}

/// Deletes the subject's records `op` covers into `batch`; answers what was erased.
pub fn erase(data: &GroupData, db: &Db, batch: &mut WriteBatch, now: i64, op: &EraseSubjectOp) -> Result<Response> {
    let group = data.group;
    let items: Vec<SubjectItem> = find(data, &op.rule, now)?.into_iter().filter(|i| op.covers(i)).collect();
    for item in &items {
        let outcome = match item.store.as_str() {
            "kv" => KvEngine.apply(&mut Tx::new(db, group, space::KV, batch), now, &KvOp::Delete { key: item.item_id.clone() })?,
            "document" => {
                let delete = DocOp::Delete { collection: item.location.clone(), id: item.item_id.clone() };
                DocumentEngine.apply(&mut Tx::new(db, group, space::DOCUMENT, batch), now, &delete)?
            }
            // A node's edges go with it (they are listed as items of their own).
            "graph" => match item.item_id.strip_prefix("node:") {
                Some(id) => {
                    let delete = GraphOp::DeleteNode { graph: item.location.clone(), id: id.to_string() };
                    GraphEngine.apply(&mut Tx::new(db, group, space::GRAPH, batch), now, &delete)?
                }
                None => Response::Empty,
            },
            _ => Response::Empty,
        };
        if let Response::Rejected(r) = outcome {
            // Nothing of this apply is written (the batch holds this command only).
            batch.clear();
            return Ok(Response::Rejected(r));
        }
    }
    if op.secure_erase && !items.is_empty() {
        for s in [space::KV, space::DOCUMENT, space::GRAPH] {
            data.space(s).compact_range(b"", None);
        }
    }
    Ok(Response::SubjectErased { items })
}
