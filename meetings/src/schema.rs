//! The application's tables, created at start (idempotent: every statement is
//! `CREATE TABLE IF NOT EXISTS`, `CREATE INDEX IF NOT EXISTS` or `ALTER TABLE
//! … ADD COLUMN IF NOT EXISTS`, which upgrades a table made by an earlier
//! version); each service owns its own.

use crate::db::{Db, DbError};

/// Creates every service's tables that do not exist yet.
pub async fn ensure(db: &Db) -> Result<(), DbError> {
    let all = [
        crate::auth::SCHEMA,
        crate::meetings::SCHEMA,
        // After `meetings`: it adds columns to that table.
        crate::summary::SCHEMA,
        crate::webhooks::SCHEMA,
        crate::orgs::SCHEMA,
        crate::mail::SCHEMA,
        crate::privacy::SCHEMA,
        crate::rate_limit::SCHEMA,
        crate::search::SCHEMA,
    ];
    for statement in all.iter().flat_map(|s| s.iter()) {
        db.sql(statement, &[]).await?;
    }
    Ok(())
}
