//! Operations: backups (with progress), bulk import of files in batches
//! (with progress and a summary), users and roles, the audit trail and a
//! data subject's erasure with its certificate.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::segment;
use crate::commands::connect;
use crate::error::{CliError, Result};
use crate::output::{self, Format};
use crate::{Global, progress};

fn stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

#[derive(Subcommand)]
pub enum BackupCommand {
    /// Back up every group (waits until it is complete).
    Create {
        /// Encrypt it with the cluster's backup key.
        #[arg(long)]
        encrypted: bool,
    },
    /// The backups.
    List,
    /// Restore a backup into this cluster.
    Restore { backup_id: String },
}

pub async fn backup(g: &Global, command: BackupCommand) -> Result<()> {
    let api = connect(g)?;
    match command {
        BackupCommand::Create { encrypted } => {
            let mut answer = api.post("/api/v1/admin/backup", json!({"encrypted": encrypted})).await?;
            let id = answer["backup_id"].as_str().unwrap_or_default().to_string();
            let bar = progress::items(answer["groups_total"].as_u64().unwrap_or(0), &format!("backup {id}"));
            // A backup still running is followed until it ends.
            while answer["state"] == "running" {
                bar.set_position(answer["groups_done"].as_u64().unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(500)).await;
                answer = api.get(&format!("/api/v1/admin/backups/{}", segment(&id))).await?;
            }
            bar.finish_and_clear();
            if answer["state"] == "failed" {
                return Err(CliError::Unavailable(format!("backup {id} failed: {}", output::cell(&answer["error"]))));
            }
            if g.output == Format::Json {
                return output::json(&mut stdout(), &answer);
            }
            writeln!(
                stdout(),
                "backup {id}: {} groups, {} bytes{}",
                output::cell(&answer["groups_total"]),
                output::cell(&answer["size_bytes"]),
                if answer["encrypted"] == true { ", encrypted" } else { "" }
            )?;
        }
        BackupCommand::List => {
            let answer = api.get("/api/v1/admin/backups").await?;
            if g.output == Format::Json {
                return output::json(&mut stdout(), &answer);
            }
            let items = answer["backups"].as_array().cloned().unwrap_or_default();
            output::items(&mut stdout(), &items, &["backup_id", "state", "created_at", "size_bytes", "encrypted"], g.output)?;
        }
        BackupCommand::Restore { backup_id } => {
            let answer = api.post("/api/v1/admin/restore", json!({"backup_id": backup_id})).await?;
            if g.output == Format::Json {
                return output::json(&mut stdout(), &answer);
            }
            let groups = answer["groups"].as_array().map_or(0, Vec::len);
            writeln!(stdout(), "restored backup {backup_id}: {groups} groups in {} ms", output::cell(&answer["took_ms"]))?;
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum ImportCommand {
    /// Rows of a CSV (with a header) or JSON (an array of objects) file into TABLE.
    Sql {
        file: PathBuf,
        #[arg(long)]
        table: String,
        #[arg(long, short = 'd')]
        database: Option<String>,
        /// Rows per request.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// What a row whose key exists does: error, skip or replace.
        #[arg(long)]
        on_conflict: Option<String>,
    },
    /// Key-value pairs from a JSON file: an object (key → value) or an array of {key, value}.
    Kv {
        file: PathBuf,
        #[arg(long, default_value_t = 1000)]
        batch: usize,
    },
}

/// What an import did, summed over its batches.
#[derive(Default)]
struct Summary {
    imported: u64,
    skipped: u64,
    errors: Vec<Value>,
}

impl Summary {
    fn add(&mut self, answer: &Value, first_row: usize) {
        self.imported += answer["rows_imported"].as_u64().unwrap_or(0);
        self.skipped += answer["rows_skipped"].as_u64().unwrap_or(0);
        for e in answer["errors"].as_array().cloned().unwrap_or_default() {
            let mut e = e;
            if let Some(i) = e["index"].as_u64() {
                e["row"] = json!(first_row as u64 + i + 1);
            }
            self.errors.push(e);
        }
    }
}

pub async fn import(g: &Global, command: ImportCommand) -> Result<()> {
    let api = connect(g)?;
    let (path, batches, target) = match &command {
        ImportCommand::Sql { file, table, database, batch, on_conflict } => {
            let rows = read_rows(file)?;
            let batches: Vec<(usize, Value)> = rows
                .chunks((*batch).max(1))
                .enumerate()
                .map(|(i, chunk)| {
                    let mut body = json!({"table": table, "format": "json", "data": chunk});
                    if let Some(db) = database {
                        body["database"] = json!(db);
                    }
                    if let Some(c) = on_conflict {
                        body["options"] = json!({"on_conflict": c});
                    }
                    (i * batch, body)
                })
                .collect();
            ("/api/v1/import/sql", batches, format!("table {table}"))
        }
        ImportCommand::Kv { file, batch } => {
            let pairs = read_pairs(file)?;
            let batches = pairs.chunks((*batch).max(1)).enumerate().map(|(i, chunk)| (i * batch, json!({"pairs": chunk}))).collect();
            ("/api/v1/import/kv", batches, "key-value".to_string())
        }
    };
    let total: u64 = batches.iter().map(|(_, b)| b["data"].as_array().or_else(|| b["pairs"].as_array()).map_or(0, Vec::len) as u64).sum();
    let bar = progress::items(total, &format!("importing into {target}"));
    let started = std::time::Instant::now();
    let mut summary = Summary::default();
    for (first_row, body) in batches {
        let n = body["data"].as_array().or_else(|| body["pairs"].as_array()).map_or(0, Vec::len) as u64;
        let answer = api.post(path, body).await?;
        summary.add(&answer, first_row);
        bar.inc(n);
    }
    bar.finish_and_clear();
    let report = json!({
        "rows": total,
        "imported": summary.imported,
        "skipped": summary.skipped,
        "errors": summary.errors,
        "took_ms": started.elapsed().as_millis() as u64,
    });
    if g.output == Format::Json {
        output::json(&mut stdout(), &report)?;
    } else {
        let mut out = stdout();
        writeln!(
            out,
            "{total} rows read, {} imported, {} skipped, {} errors into {target} in {} ms",
            summary.imported,
            summary.skipped,
            summary.errors.len(),
            report["took_ms"]
        )?;
        for e in summary.errors.iter().take(20) {
            writeln!(out, "  row {}: {}", output::cell(&e["row"]), output::cell(&e["message"]))?;
        }
    }
    if !summary.errors.is_empty() {
        return Err(CliError::Refused {
            status: 400,
            code: "IMPORT_ERRORS".into(),
            message: format!("{} rows were refused", summary.errors.len()),
            position: None,
        });
    }
    Ok(())
}

/// The rows of a CSV file (header = column names; every value a string, the
/// router converts by the column types) or a JSON array of objects.
fn read_rows(file: &PathBuf) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(file).map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    let is_json = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) || text.trim_start().starts_with('[');
    if is_json {
        let v: Value = serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("{} is not JSON: {e}", file.display())))?;
        return v.as_array().cloned().ok_or_else(|| CliError::Usage(format!("{} is not a JSON array of rows", file.display())));
    }
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?.clone();
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| CliError::Usage(format!("{} row {}: {e}", file.display(), i + 1)))?;
        rows.push(Value::Object(headers.iter().zip(record.iter()).map(|(h, v)| (h.to_string(), json!(v))).collect()));
    }
    Ok(rows)
}

