//! SQL routes: `POST /api/v1/query`, `GET /api/v1/tables`, `GET /api/v1/tables/{name}`.
//!
//! Queries run in `services::sql` (shared with the PostgreSQL wire listener).

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use tessera_api::error::Rejection;
use tessera_api::sql::{SqlOp, SqlQuery, SqlResult, TableSchema, TableSummary};

use super::{JsonBody, QueryParams, ReadPrefs};
use crate::cluster::typed::{self, Sql, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::Caller;
use crate::services::sql::{self, DEFAULT_DATABASE, database_group};
use crate::state::AppState;

/// The SQL routes.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .post("/api/v1/query", P("read:sql"), query)
        .returns::<SqlAnswer>()
        .get("/api/v1/tables", P("read:sql"), list_tables)
        .get("/api/v1/tables/{name}", P("read:sql"), describe_table)
        .get("/api/v1/databases", P("read:sql"), list_databases)
        .post("/api/v1/admin/vacuum", P("manage:cluster"), vacuum)
        .body::<VacuumBody>(false)
}

/// Body of `POST /api/v1/query`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct QueryRequest {
    /// One or more statements (not only white space).
    #[schemars(pattern(r"\S"))]
    sql: String,
    #[serde(default)]
    params: Vec<Value>,
    #[schemars(pattern(crate::http::openapi::formats::DATABASE))]
    database: Option<String>,
}

/// `POST /api/v1/query {sql, params?, database?}`; its SQL text goes into the
/// activity record.
pub async fn query(state: State<AppState>, caller: Caller, prefs: ReadPrefs, JsonBody(req): JsonBody<QueryRequest>) -> Response {
    let detail = if state.config.data_classification.mask_phi_in_logs {
        crate::services::activity::ActivityDetail::of(&crate::services::classification::guard::mask_literals(&req.sql))
    } else {
        crate::services::activity::ActivityDetail::of(&req.sql)
    };
    let mut response = run_query(state, caller, prefs, req).await.into_response();
    response.extensions_mut().insert(detail);
    response
}

async fn run_query(State(state): State<AppState>, caller: Caller, prefs: ReadPrefs, req: QueryRequest) -> Result<Response, ApiError> {
    let started = Instant::now();
    let executed = sql::execute(&state, &caller, prefs, req.database, &req.sql, req.params).await?;
    let elapsed = started.elapsed().as_millis() as u64;
    Ok(match executed.outcome {
        SqlResult::Rows(r) => {
            let limits = &state.config.query_limits;
            let mut metadata = QueryMetadata::default();
            let mut cut_rows = None;
            if r.truncated {
                cut_rows = Some(r.rows.clone());
                metadata.rows_returned = Some(r.row_count);
                metadata.truncated = Some(true);
                metadata.message = Some(format!("the result was cut at max_result_rows = {}", limits.max_result_rows));
            }
            if !executed.security_flags.is_empty() {
                metadata.security_flags = Some(executed.security_flags);
            }
            let body = SqlAnswer {
                success: true,
                data: QueryRows { columns: r.columns, rows: r.rows, row_count: r.row_count },
                rows_affected: r.rows_affected,
                execution_time_ms: elapsed,
                rows: cut_rows,
                metadata: (metadata != QueryMetadata::default()).then_some(metadata),
                masked_columns: (!executed.masked.is_empty()).then_some(executed.masked),
            };
            let response = Json(body).into_response();
            let bytes = axum::body::HttpBody::size_hint(response.body()).exact().unwrap_or(0);
            crate::services::security::watch_bytes(&state, &caller, bytes, &executed.statement);
            response
        }
        SqlResult::Catalog(v) => Json(v).into_response(),
    })
}

/// A query's rows.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct QueryRows {
    pub columns: Vec<String>,
    /// One array per row, values in column order.
    pub rows: Vec<Vec<Value>>,
    pub row_count: usize,
}

/// What the router adds about a query: a result cut at `max_result_rows`,
/// and the injection patterns it was flagged for.
#[derive(serde::Serialize, schemars::JsonSchema, Default, PartialEq)]
pub struct QueryMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_returned: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_flags: Option<Vec<String>>,
}

