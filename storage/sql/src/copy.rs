//! `COPY table [(columns)] FROM STDIN [WITH (options)]` as a PostgreSQL
//! client sends it before its data: what the listener needs to read the data
//! (format and options), and the statement the engine runs with the rows as
//! its parameters.

use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement};

use crate::error::{parse, unsupported};
use crate::{SqlError, parser};

/// A `COPY … FROM STDIN`.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyFrom {
    pub table: String,
    /// The columns named, in order (empty: every column of the table).
    pub columns: Vec<String>,
    pub options: CopyOptions,
}

/// How the data of a `COPY` is written (PostgreSQL's defaults per format).
#[derive(Debug, Clone, PartialEq)]
pub struct CopyOptions {
    /// CSV; otherwise PostgreSQL's text format.
    pub csv: bool,
    pub delimiter: char,
    /// The field that means NULL (`\N` in text, an unquoted empty field in CSV).
    pub null: String,
    /// The first line names the columns and is skipped.
    pub header: bool,
    pub quote: char,
    pub escape: char,
}

impl CopyOptions {
    fn text() -> Self {
        CopyOptions { csv: false, delimiter: '\t', null: "\\N".into(), header: false, quote: '"', escape: '"' }
    }

    fn csv() -> Self {
        CopyOptions { csv: true, delimiter: ',', null: String::new(), ..CopyOptions::text() }
    }
}

impl CopyFrom {
    /// The statement the engine runs, each row one parameter (an array of
    /// its fields, text or null).
    pub fn statement(&self) -> String {
        let quoted = |n: &str| format!("\"{}\"", n.replace('"', "\"\""));
        let columns = if self.columns.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.columns.iter().map(|c| quoted(c)).collect::<Vec<_>>().join(", "))
        };
        format!("COPY {}{columns} FROM STDIN;", quoted(&self.table))
    }
}

/// The `COPY … FROM STDIN` that `sql` is, `None` when it is no COPY; a COPY
/// this engine does not take (`TO`, a file or program, binary) is an error.
pub fn copy_from_stdin(sql: &str) -> Result<Option<CopyFrom>, SqlError> {
    parser::on_request_stack(|| {
        let starts_with_copy = sql.trim_start().get(..4).is_some_and(|w| w.eq_ignore_ascii_case("copy"));
        if !starts_with_copy {
            return Ok(None);
        }
        // sqlparser reads a COPY FROM STDIN's inline rows after its `;`: there are none.
        let sql = boolean_words(sql);
        let mut stmts = parser::parse_statements(&format!("{};", sql.trim_end().trim_end_matches(';')))?;
        if stmts.len() != 1 {
            return Err(parse("a COPY is one statement"));
        }
        let Statement::Copy { source, to, target, options, legacy_options, .. } = stmts.pop().expect("one statement") else {
            return Ok(None);
        };
        let (table_name, columns) = match (source, to, target) {
            (CopySource::Table { table_name, columns }, false, CopyTarget::Stdin) => (table_name, columns),
            _ => return Err(unsupported("only COPY table [(columns)] FROM STDIN is supported")),
        };
        let mut format = CopyOptions::text();
        let mut set: Vec<CopyOption> = Vec::new();
        for o in options {
            match o {
                CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                    "text" => format = CopyOptions::text(),
                    "csv" => format = CopyOptions::csv(),
                    "binary" => return Err(unsupported("COPY in binary format is not supported: use text or csv")),
                    other => return Err(parse(format!("COPY format \"{other}\" not recognized"))),
                },
                other => set.push(other),
            }
        }
        for o in legacy_options {
            match o {
                CopyLegacyOption::Binary => return Err(unsupported("COPY in binary format is not supported: use text or csv")),
                CopyLegacyOption::Csv(csv) => {
                    format = CopyOptions::csv();
                    for c in csv {
                        set.push(match c {
                            CopyLegacyCsvOption::Header => CopyOption::Header(true),
                            CopyLegacyCsvOption::Quote(q) => CopyOption::Quote(q),
                            CopyLegacyCsvOption::Escape(e) => CopyOption::Escape(e),
                            other => return Err(unsupported(format!("COPY option {other} is not supported"))),
                        });
                    }
                }
                CopyLegacyOption::Delimiter(d) => set.push(CopyOption::Delimiter(d)),
                CopyLegacyOption::Null(n) => set.push(CopyOption::Null(n)),
                CopyLegacyOption::Header => set.push(CopyOption::Header(true)),
                other => return Err(unsupported(format!("COPY option {other} is not supported"))),
            }
        }
        let escape_given = set.iter().any(|o| matches!(o, CopyOption::Escape(_)));
        for o in set {
            match o {
                CopyOption::Delimiter(d) => format.delimiter = d,
                CopyOption::Null(n) => format.null = n,
                CopyOption::Header(h) => format.header = h,
                CopyOption::Quote(q) if format.csv => format.quote = q,
                CopyOption::Escape(e) if format.csv => format.escape = e,
                CopyOption::Quote(_) | CopyOption::Escape(_) => return Err(parse("COPY QUOTE and ESCAPE are available only in CSV mode")),
                CopyOption::Encoding(e) if e.eq_ignore_ascii_case("utf8") || e.eq_ignore_ascii_case("utf-8") => {}
                CopyOption::Freeze(_) => {}
                other => return Err(unsupported(format!("COPY option {other} is not supported"))),
            }
        }
        if format.csv && !escape_given {
            format.escape = format.quote;
        }
        if format.csv && format.delimiter == format.quote {
            return Err(parse("COPY delimiter and quote must be different"));
        }
        if format.delimiter == '\n' || format.delimiter == '\r' || (!format.csv && format.delimiter == '\\') {
            return Err(parse("COPY delimiter cannot be newline, carriage return or (in text format) backslash"));
        }
        let table = crate::exec::object_name(&table_name);
        let columns = columns.iter().map(|c| c.value.clone()).collect();
        Ok(Some(CopyFrom { table, columns, options: format }))
    })
}

