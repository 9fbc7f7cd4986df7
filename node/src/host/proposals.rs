//! Proposal batching on a leader: the key-value and SQL writes of one group that arrive
//! while its earlier proposals are still in flight wait in a queue and go into
//! the log together, as one [`Operation::Batch`] entry. One entry costs one log
//! append, one replication message and one commit however many writes it holds,
//! so under load the per-write cost of Raft falls while a lone write goes out at
//! once, alone, as before.
//!
//! A batch is bounded by [`BatchLimits::max_commands`] and by a byte budget, so
//! an AppendEntries stays small; each command keeps its own stamp and request
//! id, and applies as if it were an entry of its own (see the state machine's
//! `apply_batch`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use openraft::Raft;
use openraft::error::{ClientWriteError, Fatal, RaftError};
use tessera_api::NodeId;
use tessera_api::command::{Command, Operation, Response};
use tessera_storage::TypeConfig;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// What one proposal answers: the command's response and the index of the log
/// entry that held it, or why the entry was not committed.
pub(super) type Proposed = Result<(Response, u64), RaftError<NodeId, ClientWriteError<NodeId, openraft::BasicNode>>>;

/// How a group's proposals are batched (`[raft]` `proposals_in_flight`, `batch_max_commands`).
#[derive(Clone, Copy, Debug)]
pub struct BatchLimits {
    /// Entries a leader has proposed and not yet seen committed before further
    /// writes wait to be batched.
    pub in_flight: usize,
    /// Commands in one batch entry at most; 1 turns batching off.
    pub max_commands: usize,
}

/// The payload bytes one batch holds at most (a command over it goes alone).
const MAX_BATCH_BYTES: usize = 256 * 1024;

struct Pending {
    cmd: Command,
    reply: oneshot::Sender<Proposed>,
}

/// A group's proposal queue, started on first use.
#[derive(Default)]
pub(super) struct Proposals {
    queue: OnceLock<Queue>,
}

struct Queue {
    sender: mpsc::UnboundedSender<Pending>,
    /// One permit per entry that may be in flight.
    slots: Arc<Semaphore>,
    /// Commands sent to the queue and not yet taken from it.
    waiting: Arc<AtomicUsize>,
}

impl Proposals {
    /// Proposes `cmd` to `raft`: at once and alone when nothing waits and an
    /// in-flight slot is free (or it may not be batched), else through the queue.
    pub(super) async fn propose(&self, raft: &Raft<TypeConfig>, limits: BatchLimits, cmd: Command) -> Proposed {
        if limits.max_commands <= 1 || !cmd.op.batchable() {
            return write(raft, cmd).await;
        }
        let queue = self.queue(raft, limits);
        if queue.waiting.load(Ordering::SeqCst) == 0
            && let Ok(slot) = queue.slots.clone().try_acquire_owned()
        {
            let proposed = write(raft, cmd).await;
            drop(slot);
            return proposed;
        }
        let (reply, answer) = oneshot::channel();
        queue.waiting.fetch_add(1, Ordering::SeqCst);
        if queue.sender.send(Pending { cmd, reply }).is_err() {
            return Err(RaftError::Fatal(Fatal::Stopped));
        }
        answer.await.unwrap_or(Err(RaftError::Fatal(Fatal::Stopped)))
    }

