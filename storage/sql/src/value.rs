//! Runtime values: comparison, casting, text and JSON rendering, date/time parsing.
use crate::error::{Result, type_mismatch};
use crate::types::SqlType;
use rust_decimal::prelude::*;
use std::cmp::Ordering;

/// A runtime SQL value. Dates are days since 1970-01-01, times are microseconds since
/// midnight, timestamps are microseconds since the Unix epoch (UTC, no zone).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Decimal(Decimal),
    Text(String),
    Date(i32),
    Time(i64),
    Timestamp(i64),
    Blob(Vec<u8>),
    Json(String),
    Uuid([u8; 16]),
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Short type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "BOOLEAN",
            Value::Int(_) => "INTEGER",
            Value::Float(_) => "DOUBLE",
            Value::Decimal(_) => "DECIMAL",
            Value::Text(_) => "TEXT",
            Value::Date(_) => "DATE",
            Value::Time(_) => "TIME",
            Value::Timestamp(_) => "TIMESTAMP",
            Value::Blob(_) => "BLOB",
            Value::Json(_) => "JSON",
            Value::Uuid(_) => "UUID",
        }
    }

    fn type_rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::Float(_) | Value::Decimal(_) => 2,
            Value::Text(_) => 3,
            Value::Date(_) | Value::Timestamp(_) => 4,
            Value::Time(_) => 5,
            Value::Blob(_) => 6,
            Value::Json(_) => 7,
            Value::Uuid(_) => 8,
        }
    }

    /// Text rendering (used by CAST AS TEXT, ||, and the test runner).
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => if *b { "true" } else { "false" }.into(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => fmt_float(*f),
            Value::Decimal(d) => d.to_string(),
            Value::Text(s) | Value::Json(s) => s.clone(),
            Value::Date(d) => fmt_date(*d),
            Value::Time(t) => fmt_time(*t),
            Value::Timestamp(t) => fmt_timestamp(*t),
            Value::Blob(b) => {
                let mut s = String::from("\\x");
                for x in b {
                    s.push_str(&format!("{x:02x}"));
                }
                s
            }
            Value::Uuid(u) => fmt_uuid(u),
        }
    }

    /// JSON rendering: integers and floats as numbers, DECIMAL as a string (exact),
    /// dates/times/UUID as strings, BLOB as a `\x`-prefixed hex string, JSON as its parsed value.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or_else(|| J::String(fmt_float(*f))),
            Value::Json(s) => serde_json::from_str(s).unwrap_or_else(|_| J::String(s.clone())),
            other => J::String(other.to_text()),
        }
    }

    /// Converts a bound parameter.
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(d) = Decimal::from_str(&n.to_string()).ok().filter(|_| !n.to_string().contains(['e', 'E'])) {
                    Value::Decimal(d)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            J::String(s) => Value::Text(s.clone()),
            other => Value::Json(other.to_string()),
        }
    }

    /// Truthiness for WHERE/HAVING/CHECK: Some(bool) or None for NULL.
    pub fn as_bool(&self) -> Result<Option<bool>> {
        match self {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(*b)),
            Value::Text(s) => parse_bool(s).map(Some),
            other => Err(type_mismatch(format!("expected BOOLEAN, got {}", other.type_name()))),
        }
    }
}

pub fn fmt_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else {
        format!("{f}")
    }
}

fn parse_bool(s: &str) -> Result<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "yes" | "y" | "on" | "1" => Ok(true),
        "f" | "false" | "no" | "n" | "off" | "0" => Ok(false),
        _ => Err(type_mismatch(format!("invalid input for BOOLEAN: '{s}'"))),
    }
}

// ---------- date/time ----------

/// Days since 1970-01-01 for a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// (year, month, day) for days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
                29
            } else {
                28
            }
        }
    }
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 9 {
        return None;
    }
    s.parse().ok()
}

