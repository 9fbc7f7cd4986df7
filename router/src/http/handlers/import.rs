//! Bulk import routes (spec 01): `POST /api/v1/import/sql`, `/import/documents`,
//! `/import/kv`. Parsing and batching live in [`crate::services::import`]; each batch is
//! one Raft command, applied all or nothing (documents and pairs are grouped by
//! shard first, so a batch never spans shards). Batches run in order and the
//! import stops at the first batch that fails: earlier batches stay imported,
//! the failing batch and later ones are not applied (see
//! `docs/import-compress.md`).

use std::collections::BTreeMap;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use tessera_api::GroupId;
use tessera_api::command::{KvOp, Operation, Response as Reply};
use tessera_api::document::{DocOp, validate_collection_name};
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::import::{ImportDoc, ImportFailure, ImportResult, ImportRow, OnConflict, SqlImportOp};
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;
use tessera_api::sql::{SqlQuery, SqlResult};

use super::{JsonBody, ReadPrefs};
use crate::cluster::typed::{self, Kv, KvReply, Sql, shape};
use crate::error::ApiError;
use crate::http::permissions::Access::Permission as P;
use crate::http::route_table::RouteTable;
use crate::services::auth::{Caller, new_id};
use crate::services::import::{self, ParseError};
use crate::state::AppState;

/// Largest request body the import routes accept (413 beyond).
pub const MAX_IMPORT_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The import routes, with their own body limit.
pub fn routes() -> RouteTable {
    RouteTable::new()
        .post("/api/v1/import/sql", P("write:import"), import_sql)
        .post("/api/v1/import/documents", P("write:import"), import_documents)
        .post("/api/v1/import/kv", P("write:import"), import_kv)
        .body_limit(MAX_IMPORT_BODY_BYTES)
}

/// The running report of an import.
struct Report {
    started: Instant,
    imported: u64,
    skipped: u64,
    errors: Vec<ItemError>,
    /// Status of the first failure (200 while none).
    status: StatusCode,
    /// The ids of imported documents.
    ids: Option<Vec<String>>,
    /// How errors name a bad item: `line` (SQL) or `index` (documents, pairs).
    position: &'static str,
}

impl Report {
    fn new(position: &'static str) -> Self {
        Report { position, started: Instant::now(), imported: 0, skipped: 0, errors: Vec::new(), status: StatusCode::OK, ids: None }
    }

    /// Adds a batch's outcome; false when it failed (and the import stops).
    fn add(&mut self, r: ImportResult) -> bool {
        self.imported += r.imported;
        self.skipped += r.skipped;
        match r.failure {
            None => true,
            Some(f) => {
                self.fail(&f);
                false
            }
        }
    }

    /// Records a batch whose outcome is unknown (the cluster did not answer):
    /// the import stops, and `rows_imported` counts only confirmed batches.
    fn fail_unconfirmed(&mut self, e: &ApiError) {
        let message = format!("the import stopped: a batch was not confirmed ({e}); rows_imported counts the confirmed batches");
        if self.status == StatusCode::OK {
            self.status = ApiError::Unavailable(message.clone()).status_and_code().0;
        }
        self.errors.push(self.item_error(0, message, None));
    }

    /// Adds the outcomes of batches run together; false when one failed.
    fn add_all(&mut self, results: Vec<Result<ImportResult, ApiError>>) -> bool {
        let mut ok = true;
        for r in results {
            ok &= match r {
                Ok(r) => self.add(r),
                Err(e) => {
                    self.fail_unconfirmed(&e);
                    false
                }
            };
        }
        ok
    }

    fn fail(&mut self, f: &ImportFailure) {
        let r = &f.rejection;
        if self.status == StatusCode::OK {
            self.status = ApiError::from(r.clone()).status_and_code().0;
        }
        // Model-specific codes (SQL's) are shown; the generic ones are the status.
        let code = (!matches!(r.code, ErrorCode::NotFound | ErrorCode::Conflict | ErrorCode::Invalid)).then(|| r.code.as_str().to_string());
        self.errors.push(self.item_error(f.line, r.message.clone(), code));
    }

    /// An error naming the bad item by this import's position field.
    fn item_error(&self, at: u64, message: String, code: Option<String>) -> ItemError {
        let (line, index) = if self.position == "line" { (Some(at), None) } else { (None, Some(at)) };
        ItemError { line, index, message, code }
    }

    fn into_answer(self) -> (StatusCode, Json<ImportReport>) {
        let report = ImportReport {
            success: self.errors.is_empty(),
            rows_imported: self.imported,
            rows_skipped: self.skipped,
            error: self.errors.first().map(|e| e.message.clone()),
            errors: self.errors,
            duration_ms: self.started.elapsed().as_millis() as u64,
            ids: self.ids,
        };
        (self.status, Json(report))
    }
}

