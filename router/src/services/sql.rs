//! Running SQL for a caller, whatever brought it (`POST /api/v1/query`, the
//! PostgreSQL wire listener).
//!
//! A database lives in the data group its name hashes to, so its transactions are
//! single-group. Requests that only read are answered by one replica from a
//! snapshot (never through the Raft log); anything that writes is proposed as one
//! command, which every replica executes atomically against the same state.

use serde_json::Value;
use tessera_api::GroupId;
use tessera_api::error::ErrorCode;
use tessera_api::routing::RoutingKey;
use tessera_api::sql::{SqlOp, SqlQuery, SqlResult, SqlStep, SqlTransaction, result_digest};

use crate::cluster::ReadPrefs;
use crate::cluster::typed::{self, Sql};
use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::services::classification::guard;
use crate::services::security::{self, Volume};
use crate::state::AppState;

/// The database a request names none.
pub const DEFAULT_DATABASE: &str = "default";

/// The data group that holds `database`; 400 for a malformed name.
pub fn database_group(state: &AppState, database: &str) -> Result<GroupId, ApiError> {
    if !(1..=64).contains(&database.len()) || !database.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(ApiError::BadRequest(format!("invalid database name {database:?}: use 1 to 64 letters, digits, '_' or '-'")));
    }
    Ok(state.cluster.group_for(&RoutingKey::SqlDatabase(database))?)
}

/// Whether every statement starts with a reading keyword. A cheap first guess:
/// the node checks with the real parser and the router then proposes instead.
pub fn looks_read_only(sql: &str) -> bool {
    let mut any = false;
    for stmt in sql.split(';') {
        let word: String = stmt.trim_start().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        match word.to_ascii_uppercase().as_str() {
            "" => {}
            "SELECT" | "SHOW" | "VALUES" | "EXPLAIN" => any = true,
            "BEGIN" | "COMMIT" | "ROLLBACK" | "START" | "END" => {}
            _ => return false,
        }
    }
    any
}

/// What a SQL request came to: its outcome (rows masked for the caller), the
/// columns masked, the injection patterns it was flagged for, and the start
/// of its text as the detectors record it.
pub struct Executed {
    pub outcome: SqlResult,
    pub masked: Vec<String>,
    pub security_flags: Vec<String>,
    pub statement: String,
}