fn parse_date_opt(s: &str) -> Option<i32> {
    let s = s.trim();
    let mut it = s.splitn(3, '-');
    let (y, m, d) = (num(it.next()?)?, num(it.next()?)?, num(it.next()?)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m as u32) as i64 || y > 9999 {
        return None;
    }
    i32::try_from(days_from_civil(y, m as u32, d as u32)).ok()
}

fn parse_time_opt(s: &str) -> Option<i64> {
    let s = s.trim();
    let (main, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let parts: Vec<&str> = main.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return None;
    }
    let h = num(parts[0])?;
    let mi = num(parts[1])?;
    let se = if parts.len() == 3 { num(parts[2])? } else { 0 };
    if h > 24 || mi > 59 || se > 60 || (h == 24 && (mi > 0 || se > 0)) {
        return None;
    }
    let mut micros = 0i64;
    if let Some(f) = frac {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits: String = f.chars().chain(std::iter::repeat('0')).take(6).collect();
        micros = digits.parse().ok()?;
    }
    Some(((h * 60 + mi) * 60 + se) * 1_000_000 + micros)
}

/// Parses `YYYY-MM-DD`.
pub fn parse_date(s: &str) -> Result<i32> {
    if let Some(d) = parse_date_opt(s) {
        return Ok(d);
    }
    // A timestamp literal is accepted and truncated to its date.
    if let Some(ts) = parse_timestamp_opt(s) {
        return Ok(ts.div_euclid(MICROS_PER_DAY) as i32);
    }
    Err(type_mismatch(format!("invalid input for DATE: '{s}'")))
}

/// Parses `HH:MM:SS[.ffffff]`.
pub fn parse_time(s: &str) -> Result<i64> {
    parse_time_opt(s).ok_or_else(|| type_mismatch(format!("invalid input for TIME: '{s}'")))
}

fn parse_timestamp_opt(s: &str) -> Option<i64> {
    let mut s = s.trim();
    if let Some(x) = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00")).or_else(|| s.strip_suffix("+00")) {
        s = x;
    }
    let (d, t) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let days = parse_date_opt(d)? as i64;
    let time = match t {
        Some(t) => parse_time_opt(t)?,
        None => 0,
    };
    Some(days * MICROS_PER_DAY + time)
}

/// Parses `YYYY-MM-DD HH:MM:SS[.ffffff]` (also `T` separator, trailing `Z`, or a bare date).
pub fn parse_timestamp(s: &str) -> Result<i64> {
    parse_timestamp_opt(s).ok_or_else(|| type_mismatch(format!("invalid input for TIMESTAMP: '{s}'")))
}

pub fn fmt_date(d: i32) -> String {
    let (y, m, dd) = civil_from_days(d as i64);
    format!("{y:04}-{m:02}-{dd:02}")
}

pub fn fmt_time(t: i64) -> String {
    let secs = t / 1_000_000;
    let frac = t % 1_000_000;
    let base = format!("{:02}:{:02}:{:02}", secs / 3600, (secs / 60) % 60, secs % 60);
    if frac == 0 {
        base
    } else {
        let f = format!("{frac:06}");
        format!("{base}.{}", f.trim_end_matches('0'))
    }
}

pub fn fmt_timestamp(t: i64) -> String {
    let days = t.div_euclid(MICROS_PER_DAY);
    let rem = t.rem_euclid(MICROS_PER_DAY);
    format!("{} {}", fmt_date(days as i32), fmt_time(rem))
}

pub fn fmt_uuid(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

pub fn parse_uuid(s: &str) -> Result<[u8; 16]> {
    let h: String = s.trim().trim_start_matches('{').trim_end_matches('}').chars().filter(|c| *c != '-').collect();
    let err = || type_mismatch(format!("invalid input for UUID: '{s}'"));
    if h.len() != 32 || !h.is_ascii() {
        return Err(err());
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&h[i * 2..i * 2 + 2], 16).map_err(|_| err())?;
    }
    Ok(out)
}

