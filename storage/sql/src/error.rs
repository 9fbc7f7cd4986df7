//! Error type returned by every engine entry point.
use serde::Serialize;
use std::fmt;

/// Kind of SQL error; serialized and displayed as SCREAMING_SNAKE_CASE (e.g. `PARSE_ERROR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    ParseError,
    TableNotFound,
    ColumnNotFound,
    TypeMismatch,
    DivisionByZero,
    ConstraintViolation,
    TableExists,
    IndexNotFound,
    IndexExists,
    ColumnExists,
    ConstraintNotFound,
    Unsupported,
    /// A column used outside GROUP BY and outside every aggregate (PostgreSQL 42803).
    GroupingError,
    TransactionError,
    QueryTimeout,
    /// Intermediate results outgrew the query's memory budget.
    QueryMemoryExceeded,
    Storage,
    Internal,
}

impl ErrorCode {
    /// The SCREAMING_SNAKE_CASE name of the code.
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::ParseError => "PARSE_ERROR",
            ErrorCode::TableNotFound => "TABLE_NOT_FOUND",
            ErrorCode::ColumnNotFound => "COLUMN_NOT_FOUND",
            ErrorCode::TypeMismatch => "TYPE_MISMATCH",
            ErrorCode::DivisionByZero => "DIVISION_BY_ZERO",
            ErrorCode::ConstraintViolation => "CONSTRAINT_VIOLATION",
            ErrorCode::TableExists => "TABLE_EXISTS",
            ErrorCode::IndexNotFound => "INDEX_NOT_FOUND",
            ErrorCode::IndexExists => "INDEX_EXISTS",
            ErrorCode::ColumnExists => "COLUMN_EXISTS",
            ErrorCode::ConstraintNotFound => "CONSTRAINT_NOT_FOUND",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::GroupingError => "GROUPING_ERROR",
            ErrorCode::TransactionError => "TRANSACTION_ERROR",
            ErrorCode::QueryTimeout => "QUERY_TIMEOUT",
            ErrorCode::QueryMemoryExceeded => "QUERY_MEMORY_EXCEEDED",
            ErrorCode::Storage => "STORAGE",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// 1-based position of a parse error in the request text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

/// An error with a code, a human message and (for parse errors) a position.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[error("{code}: {message}")]
pub struct SqlError {
    pub code: ErrorCode,
    pub message: String,
    pub position: Option<Position>,
}

impl SqlError {
    /// New error without position.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SqlError { code, message: message.into(), position: None }
    }
}

pub type Result<T> = std::result::Result<T, SqlError>;

macro_rules! ctor {
    ($($fn:ident => $code:ident),*) => {
        $(pub(crate) fn $fn(msg: impl Into<String>) -> SqlError { SqlError::new(ErrorCode::$code, msg) })*
    };
}
ctor!(parse => ParseError, table_not_found => TableNotFound, column_not_found => ColumnNotFound,
    type_mismatch => TypeMismatch, constraint => ConstraintViolation, unsupported => Unsupported,
    internal => Internal);

/// Converts a sqlparser error, extracting "Line: x, Column: y" when present.
pub(crate) fn from_parser(e: sqlparser::parser::ParserError) -> SqlError {
    let msg = e.to_string();
    let mut position = None;
    if let Some(i) = msg.find("Line: ") {
        let rest = &msg[i + 6..];
        let line: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Some(j) = rest.find("Column: ") {
            let col: String = rest[j + 8..].chars().take_while(|c| c.is_ascii_digit()).collect();
            if let (Ok(l), Ok(c)) = (line.parse(), col.parse()) {
                position = Some(Position { line: l, column: c });
            }
        }
    }
    SqlError { code: ErrorCode::ParseError, message: msg, position }
}
