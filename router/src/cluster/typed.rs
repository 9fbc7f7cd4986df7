//! One typed client per data model over [`ClusterClient`]. A handler names its
//! model's operation or query and gets that model's own reply back: a rejection
//! is already the matching [`ApiError`] (or handed back, for callers that merge
//! answers), and a reply of another model is reported here, once, instead of in
//! every handler.
//!
//! A handler that expects one shape of its model's replies names it with
//! [`shape!`] and gets that shape's payload; any other shape is reported here,
//! once, as an unexpected reply.
//!
//! ```ignore
//! let node = typed::write_as::<Graph, _>(&*state.cluster, group, GraphOp::AddNode { .. }, c,
//!     shape!(GraphResponse::Node)).await?.value;
//! ```

use futures::future::join_all;
use tessera_api::command::{KvEntry, KvOp, KvQuery, KvQueryResult, Operation, Query, QueryResult, Response};
use tessera_api::document::{DocOp, DocQuery, DocQueryResult, DocResponse};
use tessera_api::error::Rejection;
use tessera_api::graph::{GraphOp, GraphQuery, GraphQueryResult, GraphResponse};
use tessera_api::object::{ObjectMeta, ObjectOp, ObjectQuery, ObjectQueryResult};
use tessera_api::rpc::Consistency;
use tessera_api::sql::{SqlOp, SqlQuery, SqlResult};
use tessera_api::stream::{StreamOp, StreamQuery, StreamQueryResult, StreamResponse};
use tessera_api::timeseries::{TsOp, TsQuery, TsQueryResult, TsResponse};
use tessera_api::vector::{VectorOp, VectorQuery, VectorQueryResult, VectorResponse};
use tessera_api::{GroupId, NodeId};

use super::{ClusterClient, Served};
use crate::error::ApiError;

/// A data model's slice of the replicated command and query types.
pub trait Model {
    /// The model's writes.
    type Op;
    /// What applying one of them answers.
    type Reply: std::fmt::Debug;
    /// The model's reads.
    type Query: Clone;
    /// What a read answers.
    type Answer: std::fmt::Debug;
    /// The write as a group replicates it.
    fn op(op: Self::Op) -> Operation;
    /// The model's reply out of a group's response; `Err` gives back anything else.
    fn reply(response: Response) -> Result<Result<Self::Reply, Rejection>, Response>;
    /// The read as a group answers it.
    fn query(query: Self::Query) -> Query;
    /// The model's answer out of a group's query result; `Err` gives back anything else.
    fn answer(result: QueryResult) -> Result<Result<Self::Answer, Rejection>, QueryResult>;
}

