//! Tessera's SQL answers in PostgreSQL's terms: column types (OIDs) read off
//! the values, rows in text format, command tags, and SQLSTATE codes.
//!
//! Tessera's rows carry JSON values and no column types, so a column's type is
//! the narrowest that holds every value in it: `int8` (integers), `float8`
//! (numbers), `bool`, else `text` (strings as they are, objects and arrays as
//! JSON text); a column of nulls only is `text`.

use std::sync::Arc;

use futures::stream;
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use serde_json::Value;
use tessera_api::error::{ErrorCode, Rejection};
use tessera_api::sql::{SqlResult, SqlRows};

use super::statement::first_word;
use crate::error::ApiError;

/// The type a column's values fit.
fn column_type(rows: &[Vec<Value>], column: usize) -> Type {
    let values = || rows.iter().filter_map(|r| r.get(column)).filter(|v| !v.is_null());
    if values().next().is_none() {
        Type::TEXT
    } else if values().all(|v| v.is_i64() || v.is_u64()) {
        Type::INT8
    } else if values().all(Value::is_number) {
        Type::FLOAT8
    } else if values().all(Value::is_boolean) {
        Type::BOOL
    } else if values().all(|v| v.as_array().is_some_and(|a| a.iter().all(|x| x.is_i64()))) {
        // Integer arrays (catalog keys such as `pg_constraint.conkey`,
        // `array_agg` of integers), as PostgreSQL's `{1,2}`.
        Type::INT8_ARRAY
    } else {
        Type::TEXT
    }
}

/// A value in PostgreSQL's text format for its column's type: `t`/`f` for
/// booleans, floats without a trailing `.0` (`4`, `12.5`), JSON as JSON text.
fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Null => None,
        Value::Bool(b) => Some(if *b { "t" } else { "f" }.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        }),
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The elements of an integer array value.
fn integers(value: &Value) -> Option<Vec<i64>> {
    value.as_array()?.iter().map(Value::as_i64).collect()
}

/// A value in its field's format: text as PostgreSQL writes it; binary as the
/// field's type (`int8`, `float8`, `bool`, else the text's bytes).
fn encode(encoder: &mut DataRowEncoder, value: Option<&Value>, field: &FieldInfo) -> PgWireResult<()> {
    if *field.datatype() == Type::INT8_ARRAY
        && let Some(ints) = value.and_then(integers)
    {
        return encoder.encode_field(&Some(ints));
    }
    if field.format() == FieldFormat::Text || value.is_none_or(Value::is_null) {
        return encoder.encode_field(&text_of(value));
    }
    let v = value.unwrap_or(&Value::Null);
    let ty = field.datatype();
    let mismatch =
        || PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".into(), "22P02".into(), format!("{v} is no {} value", ty.name()))));
    if *ty == Type::INT8 {
        encoder.encode_field(&Some(v.as_i64().ok_or_else(mismatch)?))
    } else if *ty == Type::FLOAT8 {
        encoder.encode_field(&Some(v.as_f64().ok_or_else(mismatch)?))
    } else if *ty == Type::BOOL {
        encoder.encode_field(&Some(v.as_bool().ok_or_else(mismatch)?))
    } else {
        encoder.encode_field(&text_of(value))
    }
}

/// The answer to a statement in the simple protocol (text format).
pub fn response(statement: &str, rows: SqlRows) -> Response {
    let types = column_types(&rows);
    let fields = fields(&rows.columns, &types, &Format::UnifiedText);
    typed_response(statement, SqlResult::Rows(rows), fields)
}

/// A catalog answer (tables, schemas) as one column of JSON text.
pub fn catalog_response(value: Value) -> Response {
    typed_response("SELECT", SqlResult::Catalog(value.clone()), fields(&["catalog".to_string()], &[Type::TEXT], &Format::UnifiedText))
}

