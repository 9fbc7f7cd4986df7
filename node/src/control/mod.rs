//! The control plane: the background tasks that change where data lives — the
//! placement driver ([`driver`]: node additions and drains, replica moves,
//! leadership balance) and the range splitter ([`splitter`]) — run by the meta
//! group's leader, and the calls they make to a group's leader
//! ([`leader_call`]).
//!
//! They see the node through [`ControlHost`], a narrow interface: the meta
//! group's state and leadership, and one call per step they ask of a node
//! (this one or a peer). [`Host`](crate::host::Host) implements it over its
//! replicas and gRPC ([`node_host`]); the unit tests implement it over an
//! in-memory cluster, so each decision is tested without processes.

pub mod driver;
pub mod leader_call;
mod localities;
mod node_host;
pub mod splitter;
mod strays;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::Duration;

use tessera_api::command::{MetaOp, Operation, Response};
use tessera_api::meta::{ClusterMap, NodeInfo};
use tessera_api::rpc::StatusReply;
use tessera_api::{GroupId, META_GROUP, NodeId};

pub use leader_call::{Answer, Call};

/// Why a control-plane step did not happen; the task logs it and tries again
/// next period.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControlError {
    /// A node could not be reached, or answered with a failure.
    #[error("node {node}: {message}")]
    Node { node: NodeId, message: String },
    /// No member of the group (nor a leader they named) answered as its leader.
    #[error("{0}")]
    NoLeader(String),
    /// The call did not finish in time.
    #[error("group {group}'s leader did not answer within {after:?}")]
    Timeout { group: GroupId, after: Duration },
    /// A group refused the command (an apply-time check).
    #[error("{what} refused: {message}")]
    Refused { what: String, message: String },
    /// An answer of the wrong kind (a version mismatch or a bug).
    #[error("unexpected answer to {what}: {answer}")]
    Unexpected { what: String, answer: String },
    /// The map lacks what the step needs, or a step's outcome is not visible.
    #[error("{0}")]
    Map(String),
    /// This node's own replica failed the call.
    #[error("{0}")]
    Local(String),
}

impl ControlError {
    pub(crate) fn unexpected(what: &str, answer: impl std::fmt::Debug) -> Self {
        ControlError::Unexpected { what: what.to_string(), answer: format!("{answer:?}") }
    }
}

/// What a node answered to a call on a group's leader.
#[derive(Debug)]
pub enum Reply {
    Done(Answer),
    /// It does not lead the group; `leader` is the one it names, if any.
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    Failed(String),
}

/// What the control plane needs of the node it runs on. Every `node` argument
/// may be this node (answered locally) or a peer (answered over gRPC).
pub trait ControlHost: Send + Sync + 'static {
    /// This node's id.
    fn node_id(&self) -> NodeId;
    /// The node is shutting down: background tasks end.
    fn is_stopping(&self) -> bool;
    /// This node's replica of `group` believes it leads (a metric, not a proof).
    fn leads(&self, group: GroupId) -> bool;
    /// The other node this node's replica of `group` follows as its leader,
    /// with its address (`None` when it hosts no replica or knows no leader).
    fn leader_here(&self, group: GroupId) -> Option<(NodeId, String)>;
    /// This node's meta leadership confirmed by a quorum: its term, the fence
    /// every control-plane call carries; `None` if it does not lead.
    fn confirm_meta_leadership(&self) -> impl Future<Output = Option<u64>> + Send;
    /// The cluster map as this node's meta replica has applied it.
    fn recorded_map(&self) -> Option<ClusterMap>;
    /// Runs `call` on this node's replica of `group`, which leads it.
    fn call_here(&self, group: GroupId, call: Call) -> impl Future<Output = Result<Answer, ControlError>> + Send;
    /// Asks `node` at `addr` to run `call` as `group`'s leader.
    fn call_node(&self, node: NodeId, addr: &str, group: GroupId, call: &Call) -> impl Future<Output = Reply> + Send;
    /// Has `node` host an empty replica of `group` (idempotent), fenced by `term`.
    fn host_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> impl Future<Output = Result<(), ControlError>> + Send;
    /// Has `node` drop its replica of `group`, fenced by `term`.
    fn drop_group(&self, node: &NodeInfo, group: GroupId, term: u64) -> impl Future<Output = Result<(), ControlError>> + Send;
    /// The log index `node`'s replica of `group` has applied; `None` if unknown
    /// (not hosted, or the node did not answer).
    fn applied_index(&self, node: &NodeInfo, group: GroupId) -> impl Future<Output = Option<u64>> + Send;
    /// `node`'s status (its groups and who it believes leads them); `None` if it
    /// did not answer.
    fn status(&self, node: &NodeInfo) -> impl Future<Output = Option<StatusReply>> + Send;
    /// Has `node` hand its leadership of `group` off to `to`; whether it led.
    fn hand_off(
        &self,
        node: &NodeInfo,
        group: GroupId,
        to: NodeId,
        timeout: Duration,
    ) -> impl Future<Output = Result<bool, ControlError>> + Send;
    /// Has `node` campaign for `group` (after `previous` handed off); the leader
    /// afterwards, if known.
    fn campaign(
        &self,
        node: &NodeInfo,
        group: GroupId,
        previous: NodeId,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<NodeId>, ControlError>> + Send;
}

/// Proposes `op` to the meta group, which this node leads; a refusal is an error.
pub(crate) async fn meta_write<H: ControlHost>(host: &H, op: MetaOp, what: &str) -> Result<Response, ControlError> {
    match host.call_here(META_GROUP, Call::Write(Operation::Meta(op))).await? {
        Answer::Written(Response::Rejected(r)) => Err(ControlError::Refused { what: what.to_string(), message: r.message }),
        Answer::Written(response) => Ok(response),
        other => Err(ControlError::unexpected(what, other)),
    }
}
