//! CREATE / DROP / ALTER TABLE, CREATE / DROP INDEX.
use crate::catalog::{self, CheckDef, ColumnDef, ForeignKeyDef, IndexDef, IndexMethod, TableDef};
use crate::encoding;
use crate::error::{ErrorCode, Result, SqlError, column_not_found, constraint, parse, unsupported};
use crate::exec::{Exec, ident, object_name};
use crate::parser::{mentions_ident, rename_ident_in};
use crate::value::{Value, cast};
use sqlparser::ast::{self, AlterColumnOperation, AlterTableOperation, ColumnOption, Expr, IndexType, TableConstraint};

fn err(code: ErrorCode, m: String) -> SqlError {
    SqlError::new(code, m)
}

fn index_col_names(cols: &[ast::IndexColumn]) -> Result<Vec<String>> {
    cols.iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) => Ok(ident(i)),
            other => Err(unsupported(format!("index expressions are not supported: {other}"))),
        })
        .collect()
}

fn method_of(t: &IndexType) -> Result<IndexMethod> {
    match t {
        IndexType::BTree => Ok(IndexMethod::BTree),
        IndexType::Hash => Ok(IndexMethod::Hash),
        IndexType::Custom(i) if i.value.eq_ignore_ascii_case("btree") => Ok(IndexMethod::BTree),
        IndexType::Custom(i) if i.value.eq_ignore_ascii_case("hash") => Ok(IndexMethod::Hash),
        other => Err(unsupported(format!("index method {other} is not supported; use BTREE or HASH"))),
    }
}

impl<'a> Exec<'a> {
    fn unique_index_name(&self, base: &str, t: Option<&TableDef>) -> Result<String> {
        let mut name = base.to_string();
        let mut i = 1;
        while catalog::index_owner(&self.kv, &name)?.is_some() || t.is_some_and(|t| t.indexes.iter().any(|x| x.name == name)) {
            name = format!("{base}{i}");
            i += 1;
        }
        Ok(name)
    }

    /// Applies one column option to a column being defined.
    fn apply_column_option(
        &self,
        t: &mut TableDef,
        ci: usize,
        name: Option<String>,
        opt: &ColumnOption,
        pk: &mut Vec<String>,
        uniques: &mut Vec<(Option<String>, Vec<String>)>,
    ) -> Result<()> {
        let cname = t.columns[ci].name.clone();
        match opt {
            ColumnOption::Null => t.columns[ci].nullable = true,
            ColumnOption::NotNull => t.columns[ci].nullable = false,
            ColumnOption::Default(e) => t.columns[ci].default = Some(e.to_string()),
            ColumnOption::Unique { is_primary: true, .. } => {
                if !pk.is_empty() {
                    return Err(parse(format!("multiple primary keys for table \"{}\" are not allowed", t.name)));
                }
                pk.push(cname);
                if let Some(n) = name {
                    t.pk_name = n;
                }
            }
            ColumnOption::Unique { is_primary: false, .. } => uniques.push((name, vec![cname])),
            ColumnOption::ForeignKey { foreign_table, referred_columns, .. } => {
                let fk = ForeignKeyDef {
                    name: name.unwrap_or_else(|| format!("{}_{}_fkey", t.name, cname)),
                    columns: vec![cname],
                    ref_table: object_name(foreign_table),
                    ref_columns: referred_columns.iter().map(ident).collect(),
                };
                t.foreign_keys.push(fk);
            }
            ColumnOption::Check(e) => {
                let n = name.unwrap_or_else(|| format!("{}_{}_check", t.name, cname));
                t.checks.push(CheckDef { name: n, expr: e.to_string() });
            }
            other => return Err(unsupported(format!("column option {other} is not supported"))),
        }
        Ok(())
    }

