//! The history of a run: every client operation with its invoke and complete
//! instants and outcome, and every fault, on one monotonic clock.

use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Value, json};

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged: it took effect (writes) or returned a value (reads).
    Ok,
    /// Definitely did not take effect (a 4xx refusal).
    Fail,
    /// Unknown: timed out, connection lost or a 5xx; it may or may not have taken effect.
    Info,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

/// One client operation.
#[derive(Clone, Debug)]
pub struct OpRecord {
    /// `register`, `set` or `bank`.
    pub workload: &'static str,
    /// Client id within the workload.
    pub process: u64,
    /// `write`, `read`, `add`, `transfer`, `balances`.
    pub kind: &'static str,
    pub key: String,
    /// The operation's input (value written, transfer).
    pub input: Value,
    /// Nanoseconds since the run started.
    pub invoke_ns: u64,
    /// `None` for `Info`: the return is at +∞.
    pub complete_ns: Option<u64>,
    pub outcome: Outcome,
    /// What a read returned.
    pub output: Value,
    /// Status or error text of a non-ok outcome.
    pub error: Option<String>,
    /// `X-Tessera-Node` of the response, when there was one.
    pub served_by: Option<u64>,
}

/// A fault the nemesis injected.
#[derive(Clone, Debug)]
pub struct FaultRecord {
    pub kind: String,
    pub detail: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Shared recorder.
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<OpRecord>>,
    faults: Mutex<Vec<FaultRecord>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder { start: Instant::now(), ops: Mutex::default(), faults: Mutex::default() }
    }
}

impl Recorder {
    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records a finished operation.
    pub fn op(&self, op: OpRecord) {
        self.ops.lock().expect("history lock").push(op);
    }

    /// Records a fault.
    pub fn fault(&self, kind: &str, detail: String, start_ns: u64) {
        let end_ns = self.now();
        self.faults.lock().expect("history lock").push(FaultRecord { kind: kind.into(), detail, start_ns, end_ns });
    }

    /// A copy of every operation so far.
    pub fn ops(&self) -> Vec<OpRecord> {
        self.ops.lock().expect("history lock").clone()
    }

    /// A copy of every fault so far.
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.faults.lock().expect("history lock").clone()
    }

    /// The whole history as JSON (operations sorted by invoke time).
    pub fn to_json(&self) -> Value {
        let mut ops = self.ops();
        ops.sort_by_key(|o| o.invoke_ns);
        let ops: Vec<Value> = ops
            .iter()
            .map(|o| {
                json!({
                    "workload": o.workload, "process": o.process, "kind": o.kind, "key": o.key,
                    "input": o.input, "invoke_ms": o.invoke_ns as f64 / 1e6,
                    "complete_ms": o.complete_ns.map(|c| c as f64 / 1e6),
                    "outcome": o.outcome.as_str(), "output": o.output, "error": o.error, "served_by": o.served_by,
                })
            })
            .collect();
        let faults: Vec<Value> = self
            .faults()
            .iter()
            .map(|f| json!({"kind": f.kind, "detail": f.detail, "start_ms": f.start_ns as f64 / 1e6, "end_ms": f.end_ns as f64 / 1e6}))
            .collect();
        json!({"operations": ops, "faults": faults})
    }
}