macro_rules! model {
    ($(#[$doc:meta])* $model:ident: $variant:ident, $op:ty, $reply:ty, $query:ty, $answer:ty) => {
        $(#[$doc])*
        pub struct $model;

        impl Model for $model {
            type Op = $op;
            type Reply = $reply;
            type Query = $query;
            type Answer = $answer;
            fn op(op: $op) -> Operation {
                Operation::$variant(op)
            }
            fn reply(response: Response) -> Result<Result<$reply, Rejection>, Response> {
                match response {
                    Response::$variant(r) => Ok(Ok(r)),
                    Response::Rejected(r) => Ok(Err(r)),
                    other => Err(other),
                }
            }
            fn query(query: $query) -> Query {
                Query::$variant(query)
            }
            fn answer(result: QueryResult) -> Result<Result<$answer, Rejection>, QueryResult> {
                match result {
                    QueryResult::$variant(r) => Ok(Ok(r)),
                    QueryResult::Rejected(r) => Ok(Err(r)),
                    other => Err(other),
                }
            }
        }
    };
}

model!(/// Documents: collections, documents, indexes.
    Document: Document, DocOp, DocResponse, DocQuery, DocQueryResult);
model!(/// Graphs: nodes, edges, traversals.
    Graph: Graph, GraphOp, GraphResponse, GraphQuery, GraphQueryResult);
model!(/// Vector collections.
    Vector: Vector, VectorOp, VectorResponse, VectorQuery, VectorQueryResult);
model!(/// Time series: points, queries, retention.
    TimeSeries: TimeSeries, TsOp, TsResponse, TsQuery, TsQueryResult);
model!(/// SQL databases: statements and catalog reads.
    Sql: Sql, SqlOp, SqlResult, SqlQuery, SqlResult);
model!(/// Streams: channels, messages, consumer offsets, CDC.
    Stream: Stream, StreamOp, StreamResponse, StreamQuery, StreamQueryResult);

/// Key-value pairs. Their engine answers with the generic replies, which this model names.
pub struct Kv;

/// What a key-value write answers.
#[derive(Debug)]
pub enum KvReply {
    /// The entry as stored after a put.
    Entry(KvEntry),
    /// How many live keys a delete removed (a bulk put answers 0).
    Deleted(u64),
}

impl Model for Kv {
    type Op = KvOp;
    type Reply = KvReply;
    type Query = KvQuery;
    type Answer = KvQueryResult;
    fn op(op: KvOp) -> Operation {
        Operation::Kv(op)
    }
    fn reply(response: Response) -> Result<Result<KvReply, Rejection>, Response> {
        match response {
            Response::KvEntry(entry) => Ok(Ok(KvReply::Entry(entry))),
            Response::Deleted(n) => Ok(Ok(KvReply::Deleted(n))),
            Response::Rejected(r) => Ok(Err(r)),
            other => Err(other),
        }
    }
    fn query(query: KvQuery) -> Query {
        Query::Kv(query)
    }
    fn answer(result: QueryResult) -> Result<Result<KvQueryResult, Rejection>, QueryResult> {
        match result {
            QueryResult::Kv(r) => Ok(Ok(r)),
            QueryResult::Rejected(r) => Ok(Err(r)),
            other => Err(other),
        }
    }
}

/// Objects: buckets, chunks, commits. Their engine answers with the generic
/// replies, which this model names.
pub struct Objects;

/// What an object write answers.
#[derive(Debug)]
pub enum ObjectReply {
    /// The object's metadata as committed.
    Stored(ObjectMeta),
    /// Whether a bucket or chunk write took effect (`false`: it had already);
    /// no caller needs to tell the two apart yet.
    #[allow(dead_code)]
    Applied(bool),
    /// How many objects (or stale uploads) a delete removed.
    Deleted(u64),
}

impl Model for Objects {
    type Op = ObjectOp;
    type Reply = ObjectReply;
    type Query = ObjectQuery;
    type Answer = ObjectQueryResult;
    fn op(op: ObjectOp) -> Operation {
        Operation::Object(op)
    }
    fn reply(response: Response) -> Result<Result<ObjectReply, Rejection>, Response> {
        match response {
            Response::Object(meta) => Ok(Ok(ObjectReply::Stored(meta))),
            Response::Applied(applied) => Ok(Ok(ObjectReply::Applied(applied))),
            Response::Deleted(n) => Ok(Ok(ObjectReply::Deleted(n))),
            Response::Rejected(r) => Ok(Err(r)),
            other => Err(other),
        }
    }
    fn query(query: ObjectQuery) -> Query {
        Query::Object(query)
    }
    fn answer(result: QueryResult) -> Result<Result<ObjectQueryResult, Rejection>, QueryResult> {
        match result {
            QueryResult::Object(r) => Ok(Ok(r)),
            QueryResult::Rejected(r) => Ok(Err(r)),
            other => Err(other),
        }
    }
}

/// One shape of a model's replies or answers: `shape!(StreamQueryResult::Channel)`
/// keeps a tuple variant's payload, `shape!(StreamResponse::Committed { offset, advanced })`
/// a struct variant's fields as a tuple; anything else is given back.
macro_rules! shape {
    ($($variant:ident)::+) => {
        |reply| match reply {
            $($variant)::+(value) => Ok(value),
            other => Err(other),
        }
    };
    ($($variant:ident)::+ { $field:ident }) => {
        |reply| match reply {
            $($variant)::+ { $field } => Ok($field),
            other => Err(other),
        }
    };
    ($($variant:ident)::+ { $($field:ident),+ }) => {
        |reply| match reply {
            $($variant)::+ { $($field),+ } => Ok(($($field),+)),
            other => Err(other),
        }
    };
}
pub(crate) use shape;

/// Keeps `reply` if it has the shape named; any other is an unexpected reply.
pub fn pick<R: std::fmt::Debug, T>(reply: R, shape: impl FnOnce(R) -> Result<T, R>) -> Result<T, ApiError> {
    misshapen(shape(reply))
}

/// A reply of another shape than the one the caller named.
fn misshapen<T, R: std::fmt::Debug>(picked: Result<T, R>) -> Result<T, ApiError> {
    picked.map_err(ApiError::unexpected)
}

/// Proposes `op` to `group`; its rejection is handed back to the caller.
pub async fn propose<M: Model>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    op: M::Op,
    consistency: Consistency,
) -> Result<Served<Result<M::Reply, Rejection>>, ApiError> {
    let served = cluster.write(group, &M::op(op), consistency).await?;
    let value = misshapen(M::reply(served.value))?;
    Ok(Served { value, group: served.group, node: served.node })
}

/// Proposes `op` to `group`; a rejection becomes the matching error.
pub async fn write<M: Model>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    op: M::Op,
    consistency: Consistency,
) -> Result<Served<M::Reply>, ApiError> {
    let served = propose::<M>(cluster, group, op, consistency).await?;
    Ok(Served { value: served.value?, group: served.group, node: served.node })
}