/// The answer of `POST /api/v1/query`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct SqlAnswer {
    pub success: bool,
    pub data: QueryRows,
    pub rows_affected: u64,
    pub execution_time_ms: u64,
    /// The rows again, when the result was cut (as `metadata` says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<Vec<Vec<Value>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<QueryMetadata>,
    /// Columns whose values were masked for this caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masked_columns: Option<Vec<String>>,
}

/// `?database=` of the catalog routes.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct DatabaseParam {
    #[schemars(pattern(crate::http::openapi::formats::DATABASE))]
    database: Option<String>,
}

async fn catalog(state: &AppState, prefs: &ReadPrefs, database: &str, q: SqlQuery) -> Result<Value, ApiError> {
    let group = database_group(state, database)?;
    let answer = typed::ask::<Sql>(&*state.cluster, group, q, prefs.consistency, prefs.replica).await?.value;
    typed::pick(answer.map_err(catalog_error)?, shape!(SqlResult::Catalog))
}

/// A refused catalog read, in SQL's error body (without a statement).
fn catalog_error(r: Rejection) -> ApiError {
    ApiError::sql(r, "")
}

fn database_param(p: DatabaseParam) -> String {
    p.database.unwrap_or_else(|| DEFAULT_DATABASE.to_string())
}

/// Answer of `GET /api/v1/tables`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct TableList {
    database: String,
    tables: Vec<TableSummary>,
}

/// Answer of `GET /api/v1/tables/{name}`: the table's columns, indexes and
/// constraints, and its database.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct TableDescription {
    #[serde(flatten)]
    schema: TableSchema,
    database: String,
}

/// A catalog answer read back as its wire type.
fn catalog_as<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::Internal(format!("an unreadable catalog answer: {e}")))
}

/// `GET /api/v1/tables?database=`: `{database, tables: [{name, columns, rows}]}`.
pub async fn list_tables(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    QueryParams(p): QueryParams<DatabaseParam>,
) -> Result<Json<TableList>, ApiError> {
    let database = database_param(p);
    let tables = catalog(&state, &prefs, &database, SqlQuery::ListTables { database: database.clone() }).await?;
    Ok(Json(TableList { database, tables: catalog_as(tables)? }))
}

/// `GET /api/v1/tables/{name}?database=`: columns, indexes and constraints.
pub async fn describe_table(
    State(state): State<AppState>,
    _caller: Caller,
    prefs: ReadPrefs,
    Path(name): Path<String>,
    QueryParams(p): QueryParams<DatabaseParam>,
) -> Result<Json<TableDescription>, ApiError> {
    let database = database_param(p);
    let q = SqlQuery::DescribeTable { database: database.clone(), name };
    let schema = catalog_as(catalog(&state, &prefs, &database, q).await?)?;
    Ok(Json(TableDescription { schema, database }))
}

/// Answer of `GET /api/v1/databases`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct DatabaseList {
    /// Their names, sorted.
    databases: Vec<String>,
}

/// `GET /api/v1/databases`: every database that has been written to.
pub async fn list_databases(State(state): State<AppState>, _caller: Caller, prefs: ReadPrefs) -> Result<Json<DatabaseList>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let mut names: Vec<String> = Vec::new();
    for (_, answer) in typed::ask_each::<Sql>(&*state.cluster, &groups, &SqlQuery::ListDatabases, prefs.consistency, None).await? {
        if let Ok(SqlResult::Catalog(Value::Array(list))) = answer {
            names.extend(list.into_iter().filter_map(|v| v.as_str().map(str::to_string)));
        }
    }
    names.sort();
    Ok(Json(DatabaseList { databases: names }))
}