/// Any answer as rows: a catalog answer is one `catalog` column of JSON text.
pub fn as_rows(result: SqlResult) -> SqlRows {
    match result {
        SqlResult::Rows(rows) => rows,
        SqlResult::Catalog(v) => SqlRows {
            columns: vec!["catalog".into()],
            rows: vec![vec![Value::String(v.to_string())]],
            row_count: 1,
            rows_affected: 0,
            truncated: false,
        },
    }
}

/// The PostgreSQL type of a column declared with Tessera's type `name`.
pub fn declared(name: &str) -> Type {
    let base = name.split('(').next().unwrap_or_default().trim().to_ascii_uppercase();
    match base.as_str() {
        "INT" | "INTEGER" | "BIGINT" | "SMALLINT" | "INT2" | "INT4" | "INT8" | "SERIAL" | "BIGSERIAL" => Type::INT8,
        "FLOAT" | "REAL" | "DOUBLE" | "DOUBLE PRECISION" | "FLOAT4" | "FLOAT8" | "DECIMAL" | "NUMERIC" => Type::FLOAT8,
        "BOOL" | "BOOLEAN" => Type::BOOL,
        _ => Type::TEXT,
    }
}

/// The type a column declared `name` is sent as in the text format, where
/// its values (strings) cannot tell: dates, times and uuids by their own
/// types (a driver decodes them so), the rest as [`declared`].
pub fn declared_for_text(name: &str) -> Type {
    let base = name.split('(').next().unwrap_or_default().trim().to_ascii_uppercase();
    match base.as_str() {
        "DATE" => Type::DATE,
        "TIMESTAMP" | "DATETIME" => Type::TIMESTAMP,
        "TIMESTAMPTZ" => Type::TIMESTAMPTZ,
        "TIME" => Type::TIME,
        "UUID" => Type::UUID,
        _ => declared(name),
    }
}

/// Column types from the values, where a column's values say nothing (no
/// rows, nulls only) from `declared` (by column name).
pub fn column_types_or_declared(rows: &SqlRows, declared: &std::collections::HashMap<String, Type>) -> Vec<Type> {
    (0..rows.columns.len())
        .map(|c| {
            let known = rows.rows.iter().filter_map(|r| r.get(c)).any(|v| !v.is_null());
            match (known, declared.get(&rows.columns[c].to_ascii_lowercase())) {
                (false, Some(t)) => t.clone(),
                _ => column_type(&rows.rows, c),
            }
        })
        .collect()
}

/// The type of every column of `rows`.
pub fn column_types(rows: &SqlRows) -> Vec<Type> {
    (0..rows.columns.len()).map(|c| column_type(&rows.rows, c)).collect()
}

/// Row fields with their types, each in the format the client asked for.
pub fn fields(columns: &[String], types: &[Type], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (name, ty))| FieldInfo::new(name.clone(), None, None, ty.clone(), format.format_for(i)))
        .collect()
}

/// The rows of `result` under `fields` (or its command tag when it has no columns).
pub fn typed_response(statement: &str, result: SqlResult, fields: Vec<FieldInfo>) -> Response {
    let rows = as_rows(result);
    if rows.columns.is_empty() {
        return Response::Execution(tag(statement, rows.rows_affected as usize));
    }
    let fields = Arc::new(fields);
    let mut encoder = DataRowEncoder::new(fields.clone());
    let encoded: Vec<PgWireResult<_>> = rows
        .rows
        .iter()
        .map(|row| {
            for (c, field) in fields.iter().enumerate() {
                encode(&mut encoder, row.get(c), field)?;
            }
            Ok(encoder.take_row())
        })
        .collect();
    Response::Query(QueryResponse::new(fields, stream::iter(encoded)))
}