/// PostgreSQL takes `on`/`off` (and `1`/`0`) for a COPY's boolean options;
/// sqlparser takes `true`/`false`.
fn boolean_words(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut previous = String::new();
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_ascii_alphanumeric() || c == '_' {
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len())
        } else {
            c.len_utf8()
        };
        let token = &rest[..len];
        rest = &rest[len..];
        if token.trim().is_empty() {
            out.push_str(token);
            continue;
        }
        let option = matches!(previous.as_str(), "freeze" | "header");
        match token.to_ascii_lowercase().as_str() {
            "on" | "1" if option => out.push_str("true"),
            "off" | "0" if option => out.push_str("false"),
            _ => out.push_str(token),
        }
        previous = token.to_ascii_lowercase();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_statements_and_their_options() {
        let c = copy_from_stdin("COPY accounts (id, owner) FROM STDIN").unwrap().unwrap();
        assert_eq!((c.table.as_str(), c.columns.clone()), ("accounts", vec!["id".to_string(), "owner".to_string()]));
        assert_eq!(c.options, CopyOptions::text());
        assert_eq!(c.statement(), r#"COPY "accounts" ("id", "owner") FROM STDIN;"#);
        let c = copy_from_stdin("copy t from stdin with (format csv, header true, delimiter ';', null 'NA')").unwrap().unwrap();
        assert!(c.options.csv && c.options.header && c.options.delimiter == ';' && c.options.null == "NA");
        let c = copy_from_stdin("COPY t FROM STDIN CSV HEADER").unwrap().unwrap();
        assert!(c.options.csv && c.options.header && c.options.delimiter == ',');
        let c = copy_from_stdin("copy pgbench_accounts from stdin with (freeze on, header off)").unwrap().unwrap();
        assert!(!c.options.header && c.table == "pgbench_accounts");
        assert_eq!(copy_from_stdin("SELECT 1").unwrap(), None);
        assert!(copy_from_stdin("COPY t TO STDOUT").is_err());
        assert!(copy_from_stdin("COPY t FROM STDIN WITH (FORMAT binary)").is_err());
        assert!(copy_from_stdin("COPY t FROM '/etc/passwd'").is_err());
    }
}