/// A bad item of an import: where it is (`line` of SQL, `index` of
/// documents and pairs, from 0) and why.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ItemError {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    pub message: String,
    /// A model-specific code (SQL's); generic ones are the status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The answer of an import: 200 when everything was imported, else the status
/// of the first failure, with what was imported before it.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ImportReport {
    pub success: bool,
    pub rows_imported: u64,
    pub rows_skipped: u64,
    pub errors: Vec<ItemError>,
    pub duration_ms: u64,
    /// The first error's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The ids of the imported documents, in input order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
}

/// A bad item found before anything was proposed.
fn invalid(index: usize, message: String) -> ImportFailure {
    ImportFailure { line: index as u64, rejection: Rejection::invalid(message) }
}

fn parse_error(e: ParseError) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

/// One batch: its command and how many items it imports when the reply does
/// not say (`KvOp::PutMany` answers only that it applied).
type Batch = (Operation, u64);

/// Runs one batch command per group in parallel; the outcomes in order.
async fn propose_all(state: &AppState, calls: Vec<(GroupId, Batch)>, c: Consistency) -> Vec<Result<ImportResult, ApiError>> {
    let futs = calls.iter().map(|(g, (op, _))| state.cluster.write(*g, op, c));
    let replies = futures::future::join_all(futs).await;
    replies
        .into_iter()
        .zip(calls)
        .map(|(r, (_, (_, count)))| match r?.value {
            Reply::Import(r) => Ok(r),
            Reply::Deleted(_) => Ok(ImportResult { imported: count, skipped: 0, failure: None }),
            Reply::Rejected(rejection) => Ok(ImportResult { imported: 0, skipped: 0, failure: Some(ImportFailure { line: 0, rejection }) }),
            other => Err(ApiError::unexpected(other)),
        })
        .collect()
}

/// Runs every group's batches: the first batch of each group together, then
/// the second, and so on, stopping after the round in which a batch failed.
async fn run_by_group(state: &AppState, report: &mut Report, by_group: BTreeMap<GroupId, Vec<Batch>>, c: Consistency) {
    let mut queues: Vec<(GroupId, std::vec::IntoIter<Batch>)> = by_group.into_iter().map(|(g, batches)| (g, batches.into_iter())).collect();
    loop {
        let round: Vec<(GroupId, Batch)> = queues.iter_mut().filter_map(|(g, q)| q.next().map(|b| (*g, b))).collect();
        if round.is_empty() || !report.add_all(propose_all(state, round, c).await) {
            return;
        }
    }
}

/// Writes `pairs` to the groups holding their keys now, one bulk put per
/// group; when a group answers that a key's range moved, learns the map anew
/// and writes the batch again (a put of the same value is harmless twice).
async fn put_many_on_current_ranges(state: &AppState, pairs: &[(String, Value)], c: Consistency) -> Result<(), ApiError> {
    super::kv::on_current_ranges(state, || async {
        let mut by_group: BTreeMap<GroupId, Vec<(String, Value)>> = BTreeMap::new();
        for (k, v) in pairs {
            by_group.entry(state.cluster.group_for(&RoutingKey::Kv(k))?).or_default().push((k.clone(), v.clone()));
        }
        let writes = by_group
            .into_iter()
            .map(|(group, pairs)| typed::write_as::<Kv, _>(&*state.cluster, group, KvOp::PutMany { pairs }, c, shape!(KvReply::Deleted)));
        futures::future::try_join_all(writes).await?;
        Ok(())
    })
    .await
}

// ---------------------------------------------------------------- SQL

/// `options` of a SQL import.
#[derive(schemars::JsonSchema, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SqlImportOptions {
    #[schemars(pattern(r"^([Ss][Kk][Ii][Pp]|[Ee][Rr][Rr][Oo][Rr]|[Uu][Pp][Dd][Aa][Tt][Ee])$"))]
    on_conflict: Option<String>,
    #[schemars(range(min = 1, max = 10000))]
    batch_size: Option<usize>,
}

/// Body of `POST /api/v1/import/sql`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct SqlImportRequest {
    /// The target table (not only white space).
    #[schemars(pattern(r"\S"))]
    table: String,
    #[schemars(pattern(crate::http::openapi::formats::DATABASE))]
    database: Option<String>,
    #[schemars(pattern(r"^([Cc][Ss][Vv]|[Jj][Ss][Oo][Nn])$"))]
    format: String,
    /// CSV or JSON text (a JSON array of row objects is also taken as is).
    #[schemars(schema_with = "import_data")]
    data: Value,
    #[serde(default)]
    options: Option<SqlImportOptions>,
}

