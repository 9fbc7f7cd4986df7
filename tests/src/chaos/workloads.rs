//! The client workloads run during faults, and their final checks.
//!
//! - **register**: KV put (write of a unique integer) and `quorum` get (read) on
//!   a few keys; checked for linearizability per key. KV has no compare-and-set,
//!   so the register has only reads and writes.
//! - **set**: each client adds unique keys `set/<run>/<client>/<n>`; after
//!   healing every acknowledged key must be present (else a lost write), and
//!   every replica must hold the same keys.
//! - **bank**: transfers between accounts as one multi-statement SQL request
//!   (`BEGIN; UPDATE …; UPDATE …; COMMIT`); concurrent reads of every balance
//!   must sum to the initial total (a read seeing half a transfer is a snapshot
//!   isolation anomaly), balances never go negative, replicas agree at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::Rng;
use super::history::{OpRecord, Outcome, Recorder};
use super::linearizability::{RegisterOp, Timed, Verdict, check_register};
use crate::{Http, NODE_IDS, Resp, wait_for};

/// Per-request client timeout: past it an operation's outcome is unknown.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// SQL database of the bank workload.
pub const BANK_DB: &str = "chaos_bank";
/// Accounts in the bank.
pub const ACCOUNTS: i64 = 8;
/// Initial balance of each account.
pub const INITIAL_BALANCE: i64 = 1000;
/// Search budget of the linearizability checker per key.
const CHECK_BUDGET: u64 = 50_000_000;

/// Client counts and shape of the workloads.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// Unique id of the run, part of every key.
    pub run: String,
    pub register_clients: u64,
    pub register_keys: u64,
    /// Register keys are renewed every `register_epoch` (bounds each key's history).
    pub register_epoch: Duration,
    pub set_clients: u64,
    pub bank_transfer_clients: u64,
    pub bank_read_clients: u64,
}

/// Classifies the result of a write: 2xx ok, 4xx a definite refusal, anything
/// else (5xx, transport error, timeout) unknown.
fn classify(r: &Result<Resp>) -> (Outcome, Option<String>) {
    match r {
        Ok(r) if (200..300).contains(&r.status) => (Outcome::Ok, None),
        Ok(r) if (400..500).contains(&r.status) && r.status != 408 => (Outcome::Fail, Some(r.to_string())),
        Ok(r) => (Outcome::Info, Some(r.to_string())),
        Err(e) => (Outcome::Info, Some(format!("{e:#}"))),
    }
}

/// Running workloads.
pub struct Workloads {
    pub cfg: WorkloadConfig,
    pub rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    handles: Vec<(String, JoinHandle<Result<()>>)>,
    /// Transfers currently in flight (for the SQL commit crash point).
    pub transfers_in_flight: Arc<AtomicU64>,
    /// Groups that served register and set keys, and the bank's group.
    pub groups: Arc<std::sync::Mutex<BTreeSet<u64>>>,
    pub bank_group: Arc<AtomicU64>,
    started_ns: u64,
}

/// Creates the bank's table and accounts (before any fault).
pub async fn setup_bank(http: &Http) -> Result<u64> {
    let sql = |text: &str| {
        let http = http.clone();
        let body = json!({"sql": text, "params": [], "database": BANK_DB});
        async move { http.post("/api/v1/query", &body).await }
    };
    let r = sql("CREATE TABLE IF NOT EXISTS accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL CHECK (balance >= 0))").await?;
    ensure!(r.status == 200, "creating the bank table: {r}");
    // The ledger has no key on purpose: a transfer applied twice shows as two rows.
    let r = sql(
        "CREATE TABLE IF NOT EXISTS ledger (transfer_id BIGINT NOT NULL, from_id INT NOT NULL, to_id INT NOT NULL, amount BIGINT NOT NULL)",
    )
    .await?;
    ensure!(r.status == 200, "creating the ledger table: {r}");
    let values: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, {INITIAL_BALANCE})")).collect();
    let r = sql(&format!("INSERT INTO accounts VALUES {}", values.join(", "))).await?;
    ensure!(r.status == 200, "creating the accounts: {r}");
    // SQL responses carry no X-Tessera-Group; a database routes by `sql/<name>` on
    // the same ring as KV keys, so a KV write of that key names the bank's group.
    let r = http.kv_put(&format!("sql/{BANK_DB}"), json!("bank group probe"), None).await?.ensure_status(200)?;
    r.group().and_then(|g| g.parse().ok()).with_context(|| format!("no group header on {r}"))
}

