//! Bulk import (spec 01 bulk import): one batch of rows or documents is one
//! Raft command, applied all or nothing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Rejection;

/// What a SQL import does with a row whose primary key (or a unique key) exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnConflict {
    /// Leave the existing row, count the new one as skipped.
    Skip,
    /// Fail the batch.
    Error,
    /// Replace the existing row with the same primary key (upsert).
    Update,
}

/// One row of a SQL import: its line in the client's data and its values by column name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportRow {
    pub line: u64,
    /// `(column, value)`; CSV fields travel as strings (empty fields as null)
    /// and are converted to the column types by the engine, as INSERT does.
    pub values: Vec<(String, Value)>,
}

/// One batch of a SQL import into `table` of `database`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlImportOp {
    pub database: String,
    pub table: String,
    pub on_conflict: OnConflict,
    pub rows: Vec<ImportRow>,
}

/// One document of a document import batch: its index in the request and its id
/// (assigned by the router).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportDoc {
    pub index: u64,
    pub id: String,
    pub data: Value,
}

/// Why a batch was refused: the first bad row (its line or index) and the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportFailure {
    /// Line (SQL) or index (documents); 0 when the batch failed as a whole.
    pub line: u64,
    pub rejection: Rejection,
}

/// The outcome of one import batch. With a failure nothing of the batch was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportResult {
    pub imported: u64,
    pub skipped: u64,
    pub failure: Option<ImportFailure>,
}
