//! INSERT / UPDATE / DELETE with constraint checks and index maintenance.
use crate::access::{Cons, conjuncts};
use crate::catalog::{self, TableDef};
use crate::encoding::{self, key_of};
use crate::error::{Result, constraint, parse, table_not_found, unsupported};
use crate::exec::{Env, Exec, RowSet, Scope, ident, object_name};
use crate::value::{Value, cast, compare};
use sqlparser::ast::{self, Expr, SetExpr};
use std::cmp::Ordering;

const ROWID: &str = "\u{0}rowid";

fn is_default_kw(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

impl<'a> Exec<'a> {
    pub fn load_table(&self, name: &str) -> Result<TableDef> {
        catalog::get_table(&self.kv, name)?.ok_or_else(|| table_not_found(format!("table \"{name}\" does not exist")))
    }

    /// Value of a column default (or SERIAL next value, or NULL).
    pub fn default_value(&mut self, t: &TableDef, ci: usize) -> Result<Value> {
        let c = &t.columns[ci];
        if c.serial {
            let k = encoding::counter_key(t.id, &c.name);
            let n = catalog::read_counter(&self.kv, &k)? + 1;
            catalog::write_counter(&mut self.kv, &k, n);
            return cast(Value::Int(n), &c.ty, false);
        }
        match &c.default {
            Some(text) => {
                let e = crate::parser::parse_expr(text)?;
                let v = self.eval(&e, &Env::empty(None))?;
                self.coerce_col(t, ci, v)
            }
            None => Ok(Value::Null),
        }
    }

    pub(crate) fn coerce_col(&self, t: &TableDef, ci: usize, v: Value) -> Result<Value> {
        let c = &t.columns[ci];
        cast(v, &c.ty, false).map_err(|mut e| {
            e.message = format!("column \"{}\": {}", c.name, e.message);
            e
        })
    }

    /// NOT NULL and CHECK constraints.
    pub fn validate_row(&self, t: &TableDef, row: &[Value]) -> Result<()> {
        for (i, c) in t.columns.iter().enumerate() {
            if row[i].is_null() && (!c.nullable || t.primary_key.contains(&c.name)) {
                return Err(constraint(format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, t.name
                )));
            }
        }
        if !t.checks.is_empty() {
            let scope = Scope::for_table(&t.name, t.columns.iter().map(|c| c.name.clone()));
            let env = Env { scope: &scope, row, group: None, outer: None };
            for ck in &t.checks {
                let e = crate::parser::parse_expr(&ck.expr)?;
                if self.eval_bool(&e, &env)? == Some(false) {
                    return Err(constraint(format!("new row for relation \"{}\" violates check constraint \"{}\"", t.name, ck.name)));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn pk_key(&self, t: &TableDef, row: &[Value]) -> Result<Vec<u8>> {
        let mut k = encoding::rows_prefix(t.id);
        for i in t.pk_idx()? {
            encoding::encode_key(&mut k, &row[i]);
        }
        Ok(k)
    }

    /// Row key for a new row (primary key or fresh hidden rowid).
    fn new_row_key(&mut self, t: &TableDef, row: &[Value]) -> Result<Vec<u8>> {
        if t.primary_key.is_empty() {
            let ck = encoding::counter_key(t.id, ROWID);
            let n = catalog::read_counter(&self.kv, &ck)? + 1;
            catalog::write_counter(&mut self.kv, &ck, n);
            let mut k = encoding::rows_prefix(t.id);
            encoding::encode_key(&mut k, &Value::Int(n));
            Ok(k)
        } else {
            self.pk_key(t, row)
        }
    }

    fn index_entry(t: &TableDef, ix: &catalog::IndexDef, row: &[Value], rowkey: &[u8]) -> Result<Vec<u8>> {
        let mut k = encoding::index_prefix(t.id, ix.id);
        for i in t.cols_idx(&ix.columns)? {
            encoding::encode_key(&mut k, &row[i]);
        }
        k.extend_from_slice(&rowkey[encoding::rows_prefix(t.id).len().min(rowkey.len())..]);
        Ok(k)
    }

    /// Unique indexes: no other row (key != self_key) with the same non-NULL values.
    pub(crate) fn check_unique(&self, t: &TableDef, row: &[Value], self_key: &[u8]) -> Result<()> {
        for ix in t.indexes.iter().filter(|i| i.unique) {
            let idx = t.cols_idx(&ix.columns)?;
            if idx.iter().any(|i| row[*i].is_null()) {
                continue;
            }
            let mut p = encoding::index_prefix(t.id, ix.id);
            for i in &idx {
                encoding::encode_key(&mut p, &row[*i]);
            }
            let mut dup = false;
            self.kv.scan(&p, &encoding::prefix_end(&p), &mut |_, v| {
                if v != self_key {
                    dup = true;
                    return Ok(false);
                }
                Ok(true)
            })?;
            if dup {
                let vals: Vec<String> = idx.iter().map(|i| row[*i].to_text()).collect();
                return Err(constraint(format!(
                    "duplicate key value violates unique constraint \"{}\": ({})=({})",
                    ix.name,
                    ix.columns.join(", "),
                    vals.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Rows of `t` whose `cols` equal `vals`.
    fn find_rows(&self, t: &TableDef, cols: &[usize], vals: &[Value]) -> Result<bool> {
        let mut cons = Cons::new();
        for (c, v) in cols.iter().zip(vals) {
            let cv = match cast(v.clone(), &t.columns[*c].ty, false) {
                Ok(cv) if compare(v, &cv)? == Some(Ordering::Equal) => cv,
                _ => return Ok(false),
            };
            cons.entry(*c).or_default().eq = Some(cv);
        }
        for (_, r) in self.scan_table(t, &cons)? {
            let mut all = true;
            for (c, v) in cols.iter().zip(vals) {
                if compare(&r[*c], v)? != Some(Ordering::Equal) {
                    all = false;
                }
            }
            if all {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Child side of foreign keys: referenced parent rows must exist.
    pub(crate) fn check_fk_child(&self, t: &TableDef, row: &[Value], old: Option<&[Value]>) -> Result<()> {
        for fk in &t.foreign_keys {
            let idx = t.cols_idx(&fk.columns)?;
            let vals: Vec<Value> = idx.iter().map(|i| row[*i].clone()).collect();
            if vals.iter().any(|v| v.is_null()) {
                continue;
            }
            if let Some(old) = old
                && idx.iter().all(|i| key_of(std::slice::from_ref(&old[*i])) == key_of(std::slice::from_ref(&row[*i])))
            {
                continue;
            }
            let parent = if fk.ref_table == t.name { t.clone() } else { self.load_table(&fk.ref_table)? };
            let pidx = parent.cols_idx(&fk.ref_columns)?;
            if !self.find_rows(&parent, &pidx, &vals)? {
                return Err(constraint(format!(
                    "insert or update on table \"{}\" violates foreign key constraint \"{}\": key ({})=({}) is not present in table \"{}\"",
                    t.name,
                    fk.name,
                    fk.columns.join(", "),
                    vals.iter().map(|v| v.to_text()).collect::<Vec<_>>().join(", "),
                    fk.ref_table
                )));
            }
        }
        Ok(())
    }

    /// Foreign-key check of a row against its parents.
    pub fn check_fk_child_pub(&self, t: &TableDef, row: &[Value]) -> Result<()> {
        self.check_fk_child(t, row, None)
    }

    /// Parent side: no child may reference values that disappear.
    pub(crate) fn check_fk_parent(&self, t: &TableDef, old: &[Value], new: Option<&[Value]>) -> Result<()> {
        for child in catalog::all_tables(&self.kv)? {
            for fk in child.foreign_keys.iter().filter(|f| f.ref_table == t.name) {
                let pidx = t.cols_idx(&fk.ref_columns)?;
                let vals: Vec<Value> = pidx.iter().map(|i| old[*i].clone()).collect();
                if vals.iter().any(|v| v.is_null()) {
                    continue;
                }
                if let Some(new) = new
                    && pidx.iter().all(|i| key_of(std::slice::from_ref(&old[*i])) == key_of(std::slice::from_ref(&new[*i])))
                {
                    continue;
                }
                let cidx = child.cols_idx(&fk.columns)?;
                if self.find_rows(&child, &cidx, &vals)? {
                    return Err(constraint(format!(
                        "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
                        t.name, fk.name, child.name
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn put_index_entries(&mut self, t: &TableDef, row: &[Value], key: &[u8]) -> Result<()> {
        for ix in &t.indexes {
            let k = Self::index_entry(t, ix, row, key)?;
            self.kv.put(k, key.to_vec());
        }
        Ok(())
    }

    pub(crate) fn remove_row(&mut self, t: &TableDef, key: &[u8], row: &[Value]) -> Result<()> {
        for ix in &t.indexes {
            let k = Self::index_entry(t, ix, row, key)?;
            self.kv.delete(k);
        }
        self.kv.delete(key.to_vec());
        Ok(())
    }

    /// Inserts a fully built, coerced row after all checks.
    pub fn insert_row(&mut self, t: &TableDef, row: Vec<Value>) -> Result<()> {
        self.validate_row(t, &row)?;
        let key = self.new_row_key(t, &row)?;
        if !t.primary_key.is_empty() && self.kv.get(&key)?.is_some() {
            let vals: Vec<String> = t.pk_idx()?.iter().map(|i| row[*i].to_text()).collect();
            return Err(constraint(format!(
                "duplicate key value violates unique constraint \"{}\": ({})=({})",
                t.pk_name,
                t.primary_key.join(", "),
                vals.join(", ")
            )));
        }
        self.check_unique(t, &row, &key)?;
        self.check_fk_child(t, &row, None)?;
        self.kv.put(key.clone(), encoding::encode_row(&row));
        self.put_index_entries(t, &row, &key)?;
        self.record_change(t, crate::ChangeOp::Insert, &row, Some(&row));
        Ok(())
    }

    /// Change data capture: records a row change when the table is captured.
    pub(crate) fn record_change(&mut self, t: &TableDef, op: crate::ChangeOp, before: &[Value], after: Option<&[Value]>) {
        if !self.capture.is_some_and(|c| c(&t.name)) {
            return;
        }
        let object = |row: &[Value], only: Option<&[String]>| -> serde_json::Map<String, serde_json::Value> {
            t.columns
                .iter()
                .zip(row)
                .filter(|(c, _)| only.is_none_or(|o| o.is_empty() || o.contains(&c.name)))
                .map(|(c, v)| (c.name.clone(), v.to_json()))
                .collect()
        };
        let key = object(before, Some(&t.primary_key));
        let data = after.map(|r| object(r, None));
        self.changes.push(crate::RowChange { op, table: t.name.clone(), key, data });
    }

    /// INSERT, with `ON CONFLICT … DO NOTHING | DO UPDATE` and `RETURNING`:
    /// the number of rows inserted or updated, and the returned rows.
    pub fn insert(&mut self, ins: &ast::Insert) -> Result<(u64, Option<RowSet>)> {
        let name = match &ins.table {
            ast::TableObject::TableName(n) => object_name(n),
            _ => return Err(unsupported("INSERT target must be a table name")),
        };
        // Other dialects' INSERT forms are refused, never run as a plain INSERT.
        if ins.replace_into {
            return Err(unsupported("REPLACE INTO is not supported; use INSERT … ON CONFLICT … DO UPDATE"));
        }
        if ins.or.is_some() || ins.ignore || ins.overwrite || ins.priority.is_some() {
            return Err(unsupported("INSERT OR …, INSERT IGNORE and INSERT priorities are not supported; use ON CONFLICT"));
        }
        if ins.partitioned.is_some() || !ins.assignments.is_empty() || ins.insert_alias.is_some() || !ins.after_columns.is_empty() {
            return Err(unsupported("this INSERT form is not supported"));
        }
        let on_conflict = match &ins.on {
            None => None,
            Some(ast::OnInsert::OnConflict(oc)) => Some(oc),
            Some(_) => return Err(unsupported("ON DUPLICATE KEY UPDATE is not supported; use ON CONFLICT … DO UPDATE")),
        };
        let t = self.load_table(&name)?;
        let qual = ins.table_alias.as_ref().map(ident).unwrap_or_else(|| t.name.clone());
        let conflict_cols: Option<Vec<String>> = match on_conflict.and_then(|oc| oc.conflict_target.as_ref()) {
            None => None,
            Some(ast::ConflictTarget::Columns(cols)) => Some(cols.iter().map(ident).collect()),
            Some(ast::ConflictTarget::OnConstraint(c)) => {
                let cname = object_name(c);
                if cname == t.pk_name && !t.primary_key.is_empty() {
                    Some(t.primary_key.clone())
                } else {
                    let ix = t.indexes.iter().find(|ix| ix.unique && ix.name == cname).ok_or_else(|| {
                        crate::error::SqlError::new(
                            crate::error::ErrorCode::ConstraintNotFound,
                            format!("constraint \"{cname}\" for table \"{}\" does not exist", t.name),
                        )
                    })?;
                    Some(ix.columns.clone())
                }
            }
        };
        if let Some(oc) = on_conflict
            && matches!(oc.action, ast::OnConflictAction::DoUpdate(_))
            && conflict_cols.is_none()
        {
            return Err(parse("ON CONFLICT DO UPDATE requires inference specification or constraint name"));
        }
        let targets: Vec<usize> = if ins.columns.is_empty() {
            (0..t.columns.len()).collect()
        } else {
            let names: Vec<String> = ins.columns.iter().map(ident).collect();
            t.cols_idx(&names)?
        };
        for (i, a) in targets.iter().enumerate() {
            if targets[..i].contains(a) {
                return Err(parse(format!("column \"{}\" specified more than once", t.columns[*a].name)));
            }
        }
        let source = ins.source.as_ref().ok_or_else(|| unsupported("INSERT without VALUES or SELECT is not supported"))?;
        // Rows of Option<Value>: None = DEFAULT.
        let mut src: Vec<Vec<Option<Value>>> = Vec::new();
        match (&*source.body, source.order_by.is_none() && source.limit_clause.is_none() && source.with.is_none()) {
            (SetExpr::Values(v), true) => {
                let env = Env::empty(None);
                for r in &v.rows {
                    let mut row = Vec::with_capacity(r.len());
                    for e in r {
                        row.push(if is_default_kw(e) { None } else { Some(self.eval(e, &env)?) });
                    }
                    src.push(row);
                }
            }
            _ => {
                let rs = self.run_query(source, None)?;
                src = rs.rows.into_iter().map(|r| r.into_iter().map(Some).collect()).collect();
            }
        }
        let mut n = 0;
        let mut returned: Vec<Vec<Value>> = Vec::new();
        for r in src {
            if r.len() != targets.len() {
                return Err(parse(format!("INSERT has {} expressions but {} target columns", r.len(), targets.len())));
            }
            let mut provided: Vec<Option<Value>> = vec![None; t.columns.len()];
            for (ci, v) in targets.iter().zip(r) {
                provided[*ci] = v;
            }
            let mut row = Vec::with_capacity(t.columns.len());
            for (ci, p) in provided.into_iter().enumerate() {
                let v = match p {
                    Some(v) => {
                        let v = self.coerce_col(&t, ci, v)?;
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
                    None => self.default_value(&t, ci)?,
                };
                row.push(v);
            }
            if let Some(oc) = on_conflict
                && let Some((key, old)) = self.find_conflict(&t, &row, conflict_cols.as_deref())?
            {
                let ast::OnConflictAction::DoUpdate(du) = &oc.action else { continue };
                // The existing row under the table's name and the proposed one as `excluded`.
                let mut scope = Scope::for_table(&qual, t.columns.iter().map(|c| c.name.clone()));
                scope.cols.extend(Scope::for_table("excluded", t.columns.iter().map(|c| c.name.clone())).cols);
                let both: Vec<Value> = old.iter().cloned().chain(row.iter().cloned()).collect();
                let env = Env { scope: &scope, row: &both, group: None, outer: None };
                if let Some(w) = &du.selection
                    && self.eval_bool(w, &env)? != Some(true)
                {
                    continue;
                }
                let mut new = old.clone();
                for (ci, e) in self.assignment_targets(&t, &du.assignments)? {
                    new[ci] = if is_default_kw(e) {
                        self.default_value(&t, ci)?
                    } else {
                        let v = self.eval(e, &env)?;
                        self.coerce_col(&t, ci, v)?
                    };
                }
                self.replace_row(&t, &key, &old, &new)?;
                returned.push(new);
                n += 1;
                continue;
            }
            if ins.returning.is_some() {
                returned.push(row.clone());
            }
            self.insert_row(&t, row)?;
            n += 1;
        }
        let rows = match &ins.returning {
            Some(items) => Some(self.returning(&t, &qual, items, &returned)?),
            None => None,
        };
        Ok((n, rows))
    }

    /// The existing row that `row` conflicts with on the primary key or a unique
    /// index (only the one on exactly `target`'s columns, when given).
    fn find_conflict(&self, t: &TableDef, row: &[Value], target: Option<&[String]>) -> Result<Option<(Vec<u8>, Vec<Value>)>> {
        let same = |cols: &[String]| target.is_none_or(|tc| tc.len() == cols.len() && tc.iter().all(|c| cols.contains(c)));
        let mut matched = false;
        if !t.primary_key.is_empty() && same(&t.primary_key) {
            matched = true;
            let key = self.pk_key(t, row)?;
            if let Some(bytes) = self.kv.get(&key)? {
                return Ok(Some((key, encoding::decode_row(&bytes)?)));
            }
        }
        for ix in t.indexes.iter().filter(|i| i.unique && same(&i.columns)) {
            matched = true;
            let idx = t.cols_idx(&ix.columns)?;
            if idx.iter().any(|i| row[*i].is_null()) {
                continue;
            }
            let mut p = encoding::index_prefix(t.id, ix.id);
            for i in &idx {
                encoding::encode_key(&mut p, &row[*i]);
            }
            let mut found = None;
            self.kv.scan(&p, &encoding::prefix_end(&p), &mut |_, v| {
                found = Some(v.to_vec());
                Ok(false)
            })?;
            if let Some(key) = found
                && let Some(bytes) = self.kv.get(&key)?
            {
                return Ok(Some((key, encoding::decode_row(&bytes)?)));
            }
        }
        if target.is_some() && !matched {
            return Err(parse("there is no unique or exclusion constraint matching the ON CONFLICT specification"));
        }
        Ok(None)
    }

    /// `(column index, value expression)` of SET assignments.
    fn assignment_targets<'e>(&self, t: &TableDef, assignments: &'e [ast::Assignment]) -> Result<Vec<(usize, &'e Expr)>> {
        let mut sets = Vec::new();
        for a in assignments {
            let col = match &a.target {
                ast::AssignmentTarget::ColumnName(n) => object_name(n),
                _ => return Err(unsupported("tuple assignment is not supported")),
            };
            let ci = t
                .col(&col)
                .ok_or_else(|| crate::error::column_not_found(format!("column \"{col}\" of relation \"{}\" does not exist", t.name)))?;
            sets.push((ci, &a.value));
        }
        Ok(sets)
    }

    /// Replaces row `old` at `key` with `new` after every check (keys, unique
    /// indexes, foreign keys both ways), keeping the indexes right.
    fn replace_row(&mut self, t: &TableDef, key: &[u8], old: &[Value], new: &[Value]) -> Result<()> {
        self.validate_row(t, new)?;
        let new_key = if t.primary_key.is_empty() { key.to_vec() } else { self.pk_key(t, new)? };
        if new_key != key && self.kv.get(&new_key)?.is_some() {
            return Err(constraint(format!("duplicate key value violates unique constraint \"{}\"", t.pk_name)));
        }
        self.check_unique(t, new, key)?;
        self.check_fk_child(t, new, Some(old))?;
        self.check_fk_parent(t, old, Some(new))?;
        self.remove_row(t, key, old)?;
        self.kv.put(new_key.clone(), encoding::encode_row(new));
        self.put_index_entries(t, new, &new_key)?;
        self.record_change(t, crate::ChangeOp::Update, old, Some(new));
        Ok(())
    }

    /// The rows of a RETURNING list, evaluated over rows of `t` named `qual`.
    fn returning(&self, t: &TableDef, qual: &str, items: &[ast::SelectItem], rows: &[Vec<Value>]) -> Result<RowSet> {
        let scope = Scope::for_table(qual, t.columns.iter().map(|c| c.name.clone()));
        let mut cols = Vec::new();
        for item in items {
            match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    cols.extend(t.columns.iter().map(|c| c.name.clone()))
                }
                ast::SelectItem::UnnamedExpr(e) => cols.push(crate::query::expr_name(e)),
                ast::SelectItem::ExprWithAlias { alias, .. } => cols.push(ident(alias)),
            }
        }
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let env = Env { scope: &scope, row, group: None, outer: None };
            let mut vals = Vec::with_capacity(cols.len());
            for item in items {
                match item {
                    ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => vals.extend(row.iter().cloned()),
                    ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                        if crate::eval::contains_aggregate(e) {
                            return Err(parse("aggregate functions are not allowed in RETURNING"));
                        }
                        vals.push(self.eval(e, &env)?)
                    }
                }
            }
            out.push(vals);
        }
        Ok(RowSet { cols, rows: out })
    }

    /// Rows of a single table matching `selection` (index-assisted).
    pub fn matching_rows(&self, t: &TableDef, qual: &str, selection: Option<&Expr>) -> Result<(Scope, Vec<(Vec<u8>, Vec<Value>)>)> {
        let scope = Scope::for_table(qual, t.columns.iter().map(|c| c.name.clone()));
        let mut conj = Vec::new();
        if let Some(w) = selection {
            conjuncts(w, &mut conj);
        }
        let cons = self.derive_cons(&conj, &scope, 0, t)?;
        let mut out = Vec::new();
        for (k, r) in self.scan_table(t, &cons)? {
            if let Some(w) = selection {
                let env = Env { scope: &scope, row: &r, group: None, outer: None };
                if self.eval_bool(w, &env)? != Some(true) {
                    continue;
                }
            }
            out.push((k, r));
        }
        Ok((scope, out))
    }

    fn single_table(twj: &ast::TableWithJoins) -> Result<(String, String)> {
        if !twj.joins.is_empty() {
            return Err(unsupported("joins are not supported in UPDATE/DELETE"));
        }
        match &twj.relation {
            ast::TableFactor::Table { name, alias, .. } => {
                let n = object_name(name);
                let q = alias.as_ref().map(|a| ident(&a.name)).unwrap_or_else(|| n.clone());
                Ok((n, q))
            }
            _ => Err(unsupported("UPDATE/DELETE target must be a table")),
        }
    }

    /// UPDATE of one table: the number of rows updated, and the RETURNING rows.
    pub fn update(
        &mut self,
        table: &ast::TableWithJoins,
        assignments: &[ast::Assignment],
        from: bool,
        selection: Option<&Expr>,
        returning: Option<&[ast::SelectItem]>,
    ) -> Result<(u64, Option<RowSet>)> {
        if from {
            return Err(unsupported("UPDATE ... FROM is not supported"));
        }
        let (name, qual) = Self::single_table(table)?;
        let t = self.load_table(&name)?;
        let sets = self.assignment_targets(&t, assignments)?;
        let (scope, rows) = self.matching_rows(&t, &qual, selection)?;
        let mut returned = Vec::new();
        let mut n = 0;
        for (key, old) in rows {
            let mut new = old.clone();
            for (ci, e) in &sets {
                let v = if is_default_kw(e) {
                    self.default_value(&t, *ci)?
                } else {
                    let env = Env { scope: &scope, row: &old, group: None, outer: None };
                    let v = self.eval(e, &env)?;
                    self.coerce_col(&t, *ci, v)?
                };
                new[*ci] = v;
            }
            self.replace_row(&t, &key, &old, &new)?;
            if returning.is_some() {
                returned.push(new);
            }
            n += 1;
        }
        let rows = match returning {
            Some(items) => Some(self.returning(&t, &qual, items, &returned)?),
            None => None,
        };
        Ok((n, rows))
    }

    /// DELETE from one table: the number of rows deleted, and the RETURNING rows.
    pub fn delete(&mut self, d: &ast::Delete) -> Result<(u64, Option<RowSet>)> {
        let from = match &d.from {
            ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
        };
        if from.len() != 1 || d.using.is_some() || !d.tables.is_empty() || d.limit.is_some() || !d.order_by.is_empty() {
            return Err(unsupported("DELETE supports a single table only"));
        }
        let (name, qual) = Self::single_table(&from[0])?;
        let t = self.load_table(&name)?;
        let (_, rows) = self.matching_rows(&t, &qual, d.selection.as_ref())?;
        let mut returned = Vec::new();
        let mut n = 0;
        for (key, old) in rows {
            self.check_fk_parent(&t, &old, None)?;
            self.remove_row(&t, &key, &old)?;
            self.record_change(&t, crate::ChangeOp::Delete, &old, None);
            if d.returning.is_some() {
                returned.push(old);
            }
            n += 1;
        }
        let rows = match &d.returning {
            Some(items) => Some(self.returning(&t, &qual, items, &returned)?),
            None => None,
        };
        Ok((n, rows))
    }
}