impl Workloads {
    /// Starts every client.
    pub fn start(http: &Http, cfg: WorkloadConfig, rec: Arc<Recorder>, seed: u64, bank_group: u64) -> Workloads {
        let mut w = Workloads {
            cfg,
            started_ns: rec.now(),
            rec,
            stop: Arc::new(AtomicBool::new(false)),
            handles: Vec::new(),
            transfers_in_flight: Arc::new(AtomicU64::new(0)),
            groups: Arc::default(),
            bank_group: Arc::new(AtomicU64::new(bank_group)),
        };
        let http = http.timeout(CLIENT_TIMEOUT);
        for p in 0..w.cfg.register_clients {
            let task = register_client(
                http.clone(),
                w.cfg.clone(),
                w.rec.clone(),
                w.stop.clone(),
                w.groups.clone(),
                p,
                Rng::new(seed ^ ((p + 1) * 0x9E37)),
            );
            w.handles.push((format!("register client {p}"), tokio::spawn(task)));
        }
        for p in 0..w.cfg.set_clients {
            let task = set_client(http.clone(), w.cfg.run.clone(), w.rec.clone(), w.stop.clone(), w.groups.clone(), p);
            w.handles.push((format!("set client {p}"), tokio::spawn(task)));
        }
        for p in 0..w.cfg.bank_transfer_clients {
            let task = bank_transfer_client(
                http.clone(),
                w.rec.clone(),
                w.stop.clone(),
                w.transfers_in_flight.clone(),
                p,
                Rng::new(seed ^ ((p + 101) * 0x7F4A)),
            );
            w.handles.push((format!("bank transfer client {p}"), tokio::spawn(task)));
        }
        for p in 0..w.cfg.bank_read_clients {
            let task = bank_read_client(http.clone(), w.rec.clone(), w.stop.clone(), 1000 + p);
            w.handles.push((format!("bank read client {p}"), tokio::spawn(task)));
        }
        w
    }

    /// Count of acknowledged operations per workload since `since_ns`.
    pub fn acked_since(&self, since_ns: u64) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for o in self.rec.ops() {
            if o.outcome == Outcome::Ok && o.invoke_ns >= since_ns {
                *m.entry(o.workload).or_insert(0) += 1;
            }
        }
        m
    }

    /// Stops every client and waits for them.
    pub async fn stop(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        for (name, h) in self.handles.drain(..) {
            h.await.with_context(|| format!("{name} panicked"))?.with_context(|| format!("{name} failed"))?;
        }
        Ok(())
    }

    /// When the workloads started.
    pub fn started_ns(&self) -> u64 {
        self.started_ns
    }
}

fn register_key(cfg: &WorkloadConfig, rec: &Recorder, k: u64) -> String {
    let epoch = rec.now() / cfg.register_epoch.as_nanos().max(1) as u64;
    format!("reg/{}/{epoch}/{k}", cfg.run)
}