    fn apply_table_constraint(
        &self,
        t: &mut TableDef,
        c: &TableConstraint,
        pk: &mut Vec<String>,
        uniques: &mut Vec<(Option<String>, Vec<String>)>,
    ) -> Result<()> {
        match c {
            TableConstraint::PrimaryKey { name, columns, .. } => {
                if !pk.is_empty() {
                    return Err(parse(format!("multiple primary keys for table \"{}\" are not allowed", t.name)));
                }
                *pk = index_col_names(columns)?;
                if let Some(n) = name {
                    t.pk_name = ident(n);
                }
            }
            TableConstraint::Unique { name, columns, .. } => uniques.push((name.as_ref().map(ident), index_col_names(columns)?)),
            TableConstraint::ForeignKey { name, columns, foreign_table, referred_columns, .. } => {
                let cols: Vec<String> = columns.iter().map(ident).collect();
                t.foreign_keys.push(ForeignKeyDef {
                    name: name.as_ref().map(ident).unwrap_or_else(|| format!("{}_{}_fkey", t.name, cols.join("_"))),
                    columns: cols,
                    ref_table: object_name(foreign_table),
                    ref_columns: referred_columns.iter().map(ident).collect(),
                });
            }
            TableConstraint::Check { name, expr, .. } => {
                let n = name.as_ref().map(ident).unwrap_or_else(|| format!("{}_check{}", t.name, t.checks.len() + 1));
                t.checks.push(CheckDef { name: n, expr: expr.to_string() });
            }
            other => return Err(unsupported(format!("table constraint {other} is not supported"))),
        }
        Ok(())
    }

    /// Validates foreign keys of `t` (referenced table/columns exist; defaults to its primary key).
    fn resolve_fks(&self, t: &mut TableDef) -> Result<()> {
        let snapshot = t.clone();
        for fk in t.foreign_keys.iter_mut() {
            let parent = if fk.ref_table == snapshot.name { snapshot.clone() } else { self.load_table(&fk.ref_table)? };
            if fk.ref_columns.is_empty() {
                if parent.primary_key.is_empty() {
                    return Err(constraint(format!("table \"{}\" has no primary key to reference", parent.name)));
                }
                fk.ref_columns = parent.primary_key.clone();
            }
            parent.cols_idx(&fk.ref_columns)?;
            snapshot.cols_idx(&fk.columns)?;
            if fk.ref_columns.len() != fk.columns.len() {
                return Err(parse("number of referencing and referenced columns for foreign key disagree"));
            }
        }
        Ok(())
    }

    fn add_unique_indexes(&mut self, t: &mut TableDef, uniques: Vec<(Option<String>, Vec<String>)>) -> Result<()> {
        for (name, cols) in uniques {
            t.cols_idx(&cols)?;
            if cols == t.primary_key || t.indexes.iter().any(|i| i.unique && i.columns == cols) {
                continue;
            }
            let n = match name {
                Some(n) => n,
                None => self.unique_index_name(&format!("{}_{}_key", t.name, cols.join("_")), Some(t))?,
            };
            if catalog::index_owner(&self.kv, &n)?.is_some() {
                return Err(err(ErrorCode::IndexExists, format!("relation \"{n}\" already exists")));
            }
            let id = t.next_index_id;
            t.next_index_id += 1;
            t.indexes.push(IndexDef { id, name: n.clone(), columns: cols, unique: true, method: IndexMethod::BTree, constraint: true });
            self.kv.put(catalog::index_key(&n), t.name.clone().into_bytes());
        }
        Ok(())
    }