fn import_data(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]})
}

fn on_conflict(s: Option<&str>) -> Result<OnConflict, ApiError> {
    match s.map(str::to_ascii_lowercase).as_deref() {
        None | Some("error") => Ok(OnConflict::Error),
        Some("skip") => Ok(OnConflict::Skip),
        Some("update") => Ok(OnConflict::Update),
        Some(other) => Err(ApiError::BadRequest(format!("on_conflict must be skip, error or update, not {other:?}"))),
    }
}

/// The table's column names, read from a replica (404 when it does not exist).
async fn table_columns(state: &AppState, group: GroupId, database: &str, table: &str, prefs: &ReadPrefs) -> Result<Vec<String>, ApiError> {
    let q = SqlQuery::DescribeTable { database: database.into(), name: table.into() };
    let catalog = shape!(SqlResult::Catalog);
    let served = typed::read_as::<Sql, _>(&*state.cluster, group, q, prefs.consistency, prefs.replica, catalog).await?;
    Ok(served.value["columns"]
        .as_array()
        .map(|cols| cols.iter().filter_map(|c| c["name"].as_str().map(String::from)).collect())
        .unwrap_or_default())
}

/// `POST /api/v1/import/sql {table, database?, format: csv|json, data, options: {on_conflict, batch_size}}`.
pub async fn import_sql(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<SqlImportRequest>,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    caller.require("write:sql")?;
    let mut report = Report::new("line");
    let options = req.options.unwrap_or_default();
    let conflict = on_conflict(options.on_conflict.as_deref())?;
    let size = import::batch_size(options.batch_size).map_err(ApiError::BadRequest)?;
    if req.table.trim().is_empty() {
        return Err(ApiError::BadRequest("table must not be empty".into()));
    }
    let database = req.database.unwrap_or_else(|| "default".to_string());
    if !(1..=64).contains(&database.len()) || !database.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(ApiError::BadRequest(format!("invalid database name {database:?}: use 1 to 64 letters, digits, '_' or '-'")));
    }
    let group = state.cluster.group_for(&RoutingKey::SqlDatabase(&database))?;
    let rows: Vec<ImportRow> = match (req.format.to_ascii_lowercase().as_str(), req.data) {
        ("csv", Value::String(text)) => {
            let columns = table_columns(&state, group, &database, &req.table, &prefs).await?;
            let header = import::csv_header(&text).map_err(parse_error)?;
            if let Some(bad) = header.iter().find(|h| !columns.iter().any(|c| c == *h || *c == h.to_lowercase())) {
                return Err(ApiError::BadRequest(format!(
                    "line 1: column {bad:?} of the header does not exist in table {} (columns: {})",
                    req.table,
                    columns.join(", ")
                )));
            }
            import::parse_csv(&text).map_err(parse_error)?
        }
        ("json", Value::String(text)) => import::parse_json(&text).map_err(parse_error)?,
        ("json", Value::Array(items)) => import::json_rows(items).map_err(parse_error)?,
        ("csv" | "json", _) => return Err(ApiError::BadRequest("data must be a string holding the CSV or JSON rows".into())),
        (other, _) => return Err(ApiError::BadRequest(format!("format must be csv or json, not {other:?}"))),
    };
    let batches: Vec<Batch> = import::batches(rows, size, import::row_size)
        .into_iter()
        .map(|rows| {
            let count = rows.len() as u64;
            let op = SqlImportOp { database: database.clone(), table: req.table.clone(), on_conflict: conflict, rows };
            (Operation::SqlImport(op), count)
        })
        .collect();
    run_by_group(&state, &mut report, BTreeMap::from([(group, batches)]), prefs.consistency).await;
    Ok(report.into_answer())
}

// ---------------------------------------------------------------- documents

/// Body of `POST /api/v1/import/documents`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct DocImportRequest {
    #[schemars(pattern(crate::http::openapi::formats::DOCUMENT_COLLECTION), extend("not" = {"enum": ["collections"]}))]
    collection: String,
    #[schemars(with = "Vec<serde_json::Map<String, Value>>")]
    documents: Vec<Value>,
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    batch_size: Option<usize>,
}

