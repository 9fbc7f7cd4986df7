//! A signed-in PostgreSQL connection: its session token and database, its
//! open transaction, and how a message's statements run.
//!
//! Outside a transaction each statement runs as its own request (it commits
//! on its own, as in PostgreSQL's autocommit), and a whole `BEGIN` … `COMMIT`
//! block sent within one message runs as one request. A `BEGIN` held open
//! across messages is an interactive transaction
//! ([`sql::Transaction`]): its statements are answered as they come, nothing
//! is written before its `COMMIT`, and the commit applies only if every
//! statement still answers what it answered (serializable; 40001 otherwise).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::error::ErrorInfo;
use tessera_api::sql::{SqlResult, split_statements};

use super::copy::{CopyDecoder, Fields};
use super::statement::{first_word, only_comments, second_word, words};
use super::types;
use crate::cluster::ReadPrefs;
use crate::error::ApiError;
use crate::services::auth::{Caller, Presented, SessionClient, token_hash};
use crate::services::sql;
use crate::state::AppState;

/// A connection's session (shared by its handlers).
#[derive(Clone)]
pub struct Session(Arc<Inner>);

struct Inner {
    state: AppState,
    ip: IpAddr,
    bound: Mutex<Bound>,
    /// The `COPY … FROM STDIN` receiving its data, if any.
    copying: tokio::sync::Mutex<Option<Copying>>,
}

/// A `COPY … FROM STDIN` receiving its data. Outside a transaction its rows
/// are written in batches as they arrive (each batch all or nothing, like
/// YugabyteDB's COPY); inside one they are one statement of the transaction.
struct Copying {
    /// The engine's COPY, the rows as its parameters.
    statement: String,
    table: String,
    decoder: CopyDecoder,
    batch: Vec<serde_json::Value>,
    batch_bytes: usize,
    /// Rows written by the batches sent so far.
    copied: u64,
    failed: Option<ErrorInfo>,
    in_transaction: bool,
}

/// Rows per batch of a COPY outside a transaction, and about its bytes (each
/// batch is one replicated write).
const COPY_BATCH_ROWS: usize = 1000;
const COPY_BATCH_BYTES: usize = 512 << 10;

#[derive(Default)]
struct Bound {
    token: Option<String>,
    /// The session was opened by this connection's sign-in: it ends with it.
    opened_here: bool,
    database: String,
    transaction: Option<Open>,
}

/// The connection's transaction since its `BEGIN`.
enum Open {
    Running(sql::Transaction),
    /// A statement failed: everything up to `COMMIT` or `ROLLBACK` is refused
    /// (25P02), and either ends it as a rollback.
    Failed,
}

/// Whether a statement is transaction control, and which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Begin,
    Commit,
    Rollback,
    /// SAVEPOINT, RELEASE, ROLLBACK TO: not supported.
    Savepoint,
}

impl Control {
    pub fn of(statement: &str) -> Option<Control> {
        let (first, second) = (first_word(statement), second_word(statement));
        match first.as_str() {
            "BEGIN" => Some(Control::Begin),
            "START" if second == "TRANSACTION" => Some(Control::Begin),
            "COMMIT" | "END" => Some(Control::Commit),
            "ROLLBACK" | "ABORT" if second == "TO" => Some(Control::Savepoint),
            "ROLLBACK" | "ABORT" => Some(Control::Rollback),
            "SAVEPOINT" | "RELEASE" => Some(Control::Savepoint),
            _ => None,
        }
    }
}

const ABORTED: &str = "current transaction is aborted, commands ignored until end of transaction block";

impl Session {
    pub fn new(state: AppState, ip: IpAddr) -> Self {
        Session(Arc::new(Inner { state, ip, bound: Mutex::new(Bound::default()), copying: tokio::sync::Mutex::new(None) }))
    }

