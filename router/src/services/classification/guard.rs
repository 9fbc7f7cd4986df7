//! Spec 02's `data_classification`: what column classifications enforce on
//! SQL reads through this router when `data_classification.enabled`.
//!
//! A result column is classified when it is named as a classified column of a
//! table the statement names (`classify` records `table.column` with a level;
//! the statement's identifiers are compared case-insensitively, a
//! `database.table` classification by its table). For columns of level 3
//! (PHI) and above:
//! * without the elevated permission `access:classified` (admins hold it;
//!   custom roles may grant it), level 3 and 4 values are masked (`"***"`)
//!   and a statement showing a level-5 (Restricted) column is refused with
//!   403, when `enforce_access_control` (default on);
//! * every such read is appended to the audit trail (`classified_access`:
//!   who, when, which columns, masked or not) when `audit_classified_access`
//!   (default on);
//! * more than `unusual_access_per_minute` (100) such reads by one user in a
//!   minute raise `unusual_access_pattern`, a security event.
//!
//! Level 5 columns are encrypted at rest: classifying one is refused unless
//! every node encrypts its store at rest (see `handlers::compliance::classify`).

use std::collections::HashSet;

use serde_json::{Value, json};
use tessera_api::command::MetaOp;
use tessera_api::compliance::{AuditEvent, ColumnClassification};

use crate::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// The permission that lifts masking and the refusal of level-5 columns.
pub const ELEVATED: &str = "access:classified";
/// The classifications, as this router caches them.
async fn classifications(state: &AppState) -> Result<Vec<ColumnClassification>, ApiError> {
    state.classification.current(&*state.cluster).await
}

/// The lower-case identifiers of a statement.
fn identifiers(sql: &str) -> HashSet<String> {
    sql.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_ascii_lowercase).collect()
}

/// For each result column: the classification of level 3 or above it shows, if any.
pub fn classified_columns<'c>(
    sql: &str,
    columns: &[String],
    classified: &'c [ColumnClassification],
) -> Vec<Option<&'c ColumnClassification>> {
    let words = identifiers(sql);
    columns
        .iter()
        .map(|name| {
            classified
                .iter()
                .filter(|c| c.level >= 3 && c.column.eq_ignore_ascii_case(name))
                .filter(|c| words.contains(&c.table.rsplit('.').next().unwrap_or(&c.table).to_ascii_lowercase()))
                .max_by_key(|c| c.level)
        })
        .collect()
}

/// The classified columns (level 3 and above) of tables `sql` names whose
/// column name it mentions too: read under another name or in an expression
/// (`ssn AS x`, `diagnosis || ''`) as much as by their own.
pub fn mentioned<'c>(sql: &str, classified: &'c [ColumnClassification]) -> Vec<&'c ColumnClassification> {
    let words = identifiers(sql);
    classified
        .iter()
        .filter(|c| c.level >= 3)
        .filter(|c| words.contains(&c.table.rsplit('.').next().unwrap_or(&c.table).to_ascii_lowercase()))
        .filter(|c| words.contains(&c.column.to_ascii_lowercase()))
        .collect()
}

/// The columns of the tables of `mentioned` (for telling a plain column from
/// a renamed or computed one).
async fn table_columns(state: &AppState, database: &str, mentioned: &[&ColumnClassification]) -> Result<HashSet<String>, ApiError> {
    use crate::cluster::typed::{self, Sql};
    let mut out = HashSet::new();
    let mut tables: Vec<&str> = mentioned.iter().map(|c| c.table.rsplit('.').next().unwrap_or(&c.table)).collect();
    tables.sort_unstable();
    tables.dedup();
    let group = state.cluster.group_for(&tessera_api::routing::RoutingKey::SqlDatabase(database))?;
    for table in tables {
        let q = tessera_api::sql::SqlQuery::DescribeTable { database: database.into(), name: table.into() };
        // A table that does not exist (here) has no plain columns.
        let Ok(served) = typed::read::<Sql>(&*state.cluster, group, q, tessera_api::rpc::Consistency::Quorum, None).await else { continue };
        if let tessera_api::sql::SqlResult::Catalog(schema) = served.value {
            out.extend(schema["columns"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_ascii_lowercase)));
        }
    }
    Ok(out)
}

