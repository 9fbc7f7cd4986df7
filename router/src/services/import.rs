//! Bulk import, the part without networking: parsing CSV and JSON rows, and
//! cutting them into batches (each batch becomes one Raft command).
//!
//! Line numbers: CSV rows carry their physical line in `data` (the header is
//! line 1, so the first data row is line 2; a quoted field spanning lines counts
//! them). JSON rows carry their 1-based position: the element's index in an
//! array, or the line of newline-delimited JSON (blank lines count as lines).

use serde_json::Value;
use tessera_api::import::ImportRow;

/// Default rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 1_000;
/// Largest accepted `batch_size`.
pub const MAX_BATCH_SIZE: usize = 10_000;
/// A batch also closes when its data reaches this many bytes: openraft 0.9
/// must replicate an entry within one heartbeat interval (a node refuses a
/// SQL write over 1.5 MiB).
pub const MAX_BATCH_BYTES: usize = 1024 * 1024;

/// Why the data could not be read; `line` as described in the module docs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: u64,
    pub message: String,
}

fn at(line: u64, message: impl Into<String>) -> ParseError {
    ParseError { line, message: message.into() }
}

/// The header of CSV data (trimmed column names), checked for blanks and repeats.
pub fn csv_header(data: &str) -> Result<Vec<String>, ParseError> {
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(data.as_bytes());
    let header = rdr.headers().map_err(|e| at(1, format!("unreadable CSV header: {e}")))?;
    let names: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    if names.is_empty() || names.iter().all(String::is_empty) {
        return Err(at(1, "the CSV data needs a header row naming the columns"));
    }
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() {
            return Err(at(1, format!("column {} of the header has no name", i + 1)));
        }
        if names[..i].contains(n) {
            return Err(at(1, format!("column {n:?} appears twice in the header")));
        }
    }
    Ok(names)
}

/// Rows of CSV data with a header row. Every field travels as a string, an
/// empty field as null; the engine converts them to the column types.
pub fn parse_csv(data: &str) -> Result<Vec<ImportRow>, ParseError> {
    let names = csv_header(data)?;
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(data.as_bytes());
    let mut rows = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or(0);
            at(line, format!("malformed CSV: {e}"))
        })?;
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        if rec.len() == 1 && rec.get(0) == Some("") && names.len() > 1 {
            continue; // a blank line
        }
        if rec.len() != names.len() {
            return Err(at(line, format!("the row has {} fields but the header has {}", rec.len(), names.len())));
        }
        let values = names
            .iter()
            .zip(rec.iter())
            .map(|(n, f)| (n.clone(), if f.is_empty() { Value::Null } else { Value::String(f.to_string()) }))
            .collect();
        rows.push(ImportRow { line, values });
    }
    Ok(rows)
}

