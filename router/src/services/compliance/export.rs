//! Data-subject export (GDPR art. 15/20, CCPA): finding a subject's records in every store and packaging them.
//!
//! Each data group finds the subject's key-value entries, documents and graph
//! nodes with their edges in one read (`Query::Subject`, one method per
//! engine); SQL rows are found with SQL in every table of every database that
//! has a subject column. The matching rule is
//! [`tessera_api::compliance::SubjectRule`]. An export answers JSON, or a CSV
//! or XML file ([`ExportOutcome`]); it is kept for download for a day. No HTTP
//! here: the handlers (`http/handlers/compliance_subject.rs`) parse, call one
//! of these and shape the answer (a file with its headers).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tessera_api::command::{Query, QueryResult};
use tessera_api::compliance::{ColumnClassification, SubjectItem, SubjectRule};
use tessera_api::http::iso8601_ms;
use tessera_api::rpc::Consistency;
use tessera_api::sql::{SqlQuery, SqlResult};

use crate::cluster::typed::{self, Sql, shape};
use crate::error::ApiError;
use crate::services::compliance::enabled;
use crate::state::AppState;

/// `date_range` of a request: Unix milliseconds or RFC 3339 strings.
#[derive(schemars::JsonSchema, Debug, Default)]
#[schemars(deny_unknown_fields)]
pub struct DateRange {
    start: Option<Value>,
    end: Option<Value>,
}

/// Only an object with `start` and/or `end` is a date range: another type, or
/// another field, is refused (400) rather than read as "no range".
impl<'de> Deserialize<'de> for DateRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let Value::Object(fields) = Value::deserialize(d)? else {
            return Err(D::Error::custom("date_range is an object {start, end}"));
        };
        if let Some(other) = fields.keys().find(|k| !["start", "end"].contains(&k.as_str())) {
            return Err(D::Error::custom(format!("date_range has no field {other:?} (start, end)")));
        }
        Ok(DateRange { start: fields.get("start").cloned(), end: fields.get("end").cloned() })
    }
}

/// `scope` of a request (spec 02 "Erasure scope"); its schema is stated by hand
/// (see the `JsonSchema` impl) since `specific_collections` needs collections.
#[derive(Debug, Default, Clone, Deserialize, serde::Serialize)]
pub struct Scope {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    collections: Vec<String>,
}

/// The body of an export (the alternate shape's names accepted); its schema is
/// stated by hand (see the `JsonSchema` impl): one of the subject fields is required.
#[derive(Debug, Default, Deserialize)]
pub struct ExportRequest {
    subject_id: Option<String>,
    subject_identifier: Option<String>,
    consumer_id: Option<String>,
    format: Option<String>,
    date_range: Option<DateRange>,
    scope: Option<Scope>,
    include_metadata: Option<bool>,
}

impl schemars::JsonSchema for Scope {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scope".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names = json!({"type": "array", "items": {"type": "string"}});
        schemars::json_schema!({
            "description": "`scope` of a request (spec 02 \"Erasure scope\"): everything (`all`, the default, or `exclude_audit_logs`), or the places `collections` names (`specific_collections`: a collection, graph, `database.table`, `database` or `kv`; at least one).",
            "type": "object",
            "properties": {"type": {"type": "string", "nullable": true, "enum": ["all", "specific_collections", "exclude_audit_logs", null]}, "collections": names},
            "anyOf": [
                {"properties": {"type": {"type": "string", "nullable": true, "enum": ["all", "exclude_audit_logs", null]}}},
                {"required": ["type", "collections"], "properties": {"type": {"type": "string", "enum": ["specific_collections"]}, "collections": {"type": "array", "items": {"type": "string"}, "minItems": 1}}},
            ],
        })
    }
}