async fn register_client(
    http: Http,
    cfg: WorkloadConfig,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    groups: Arc<std::sync::Mutex<BTreeSet<u64>>>,
    p: u64,
    mut rng: Rng,
) -> Result<()> {
    let reader = http.consistency("quorum");
    let mut seq = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let key = register_key(&cfg, &rec, rng.below(cfg.register_keys));
        if rng.below(2) == 0 {
            seq += 1;
            // Unique across clients: client id in the low digits.
            let v = seq * 1000 + p as i64;
            let invoke_ns = rec.now();
            let r = http.kv_put(&key, json!(v), None).await;
            let complete = rec.now();
            let (outcome, error) = classify(&r);
            if let Ok(r) = &r
                && let Some(g) = r.group().and_then(|g| g.parse().ok())
            {
                groups.lock().expect("groups").insert(g);
            }
            rec.op(OpRecord {
                workload: "register",
                process: p,
                kind: "write",
                key,
                input: json!(v),
                invoke_ns,
                complete_ns: (outcome != Outcome::Info).then_some(complete),
                outcome,
                output: Value::Null,
                error,
                served_by: r.as_ref().ok().and_then(Resp::served_by),
            });
        } else {
            let invoke_ns = rec.now();
            let r = reader.kv_get(&key).await;
            let complete = rec.now();
            let (outcome, output, error) = match &r {
                Ok(r) if r.status == 200 => (Outcome::Ok, r.json["value"].clone(), None),
                Ok(r) if r.status == 404 && r.json["code"] == "NOT_FOUND" => (Outcome::Ok, Value::Null, None),
                Ok(r) => (Outcome::Fail, Value::Null, Some(r.to_string())),
                Err(e) => (Outcome::Fail, Value::Null, Some(format!("{e:#}"))),
            };
            rec.op(OpRecord {
                workload: "register",
                process: p,
                kind: "read",
                key,
                input: Value::Null,
                invoke_ns,
                complete_ns: Some(complete),
                outcome,
                output,
                error,
                served_by: r.as_ref().ok().and_then(Resp::served_by),
            });
        }
    }
    Ok(())
}

async fn set_client(
    http: Http,
    run: String,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    groups: Arc<std::sync::Mutex<BTreeSet<u64>>>,
    p: u64,
) -> Result<()> {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = format!("set/{run}/{p}/{n:08}");
        let invoke_ns = rec.now();
        let r = http.kv_put(&key, json!(n), None).await;
        let complete = rec.now();
        let (outcome, error) = classify(&r);
        if let Ok(r) = &r
            && let Some(g) = r.group().and_then(|g| g.parse().ok())
        {
            groups.lock().expect("groups").insert(g);
        }
        rec.op(OpRecord {
            workload: "set",
            process: p,
            kind: "add",
            key,
            input: json!(n),
            invoke_ns,
            complete_ns: (outcome != Outcome::Info).then_some(complete),
            outcome,
            output: Value::Null,
            error,
            served_by: r.as_ref().ok().and_then(Resp::served_by),
        });
    }
    Ok(())
}

/// A transfer with its ledger row, all or nothing. `$4` is the transfer's id,
/// unique in the run (client in the high digits).
const TRANSFER: &str = "BEGIN; INSERT INTO ledger VALUES ($4, $2, $3, $1); \
                        UPDATE accounts SET balance = balance - $1 WHERE id = $2; \
                        UPDATE accounts SET balance = balance + $1 WHERE id = $3; COMMIT";
const LEDGER: &str = "SELECT transfer_id, from_id, to_id, amount FROM ledger";
const BALANCES: &str = "SELECT id, balance FROM accounts ORDER BY id";

async fn bank_transfer_client(
    http: Http,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    in_flight: Arc<AtomicU64>,
    p: u64,
    mut rng: Rng,
) -> Result<()> {
    let mut seq = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let from = rng.below(ACCOUNTS as u64) as i64;
        let to = (from + 1 + rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
        let amount = 1 + rng.below(300) as i64;
        seq += 1;
        let id = (p as i64 + 1) * 1_000_000_000 + seq;
        let input = json!({"id": id, "from": from, "to": to, "amount": amount});
        let invoke_ns = rec.now();
        in_flight.fetch_add(1, Ordering::SeqCst);
        let params = json!([amount, from, to, id]);
        let r = http.post("/api/v1/query", &json!({"sql": TRANSFER, "params": params, "database": BANK_DB})).await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
        let complete = rec.now();
        let (outcome, error) = classify(&r);
        rec.op(OpRecord {
            workload: "bank",
            process: p,
            kind: "transfer",
            key: BANK_DB.into(),
            input,
            invoke_ns,
            complete_ns: (outcome != Outcome::Info).then_some(complete),
            outcome,
            output: Value::Null,
            error,
            served_by: r.as_ref().ok().and_then(Resp::served_by),
        });
    }
    Ok(())
}