/// `POST /api/v1/admin/vacuum`: `{}` (or no body) vacuums every table of every
/// database, `{table_name, database?}` one table (of `default` unless named).
/// Each database's `VACUUM` is proposed to its group as a SQL command, so every
/// replica compacts the same key ranges (in the background, after the apply).
/// An unknown table is 404 with SQL's error body.
pub async fn vacuum(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    body: axum::body::Bytes,
) -> Result<Json<Vacuumed>, ApiError> {
    let started = Instant::now();
    let (table, database) = vacuum_target(&body)?;
    let databases = match (&table, database) {
        (Some(_), database) => vec![database.unwrap_or_else(|| DEFAULT_DATABASE.to_string())],
        (None, Some(database)) => vec![database],
        (None, None) => {
            list_databases(State(state.clone()), caller, ReadPrefs { consistency: prefs.consistency, replica: None }).await?.0.databases
        }
    };
    let sql = match &table {
        Some(t) => format!("VACUUM \"{}\"", t.replace('"', "\"\"")),
        None => "VACUUM".to_string(),
    };
    let limits = &state.config.query_limits;
    let mut vacuumed = Vec::new();
    for database in databases {
        let group = database_group(&state, &database)?;
        let op = SqlOp {
            database: database.clone(),
            sql: sql.clone(),
            params: Vec::new(),
            max_result_rows: limits.max_result_rows,
            timeout_ms: limits.query_timeout_secs.saturating_mul(1000),
            max_memory_mb: limits.max_memory_mb,
            transaction: None,
        };
        typed::propose::<Sql>(&*state.cluster, group, op, prefs.consistency).await?.value.map_err(|r| ApiError::sql(r, &sql))?;
        vacuumed.push(VacuumedDatabase { database, table: table.clone(), all_tables: table.is_none() });
    }
    Ok(Json(Vacuumed { success: true, count: vacuumed.len(), vacuumed, execution_time_ms: started.elapsed().as_millis() as u64 }))
}

/// A database (or one table of it) vacuumed.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct VacuumedDatabase {
    pub database: String,
    /// The table, when one was named.
    pub table: Option<String>,
    pub all_tables: bool,
}

/// The answer of `POST /api/v1/admin/vacuum`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Vacuumed {
    pub success: bool,
    pub vacuumed: Vec<VacuumedDatabase>,
    pub count: usize,
    pub execution_time_ms: u64,
}

/// `(table_name, database)` of a vacuum body (both optional; empty body = `{}`).
/// The body of `POST /api/v1/admin/vacuum` (documentation only: read by
/// [`vacuum_target`]); empty or `{}` vacuums every table of every database.
#[derive(schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
pub struct VacuumBody {
    /// One table (of `database`, `default` unless named): 1 to 128 characters,
    /// taken as a quoted identifier (an unknown name is 404).
    #[schemars(length(min = 1, max = 128))]
    table_name: Option<String>,
    /// Every table of this database (or the database of `table_name`).
    #[schemars(pattern(crate::http::openapi::formats::DATABASE))]
    database: Option<String>,
}

fn vacuum_target(body: &[u8]) -> Result<(Option<String>, Option<String>), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, None));
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    let obj = v.as_object().ok_or_else(|| ApiError::BadRequest("the request body must be a JSON object".into()))?;
    if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "table_name" | "database")) {
        return Err(ApiError::BadRequest(format!("unknown field {k:?} (table_name and database are accepted)")));
    }
    let text = |field: &str| -> Result<Option<String>, ApiError> {
        match obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= 128 => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::BadRequest(format!("{field} must be a string of 1 to 128 characters"))),
        }
    };
    Ok((text("table_name")?, text("database")?))
}

#[cfg(test)]
mod tests {
    use super::vacuum_target;

    #[test]
    fn a_vacuum_target_is_any_name_the_schema_allows() {
        // A whitespace name is a valid quoted identifier: the table is unknown (404), not a bad request.
        assert_eq!(vacuum_target(br#"{"table_name": "\f", "database": null}"#).unwrap(), (Some("\u{c}".into()), None));
        assert!(vacuum_target(format!(r#"{{"table_name": "{}"}}"#, "é".repeat(128)).as_bytes()).is_ok());
        assert!(vacuum_target(br#"{"table_name": ""}"#).is_err());
        assert!(vacuum_target(format!(r#"{{"table_name": "{}"}}"#, "a".repeat(129)).as_bytes()).is_err());
    }
}