/// Runs `sql` (one or more statements) with `params` against `database`
/// (`default` when `None`) for `caller`: read from a replica when it only
/// reads, else proposed (`write:sql` required). Rows come back masked for the
/// caller's clearance, and the volume detectors see what was read or deleted.
pub async fn execute(
    state: &AppState,
    caller: &Caller,
    prefs: ReadPrefs,
    database: Option<String>,
    sql: &str,
    params: Vec<Value>,
) -> Result<Executed, ApiError> {
    if sql.trim().is_empty() {
        return Err(ApiError::BadRequest("sql must not be empty".into()));
    }
    let security_flags = security::screen_sql(state, caller, sql);
    let database = database.unwrap_or_else(|| DEFAULT_DATABASE.to_string());
    let group = database_group(state, &database)?;
    let limits = &state.config.query_limits;
    let mut result = None;
    if looks_read_only(sql) {
        let q = SqlQuery::Execute {
            database: database.clone(),
            sql: sql.to_string(),
            params: params.clone(),
            max_result_rows: limits.max_result_rows,
            timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
            max_memory_mb: limits.max_memory_mb,
        };
        match typed::ask::<Sql>(&*state.cluster, group, q, prefs.consistency, prefs.replica).await?.value {
            // The guess was wrong: the statement writes, so it is proposed below.
            Err(r) if r.code == ErrorCode::NotReadOnly => {}
            answer => result = Some(answer),
        }
    }
    let result = match result {
        Some(r) => r,
        None => {
            caller.require("write:sql")?;
            let op = SqlOp {
                database: database.clone(),
                sql: sql.to_string(),
                params,
                max_result_rows: limits.max_result_rows,
                timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
                max_memory_mb: limits.max_memory_mb,
                transaction: None,
            };
            typed::propose::<Sql>(&*state.cluster, group, op, prefs.consistency).await?.value
        }
    };
    let logged = if state.config.data_classification.mask_phi_in_logs { guard::mask_literals(sql) } else { sql.to_string() };
    let statement: String = logged.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
    let mut masked = Vec::new();
    let outcome = match result.map_err(|r| ApiError::sql(r, sql))? {
        SqlResult::Rows(mut r) => {
            masked = guard::guard_rows(state, caller, &database, sql, &r.columns, &mut r.rows).await?;
            let verb = sql.trim_start().split(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or("");
            if verb.eq_ignore_ascii_case("delete") || verb.eq_ignore_ascii_case("truncate") {
                security::watch_volume(state, caller, Volume::Deleted, r.rows_affected, &statement);
            }
            security::watch_volume(state, caller, Volume::ReadOut, r.row_count as u64, &statement);
            SqlResult::Rows(r)
        }
        catalog => catalog,
    };
    Ok(Executed { outcome, masked, security_flags, statement })
}

/// An interactive transaction (a PostgreSQL session's `BEGIN` … `COMMIT`) as
/// the router keeps it between statements: nothing is written before its
/// commit. Each statement is answered by running every statement so far again
/// against the group's current state, writes discarded, and checked against
/// the answers given before (`SqlQuery::Transaction`); the commit is one
/// proposed command that applies only if every statement still answers what
/// its client saw. The client has then seen exactly the state its writes
/// apply to: serializable, with a conflict (40001) to retry otherwise.
/// Dropping it (disconnect, ROLLBACK) rolls back: there is nothing to undo.
#[derive(Debug, Clone)]
pub struct Transaction {
    database: String,
    steps: Vec<SqlStep>,
    seen: Vec<String>,
    now_ms: i64,
    writes: bool,
    /// Bytes of its statements and parameters, roughly.
    bytes: usize,
}

impl Transaction {
    /// A transaction on `database` whose statements see `now_ms` as `now()`.
    pub fn begin(database: String, now_ms: i64) -> Self {
        Transaction { database, steps: Vec::new(), seen: Vec::new(), now_ms, writes: false, bytes: 0 }
    }
}

/// A statement's bytes with its parameters, roughly (as JSON).
pub fn statement_size(statement: &str, params: &[Value]) -> usize {
    statement.len() + params.iter().map(|p| p.to_string().len() + 1).sum::<usize>()
}

/// Statements an interactive transaction may hold: each new one runs every
/// one before it again, so a transaction's cost grows with its square.
pub const MAX_TRANSACTION_STATEMENTS: usize = 1000;

/// Runs `statement` as the next statement of `txn` and answers it; with
/// `record`, the statement and its answer join the transaction (without, it
/// is only previewed: a driver describing a prepared statement).
pub async fn execute_in_transaction(
    state: &AppState,
    caller: &Caller,
    txn: &mut Transaction,
    statement: &str,
    params: Vec<Value>,
    record: bool,
) -> Result<Executed, ApiError> {
    if statement.trim().is_empty() {
        return Err(ApiError::BadRequest("sql must not be empty".into()));
    }
    if txn.steps.len() >= MAX_TRANSACTION_STATEMENTS {
        return Err(ApiError::BadRequest(format!(
            "a transaction holds at most {MAX_TRANSACTION_STATEMENTS} statements (each runs the ones before it again): commit or roll back"
        )));
    }
    let size = statement_size(statement, &params);
    let limit = state.config.request_body_limit();
    if txn.bytes + size > limit {
        return Err(ApiError::BadRequest(format!(
            "a transaction holds at most {} KiB of statements and parameters (its commit is one replicated write): commit or roll back",
            limit >> 10
        )));
    }
    let security_flags = security::screen_sql(state, caller, statement);
    let writes = !looks_read_only(statement);
    if writes {
        caller.require("write:sql")?;
    }
    let group = database_group(state, &txn.database)?;
    let limits = &state.config.query_limits;
    let mut steps = txn.steps.clone();
    steps.push(SqlStep { sql: statement.to_string(), params: params.clone() });
    let q = SqlQuery::Transaction {
        database: txn.database.clone(),
        transaction: SqlTransaction { steps, seen: txn.seen.clone(), now_ms: txn.now_ms },
        max_result_rows: limits.max_result_rows,
        timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
        max_memory_mb: limits.max_memory_mb,
    };
    let answer = typed::ask::<Sql>(&*state.cluster, group, q, ReadPrefs::QUORUM.consistency, None).await?.value;
    let mut rows = match answer.map_err(|r| ApiError::sql(r, statement))? {
        SqlResult::Rows(r) => r,
        SqlResult::Catalog(_) => return Err(ApiError::Internal("a transaction's statement answered a catalog".into())),
    };
    if record {
        txn.seen.push(result_digest(&rows));
        txn.steps.push(SqlStep { sql: statement.to_string(), params });
        txn.writes |= writes;
        txn.bytes += size;
    }
    let logged = if state.config.data_classification.mask_phi_in_logs { guard::mask_literals(statement) } else { statement.to_string() };
    let logged: String = logged.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
    let masked = guard::guard_rows(state, caller, &txn.database, statement, &rows.columns, &mut rows.rows).await?;
    security::watch_volume(state, caller, Volume::ReadOut, rows.row_count as u64, &logged);
    Ok(Executed { outcome: SqlResult::Rows(rows), masked, security_flags, statement: logged })
}

/// Commits `txn`: one proposed command when it wrote (applied only if every
/// statement answers as before), else a last read that checks the same, so
/// that its reads, too, saw one state. A conflict is `CONFLICT` (40001).
pub async fn commit(state: &AppState, caller: &Caller, txn: Transaction) -> Result<(), ApiError> {
    let Some(last_seen) = txn.seen.last().cloned() else { return Ok(()) };
    let group = database_group(state, &txn.database)?;
    let limits = &state.config.query_limits;
    let transaction = SqlTransaction { steps: txn.steps, seen: txn.seen, now_ms: txn.now_ms };
    if !txn.writes {
        let mut transaction = transaction;
        transaction.seen.pop();
        let q = SqlQuery::Transaction {
            database: txn.database,
            transaction,
            max_result_rows: limits.max_result_rows,
            timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
            max_memory_mb: limits.max_memory_mb,
        };
        let answer = typed::ask::<Sql>(&*state.cluster, group, q, ReadPrefs::QUORUM.consistency, None).await?.value;
        return match answer.map_err(|r| ApiError::sql(r, "COMMIT"))? {
            SqlResult::Rows(r) if result_digest(&r) == last_seen => Ok(()),
            _ => Err(ApiError::sql(
                tessera_api::error::Rejection::new(
                    ErrorCode::Conflict,
                    "could not serialize access: the transaction's last statement now answers differently — a concurrent transaction changed what it read; retry the transaction",
                ),
                "COMMIT",
            )),
        };
    }
    caller.require("write:sql")?;
    let op = SqlOp {
        database: txn.database,
        sql: String::new(),
        params: Vec::new(),
        max_result_rows: limits.max_result_rows,
        timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
        max_memory_mb: limits.max_memory_mb,
        transaction: Some(transaction),
    };
    typed::propose::<Sql>(&*state.cluster, group, op, ReadPrefs::QUORUM.consistency)
        .await?
        .value
        .map_err(|r| ApiError::sql(r, "COMMIT"))?;
    Ok(())
}

/// The schema of table `name` of `database` (its catalog entry).
pub async fn describe_table(state: &AppState, database: &str, name: &str) -> Result<tessera_api::sql::TableSchema, ApiError> {
    let group = database_group(state, database)?;
    let q = SqlQuery::DescribeTable { database: database.to_string(), name: name.to_string() };
    let answer = typed::ask::<Sql>(&*state.cluster, group, q, ReadPrefs::QUORUM.consistency, None).await?.value;
    match answer.map_err(|r| ApiError::sql(r, ""))? {
        SqlResult::Catalog(v) => serde_json::from_value(v).map_err(|e| ApiError::Internal(format!("an unreadable catalog answer: {e}"))),
        SqlResult::Rows(_) => Err(ApiError::Internal("a table description answered rows".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::looks_read_only;

    #[test]
    fn read_only_guess() {
        assert!(looks_read_only("SELECT 1"));
        assert!(looks_read_only("BEGIN; SELECT * FROM t; COMMIT;"));
        assert!(looks_read_only("  show tables"));
        assert!(!looks_read_only("INSERT INTO t VALUES (1)"));
        assert!(!looks_read_only("SELECT 1; DELETE FROM t"));
        assert!(!looks_read_only("BEGIN; COMMIT"));
    }
}