fn parse_blob(s: &str) -> Result<Vec<u8>> {
    if let Some(h) = s.strip_prefix("\\x") {
        if h.len() % 2 != 0 || !h.is_ascii() {
            return Err(type_mismatch("invalid hexadecimal BLOB literal"));
        }
        (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[i * 2..i * 2 + 2], 16).map_err(|_| type_mismatch("invalid hexadecimal BLOB literal")))
            .collect()
    } else {
        Ok(s.as_bytes().to_vec())
    }
}

// ---------- numbers ----------

fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Decimal(d) => d.to_f64(),
        _ => None,
    }
}

fn parse_number(s: &str) -> Result<Value> {
    let t = s.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if !t.contains(['e', 'E'])
        && let Ok(d) = Decimal::from_str(t)
    {
        return Ok(Value::Decimal(d));
    }
    match t.to_ascii_lowercase().as_str() {
        "nan" | "inf" | "infinity" | "-inf" | "-infinity" | "+inf" | "+infinity" => {}
        _ if t.chars().any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E') => {
            return Err(type_mismatch(format!("invalid input for a number: '{s}'")));
        }
        _ => {}
    }
    t.parse::<f64>().map(Value::Float).map_err(|_| type_mismatch(format!("invalid input for a number: '{s}'")))
}

/// Compares two non-null values, coercing text to the other side's type.
/// Returns None when either side is NULL.
pub fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>> {
    use Value::*;
    Ok(Some(match (a, b) {
        (Null, _) | (_, Null) => return Ok(None),
        (Int(x), Int(y)) => x.cmp(y),
        (Decimal(x), Decimal(y)) => x.cmp(y),
        (Int(x), Decimal(y)) => rust_decimal::Decimal::from(*x).cmp(y),
        (Decimal(x), Int(y)) => x.cmp(&rust_decimal::Decimal::from(*y)),
        (Int(_) | Float(_) | Decimal(_), Int(_) | Float(_) | Decimal(_)) => {
            let (x, y) = (to_f64(a).unwrap_or(f64::NAN), to_f64(b).unwrap_or(f64::NAN));
            float_cmp(x, y)
        }
        (Text(x), Text(y)) => x.cmp(y),
        (Bool(x), Bool(y)) => x.cmp(y),
        (Date(x), Date(y)) => x.cmp(y),
        (Time(x), Time(y)) => x.cmp(y),
        (Timestamp(x), Timestamp(y)) => x.cmp(y),
        (Date(x), Timestamp(y)) => (*x as i64 * MICROS_PER_DAY).cmp(y),
        (Timestamp(x), Date(y)) => x.cmp(&(*y as i64 * MICROS_PER_DAY)),
        (Blob(x), Blob(y)) => x.cmp(y),
        (Uuid(x), Uuid(y)) => x.cmp(y),
        (Json(x), Json(y)) | (Json(x), Text(y)) | (Text(x), Json(y)) => x.cmp(y),
        (Text(s), other) => return compare(&coerce_text(s, other)?, other),
        (other, Text(s)) => return compare(other, &coerce_text(s, other)?),
        _ => {
            return Err(type_mismatch(format!("cannot compare {} with {}", a.type_name(), b.type_name())));
        }
    }))
}

/// Floats ordered as PostgreSQL orders them: -0 equals 0, NaN equals NaN and
/// is greater than every number.
fn float_cmp(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Converts text to the type of `like` for comparisons.
fn coerce_text(s: &str, like: &Value) -> Result<Value> {
    Ok(match like {
        Value::Int(_) | Value::Float(_) | Value::Decimal(_) => parse_number(s)?,
        Value::Bool(_) => Value::Bool(parse_bool(s)?),
        Value::Date(_) => Value::Date(parse_date(s)?),
        Value::Time(_) => Value::Time(parse_time(s)?),
        Value::Timestamp(_) => Value::Timestamp(parse_timestamp(s)?),
        Value::Uuid(_) => Value::Uuid(parse_uuid(s)?),
        Value::Blob(_) => Value::Blob(parse_blob(s)?),
        _ => Value::Text(s.to_string()),
    })
}

/// Equality under SQL rules (None when NULL involved).
pub fn sql_eq(a: &Value, b: &Value) -> Result<Option<bool>> {
    Ok(compare(a, b)?.map(|o| o == Ordering::Equal))
}

/// Total order for sorting: NULL sorts after everything (NULLS LAST ascending);
/// values of incomparable types sort by a fixed type rank.
pub fn sort_cmp(a: &Value, b: &Value) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    match compare(a, b) {
        Ok(Some(o)) => o,
        _ => a.type_rank().cmp(&b.type_rank()),
    }
}