    /// Proposes `cmds` (batchable writes a router sent together) in as few
    /// entries as the limits allow, each entry holding an in-flight slot as a
    /// queued batch does; answers each command in order.
    pub(super) async fn propose_many(&self, raft: &Raft<TypeConfig>, limits: BatchLimits, cmds: Vec<Command>) -> Vec<Proposed> {
        if cmds.is_empty() {
            return Vec::new();
        }
        if limits.max_commands <= 1 {
            return futures::future::join_all(cmds.into_iter().map(|cmd| write(raft, cmd))).await;
        }
        let queue = self.queue(raft, limits);
        let mut answers = Vec::with_capacity(cmds.len());
        let mut chunk: Vec<Command> = Vec::new();
        let mut bytes = 0;
        let mut cmds = cmds.into_iter().peekable();
        while let Some(cmd) = cmds.next() {
            bytes += approximate_size(&cmd);
            chunk.push(cmd);
            let full =
                chunk.len() >= limits.max_commands || cmds.peek().is_none_or(|next| bytes + approximate_size(next) > MAX_BATCH_BYTES);
            if !full {
                continue;
            }
            let entry = std::mem::take(&mut chunk);
            bytes = 0;
            match queue.slots.clone().acquire_owned().await {
                Ok(slot) => {
                    answers.extend(propose_commands(raft, entry).await);
                    drop(slot);
                }
                Err(_) => answers.extend(entry.iter().map(|_| Err(RaftError::Fatal(Fatal::Stopped)))),
            }
        }
        answers
    }

    /// The group's queue, started on first use.
    fn queue(&self, raft: &Raft<TypeConfig>, limits: BatchLimits) -> &Queue {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            let (slots, waiting) = (Arc::new(Semaphore::new(limits.in_flight.max(1))), Arc::new(AtomicUsize::new(0)));
            tokio::spawn(run(raft.clone(), limits, receiver, slots.clone(), waiting.clone()));
            Queue { sender, slots, waiting }
        })
    }
}

async fn write(raft: &Raft<TypeConfig>, cmd: Command) -> Proposed {
    let proposed = std::time::Instant::now();
    let answer = raft.client_write(cmd).await.map(|r| (r.data, r.log_id.index));
    observe_proposal(proposed);
    answer
}

/// Records how long an entry took from its proposal to its answer (replicated,
/// committed and applied here).
fn observe_proposal(proposed: std::time::Instant) {
    metrics::histogram!("tessera_raft_proposal_seconds").record(proposed.elapsed().as_secs_f64());
}

/// The queue's loop: takes the first waiting command, waits for a free
/// in-flight slot, then proposes it with everything queued meanwhile (up to the
/// limits) as one entry. Ends when the group is dropped (and its sender with it).
async fn run(
    raft: Raft<TypeConfig>,
    limits: BatchLimits,
    mut queue: mpsc::UnboundedReceiver<Pending>,
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
) {
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match queue.recv().await {
                Some(p) => {
                    waiting.fetch_sub(1, Ordering::SeqCst);
                    p
                }
                None => return,
            },
        };
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let mut bytes = approximate_size(&first.cmd);
        let mut batch = vec![first];
        while batch.len() < limits.max_commands {
            let Ok(next) = queue.try_recv() else { break };
            waiting.fetch_sub(1, Ordering::SeqCst);
            let size = approximate_size(&next.cmd);
            if bytes + size > MAX_BATCH_BYTES {
                carried = Some(next);
                break;
            }
            bytes += size;
            batch.push(next);
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            propose_batch(&raft, batch).await;
            drop(slot);
        });
    }
}

/// Proposes `batch` as one entry (a single command as itself) and answers each
/// command's caller with its own response.
async fn propose_batch(raft: &Raft<TypeConfig>, batch: Vec<Pending>) {
    let (cmds, replies): (Vec<Command>, Vec<oneshot::Sender<Proposed>>) = batch.into_iter().map(|p| (p.cmd, p.reply)).unzip();
    for (reply, proposed) in replies.into_iter().zip(propose_commands(raft, cmds).await) {
        let _ = reply.send(proposed);
    }
}