/// `POST /api/v1/import/documents {collection, documents: [object], batch_size?}`:
/// ids are assigned by the router (returned in `ids`, in request order); every
/// document is checked (object, schema) before anything is written, so a bad
/// one (`errors[].index`, 0-based) leaves the collection unchanged.
pub async fn import_documents(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<DocImportRequest>,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    caller.require("write:documents")?;
    let mut report = Report::new("index");
    validate_collection_name(&req.collection).map_err(ApiError::BadRequest)?;
    let size = import::batch_size(req.batch_size).map_err(ApiError::BadRequest)?;
    let def = super::document::ensure_collection(&state, &req.collection, prefs.consistency).await?;
    let schema = match &def.schema {
        Some(s) => Some(tessera_document::Schema::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))?),
        None => None,
    };
    for (i, d) in req.documents.iter().enumerate() {
        let problem = if !d.is_object() {
            Some("a document must be a JSON object".to_string())
        } else if let Some(Err(errors)) = schema.as_ref().map(|s| s.validate(d)) {
            Some(format!("document does not match the schema of collection {}: {}", def.name, errors.join("; ")))
        } else {
            None
        };
        if let Some(message) = problem {
            report.fail(&invalid(i, format!("documents[{i}]: {message}")));
            return Ok(report.into_answer());
        }
    }
    let docs: Vec<ImportDoc> =
        req.documents.into_iter().enumerate().map(|(i, data)| ImportDoc { index: i as u64, id: new_id(), data }).collect();
    let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
    let mut docs_by_group: BTreeMap<GroupId, Vec<ImportDoc>> = BTreeMap::new();
    for d in docs {
        docs_by_group
            .entry(state.cluster.group_for(&RoutingKey::Document { collection: &req.collection, id: &d.id })?)
            .or_default()
            .push(d);
    }
    let by_group = docs_by_group
        .into_iter()
        .map(|(g, docs)| {
            let batches = import::batches(docs, size, |d| import::approx_size(&d.data) + 48)
                .into_iter()
                .map(|docs| {
                    let count = docs.len() as u64;
                    (Operation::Document(DocOp::InsertMany { collection: req.collection.clone(), docs }), count)
                })
                .collect();
            (g, batches)
        })
        .collect();
    run_by_group(&state, &mut report, by_group, prefs.consistency).await;
    report.ids = Some(ids);
    Ok(report.into_answer())
}

// ---------------------------------------------------------------- key-value

/// One pair of a key-value import.
#[derive(schemars::JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvPair {
    /// 1 to `kv.max_key_bytes` bytes.
    #[schemars(length(min = 1))]
    key: String,
    value: Value,
}

/// Body of `POST /api/v1/import/kv`.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct KvImportRequest {
    pairs: Vec<KvPair>,
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    batch_size: Option<usize>,
}

/// `POST /api/v1/import/kv {pairs: [{key, value}], batch_size?}`: every key and
/// value is checked (as `POST /kv/keys` does) before anything is written; each
/// batch is one `PutMany` command per shard. Later pairs with the same key win.
pub async fn import_kv(
    State(state): State<AppState>,
    caller: Caller,
    prefs: ReadPrefs,
    JsonBody(req): JsonBody<KvImportRequest>,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    caller.require("write:kv")?;
    let mut report = Report::new("index");
    let size = import::batch_size(req.batch_size).map_err(ApiError::BadRequest)?;
    for (i, p) in req.pairs.iter().enumerate() {
        if let Err(message) = super::kv::check_pair(&state, &p.key, &p.value) {
            report.fail(&invalid(i, format!("pairs[{i}]: {message}")));
            return Ok(report.into_answer());
        }
    }
    // Range sharding: a batch is routed anew when its keys' range moved (split) mid-import.
    if state.cluster.map().is_some_and(|m| m.strategy == tessera_api::meta::ShardingStrategy::Range) {
        let pairs: Vec<(String, Value)> = req.pairs.into_iter().map(|p| (p.key, p.value)).collect();
        for batch in import::batches(pairs, size, |(k, v)| k.len() + import::approx_size(v)) {
            let count = batch.len() as u64;
            match put_many_on_current_ranges(&state, &batch, prefs.consistency).await {
                Ok(()) => report.imported += count,
                Err(e) => {
                    report.fail_unconfirmed(&e);
                    break;
                }
            }
        }
        return Ok(report.into_answer());
    }
    let mut pairs_by_group: BTreeMap<GroupId, Vec<(String, Value)>> = BTreeMap::new();
    for p in req.pairs {
        pairs_by_group.entry(state.cluster.group_for(&RoutingKey::Kv(&p.key))?).or_default().push((p.key, p.value));
    }
    let by_group = pairs_by_group
        .into_iter()
        .map(|(g, pairs)| {
            let batches = import::batches(pairs, size, |(k, v)| k.len() + import::approx_size(v))
                .into_iter()
                .map(|pairs| {
                    let count = pairs.len() as u64;
                    (Operation::Kv(KvOp::PutMany { pairs }), count)
                })
                .collect();
            (g, batches)
        })
        .collect();
    run_by_group(&state, &mut report, by_group, prefs.consistency).await;
    Ok(report.into_answer())
}