/// Parses `SELECT id, balance` rows into id → balance.
fn balances(r: &Resp) -> Option<BTreeMap<i64, i64>> {
    r.json["data"]["rows"].as_array()?.iter().map(|row| Some((row.get(0)?.as_i64()?, row.get(1)?.as_i64()?))).collect()
}

async fn bank_read_client(http: Http, rec: Arc<Recorder>, stop: Arc<AtomicBool>, p: u64) -> Result<()> {
    let http = http.consistency("quorum");
    while !stop.load(Ordering::Relaxed) {
        let invoke_ns = rec.now();
        let r = http.post("/api/v1/query", &json!({"sql": BALANCES, "params": [], "database": BANK_DB})).await;
        let complete = rec.now();
        let (outcome, output, error) = match &r {
            Ok(r) if r.status == 200 => match balances(r) {
                Some(b) => (Outcome::Ok, json!(b.values().collect::<Vec<_>>()), None),
                None => (Outcome::Fail, Value::Null, Some(format!("unparseable rows: {r}"))),
            },
            Ok(r) => (Outcome::Fail, Value::Null, Some(r.to_string())),
            Err(e) => (Outcome::Fail, Value::Null, Some(format!("{e:#}"))),
        };
        rec.op(OpRecord {
            workload: "bank",
            process: p,
            kind: "balances",
            key: BANK_DB.into(),
            input: Value::Null,
            invoke_ns,
            complete_ns: Some(complete),
            outcome,
            output,
            error,
            served_by: r.as_ref().ok().and_then(Resp::served_by),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// Results of the final checks.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Human-readable anomalies; empty when everything holds.
    pub anomalies: Vec<String>,
    /// Acknowledged writes missing at the end (set adds, bank transfers).
    pub lost_writes: u64,
    /// Set before the checks when the run may lose acknowledged writes by
    /// contract (`storage.sync_on_commit = false` and a whole-cluster power
    /// cut): lost writes are then counted here instead of as anomalies, and
    /// the registers' linearizability is not judged. Forks (replicas that
    /// diverge), phantom or doubled writes and broken invariants still are.
    pub loss_tolerated: bool,
    /// Lost writes the contract allowed (with `loss_tolerated`).
    pub lost_writes_tolerated: u64,
    /// What the checks left out or tolerated, and why.
    pub notes: Vec<String>,
    /// Register keys checked and operations fed to the checker.
    pub register_keys: usize,
    pub register_ops_checked: usize,
    /// Set adds acknowledged / present at the end.
    pub set_acked: u64,
    pub set_present: u64,
    /// Bank reads checked.
    pub bank_reads: u64,
    /// Transfers sent (every outcome) checked against the ledger, and its rows.
    pub bank_transfers_checked: usize,
    pub bank_ledger_rows: usize,
}

/// Checks every register key's history for linearizability.
pub fn check_registers(rec: &Recorder, report: &mut CheckReport) {
    if report.loss_tolerated {
        report.notes.push(
            "registers: linearizability not judged (sync_on_commit = false and a whole-cluster power cut may lose \
             acknowledged writes by contract; forks are caught by the replica convergence check)"
                .into(),
        );
        return;
    }
    let mut per_key: BTreeMap<String, Vec<Timed<RegisterOp>>> = BTreeMap::new();
    let mut bad_values = Vec::new();
    for o in rec.ops().into_iter().filter(|o| o.workload == "register") {
        let op = match (o.kind, o.outcome) {
            ("write", Outcome::Fail) | ("read", Outcome::Fail) | ("read", Outcome::Info) => continue,
            ("write", _) => RegisterOp::Write(o.input.as_i64().unwrap_or_default()),
            ("read", Outcome::Ok) => match &o.output {
                Value::Null => RegisterOp::Read(None),
                v => match v.as_i64() {
                    Some(i) => RegisterOp::Read(Some(i)),
                    None => {
                        bad_values.push(format!("register {}: read returned a non-integer {v}", o.key));
                        continue;
                    }
                },
            },
            _ => continue,
        };
        per_key.entry(o.key).or_default().push(Timed { call: o.invoke_ns, ret: o.complete_ns, op });
    }
    report.anomalies.extend(bad_values);
    for (key, hist) in &per_key {
        let (verdict, kept) = check_register(hist, CHECK_BUDGET);
        report.register_keys += 1;
        report.register_ops_checked += kept.len();
        match verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { stuck_at, deepest } => {
                let op = hist.get(stuck_at).map(|t| format!("{:?} called at {:.3} ms", t.op, t.call as f64 / 1e6));
                report.anomalies.push(format!(
                    "register {key}: NOT linearizable ({} ops; the deepest partial linearization placed {deepest}; \
                     it could not get past the return of {})",
                    kept.len(),
                    op.unwrap_or_else(|| "?".into())
                ));
            }
            Verdict::Unknown { steps } => {
                report.anomalies.push(format!("register {key}: linearizability undecided after {steps} search steps ({} ops)", kept.len()))
            }
        }
    }
}

/// All keys under `prefix`, read with `http`'s consistency. One answer holds
/// at most `max_result_rows` (100 000) keys and a long run adds more: a
/// truncated listing is read again as one listing per next character of the
/// set's keys (digits and `/`), and their union must hold `total` keys.
async fn list_all(http: &Http, prefix: &str) -> Result<BTreeSet<String>> {
    let (keys, total) = http.kv_list_keys(prefix, Some(100_000)).await?;
    if keys.len() as u64 == total {
        return Ok(keys.into_iter().collect());
    }
    let mut all = BTreeSet::new();
    for c in "0123456789/".chars() {
        all.extend(Box::pin(list_all(http, &format!("{prefix}{c}"))).await?);
    }
    ensure!(all.len() as u64 == total, "listing {prefix}: {} of {total} keys found in the sub-listings", all.len());
    Ok(all)
}

/// After healing: every acknowledged add is present (quorum list), nothing
/// unattempted appears, and every replica holds the same set.
pub async fn check_set(http: &Http, rec: &Recorder, run: &str, report: &mut CheckReport) -> Result<()> {
    let prefix = format!("set/{run}/");
    let http = http.timeout(Duration::from_secs(60));
    let present = list_all(&http.consistency("quorum"), &prefix).await?;
    let ops: Vec<OpRecord> = rec.ops().into_iter().filter(|o| o.workload == "set").collect();
    let attempted: BTreeSet<&str> = ops.iter().filter(|o| o.outcome != Outcome::Fail).map(|o| o.key.as_str()).collect();
    let acked: Vec<&str> = ops.iter().filter(|o| o.outcome == Outcome::Ok).map(|o| o.key.as_str()).collect();
    let lost: Vec<&str> = acked.iter().copied().filter(|k| !present.contains(*k)).collect();
    report.set_acked = acked.len() as u64;
    report.set_present = present.len() as u64;
    if report.loss_tolerated {
        report.lost_writes_tolerated += lost.len() as u64;
        if !lost.is_empty() {
            report.notes.push(format!(
                "set: {} acknowledged adds lost, allowed by sync_on_commit = false, e.g. {:?}",
                lost.len(),
                &lost[..lost.len().min(5)]
            ));
        }
    } else {
        report.lost_writes += lost.len() as u64;
        if !lost.is_empty() {
            report.anomalies.push(format!("set: {} acknowledged adds lost, e.g. {:?}", lost.len(), &lost[..lost.len().min(5)]));
        }
    }
    let phantom: Vec<&String> = present.iter().filter(|k| !attempted.contains(k.as_str())).collect();
    if !phantom.is_empty() {
        report.anomalies.push(format!(
            "set: {} keys present that no client added successfully or in doubt, e.g. {:?}",
            phantom.len(),
            &phantom[..phantom.len().min(5)]
        ));
    }
    for node in NODE_IDS {
        let replica = http.replica(node);
        let what = format!("replica {node} holds the same set as the quorum read");
        let agreed = wait_for(Duration::from_secs(60), &what, async || {
            let got = list_all(&replica, &prefix).await?;
            if got == present { Ok(Some(())) } else { Err(anyhow!("replica {node} has {} keys, quorum {}", got.len(), present.len())) }
        })
        .await;
        if let Err(e) = agreed {
            report.anomalies.push(format!("set: {e:#}"));
        }
    }
    Ok(())
}

async fn read_balances(http: &Http) -> Result<BTreeMap<i64, i64>> {
    let r = http.post("/api/v1/query", &json!({"sql": BALANCES, "params": [], "database": BANK_DB})).await?;
    ensure!(r.status == 200, "reading balances: {r}");
    balances(&r).ok_or_else(|| anyhow!("unparseable balances: {r}"))
}

fn bank_problem(b: &BTreeMap<i64, i64>) -> Option<String> {
    let total: i64 = b.values().sum();
    let expected = ACCOUNTS * INITIAL_BALANCE;
    if b.len() as i64 != ACCOUNTS {
        return Some(format!("{} accounts instead of {ACCOUNTS}", b.len()));
    }
    if total != expected {
        return Some(format!("total {total} instead of {expected}"));
    }
    if let Some((id, v)) = b.iter().find(|(_, v)| **v < 0) {
        return Some(format!("account {id} is negative ({v})"));
    }
    None
}

/// Every read during the run and the final state: totals invariant, no
/// negative balance, replicas agree.
pub async fn check_bank(http: &Http, rec: &Recorder, report: &mut CheckReport) -> Result<()> {
    let mut bad = Vec::new();
    for o in rec.ops().into_iter().filter(|o| o.workload == "bank" && o.kind == "balances" && o.outcome == Outcome::Ok) {
        report.bank_reads += 1;
        let b: BTreeMap<i64, i64> = o
            .output
            .as_array()
            .map(|a| a.iter().enumerate().map(|(i, v)| (i as i64, v.as_i64().unwrap_or(i64::MIN))).collect())
            .unwrap_or_default();
        if let Some(p) = bank_problem(&b) {
            bad.push(format!("read at {:.3} ms: {p} ({})", o.invoke_ns as f64 / 1e6, o.output));
        }
    }
    if !bad.is_empty() {
        report.anomalies.push(format!("bank: {} reads broke the invariant, e.g. {:?}", bad.len(), &bad[..bad.len().min(3)]));
    }
    let http = http.timeout(Duration::from_secs(60));
    let reference = read_balances(&http.consistency("quorum")).await?;
    if let Some(p) = bank_problem(&reference) {
        report.anomalies.push(format!("bank: final state: {p} ({reference:?})"));
    }
    check_ledger(&http, rec, &reference, report).await?;
    for node in NODE_IDS {
        let replica = http.replica(node);
        let what = format!("bank replica {node} agrees with the quorum read");
        let agreed = wait_for(Duration::from_secs(60), &what, async || {
            let got = read_balances(&replica).await?;
            if got == reference { Ok(Some(())) } else { Err(anyhow!("replica {node}: {got:?}, quorum {reference:?}")) }
        })
        .await;
        if let Err(e) = agreed {
            report.anomalies.push(format!("bank: {e:#}"));
        }
    }
    Ok(())
}

/// The ledger against the history and the balances: every acknowledged
/// transfer is in it exactly once (lost / doubled), nothing is in it that was
/// never sent or was definitely refused, and every balance is the initial one
/// plus the ledger's credits minus its debits.
async fn check_ledger(http: &Http, rec: &Recorder, balances: &BTreeMap<i64, i64>, report: &mut CheckReport) -> Result<()> {
    // In pages: one answer holds at most `max_result_rows` (100 000) rows, and a
    // long run writes more (the workloads have stopped: the pages are stable).
    const PAGE: usize = 20_000;
    let mut ledger: Vec<[i64; 4]> = Vec::new();
    loop {
        let sql = format!("{LEDGER} ORDER BY transfer_id, from_id, to_id, amount LIMIT {PAGE} OFFSET {}", ledger.len());
        let r = http.consistency("quorum").post("/api/v1/query", &json!({"sql": sql, "params": [], "database": BANK_DB})).await?;
        ensure!(r.status == 200, "reading the ledger: {r}");
        ensure!(r.json["metadata"]["truncated"] != json!(true), "a ledger page was truncated: {r}");
        let rows = r.json["data"]["rows"].as_array().with_context(|| format!("no ledger rows in {r}"))?;
        let n = rows.len();
        ledger.extend(rows.iter().map(|row| std::array::from_fn(|i| row.get(i).and_then(Value::as_i64).unwrap_or(i64::MIN))));
        if n < PAGE {
            break;
        }
    }
    let transfers: BTreeMap<i64, (Outcome, Value)> = rec
        .ops()
        .into_iter()
        .filter(|o| o.workload == "bank" && o.kind == "transfer")
        .filter_map(|o| Some((o.input["id"].as_i64()?, (o.outcome, o.input))))
        .collect();
    let mut problems = ledger_problems(&transfers, &ledger, balances);
    report.bank_transfers_checked = transfers.len();
    report.bank_ledger_rows = ledger.len();
    let lost = problems.iter().filter(|p| p.ends_with("(lost)")).count();
    if report.loss_tolerated {
        report.lost_writes_tolerated += lost as u64;
        if lost > 0 {
            report.notes.push(format!("bank: {lost} acknowledged transfers lost, allowed by sync_on_commit = false"));
        }
        problems.retain(|p| !p.ends_with("(lost)"));
    } else {
        report.lost_writes += lost as u64;
    }
    if !problems.is_empty() {
        report.anomalies.push(format!("bank ledger: {} problems, e.g. {:?}", problems.len(), &problems[..problems.len().min(5)]));
    }
    Ok(())
}

/// What is wrong with a ledger (rows of transfer id, from, to, amount), given
/// the transfers sent (id → outcome, input) and the final balances.
pub fn ledger_problems(transfers: &BTreeMap<i64, (Outcome, Value)>, ledger: &[[i64; 4]], balances: &BTreeMap<i64, i64>) -> Vec<String> {
    let mut seen: BTreeMap<i64, (u64, i64, i64, i64)> = BTreeMap::new();
    for [id, from, to, amount] in ledger {
        seen.entry(*id).or_insert((0, *from, *to, *amount)).0 += 1;
    }
    let mut problems = Vec::new();
    for (id, (outcome, input)) in transfers {
        match (outcome, seen.get(id)) {
            (Outcome::Ok, None) => problems.push(format!("acknowledged transfer {input} is not in the ledger (lost)")),
            (Outcome::Fail, Some(_)) => problems.push(format!("transfer {input} was refused but is in the ledger")),
            _ => {}
        }
        if let Some((n, from, to, amount)) = seen.get(id) {
            if *n > 1 {
                problems.push(format!("transfer {input} is in the ledger {n} times (doubled)"));
            }
            if json!({"id": id, "from": from, "to": to, "amount": amount}) != *input {
                problems.push(format!("ledger row of transfer {id} is ({from}, {to}, {amount}), sent {input}"));
            }
        }
    }
    for id in seen.keys().filter(|id| !transfers.contains_key(id)) {
        problems.push(format!("ledger row {id} belongs to no transfer sent"));
    }
    let mut expected: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|a| (a, INITIAL_BALANCE)).collect();
    for [_, from, to, amount] in ledger {
        *expected.entry(*from).or_default() -= amount;
        *expected.entry(*to).or_default() += amount;
    }
    if &expected != balances {
        problems.push(format!("balances {balances:?} are not what the ledger adds up to {expected:?}"));
    }
    problems
}

/// Final quorum reads of every register key, recorded as ordinary reads so the
/// checker sees the end state.
pub async fn final_register_reads(http: &Http, rec: &Recorder) -> Result<()> {
    let keys: BTreeSet<String> = rec.ops().into_iter().filter(|o| o.workload == "register").map(|o| o.key).collect();
    let http = http.consistency("quorum").timeout(Duration::from_secs(30));
    for key in keys {
        let invoke_ns = rec.now();
        let r = http.kv_get(&key).await?;
        let complete = rec.now();
        let output = match r.status {
            200 => r.json["value"].clone(),
            404 => Value::Null,
            _ => bail!("final read of {key}: {r}"),
        };
        rec.op(OpRecord {
            workload: "register",
            process: u64::MAX,
            kind: "read",
            key,
            input: Value::Null,
            invoke_ns,
            complete_ns: Some(complete),
            outcome: Outcome::Ok,
            output,
            error: None,
            served_by: r.served_by(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(entries: &[(i64, Outcome, i64, i64, i64)]) -> BTreeMap<i64, (Outcome, Value)> {
        entries.iter().map(|&(id, o, from, to, amount)| (id, (o, json!({"id": id, "from": from, "to": to, "amount": amount})))).collect()
    }

    fn balances_after(ledger: &[[i64; 4]]) -> BTreeMap<i64, i64> {
        let mut b: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|a| (a, INITIAL_BALANCE)).collect();
        for [_, from, to, amount] in ledger {
            *b.get_mut(from).unwrap() -= amount;
            *b.get_mut(to).unwrap() += amount;
        }
        b
    }

    #[test]
    fn the_ledger_finds_lost_doubled_phantom_and_refused_transfers() {
        let transfers =
            sent(&[(1, Outcome::Ok, 0, 1, 10), (2, Outcome::Info, 1, 2, 20), (3, Outcome::Fail, 2, 3, 30), (4, Outcome::Ok, 3, 4, 40)]);
        // A good ledger: every acknowledged transfer once, the unknown one may be absent.
        let good = [[1, 0, 1, 10], [4, 3, 4, 40]];
        assert!(ledger_problems(&transfers, &good, &balances_after(&good)).is_empty());

        let lost = [[1, 0, 1, 10]];
        let p = ledger_problems(&transfers, &lost, &balances_after(&lost));
        assert!(p.iter().any(|p| p.contains("(lost)")), "{p:?}");

        let doubled = [[1, 0, 1, 10], [1, 0, 1, 10], [4, 3, 4, 40]];
        let p = ledger_problems(&transfers, &doubled, &balances_after(&doubled));
        assert!(p.iter().any(|p| p.contains("2 times")), "{p:?}");

        let refused = [[1, 0, 1, 10], [3, 2, 3, 30], [4, 3, 4, 40]];
        let p = ledger_problems(&transfers, &refused, &balances_after(&refused));
        assert!(p.iter().any(|p| p.contains("refused")), "{p:?}");

        let phantom = [[1, 0, 1, 10], [4, 3, 4, 40], [9, 5, 6, 1]];
        let p = ledger_problems(&transfers, &phantom, &balances_after(&phantom));
        assert!(p.iter().any(|p| p.contains("no transfer sent")), "{p:?}");

        // Half a transfer: the ledger is right but one balance missed its credit.
        let mut half = balances_after(&good);
        *half.get_mut(&4).unwrap() -= 40;
        let p = ledger_problems(&transfers, &good, &half);
        assert_eq!(p.len(), 1, "{p:?}");
    }
}
