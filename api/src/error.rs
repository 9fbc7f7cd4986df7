//! Why an engine refused a request: one code and one rejection shape for every
//! model. Replies carry a [`Rejection`] (`Response::Rejected`,
//! `QueryResult::Rejected`); the router maps it to HTTP in one place.

use serde::{Deserialize, Serialize};

/// What kind of refusal a rejection is. The generic codes serve every model;
/// the others are SQL's stable codes (shown to clients as `PARSE_ERROR`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// Something the request names does not exist.
    NotFound,
    /// The request conflicts with what exists (a duplicate name, a version).
    Conflict,
    /// The request is malformed or breaks a rule of its model.
    Invalid,
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
    /// A column used outside GROUP BY and outside every aggregate.
    GroupingError,
    TransactionError,
    /// The statement ran past its time limit.
    QueryTimeout,
    /// Intermediate results outgrew the statement's memory budget.
    QueryMemoryExceeded,
    /// A request sent as a read turned out to write; it must be proposed.
    NotReadOnly,
    /// The engine's storage failed while answering.
    Storage,
    Internal,
    /// Range sharding: the key or range is no longer (or not yet) the group's;
    /// the router learns the map anew and retries.
    RangeMoved,
    /// The group cannot answer for now (a restore holds it); ask again later.
    Unavailable,
}

/// The broad class of a code, which decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    NotFound,
    Conflict,
    Invalid,
    Timeout,
    Internal,
    Unavailable,
}

impl ErrorCode {
    /// The SCREAMING_SNAKE_CASE name clients see.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::Invalid => "BAD_REQUEST",
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
            ErrorCode::NotReadOnly => "NOT_READ_ONLY",
            ErrorCode::Storage => "STORAGE",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::RangeMoved => "RANGE_MOVED",
            ErrorCode::Unavailable => "UNAVAILABLE",
        }
    }

    /// The code's class.
    pub fn class(self) -> ErrorClass {
        match self {
            ErrorCode::NotFound | ErrorCode::TableNotFound | ErrorCode::IndexNotFound | ErrorCode::ConstraintNotFound => {
                ErrorClass::NotFound
            }
            ErrorCode::Conflict
            | ErrorCode::ConstraintViolation
            | ErrorCode::TableExists
            | ErrorCode::IndexExists
            | ErrorCode::ColumnExists => ErrorClass::Conflict,
            ErrorCode::QueryTimeout => ErrorClass::Timeout,
            ErrorCode::Unavailable => ErrorClass::Unavailable,
            ErrorCode::Storage | ErrorCode::Internal | ErrorCode::RangeMoved => ErrorClass::Internal,
            ErrorCode::Invalid
            | ErrorCode::ParseError
            | ErrorCode::ColumnNotFound
            | ErrorCode::TypeMismatch
            | ErrorCode::DivisionByZero
            | ErrorCode::Unsupported
            | ErrorCode::GroupingError
            | ErrorCode::TransactionError
            | ErrorCode::QueryMemoryExceeded
            | ErrorCode::NotReadOnly => ErrorClass::Invalid,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in the request text an error is (1-based line and column; the
/// 0-based character offset when the language reports one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub line: u64,
    pub column: u64,
    pub offset: Option<u64>,
}

impl Position {
    /// The position of the 0-based character `offset` in `text`.
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let (mut line, mut column) = (1u64, 1u64);
        for c in text.chars().take(offset) {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        Position { line, column, offset: Some(offset as u64) }
    }
}

/// A request an engine refused: it changed nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
    pub position: Option<Position>,
}

impl Rejection {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Rejection { code, message: message.into(), position: None }
    }

    /// The same rejection, pointing at `position` of the request text.
    pub fn at(mut self, position: Option<Position>) -> Self {
        self.position = position;
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        assert_eq!(Position::of_offset("MATCH (n)\nRETURN x", 17), Position { line: 2, column: 8, offset: Some(17) });
        assert_eq!(Position::of_offset("abc", 0), Position { line: 1, column: 1, offset: Some(0) });
    }
}