impl schemars::JsonSchema for ExportRequest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ExportRequest".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let subject = json!({"type": "string", "nullable": true, "minLength": 1, "maxLength": 256, "pattern": "\\S",
            "description": "1 to 256 bytes, not only blanks."});
        let bound = json!({"nullable": true, "description": "Unix milliseconds, an RFC 3339 time or a `YYYY-MM-DD` day (UTC).",
            "anyOf": [{"type": "integer", "format": "int64"}, {"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}]});
        let one_of_the_subject_fields =
            ["subject_id", "subject_identifier", "consumer_id"].map(|f| json!({"required": [f], "properties": {f: {"type": "string"}}}));
        schemars::json_schema!({
            "description": "The body of an export: the subject (`subject_id`, or the alternate shape's `subject_identifier` or `consumer_id`; the first given is used), the format (JSON by default, or a CSV or XML file), the places and the time range covered, and whether SQL columns carry their classification (`include_metadata`, on by default).",
            "type": "object",
            "properties": {
                "subject_id": subject, "subject_identifier": subject, "consumer_id": subject,
                "format": {"type": "string", "nullable": true, "enum": ["json", "csv", "xml", null]},
                "date_range": {"type": "object", "nullable": true, "additionalProperties": false, "properties": {"start": bound, "end": bound}},
                "scope": generator.subschema_for::<Option<Scope>>(),
                "include_metadata": {"type": "boolean", "nullable": true},
            },
            "anyOf": one_of_the_subject_fields,
        })
    }
}

impl Scope {
    /// `scope.type`, if given.
    pub fn kind_name(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

impl ExportRequest {
    /// The request of a query string (`subject_id`, `consumer_id`, `format`; the rest defaults).
    pub fn of_query(subject_id: Option<String>, consumer_id: Option<String>, format: Option<String>) -> ExportRequest {
        ExportRequest { subject_id, consumer_id, format, ..ExportRequest::default() }
    }

    fn subject(&self) -> Result<String, ApiError> {
        let id = self.subject_id.clone().or_else(|| self.subject_identifier.clone()).or_else(|| self.consumer_id.clone());
        match id {
            Some(id) if !id.trim().is_empty() && id.len() <= 256 => Ok(id),
            _ => Err(ApiError::BadRequest("subject_id is required (1 to 256 characters)".into())),
        }
    }
}

/// Unix milliseconds of `s`: an RFC 3339 time or a `YYYY-MM-DD` day (its start, UTC).
pub fn parse_date(s: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_millis());
    }
    let day = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

/// A time bound: Unix milliseconds, or an RFC 3339 / `YYYY-MM-DD` string.
fn bound(v: &Option<Value>, name: &str) -> Result<Option<i64>, ApiError> {
    let bad = || ApiError::BadRequest(format!("date_range.{name} must be Unix milliseconds or an RFC 3339 date"));
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => parse_date(s).map(Some).ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

/// Which stores and places a request covers.
pub struct Coverage {
    pub collections: Option<Vec<String>>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
}

impl Coverage {
    pub fn of(scope: Option<&Scope>, range: Option<&DateRange>) -> Result<Coverage, ApiError> {
        let collections = match scope.and_then(|s| s.kind.as_deref()) {
            None | Some("all") | Some("exclude_audit_logs") => None,
            Some("specific_collections") => {
                let c = scope.map(|s| s.collections.clone()).unwrap_or_default();
                if c.is_empty() {
                    return Err(ApiError::BadRequest("scope.collections must name at least one collection".into()));
                }
                Some(c)
            }
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "scope.type must be all, specific_collections or exclude_audit_logs, not {other:?}"
                )));
            }
        };
        let (from_ms, to_ms) = match range {
            Some(r) => (bound(&r.start, "start")?, bound(&r.end, "end")?),
            None => (None, None),
        };
        Ok(Coverage { collections, from_ms, to_ms })
    }

    /// Whether `item` is covered: its place is named (a collection, graph,
    /// `database.table` or `database`, or `kv`), and it was written in the range.
    pub fn covers(&self, item: &SubjectItem) -> bool {
        let placed = self.collections.as_ref().is_none_or(|names| {
            names.iter().any(|n| *n == item.location || *n == item.store || item.location.split('.').next() == Some(n.as_str()))
        });
        let timed = item.at_ms.is_none_or(|at| self.from_ms.is_none_or(|f| at >= f) && self.to_ms.is_none_or(|t| at <= t));
        placed && timed
    }
}

