//! Column classifications of the meta group (spec 02), each change appended
//! to the audit trail in the same apply.
//!
//! Keys: `cls/<table>\0<column>` → [`ColumnClassification`].

use tessera_api::compliance::{AuditEvent, CLASSIFICATION_LEVELS, ClassifyOp, ColumnClassification};

use super::{ReadView, Tx};
use crate::error::Result;

const PREFIX: &[u8] = b"cls/";

fn table_prefix(table: &str) -> Vec<u8> {
    [PREFIX, table.as_bytes(), b"\0"].concat()
}

/// Sets each column's classification at `now`.
pub fn apply(tx: &mut Tx<'_>, now: i64, op: &ClassifyOp) -> Result<()> {
    let mut audited = Vec::with_capacity(op.columns.len());
    for c in &op.columns {
        let c = ColumnClassification { classified_at_ms: now, ..c.clone() };
        tx.put(&[table_prefix(&c.table).as_slice(), c.column.as_bytes()].concat(), &serde_json::to_vec(&c)?);
        audited.push(AuditEvent {
            event_type: "classification_set".into(),
            actor: c.classified_by.clone(),
            subject_id: None,
            details: serde_json::json!({
                "table": c.table, "column": c.column, "level": c.level,
                "classification": CLASSIFICATION_LEVELS.get(usize::from(c.level)), "reason": c.reason,
            }),
        });
    }
    super::audit::append(tx, now, audited)?;
    Ok(())
}

/// The classifications of `table`, or of every table, by table and column.
pub fn list(view: &ReadView<'_>, table: Option<&str>) -> Result<Vec<ColumnClassification>> {
    let prefix = match table {
        Some(t) => table_prefix(t),
        None => PREFIX.to_vec(),
    };
    let mut out = Vec::new();
    view.scan_prefix(&prefix, |_, v| {
        out.push(serde_json::from_slice(v)?);
        Ok(true)
    })?;
    Ok(out)
}