/// Proposes `cmds` as one entry (a single command as itself); one answer per command, in order.
async fn propose_commands(raft: &Raft<TypeConfig>, mut cmds: Vec<Command>) -> Vec<Proposed> {
    if cmds.len() == 1 {
        return vec![write(raft, cmds.pop().expect("one command")).await];
    }
    let count = cmds.len();
    // The entry's own stamp is its last command's (the latest); each command applies at its own.
    let issued_at_ms = cmds.iter().map(|c| c.issued_at_ms).max().unwrap_or_default();
    let entry = Command { issued_at_ms, op: Operation::Batch(cmds), request_id: None };
    let proposed = std::time::Instant::now();
    let written = raft.client_write(entry).await;
    observe_proposal(proposed);
    match written {
        Ok(r) => {
            let index = r.log_id.index;
            let responses = match r.data {
                Response::Batch(responses) => responses,
                other => vec![other],
            };
            // A batch always answers once per command; a missing answer would be a bug.
            responses.into_iter().chain(std::iter::repeat(Response::Empty)).take(count).map(|response| Ok((response, index))).collect()
        }
        Err(e) => vec![Err(e); count],
    }
}

/// The bytes a command adds to an entry, roughly (its keys and values dominate).
fn approximate_size(cmd: &Command) -> usize {
    use tessera_api::command::KvOp;
    const OVERHEAD: usize = 64;
    match &cmd.op {
        Operation::Kv(KvOp::Put { key, value, .. }) => OVERHEAD + key.len() + value_size(value),
        Operation::Kv(KvOp::Delete { key }) => OVERHEAD + key.len(),
        Operation::Kv(KvOp::DeletePrefix { prefix, .. }) => OVERHEAD * 2 + prefix.len(),
        Operation::Kv(KvOp::PutMany { pairs }) => pairs.iter().map(|(k, v)| OVERHEAD + k.len() + value_size(v)).sum(),
        Operation::Sql(op) => OVERHEAD + op.database.len() + sql_payload_size(&cmd.op),
        _ => MAX_BATCH_BYTES,
    }
}

/// The bytes one command may hold, roughly: openraft 0.9 must replicate an
/// entry within one heartbeat interval or it retries it forever, so a bigger
/// write is refused before it reaches the log (a router cuts its own batches
/// well below this).
pub(super) const MAX_COMMAND_BYTES: usize = 3 * 512 * 1024;

/// A SQL command's size, roughly (its statements and parameters); others are
/// bounded where they are built (key-value sizes, import batches, object chunks).
pub(super) fn sql_payload_size(op: &Operation) -> usize {
    let params = |p: &[serde_json::Value]| p.iter().map(value_size).sum::<usize>();
    match op {
        Operation::Sql(op) => {
            let steps = op.transaction.as_ref().map_or(0, |t| t.steps.iter().map(|s| s.sql.len() + params(&s.params)).sum::<usize>());
            op.sql.len() + params(&op.params) + steps
        }
        Operation::SqlImport(op) => op.rows.iter().map(|r| r.values.iter().map(|(k, v)| k.len() + value_size(v)).sum::<usize>()).sum(),
        _ => 0,
    }
}

/// A JSON value's encoded size, roughly, without encoding it.
fn value_size(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| value_size(v) + 1).sum::<usize>(),
        Value::Object(fields) => 2 + fields.iter().map(|(k, v)| k.len() + 4 + value_size(v)).sum::<usize>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(text: &str) -> Command {
        let op = tessera_api::sql::SqlOp {
            database: "shop".into(),
            sql: text.into(),
            params: vec![serde_json::json!(1), serde_json::json!("x".repeat(100))],
            max_result_rows: 10_000,
            timeout_ms: 30_000,
            max_memory_mb: 256,
            transaction: None,
        };
        Command { issued_at_ms: 1, op: Operation::Sql(op), request_id: Some("r".into()) }
    }

    /// Small SQL writes share an entry up to the command bound, as key-value
    /// writes do; a large one fills an entry by itself.
    #[test]
    fn small_sql_writes_fit_many_to_an_entry() {
        let small = approximate_size(&sql("INSERT INTO t (id, v) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v"));
        assert!(small * 64 < MAX_BATCH_BYTES, "{small} bytes");
        let large = approximate_size(&sql(&format!("INSERT INTO t VALUES {}", "(1, 'x'),".repeat(40_000))));
        assert!(large > MAX_BATCH_BYTES, "{large} bytes");
    }
}