fn int_in_range(i: i64, ty: &SqlType) -> Result<Value> {
    if let Some((lo, hi)) = ty.int_range()
        && (i < lo || i > hi)
    {
        return Err(type_mismatch(format!("value {i} is out of range for type {}", ty.name())));
    }
    Ok(Value::Int(i))
}

fn decimal_to_int(d: Decimal, ty: &SqlType) -> Result<Value> {
    let r = d.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
    match r.to_i64() {
        Some(i) => int_in_range(i, ty),
        None => Err(type_mismatch(format!("value {d} is out of range for type {}", ty.name()))),
    }
}

fn fit_decimal(d: Decimal, ty: &SqlType) -> Result<Value> {
    if let SqlType::Decimal(Some((p, s))) = ty {
        let mut r = d.round_dp_with_strategy(*s, RoundingStrategy::MidpointAwayFromZero);
        r.rescale(*s);
        let int_digits = p - s;
        let limit = if int_digits >= 29 { None } else { Decimal::from_i128_with_scale(10i128.pow(int_digits), 0).into() };
        if let Some(l) = limit
            && r.abs() >= l
        {
            return Err(type_mismatch(format!("value {d} overflows {}", ty.name())));
        }
        Ok(Value::Decimal(r))
    } else {
        Ok(Value::Decimal(d))
    }
}

fn check_len(s: String, ty: &SqlType) -> Result<Value> {
    match ty {
        SqlType::Char(Some(n)) | SqlType::Varchar(Some(n)) => {
            let len = s.chars().count();
            // Trailing spaces beyond the limit are dropped silently, like PostgreSQL.
            if len > *n as usize {
                let trimmed = s.trim_end_matches(' ');
                if trimmed.chars().count() <= *n as usize {
                    return Ok(Value::Text(s.chars().take(*n as usize).collect()));
                }
                return Err(type_mismatch(format!("value too long for type {}", ty.name())));
            }
            Ok(Value::Text(s))
        }
        _ => Ok(Value::Text(s)),
    }
}

