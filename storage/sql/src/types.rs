//! Column types: mapping from sqlparser types, display names.
use crate::error::{Result, unsupported};
use serde::{Deserialize, Serialize};
use sqlparser::ast::{CharacterLength, DataType, ExactNumberInfo};

/// A column type as stored in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqlType {
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Real,
    Double,
    /// DECIMAL(precision, scale); None = unconstrained.
    Decimal(Option<(u32, u32)>),
    Char(Option<u32>),
    Varchar(Option<u32>),
    Text,
    Date,
    Time,
    Timestamp,
    Boolean,
    Blob,
    Json,
    Uuid,
}

impl SqlType {
    /// Display name like `VARCHAR(10)`.
    pub fn name(&self) -> String {
        match self {
            SqlType::TinyInt => "TINYINT".into(),
            SqlType::SmallInt => "SMALLINT".into(),
            SqlType::Int => "INTEGER".into(),
            SqlType::BigInt => "BIGINT".into(),
            SqlType::Real => "REAL".into(),
            SqlType::Double => "DOUBLE".into(),
            SqlType::Decimal(None) => "DECIMAL".into(),
            SqlType::Decimal(Some((p, s))) => format!("DECIMAL({p},{s})"),
            SqlType::Char(None) => "CHAR".into(),
            SqlType::Char(Some(n)) => format!("CHAR({n})"),
            SqlType::Varchar(None) => "VARCHAR".into(),
            SqlType::Varchar(Some(n)) => format!("VARCHAR({n})"),
            SqlType::Text => "TEXT".into(),
            SqlType::Date => "DATE".into(),
            SqlType::Time => "TIME".into(),
            SqlType::Timestamp => "TIMESTAMP".into(),
            SqlType::Boolean => "BOOLEAN".into(),
            SqlType::Blob => "BLOB".into(),
            SqlType::Json => "JSON".into(),
            SqlType::Uuid => "UUID".into(),
        }
    }

    /// Integer range for integer types.
    pub fn int_range(&self) -> Option<(i64, i64)> {
        match self {
            SqlType::TinyInt => Some((i8::MIN as i64, i8::MAX as i64)),
            SqlType::SmallInt => Some((i16::MIN as i64, i16::MAX as i64)),
            SqlType::Int => Some((i32::MIN as i64, i32::MAX as i64)),
            SqlType::BigInt => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

fn char_len(l: &Option<CharacterLength>) -> Option<u32> {
    match l {
        Some(CharacterLength::IntegerLength { length, .. }) => Some((*length).min(u32::MAX as u64) as u32),
        _ => None,
    }
}

fn decimal_info(i: &ExactNumberInfo) -> Result<Option<(u32, u32)>> {
    let (p, s) = match i {
        ExactNumberInfo::None => return Ok(None),
        ExactNumberInfo::Precision(p) => (*p, 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
    };
    if p == 0 || p > 28 || s > p {
        return Err(unsupported(format!("DECIMAL({p},{s}) is out of the supported range (precision 1..28, scale <= precision)")));
    }
    Ok(Some((p as u32, s as u32)))
}

/// Maps a parsed type; returns the type and whether it is a SERIAL (auto-increment) type.
pub fn from_ast(dt: &DataType) -> Result<(SqlType, bool)> {
    let t = match dt {
        DataType::TinyInt(_) => SqlType::TinyInt,
        DataType::SmallInt(_) | DataType::Int2(_) => SqlType::SmallInt,
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) | DataType::MediumInt(_) => SqlType::Int,
        DataType::BigInt(_) | DataType::Int8(_) | DataType::Int64 => SqlType::BigInt,
        DataType::Real | DataType::Float4 => SqlType::Real,
        DataType::Float(p) => match p {
            sqlparser::ast::ExactNumberInfo::Precision(n) if *n > 24 => SqlType::Double,
            _ => SqlType::Real,
        },
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 | DataType::Float64 => SqlType::Double,
        DataType::Decimal(i) | DataType::Numeric(i) | DataType::Dec(i) => SqlType::Decimal(decimal_info(i)?),
        DataType::Char(l) | DataType::Character(l) => SqlType::Char(char_len(l).or(Some(1))),
        DataType::Varchar(l) | DataType::CharacterVarying(l) | DataType::CharVarying(l) | DataType::Nvarchar(l) => {
            SqlType::Varchar(char_len(l))
        }
        DataType::Text | DataType::String(_) => SqlType::Text,
        DataType::Date => SqlType::Date,
        DataType::Time(_, _) => SqlType::Time,
        DataType::Timestamp(_, _) | DataType::Datetime(_) => SqlType::Timestamp,
        DataType::Boolean | DataType::Bool => SqlType::Boolean,
        DataType::Blob(_) | DataType::Bytea | DataType::Binary(_) | DataType::Varbinary(_) => SqlType::Blob,
        DataType::JSON | DataType::JSONB => SqlType::Json,
        DataType::Uuid => SqlType::Uuid,
        DataType::Custom(name, args) if args.is_empty() => {
            let n = name.to_string().to_ascii_uppercase();
            return match n.as_str() {
                "SERIAL" | "SERIAL4" => Ok((SqlType::Int, true)),
                "BIGSERIAL" | "SERIAL8" => Ok((SqlType::BigInt, true)),
                "SMALLSERIAL" | "SERIAL2" => Ok((SqlType::SmallInt, true)),
                "TINYINT" => Ok((SqlType::TinyInt, false)),
                "BLOB" => Ok((SqlType::Blob, false)),
                "UUID" => Ok((SqlType::Uuid, false)),
                _ => Err(unsupported(format!("unsupported data type {n}"))),
            };
        }
        other => return Err(unsupported(format!("unsupported data type {other}"))),
    };
    Ok((t, false))
}