/// The subject rule of this router's configuration.
pub fn rule(state: &AppState, subject_id: &str) -> SubjectRule {
    crate::services::compliance::subject_rule(&state.config.compliance, subject_id)
}

/// Every record of the subject in every store and group, as of a quorum read of each.
pub async fn find(state: &AppState, rule: &SubjectRule) -> Result<Vec<SubjectItem>, ApiError> {
    let groups = state.cluster.data_groups()?;
    let query = Query::Subject(rule.clone());
    let reads = groups.iter().map(|&g| state.cluster.read(g, &query, Consistency::Quorum, None));
    let mut items = Vec::new();
    for served in futures::future::try_join_all(reads).await? {
        match served.value {
            QueryResult::Subject(found) => items.extend(found),
            QueryResult::Rejected(r) => return Err(r.into()),
            other => return Err(ApiError::unexpected(other)),
        }
    }
    items.extend(sql_rows(state, rule, &groups).await?);
    Ok(items)
}

/// The subject's SQL rows: in every table of every database, the rows whose
/// subject column (a column named as a subject field) equals the subject id.
pub async fn sql_rows(state: &AppState, rule: &SubjectRule, groups: &[u64]) -> Result<Vec<SubjectItem>, ApiError> {
    let mut databases: Vec<(u64, String)> = Vec::new();
    for (group, answer) in typed::ask_each::<Sql>(&*state.cluster, groups, &SqlQuery::ListDatabases, Consistency::Quorum, None).await? {
        if let Ok(SqlResult::Catalog(Value::Array(list))) = answer {
            databases.extend(list.into_iter().filter_map(|v| v.as_str().map(|d| (group, d.to_string()))));
        }
    }
    let mut items = Vec::new();
    for (group, database) in databases {
        let q = SqlQuery::ListTables { database: database.clone() };
        let tables =
            typed::pick(typed::read::<Sql>(&*state.cluster, group, q, Consistency::Quorum, None).await?.value, shape!(SqlResult::Catalog))?;
        for table in tables.as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()) {
            let q = SqlQuery::DescribeTable { database: database.clone(), name: table.to_string() };
            let schema = typed::pick(
                typed::read::<Sql>(&*state.cluster, group, q, Consistency::Quorum, None).await?.value,
                shape!(SqlResult::Catalog),
            )?;
            let columns: Vec<String> =
                schema["columns"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_string)).collect();
            let subject_columns: Vec<&String> = columns.iter().filter(|c| rule.fields.iter().any(|f| f.eq_ignore_ascii_case(c))).collect();
            if subject_columns.is_empty() {
                continue;
            }
            let condition: Vec<String> = subject_columns.iter().map(|c| format!("CAST(\"{c}\" AS TEXT) = $1")).collect();
            let sql = format!("SELECT * FROM \"{table}\" WHERE {}", condition.join(" OR "));
            let q = SqlQuery::Execute {
                database: database.clone(),
                sql,
                params: vec![json!(rule.subject_id)],
                max_result_rows: state.config.query_limits.max_result_rows,
                timeout_ms: state.config.query_limits.query_timeout_secs.saturating_mul(1000),
                max_memory_mb: state.config.query_limits.max_memory_mb,
            };
            let answer = typed::read::<Sql>(&*state.cluster, group, q, Consistency::Quorum, None).await?.value;
            let SqlResult::Rows(rows) = answer else { continue };
            for row in rows.rows {
                let data: serde_json::Map<String, Value> = rows.columns.iter().cloned().zip(row.iter().cloned()).collect();
                let item_id = row.first().map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_default();
                let bytes = serde_json::to_vec(&data).map(|b| b.len() as u64).unwrap_or(0);
                items.push(SubjectItem {
                    store: "sql".into(),
                    location: format!("{database}.{table}"),
                    item_id,
                    data: Value::Object(data),
                    bytes,
                    at_ms: None,
                });
            }
        }
    }
    Ok(items)
}

