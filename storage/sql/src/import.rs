//! Bulk import of rows into one table: the same conversions and checks as INSERT
//! (column types, NOT NULL, CHECK, UNIQUE, PRIMARY KEY, REFERENCES), with a
//! conflict policy, and every row's writes collected into one [`WriteSet`].
//! [`import_rows_capturing`] also reports the row changes for change data capture,
//! exactly as [`crate::execute_capturing`] does for INSERT/UPDATE.

use crate::error::{column_not_found, parse};
use crate::exec::Exec;
use crate::value::Value;
use crate::{ExecContext, KvRead, RowChange, SqlError, WriteSet, catalog, encoding};

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
    /// Row changes of a captured table ([`import_rows_capturing`]), in row order:
    /// Insert for a new row, Update for a row replaced by [`Conflict::Update`];
    /// skipped rows record nothing.
    pub changes: Vec<RowChange>,
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
    import_rows_capturing(store, table, rows, conflict, ctx, &|_| false)
}

/// [`import_rows`], also recording in [`ImportOutcome::changes`] every row
/// inserted or updated when `capture` answers true for the table (a failed
/// batch records nothing).
pub fn import_rows_capturing(
    store: &dyn KvRead,
    table: &str,
    rows: &[ImportInput<'_>],
    conflict: Conflict,
    ctx: &ExecContext,
    capture: &dyn Fn(&str) -> bool,
) -> Result<ImportOutcome, ImportError> {
    let mut ex = Exec::new(store, &[], ctx, false);
    ex.capture = Some(capture);
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
    let changes = std::mem::take(&mut ex.changes);
    Ok(ImportOutcome { writes: ex.kv.into_write_set(), imported, skipped, changes })
}

impl Exec<'_> {
    /// `COPY table [(columns)] FROM STDIN`: the rows are the request's
    /// parameters, each a JSON array with one field per column (the named
    /// ones, else every column in order): text converted to the column's type
    /// as INSERT converts a literal, or null. Every row is inserted or none
    /// (a conflict fails the statement, as in PostgreSQL).
    pub(crate) fn copy_from_params(
        &mut self,
        table: &sqlparser::ast::ObjectName,
        columns: &[sqlparser::ast::Ident],
    ) -> crate::error::Result<u64> {
        let wanted = crate::exec::object_name(table);
        let name = if catalog::get_table(&self.kv, &wanted)?.is_some() { wanted } else { wanted.to_lowercase() };
        let t = self.load_table(&name)?;
        let names: Vec<String> = if columns.is_empty() {
            t.columns.iter().map(|c| c.name.clone()).collect()
        } else {
            columns.iter().map(|c| c.value.clone()).collect()
        };
        let rows = std::mem::take(&mut self.params);
        let mut copied = 0;
        for (i, row) in rows.iter().enumerate() {
            let line = i + 1;
            let at = |e: SqlError| SqlError { message: format!("COPY {}, line {line}: {}", t.name, e.message), ..e };
            let fields: Vec<serde_json::Value> = match row {
                Value::Json(text) => serde_json::from_str(text).map_err(|e| parse(format!("COPY {}, line {line}: {e}", t.name)))?,
                _ => return Err(parse(format!("COPY {}, line {line}: each parameter of a COPY is one row, an array of fields", t.name))),
            };
            if fields.len() > names.len() {
                return Err(at(parse("extra data after last expected column")));
            }
            if let Some(missing) = names.get(fields.len()) {
                return Err(at(parse(format!("missing data for column \"{missing}\""))));
            }
            if let Some(bad) = fields.iter().find(|f| f.is_array() || f.is_object()) {
                return Err(at(parse(format!("a field is text or null, not {bad}"))));
            }
            let values: Vec<(String, serde_json::Value)> = names.iter().cloned().zip(fields).collect();
            self.import_row(&t, &values, Conflict::Error).map_err(at)?;
            copied += 1;
        }
        self.params = rows;
        Ok(copied)
    }

    /// Imports one row; `false` when skipped as a conflict.
    fn import_row(
        &mut self,
        t: &catalog::TableDef,
        values: &[(String, serde_json::Value)],
        conflict: Conflict,
    ) -> crate::error::Result<bool> {
        let mut provided: Vec<Option<Value>> = vec![None; t.columns.len()];
        for (col, v) in values {
            let ci = t
                .col(col)
                .or_else(|| t.col(&col.to_lowercase()))
                .ok_or_else(|| column_not_found(format!("column \"{col}\" of table \"{}\" does not exist", t.name)))?;
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
                self.record_change(t, crate::ChangeOp::Update, &old, Some(&row));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemStore;
    use crate::{ChangeOp, ErrorCode};
    use serde_json::{Value as J, json};

    /// A table with a primary key, NOT NULL, a UNIQUE column and a secondary index.
    fn store() -> MemStore {
        let mut s = MemStore::new();
        s.exec("CREATE TABLE p (id INT PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, n INT)", &[]).unwrap();
        s.exec("CREATE INDEX p_n ON p (n)", &[]).unwrap();
        s.exec("INSERT INTO p VALUES (1, 'one', 'one@x', 10), (2, 'two', 'two@x', 20)", &[]).unwrap();
        s
    }

    /// `(line, object)` rows as the import's column/value pairs.
    fn pairs(rows: &[(u64, J)]) -> Vec<(u64, Vec<(String, J)>)> {
        rows.iter().map(|(line, o)| (*line, o.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect())).collect()
    }

    fn run(
        s: &MemStore,
        table: &str,
        rows: &[(u64, J)],
        conflict: Conflict,
        capture: &dyn Fn(&str) -> bool,
    ) -> Result<ImportOutcome, ImportError> {
        let owned = pairs(rows);
        let inputs: Vec<ImportInput<'_>> = owned.iter().map(|(line, v)| ImportInput { line: *line, values: v }).collect();
        import_rows_capturing(s, table, &inputs, conflict, &ExecContext::default(), capture)
    }

    fn select(s: &mut MemStore, sql: &str) -> Vec<Vec<J>> {
        s.exec(sql, &[]).unwrap().rows
    }

    #[test]
    fn error_policy_inserts_and_fails_the_whole_batch_on_a_conflict() {
        let mut s = store();
        let out = run(
            &s,
            "p",
            &[(2, json!({"id": 3, "name": "three", "n": "30"})), (3, json!({"name": "four", "id": 4}))],
            Conflict::Error,
            &|_| false,
        )
        .unwrap();
        assert_eq!((out.imported, out.skipped), (2, 0));
        assert!(out.changes.is_empty(), "no capture asked");
        s.apply(&out.writes);
        assert_eq!(
            select(&mut s, "SELECT id, name, n FROM p WHERE id > 2 ORDER BY id"),
            vec![vec![json!(3), json!("three"), json!(30)], vec![json!(4), json!("four"), J::Null]]
        );

        // A duplicate primary key on line 3 fails the batch: its line 2 row is not written either.
        let before = s.map.clone();
        let e = run(&s, "p", &[(2, json!({"id": 5, "name": "five"})), (3, json!({"id": 1, "name": "dup"}))], Conflict::Error, &|_| true)
            .unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(3), ErrorCode::ConstraintViolation), "{e:?}");
        // A unique conflict with an existing row, and between two rows of the batch.
        let e = run(&s, "p", &[(7, json!({"id": 6, "name": "six", "email": "two@x"}))], Conflict::Error, &|_| true).unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(7), ErrorCode::ConstraintViolation));
        let rows = [(2, json!({"id": 6, "name": "a", "email": "e@x"})), (3, json!({"id": 7, "name": "b", "email": "e@x"}))];
        assert_eq!(run(&s, "p", &rows, Conflict::Error, &|_| true).unwrap_err().line, Some(3));
        assert_eq!(s.map, before, "a failed batch changes nothing");
    }

    #[test]
    fn skip_policy_counts_conflicts_and_writes_nothing_for_them() {
        let mut s = store();
        let rows = [
            (2, json!({"id": 1, "name": "taken pk"})),
            (3, json!({"id": 8, "name": "taken email", "email": "one@x"})),
            (4, json!({"id": 9, "name": "nine", "email": "nine@x"})),
            (5, json!({"id": 9, "name": "again in the batch"})),
        ];
        let out = run(&s, "p", &rows, Conflict::Skip, &|t| t == "p").unwrap();
        assert_eq!((out.imported, out.skipped), (1, 3));
        assert_eq!(out.changes.len(), 1, "skipped rows record nothing: {:?}", out.changes);
        assert_eq!(out.changes[0].op, ChangeOp::Insert);
        assert_eq!(out.changes[0].key, json!({"id": 9}).as_object().unwrap().clone());
        s.apply(&out.writes);
        assert_eq!(
            select(&mut s, "SELECT id, name FROM p ORDER BY id"),
            vec![vec![json!(1), json!("one")], vec![json!(2), json!("two")], vec![json!(9), json!("nine")]]
        );
        // Skip still fails the batch on a row that is bad in itself.
        let e = run(&s, "p", &[(2, json!({"id": 10, "name": "ok"})), (3, json!({"id": 11}))], Conflict::Skip, &|_| false).unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(3), ErrorCode::ConstraintViolation), "NOT NULL: {e:?}");
    }

    #[test]
    fn update_policy_replaces_by_primary_key_and_keeps_indexes_right() {
        let mut s = store();
        let rows = [(2, json!({"id": 1, "name": "uno", "n": 11})), (3, json!({"id": 3, "name": "three", "n": 30}))];
        let out = run(&s, "p", &rows, Conflict::Update, &|t| t == "p").unwrap();
        assert_eq!((out.imported, out.skipped), (2, 0));
        let ops: Vec<ChangeOp> = out.changes.iter().map(|c| c.op).collect();
        assert_eq!(ops, vec![ChangeOp::Update, ChangeOp::Insert]);
        // The replaced row is the import's row: unlisted columns take their defaults.
        assert_eq!(out.changes[0].key, json!({"id": 1}).as_object().unwrap().clone());
        assert_eq!(out.changes[0].data.clone().map(J::Object), Some(json!({"id": 1, "name": "uno", "email": null, "n": 11})));
        assert_eq!(out.changes[1].data.clone().map(J::Object), Some(json!({"id": 3, "name": "three", "email": null, "n": 30})));
        s.apply(&out.writes);
        assert_eq!(select(&mut s, "SELECT name, email FROM p WHERE id = 1"), vec![vec![json!("uno"), J::Null]]);
        // The secondary index follows the replacement: the old value is gone, the new one found.
        let plan = crate::explain(&s, "SELECT id FROM p WHERE n = 11").unwrap();
        assert!(plan.contains("USING p_n"), "{plan}");
        assert_eq!(select(&mut s, "SELECT id FROM p WHERE n = 11"), vec![vec![json!(1)]]);
        assert!(select(&mut s, "SELECT id FROM p WHERE n = 10").is_empty());
        // The old email is free again; a unique conflict with another row still fails.
        s.exec("INSERT INTO p VALUES (4, 'four', 'one@x', 40)", &[]).unwrap();
        let e = run(&s, "p", &[(2, json!({"id": 1, "name": "x", "email": "two@x"}))], Conflict::Update, &|_| true).unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(2), ErrorCode::ConstraintViolation));
    }

    #[test]
    fn a_bad_row_is_reported_by_its_line_and_nothing_of_its_batch_applies() {
        let s = store();
        let before = s.map.clone();
        let rows = [
            (2, json!({"id": 20, "name": "a", "n": 1})),
            (3, json!({"id": 21, "name": "b", "n": "abc"})),
            (4, json!({"id": 22, "name": "c"})),
        ];
        let e = run(&s, "p", &rows, Conflict::Error, &|_| true).unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(3), ErrorCode::TypeMismatch), "{e:?}");
        let e = run(&s, "p", &[(5, json!({"id": 20, "name": "a"})), (6, json!({"id": 21, "nope": 1}))], Conflict::Update, &|_| true)
            .unwrap_err();
        assert_eq!((e.line, e.error.code), (Some(6), ErrorCode::ColumnNotFound), "{e:?}");
        let e = run(&s, "missing", &rows, Conflict::Error, &|_| true).unwrap_err();
        assert_eq!((e.line, e.error.code), (None, ErrorCode::TableNotFound), "{e:?}");
        assert_eq!(s.map, before);
    }

    #[test]
    fn only_captured_tables_record_changes_in_row_order() {
        let s = store();
        let rows: Vec<(u64, J)> = (0..5).map(|i| (i + 2, json!({"id": 100 + i, "name": format!("r{i}")}))).collect();
        assert!(run(&s, "p", &rows, Conflict::Error, &|t| t == "other").unwrap().changes.is_empty());
        let out = run(&s, "P", &rows, Conflict::Error, &|t| t == "p").unwrap();
        let ids: Vec<J> = out.changes.iter().map(|c| c.key["id"].clone()).collect();
        assert_eq!(ids, (100..105).map(|i| json!(i)).collect::<Vec<_>>());
        assert!(out.changes.iter().all(|c| c.op == ChangeOp::Insert && c.table == "p"));
    }
}
