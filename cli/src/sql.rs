//! `tessera sql`: statements run through `POST /api/v1/query`, one request
//! per statement (each commits on its own, as in psql), from `-c`, a file,
//! standard input, or an interactive shell with line editing, history,
//! multi-line statements and backslash commands.

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use serde_json::{Value, json};
use tessera_api::sql::split_statements;

use crate::client::{Api, segment};
use crate::error::{CliError, Position, Result};
use crate::output::{self, Format};

/// What the statements run against and how answers print.
pub struct Session<'a> {
    pub api: &'a Api,
    pub database: Option<String>,
    pub format: Format,
    pub timing: bool,
}

impl Session<'_> {
    /// Runs one statement and prints its answer.
    pub async fn run(&self, sql: &str, out: &mut impl Write) -> Result<()> {
        let mut body = json!({"sql": sql});
        if let Some(db) = &self.database {
            body["database"] = json!(db);
        }
        let started = Instant::now();
        let answer = self.api.post("/api/v1/query", body).await.map_err(|e| with_statement(e, sql))?;
        if answer["success"] == false {
            return Err(CliError::Sql(answer["error"].as_str().unwrap_or("the statement failed").to_string()));
        }
        print_answer(&answer, self.format, out)?;
        if self.timing {
            let server = answer["execution_time_ms"].as_u64().map(|ms| format!(", {ms} ms in the cluster")).unwrap_or_default();
            writeln!(out, "Time: {:.3} ms{server}", started.elapsed().as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }

    /// `\dt`, `\d NAME`, `\l`: what the router lists, as tables.
    async fn describe(&self, what: Describe<'_>, out: &mut impl Write) -> Result<()> {
        let db = self.database.as_deref().map(|d| format!("?database={}", segment(d))).unwrap_or_default();
        match what {
            Describe::Tables => {
                let answer = self.api.get(&format!("/api/v1/tables{db}")).await?;
                if self.format == Format::Json {
                    return output::json(out, &answer);
                }
                let tables = answer["tables"].as_array().cloned().unwrap_or_default();
                let rows: Vec<Vec<Value>> = tables
                    .iter()
                    .map(|t| match t {
                        Value::String(name) => vec![json!(name), Value::Null],
                        t => vec![t["name"].clone(), t["rows"].clone()],
                    })
                    .collect();
                output::rows(out, &["table".into(), "rows".into()], &rows, self.format)
            }
            Describe::Table(name) => {
                let answer = self.api.get(&format!("/api/v1/tables/{}{db}", segment(name))).await?;
                if self.format == Format::Json {
                    return output::json(out, &answer);
                }
                let columns = answer["columns"].as_array().or_else(|| answer["schema"]["columns"].as_array()).cloned().unwrap_or_default();
                let rows: Vec<Vec<Value>> = columns
                    .iter()
                    .map(|c| {
                        let key = c["primary_key"].as_bool().or_else(|| c["primary"].as_bool()).unwrap_or(false);
                        let nullable = c["nullable"].as_bool().map(|n| json!(if n { "yes" } else { "no" })).unwrap_or(Value::Null);
                        let ty = if c["type"].is_null() { c["data_type"].clone() } else { c["type"].clone() };
                        vec![c["name"].clone(), ty, nullable, json!(if key { "primary key" } else { "" })]
                    })
                    .collect();
                output::rows(out, &["column".into(), "type".into(), "nullable".into(), "key".into()], &rows, self.format)
            }
            Describe::Databases => {
                let answer = self.api.get("/api/v1/databases").await?;
                if self.format == Format::Json {
                    return output::json(out, &answer);
                }
                let rows: Vec<Vec<Value>> =
                    answer["databases"].as_array().cloned().unwrap_or_default().into_iter().map(|d| vec![d]).collect();
                output::rows(out, &["database".into()], &rows, self.format)
            }
        }
    }
}

enum Describe<'a> {
    Tables,
    Table(&'a str),
    Databases,
}

/// A SQL error keeps the statement, so its position can be shown under it.
fn with_statement(e: CliError, sql: &str) -> CliError {
    match e {
        CliError::Refused { code, message, position, .. } => CliError::Sql(render_error(&code, &message, position, sql)),
        other => other,
    }
}

/// `ERROR (CODE): message`, then the statement's line with a caret under the column.
pub fn render_error(code: &str, message: &str, position: Option<Position>, sql: &str) -> String {
    let mut text = format!("ERROR ({code}): {message}");
    if let Some(p) = position
        && let Some(line) = sql.lines().nth(p.line.saturating_sub(1) as usize)
    {
        let prefix = format!("LINE {}: ", p.line);
        let caret = " ".repeat(prefix.chars().count() + (p.column.saturating_sub(1) as usize).min(line.chars().count()));
        text.push_str(&format!("\n{prefix}{line}\n{caret}^"));
    }
    text
}

/// Prints the answer of one statement: its rows, or what it changed.
fn print_answer(answer: &Value, format: Format, out: &mut impl Write) -> Result<()> {
    if format == Format::Json {
        return output::json(out, answer);
    }
    let data = &answer["data"];
    let columns: Vec<String> = data["columns"].as_array().map(|c| c.iter().map(output::cell).collect()).unwrap_or_default();
    if !columns.is_empty() {
        let rows: Vec<Vec<Value>> =
            data["rows"].as_array().map(|r| r.iter().map(|row| row.as_array().cloned().unwrap_or_default()).collect()).unwrap_or_default();
        output::rows(out, &columns, &rows, format)?;
    } else if format == Format::Table {
        match answer["rows_affected"].as_u64().or_else(|| data["rows_affected"].as_u64()).filter(|n| *n > 0) {
            Some(n) => writeln!(out, "OK, {n} row{} affected", if n == 1 { "" } else { "s" })?,
            None => writeln!(out, "OK")?,
        }
    }
    if answer["metadata"]["truncated"] == true {
        eprintln!("warning: {}", answer["metadata"]["message"].as_str().unwrap_or("the result was cut at the row limit"));
    }
    Ok(())
}

/// `-c SQL` (several statements allowed), `-f FILE` (`-` for standard
/// input), or standard input when it is not a terminal: runs them, stopping
/// at the first error.
pub async fn run_batch(session: &Session<'_>, command: Option<&str>, file: Option<&std::path::Path>) -> Result<()> {
    let text = match (command, file) {
        (Some(sql), _) => sql.to_string(),
        (None, Some(path)) if path.as_os_str() == "-" => read_stdin()?,
        (None, Some(path)) => std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("reading {}: {e}", path.display())))?,
        (None, None) => read_stdin()?,
    };
    let split = split_statements(&text);
    let mut statements = split.complete;
    if !split.rest.trim().is_empty() && !is_only_comments(&split.rest) {
        statements.push(split.rest.trim().to_string());
    }
    let mut out = std::io::stdout().lock();
    for statement in statements {
        session.run(&statement, &mut out).await?;
    }
    Ok(())
}