    fn bound(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.0.bound.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_database(&self, database: String) {
        self.bound().database = database;
    }

    pub fn bind(&self, token: String, opened_here: bool) {
        let mut b = self.bound();
        b.token = Some(token);
        b.opened_here = opened_here;
    }

    /// Ends the session this connection opened (a token given as the password
    /// stays: its owner ends it).
    pub async fn close(&self) {
        let token = {
            let mut b = self.bound();
            if !b.opened_here {
                return;
            }
            b.opened_here = false;
            b.token.take()
        };
        if let Some(token) = token {
            let hash = token_hash(&token);
            let state = &self.0.state;
            state.security.callers.evict(&hash);
            if let Err(e) = state.cluster.meta_write(tessera_api::command::MetaOp::DeleteSession { token_hash: hash }).await {
                tracing::warn!("pgwire: ending the session of a closed connection: {e}");
            }
        }
    }

    /// Who the session is now (its token checked as every HTTP request's is).
    async fn caller(&self) -> Result<Caller, ApiError> {
        let token = self.bound().token.clone();
        let ip = Some(self.0.ip);
        let client = SessionClient { ip: Some(self.0.ip.to_string()), agent: Some("pgwire".into()) };
        crate::services::auth::resolve(&self.0.state, Presented { token, client, ip, read_only: false, path: "pgwire" }).await
    }

    /// The responses to one simple-protocol message, one per statement; the
    /// first error ends the message (PostgreSQL skips the rest too).
    pub async fn run_message(&self, text: &str) -> Vec<Response> {
        if let Some(too_big) = self.too_big(text.len()) {
            self.fail_transaction();
            return vec![too_big];
        }
        let split = split_statements(text);
        let mut statements = split.complete;
        if !split.rest.trim().is_empty() && !only_comments(&split.rest) {
            statements.push(split.rest.trim().to_string());
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < statements.len() {
            if let Some(answer) = session_command(&statements[i]) {
                let failed = matches!(&answer, Response::Error(_));
                out.push(answer);
                if failed {
                    break;
                }
                i += 1;
                continue;
            }
            if first_word(&statements[i]) == "COPY" && i + 1 < statements.len() {
                self.fail_transaction();
                let message = "COPY FROM STDIN must be the last statement of its message";
                out.push(Response::Error(Box::new(ErrorInfo::new("ERROR".into(), "0A000".into(), message.into()))));
                break;
            }
            if let Some(started) = self.start_copy(&statements[i]).await {
                out.push(started);
                break;
            }
            let control = Control::of(&statements[i]);
            let block_end = (control == Some(Control::Begin) && !self.in_transaction())
                .then(|| statements[i..].iter().position(|s| matches!(Control::of(s), Some(Control::Commit | Control::Rollback))))
                .flatten();
            let (answers, next) = if let Some(end) = block_end {
                // A whole block in this message: one atomic request.
                (self.run_block(&statements[i..=i + end]).await, i + end + 1)
            } else if control.is_some() || self.in_transaction() {
                (vec![self.run_statement(&statements[i], Vec::new()).await], i + 1)
            } else {
                (vec![self.run_one(&statements[i]).await], i + 1)
            };
            let failed = answers.iter().any(|a| matches!(a, Response::Error(e) if e.severity == "ERROR"));
            out.extend(answers);
            if failed {
                break;
            }
            i = next;
        }
        if out.is_empty() {
            out.push(Response::EmptyQuery);
        }
        out
    }

    /// Starts a `COPY … FROM STDIN` if `statement` is one: the answer that
    /// asks the client for its data (or why not). `None`: not a COPY.
    pub async fn start_copy(&self, statement: &str) -> Option<Response> {
        let from = match tessera_sql::copy_from_stdin(statement) {
            Ok(Some(from)) => from,
            Ok(None) => return None,
            Err(e) => {
                self.fail_transaction();
                return Some(Response::Error(Box::new(types::error_info(&ApiError::sql(e, statement), statement))));
            }
        };
        let refuse = |info: ErrorInfo| {
            self.fail_transaction();
            Some(Response::Error(Box::new(info)))
        };
        let in_transaction = match self.bound().transaction {
            Some(Open::Failed) => return Some(Response::Error(Box::new(ErrorInfo::new("ERROR".into(), "25P02".into(), ABORTED.into())))),
            Some(Open::Running(_)) => true,
            None => false,
        };
        let checked = async {
            let caller = self.caller().await?;
            caller.require("write:sql")?;
            let database = self.bound().database.clone();
            sql::describe_table(&self.0.state, &database, &from.table).await
        }
        .await;
        let columns = match checked {
            Ok(schema) if from.columns.is_empty() => schema.columns.len(),
            Ok(_) => from.columns.len(),
            Err(e) => return refuse(types::error_info(&e, statement)),
        };
        let decoder = match CopyDecoder::new(from.options.clone()) {
            Ok(d) => d,
            Err(message) => return refuse(ErrorInfo::new("ERROR".into(), "22023".into(), message)),
        };
        let copying = Copying {
            statement: from.statement(),
            table: from.table.clone(),
            decoder,
            batch: Vec::new(),
            batch_bytes: 0,
            copied: 0,
            failed: None,
            in_transaction,
        };
        *self.0.copying.lock().await = Some(copying);
        Some(Response::CopyIn(CopyResponse::new(0, columns, futures::stream::empty())))
    }

    /// A piece of the running COPY's data: its complete rows are read and,
    /// outside a transaction, written once a batch is full. A failure is kept
    /// for the end of the data (PostgreSQL, too, ignores the rest).
    pub async fn copy_data(&self, data: &[u8]) {
        let mut running = self.0.copying.lock().await;
        let Some(c) = running.as_mut() else { return };
        if c.failed.is_some() {
            return;
        }
        match c.decoder.feed(data) {
            Ok(rows) => c.push(rows),
            Err(message) => c.failed = Some(bad_copy_data(&c.table, message)),
        }
        let limit = self.0.state.config.request_body_limit();
        if c.failed.is_none() && c.decoder.pending_bytes() > limit {
            let message = format!("a row of a COPY holds at most {} KiB", limit >> 10);
            c.failed = Some(bad_copy_data(&c.table, format!("line {}: {message}", c.decoder.line + 1)));
        }
        if c.failed.is_none() && c.in_transaction && c.batch_bytes > limit {
            let message = format!(
                "a COPY inside a transaction holds at most {} KiB (the transaction commits as one replicated write): \
                 copy outside a transaction, which commits every {COPY_BATCH_ROWS} rows",
                limit >> 10
            );
            c.failed = Some(ErrorInfo::new("ERROR".into(), "54000".into(), message));
        }
        while !c.in_transaction && c.failed.is_none() && (c.batch.len() >= COPY_BATCH_ROWS || c.batch_bytes >= COPY_BATCH_BYTES) {
            let rows = c.take(COPY_BATCH_ROWS);
            self.write_copy_batch(c, rows).await;
        }
    }

    /// The end of the running COPY's data: the rows left are written (inside
    /// a transaction, all its rows as one statement of it); answers how many
    /// rows it wrote.
    pub async fn copy_done(&self) -> Result<u64, ErrorInfo> {
        let Some(mut c) = self.0.copying.lock().await.take() else {
            return Err(ErrorInfo::new("ERROR".into(), "08P01".into(), "no COPY is in progress".into()));
        };
        if c.failed.is_none() {
            match c.decoder.finish() {
                Ok(last) => c.push(last.into_iter().collect()),
                Err(message) => c.failed = Some(bad_copy_data(&c.table, message)),
            }
        }
        if let Some(info) = c.failed.take() {
            if c.in_transaction {
                self.fail_transaction();
            }
            return Err(info);
        }
        if c.in_transaction {
            let rows = std::mem::take(&mut c.batch);
            return match self.execute_statement(&c.statement, rows).await {
                Ok(result) => Ok(types::as_rows(result).rows_affected),
                Err(info) => Err(info),
            };
        }
        while !c.batch.is_empty() && c.failed.is_none() {
            let rows = c.take(COPY_BATCH_ROWS);
            self.write_copy_batch(&mut c, rows).await;
        }
        match c.failed {
            Some(info) => Err(info),
            None => Ok(c.copied),
        }
    }

    /// The client gave up its COPY (`CopyFail`): nothing more is written; a
    /// transaction it ran in fails.
    pub async fn copy_failed(&self) {
        if let Some(c) = self.0.copying.lock().await.take()
            && c.in_transaction
        {
            self.fail_transaction();
        }
    }

    /// Writes one batch of a COPY outside a transaction.
    async fn write_copy_batch(&self, c: &mut Copying, rows: Vec<serde_json::Value>) {
        match self.execute_with(&c.statement, rows).await {
            Ok(result) => c.copied += types::as_rows(result).rows_affected,
            Err(e) => {
                let e = c.decoder_line_offset(e);
                let mut info = types::error_info(&e, "");
                if c.copied > 0 {
                    info.detail = Some(format!(
                        "{} rows were written before it (outside a transaction a COPY commits every {COPY_BATCH_ROWS} rows)",
                        c.copied
                    ));
                }
                c.failed = Some(info);
            }
        }
    }

    /// The refusal of a message or statement of `bytes` over the limit of a
    /// request (as over HTTP: one replicated write must stay small).
    fn too_big(&self, bytes: usize) -> Option<Response> {
        let limit = self.0.state.config.request_body_limit();
        (bytes > limit).then(|| {
            let message = format!("a statement with its parameters holds at most {} KiB; this one holds {} KiB", limit >> 10, bytes >> 10);
            Response::Error(Box::new(ErrorInfo::new("ERROR".into(), "54000".into(), message)))
        })
    }

    /// Whether a transaction is open (running or failed).
    pub fn in_transaction(&self) -> bool {
        self.bound().transaction.is_some()
    }

    /// One statement of either protocol where transaction control or an open
    /// transaction decides what it means: the answer as pgwire sends it
    /// (`TransactionStart`/`TransactionEnd` move the client's status).
    pub async fn run_statement(&self, statement: &str, params: Vec<serde_json::Value>) -> Response {
        match Control::of(statement) {
            Some(Control::Begin) => {
                let mut b = self.bound();
                if b.transaction.is_none() {
                    let txn = sql::Transaction::begin(b.database.clone(), tessera_api::command::now_ms());
                    b.transaction = Some(Open::Running(txn));
                }
                // PostgreSQL warns of a BEGIN inside a transaction and goes on.
                Response::TransactionStart(Tag::new("BEGIN"))
            }
            Some(Control::Rollback) => {
                let was_open = self.bound().transaction.take().is_some();
                if !was_open {
                    return no_transaction();
                }
                Response::TransactionEnd(Tag::new("ROLLBACK"))
            }
            Some(Control::Commit) => {
                let open = self.bound().transaction.take();
                self.end_with_commit(open, statement).await
            }
            Some(Control::Savepoint) => {
                self.fail_transaction();
                not_supported("savepoints are not supported")
            }
            None => match self.execute_statement(statement, params).await {
                Ok(SqlResult::Rows(rows)) => types::response(statement, rows),
                Ok(SqlResult::Catalog(v)) => types::catalog_response(v),
                Err(info) => Response::Error(Box::new(info)),
            },
        }
    }

    async fn end_with_commit(&self, open: Option<Open>, statement: &str) -> Response {
        match open {
            None => no_transaction(),
            Some(Open::Failed) => Response::TransactionEnd(Tag::new("ROLLBACK")),
            Some(Open::Running(txn)) => match self.commit(txn).await {
                Ok(()) => Response::TransactionEnd(Tag::new("COMMIT")),
                Err(e) => Response::Error(Box::new(types::error_info(&e, statement))),
            },
        }
    }

    async fn commit(&self, txn: sql::Transaction) -> Result<(), ApiError> {
        let caller = self.caller().await?;
        caller.require("read:sql")?;
        sql::commit(&self.0.state, &caller, txn).await
    }

    /// The open transaction fails: what follows is refused until it ends.
    fn fail_transaction(&self) {
        let mut b = self.bound();
        if b.transaction.is_some() {
            b.transaction = Some(Open::Failed);
        }
    }

    /// One statement as its own request.
    async fn run_one(&self, statement: &str) -> Response {
        match self.execute(statement).await {
            Ok(SqlResult::Rows(rows)) => types::response(statement, rows),
            Ok(SqlResult::Catalog(v)) => types::catalog_response(v),
            Err(e) => Response::Error(Box::new(types::error_info(&e, statement))),
        }
    }

    /// A whole `BEGIN` … `COMMIT`/`ROLLBACK` block as one request: every
    /// statement applies, or none.
    async fn run_block(&self, block: &[String]) -> Vec<Response> {
        let text = block.join(";\n");
        let last = block.len() - 1;
        match self.execute(&text).await {
            Ok(outcome) => {
                let ended_with = first_word(&block[last]);
                let mut out = vec![Response::TransactionStart(Tag::new("BEGIN"))];
                for (n, statement) in block.iter().enumerate().take(last).skip(1) {
                    // The block answers once, for its last statement's rows; the
                    // others report their command (their counts are in the total).
                    match (&outcome, n + 1 == last) {
                        (SqlResult::Rows(rows), true) if !rows.columns.is_empty() => out.push(types::response(statement, rows.clone())),
                        _ => out.push(Response::Execution(Tag::new(&types::command_of(statement)))),
                    }
                }
                let end = if matches!(ended_with.as_str(), "ROLLBACK" | "ABORT") { "ROLLBACK" } else { "COMMIT" };
                out.push(Response::TransactionEnd(Tag::new(end)));
                out
            }
            Err(e) => vec![Response::Error(Box::new(types::error_info(&e, &text)))],
        }
    }

    async fn execute(&self, text: &str) -> Result<SqlResult, ApiError> {
        self.execute_with(text, Vec::new()).await
    }

    async fn execute_with(&self, text: &str, params: Vec<serde_json::Value>) -> Result<SqlResult, ApiError> {
        if let Some(rows) = show_setting(text) {
            return Ok(SqlResult::Rows(rows));
        }
        let caller = self.caller().await?;
        caller.require("read:sql")?;
        let database = Some(self.bound().database.clone());
        let executed = sql::execute(&self.0.state, &caller, ReadPrefs::QUORUM, database, text, params).await?;
        Ok(executed.outcome)
    }

    /// The declared type of every column of the tables `text` reads (after
    /// FROM and JOIN), by column name: what a described statement's columns
    /// are when its rows cannot tell (none, or nulls only).
    pub async fn declared_types(&self, text: &str) -> std::collections::HashMap<String, pgwire::api::Type> {
        self.declared_type_names(text).await.into_iter().map(|(column, ty)| (column, types::declared(&ty))).collect()
    }

    /// The declared type names (`DATE`, `INT`, …) of the columns of the tables
    /// `text` reads, by column name.
    pub async fn declared_type_names(&self, text: &str) -> std::collections::HashMap<String, String> {
        let mut out = std::collections::HashMap::new();
        let database = self.bound().database.clone();
        let words: Vec<String> = words(text).collect();
        let tables: Vec<&String> = words.windows(2).filter(|w| w[0] == "FROM" || w[0] == "JOIN").map(|w| &w[1]).collect();
        for table in tables {
            if let Ok(schema) = sql::describe_table(&self.0.state, &database, &table.to_ascii_lowercase()).await {
                for c in schema.columns {
                    out.entry(c.name.to_ascii_lowercase()).or_insert(c.data_type);
                }
            }
        }
        out
    }

    /// One statement that is not transaction control, with its parameters:
    /// on its own, or as the next statement of the open transaction (a
    /// failure fails the transaction). Errors as PostgreSQL reports them.
    pub async fn execute_statement(&self, text: &str, params: Vec<serde_json::Value>) -> Result<SqlResult, ErrorInfo> {
        self.statement(text, params, true).await
    }

    /// What [`Session::execute_statement`] would answer, without recording
    /// anything in the open transaction (a driver describing a statement).
    pub async fn preview_statement(&self, text: &str, params: Vec<serde_json::Value>) -> Result<SqlResult, ErrorInfo> {
        self.statement(text, params, false).await
    }

    async fn statement(&self, text: &str, params: Vec<serde_json::Value>, record: bool) -> Result<SqlResult, ErrorInfo> {
        if let Some(rows) = show_setting(text) {
            return Ok(SqlResult::Rows(rows));
        }
        if let Some(Response::Error(info)) = self.too_big(sql::statement_size(text, &params)) {
            if record {
                self.fail_transaction();
            }
            return Err(*info);
        }
        if Control::of(text).is_some() {
            return Err(ErrorInfo::new(
                "ERROR".into(),
                "0A000".into(),
                "transaction control cannot be a prepared statement's query here".into(),
            ));
        }
        let open = self.bound().transaction.as_ref().map(|t| match t {
            Open::Running(txn) => Some(txn.clone()),
            Open::Failed => None,
        });
        let mut txn = match open {
            None => return self.execute_with(text, params).await.map_err(|e| types::error_info(&e, text)),
            Some(None) => return Err(ErrorInfo::new("ERROR".into(), "25P02".into(), ABORTED.into())),
            Some(Some(txn)) => txn,
        };
        let outcome = async {
            let caller = self.caller().await?;
            caller.require("read:sql")?;
            sql::execute_in_transaction(&self.0.state, &caller, &mut txn, text, params, record).await
        }
        .await;
        match outcome {
            Ok(executed) => {
                if record {
                    let mut b = self.bound();
                    if matches!(b.transaction, Some(Open::Running(_))) {
                        b.transaction = Some(Open::Running(txn));
                    }
                }
                Ok(executed.outcome)
            }
            Err(e) => {
                if record {
                    self.fail_transaction();
                }
                Err(types::error_info(&e, text))
            }
        }
    }
}

/// A COPY row's size as the parameter it travels as (a JSON array of strings).
fn row_bytes(row: &serde_json::Value) -> usize {
    match row {
        serde_json::Value::Array(fields) => fields.iter().map(|f| f.as_str().map_or(5, |s| s.len() + 3)).sum::<usize>() + 2,
        other => other.to_string().len(),
    }
}

impl Copying {
    fn push(&mut self, rows: Vec<Fields>) {
        for row in rows {
            let row =
                serde_json::Value::Array(row.into_iter().map(|f| f.map_or(serde_json::Value::Null, serde_json::Value::String)).collect());
            self.batch_bytes += row_bytes(&row);
            self.batch.push(row);
        }
    }

    /// The first rows waiting, at most `n` and about [`COPY_BATCH_BYTES`].
    fn take(&mut self, n: usize) -> Vec<serde_json::Value> {
        let (mut count, mut bytes) = (0, 0);
        for row in self.batch.iter().take(n) {
            let size = row_bytes(row);
            if count > 0 && bytes + size > COPY_BATCH_BYTES {
                break;
            }
            (count, bytes) = (count + 1, bytes + size);
        }
        let rest = self.batch.split_off(count);
        self.batch_bytes = self.batch_bytes.saturating_sub(bytes);
        std::mem::replace(&mut self.batch, rest)
    }

    /// The engine names a failing row by its place in its batch: the line of
    /// the data it came from is after every row written before it.
    fn decoder_line_offset(&self, e: ApiError) -> ApiError {
        let ApiError::Sql { mut rejection, sql } = e else { return e };
        let prefix = format!("COPY {}, line ", self.table);
        if let Some(rest) = rejection.message.strip_prefix(&prefix)
            && let Some((n, tail)) = rest.split_once(':')
            && let Ok(n) = n.parse::<u64>()
        {
            let header = u64::from(self.decoder.header_line());
            rejection.message = format!("{prefix}{}:{tail}", n + self.copied + header);
        }
        ApiError::Sql { rejection, sql }
    }
}

fn bad_copy_data(table: &str, message: String) -> ErrorInfo {
    ErrorInfo::new("ERROR".into(), "22P04".into(), format!("COPY {table}, {message}"))
}

/// Statements about the session itself that drivers send: `DEALLOCATE ALL`
/// and `DISCARD ALL` (psycopg after a failed transaction, connection pools)
/// find nothing to drop (no SQL-level prepared statements, no temporary
/// tables, no settings) and say so as PostgreSQL does; `DEALLOCATE name` names
/// a statement that does not exist.
pub fn session_command(statement: &str) -> Option<Response> {
    let words: Vec<String> = words(statement).collect();
    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["DEALLOCATE", "ALL"] | ["DEALLOCATE", "PREPARE", "ALL"] => Some(Response::Execution(Tag::new("DEALLOCATE ALL"))),
        ["DISCARD", "ALL"] => Some(Response::Execution(Tag::new("DISCARD ALL"))),
        ["DEALLOCATE", .., name] => Some(Response::Error(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "26000".into(),
            format!("prepared statement \"{}\" does not exist", name.to_ascii_lowercase()),
        )))),
        _ => None,
    }
}

