//! Bulk import of rows into one table: the same conversions and checks as INSERT
//! (column types, NOT NULL, CHECK, UNIQUE, PRIMARY KEY, REFERENCES), with a
//! conflict policy, and every row's writes collected into one [`WriteSet`].

use crate::error::{column_not_found, parse};
use crate::exec::Exec;
use crate::value::Value;
use crate::{ExecContext, KvRead, SqlError, WriteSet, catalog, encoding};

/// What to do with a row whose primary key or a unique key is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Count it as skipped and write nothing for it.
    Skip,
    /// Fail the whole batch.
    Error,
    /// Replace the row with the same primary key (a unique conflict with
    /// another row still fails the batch); tables without a primary key insert.
    Update,
}

/// One row to import: its line in the client's data and `(column, JSON value)` pairs.
#[derive(Debug, Clone)]
pub struct ImportInput<'r> {
    pub line: u64,
    pub values: &'r [(String, serde_json::Value)],
}

/// The writes of a successful batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOutcome {
    pub writes: WriteSet,
    pub imported: u64,
    pub skipped: u64,
}

/// Why a batch failed; `line` is the failing row's (`None`: the batch as a whole,
/// e.g. the table does not exist).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportError {
    pub line: Option<u64>,
    pub error: SqlError,
}

/// Imports `rows` into `table`. Any failing row fails the batch: no writes at all.
pub fn import_rows(
    store: &dyn KvRead,
    table: &str,
    rows: &[ImportInput<'_>],
    conflict: Conflict,
    ctx: &ExecContext,
) -> Result<ImportOutcome, ImportError> {
    let mut ex = Exec::new(store, &[], ctx, false);
    let whole = |error| ImportError { line: None, error };
    let name = if catalog::get_table(&ex.kv, table).map_err(whole)?.is_some() { table.to_string() } else { table.to_lowercase() };
    let t = ex.load_table(&name).map_err(whole)?;
    let (mut imported, mut skipped) = (0, 0);
    for r in rows {
        let at = |error| ImportError { line: Some(r.line), error };
        match ex.import_row(&t, r.values, conflict).map_err(at)? {
            true => imported += 1,
            false => skipped += 1,
        }
    }
    Ok(ImportOutcome { writes: ex.kv.into_write_set(), imported, skipped })
}

impl Exec<'_> {
    /// Imports one row; `false` when skipped as a conflict.
    fn import_row(&mut self, t: &catalog::TableDef, values: &[(String, serde_json::Value)], conflict: Conflict) -> crate::error::Result<bool> {
        let mut provided: Vec<Option<Value>> = vec![None; t.columns.len()];
        for (col, v) in values {
            let ci = t.col(col).or_else(|| t.col(&col.to_lowercase())).ok_or_else(|| {
                column_not_found(format!("column \"{col}\" of table \"{}\" does not exist", t.name))
            })?;
            if provided[ci].is_some() {
                return Err(parse(format!("column \"{}\" specified more than once", t.columns[ci].name)));
            }
            provided[ci] = Some(Value::from_json(v));
        }
        let mut row = Vec::with_capacity(t.columns.len());
        for (ci, p) in provided.into_iter().enumerate() {
            let v = match p {
                Some(v) => {
                    let v = self.coerce_col(t, ci, v)?;
                    if t.columns[ci].serial
                        && let Value::Int(i) = v
                    {
                        let k = encoding::counter_key(t.id, &t.columns[ci].name);
                        if i > catalog::read_counter(&self.kv, &k)? {
                            catalog::write_counter(&mut self.kv, &k, i);
                        }
                    }
                    v
                }
                None => self.default_value(t, ci)?,
            };
            row.push(v);
        }
        let existing = if t.primary_key.is_empty() {
            None
        } else {
            let key = self.pk_key(t, &row)?;
            self.kv.get(&key)?.map(|raw| (key, raw))
        };
        match (conflict, existing) {
            (Conflict::Update, Some((key, raw))) => {
                let old = encoding::decode_row(&raw)?;
                self.validate_row(t, &row)?;
                self.check_unique(t, &row, &key)?;
                self.check_fk_child(t, &row, Some(&old))?;
                self.check_fk_parent(t, &old, Some(&row))?;
                self.remove_row(t, &key, &old)?;
                self.kv.put(key.clone(), encoding::encode_row(&row));
                self.put_index_entries(t, &row, &key)?;
                Ok(true)
            }
            (Conflict::Skip, existing) => {
                self.validate_row(t, &row)?;
                if existing.is_some() {
                    return Ok(false);
                }
                // A unique conflict with a row that exists (or an earlier row of the batch).
                let probe = if t.primary_key.is_empty() { Vec::new() } else { self.pk_key(t, &row)? };
                if let Err(e) = self.check_unique(t, &row, &probe) {
                    if e.code == crate::ErrorCode::ConstraintViolation {
                        return Ok(false);
                    }
                    return Err(e);
                }
                self.insert_row(t, row)?;
                Ok(true)
            }
            (Conflict::Error | Conflict::Update, _) => {
                self.insert_row(t, row)?;
                Ok(true)
            }
        }
    }
}