/// A short random suffix of ids.
fn random_suffix() -> String {
    crate::services::auth::new_id()[..8].to_uppercase()
}

/// `YYYYMMDDHHMMSS` of `ms`.
pub fn compact_timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y%m%d%H%M%S").to_string()).unwrap_or_default()
}

/// A JSON export, as kept for download.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ExportContent {
    success: bool,
    /// `EXP-<YYYYMMDDHHMMSS>-<8 characters>`.
    export_id: String,
    subject_id: String,
    /// `json`.
    format: String,
    generated_at: String,
    /// Records exported.
    total_items: usize,
    /// Their stored bytes.
    size_bytes: u64,
    /// The same as `total_items`.
    record_count: usize,
    data: ExportData,
}

/// A JSON export's answer: the export, and where it can be downloaded again.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ExportAnswer {
    #[serde(flatten)]
    export: ExportContent,
    /// `/api/v1/compliance/exports/{export_id}`; null when it was not kept (too large, or not recorded).
    download_url: Option<String>,
    /// Until when it can be downloaded; null when it was not kept.
    expires_at: Option<String>,
}

/// The subject's records, by store.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ExportData {
    subject_id: String,
    kv: Vec<ExportItem>,
    document: Vec<ExportItem>,
    sql: Vec<ExportItem>,
    graph: Vec<ExportItem>,
    object: Vec<ExportItem>,
    vector: Vec<ExportItem>,
    timeseries: Vec<ExportItem>,
    stream: Vec<ExportItem>,
}

/// One record of the subject.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ExportItem {
    /// The collection, graph, `database.table`, bucket or other place of its store.
    location: String,
    item_id: String,
    /// The record as stored.
    data: Value,
    /// The classifications of its table's columns: SQL rows of classified
    /// tables only, unless `include_metadata` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    classification: Option<Vec<ExportClassification>>,
}

/// The classification of one column, as recorded.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ExportClassification {
    table: String,
    column: String,
    /// 0 (Public) to 5 (Restricted).
    level: u8,
    reason: Option<String>,
    classified_by: String,
    /// Unix milliseconds; 0 until the meta group has fixed it.
    classified_at_ms: i64,
}

impl From<&ColumnClassification> for ExportClassification {
    fn from(c: &ColumnClassification) -> ExportClassification {
        ExportClassification {
            table: c.table.clone(),
            column: c.column.clone(),
            level: c.level,
            reason: c.reason.clone(),
            classified_by: c.classified_by.clone(),
            classified_at_ms: c.classified_at_ms,
        }
    }
}