fn object_row(line: u64, v: Value) -> Result<ImportRow, ParseError> {
    match v {
        Value::Object(m) => Ok(ImportRow { line, values: m.into_iter().collect() }),
        other => Err(at(line, format!("a row must be a JSON object, not {}", kind(&other)))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Rows of JSON data: an array of objects, or one object per line.
pub fn parse_json(data: &str) -> Result<Vec<ImportRow>, ParseError> {
    if data.trim_start().starts_with('[') {
        let items: Vec<Value> = serde_json::from_str(data).map_err(|e| at(e.line() as u64, format!("invalid JSON array: {e}")))?;
        return json_rows(items);
    }
    let mut rows = Vec::new();
    for (i, text) in data.lines().enumerate() {
        let line = i as u64 + 1;
        if text.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(text).map_err(|e| at(line, format!("invalid JSON: {e}")))?;
        rows.push(object_row(line, v)?);
    }
    Ok(rows)
}

/// Rows given directly as a JSON array (1-based element positions).
pub fn json_rows(items: Vec<Value>) -> Result<Vec<ImportRow>, ParseError> {
    items.into_iter().enumerate().map(|(i, v)| object_row(i as u64 + 1, v)).collect()
}

/// Approximate encoded size of a value (for batch byte limits).
pub fn approx_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(approx_size).sum::<usize>(),
        Value::Object(m) => 2 + m.iter().map(|(k, x)| k.len() + 3 + approx_size(x)).sum::<usize>(),
    }
}

/// Cuts `items` into batches of at most `size` items and about [`MAX_BATCH_BYTES`].
pub fn batches<T>(items: Vec<T>, size: usize, weigh: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let (mut cur, mut bytes) = (Vec::new(), 0usize);
    for it in items {
        let w = weigh(&it);
        if !cur.is_empty() && (cur.len() >= size || bytes + w > MAX_BATCH_BYTES) {
            out.push(std::mem::take(&mut cur));
            bytes = 0;
        }
        bytes += w;
        cur.push(it);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Size of an import row, for [`batches`].
pub fn row_size(r: &ImportRow) -> usize {
    r.values.iter().map(|(k, v)| k.len() + approx_size(v)).sum::<usize>() + 8
}

/// The `batch_size` option checked against its bounds.
pub fn batch_size(requested: Option<usize>) -> Result<usize, String> {
    match requested {
        None => Ok(DEFAULT_BATCH_SIZE),
        Some(n) if (1..=MAX_BATCH_SIZE).contains(&n) => Ok(n),
        Some(n) => Err(format!("batch_size must be between 1 and {MAX_BATCH_SIZE}, not {n}")),
    }
}

/// A duration given as JSON: a bare number is seconds, a string follows the
/// one duration grammar of the interface (`"500ms"`, `"30s"`, `"15m"`, `"2h"`,
/// `"7d"`, `"2w"`, `"1h30m"`; see `tessera_timeseries::parse_duration`), as
/// milliseconds.
pub fn parse_duration_ms(v: &Value) -> Result<i64, String> {
    let bad = || format!("invalid duration {v}: use seconds or a string such as \"30s\", \"15m\", \"2h\", \"7d\"");
    match v {
        // Whole seconds, at most i64::MAX milliseconds (a larger number once wrapped to -1 ms).
        Value::Number(n) => n.as_u64().and_then(|s| i64::try_from(s).ok()).and_then(|s| s.checked_mul(1000)).ok_or_else(bad),
        Value::String(s) => tessera_timeseries::parse_duration(s).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_duration_beyond_i64_milliseconds_is_refused() {
        assert_eq!(parse_duration_ms(&json!(90)), Ok(90_000));
        assert!(parse_duration_ms(&json!(9_223_372_036_854_775_808u64)).is_err(), "it wrapped to -1 ms");
        assert!(parse_duration_ms(&json!(i64::MAX / 1000 + 1)).is_err());
    }

    #[test]
    fn csv_rows_carry_their_lines() {
        let rows = parse_csv("id,name\n1,a\n2,\"b\nc\"\n3,\n").unwrap();
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), vec![2, 3, 5]);
        assert_eq!(rows[1].values[1], ("name".into(), json!("b\nc")));
        assert_eq!(rows[2].values[1], ("name".into(), Value::Null));
    }

    #[test]
    fn csv_errors_name_the_line() {
        assert_eq!(parse_csv("id,name\n1,a\n2\n").unwrap_err().line, 3);
        assert_eq!(parse_csv("id,id\n1,2\n").unwrap_err().line, 1);
        assert_eq!(parse_csv("").unwrap_err().line, 1);
    }

    #[test]
    fn json_arrays_and_lines() {
        let rows = parse_json(r#"[{"a":1},{"a":2}]"#).unwrap();
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 2]);
        let rows = parse_json("{\"a\":1}\n\n{\"a\":2}\n").unwrap();
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(parse_json("{\"a\":1}\n[1]\n").unwrap_err().line, 2);
        assert_eq!(parse_json("{\"a\":1}\n{oops\n").unwrap_err().line, 2);
    }

    #[test]
    fn batching_respects_count() {
        let b = batches((0..25).collect::<Vec<_>>(), 10, |_| 1);
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![10, 10, 5]);
        assert!(batch_size(Some(0)).is_err() && batch_size(Some(MAX_BATCH_SIZE + 1)).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms(&json!(5)).unwrap(), 5_000);
        assert_eq!(parse_duration_ms(&json!("2h")).unwrap(), 7_200_000);
        assert_eq!(parse_duration_ms(&json!("0s")).unwrap(), 0);
        assert_eq!(parse_duration_ms(&json!("1h30m")).unwrap(), 5_400_000);
        assert!(parse_duration_ms(&json!("2 weeks")).is_err());
        assert!(parse_duration_ms(&json!("-5s")).is_err());
    }
}
