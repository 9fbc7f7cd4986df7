//! Column classification (spec 02): the levels recorded in the meta group
//! and enforced by every router (see `classification.rs`); a column is
//! classified Restricted only while every node encrypts at rest.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response};
use tessera_api::compliance::{CLASSIFICATION_LEVELS, ClassifyOp, ColumnClassification, classification_level};
use tessera_api::http::iso8601_ms;

use super::check_field;
use crate::error::ApiError;
use crate::state::AppState;

/// One column to classify: `classification` is a level's name (Public,
/// Internal, Confidential, PHI, PII, Restricted; any case) or its number.
#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct ClassifyItem {
    table: String,
    column: String,
    /// Absent: `data_classification.default_level`.
    #[serde(alias = "level", default)]
    classification: Value,
    reason: Option<String>,
}

/// `POST /api/v1/compliance/classify`: one column (`{table, column,
/// classification, reason}`) or a batch (`{classifications: [...]}`).
#[derive(schemars::JsonSchema, Debug, Deserialize)]
pub struct ClassifyBody {
    #[serde(flatten)]
    single: Option<ClassifyItem>,
    classifications: Option<Vec<ClassifyItem>>,
}

fn to_column(mut item: ClassifyItem, by: &str, default_level: &str) -> Result<ColumnClassification, ApiError> {
    if item.classification.is_null() {
        item.classification = Value::String(default_level.to_string());
    }
    check_field("table", &item.table)?;
    check_field("column", &item.column)?;
    if let Some(reason) = &item.reason {
        check_field("reason", reason)?;
    }
    let name = match &item.classification {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let level = classification_level(&name).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "classification must be one of {} (or 0-5), not {}",
            CLASSIFICATION_LEVELS.join(", "),
            item.classification
        ))
    })?;
    Ok(ColumnClassification {
        table: item.table,
        column: item.column,
        level,
        reason: item.reason,
        classified_by: by.into(),
        classified_at_ms: 0,
    })
}

/// The classification of one column.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClassificationView {
    table: String,
    column: String,
    /// 0 (Public) to 5 (Restricted).
    level: u8,
    /// The level's name: Public, Internal, Confidential, PHI, PII or Restricted.
    classification: String,
    reason: Option<String>,
    classified_by: String,
    /// Null until the meta group has fixed it.
    classified_at: Option<String>,
}

impl From<&ColumnClassification> for ClassificationView {
    fn from(c: &ColumnClassification) -> ClassificationView {
        ClassificationView {
            table: c.table.clone(),
            column: c.column.clone(),
            level: c.level,
            classification: CLASSIFICATION_LEVELS[usize::from(c.level)].to_string(),
            reason: c.reason.clone(),
            classified_by: c.classified_by.clone(),
            classified_at: (c.classified_at_ms > 0).then(|| iso8601_ms(c.classified_at_ms)),
        }
    }
}

/// Answer of `POST /api/v1/compliance/classify`: a batch, or one column.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Classified {
    /// `{classifications: [...]}` was given.
    Batch {
        success: bool,
        /// How many columns were classified.
        classified: usize,
        classifications: Vec<ClassificationView>,
        message: String,
    },
    /// One column was given.
    One {
        success: bool,
        table: String,
        column: String,
        /// The level's name.
        classification: String,
        level: u8,
        message: String,
    },
}

/// Classifies one column or a batch, `by` the actor named.
pub async fn classify(state: &AppState, by: String, b: ClassifyBody) -> Result<Classified, ApiError> {
    let (batch, items) = match (b.classifications, b.single) {
        (Some(items), _) if !items.is_empty() => (true, items),
        (None, Some(item)) => (false, vec![item]),
        _ => return Err(ApiError::BadRequest("give {table, column, classification} or a non-empty classifications list".into())),
    };
    let default_level = state.config.data_classification.default_level.clone();
    let columns = items.into_iter().map(|i| to_column(i, &by, &default_level)).collect::<Result<Vec<_>, _>>()?;
    if let Some(c) = columns.iter().find(|c| c.level >= 5) {
        restricted_needs_encryption(state, c).await?;
    }
    match state.cluster.meta_write(MetaOp::Classify(ClassifyOp { columns: columns.clone() })).await? {
        Response::Applied(_) => {}
        Response::Rejected(r) => return Err(r.into()),
        other => return Err(ApiError::unexpected(other)),
    }
    state.classification.invalidate().await;
    if batch {
        return Ok(Classified::Batch {
            success: true,
            classified: columns.len(),
            classifications: columns.iter().map(ClassificationView::from).collect(),
            message: format!("{} columns classified", columns.len()),
        });
    }
    let c = &columns[0];
    let name = CLASSIFICATION_LEVELS[usize::from(c.level)];
    Ok(Classified::One {
        success: true,
        table: c.table.clone(),
        column: c.column.clone(),
        classification: name.to_string(),
        level: c.level,
        message: format!("{}.{} classified as {name} (level {})", c.table, c.column, c.level),
    })
}

/// Level 5 (Restricted) columns are encrypted at rest: a column is classified
/// Restricted only while every node answers that its store encrypts at rest
/// (409 otherwise, naming the nodes that do not).
async fn restricted_needs_encryption(state: &AppState, c: &ColumnClassification) -> Result<(), ApiError> {
    let mut plain = Vec::new();
    for (node, status) in state.cluster.node_statuses().await? {
        match status {
            Ok(s) if s.encrypted_at_rest => {}
            Ok(_) => plain.push(format!("node {} does not encrypt at rest", node.id)),
            Err(e) => plain.push(format!("node {} did not answer ({e})", node.id)),
        }
    }
    if plain.is_empty() {
        return Ok(());
    }
    Err(ApiError::Conflict(format!(
        "{}.{} cannot be classified Restricted (level 5): level 5 columns are encrypted at rest and {} (set SERVICE_ENCRYPTION_AT_REST with SERVICE_ENCRYPTION_KEY on every node)",
        c.table,
        c.column,
        plain.join(", ")
    )))
}

/// The classified columns.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ClassificationList {
    classifications: Vec<ClassificationView>,
    total_count: usize,
}

/// The classified columns, of one table when `table` is given.
pub async fn list(state: &AppState, table: Option<String>) -> Result<ClassificationList, ApiError> {
    if let Some(t) = &table {
        check_field("table", t)?;
    }
    let list = match state.cluster.meta_read(MetaQuery::Classifications { table }).await? {
        MetaQueryResult::Classifications(list) => list,
        other => return Err(ApiError::unexpected(other)),
    };
    Ok(ClassificationList { classifications: list.iter().map(ClassificationView::from).collect(), total_count: list.len() })
}
