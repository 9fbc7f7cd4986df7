//! SQL routes: `POST /api/v1/query`, `GET /api/v1/tables`, `GET /api/v1/tables/{name}`.
//!
//! A database lives in the data group its name hashes to, so its transactions are
//! single-group. Requests that only read are answered by one replica from a
//! snapshot (never through the Raft log); anything that writes is proposed as one
//! command, which every replica executes atomically against the same state.

use std::time::Instant;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query as QueryParams, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tessera_api::GroupId;
use tessera_api::command::{Operation, Query, QueryResult, Response as Reply};
use tessera_api::sql::{SqlFailure, SqlOp, SqlQuery, SqlResult};

use super::{JsonBody, ReadPrefs};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The SQL routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/query", post(query))
        .route("/api/v1/tables", get(list_tables))
        .route("/api/v1/tables/{name}", get(describe_table))
        .route("/api/v1/databases", get(list_databases))
}

/// Body of `POST /api/v1/query`.
#[derive(Deserialize)]
pub struct QueryRequest {
    sql: String,
    #[serde(default)]
    params: Vec<Value>,
    database: Option<String>,
}

const DEFAULT_DATABASE: &str = "default";

fn database_group(state: &AppState, database: &str) -> Result<GroupId, ApiError> {
    if !(1..=64).contains(&database.len()) || !database.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(ApiError::BadRequest(format!(
            "invalid database name {database:?}: use 1 to 64 letters, digits, '_' or '-'"
        )));
    }
    Ok(state.cluster.group_for(&format!("sql/{database}"))?)
}