/// A bound parameter as a JSON value, from its declared type and format.
pub fn parameter(bytes: &[u8], ty: &Type, binary: bool) -> Result<Value, String> {
    let bad = || format!("invalid {} parameter", ty.name());
    if binary {
        return Ok(match *ty {
            Type::INT2 => Value::from(i16::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
            Type::INT4 => Value::from(i32::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
            Type::INT8 => Value::from(i64::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
            Type::FLOAT4 => Value::from(f32::from_be_bytes(bytes.try_into().map_err(|_| bad())?) as f64),
            Type::FLOAT8 => Value::from(f64::from_be_bytes(bytes.try_into().map_err(|_| bad())?)),
            Type::BOOL => Value::Bool(bytes.first().is_some_and(|b| *b != 0)),
            Type::JSONB => serde_json::from_slice(bytes.get(1..).unwrap_or_default()).map_err(|_| bad())?,
            Type::JSON => serde_json::from_slice(bytes).map_err(|_| bad())?,
            Type::DATE | Type::TIMESTAMP | Type::TIMESTAMPTZ | Type::TIME | Type::UUID | Type::BYTEA | Type::NUMERIC => {
                Value::String(binary_as_text(bytes, ty).ok_or_else(bad)?)
            }
            _ => Value::String(String::from_utf8(bytes.to_vec()).map_err(|_| bad())?),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    Ok(match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 => Value::from(text.trim().parse::<i64>().map_err(|_| bad())?),
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => {
            let n: f64 = text.trim().parse().map_err(|_| bad())?;
            serde_json::Number::from_f64(n).map(Value::Number).ok_or_else(bad)?
        }
        Type::BOOL => Value::Bool(matches!(text.trim(), "t" | "true" | "TRUE" | "on" | "yes" | "1")),
        Type::JSON | Type::JSONB => serde_json::from_str(text).map_err(|_| bad())?,
        _ => Value::String(text.to_string()),
    })
}

/// A binary parameter of a date, time, uuid, bytea or numeric type as the
/// text the engine reads (what PostgreSQL's text format would have sent).
fn binary_as_text(bytes: &[u8], ty: &Type) -> Option<String> {
    use chrono::{Duration, NaiveDate, NaiveTime};
    let epoch = NaiveDate::from_ymd_opt(2000, 1, 1)?;
    let int = |n: usize| bytes.get(..n).filter(|_| bytes.len() == n);
    Some(match *ty {
        Type::DATE => {
            let days = i32::from_be_bytes(int(4)?.try_into().ok()?);
            epoch.checked_add_signed(Duration::days(days.into()))?.format("%Y-%m-%d").to_string()
        }
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(int(8)?.try_into().ok()?);
            let at = epoch.and_hms_opt(0, 0, 0)?.checked_add_signed(Duration::microseconds(micros))?;
            let text = at.format("%Y-%m-%d %H:%M:%S%.f").to_string();
            if *ty == Type::TIMESTAMPTZ { format!("{text}+00:00") } else { text }
        }
        Type::TIME => {
            let micros = i64::from_be_bytes(int(8)?.try_into().ok()?);
            let midnight = NaiveTime::from_hms_opt(0, 0, 0)?;
            (midnight + Duration::microseconds(micros)).format("%H:%M:%S%.f").to_string()
        }
        Type::UUID => {
            let hex = hex::encode(int(16)?);
            format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
        }
        Type::BYTEA => format!("\\x{}", hex::encode(bytes)),
        Type::NUMERIC => binary_numeric(bytes)?,
        _ => return None,
    })
}

/// PostgreSQL's binary NUMERIC (base-10000 digits, weight, sign, scale) as text.
fn binary_numeric(bytes: &[u8]) -> Option<String> {
    let word = |i: usize| bytes.get(i * 2..i * 2 + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    let (ndigits, weight, sign, dscale) = (word(0)? as usize, word(1)? as i16, word(2)?, word(3)? as usize);
    match sign {
        0xC000 => return Some("NaN".into()),
        0x0000 | 0x4000 => {}
        _ => return None,
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| word(4 + i)).collect::<Option<_>>()?;
    let mut int_part = String::new();
    for i in 0..=weight.max(-1) as i32 {
        let d = digits.get(i as usize).copied().unwrap_or(0);
        if int_part.is_empty() { int_part = d.to_string() } else { int_part.push_str(&format!("{d:04}")) }
    }
    if int_part.is_empty() {
        int_part.push('0');
    }
    let mut frac = String::new();
    for i in (weight as i32 + 1)..(weight as i32 + 1 + dscale.div_ceil(4) as i32) {
        let d = if i < 0 { 0 } else { digits.get(i as usize).copied().unwrap_or(0) };
        frac.push_str(&format!("{d:04}"));
    }
    frac.truncate(dscale);
    let sign = if sign == 0x4000 { "-" } else { "" };
    Some(if dscale == 0 { format!("{sign}{int_part}") } else { format!("{sign}{int_part}.{frac}") })
}

/// The command a statement's tag names (`CREATE TABLE`, `INSERT`, …).
pub fn command_of(statement: &str) -> String {
    let mut words = statement.split_whitespace().filter(|w| !w.starts_with("--")).map(str::to_ascii_uppercase);
    let first = words.next().unwrap_or_default();
    match first.as_str() {
        "CREATE" | "DROP" | "ALTER" => {
            let mut object = words.next().unwrap_or_default();
            if object == "UNIQUE" {
                object = "INDEX".into();
            }
            format!("{first} {object}")
        }
        "TRUNCATE" => "TRUNCATE TABLE".into(),
        _ => first,
    }
}

/// A command tag as PostgreSQL writes it (`INSERT 0 n`, `UPDATE n`, `SELECT n`).
fn tag(statement: &str, rows: usize) -> Tag {
    let command = first_word(statement);
    match command.as_str() {
        "INSERT" => Tag::new("INSERT").with_oid(0).with_rows(rows),
        "UPDATE" | "DELETE" | "SELECT" | "MERGE" | "COPY" => Tag::new(&command).with_rows(rows),
        _ => Tag::new(&command_of(statement)),
    }
}

/// The SQLSTATE of a Tessera error code.
fn sqlstate(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::ParseError => "42601",
        ErrorCode::TableNotFound => "42P01",
        ErrorCode::ColumnNotFound => "42703",
        ErrorCode::TypeMismatch => "42804",
        ErrorCode::DivisionByZero => "22012",
        ErrorCode::ConstraintViolation => "23505",
        ErrorCode::TableExists => "42P07",
        ErrorCode::IndexNotFound | ErrorCode::ConstraintNotFound => "42704",
        ErrorCode::IndexExists => "42P07",
        ErrorCode::ColumnExists => "42701",
        ErrorCode::Unsupported => "0A000",
        ErrorCode::GroupingError => "42803",
        ErrorCode::TransactionError => "25000",
        ErrorCode::QueryTimeout => "57014",
        ErrorCode::QueryMemoryExceeded => "53200",
        ErrorCode::NotFound => "42704",
        ErrorCode::Conflict => "40001",
        ErrorCode::Invalid => "22023",
        ErrorCode::Unavailable | ErrorCode::RangeMoved | ErrorCode::NotReadOnly => "57P03",
        ErrorCode::Storage | ErrorCode::Internal => "XX000",
    }
}

/// The SQLSTATE of a router error.
pub fn sqlstate_of(e: &ApiError) -> &'static str {
    match e {
        ApiError::Rejected(r) | ApiError::Sql { rejection: r, .. } => sqlstate(r.code),
        ApiError::Unauthorized(_) | ApiError::NotProvisioned => "28P01",
        ApiError::Forbidden(_) | ApiError::IpBlocked(_) => "42501",
        ApiError::RateLimited(_) => "53400",
        ApiError::BadRequest(_) | ApiError::PayloadTooLarge(_) => "22023",
        ApiError::NotFound(_) => "42704",
        ApiError::Conflict(_) => "40001",
        ApiError::Unavailable(_) | ApiError::RangeMoved(_) | ApiError::VaultSealed(_) => "57P03",
        ApiError::StillPending(_) => "57014",
        _ => "XX000",
    }
}

/// An error as PostgreSQL reports it: SQLSTATE, message, and the position
/// (1-based, in characters of `statement`) when Tessera points into the text.
pub fn error_info(e: &ApiError, statement: &str) -> ErrorInfo {
    let (message, position) = match e {
        ApiError::Rejected(r) | ApiError::Sql { rejection: r, .. } => {
            (format!("{}: {}", r.code.as_str(), r.message), position_of(r, statement))
        }
        other => (other.to_string(), None),
    };
    let mut info = ErrorInfo::new("ERROR".into(), sqlstate_of(e).into(), message);
    info.position = position.map(|p| p.to_string());
    info
}

/// The character position (1-based) a rejection's line and column point at.
fn position_of(r: &Rejection, statement: &str) -> Option<usize> {
    let p = r.position.as_ref()?;
    let mut chars = 0usize;
    for (n, line) in statement.split('\n').enumerate() {
        if n + 1 == p.line as usize {
            return Some(chars + (p.column as usize).max(1));
        }
        chars += line.chars().count() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn binary_dates_times_uuids_and_numerics_read_as_text() {
        let p = |bytes: &[u8], ty: Type| parameter(bytes, &ty, true).unwrap();
        assert_eq!(p(&1i32.to_be_bytes(), Type::DATE), json!("2000-01-02"));
        assert_eq!(p(&(-1i32).to_be_bytes(), Type::DATE), json!("1999-12-31"));
        assert_eq!(p(&86_400_000_001i64.to_be_bytes(), Type::TIMESTAMP), json!("2000-01-02 00:00:00.000001"));
        assert_eq!(p(&3_600_000_000i64.to_be_bytes(), Type::TIME), json!("01:00:00"));
        assert_eq!(p(&[0x12; 16], Type::UUID), json!("12121212-1212-1212-1212-121212121212"));
        assert_eq!(p(&[1, 255], Type::BYTEA), json!("\\x01ff"));
        let numeric = |words: &[u16]| words.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
        // 12345.678: digits 1, 2345, 6780; weight 1; scale 3.
        assert_eq!(p(&numeric(&[3, 1, 0, 3, 1, 2345, 6780]), Type::NUMERIC), json!("12345.678"));
        // -0.05: digit 500 at weight -1; scale 2.
        assert_eq!(p(&numeric(&[1, 0xFFFF, 0x4000, 2, 500]), Type::NUMERIC), json!("-0.05"));
        assert_eq!(p(&numeric(&[0, 0, 0, 0]), Type::NUMERIC), json!("0"));
        assert!(parameter(&[1, 2], &Type::DATE, true).is_err());
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn a_column_takes_the_narrowest_type_of_its_values() {
        let rows = vec![
            vec![json!(1), json!(1.5), json!(true), json!("a"), Value::Null],
            vec![json!(2), json!(2), json!(false), json!({"k": 1}), Value::Null],
        ];
        let types: Vec<Type> = (0..5).map(|c| column_type(&rows, c)).collect();
        assert_eq!(types, [Type::INT8, Type::FLOAT8, Type::BOOL, Type::TEXT, Type::TEXT]);
    }

    #[test]
    fn tags_and_positions() {
        assert_eq!(command_of("create unique index i on t (a)"), "CREATE INDEX");
        assert_eq!(command_of("DROP TABLE t"), "DROP TABLE");
        let r = Rejection::new(ErrorCode::ParseError, "x").at(Some(tessera_api::error::Position { line: 2, column: 3, offset: None }));
        assert_eq!(position_of(&r, "SELECT\nFRM t"), Some(10));
    }
}