/// Converts `v` to column type `ty`. `explicit` is true for CAST (allows boolean<->integer
/// and truncating character lengths); false for assignment to a column.
pub fn cast(v: Value, ty: &SqlType, explicit: bool) -> Result<Value> {
    use SqlType as T;
    if v.is_null() {
        return Ok(Value::Null);
    }
    let bad = |v: &Value| type_mismatch(format!("cannot convert {} value '{}' to {}", v.type_name(), v.to_text(), ty.name()));
    Ok(match ty {
        T::TinyInt | T::SmallInt | T::Int | T::BigInt => match v {
            Value::Int(i) => int_in_range(i, ty)?,
            Value::Float(f) => {
                let r = f.round();
                if !r.is_finite() || r < i64::MIN as f64 || r > i64::MAX as f64 {
                    return Err(type_mismatch(format!("value {f} is out of range for type {}", ty.name())));
                }
                int_in_range(r as i64, ty)?
            }
            Value::Decimal(d) => decimal_to_int(d, ty)?,
            Value::Text(ref s) => match parse_number(s).map_err(|_| bad(&v))? {
                Value::Int(i) => int_in_range(i, ty)?,
                Value::Decimal(d) if explicit => decimal_to_int(d, ty)?,
                _ => return Err(bad(&v)),
            },
            Value::Bool(b) if explicit => Value::Int(b as i64),
            other => return Err(bad(&other)),
        },
        T::Real | T::Double => {
            let f = match v {
                Value::Int(i) => i as f64,
                Value::Float(f) => f,
                Value::Decimal(d) => d.to_f64().unwrap_or(f64::NAN),
                Value::Text(ref s) => to_f64(&parse_number(s).map_err(|_| bad(&v))?).unwrap_or(f64::NAN),
                other => return Err(bad(&other)),
            };
            if *ty == T::Real {
                let x = f as f32;
                Value::Float(format!("{x}").parse::<f64>().unwrap_or(x as f64))
            } else {
                Value::Float(f)
            }
        }
        T::Decimal(_) => {
            let d = match v {
                Value::Int(i) => Decimal::from(i),
                Value::Decimal(d) => d,
                Value::Float(f) => Decimal::from_f64(f).ok_or_else(|| bad(&Value::Float(f)))?,
                Value::Text(ref s) => match parse_number(s).map_err(|_| bad(&v))? {
                    Value::Int(i) => Decimal::from(i),
                    Value::Decimal(d) => d,
                    Value::Float(f) => Decimal::from_f64(f).ok_or_else(|| bad(&v))?,
                    _ => return Err(bad(&v)),
                },
                other => return Err(bad(&other)),
            };
            fit_decimal(d, ty)?
        }
        T::Char(_) | T::Varchar(_) | T::Text => {
            let n = match ty {
                T::Char(n) | T::Varchar(n) => *n,
                _ => None,
            };
            let s = match v {
                Value::Text(s) => s,
                Value::Bool(_) if !explicit => return Err(bad(&v)),
                other => other.to_text(),
            };
            if explicit {
                match n {
                    Some(n) => Value::Text(s.chars().take(n as usize).collect()),
                    None => Value::Text(s),
                }
            } else {
                check_len(s, ty)?
            }
        }
        T::Boolean => match v {
            Value::Bool(b) => Value::Bool(b),
            Value::Text(ref s) => Value::Bool(parse_bool(s)?),
            Value::Int(i) if explicit => Value::Bool(i != 0),
            other => return Err(bad(&other)),
        },
        T::Date => match v {
            Value::Date(d) => Value::Date(d),
            Value::Timestamp(t) => Value::Date(t.div_euclid(MICROS_PER_DAY) as i32),
            Value::Text(s) => Value::Date(parse_date(&s)?),
            other => return Err(bad(&other)),
        },
        T::Time => match v {
            Value::Time(t) => Value::Time(t),
            Value::Timestamp(t) => Value::Time(t.rem_euclid(MICROS_PER_DAY)),
            Value::Text(s) => Value::Time(parse_time(&s)?),
            other => return Err(bad(&other)),
        },
        T::Timestamp => match v {
            Value::Timestamp(t) => Value::Timestamp(t),
            Value::Date(d) => Value::Timestamp(d as i64 * MICROS_PER_DAY),
            Value::Text(s) => Value::Timestamp(parse_timestamp(&s)?),
            other => return Err(bad(&other)),
        },
        T::Blob => match v {
            Value::Blob(b) => Value::Blob(b),
            Value::Text(s) => Value::Blob(parse_blob(&s)?),
            other => return Err(bad(&other)),
        },
        T::Json => match v {
            Value::Json(s) => Value::Json(s),
            Value::Text(s) => match serde_json::from_str::<serde_json::Value>(&s) {
                Ok(j) => Value::Json(j.to_string()),
                Err(e) => return Err(type_mismatch(format!("invalid input for JSON: {e}"))),
            },
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => Value::Json(v.to_json().to_string()),
            Value::Decimal(d) => Value::Json(d.to_string()),
            other => return Err(bad(&other)),
        },
        T::Uuid => match v {
            Value::Uuid(u) => Value::Uuid(u),
            Value::Text(s) => Value::Uuid(parse_uuid(&s)?),
            other => return Err(bad(&other)),
        },
    })
}

/// Parses a numeric literal: integer, else exact decimal, else float.
pub fn number_literal(s: &str) -> Result<Value> {
    parse_number(s)
}

/// Microseconds since epoch for a Unix-ms clock value.
pub fn ts_from_ms(ms: i64) -> Value {
    Value::Timestamp(ms.saturating_mul(1000))
}