/// The version the listener announces (`server_version`, `SHOW`).
pub fn server_version() -> String {
    format!("16.0 (Tessera {})", env!("CARGO_PKG_VERSION"))
}

/// `SHOW name` for the settings drivers and ORMs ask about when they connect
/// (SQLAlchemy: `transaction isolation level`, `standard_conforming_strings`):
/// one row, one column named after the setting, as in PostgreSQL. These are
/// fixed by Tessera, not per session: `SET` of them is not supported.
pub fn show_setting(statement: &str) -> Option<tessera_api::sql::SqlRows> {
    let words: Vec<String> = words(statement).collect();
    let [show, name @ ..] = words.as_slice() else { return None };
    if show != "SHOW" || name.is_empty() {
        return None;
    }
    let name = name.join(" ").to_ascii_lowercase();
    let value = match name.as_str() {
        "transaction isolation level" | "default_transaction_isolation" => "serializable".to_string(),
        "transaction_read_only" | "default_transaction_read_only" => "off".to_string(),
        "standard_conforming_strings" | "integer_datetimes" => "on".to_string(),
        "server_version" => server_version(),
        "server_version_num" => "160000".to_string(),
        "server_encoding" | "client_encoding" => "UTF8".to_string(),
        "datestyle" => "ISO, MDY".to_string(),
        "timezone" => "UTC".to_string(),
        "search_path" => "public".to_string(),
        "max_identifier_length" => "63".to_string(),
        "application_name" => String::new(),
        _ => return None,
    };
    let column = if name == "transaction isolation level" { "transaction_isolation".to_string() } else { name };
    Some(tessera_api::sql::SqlRows {
        columns: vec![column],
        rows: vec![vec![serde_json::Value::String(value)]],
        row_count: 1,
        rows_affected: 0,
        truncated: false,
    })
}