/// Applies the classifications to a SQL result about to be answered: masks
/// or refuses, audits, counts. Answers the masked column names.
pub async fn guard_rows(
    state: &AppState,
    caller: &Caller,
    database: &str,
    sql: &str,
    columns: &[String],
    rows: &mut [Vec<Value>],
) -> Result<Vec<String>, ApiError> {
    let section = &state.config.data_classification;
    if !section.enabled || !state.config.compliance.enabled {
        return Ok(Vec::new());
    }
    let classified = classifications(state).await?;
    let shown = classified_columns(sql, columns, &classified);
    let mut hits: Vec<(usize, &ColumnClassification)> = shown.iter().enumerate().filter_map(|(i, c)| c.map(|c| (i, c))).collect();
    let named = mentioned(sql, &classified);
    if hits.is_empty() && named.is_empty() {
        return Ok(Vec::new());
    }
    let elevated = caller.has(ELEVATED);
    let enforce = section.enforce_access_control && !elevated;
    // A classified column the statement names but no result column shows by
    // name may be in any other result column (renamed or computed): those
    // that are not plain unclassified columns of its table count as it.
    let unshown: Vec<&ColumnClassification> =
        named.iter().copied().filter(|n| !hits.iter().any(|(_, h)| h.table == n.table && h.column == n.column)).collect();
    if let Some(strongest) = unshown.iter().max_by_key(|c| c.level) {
        let plain = table_columns(state, database, &unshown).await?;
        for (i, name) in columns.iter().enumerate() {
            let lower = name.to_ascii_lowercase();
            let classified_name = classified.iter().any(|c| c.level >= 3 && c.column.eq_ignore_ascii_case(name));
            if shown[i].is_none() && (!plain.contains(&lower) || classified_name) {
                hits.push((i, strongest));
            }
        }
    }
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let (user, _) = crate::services::security::identity(caller);
    let mut names: Vec<String> = hits.iter().map(|(_, c)| format!("{}.{}", c.table, c.column)).collect();
    names.sort();
    names.dedup();
    if enforce && let Some((_, c)) = hits.iter().find(|(_, c)| c.level >= 5) {
        audit(state, section.audit_classified_access, user.as_deref(), &names, "refused").await;
        watch_unusual_access(state, caller, user.as_deref(), section.unusual_access_per_minute);
        return Err(ApiError::Forbidden(format!(
            "{}.{} is classified Restricted (level 5): reading it needs the {ELEVATED} permission",
            c.table, c.column
        )));
    }
    let mut masked = Vec::new();
    if enforce {
        for (i, _) in &hits {
            for row in rows.iter_mut() {
                if let Some(v) = row.get_mut(*i)
                    && !v.is_null()
                {
                    *v = json!("***");
                }
            }
            masked.push(columns[*i].clone());
        }
    }
    audit(state, section.audit_classified_access, user.as_deref(), &names, if masked.is_empty() { "read" } else { "masked" }).await;
    watch_unusual_access(state, caller, user.as_deref(), section.unusual_access_per_minute);
    Ok(masked)
}

async fn audit(state: &AppState, on: bool, user: Option<&str>, columns: &[String], outcome: &str) {
    if !on {
        return;
    }
    let event = AuditEvent {
        event_type: "classified_access".into(),
        actor: user.unwrap_or("anonymous").to_string(),
        subject_id: None,
        details: json!({"columns": columns, "outcome": outcome}),
    };
    if let Err(e) = state.cluster.meta_write(MetaOp::Audit(vec![event])).await {
        tracing::warn!("a classified read was not audited: {e}");
    }
}

/// Counts a user's classified reads per minute; above `limit`, raises
/// `unusual_access_pattern` (at most once a minute per user).
fn watch_unusual_access(state: &AppState, caller: &Caller, user: Option<&str>, limit: u64) {
    if limit == 0 {
        return;
    }
    let minute = tessera_api::command::now_ms() / 60_000;
    let who = user.unwrap_or("anonymous").to_string();
    let count = state.classification.count_read(&who, minute);
    if count == limit + 1 {
        crate::services::security::raise_unusual_access(
            state,
            caller,
            &format!("{who} read classified columns {count} times within a minute (threshold {limit})"),
        );
    }
}

/// `sql` with its literals replaced by `?` (for logs when `mask_phi_in_logs`).
pub fn mask_literals(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut prev_ident = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            // A string literal ('' escapes a quote).
            loop {
                match chars.next() {
                    Some('\'') if chars.peek() == Some(&'\'') => {
                        chars.next();
                    }
                    Some('\'') | None => break,
                    Some(_) => {}
                }
            }
            out.push('?');
            prev_ident = false;
        } else if c.is_ascii_digit() && !prev_ident {
            while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.') {
                chars.next();
            }
            out.push('?');
        } else {
            prev_ident = c.is_alphanumeric() || c == '_';
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(table: &str, column: &str, level: u8) -> ColumnClassification {
        ColumnClassification {
            table: table.into(),
            column: column.into(),
            level,
            reason: None,
            classified_by: "t".into(),
            classified_at_ms: 0,
        }
    }

    #[test]
    fn result_columns_of_named_tables_are_classified_and_others_are_not() {
        let classified = vec![col("patients", "diagnosis", 3), col("patients", "ssn", 5), col("staff", "salary", 2)];
        let columns: Vec<String> = ["id", "diagnosis", "ssn", "salary"].iter().map(|s| s.to_string()).collect();
        let shown = classified_columns("SELECT * FROM Patients p JOIN staff s ON p.id = s.id", &columns, &classified);
        let levels: Vec<Option<u8>> = shown.iter().map(|c| c.map(|c| c.level)).collect();
        assert_eq!(levels, vec![None, Some(3), Some(5), None], "level 2 is not enforced");
        let other = classified_columns("SELECT diagnosis FROM visits", &columns[1..2], &classified);
        assert_eq!(other, vec![None], "another table's column of the same name");
    }

    #[test]
    fn literals_are_masked_and_identifiers_kept() {
        assert_eq!(mask_literals("SELECT * FROM t2 WHERE ssn = '123-45-6789' AND age > 42"), "SELECT * FROM t2 WHERE ssn = ? AND age > ?");
        assert_eq!(mask_literals("INSERT INTO p VALUES ('O''Brien', 3.5)"), "INSERT INTO p VALUES (?, ?)");
    }
}