fn is_only_comments(text: &str) -> bool {
    text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    Ok(text)
}

/// Whether `tessera sql` without `-c`/`-f` should open the interactive shell.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

const HELP: &str = "\
Statements end with ; and may span lines. Backslash commands:
  \\dt          list tables            \\d NAME   describe table NAME
  \\l           list databases         \\c DB     use database DB
  \\timing      toggle timing          \\format table|json|csv
  \\?           this help              \\q        quit (or Ctrl-D)";

/// The interactive shell. Errors are printed and the shell goes on.
pub async fn repl(mut session: Session<'_>) -> Result<()> {
    let history = crate::profiles::config_dir().ok().map(|d| d.join("sql_history"));
    let mut editor = rustyline::DefaultEditor::new().map_err(|e| CliError::Local(format!("terminal: {e}")))?;
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    println!("tessera sql shell on {} — \\? for help, \\q to quit", session.api.url);
    let mut buffer = String::new();
    loop {
        let db = session.database.clone().unwrap_or_else(|| "default".into());
        let prompt = if buffer.is_empty() { format!("{db}=> ") } else { format!("{db}-> ") };
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(CliError::Local(format!("terminal: {e}"))),
        };
        let trimmed = line.trim();
        if buffer.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            let mut out = std::io::stdout().lock();
            match backslash(&mut session, trimmed, &mut out).await {
                Ok(Flow::Quit) => break,
                Ok(Flow::Continue) => {}
                Err(e) => eprintln!("{e}"),
            }
            continue;
        }
        if trimmed.is_empty() && buffer.is_empty() {
            continue;
        }
        buffer.push_str(&line);
        buffer.push('\n');
        let split = split_statements(&buffer);
        if split.complete.is_empty() && !buffer.trim().is_empty() && !buffer.contains(';') {
            continue;
        }
        let _ = editor.add_history_entry(buffer.trim_end());
        let mut out = std::io::stdout().lock();
        for statement in &split.complete {
            if let Err(e) = session.run(statement, &mut out).await {
                eprintln!("{e}");
                if matches!(e, CliError::Auth(_) | CliError::Unavailable(_)) {
                    break;
                }
            }
        }
        buffer = split.rest.trim_start().to_string();
    }
    if let Some(path) = &history
        && let Some(dir) = path.parent()
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
        let _ = editor.save_history(path);
    }
    Ok(())
}

enum Flow {
    Continue,
    Quit,
}

async fn backslash(session: &mut Session<'_>, command: &str, out: &mut impl Write) -> Result<Flow> {
    let mut words = command.split_whitespace();
    let name = words.next().unwrap_or("");
    let arg = words.next();
    match (name, arg) {
        ("\\q", _) => return Ok(Flow::Quit),
        ("\\?" | "\\h" | "\\help", _) => writeln!(out, "{HELP}")?,
        ("\\dt", _) => session.describe(Describe::Tables, out).await?,
        ("\\d", Some(table)) => session.describe(Describe::Table(table), out).await?,
        ("\\d", None) => session.describe(Describe::Tables, out).await?,
        ("\\l", _) => session.describe(Describe::Databases, out).await?,
        ("\\c", Some(db)) => {
            session.database = Some(db.to_string());
            writeln!(out, "using database {db}")?;
        }
        ("\\timing", arg) => {
            session.timing = match arg {
                Some("on") => true,
                Some("off") => false,
                _ => !session.timing,
            };
            writeln!(out, "Timing is {}.", if session.timing { "on" } else { "off" })?;
        }
        ("\\format", Some(f)) => {
            session.format = <Format as clap::ValueEnum>::from_str(f, true)
                .map_err(|_| CliError::Usage(format!("unknown format {f:?}: table, json or csv")))?;
        }
        _ => return Err(CliError::Usage(format!("unknown command {command:?}: \\? lists them"))),
    }
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_its_position_under_the_statement() {
        let text = render_error("PARSE_ERROR", "unexpected FORM", Some(Position { line: 2, column: 10 }), "SELECT a\nSELECT b FORM t");
        assert_eq!(text, "ERROR (PARSE_ERROR): unexpected FORM\nLINE 2: SELECT b FORM t\n                 ^");
    }
}