fn read_pairs(file: &PathBuf) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(file).map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("{} is not JSON: {e}", file.display())))?;
    match v {
        Value::Object(map) => Ok(map.into_iter().map(|(k, v)| json!({"key": k, "value": v})).collect()),
        Value::Array(items) => Ok(items),
        _ => Err(CliError::Usage(format!("{}: an object of key → value or an array of {{key, value}}", file.display()))),
    }
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// The users.
    List,
    /// Create a user (the password is asked for, or read from --password-stdin).
    Add {
        username: String,
        #[arg(long)]
        email: String,
        /// admin, operator, viewer or a custom role.
        #[arg(long, default_value = "viewer")]
        role: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// Delete a user by id.
    Rm { id: String },
}

pub async fn user(g: &Global, command: UserCommand) -> Result<()> {
    let api = connect(g)?;
    match command {
        UserCommand::List => {
            let answer = api.get("/api/v1/admin/users").await?;
            let items = answer["users"].as_array().cloned().unwrap_or_default();
            if g.output == Format::Json {
                return output::json(&mut stdout(), &answer);
            }
            output::items(&mut stdout(), &items, &["id", "username", "email", "role", "mfa_enabled"], g.output)?;
        }
        UserCommand::Add { username, email, role, password_stdin } => {
            let password = if password_stdin {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                line.trim_end_matches(['\n', '\r']).to_string()
            } else {
                rpassword::prompt_password(format!("Password for {username}: "))?
            };
            let answer =
                api.post("/api/v1/admin/users", json!({"username": username, "email": email, "role": role, "password": password})).await?;
            if g.output == Format::Json {
                return output::json(&mut stdout(), &answer);
            }
            let id = if answer["id"].is_null() { &answer["user"]["id"] } else { &answer["id"] };
            writeln!(stdout(), "created user {username} ({role}), id {}", output::cell(id))?;
        }
        UserCommand::Rm { id } => {
            api.delete(&format!("/api/v1/admin/users/{}", segment(&id))).await?;
            writeln!(stdout(), "deleted user {id}")?;
        }
    }
    Ok(())
}

