//! The extended query protocol (Parse, Bind, Describe, Execute, Sync): the
//! prepared statements every driver uses.
//!
//! A statement is its SQL text, `$1`, `$2`, … bound as Tessera's SQL
//! parameters. Tessera knows a result's columns only by running it, so a
//! Describe of a bound portal runs it and keeps the answer for its Execute
//! (run once); a Describe of a statement (a driver's `prepare`) runs a read
//! with every parameter null to learn its columns, and describes a write as
//! returning none. Parameter types are the client's, else `text`.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{DescribePortalResponse, DescribeStatementResponse, FieldFormat, FieldInfo, Response};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionHandle, DEFAULT_NAME, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::extendedquery::Execute;
use pgwire::messages::response::TransactionStatus;
use serde_json::Value;
use tessera_api::sql::SqlResult;

use super::session::{Control, Session};
use super::types;

/// Statements are kept as their text.
#[derive(Debug, Default)]
pub struct TextParser;

#[async_trait]
impl QueryParser for TextParser {
    type Statement = String;

    async fn parse_sql<C>(&self, _client: &C, sql: &str, _types: &[Option<Type>]) -> PgWireResult<Option<String>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        Ok(Some(sql.to_string()))
    }

    fn get_parameter_types(&self, stmt: &String) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::TEXT; placeholders(stmt)])
    }

    fn get_result_schema(&self, _stmt: &String, _format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        Ok(Vec::new())
    }
}

/// The highest `$n` outside quotes and comments.
fn placeholders(sql: &str) -> usize {
    let mut max = 0;
    let (mut in_str, mut in_ident) = (false, false);
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' if !in_ident => in_str = !in_str,
            b'"' if !in_str => in_ident = !in_ident,
            b'$' if !in_str && !in_ident => {
                let digits: String = sql[i + 1..].chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<usize>() {
                    max = max.max(n);
                }
            }
            _ => {}
        }
        i += 1;
    }
    max
}

/// Answers kept between a portal's Describe and its Execute, and the column
/// types each statement was described with (a driver decodes its rows by them).
#[derive(Default)]
pub struct Described {
    portals: Mutex<HashMap<String, SqlResult>>,
    statements: Mutex<HashMap<String, Vec<Type>>>,
}

/// The extended protocol over a connection's session.
pub struct Extended {
    pub session: Session,
    pub described: Arc<Described>,
}

impl Extended {
    /// The bound parameters as Tessera's SQL parameters (JSON values).
    fn parameters(&self, portal: &Portal<String>) -> PgWireResult<Vec<Value>> {
        let declared = &portal.statement.parameter_types;
        portal
            .parameters
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let ty = declared.get(i).cloned().flatten().unwrap_or(Type::TEXT);
                let binary = portal.parameter_format.is_binary(i);
                match raw {
                    None => Ok(Value::Null),
                    Some(bytes) => types::parameter(bytes, &ty, binary).map_err(|message| user_error("22P02", message)),
                }
            })
            .collect()
    }

    async fn run(&self, portal: &Portal<String>) -> Result<SqlResult, ErrorInfo> {
        let params = self.parameters(portal).map_err(|e| match e {
            PgWireError::UserError(info) => *info,
            other => ErrorInfo::new("ERROR".into(), "22P02".into(), other.to_string()),
        })?;
        self.session.execute_statement(&portal.statement.statement, params).await
    }

    /// The fields of `result` in the portal's result formats; a statement
    /// described before fixes the types. A text-format column whose values
    /// are strings takes its table's declared type when that is a date, time
    /// or uuid, so a driver decodes a DATE as a date.
    async fn fields(&self, portal: &Portal<String>, result: &SqlResult) -> Vec<FieldInfo> {
        let rows = types::as_rows(result.clone());
        let known = self.described.statements.lock().unwrap_or_else(|e| e.into_inner()).get(&portal.statement.id).cloned();
        let column_types = match known {
            Some(t) if t.len() == rows.columns.len() => t,
            _ => {
                let mut inferred = types::column_types(&rows);
                let format = &portal.result_column_format;
                let text_column = |i: usize, ty: &Type| *ty == Type::TEXT && format.format_for(i) == FieldFormat::Text;
                if inferred.iter().enumerate().any(|(i, ty)| text_column(i, ty)) {
                    let declared = self.session.declared_type_names(&portal.statement.statement).await;
                    for (i, name) in rows.columns.iter().enumerate() {
                        if text_column(i, &inferred[i])
                            && let Some(d) = declared.get(&name.to_ascii_lowercase())
                        {
                            inferred[i] = types::declared_for_text(d);
                        }
                    }
                }
                inferred
            }
        };
        types::fields(&rows.columns, &column_types, &portal.result_column_format)
    }
}

fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".into(), code.into(), message)))
}