/// A file an export answers: its name, content type and bytes.
pub struct DownloadFile {
    /// `<export_id>.<format>`.
    pub name: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// Where a kept export can be downloaded again, and until when.
pub struct KeptExport {
    /// `/api/v1/compliance/exports/{export_id}`.
    pub url: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// What an export answers: the JSON export, or a CSV or XML file with where
/// it is kept (`None`: not kept).
pub enum ExportOutcome {
    Json(ExportAnswer),
    File { file: DownloadFile, kept: Option<KeptExport> },
}

/// Every record of the subject in the key-value, document, SQL and graph
/// stores (and the others), covered by the request's scope and date range, as
/// JSON or as a CSV or XML file; kept for download when it is small enough.
pub async fn export(state: &AppState, req: ExportRequest) -> Result<ExportOutcome, ApiError> {
    enabled(state)?;
    let subject = req.subject()?;
    let format = req.format.clone().unwrap_or_else(|| "json".into());
    if !["json", "csv", "xml"].contains(&format.as_str()) {
        return Err(ApiError::BadRequest(format!("format must be json, csv or xml, not {format:?}")));
    }
    let coverage = Coverage::of(req.scope.as_ref(), req.date_range.as_ref())?;
    let rule = rule(state, &subject);
    let items: Vec<SubjectItem> = find(state, &rule).await?.into_iter().filter(|i| coverage.covers(i)).collect();
    let now = tessera_api::command::now_ms();
    let export_id = format!("EXP-{}-{}", compact_timestamp(now), random_suffix());
    let classifications = if req.include_metadata.unwrap_or(true) { classifications(state).await? } else { Vec::new() };
    let item_view = |i: &SubjectItem| {
        let mut classification = None;
        if i.store == "sql" {
            let table = i.location.split_once('.').map_or(i.location.as_str(), |(_, t)| t);
            let meta: Vec<ExportClassification> =
                classifications.iter().filter(|c| c.table == table).map(ExportClassification::from).collect();
            if !meta.is_empty() {
                classification = Some(meta);
            }
        }
        ExportItem { location: i.location.clone(), item_id: i.item_id.clone(), data: i.data.clone(), classification }
    };
    let by_store = |store: &str| items.iter().filter(|i| i.store == store).map(item_view).collect::<Vec<_>>();
    tracing::info!(subject = %subject, export_id, items = items.len(), "data subject export");
    match format.as_str() {
        "csv" => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(["store", "location", "item_id", "data"]).map_err(|e| ApiError::Internal(e.to_string()))?;
            for i in &items {
                w.write_record([i.store.as_str(), &i.location, &i.item_id, &i.data.to_string()])
                    .map_err(|e| ApiError::Internal(e.to_string()))?;
            }
            let bytes = w.into_inner().map_err(|e| ApiError::Internal(e.to_string()))?;
            let kept = keep(state, &export_id, &subject, "csv", "text/csv", &bytes, now).await;
            Ok(file(&export_id, "csv", "text/csv", bytes, kept))
        }
        "xml" => {
            let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
            let mut x = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<export id=\"{}\" subject_id=\"{}\" generated_at=\"{}\">\n",
                esc(&export_id),
                esc(&subject),
                iso8601_ms(now)
            );
            for i in &items {
                x.push_str(&format!(
                    "  <item store=\"{}\" location=\"{}\" item_id=\"{}\">{}</item>\n",
                    esc(&i.store),
                    esc(&i.location),
                    esc(&i.item_id),
                    esc(&i.data.to_string())
                ));
            }
            x.push_str("</export>\n");
            let kept = keep(state, &export_id, &subject, "xml", "application/xml", x.as_bytes(), now).await;
            Ok(file(&export_id, "xml", "application/xml", x.into_bytes(), kept))
        }
        _ => {
            let export = ExportContent {
                success: true,
                export_id: export_id.clone(),
                subject_id: subject.clone(),
                format: "json".into(),
                generated_at: iso8601_ms(now),
                total_items: items.len(),
                size_bytes: items.iter().map(|i| i.bytes).sum::<u64>(),
                record_count: items.len(),
                data: ExportData {
                    subject_id: subject.clone(),
                    kv: by_store("kv"),
                    document: by_store("document"),
                    sql: by_store("sql"),
                    graph: by_store("graph"),
                    object: by_store("object"),
                    vector: by_store("vector"),
                    timeseries: by_store("timeseries"),
                    stream: by_store("stream"),
                },
            };
            let bytes = serde_json::to_vec(&export).map_err(|e| ApiError::Internal(e.to_string()))?;
            let kept = keep(state, &export_id, &subject, "json", "application/json", &bytes, now).await;
            let (download_url, expires_at) = match kept {
                Some((url, at)) => (Some(url), Some(iso8601_ms(at))),
                None => (None, None),
            };
            Ok(ExportOutcome::Json(ExportAnswer { export, download_url, expires_at }))
        }
    }
}

