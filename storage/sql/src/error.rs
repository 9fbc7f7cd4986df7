//! One code and one error shape for every model: SQL's errors are the
//! contract's [`Rejection`]s (`tessera_api::error`), so the engine's error
//! reaches a client unchanged.

pub use tessera_api::error::{ErrorCode, Position, Rejection as SqlError};

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
                position = Some(Position { line: l, column: c, offset: None });
            }
        }
    }
    SqlError { code: ErrorCode::ParseError, message: msg, position }
}