#[async_trait]
impl ExtendedQueryHandler for Extended {
    type Statement = String;
    type QueryParser = TextParser;

    fn query_parser(&self) -> Arc<TextParser> {
        Arc::new(TextParser)
    }

    /// pgwire moves the client's transaction status by the answer; a COMMIT
    /// that fails must still leave it idle (the transaction is over, as in
    /// PostgreSQL), so a statement that ends a transaction starts from idle.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        if let Some(Entry::Value(portal)) = client.portal_store().get_portal(name)
            && matches!(Control::of(&portal.statement.statement), Some(Control::Commit | Control::Rollback))
        {
            client.set_transaction_status(TransactionStatus::Idle);
        }
        self._on_execute(client, message).await
    }

    async fn do_describe_statement<C>(&self, client: &mut C, target: &StoredStatement<String>) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let count = placeholders(&target.statement).max(target.parameter_types.len());
        let parameters: Vec<Type> = (0..count).map(|i| target.parameter_types.get(i).cloned().flatten().unwrap_or(Type::TEXT)).collect();
        let mut fields = Vec::new();
        if crate::services::sql::looks_read_only(&target.statement) {
            let nulls = vec![Value::Null; count];
            match cancellable(client, self.session.preview_statement(&target.statement, nulls)).await? {
                Ok(SqlResult::Rows(rows)) => {
                    let declared = self.session.declared_types(&target.statement).await;
                    let column_types = types::column_types_or_declared(&rows, &declared);
                    self.described.statements.lock().unwrap_or_else(|e| e.into_inner()).insert(target.id.clone(), column_types.clone());
                    fields = types::fields(&rows.columns, &column_types, &Format::UnifiedText);
                }
                Ok(_) => {}
                Err(info) => return Err(PgWireError::UserError(Box::new(info))),
            }
        }
        Ok(DescribeStatementResponse::new(parameters, fields))
    }

    async fn do_describe_portal<C>(&self, client: &mut C, target: &Portal<String>) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement = &target.statement.statement;
        if Control::of(statement).is_some() || is_copy(statement) || super::session::session_command(statement).is_some() {
            return Ok(DescribePortalResponse::new(Vec::new()));
        }
        // A failure answers here; the client's Execute is then skipped to its Sync.
        let result = cancellable(client, self.run(target)).await?.map_err(|info| PgWireError::UserError(Box::new(info)))?;
        let fields = self.fields(target, &result).await;
        self.described.portals.lock().unwrap_or_else(|e| e.into_inner()).insert(target.name.clone(), result);
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(&self, _client: &mut C, portal: &Portal<String>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if Control::of(&portal.statement.statement).is_some() {
            return Ok(self.session.run_statement(&portal.statement.statement, Vec::new()).await);
        }
        if let Some(answer) = super::session::session_command(&portal.statement.statement) {
            return match answer {
                Response::Error(info) => Err(PgWireError::UserError(info)),
                done => Ok(done),
            };
        }
        if let Some(started) = self.session.start_copy(&portal.statement.statement).await {
            return match started {
                Response::Error(info) => Err(PgWireError::UserError(info)),
                copy_in => Ok(copy_in),
            };
        }
        let kept = self.described.portals.lock().unwrap_or_else(|e| e.into_inner()).remove(&portal.name);
        let result = match kept {
            Some(r) => Ok(r),
            None => self.run(portal).await,
        };
        match result {
            Ok(r) => {
                let fields = self.fields(portal, &r).await;
                Ok(types::typed_response(&portal.statement.statement, r, fields))
            }
            Err(info) => Err(PgWireError::UserError(Box::new(info))),
        }
    }
}

/// Whether `statement` is a COPY (its Describe runs nothing).
fn is_copy(statement: &str) -> bool {
    super::statement::first_word(statement) == "COPY"
}

/// Runs `work` unless a cancel request for this connection arrives first
/// (then `57014`). pgwire makes Query and Execute cancellable itself; a
/// Describe runs the statement here (its columns are known only by running
/// it), so it is made cancellable the same way.
async fn cancellable<C: ClientInfo, T>(client: &C, work: impl std::future::Future<Output = T>) -> PgWireResult<T> {
    let Some(handle) = client.session_extensions().get::<Arc<ConnectionHandle>>() else {
        return Ok(work.await);
    };
    let cancelled = handle.start_query().await;
    tokio::select! {
        done = work => Ok(done),
        Ok(()) = cancelled => Err(PgWireError::QueryCanceled),
    }
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn placeholders_outside_quotes_count() {
        assert_eq!(placeholders("SELECT * FROM t WHERE a = $1 AND b = $12"), 12);
        assert_eq!(placeholders("SELECT '$3', \"$4\" FROM t"), 0);
        assert_eq!(placeholders("SELECT 1"), 0);
    }
}