/// Whether every statement starts with a reading keyword. A cheap first guess:
/// the node checks with the real parser and the router then proposes instead.
fn looks_read_only(sql: &str) -> bool {
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

fn status_of(code: &str) -> StatusCode {
    match code {
        "TABLE_NOT_FOUND" | "INDEX_NOT_FOUND" | "CONSTRAINT_NOT_FOUND" => StatusCode::NOT_FOUND,
        "CONSTRAINT_VIOLATION" | "TABLE_EXISTS" | "INDEX_EXISTS" | "COLUMN_EXISTS" => StatusCode::CONFLICT,
        "STORAGE" | "INTERNAL" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn sql_error(f: SqlFailure, sql: &str) -> Response {
    if f.code == "QUERY_TIMEOUT" {
        return (StatusCode::REQUEST_TIMEOUT, Json(json!({"success": false, "error": f.message}))).into_response();
    }
    let position = f.position.map(|(line, column)| json!({"line": line, "column": column}));
    let body = json!({"error": {"code": f.code, "message": f.message, "position": position, "sql": sql}});
    (status_of(&f.code), Json(body)).into_response()
}

fn is_not_read_only(r: &SqlResult) -> bool {
    matches!(r, SqlResult::Failed(f) if f.message.starts_with("NOT_READ_ONLY"))
}

/// `POST /api/v1/query {sql, params?, database?}`.
pub async fn query(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<QueryRequest>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    if req.sql.trim().is_empty() {
        return Err(ApiError::BadRequest("sql must not be empty".into()));
    }
    let security_flags = crate::security::screen_sql(&state, &caller, &req.sql);
    let database = req.database.unwrap_or_else(|| DEFAULT_DATABASE.to_string());
    let group = database_group(&state, &database)?;
    let limits = &state.config.query_limits;
    let mut result = None;
    if looks_read_only(&req.sql) {
        let q = Query::Sql(SqlQuery::Execute {
            database: database.clone(),
            sql: req.sql.clone(),
            params: req.params.clone(),
            max_result_rows: limits.max_result_rows,
            timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
            max_memory_mb: limits.max_memory_mb,
        });
        let served = state.cluster.read(group, &q, prefs.consistency, prefs.replica).await?;
        match served.value {
            QueryResult::Sql(r) if !is_not_read_only(&r) => result = Some(r),
            QueryResult::Sql(_) => {}
            other => return Err(ApiError::unexpected(other)),
        }
    }
    let result = match result {
        Some(r) => r,
        None => {
            caller.require("write:sql")?;
            let op = Operation::Sql(SqlOp {
                database,
                sql: req.sql.clone(),
                params: req.params,
                max_result_rows: limits.max_result_rows,
                timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
                max_memory_mb: limits.max_memory_mb,
            });
            match state.cluster.write(group, &op, prefs.consistency).await?.value {
                Reply::Sql(r) => r,
                other => return Err(ApiError::unexpected(other)),
            }
        }
    };
    let elapsed = started.elapsed().as_millis() as u64;
    Ok(match result {
        SqlResult::Rows(r) => {
            let mut body = json!({
                "success": true,
                "data": {"columns": r.columns, "rows": r.rows, "row_count": r.row_count},
                "rows_affected": r.rows_affected,
                "execution_time_ms": elapsed,
            });
            if r.truncated {
                body["rows"] = body["data"]["rows"].clone();
                body["metadata"] = json!({
                    "rows_returned": r.row_count,
                    "truncated": true,
                    "message": format!("the result was cut at max_result_rows = {}", limits.max_result_rows),
                });
            }
            crate::security::flag_body(&mut body, &security_flags);
            Json(body).into_response()
        }
        SqlResult::Failed(f) => sql_error(f, &req.sql),
        SqlResult::Catalog(v) => Json(v).into_response(),
    })
}

/// `?database=` of the catalog routes.
#[derive(Deserialize)]
pub struct DatabaseParam {
    database: Option<String>,
}

async fn catalog(state: &AppState, prefs: &ReadPrefs, database: &str, q: SqlQuery) -> Result<Result<Value, SqlFailure>, ApiError> {
    let group = database_group(state, database)?;
    match state.cluster.read(group, &Query::Sql(q), prefs.consistency, prefs.replica).await?.value {
        QueryResult::Sql(SqlResult::Catalog(v)) => Ok(Ok(v)),
        QueryResult::Sql(SqlResult::Failed(f)) => Ok(Err(f)),
        other => Err(ApiError::unexpected(other)),
    }
}

fn database_param(p: Result<QueryParams<DatabaseParam>, QueryRejection>) -> Result<String, ApiError> {
    let QueryParams(p) = p.map_err(|e| ApiError::BadRequest(format!("invalid query string: {}", e.body_text())))?;
    Ok(p.database.unwrap_or_else(|| DEFAULT_DATABASE.to_string()))
}

/// `GET /api/v1/tables?database=`: `{database, tables: [{name, columns, rows}]}`.
pub async fn list_tables(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    p: Result<QueryParams<DatabaseParam>, QueryRejection>,
) -> Result<Response, ApiError> {
    let database = database_param(p)?;
    Ok(match catalog(&state, &prefs, &database, SqlQuery::ListTables { database: database.clone() }).await? {
        Ok(tables) => Json(json!({"database": database, "tables": tables})).into_response(),
        Err(f) => sql_error(f, ""),
    })
}

/// `GET /api/v1/tables/{name}?database=`: columns, indexes and constraints.
pub async fn describe_table(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    p: Result<QueryParams<DatabaseParam>, QueryRejection>,
) -> Result<Response, ApiError> {
    let database = database_param(p)?;
    let q = SqlQuery::DescribeTable { database: database.clone(), name };
    Ok(match catalog(&state, &prefs, &database, q).await? {
        Ok(mut schema) => {
            schema["database"] = json!(database);
            Json(schema).into_response()
        }
        Err(f) => sql_error(f, ""),
    })
}

/// `GET /api/v1/databases`: every database that has been written to.
pub async fn list_databases(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<Value>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let calls = groups.iter().map(|g| state.cluster.read(*g, &Query::Sql(SqlQuery::ListDatabases), prefs.consistency, None));
    let mut names: Vec<String> = Vec::new();
    for r in futures::future::join_all(calls).await {
        if let QueryResult::Sql(SqlResult::Catalog(Value::Array(list))) = r?.value {
            names.extend(list.into_iter().filter_map(|v| v.as_str().map(str::to_string)));
        }
    }
    names.sort();
    Ok(Json(json!({"databases": names})))
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