/// Proposes the same kind of write to several groups at once, each answer with its group.
pub async fn propose_each<M: Model>(
    cluster: &dyn ClusterClient,
    groups: &[GroupId],
    op: impl Fn() -> M::Op,
    consistency: Consistency,
) -> Result<Vec<(GroupId, Result<M::Reply, Rejection>)>, ApiError> {
    let calls = groups.iter().map(|g| propose::<M>(cluster, *g, op(), consistency));
    join_all(calls).await.into_iter().map(|r| r.map(|s| (s.group, s.value))).collect()
}

/// Reads `query` from `group`; its rejection is handed back to the caller.
pub async fn ask<M: Model>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    query: M::Query,
    consistency: Consistency,
    replica: Option<NodeId>,
) -> Result<Served<Result<M::Answer, Rejection>>, ApiError> {
    let served = cluster.read(group, &M::query(query), consistency, replica).await?;
    let value = misshapen(M::answer(served.value))?;
    Ok(Served { value, group: served.group, node: served.node })
}

/// Reads `query` from `group`; a rejection becomes the matching error.
pub async fn read<M: Model>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    query: M::Query,
    consistency: Consistency,
    replica: Option<NodeId>,
) -> Result<Served<M::Answer>, ApiError> {
    let served = ask::<M>(cluster, group, query, consistency, replica).await?;
    Ok(Served { value: served.value?, group: served.group, node: served.node })
}

/// Asks every group in `groups` the same query at once, each answer with its group.
pub async fn ask_each<M: Model>(
    cluster: &dyn ClusterClient,
    groups: &[GroupId],
    query: &M::Query,
    consistency: Consistency,
    replica: Option<NodeId>,
) -> Result<Vec<(GroupId, Result<M::Answer, Rejection>)>, ApiError> {
    let calls = groups.iter().map(|g| ask::<M>(cluster, *g, query.clone(), consistency, replica));
    join_all(calls).await.into_iter().map(|r| r.map(|s| (s.group, s.value))).collect()
}

/// Proposes `op` to `group` and keeps the reply of the one shape named; a
/// rejection becomes the matching error.
pub async fn write_as<M: Model, T>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    op: M::Op,
    consistency: Consistency,
    shape: impl FnOnce(M::Reply) -> Result<T, M::Reply>,
) -> Result<Served<T>, ApiError> {
    let served = write::<M>(cluster, group, op, consistency).await?;
    Ok(Served { value: misshapen(shape(served.value))?, group: served.group, node: served.node })
}

/// Reads `query` from `group` and keeps the answer of the one shape named; a
/// rejection becomes the matching error.
pub async fn read_as<M: Model, T>(
    cluster: &dyn ClusterClient,
    group: GroupId,
    query: M::Query,
    consistency: Consistency,
    replica: Option<NodeId>,
    shape: impl FnOnce(M::Answer) -> Result<T, M::Answer>,
) -> Result<Served<T>, ApiError> {
    let served = read::<M>(cluster, group, query, consistency, replica).await?;
    Ok(Served { value: misshapen(shape(served.value))?, group: served.group, node: served.node })
}