pub async fn roles(g: &Global) -> Result<()> {
    let api = connect(g)?;
    let answer = api.get("/api/v1/admin/roles").await?;
    if g.output == Format::Json {
        return output::json(&mut stdout(), &answer);
    }
    let items: Vec<Value> = answer["roles"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut r| {
            r["permissions"] = json!(r["permissions"].as_array().map_or(0, Vec::len));
            r
        })
        .collect();
    output::items(&mut stdout(), &items, &["name", "builtin", "permissions"], g.output)
}

pub enum RoleChange {
    Create,
    Set,
    Remove,
}

/// Creates, changes or deletes a role.
pub async fn role_change(g: &Global, change: RoleChange, name: String, permissions: Vec<String>) -> Result<()> {
    let api = connect(g)?;
    let path = format!("/api/v1/admin/roles/{}", segment(&name));
    let (answer, done) = match change {
        RoleChange::Create => (api.post("/api/v1/admin/roles", json!({"name": name, "permissions": permissions})).await?, "created"),
        RoleChange::Set => (api.call(reqwest::Method::PUT, &path, Some(json!({"permissions": permissions}))).await?, "changed"),
        RoleChange::Remove => (api.delete(&path).await?, "deleted"),
    };
    if g.output == Format::Json {
        return output::json(&mut stdout(), &answer);
    }
    writeln!(stdout(), "{done} role {name}")?;
    Ok(())
}

/// A subject's audit trail, or (`verify`) the hash chain's check.
pub async fn audit(g: &Global, subject: String) -> Result<()> {
    let api = connect(g)?;
    if subject == "verify" {
        let answer = api.get("/api/v1/compliance/audit/verify").await?;
        return output::json(&mut stdout(), &answer);
    }
    let answer = api.get(&format!("/api/v1/compliance/audit/{}", segment(&subject))).await?;
    if g.output == Format::Json {
        return output::json(&mut stdout(), &answer);
    }
    let items = answer["entries"].as_array().cloned().unwrap_or_default();
    output::items(&mut stdout(), &items, &["seq", "timestamp", "event_type", "actor", "details"], g.output)
}

/// Erases a data subject everywhere and prints the signed certificate.
pub async fn erase(g: &Global, subject: String, reason: Option<String>) -> Result<()> {
    let api = connect(g)?;
    let mut body = json!({"secure_erase": true});
    if let Some(reason) = reason {
        body["reason"] = json!(reason);
    }
    let answer = api.call(reqwest::Method::DELETE, &format!("/api/v1/compliance/data-subject/{}", segment(&subject)), Some(body)).await?;
    if g.output == Format::Json {
        return output::json(&mut stdout(), &answer);
    }
    let mut out = stdout();
    writeln!(out, "{}", answer["message"].as_str().unwrap_or("erased"))?;
    writeln!(out, "certificate:")?;
    writeln!(out, "{}", serde_json::to_string_pretty(&answer["certificate"]).unwrap_or_default())?;
    Ok(())
}