/// Keeps an export for download ([`tessera_api::compliance::EXPORT_TTL_MS`]);
/// answers its URL and expiry, or `None` when it is too large to keep or the
/// meta group did not take it (the export itself is still answered).
async fn keep(state: &AppState, id: &str, subject: &str, ext: &str, content_type: &str, bytes: &[u8], now: i64) -> Option<(String, i64)> {
    use tessera_api::compliance::{EXPORT_KEEP_MAX_BYTES, EXPORT_TTL_MS, ExportFile};
    if bytes.len() > EXPORT_KEEP_MAX_BYTES {
        return None;
    }
    let expires_at_ms = now + EXPORT_TTL_MS;
    let file = ExportFile {
        subject_id: subject.to_string(),
        content_type: content_type.to_string(),
        file_name: format!("{id}.{ext}"),
        bytes: bytes.to_vec(),
        expires_at_ms,
    };
    match state.cluster.meta_write(tessera_api::command::MetaOp::PutExport { id: id.to_string(), file }).await {
        Ok(tessera_api::command::Response::Applied(_)) => Some((format!("/api/v1/compliance/exports/{id}"), expires_at_ms)),
        other => {
            tracing::warn!(export = id, "the export was not kept for download: {other:?}");
            None
        }
    }
}

/// A file answer, with where it is kept.
fn file(id: &str, ext: &str, content_type: &str, bytes: Vec<u8>, kept: Option<(String, i64)>) -> ExportOutcome {
    ExportOutcome::File {
        file: DownloadFile { name: format!("{id}.{ext}"), content_type: content_type.to_string(), bytes },
        kept: kept.map(|(url, expires_at_ms)| KeptExport { url, expires_at: iso8601_ms(expires_at_ms) }),
    }
}

/// A kept export, as it was answered, until it expires (24 h; 404 after, or
/// once the subject is erased).
pub async fn download(state: &AppState, id: &str) -> Result<DownloadFile, ApiError> {
    enabled(state)?;
    use tessera_api::command::{MetaQuery, MetaQueryResult};
    let kept = match state.cluster.meta_read(MetaQuery::Export { id: id.to_string() }).await? {
        MetaQueryResult::Export(kept) => kept,
        other => return Err(ApiError::unexpected(other)),
    };
    let gone = || ApiError::NotFound(format!("export {id} does not exist or has expired (exports are kept 24 hours)"));
    let kept = kept.ok_or_else(gone)?;
    // An erasure of its subject since it was made removes it; a restore may have
    // brought it back before re-applying that erasure, so the certificates (and
    // the erasure ledger beside the backups) are asked too.
    let made_at_ms = kept.expires_at_ms - tessera_api::compliance::EXPORT_TTL_MS;
    let certificates = match state.cluster.meta_read(MetaQuery::Certificates { from_ms: Some(made_at_ms), to_ms: None }).await? {
        MetaQueryResult::Certificates(list) => list,
        other => return Err(ApiError::unexpected(other)),
    };
    let erased_since = certificates.iter().chain(state.backups.erasure_ledger().iter()).any(|c| {
        c["subject_id"].as_str() == Some(kept.subject_id.as_str()) && c["issued_at_ms"].as_i64().is_some_and(|at| at >= made_at_ms)
    });
    if erased_since {
        return Err(gone());
    }
    Ok(DownloadFile { name: kept.file_name, content_type: kept.content_type, bytes: kept.bytes })
}

/// Every column classification.
async fn classifications(state: &AppState) -> Result<Vec<ColumnClassification>, ApiError> {
    use tessera_api::command::{MetaQuery, MetaQueryResult};
    match state.cluster.meta_read(MetaQuery::Classifications { table: None }).await? {
        MetaQueryResult::Classifications(list) => Ok(list),
        other => Err(ApiError::unexpected(other)),
    }
}