fn no_transaction() -> Response {
    Response::Error(Box::new(ErrorInfo::new("WARNING".into(), "25P01".into(), "there is no transaction in progress".into())))
}

fn not_supported(message: &str) -> Response {
    Response::Error(Box::new(ErrorInfo::new("ERROR".into(), "0A000".into(), message.into())))
}

/// The Tessera database a startup's `database` names: PostgreSQL's defaults
/// (none, the user's own name, `postgres`) mean `default`.
pub fn database_for(user: &str, named: Option<&str>) -> String {
    match named {
        None | Some("") | Some("postgres") => sql::DEFAULT_DATABASE.to_string(),
        Some(d) if d == user => sql::DEFAULT_DATABASE.to_string(),
        Some(d) => d.to_string(),
    }
}

/// Whether a presented password has the shape of a session token (64 hex digits).
pub fn looks_like_token(password: &str) -> bool {
    password.len() == 64 && password.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `token` is a live session of the user named `user`.
pub async fn token_names(state: &AppState, token: &str, ip: IpAddr, user: &str) -> bool {
    let client = SessionClient { ip: Some(ip.to_string()), agent: Some("pgwire".into()) };
    let presented = Presented { token: Some(token.to_string()), client, ip: Some(ip), read_only: false, path: "pgwire" };
    matches!(crate::services::auth::resolve(state, presented).await, Ok(Caller::User { user: u, .. }) if u.username == user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_answers_the_settings_drivers_ask_for() {
        let rows = show_setting("show transaction isolation level").expect("a setting");
        assert_eq!(rows.columns, ["transaction_isolation"]);
        assert_eq!(rows.rows, [[serde_json::json!("serializable")]]);
        assert_eq!(show_setting("SHOW standard_conforming_strings;").expect("a setting").rows, [[serde_json::json!("on")]]);
        assert!(show_setting("SHOW no_such_setting").is_none());
        assert!(show_setting("SELECT 1").is_none());
    }

    #[test]
    fn postgres_defaults_mean_the_default_database() {
        assert_eq!(database_for("admin", None), "default");
        assert_eq!(database_for("admin", Some("admin")), "default");
        assert_eq!(database_for("admin", Some("postgres")), "default");
        assert_eq!(database_for("admin", Some("sales")), "sales");
    }

    #[test]
    fn statement_words() {
        assert_eq!(first_word("  -- hi\n begin;"), "BEGIN");
        assert_eq!(second_word("start transaction isolation level serializable"), "TRANSACTION");
        assert!(looks_like_token(&"ab".repeat(32)));
        assert!(!looks_like_token("secret"));
    }
}