    pub fn create_table(&mut self, ct: &ast::CreateTable) -> Result<()> {
        let name = object_name(&ct.name);
        if catalog::get_table(&self.kv, &name)?.is_some() || catalog::get_view(&self.kv, &name)?.is_some() {
            if ct.if_not_exists {
                return Ok(());
            }
            return Err(err(ErrorCode::TableExists, format!("relation \"{name}\" already exists")));
        }
        if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
            return Err(unsupported("CREATE TABLE AS / LIKE / CLONE are not supported"));
        }
        let mut t = TableDef {
            id: 0,
            name: name.clone(),
            columns: vec![],
            primary_key: vec![],
            pk_name: format!("{name}_pkey"),
            indexes: vec![],
            checks: vec![],
            foreign_keys: vec![],
            next_index_id: 1,
        };
        let mut pk = Vec::new();
        let mut uniques = Vec::new();
        for c in &ct.columns {
            let cname = ident(&c.name);
            if t.col(&cname).is_some() {
                return Err(err(ErrorCode::ColumnExists, format!("column \"{cname}\" specified more than once")));
            }
            let (ty, serial) = crate::types::from_ast(&c.data_type)?;
            t.columns.push(ColumnDef { name: cname, ty, nullable: !serial, default: None, serial });
            let ci = t.columns.len() - 1;
            for o in &c.options {
                self.apply_column_option(&mut t, ci, o.name.as_ref().map(ident), &o.option, &mut pk, &mut uniques)?;
            }
        }
        if t.columns.is_empty() {
            return Err(parse("a table must have at least one column"));
        }
        for c in &ct.constraints {
            self.apply_table_constraint(&mut t, c, &mut pk, &mut uniques)?;
        }
        t.cols_idx(&pk)?;
        for p in &pk {
            if let Some(i) = t.col(p) {
                t.columns[i].nullable = false;
            }
        }
        t.primary_key = pk;
        self.check_defaults(&t)?;
        self.resolve_fks(&mut t)?;
        t.id = catalog::next_table_id(&mut self.kv)?;
        self.add_unique_indexes(&mut t, uniques)?;
        catalog::put_table(&mut self.kv, &t)
    }

    fn check_defaults(&self, t: &TableDef) -> Result<()> {
        for (i, c) in t.columns.iter().enumerate() {
            if let Some(d) = &c.default {
                let e = crate::parser::parse_expr(d)?;
                let v = self.eval(&e, &crate::exec::Env::empty(None))?;
                cast(v, &t.columns[i].ty, false)?;
            }
        }
        for ck in &t.checks {
            crate::parser::parse_expr(&ck.expr)?;
        }
        Ok(())
    }

    pub fn drop_tables(&mut self, names: &[ast::ObjectName], if_exists: bool) -> Result<()> {
        for n in names {
            let name = object_name(n);
            let Some(t) = catalog::get_table(&self.kv, &name)? else {
                if if_exists {
                    continue;
                }
                return Err(crate::error::table_not_found(format!("table \"{name}\" does not exist")));
            };
            for other in catalog::all_tables(&self.kv)? {
                if other.name != name && other.foreign_keys.iter().any(|f| f.ref_table == name) {
                    return Err(constraint(format!("cannot drop table \"{name}\" because table \"{}\" references it", other.name)));
                }
            }
            self.kv.delete_prefix(&encoding::table_prefix(t.id))?;
            for ix in &t.indexes {
                self.kv.delete(catalog::index_key(&ix.name));
            }
            self.kv.delete(catalog::table_key(&name));
        }
        Ok(())
    }

    /// Builds index entries for all rows; checks uniqueness.
    fn build_index(&mut self, t: &TableDef, ix: &IndexDef) -> Result<()> {
        let idx = t.cols_idx(&ix.columns)?;
        let p = encoding::rows_prefix(t.id);
        let rows = self.kv.scan_prefix(&p)?;
        let mut seen = std::collections::BTreeSet::new();
        for (k, v) in rows {
            let row = encoding::decode_row(&v)?;
            let vals: Vec<Value> = idx.iter().map(|i| row[*i].clone()).collect();
            if ix.unique && !vals.iter().any(|v| v.is_null()) && !seen.insert(encoding::key_of(&vals)) {
                return Err(constraint(format!(
                    "could not create unique index \"{}\": key ({})=({}) is duplicated",
                    ix.name,
                    ix.columns.join(", "),
                    vals.iter().map(|v| v.to_text()).collect::<Vec<_>>().join(", ")
                )));
            }
            let mut ik = encoding::index_prefix(t.id, ix.id);
            for v in &vals {
                encoding::encode_key(&mut ik, v);
            }
            ik.extend_from_slice(&k[p.len()..]);
            self.kv.put(ik, k);
        }
        Ok(())
    }

    pub fn create_index(&mut self, ci: &ast::CreateIndex) -> Result<()> {
        let tname = object_name(&ci.table_name);
        let mut t = self.load_table(&tname)?;
        let cols = index_col_names(&ci.columns)?;
        t.cols_idx(&cols)?;
        let mut method = IndexMethod::BTree;
        if let Some(u) = &ci.using {
            method = method_of(u)?;
        }
        for o in &ci.index_options {
            if let ast::IndexOption::Using(u) = o {
                method = method_of(u)?;
            }
        }
        if ci.predicate.is_some() {
            return Err(unsupported("partial indexes are not supported"));
        }
        let name = match &ci.name {
            Some(n) => object_name(n),
            None => self.unique_index_name(&format!("{}_{}_idx", tname, cols.join("_")), Some(&t))?,
        };
        if catalog::index_owner(&self.kv, &name)?.is_some() {
            if ci.if_not_exists {
                return Ok(());
            }
            return Err(err(ErrorCode::IndexExists, format!("relation \"{name}\" already exists")));
        }
        let ix = IndexDef { id: t.next_index_id, name: name.clone(), columns: cols, unique: ci.unique, method, constraint: false };
        t.next_index_id += 1;
        self.build_index(&t, &ix)?;
        t.indexes.push(ix);
        self.kv.put(catalog::index_key(&name), tname.into_bytes());
        catalog::put_table(&mut self.kv, &t)
    }

    pub fn drop_index(&mut self, names: &[ast::ObjectName], if_exists: bool) -> Result<()> {
        for n in names {
            let name = object_name(n);
            let Some(tname) = catalog::index_owner(&self.kv, &name)? else {
                if if_exists {
                    continue;
                }
                return Err(err(ErrorCode::IndexNotFound, format!("index \"{name}\" does not exist")));
            };
            let mut t = self.load_table(&tname)?;
            if let Some(pos) = t.indexes.iter().position(|i| i.name == name) {
                let ix = t.indexes.remove(pos);
                self.kv.delete_prefix(&encoding::index_prefix(t.id, ix.id))?;
            }
            self.kv.delete(catalog::index_key(&name));
            catalog::put_table(&mut self.kv, &t)?;
        }
        Ok(())
    }

    /// Rewrites every row of `old` into layout `new` via `f`, rebuilding keys and indexes.
    fn rewrite_table(
        &mut self,
        old: &TableDef,
        new: &TableDef,
        f: &mut dyn FnMut(&mut Self, Vec<Value>) -> Result<Vec<Value>>,
    ) -> Result<()> {
        let p = encoding::rows_prefix(old.id);
        let rows = self.kv.scan_prefix(&p)?;
        for ix in &old.indexes {
            self.kv.delete_prefix(&encoding::index_prefix(old.id, ix.id))?;
        }
        let mut out = Vec::new();
        for (k, v) in rows {
            self.kv.delete(k.clone());
            let row = f(self, encoding::decode_row(&v)?)?;
            out.push((k, row));
        }
        for (k, row) in out {
            self.validate_row(new, &row)?;
            let key = if new.primary_key.is_empty() {
                k
            } else {
                let mut key = encoding::rows_prefix(new.id);
                for i in new.pk_idx()? {
                    encoding::encode_key(&mut key, &row[i]);
                }
                key
            };
            if self.kv.get(&key)?.is_some() {
                return Err(constraint(format!("duplicate key value violates unique constraint \"{}\"", new.pk_name)));
            }
            self.kv.put(key, encoding::encode_row(&row));
        }
        for ix in &new.indexes {
            self.build_index(new, ix)?;
        }
        Ok(())
    }

    pub fn alter_table(&mut self, name: &ast::ObjectName, if_exists: bool, ops: &[AlterTableOperation]) -> Result<()> {
        let mut tname = object_name(name);
        if catalog::get_table(&self.kv, &tname)?.is_none() && if_exists {
            return Ok(());
        }
        for op in ops {
            let t = self.load_table(&tname)?;
            match op {
                AlterTableOperation::AddColumn { column_def, if_not_exists, .. } => {
                    let cname = ident(&column_def.name);
                    if t.col(&cname).is_some() {
                        if *if_not_exists {
                            continue;
                        }
                        return Err(err(ErrorCode::ColumnExists, format!("column \"{cname}\" of relation \"{tname}\" already exists")));
                    }
                    let (ty, serial) = crate::types::from_ast(&column_def.data_type)?;
                    let mut nt = t.clone();
                    nt.columns.push(ColumnDef { name: cname.clone(), ty, nullable: !serial, default: None, serial });
                    let ci = nt.columns.len() - 1;
                    let (mut pk, mut uniques) = (Vec::new(), Vec::new());
                    for o in &column_def.options {
                        self.apply_column_option(&mut nt, ci, o.name.as_ref().map(ident), &o.option, &mut pk, &mut uniques)?;
                    }
                    if !pk.is_empty() {
                        return Err(unsupported("adding a PRIMARY KEY column is not supported"));
                    }
                    self.check_defaults(&nt)?;
                    self.resolve_fks(&mut nt)?;
                    self.add_unique_indexes(&mut nt, uniques)?;
                    let nt2 = nt.clone();
                    self.rewrite_table(&t, &nt, &mut |ex: &mut Self, mut row| {
                        row.push(ex.default_value(&nt2, ci)?);
                        Ok(row)
                    })?;
                    catalog::put_table(&mut self.kv, &nt)?;
                }
                AlterTableOperation::DropColumn { column_names, if_exists, .. } => {
                    let mut nt = t.clone();
                    for cn in column_names {
                        let cname = ident(cn);
                        let Some(ci) = nt.col(&cname) else {
                            if *if_exists {
                                continue;
                            }
                            return Err(column_not_found(format!("column \"{cname}\" of relation \"{tname}\" does not exist")));
                        };
                        if nt.primary_key.contains(&cname) {
                            return Err(unsupported(format!("cannot drop primary key column \"{cname}\"")));
                        }
                        for other in catalog::all_tables(&self.kv)? {
                            if other.name != tname
                                && other.foreign_keys.iter().any(|f| f.ref_table == tname && f.ref_columns.contains(&cname))
                            {
                                return Err(constraint(format!("cannot drop column \"{cname}\": table \"{}\" references it", other.name)));
                            }
                        }
                        let before = nt.clone();
                        nt.columns.remove(ci);
                        for ix in nt.indexes.iter().filter(|i| i.columns.contains(&cname)) {
                            self.kv.delete(catalog::index_key(&ix.name));
                        }
                        nt.indexes.retain(|i| !i.columns.contains(&cname));
                        nt.checks.retain(|c| !mentions_ident(&c.expr, &cname));
                        nt.foreign_keys.retain(|f| !f.columns.contains(&cname));
                        self.rewrite_table(&before, &nt, &mut |_, mut row| {
                            if ci < row.len() {
                                row.remove(ci);
                            }
                            Ok(row)
                        })?;
                        catalog::put_table(&mut self.kv, &nt)?;
                    }
                }
                AlterTableOperation::RenameColumn { old_column_name, new_column_name } => {
                    let (old, new) = (ident(old_column_name), ident(new_column_name));
                    let mut nt = t.clone();
                    let ci = nt.col(&old).ok_or_else(|| column_not_found(format!("column \"{old}\" does not exist")))?;
                    if nt.col(&new).is_some() {
                        return Err(err(ErrorCode::ColumnExists, format!("column \"{new}\" of relation \"{tname}\" already exists")));
                    }
                    nt.columns[ci].name = new.clone();
                    let ren = |v: &mut Vec<String>| v.iter_mut().filter(|c| **c == old).for_each(|c| *c = new.clone());
                    ren(&mut nt.primary_key);
                    nt.indexes.iter_mut().for_each(|i| ren(&mut i.columns));
                    nt.foreign_keys.iter_mut().for_each(|f| {
                        ren(&mut f.columns);
                        if f.ref_table == tname {
                            ren(&mut f.ref_columns);
                        }
                    });
                    nt.checks.iter_mut().for_each(|c| c.expr = rename_ident_in(&c.expr, &old, &new));
                    catalog::put_table(&mut self.kv, &nt)?;
                    for mut other in catalog::all_tables(&self.kv)? {
                        if other.name != tname && other.foreign_keys.iter().any(|f| f.ref_table == tname) {
                            other.foreign_keys.iter_mut().filter(|f| f.ref_table == tname).for_each(|f| ren(&mut f.ref_columns));
                            catalog::put_table(&mut self.kv, &other)?;
                        }
                    }
                }
                AlterTableOperation::RenameTable { table_name } => {
                    let new = match table_name {
                        ast::RenameTableNameKind::To(n) | ast::RenameTableNameKind::As(n) => object_name(n),
                    };
                    if catalog::get_table(&self.kv, &new)?.is_some() {
                        return Err(err(ErrorCode::TableExists, format!("relation \"{new}\" already exists")));
                    }
                    let mut nt = t.clone();
                    nt.name = new.clone();
                    for f in nt.foreign_keys.iter_mut().filter(|f| f.ref_table == tname) {
                        f.ref_table = new.clone();
                    }
                    self.kv.delete(catalog::table_key(&tname));
                    catalog::put_table(&mut self.kv, &nt)?;
                    for ix in &nt.indexes {
                        self.kv.put(catalog::index_key(&ix.name), new.clone().into_bytes());
                    }
                    for mut other in catalog::all_tables(&self.kv)? {
                        if other.name != new && other.foreign_keys.iter().any(|f| f.ref_table == tname) {
                            other.foreign_keys.iter_mut().filter(|f| f.ref_table == tname).for_each(|f| f.ref_table = new.clone());
                            catalog::put_table(&mut self.kv, &other)?;
                        }
                    }
                    tname = new;
                }
                AlterTableOperation::AlterColumn { column_name, op } => {
                    let cname = ident(column_name);
                    let ci = t
                        .col(&cname)
                        .ok_or_else(|| column_not_found(format!("column \"{cname}\" of relation \"{tname}\" does not exist")))?;
                    let mut nt = t.clone();
                    match op {
                        AlterColumnOperation::SetNotNull => {
                            nt.columns[ci].nullable = false;
                            for (_, v) in self.kv.scan_prefix(&encoding::rows_prefix(t.id))? {
                                if encoding::decode_row(&v)?.get(ci).is_none_or(|v| v.is_null()) {
                                    return Err(constraint(format!("column \"{cname}\" of relation \"{tname}\" contains null values")));
                                }
                            }
                        }
                        AlterColumnOperation::DropNotNull => {
                            if t.primary_key.contains(&cname) {
                                return Err(constraint(format!("column \"{cname}\" is in a primary key")));
                            }
                            nt.columns[ci].nullable = true;
                        }
                        AlterColumnOperation::SetDefault { value } => {
                            nt.columns[ci].default = Some(value.to_string());
                            self.check_defaults(&nt)?;
                        }
                        AlterColumnOperation::DropDefault => nt.columns[ci].default = None,
                        AlterColumnOperation::SetDataType { data_type, using, .. } => {
                            if using.is_some() {
                                return Err(unsupported("SET DATA TYPE ... USING is not supported"));
                            }
                            let (ty, _) = crate::types::from_ast(data_type)?;
                            nt.columns[ci].ty = ty.clone();
                            self.rewrite_table(&t, &nt, &mut |_, mut row| {
                                if let Some(v) = row.get_mut(ci) {
                                    *v = cast(std::mem::replace(v, Value::Null), &ty, false)?;
                                }
                                Ok(row)
                            })?;
                        }
                        other => return Err(unsupported(format!("ALTER COLUMN {other} is not supported"))),
                    }
                    catalog::put_table(&mut self.kv, &nt)?;
                }
                AlterTableOperation::DropConstraint { name, if_exists, .. } => {
                    let cn = ident(name);
                    let mut nt = t.clone();
                    if let Some(p) = nt.checks.iter().position(|c| c.name == cn) {
                        nt.checks.remove(p);
                    } else if let Some(p) = nt.foreign_keys.iter().position(|c| c.name == cn) {
                        nt.foreign_keys.remove(p);
                    } else if let Some(p) = nt.indexes.iter().position(|c| c.name == cn && c.unique) {
                        let ix = nt.indexes.remove(p);
                        self.kv.delete_prefix(&encoding::index_prefix(t.id, ix.id))?;
                        self.kv.delete(catalog::index_key(&ix.name));
                    } else if cn == t.pk_name && !t.primary_key.is_empty() {
                        return Err(unsupported("dropping the primary key is not supported"));
                    } else if *if_exists {
                        continue;
                    } else {
                        return Err(err(
                            ErrorCode::ConstraintNotFound,
                            format!("constraint \"{cn}\" of relation \"{tname}\" does not exist"),
                        ));
                    }
                    catalog::put_table(&mut self.kv, &nt)?;
                }
                AlterTableOperation::AddConstraint { constraint: c, .. } => {
                    let mut nt = t.clone();
                    let (mut pk, mut uniques) = (Vec::new(), Vec::new());
                    self.apply_table_constraint(&mut nt, c, &mut pk, &mut uniques)?;
                    if !pk.is_empty() {
                        return Err(unsupported("adding a primary key is not supported"));
                    }
                    self.resolve_fks(&mut nt)?;
                    self.check_defaults(&nt)?;
                    self.add_unique_indexes(&mut nt, uniques)?;
                    // Validate existing rows against the new definition.
                    for ix in nt.indexes.iter().filter(|i| !t.indexes.iter().any(|o| o.id == i.id)) {
                        self.build_index(&nt, ix)?;
                    }
                    for (_, v) in self.kv.scan_prefix(&encoding::rows_prefix(t.id))? {
                        let row = encoding::decode_row(&v)?;
                        self.validate_row(&nt, &row)?;
                    }
                    catalog::put_table(&mut self.kv, &nt)?;
                    if !nt.foreign_keys.is_empty() && nt.foreign_keys.len() > t.foreign_keys.len() {
                        for (_, v) in self.kv.scan_prefix(&encoding::rows_prefix(t.id))? {
                            let row = encoding::decode_row(&v)?;
                            self.check_fk_child_pub(&nt, &row)?;
                        }
                    }
                }
                other => return Err(unsupported(format!("ALTER TABLE operation {other} is not supported"))),
            }
        }
        Ok(())
    }
}
