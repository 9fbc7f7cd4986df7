//! How answers are printed: aligned tables for people (as psql does), JSON
//! (the router's answer as it came) or CSV for scripts.

use std::io::Write;

use serde_json::Value;

use crate::error::{CliError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// A cell as text: strings as they are, NULL empty, anything else as JSON.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `rows` under `columns` in `format` (JSON: an array of objects).
pub fn rows(out: &mut impl Write, columns: &[String], rows: &[Vec<Value>], format: Format) -> Result<()> {
    match format {
        Format::Table => table(out, columns, rows),
        Format::Csv => {
            let mut w = csv::Writer::from_writer(out);
            let fail = |e: csv::Error| CliError::Local(e.to_string());
            w.write_record(columns).map_err(fail)?;
            for row in rows {
                w.write_record(row.iter().map(cell)).map_err(fail)?;
            }
            w.flush()?;
            Ok(())
        }
        Format::Json => {
            let objects: Vec<Value> =
                rows.iter().map(|r| Value::Object(columns.iter().cloned().zip(r.iter().cloned()).collect())).collect();
            json(out, &Value::Array(objects))
        }
    }
}

/// JSON objects as rows of the fields `columns` (a missing field is empty).
pub fn items(out: &mut impl Write, items: &[Value], columns: &[&str], format: Format) -> Result<()> {
    let table: Vec<Vec<Value>> = items.iter().map(|item| columns.iter().map(|c| item[*c].clone()).collect()).collect();
    let names: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    rows(out, &names, &table, format)
}

pub fn json(out: &mut impl Write, v: &Value) -> Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(v).unwrap_or_default())?;
    Ok(())
}

/// An aligned table, numbers to the right, with a `(N rows)` footer.
fn table(out: &mut impl Write, columns: &[String], rows: &[Vec<Value>]) -> Result<()> {
    let texts: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(cell).map(|c| one_line(&c)).collect()).collect();
    let width = |i: usize| {
        let header = columns.get(i).map_or(0, |c| c.chars().count());
        texts.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0).max(header)
    };
    let widths: Vec<usize> = (0..columns.len()).map(width).collect();
    let header: Vec<String> = columns.iter().zip(&widths).map(|(c, w)| center(c, *w)).collect();
    writeln!(out, " {}", header.join(" | ").trim_end())?;
    writeln!(out, "{}", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"))?;
    for (row, values) in texts.iter().zip(rows) {
        let cells: Vec<String> = (0..columns.len())
            .map(|i| {
                let text = row.get(i).map_or("", String::as_str);
                let pad = widths[i].saturating_sub(text.chars().count());
                if values.get(i).is_some_and(Value::is_number) {
                    format!("{}{text}", " ".repeat(pad))
                } else {
                    format!("{text}{}", " ".repeat(pad))
                }
            })
            .collect();
        writeln!(out, " {}", cells.join(" | ").trim_end())?;
    }
    writeln!(out, "({} row{})", rows.len(), if rows.len() == 1 { "" } else { "s" })?;
    Ok(())
}

fn center(s: &str, width: usize) -> String {
    let pad = width.saturating_sub(s.chars().count());
    format!("{}{s}{}", " ".repeat(pad / 2), " ".repeat(pad - pad / 2))
}

/// Line breaks and tabs shown escaped, so a row stays on one line.
fn one_line(s: &str) -> String {
    if s.contains(['\n', '\r', '\t']) { s.replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t") } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(format: Format) -> String {
        let mut out = Vec::new();
        let columns = vec!["id".to_string(), "name".to_string()];
        rows(&mut out, &columns, &[vec![json!(1), json!("ada")], vec![json!(22), json!("a,\"b\"")], vec![json!(3), Value::Null]], format)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_table_is_aligned_with_numbers_to_the_right() {
        assert_eq!(render(Format::Table), " id | name\n----+-------\n  1 | ada\n 22 | a,\"b\"\n  3 |\n(3 rows)\n");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(render(Format::Csv), "id,name\n1,ada\n22,\"a,\"\"b\"\"\"\n3,\n");
    }

    #[test]
    fn json_is_an_array_of_objects() {
        let v: Value = serde_json::from_str(&render(Format::Json)).unwrap();
        assert_eq!(v[1], json!({"id": 22, "name": "a,\"b\""}));
    }
}
