//! Views: `CREATE [OR REPLACE] VIEW name [(columns)] AS query`, `DROP VIEW`, and
//! their expansion in FROM (the stored query runs as a derived table).
use crate::catalog::{self, ViewDef};
use crate::error::{ErrorCode, Result, SqlError, parse, unsupported};
use crate::exec::{Exec, RowSet, ident, object_name};
use sqlparser::ast::{self, Statement};

/// Views may use views, this deep at most (a cycle made by replacing a view
/// stops here instead of recursing forever).
const MAX_VIEW_DEPTH: u32 = 32;

impl Exec<'_> {
    /// Creates (or replaces) a view after running its query once, which checks
    /// it and gives its column names.
    pub(crate) fn create_view(
        &mut self,
        name: &ast::ObjectName,
        columns: &[ast::ViewColumnDef],
        query: &ast::Query,
        or_replace: bool,
        if_not_exists: bool,
    ) -> Result<()> {
        let name = object_name(name);
        if catalog::get_table(&self.kv, &name)?.is_some() {
            return Err(SqlError::new(ErrorCode::TableExists, format!("relation \"{name}\" already exists")));
        }
        if catalog::get_view(&self.kv, &name)?.is_some() && !or_replace {
            if if_not_exists {
                return Ok(());
            }
            return Err(SqlError::new(ErrorCode::TableExists, format!("relation \"{name}\" already exists")));
        }
        let rs = self.run_query(query, None)?;
        let mut cols = rs.cols;
        if columns.len() > cols.len() {
            return Err(parse("CREATE VIEW specifies more column names than columns"));
        }
        for (i, c) in columns.iter().enumerate() {
            cols[i] = ident(&c.name);
        }
        catalog::put_view(&mut self.kv, &ViewDef { name, query: query.to_string(), columns: cols })
    }

    /// Drops views (`IF EXISTS`: missing ones are skipped).
    pub(crate) fn drop_views(&mut self, names: &[ast::ObjectName], if_exists: bool) -> Result<()> {
        for n in names {
            let name = object_name(n);
            if catalog::get_view(&self.kv, &name)?.is_none() {
                if if_exists {
                    continue;
                }
                return Err(crate::error::table_not_found(format!("view \"{name}\" does not exist")));
            }
            self.kv.delete(catalog::view_key(&name));
        }
        Ok(())
    }

    /// The rows of view `name`, if there is such a view.
    pub(crate) fn expand_view(&self, name: &str) -> Result<Option<RowSet>> {
        let Some(view) = catalog::get_view(&self.kv, name)? else { return Ok(None) };
        let depth = self.view_depth.get();
        if depth >= MAX_VIEW_DEPTH {
            return Err(unsupported(format!("view \"{name}\" nests views more than {MAX_VIEW_DEPTH} deep (a cycle?)")));
        }
        let stmts = crate::parser::parse_shared(&view.query)?;
        let [Statement::Query(q)] = stmts.as_slice() else {
            return Err(crate::error::internal(format!("view \"{name}\" holds no query")));
        };
        self.view_depth.set(depth + 1);
        let rs = self.run_query(q, None);
        self.view_depth.set(depth);
        let mut rs = rs?;
        for (i, c) in view.columns.iter().enumerate() {
            if i < rs.cols.len() {
                rs.cols[i] = c.clone();
            }
        }
        Ok(Some(rs))
    }
}
